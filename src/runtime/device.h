/* Floor 2, mechanism. What the runtime keeps per GPU: its memory and host
 * NUMA node, the runtime's own streams and event, the pool table and the
 * byte counts the budget and the cap bound. Learned over cuda_api; the
 * budget and cap themselves are the placement policy's to set. */
#ifndef UMPOL_RUNTIME_DEVICE_H
#define UMPOL_RUNTIME_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lang/ast.h"
#include "runtime/cuda_api.h"
#include "runtime/pool.h"

#define RT_MAX_DEVICES 64

/* Free points of one stream (mover.h): its last POINT_RING points, events
 * recorded on it, each numbered by the device's point clock when recorded
 * (0: none yet); at most one every POINT_EVERY_NS; POINT_STREAMS streams a
 * device. */
#define POINT_STREAMS 8
#define POINT_RING 8
#define POINT_EVERY_NS 50000u
struct free_points {
    cudaStream_t stream;
    bool taken;           /* stream is set */
    bool pending;         /* blocks freed on it since its last point */
    uint64_t recorded_ns; /* when its last point was recorded */
    uint64_t freed_at;    /* the device's count of frees when one was last freed on it */
    cudaEvent_t events[POINT_RING];
    uint64_t numbers[POINT_RING];
    unsigned next; /* the slot the next point takes */
};

struct device_state {
    bool known;
    uint64_t total_bytes;
    uint64_t budget_bytes;  /* what the runtime holds to (UINT64_MAX: no budget) */
    uint64_t budget_set;    /* the policy's budget; under `budget card`, budget_bytes is it
                             * less card_outside */
    uint64_t cap_bytes;     /* managed bytes allowed for this device */
    uint64_t managed_bytes; /* managed bytes held for this device */
    /* GPU memory the runtime holds on this device: its managed blocks on the
     * GPU, live or free, and its device-memory slabs. The budget bounds it. */
    uint64_t resident_bytes;
    uint64_t resident_peak; /* the most resident_bytes has been */
    uint64_t movable_resident; /* of resident_bytes, what movable classes hold */
    /* Per class that only the budget sends off the GPU and a rule brings
     * back (steady_room in placement.c): take_clock at its last return (0:
     * none yet), and the most resident_bytes less movable_resident has been
     * since. take_clock stamps the slabs of the GPU's pools (slab.taken). */
    uint64_t *return_mark, *return_peak;
#define RETURN_REMEASURE UINT64_MAX /* a return_mark: the step changed since, measure again */
#define RETURN_MEASURING (1ull << 63) /* a return_mark's bit: its step brings nothing back */
    size_t returning; /* classes with a return mark: none, and resident_add skips them */
    bool step_changed;    /* umpol_step_changed: the next return makes the marks RETURN_REMEASURE */
    bool release_pending; /* since: the empty device slabs go at the next return that wants room */
    uint64_t take_clock;
    /* `spare`: what the classes that read it hold of resident_bytes, and the
     * most the rest of it has ever been (the job's peak without them). */
    uint64_t spare_held, others_peak;
    uint64_t spare_judged_by; /* others_peak when spare_held last grew */
    /* The card's own figure (cudaMemGetInfo: used by every process), sampled
     * when phases open: when the runtime first saw the GPU, its peak since,
     * resident_bytes at that peak, and the samples taken. */
    uint64_t card_base_used, card_peak_used, card_resident_at_peak, card_samples;
    /* What the card holds beyond card_base_used and resident_bytes (CUDA's
     * own growth, the job's memory outside umpol): the least of the last
     * CARD_WINDOW samples, so that a block freed but not yet given back to
     * the card does not count; card_outside is the most that has been. */
#define CARD_WINDOW 8
    uint64_t card_recent[CARD_WINDOW], card_outside;
    uint64_t card_outside_said; /* card_outside when last logged */
    /* Under a budget, managed memory prefers the host and is mapped by the GPU:
     * pages move to the GPU only when the runtime places them there. */
    bool steer;
    int host_numa_id;          /* -1: unknown */
    cudaStream_t stream;       /* runtime-owned stream for placements and triggers */
    cudaStream_t evict_stream; /* runtime-owned stream for evictions (NULL: stream) */
    cudaStream_t fetch_stream; /* runtime-owned stream for streaming ahead (NULL: stream) */
    cudaEvent_t follow_event;  /* orders one stream after another (NULL: one per wait) */
    /* Where the work of the streams blocks are freed on stood just after the
     * frees (mover_point_*): a block's next user on another stream waits
     * for that point, not for all its last stream has queued since. */
    struct free_points points[POINT_STREAMS];
    uint64_t point_clock;      /* points recorded on this device so far */
    uint64_t point_frees;      /* frees that marked a stream's points */
    bool points_wanted;        /* a block went to another stream here: points are kept */
    struct pool **pools;       /* one per class, created on first use */
};

/* Learn DEVICE, which is current: its memory, host NUMA node, the runtime's
 * streams and event, an empty pool table for CLASS_COUNT classes. Does not
 * set known (the caller does, once the policy has set budget and cap).
 * false: out of memory. */
bool device_open(struct device_state *dev, const struct cuda_api *cuda, int device,
                 size_t class_count);
/* DEV's pool of class CLASS_IDX, whose memory is MEMORY, created empty on
 * first use (NULL: no memory). */
struct pool *device_pool(struct device_state *dev, int device, int class_idx,
                         enum memory_kind memory);
/* Host bookkeeping of every pool (no CUDA call: the context may be gone). */
void device_close(struct device_state *dev, size_t class_count);
/* The classes that come back (return_mark) measure their step afresh: the
 * next return of each takes the room there is then; a pending step change is
 * dropped (what a forked child does: its steps are its own). */
void device_forget_returns(struct device_state *dev, size_t class_count);

#endif
