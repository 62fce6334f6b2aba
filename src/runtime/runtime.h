/* The runtime's state and its internal interfaces. One process-wide mutex
 * guards pools, the block map, residency and statistics; phase bits are
 * atomics read without it. */
#ifndef UMPOL_RUNTIME_H
#define UMPOL_RUNTIME_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

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
    struct block *link_prev, *link_next; /* free bin when free; LRU when resident */
    cudaStream_t stream; /* live: the allocating stream */
    /* Free: the streams whose work may still use it (none: safe for every
     * stream). Merged neighbours keep both sets, up to RT_FREE_STREAMS. */
    cudaStream_t free_streams[RT_FREE_STREAMS];
    uint8_t free_stream_count;
    uint64_t tick; /* last placement, for LRU */
    int class_idx;
    int device; /* the job's own managed memory: the device it was counted on */
    bool free;
    bool resident; /* live, placed on the pool's GPU by the runtime: counted in the budget */
    bool on_gpu;   /* its pages are known to be on the pool's GPU (kept through free/reuse) */   /* placed on the pool's GPU by the runtime, counted in the budget */
};

struct class_stats {
    uint64_t allocations, frees, bytes_requested, live_bytes, peak_bytes;
    uint64_t slabs, slab_bytes, prefetches, prefetch_bytes, evictions, evict_bytes;
    uint64_t cap_refusals, budget_skips, advice_errors, cross_stream_reuses;
    uint64_t discards, discard_bytes;
};

struct pool {
    int class_idx, device;
    struct slab *slabs;
    struct block *bins[RT_BINS];
    struct block *lru_head, *lru_tail; /* resident live blocks, least recent first */
    bool advice_warned;
};

struct device_state {
    bool known;
    uint64_t total_bytes;
    uint64_t budget_bytes;  /* UINT64_MAX: no budget */
    uint64_t cap_bytes;     /* managed bytes allowed for this device */
    uint64_t managed_bytes; /* managed bytes held for this device */
    uint64_t resident_bytes;
    int host_numa_id;       /* -1: unknown */
    cudaStream_t stream;    /* runtime-owned stream for triggered prefetches */
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
};

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
    bool batch_unsupported;
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
void place_trigger(struct runtime *rt, enum trigger_kind trigger, const uint64_t *glob_bits,
                   int mark);

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

int runtime_init(struct runtime *rt, const struct program *program, const struct cuda_api *cuda);
void runtime_destroy(struct runtime *rt);
uint64_t now_ns(void);

/* The JSON report (see umpol(7)). */
int report_write(const struct runtime *rt, const char *path);
/* Expand %p (pid) and %r (rank) in a report path. */
void report_expand_path(const char *pattern, char *out, size_t len);

#endif
