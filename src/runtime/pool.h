/* Floor 1, data. A class's pool on one GPU as a plain data structure: slabs
 * carved into blocks, free blocks in power-of-two bins with a bit per
 * non-empty bin, split and merge, and the lists of what is on the GPU. It
 * makes no CUDA call, takes no lock and decides nothing: the caller
 * synchronises, brings slab memory, and says what moves. */
#ifndef UMPOL_RUNTIME_POOL_H
#define UMPOL_RUNTIME_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h> /* cudaStream_t, a handle only */

#define RT_ALIGN 512u
#define RT_BINS 64
#define RT_FREE_STREAMS 4

struct pool;

/* A slab: one cudaMallocManaged (or cudaMalloc) region carved into blocks. */
struct slab {
    uintptr_t base;
    size_t size;
    struct pool *pool;
    struct block *first; /* blocks in address order */
    struct slab *next;
    bool dedicated; /* made for one large request */
    void *backing;  /* `memory movable`: the mover's record of its memory */
    uint64_t tick;  /* movable: when its pieces last came to the GPU (the LRU's tick) */
    bool quarantined; /* part of its range is not mapped: its free space is not handed out */
    uint64_t taken;   /* its pool's clock when it was made or a block last taken from it */
    /* The arena of a step's plan (plan.h): not among its pool's slabs; its
     * blocks are carved where the plan says and never enter the bins. */
    bool planned;
};

struct block {
    uintptr_t addr;
    size_t size;       /* bytes of the block (a multiple of RT_ALIGN) */
    size_t requested;  /* bytes asked for */
    struct slab *slab; /* NULL: the job's own cudaMallocManaged, tracked only */
    struct block *prev, *next;           /* address order in the slab */
    /* Free: its bin. Live and moved to another class (moved_in): the guest
     * list of that class's pool on its device. */
    struct block *link_prev, *link_next;
    /* On the GPU (on_gpu): the pool's LRU when live, its idle list when free. */
    struct block *gpu_prev, *gpu_next;
    cudaStream_t stream; /* live: the allocating stream */
    /* Free: the streams whose work may still use it (none: safe for every
     * stream). Merged neighbours keep both sets, up to RT_FREE_STREAMS. */
    cudaStream_t free_streams[RT_FREE_STREAMS];
    /* Per free stream, the point clock when it was freed there (mover.h):
     * its next user waits for that stream's first point recorded after.
     * Merged neighbours freed on one stream keep the later. */
    uint64_t free_points[RT_FREE_STREAMS];
    uint8_t free_stream_count;
    uint64_t tick; /* last placement (live) or release (free), least recent first */
    int class_idx; /* its slab's pool's class, unless moved_in */
    int device; /* the job's own managed memory: the device it was counted on */
    uint32_t step_id; /* 1 + its allocation's index in its step (0: not recorded) */
    uint32_t step_no; /* the step it was allocated in */
    bool free;
    /* Managed slab memory the runtime moved to the pool's GPU and counts in the
     * device's resident bytes until it moves it away: live or free, a block's
     * pages stay there until then. */
    bool on_gpu;
    /* Moved to another class when reported saved for backward: counted,
     * placed and evicted as class_idx until it is freed (for the job's own
     * managed memory, which has no slab: counted and advised). */
    bool moved_in;
    uint8_t api;      /* the enum alloc_api bit it was allocated through */
    uint32_t site;    /* the report's allocation site + 1 (sites.c), 0: none */
    uint64_t born_ns; /* when allocated, while sites are kept */
    /* What it was classified by, kept to classify it again when it is
     * reported saved: its sequence number and the first word of the phase
     * and tag bitsets then (policies with up to 64 of each). */
    uint64_t seq, phase_word, tag_word;
};

struct pool {
    int class_idx, device;
    struct slab *slabs;
    struct block *bins[2][RT_BINS];      /* [on the GPU][power of two] */
    uint64_t bin_mask[2];                /* bit i: bins[k][i] is not empty */
    struct block *lru_head, *lru_tail;   /* live blocks on the GPU, least recent first */
    struct block *idle_head, *idle_tail; /* free blocks still on the GPU, oldest first */
    uint64_t lru_bytes, idle_bytes;      /* the bytes in those two lists */
    struct block *guests; /* live blocks of other pools' slabs moved to this pool's class */
    /* Its memory never moves (device or pinned host memory): every free block
     * is already where it is used, so any may serve a large request, as free
     * space on the GPU does, before the pool grows by a slab of its own. */
    bool in_place;
    bool advice_warned;
    /* The clock its slabs are stamped by (slab.taken), shared by the pools
     * of one GPU; NULL: they are not. */
    uint64_t *clock;
};

enum alloc_mode {
    MODE_STREAM, /* cudaMallocAsync / pluggable: ordered on a stream */
    MODE_ANY,    /* cudaMalloc: usable by any stream at once */
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

/* Live block B of another pool's slab joins / leaves P's guests. */
void pool_guest_add(struct pool *p, struct block *b);
void pool_guest_remove(struct pool *p, struct block *b);

/* Block records, recycled so the hot path does not call malloc. */
struct block *block_new(void);
void block_release(struct block *b);

/* Carve a new slab [BASE, BASE+SIZE) into POOL as one free block (off the
 * GPU). NULL: no memory for the records. */
struct slab *pool_add_slab(struct pool *p, uintptr_t base, size_t size, bool dedicated);

/* How a request of SIZE bytes is served by a pool of SLAB_BYTES slabs: WANT
 * bytes (SIZE rounded up to RT_ALIGN); a large request (over half a slab)
 * takes a free block off the GPU of at most MAX bytes, close to its size (in
 * a pool whose memory moves), and otherwise a DEDICATED slab of its own; a
 * small one grows the pool by a slab. GROW: the slab to add when no free
 * block serves. FITTED: a slab of the request's own size (WANT rounded up to
 * 2 MiB), for a small request when no whole slab fits. False: SIZE is too
 * large to round. */
struct pool_request {
    size_t want, max, grow, fitted;
    bool dedicated;
};
bool pool_request_for(size_t size, size_t slab_bytes, struct pool_request *r);

/* Is STREAM idle (its work done)? Asked only for MODE_ANY. */
typedef bool (*stream_idle_fn)(void *ctx, cudaStream_t stream);

/* The best free block of at least SIZE bytes for MODE on STREAM: free space
 * on the GPU first, whatever its size, then free space elsewhere of at most
 * MAX bytes, then (in an in_place pool) of any size; in each, the smallest
 * bin that holds one, and in a bin a block that needs no wait before one
 * that does, the lowest address first (*wait: STREAM must first wait for
 * the streams in the block's free_streams). NULL: none. */
struct block *pool_find_free(const struct pool *p, size_t size, size_t max, cudaStream_t stream,
                             enum alloc_mode mode, stream_idle_fn idle, void *idle_ctx,
                             bool *wait);
/* Free block B leaves the bins, split to SIZE bytes (the rest stays free). */
void pool_take(struct pool *p, struct block *b, size_t size);
/* Undo pool_take's removal: B, still free, back in its bin. */
void pool_untake(struct pool *p, struct block *b);
/* Live block B is free again, used last by STREAM up to POINT (MODE_ANY: by
 * no stream); merged with free neighbours. */
void pool_put(struct pool *p, struct block *b, cudaStream_t stream, uint64_t point,
              enum alloc_mode mode);
/* Free block B's pages were placed on the GPU: it moves to the GPU bins and
 * the idle list. */
void pool_idle_arrived_gpu(struct pool *p, struct block *b);
/* Free block B's pages were sent off the GPU: it moves to the other bins
 * and merges with free neighbours that are off the GPU too. */
void pool_idle_left_gpu(struct pool *p, struct block *b);

/* The block of slab S holding ADDR (free or live), or NULL. */
struct block *slab_block_at(const struct slab *s, uintptr_t addr);

/* Does P have a slab with no live block (of MIN_SIZE bytes or more)? */
bool pool_has_empty_slab(const struct pool *p);
bool pool_has_empty_slab_of(const struct pool *p, size_t min_size);
/* Unlink every slab of P with no live block; returns them, linked by next.
 * Their blocks are still attached: read them, then slab_destroy. */
struct slab *pool_detach_empty_slabs(struct pool *p);
/* Bytes of detached slab S counted as on the GPU (its free blocks on_gpu). */
size_t slab_gpu_bytes(const struct slab *s);
/* Detached slab S, kept after all, joins P's slabs again (its blocks never left the bins). */
void pool_reattach_slab(struct pool *p, struct slab *s);
/* Release a detached slab's records. */
void slab_destroy(struct pool *p, struct slab *s);
/* Release every record of P and P itself. */
void pool_destroy(struct pool *p);

#endif
