#include <stdlib.h>

#include "runtime/device.h"
#include "runtime/log.h"

/* ERR was success; a failure is the runtime's, not left for the job's next
 * cudaGetLastError (PyTorch checks it after every kernel launch). */
static bool succeeded(const struct cuda_api *cuda, cudaError_t err)
{
    if (err != cudaSuccess)
        cuda->get_last_error();
    return err == cudaSuccess;
}

bool device_open(struct device_state *dev, const struct cuda_api *cuda, int device,
                 size_t class_count)
{
    dev->pools = calloc(class_count, sizeof *dev->pools);
    dev->return_mark = calloc(class_count, sizeof *dev->return_mark);
    dev->return_peak = calloc(class_count, sizeof *dev->return_peak);
    if (!dev->pools || !dev->return_mark || !dev->return_peak) {
        free(dev->pools);
        free(dev->return_mark);
        free(dev->return_peak);
        dev->pools = NULL;
        dev->return_mark = dev->return_peak = NULL;
        return false;
    }
    /* Learned while DEVICE is current: allocations arrive on their own device. */
    size_t free_b = 0, total_b = 0;
    if (!succeeded(cuda, cuda->mem_get_info(&free_b, &total_b)) || total_b == 0) {
        LOG(LOG_WARN, "cannot read the memory of GPU %d; budget and cap use 0 bytes", device);
        total_b = 0;
    }
    dev->total_bytes = total_b;
    dev->card_base_used = dev->card_peak_used = total_b - free_b;
    int numa = -1;
    if (!succeeded(cuda, cuda->device_get_attribute(&numa, cudaDevAttrHostNumaId, device)))
        numa = -1;
    dev->host_numa_id = numa;
    /* Evictions get a stream of their own: a slow move to the host must not
     * hold up placements, which the job's stream waits for. So do the copies
     * of streaming ahead, which wait for nothing. */
    if (!succeeded(cuda, cuda->stream_create_with_flags(&dev->evict_stream, cudaStreamNonBlocking)))
        dev->evict_stream = NULL;
    if (!succeeded(cuda, cuda->stream_create_with_flags(&dev->fetch_stream, cudaStreamNonBlocking)))
        dev->fetch_stream = NULL;
    /* One event orders every stream after another (mover_follow). */
    if (!succeeded(cuda, cuda->event_create_with_flags(&dev->follow_event, cudaEventDisableTiming)))
        dev->follow_event = NULL;
    if (!succeeded(cuda, cuda->stream_create_with_flags(&dev->stream, cudaStreamNonBlocking))) {
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
        p->clock = &dev->take_clock;
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
    free(dev->return_mark);
    free(dev->return_peak);
    dev->pools = NULL;
    dev->return_mark = dev->return_peak = NULL;
}

void device_forget_returns(struct device_state *dev, size_t class_count)
{
    for (size_t c = 0; dev->return_mark && c < class_count; c++)
        dev->return_mark[c] = 0;
    dev->returning = 0;
    dev->step_changed = dev->release_pending = false;
}
