/* Semantic checks on a parsed policy: what cannot be right is an error,
 * what is suspicious a warning. Pure: no GPU, no files, no environment. */
#ifndef UMPOL_CHECK_H
#define UMPOL_CHECK_H

#include "ast.h"
#include "diag.h"

/* Returns the number of errors added to DIAGS. */
size_t policy_check(const struct policy_ast *ast, struct diag_list *diags);

/* True when E matches every allocation, whatever its context. */
bool expr_always(const struct expr *e);

#define POLICY_MAX_CLASSES 65536
#define POLICY_MAX_PRIORITY 1000

#endif
