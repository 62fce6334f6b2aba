/* umpol policy grammar. Pure and reentrant; conflicts resolved by precedence (%expect 0). */
%code requires {
#include <stdint.h>
#include "lang/ast.h"
#include "lang/parse.h"
typedef void *yyscan_t;
#define YYLTYPE struct loc
#define YYLTYPE_IS_DECLARED 1
#define YYLTYPE_IS_TRIVIAL 1
struct range { uint64_t lo, hi; bool empty, negate; };
struct trigger { enum trigger_kind kind; char *pattern; struct loc loc; };
}

%code {
#include <stdlib.h>
#include <string.h>

/* An action's allocation failed: said as such by yyerror, which bison calls
 * with "memory exhausted" as for its own stack grown too deep. */
#define NO_MEMORY                                                                                  \
    do {                                                                                           \
        st->no_memory = true;                                                                      \
        YYNOMEM;                                                                                   \
    } while (0)

int yylex(YYSTYPE *lval, YYLTYPE *lloc, yyscan_t scanner);
static void yyerror(YYLTYPE *loc, yyscan_t scanner, struct parse_state *st, const char *msg);
static void add_directive(struct parse_state *st, struct directive *d);
static struct directive *directive_new(enum directive_kind kind, YYLTYPE loc);
static struct place place_make(struct parse_state *st, enum loc_kind kind, uint64_t index, YYLTYPE loc);
static struct expr *range_expr(enum expr_kind kind, struct range r, YYLTYPE loc);
static struct expr *text_expr(enum expr_kind kind, char *text, YYLTYPE loc, YYLTYPE text_loc);
static struct expr *binary_expr(enum expr_kind kind, struct expr *l, struct expr *r, YYLTYPE loc);
static struct range range_cmp(int op, uint64_t v);
static struct global_decl *add_global(struct parse_state *st, enum global_kind kind, struct amount a,
                                      YYLTYPE loc);
static int begin_class(struct parse_state *st, char *name, YYLTYPE name_loc, YYLTYPE loc,
                       bool recovered);
static void end_class(struct parse_state *st);
static void skipped_item(struct parse_state *st);
}

%define api.pure full
%define parse.error custom
%locations
%expect 0
%lex-param {yyscan_t scanner}
%parse-param {yyscan_t scanner} {struct parse_state *st}

%initial-action {
    @$ = (struct loc){1, 1, 1, 1};
}

%union {
    uint64_t num;
    char *str;
    struct expr *expr;
    struct place place;
    struct range range;
    struct amount amount;
    struct directive *dir;
    struct trigger trigger;
    int cmp;
}

%token UMPOL "umpol" BUDGET "budget" CAP "cap" SLAB "slab" CLASS "class"
%token MATCH "match" MEMORY "memory" ADVISE "advise" PLACE "place" ACCESS "access"
%token PREFETCH "prefetch" PRIORITY "priority" STREAM "stream" ON "on" ALLOC "alloc" ENTER "enter"
%token EXIT "exit" MARK "mark" GPU "gpu" HOST "host" NUMA "numa" NEAR "near" NONE "none"
%token MANAGED "managed" DEVICE "device" MOVABLE "movable" READ_MOSTLY "read_mostly"
%token SIZE_KW "size" PHASE "phase" TAG "tag" API "api" NTH "nth" ANY "any"
%token AND "and" OR "or" NOT "not" SPARE "spare" LEARN "learn" UPDATE "update"
%token SAVED "saved" /* the last keyword (is_keyword) */
%token DOTDOT ".." LE "<=" GE ">=" EQ "==" NE "!="
%token <num> NUMBER "number" SIZE "size value" PERCENT "percentage"
%token <str> STRING "string" IDENT "identifier"

%type <expr> expr predicate
%type <place> location opt_location
%type <range> range
%type <num> byte_count
%type <amount> amount
%type <dir> access_list
%type <trigger> trigger
%type <cmp> cmp

%destructor { free($$); } <str>
%destructor { expr_free($$); } <expr>
%destructor { directive_free($$); } <dir>
%destructor { free($$.pattern); } <trigger>

%left OR
%left AND
%precedence NOT

%%

policy:
      %empty
    | policy item
    ;

item:
      UMPOL NUMBER semi
        {
            if (!st->ast->saw_any_item)
                st->ast->first_item_is_version = true;
            add_global(st, GLOBAL_VERSION, (struct amount){false, $2, @2}, @$);
        }
    | BUDGET GPU amount semi    { add_global(st, GLOBAL_BUDGET, $3, @$); }
    | BUDGET IDENT amount semi
        {
            /* `budget card`: the card's own figure, what the process holds
             * outside umpol included. `card` is a word only here. */
            if (strcmp($2, "card") != 0) {
                static const char *const words[] = {"gpu", "card"};
                const char *near = diag_suggest($2, words, 2);
                diag_add(st->diags, DIAG_ERROR, E_UNKNOWN_KEYWORD, @2,
                         "unknown word '%s'%s%s%s: write 'budget gpu SIZE;' or 'budget card SIZE;'",
                         $2, near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "");
            } else {
                struct global_decl *g = add_global(st, GLOBAL_BUDGET, $3, @$);
                if (g)
                    g->card = true;
            }
            free($2);
        }
    | CAP MANAGED amount semi   { add_global(st, GLOBAL_CAP, $3, @$); }
    | SLAB byte_count semi      { add_global(st, GLOBAL_SLAB, (struct amount){false, $2, @2}, @$); }
    | LEARN IDENT semi
        {
            /* `learn step;`: the step is found in the job's own repetition. */
            if (strcmp($2, "step") != 0)
                diag_add(st->diags, DIAG_ERROR, E_UNKNOWN_KEYWORD, @2,
                         "unknown word '%s': write 'learn step;' or 'learn step \"PHASE-GLOB\";'",
                         $2);
            else
                add_global(st, GLOBAL_LEARN, (struct amount){false, 0, @2}, @$);
            free($2);
        }
    | LEARN IDENT STRING semi
        {
            /* `step` is a word only here, so it stays free for class names. */
            if (strcmp($2, "step") != 0) {
                diag_add(st->diags, DIAG_ERROR, E_UNKNOWN_KEYWORD, @2,
                         "unknown word '%s': write 'learn step \"PHASE-GLOB\";'", $2);
            } else {
                struct global_decl *g = add_global(st, GLOBAL_LEARN, (struct amount){false, 0, @3}, @$);
                if (g) {
                    g->pattern = $3;
                    g->pattern_loc = @3;
                    $3 = NULL;
                }
            }
            free($2);
            free($3);
        }
    | UPDATE IDENT IDENT semi
        {
            /* `update in backward;`: the words are words only here. */
            bool in = strcmp($2, "in") == 0;
            if (!in || strcmp($3, "backward") != 0)
                diag_add(st->diags, DIAG_ERROR, E_UNKNOWN_KEYWORD, in ? @3 : @2,
                         "unknown word '%s': write 'update in backward;'", in ? $3 : $2);
            else
                add_global(st, GLOBAL_UPDATE, (struct amount){false, 0, @3}, @$);
            free($2);
            free($3);
        }
    | class
    | error ';'                 { skipped_item(st); yyerrok; }
    | error '}'                 { skipped_item(st); yyerrok; }
    ;

/* A statement's ';'. When it is missing at the end of a line (or before '}'),
 * the error report says so and the statement is kept as if it were there. */
semi:
      ';'
    | error
        {
            if (st->semi_missing)
                yyerrok;
            st->semi_missing = false;
        }
    ;

amount:
      PERCENT      { $$ = (struct amount){true, $1, @1}; }
    | byte_count   { $$ = (struct amount){false, $1, @1}; }
    ;

byte_count:
      NUMBER
    | SIZE
    ;

class:
      CLASS IDENT open
        {
            /* The class owns the name now; error recovery must not free it. */
            char *name = $2;
            $2 = NULL;
            if (begin_class(st, name, @2, @1, false) != 0) NO_MEMORY;
        }
      body
    /* A class whose keyword is misspelt (`Class a {`) or whose name is not an
     * identifier: its body is still read, so its own mistakes are reported. */
    | error IDENT '{'
        {
            char *name = $2;
            $2 = NULL;
            if (begin_class(st, name, @2, @3, true) != 0) NO_MEMORY;
        }
      body
    | error '{'
        {
            if (begin_class(st, NULL, @2, @2, true) != 0) NO_MEMORY;
        }
      body
    ;

open:
      '{'
    | error
        {
            if (st->open_missing)
                yyerrok;
            st->open_missing = false;
        }
    ;

body:
      directives '}'          { end_class(st); }
    | directives error '}'    { st->current_class->had_error = true; end_class(st); yyerrok; }
    ;

directives:
      %empty
    | directives directive
    ;

directive:
      MATCH expr semi
        {
            struct directive *d = directive_new(DIR_MATCH, @1);
            if (!d) { expr_free($2); NO_MEMORY; }
            d->match = $2;
            /* Bounded size keeps every later walk of the tree shallow. */
            if (st->expr_ops > PARSE_MAX_EXPR_OPS) {
                diag_add(st->diags, DIAG_ERROR, E_TOO_MANY, @2,
                         "match expression has %zu operators; the limit is %d",
                         st->expr_ops, PARSE_MAX_EXPR_OPS);
                expr_free(d->match);
                d->match = NULL;
            }
            st->expr_ops = 0;
            d->value_loc = @2;
            add_directive(st, d);
        }
    | MEMORY MANAGED semi
        {
            struct directive *d = directive_new(DIR_MEMORY, @1);
            if (!d) NO_MEMORY;
            d->memory = MEMORY_MANAGED;
            d->value_loc = @2;
            add_directive(st, d);
        }
    | MEMORY DEVICE semi
        {
            struct directive *d = directive_new(DIR_MEMORY, @1);
            if (!d) NO_MEMORY;
            d->memory = MEMORY_DEVICE;
            d->value_loc = @2;
            add_directive(st, d);
        }
    | MEMORY MOVABLE semi
        {
            struct directive *d = directive_new(DIR_MEMORY, @1);
            if (!d) NO_MEMORY;
            d->memory = MEMORY_MOVABLE;
            d->value_loc = @2;
            add_directive(st, d);
        }
    | MEMORY HOST semi
        {
            struct directive *d = directive_new(DIR_MEMORY, @1);
            if (!d) NO_MEMORY;
            d->memory = MEMORY_HOST;
            d->value_loc = @2;
            add_directive(st, d);
        }
    | ADVISE READ_MOSTLY semi
        {
            struct directive *d = directive_new(DIR_ADVISE, @1);
            if (!d) NO_MEMORY;
            d->value_loc = @2;
            add_directive(st, d);
        }
    | PLACE location semi
        {
            struct directive *d = directive_new(DIR_PLACE, @1);
            if (!d) NO_MEMORY;
            d->place = $2;
            d->value_loc = @2;
            add_directive(st, d);
        }
    | ACCESS access_list semi
        {
            $2->loc = @1;
            add_directive(st, $2);
        }
    | PREFETCH opt_location ON trigger semi
        {
            struct directive *d = directive_new(DIR_PREFETCH, @1);
            if (!d) { free($4.pattern); NO_MEMORY; }
            d->prefetch.dest = $2;
            d->prefetch.trigger = $4.kind;
            d->prefetch.pattern = $4.pattern;
            d->prefetch.pattern_loc = $4.loc;
            d->prefetch.loc = @$;
            d->value_loc = @4;
            add_directive(st, d);
        }
    | PRIORITY NUMBER semi
        {
            struct directive *d = directive_new(DIR_PRIORITY, @1);
            if (!d) NO_MEMORY;
            d->priority = $2;
            d->value_loc = @2;
            add_directive(st, d);
        }
    | STREAM IDENT STRING semi
        {
            /* `stream written "GLOB";`: "written" is a word of this directive alone. */
            if (strcmp($2, "written") != 0) {
                diag_add(st->diags, DIAG_ERROR, E_UNKNOWN_KEYWORD, @2,
                         "unknown word '%s': write 'stream written \"PHASE-GLOB\";'", $2);
                free($2);
                free($3);
            } else {
                free($2);
                struct directive *d = directive_new(DIR_STREAM, @1);
                if (!d) { free($3); NO_MEMORY; }
                d->written = $3;
                d->value_loc = @3;
                add_directive(st, d);
            }
        }
    | error ';'   { st->current_class->had_error = true; yyerrok; }
    ;

access_list:
      location
        {
            $$ = directive_new(DIR_ACCESS, @1);
            if (!$$) NO_MEMORY;
            $$->access[0] = $1;
            $$->access_count = 1;
            $$->value_loc = @1;
        }
    | access_list ',' location
        {
            $$ = $1;
            if ($$->access_count <= MAX_ACCESS)
                $$->access[$$->access_count++] = $3;
            $$->value_loc.last_line = @3.last_line;
            $$->value_loc.last_column = @3.last_column;
        }
    ;

trigger:
      ALLOC          { $$ = (struct trigger){TRIGGER_ALLOC, NULL, @1}; }
    | ENTER STRING   { $$ = (struct trigger){TRIGGER_ENTER, $2, @2}; }
    | EXIT STRING    { $$ = (struct trigger){TRIGGER_EXIT, $2, @2}; }
    | MARK STRING    { $$ = (struct trigger){TRIGGER_MARK, $2, @2}; }
    ;

opt_location:
      %empty     { $$ = (struct place){LOC_UNSET, -1, @$}; }
    | location
    ;

location:
      GPU                { $$ = place_make(st, LOC_GPU, UINT64_MAX, @$); }
    | GPU NUMBER         { $$ = place_make(st, LOC_GPU, $2, @$); }
    | HOST               { $$ = place_make(st, LOC_HOST, UINT64_MAX, @$); }
    | HOST NUMA NUMBER   { $$ = place_make(st, LOC_HOST_NUMA, $3, @$); }
    | HOST NEAR          { $$ = place_make(st, LOC_HOST_NEAR, UINT64_MAX, @$); }
    | NONE               { $$ = place_make(st, LOC_NONE, UINT64_MAX, @$); }
    ;

expr:
      expr OR expr    { st->expr_ops++; $$ = binary_expr(EXPR_OR, $1, $3, @$); if (!$$) NO_MEMORY; }
    | expr AND expr   { st->expr_ops++; $$ = binary_expr(EXPR_AND, $1, $3, @$); if (!$$) NO_MEMORY; }
    | NOT expr        { st->expr_ops++; $$ = binary_expr(EXPR_NOT, $2, NULL, @$); if (!$$) NO_MEMORY; }
    | '(' expr ')'    { $$ = $2; $$->loc = @$; }
    | predicate
    ;

predicate:
      ANY             { $$ = expr_new(EXPR_ANY, @$); if (!$$) NO_MEMORY; }
    | SIZE_KW range   { $$ = range_expr(EXPR_SIZE, $2, @$); if (!$$) NO_MEMORY; }
    | NTH range       { $$ = range_expr(EXPR_NTH, $2, @$); if (!$$) NO_MEMORY; }
    | PHASE STRING    { $$ = text_expr(EXPR_PHASE, $2, @$, @2); if (!$$) NO_MEMORY; }
    | TAG STRING      { $$ = text_expr(EXPR_TAG, $2, @$, @2); if (!$$) NO_MEMORY; }
    | API IDENT       { $$ = text_expr(EXPR_API, $2, @$, @2); if (!$$) NO_MEMORY; }
    | SAVED           { $$ = expr_new(EXPR_SAVED, @$); if (!$$) NO_MEMORY; }
    | SPARE           { $$ = expr_new(EXPR_SPARE, @$); if (!$$) NO_MEMORY; }
    | DEVICE NUMBER
        {
            $$ = expr_new(EXPR_DEVICE, @$);
            if (!$$) NO_MEMORY;
            $$->lo = $$->hi = $2;
            $$->text_loc = @2;
        }
    ;

range:
      cmp byte_count                 { $$ = range_cmp($1, $2); }
    | byte_count DOTDOT byte_count   { $$ = (struct range){$1, $3, false, false}; }
    ;

cmp:
      '<'   { $$ = '<'; }
    | '>'   { $$ = '>'; }
    | LE    { $$ = 'l'; }
    | GE    { $$ = 'g'; }
    | EQ    { $$ = '='; }
    | NE    { $$ = '!'; }
    ;

%%

static struct directive *directive_new(enum directive_kind kind, YYLTYPE loc)
{
    struct directive *d = calloc(1, sizeof *d);
    if (d) {
        d->kind = kind;
        d->loc = loc;
    }
    return d;
}

/* Directives are attached as they are parsed, so error recovery cannot leak them. */
static void add_directive(struct parse_state *st, struct directive *d)
{
    struct class_decl *c = st->current_class;
    *c->tail = d;
    c->tail = &d->next;
}

/* The doc comment found above the `class` keyword (lexer.l), as text: each
 * line without its indentation, its '#' and one space after it; NULL when
 * there is none. Returns -1 when out of memory. */
static int class_doc_text(struct parse_state *st, char **out)
{
    int first = st->class_doc_first, last = st->class_doc_last;
    st->class_doc_first = st->class_doc_last = 0;
    *out = NULL;
    if (!first)
        return 0;
    size_t room = 1, len;
    for (int l = first; l <= last; l++) {
        source_line(st->src, l, &len);
        room += len + 1;
    }
    char *doc = malloc(room), *o = doc;
    if (!doc)
        return -1;
    for (int l = first; l <= last; l++) {
        const char *line = source_line(st->src, l, &len), *end = line + len;
        while (line < end && (*line == ' ' || *line == '\t'))
            line++;
        line += line < end && *line == '#';
        line += line < end && *line == ' ';
        while (end > line && (end[-1] == '\r' || end[-1] == ' ' || end[-1] == '\t'))
            end--;
        if (l > first)
            *o++ = '\n';
        memcpy(o, line, (size_t)(end - line));
        o += end - line;
    }
    *o = '\0';
    *out = doc;
    return 0;
}

static int begin_class(struct parse_state *st, char *name, YYLTYPE name_loc, YYLTYPE loc,
                       bool recovered)
{
    char *doc = NULL;
    struct class_decl *c = calloc(1, sizeof *c);
    if (!c || class_doc_text(st, &doc) != 0) {
        free(c);
        free(name);
        return -1;
    }
    if (recovered) { /* read after a syntax error: the comment above may not be its own */
        free(doc);
        doc = NULL;
    }
    c->doc = doc;
    c->name = name;
    c->name_loc = name_loc;
    c->loc = loc;
    c->recovered = recovered;
    c->tail = &c->directives;
    *st->ast->classes_tail = c;
    st->ast->classes_tail = &c->next;
    st->ast->class_count++;
    st->ast->saw_any_item = true;
    st->current_class = c;
    return 0;
}

static void end_class(struct parse_state *st)
{
    st->current_class = NULL;
}

/* A top-level statement dropped by error recovery: if nothing came before it,
 * it may have been the version header, so a missing header is no news. */
static void skipped_item(struct parse_state *st)
{
    if (!st->ast->saw_any_item)
        st->ast->error_before_first_item = true;
}

/* UINT64_MAX stands for "no index given" (the current GPU, any node). */
static struct place place_make(struct parse_state *st, enum loc_kind kind, uint64_t index, YYLTYPE loc)
{
    if (index == UINT64_MAX)
        return (struct place){kind, -1, loc};
    if (index > 1023) {
        diag_add(st->diags, DIAG_ERROR, E_OUT_OF_RANGE, loc,
                 "%s %llu is out of range (0..1023)", kind == LOC_GPU ? "GPU" : "NUMA node",
                 (unsigned long long)index);
        return (struct place){kind, -1, loc}; /* the policy is invalid: no number to check */
    }
    return (struct place){kind, (int)index, loc};
}

/* Every comparison becomes an inclusive range; `!=` is NOT of `==`. A bound
 * that leaves nothing (`< 0`) is flagged so the checker can report it. */
static struct range range_cmp(int op, uint64_t v)
{
    struct range r = {0, UINT64_MAX, false, false};
    switch (op) {
    case '<': r.hi = v - 1; r.empty = v == 0; break;
    case 'l': r.hi = v; break;
    case '>': r.lo = v + 1; r.empty = v == UINT64_MAX; break;
    case 'g': r.lo = v; break;
    case '=': r.lo = r.hi = v; break;
    case '!': r.lo = r.hi = v; r.negate = true; break;
    }
    return r;
}

static struct expr *range_expr(enum expr_kind kind, struct range r, YYLTYPE loc)
{
    struct expr *e = expr_new(kind, loc);
    if (!e)
        return NULL;
    e->lo = r.empty ? 1 : r.lo; /* lo > hi: the checker reports an empty range */
    e->hi = r.empty ? 0 : r.hi;
    return r.negate ? binary_expr(EXPR_NOT, e, NULL, loc) : e;
}

static struct expr *text_expr(enum expr_kind kind, char *text, YYLTYPE loc, YYLTYPE text_loc)
{
    struct expr *e = expr_new(kind, loc);
    if (!e) {
        free(text);
        return NULL;
    }
    e->text = text;
    e->text_loc = text_loc;
    return e;
}

static struct expr *binary_expr(enum expr_kind kind, struct expr *l, struct expr *r, YYLTYPE loc)
{
    struct expr *e = expr_new(kind, loc);
    if (!e) {
        expr_free(l);
        expr_free(r);
        return NULL;
    }
    e->left = l;
    e->right = r;
    return e;
}

static struct global_decl *add_global(struct parse_state *st, enum global_kind kind, struct amount a,
                                      YYLTYPE loc)
{
    st->ast->saw_any_item = true;
    struct global_decl *g = calloc(1, sizeof *g);
    if (!g) { /* never a policy that silently lacks its budget */
        diag_add(st->diags, DIAG_ERROR, E_IO, loc, "out of memory while parsing");
        return NULL;
    }
    g->kind = kind;
    g->amount = a;
    g->loc = loc;
    *st->ast->globals_tail = g;
    st->ast->globals_tail = &g->next;
    return g;
}

int yylex(YYSTYPE *lval, YYLTYPE *lloc, yyscan_t scanner);
static void yyerror(YYLTYPE *loc, yyscan_t scanner, struct parse_state *st, const char *msg)
{
    (void)scanner;
    if (st->current_class) /* its other complaints (no 'match') would only echo this one */
        st->current_class->had_error = true;
    if (st->no_memory) /* an action's allocation failed (NO_MEMORY), not the parser's stack */
        diag_add(st->diags, DIAG_ERROR, E_IO, *loc, "out of memory while parsing");
    else if (strcmp(msg, "memory exhausted") == 0)
        diag_add(st->diags, DIAG_ERROR, E_TOO_DEEP, *loc, "expression nested too deeply to parse");
    else
        diag_add(st->diags, DIAG_ERROR, E_SYNTAX, *loc, "%s", msg);
}

static bool is_keyword(yysymbol_kind_t sym)
{
    return sym >= YYSYMBOL_UMPOL && sym <= YYSYMBOL_SAVED;
}

/* Keywords and operators in quotes; "number", "string", "identifier" as they are. */
static const char *token_display(yysymbol_kind_t sym, char *buf, size_t len)
{
    const char *name = yysymbol_name(sym);
    if (sym == YYSYMBOL_YYEOF)
        return "end of file";
    if (is_keyword(sym) || (sym >= YYSYMBOL_DOTDOT && sym <= YYSYMBOL_NE)) {
        snprintf(buf, len, "'%s'", name);
        return buf;
    }
    return name;
}

/* An identifier where keywords were expected is most likely a misspelt keyword. */
static const char *keyword_hint(const struct parse_state *st, const yysymbol_kind_t *expected, int n)
{
    const char *cands[YYNTOKENS];
    size_t count = 0;
    for (int i = 0; i < n; i++)
        if (is_keyword(expected[i]))
            cands[count++] = yysymbol_name(expected[i]);
    return count ? diag_suggest(st->last_ident, cands, count) : NULL;
}

static bool expects(const yysymbol_kind_t *expected, int n, yysymbol_kind_t sym)
{
    for (int i = 0; i < n; i++)
        if (expected[i] == sym)
            return true;
    return false;
}

/* Keywords that begin a statement: before one of them, the previous statement
 * has ended, whether or not its ';' or '}' was written. */
static bool starts_directive(yysymbol_kind_t sym)
{
    return sym == YYSYMBOL_MATCH || sym == YYSYMBOL_MEMORY || sym == YYSYMBOL_ADVISE ||
           sym == YYSYMBOL_PLACE || sym == YYSYMBOL_ACCESS || sym == YYSYMBOL_PREFETCH ||
           sym == YYSYMBOL_PRIORITY;
}

static bool starts_item(yysymbol_kind_t sym)
{
    return sym == YYSYMBOL_UMPOL || sym == YYSYMBOL_BUDGET || sym == YYSYMBOL_CAP ||
           sym == YYSYMBOL_SLAB || sym == YYSYMBOL_LEARN || sym == YYSYMBOL_UPDATE ||
           sym == YYSYMBOL_CLASS;
}

static int item_token(yysymbol_kind_t sym)
{
    switch (sym) {
    case YYSYMBOL_UMPOL: return UMPOL;
    case YYSYMBOL_BUDGET: return BUDGET;
    case YYSYMBOL_CAP: return CAP;
    case YYSYMBOL_SLAB: return SLAB;
    case YYSYMBOL_LEARN: return LEARN;
    case YYSYMBOL_UPDATE: return UPDATE;
    default: return CLASS;
    }
}

/* Where a missing token belongs: right after the previous token. */
static YYLTYPE after_previous(const struct parse_state *st)
{
    return (YYLTYPE){st->prev_loc.last_line, st->prev_loc.last_column, st->prev_loc.last_line,
                     st->prev_loc.last_column + 1};
}

/* The previous token as a message shows it: strings in their own quotes. */
static const char *previous_token(const struct parse_state *st, char *buf, size_t len)
{
    if (st->prev_text[0] == '"')
        return st->prev_text;
    snprintf(buf, len, "'%s'", st->prev_text);
    return buf;
}

static void report_unclosed_class(struct parse_state *st, yysymbol_kind_t got)
{
    const struct class_decl *c = st->current_class;
    char tok[64];
    char what[96] = "this class";
    if (c && c->name)
        snprintf(what, sizeof what, "class '%s'", c->name);
    struct diag *d = diag_add(st->diags, DIAG_ERROR, E_SYNTAX, after_previous(st),
                              "%s is not closed: missing '}' after %s%s", what,
                              previous_token(st, tok, sizeof tok),
                              got == YYSYMBOL_YYEOF ? " at the end of the file" : "");
    if (c)
        diag_note(d, c->name_loc, "%s begins here", what);
}

static int yyreport_syntax_error(const yypcontext_t *ctx, yyscan_t scanner, struct parse_state *st)
{
    (void)scanner;
    st->semi_missing = st->open_missing = false; /* each report decides anew */
    if (st->diags->stopped)
        return 0;
    yysymbol_kind_t expected[YYNTOKENS];
    int n = yypcontext_expected_tokens(ctx, expected, YYNTOKENS);
    if (n < 0)
        n = 0;
    yysymbol_kind_t got = yypcontext_token(ctx);
    const YYLTYPE *loc = yypcontext_location(ctx);
    char tok[64], tok2[64];
    if (got == YYSYMBOL_YYEOF && st->current_class)
        st->current_class->had_error = true;
    /* The '}' of a class that was closed early (a class inside a class): the
     * mistake is reported already. */
    if (got == YYTRANSLATE('}') && !st->current_class && st->closed_early > 0) {
        st->closed_early--;
        return 0;
    }

    /* A missing ';' or '{' is reported after the token that lacks it, and the
     * grammar's `semi` and `open` rules go on as if it had been written. */
    bool new_line = loc->first_line > st->prev_loc.last_line;
    if (expects(expected, n, YYTRANSLATE(';')) &&
        (new_line || got == YYSYMBOL_YYEOF || got == YYTRANSLATE('}') || starts_directive(got) ||
         starts_item(got))) {
        diag_add(st->diags, DIAG_ERROR, E_SYNTAX, after_previous(st), "missing ';' after %s",
                 previous_token(st, tok, sizeof tok));
        st->semi_missing = true;
        return 0;
    }
    if (expects(expected, n, YYTRANSLATE('{')) && starts_directive(got)) {
        diag_add(st->diags, DIAG_ERROR, E_SYNTAX, after_previous(st), "missing '{' after %s",
                 previous_token(st, tok, sizeof tok));
        st->open_missing = true;
        return 0;
    }
    /* A class left open: close it, then read the statement that follows. */
    if (expects(expected, n, YYTRANSLATE('}')) && (starts_item(got) || got == YYSYMBOL_YYEOF)) {
        report_unclosed_class(st, got);
        if (got != YYSYMBOL_YYEOF) {
            st->inject_token = '}';
            st->closed_early++;
            st->replay_token = item_token(got);
            st->replay_loc = *loc;
        }
        return 0;
    }

    /* The words of `learn step` and `update in backward` are identifiers to
     * the grammar: where one is missing, the statement is shown whole. */
    if (n == 1 && expected[0] == YYSYMBOL_IDENT) {
        const char *usage = strcmp(st->prev_text, "learn") == 0
                                ? "'learn step;' or 'learn step \"PHASE-GLOB\";'"
                            : strcmp(st->prev_text, "update") == 0 || strcmp(st->prev_text, "in") == 0
                                ? "'update in backward;'"
                                : NULL;
        if (usage) {
            diag_add(st->diags, DIAG_ERROR, E_SYNTAX, *loc, "unexpected %s after %s: write %s",
                     token_display(got, tok, sizeof tok), previous_token(st, tok2, sizeof tok2),
                     usage);
            return 0;
        }
    }
    if (got == YYSYMBOL_IDENT) {
        const char *hint = keyword_hint(st, expected, n);
        if (hint) {
            diag_add(st->diags, DIAG_ERROR, E_UNKNOWN_KEYWORD, *loc,
                     "unknown keyword '%s'; did you mean '%s'?", st->last_ident, hint);
            return 0;
        }
    }
    char msg[512];
    int len = snprintf(msg, sizeof msg, "unexpected %s", token_display(got, tok, sizeof tok));
    if (got == YYSYMBOL_IDENT)
        len += snprintf(msg + len, sizeof msg - (size_t)len, " '%s'", st->last_ident);
    for (int i = 0; i < n; i++) {
        if (i == 9) {
            len += snprintf(msg + len, sizeof msg - (size_t)len, ", ...");
            break;
        }
        /* After 'budget' the identifier can only be the word 'card'. */
        bool card = expected[i] == YYSYMBOL_IDENT && n == 2 && expects(expected, n, YYSYMBOL_GPU);
        len += snprintf(msg + len, sizeof msg - (size_t)len, "%s%s", i ? ", " : ", expected ",
                        card ? "'card'" : token_display(expected[i], tok, sizeof tok));
    }
    bool keyword_expected = false;
    for (int i = 0; i < n; i++)
        keyword_expected |= is_keyword(expected[i]);
    diag_add(st->diags, DIAG_ERROR,
             got == YYSYMBOL_IDENT && keyword_expected ? E_UNKNOWN_KEYWORD : E_SYNTAX, *loc, "%s", msg);
    return 0;
}
