#include "util/outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"

/* A new file beside PATH, opened for writing; its name in TMP. Never an
 * existing file or a symlink planted at the name (O_EXCL, O_NOFOLLOW): in a
 * shared directory, nobody can make the writer overwrite a file of theirs. */
static FILE *create_temporary(const char *path, char *tmp, size_t len)
{
    unsigned long salt = (unsigned long)now_ns();
    for (int attempt = 0; attempt < 100; attempt++) {
        /* First PATH.tmp.PID; when taken, a name nobody could have guessed. */
        salt = salt * 6364136223846793005ul + 1442695040888963407ul;
        int n = attempt == 0 ? snprintf(tmp, len, "%s.tmp.%ld", path, (long)getpid())
                             : snprintf(tmp, len, "%s.tmp.%ld.%08lx", path, (long)getpid(),
                                        (salt >> 32) & 0xfffffffful);
        if (n < 0 || (size_t)n >= len) {
            errno = ENAMETOOLONG;
            return NULL;
        }
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd < 0 && errno == EEXIST)
            continue;
        if (fd < 0)
            return NULL;
        FILE *f = fdopen(fd, "w");
        if (!f) {
            int err = errno;
            close(fd);
            unlink(tmp);
            errno = err;
        }
        return f;
    }
    errno = EEXIST;
    return NULL;
}

/* PATH itself, which is not a regular file. Opened without waiting: a pipe
 * nobody reads is an error (ENXIO), not a writer stuck at exit. A name that
 * has become a regular file since it was looked at is not written into. */
static int open_in_place(const char *path)
{
    int fd = open(path, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    bool regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    int flags = fcntl(fd, F_GETFL);
    if (regular || flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        int err = regular ? EAGAIN : errno; /* EAGAIN: look again */
        close(fd);
        errno = err;
        return -1;
    }
    return fd;
}

/* The descriptor that PATH names among the process's own (/dev/stdout,
 * /dev/stderr, /dev/fd/N, /proc/self/fd/N), or -1. */
static int own_descriptor(const char *path)
{
    if (strcmp(path, "/dev/stdout") == 0)
        return 1;
    if (strcmp(path, "/dev/stderr") == 0)
        return 2;
    const char *n = strncmp(path, "/dev/fd/", 8) == 0          ? path + 8
                    : strncmp(path, "/proc/self/fd/", 14) == 0 ? path + 14
                                                               : NULL;
    size_t digits = n ? strspn(n, "0123456789") : 0;
    if (!n || digits == 0 || digits > 6 || n[digits] != '\0')
        return -1;
    return atoi(n);
}

/* Into FD as it is, SIGPIPE blocked in this thread until outfile_close. */
static int write_in_place(struct outfile *of, int fd)
{
    sigset_t pipe_only, pending;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_only, &of->old_mask);
    of->sigpipe_pending_before = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
    of->f = fdopen(fd, "w");
    if (!of->f) {
        int err = errno;
        close(fd);
        pthread_sigmask(SIG_SETMASK, &of->old_mask, NULL);
        return -err;
    }
    return 0;
}

int outfile_check(const char *path)
{
    if (!*path)
        return -ENOENT;
    int own = own_descriptor(path);
    if (own >= 0) {
        int flags = fcntl(own, F_GETFL);
        return flags < 0 ? -errno : (flags & O_ACCMODE) == O_RDONLY ? -EBADF : 0;
    }
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return S_ISBLK(st.st_mode)   ? -ENOTSUP
               : S_ISDIR(st.st_mode) ? -EISDIR
               : access(path, W_OK) == 0 ? 0 : -errno;
    /* A regular or new file: a temporary made and renamed in its directory. */
    const char *slash = strrchr(path, '/');
    char dir[4096];
    int n = slash == path ? snprintf(dir, sizeof dir, "/")
            : slash       ? snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path)
                          : snprintf(dir, sizeof dir, ".");
    if (n < 0 || (size_t)n >= sizeof dir)
        return -ENAMETOOLONG;
    return access(dir, W_OK | X_OK) == 0 ? 0 : -errno;
}

int outfile_open(struct outfile *of, const char *path)
{
    struct stat st;
    of->tmp[0] = '\0';
    of->f = NULL;
    int own = own_descriptor(path);
    if (own >= 0) {
        int fd = fcntl(own, F_DUPFD_CLOEXEC, 3);
        return fd >= 0 ? write_in_place(of, fd) : -errno;
    }
    for (int look = 0; look < 3; look++) {
        bool exists = stat(path, &st) == 0;
        if (exists && S_ISBLK(st.st_mode))
            return -ENOTSUP;
        if (!exists || S_ISREG(st.st_mode)) {
            of->f = create_temporary(path, of->tmp, sizeof of->tmp);
            return of->f ? 0 : -errno;
        }
        int fd = open_in_place(path);
        if (fd >= 0)
            return write_in_place(of, fd);
        if (errno != EAGAIN)
            return -errno;
    }
    return -EAGAIN;
}

int outfile_close(struct outfile *of, const char *path)
{
    bool in_place = of->tmp[0] == '\0';
    errno = 0;
    int err = fflush(of->f) != 0 || ferror(of->f) ? (errno ? errno : EIO) : 0;
    /* A device or pipe has nothing to sync (fsync says EINVAL there). */
    if (!err && !in_place && fsync(fileno(of->f)) != 0)
        err = errno;
    if (fclose(of->f) != 0 && !err)
        err = errno;
    of->f = NULL;
    if (in_place) { /* a SIGPIPE of our own write is taken back; one that was there stays */
        sigset_t pipe_only, pending;
        sigemptyset(&pipe_only);
        sigaddset(&pipe_only, SIGPIPE);
        const struct timespec now = {0, 0};
        if (!of->sigpipe_pending_before && sigpending(&pending) == 0 &&
            sigismember(&pending, SIGPIPE) == 1)
            sigtimedwait(&pipe_only, NULL, &now);
        pthread_sigmask(SIG_SETMASK, &of->old_mask, NULL);
    }
    if (!err && !in_place && rename(of->tmp, path) != 0)
        err = errno;
    if (err && !in_place)
        unlink(of->tmp);
    return -err;
}
