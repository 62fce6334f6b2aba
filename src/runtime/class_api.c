/* The per-class part of the public API (umpol.h): class names and counters
 * for umpol.memory_stats(), whether and how much of a block lies in host
 * memory, and blocks reported as saved for backward, which move to the
 * class they match then (rt_saved). */
#include <stdlib.h>
#include <string.h>

#include "runtime/mover.h"
#include "runtime/runtime.h"
#include "runtime/stream.h"
#include "umpol.h"
#include "util/clock.h"

#define EXPORT __attribute__((visibility("default")))

/* Per class: blocks noted as saved for backward, and their bytes (rt->lock held). */
static uint64_t *saved_count, *saved_bytes;

EXPORT int umpol_class_count(void)
{
    struct runtime *rt = runtime_loaded();
    return rt ? (int)rt->program->class_count : -1;
}

EXPORT const char *umpol_class_name(int index)
{
    struct runtime *rt = runtime_loaded();
    if (!rt || index < 0 || (size_t)index >= rt->program->class_count)
        return NULL;
    return rt->program->classes[index].name;
}

/* Bytes of block B, in movable MV, that lie in pieces on the GPU. */
static uint64_t block_on_gpu(const struct movable *mv, const struct block *b)
{
    uint64_t bytes = 0;
    for (uintptr_t a = b->addr; a < b->addr + b->size;) {
        size_t i = (a - mv->base) / MOVABLE_PIECE;
        uintptr_t end = mv->base + (i + 1) * MOVABLE_PIECE;
        if (end > b->addr + b->size)
            end = b->addr + b->size;
        bytes += mv->gpu[i] ? end - a : 0;
        a = end;
    }
    return bytes;
}

/* Bytes of movable slab S's live blocks that lie in pieces on the GPU. */
static uint64_t movable_live_on_gpu(const struct slab *s)
{
    uint64_t bytes = 0;
    for (const struct block *b = s->first; b; b = b->next)
        bytes += b->free ? 0 : block_on_gpu(s->backing, b);
    return bytes;
}

/* Bytes of CLS's live blocks on the GPU: the pools' on-GPU lists (rt->lock held). */
static uint64_t resident_bytes(const struct runtime *rt, int cls)
{
    if (rt->program->classes[cls].memory == MEMORY_MOVABLE) {
        uint64_t bytes = 0;
        for (int d = 0; d < RT_MAX_DEVICES; d++) {
            const struct device_state *dev = &rt->devices[d];
            const struct pool *p = dev->known && dev->pools ? dev->pools[cls] : NULL;
            for (const struct slab *s = p ? p->slabs : NULL; s; s = s->next) {
                if (s->backing) {
                    bytes += movable_live_on_gpu(s);
                    continue;
                }
                for (const struct block *b = s->first; b; b = b->next) /* plain device memory */
                    bytes += b->free ? 0 : b->size;
            }
        }
        return bytes;
    }
    if (rt->program->classes[cls].memory != MEMORY_MANAGED) /* all or nothing on the GPU */
        return rt->program->classes[cls].memory == MEMORY_DEVICE ? rt->class_stats[cls].live_bytes
                                                                 : 0;
    uint64_t bytes = 0;
    for (int d = 0; d < RT_MAX_DEVICES; d++) {
        const struct device_state *dev = &rt->devices[d];
        if (!dev->known || !dev->pools || !dev->pools[cls])
            continue;
        for (const struct block *b = dev->pools[cls]->lru_head; b; b = b->gpu_next)
            bytes += b->size;
    }
    return bytes;
}

EXPORT int umpol_class_stats(int index, struct umpol_class_stats *stats)
{
    struct runtime *rt = runtime_loaded();
    if (!rt || !stats || index < 0 || (size_t)index >= rt->program->class_count)
        return -1;
    pthread_mutex_lock(&rt->lock);
    const struct class_stats *s = &rt->class_stats[index];
    *stats = (struct umpol_class_stats){
        .allocations = s->allocations,
        .frees = s->frees,
        .live_bytes = s->live_bytes,
        .peak_bytes = s->peak_bytes,
        .resident_bytes = resident_bytes(rt, index),
        .prefetches = s->prefetches,
        .prefetch_bytes = s->prefetch_bytes,
        .evictions = s->evictions,
        .evict_bytes = s->evict_bytes,
        .saved = saved_count ? saved_count[index] : 0,
        .saved_bytes = saved_bytes ? saved_bytes[index] : 0,
    };
    pthread_mutex_unlock(&rt->lock);
    return 0;
}

EXPORT int umpol_streaming(void)
{
    struct runtime *rt = runtime_loaded();
    return rt && stream_enabled(rt);
}

EXPORT int umpol_update_in_backward(void)
{
    struct runtime *rt = runtime_loaded();
    return rt ? rt->program->update_in_backward : -1;
}

EXPORT int umpol_use(const void *const *ptrs, size_t count, void *stream)
{
    struct runtime *rt = runtime_loaded();
    if (!rt || (!ptrs && count))
        return -1;
    uint64_t t0 = now_ns();
    rt_use(rt, ptrs, count, (cudaStream_t)stream);
    rt_held(rt, t0);
    return 0;
}

EXPORT int umpol_written(const void *const *ptrs, size_t count)
{
    struct runtime *rt = runtime_loaded();
    if (!rt || (!ptrs && count))
        return -1;
    uint64_t t0 = now_ns();
    rt_written(rt, ptrs, count);
    rt_held(rt, t0);
    return 0;
}

EXPORT int umpol_step_changed(void)
{
    struct runtime *rt = runtime_loaded();
    if (!rt)
        return -1;
    uint64_t t0 = now_ns();
    rt_step_changed(rt);
    rt_held(rt, t0);
    return 0;
}

EXPORT int umpol_on_host(const void *ptr)
{
    struct runtime *rt = runtime_loaded();
    if (!rt || !ptr)
        return -1;
    pthread_mutex_lock(&rt->lock);
    const struct block *b = rt_block_holding(rt, (uintptr_t)ptr);
    int on_host = !b ? -1 : rt->program->classes[b->class_idx].memory == MEMORY_HOST;
    pthread_mutex_unlock(&rt->lock);
    return on_host;
}

EXPORT long long umpol_host_bytes(const void *ptr)
{
    struct runtime *rt = runtime_loaded();
    if (!rt || !ptr)
        return -1;
    pthread_mutex_lock(&rt->lock);
    const struct block *b = rt_block_holding(rt, (uintptr_t)ptr);
    long long bytes = -1;
    if (b && rt->program->classes[b->class_idx].memory == MEMORY_HOST)
        bytes = (long long)b->size;
    else if (b && b->slab && b->slab->backing)
        bytes = (long long)(b->size - block_on_gpu(b->slab->backing, b));
    else if (b)
        bytes = 0;
    pthread_mutex_unlock(&rt->lock);
    return bytes;
}

EXPORT int umpol_note_saved(const void *ptr)
{
    struct runtime *rt = runtime_loaded();
    if (!rt || !ptr)
        return -1;
    int cls = -1;
    uint64_t t0 = now_ns();
    pthread_mutex_lock(&rt->lock);
    if (!saved_count) {
        saved_count = calloc(rt->program->class_count, sizeof *saved_count);
        saved_bytes = calloc(rt->program->class_count, sizeof *saved_bytes);
    }
    struct block *b = rt_block_holding(rt, (uintptr_t)ptr);
    if (b)
        rt_saved(rt, b);
    if (b && saved_count && saved_bytes) {
        cls = b->class_idx;
        saved_count[cls]++;
        saved_bytes[cls] += b->size;
    }
    pthread_mutex_unlock(&rt->lock);
    rt_held(rt, t0);
    return cls;
}
