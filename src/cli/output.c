/* Write errors on stdout are errors: `umpol report --json > full-disk/x`
 * must not exit 0 with half a document written. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

int cli_finish_stdout(const char *command, int rc)
{
    errno = 0;
    bool flushed = fflush(stdout) == 0;
    int err = errno;
    if (flushed && !ferror(stdout)) return rc;
    fprintf(stderr, "umpol %s: cannot write the output: %s\n", command,
            !flushed && err ? strerror(err) : "write error");
    clearerr(stdout); /* said once: a later check (main's) finds nothing new */
    return EXIT_USAGE;
}
