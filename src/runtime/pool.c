/* Per class × device pools: a stream-ordered caching sub-allocator over slabs.
 *
 * Free blocks sit in power-of-two bins. A block freed on stream S is reused at
 * once by S; another stream T may take it only after T waits on an event
 * recorded on S, so the reuse is ordered after S's last use without any host
 * synchronisation. Blocks freed with cudaFree (which synchronises the device)
 * are safe for every stream. Free neighbours merge even when freed on
 * different streams: the merged block remembers every stream (up to
 * RT_FREE_STREAMS) and its next user waits on each of them. */
#include <stdlib.h>
#include <string.h>

#include "runtime/log.h"
#include "runtime/runtime.h"

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

/* ---- address -> live block map (linear probing, backward-shift delete) ---- */

static size_t slot_of(uintptr_t addr, size_t cap)
{
    uint64_t h = (uint64_t)addr * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 20) & (cap - 1);
}

void map_init(struct block_map *m)
{
    memset(m, 0, sizeof *m);
}

void map_free(struct block_map *m)
{
    free(m->slots);
    map_init(m);
}

static int map_grow(struct block_map *m)
{
    size_t cap = m->cap ? m->cap * 2 : 1024;
    struct block **slots = calloc(cap, sizeof *slots);
    if (!slots)
        return -1;
    for (size_t i = 0; i < m->cap; i++) {
        struct block *b = m->slots[i];
        if (!b)
            continue;
        size_t j = slot_of(b->addr, cap);
        while (slots[j])
            j = (j + 1) & (cap - 1);
        slots[j] = b;
    }
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return 0;
}

int map_insert(struct block_map *m, struct block *b)
{
    if ((m->count + 1) * 4 > m->cap * 3 && map_grow(m) != 0)
        return -1;
    size_t j = slot_of(b->addr, m->cap);
    while (m->slots[j])
        j = (j + 1) & (m->cap - 1);
    m->slots[j] = b;
    m->count++;
    return 0;
}

struct block *map_find(const struct block_map *m, uintptr_t addr)
{
    if (!m->cap)
        return NULL;
    for (size_t j = slot_of(addr, m->cap); m->slots[j]; j = (j + 1) & (m->cap - 1))
        if (m->slots[j]->addr == addr)
            return m->slots[j];
    return NULL;
}

struct block *map_remove(struct block_map *m, uintptr_t addr)
{
    if (!m->cap)
        return NULL;
    size_t mask = m->cap - 1, j = slot_of(addr, m->cap);
    while (m->slots[j] && m->slots[j]->addr != addr)
        j = (j + 1) & mask;
    struct block *found = m->slots[j];
    if (!found)
        return NULL;
    /* Backward-shift deletion: move later members of the probe run into the
     * hole unless their home slot lies cyclically in (hole, k]. */
    size_t hole = j;
    for (size_t k = (hole + 1) & mask; m->slots[k]; k = (k + 1) & mask) {
        size_t home = slot_of(m->slots[k]->addr, m->cap);
        bool stays = hole < k ? (home > hole && home <= k) : (home > hole || home <= k);
        if (!stays) {
            m->slots[hole] = m->slots[k];
            hole = k;
        }
    }
    m->slots[hole] = NULL;
    m->count--;
    return found;
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
    if (b->on_gpu)
        gpu_list_append(&p->idle_head, &p->idle_tail, b);
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
    if (b->on_gpu)
        gpu_list_remove(&p->idle_head, &p->idle_tail, b);
}

/* ---- pools and slabs ---- */

static struct pool *pool_get(struct runtime *rt, int class_idx, int device)
{
    struct device_state *dev = device_get(rt, device);
    if (!dev)
        return NULL;
    if (!dev->pools[class_idx]) {
        struct pool *p = calloc(1, sizeof *p);
        if (!p)
            return NULL;
        p->class_idx = class_idx;
        p->device = device;
        dev->pools[class_idx] = p;
    }
    return dev->pools[class_idx];
}

static size_t round_up(size_t n, size_t to)
{
    return (n + to - 1) / to * to;
}

static void slab_release(struct runtime *rt, struct pool *p, struct slab *s)
{
    const struct program_class *cls = &rt->program->classes[p->class_idx];
    struct device_state *dev = &rt->devices[p->device];
    for (struct block *b = s->first, *next; b; b = next) {
        next = b->next;
        bin_remove(p, b);
        if (b->on_gpu)
            dev->resident_bytes -= b->size;
        block_release(b);
    }
    cudaError_t err = rt->cuda->free((void *)s->base);
    if (err != cudaSuccess)
        LOG(LOG_WARN, "releasing a %zu-byte slab of class '%s' failed: %s", s->size, cls->name,
            rt->cuda->get_error_string(err));
    if (cls->memory == MEMORY_MANAGED) {
        dev->managed_bytes -= s->size;
        ranges_remove(rt, s->base);
    } else {
        dev->resident_bytes -= s->size;
    }
    rt->class_stats[p->class_idx].slabs--;
    rt->class_stats[p->class_idx].slab_bytes -= s->size;
    free(s);
}

/* A slab with no live block, however fragmented its free space. Releasing it
 * is safe: cudaFree waits for the work that may still use it. */
static bool slab_empty(const struct slab *s)
{
    for (const struct block *b = s->first; b; b = b->next)
        if (!b->free)
            return false;
    return true;
}

size_t pool_trim(struct runtime *rt, int device)
{
    size_t released = 0;
    for (int d = 0; d < RT_MAX_DEVICES; d++) {
        if (!rt->devices[d].known || (device >= 0 && d != device))
            continue;
        for (size_t c = 0; c < rt->program->class_count; c++) {
            struct pool *p = rt->devices[d].pools[c];
            for (struct slab **sp = p ? &p->slabs : NULL; sp && *sp;) {
                struct slab *s = *sp;
                if (slab_empty(s)) {
                    *sp = s->next;
                    released += s->size;
                    slab_release(rt, p, s);
                } else {
                    sp = &s->next;
                }
            }
        }
    }
    return released;
}

bool cap_admits(struct runtime *rt, int class_idx, int device, size_t size)
{
    struct device_state *dev = &rt->devices[device];
    if (dev->managed_bytes + size <= dev->cap_bytes)
        return true;
    pool_trim(rt, device); /* give back empty slabs of this device before refusing */
    if (dev->managed_bytes + size <= dev->cap_bytes)
        return true;
    rt->class_stats[class_idx].cap_refusals++;
    timeline_add(rt, TL_CAP_REFUSAL, class_idx, device, size);
    LOG(LOG_INFO, "cap: refusing %zu bytes of managed memory for class '%s' on GPU %d "
        "(%llu of %llu held)", size, rt->program->classes[class_idx].name, device,
        (unsigned long long)dev->managed_bytes, (unsigned long long)dev->cap_bytes);
    return false;
}

static cudaError_t slab_create(struct runtime *rt, struct pool *p, size_t size, bool dedicated,
                               struct slab **out)
{
    const struct program_class *cls = &rt->program->classes[p->class_idx];
    struct class_stats *st = &rt->class_stats[p->class_idx];
    struct device_state *dev = &rt->devices[p->device];
    bool managed = cls->memory == MEMORY_MANAGED;
    if (managed && !cap_admits(rt, p->class_idx, p->device, size))
        return cudaErrorMemoryAllocation;
    struct slab *s = calloc(1, sizeof *s);
    struct block *b = block_new();
    if (!s || !b) {
        free(s);
        if (b)
            block_release(b);
        return cudaErrorMemoryAllocation;
    }
    void *base = NULL;
    uint64_t t0 = now_ns();
    cudaError_t err = managed ? rt->cuda->malloc_managed(&base, size, cudaMemAttachGlobal)
                              : rt->cuda->malloc(&base, size);
    if (err != cudaSuccess) {
        if (err == cudaErrorMemoryAllocation && pool_trim(rt, p->device) > 0)
            err = managed ? rt->cuda->malloc_managed(&base, size, cudaMemAttachGlobal)
                          : rt->cuda->malloc(&base, size);
        if (err != cudaSuccess) {
            free(s);
            block_release(b);
            return err;
        }
    }
    s->base = (uintptr_t)base;
    s->size = size;
    s->pool = p;
    s->dedicated = dedicated;
    s->next = p->slabs;
    p->slabs = s;
    *b = (struct block){.addr = s->base, .size = size, .slab = s, .free = true,
                        .class_idx = p->class_idx};
    s->first = b;
    if (managed) {
        dev->managed_bytes += size;
        ranges_add(rt, s->base, size, p->class_idx);
        place_new_slab(rt, p, s);
    } else {
        dev->resident_bytes += size; /* device memory: all of it on the GPU at once */
    }
    bin_insert(p, b);
    rt->runtime_ns += now_ns() - t0;
    st->slabs++;
    st->slab_bytes += size;
    *out = s;
    return cudaSuccess;
}

/* Can a free block serve MODE on STREAM? Sets *wait when STREAM must first
 * wait for other streams that last used it. */
static bool usable(const struct runtime *rt, const struct block *b, cudaStream_t stream,
                   enum alloc_mode mode, bool *wait)
{
    *wait = false;
    for (int i = 0; i < b->free_stream_count; i++) {
        if (mode == MODE_ANY) {
            if (rt->cuda->stream_query(b->free_streams[i]) != cudaSuccess)
                return false; /* cudaMalloc memory must be usable at once, anywhere */
        } else if (b->free_streams[i] != stream) {
            *wait = true;
        }
    }
    return true;
}

/* The best free block of at least SIZE bytes for STREAM. Free space whose
 * pages are on the GPU comes first, whatever its size: reusing it moves
 * nothing, what is left of it stays there free, and the budget is spared
 * taking back space only to place other space again. Then free space
 * elsewhere, of at most MAX bytes. In either, the smallest bin that has one,
 * and in a bin a block that needs no wait before one that does. Scans at most
 * 64 blocks a bin. */
static struct block *find_free(struct runtime *rt, struct pool *p, size_t size, size_t max,
                               cudaStream_t stream, enum alloc_mode mode, bool *wait)
{
    for (int on_gpu = 1; on_gpu >= 0; on_gpu--) {
        size_t limit = on_gpu ? SIZE_MAX : max;
        /* Only the bins that hold a block, from SIZE's up. */
        for (uint64_t bins = p->bin_mask[on_gpu] & (~0ull << bin_of(size)); bins;
             bins &= bins - 1) {
            int i = __builtin_ctzll(bins);
            struct block *waiting = NULL;
            int scanned = 0;
            for (struct block *b = p->bins[on_gpu][i]; b && scanned < 64;
                 b = b->link_next, scanned++) {
                bool w;
                if (b->size < size || b->size > limit || !usable(rt, b, stream, mode, &w))
                    continue;
                if (!w) {
                    *wait = false;
                    return b;
                }
                if (!waiting)
                    waiting = b;
            }
            if (waiting) {
                *wait = true;
                return waiting;
            }
        }
    }
    *wait = false;
    return NULL;
}

/* Order STREAM after every other stream that used B: an event recorded there
 * now, waited on here. No host synchronisation. */
static bool order_after(struct runtime *rt, struct block *b, cudaStream_t stream)
{
    for (int i = 0; i < b->free_stream_count; i++)
        if (!stream_follow(rt, b->slab->pool->device, stream, b->free_streams[i]))
            return false;
    return true;
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
    rest->free_stream_count = b->free_stream_count;
    if (b->next)
        b->next->prev = rest;
    b->next = rest;
    b->size = size;
    bin_insert(p, rest);
}

cudaError_t pool_alloc(struct runtime *rt, int class_idx, int device, size_t size,
                       cudaStream_t stream, enum alloc_mode mode, struct block **out)
{
    struct pool *p = pool_get(rt, class_idx, device);
    if (!p)
        return cudaErrorMemoryAllocation;
    size_t want = round_up(size ? size : 1, RT_ALIGN);
    if (want < size)
        return cudaErrorMemoryAllocation; /* size near SIZE_MAX */
    size_t slab_bytes = rt->program->slab_bytes;
    bool large = want > slab_bytes / 2;
    size_t dedicated = round_up(want, 2u << 20); /* the slab a large request would get */
    bool wait = false;
    /* A large request takes a block close to its size, not a much larger one. */
    size_t max = large ? dedicated + dedicated / 8 : SIZE_MAX;
    struct block *b = find_free(rt, p, want, max, stream, mode, &wait);
    if (b && wait && !order_after(rt, b, stream))
        b = NULL;
    if (b && wait)
        rt->class_stats[class_idx].cross_stream_reuses++;
    if (!b) {
        struct slab *s;
        size_t bytes = large ? dedicated : slab_bytes;
        cudaError_t err = slab_create(rt, p, bytes, large, &s);
        if (err != cudaSuccess)
            return err;
        b = s->first;
    }
    bin_remove(p, b);
    split(p, b, want);
    if (map_insert(&rt->map, b) != 0) {
        bin_insert(p, b);
        return cudaErrorMemoryAllocation;
    }
    b->free = false;
    b->free_stream_count = 0;
    b->stream = stream;
    b->requested = size;
    *out = b;
    return cudaSuccess;
}

/* The streams of A and B together, when they fit; false otherwise. */
static bool union_streams(const struct block *a, const struct block *b, cudaStream_t *out,
                          uint8_t *count)
{
    uint8_t n = a->free_stream_count;
    memcpy(out, a->free_streams, n * sizeof *out);
    for (int i = 0; i < b->free_stream_count; i++) {
        bool seen = false;
        for (int k = 0; k < n; k++)
            seen |= out[k] == b->free_streams[i];
        if (seen)
            continue;
        if (n == RT_FREE_STREAMS)
            return false;
        out[n++] = b->free_streams[i];
    }
    *count = n;
    return true;
}

/* Merge B into its free neighbour A (A directly before B) when their streams
 * fit and both are on the GPU or both are not. */
static struct block *merge(struct pool *p, struct block *a, struct block *b)
{
    cudaStream_t streams[RT_FREE_STREAMS];
    uint8_t count;
    if (!a || !b || !a->free || !b->free || a->on_gpu != b->on_gpu ||
        !union_streams(a, b, streams, &count))
        return NULL;
    bin_remove(p, a);
    bin_remove(p, b);
    memcpy(a->free_streams, streams, sizeof streams);
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

void pool_free(struct block *b, cudaStream_t stream, enum alloc_mode mode)
{
    struct pool *p = b->slab->pool;
    b->free = true;
    b->free_stream_count = mode == MODE_ANY ? 0 : 1;
    b->free_streams[0] = stream;
    bin_insert(p, b);
    coalesce(p, b);
}

void pool_idle_left_gpu(struct runtime *rt, struct block *b)
{
    struct pool *p = b->slab->pool;
    bin_remove(p, b);
    b->on_gpu = false;
    rt->devices[p->device].resident_bytes -= b->size;
    bin_insert(p, b);
    coalesce(p, b);
}

void pool_destroy_all(struct runtime *rt)
{
    for (int d = 0; d < RT_MAX_DEVICES; d++) {
        struct device_state *dev = &rt->devices[d];
        if (!dev->known)
            continue;
        for (size_t c = 0; c < rt->program->class_count; c++) {
            struct pool *p = dev->pools[c];
            if (!p)
                continue;
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
        free(dev->pools);
        dev->pools = NULL;
    }
}
