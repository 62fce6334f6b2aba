/* What a match expression says about every allocation, read off the syntax tree
 * alone: the checker uses it to find shadowed classes, the compiler to skip
 * evaluating catch-alls. */
#ifndef UMPOL_EXPR_H
#define UMPOL_EXPR_H

#include <stdbool.h>

#include "ast.h"

/* True when E matches every allocation, whatever its context. */
bool expr_always(const struct expr *e);
/* True when E matches no allocation at all. */
bool expr_never(const struct expr *e);

#endif
