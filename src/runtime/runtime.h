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

/* Allocation front doors shared by the CUDA hooks and the pluggable allocator. */
cudaError_t rt_alloc(struct runtime *rt, void **ptr, size_t size, unsigned api,
                     cudaStream_t stream, bool *handled);
/* Returns true when PTR was the runtime's (now freed); false: not ours. */
bool rt_free(struct runtime *rt, void *ptr, cudaStream_t stream, enum alloc_mode mode,
             cudaError_t *err);

/* Phases and marks: counted, then their triggers fired. */
void phase_enter(struct runtime *rt, const char *name);
void phase_exit(struct runtime *rt);
void phase_mark(struct runtime *rt, const char *name);

#endif
