/* The allocation front doors: classify, then serve from a class pool, hand
 * the job's own managed memory back advised, or pass through untouched.
 * Each is a sequence of steps down the floors: find a free block (pool),
 * else grow the pool (mover, then placement counts and advises the slab),
 * take the block, place it (placement), count it. */
#include <stdlib.h>
#include <string.h>

#include "runtime/log.h"
#include "runtime/mover.h"
#include "runtime/placement.h"
#include "runtime/profile.h"
#include "runtime/residency.h"
#include "runtime/runtime.h"
#include "runtime/stream.h"

/* What could not be done is said once per process; the job goes on. */
#define LOG_ONCE(said, ...)                                                                        \
    do {                                                                                           \
        if (!atomic_exchange(said, true))                                                          \
            LOG(LOG_WARN, __VA_ARGS__);                                                            \
    } while (0)

int runtime_init(struct runtime *rt, const struct program *program, const struct cuda_api *cuda)
{
    memset(rt, 0, sizeof *rt);
    rt->program = program;
    rt->cuda = cuda;
    mover_init(&rt->mover, cuda);
    map_init(&rt->map);
    atomic_store(&rt->phase_current, -1);
    /* The locks first (they never fail on Linux): from there on a failure
     * lets go of what was made with runtime_destroy. */
    if (pthread_mutex_init(&rt->lock, NULL) != 0)
        return -1;
    if (pthread_mutex_init(&rt->range_lock, NULL) != 0) {
        pthread_mutex_destroy(&rt->lock);
        return -1;
    }
    rt->class_stats = calloc(program->class_count, sizeof *rt->class_stats);
    rt->pinning_off = calloc(program->class_count, sizeof *rt->pinning_off);
    rt->ahead_use = -1;
    if (phases_init(rt) != 0 || !rt->class_stats || !rt->pinning_off || !stream_init(rt))
        goto fail;
    rt->learn = program->step_glob >= 0 || program->step_by_repetition;
    if (rt->learn) {
        rt->predicted_use = malloc(program->class_count * sizeof *rt->predicted_use);
        rt->arenas = calloc(RT_MAX_DEVICES * program->class_count, sizeof *rt->arenas);
        if (!rt->predicted_use || !rt->arenas)
            goto fail;
        for (size_t c = 0; c < program->class_count; c++)
            rt->predicted_use[c] = -1;
    }
    return 0;
fail:
    runtime_destroy(rt);
    return -1;
}

void runtime_destroy(struct runtime *rt)
{
    /* Host bookkeeping only: device memory belongs to a CUDA context that may
     * already be gone at exit, and the driver reclaims it with the process.
     * The mover's thread finishes the remaps handed to it first. */
    mover_destroy(&rt->mover);
    for (size_t i = 0; rt->arenas && i < rt->map.cap; i++) { /* live blocks of the plans' arenas */
        struct block *b = rt->map.slots[i];
        if (b && b->slab && b->slab->planned) {
            block_release(b);
            rt->map.slots[i] = NULL;
        }
    }
    for (int d = 0; d < RT_MAX_DEVICES; d++) {
        struct device_state *dev = &rt->devices[d];
        for (size_t c = 0; dev->pools && c < rt->program->class_count; c++)
            for (struct slab *s = dev->pools[c] ? dev->pools[c]->slabs : NULL; s; s = s->next)
                if (s->backing)
                    mover_movable_forget(s->backing);
        device_close(dev, rt->program->class_count);
    }
    for (size_t i = 0; i < rt->map.cap; i++)
        if (rt->map.slots[i] && !rt->map.slots[i]->slab)
            block_release(rt->map.slots[i]);
    for (size_t a = 0; rt->arenas && a < RT_MAX_DEVICES * rt->program->class_count; a++) {
        free(rt->arenas[a].slab);
        plan_free(&rt->arenas[a].plan);
    }
    free(rt->arenas);
    free(rt->notes);
    map_free(&rt->map);
    profile_free(rt);
    phases_free(rt);
    ranges_free(&rt->ranges);
    free(rt->timeline);
    sites_free(rt->sites);
    trace_free(rt->trace);
    step_free(&rt->step);
    step_find_free(&rt->finder);
    stream_destroy(rt);
    free(rt->predicted_use);
    free(rt->pinning_off);
    pthread_mutex_destroy(&rt->range_lock);
    free(rt->class_stats);
    pthread_mutex_destroy(&rt->lock);
}

void runtime_after_fork_child(struct runtime *rt)
{
    rt->allocations = rt->passthrough = rt->frees = rt->foreign_managed = 0;
    rt->runtime_ns = rt->place_ns = rt->reclaim_ns = rt->evict_ns = 0;
    atomic_store(&rt->held_ns, 0);
    rt->slab_release_ns = rt->remap_wait_ns = rt->slab_grow_ns = 0;
    for (size_t c = 0; c < rt->program->class_count; c++) {
        const struct class_stats *s = &rt->class_stats[c];
        rt->class_stats[c] = (struct class_stats){.live_bytes = s->live_bytes,
                                                  .peak_bytes = s->live_bytes,
                                                  .slabs = s->slabs,
                                                  .slab_bytes = s->slab_bytes,
                                                  .slab_peak_bytes = s->slab_bytes,
                                                  .plan_bytes = s->plan_bytes,
                                                  .plan_given_up = s->plan_given_up};
    }
    for (int d = 0; d < RT_MAX_DEVICES; d++) { /* the child's peak on each card, from the fork on */
        struct device_state *dev = &rt->devices[d];
        dev->resident_peak = dev->resident_bytes;
        device_forget_returns(dev, rt->program->class_count); /* the child's steps are its own */
    }
    rt->timeline_count = rt->timeline_dropped = 0;
    for (size_t c = 0; c < rt->program->class_count; c++) /* MADV_DONTFORK: not mapped here */
        if (rt->program->classes[c].memory == MEMORY_HOST)
            atomic_store(&rt->pinning_off[c], true);
    sites_after_fork_child(rt->sites);
    if (rt->trace) /* the parent's slabs are not in it: the child's trace starts empty */
        trace_clear(rt->trace);
    phases_after_fork_child(rt, profile_timestamp(rt));
    if (rt->program->step_glob >= 0) /* only the forking thread's phases are still open */
        rt->step_open = rt->phase_open_count[rt->program->step_glob];
    profile_after_fork_child(rt);
}

/* DEVICE's state, learned on first use: the mechanism opens it, the policy
 * sets its budget and cap, the profiler configures its counters. */
static struct device_state *device_get(struct runtime *rt, int device)
{
    if (device < 0 || device >= RT_MAX_DEVICES)
        return NULL;
    struct device_state *dev = &rt->devices[device];
    if (dev->known)
        return dev;
    if (!device_open(dev, rt->cuda, device, rt->program->class_count))
        return NULL;
    placement_configure_device(rt, device);
    dev->known = true;
    profile_device_seen(rt);
    return dev;
}

/* The job's own cudaMallocManaged: keep it the job's, but count it against
 * the cap and give it its class's advice and prefetch. Where the runtime has
 * no memory for its own record, the allocation is the job's, unplaced: CUDA's
 * answer, not an out-of-memory of umpol's. */
static cudaError_t adopt_managed(struct runtime *rt, void **ptr, size_t size, int cls,
                                 int device, cudaStream_t stream)
{
    struct device_state *dev = device_get(rt, device);
    if (dev && !cap_admits(rt, cls, device, size))
        return cudaErrorMemoryAllocation;
    struct block *b = dev ? block_new() : NULL;
    uintptr_t base;
    cudaError_t err = mover_alloc(&rt->mover, MEMORY_MANAGED, size, -1, &base);
    if (err != cudaSuccess) {
        if (b)
            block_release(b);
        return err;
    }
    *ptr = (void *)base;
    if (b)
        *b = (struct block){.addr = base, .size = size, .requested = size, .class_idx = cls,
                            .device = device, .stream = stream};
    if (!b || map_insert(&rt->map, b) != 0) {
        static _Atomic bool said;
        if (b)
            block_release(b);
        LOG_ONCE(&said, "out of memory for umpol's records: a managed allocation of %zu bytes "
                 "is the job's, unplaced (said once)", size);
        __atomic_fetch_add(&rt->passthrough, 1, __ATOMIC_RELAXED);
        return cudaSuccess;
    }
    rt->foreign_managed++;
    place_adopted(rt, cls, device, *ptr, size, stream);
    return cudaSuccess;
}

/* Movable memory could not be made for class CLS (said once). */
static void movable_failed(struct runtime *rt, int cls, size_t size)
{
    LOG_ONCE(&rt->movable_failed_said, "class '%s': %zu bytes of movable memory could not be "
             "made (pinned host memory or GPU memory short); the slab is plain device memory "
             "(said once)", rt->program->classes[cls].name, size);
}

/* Is a stream being captured into a graph: STREAM (as CUDA says), or any
 * stream whose capture began through the interposed calls? A capture on one
 * stream is not seen from another, and cudaMalloc carries no stream. */
static bool capturing(struct runtime *rt, cudaStream_t stream)
{
    return atomic_load(&rt->captures) > 0 || mover_stream_capturing(&rt->mover, stream);
}

/* A slab of SIZE bytes of KIND (device or pinned host memory, on NODE) for
 * POOL at *BASE. Device memory first makes room under the budget; where the
 * card itself refuses it, empty slabs are given back and then movable pieces
 * leave the GPU, and it is tried again. Neither while STREAM is captured. */
static cudaError_t fixed_slab(struct runtime *rt, struct pool *p, enum memory_kind kind,
                              size_t size, int node, cudaStream_t stream, uintptr_t *base)
{
    bool device = kind == MEMORY_DEVICE && !capturing(rt, stream);
    if (device)
        place_room_for_device_slab(rt, p->class_idx, p->device, size);
    cudaError_t err = mover_alloc(&rt->mover, kind, size, node, base);
    /* Pinned host memory short: any empty slab may help; GPU memory short: the card's. */
    if (err == cudaErrorMemoryAllocation &&
        place_trim(rt, p->device, kind == MEMORY_HOST ? TRIM_ALL : TRIM_CARD) > 0)
        err = mover_alloc(&rt->mover, kind, size, node, base);
    if (err == cudaErrorMemoryAllocation && device &&
        place_card_full(rt, p->class_idx, p->device, size) > 0)
        err = mover_alloc(&rt->mover, kind, size, node, base);
    return err;
}

/* Grow POOL by a slab of SIZE bytes: within the cap, memory from CUDA (after
 * giving back empty slabs if CUDA has none), then counted and advised. A
 * pool on the card first gives back its own empty slabs, which could not
 * serve the request: the card would hold them beside the new one, and the
 * sizes of a step's first pass (which sets the slabs for the steps after)
 * would stay fragments for the whole run. Not while STREAM is captured into
 * a graph, which a cudaFree would invalidate. */
static cudaError_t grow(struct runtime *rt, struct pool *p, size_t size, bool dedicated,
                        cudaStream_t stream, struct slab **out)
{
    enum memory_kind kind = rt->program->classes[p->class_idx].memory;
    uint64_t t0 = now_ns(), parts0 = rt->slab_release_ns + rt->remap_wait_ns;
    if (kind != MEMORY_HOST && pool_has_empty_slab(p) && !capturing(rt, stream))
        place_trim(rt, p->device, p->class_idx);
    if (kind == MEMORY_MANAGED && !cap_admits(rt, p->class_idx, p->device, size))
        return cudaErrorMemoryAllocation;
    if (kind == MEMORY_MOVABLE && !mover_movable_usable(&rt->mover, p->device))
        kind = MEMORY_DEVICE; /* said once per GPU, by the mover */
    uintptr_t base = 0;
    struct movable *mv = NULL;
    cudaError_t err;
    if (kind == MEMORY_MOVABLE) {
        int node;
        size = (size + MOVABLE_GRANULE - 1) / MOVABLE_GRANULE * MOVABLE_GRANULE;
        bool on_gpu = place_movable_on_gpu(rt, p->class_idx, p->device, size, &node);
        err = mover_movable_alloc(&rt->mover, size, p->device, node, on_gpu, &mv);
        if (err == cudaErrorMemoryAllocation && place_trim(rt, p->device, TRIM_ALL) > 0)
            err = mover_movable_alloc(&rt->mover, size, p->device, node, on_gpu, &mv);
        if (err != cudaSuccess) { /* no pinned host memory for it: plain device memory */
            movable_failed(rt, p->class_idx, size);
            kind = MEMORY_DEVICE;
            err = fixed_slab(rt, p, kind, size, -1, stream, &base);
        }
        base = mv ? mv->base : base;
    } else {
        int node = kind == MEMORY_HOST ? place_host_node(rt, p->class_idx, p->device) : -1;
        err = fixed_slab(rt, p, kind, size, node, stream, &base);
    }
    if (err != cudaSuccess)
        return err;
    struct slab *s = pool_add_slab(p, base, size, dedicated);
    if (!s) {
        if (mv)
            mover_movable_release(&rt->mover, mv);
        else
            mover_release(&rt->mover, kind, base, size);
        return cudaErrorMemoryAllocation;
    }
    s->backing = mv;
    if (mv)
        mv->owner = s; /* the stream finds a piece's slab from its remap's outcome */
    place_new_slab(rt, p, s);
    uint64_t took = now_ns() - t0, parts = rt->slab_release_ns + rt->remap_wait_ns - parts0;
    rt->runtime_ns += took;
    rt->slab_grow_ns += took > parts ? took - parts : 0;
    *out = s;
    return cudaSuccess;
}

static bool stream_idle(void *rt, cudaStream_t stream)
{
    return mover_stream_idle(&((struct runtime *)rt)->mover, stream);
}

/* ---- the step's plan: blocks of device memory where it put them ---- */

/* Where the plan of CLASS_IDX on DEVICE is in rt->arenas. */
static size_t arena_index(const struct runtime *rt, int device, int class_idx)
{
    return (size_t)device * rt->program->class_count + (size_t)class_idx;
}

static struct plan_arena *arena_of(struct runtime *rt, int device, int class_idx)
{
    return rt->arenas ? &rt->arenas[arena_index(rt, device, class_idx)] : NULL;
}

/* Could a plan hold a block of SIZE bytes of class CLS, allocated in MODE on
 * STREAM? Not on cudaStreamPerThread: a plan's pages go from block to block
 * on its arena's one stream with no wait, and that handle names another
 * stream in every thread. */
static bool plannable(const struct runtime *rt, int cls, size_t size, enum alloc_mode mode,
                      cudaStream_t stream)
{
    return rt->arenas && mode == MODE_STREAM && stream != cudaStreamPerThread &&
           size >= PLAN_MIN_BLOCK && rt->program->classes[cls].memory == MEMORY_DEVICE;
}

/* The arena of A's plan, for POOL: its empty slabs go first, whose place it
 * takes. False: no memory for it (said once; the pool serves the class). */
static bool make_arena(struct runtime *rt, struct pool *p, struct plan_arena *a)
{
    static _Atomic bool said;
    if (capturing(rt, a->stream))
        return false;
    place_trim(rt, p->device, p->class_idx);
    uintptr_t base = 0;
    cudaError_t err = fixed_slab(rt, p, MEMORY_DEVICE, a->plan.bytes, -1, a->stream, &base);
    struct slab *s = err == cudaSuccess ? calloc(1, sizeof *s) : NULL;
    if (!s) {
        if (err == cudaSuccess)
            mover_release(&rt->mover, MEMORY_DEVICE, base, a->plan.bytes);
        a->failed = true;
        LOG_ONCE(&said, "no memory for the step's plan of class '%s' on GPU %d (%llu bytes): "
                 "its pool serves it (said once)", rt->program->classes[p->class_idx].name,
                 p->device, (unsigned long long)a->plan.bytes);
        return false;
    }
    *s = (struct slab){.base = base, .size = a->plan.bytes, .pool = p, .dedicated = true,
                       .planned = true};
    a->slab = s;
    place_new_slab(rt, p, s);
    rt->class_stats[p->class_idx].plan_bytes = a->plan.bytes;
    return true;
}

/* Give back A's arena, which holds no block (cudaFree waits for the GPU's
 * work in it). Not while a stream is captured. */
static void release_arena(struct runtime *rt, struct plan_arena *a)
{
    struct slab *s = a->slab;
    if (!s || atomic_load(&rt->captures) > 0)
        return;
    struct pool *p = s->pool;
    struct class_stats *st = &rt->class_stats[p->class_idx];
    resident_sub(rt, &rt->devices[p->device], p->class_idx, s->size);
    st->slabs--;
    st->slab_bytes -= s->size;
    st->slab_releases++;
    st->plan_bytes = 0;
    place_slab_gone(rt, s);
    cudaError_t err = mover_release(&rt->mover, MEMORY_DEVICE, s->base, s->size);
    if (err != cudaSuccess)
        LOG(LOG_WARN, "releasing the step's plan of class '%s' (%zu bytes) failed: %s",
            rt->program->classes[p->class_idx].name, s->size, mover_error(&rt->mover, err));
    free(s);
    a->slab = NULL;
}

/* A step strayed from A's plan on DEVICE (a block it turned away went to the
 * pool) and the pool grew past the budget for it, beside the arena: a job
 * whose step varies (updates batched by timing) does so from step to step.
 * The plan is given up (said once; the arena holds no block now), and the
 * pool serves class CLS on DEVICE from then on, as without a plan. */
static void give_up_plan(struct runtime *rt, struct plan_arena *a, int device, size_t cls)
{
    uint64_t bytes = a->slab->size;
    release_arena(rt, a);
    if (a->slab) /* not given back (a capture): tried again as the next step begins */
        return;
    a->failed = true;
    a->stray_past_budget = false;
    plan_free(&a->plan);
    rt->class_stats[cls].plan_given_up = true;
    LOG(LOG_WARN, "the step's plan of class '%s' on GPU %d is given up: a step strayed from it "
        "and a block it could not place grew the class's pool past the budget beside its "
        "%llu-byte arena; the pool serves the class from now on",
        rt->program->classes[cls].name, device, (unsigned long long)bytes);
}

/* The block the step's plan put the current step's EVENT at, WANT bytes of
 * POOL's class on STREAM: NULL where there is none, or (*MISSED) where the
 * plan has one but its place is held and the arena has no other, or it came
 * on another stream: a miss, which the pool serves. */
static struct block *planned_block(struct runtime *rt, struct pool *p, long event, size_t want,
                                   cudaStream_t stream, bool *missed)
{
    struct plan_arena *a = arena_of(rt, p->device, p->class_idx);
    long j = step_matched(&rt->step, event);
    uint64_t off;
    bool refit = false;
    if (!a || a->failed || j < 0 || !plan_offset(&a->plan, (size_t)j, &off))
        return NULL;
    struct class_stats *st = &rt->class_stats[p->class_idx];
    if (a->stream != (void *)stream) {
        st->plan_misses++;
        *missed = a->slab != NULL; /* beside an arena */
        return NULL;
    }
    if (!a->slab && !make_arena(rt, p, a))
        return NULL;
    if (!plan_claim(&a->plan, off, want)) { /* the step strays: elsewhere in the arena, or the pool */
        if (!plan_claim_free(&a->plan, want, &off)) {
            st->plan_misses++;
            *missed = true;
            return NULL;
        }
        refit = true;
    }
    struct block *b = block_new();
    if (!b) {
        plan_release(&a->plan, off, want);
        return NULL;
    }
    st->plan_refits += refit;
    *b = (struct block){.addr = a->slab->base + off, .size = want, .slab = a->slab,
                        .class_idx = p->class_idx};
    st->planned_allocations++;
    a->served++;
    return b;
}

/* Planned block B is free, used last by STREAM (MODE_ANY: by no stream):
 * its pages are the plan's again. Freed on another stream than the arena's,
 * the arena's stream first follows that one's work, as the pool's reuse
 * across streams does; where it cannot, the pages stay held. */
static void planned_free(struct runtime *rt, struct block *b, cudaStream_t stream,
                         enum alloc_mode mode)
{
    struct pool *home = b->slab->pool;
    struct plan_arena *a = arena_of(rt, home->device, home->class_idx);
    if (mode == MODE_ANY || (void *)stream == a->stream ||
        mover_follow(&rt->mover, &rt->devices[home->device], a->stream, stream))
        plan_release(&a->plan, b->addr - b->slab->base, b->size);
    block_release(b);
}

/* The stream most of the current step's blocks of arena A came on (among
 * the first 8 streams seen): *STREAM; false: none came. */
static bool main_stream(const struct runtime *rt, size_t a, void **stream)
{
    enum { SEEN = 8 };
    void *streams[SEEN];
    size_t counts[SEEN], seen = 0, best = 0;
    for (size_t k = 0; k < rt->note_count; k++) {
        const struct plan_note *nt = &rt->notes[k];
        if (arena_index(rt, nt->device, nt->class_idx) != a)
            continue;
        size_t i = 0;
        while (i < seen && streams[i] != nt->stream)
            i++;
        if (i == seen && seen < SEEN) {
            streams[seen] = nt->stream;
            counts[seen++] = 0;
        }
        if (i < seen && ++counts[i] > counts[best])
            best = i;
    }
    if (seen)
        *stream = streams[best];
    return seen > 0;
}

/* A step began and the one that ended is the reference now, after it
 * REPEATED the step before it (or not). The plans follow it; an arena that
 * served nothing in the step that ended, and holds no block, is given back
 * (the step changed: its blocks go to the pool until a plan fits again);
 * and a class with no plan, or whose plan lost a quarter of its blocks to
 * a step that strayed, gets one from this step while its arena holds no
 * block (a larger one than the arena gives the arena back). */
static void plan_step(struct runtime *rt, bool repeated)
{
    const struct step_model *m = &rt->step;
    size_t classes = rt->program->class_count, len = step_ref_len(m);
    for (size_t a = 0; a < RT_MAX_DEVICES * classes; a++) {
        struct plan_arena *arena = &rt->arenas[a];
        if (arena->stray_past_budget && arena->slab && !plan_in_use(&arena->plan))
            give_up_plan(rt, arena, (int)(a / classes), a % classes);
        if (arena->plan.offset)
            plan_reindex(&arena->plan, step_ref_at(m), len); /* false: unplanned, the pool serves */
        if (arena->slab && !arena->served && !plan_in_use(&arena->plan))
            release_arena(rt, arena);
        arena->served = 0;
    }
    if (repeated && rt->note_count) {
        struct plan_block *blocks = malloc(rt->note_count * sizeof *blocks);
        for (size_t a = 0; blocks && a < RT_MAX_DEVICES * classes; a++) {
            struct plan_arena *arena = &rt->arenas[a];
            void *stream = NULL;
            size_t n = 0;
            bool came = main_stream(rt, a, &stream);
            for (size_t k = 0; came && k < rt->note_count; k++) {
                const struct plan_note *nt = &rt->notes[k];
                long end = step_ref_partner(m, nt->event);
                if (arena_index(rt, nt->device, nt->class_idx) == a && nt->stream == stream &&
                    end > (long)nt->event) /* freed within the step */
                    blocks[n++] = (struct plan_block){nt->event, (uint32_t)end, nt->size};
            }
            if (arena->failed || n == 0 || arena->plan.planned >= n - n / 4 ||
                (arena->slab && plan_in_use(&arena->plan)))
                continue;
            if (n > PLAN_MAX_BLOCKS || rt->notes_overflow) { /* no new plan: too many blocks */
                static _Atomic bool said;
                struct class_stats *st = &rt->class_stats[a % classes];
                if (n > st->plan_refused_blocks)
                    st->plan_refused_blocks = n;
                LOG_ONCE(&said, "a step had %s%zu blocks of class '%s' on GPU %zu, more than a "
                         "step's plan lays out (%u a class, %u in all): no new plan is made, a "
                         "plan from an earlier step serves the blocks it matches and the pool the "
                         "rest (said once)", rt->notes_overflow ? "at least " : "", n,
                         rt->program->classes[a % classes].name, a / classes, PLAN_MAX_BLOCKS,
                         PLAN_MAX_BLOCKS * 4);
                continue;
            }
            struct step_plan plan = {0};
            if (!plan_build(&plan, blocks, n, len))
                continue;
            /* An arena too small, or of another stream, is given back for it. */
            bool misfit = arena->slab && (plan.bytes > arena->slab->size || stream != arena->stream);
            if (misfit)
                release_arena(rt, arena);
            if (misfit && arena->slab) {
                plan_free(&plan); /* not given back (a capture): the pool serves meanwhile */
                continue;
            }
            plan_free(&arena->plan);
            arena->plan = plan;
            arena->stream = stream;
            rt->class_stats[a % classes].plans_made++;
        }
        free(blocks);
    }
    rt->note_count = 0;
    rt->notes_overflow = false;
}

/* A block of class CLASS_IDX on DEVICE for SIZE bytes: where the step's plan
 * put the current step's EVENT (>= 0), else free space of its pool (STREAM
 * first ordered after the streams that last used it), else a new slab
 * (*GREW). */
static cudaError_t pool_alloc(struct runtime *rt, int class_idx, int device, size_t size,
                              long event, cudaStream_t stream, enum alloc_mode mode,
                              struct block **out, bool *grew)
{
    *grew = false;
    struct device_state *dev = device_get(rt, device);
    enum memory_kind memory = rt->program->classes[class_idx].memory;
    struct pool *p = dev ? device_pool(dev, device, class_idx, memory) : NULL;
    if (!p)
        return cudaErrorMemoryAllocation;
    struct pool_request req;
    if (!pool_request_for(size, rt->program->slab_bytes, &req))
        return cudaErrorMemoryAllocation;
    if (memory == MEMORY_MOVABLE && stream_enabled(rt))
        stream_settle(rt); /* a piece a remap lost is quarantined before its space is handed out */
    if (mode != MODE_ANY) { /* blocks freed on STREAM: its point before the work this one is for */
        cudaStream_t proxy = stream == cudaStreamPerThread ? mover_thread_proxy(device) : NULL;
        mover_point_settle(&rt->mover, dev, proxy ? proxy : stream);
    }
    bool missed = false;
    struct block *b = event >= 0 && plannable(rt, class_idx, req.want, mode, stream)
                          ? planned_block(rt, p, event, req.want, stream, &missed)
                          : NULL;
    if (!b) {
        bool wait = false;
        b = pool_find_free(p, req.want, req.max, stream, mode, stream_idle, rt, &wait);
        if (b && wait) {
            for (int i = 0; b && i < b->free_stream_count; i++)
                if (!mover_follow_point(&rt->mover, dev, stream, b->free_streams[i],
                                       b->free_points[i]))
                    b = NULL;
            if (b)
                rt->class_stats[class_idx].cross_stream_reuses++;
        }
        if (!b) {
            struct slab *s;
            uint64_t skips = rt->class_stats[class_idx].budget_skips;
            cudaError_t err = grow(rt, p, req.grow, req.dedicated, stream, &s);
            if (err == cudaErrorMemoryAllocation && !req.dedicated && req.fitted < req.grow)
                /* No room for a whole slab: one the size of the request, as
                 * the job's own cudaMalloc would have found room for it. */
                err = grow(rt, p, req.fitted, true, stream, &s);
            if (err != cudaSuccess)
                return err;
            if (missed && rt->class_stats[class_idx].budget_skips > skips)
                arena_of(rt, device, class_idx)->stray_past_budget = true;
            b = s->first;
            *grew = true;
        }
        pool_take(p, b, req.want);
    }
    if (map_insert(&rt->map, b) != 0) {
        if (b->slab->planned)
            planned_free(rt, b, stream, mode);
        else
            pool_untake(p, b);
        return cudaErrorMemoryAllocation;
    }
    b->free = false;
    b->free_stream_count = 0;
    b->stream = stream;
    b->requested = size;
    if (b->slab->backing) /* the job writes it: its pieces' host memory no longer matches */
        stream_block_written(rt, b);
    *out = b;
    return cudaSuccess;
}

/* ---- `learn step`: what the step model is told ---- */

static void begin_step(struct runtime *rt)
{
    uint64_t matched = rt->step.matched;
    /* The step ending becomes the reference unless it outgrew the model. */
    bool new_reference = rt->step.steps > 0 && !rt->step.overflow;
    step_begin(&rt->step);
    if (new_reference) {
        plan_step(rt, rt->step.matched > matched);
    } else {
        rt->note_count = 0;
        rt->notes_overflow = false;
    }
    rt->ahead_scanned = -1;
    for (size_t c = 0; c < rt->program->class_count; c++)
        rt->predicted_use[c] = -1;
}

/* `learn step;`: the job's event KEY, about to be recorded. The finder looks
 * for the step in the events until it knows the one that begins it. */
static void learn_event(struct runtime *rt, uint32_t key)
{
    if (!rt->program->step_by_repetition)
        return;
    if (rt->finder.state == FIND_LOOKING)
        step_find_add(&rt->finder, key);
    if (rt->finder.state == FIND_FOUND && key == rt->finder.anchor)
        begin_step(rt);
}

/* An allocation of SIZE bytes of class CLS on DEVICE and STREAM, about to be served:
 * its event in the current step (-1: none). One a plan could hold is noted
 * for the plan the step may become. */
static long learn_alloc(struct runtime *rt, int cls, int device, size_t size,
                        enum alloc_mode mode, cudaStream_t stream)
{
    struct pool_request req;
    if (!pool_request_for(size, rt->program->slab_bytes, &req))
        return -1;
    uint32_t key = step_key(STEP_ALLOC, (uint32_t)cls, req.want);
    learn_event(rt, key);
    long i = step_record(&rt->step, key);
    if (i < 0 || !plannable(rt, cls, req.want, mode, stream))
        return i;
    if (rt->note_count == rt->note_cap) {
        size_t cap = rt->note_cap ? 2 * rt->note_cap : 1024;
        struct plan_note *notes = cap <= PLAN_MAX_BLOCKS * 4 ? realloc(rt->notes, cap * sizeof *notes) : NULL;
        if (!notes) {
            rt->notes_overflow = true; /* a step this long gets no new plan */
            return i;
        }
        rt->notes = notes;
        rt->note_cap = cap;
    }
    rt->notes[rt->note_count++] = (struct plan_note){(uint32_t)i, device, cls, req.want, stream};
    return i;
}

static void learn_free(struct runtime *rt, struct block *b)
{
    if (b->step_id && b->step_no == rt->step.steps)
        step_freed(&rt->step, (long)b->step_id - 1);
}

static uint64_t name_hash(const char *name)
{
    uint64_t h = 1469598103934665603ull;
    for (; *name; name++)
        h = (h ^ (unsigned char)*name) * 1099511628211ull;
    return h;
}

/* A phase opened (ENTER, DEPTH phases then open on this thread) or closed.
 * A step begins at an outermost opening of the step phase, when no phase
 * matching its glob is open (a framework's own "forward" opens inside the
 * job's), and no deeper in its thread's phases than the opening that began
 * the first step (a recomputation opens "forward.recompute" inside backward). */
static void learn_phase(struct runtime *rt, enum step_kind kind, const uint64_t *bits,
                        uint64_t name, size_t depth)
{
    int32_t g = rt->program->step_glob;
    bool step_phase = g >= 0 && ((bits[g >> 6] >> (g & 63)) & 1);
    if (step_phase && kind == STEP_EXIT && rt->step_open > 0)
        rt->step_open--;
    if (step_phase && kind == STEP_ENTER && rt->step_open++ == 0 &&
        (rt->step_depth == 0 || depth <= rt->step_depth)) {
        if (rt->step_depth == 0)
            rt->step_depth = depth;
        begin_step(rt);
    }
    uint32_t key = step_key(kind, 0, name);
    learn_event(rt, key);
    step_record(&rt->step, key);
}

/* `spare`'s view of the job's live blocks: on the GPU side, not its own. */
static void count_gpu_live(struct runtime *rt, int cls, int64_t bytes)
{
    const struct program_class *c = &rt->program->classes[cls];
    if (c->uses_spare || c->memory == MEMORY_HOST)
        return;
    rt->gpu_live += (uint64_t)bytes;
    if (rt->gpu_live > rt->gpu_live_peak) {
        rt->gpu_live_peak = rt->gpu_live;
        rt->gpu_live_peak_closes = rt->phase_closes;
    }
}

static void count_alloc(struct runtime *rt, int cls, size_t bytes)
{
    struct class_stats *st = &rt->class_stats[cls];
    count_gpu_live(rt, cls, (int64_t)bytes);
    rt->allocations++;
    st->allocations++;
    st->bytes_requested += bytes;
    st->live_bytes += bytes;
    if (st->live_bytes > st->peak_bytes)
        st->peak_bytes = st->live_bytes;
}

/* Pinning failed for class CLS: from now on its allocations go to CUDA. */
static void pinning_failed(struct runtime *rt, int cls, size_t size, cudaError_t err)
{
    LOG_ONCE(&rt->pinning_off[cls], "class '%s': pinning %zu bytes of host memory failed (%s); "
             "from now on its allocations go to CUDA unchanged (on the GPU, outside the budget)",
             rt->program->classes[cls].name, size, rt->cuda->get_error_string(err));
}

/* Class CLS took a block by the budget's spare room that the GPU had not. */
static void spare_failed(struct runtime *rt, int cls, size_t size)
{
    LOG_ONCE(&rt->spare_said, "class '%s': the budget had room for %zu bytes that the GPU had "
             "not; the block goes to the class it matches without 'spare' (said once)",
             rt->program->classes[cls].name, size);
    __atomic_fetch_add(&rt->spare_misses, 1, __ATOMIC_RELAXED);
}

/* What a block was classified by, kept for classifying it again. */
static void note_ctx(struct block *b, const struct alloc_ctx *ctx)
{
    b->api = (uint8_t)ctx->api;
    b->seq = ctx->seq;
    b->phase_word = ctx->phase_bits ? ctx->phase_bits[0] : 0;
    b->tag_word = ctx->tag_bits ? ctx->tag_bits[0] : 0;
}

cudaError_t rt_alloc(struct runtime *rt, void **ptr, size_t size, unsigned api,
                     cudaStream_t stream, bool *handled)
{
    *handled = false;
    int device = 0;
    if (rt->cuda->get_device(&device) != cudaSuccess)
        return cudaSuccess; /* not handled: CUDA will report its own error */
    if (device < 0 || device >= RT_MAX_DEVICES) { /* no state kept for it: CUDA serves it */
        static _Atomic bool said;
        LOG_ONCE(&said, "GPU %d is beyond the %d GPUs umpol keeps state for: its allocations go "
                 "to CUDA as the job asked, unplaced", device, RT_MAX_DEVICES);
        __atomic_fetch_add(&rt->passthrough, 1, __ATOMIC_RELAXED);
        return cudaSuccess;
    }
    /* Phase bits are read without the lock: a phase opening concurrently may
     * or may not be seen, as with any hint. */
    enum { WORDS = 64 };
    uint64_t phase_snapshot[WORDS];
    size_t words = rt->phase_words < WORDS ? rt->phase_words : WORDS;
    for (size_t w = 0; w < words; w++)
        phase_snapshot[w] = atomic_load_explicit(&rt->phase_bits[w], memory_order_relaxed);
    struct alloc_ctx ctx = {
        .size = size,
        .seq = __atomic_fetch_add(&rt->seq, 1, __ATOMIC_RELAXED),
        .api = api,
        .device = device,
        .phase_bits = rt->phase_words <= WORDS ? phase_snapshot : (const uint64_t *)rt->phase_bits,
        .tag_bits = tag_bits_current(),
    };
    if (rt->program->uses_spare) {
        pthread_mutex_lock(&rt->lock);
        ctx.spare_bytes = place_spare_room(rt, device);
        pthread_mutex_unlock(&rt->lock);
    }
    int cls;
classify:
    cls = program_classify(rt->program, &ctx);
    if (cls < 0 || (api != API_CUDA_MALLOC && mover_stream_capturing(&rt->mover, stream)) ||
        (api != API_CUDA_MALLOC_MANAGED && atomic_load(&rt->pinning_off[cls]))) {
        *handled = false; /* also when classified again without `spare` */
        __atomic_fetch_add(&rt->passthrough, 1, __ATOMIC_RELAXED);
        return cudaSuccess;
    }
    *handled = true;
    pthread_mutex_lock(&rt->lock);
    cudaError_t err;
    if (api == API_CUDA_MALLOC_MANAGED) {
        err = adopt_managed(rt, ptr, size, cls, device, stream);
        struct block *b = err == cudaSuccess ? map_find(&rt->map, (uintptr_t)*ptr) : NULL;
        if (b) { /* NULL: the job's, unplaced */
            note_ctx(b, &ctx);
            count_alloc(rt, cls, size);
            sites_note_alloc(rt->sites, atomic_load(&rt->phase_current), tag_site_current(), b,
                             size);
        }
    } else {
        struct block *b = NULL;
        bool grew;
        enum alloc_mode mode = api == API_CUDA_MALLOC ? MODE_ANY : MODE_STREAM;
        long event = rt->learn ? learn_alloc(rt, cls, device, size, mode, stream) : -1;
        err = pool_alloc(rt, cls, device, size, event, stream, mode, &b, &grew);
        if (err == cudaErrorMemoryAllocation && rt->program->classes[cls].uses_spare &&
            ctx.spare_bytes) {
            /* The budget had room the card has not (other processes, the
             * job's own memory): classified again as if it had none. */
            pthread_mutex_unlock(&rt->lock);
            spare_failed(rt, cls, size);
            ctx.spare_bytes = 0;
            goto classify;
        }
        if (err != cudaSuccess && rt->program->classes[cls].memory == MEMORY_HOST) {
            /* No pinned host memory: the job's allocation goes to CUDA as it asked. */
            pthread_mutex_unlock(&rt->lock);
            pinning_failed(rt, cls, size, err);
            *handled = false;
            __atomic_fetch_add(&rt->passthrough, 1, __ATOMIC_RELAXED);
            return cudaSuccess;
        }
        if (err == cudaSuccess) {
            *ptr = (void *)b->addr;
            note_ctx(b, &ctx);
            b->step_id = event >= 0 ? (uint32_t)event + 1 : 0;
            b->step_no = (uint32_t)rt->step.steps;
            /* A new slab placed whole on the GPU left the block there already. */
            uint8_t growth = b->slab->planned ? TRACE_PLANNED
                             : !grew          ? TRACE_NO_SLAB
                             : b->on_gpu      ? TRACE_SLAB_ON_GPU
                                              : TRACE_SLAB_OFF_GPU;
            count_alloc(rt, cls, b->size);
            sites_note_alloc(rt->sites, atomic_load(&rt->phase_current), tag_site_current(), b,
                             size);
            place_on_alloc(rt, b, device, stream);
            if (rt->trace)
                trace_note(rt->trace,
                           (struct trace_event){.op = 'a', .t_ns = now_ns(), .seq = b->seq,
                                                .size = size, .class_idx = cls,
                                                .device = (int16_t)device,
                                                .mode = mode,
                                                .on_gpu = b->on_gpu, .growth = growth,
                                                .slab_base = grew ? b->slab->base : 0},
                           stream);
        }
    }
    pthread_mutex_unlock(&rt->lock);
    return err;
}

struct block *rt_block_holding(struct runtime *rt, uintptr_t addr)
{
    struct block *b = map_find(&rt->map, addr);
    if (b)
        return b;
    pthread_mutex_lock(&rt->range_lock);
    const struct slab *s = ranges_owner_of(&rt->ranges, addr);
    pthread_mutex_unlock(&rt->range_lock);
    /* Inside a block of managed memory only: other memory cannot move. */
    if (s && rt->program->classes[s->pool->class_idx].memory != MEMORY_MANAGED)
        s = NULL;
    b = s ? slab_block_at(s, addr) : NULL; /* the slab stays: rt->lock is held */
    return b && !b->free ? b : NULL;
}

void rt_saved(struct runtime *rt, struct block *b)
{
    static _Atomic bool kinds_said, memory_said;
    if (b->moved_in)
        return; /* it came by reclassification: it stays */
    /* Phases and tags as they were at allocation: the first word of each
     * bitset (all of it for up to 64 globs and tags); beyond, as they are now. */
    enum { WORDS = 64 };
    uint64_t on_stack[WORDS];
    size_t phase_words = rt->phase_words;
    size_t tag_words = program_bitset_words(rt->program->tag_count);
    uint64_t *phases = phase_words + tag_words <= WORDS
                           ? on_stack
                           : malloc((phase_words + tag_words) * sizeof *phases);
    if (!phases) {
        LOG_ONCE(&memory_said, "no memory to classify a saved block again: it stays (said once)");
        return;
    }
    uint64_t *tags = phases + phase_words;
    for (size_t w = 0; w < phase_words; w++)
        phases[w] = atomic_load_explicit(&rt->phase_bits[w], memory_order_relaxed);
    const uint64_t *tags_now = tag_bits_current();
    for (size_t w = 0; w < tag_words; w++)
        tags[w] = tags_now ? tags_now[w] : 0;
    phases[0] = b->phase_word;
    tags[0] = b->tag_word;
    struct alloc_ctx ctx = {
        .size = b->requested,
        .seq = b->seq,
        .api = b->api,
        .device = b->slab ? b->slab->pool->device : b->device,
        .phase_bits = phases,
        .tag_bits = tags,
        .saved = true,
    };
    int from = b->class_idx, to = program_classify(rt->program, &ctx);
    if (phases != on_stack)
        free(phases);
    if (to < 0 || to == from)
        return;
    const struct program_class *f = &rt->program->classes[from], *t = &rt->program->classes[to];
    if (f->memory != MEMORY_MANAGED || t->memory != MEMORY_MANAGED) {
        LOG_ONCE(&kinds_said,
                 "a block of class '%s' reported saved matches class '%s', but only managed "
                 "memory moves between classes: it stays (said once)",
                 f->name, t->name);
        return;
    }
    if (!place_reclassify(rt, b, to)) {
        LOG_ONCE(&memory_said,
                 "no memory to move a saved block from class '%s' to class '%s': it stays "
                 "(said once)",
                 f->name, t->name);
        return;
    }
    /* Its allocation moves with it: each class's allocations less frees stay
     * its live blocks. (In a forked child, which counts only its own
     * allocations, an inherited block may not be among them.) */
    struct class_stats *a = &rt->class_stats[from], *s = &rt->class_stats[to];
    a->allocations -= a->allocations > 0;
    a->bytes_requested -= a->bytes_requested < b->size ? a->bytes_requested : b->size;
    a->live_bytes -= b->size;
    count_gpu_live(rt, from, -(int64_t)b->size);
    count_gpu_live(rt, to, (int64_t)b->size);
    s->allocations++;
    s->reclassified++;
    s->bytes_requested += b->size;
    s->live_bytes += b->size;
    if (s->live_bytes > s->peak_bytes)
        s->peak_bytes = s->live_bytes;
}

/* Where block B, freed on STREAM, leaves its stream's work: the point its
 * next user on another stream waits for (mover.h; MODE_ANY: none). */
static uint64_t free_point(struct runtime *rt, const struct block *b, cudaStream_t stream,
                           enum alloc_mode mode)
{
    return mode == MODE_ANY ? 0
                            : mover_point_at_free(&rt->devices[b->slab->pool->device], stream);
}

bool rt_free(struct runtime *rt, void *ptr, cudaStream_t stream, enum alloc_mode mode,
             cudaError_t *err)
{
    *err = cudaSuccess;
    if (!ptr)
        return false;
    pthread_mutex_lock(&rt->lock);
    struct block *b = map_remove(&rt->map, (uintptr_t)ptr);
    if (!b) {
        /* Inside a slab and no live block (freed twice, or not a block's
         * start): CUDA would refuse it, and passed on it would free the
         * slab under its other blocks. */
        pthread_mutex_lock(&rt->range_lock);
        bool in_slab = ranges_owner_of(&rt->ranges, (uintptr_t)ptr) != NULL;
        pthread_mutex_unlock(&rt->range_lock);
        pthread_mutex_unlock(&rt->lock);
        if (in_slab) {
            static _Atomic bool said;
            LOG_ONCE(&said, "cudaFree of %p, which is no live allocation (freed twice?): "
                     "refused with cudaErrorInvalidValue, as CUDA would (said once)", ptr);
            *err = cudaErrorInvalidValue;
        }
        return in_slab;
    }
    struct class_stats *st = &rt->class_stats[b->class_idx];
    st->frees++;
    rt->frees++;
    st->live_bytes -= b->size;
    count_gpu_live(rt, b->class_idx, -(int64_t)b->size);
    sites_note_free(rt->sites, b);
    if (!b->slab) { /* the job's own managed memory */
        *err = mover_release(&rt->mover, MEMORY_MANAGED, b->addr, b->size);
        place_adopted_freed(rt, b);
        block_release(b);
    } else {
        if (mode == MODE_STREAM) /* cudaStreamPerThread: the freeing thread's proxy */
            stream = mover_free_stream(&rt->mover, b->slab->pool->device, stream);
        if (rt->learn)
            learn_free(rt, b);
        place_on_free(rt, b);
        if (rt->discard && mode == MODE_STREAM &&
            rt->program->classes[b->class_idx].memory == MEMORY_MANAGED)
            stream = place_discard_freed(rt, b, stream);
        if (rt->trace)
            trace_note(rt->trace,
                       (struct trace_event){.op = 'f', .t_ns = now_ns(), .seq = b->seq,
                                            .size = b->size,
                                            .class_idx = b->slab->pool->class_idx,
                                            .device = (int16_t)b->slab->pool->device,
                                            .mode = (uint8_t)mode, .on_gpu = b->on_gpu},
                       stream);
        if (b->slab->planned)
            planned_free(rt, b, stream, mode);
        else
            pool_put(b->slab->pool, b, stream, free_point(rt, b, stream, mode), mode);
    }
    pthread_mutex_unlock(&rt->lock);
    return true;
}

/* ---- phases and marks: counted by the phase floor, then their triggers fired ---- */

/* The card's used memory, as the job's tools see it, on the calling thread's
 * GPU: at most once a millisecond (rt->lock held). */
static void sample_card(struct runtime *rt)
{
    int device = 0;
    uint64_t now = now_ns();
    if (now - rt->card_sampled_ns < 1000000)
        return;
    bool seen = false; /* no CUDA call before the job's first allocation made one */
    for (int d = 0; d < RT_MAX_DEVICES && !seen; d++)
        seen = rt->devices[d].known;
    if (!seen || rt->cuda->get_device(&device) != cudaSuccess || device < 0 ||
        device >= RT_MAX_DEVICES || !rt->devices[device].known)
        return;
    rt->card_sampled_ns = now;
    size_t free_b = 0, total_b = 0;
    if (rt->cuda->mem_get_info(&free_b, &total_b) != cudaSuccess) {
        rt->cuda->get_last_error();
        return;
    }
    struct device_state *dev = &rt->devices[device];
    dev->card_samples++;
    if (total_b - free_b > dev->card_peak_used) {
        dev->card_peak_used = total_b - free_b;
        dev->card_resident_at_peak = dev->resident_bytes;
    }
    place_card_sampled(rt, device, total_b - free_b);
}

/* The globs a phase opening or closing is the outermost of (phases_push,
 * phases_pop): on the stack for policies of up to 256 phase globs (NULL,
 * out of memory: every rule fires as if outermost). */
#define OUTER_WORDS 4
static uint64_t *outer_bits(const struct runtime *rt, uint64_t *small)
{
    if (rt->phase_words <= OUTER_WORDS) {
        memset(small, 0, OUTER_WORDS * sizeof *small);
        return small;
    }
    return calloc(rt->phase_words, sizeof *small);
}

void phase_enter(struct runtime *rt, const char *name)
{
    if (!name)
        name = "";
    uint64_t small[OUTER_WORDS];
    uint64_t *outer = outer_bits(rt, small);
    const uint64_t *bits = phases_push(rt, name, profile_timestamp(rt), outer);
    if (bits) {
        profile_phase_entered(rt, name);
        pthread_mutex_lock(&rt->lock);
        if (rt->learn)
            learn_phase(rt, STEP_ENTER, bits, name_hash(name), phases_depth());
        rt->phase_tick = rt->tick;
        sample_card(rt); /* before the phase's moves: what the last phase left on the card */
        stream_phases(rt);
        place_trigger(rt, TRIGGER_ENTER, bits, outer, -1);
        place_ahead(rt);
        pthread_mutex_unlock(&rt->lock);
    }
    if (outer != small)
        free(outer);
}

/* A phase closed, with BITS the globs it matched (NULL: none was open) and
 * OUTER those no open phase matches any more. */
static void phase_closed(struct runtime *rt, uint64_t *bits, const uint64_t *outer)
{
    if (!bits)
        return;
    pthread_mutex_lock(&rt->lock);
    if (phases_depth() == 0) /* a nested range (a layer's, a recompute's) ends no step part */
        rt->phase_closes++;
    if (rt->learn)
        learn_phase(rt, STEP_EXIT, bits, 0, 0);
    if (stream_phases(rt)) /* the next pass streams: room for it from empty slabs */
        place_room_for_stream(rt, -1, STREAM_AHEAD_BYTES);
    place_trigger(rt, TRIGGER_EXIT, bits, outer, -1);
    rt->phase_tick = rt->tick;
    place_ahead(rt);
    pthread_mutex_unlock(&rt->lock);
    free(bits);
}

void phase_exit(struct runtime *rt)
{
    uint64_t small[OUTER_WORDS];
    uint64_t *outer = outer_bits(rt, small);
    phase_closed(rt, phases_pop(rt, profile_timestamp(rt), outer), outer);
    if (outer != small)
        free(outer);
}

void phase_exit_named(struct runtime *rt, const char *name)
{
    uint64_t small[OUTER_WORDS];
    uint64_t *outer = outer_bits(rt, small);
    phase_closed(rt, phases_pop_named(rt, name, profile_timestamp(rt), outer), outer);
    if (outer != small)
        free(outer);
}

void phase_mark(struct runtime *rt, const char *name)
{
    int mark = name ? program_mark_index(rt->program, name) : -1;
    if (mark < 0)
        return;
    pthread_mutex_lock(&rt->lock);
    if (rt->learn) {
        uint32_t key = step_key(STEP_ENTER, 1, (uint64_t)mark);
        learn_event(rt, key);
        step_record(&rt->step, key);
    }
    place_trigger(rt, TRIGGER_MARK, NULL, NULL, mark);
    place_ahead(rt);
    pthread_mutex_unlock(&rt->lock);
}

void rt_held(struct runtime *rt, uint64_t since)
{
    atomic_fetch_add_explicit(&rt->held_ns, now_ns() - since, memory_order_relaxed);
}

/* ---- uses the job announces: streaming ahead ---- */

void rt_use(struct runtime *rt, const void *const *ptrs, size_t n, cudaStream_t stream)
{
    if (!stream_enabled(rt) || !ptrs)
        return;
    pthread_mutex_lock(&rt->lock);
    stream_use(rt, ptrs, n, stream);
    /* The next pieces found no room: the card's large empty slabs make it
     * first (a step's peak left them; they are made again at the next), then
     * pieces whose next use is farther leave. */
    int device;
    uint64_t short_by = stream_short(rt, &device);
    if (short_by) {
        place_room_for_stream(rt, device, short_by);
        stream_retry(rt);
    }
    pthread_mutex_unlock(&rt->lock);
}

void rt_step_changed(struct runtime *rt)
{
    pthread_mutex_lock(&rt->lock);
    place_step_changed(rt);
    pthread_mutex_unlock(&rt->lock);
}

void rt_written(struct runtime *rt, const void *const *ptrs, size_t n)
{
    if (!stream_enabled(rt) || !ptrs)
        return;
    pthread_mutex_lock(&rt->lock);
    stream_written(rt, ptrs, n);
    pthread_mutex_unlock(&rt->lock);
}

void rt_capture_prepare(struct runtime *rt)
{
    if (!stream_enabled(rt))
        return;
    atomic_store(&rt->capture_seen, true);
    pthread_mutex_lock(&rt->lock);
    stream_settle(rt);
    pthread_mutex_unlock(&rt->lock);
}
