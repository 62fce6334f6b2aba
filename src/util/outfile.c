#include "util/outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
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
 * nobody reads is an error (ENXIO), not a writer stuck at exit. */
static FILE *open_in_place(const char *path)
{
    int fd = open(path, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    int flags = fcntl(fd, F_GETFL);
    FILE *f = flags >= 0 && fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        int err = errno;
        close(fd);
        errno = err;
    }
    return f;
}

int outfile_open(struct outfile *of, const char *path)
{
    struct stat st;
    bool exists = stat(path, &st) == 0;
    of->tmp[0] = '\0';
    of->f = NULL;
    if (exists && S_ISBLK(st.st_mode))
        errno = ENOTSUP;
    else if (exists && !S_ISREG(st.st_mode))
        of->f = open_in_place(path);
    else
        of->f = create_temporary(path, of->tmp, sizeof of->tmp);
    return of->f ? 0 : -errno;
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
    if (!err && !in_place && rename(of->tmp, path) != 0)
        err = errno;
    if (err && !in_place)
        unlink(of->tmp);
    return -err;
}
