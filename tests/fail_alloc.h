/* Allocation failures on demand, for a test linked with
 * -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup: every call
 * of those four in the objects linked (the library's, from its static
 * archive) goes through tests/fail_alloc.c, which fails the
 * FAIL_ALLOC_AT-th of them. (A call inside the C library, as strdup's own
 * malloc, is not wrapped: hence strdup itself.) */
#ifndef UMPOL_TESTS_FAIL_ALLOC_H
#define UMPOL_TESTS_FAIL_ALLOC_H

#include <stddef.h>

/* The call that fails, counted from 0 in FAIL_ALLOC_CALLS; -1: none (the
 * count stands still). Set both before the code under test runs. */
extern long fail_alloc_at, fail_alloc_calls;

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_strdup(const char *s);

/* SWEEP (which fails a load's allocations in turn and returns how many there
 * were) on every .umpol file in DIR, a folder under $top_srcdir: the files
 * swept (-1: DIR cannot be read), their allocations added to *POINTS. */
int fail_alloc_each_policy(const char *dir, long (*sweep)(const char *path), long *points);

#endif
