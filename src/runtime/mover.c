#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#ifdef HAVE_NUMA
#include <numa.h>
#include <numaif.h>
#endif

#include "runtime/log.h"
#include "runtime/mover.h"
#include "util/clock.h"

void mover_init(struct mover *m, const struct cuda_api *cuda)
{
    *m = (struct mover){.cuda = cuda};
    if (pthread_mutex_init(&m->worker.lock, NULL) || pthread_cond_init(&m->worker.wake, NULL) ||
        pthread_cond_init(&m->worker.finished, NULL))
        m->worker.state = -1; /* (never fails on Linux) every remap is made at once */
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
    cudaError_t err;
    if (kind != MEMORY_HOST) {
        err = m->cuda->free((void *)base); /* cudaFree waits for the work using it */
    } else {
        /* Unregistering does not wait: work the GPU still has queued may use the pages. */
        err = m->cuda->device_synchronize();
        if (err == cudaSuccess)
            err = m->cuda->host_unregister((void *)base);
        /* On failure the pages are kept rather than pulled from under the GPU. */
        if (err == cudaSuccess)
            munmap((void *)base, size);
    }
    if (err != cudaSuccess)
        m->cuda->get_last_error(); /* returned, not left for the job's next check */
    return err;
}

cudaError_t mover_advise(struct mover *m, void *ptr, size_t size, enum cudaMemoryAdvise advice,
                         struct cudaMemLocation loc)
{
    cudaError_t err = m->cuda->mem_advise(ptr, size, advice, loc);
    if (err != cudaSuccess)
        m->cuda->get_last_error(); /* returned, not left for the job's next check */
    return err;
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
    if (!ok)
        m->cuda->get_last_error(); /* the caller's failure, not the job's next check */
    return ok;
}

/* ---- cudaStreamPerThread: a proxy per thread and GPU ---- */

/* One thread's proxies: per GPU a block may belong to, the stream; per GPU
 * the thread frees from (the current one), the event its per-thread stream
 * records at a free for the proxy to wait on (a wait takes the event as last
 * recorded, so one serves every free in turn). A thread that exits leaves
 * them for the next thread to need one: a proxy only ever gains waits, and
 * blocks freed through it may still name it. */
struct thread_proxies {
    cudaStream_t stream[RT_MAX_DEVICES];
    cudaEvent_t event[RT_MAX_DEVICES];
    struct thread_proxies *next; /* on the free list */
};

static pthread_key_t proxies_key;
static pthread_once_t proxies_once = PTHREAD_ONCE_INIT;
static bool proxies_keyed;
static pthread_mutex_t proxies_lock = PTHREAD_MUTEX_INITIALIZER;
static struct thread_proxies *proxies_free; /* left by threads that exited */

static void proxies_left(void *arg)
{
    struct thread_proxies *t = arg;
    pthread_mutex_lock(&proxies_lock);
    t->next = proxies_free;
    proxies_free = t;
    pthread_mutex_unlock(&proxies_lock);
}

static void proxies_key_make(void)
{
    proxies_keyed = pthread_key_create(&proxies_key, proxies_left) == 0;
}

/* The calling thread's proxies, NULL where none can be had (MAKE: taken
 * from the free list or made where it has none yet). */
static struct thread_proxies *thread_proxies(bool make)
{
    pthread_once(&proxies_once, proxies_key_make);
    if (!proxies_keyed)
        return NULL;
    struct thread_proxies *t = pthread_getspecific(proxies_key);
    if (t || !make)
        return t;
    pthread_mutex_lock(&proxies_lock);
    t = proxies_free;
    if (t)
        proxies_free = t->next;
    pthread_mutex_unlock(&proxies_lock);
    if (!t && !(t = calloc(1, sizeof *t)))
        return NULL;
    if (pthread_setspecific(proxies_key, t) != 0) {
        proxies_left(t);
        return NULL;
    }
    return t;
}

int mover_device_enter(struct mover *m, int device)
{
    int current = -1;
    if (m->cuda->get_device(&current) != cudaSuccess ||
        (current != device && m->cuda->set_device(device) != cudaSuccess)) {
        m->cuda->get_last_error(); /* the runtime's failure, not the job's next check */
        return -1;
    }
    return current;
}

void mover_device_leave(struct mover *m, int device, int previous)
{
    if (previous >= 0 && previous != device && m->cuda->set_device(previous) != cudaSuccess)
        m->cuda->get_last_error();
}

/* A stream made on DEVICE, the current one put back after. */
static bool stream_on(struct mover *m, int device, cudaStream_t *out)
{
    int previous = mover_device_enter(m, device);
    bool ok = previous >= 0 &&
              m->cuda->stream_create_with_flags(out, cudaStreamNonBlocking) == cudaSuccess;
    mover_device_leave(m, device, previous);
    if (!ok)
        *out = NULL;
    return ok;
}

cudaStream_t mover_free_stream(struct mover *m, int device, cudaStream_t stream)
{
    int current = -1;
    if (stream != cudaStreamPerThread || device < 0 || device >= RT_MAX_DEVICES ||
        mover_stream_capturing(m, stream) || m->cuda->get_device(&current) != cudaSuccess ||
        current < 0 || current >= RT_MAX_DEVICES)
        return stream;
    struct thread_proxies *t = thread_proxies(true);
    if (!t)
        return stream;
    if ((t->stream[device] || stream_on(m, device, &t->stream[device])) &&
        (t->event[current] ||
         m->cuda->event_create_with_flags(&t->event[current], cudaEventDisableTiming) ==
             cudaSuccess) &&
        m->cuda->event_record(t->event[current], stream) == cudaSuccess &&
        m->cuda->stream_wait_event(t->stream[device], t->event[current], 0) == cudaSuccess)
        return t->stream[device];
    m->cuda->get_last_error(); /* the runtime's failure, not the job's next check */
    return stream;
}

cudaStream_t mover_thread_proxy(int device)
{
    struct thread_proxies *t = device >= 0 && device < RT_MAX_DEVICES ? thread_proxies(false)
                                                                         : NULL;
    return t ? t->stream[device] : NULL;
}

/* STREAM's free points on DEV, or NULL. */
static struct free_points *points_find(struct device_state *dev, cudaStream_t stream)
{
    for (int i = 0; i < POINT_STREAMS; i++)
        if (dev->points[i].taken && dev->points[i].stream == stream)
            return &dev->points[i];
    return NULL;
}

/* STREAM's free points on DEV, taken from the stream freed on least
 * recently when it has none (that stream's blocks then follow it as it is
 * when they are handed out). */
static struct free_points *points_make(struct device_state *dev, cudaStream_t stream)
{
    struct free_points *k = points_find(dev, stream);
    if (k)
        return k;
    k = &dev->points[0];
    for (int i = 1; i < POINT_STREAMS && k->taken; i++)
        if (!dev->points[i].taken || dev->points[i].freed_at < k->freed_at)
            k = &dev->points[i];
    for (int i = 0; i < POINT_RING; i++)
        k->numbers[i] = 0; /* its events stay, recorded on the new stream from now */
    k->stream = stream;
    k->taken = true;
    k->pending = false;
    k->recorded_ns = 0;
    return k;
}

/* cudaStreamPerThread names another stream in every thread: a point
 * recorded by one thread does not order another's work. */
static bool has_points(cudaStream_t stream)
{
    return stream != cudaStreamPerThread;
}

uint64_t mover_point_at_free(struct device_state *dev, cudaStream_t stream)
{
    if (dev->points_wanted && has_points(stream)) {
        struct free_points *k = points_make(dev, stream);
        k->pending = true;
        k->freed_at = ++dev->point_frees;
    }
    return dev->point_clock;
}

/* Record K's next point on its stream. */
static bool point_record(struct mover *m, struct device_state *dev, struct free_points *k,
                         uint64_t now)
{
    unsigned slot = k->next;
    if (!k->events[slot] &&
        m->cuda->event_create_with_flags(&k->events[slot], cudaEventDisableTiming) != cudaSuccess) {
        k->events[slot] = NULL;
        m->cuda->get_last_error();
        return false;
    }
    if (m->cuda->event_record(k->events[slot], k->stream) != cudaSuccess) {
        m->cuda->get_last_error();
        return false;
    }
    k->numbers[slot] = ++dev->point_clock;
    k->next = (slot + 1) % POINT_RING;
    k->pending = false;
    k->recorded_ns = now;
    return true;
}

void mover_point_settle(struct mover *m, struct device_state *dev, cudaStream_t stream)
{
    if (!dev->points_wanted)
        return;
    struct free_points *k = points_find(dev, stream);
    if (!k || !k->pending)
        return;
    uint64_t now = now_ns();
    if (now - k->recorded_ns >= POINT_EVERY_NS)
        point_record(m, dev, k, now);
}

bool mover_follow_point(struct mover *m, struct device_state *dev, cudaStream_t waiter,
                        cudaStream_t signaler, uint64_t point)
{
    if (waiter == signaler)
        return true;
    dev->points_wanted = true; /* blocks change streams on this device: points from now on */
    struct free_points *k = has_points(signaler) ? points_find(dev, signaler) : NULL;
    if (!k)
        return mover_follow(m, dev, waiter, signaler);
    int first = -1; /* the earliest point after the free */
    for (int i = 0; i < POINT_RING; i++)
        if (k->numbers[i] > point && (first < 0 || k->numbers[i] < k->numbers[first]))
            first = i;
    if (first < 0) {
        /* None yet: one now, as mover_follow does; not kept while the stream
         * is captured into a graph (a captured event orders no later wait). */
        if (mover_stream_capturing(m, signaler) || !point_record(m, dev, k, now_ns()))
            return mover_follow(m, dev, waiter, signaler);
        first = (int)((k->next + POINT_RING - 1) % POINT_RING);
    }
    if (m->cuda->stream_wait_event(waiter, k->events[first], 0) != cudaSuccess) {
        m->cuda->get_last_error(); /* the caller's failure, not the job's next check */
        return false;
    }
    return true;
}

bool mover_prefetch(struct mover *m, uintptr_t addr, size_t size, struct cudaMemLocation loc,
                    cudaStream_t stream)
{
    if (!size)
        return true;
    cudaError_t err = m->cuda->mem_prefetch_async((void *)addr, size, loc, 0, stream);
    if (err != cudaSuccess) {
        m->cuda->get_last_error(); /* the runtime's failure, not the job's next check */
        LOG(LOG_DEBUG, "prefetch of %zu bytes failed: %s", size, m->cuda->get_error_string(err));
    }
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
        if (err != cudaSuccess) {
            m->cuda->get_last_error();
            LOG(LOG_DEBUG, "prefetch failed: %s", m->cuda->get_error_string(err));
        }
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

/* The driver's calls `memory movable` needs, looked up once. */
static bool vmm_calls(struct mover *m)
{
    if (m->vmm_state)
        return m->vmm_state > 0;
    struct {
        void **slot;
        const char *name;
    } const fns[] = {
        {(void **)&m->vmm.reserve, "cuMemAddressReserve"},
        {(void **)&m->vmm.free, "cuMemAddressFree"},
        {(void **)&m->vmm.create, "cuMemCreate"},
        {(void **)&m->vmm.release, "cuMemRelease"},
        {(void **)&m->vmm.map, "cuMemMap"},
        {(void **)&m->vmm.unmap, "cuMemUnmap"},
        {(void **)&m->vmm.set_access, "cuMemSetAccess"},
        {(void **)&m->vmm.granularity, "cuMemGetAllocationGranularity"},
        {(void **)&m->vmm.device_get, "cuDeviceGet"},
        {(void **)&m->vmm.device_attribute, "cuDeviceGetAttribute"},
    };
    const char *missing = m->cuda->driver_entry ? NULL : "cudaGetDriverEntryPointByVersion";
    for (size_t i = 0; !missing && i < sizeof fns / sizeof fns[0]; i++) {
        enum cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
        if (m->cuda->driver_entry(fns[i].name, fns[i].slot, 12000, cudaEnableDefault, &status) !=
                cudaSuccess ||
            status != cudaDriverEntryPointSuccess || !*fns[i].slot)
            missing = fns[i].name;
    }
    if (missing) {
        m->cuda->get_last_error();
        LOG(LOG_WARN, "'memory movable' needs the driver's %s, which this CUDA lacks; its classes "
            "get plain device memory", missing);
    }
    m->vmm_state = missing ? -1 : 1;
    return !missing;
}

static CUmemAllocationProp vmm_prop(bool on_gpu, int device, int node)
{
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED};
    prop.location.type = on_gpu ? CU_MEM_LOCATION_TYPE_DEVICE : CU_MEM_LOCATION_TYPE_HOST_NUMA;
    prop.location.id = on_gpu ? device : node;
    return prop;
}

/* Does DEVICE map GPU and host NUMA memory at reserved ranges, in granules
 * that divide MOVABLE_GRANULE? Asked once per device (the first 64). */
bool mover_movable_usable(struct mover *m, int device)
{
    if (!vmm_calls(m) || device < 0 || device >= 64)
        return false;
    uint64_t bit = 1ull << device;
    if (m->vmm_checked & bit)
        return m->vmm_ok & bit;
    m->vmm_checked |= bit;
    CUdevice dev;
    int vmm = 0, host_numa = 0;
    const char *why = NULL;
    if (m->vmm.device_get(&dev, device) != CUDA_SUCCESS ||
        m->vmm.device_attribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                                dev) != CUDA_SUCCESS ||
        m->vmm.device_attribute(&host_numa,
                                CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                                dev) != CUDA_SUCCESS)
        why = "its attributes could not be read";
    else if (!vmm || !host_numa)
        why = !vmm ? "no virtual memory management" : "no host NUMA memory at reserved ranges";
    for (int on_gpu = 0; !why && on_gpu < 2; on_gpu++) {
        size_t granule = 0;
        CUmemAllocationProp prop = vmm_prop(on_gpu, device, 0);
        if (m->vmm.granularity(&granule, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) !=
                CUDA_SUCCESS ||
            !granule || MOVABLE_GRANULE % granule)
            why = "an allocation granularity that does not divide 2 MiB";
    }
    if (why) {
        m->cuda->get_last_error();
        LOG(LOG_WARN, "GPU %d: %s; classes of 'memory movable' get plain device memory there",
            device, why);
        return false;
    }
    m->vmm_ok |= bit;
    return true;
}

/* Wait for all of DEVICE's work: cudaDeviceSynchronize waits only for the
 * calling thread's current device, which is put back after. */
static bool wait_device(struct mover *m, int device)
{
    int previous = mover_device_enter(m, device);
    if (previous < 0)
        return false;
    bool ok = m->cuda->device_synchronize() == cudaSuccess;
    mover_device_leave(m, device, previous);
    return ok;
}

/* Map physical memory H at [VA, VA+SIZE) for GPU DEVICE to read and write. */
static bool vmm_map(struct mover *m, int device, uintptr_t va, size_t size,
                    CUmemGenericAllocationHandle h)
{
    CUmemAccessDesc access = {.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = device;
    if (m->vmm.map(va, size, 0, h, 0) != CUDA_SUCCESS)
        return false;
    if (m->vmm.set_access(va, size, &access, 1) == CUDA_SUCCESS)
        return true;
    m->vmm.unmap(va, size);
    return false;
}

/* [AT, AT+LEN) maps FROM; make it map TO. On failure FROM is mapped again
 * (kept) or, where neither can be, nothing (lost). Driver calls only: the
 * mover's thread makes them too. */
static enum remap_outcome remap_calls(struct mover *m, int device, uintptr_t at, size_t len,
                                      CUmemGenericAllocationHandle from,
                                      CUmemGenericAllocationHandle to)
{
    if (m->vmm.unmap(at, len) != CUDA_SUCCESS)
        return REMAP_KEPT;
    if (vmm_map(m, device, at, len, to))
        return REMAP_DONE;
    return vmm_map(m, device, at, len, from) ? REMAP_KEPT : REMAP_LOST;
}

/* Piece I of MV is mapped neither way: said, and kept from use until repaired. */
static void piece_lost(struct movable *mv, size_t i)
{
    mv->unmapped[i] = true;
    mv->lost++;
    LOG(LOG_ERROR, "a movable piece at %#lx could be mapped neither way: the job must not "
        "touch it until it is mapped again (nothing is placed in its slab meanwhile)",
        (unsigned long)(mv->base + i * MOVABLE_PIECE));
}

/* The job's range of piece I maps FROM; make it map TO. On failure FROM is
 * mapped again, or, where neither can be, the piece is lost (said so). */
static bool remap_piece(struct mover *m, struct movable *mv, size_t i,
                        CUmemGenericAllocationHandle from, CUmemGenericAllocationHandle to)
{
    enum remap_outcome r = remap_calls(m, mv->device, mv->base + i * MOVABLE_PIECE,
                                       mover_piece_size(mv, i), from, to);
    if (r == REMAP_LOST)
        piece_lost(mv, i);
    return r == REMAP_DONE;
}

static void movable_free(struct mover *m, struct movable *mv)
{
    for (size_t i = 0; mv->host && mv->gpu && i < mv->pieces; i++) {
        uintptr_t off = i * MOVABLE_PIECE;
        size_t len = mover_piece_size(mv, i);
        if ((mv->host[i] || mv->gpu[i]) && !(mv->unmapped && mv->unmapped[i]))
            m->vmm.unmap(mv->base + off, len); /* unmapped already where the set-up failed */
        if (mv->host[i]) {
            m->vmm.unmap(mv->shadow + off, len);
            m->vmm.release(mv->host[i]);
        }
        if (mv->gpu[i])
            m->vmm.release(mv->gpu[i]);
        if (mv->incoming && mv->incoming[i]) {
            m->vmm.unmap(mv->stage + off, len);
            m->vmm.release(mv->incoming[i]);
        }
        if (mv->copied && mv->copied[i])
            m->cuda->event_destroy(mv->copied[i]);
    }
    if (mv->base)
        m->vmm.free(mv->base, mv->size);
    if (mv->shadow)
        m->vmm.free(mv->shadow, mv->size);
    if (mv->stage)
        m->vmm.free(mv->stage, mv->size);
    mover_movable_forget(mv);
}

void mover_movable_forget(struct movable *mv)
{
    free(mv->incoming);
    free(mv->copied);
    free(mv->clean);
    free(mv->streamed);
    free(mv->written);
    free(mv->last_use);
    free(mv->busy);
    free(mv->unmapped);
    free(mv->host);
    free(mv->gpu);
    free(mv);
}

cudaError_t mover_movable_alloc(struct mover *m, size_t size, int device, int node, bool on_gpu,
                                struct movable **out)
{
    *out = NULL;
    if (!mover_movable_usable(m, device))
        return cudaErrorNotSupported;
    if (!size || size % MOVABLE_GRANULE)
        return cudaErrorInvalidValue;
    if (node < 0) {
        int nearest = -1;
        if (m->cuda->device_get_attribute(&nearest, cudaDevAttrHostNumaId, device) != cudaSuccess)
            m->cuda->get_last_error();
        node = nearest < 0 ? 0 : nearest;
    }
    struct movable *mv = calloc(1, sizeof *mv);
    size_t pieces = (size + MOVABLE_PIECE - 1) / MOVABLE_PIECE;
    if (!mv)
        return cudaErrorMemoryAllocation;
    *mv = (struct movable){.size = size, .pieces = pieces, .device = device, .node = node,
                           .host = calloc(pieces, sizeof *mv->host),
                           .gpu = calloc(pieces, sizeof *mv->gpu),
                           .unmapped = calloc(pieces, sizeof *mv->unmapped),
                           .incoming = calloc(pieces, sizeof *mv->incoming),
                           .copied = calloc(pieces, sizeof *mv->copied),
                           .clean = calloc(pieces, sizeof *mv->clean),
                           .streamed = calloc(pieces, sizeof *mv->streamed),
                           .written = calloc(pieces, sizeof *mv->written),
                           .last_use = calloc(pieces, sizeof *mv->last_use),
                           .busy = calloc(pieces, sizeof *mv->busy)};
    CUdeviceptr va[3] = {0};
    bool ok = mv->host && mv->gpu && mv->unmapped && mv->incoming && mv->copied && mv->clean &&
              mv->streamed && mv->written && mv->last_use && mv->busy;
    for (int r = 0; ok && r < 3; r++)
        ok = m->vmm.reserve(&va[r], size, MOVABLE_GRANULE, 0, 0) == CUDA_SUCCESS;
    mv->base = va[0], mv->shadow = va[1], mv->stage = va[2];
    const CUmemAllocationProp host_prop = vmm_prop(false, device, node),
                              gpu_prop = vmm_prop(true, device, node);
    for (size_t i = 0; ok && i < pieces; i++) {
        uintptr_t off = i * MOVABLE_PIECE;
        size_t len = mover_piece_size(mv, i);
        ok = m->vmm.create(&mv->host[i], len, &host_prop, 0) == CUDA_SUCCESS;
        if (!ok) {
            mv->host[i] = 0;
            break;
        }
        ok = vmm_map(m, device, mv->shadow + off, len, mv->host[i]);
        if (!ok) { /* nothing of this piece mapped: release it here */
            m->vmm.release(mv->host[i]);
            mv->host[i] = 0;
            break;
        }
        /* A piece the GPU has no memory for starts on the host. */
        if (on_gpu && m->vmm.create(&mv->gpu[i], len, &gpu_prop, 0) != CUDA_SUCCESS)
            mv->gpu[i] = 0;
        ok = vmm_map(m, device, mv->base + off, len, mv->gpu[i] ? mv->gpu[i] : mv->host[i]);
        if (!ok) {
            m->vmm.unmap(mv->shadow + off, len);
            m->vmm.release(mv->host[i]);
            mv->host[i] = 0;
            if (mv->gpu[i])
                m->vmm.release(mv->gpu[i]);
            mv->gpu[i] = 0;
            break;
        }
        mv->gpu_bytes += mv->gpu[i] ? len : 0;
    }
    if (!ok) {
        m->cuda->get_last_error(); /* returned, not left for the job's next check */
        movable_free(m, mv);
        return cudaErrorMemoryAllocation;
    }
    *out = mv;
    return cudaSuccess;
}

bool mover_movable_repair(struct mover *m, struct movable *mv)
{
    for (size_t i = 0; mv->lost && i < mv->pieces; i++)
        if (mv->unmapped[i] &&
            vmm_map(m, mv->device, mv->base + i * MOVABLE_PIECE, mover_piece_size(mv, i),
                    mv->host[i])) {
            mv->unmapped[i] = false;
            mv->lost--;
        }
    if (mv->lost)
        m->cuda->get_last_error();
    return mv->lost == 0;
}

cudaError_t mover_movable_release(struct mover *m, struct movable *mv)
{
    if (mv->busy_count)
        return cudaErrorNotReady; /* a remap of it is being made */
    if (!wait_device(m, mv->device)) { /* an unmap does not wait for the GPU */
        m->cuda->get_last_error();
        return cudaErrorUnknown; /* keep it rather than pull it from under the GPU */
    }
    movable_free(m, mv);
    return cudaSuccess;
}

static bool drop_now(struct mover *m, struct movable *mv, size_t i);

/* Undo a piece's way in before its copy is known done: the copy may still
 * run, so wait for the GPU first, then drop the new GPU memory. */
static void abandon_way_in(struct mover *m, struct movable *mv, size_t i)
{
    size_t len = mover_piece_size(mv, i);
    wait_device(m, mv->device);
    m->vmm.unmap(mv->stage + i * MOVABLE_PIECE, len);
    m->vmm.release(mv->gpu[i]);
    mv->gpu[i] = 0;
}

size_t mover_movable_move(struct mover *m, struct device_state *dev, struct movable *mv,
                          bool to_gpu, size_t limit, bool clean)
{
    enum { MAX_EVENTS = 64 }; /* pieces in flight at once: 4 GiB */
    cudaEvent_t ev[MAX_EVENTS];
    size_t moved = 0;
    bool failed = false;
    if (mv->busy_count || (mv->lost && !mover_movable_repair(m, mv)) || !dev->stream ||
        !wait_device(m, mv->device)) {
        m->cuda->get_last_error();
        return 0;
    }
    for (size_t i = 0; i < mv->pieces; i++) /* the GPU was waited for: their copies are done */
        if (mv->incoming[i]) {
            mover_piece_cancel(m, mv, i);
            mv->streamed[i] = false;
        }
    const CUmemAllocationProp gpu_prop = vmm_prop(true, mv->device, mv->node);
    for (size_t first = 0; first < mv->pieces && !failed;) {
        /* Queue a round of copies, the GPU memory of each made first on the way in. */
        size_t idx[MAX_EVENTS], n = 0, i = first;
        for (; i < mv->pieces && n < MAX_EVENTS; i++) {
            uintptr_t off = i * MOVABLE_PIECE;
            size_t len = mover_piece_size(mv, i);
            if ((mv->gpu[i] != 0) == to_gpu || moved + len > limit)
                continue;
            if (!to_gpu && mv->clean[i]) { /* its host memory holds its bytes: no copy */
                if (drop_now(m, mv, i))
                    moved += len;
                else
                    failed = true;
                continue;
            }
            if (to_gpu) {
                if (m->vmm.create(&mv->gpu[i], len, &gpu_prop, 0) != CUDA_SUCCESS) {
                    mv->gpu[i] = 0;
                    failed = true; /* the GPU is full: the rest stays on the host */
                    break;
                }
                if (!vmm_map(m, mv->device, mv->stage + off, len, mv->gpu[i])) {
                    m->vmm.release(mv->gpu[i]);
                    mv->gpu[i] = 0;
                    failed = true;
                    break;
                }
            }
            if (m->cuda->event_create_with_flags(&ev[n], cudaEventDisableTiming) != cudaSuccess) {
                if (to_gpu) /* no copy queued for this piece */
                    abandon_way_in(m, mv, i);
                failed = true;
                break;
            }
            bool queued = m->cuda->memcpy_async(
                              (void *)(to_gpu ? mv->stage + off : mv->shadow + off),
                              (void *)(to_gpu ? mv->shadow + off : mv->base + off), len,
                              to_gpu ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost,
                              dev->stream) == cudaSuccess;
            if (!queued || m->cuda->event_record(ev[n], dev->stream) != cudaSuccess) {
                m->cuda->event_destroy(ev[n]);
                if (to_gpu)
                    abandon_way_in(m, mv, i); /* waits for a copy queued without its event */
                failed = true;
                break;
            }
            idx[n++] = i;
            moved += len;
        }
        /* Each piece is remapped as soon as its copy is done, while the next copies run. */
        for (size_t k = 0; k < n; k++) {
            size_t j = idx[k], len = mover_piece_size(mv, j);
            uintptr_t off = j * MOVABLE_PIECE;
            bool copied = m->cuda->event_synchronize(ev[k]) == cudaSuccess;
            m->cuda->event_destroy(ev[k]);
            /* A piece mapped neither way has its data copied to, or still in, its host memory. */
            bool remapped = copied && remap_piece(m, mv, j, to_gpu ? mv->host[j] : mv->gpu[j],
                                                  to_gpu ? mv->gpu[j] : mv->host[j]);
            if (to_gpu && !copied)
                wait_device(m, mv->device); /* the copy may still be writing the stage */
            if (to_gpu)
                m->vmm.unmap(mv->stage + off, len);
            if (!remapped) {
                /* The GPU side goes: on the way in it was never used; a piece mapped
                 * neither way has its data in the host memory, copied. */
                if ((to_gpu || mv->unmapped[j]) && mv->gpu[j]) {
                    m->vmm.release(mv->gpu[j]);
                    mv->gpu[j] = 0;
                    mv->gpu_bytes -= to_gpu ? 0 : len;
                }
                moved -= len;
                failed = true;
                continue;
            }
            mv->streamed[j] = false;
            mv->clean[j] = to_gpu && clean;
            if (!to_gpu) {
                m->vmm.release(mv->gpu[j]); /* the card gets it back now */
                mv->gpu[j] = 0;
                mv->gpu_bytes -= len;
            } else {
                mv->gpu_bytes += len;
            }
        }
        first = i;
    }
    if (failed)
        m->cuda->get_last_error(); /* returned here, not left for the job's next check */
    return moved;
}

/* ---- one piece at a time: streaming ahead of use ---- */

/* Record piece I's copy, queued on STREAM just now. */
static bool record_copy(struct mover *m, struct movable *mv, size_t i, cudaStream_t stream)
{
    if (!mv->copied[i] &&
        m->cuda->event_create_with_flags(&mv->copied[i], cudaEventDisableTiming) != cudaSuccess) {
        mv->copied[i] = NULL;
        return false;
    }
    return m->cuda->event_record(mv->copied[i], stream) == cudaSuccess;
}

void mover_movable_written(struct movable *mv, size_t offset, size_t size)
{
    for (size_t i = offset / MOVABLE_PIECE; size && i <= (offset + size - 1) / MOVABLE_PIECE &&
                                            i < mv->pieces;
         i++) {
        mv->clean[i] = false;
        mv->written[i] = true;
    }
}

void mover_movable_writes_ordered(struct movable *mv)
{
    memset(mv->written, 0, mv->pieces * sizeof *mv->written);
}

bool mover_event_done(struct mover *m, cudaEvent_t event)
{
    cudaError_t err = m->cuda->event_query(event);
    if (err == cudaSuccess)
        return true;
    if (err != cudaErrorNotReady)
        m->cuda->get_last_error();
    return false;
}

bool mover_piece_copied(struct mover *m, const struct movable *mv, size_t i)
{
    return !mv->copied[i] || mover_event_done(m, mv->copied[i]);
}

bool mover_piece_fetch(struct mover *m, struct movable *mv, size_t i, cudaStream_t stream)
{
    uintptr_t off = i * MOVABLE_PIECE;
    size_t len = mover_piece_size(mv, i);
    const CUmemAllocationProp gpu_prop = vmm_prop(true, mv->device, mv->node);
    CUmemGenericAllocationHandle h = 0;
    if (mv->busy[i] || mv->gpu[i] || mv->incoming[i] || mv->unmapped[i] || mv->written[i])
        return false;
    if (m->vmm.create(&h, len, &gpu_prop, 0) != CUDA_SUCCESS)
        return false; /* the GPU is full: it stays on the host */
    if (!vmm_map(m, mv->device, mv->stage + off, len, h)) {
        m->vmm.release(h);
        m->cuda->get_last_error();
        return false;
    }
    mv->incoming[i] = h;
    mv->incoming_bytes += len;
    if (m->cuda->memcpy_async((void *)(mv->stage + off), (void *)(mv->shadow + off), len,
                              cudaMemcpyHostToDevice, stream) != cudaSuccess ||
        !record_copy(m, mv, i, stream)) {
        m->cuda->get_last_error();
        wait_device(m, mv->device); /* a copy may be queued without its event */
        m->vmm.unmap(mv->stage + off, len);
        m->vmm.release(h);
        mv->incoming[i] = 0;
        mv->incoming_bytes -= len;
        return false;
    }
    return true;
}

void mover_piece_cancel(struct mover *m, struct movable *mv, size_t i)
{
    if (!mv->incoming[i] || mv->busy[i])
        return;
    if (mv->copied[i] && m->cuda->event_synchronize(mv->copied[i]) != cudaSuccess) {
        m->cuda->get_last_error();
        wait_device(m, mv->device); /* the copy may still be writing the stage */
    }
    m->vmm.unmap(mv->stage + i * MOVABLE_PIECE, mover_piece_size(mv, i));
    m->vmm.release(mv->incoming[i]);
    mv->incoming[i] = 0;
    mv->incoming_bytes -= mover_piece_size(mv, i);
}

/* ---- the mover's thread: remaps handed over ---- */

/* Piece I's GPU memory on its way in is now what the job's range maps (or
 * is handed over to be): clean, since nothing has written it since its copy. */
static void now_on_gpu(struct movable *mv, size_t i)
{
    size_t len = mover_piece_size(mv, i);
    mv->gpu[i] = mv->incoming[i];
    mv->incoming[i] = 0;
    mv->incoming_bytes -= len;
    mv->gpu_bytes += len;
    mv->clean[i] = true;
}

/* Piece I's job's range maps its host memory again (or is handed over to). */
static void now_on_host(struct movable *mv, size_t i)
{
    mv->gpu[i] = 0;
    mv->gpu_bytes -= mover_piece_size(mv, i);
    mv->clean[i] = mv->streamed[i] = false;
}

static void *worker_main(void *arg)
{
    struct mover *m = arg;
    struct mover_worker *w = &m->worker;
    int device = -1;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (!w->stop && w->done == w->queued)
            pthread_cond_wait(&w->wake, &w->lock);
        if (w->done == w->queued)
            break; /* told to stop, and nothing is left to make */
        struct piece_job job = w->jobs[(w->done + 1) % MOVER_JOBS];
        pthread_mutex_unlock(&w->lock);
        /* The driver's calls want the piece's GPU current on this thread too. */
        if (device != job.device && m->cuda->set_device(job.device) == cudaSuccess)
            device = job.device;
        if (job.op == PIECE_SWAP_IN) {
            job.outcome = m->vmm.unmap(job.stage, job.len) != CUDA_SUCCESS
                              ? REMAP_STUCK
                              : remap_calls(m, job.device, job.at, job.len, job.from, job.to);
            if (job.outcome == REMAP_KEPT || job.outcome == REMAP_LOST)
                m->vmm.release(job.to); /* mapped nowhere: never used */
        } else {
            job.outcome = remap_calls(m, job.device, job.at, job.len, job.from, job.to);
            if (job.outcome != REMAP_KEPT)
                m->vmm.release(job.from); /* its host memory holds the piece's bytes */
        }
        m->cuda->get_last_error();
        pthread_mutex_lock(&w->lock);
        w->jobs[(w->done + 1) % MOVER_JOBS].outcome = job.outcome;
        w->done++;
        pthread_cond_broadcast(&w->finished);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

/* Whether the worker thread runs in this process (after a fork, the child's
 * copy of it does not: the thread stayed with the parent). */
static bool worker_running(const struct mover_worker *w)
{
    return w->state == 1 && w->pid == getpid();
}

/* Is the mover's thread there to take a remap (started on first need)? */
static bool worker_ready(struct mover *m)
{
    struct mover_worker *w = &m->worker;
    if (w->state == 1 && !worker_running(w))
        w->state = -1; /* a fork's child: the thread stayed with the parent */
    if (w->state == 0) {
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old); /* the job's signals stay the job's */
        w->state = pthread_create(&w->thread, NULL, worker_main, m) == 0 ? 1 : -1;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        w->pid = getpid();
        if (w->state < 0)
            LOG(LOG_WARN, "no thread for streamed remaps: the job's thread makes them");
    }
    return w->state == 1 && w->queued - w->applied < MOVER_JOBS;
}

/* Hand JOB over: piece JOB.i of JOB.mv is busy until it is applied. */
static void worker_hand(struct mover *m, struct piece_job job)
{
    struct mover_worker *w = &m->worker;
    pthread_mutex_lock(&w->lock);
    w->jobs[++w->queued % MOVER_JOBS] = job;
    if (job.op == PIECE_DROP)
        w->leaving[job.device] += job.len;
    job.mv->busy[job.i] = w->queued;
    job.mv->busy_count++;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->lock);
}

/* A remap made as handed over needs nothing more; otherwise JOB's piece is
 * put back where it is, and the bytes of GPU memory that changes are returned. */
static long long apply(const struct piece_job *job)
{
    struct movable *mv = job->mv;
    size_t i = job->i;
    long long len = (long long)job->len;
    mv->busy[i] = 0;
    mv->busy_count--;
    if (job->outcome == REMAP_DONE)
        return 0;
    if (job->outcome == REMAP_LOST)
        piece_lost(mv, i);
    if (job->op == PIECE_SWAP_IN && job->outcome == REMAP_STUCK) {
        mv->incoming[i] = mv->gpu[i]; /* still on its way in, its copy done */
        mv->gpu[i] = 0;
        mv->gpu_bytes -= job->len;
        mv->incoming_bytes += job->len;
        mv->clean[i] = false;
        return 0;
    }
    if (job->op == PIECE_SWAP_IN) { /* on the host (or lost), its GPU memory given back */
        now_on_host(mv, i);
        return -len;
    }
    if (job->outcome == REMAP_KEPT) { /* still on the GPU, still clean */
        mv->gpu[i] = job->from;
        mv->gpu_bytes += job->len;
        mv->clean[i] = mv->streamed[i] = true;
        return len;
    }
    return 0; /* lost: its GPU memory given back, its data in its host memory */
}

bool mover_pieces_pending(const struct mover *m)
{
    return m->worker.applied != m->worker.queued;
}

/* Whether this process's worker has yet to finish job UNTIL (a worker that
 * stopped, or one of the parent's after a fork, will not). Under w->lock. */
static bool worker_behind(const struct mover_worker *w, uint64_t until)
{
    return w->done < until && worker_running(w);
}

size_t mover_pieces_finish(struct mover *m, uint64_t until, struct piece_outcome *out, size_t max)
{
    struct mover_worker *w = &m->worker;
    size_t n = 0;
    if (!mover_pieces_pending(m))
        return 0;
    pthread_mutex_lock(&w->lock);
    if (until > w->queued)
        until = w->queued;
    if (worker_behind(w, until)) {
        atomic_fetch_add(&w->waits, 1);
        do
            pthread_cond_wait(&w->finished, &w->lock);
        while (worker_behind(w, until));
    }
    while (w->applied < w->done && n < max) {
        const struct piece_job *job = &w->jobs[++w->applied % MOVER_JOBS];
        if (job->op == PIECE_DROP)
            w->leaving[job->device] -= job->len;
        long long held = apply(job);
        if (held || job->outcome != REMAP_DONE)
            out[n++] = (struct piece_outcome){job->mv, job->i, held};
    }
    pthread_mutex_unlock(&w->lock);
    return n;
}

uint64_t mover_leaving_bytes(const struct mover *m, int device)
{
    return device >= 0 && device < RT_MAX_DEVICES ? m->worker.leaving[device] : 0;
}

void mover_destroy(struct mover *m)
{
    struct mover_worker *w = &m->worker;
    if (!worker_running(w))
        return;
    pthread_mutex_lock(&w->lock);
    w->stop = true;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    w->state = -1;
}

void mover_fork_prepare(struct mover *m)
{
    pthread_mutex_lock(&m->worker.lock);
    pthread_mutex_lock(&proxies_lock);
}

void mover_fork_parent(struct mover *m)
{
    pthread_mutex_unlock(&proxies_lock);
    pthread_mutex_unlock(&m->worker.lock);
}

void mover_fork_child(struct mover *m)
{
    struct mover_worker *w = &m->worker;
    /* The thread stayed with the parent: no one waits on these here. */
    if (pthread_cond_init(&w->wake, NULL) || pthread_cond_init(&w->finished, NULL))
        LOG(LOG_WARN, "the remaps' conditions could not be made again after fork");
    w->state = -1; /* (its lock, held since mover_fork_prepare, is let go by mover_fork_parent) */
}

/* ---- one piece at a time: swap in, drop ---- */

static bool swap_in_now(struct mover *m, struct movable *mv, size_t i)
{
    size_t len = mover_piece_size(mv, i);
    if (m->vmm.unmap(mv->stage + i * MOVABLE_PIECE, len) != CUDA_SUCCESS)
        return false; /* still on its way in, mapped at the stage */
    if (!remap_piece(m, mv, i, mv->host[i], mv->incoming[i])) {
        /* On the host, or lost with its data in its host memory: the way in is given up. */
        m->vmm.release(mv->incoming[i]);
        mv->incoming[i] = 0;
        mv->incoming_bytes -= len;
        return false;
    }
    now_on_gpu(mv, i);
    return true;
}

bool mover_piece_swap_in(struct mover *m, struct movable *mv, size_t i)
{
    /* Only once its copy is done: the copy writes through the stage, which goes. */
    if (mv->busy[i] || !mv->incoming[i] || mv->gpu[i] || mv->written[i] ||
        !mover_piece_copied(m, mv, i))
        return false; /* (a piece written since its copy began stays on the host) */
    if (!worker_ready(m))
        return swap_in_now(m, mv, i);
    size_t len = mover_piece_size(mv, i);
    worker_hand(m, (struct piece_job){.mv = mv, .i = i, .op = PIECE_SWAP_IN,
                                      .at = mv->base + i * MOVABLE_PIECE,
                                      .stage = mv->stage + i * MOVABLE_PIECE, .len = len,
                                      .device = mv->device, .from = mv->host[i],
                                      .to = mv->incoming[i]});
    now_on_gpu(mv, i);
    return true;
}

static bool drop_now(struct mover *m, struct movable *mv, size_t i)
{
    if (!remap_piece(m, mv, i, mv->gpu[i], mv->host[i])) {
        if (mv->unmapped[i]) { /* its host memory holds its data: the GPU memory goes */
            m->vmm.release(mv->gpu[i]);
            mv->gpu[i] = 0;
            mv->gpu_bytes -= mover_piece_size(mv, i);
        }
        return false;
    }
    m->vmm.release(mv->gpu[i]);
    now_on_host(mv, i);
    return true;
}

bool mover_piece_drop(struct mover *m, struct movable *mv, size_t i)
{
    if (mv->busy[i] || !mv->gpu[i] || !mv->clean[i] || !mover_piece_copied(m, mv, i))
        return false;
    if (!worker_ready(m))
        return drop_now(m, mv, i);
    size_t len = mover_piece_size(mv, i);
    worker_hand(m, (struct piece_job){.mv = mv, .i = i, .op = PIECE_DROP,
                                      .at = mv->base + i * MOVABLE_PIECE, .len = len,
                                      .device = mv->device, .from = mv->gpu[i],
                                      .to = mv->host[i]});
    now_on_host(mv, i);
    return true;
}

bool mover_piece_save(struct mover *m, struct movable *mv, size_t i, cudaStream_t stream)
{
    uintptr_t off = i * MOVABLE_PIECE;
    if (!mv->gpu[i] || mv->busy[i])
        return false;
    if (m->cuda->memcpy_async((void *)(mv->shadow + off), (void *)(mv->base + off),
                              mover_piece_size(mv, i), cudaMemcpyDeviceToHost, stream) != cudaSuccess ||
        !record_copy(m, mv, i, stream)) {
        m->cuda->get_last_error();
        mv->clean[i] = false;
        return false;
    }
    mv->clean[i] = true;
    return true;
}
