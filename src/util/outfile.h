/* Output files written whole or not at all: a regular file (or a new one) is
 * written to a new temporary file beside it, synced and renamed over it, so a
 * reader never sees half of it and a failed write leaves the old one. A name
 * that stands for something else (/dev/null, a terminal, a pipe) is written
 * into as it is: renaming over a device would replace the device. A block
 * device is refused (ENOTSUP): no report or policy belongs on a disk. */
#ifndef UMPOL_UTIL_OUTFILE_H
#define UMPOL_UTIL_OUTFILE_H

#include <stdio.h>

struct outfile {
    FILE *f;
    char tmp[4200]; /* the temporary beside the name; empty when written into directly */
};

/* Open PATH for writing into OF->f: 0, or -errno (nothing made). */
int outfile_open(struct outfile *of, const char *path);

/* Flush and close OF, then put it in place at PATH: 0, or -errno (the
 * temporary removed, whatever was at PATH left as it was). */
int outfile_close(struct outfile *of, const char *path);

#endif
