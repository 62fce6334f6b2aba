/* Runtime messages: `umpol: ` prefix, straight to stderr with write(2), no
 * stdio and no allocation, so it is safe inside the job's CUDA calls. */
#ifndef UMPOL_LOG_H
#define UMPOL_LOG_H

enum log_level { LOG_ERROR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 };

extern int log_threshold; /* UMPOL_LOG, default LOG_WARN */

void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define LOG(level, ...)                                                                           \
    do {                                                                                          \
        if ((level) <= log_threshold)                                                             \
            log_msg((level), __VA_ARGS__);                                                        \
    } while (0)

#endif
