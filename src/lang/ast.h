/* The syntax tree of one policy, as parsed; the checker reads it, the compiler flattens it. */
#ifndef UMPOL_AST_H
#define UMPOL_AST_H

#include <stdbool.h>
#include <stdint.h>

#include "source.h"

enum expr_kind {
    EXPR_ANY,
    EXPR_SIZE,   /* lo..hi inclusive, bytes */
    EXPR_NTH,    /* lo..hi inclusive, allocation sequence number */
    EXPR_PHASE,  /* glob over open phases */
    EXPR_TAG,    /* exact tag on the tag stack */
    EXPR_API,    /* allocation API */
    EXPR_DEVICE, /* device ordinal */
    EXPR_SAVED,  /* the block was reported saved for backward */
    EXPR_SPARE,  /* the GPU's budget has room for the block beside the job's peak */
    EXPR_AND,
    EXPR_OR,
    EXPR_NOT,
};

struct expr {
    enum expr_kind kind;
    struct loc loc;
    uint64_t lo, hi; /* SIZE, NTH; DEVICE uses lo */
    char *text;      /* PHASE, TAG, API */
    struct loc text_loc;
    struct expr *left, *right; /* AND, OR; NOT uses left */
};

enum loc_kind { LOC_UNSET, LOC_GPU, LOC_HOST, LOC_HOST_NUMA, LOC_HOST_NEAR, LOC_NONE };

/* A place in the machine; `index` is the GPU (-1: current device) or NUMA node. */
struct place {
    enum loc_kind kind;
    int index;
    struct loc loc;
};

enum trigger_kind { TRIGGER_ALLOC, TRIGGER_ENTER, TRIGGER_EXIT, TRIGGER_MARK };

struct prefetch {
    struct place dest; /* kind LOC_UNSET when the user left it out */
    enum trigger_kind trigger;
    char *pattern; /* phase glob or mark name; NULL for alloc */
    struct loc pattern_loc;
    struct loc loc;
};

/* Where a class's blocks come from: managed memory (advised, placed,
 * moved), plain device memory, pinned host memory the GPU maps, or movable
 * memory (GPU or host memory behind a fixed address, moved whole by the
 * runtime's copy engines on the class's prefetch rules). */
enum memory_kind { MEMORY_MANAGED, MEMORY_DEVICE, MEMORY_HOST, MEMORY_MOVABLE };

/* "managed", "device" or "host": the directive's own word. */
const char *memory_kind_name(enum memory_kind kind);

#define MAX_ACCESS 8

/* One directive as written; the checker folds them into a class. */
enum directive_kind {
    DIR_MATCH,
    DIR_MEMORY,
    DIR_ADVISE,
    DIR_PLACE,
    DIR_ACCESS,
    DIR_PREFETCH,
    DIR_PRIORITY,
    DIR_STREAM, /* `stream written "GLOB";` */
};

struct directive {
    enum directive_kind kind;
    struct loc loc;
    struct expr *match;
    enum memory_kind memory;
    struct place place;                 /* PLACE */
    struct place access[MAX_ACCESS + 1]; /* ACCESS; one spare to detect overflow */
    int access_count;
    struct prefetch prefetch;
    uint64_t priority;
    char *written;       /* STREAM: the glob of the phases that write the class */
    struct loc value_loc;
    struct directive *next;
};

struct class_decl {
    char *name; /* NULL for a body read after a broken class header */
    struct loc name_loc;
    struct loc loc;
    /* The comment lines directly above `class`, without their '#' and one
     * space, joined by '\n'; NULL: none. */
    char *doc;
    struct directive *directives, **tail;
    bool recovered; /* read after a syntax error in its header: name may be wrong */
    bool had_error; /* a directive was lost to a syntax error */
    struct class_decl *next;
};

enum global_kind { GLOBAL_BUDGET, GLOBAL_CAP, GLOBAL_SLAB, GLOBAL_VERSION, GLOBAL_LEARN,
                   GLOBAL_UPDATE };

struct amount {
    bool percent;
    uint64_t value; /* bytes, or percent */
    struct loc loc;
};

struct global_decl {
    enum global_kind kind;
    struct amount amount; /* VERSION keeps its number in amount.value */
    char *pattern;        /* LEARN: the step phase's glob */
    bool card;            /* BUDGET: `budget card`, the card's used memory */
    struct loc pattern_loc;
    struct loc loc;
    struct global_decl *next;
};

struct policy_ast {
    struct global_decl *globals, **globals_tail;
    struct class_decl *classes, **classes_tail;
    size_t class_count;
    bool first_item_is_version;
    bool saw_any_item;
    bool error_before_first_item; /* the header itself may be what was lost */
    size_t syntax_errors;         /* errors while reading: the tree may lack parts */
};

void ast_init(struct policy_ast *ast);
void ast_free(struct policy_ast *ast);
struct expr *expr_new(enum expr_kind kind, struct loc loc);
void expr_free(struct expr *e);
void directive_free(struct directive *d);

#endif
