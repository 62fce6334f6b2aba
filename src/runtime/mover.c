#include "config.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#ifdef HAVE_NUMA
#include <numa.h>
#include <numaif.h>
#endif

#include "runtime/log.h"
#include "runtime/mover.h"

void mover_init(struct mover *m, const struct cuda_api *cuda)
{
    *m = (struct mover){.cuda = cuda};
}

/* Pinned host memory: anonymous pages (on NODE, preferred, when >= 0),
 * registered with CUDA and mapped for every GPU at their host address, as
 * a block's address must be the same for the job's CPU and GPU code. */
static cudaError_t host_alloc(struct mover *m, size_t size, int node, void **out)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return cudaErrorMemoryAllocation;
    /* A fork (a data loader's worker) must not copy pinned pages, nor leave
     * the parent's CPU and the GPU on two copies of one page. */
    if (madvise(p, size, MADV_DONTFORK) != 0) {
        munmap(p, size);
        return cudaErrorMemoryAllocation;
    }
    if (node >= 0) {
        static _Atomic bool said;
        const char *why = "built without libnuma";
#ifdef HAVE_NUMA
        unsigned long mask = 1ul << (node % 64);
        if (node >= 64)
            why = "node number above 63";
        else if (numa_available() < 0)
            why = "no NUMA support here";
        else
            why = mbind(p, size, MPOL_PREFERRED, &mask, sizeof mask * 8 + 1, 0) == 0
                      ? NULL
                      : strerror(errno);
#endif
        if (why && !atomic_exchange(&said, true))
            LOG(LOG_WARN,
                "pinned host memory could not be preferred on NUMA node %d (%s); "
                "the kernel places it",
                node, why);
    }
    cudaError_t err =
        m->cuda->host_register(p, size, cudaHostRegisterMapped | cudaHostRegisterPortable);
    if (err == cudaSuccess) {
        void *mapped = NULL;
        if (m->cuda->host_get_device_pointer(&mapped, p, 0) != cudaSuccess || mapped != p) {
            m->cuda->host_unregister(p);
            err = cudaErrorNotSupported; /* the GPU would see it at another address */
        }
    }
    if (err != cudaSuccess) {
        munmap(p, size);
        return err;
    }
    *out = p;
    return cudaSuccess;
}

cudaError_t mover_alloc(struct mover *m, enum memory_kind kind, size_t size, int node,
                        uintptr_t *base)
{
    void *p = NULL;
    cudaError_t err;
    switch (kind) {
    case MEMORY_HOST: err = host_alloc(m, size, node, &p); break;
    case MEMORY_DEVICE: err = m->cuda->malloc(&p, size); break;
    default: err = m->cuda->malloc_managed(&p, size, cudaMemAttachGlobal); break;
    }
    if (err != cudaSuccess)
        m->cuda->get_last_error(); /* returned, not left for the job's next check */
    *base = (uintptr_t)p;
    return err;
}

cudaError_t mover_release(struct mover *m, enum memory_kind kind, uintptr_t base, size_t size)
{
    if (kind != MEMORY_HOST)
        return m->cuda->free((void *)base); /* cudaFree waits for the work using it */
    /* Unregistering does not wait: work the GPU still has queued may use the pages. */
    cudaError_t err = m->cuda->device_synchronize();
    if (err == cudaSuccess)
        err = m->cuda->host_unregister((void *)base);
    if (err != cudaSuccess)
        return err; /* keep the pages rather than pull them from under the GPU */
    munmap((void *)base, size);
    return cudaSuccess;
}

cudaError_t mover_advise(struct mover *m, void *ptr, size_t size, enum cudaMemoryAdvise advice,
                         struct cudaMemLocation loc)
{
    return m->cuda->mem_advise(ptr, size, advice, loc);
}

const char *mover_error(const struct mover *m, cudaError_t err)
{
    return m->cuda->get_error_string(err);
}

bool mover_stream_idle(struct mover *m, cudaStream_t stream)
{
    return m->cuda->stream_query(stream) == cudaSuccess;
}

bool mover_stream_capturing(struct mover *m, cudaStream_t stream)
{
    enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (m->cuda->stream_is_capturing(stream, &status) != cudaSuccess) {
        m->cuda->get_last_error();
        return false;
    }
    return status != cudaStreamCaptureStatusNone;
}

bool mover_follow(struct mover *m, struct device_state *dev, cudaStream_t waiter,
                  cudaStream_t signaler)
{
    if (waiter == signaler)
        return true;
    /* A wait takes the event as last recorded when it is issued, so the
     * device's one event serves every wait in turn (all under the runtime's
     * lock); without it, an event of its own for this wait. */
    cudaEvent_t ev = dev->follow_event;
    bool own = !ev;
    if (own && m->cuda->event_create_with_flags(&ev, cudaEventDisableTiming) != cudaSuccess)
        return false;
    bool ok = m->cuda->event_record(ev, signaler) == cudaSuccess &&
              m->cuda->stream_wait_event(waiter, ev, 0) == cudaSuccess;
    if (own)
        m->cuda->event_destroy(ev); /* released once complete; the wait holds it */
    return ok;
}

bool mover_prefetch(struct mover *m, uintptr_t addr, size_t size, struct cudaMemLocation loc,
                    cudaStream_t stream)
{
    if (!size)
        return true;
    cudaError_t err = m->cuda->mem_prefetch_async((void *)addr, size, loc, 0, stream);
    if (err != cudaSuccess)
        LOG(LOG_DEBUG, "prefetch of %zu bytes failed: %s", size, m->cuda->get_error_string(err));
    return err == cudaSuccess;
}

void mover_prefetch_batch(struct mover *m, void **ptrs, size_t *sizes, size_t n,
                          struct cudaMemLocation loc, cudaStream_t stream)
{
    if (n == 0)
        return;
    if (n > 1 && stream && m->cuda->mem_prefetch_batch_async && !m->batch_unsupported) {
        size_t idx = 0;
        cudaError_t err =
            m->cuda->mem_prefetch_batch_async(ptrs, sizes, n, &loc, &idx, 1, 0, stream);
        if (err == cudaSuccess)
            return;
        m->batch_unsupported = true;
        m->cuda->get_last_error();
        LOG(LOG_INFO, "batched prefetch unavailable (%s); prefetching block by block",
            m->cuda->get_error_string(err));
    }
    for (size_t i = 0; i < n; i++) {
        cudaError_t err = m->cuda->mem_prefetch_async(ptrs[i], sizes[i], loc, 0, stream);
        if (err != cudaSuccess)
            LOG(LOG_DEBUG, "prefetch failed: %s", m->cuda->get_error_string(err));
    }
}

void mover_whole_pages(uintptr_t addr, size_t size, uintptr_t *start, uintptr_t *end)
{
    const uintptr_t page = 2u << 20;
    *start = (addr + page - 1) & ~(page - 1);
    *end = (addr + size) & ~(page - 1);
}

static bool legacy_stream(cudaStream_t s)
{
    return !s || s == cudaStreamLegacy || s == cudaStreamPerThread;
}

/* Whole 2 MiB pages are discarded and populated at LOC in one operation,
 * without a copy; the edges, which may share a page with a live neighbour,
 * and everything without DISCARD are prefetched, which keeps the data. CUDA
 * takes no legacy stream for a discard: it runs on the runtime's stream
 * between waits both ways. Nothing may overlap a discard, so the runtime's
 * streams, where triggers and evictions run, follow it either way. */
bool mover_move_dead(struct mover *m, struct device_state *dev, uintptr_t addr, size_t size,
                     struct cudaMemLocation loc, cudaStream_t stream, bool discard)
{
    cudaStream_t own = dev->stream;
    uintptr_t start, end;
    mover_whole_pages(addr, size, &start, &end);
    cudaStream_t on = legacy_stream(stream) ? own : stream;
    if (!discard || !on || end <= start || !m->cuda->mem_discard_and_prefetch_batch_async ||
        m->discard_prefetch_unsupported || !mover_follow(m, dev, on, stream)) {
        mover_prefetch(m, addr, size, loc, stream);
        return false;
    }
    void *ptr = (void *)start;
    size_t bytes = end - start, idx = 0;
    cudaError_t err =
        m->cuda->mem_discard_and_prefetch_batch_async(&ptr, &bytes, 1, &loc, &idx, 1, 0, on);
    if (err != cudaSuccess) {
        m->discard_prefetch_unsupported = true;
        m->cuda->get_last_error();
        LOG(LOG_INFO, "discard-and-prefetch unavailable (%s); dead data is copied when moved",
            m->cuda->get_error_string(err));
        mover_prefetch(m, addr, size, loc, stream);
        return false;
    }
    mover_prefetch(m, addr, start - addr, loc, on);
    mover_prefetch(m, end, addr + size - end, loc, on);
    mover_follow(m, dev, stream, on); /* the job's next work on STREAM sees the pages placed */
    cudaStream_t evict = dev->evict_stream;
    if (own)
        mover_follow(m, dev, own, on);
    if (evict)
        mover_follow(m, dev, evict, on);
    return true;
}
