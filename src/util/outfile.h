/* Output files written whole or not at all: a regular file (or a new one) is
 * written to a new temporary file beside it, synced and renamed over it, so a
 * reader never sees half of it and a failed write leaves the old one. A name
 * that stands for something else (/dev/null, a terminal, a pipe) is written
 * into as it is: renaming over a device would replace the device. So is a
 * name of one of the process's own descriptors (/dev/stdout, /dev/fd/N,
 * /proc/self/fd/N), through that descriptor, where it stands. A block device
 * is refused (ENOTSUP): no report or policy belongs on a disk. */
#ifndef UMPOL_UTIL_OUTFILE_H
#define UMPOL_UTIL_OUTFILE_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>

struct outfile {
    FILE *f;
    char tmp[4200]; /* the temporary beside the name; empty when written into directly */
    /* Written into directly: SIGPIPE blocked in this thread meanwhile, so a
     * reader that goes away is an error (EPIPE), not the end of the job. */
    sigset_t old_mask;
    bool sigpipe_pending_before;
};

/* Would outfile_open take PATH? 0, or -errno why not; nothing is opened (a
 * pipe's reader would see its end). For refusing an output before hours of
 * work rather than after. */
int outfile_check(const char *path);

/* Open PATH for writing into OF->f: 0, or -errno (nothing made). */
int outfile_open(struct outfile *of, const char *path);

/* Flush and close OF, then put it in place at PATH: 0, or -errno (the
 * temporary removed, whatever was at PATH left as it was). */
int outfile_close(struct outfile *of, const char *path);

#endif
