/* A compiled policy: immutable flat tables, safe to read from any number of
 * threads, plus the classifier the runtime calls on every allocation. */
#ifndef UMPOL_PROGRAM_H
#define UMPOL_PROGRAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "api.h"
#include "ast.h"

enum node_op {
    OP_ANY,
    OP_SIZE,
    OP_NTH,
    OP_PHASE,
    OP_TAG,
    OP_API,
    OP_DEVICE,
    OP_AND,
    OP_OR,
    OP_NOT,
    OP_SAVED,
    OP_SPARE,
};

/* One predicate node; children are indexes into the same array. */
struct program_node {
    uint8_t op;
    uint32_t left, right;
    uint64_t lo, hi; /* SIZE, NTH range; PHASE/TAG index; API mask; DEVICE ordinal */
};

struct program_place {
    enum loc_kind kind; /* LOC_UNSET: not given */
    int index;          /* -1: the current GPU / no node */
};

struct program_prefetch {
    struct program_place dest;
    enum trigger_kind trigger;
    int32_t pattern; /* ENTER/EXIT: phase glob index; MARK: mark index; ALLOC: -1 */
};

struct program_class {
    const char *name;
    const char *doc; /* the comment above the class (ast.h), NULL: none */
    int line;
    uint32_t root; /* predicate node */
    bool always;   /* predicate matches every allocation */
    /* `saved` in its predicate (outside a `not`): blocks reported saved for
     * backward may move into it. */
    bool takes_saved;
    bool uses_spare; /* `spare` in its predicate: its GPU bytes are the spare's */
    enum memory_kind memory;
    bool read_mostly;
    struct program_place place;
    struct program_place access[MAX_ACCESS];
    int access_count;
    uint32_t prefetch_first, prefetch_count;
    uint32_t priority;
    /* `stream written "GLOB"`: the phase glob of its writes, whose pieces
     * stream ahead of use outside them; -1: it does not stream. */
    int32_t stream_written;
};

/* Necessary conditions of a class's predicate, checked before evaluating it:
 * most allocations are ruled out by size, API or device alone. */
struct class_filter {
    uint64_t size_lo, size_hi;
    unsigned api_mask;
    int device;         /* -1: any */
    int32_t need_phase; /* phase glob that must be open, or -1 */
    int32_t need_tag;   /* tag that must be pushed, or -1 */
    bool need_saved;    /* only a block reported saved matches */
    uint32_t root;
    bool always;
};

/* A limit given as a percentage of a total or as bytes; unset when !given. */
struct program_limit {
    bool given, percent;
    uint64_t value;
};

#define PROGRAM_DEFAULT_SLAB (64ull << 20)
/* Without `cap managed`, the runtime holds at most this share of each GPU's
 * memory as managed memory: an oversubscribed card can hang. */
#define PROGRAM_DEFAULT_CAP_PERCENT 90
#define PROGRAM_DEFAULT_PRIORITY 0

struct program {
    struct program_limit budget_gpu, cap_managed;
    /* `budget card`: the budget also counts the GPU memory the process holds
     * outside umpol (CUDA's own, the job's other allocations), as the card
     * reports it. */
    bool budget_counts_card;
    uint64_t slab_bytes;
    struct program_class *classes;
    struct class_filter *filters; /* parallel to classes, compact for the classifier */
    size_t class_count;
    struct program_node *nodes;
    size_t node_count;
    struct program_prefetch *prefetches;
    size_t prefetch_count;
    char **phase_globs; /* from `phase` predicates and enter/exit triggers */
    size_t phase_glob_count;
    char **tags;
    size_t tag_count;
    char **marks;
    size_t mark_count;
    /* `learn step "GLOB"`: the phase glob whose opening starts a step; -1: the
     * step model is off. */
    int32_t step_glob;
    /* `learn step;`: the step is found in the repetition of the job's events. */
    bool step_by_repetition;
    /* `update in backward;`: the Python package updates each parameter in the
     * backward pass (UMPOL_STEP_IN_BACKWARD, when set, decides instead). */
    bool update_in_backward;
    /* Some class's predicate reads `spare`: the runtime works out the room
     * (alloc_ctx.spare_bytes) before classifying. */
    bool uses_spare;
};

/* Everything known about one allocation when it is classified. */
struct alloc_ctx {
    uint64_t size;
    uint64_t seq;   /* 0-based sequence number of intercepted allocations */
    unsigned api;   /* one enum alloc_api bit */
    int device;
    const uint64_t *phase_bits; /* bitset over phase_globs: a matching phase is open */
    const uint64_t *tag_bits;   /* bitset over tags: the tag is on the tag stack */
    /* The block was reported saved for backward: false when allocated; true
     * when umpol_note_saved classifies it again. */
    bool saved;
    /* `spare`: bytes the GPU's budget has room for beside the most the job
     * has held there (0 where the program does not use `spare`). */
    uint64_t spare_bytes;
};

/* Compile a checked AST. Returns NULL only when out of memory. */
struct program *program_compile(const struct policy_ast *ast);
void program_free(struct program *p);

/* What `spare` keeps back of LIMIT (the GPU's budget) for steps that hold
 * more than the first (a pool's free space falls differently once it has
 * been used): a fifth of PEAK, the most the job has held there, and at least
 * 1/32 of the limit and two slabs. Measured: 0.94B and 1.75B Llamas' later steps
 * held 0.7-1.0 GiB (5-17%) more than their first. */
static inline uint64_t program_spare_reserve(const struct program *p, uint64_t limit,
                                             uint64_t peak)
{
    uint64_t r = peak / 5;
    r = r > limit / 32 ? r : limit / 32;
    return r > 2 * p->slab_bytes ? r : 2 * p->slab_bytes;
}

/* Has class I a prefetch rule that sends it anywhere but the GPU? Else
 * only the budget sends it off the GPU. */
static inline bool program_class_leaves_by_rule(const struct program *p, size_t i)
{
    const struct program_class *c = &p->classes[i];
    for (uint32_t k = 0; k < c->prefetch_count; k++)
        if (p->prefetches[c->prefetch_first + k].dest.kind != LOC_GPU)
            return true;
    return false;
}

/* Index of the first class matching CTX, or -1 when none does. */
int program_classify(const struct program *p, const struct alloc_ctx *ctx);

/* Class I's predicate evaluated in full, without the filters (for tests). */
bool program_class_matches(const struct program *p, size_t i, const struct alloc_ctx *ctx);

/* Words of a bitset over phase globs / tags (at least 1, so callers never malloc 0). */
size_t program_bitset_words(size_t count);
/* Set in BITS every phase glob that NAME matches; returns how many did. */
size_t program_match_phase(const struct program *p, const char *name, uint64_t *bits);
/* Index of tag or mark NAME, or -1. */
int program_tag_index(const struct program *p, const char *name);
int program_mark_index(const struct program *p, const char *name);

/* Human-readable rendering of a class predicate, of a place, of a size. */
void program_print_expr(FILE *out, const struct program *p, uint32_t node);
const char *program_place_str(struct program_place place, char *buf, size_t len);
const char *format_bytes(uint64_t bytes, char *buf, size_t len);

/* `umpol explain`: the compiled classes in the order they are tried. */
void program_explain(FILE *out, const struct program *p);
/* The members of the JSON object (no braces): budget_gpu, cap_managed,
 * slab_bytes, classes; the caller adds the file and its diagnostics. */
void program_explain_json(FILE *out, const struct program *p);

#endif
