/* Floor 2, mechanism. The CUDA work the runtime issues, over cuda_api: slab
 * memory, advice, prefetches (one, batched, or discarding dead data), and
 * ordering one stream after another. It moves what it is told to: deciding
 * what moves, and when, is the placement policy's. A failed move is logged,
 * never an error for the job. */
#ifndef UMPOL_RUNTIME_MOVER_H
#define UMPOL_RUNTIME_MOVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lang/ast.h"
#include "runtime/cuda_api.h"
#include "runtime/device.h"

struct mover {
    const struct cuda_api *cuda;
    bool batch_unsupported;            /* cudaMemPrefetchBatchAsync refused once */
    bool discard_prefetch_unsupported; /* discard-and-prefetch refused once */
};

void mover_init(struct mover *m, const struct cuda_api *cuda);

/* Slab memory of KIND, SIZE bytes at *BASE. Host memory is pinned and mapped
 * at the same address on every GPU, on host NUMA node NODE when >= 0. */
cudaError_t mover_alloc(struct mover *m, enum memory_kind kind, size_t size, int node,
                        uintptr_t *base);
/* Give back what mover_alloc gave (host memory: after the GPU's work so far). */
cudaError_t mover_release(struct mover *m, enum memory_kind kind, uintptr_t base, size_t size);
cudaError_t mover_advise(struct mover *m, void *ptr, size_t size, enum cudaMemoryAdvise advice,
                         struct cudaMemLocation loc);
const char *mover_error(const struct mover *m, cudaError_t err);

/* Is STREAM's work done? Is it being captured into a graph? */
bool mover_stream_idle(struct mover *m, cudaStream_t stream);
bool mover_stream_capturing(struct mover *m, cudaStream_t stream);

/* Order WAITER after SIGNALER's work so far, both streams of DEV: an event
 * recorded on SIGNALER now, waited on by WAITER. No host synchronisation. */
bool mover_follow(struct mover *m, struct device_state *dev, cudaStream_t waiter,
                  cudaStream_t signaler);

/* false: the prefetch failed (logged). */
bool mover_prefetch(struct mover *m, uintptr_t addr, size_t size, struct cudaMemLocation loc,
                    cudaStream_t stream);
/* One cudaMemPrefetchBatchAsync where the runtime has it, else one call per block. */
void mover_prefetch_batch(struct mover *m, void **ptrs, size_t *sizes, size_t n,
                          struct cudaMemLocation loc, cudaStream_t stream);

/* The whole 2 MiB pages inside [ADDR, ADDR+SIZE), which a discard may drop
 * without touching a neighbour: [*START, *END), empty when END <= START. */
void mover_whole_pages(uintptr_t addr, size_t size, uintptr_t *start, uintptr_t *end);

/* Move [ADDR, ADDR+SIZE) of DEV, whose data is dead once STREAM's work so far
 * is done, to LOC, ordered on STREAM; with DISCARD, its whole pages without a
 * copy. Returns true when a discard was issued. */
bool mover_move_dead(struct mover *m, struct device_state *dev, uintptr_t addr, size_t size,
                     struct cudaMemLocation loc, cudaStream_t stream, bool discard);

#endif
