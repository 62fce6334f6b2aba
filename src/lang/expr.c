#include "expr.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

bool expr_always(const struct expr *e)
{
    switch (e->kind) {
    case EXPR_ANY: return true;
    case EXPR_SIZE:
    case EXPR_NTH: return e->lo == 0 && e->hi == UINT64_MAX;
    case EXPR_AND: return expr_always(e->left) && expr_always(e->right);
    case EXPR_OR: return expr_always(e->left) || expr_always(e->right);
    case EXPR_NOT: return expr_never(e->left);
    default: return false;
    }
}

static const struct expr *uses_saved(const struct expr *e, bool negated)
{
    switch (e->kind) {
    case EXPR_SAVED: return negated ? NULL : e;
    case EXPR_AND:
    case EXPR_OR: {
        const struct expr *l = uses_saved(e->left, negated);
        return l ? l : uses_saved(e->right, negated);
    }
    case EXPR_NOT: return uses_saved(e->left, !negated);
    default: return NULL;
    }
}

bool expr_equal(const struct expr *a, const struct expr *b)
{
    if (!a || !b)
        return a == b;
    if (a->kind != b->kind || a->lo != b->lo || a->hi != b->hi)
        return false;
    if ((a->text || b->text) && (!a->text || !b->text || strcmp(a->text, b->text) != 0))
        return false;
    return expr_equal(a->left, b->left) && expr_equal(a->right, b->right);
}

bool expr_mentions_saved(const struct expr *e)
{
    return uses_saved(e, false) || uses_saved(e, true);
}

const struct expr *expr_uses_saved(const struct expr *e)
{
    return uses_saved(e, false);
}

const struct expr *expr_find(const struct expr *e, enum expr_kind kind)
{
    if (!e || e->kind == kind)
        return e;
    const struct expr *l = expr_find(e->left, kind);
    return l ? l : expr_find(e->right, kind);
}

bool expr_never(const struct expr *e)
{
    switch (e->kind) {
    case EXPR_SIZE:
    case EXPR_NTH: return e->lo > e->hi;
    case EXPR_AND: return expr_never(e->left) || expr_never(e->right);
    case EXPR_OR: return expr_never(e->left) && expr_never(e->right);
    case EXPR_NOT: return expr_always(e->left);
    default: return false;
    }
}
