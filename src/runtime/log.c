#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

int log_threshold = LOG_WARN;

void log_msg(enum log_level level, const char *fmt, ...)
{
    static const char *const prefix[] = {"umpol: error: ", "umpol: warning: ", "umpol: ",
                                         "umpol: debug: "};
    char buf[1024];
    int n = snprintf(buf, sizeof buf, "%s", prefix[level]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (m < 0)
        m = 0;
    size_t len = (size_t)n + (size_t)m;
    if (len > sizeof buf - 2)
        len = sizeof buf - 2;
    buf[len++] = '\n';
    for (size_t off = 0; off < len;) {
        ssize_t w = write(STDERR_FILENO, buf + off, len - off);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
}
