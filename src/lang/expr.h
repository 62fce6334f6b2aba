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
/* Do A and B say the same, written the same way? */
bool expr_equal(const struct expr *a, const struct expr *b);
/* True when `saved` appears anywhere in E. */
bool expr_mentions_saved(const struct expr *e);
/* The first `saved` in E outside an odd number of `not`s, or NULL: a block
 * reported saved for backward may come to match E then (and move in). */
const struct expr *expr_uses_saved(const struct expr *e);

/* The first node of KIND in E, or NULL. */
const struct expr *expr_find(const struct expr *e, enum expr_kind kind);

#endif
