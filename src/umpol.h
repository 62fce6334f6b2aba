/* umpol.h — the public C API of the umpol runtime (libumpol.so).
 *
 * Everything here is safe to call whether or not a policy is loaded: with no
 * runtime active the calls do nothing. See umpol(7). */
#ifndef UMPOL_H
#define UMPOL_H

#include <stddef.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Tags: allocations made by this thread while NAME is pushed match `tag "NAME"`. */
void umpol_tag_push(const char *name);
void umpol_tag_pop(void);

/* Phases: process-wide, like NVTX ranges (which drive them too). */
void umpol_phase_enter(const char *name);
void umpol_phase_exit(void);
/* Close the innermost phase named NAME opened by this thread, wherever it is
 * in the thread's stack (phases opened inside it stay open). */
void umpol_phase_exit_named(const char *name);

/* Marks fire `prefetch … on mark "NAME"`. */
void umpol_mark(const char *name);

struct umpol_stats {
    unsigned long long allocations;   /* served by umpol's pools */
    unsigned long long passthrough;   /* handed to CUDA untouched */
    unsigned long long live_bytes;    /* in blocks handed out now */
    unsigned long long managed_bytes; /* managed memory held (slabs and the job's own) */
    unsigned long long prefetches;
    unsigned long long evictions;
    unsigned long long cap_refusals;
};
/* Returns 0 and fills STATS, or -1 when no policy is active. */
int umpol_stats(struct umpol_stats *stats);

/* Per class, in policy order (index 0 .. umpol_class_count()-1). The byte
 * counts are of the runtime's blocks: requests rounded up to 512 bytes. */
struct umpol_class_stats {
    unsigned long long allocations, frees;
    unsigned long long live_bytes;     /* in live blocks now */
    unsigned long long peak_bytes;     /* the most live_bytes ever held */
    unsigned long long resident_bytes; /* of live_bytes, on the GPU now (device memory: all) */
    unsigned long long prefetches, prefetch_bytes; /* moved by the runtime (to GPU or host) */
    unsigned long long evictions, evict_bytes;     /* sent to the host for the budget */
    unsigned long long saved, saved_bytes; /* umpol_note_saved calls, and their blocks' size */
};
/* Number of classes, or -1 when no policy is active. */
int umpol_class_count(void);
/* The class's name (owned by the runtime), or NULL for a bad index. */
const char *umpol_class_name(int index);
/* Returns 0 and fills STATS, or -1 (no policy, bad index). */
int umpol_class_stats(int index, struct umpol_class_stats *stats);

/* PTR, in a block the runtime handed out (at its start, or anywhere in one
 * of managed memory), holds a tensor saved for the backward pass (PyTorch's
 * saved-tensor hooks call it once per tensor storage and forward pass): the
 * block is classified again with the `saved` predicate true and moves to the
 * class it matches then (umpol(5)), then is counted in its class as saved /
 * saved_bytes (once per call: a segment holding several saved tensors
 * counts once for each).
 * Returns the class index, or -1 when PTR is in no live block of the runtime. */
int umpol_note_saved(const void *ptr);

/* Does PTR lie in a block of a `memory host` class (pinned host memory the
 * GPU reads across the link)? 1 if so, 0 if it lies in another of the
 * runtime's blocks, -1 when it lies in none or no policy is loaded. The step
 * in backward (UMPOL_STEP_IN_BACKWARD=1) asks it of the optimizer's state,
 * to copy the state that lies on the host in and out around each update. */
int umpol_on_host(const void *ptr);

/* How many bytes of the block that starts at PTR lie in host memory now: all
 * of a `memory host` block, the pieces of a `memory movable` block that are
 * off the GPU, 0 for the runtime's other blocks; -1 when PTR is no block of
 * the runtime's or no policy is loaded. The Python package's weights ahead
 * (UMPOL_WEIGHTS_AHEAD) asks it of each layer's weights, to copy those that
 * lie on the host to the GPU ahead of the layer. */
long long umpol_host_bytes(const void *ptr);

/* The job's step changes from here on: a mechanism that changes what the
 * step holds on the GPU has turned on (the Python package calls it when
 * UMPOL_SAVED_TO_HOST or UMPOL_WEIGHTS_AHEAD, left at auto, turns on at the
 * first eviction, maybe mid-step). What the runtime measured of the step is
 * stale: from the next return of a `memory movable` class that comes back at
 * its `prefetch gpu` rule (umpol(5), `memory movable`), each such class
 * measures a step of the new kind before it comes back into the room that
 * step left, and at the first return of one with pieces on the host the empty
 * slabs of `memory device` classes are given back, so that the new step makes
 * only what it needs (best where little is live: rules on a pass's opening).
 * Returns 0, or -1 when no policy is loaded. */
int umpol_step_changed(void);

/* Does the policy say `update in backward;` (umpol(5))? 1 or 0; -1 when no
 * policy is loaded. The Python package then updates each parameter in the
 * backward pass unless UMPOL_STEP_IN_BACKWARD says otherwise. */
int umpol_update_in_backward(void);

/* Does a class of the policy stream ahead of use (`stream written`)? 1 or 0. */
int umpol_streaming(void);
/* The job is about to queue, on STREAM (a cudaStream_t; NULL: the default
 * stream), work that reads the blocks starting at PTRS[0..COUNT) (the
 * Python package calls it before each module runs, with its parameters).
 * Classes with `stream written` learn the order of these uses from one write
 * phase to the next and bring the next uses' pieces to the GPU ahead of them.
 * Returns 0, or -1 when no policy is loaded. */
int umpol_use(const void *const *ptrs, size_t count, void *stream);
/* The job is about to queue work that writes the blocks starting at
 * PTRS[0..COUNT) outside the `stream written` phases of their class (the
 * Python package calls it before each parameter's update when the optimizer
 * steps in backward, UMPOL_STEP_IN_BACKWARD=1): the pieces the stream
 * brought of those blocks leave only once copied back, and those on the host
 * stay there until the next write phase ends. Returns when no remap of those
 * blocks is being made; 0, or -1 when no policy is loaded. */
int umpol_written(const void *const *ptrs, size_t count);

/* PyTorch pluggable allocator entry points
 * (torch.cuda.memory.CUDAPluggableAllocator(path, "umpol_torch_alloc", "umpol_torch_free")). */
void *umpol_torch_alloc(ssize_t size, int device, void *stream);
void umpol_torch_free(void *ptr, ssize_t size, int device, void *stream);

#ifdef __cplusplus
}
#endif

#endif
