/* The runtime's state and its internal interfaces. One process-wide mutex
 * guards pools, the block map, residency and statistics; phase bits are
 * atomics read without it. */
#ifndef UMPOL_RUNTIME_H
#define UMPOL_RUNTIME_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "lang/program.h"
#include "runtime/cuda_api.h"

#define RT_MAX_DEVICES 64
#define RT_ALIGN 512u
#define RT_BINS 64
#define RT_FREE_STREAMS 4
#define RT_MAX_PHASE_NAMES 4096

struct pool;

/* A slab: one cudaMallocManaged (or cudaMalloc) region carved into blocks. */
struct slab {
    uintptr_t base;
    size_t size;
    struct pool *pool;
    struct block *first; /* blocks in address order */
    struct slab *next;
    bool dedicated; /* made for one large request */
};

struct block {
    uintptr_t addr;
    size_t size;       /* bytes of the block (a multiple of RT_ALIGN) */
    size_t requested;  /* bytes asked for */
    struct slab *slab; /* NULL: the job's own cudaMallocManaged, tracked only */
    struct block *prev, *next;         /* address order in the slab */
    struct block *link_prev, *link_next; /* free bin, when free */
    /* On the GPU (on_gpu): the pool's LRU when live, its idle list when free. */
    struct block *gpu_prev, *gpu_next;
    cudaStream_t stream; /* live: the allocating stream */
    /* Free: the streams whose work may still use it (none: safe for every
     * stream). Merged neighbours keep both sets, up to RT_FREE_STREAMS. */
    cudaStream_t free_streams[RT_FREE_STREAMS];
    uint8_t free_stream_count;
    uint64_t tick; /* last placement (live) or release (free), least recent first */
    int class_idx;
    int device; /* the job's own managed memory: the device it was counted on */
    bool free;
    /* Managed slab memory the runtime moved to the pool's GPU and counts in the
     * device's resident bytes until it moves it away: live or free, a block's
     * pages stay there until then. */
    bool on_gpu;
};

/* The on-GPU lists (gpu_prev/gpu_next): append at the tail, remove anywhere. */
static inline void gpu_list_append(struct block **head, struct block **tail, struct block *b)
{
    b->gpu_next = NULL;
    b->gpu_prev = *tail;
    if (*tail)
        (*tail)->gpu_next = b;
    else
        *head = b;
    *tail = b;
}

static inline void gpu_list_remove(struct block **head, struct block **tail, struct block *b)
{
    if (b->gpu_prev)
        b->gpu_prev->gpu_next = b->gpu_next;
    else
        *head = b->gpu_next;
    if (b->gpu_next)
        b->gpu_next->gpu_prev = b->gpu_prev;
    else
        *tail = b->gpu_prev;
    b->gpu_prev = b->gpu_next = NULL;
}

/* Unified Memory traffic, from CUPTI's counters (UMPOL_PROFILE=1). */
struct um_counters {
    uint64_t htod_bytes, dtoh_bytes, gpu_faults, cpu_faults, thrashing, throttling;
};

struct class_stats {
    uint64_t allocations, frees, bytes_requested, live_bytes, peak_bytes;
    uint64_t slabs, slab_bytes, prefetches, prefetch_bytes, evictions, evict_bytes;
    uint64_t cap_refusals, budget_skips, advice_errors, cross_stream_reuses;
    uint64_t discards, discard_bytes;
    uint64_t reclaims, reclaim_bytes; /* free space moved off the GPU for the budget */
    struct um_counters um;
};

struct pool {
    int class_idx, device;
    struct slab *slabs;
    struct block *bins[2][RT_BINS];   /* [on the GPU][power of two] */
    uint64_t bin_mask[2];             /* bit i: bins[k][i] is not empty */
    struct block *lru_head, *lru_tail;     /* live blocks on the GPU, least recent first */
    struct block *idle_head, *idle_tail; /* free blocks still on the GPU, oldest first */
    bool advice_warned;
};

struct device_state {
    bool known;
    uint64_t total_bytes;
    uint64_t budget_bytes;  /* UINT64_MAX: no budget */
    uint64_t cap_bytes;     /* managed bytes allowed for this device */
    uint64_t managed_bytes; /* managed bytes held for this device */
    /* GPU memory the runtime holds on this device: its managed blocks on the
     * GPU, live or free, and its device-memory slabs. The budget bounds it. */
    uint64_t resident_bytes;
    /* Under a budget, managed memory prefers the host and is mapped by the GPU:
     * pages move to the GPU only when the runtime places them there. */
    bool steer;
    int host_numa_id;       /* -1: unknown */
    cudaStream_t stream;       /* runtime-owned stream for placements and triggers */
    cudaStream_t evict_stream; /* runtime-owned stream for evictions (NULL: stream) */
    cudaEvent_t follow_event;  /* orders one stream after another (NULL: one per wait) */
    struct pool **pools;    /* one per class, created on first use */
};

/* Open-addressing map from block address to block (live blocks only). */
struct block_map {
    struct block **slots;
    size_t cap, count;
};

struct phase_stat {
    char *name;
    uint64_t entries, total_ns;
    struct um_counters um;
};

/* Managed memory the runtime knows, by address: its slabs and the job's own
 * managed allocations, sorted, to attribute CUPTI records to classes. */
struct addr_range {
    uintptr_t base, end;
    int class_idx;
};

/* One opening of a phase, kept for the report's timeline and to attribute
 * CUPTI records (stamped with CUPTI's clock) to the phase open at the time. */
struct phase_span {
    uint64_t start_ns, end_ns;   /* CLOCK_MONOTONIC; end 0 while open */
    uint64_t start_ts, end_ts;   /* CUPTI timestamps, when profiling */
    uint32_t phase;              /* index into phase_stats */
    uint32_t depth;              /* nesting on its thread, for the trace */
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

#define RT_TIMELINE_MAX 200000
#define RT_SPANS_MAX 200000

struct runtime {
    const struct program *program;
    const struct cuda_api *cuda;
    pthread_mutex_t lock;
    struct device_state devices[RT_MAX_DEVICES];
    struct block_map map;
    struct class_stats *class_stats;
    uint64_t tick, seq;
    uint64_t allocations, passthrough, frees, foreign_managed;
    uint64_t runtime_ns; /* wall time inside runtime-issued CUDA work and triggers */
    /* Of it: moving blocks to the GPU as they are allocated, taking freed space
     * back for the budget, and evicting live blocks. */
    uint64_t place_ns, reclaim_ns, evict_ns;
    bool batch_unsupported;
    bool discard_prefetch_unsupported;
    uint64_t round_floor; /* blocks placed after this tick are not evicted to place more */
    bool record_timeline; /* a report was asked for */
    struct timeline_event *timeline;
    size_t timeline_count, timeline_cap, timeline_dropped;
    struct phase_span *spans; /* guarded by phase_lock */
    size_t span_count, span_cap, spans_dropped;
    struct addr_range *ranges; /* guarded by range_lock */
    size_t range_count, range_cap;
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
};

/* Blocks: allocation from the class's pool, return to it. */
enum alloc_mode {
    MODE_STREAM, /* cudaMallocAsync / pluggable: ordered on a stream */
    MODE_ANY,    /* cudaMalloc: usable by any stream at once */
};
cudaError_t pool_alloc(struct runtime *rt, int class_idx, int device, size_t size,
                       cudaStream_t stream, enum alloc_mode mode, struct block **out);
void pool_free(struct block *b, cudaStream_t stream, enum alloc_mode mode);
/* Room under DEVICE's managed cap for SIZE more bytes, after giving back empty
 * slabs if needed; a refusal is counted against CLASS_IDX. */
bool cap_admits(struct runtime *rt, int class_idx, int device, size_t size);
/* Free block B's pages have been sent off the GPU: stop counting them, and
 * merge B with free neighbours that are off the GPU too. */
void pool_idle_left_gpu(struct runtime *rt, struct block *b);
/* Release every slab with no live block (all pools, or only DEVICE's when >= 0). */
size_t pool_trim(struct runtime *rt, int device);
void pool_destroy_all(struct runtime *rt);

struct block *block_new(void);
void block_release(struct block *b);

void map_init(struct block_map *m);
void map_free(struct block_map *m);
int map_insert(struct block_map *m, struct block *b);
struct block *map_find(const struct block_map *m, uintptr_t addr);
struct block *map_remove(struct block_map *m, uintptr_t addr);

/* Placement: advice on slabs, prefetch, budget and eviction. */
struct cudaMemLocation place_location(const struct runtime *rt, struct program_place place,
                                      int device);
/* Advice on a new slab, and its first prefetch when the class asks for one on alloc. */
void place_new_slab(struct runtime *rt, struct pool *pool, struct slab *s);
void place_advise_range(struct runtime *rt, int class_idx, int device, void *ptr, size_t size);
void place_on_alloc(struct runtime *rt, struct block *b, int device, cudaStream_t stream);
void place_on_free(struct runtime *rt, struct block *b);
/* UMPOL_DISCARD=1: the freed block's data is dead; its whole 2 MiB pages are
 * discarded and prefetched back where they are, so they are never copied.
 * Ordered on STREAM after its use; returns the stream its next user must follow. */
cudaStream_t place_discard_freed(struct runtime *rt, struct block *b, cudaStream_t stream);
void place_trigger(struct runtime *rt, enum trigger_kind trigger, const uint64_t *glob_bits,
                   int mark);

/* Order WAITER after SIGNALER's work so far, both streams of DEVICE: an event
 * recorded on SIGNALER now, waited on by WAITER. No host synchronisation. */
bool stream_follow(struct runtime *rt, int device, cudaStream_t waiter, cudaStream_t signaler);

/* Devices: learned on first use (total memory, budget, cap, runtime stream). */
struct device_state *device_get(struct runtime *rt, int device);

/* Phases and tags. */
int phases_init(struct runtime *rt);
void phases_free(struct runtime *rt);
void phase_enter(struct runtime *rt, const char *name);
void phase_exit(struct runtime *rt);
void phase_mark(struct runtime *rt, const char *name);
/* This thread's tag bits (NULL when no tag is pushed). */
const uint64_t *tag_bits_current(void);
void tag_push(struct runtime *rt, const char *name);
void tag_pop(void);

/* Allocation front doors shared by the CUDA hooks and the pluggable allocator. */
cudaError_t rt_alloc(struct runtime *rt, void **ptr, size_t size, unsigned api,
                     cudaStream_t stream, bool *handled);
/* Returns true when PTR was the runtime's (now freed); false: not ours. */
bool rt_free(struct runtime *rt, void *ptr, cudaStream_t stream, enum alloc_mode mode,
             cudaError_t *err);

/* The runtime's configuration comes from the environment through here only
 * (secure_getenv where there is one). */
const char *runtime_env(const char *name);

int runtime_init(struct runtime *rt, const struct program *program, const struct cuda_api *cuda);
void runtime_destroy(struct runtime *rt);
uint64_t now_ns(void);

/* The address index (range_lock inside) and the timeline (rt->lock held). */
void ranges_add(struct runtime *rt, uintptr_t base, size_t size, int class_idx);
void ranges_remove(struct runtime *rt, uintptr_t base);
int ranges_class_of(struct runtime *rt, uintptr_t addr);
void timeline_add(struct runtime *rt, enum timeline_kind kind, int class_idx, int device,
                  uint64_t bytes);

/* CUPTI Unified Memory counters (profile.c). */
int profile_init(struct runtime *rt);         /* UMPOL_PROFILE*; 0 when off or on */
void profile_device_seen(struct runtime *rt);  /* rt->lock held: configure counters */
uint64_t profile_timestamp(struct runtime *rt); /* CUPTI clock, 0 when off */
void profile_phase_entered(struct runtime *rt, const char *name);
void profile_flush(struct runtime *rt);        /* no lock held */
void profile_free(struct runtime *rt);
void profile_lock_all(struct runtime *rt); /* around fork */
void profile_unlock_all(struct runtime *rt);
void profile_report(const struct runtime *rt, FILE *out);
void profile_print_um(FILE *out, const struct um_counters *c);

/* The JSON report (see umpol(7)): 0, or -errno when it could not be written. */
int report_write(const struct runtime *rt, const char *path);
/* Expand %p (pid) and %r (rank) in a report path. */
void report_expand_path(const char *pattern, char *out, size_t len);

#endif
