#include <stdlib.h>

#include "runtime/device.h"
#include "runtime/log.h"

/* The granule in which DEV's slab pool takes memory from the card (32 MiB
 * on H100, CUDA 13), from what one small allocation reserves; it packs
 * allocations into granules, so a slab sharing one with another could not
 * be given back whole. 0: not known. */
static uint64_t pool_granule(struct device_state *dev, const struct cuda_api *cuda)
{
    void *p = NULL;
    uint64_t reserved = 0;
    if (cuda->malloc_from_pool_async(&p, 1u << 20, dev->slab_pool, dev->slab_stream) !=
        cudaSuccess) {
        cuda->get_last_error();
        return 0;
    }
    if (cuda->mem_pool_get_attribute(dev->slab_pool, cudaMemPoolAttrReservedMemCurrent,
                                     &reserved) != cudaSuccess)
        reserved = 0;
    if (cuda->free_async(p, dev->slab_stream) != cudaSuccess ||
        cuda->event_record(dev->release_events[0], dev->slab_stream) != cudaSuccess ||
        cuda->event_synchronize(dev->release_events[0]) != cudaSuccess ||
        cuda->mem_pool_trim_to(dev->slab_pool, 0) != cudaSuccess)
        cuda->get_last_error();
    return reserved;
}

/* DEVICE's slab pool and its stream. The pool gives its memory back to the
 * card as soon as a free is done (release threshold 0, and trimmed when a
 * release is seen done), so the card holds what the budget counts. */
static void slab_pool_open(struct device_state *dev, const struct cuda_api *cuda, int device)
{
    if (!cuda->mem_pool_create || !cuda->malloc_from_pool_async || !cuda->mem_pool_trim_to ||
        !cuda->mem_pool_get_attribute)
        return;
    struct cudaMemPoolProps props = {
        .allocType = cudaMemAllocationTypePinned,
        .handleTypes = cudaMemHandleTypeNone,
        .location = {.type = cudaMemLocationTypeDevice, .id = device},
    };
    if (cuda->stream_create_with_flags(&dev->slab_stream, cudaStreamNonBlocking) != cudaSuccess) {
        cuda->get_last_error();
        dev->slab_stream = NULL;
        return;
    }
    /* The releases' events, made here on their own GPU (a release may be
     * made while another is current). */
    for (int k = 0; k < RELEASES_PENDING; k++)
        if (cuda->event_create_with_flags(&dev->release_events[k], cudaEventDisableTiming) !=
            cudaSuccess) {
            cuda->get_last_error();
            dev->release_events[k] = NULL;
            return;
        }
    if (cuda->mem_pool_create(&dev->slab_pool, &props) == cudaSuccess) {
        dev->slab_granule = pool_granule(dev, cuda);
    } else {
        cuda->get_last_error();
        dev->slab_pool = NULL;
        LOG(LOG_INFO, "GPU %d has no memory pools: device slabs come from cudaMalloc, and "
                      "giving one back waits for the GPU", device);
    }
}

bool device_open(struct device_state *dev, const struct cuda_api *cuda, int device,
                 size_t class_count)
{
    dev->pools = calloc(class_count, sizeof *dev->pools);
    if (!dev->pools)
        return false;
    /* Learned while DEVICE is current: allocations arrive on their own device. */
    size_t free_b = 0, total_b = 0;
    if (cuda->mem_get_info(&free_b, &total_b) != cudaSuccess || total_b == 0) {
        LOG(LOG_WARN, "cannot read the memory of GPU %d; budget and cap use 0 bytes", device);
        total_b = 0;
    }
    dev->total_bytes = total_b;
    dev->card_base_used = dev->card_peak_used = total_b - free_b;
    int numa = -1;
    if (cuda->device_get_attribute(&numa, cudaDevAttrHostNumaId, device) != cudaSuccess)
        numa = -1;
    dev->host_numa_id = numa;
    /* Evictions get a stream of their own: a slow move to the host must not
     * hold up placements, which the job's stream waits for. So do the copies
     * of streaming ahead, which wait for nothing. */
    if (cuda->stream_create_with_flags(&dev->evict_stream, cudaStreamNonBlocking) != cudaSuccess)
        dev->evict_stream = NULL;
    if (cuda->stream_create_with_flags(&dev->fetch_stream, cudaStreamNonBlocking) != cudaSuccess)
        dev->fetch_stream = NULL;
    /* One event orders every stream after another (mover_follow). */
    if (cuda->event_create_with_flags(&dev->follow_event, cudaEventDisableTiming) != cudaSuccess)
        dev->follow_event = NULL;
    slab_pool_open(dev, cuda, device);
    if (cuda->stream_create_with_flags(&dev->stream, cudaStreamNonBlocking) != cudaSuccess) {
        LOG(LOG_WARN, "cannot create a prefetch stream on GPU %d; triggered prefetches use "
                      "one prefetch per block on the default stream", device);
        dev->stream = NULL;
    }
    return true;
}

struct pool *device_pool(struct device_state *dev, int device, int class_idx,
                         enum memory_kind memory)
{
    if (!dev->pools[class_idx]) {
        struct pool *p = calloc(1, sizeof *p);
        if (!p)
            return NULL;
        p->class_idx = class_idx;
        p->device = device;
        p->in_place = memory == MEMORY_DEVICE || memory == MEMORY_HOST;
        dev->pools[class_idx] = p;
    }
    return dev->pools[class_idx];
}

void device_close(struct device_state *dev, size_t class_count)
{
    if (!dev->known)
        return;
    for (size_t c = 0; c < class_count; c++)
        if (dev->pools[c])
            pool_destroy(dev->pools[c]);
    free(dev->pools);
    dev->pools = NULL;
}
