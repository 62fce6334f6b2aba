/* Floor 3, policy (data only). The step's plan for a class of device
 * memory: a training step allocates and frees the same blocks in the same
 * order, step after step, so once a step has repeated the one before, each
 * of its blocks gets an offset in one arena, chosen for the whole step at
 * once (largest first, each at the lowest offset that no block living at
 * the same time holds). The arena is then as large as the most the step
 * ever holds at once plus a little, where a pool that serves each request
 * as it comes keeps the fragments of the sizes it saw. A block whose place
 * is still held (a step that strays) takes free pages elsewhere in the
 * arena where there are enough, else the pool serves it; the plan only says
 * where, the caller checks that it is free. No CUDA, no lock. */
#ifndef UMPOL_RUNTIME_PLAN_H
#define UMPOL_RUNTIME_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PLAN_PAGE (512u << 10)    /* planned blocks begin and end on a page */
#define PLAN_MIN_BLOCK (1u << 20) /* smaller blocks stay in the pool's slabs */
#define PLAN_MAX_BLOCKS 16384     /* a step with more is not planned (planning is quadratic) */

/* A block of the step: allocated at event START of it, freed before event
 * END (END > START), SIZE bytes. */
struct plan_block {
    uint32_t start, end;
    uint64_t size;
};

struct step_plan {
    uint64_t bytes;   /* the arena's size */
    uint64_t *offset; /* per event of the step: its block's offset + 1; 0: none */
    size_t len;       /* events of the step it is indexed by */
    size_t planned;   /* events with an offset */
    uint64_t *busy;   /* a bit per page of the arena: a live block holds it */
    size_t pages;
};

/* What the runtime keeps of a plan: per GPU and class of device memory. */
struct slab;
struct plan_arena {
    struct step_plan plan;
    struct slab *slab; /* made when the first planned block comes; NULL until then */
    void *stream;      /* the stream most of the step's blocks came on: the others go to the pool */
    uint64_t served;   /* planned blocks served since the step began */
    bool failed;       /* no memory for it, or given up: the pool serves the class */
    /* A block the plan turned away (a miss) grew the class's pool on this
     * GPU past the budget: the plan is given up at the first step that
     * begins with no block in the arena. */
    bool stray_past_budget;
};

/* A block of the current step a plan could hold: its event, GPU, class,
 * size and stream. */
struct plan_note {
    uint32_t event;
    int32_t device, class_idx;
    uint64_t size;
    void *stream;
};

/* Plan BLOCKS[0..N) of a step of LEN events into PLAN (emptied first).
 * False: no memory, too many blocks, or a block outside the step. */
bool plan_build(struct step_plan *plan, const struct plan_block *blocks, size_t n, size_t len);
/* The offset planned for event I of the step: true and *OFFSET, or false. */
bool plan_offset(const struct step_plan *plan, size_t i, uint64_t *offset);
/* A new step of LEN events becomes the one the plan is indexed by: its event
 * I is the old step's event AT[I] (-1: none), as the step model matched
 * them. Offsets of unmatched events are lost. False: no memory, and every
 * offset is lost (the pages live blocks hold stay held). */
bool plan_reindex(struct step_plan *plan, const int32_t *at, size_t len);
/* The pages SIZE bytes at OFFSET need: all free, now held (true), or not
 * (false, nothing changed). */
bool plan_claim(struct step_plan *plan, uint64_t offset, uint64_t size);
/* A place for SIZE bytes where the plan's own is held (a step that strays):
 * the free pages nearest the arena's end that hold it, now held, at *OFFSET
 * (true), or none (false). The plan lays the largest blocks out from the
 * start, so a stray block there takes the pages of the smaller ones. */
bool plan_claim_free(struct step_plan *plan, uint64_t size, uint64_t *offset);
/* Give back what plan_claim or plan_claim_free took for SIZE bytes at OFFSET. */
void plan_release(struct step_plan *plan, uint64_t offset, uint64_t size);
/* Does a live block hold any page of the arena? */
bool plan_in_use(const struct step_plan *plan);
void plan_free(struct step_plan *plan);

#endif
