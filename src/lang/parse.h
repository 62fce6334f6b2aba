/* Glue between the flex scanner, the bison parser and the AST. */
#ifndef UMPOL_PARSE_H
#define UMPOL_PARSE_H

#include <stdbool.h>

#include "ast.h"
#include "diag.h"

/* Reading stops after this many errors: later ones are mostly echoes. */
#define PARSE_MAX_ERRORS 20
/* Deeper nesting is refused before it can exhaust any stack. */
#define PARSE_MAX_DEPTH 64
/* and/or/not operators in one match expression. */
#define PARSE_MAX_EXPR_OPS 1000

struct parse_state {
    const struct source *src;
    struct policy_ast *ast;
    struct diag_list *diags;
    struct class_decl *current_class;
    int paren_depth;
    bool depth_reported;
    bool stopped; /* error cap reached */
    char last_ident[64];
    size_t expr_ops; /* operators in the match expression being read */
};

/* Parse SRC into AST; diagnostics go to DIAGS. Returns the number of errors. */
size_t policy_parse(const struct source *src, struct policy_ast *ast, struct diag_list *diags);

#endif
