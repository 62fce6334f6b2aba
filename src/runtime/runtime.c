/* The allocation front doors: classify, then serve from a class pool, hand
 * the job's own managed memory back advised, or pass through untouched. */
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "runtime/log.h"
#include "runtime/runtime.h"

const char *runtime_env(const char *name)
{
#ifdef HAVE_SECURE_GETENV
    return secure_getenv(name);
#else
    return getenv(name);
#endif
}

int runtime_init(struct runtime *rt, const struct program *program, const struct cuda_api *cuda)
{
    memset(rt, 0, sizeof *rt);
    rt->program = program;
    rt->cuda = cuda;
    map_init(&rt->map);
    rt->class_stats = calloc(program->class_count, sizeof *rt->class_stats);
    if (!rt->class_stats || phases_init(rt) != 0 || pthread_mutex_init(&rt->lock, NULL) != 0 ||
        pthread_mutex_init(&rt->range_lock, NULL) != 0)
        return -1;
    return 0;
}

void ranges_add(struct runtime *rt, uintptr_t base, size_t size, int class_idx)
{
    pthread_mutex_lock(&rt->range_lock);
    if (rt->range_count == rt->range_cap) {
        size_t cap = rt->range_cap ? rt->range_cap * 2 : 64;
        struct addr_range *grown = realloc(rt->ranges, cap * sizeof *grown);
        if (!grown) {
            pthread_mutex_unlock(&rt->range_lock);
            return; /* attribution of this range is lost, nothing else */
        }
        rt->ranges = grown;
        rt->range_cap = cap;
    }
    size_t i = rt->range_count;
    while (i > 0 && rt->ranges[i - 1].base > base) {
        rt->ranges[i] = rt->ranges[i - 1];
        i--;
    }
    rt->ranges[i] = (struct addr_range){base, base + size, class_idx};
    rt->range_count++;
    pthread_mutex_unlock(&rt->range_lock);
}

/* Index of the last range starting at or below ADDR, or -1 (range_lock held). */
static long range_floor(const struct runtime *rt, uintptr_t addr)
{
    long lo = 0, hi = (long)rt->range_count - 1, found = -1;
    while (lo <= hi) {
        long mid = (lo + hi) / 2;
        if (rt->ranges[mid].base <= addr) {
            found = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    return found;
}

void ranges_remove(struct runtime *rt, uintptr_t base)
{
    pthread_mutex_lock(&rt->range_lock);
    long i = range_floor(rt, base);
    if (i >= 0 && rt->ranges[i].base == base) {
        memmove(&rt->ranges[i], &rt->ranges[i + 1],
                (rt->range_count - (size_t)i - 1) * sizeof *rt->ranges);
        rt->range_count--;
    }
    pthread_mutex_unlock(&rt->range_lock);
}

int ranges_class_of(struct runtime *rt, uintptr_t addr)
{
    pthread_mutex_lock(&rt->range_lock);
    long i = range_floor(rt, addr);
    int cls = i >= 0 && addr < rt->ranges[i].end ? rt->ranges[i].class_idx : -1;
    pthread_mutex_unlock(&rt->range_lock);
    return cls;
}

void timeline_add(struct runtime *rt, enum timeline_kind kind, int class_idx, int device,
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

void runtime_destroy(struct runtime *rt)
{
    /* Host bookkeeping only: device memory belongs to a CUDA context that may
     * already be gone at exit, and the driver reclaims it with the process. */
    pool_destroy_all(rt);
    for (size_t i = 0; i < rt->map.cap; i++)
        if (rt->map.slots[i] && !rt->map.slots[i]->slab)
            block_release(rt->map.slots[i]);
    map_free(&rt->map);
    profile_free(rt);
    phases_free(rt);
    free(rt->ranges);
    free(rt->timeline);
    pthread_mutex_destroy(&rt->range_lock);
    free(rt->class_stats);
    pthread_mutex_destroy(&rt->lock);
}

void runtime_after_fork_child(struct runtime *rt)
{
    rt->allocations = rt->passthrough = rt->frees = rt->foreign_managed = 0;
    rt->runtime_ns = rt->place_ns = rt->reclaim_ns = rt->evict_ns = 0;
    for (size_t c = 0; c < rt->program->class_count; c++) {
        const struct class_stats *s = &rt->class_stats[c];
        rt->class_stats[c] = (struct class_stats){.live_bytes = s->live_bytes,
                                                  .peak_bytes = s->live_bytes,
                                                  .slabs = s->slabs,
                                                  .slab_bytes = s->slab_bytes};
    }
    rt->timeline_count = rt->timeline_dropped = 0;
    phases_after_fork_child(rt);
    profile_after_fork_child(rt);
}

static bool stream_capturing(const struct runtime *rt, cudaStream_t stream)
{
    enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (rt->cuda->stream_is_capturing(stream, &status) != cudaSuccess) {
        rt->cuda->get_last_error();
        return false;
    }
    return status != cudaStreamCaptureStatusNone;
}

/* The job's own cudaMallocManaged: keep it the job's, but count it against
 * the cap and give it its class's advice and prefetch. */
static cudaError_t adopt_managed(struct runtime *rt, void **ptr, size_t size, int cls,
                                 int device, cudaStream_t stream)
{
    struct device_state *dev = device_get(rt, device);
    if (!dev)
        return cudaErrorMemoryAllocation;
    if (!cap_admits(rt, cls, device, size))
        return cudaErrorMemoryAllocation;
    struct block *b = block_new();
    if (!b)
        return cudaErrorMemoryAllocation;
    cudaError_t err = rt->cuda->malloc_managed(ptr, size, cudaMemAttachGlobal);
    if (err != cudaSuccess) {
        block_release(b);
        return err;
    }
    *b = (struct block){.addr = (uintptr_t)*ptr, .size = size, .requested = size,
                        .class_idx = cls, .device = device, .stream = stream};
    if (map_insert(&rt->map, b) != 0) {
        rt->cuda->free(*ptr);
        block_release(b);
        *ptr = NULL;
        return cudaErrorMemoryAllocation;
    }
    dev->managed_bytes += size;
    rt->foreign_managed++;
    ranges_add(rt, (uintptr_t)*ptr, size, cls);
    if (rt->program->classes[cls].memory == MEMORY_MANAGED) {
        place_advise_range(rt, cls, device, *ptr, size);
        const struct program_class *c = &rt->program->classes[cls];
        for (uint32_t k = 0; k < c->prefetch_count; k++) {
            const struct program_prefetch *pf = &rt->program->prefetches[c->prefetch_first + k];
            if (pf->trigger == TRIGGER_ALLOC)
                rt->cuda->mem_prefetch_async(*ptr, size, place_location(rt, pf->dest, device), 0,
                                             stream);
        }
    }
    return cudaSuccess;
}

static void count_alloc(struct runtime *rt, int cls, size_t bytes)
{
    struct class_stats *st = &rt->class_stats[cls];
    rt->allocations++;
    st->allocations++;
    st->bytes_requested += bytes;
    st->live_bytes += bytes;
    if (st->live_bytes > st->peak_bytes)
        st->peak_bytes = st->live_bytes;
}

cudaError_t rt_alloc(struct runtime *rt, void **ptr, size_t size, unsigned api,
                     cudaStream_t stream, bool *handled)
{
    *handled = false;
    int device = 0;
    if (rt->cuda->get_device(&device) != cudaSuccess)
        return cudaSuccess; /* not handled: CUDA will report its own error */
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
    int cls = program_classify(rt->program, &ctx);
    if (cls < 0 || (api != API_CUDA_MALLOC && stream_capturing(rt, stream))) {
        __atomic_fetch_add(&rt->passthrough, 1, __ATOMIC_RELAXED);
        return cudaSuccess;
    }
    *handled = true;
    pthread_mutex_lock(&rt->lock);
    cudaError_t err;
    if (api == API_CUDA_MALLOC_MANAGED) {
        err = adopt_managed(rt, ptr, size, cls, device, stream);
        if (err == cudaSuccess)
            count_alloc(rt, cls, size);
    } else {
        struct block *b = NULL;
        err = pool_alloc(rt, cls, device, size, stream,
                         api == API_CUDA_MALLOC ? MODE_ANY : MODE_STREAM, &b);
        if (err == cudaSuccess) {
            *ptr = (void *)b->addr;
            count_alloc(rt, cls, b->size);
            place_on_alloc(rt, b, device, stream);
        }
    }
    pthread_mutex_unlock(&rt->lock);
    return err;
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
        pthread_mutex_unlock(&rt->lock);
        return false;
    }
    struct class_stats *st = &rt->class_stats[b->class_idx];
    st->frees++;
    rt->frees++;
    if (!b->slab) { /* the job's own managed memory */
        st->live_bytes -= b->size;
        *err = rt->cuda->free(ptr);
        rt->devices[b->device].managed_bytes -= b->size;
        ranges_remove(rt, b->addr);
        block_release(b);
    } else {
        st->live_bytes -= b->size;
        place_on_free(rt, b);
        if (rt->discard && mode == MODE_STREAM &&
            rt->program->classes[b->class_idx].memory == MEMORY_MANAGED)
            stream = place_discard_freed(rt, b, stream);
        pool_free(b, stream, mode);
    }
    pthread_mutex_unlock(&rt->lock);
    return true;
}
