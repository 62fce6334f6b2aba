#include "expr.h"

#include <stdint.h>

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
