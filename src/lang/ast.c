#include "ast.h"

#include <stdlib.h>
#include <string.h>

void ast_init(struct policy_ast *ast)
{
    memset(ast, 0, sizeof *ast);
    ast->globals_tail = &ast->globals;
    ast->classes_tail = &ast->classes;
}

struct expr *expr_new(enum expr_kind kind, struct loc loc)
{
    struct expr *e = calloc(1, sizeof *e);
    if (e) {
        e->kind = kind;
        e->loc = loc;
    }
    return e;
}

/* Iterative on the left spine so that long `a or b or c …` chains cannot
 * exhaust the C stack; nesting depth is bounded by the scanner. */
void expr_free(struct expr *e)
{
    while (e) {
        struct expr *next = e->left;
        expr_free(e->right);
        free(e->text);
        free(e);
        e = next;
    }
}

void directive_free(struct directive *d)
{
    while (d) {
        struct directive *next = d->next;
        expr_free(d->match);
        free(d->prefetch.pattern);
        free(d->written);
        free(d);
        d = next;
    }
}

void ast_free(struct policy_ast *ast)
{
    for (struct global_decl *g = ast->globals, *n; g; g = n) {
        n = g->next;
        free(g->pattern);
        free(g);
    }
    for (struct class_decl *c = ast->classes, *n; c; c = n) {
        n = c->next;
        directive_free(c->directives);
        free(c->name);
        free(c->doc);
        free(c);
    }
    ast_init(ast);
}

const char *memory_kind_name(enum memory_kind kind)
{
    switch (kind) {
    case MEMORY_DEVICE: return "device";
    case MEMORY_HOST: return "host";
    case MEMORY_MOVABLE: return "movable";
    case MEMORY_MANAGED: break;
    }
    return "managed";
}
