/* Floor 3, policy. Decides where blocks live: the advice a slab gets, what
 * is placed on the GPU as it is allocated or when a phase or mark fires, and
 * under a budget what is taken back or evicted to make room; the managed
 * cap. It keeps the residency counts (a block's on_gpu, the pools' GPU lists,
 * the devices' resident and managed bytes) and tells the mover what to move.
 * Every function is called with rt->lock held. */
#ifndef UMPOL_RUNTIME_PLACEMENT_H
#define UMPOL_RUNTIME_PLACEMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lang/program.h"
#include "runtime/cuda_api.h"
#include "runtime/pool.h"

struct runtime;

/* DEVICE was just learned: its budget, cap and whether managed memory is
 * steered to the host, from the policy. */
void placement_configure_device(struct runtime *rt, int device);
struct cudaMemLocation place_location(const struct runtime *rt, struct program_place place,
                                      int device);

/* The card reported USED bytes in use on DEVICE (sample dev->card_samples):
 * learn what it holds outside umpol, and under `budget card` hold the
 * runtime's own budget to the policy's less that. */
void place_card_sampled(struct runtime *rt, int device, uint64_t used);

/* The host NUMA node CLASS_IDX's host memory belongs on (its 'place host …'),
 * -1: wherever the kernel puts it. */
int place_host_node(const struct runtime *rt, int class_idx, int device);

/* Room under DEVICE's managed cap for SIZE more bytes, after giving back empty
 * slabs if needed; a refusal is counted against CLASS_IDX. */
bool cap_admits(struct runtime *rt, int class_idx, int device, size_t size);
/* Release every slab with no live block: of every device, or only DEVICE's
 * when >= 0; of every class (TRIM_ALL), of every class whose memory is on the
 * card or managed (TRIM_CARD: pinned host pools keep theirs, whose release
 * frees no GPU memory and waits for the GPU), of managed classes alone
 * (TRIM_MANAGED, for the cap), those of STREAM_ROOM_SLAB or more on the card
 * (TRIM_FOR_STREAM), or only CLASS_IDX's when >= 0. (TRIM_UNUSED: device
 * memory no block was taken from for a while, steady_room's, in placement.c.) */
enum { TRIM_ALL = -1, TRIM_CARD = -2, TRIM_MANAGED = -3, TRIM_FOR_STREAM = -4, TRIM_UNUSED = -5 };
size_t place_trim(struct runtime *rt, int device, int class_idx);
/* The job's step changes from here on (a mechanism that changes what it
 * holds, as the Python package's saved tensors in host memory, turned on):
 * what was measured of the step is stale. From the next return of a class
 * that comes back (steady_room), the classes that come back measure a step
 * of the new kind before anything comes back, and at the first return of
 * one with pieces on the host the empty slabs of device-memory classes are
 * given back (the new step makes what it needs). */
void place_step_changed(struct runtime *rt);
/* Room for the stream: empty slabs of STREAM_ROOM_SLAB or more on the card
 * are given back until DEVICE's budget (every GPU's when < 0) has BYTES free
 * (the pools that held them grow again when they need to). Such slabs hold
 * a step's few largest buffers (a loss's logits), left empty past its peak
 * until the next step's; smaller ones are soon filled again (a backward
 * pass's gradients), and giving them back only to make them again cost a
 * release, which waits for the GPU, each time (a 1.75B Llama: 124 a step,
 * slower than not streaming). Returns the bytes given back. */
size_t place_room_for_stream(struct runtime *rt, int device, uint64_t bytes);

/* `spare`: the bytes DEVICE's budget (without one, its memory) has room for
 * beside the most the classes that do not read `spare` have held there, what
 * those that do hold now, and program_spare_reserve's reserve. 0 for a device not yet
 * seen, and while those classes hold within 1/32 of the limit (at least two
 * slabs) of a peak reached since an outermost phase last closed: the job may
 * still be climbing to it. */
uint64_t place_spare_room(const struct runtime *rt, int device);

/* A new slab of device memory of SIZE bytes for CLASS_IDX on DEVICE: where
 * the budget has no room for it, movable pieces of no higher priority leave
 * the GPU first. Device memory is never refused: what cannot be made room
 * for is counted as a budget skip. */
void place_room_for_device_slab(struct runtime *rt, int class_idx, int device, size_t size);
/* The card itself had no memory for a new slab of SIZE bytes of CLASS_IDX on
 * DEVICE (a card smaller than the budget, or memory umpol does not count):
 * movable pieces of no higher priority leave the GPU for SIZE bytes, whatever
 * the budget. Returns the bytes that left (0: nothing could). */
size_t place_card_full(struct runtime *rt, int class_idx, int device, size_t size);

/* Does a new movable slab of CLASS_IDX of SIZE bytes start on DEVICE's GPU
 * (its 'place', or its rule for a phase open now, is not the host, and the
 * budget has room)? *NODE: the host
 * NUMA node its host memory belongs on (-1: the GPU's nearest). */
bool place_movable_on_gpu(const struct runtime *rt, int class_idx, int device, size_t size,
                          int *node);
/* A new slab of POOL: counted, advised, and prefetched whole when its class
 * asks for a prefetch on alloc and no budget holds the GPU. */
void place_new_slab(struct runtime *rt, struct pool *pool, struct slab *s);
/* S, which place_new_slab saw, is about to be released (a plan's arena). */
void place_slab_gone(struct runtime *rt, const struct slab *s);
/* The job's own cudaMallocManaged of class CLASS_IDX: counted and advised. */
void place_adopted(struct runtime *rt, int class_idx, int device, void *ptr, size_t size,
                   cudaStream_t stream);
void place_adopted_freed(struct runtime *rt, const struct block *b);

void place_on_alloc(struct runtime *rt, struct block *b, int device, cudaStream_t stream);
/* A block moved to another class is its slab's class's again. */
void place_on_free(struct runtime *rt, struct block *b);
/* Live managed block B moves to class TO (managed too), reported saved: it
 * takes TO's advice, joins TO's lists on its GPU (so TO's triggers, priority
 * and budget apply to it from now on) and is placed as TO places a new
 * block, its data kept. false: no memory for TO's pool; B is unchanged. */
bool place_reclassify(struct runtime *rt, struct block *b, int to);
/* UMPOL_DISCARD=1: the freed block's data is dead; its whole 2 MiB pages are
 * discarded and prefetched back where they are, so they are never copied.
 * Ordered on STREAM after its use; returns the stream its next user must follow. */
cudaStream_t place_discard_freed(struct runtime *rt, struct block *b, cudaStream_t stream);
/* A phase opened or closed, or a mark: every rule it fires moves its class
 * (and, under `learn step`, counts as a use of the class in the step).
 * OUTER: of GLOB_BITS, the globs this opening is the outermost of (NULL:
 * all); a class that only the budget sends out returns only on those. */
void place_trigger(struct runtime *rt, enum trigger_kind trigger, const uint64_t *glob_bits,
                   const uint64_t *outer, int mark);
/* `learn step`, the step on track: move to the GPU now what the reference
 * step uses within its next two phase openings, within the budget (evicting
 * only blocks needed later). */
void place_ahead(struct runtime *rt);

#endif
