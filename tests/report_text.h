/* The runtime's report as text, for the unit tests: include after cmocka.h
 * (its asserts). */
#ifndef UMPOL_TESTS_REPORT_TEXT_H
#define UMPOL_TESTS_REPORT_TEXT_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "runtime/report.h"

/* RT's report (report_write) in BUF of SIZE bytes, NUL-terminated. */
static inline void report_text(const struct runtime *rt, char *buf, size_t size)
{
    char path[] = "/tmp/umpol-test-report-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(report_write(rt, path), 0);
    FILE *in = fopen(path, "r");
    assert_non_null(in);
    buf[fread(buf, 1, size - 1, in)] = '\0';
    fclose(in);
    unlink(path);
}

#endif
