/* Diagnostics: records queued while a policy is read, printed once, gcc-style. */
#ifndef UMPOL_DIAG_H
#define UMPOL_DIAG_H

#include <stdbool.h>
#include <stdio.h>

#include "source.h"

/* A note says what could not be checked; it changes no verdict. */
enum diag_severity { DIAG_ERROR, DIAG_WARNING, DIAG_NOTE };

/* Reading and checking stop after this many errors: later ones are mostly echoes. */
#define DIAG_MAX_ERRORS 20
/* Warnings past this many are counted but not kept. */
#define DIAG_MAX_WARNINGS 50

/* Stable codes: tests and users key on them, so never renumber. */
enum diag_code {
    E_SYNTAX = 1,           /* unexpected token */
    E_UNKNOWN_KEYWORD = 2,  /* identifier where a keyword belongs */
    E_BAD_CHAR = 3,         /* character that starts no token */
    E_UNTERMINATED = 4,     /* string runs to the end of the line */
    E_ENCODING = 5,         /* NUL byte or invalid UTF-8 */
    E_TOO_LARGE = 6,        /* file over the size limit */
    E_TOO_DEEP = 7,         /* parentheses nested too deeply */
    E_NO_HEADER = 8,        /* missing `umpol 1;` */
    E_VERSION = 9,          /* unsupported version */
    E_DUP_CLASS = 10,       /* class name used twice */
    E_DUP_DIRECTIVE = 11,   /* directive given twice in one class */
    E_CONFLICT = 12,        /* directives that cannot hold together */
    E_OVERFLOW = 13,        /* number or size too large */
    E_PERCENT = 14,         /* percentage of 0 or over 100 */
    E_RANGE = 15,           /* low end of a range above its high end */
    E_EMPTY_PATTERN = 16,   /* empty glob, tag or mark name */
    E_PREFETCH_NO_LOC = 17, /* prefetch without a destination */
    E_DUP_GLOBAL = 18,      /* budget, cap or slab given twice */
    E_NO_MATCH = 19,        /* class without a match directive */
    E_UNKNOWN_API = 20,     /* api predicate names no known API */
    E_UNKNOWN_UNIT = 21,    /* size with a unit umpol does not know */
    E_OUT_OF_RANGE = 22,    /* index or value outside its allowed range */
    E_TOO_MANY_ERRORS = 23, /* error cap reached; reading stopped */
    E_BAD_LOCATION = 24,    /* location not allowed in this directive */
    E_NO_CLASSES = 25,      /* policy defines no class */
    E_TOO_MANY = 26,        /* more classes or list entries than supported */
    E_IO = 27,              /* file cannot be read, or out of memory */
    E_SAVED_DEVICE = 28,    /* `saved` in a class of `memory device` or `memory host` */
    W_UNREACHABLE = 101,    /* class shadowed by an earlier catch-all */
    W_NO_CATCH_ALL = 102,   /* no class matches everything */
    W_HOST_NO_ACCESS = 103, /* placed on host, prefetched to gpu, no access gpu */
    W_TOPOLOGY = 104,       /* names a GPU or NUMA node this machine lacks (check --topology) */
    W_READ_MOSTLY_BUDGET = 105, /* read_mostly under a budget: not applied */
    W_SAVED_SHADOWED = 106,     /* a class before a saved class takes its blocks first */
    W_HOST_MANAGED = 107,       /* managed memory on the host, never moved: may stay on the card */
    W_SPARE_HOST = 108,         /* `spare` in a class of `memory host`, which never takes the GPU */
    W_MOVABLE_STILL = 109,      /* `memory movable` with no prefetch rule: it never moves */
    W_MANAGED_CARD = 110,       /* managed memory under `budget card`: kept pages shrink it */
};

struct diag {
    enum diag_severity severity;
    enum diag_code code;
    struct loc loc;
    char *message;
    bool has_note; /* a second location, e.g. "first defined here" */
    struct loc note_loc;
    char *note;
    size_t seq; /* queue order, for a stable sort */
};

struct diag_list {
    struct diag *items;
    size_t count, cap;
    size_t errors, warnings, notes;
    size_t hidden_warnings; /* counted in warnings, past DIAG_MAX_WARNINGS */
    bool stopped;           /* the error cap was reached */
};

void diag_list_init(struct diag_list *list);
void diag_list_free(struct diag_list *list);

/* Queue a diagnostic; returns it so a caller can attach a note. */
struct diag *diag_add(struct diag_list *list, enum diag_severity sev, enum diag_code code,
                      struct loc loc, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* True once DIAG_MAX_ERRORS errors are queued. The first time, queues E023
 * at LOC saying that DOING ("reading", "checking") stopped there. */
bool diag_stop(struct diag_list *list, struct loc loc, const char *doing);
void diag_note(struct diag *d, struct loc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Order the diagnostics by where they point (whole-file ones first), keeping
 * the order of those at one place: the parser and the checker report in two
 * passes, a reader wants them in the order of the file. */
void diag_sort(struct diag_list *list);

/* "E012" / "W101". buf holds at least 8 bytes. */
const char *diag_code_name(enum diag_code code, char *buf);

/* file:line:col: error[E012]: message, source line, caret underline. */
void diag_print(FILE *out, const struct source *src, const struct diag_list *list, bool color);
/* One JSON array of the diagnostics, for `umpol check --json`. */
void diag_print_json(FILE *out, const struct source *src, const struct diag_list *list);

/* Smallest edit distance candidate within a useful threshold, or NULL. */
const char *diag_suggest(const char *word, const char *const *candidates, size_t n);

#endif
