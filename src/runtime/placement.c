/* Floor 3, policy. Where blocks live: advice on slabs, prefetch on triggers,
 * the per-GPU budget with eviction by priority, least recently placed first,
 * and the managed cap. It decides; the mover issues the CUDA work. Everything
 * here is a hint to the driver: a failed call is counted and logged, never an
 * error for the job. Called with rt->lock held. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "runtime/log.h"

#ifdef HAVE_NUMA
#include <numa.h>
#endif
#include "runtime/mover.h"
#include "runtime/placement.h"
#include "runtime/residency.h"
#include "runtime/stream.h"
#include "runtime/state.h"
#include "util/clock.h"

void placement_configure_device(struct runtime *rt, int device)
{
    struct device_state *dev = &rt->devices[device];
    uint64_t total_b = dev->total_bytes;
    const struct program *p = rt->program;
    dev->budget_bytes = !p->budget_gpu.given ? UINT64_MAX
                        : p->budget_gpu.percent ? total_b / 100 * p->budget_gpu.value
                                                : p->budget_gpu.value;
    dev->budget_set = dev->budget_bytes;
    dev->steer = p->budget_gpu.given;
    for (size_t c = 0; c < p->class_count && dev->steer; c++)
        if (p->classes[c].read_mostly && p->classes[c].memory == MEMORY_MANAGED)
            LOG(LOG_WARN, "GPU %d: class '%s': advise read_mostly is not applied under a budget "
                          "(a read-only GPU copy would outlive an eviction)", device,
                p->classes[c].name);
    /* Without a cap, PROGRAM_DEFAULT_CAP_PERCENT of the GPU: an oversubscribed card can hang. */
    dev->cap_bytes = !p->cap_managed.given  ? total_b / 100 * PROGRAM_DEFAULT_CAP_PERCENT
                     : p->cap_managed.percent ? total_b / 100 * p->cap_managed.value
                                              : p->cap_managed.value;
    char budget[32] = "none";
    if (dev->budget_bytes != UINT64_MAX)
        snprintf(budget, sizeof budget, "%llu MiB", (unsigned long long)(dev->budget_bytes >> 20));
    LOG(LOG_INFO, "GPU %d: %llu MiB, budget %s, managed cap %llu MiB, host NUMA node %d", device,
        (unsigned long long)(total_b >> 20), budget, (unsigned long long)(dev->cap_bytes >> 20),
        dev->host_numa_id);
}

void place_card_sampled(struct runtime *rt, int device, uint64_t used)
{
    struct device_state *dev = &rt->devices[device];
    uint64_t known = dev->card_base_used + dev->resident_bytes, least = UINT64_MAX;
    dev->card_recent[dev->card_samples % CARD_WINDOW] = used > known ? used - known : 0;
    if (dev->card_samples < CARD_WINDOW)
        return;
    for (int i = 0; i < CARD_WINDOW; i++)
        least = dev->card_recent[i] < least ? dev->card_recent[i] : least;
    if (least <= dev->card_outside)
        return;
    dev->card_outside = least;
    if (!rt->program->budget_counts_card || dev->budget_set == UINT64_MAX)
        return;
    bool had_room = dev->budget_bytes > 0;
    dev->budget_bytes = dev->budget_set > least ? dev->budget_set - least : 0;
    if (dev->budget_bytes ? least < dev->card_outside_said + (64u << 20) : !had_room)
        return; /* said at each 64 MiB more, and once when nothing is left */
    dev->card_outside_said = least;
    LOG(dev->budget_bytes ? LOG_INFO : LOG_WARN,
        "GPU %d: budget card: the process holds %llu MiB on the card outside umpol, so umpol "
        "holds itself to %llu MiB%s",
        device, (unsigned long long)(least >> 20), (unsigned long long)(dev->budget_bytes >> 20),
        dev->budget_bytes ? "" : ": nothing more goes to the GPU that can stay off it");
}

/* The report's record of moves and refusals (only when a report was asked for). */
static void timeline_add(struct runtime *rt, enum timeline_kind kind, int class_idx, int device,
                  uint64_t bytes)
{
    if (!rt->record_timeline)
        return;
    if (rt->timeline_count == rt->timeline_cap) {
        size_t cap = rt->timeline_cap ? rt->timeline_cap * 2 : 1024;
        struct timeline_event *grown =
            cap <= RT_TIMELINE_MAX ? realloc(rt->timeline, cap * sizeof *grown) : NULL;
        if (!grown) {
            rt->timeline_dropped++;
            return;
        }
        rt->timeline = grown;
        rt->timeline_cap = cap;
    }
    rt->timeline[rt->timeline_count++] = (struct timeline_event){
        now_ns(), bytes, device >= 0 ? rt->devices[device].resident_bytes : 0, class_idx,
        (int16_t)device, (uint8_t)kind};
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
            rt->program->classes[class_idx].name, what, mover_error(&rt->mover, err));
    }
}

static struct cudaMemLocation host_of(const struct runtime *rt, int class_idx, int device)
{
    struct program_place place = rt->program->classes[class_idx].place;
    bool on_host = place.kind == LOC_HOST || place.kind == LOC_HOST_NUMA ||
                   place.kind == LOC_HOST_NEAR;
    return place_location(rt, on_host ? place : (struct program_place){LOC_HOST, -1}, device);
}

int place_host_node(const struct runtime *rt, int class_idx, int device)
{
    struct cudaMemLocation loc = host_of(rt, class_idx, device);
    return loc.type == cudaMemLocationTypeHostNuma ? loc.id : -1;
}

/* Under a budget the runtime alone moves managed pages to the GPU: every
 * slab prefers the host and is mapped by its GPU, so a GPU touching a block
 * the runtime did not place there reads it over the link instead of faulting
 * it in uncounted. Read-mostly copies are not made then: a GPU copy would
 * stay behind when the block is moved to the host. */
static void advice(struct runtime *rt, int class_idx, int device, void *ptr, size_t size,
                   bool *warned, bool set)
{
    const struct program_class *cls = &rt->program->classes[class_idx];
    bool steer = rt->devices[device].steer && cls->memory == MEMORY_MANAGED;
    cudaError_t err;
    if (cls->read_mostly && !steer) {
        struct cudaMemLocation loc = {cudaMemLocationTypeDevice, device};
        err = mover_advise(&rt->mover, ptr, size,
                           set ? cudaMemAdviseSetReadMostly : cudaMemAdviseUnsetReadMostly, loc);
        if (err != cudaSuccess)
            advise_failed(rt, class_idx, warned, "read_mostly advice", err);
    }
    if (steer || (cls->place.kind != LOC_UNSET && cls->place.kind != LOC_NONE)) {
        struct cudaMemLocation loc = steer ? host_of(rt, class_idx, device)
                                           : place_location(rt, cls->place, device);
        err = mover_advise(&rt->mover, ptr, size,
                           set ? cudaMemAdviseSetPreferredLocation
                               : cudaMemAdviseUnsetPreferredLocation,
                           loc);
        if (err != cudaSuccess)
            advise_failed(rt, class_idx, warned, "preferred location", err);
    }
    enum cudaMemoryAdvise accessed =
        set ? cudaMemAdviseSetAccessedBy : cudaMemAdviseUnsetAccessedBy;
    if (steer) {
        err = mover_advise(&rt->mover, ptr, size, accessed,
                           (struct cudaMemLocation){cudaMemLocationTypeDevice, device});
        if (err != cudaSuccess)
            advise_failed(rt, class_idx, warned, "accessed-by advice", err);
    }
    for (int i = 0; i < cls->access_count; i++) {
        struct cudaMemLocation loc = place_location(rt, cls->access[i], device);
        if (steer && is_gpu(loc) && loc.id == device)
            continue; /* given above */
        err = mover_advise(&rt->mover, ptr, size, accessed, loc);
        if (err != cudaSuccess)
            advise_failed(rt, class_idx, warned, "accessed-by advice", err);
    }
}

static void advise(struct runtime *rt, int class_idx, int device, void *ptr, size_t size,
                   bool *warned)
{
    advice(rt, class_idx, device, ptr, size, warned, true);
}

static bool same_place(struct program_place a, struct program_place b)
{
    return a.kind == b.kind && a.index == b.index;
}

/* Do classes A and B give their memory the same advice? */
static bool same_advice(const struct runtime *rt, int a, int b)
{
    const struct program_class *x = &rt->program->classes[a], *y = &rt->program->classes[b];
    if (x->read_mostly != y->read_mostly || !same_place(x->place, y->place) ||
        x->access_count != y->access_count)
        return false;
    for (int i = 0; i < x->access_count; i++)
        if (!same_place(x->access[i], y->access[i]))
            return false;
    return true;
}

/* Block B of class FROM takes class TO's advice: on the whole 2 MiB pages
 * inside it for a block of a slab (advice covers whole pages, and the edges
 * are shared with neighbours that keep their class's), on all of it for the
 * job's own allocation. */
static void readvise(struct runtime *rt, const struct block *b, int from, int to, int device,
                     bool *warned)
{
    if (same_advice(rt, from, to))
        return;
    uintptr_t start = b->addr, end = b->addr + b->size;
    if (b->slab)
        mover_whole_pages(b->addr, b->size, &start, &end);
    if (end <= start)
        return;
    advice(rt, from, device, (void *)start, end - start, warned, false);
    advice(rt, to, device, (void *)start, end - start, warned, true);
}

/* ---- what the runtime holds on each GPU ---- */

/* The pool whose lists hold live block B: its slab's, or for a block moved
 * to another class, that class's pool on the same GPU. */
static struct pool *live_pool(struct runtime *rt, const struct block *b)
{
    struct pool *p = b->slab->pool;
    return b->moved_in ? rt->devices[p->device].pools[b->class_idx] : p;
}

uint64_t place_spare_room(const struct runtime *rt, int device)
{
    if (device < 0 || device >= RT_MAX_DEVICES || !rt->devices[device].known)
        return 0;
    const struct device_state *dev = &rt->devices[device];
    uint64_t limit = dev->budget_bytes != UINT64_MAX ? dev->budget_bytes : dev->total_bytes;
    uint64_t reserve = program_spare_reserve(rt->program, limit, dev->others_peak);
    /* Still climbing to its peak (its live blocks within 1/32 of the limit
     * of the most they have been, that most reached since an outermost phase
     * last closed): the peak so far says nothing yet of the step's. Where one
     * has closed on it since, it is the step's so far: an optimizer that
     * steps after backward makes its state with the gradients, the peak,
     * still live. A nested range (a layer's) ends no part of the step. */
    if (rt->gpu_live + program_spare_reserve(rt->program, limit, 0) > rt->gpu_live_peak &&
        rt->gpu_live_peak_closes == rt->phase_closes)
        return 0;
    uint64_t taken = dev->others_peak + dev->spare_held + reserve;
    return limit > taken ? limit - taken : 0;
}

/* The pool's LRU of live blocks on the GPU, and the bytes in it. */
static void lru_append(struct pool *p, struct block *b)
{
    gpu_list_append(&p->lru_head, &p->lru_tail, b);
    p->lru_bytes += b->size;
}

static void lru_remove(struct pool *p, struct block *b)
{
    gpu_list_remove(&p->lru_head, &p->lru_tail, b);
    p->lru_bytes -= b->size;
}

/* Count B's pages as on its pool's GPU; a live block joins the pool's LRU. */
static void gpu_take(struct runtime *rt, struct block *b)
{
    struct pool *p = live_pool(rt, b);
    b->on_gpu = true;
    b->tick = ++rt->tick;
    resident_add(rt, &rt->devices[p->device], b->class_idx, b->size);
    if (!b->free)
        lru_append(p, b);
}

/* Live block B leaves the GPU. */
static void gpu_leave(struct runtime *rt, struct block *b)
{
    struct pool *p = live_pool(rt, b);
    lru_remove(p, b);
    b->on_gpu = false;
    resident_sub(rt, &rt->devices[p->device], b->class_idx, b->size);
}

/* Free space still on the GPU, allocated again: live, most recent. */
static void gpu_take_live(struct runtime *rt, struct block *b)
{
    struct pool *p = live_pool(rt, b);
    lru_append(p, b);
    b->tick = ++rt->tick;
}

/* Live block B placed on the GPU again: the most recent now. */
static void gpu_touch(struct runtime *rt, struct block *b)
{
    struct pool *p = live_pool(rt, b);
    lru_remove(p, b);
    gpu_take_live(rt, b);
}

static void ranges_locked_add(struct runtime *rt, uintptr_t base, size_t size, int class_idx,
                              const struct slab *slab)
{
    pthread_mutex_lock(&rt->range_lock);
    ranges_add(&rt->ranges, base, size, class_idx, slab);
    pthread_mutex_unlock(&rt->range_lock);
}

static void ranges_locked_remove(struct runtime *rt, uintptr_t base)
{
    pthread_mutex_lock(&rt->range_lock);
    ranges_remove(&rt->ranges, base);
    pthread_mutex_unlock(&rt->range_lock);
}

void place_slab_gone(struct runtime *rt, const struct slab *s)
{
    ranges_locked_remove(rt, s->base);
}

void place_new_slab(struct runtime *rt, struct pool *pool, struct slab *s)
{
    struct device_state *dev = &rt->devices[pool->device];
    struct class_stats *st = &rt->class_stats[pool->class_idx];
    st->slabs++;
    st->slab_bytes += s->size;
    if (st->slab_bytes > st->slab_peak_bytes)
        st->slab_peak_bytes = st->slab_bytes;
    enum memory_kind kind = rt->program->classes[pool->class_idx].memory;
    if (s->backing) { /* movable memory: the pieces made on the GPU */
        s->tick = ++rt->tick;
        resident_add(rt, dev, pool->class_idx, ((struct movable *)s->backing)->gpu_bytes);
    }
    else if (kind == MEMORY_DEVICE || kind == MEMORY_MOVABLE) /* device memory: all on the GPU */
        resident_add(rt, dev, pool->class_idx, s->size);
    /* Every slab by address: a pointer inside one that is no live block is
     * the runtime's (rt_free), and CUPTI's records of managed memory name
     * their class. */
    ranges_locked_add(rt, s->base, s->size, pool->class_idx, s);
    if (kind != MEMORY_MANAGED)
        return; /* pinned host memory: never on the GPU, never advised */
    dev->managed_bytes += s->size;
    advise(rt, pool->class_idx, pool->device, (void *)s->base, s->size, &pool->advice_warned);
    /* A class prefetched to its GPU on allocation gets the whole slab there
     * once: blocks carved from it later need no prefetch of their own. Under
     * a budget each block is placed alone, so the budget holds only what is used. */
    const struct program *p = rt->program;
    const struct program_class *cls = &p->classes[pool->class_idx];
    if (dev->steer)
        return;
    for (uint32_t k = 0; k < cls->prefetch_count; k++) {
        const struct program_prefetch *pf = &p->prefetches[cls->prefetch_first + k];
        struct cudaMemLocation loc = place_location(rt, pf->dest, pool->device);
        if (pf->trigger == TRIGGER_ALLOC && is_gpu(loc) && loc.id == pool->device) {
            if (mover_prefetch(&rt->mover, s->base, s->size, loc, dev->stream)) { /* the free block joins the GPU bins and idle list */
                s->first->tick = ++rt->tick;
                resident_add(rt, dev, pool->class_idx, s->size);
                pool_idle_arrived_gpu(pool, s->first);
            }
            st->prefetches++;
            st->prefetch_bytes += s->size;
            break;
        }
    }
}

/* Give back slabs with no live block, of DEVICE (all when < 0) and of the
 * classes CLASS_IDX names (place_trim; TRIM_UNUSED: those no block was taken
 * from since the take clock read UNUSED_SINCE), until a device's budget has
 * ROOM bytes free (UINT64_MAX: all of them). Safe: cudaFree waits for the
 * work that may still use it. */
static size_t trim(struct runtime *rt, int device, int class_idx, uint64_t room,
                   uint64_t unused_since)
{
    size_t released = 0;
    if (atomic_load(&rt->captures) > 0)
        return 0; /* a release (cudaFree, or a wait for the GPU) would invalidate a capture */
    for (int d = 0; d < RT_MAX_DEVICES; d++) {
        struct device_state *dev = &rt->devices[d];
        if (!dev->known || (device >= 0 && d != device))
            continue;
        for (size_t c = 0; c < rt->program->class_count; c++) {
            const struct program_class *cls = &rt->program->classes[c];
            bool chosen = class_idx == TRIM_ALL ||
                          ((class_idx == TRIM_CARD || class_idx == TRIM_FOR_STREAM) &&
                           cls->memory != MEMORY_HOST) ||
                          (class_idx == TRIM_MANAGED && cls->memory == MEMORY_MANAGED) ||
                          (class_idx == TRIM_UNUSED && cls->memory == MEMORY_DEVICE) ||
                          (class_idx >= 0 && (size_t)class_idx == c);
            struct pool *p = chosen ? dev->pools[c] : NULL;
            for (struct slab *s = p ? pool_detach_empty_slabs(p) : NULL, *next; s; s = next) {
                next = s->next;
                if ((room != UINT64_MAX && dev->budget_bytes != UINT64_MAX &&
                     dev->resident_bytes + room <= dev->budget_bytes) ||
                    (class_idx == TRIM_FOR_STREAM && s->size < STREAM_ROOM_SLAB) ||
                    (class_idx == TRIM_UNUSED && s->taken > unused_since)) {
                    pool_reattach_slab(p, s); /* room enough, or not one it was asked for: it stays */
                    continue;
                }
                uintptr_t base = s->base;
                size_t size = s->size;
                struct movable *mv = s->backing;
                if (mv)
                    stream_settle(rt); /* no remap of its pieces is being made */
                enum memory_kind kind = mv ? MEMORY_MOVABLE
                                        : cls->memory == MEMORY_MOVABLE ? MEMORY_DEVICE
                                                                        : cls->memory;
                resident_sub(rt, dev, (int)c, slab_gpu_bytes(s) + (mv ? mover_movable_held(mv) : 0));
                ranges_locked_remove(rt, base);
                slab_destroy(p, s);
                uint64_t t0 = now_ns();
                cudaError_t err = mv ? mover_movable_release(&rt->mover, mv)
                                     : mover_release(&rt->mover, kind, base, size);
                rt->slab_release_ns += now_ns() - t0;
                if (err != cudaSuccess)
                    LOG(LOG_WARN, "releasing a %zu-byte slab of class '%s' failed: %s%s", size,
                        cls->name, mover_error(&rt->mover, err),
                        cls->memory == MEMORY_HOST ? "; its pages stay pinned"
                        : mv                       ? "; its memory stays held"
                                                   : "");
                if (err != cudaSuccess && (cls->memory == MEMORY_HOST || mv)) {
                    if (mv) /* still on the card: the budget counts it */
                        resident_add(rt, dev, (int)c, mover_movable_held(mv));
                    rt->class_stats[c].slabs--; /* no longer the pool's, still the process's */
                    rt->class_stats[c].slab_bytes -= size;
                    continue;
                }
                if (cls->memory == MEMORY_MANAGED) {
                    dev->managed_bytes -= size;
                } else if (kind == MEMORY_DEVICE) {
                    resident_sub(rt, dev, (int)c, size);
                }
                rt->class_stats[c].slabs--;
                rt->class_stats[c].slab_bytes -= size;
                rt->class_stats[c].slab_releases++;
                released += size;
            }
        }
    }
    return released;
}

size_t place_trim(struct runtime *rt, int device, int class_idx)
{
    return trim(rt, device, class_idx, UINT64_MAX, 0);
}

void place_step_changed(struct runtime *rt)
{
    for (int d = 0; d < RT_MAX_DEVICES; d++)
        rt->devices[d].step_changed = rt->devices[d].known;
}

/* Has DEVICE an empty slab on the card that TRIM_FOR_STREAM would give back?
 * (Looked for first: the stream asks at every use that finds no room.) */
static bool stream_room_in_slabs(const struct runtime *rt, int device)
{
    const struct device_state *dev = &rt->devices[device];
    for (size_t c = 0; c < rt->program->class_count; c++)
        if (rt->program->classes[c].memory != MEMORY_HOST && dev->pools[c] &&
            pool_has_empty_slab_of(dev->pools[c], STREAM_ROOM_SLAB))
            return true;
    return false;
}

size_t place_room_for_stream(struct runtime *rt, int device, uint64_t bytes)
{
    size_t released = 0;
    for (int d = 0; d < RT_MAX_DEVICES; d++) {
        const struct device_state *dev = &rt->devices[d];
        if ((device < 0 || d == device) && dev->known && dev->budget_bytes != UINT64_MAX &&
            dev->resident_bytes + bytes > dev->budget_bytes && stream_room_in_slabs(rt, d))
            released += trim(rt, d, TRIM_FOR_STREAM, bytes, 0);
    }
    return released;
}

bool cap_admits(struct runtime *rt, int class_idx, int device, size_t size)
{
    struct device_state *dev = &rt->devices[device];
    if (dev->managed_bytes + size <= dev->cap_bytes)
        return true;
    place_trim(rt, device, TRIM_MANAGED); /* empty managed slabs go before a refusal */
    if (dev->managed_bytes + size <= dev->cap_bytes)
        return true;
    rt->class_stats[class_idx].cap_refusals++;
    timeline_add(rt, TL_CAP_REFUSAL, class_idx, device, size);
    LOG(LOG_INFO, "cap: refusing %zu bytes of managed memory for class '%s' on GPU %d "
        "(%llu of %llu held)", size, rt->program->classes[class_idx].name, device,
        (unsigned long long)dev->managed_bytes, (unsigned long long)dev->cap_bytes);
    return false;
}

void place_adopted(struct runtime *rt, int class_idx, int device, void *ptr, size_t size,
                   cudaStream_t stream)
{
    rt->devices[device].managed_bytes += size;
    ranges_locked_add(rt, (uintptr_t)ptr, size, class_idx, NULL);
    const struct program_class *c = &rt->program->classes[class_idx];
    if (c->memory == MEMORY_HOST) {
        /* The job's own managed memory stays managed: as near to a host
         * class as advice gets (see W107 for what the driver may still do). */
        struct cudaMemLocation gpu = {cudaMemLocationTypeDevice, device};
        bool warned = false;
        cudaError_t err = mover_advise(&rt->mover, ptr, size, cudaMemAdviseSetPreferredLocation,
                                       host_of(rt, class_idx, device));
        if (err == cudaSuccess)
            err = mover_advise(&rt->mover, ptr, size, cudaMemAdviseSetAccessedBy, gpu);
        if (err != cudaSuccess)
            advise_failed(rt, class_idx, &warned, "advice for the job's managed memory", err);
        return;
    }
    if (c->memory != MEMORY_MANAGED)
        return;
    bool warned = false;
    advise(rt, class_idx, device, ptr, size, &warned);
    for (uint32_t k = 0; k < c->prefetch_count; k++) {
        const struct program_prefetch *pf = &rt->program->prefetches[c->prefetch_first + k];
        if (pf->trigger == TRIGGER_ALLOC)
            mover_prefetch(&rt->mover, (uintptr_t)ptr, size, place_location(rt, pf->dest, device),
                           stream);
    }
}

void place_adopted_freed(struct runtime *rt, const struct block *b)
{
    rt->devices[b->device].managed_bytes -= b->size;
    ranges_locked_remove(rt, b->addr);
}

static bool move_dead(struct runtime *rt, int device, uintptr_t addr, size_t size,
                      struct cudaMemLocation loc, cudaStream_t stream, bool discard)
{
    return mover_move_dead(&rt->mover, &rt->devices[device], addr, size, loc, stream, discard);
}

cudaStream_t place_discard_freed(struct runtime *rt, struct block *b, cudaStream_t stream)
{
    /* Discarded and prefetched back where it is counted: the pages stay put,
     * their data is never copied again, and no page is left discarded. */
    int device = b->slab->pool->device;
    struct cudaMemLocation loc = b->on_gpu ? (struct cudaMemLocation){cudaMemLocationTypeDevice, device}
                                           : host_of(rt, b->class_idx, device);
    uintptr_t start, end;
    mover_whole_pages(b->addr, b->size, &start, &end);
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
        b->free_points[0] = mover_point_at_free(dev, on);
        b->free_stream_count = 1;
    }
    rt->class_stats[b->class_idx].reclaims++;
    rt->class_stats[b->class_idx].reclaim_bytes += b->size;
    resident_sub(rt, &rt->devices[device], b->class_idx, b->size);
    pool_idle_left_gpu(oldest, b);
    rt->reclaim_ns += now_ns() - t0;
    return true;
}

/* When learning and the step is on track: the block whose predicted next use
 * is farthest (Belady), among the evictable blocks of the lowest priority
 * that has one; ties go to the least recently placed. Placing ahead of a use
 * predicted at rt->ahead_use evicts only blocks needed later than that. */
/* The next predicted use of class C from step position POS: the nearest
 * firing of one of its prefetch rules (LONG_MAX: none foreseen). */
static long class_next_use(const struct runtime *rt, size_t c, size_t pos)
{
    const struct program_class *cls = &rt->program->classes[c];
    long use = LONG_MAX;
    for (uint32_t k = 0; k < cls->prefetch_count; k++) {
        long e = step_next(&rt->step, step_use_key((uint32_t)c, k), pos);
        if (e >= 0 && e < use)
            use = e;
    }
    return use;
}

static struct block *farthest_next_use(struct runtime *rt, int device, uint32_t max_priority,
                                       long *use_out)
{
    struct device_state *dev = &rt->devices[device];
    const struct program *p = rt->program;
    size_t pos = step_pos(&rt->step);
    struct block *victim = NULL;
    long victim_use = -1;
    uint32_t victim_prio = 0;
    for (size_t c = 0; c < p->class_count; c++) {
        struct pool *pool = dev->pools[c];
        uint32_t prio = p->classes[c].priority;
        if (!pool || !pool->lru_head || prio > max_priority || (victim && prio > victim_prio))
            continue;
        long class_use = class_next_use(rt, c, pos);
        int scanned = 0;
        for (struct block *b = pool->lru_head; b && b->tick <= rt->round_floor && scanned < 4096;
             b = b->gpu_next, scanned++) {
            long use = class_use;
            if (b->step_no == rt->step.steps && b->step_id) {
                long f = step_partner(&rt->step, b->step_id - 1);
                if (f >= (long)pos)
                    use = f; /* freed later in the step: read until then */
            }
            if (rt->ahead_use >= 0 && use <= rt->ahead_use)
                continue;
            if (!victim || prio < victim_prio ||
                (use > victim_use || (use == victim_use && b->tick < victim->tick))) {
                victim = b;
                victim_use = use;
                victim_prio = prio;
            }
        }
    }
    *use_out = victim_use;
    return victim;
}

/* The least recently placed block of the lowest priority at or below
 * MAX_PRIORITY, never one placed in the current round. */
static struct block *least_recent(struct runtime *rt, int device, uint32_t max_priority)
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
    return victim ? victim->lru_head : NULL;
}

/* Is movable slab S mapped whole? Lost pieces are mapped again first where
 * they can be; until then its free space is not handed out. */
static bool movable_mapped(struct runtime *rt, struct slab *s)
{
    struct movable *mv = s->backing;
    if (mv->lost)
        mover_movable_repair(&rt->mover, mv);
    s->quarantined = mv->lost > 0;
    return !s->quarantined;
}

/* The movable slab of DEVICE whose pieces leave first under budget pressure:
 * of the lowest priority at or below MAX_PRIORITY, then (BY_NEXT_USE) its
 * class's farthest predicted use, then the longest on the GPU; never one
 * brought in this round, and none while a stream capture is in progress
 * (the move waits for the GPU, which would invalidate it). */
static struct slab *movable_victim(struct runtime *rt, int device, uint32_t max_priority,
                                   bool by_next_use, long *use_out)
{
    const struct program *p = rt->program;
    struct slab *victim = NULL;
    uint32_t victim_prio = 0;
    long victim_use = -1;
    if (atomic_load(&rt->captures) > 0)
        return NULL;
    for (size_t c = 0; c < p->class_count; c++) {
        struct pool *pool = rt->devices[device].pools[c];
        uint32_t prio = p->classes[c].priority;
        if (!pool || p->classes[c].memory != MEMORY_MOVABLE || prio > max_priority ||
            (victim && prio > victim_prio))
            continue;
        long use = by_next_use ? class_next_use(rt, c, step_pos(&rt->step)) : 0;
        for (struct slab *s = pool->slabs; s; s = s->next) {
            const struct movable *mv = s->backing;
            if (!mv || !movable_mapped(rt, s) || !mover_movable_held(mv) || s->tick > rt->round_floor)
                continue;
            if (by_next_use && rt->ahead_use >= 0 && use <= rt->ahead_use)
                continue; /* placing ahead of a use: only what is needed later leaves */
            if (!victim || prio < victim_prio || use > victim_use ||
                (use == victim_use && s->tick < victim->tick)) {
                victim = s;
                victim_prio = prio;
                victim_use = use;
            }
        }
    }
    *use_out = victim_use;
    return victim;
}

/* Send pieces of movable slab S to the host, enough for NEED bytes where it
 * has them: the mover waits for the GPU, copies and remaps, and the card gets
 * the memory back. The job's view is unchanged: the GPU reads and writes the
 * pieces over the link until a prefetch rule brings them back. */
static bool evict_movable(struct runtime *rt, int device, struct slab *s, size_t need)
{
    struct device_state *dev = &rt->devices[device];
    struct movable *mv = s->backing;
    int c = s->pool->class_idx;
    struct class_stats *st = &rt->class_stats[c];
    stream_settle(rt); /* no remap of its pieces is being made */
    size_t before = mover_movable_held(mv);
    size_t limit = (need + MOVABLE_PIECE - 1) / MOVABLE_PIECE * MOVABLE_PIECE;
    uint64_t t0 = now_ns();
    size_t moved = mover_movable_move(&rt->mover, dev, mv, false,
                                      limit < mv->gpu_bytes ? limit : mv->gpu_bytes, false);
    movable_mapped(rt, s); /* a piece lost on the way: mapped again at once where it can be */
    uint64_t took = now_ns() - t0;
    rt->evict_ns += took;
    st->movable_move_ns += took;
    resident_sub(rt, dev, c, before - mover_movable_held(mv));
    st->movable_to_host_bytes += moved;
    if (!moved) /* pieces on their way in, or a lost piece's GPU memory, went all the same */
        return before != mover_movable_held(mv);
    st->evictions++;
    st->evict_bytes += moved;
    timeline_add(rt, TL_EVICT, c, device, moved);
    return true;
}

/* Evict from DEVICE, for NEED more bytes, one live block of priority at most
 * MAX_PRIORITY, or pieces of a movable slab where that comes first (its
 * priority lower, else farther from its next use or older). Returns false
 * when nothing may be evicted. */
static bool evict_one(struct runtime *rt, int device, uint32_t max_priority, size_t need)
{
    struct device_state *dev = &rt->devices[device];
    bool by_next_use = rt->learn && step_predicting(&rt->step);
    long use = 0, slab_use = 0;
    struct block *b = by_next_use ? farthest_next_use(rt, device, max_priority, &use)
                                  : least_recent(rt, device, max_priority);
    struct slab *s = movable_victim(rt, device, max_priority, by_next_use, &slab_use);
    if (s && b) {
        uint32_t bp = rt->program->classes[b->class_idx].priority,
                 sp = rt->program->classes[s->pool->class_idx].priority;
        if (sp > bp || (sp == bp && (slab_use < use || (slab_use == use && s->tick > b->tick))))
            s = NULL;
    }
    if (s && evict_movable(rt, device, s, need))
        return true;
    if (!b)
        return false;
    uint64_t t0 = now_ns();
    mover_prefetch(&rt->mover, b->addr, b->size, host_of(rt, b->class_idx, device),
                 dev->evict_stream ? dev->evict_stream : dev->stream);
    rt->evict_ns += now_ns() - t0;
    gpu_leave(rt, b);
    rt->class_stats[b->class_idx].evictions++;
    rt->class_stats[b->class_idx].evict_bytes += b->size;
    timeline_add(rt, TL_EVICT, b->class_idx, device, b->size);
    return true;
}

/* Could reclaim_idle and evict_one free SHORT bytes on DEVICE for a class of
 * PRIORITY? At most: the free space still on the GPU, and the live blocks and
 * movable pieces of classes of no higher priority there, counted whole
 * (blocks placed this round or needed sooner are not told apart: a guess too
 * high only costs the evictions made before a skip). No list is walked. */
static bool room_can_be_made(struct runtime *rt, int device, uint64_t short_by, uint32_t priority)
{
    struct device_state *dev = &rt->devices[device];
    bool captured = atomic_load(&rt->captures) > 0;
    uint64_t bytes = 0;
    for (size_t c = 0; c < rt->program->class_count && bytes < short_by; c++) {
        const struct pool *p = dev->pools[c];
        if (!p)
            continue;
        bytes += p->idle_bytes;
        if (rt->program->classes[c].priority > priority)
            continue;
        bytes += p->lru_bytes;
        if (rt->program->classes[c].memory == MEMORY_MOVABLE && !captured)
            for (const struct slab *s = p->slabs; s; s = s->next)
                bytes += s->backing ? mover_movable_held(s->backing) : 0;
    }
    return bytes >= short_by;
}

/* Make room under the budget for NEED bytes of a class of PRIORITY: free
 * space first (its data is dead), then live blocks. Where all of that would
 * not be enough, nothing is moved. */
static bool make_room(struct runtime *rt, int device, size_t need, uint32_t priority)
{
    struct device_state *dev = &rt->devices[device];
    if (dev->budget_bytes == UINT64_MAX)
        return true;
    if (dev->resident_bytes + need <= dev->budget_bytes)
        return true;
    /* Pieces streamed ahead leave first: no copy, no wait. */
    stream_yield(rt, device, dev->resident_bytes + need - dev->budget_bytes);
    if (dev->resident_bytes + need <= dev->budget_bytes)
        return true;
    if (!room_can_be_made(rt, device, dev->resident_bytes + need - dev->budget_bytes, priority))
        return false;
    /* Evictions to the host come after the placements the runtime queued so
     * far, one of which may bring in a block about to leave: otherwise it
     * could land on the GPU counted as off it. (Placements the job's own
     * stream carries are not followed: an event on each would cost every
     * allocation; such a block is counted again when next placed.) */
    if (dev->evict_stream && dev->stream)
        mover_follow(&rt->mover, dev, dev->evict_stream, dev->stream);
    while (dev->resident_bytes + need > dev->budget_bytes)
        if (!reclaim_idle(rt, device) &&
            !evict_one(rt, device, priority, dev->resident_bytes + need - dev->budget_bytes))
            return false;
    return true;
}

/* Movable pieces of priority at most that of CLASS_IDX leave DEVICE's GPU
 * until NEED bytes have or none is left to; returns the bytes that left. */
static size_t movable_give_way(struct runtime *rt, int class_idx, int device, size_t need)
{
    struct device_state *dev = &rt->devices[device];
    uint32_t priority = rt->program->classes[class_idx].priority;
    bool by_next_use = rt->learn && step_predicting(&rt->step);
    stream_settle(rt); /* remaps handed over are counted as made: before holds */
    uint64_t before = dev->resident_bytes;
    rt->round_floor = rt->tick;
    stream_yield(rt, device, need); /* pieces streamed ahead first: no copy */
    while (before - dev->resident_bytes < need) {
        long use;
        struct slab *s = movable_victim(rt, device, priority, by_next_use, &use);
        if (!s || !evict_movable(rt, device, s, need - (before - dev->resident_bytes)))
            break;
    }
    return before - dev->resident_bytes;
}

void place_room_for_device_slab(struct runtime *rt, int class_idx, int device, size_t size)
{
    struct device_state *dev = &rt->devices[device];
    if (dev->budget_bytes == UINT64_MAX)
        return;
    if (dev->resident_bytes + size > dev->budget_bytes)
        movable_give_way(rt, class_idx, device, dev->resident_bytes + size - dev->budget_bytes);
    if (dev->resident_bytes + size > dev->budget_bytes)
        rt->class_stats[class_idx].budget_skips++;
}

size_t place_card_full(struct runtime *rt, int class_idx, int device, size_t size)
{
    size_t left = movable_give_way(rt, class_idx, device, size);
    if (left)
        LOG(LOG_INFO, "GPU %d had no memory for a %zu-byte slab of class '%s': %zu bytes of "
            "movable memory left it", device, size, rt->program->classes[class_idx].name, left);
    return left;
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
    if (own_gpu && rt->ahead_use >= 0)
        st->ahead_bytes += b->size;
    else if (own_gpu)
        st->demand_bytes += b->size;
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

bool place_movable_on_gpu(const struct runtime *rt, int class_idx, int device, size_t size,
                          int *node)
{
    const struct device_state *dev = &rt->devices[device];
    const struct program_class *cls = &rt->program->classes[class_idx];
    /* A rule that would bring it to the GPU on entering a phase open now
     * (AdamW makes its state inside the first optimizer step) places it
     * there from the start, as for managed memory. */
    const struct program_prefetch *rule = rule_on_alloc(rt, cls);
    struct program_place place = rule ? rule->dest : cls->place;
    bool on_host = place.kind == LOC_HOST || place.kind == LOC_HOST_NUMA ||
                   place.kind == LOC_HOST_NEAR;
    *node = place_host_node(rt, class_idx, device);
    return !on_host && (dev->budget_bytes == UINT64_MAX ||
                        dev->resident_bytes + size <= dev->budget_bytes);
}

/* Place live block B as its class's rule for new blocks says. DEAD: its data
 * is dead (a new block), so its pages need not be copied. */
static void place_by_rule(struct runtime *rt, struct block *b, int device, cudaStream_t stream,
                          bool dead)
{
    const struct program_class *cls = &rt->program->classes[b->class_idx];
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
    if (place_block(rt, b, loc) == PLACE_MOVE) {
        uint64_t t0 = now_ns();
        if (dead)
            move_dead(rt, device, b->addr, b->size, loc, stream, true);
        else
            mover_prefetch(&rt->mover, b->addr, b->size, loc, stream);
        uint64_t moved_ns = now_ns() - t0;
        rt->place_ns += moved_ns;
        rt->runtime_ns += moved_ns;
    }
    rt->runtime_ns += rt->reclaim_ns + rt->evict_ns - made_room_ns;
}

void place_on_alloc(struct runtime *rt, struct block *b, int device, cudaStream_t stream)
{
    const struct program_class *cls = &rt->program->classes[b->class_idx];
    if (!b->slab || cls->memory != MEMORY_MANAGED)
        return; /* device or pinned host memory: counted with its slab, never moved */
    rt->round_floor = rt->tick;
    if (b->on_gpu) /* free space that stayed on the GPU, live again */
        gpu_take_live(rt, b);
    place_by_rule(rt, b, device, stream, true);
}

bool place_reclassify(struct runtime *rt, struct block *b, int to)
{
    int from = b->class_idx;
    if (!b->slab) { /* the job's own managed memory: its advice and its range's class */
        bool warned = false;
        readvise(rt, b, from, to, b->device, &warned);
        ranges_locked_remove(rt, b->addr);
        ranges_locked_add(rt, b->addr, b->size, to, NULL);
        b->class_idx = to;
        b->moved_in = true; /* it stays; no pool lists to leave or join */
        return true;
    }
    struct pool *home = b->slab->pool;
    int device = home->device;
    struct pool *dest =
        device_pool(&rt->devices[device], device, to, rt->program->classes[to].memory);
    if (!dest)
        return false;
    struct pool *src = live_pool(rt, b);
    if (b->on_gpu) {
        lru_remove(src, b);
        resident_sub(rt, &rt->devices[device], from, b->size);
        resident_add(rt, &rt->devices[device], to, b->size);
    }
    if (b->moved_in)
        pool_guest_remove(src, b);
    b->class_idx = to;
    b->moved_in = to != home->class_idx;
    if (b->moved_in)
        pool_guest_add(dest, b);
    readvise(rt, b, from, to, device, &dest->advice_warned);
    rt->round_floor = rt->tick;
    if (b->on_gpu) /* the most recent in its new class's LRU */
        gpu_take_live(rt, b);
    place_by_rule(rt, b, device, b->stream, false);
    return true;
}

/* A freed block keeps its pages where they are: on the GPU it stays counted,
 * on the pool's idle list (joined in pool_free) until it is used again or
 * the budget needs the room. */
void place_on_free(struct runtime *rt, struct block *b)
{
    if (!b->slab || (!b->on_gpu && !b->moved_in))
        return;
    struct pool *p = live_pool(rt, b);
    if (b->on_gpu) {
        lru_remove(p, b);
        b->tick = ++rt->tick;
    }
    if (b->moved_in) { /* free space is its slab's class's again */
        struct pool *home = b->slab->pool;
        pool_guest_remove(p, b);
        readvise(rt, b, b->class_idx, home->class_idx, home->device, &home->advice_warned);
        if (b->on_gpu) {
            resident_sub(rt, &rt->devices[home->device], b->class_idx, b->size);
            resident_add(rt, &rt->devices[home->device], home->class_idx, b->size);
        }
        b->class_idx = home->class_idx;
        b->moved_in = false;
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

/* The live blocks of P's class one after another (B: NULL for the first):
 * those of its slabs not moved to another class, then the blocks of other
 * pools' slabs moved to it (its guests). */
static struct block *next_of_class(const struct pool *p, struct block *b)
{
    for (;;) {
        if (!b)
            b = p->slabs ? p->slabs->first : p->guests;
        else if (b->slab->pool != p) /* a guest */
            b = b->link_next;
        else if (b->next)
            b = b->next;
        else
            b = b->slab->next ? b->slab->next->first : p->guests;
        if (!b || (!b->free && b->class_idx == p->class_idx))
            return b;
    }
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
    for (struct block *b = next_of_class(p, NULL); b; b = next_of_class(p, b)) {
        if (place_block(rt, b, loc) != PLACE_MOVE)
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
                mover_prefetch(&rt->mover, b->addr, b->size, loc, dev->stream);
                continue;
            }
            cap = grown;
        }
        ptrs[n] = (void *)b->addr;
        sizes[n++] = b->size;
    }
    mover_prefetch_batch(&rt->mover, ptrs, sizes, n, loc, dev->stream);
    free(ptrs);
    free(sizes);
    /* Data brought to the GPU must be there before the job's next kernels: order
     * the legacy default stream (and so every blocking stream) after the batch.
     * A batch moved ahead of its use overlaps the job's work until then: the
     * order is set when the use comes (step_used). */
    if (n && is_gpu(loc) && dev->stream && rt->ahead_use < 0)
        mover_follow(&rt->mover, dev, cudaStreamLegacy, dev->stream);
}

/* The room on DEVICE that stayed free since class C last came back: what C,
 * which only the budget sends off the GPU, may bring back without the next
 * peak sending it out again. Where WANTED (C has pieces on the host), device
 * slabs that no block was taken from since then are given back first (the
 * peak fit in the rest); the room is the budget less the most the other
 * memory held since then and what movable classes hold now. A new period
 * starts either way, unless another of C's rules fired at this opening (the
 * same step). The first time, no period is known: the room now. After the
 * job's step changed, every class that came back before measures a step of
 * the new kind first, bringing nothing, its other rules at that opening
 * included (RETURN_MEASURING); and the first class with pieces to bring back
 * gives back every empty device slab, made for a step that is no more. */
static uint64_t steady_room(struct runtime *rt, size_t c, int device, bool wanted)
{
    struct device_state *dev = &rt->devices[device];
    if (dev->step_changed) { /* what was measured is stale: every class measures again */
        dev->step_changed = false;
        dev->release_pending = true;
        for (size_t k = 0; k < rt->program->class_count; k++)
            if (dev->return_mark[k])
                dev->return_mark[k] = RETURN_REMEASURE;
    }
    if (dev->release_pending && wanted) { /* at the first class with pieces to bring back */
        dev->release_pending = false;
        size_t released = trim(rt, device, TRIM_UNUSED, UINT64_MAX, UINT64_MAX);
        LOG(LOG_INFO, "GPU %d: the job's step changed: %zu bytes of empty device slabs given "
            "back; the classes that come back measure a step first", device, released);
    }
    uint64_t mark = dev->return_mark[c];
    bool remeasure = mark == RETURN_REMEASURE; /* nothing comes back before a step of the new kind */
    uint64_t since = remeasure ? 0 : mark & ~RETURN_MEASURING; /* 0: no period measured */
    uint64_t peak = dev->return_peak[c];
    if (since && since == dev->take_clock) { /* another of its rules at this opening: the same step */
        if (mark & RETURN_MEASURING)
            return 0;
    } else { /* a period starts */
        uint64_t released = since && wanted ? trim(rt, device, TRIM_UNUSED, UINT64_MAX, since) : 0;
        peak = peak > released ? peak - released : 0;
        if (!mark)
            dev->returning++;
        dev->return_mark[c] = ++dev->take_clock | (remeasure ? RETURN_MEASURING : 0);
        dev->return_peak[c] = dev->resident_bytes - dev->movable_resident;
        if (!since) /* the first period, or the first of the new step: the room now, or none */
            return remeasure ? 0 : UINT64_MAX;
    }
    if (dev->budget_bytes == UINT64_MAX)
        return UINT64_MAX;
    uint64_t held = peak + dev->movable_resident;
    return dev->budget_bytes > held ? dev->budget_bytes - held : 0;
}

/* Movable class C's slabs on DEVICE move whole to DEST, the GPU within its
 * budget (what does not fit stays on the host, where the GPU reads it over
 * the link). The mover waits for the GPU's work first: the job's thread
 * waits for the moves. */
static void move_movable(struct runtime *rt, size_t c, int device, struct program_place dest,
                         bool outermost)
{
    struct device_state *dev = &rt->devices[device];
    struct pool *p = dev->pools[c];
    if (!p)
        return;
    bool to_gpu = dest.kind == LOC_GPU;
    struct class_stats *st = &rt->class_stats[c];
    if (atomic_load(&rt->captures) > 0) { /* waiting for the GPU would invalidate the capture */
        st->movable_capture_skips++;
        if (!atomic_exchange(&rt->movable_skip_said, true))
            LOG(LOG_WARN, "class '%s': not moved while a stream capture is in progress (a move "
                "waits for the whole GPU, which would invalidate the capture; said once)",
                rt->program->classes[c].name);
        return;
    }
    /* A class the budget alone sends out comes back only into room that
     * stays free through the step: else its next peak sends it out again.
     * The step is measured from one outermost opening of the rule's phase to
     * the next (a nested opening, such as a framework's own "forward" inside
     * the job's, would cut it short). */
    bool returns = to_gpu && !program_class_leaves_by_rule(rt->program, c);
    if (returns && !outermost)
        return;
    uint64_t t0 = now_ns();
    stream_settle(rt); /* no remap of their pieces is being made */
    bool on_host = false; /* a piece of the class is there to bring back */
    for (const struct slab *s = p->slabs; s && !on_host; s = s->next) {
        const struct movable *mv = s->backing;
        on_host = mv && mv->gpu_bytes < mv->size;
    }
    uint64_t steady = returns ? steady_room(rt, c, device, on_host) : UINT64_MAX;
    for (struct slab *s = p->slabs; s; s = s->next) {
        struct movable *mv = s->backing;
        if (!mv) /* plain device memory: movable memory was not to be had */
            continue;
        size_t before = mover_movable_held(mv);
        size_t limit = to_gpu ? mv->size - mv->gpu_bytes : mv->gpu_bytes;
        bool short_of_room = false;
        if (to_gpu && limit > steady) {
            short_of_room = true;
            limit = (size_t)steady;
        }
        if (to_gpu && limit && dev->budget_bytes != UINT64_MAX) {
            /* Freed space still on the GPU makes room first: its data is dead. */
            while (dev->resident_bytes + limit > dev->budget_bytes && reclaim_idle(rt, device))
                ;
            uint64_t room = dev->budget_bytes > dev->resident_bytes
                                ? dev->budget_bytes - dev->resident_bytes
                                : 0;
            if (room < limit) {
                short_of_room = true;
                limit = (size_t)room;
            }
        }
        if (to_gpu && limit && !mover_movable_would_move(mv, true, limit))
            limit = 0; /* no piece fits: no wait for the GPU */
        size_t moved = limit ? mover_movable_move(&rt->mover, dev, mv, to_gpu, limit,
                                                  stream_unwritten(rt, (int)c))
                             : 0;
        movable_mapped(rt, s); /* a piece lost on the way: mapped again at once where it can be */
        if (short_of_room)
            st->movable_budget_left += mv->size - mv->gpu_bytes;
        /* Pieces on their way in (streaming ahead) were given up first. */
        size_t after = mover_movable_held(mv);
        if (after > before && steady != UINT64_MAX)
            steady = after - before < steady ? steady - (after - before) : 0;
        if (after > before)
            resident_add(rt, dev, (int)c, after - before);
        else
            resident_sub(rt, dev, (int)c, before - after);
        if (to_gpu) {
            st->movable_to_gpu_bytes += moved;
            if (moved)
                s->tick = ++rt->tick;
        } else {
            st->movable_to_host_bytes += moved;
        }
        if (moved)
            timeline_add(rt, to_gpu ? TL_PREFETCH_GPU : TL_PREFETCH_HOST, (int)c, device, moved);
    }
    st->movable_move_ns += now_ns() - t0;
}

/* Class C's rule K fired: a use of the class, recorded in the step, and the
 * prediction made for it, if any, scored. */
static void step_used(struct runtime *rt, size_t c, uint32_t k)
{
    long i = step_record(&rt->step, step_use_key((uint32_t)c, k));
    /* Where the use came in the reference: where it matched, else where the
     * step stands (predictions are reference indices). */
    long actual = i < 0 ? -1 : step_matched(&rt->step, i);
    if (i >= 0 && actual < 0)
        actual = (long)step_pos(&rt->step);
    long predicted = rt->predicted_use[c];
    if (predicted >= 0) /* moved ahead: the job's work from here on waits for it */
        for (int d = 0; d < RT_MAX_DEVICES; d++)
            if (rt->devices[d].known && rt->devices[d].stream)
                mover_follow(&rt->mover, &rt->devices[d], cudaStreamLegacy, rt->devices[d].stream);
    rt->predicted_use[c] = -1;
    if (actual < 0 || predicted < 0)
        return;
    struct class_stats *st = &rt->class_stats[c];
    st->next_use_predictions++;
    st->next_use_hits += actual == predicted;
    st->next_use_error += (uint64_t)(actual > predicted ? actual - predicted : predicted - actual);
}

void place_ahead(struct runtime *rt)
{
    if (!rt->learn || !step_predicting(&rt->step))
        return;
    const struct program *p = rt->program;
    long pos = (long)step_pos(&rt->step);
    /* The window: the reference's events up to its second phase opening
     * from here (at most 4096); what was scanned before is not moved twice. */
    long end = pos;
    for (int enters = 0; end < pos + 4096; end++) {
        uint32_t key = step_ref_key(&rt->step, (size_t)end);
        if (!key || (step_kind_of(key) == STEP_ENTER && ++enters == 2))
            break;
    }
    uint64_t t0 = now_ns();
    for (long i = rt->ahead_scanned < pos ? pos : rt->ahead_scanned + 1; i < end; i++) {
        uint32_t key = step_ref_key(&rt->step, (size_t)i);
        rt->ahead_scanned = i;
        if (step_kind_of(key) != STEP_USE)
            continue;
        uint32_t c = step_use_class(key), k = step_use_rule(key);
        if (c >= p->class_count || k >= p->classes[c].prefetch_count)
            continue;
        const struct program_prefetch *pf = &p->prefetches[p->classes[c].prefetch_first + k];
        if (pf->dest.kind != LOC_GPU || p->classes[c].memory != MEMORY_MANAGED)
            continue;
        if (rt->predicted_use[c] < 0)
            rt->predicted_use[c] = i;
        rt->ahead_use = i;
        rt->round_floor = rt->phase_tick;
        for (int d = 0; d < RT_MAX_DEVICES; d++)
            if (rt->devices[d].known)
                move_class(rt, c, d, pf->dest);
        rt->ahead_use = -1;
    }
    rt->runtime_ns += now_ns() - t0;
}

void place_trigger(struct runtime *rt, enum trigger_kind trigger, const uint64_t *glob_bits,
                   const uint64_t *outer, int mark)
{
    const struct program *p = rt->program;
    uint64_t t0 = now_ns();
    rt->round_floor = rt->tick;
    for (size_t c = 0; c < p->class_count; c++) {
        const struct program_class *cls = &p->classes[c];
        if (cls->memory != MEMORY_MANAGED && cls->memory != MEMORY_MOVABLE)
            continue;
        for (uint32_t k = 0; k < cls->prefetch_count; k++) {
            const struct program_prefetch *pf = &p->prefetches[cls->prefetch_first + k];
            if (!trigger_fires(pf, trigger, glob_bits, mark))
                continue;
            if (rt->learn)
                step_used(rt, c, k);
            for (int d = 0; d < RT_MAX_DEVICES; d++) {
                if (!rt->devices[d].known)
                    continue;
                if (cls->memory == MEMORY_MOVABLE)
                    move_movable(rt, c, d, pf->dest,
                                 !outer || trigger_fires(pf, trigger, outer, mark));
                else
                    move_class(rt, c, d, pf->dest);
            }
        }
    }
    rt->runtime_ns += now_ns() - t0;
}
