/* Observer. The JSON report (see umpol(7)): a read-only view of the runtime. */
#ifndef UMPOL_RUNTIME_REPORT_H
#define UMPOL_RUNTIME_REPORT_H

#include <stddef.h>

struct runtime;

/* 0, or -errno when it could not be written. */
int report_write(const struct runtime *rt, const char *path);
/* Write the allocation trace (UMPOL_TRACE) the same way: 0, or -errno. */
int report_write_trace(const struct runtime *rt, const char *path);
/* Expand %p (pid) and %r (rank) in a report path. */
void report_expand_path(const char *pattern, char *out, size_t len);

#endif
