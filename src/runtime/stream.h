/* Floor 3, policy. Streaming ahead of use (`stream written "optimizer*";` on a
 * class of movable memory): the job says which blocks it is about to use
 * (umpol_use, called by the Python package before each module runs), the
 * order of those uses between two of the class's write phases is learned as
 * one cycle, and from the next cycle on, the pieces the next uses need are
 * copied to the GPU on the runtime's own stream while the job computes. A
 * piece it brought stays while the budget has room; where the next pieces
 * have none, those whose next use is farthest leave with no copy (the class
 * is written only in its write phases, so their host memory holds the same
 * bytes). A piece is remapped only once the GPU has finished all the
 * work the job had queued when it last used the piece: a mark (an event) is
 * recorded on the job's stream at each use, and a remap waits for nothing.
 * The remaps themselves are made on the mover's own thread; a piece the job
 * is about to use or write while its remap is being made waits for it.
 * See src/runtime/README.md. */
#ifndef UMPOL_RUNTIME_STREAM_H
#define UMPOL_RUNTIME_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/cuda_api.h"
#include "runtime/stream_state.h"

struct runtime;

/* Set up for RT's program (rt->lock not needed yet); false: out of memory. */
bool stream_init(struct runtime *rt);
/* Host bookkeeping only, at exit: the marks' events belong to a CUDA context
 * that may already be gone. */
void stream_destroy(struct runtime *rt);
/* Does any class of the program stream? */
bool stream_enabled(const struct runtime *rt);
/* Class C streams and none of its write phases is open: what comes to the
 * GPU now stays the same as its host memory until one opens. */
bool stream_unwritten(const struct runtime *rt, int c);

/* The job is about to queue, on STREAM, work that uses the blocks at
 * PTRS[0..N) (rt->lock held). */
void stream_use(struct runtime *rt, const void *const *ptrs, size_t n, cudaStream_t stream);
/* The bytes of the next pieces the last stream_use found no room for under
 * *DEVICE's budget (0: none). stream_retry, once placement has made what
 * room it can, brings them, and where room is still short lets pieces whose
 * next use is farther leave for them (rt->lock held). */
uint64_t stream_short(const struct runtime *rt, int *device);
/* The job is about to queue work that writes the blocks at PTRS[0..N)
 * outside their class's write phases (the optimizer's step in backward,
 * one parameter at a time): as stream_block_written, each such block of a
 * streaming class (rt->lock held). */
void stream_written(struct runtime *rt, const void *const *ptrs, size_t n);
void stream_retry(struct runtime *rt);
/* Phases opened or closed: start or end the write phases (rt->lock held).
 * Returns true when one ended. */
bool stream_phases(struct runtime *rt);
/* Block B of a movable slab was handed out: the job writes it from now on
 * (its pieces are not clean, not brought in until the next write phase
 * ends, and not remapped until the GPU is past its writes). */
struct block;
void stream_block_written(struct runtime *rt, const struct block *b);
/* Wait for every remap handed to the mover's thread and apply it (rt->lock
 * held): before placement moves, repairs or gives back a movable slab. */
void stream_settle(struct runtime *rt);
/* Placement needs NEED bytes of DEVICE's budget: pieces the stream brought
 * that are safe to drop leave, farthest from their next use first, with no
 * copy; their remaps are made before this returns, so the card has the
 * memory back. Returns the bytes given back. */
uint64_t stream_yield(struct runtime *rt, int device, uint64_t need);

#endif
