/* A class's pool as a data structure: free blocks in power-of-two bins, kept
 * apart for blocks whose pages are on the GPU, with a bit per non-empty bin.
 *
 * A block freed on stream S is reused at once by S; another stream T may
 * take it only after T waits for S (the caller orders it), so the reuse is
 * ordered after S's last use without any host synchronisation. Blocks freed
 * with cudaFree (which synchronises the device) are safe for every stream.
 * Free neighbours merge even when freed on different streams: the merged
 * block remembers every stream (up to RT_FREE_STREAMS). */
#include <stdlib.h>
#include <string.h>

#include "runtime/pool.h"

/* ---- block records: recycled, so the hot path does not call malloc ---- */

static struct block *spare_blocks;

struct block *block_new(void)
{
    if (!spare_blocks) {
        enum { CHUNK = 1024 };
        struct block *chunk = calloc(CHUNK, sizeof *chunk);
        if (!chunk)
            return NULL;
        for (int i = 0; i < CHUNK; i++) {
            chunk[i].link_next = spare_blocks;
            spare_blocks = &chunk[i];
        }
    }
    struct block *b = spare_blocks;
    spare_blocks = b->link_next;
    memset(b, 0, sizeof *b);
    return b;
}

void block_release(struct block *b)
{
    b->link_next = spare_blocks;
    spare_blocks = b;
}

/* ---- free bins: power-of-two sizes, apart for blocks on the GPU ---- */

static int bin_of(size_t size)
{
    return 63 - __builtin_clzll((unsigned long long)size);
}

_Static_assert(RT_BINS <= 64, "one bit per bin in pool.bin_mask");

/* A free block still on the GPU is also on its pool's idle list, so the
 * budget can take back its pages: both memberships change together. */
static void bin_insert(struct pool *p, struct block *b)
{
    int i = bin_of(b->size);
    struct block **bin = &p->bins[b->on_gpu][i];
    b->link_prev = NULL;
    b->link_next = *bin;
    if (*bin)
        (*bin)->link_prev = b;
    *bin = b;
    p->bin_mask[b->on_gpu] |= 1ull << i;
    if (b->on_gpu) {
        gpu_list_append(&p->idle_head, &p->idle_tail, b);
        p->idle_bytes += b->size;
    }
}

static void bin_remove(struct pool *p, struct block *b)
{
    int i = bin_of(b->size);
    if (b->link_prev)
        b->link_prev->link_next = b->link_next;
    else if (!(p->bins[b->on_gpu][i] = b->link_next))
        p->bin_mask[b->on_gpu] &= ~(1ull << i);
    if (b->link_next)
        b->link_next->link_prev = b->link_prev;
    b->link_prev = b->link_next = NULL;
    if (b->on_gpu) {
        gpu_list_remove(&p->idle_head, &p->idle_tail, b);
        p->idle_bytes -= b->size;
    }
}

/* ---- slabs ---- */

struct slab *pool_add_slab(struct pool *p, uintptr_t base, size_t size, bool dedicated)
{
    struct slab *s = calloc(1, sizeof *s);
    struct block *b = block_new();
    if (!s || !b) {
        free(s);
        if (b)
            block_release(b);
        return NULL;
    }
    *s = (struct slab){.base = base, .size = size, .pool = p, .first = b, .next = p->slabs,
                       .dedicated = dedicated, .taken = p->clock ? ++*p->clock : 0};
    p->slabs = s;
    *b = (struct block){.addr = base, .size = size, .slab = s, .free = true,
                        .class_idx = p->class_idx};
    bin_insert(p, b);
    return s;
}

/* A slab with no live block, however fragmented its free space. */
static bool slab_empty(const struct slab *s)
{
    for (const struct block *b = s->first; b; b = b->next)
        if (!b->free)
            return false;
    return true;
}

bool pool_has_empty_slab_of(const struct pool *p, size_t min_size)
{
    for (const struct slab *s = p->slabs; s; s = s->next)
        if (s->size >= min_size && slab_empty(s))
            return true;
    return false;
}

bool pool_has_empty_slab(const struct pool *p)
{
    return pool_has_empty_slab_of(p, 0);
}

struct slab *pool_detach_empty_slabs(struct pool *p)
{
    struct slab *empty = NULL;
    for (struct slab **sp = &p->slabs; *sp;) {
        struct slab *s = *sp;
        if (slab_empty(s)) {
            *sp = s->next;
            s->next = empty;
            empty = s;
        } else {
            sp = &s->next;
        }
    }
    return empty;
}

size_t slab_gpu_bytes(const struct slab *s)
{
    size_t bytes = 0;
    for (const struct block *b = s->first; b; b = b->next)
        if (b->on_gpu)
            bytes += b->size;
    return bytes;
}

void pool_reattach_slab(struct pool *p, struct slab *s)
{
    s->next = p->slabs;
    p->slabs = s;
}

void slab_destroy(struct pool *p, struct slab *s)
{
    for (struct block *b = s->first, *next; b; b = next) {
        next = b->next;
        bin_remove(p, b);
        block_release(b);
    }
    free(s);
}

void pool_destroy(struct pool *p)
{
    for (struct slab *s = p->slabs, *n; s; s = n) {
        n = s->next;
        for (struct block *b = s->first, *bn; b; b = bn) {
            bn = b->next;
            block_release(b);
        }
        free(s);
    }
    free(p);
}

/* ---- finding, splitting, merging ---- */

static size_t round_up(size_t n, size_t to)
{
    return (n + to - 1) / to * to;
}

bool pool_request_for(size_t size, size_t slab_bytes, struct pool_request *r)
{
    size_t want = round_up(size ? size : 1, RT_ALIGN);
    if (want < size || want > SIZE_MAX - (2u << 20))
        return false; /* size near SIZE_MAX */
    bool large = want > slab_bytes / 2;
    size_t fitted = round_up(want, 2u << 20); /* a slab of the request's own size */
    *r = (struct pool_request){.want = want,
                               /* a large request takes a block close to its size */
                               .max = large ? fitted + fitted / 8 : SIZE_MAX,
                               .grow = large ? fitted : slab_bytes,
                               .fitted = fitted,
                               .dedicated = large};
    return true;
}

/* Can a free block serve MODE on STREAM? Sets *wait when STREAM must first
 * wait for other streams that last used it. */
static bool usable(const struct block *b, cudaStream_t stream, enum alloc_mode mode,
                   stream_idle_fn idle, void *idle_ctx, bool *wait)
{
    *wait = false;
    for (int i = 0; i < b->free_stream_count; i++) {
        if (mode == MODE_ANY) {
            if (!idle(idle_ctx, b->free_streams[i]))
                return false; /* cudaMalloc memory must be usable at once, anywhere */
        } else if (b->free_streams[i] != stream) {
            *wait = true;
        }
    }
    return true;
}

/* Free space whose pages are on the GPU comes first, whatever its size:
 * reusing it moves nothing, what is left of it stays there free, and the
 * budget is spared taking back space only to place other space again. In a
 * bin, the lowest address of the first 64 blocks that serve: address order
 * packs live blocks into the older slabs and lets the newer ones empty, so a
 * pool that must grow can give them back (on the 1.75B Llama's trace: 8.83
 * GiB of slabs at the peak against 9.04 taking the bin's first block). */
struct block *pool_find_free(const struct pool *p, size_t size, size_t max, cudaStream_t stream,
                             enum alloc_mode mode, stream_idle_fn idle, void *idle_ctx,
                             bool *wait)
{
    /* Passes: free space on the GPU, any size; then elsewhere, close to SIZE;
     * then, in a pool whose memory never moves, elsewhere of any size. */
    for (int pass = 0; pass < (p->in_place && max != SIZE_MAX ? 3 : 2); pass++) {
        int on_gpu = pass == 0;
        size_t limit = pass == 1 ? max : SIZE_MAX;
        /* Only the bins that hold a block, from SIZE's up. */
        for (uint64_t bins = p->bin_mask[on_gpu] & (~0ull << bin_of(size)); bins;
             bins &= bins - 1) {
            int i = __builtin_ctzll(bins);
            struct block *ready = NULL, *waiting = NULL;
            int scanned = 0;
            for (struct block *b = p->bins[on_gpu][i]; b && scanned < 64;
                 b = b->link_next, scanned++) {
                bool w;
                if (b->size < size || b->size > limit || b->slab->quarantined ||
                    !usable(b, stream, mode, idle, idle_ctx, &w))
                    continue;
                struct block **pick = w ? &waiting : &ready;
                if (!*pick || b->addr < (*pick)->addr)
                    *pick = b;
            }
            if (ready || waiting) {
                *wait = !ready;
                return ready ? ready : waiting;
            }
        }
    }
    *wait = false;
    return NULL;
}

static void split(struct pool *p, struct block *b, size_t size)
{
    if (b->size - size < RT_ALIGN)
        return;
    struct block *rest = block_new();
    if (!rest)
        return; /* keep the whole block: wasteful, never wrong */
    *rest = (struct block){.addr = b->addr + size, .size = b->size - size, .slab = b->slab,
                           .prev = b, .next = b->next, .free = true, .class_idx = b->class_idx,
                           .on_gpu = b->on_gpu};
    memcpy(rest->free_streams, b->free_streams, sizeof rest->free_streams);
    memcpy(rest->free_points, b->free_points, sizeof rest->free_points);
    rest->free_stream_count = b->free_stream_count;
    if (b->next)
        b->next->prev = rest;
    b->next = rest;
    b->size = size;
    bin_insert(p, rest);
}

void pool_take(struct pool *p, struct block *b, size_t size)
{
    bin_remove(p, b);
    split(p, b, size);
    if (p->clock)
        b->slab->taken = ++*p->clock;
}

void pool_untake(struct pool *p, struct block *b)
{
    bin_insert(p, b);
}

/* The streams of A and B together, each with the later of its points, when
 * they fit; false otherwise. */
static bool union_streams(const struct block *a, const struct block *b, cudaStream_t *out,
                          uint64_t *points, uint8_t *count)
{
    uint8_t n = a->free_stream_count;
    memcpy(out, a->free_streams, n * sizeof *out);
    memcpy(points, a->free_points, n * sizeof *points);
    for (int i = 0; i < b->free_stream_count; i++) {
        int k = 0;
        while (k < n && out[k] != b->free_streams[i])
            k++;
        if (k == n && n == RT_FREE_STREAMS)
            return false;
        if (k == n) {
            out[n++] = b->free_streams[i];
            points[k] = b->free_points[i];
        } else if (b->free_points[i] > points[k]) {
            points[k] = b->free_points[i];
        }
    }
    *count = n;
    return true;
}

/* Merge B into its free neighbour A (A directly before B) when their streams
 * fit and both are on the GPU or both are not. */
static struct block *merge(struct pool *p, struct block *a, struct block *b)
{
    cudaStream_t streams[RT_FREE_STREAMS];
    uint64_t points[RT_FREE_STREAMS];
    uint8_t count;
    if (!a || !b || !a->free || !b->free || a->on_gpu != b->on_gpu ||
        !union_streams(a, b, streams, points, &count))
        return NULL;
    bin_remove(p, a);
    bin_remove(p, b);
    memcpy(a->free_streams, streams, sizeof streams);
    memcpy(a->free_points, points, sizeof points);
    a->free_stream_count = count;
    a->size += b->size;
    a->next = b->next;
    if (b->next)
        b->next->prev = a;
    block_release(b);
    bin_insert(p, a);
    return a;
}

static void coalesce(struct pool *p, struct block *b)
{
    struct block *m = merge(p, b, b->next);
    if (m)
        b = m;
    m = merge(p, b->prev, b);
    if (m)
        b = m;
    if (!b->prev)
        b->slab->first = b;
}

struct block *slab_block_at(const struct slab *s, uintptr_t addr)
{
    for (struct block *b = s->first; b; b = b->next)
        if (addr >= b->addr && addr - b->addr < b->size)
            return b;
    return NULL;
}

void pool_guest_add(struct pool *p, struct block *b)
{
    b->link_prev = NULL;
    b->link_next = p->guests;
    if (p->guests)
        p->guests->link_prev = b;
    p->guests = b;
}

void pool_guest_remove(struct pool *p, struct block *b)
{
    if (b->link_prev)
        b->link_prev->link_next = b->link_next;
    else
        p->guests = b->link_next;
    if (b->link_next)
        b->link_next->link_prev = b->link_prev;
    b->link_prev = b->link_next = NULL;
}

void pool_put(struct pool *p, struct block *b, cudaStream_t stream, uint64_t point,
              enum alloc_mode mode)
{
    b->free = true;
    b->free_stream_count = mode == MODE_ANY ? 0 : 1;
    b->free_streams[0] = stream;
    b->free_points[0] = point;
    bin_insert(p, b);
    coalesce(p, b);
}

void pool_idle_left_gpu(struct pool *p, struct block *b)
{
    bin_remove(p, b);
    b->on_gpu = false;
    bin_insert(p, b);
    coalesce(p, b);
}

void pool_idle_arrived_gpu(struct pool *p, struct block *b)
{
    bin_remove(p, b);
    b->on_gpu = true;
    bin_insert(p, b);
}
