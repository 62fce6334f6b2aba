/* Floor 4, orchestration: the runtime's entry points. The interposed CUDA
 * functions (hooks.c) and the pluggable allocator call these; they call
 * down into the policy (placement, phase), the mechanism (device, mover) and
 * the data (pool, block_map, ranges), and tell the observers (profile,
 * report). src/runtime/README.md draws the floors. */
#ifndef UMPOL_RUNTIME_H
#define UMPOL_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>

#include "runtime/phase.h"
#include "runtime/report.h"
#include "runtime/state.h"
#include "util/clock.h"
#include "util/env.h"

int runtime_init(struct runtime *rt, const struct program *program, const struct cuda_api *cuda);
void runtime_destroy(struct runtime *rt);
/* In the child of a fork: every counter starts again, so that parent and child
 * each report their own work; what the child inherited stays (live blocks,
 * slabs, policy, open phases). */
void runtime_after_fork_child(struct runtime *rt);
/* The process's runtime once its policy is loaded, else NULL (hooks.c). */
struct runtime *runtime_loaded(void);

/* Allocation front doors shared by the CUDA hooks and the pluggable allocator. */
cudaError_t rt_alloc(struct runtime *rt, void **ptr, size_t size, unsigned api,
                     cudaStream_t stream, bool *handled);
/* Returns true when PTR was the runtime's (now freed); false: not ours. */
bool rt_free(struct runtime *rt, void *ptr, cudaStream_t stream, enum alloc_mode mode,
             cudaError_t *err);

/* The live block holding ADDR (rt->lock held): the block that starts there,
 * else the block of a managed slab that ADDR falls inside (a caching
 * allocator's segment holds many tensors). NULL: none. */
struct block *rt_block_holding(struct runtime *rt, uintptr_t addr);
/* Live block B holds a tensor saved for backward (rt->lock held): classified
 * again as allocated but with `saved` true, it moves to the class it matches
 * then, if that differs and both are managed memory. A block moved once stays. */
void rt_saved(struct runtime *rt, struct block *b);

/* Phases and marks: counted, then their triggers fired. */
void phase_enter(struct runtime *rt, const char *name);
void phase_exit(struct runtime *rt);
/* Close the innermost open phase named NAME (the Python package's automatic
 * phases), leaving the phases opened inside it open. */
void phase_exit_named(struct runtime *rt, const char *name);
void phase_mark(struct runtime *rt, const char *name);

/* An entry point of the runtime, called at SINCE (now_ns), returns: its time
 * counts as the job's thread's held by the runtime (the report's held_ns). */
void rt_held(struct runtime *rt, uint64_t since);

/* The job is about to queue, on STREAM, work that reads the blocks at
 * PTRS[0..N): classes that stream bring the next uses' pieces ahead. */
void rt_use(struct runtime *rt, const void *const *ptrs, size_t n, cudaStream_t stream);
/* The job is about to queue work that writes the blocks at PTRS[0..N)
 * outside their classes' write phases (stream_written). */
void rt_written(struct runtime *rt, const void *const *ptrs, size_t n);
/* The job's step changes from here on (umpol_step_changed): place_step_changed. */
void rt_step_changed(struct runtime *rt);
/* A stream capture is about to begin (the hooks call it before CUDA's
 * cudaStreamBeginCapture): streaming stops for good (a graph's replays read
 * unannounced), and the remaps handed to the mover's thread are made first,
 * so that no driver call of that thread runs beside the capture. */
void rt_capture_prepare(struct runtime *rt);

#endif
