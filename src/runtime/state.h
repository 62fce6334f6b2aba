/* The runtime's state: one struct holding each floor's data. Types live in
 * the header of the floor that owns them; this header only gathers them. One
 * process-wide mutex (lock) guards pools, the block map, residency and
 * statistics; phase bits are atomics read without it. */
#ifndef UMPOL_RUNTIME_STATE_H
#define UMPOL_RUNTIME_STATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "lang/program.h"
#include "runtime/block_map.h"
#include "runtime/cuda_api.h"
#include "runtime/device.h"
#include "runtime/mover.h"
#include "runtime/plan.h"
#include "runtime/pool.h"
#include "runtime/ranges.h"
#include "runtime/sites.h"
#include "runtime/stats.h"
#include "runtime/step.h"
#include "runtime/step_find.h"
#include "runtime/stream_state.h"
#include "runtime/trace.h"

struct runtime {
    const struct program *program;
    const struct cuda_api *cuda;
    pthread_mutex_t lock;
    struct device_state devices[RT_MAX_DEVICES];
    struct mover mover;
    struct block_map map;
    struct class_stats *class_stats;
    uint64_t tick, seq;
    uint64_t allocations, passthrough, frees, foreign_managed;
    uint64_t runtime_ns; /* wall time inside runtime-issued CUDA work and triggers */
    /* Of it: moving blocks to the GPU as they are allocated, taking freed space
     * back for the budget, and evicting live blocks. */
    uint64_t place_ns, reclaim_ns, evict_ns;
    /* The job's threads' time inside the runtime's entry points (all threads
     * summed: rt_held), and of it, apart: giving slabs back (a release waits
     * for the GPU's work), waiting for the mover's thread's remaps, and
     * making new slabs (with their placement; less the other two). */
    _Atomic uint64_t held_ns;
    uint64_t slab_release_ns, remap_wait_ns, slab_grow_ns;
    uint64_t round_floor; /* blocks placed after this tick are not evicted to place more */
    bool record_timeline; /* a report was asked for */
    struct timeline_event *timeline;
    size_t timeline_count, timeline_cap, timeline_dropped;
    struct phase_span *spans; /* guarded by phase_lock */
    size_t span_count, span_cap, spans_dropped;
    struct range_index ranges; /* guarded by range_lock */
    pthread_mutex_t range_lock;
    struct profile *profile; /* NULL unless UMPOL_PROFILE=1 */
    bool discard; /* UMPOL_DISCARD=1: discard dead managed blocks instead of keeping their data */
    /* Phases: how many open phases match each glob; a bit per glob with count > 0. */
    uint32_t *phase_open_count;
    _Atomic uint64_t *phase_bits;
    size_t phase_words;
    struct phase_stat phase_stats[RT_MAX_PHASE_NAMES];
    size_t phase_stat_count;
    pthread_mutex_t phase_lock;
    /* Every opening still open, on any thread, oldest first (guarded by
     * phase_lock): phases are process-wide, so the latest of them is the
     * phase an allocation is recorded under once its own thread has none. */
    struct open_opening {
        uint64_t seq;
        uint32_t phase;
    } *openings;
    size_t opening_count, opening_cap;
    uint64_t opening_seq;
    /* The innermost open phase as the thread that last opened or closed one
     * sees it (its own innermost, else the latest opening of any thread), -1:
     * none (the sites' phase); and the report's allocation sites (NULL unless
     * a report is asked for). */
    _Atomic int phase_current;
    struct sites *sites;
    struct trace *trace; /* the allocation trace, NULL unless UMPOL_TRACE is set */
    /* `learn step` (rt->lock): the step model; per class the use it last
     * predicted (-1: none); how far this step's uses were prefetched ahead;
     * while placing ahead, the predicted use being served. */
    bool learn;
    struct step_model step;
    struct step_finder finder; /* `learn step;`: finds the step's first event */
    uint32_t step_open; /* open phases matching the step glob */
    size_t step_depth;  /* the first step's opening: phases open on its thread; 0: none yet */
    long *predicted_use;
    /* The step's plans, per GPU and class of device memory ([device *
     * class_count + class], plan.h), and the blocks of the current step a
     * plan could hold. */
    struct plan_arena *arenas;
    struct plan_note *notes;
    size_t note_count, note_cap;
    bool notes_overflow; /* the step had more blocks to note than notes can hold */
    /* Per class of `memory host`: pinning failed, or this is a forked child,
     * which does not inherit pinned pages: its allocations go to CUDA. */
    _Atomic bool *pinning_off;
    /* `spare`: the live bytes of the classes on the GPU side (not `memory
     * host`) that do not read it, and their peak; blocks the budget had room
     * for and the GPU had not, classified again without it; whether that was
     * said. Outermost phases closed so far, and how many had closed when that
     * peak was last raised: a peak that stood through such a phase's end is
     * the step's so far, not a climb still under way. */
    uint64_t gpu_live, gpu_live_peak;
    uint64_t phase_closes, gpu_live_peak_closes;
    uint64_t spare_misses;
    _Atomic bool spare_said;
    /* Stream captures in progress (begun through the interposed calls and
     * not yet ended): a wait for the whole GPU would invalidate them, so
     * movable memory does not move meanwhile (counted per class, said once). */
    _Atomic int captures;
    _Atomic bool capture_seen; /* a capture has begun in this process: a graph may replay */
    uint64_t card_sampled_ns; /* the card's used memory last read (rt->lock) */
    _Atomic bool movable_skip_said;
    _Atomic bool movable_failed_said; /* a movable slab became device memory: said */
    long ahead_scanned;
    long ahead_use; /* -1: not placing ahead */
    /* Blocks placed or used after this tick serve the phase open now: placing
     * ahead does not evict them. */
    uint64_t phase_tick;
    struct stream_state stream; /* `stream written` (rt->lock) */
};

#endif
