/* Where blocks live: advice on slabs, prefetch on triggers, and the per-GPU
 * budget with eviction by priority, least recently placed first. Everything
 * here is a hint to the driver: a failed call is counted and logged, never an
 * error for the job. Called with rt->lock held. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "runtime/log.h"

#ifdef HAVE_NUMA
#include <numa.h>
#endif
#include "runtime/runtime.h"

struct device_state *device_get(struct runtime *rt, int device)
{
    if (device < 0 || device >= RT_MAX_DEVICES)
        return NULL;
    struct device_state *dev = &rt->devices[device];
    if (dev->known)
        return dev;
    dev->pools = calloc(rt->program->class_count, sizeof *dev->pools);
    if (!dev->pools)
        return NULL;
    /* Learned while DEVICE is current: allocations arrive on their own device. */
    size_t free_b = 0, total_b = 0;
    if (rt->cuda->mem_get_info(&free_b, &total_b) != cudaSuccess || total_b == 0) {
        LOG(LOG_WARN, "cannot read the memory of GPU %d; budget and cap use 0 bytes", device);
        total_b = 0;
    }
    dev->total_bytes = total_b;
    const struct program *p = rt->program;
    dev->budget_bytes = !p->budget_gpu.given ? UINT64_MAX
                        : p->budget_gpu.percent ? total_b / 100 * p->budget_gpu.value
                                                : p->budget_gpu.value;
    /* Without a cap, 90% of the GPU: an oversubscribed card can hang. */
    dev->steer = p->budget_gpu.given;
    for (size_t c = 0; c < p->class_count && dev->steer; c++)
        if (p->classes[c].read_mostly && p->classes[c].memory == MEMORY_MANAGED)
            LOG(LOG_WARN, "GPU %d: class '%s': advise read_mostly is not applied under a budget "
                          "(a read-only GPU copy would outlive an eviction)", device,
                p->classes[c].name);
    dev->cap_bytes = !p->cap_managed.given  ? total_b / 100 * PROGRAM_DEFAULT_CAP_PERCENT
                     : p->cap_managed.percent ? total_b / 100 * p->cap_managed.value
                                              : p->cap_managed.value;
    int numa = -1;
    if (rt->cuda->device_get_attribute(&numa, cudaDevAttrHostNumaId, device) != cudaSuccess)
        numa = -1;
    dev->host_numa_id = numa;
    /* Evictions get a stream of their own: a slow move to the host must not
     * hold up placements, which the job's stream waits for. */
    if (rt->cuda->stream_create_with_flags(&dev->evict_stream, cudaStreamNonBlocking) != cudaSuccess)
        dev->evict_stream = NULL;
    /* One event orders every stream after another (stream_follow). */
    if (rt->cuda->event_create_with_flags(&dev->follow_event, cudaEventDisableTiming) != cudaSuccess)
        dev->follow_event = NULL;
    if (rt->cuda->stream_create_with_flags(&dev->stream, cudaStreamNonBlocking) != cudaSuccess) {
        LOG(LOG_WARN, "cannot create a prefetch stream on GPU %d; triggered prefetches use "
                      "one prefetch per block on the default stream", device);
        dev->stream = NULL;
    }
    dev->known = true;
    profile_device_seen(rt);
    char budget[32] = "none";
    if (dev->budget_bytes != UINT64_MAX)
        snprintf(budget, sizeof budget, "%llu MiB", (unsigned long long)(dev->budget_bytes >> 20));
    LOG(LOG_INFO, "GPU %d: %llu MiB, budget %s, managed cap %llu MiB, host NUMA node %d", device,
        (unsigned long long)(total_b >> 20), budget, (unsigned long long)(dev->cap_bytes >> 20),
        numa);
    return dev;
}

/* Does host NUMA node NODE exist with memory? Asked of libnuma once per node;
 * a missing node is reported once and placement falls back to plain host. */
static bool numa_node_usable(int node)
{
    static _Atomic signed char known[1024]; /* 0 unknown, 1 usable, -1 not */
    if (node < 0 || node >= 1024)
        return false;
    signed char k = atomic_load(&known[node]);
    if (k)
        return k > 0;
    bool ok;
#ifdef HAVE_NUMA
    ok = numa_available() >= 0 ? node <= numa_max_node() && numa_node_size64(node, NULL) > 0
                               : node == 0;
#else
    ok = true; /* built without libnuma: trust the policy, CUDA will say if it is wrong */
#endif
    if (!ok)
        LOG(LOG_WARN, "host NUMA node %d does not exist here; placing on plain host memory", node);
    atomic_store(&known[node], ok ? 1 : -1);
    return ok;
}

struct cudaMemLocation place_location(const struct runtime *rt, struct program_place place,
                                      int device)
{
    struct cudaMemLocation loc = {cudaMemLocationTypeInvalid, 0};
    switch (place.kind) {
    case LOC_GPU:
        loc.type = cudaMemLocationTypeDevice;
        loc.id = place.index >= 0 ? place.index : device;
        break;
    case LOC_HOST: loc.type = cudaMemLocationTypeHost; break;
    case LOC_HOST_NUMA:
        loc.type = numa_node_usable(place.index) ? cudaMemLocationTypeHostNuma
                                                 : cudaMemLocationTypeHost;
        loc.id = loc.type == cudaMemLocationTypeHostNuma ? place.index : 0;
        break;
    case LOC_HOST_NEAR: {
        int numa = device >= 0 && device < RT_MAX_DEVICES ? rt->devices[device].host_numa_id : -1;
        loc.type = numa >= 0 ? cudaMemLocationTypeHostNuma : cudaMemLocationTypeHost;
        loc.id = numa >= 0 ? numa : 0;
        break;
    }
    default: break;
    }
    return loc;
}

static bool is_gpu(struct cudaMemLocation loc)
{
    return loc.type == cudaMemLocationTypeDevice;
}

static void advise_failed(struct runtime *rt, int class_idx, bool *warned, const char *what,
                          cudaError_t err)
{
    rt->class_stats[class_idx].advice_errors++;
    if (!*warned) {
        *warned = true;
        LOG(LOG_WARN, "class '%s': %s failed (%s); the class runs without it",
            rt->program->classes[class_idx].name, what, rt->cuda->get_error_string(err));
    }
}

static struct cudaMemLocation host_of(const struct runtime *rt, int class_idx, int device)
{
    struct program_place place = rt->program->classes[class_idx].place;
    bool on_host = place.kind == LOC_HOST || place.kind == LOC_HOST_NUMA ||
                   place.kind == LOC_HOST_NEAR;
    return place_location(rt, on_host ? place : (struct program_place){LOC_HOST, -1}, device);
}

/* Under a budget the runtime alone moves managed pages to the GPU: every
 * slab prefers the host and is mapped by its GPU, so a GPU touching a block
 * the runtime did not place there reads it over the link instead of faulting
 * it in uncounted. Read-mostly copies are not made then: a GPU copy would
 * stay behind when the block is moved to the host. */
static void advise(struct runtime *rt, int class_idx, int device, void *ptr, size_t size,
                   bool *warned)
{
    const struct program_class *cls = &rt->program->classes[class_idx];
    bool steer = rt->devices[device].steer && cls->memory == MEMORY_MANAGED;
    cudaError_t err;
    if (cls->read_mostly && !steer) {
        struct cudaMemLocation loc = {cudaMemLocationTypeDevice, device};
        err = rt->cuda->mem_advise(ptr, size, cudaMemAdviseSetReadMostly, loc);
        if (err != cudaSuccess)
            advise_failed(rt, class_idx, warned, "read_mostly advice", err);
    }
    if (steer || (cls->place.kind != LOC_UNSET && cls->place.kind != LOC_NONE)) {
        struct cudaMemLocation loc = steer ? host_of(rt, class_idx, device)
                                           : place_location(rt, cls->place, device);
        err = rt->cuda->mem_advise(ptr, size, cudaMemAdviseSetPreferredLocation, loc);
        if (err != cudaSuccess)
            advise_failed(rt, class_idx, warned, "preferred location", err);
    }
    if (steer) {
        err = rt->cuda->mem_advise(ptr, size, cudaMemAdviseSetAccessedBy,
                                   (struct cudaMemLocation){cudaMemLocationTypeDevice, device});
        if (err != cudaSuccess)
            advise_failed(rt, class_idx, warned, "accessed-by advice", err);
    }
    for (int i = 0; i < cls->access_count; i++) {
        struct cudaMemLocation loc = place_location(rt, cls->access[i], device);
        if (steer && is_gpu(loc) && loc.id == device)
            continue; /* given above */
        err = rt->cuda->mem_advise(ptr, size, cudaMemAdviseSetAccessedBy, loc);
        if (err != cudaSuccess)
            advise_failed(rt, class_idx, warned, "accessed-by advice", err);
    }
}

/* ---- what the runtime holds on each GPU ---- */

/* Count B's pages as on its pool's GPU; a live block joins the pool's LRU. */
static void gpu_take(struct runtime *rt, struct block *b)
{
    struct pool *p = b->slab->pool;
    b->on_gpu = true;
    b->tick = ++rt->tick;
    rt->devices[p->device].resident_bytes += b->size;
    if (!b->free)
        gpu_list_append(&p->lru_head, &p->lru_tail, b);
}

/* Live block B leaves the GPU. */
static void gpu_leave(struct runtime *rt, struct block *b)
{
    struct pool *p = b->slab->pool;
    gpu_list_remove(&p->lru_head, &p->lru_tail, b);
    b->on_gpu = false;
    rt->devices[p->device].resident_bytes -= b->size;
}

/* Free space still on the GPU, allocated again: live, most recent. */
static void gpu_take_live(struct runtime *rt, struct block *b)
{
    struct pool *p = b->slab->pool;
    gpu_list_append(&p->lru_head, &p->lru_tail, b);
    b->tick = ++rt->tick;
}

/* Live block B placed on the GPU again: the most recent now. */
static void gpu_touch(struct runtime *rt, struct block *b)
{
    struct pool *p = b->slab->pool;
    gpu_list_remove(&p->lru_head, &p->lru_tail, b);
    gpu_take_live(rt, b);
}

void place_new_slab(struct runtime *rt, struct pool *pool, struct slab *s)
{
    advise(rt, pool->class_idx, pool->device, (void *)s->base, s->size, &pool->advice_warned);
    /* A class prefetched to its GPU on allocation gets the whole slab there
     * once: blocks carved from it later need no prefetch of their own. Under
     * a budget each block is placed alone, so the budget holds only what is used. */
    const struct program *p = rt->program;
    const struct program_class *cls = &p->classes[pool->class_idx];
    if (rt->devices[pool->device].steer)
        return;
    for (uint32_t k = 0; k < cls->prefetch_count; k++) {
        const struct program_prefetch *pf = &p->prefetches[cls->prefetch_first + k];
        struct cudaMemLocation loc = place_location(rt, pf->dest, pool->device);
        if (pf->trigger == TRIGGER_ALLOC && is_gpu(loc) && loc.id == pool->device) {
            cudaError_t err = rt->cuda->mem_prefetch_async((void *)s->base, s->size, loc, 0,
                                                           rt->devices[pool->device].stream);
            if (err == cudaSuccess)
                gpu_take(rt, s->first); /* free: joins the idle list with its bin */
            rt->class_stats[pool->class_idx].prefetches++;
            rt->class_stats[pool->class_idx].prefetch_bytes += s->size;
            break;
        }
    }
}

void place_advise_range(struct runtime *rt, int class_idx, int device, void *ptr, size_t size)
{
    bool warned = false;
    advise(rt, class_idx, device, ptr, size, &warned);
}

static void prefetch_one(struct runtime *rt, uintptr_t addr, size_t size,
                         struct cudaMemLocation loc, cudaStream_t stream)
{
    if (!size)
        return;
    cudaError_t err = rt->cuda->mem_prefetch_async((void *)addr, size, loc, 0, stream);
    if (err != cudaSuccess)
        LOG(LOG_DEBUG, "prefetch of %zu bytes failed: %s", size, rt->cuda->get_error_string(err));
}

/* The whole 2 MiB pages inside [ADDR, ADDR+SIZE), which a discard may drop
 * without touching a neighbour: [*START, *END), empty when END <= START. */
static void whole_pages(uintptr_t addr, size_t size, uintptr_t *start, uintptr_t *end)
{
    const uintptr_t page = 2u << 20;
    *start = (addr + page - 1) & ~(page - 1);
    *end = (addr + size) & ~(page - 1);
}

static bool legacy_stream(cudaStream_t s)
{
    return !s || s == cudaStreamLegacy || s == cudaStreamPerThread;
}

bool stream_follow(struct runtime *rt, int device, cudaStream_t waiter, cudaStream_t signaler)
{
    if (waiter == signaler)
        return true;
    /* A wait takes the event as last recorded when it is issued, so the
     * device's one event serves every wait in turn (all under rt->lock);
     * without it, an event of its own for this wait. */
    cudaEvent_t ev = rt->devices[device].follow_event;
    bool own = !ev;
    if (own && rt->cuda->event_create_with_flags(&ev, cudaEventDisableTiming) != cudaSuccess)
        return false;
    bool ok = rt->cuda->event_record(ev, signaler) == cudaSuccess &&
              rt->cuda->stream_wait_event(waiter, ev, 0) == cudaSuccess;
    if (own)
        rt->cuda->event_destroy(ev); /* released once complete; the wait holds it */
    return ok;
}

/* Move [ADDR, ADDR+SIZE) of DEVICE, whose data is dead once STREAM's work so
 * far is done, to LOC, ordered on STREAM. With DISCARD, whole 2 MiB pages
 * inside it are discarded and populated at LOC in one operation, without a
 * copy; the edges, which may share a page with a live neighbour, and
 * everything without DISCARD are prefetched, which keeps the data. CUDA takes
 * no legacy stream for a discard: it runs on the runtime's stream between
 * waits both ways. Nothing may overlap a discard, so the runtime's streams,
 * where triggers and evictions run, follow it either way. Returns true when
 * a discard was issued. */
static bool move_dead(struct runtime *rt, int device, uintptr_t addr, size_t size,
                      struct cudaMemLocation loc, cudaStream_t stream, bool discard)
{
    cudaStream_t own = rt->devices[device].stream;
    uintptr_t start, end;
    whole_pages(addr, size, &start, &end);
    cudaStream_t on = legacy_stream(stream) ? own : stream;
    if (!discard || !on || end <= start || !rt->cuda->mem_discard_and_prefetch_batch_async ||
        rt->discard_prefetch_unsupported || !stream_follow(rt, device, on, stream)) {
        prefetch_one(rt, addr, size, loc, stream);
        return false;
    }
    void *ptr = (void *)start;
    size_t bytes = end - start, idx = 0;
    cudaError_t err =
        rt->cuda->mem_discard_and_prefetch_batch_async(&ptr, &bytes, 1, &loc, &idx, 1, 0, on);
    if (err != cudaSuccess) {
        rt->discard_prefetch_unsupported = true;
        rt->cuda->get_last_error();
        LOG(LOG_INFO, "discard-and-prefetch unavailable (%s); dead data is copied when moved",
            rt->cuda->get_error_string(err));
        prefetch_one(rt, addr, size, loc, stream);
        return false;
    }
    prefetch_one(rt, addr, start - addr, loc, on);
    prefetch_one(rt, end, addr + size - end, loc, on);
    stream_follow(rt, device, stream, on); /* the job's next work on STREAM sees the pages placed */
    cudaStream_t evict = rt->devices[device].evict_stream;
    if (own)
        stream_follow(rt, device, own, on);
    if (evict)
        stream_follow(rt, device, evict, on);
    return true;
}

cudaStream_t place_discard_freed(struct runtime *rt, struct block *b, cudaStream_t stream)
{
    /* Discarded and prefetched back where it is counted: the pages stay put,
     * their data is never copied again, and no page is left discarded. */
    int device = b->slab->pool->device;
    struct cudaMemLocation loc = b->on_gpu ? (struct cudaMemLocation){cudaMemLocationTypeDevice, device}
                                           : host_of(rt, b->class_idx, device);
    uintptr_t start, end;
    whole_pages(b->addr, b->size, &start, &end);
    if (end <= start || !move_dead(rt, device, start, end - start, loc, stream, true))
        return stream;
    rt->class_stats[b->class_idx].discards++;
    rt->class_stats[b->class_idx].discard_bytes += end - start;
    return stream;
}

/* Give back the oldest free space still on DEVICE: its data is dead. It is
 * moved on the one stream that last used it (ordered after that use), else
 * copied out on the runtime's stream, which is safe whatever still runs. */
static bool reclaim_idle(struct runtime *rt, int device)
{
    struct device_state *dev = &rt->devices[device];
    struct pool *oldest = NULL;
    for (size_t c = 0; c < rt->program->class_count; c++) {
        struct pool *p = dev->pools[c];
        if (p && p->idle_head && (!oldest || p->idle_head->tick < oldest->idle_head->tick))
            oldest = p;
    }
    if (!oldest)
        return false;
    uint64_t t0 = now_ns();
    struct block *b = oldest->idle_head;
    cudaStream_t on = b->free_stream_count == 1 ? b->free_streams[0] : dev->stream;
    if (move_dead(rt, device, b->addr, b->size, host_of(rt, b->class_idx, device), on,
                  b->free_stream_count <= 1)) {
        b->free_streams[0] = on; /* its next user follows the discard */
        b->free_stream_count = 1;
    }
    rt->class_stats[b->class_idx].reclaims++;
    rt->class_stats[b->class_idx].reclaim_bytes += b->size;
    pool_idle_left_gpu(rt, b);
    rt->reclaim_ns += now_ns() - t0;
    return true;
}

/* Evict the least recently placed block of the lowest priority at or below
 * MAX_PRIORITY on DEVICE, never one placed in the current round. Returns
 * false when nothing may be evicted. */
static bool evict_one(struct runtime *rt, int device, uint32_t max_priority)
{
    struct device_state *dev = &rt->devices[device];
    struct pool *victim = NULL;
    for (size_t c = 0; c < rt->program->class_count; c++) {
        struct pool *p = dev->pools[c];
        uint32_t prio = rt->program->classes[c].priority;
        if (!p || !p->lru_head || prio > max_priority || p->lru_head->tick > rt->round_floor)
            continue;
        if (!victim || prio < rt->program->classes[victim->class_idx].priority ||
            (prio == rt->program->classes[victim->class_idx].priority &&
             p->lru_head->tick < victim->lru_head->tick))
            victim = p;
    }
    if (!victim)
        return false;
    struct block *b = victim->lru_head;
    uint64_t t0 = now_ns();
    prefetch_one(rt, b->addr, b->size, host_of(rt, b->class_idx, device),
                 dev->evict_stream ? dev->evict_stream : dev->stream);
    rt->evict_ns += now_ns() - t0;
    gpu_leave(rt, b);
    rt->class_stats[b->class_idx].evictions++;
    rt->class_stats[b->class_idx].evict_bytes += b->size;
    timeline_add(rt, TL_EVICT, b->class_idx, device, b->size);
    return true;
}

/* Make room under the budget for NEED bytes of a class of PRIORITY: free
 * space first (its data is dead), then live blocks. */
static bool make_room(struct runtime *rt, int device, size_t need, uint32_t priority)
{
    struct device_state *dev = &rt->devices[device];
    if (dev->budget_bytes == UINT64_MAX)
        return true;
    while (dev->resident_bytes + need > dev->budget_bytes)
        if (!reclaim_idle(rt, device) && !evict_one(rt, device, priority))
            return false;
    return true;
}

enum placement { PLACE_MOVE, PLACE_THERE, PLACE_SKIPPED };

/* Account for moving live block B to LOC, within the budget when LOC is its
 * GPU. PLACE_MOVE: the caller issues the move. PLACE_THERE: the pages are
 * already there (a reused block that never left the GPU). */
static enum placement place_block(struct runtime *rt, struct block *b, struct cudaMemLocation loc)
{
    int device = b->slab->pool->device;
    struct class_stats *st = &rt->class_stats[b->class_idx];
    bool own_gpu = is_gpu(loc) && loc.id == device;
    if (own_gpu) {
        if (b->on_gpu) {
            gpu_touch(rt, b);
            return PLACE_THERE;
        }
        if (!make_room(rt, device, b->size, rt->program->classes[b->class_idx].priority)) {
            st->budget_skips++;
            return PLACE_SKIPPED;
        }
        gpu_take(rt, b);
    } else if (b->on_gpu) {
        gpu_leave(rt, b);
    }
    st->prefetches++;
    st->prefetch_bytes += b->size;
    timeline_add(rt, own_gpu ? TL_PREFETCH_GPU : TL_PREFETCH_HOST, b->class_idx, device, b->size);
    return PLACE_MOVE;
}

/* The rule that places a block of CLS as it is allocated: a prefetch on
 * alloc; else a prefetch on entering a phase that is open now, which covers
 * what is allocated inside it (AdamW creates its state inside the first
 * optimizer step, after the entry prefetch ran). */
static const struct program_prefetch *rule_on_alloc(const struct runtime *rt,
                                                    const struct program_class *cls)
{
    const struct program *p = rt->program;
    for (uint32_t k = 0; k < cls->prefetch_count; k++) {
        const struct program_prefetch *pf = &p->prefetches[cls->prefetch_first + k];
        if (pf->trigger == TRIGGER_ALLOC)
            return pf;
    }
    for (uint32_t k = 0; k < cls->prefetch_count; k++) {
        const struct program_prefetch *pf = &p->prefetches[cls->prefetch_first + k];
        if (pf->trigger == TRIGGER_ENTER &&
            (atomic_load_explicit(&rt->phase_bits[pf->pattern >> 6], memory_order_relaxed) >>
             (pf->pattern & 63)) & 1)
            return pf;
    }
    return NULL;
}

void place_on_alloc(struct runtime *rt, struct block *b, int device, cudaStream_t stream)
{
    const struct program_class *cls = &rt->program->classes[b->class_idx];
    if (!b->slab || cls->memory == MEMORY_DEVICE)
        return; /* device memory: counted with its slab, never evicted */
    rt->round_floor = rt->tick;
    if (b->on_gpu) /* free space that stayed on the GPU, live again */
        gpu_take_live(rt, b);
    const struct program_prefetch *rule = rule_on_alloc(rt, cls);
    struct program_place dest = rule ? rule->dest : cls->place;
    /* Under a budget, `place gpu` means placed by the runtime: pages reach the
     * GPU no other way then. */
    if (!rule && !(rt->devices[device].steer && cls->place.kind == LOC_GPU))
        return;
    struct cudaMemLocation loc = place_location(rt, dest, device);
    /* Timed only where CUDA is called: a block that stays on its GPU, the
     * common case, reads no clock. */
    uint64_t made_room_ns = rt->reclaim_ns + rt->evict_ns;
    if (place_block(rt, b, loc) == PLACE_MOVE) { /* a new block's data is dead: no copy needed */
        uint64_t t0 = now_ns();
        move_dead(rt, device, b->addr, b->size, loc, stream, true);
        uint64_t moved_ns = now_ns() - t0;
        rt->place_ns += moved_ns;
        rt->runtime_ns += moved_ns;
    }
    rt->runtime_ns += rt->reclaim_ns + rt->evict_ns - made_room_ns;
}

/* A freed block keeps its pages where they are: on the GPU it stays counted,
 * on the pool's idle list (joined in pool_free) until it is used again or
 * the budget needs the room. */
void place_on_free(struct runtime *rt, struct block *b)
{
    if (!b->slab || !b->on_gpu)
        return;
    struct pool *p = b->slab->pool;
    gpu_list_remove(&p->lru_head, &p->lru_tail, b);
    b->tick = ++rt->tick;
}

/* Prefetch a batch on STREAM: one cudaMemPrefetchBatchAsync where the runtime
 * has it, else one call per block. */
static void prefetch_batch(struct runtime *rt, void **ptrs, size_t *sizes, size_t n,
                           struct cudaMemLocation loc, cudaStream_t stream)
{
    if (n == 0)
        return;
    if (n > 1 && stream && rt->cuda->mem_prefetch_batch_async && !rt->batch_unsupported) {
        size_t idx = 0;
        cudaError_t err =
            rt->cuda->mem_prefetch_batch_async(ptrs, sizes, n, &loc, &idx, 1, 0, stream);
        if (err == cudaSuccess)
            return;
        rt->batch_unsupported = true;
        rt->cuda->get_last_error();
        LOG(LOG_INFO, "batched prefetch unavailable (%s); prefetching block by block",
            rt->cuda->get_error_string(err));
    }
    for (size_t i = 0; i < n; i++) {
        cudaError_t err = rt->cuda->mem_prefetch_async(ptrs[i], sizes[i], loc, 0, stream);
        if (err != cudaSuccess)
            LOG(LOG_DEBUG, "prefetch failed: %s", rt->cuda->get_error_string(err));
    }
}

static bool trigger_fires(const struct program_prefetch *pf, enum trigger_kind trigger,
                          const uint64_t *glob_bits, int mark)
{
    if (pf->trigger != trigger)
        return false;
    if (trigger == TRIGGER_MARK)
        return pf->pattern == mark;
    return (glob_bits[pf->pattern >> 6] >> (pf->pattern & 63)) & 1;
}

/* Move every live block of class C on DEVICE to the rule's destination. */
static void move_class(struct runtime *rt, size_t c, int device, struct program_place dest)
{
    struct device_state *dev = &rt->devices[device];
    struct pool *p = dev->pools[c];
    if (!p)
        return;
    struct cudaMemLocation loc = place_location(rt, dest, device);
    size_t n = 0, cap = 0;
    void **ptrs = NULL;
    size_t *sizes = NULL;
    for (struct slab *s = p->slabs; s; s = s->next) {
        for (struct block *b = s->first; b; b = b->next) {
            if (b->free || place_block(rt, b, loc) != PLACE_MOVE)
                continue;
            if (n == cap) {
                size_t grown = cap ? cap * 2 : 64;
                void **np = realloc(ptrs, grown * sizeof *np);
                if (np)
                    ptrs = np;
                size_t *ns = np ? realloc(sizes, grown * sizeof *ns) : NULL;
                if (ns)
                    sizes = ns;
                if (!np || !ns) { /* no memory for the batch: this one alone */
                    prefetch_one(rt, b->addr, b->size, loc, dev->stream);
                    continue;
                }
                cap = grown;
            }
            ptrs[n] = (void *)b->addr;
            sizes[n++] = b->size;
        }
    }
    prefetch_batch(rt, ptrs, sizes, n, loc, dev->stream);
    free(ptrs);
    free(sizes);
    /* Data brought to the GPU must be there before the job's next kernels: order
     * the legacy default stream (and so every blocking stream) after the batch. */
    if (n && is_gpu(loc) && dev->stream)
        stream_follow(rt, device, cudaStreamLegacy, dev->stream);
}

void place_trigger(struct runtime *rt, enum trigger_kind trigger, const uint64_t *glob_bits,
                   int mark)
{
    const struct program *p = rt->program;
    uint64_t t0 = now_ns();
    rt->round_floor = rt->tick;
    for (size_t c = 0; c < p->class_count; c++) {
        const struct program_class *cls = &p->classes[c];
        if (cls->memory != MEMORY_MANAGED)
            continue;
        for (uint32_t k = 0; k < cls->prefetch_count; k++) {
            const struct program_prefetch *pf = &p->prefetches[cls->prefetch_first + k];
            if (!trigger_fires(pf, trigger, glob_bits, mark))
                continue;
            for (int d = 0; d < RT_MAX_DEVICES; d++)
                if (rt->devices[d].known)
                    move_class(rt, c, d, pf->dest);
        }
    }
    rt->runtime_ns += now_ns() - t0;
}
