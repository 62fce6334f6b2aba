/* Glue between the flex scanner, the bison parser and the AST. */
#ifndef UMPOL_PARSE_H
#define UMPOL_PARSE_H

#include <stdbool.h>

#include "ast.h"
#include "diag.h"

/* Reading stops after this many errors: later ones are mostly echoes. */
#define PARSE_MAX_ERRORS DIAG_MAX_ERRORS
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
    char last_ident[64];
    size_t expr_ops; /* operators in the match expression being read */
    /* The token before the one being read, so that a missing ';' can be
     * reported right after it; token_text is the latest token's text. */
    struct loc prev_loc;
    char prev_text[48], token_text[48];
    bool semi_missing, open_missing; /* reported; the grammar goes on without it */
    bool no_memory;                  /* an action's allocation failed (parser.y's NO_MEMORY) */
    /* A token the parser lacks (a class's '}'), returned before the one it got. */
    int inject_token, replay_token;
    struct loc replay_loc;
    int closed_early; /* classes closed that way: their own '}' may still come */
    /* Doc comments: the run of whole-line comments being read (lines
     * doc_first..doc_last, 0: none), the lines of the latest two tokens, and
     * the run directly above the latest `class` keyword, for its class. */
    int doc_first, doc_last, token_line, prev_token_line;
    int class_doc_first, class_doc_last;
};

/* Parse SRC into AST; diagnostics go to DIAGS. Returns the number of errors. */
size_t policy_parse(const struct source *src, struct policy_ast *ast, struct diag_list *diags);

#endif
