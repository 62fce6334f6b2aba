/* The front end in one call: read, parse, check and compile a policy. The CLI
 * and the preloaded runtime both go through here, so they cannot disagree. */
#ifndef UMPOL_POLICY_H
#define UMPOL_POLICY_H

#include "check.h"
#include "diag.h"
#include "program.h"
#include "source.h"

/* Outcome of loading, also the exit status of `umpol check`. */
enum policy_status { POLICY_VALID = 0, POLICY_INVALID = 1, POLICY_IO_ERROR = 2 };

struct policy {
    struct source src;
    struct diag_list diags;
    struct program *program; /* NULL unless POLICY_VALID */
};

enum policy_status policy_load_file(struct policy *pol, const char *path);
/* Also checks the places the policy names against MACHINE (`check --topology`). */
enum policy_status policy_load_file_on(struct policy *pol, const char *path,
                                       const struct policy_machine *machine);
enum policy_status policy_load_text(struct policy *pol, const char *name, const char *text,
                                    size_t len);
void policy_free(struct policy *pol);

#endif
