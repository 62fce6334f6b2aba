/* Floor 1, data. What the runtime counts and records, per class, per phase
 * and over time: plain records, written under the runtime's locks and read
 * by the report. */
#ifndef UMPOL_RUNTIME_STATS_H
#define UMPOL_RUNTIME_STATS_H

#include <stdint.h>

#define RT_MAX_PHASE_NAMES 4096
#define RT_TIMELINE_MAX 200000
#define RT_SPANS_MAX 200000

/* Unified Memory traffic, from CUPTI's counters (UMPOL_PROFILE=1). */
struct um_counters {
    uint64_t htod_bytes, dtoh_bytes, gpu_faults, cpu_faults, thrashing, throttling;
    uint64_t gpu_fault_ns; /* the driver's time servicing GPU fault groups, start to end */
};

struct class_stats {
    uint64_t allocations, frees, bytes_requested, live_bytes, peak_bytes;
    uint64_t slabs, slab_bytes, prefetches, prefetch_bytes, evictions, evict_bytes;
    uint64_t cap_refusals, budget_skips, advice_errors, cross_stream_reuses;
    uint64_t discards, discard_bytes;
    uint64_t reclaims, reclaim_bytes; /* free space moved off the GPU for the budget */
    /* Of allocations: blocks that came from another class when they were
     * reported saved for backward (their allocation, bytes and live bytes
     * moved with them). */
    uint64_t reclassified;
    /* The most slab bytes held at once (what the card saw of the class), and
     * the empty slabs given back to CUDA, for a new slab or the cap. */
    uint64_t slab_peak_bytes, slab_releases;
    /* Moved to the GPU ahead of a predicted use (`learn step`) / when used:
     * on allocation or when a trigger fired. */
    uint64_t ahead_bytes, demand_bytes;
    /* Uses predicted ahead, those that came at the predicted event, and the
     * sum of |actual - predicted| in events. */
    uint64_t next_use_predictions, next_use_hits, next_use_error;
    /* `memory movable`: slabs' pieces moved whole by the copy engines, the
     * time the job's thread spent in those moves (the GPU's work waited for
     * included), and the bytes a move to the GPU left on the host for the
     * budget. */
    uint64_t movable_to_gpu_bytes, movable_to_host_bytes, movable_move_ns, movable_budget_left;
    uint64_t movable_capture_skips; /* rules that fired during a stream capture: not moved */
    /* `stream written`: the uses the job announced (umpol_use), the bytes of
     * the pieces they needed that were on the GPU by then and that were
     * still on the host (read over the link); pieces copied in ahead, left
     * with no copy, copied back after a write phase; uses not found in the
     * learned cycle. */
    uint64_t stream_uses, stream_ready_bytes, stream_late_bytes;
    uint64_t stream_fetch_bytes, stream_drop_bytes, stream_save_bytes, stream_unlearned;
    /* `learn step`, device memory: blocks served where the step's plan put
     * them, blocks it planned whose place was still held (served by the
     * pool), those that took other free pages of the arena instead
     * (refits), the plan's arena (its bytes, times it was laid out), and
     * whether it was given up (a step that strayed from it went past the
     * budget); the most blocks a step had past what a plan lays out (0: none). */
    uint64_t planned_allocations, plan_misses, plan_refits, plan_bytes, plans_made;
    uint64_t plan_refused_blocks;
    bool plan_given_up;
    struct um_counters um;
};

struct phase_stat {
    char *name;
    uint64_t entries, total_ns;
    struct um_counters um;
};

/* One opening of a phase, kept for the report's timeline and to attribute
 * CUPTI records (stamped with CUPTI's clock) to the phase open at the time. */
struct phase_span {
    uint64_t start_ns, end_ns; /* CLOCK_MONOTONIC; end 0 while open */
    uint64_t start_ts, end_ts; /* CUPTI timestamps, when profiling */
    uint32_t phase;            /* index into phase_stats */
    uint32_t depth;            /* nesting on its thread, for the trace */
};

enum timeline_kind { TL_PREFETCH_GPU, TL_PREFETCH_HOST, TL_EVICT, TL_CAP_REFUSAL };

struct timeline_event {
    uint64_t t_ns;
    uint64_t bytes;
    uint64_t resident_bytes; /* the device's budgeted bytes after the event */
    int32_t class_idx;
    int16_t device;
    uint8_t kind;
};

#endif
