/* A small fake of the CUDA runtime for tests without a GPU: host memory
 * stands in for device and managed memory, streams and events are handles
 * whose work is always complete, and every call the umpol runtime cares about
 * is counted so tests can check what it did. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create */
#endif
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "fake_cudart.h"

#define EXPORT __attribute__((visibility("default")))

static struct fake_counters counters;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local int current_device;
static _Thread_local cudaError_t last_error;
static int streams_busy, capturing;

EXPORT void fake_set_streams_busy(int busy)
{
    streams_busy = busy;
}

EXPORT void fake_set_capturing(int on)
{
    capturing = on;
}

#define COUNT(field) __atomic_fetch_add(&counters.field, 1, __ATOMIC_RELAXED)

/* A fork made while another thread is inside the fake would leave its lock
 * held in the child for ever. The child gets a fresh lock: its only other
 * thread-shared state is a table whose updates leave it walkable at any point.
 * (Taking the lock in a prepare handler instead could deadlock against the
 * umpol runtime's own handler, which holds its lock while calling in here.) */
static void fork_child(void)
{
    pthread_mutex_init(&lock, NULL);
}

__attribute__((constructor)) static void fake_init(void)
{
    pthread_atfork(NULL, NULL, fork_child);
}

EXPORT const struct fake_counters *fake_counters(void)
{
    return &counters;
}

static void residency(const void *ptr, size_t size, int on_gpu)
{
    pthread_mutex_lock(&lock);
    fake_residency_set((uintptr_t)ptr, (uintptr_t)ptr + size, on_gpu);
    pthread_mutex_unlock(&lock);
}

EXPORT uint64_t fake_resident_bytes(void)
{
    pthread_mutex_lock(&lock);
    uint64_t r = fake_gpu_resident();
    pthread_mutex_unlock(&lock);
    return r;
}

/* What earlier tests left held (the runtime frees no device memory at exit):
 * the host memory guard counts from here. */
static uint64_t held_base;

EXPORT void fake_set_held_base(void)
{
    held_base = __atomic_load_n(&counters.bytes_held, __ATOMIC_RELAXED);
}

static cudaError_t host_alloc(void **ptr, size_t size)
{
    if (!ptr)
        return last_error = cudaErrorInvalidValue;
    uint64_t limit = fake_gpu_bytes();
    uint64_t now = __atomic_add_fetch(&counters.bytes_held, size, __ATOMIC_RELAXED);
    if (now - held_base > limit * 4) { /* host memory guard, far above any cap */
        __atomic_sub_fetch(&counters.bytes_held, size, __ATOMIC_RELAXED);
        return last_error = cudaErrorMemoryAllocation;
    }
    void *p = NULL;
    if (posix_memalign(&p, 512, size ? size : 1) != 0) {
        __atomic_sub_fetch(&counters.bytes_held, size, __ATOMIC_RELAXED);
        return last_error = cudaErrorMemoryAllocation;
    }
    /* Remember the size in a side table so cudaFree can account for it. */
    pthread_mutex_lock(&lock);
    fake_track(p, size);
    pthread_mutex_unlock(&lock);
    *ptr = p;
    return cudaSuccess;
}

static cudaError_t host_free(void *ptr)
{
    if (!ptr)
        return cudaSuccess;
    pthread_mutex_lock(&lock);
    size_t size;
    int known = fake_untrack(ptr, &size);
    pthread_mutex_unlock(&lock);
    if (!known)
        return last_error = cudaErrorInvalidValue;
    residency(ptr, size, 0);
    __atomic_sub_fetch(&counters.bytes_held, size, __ATOMIC_RELAXED);
    free(ptr);
    return cudaSuccess;
}

static int malloc_fails;
static uint64_t card_full_at; /* 0: never full */

void fake_set_malloc_fails(int on)
{
    malloc_fails = on;
}

EXPORT void fake_set_card_full_at(uint64_t bytes)
{
    card_full_at = bytes;
}

/* Would SIZE more bytes of device memory pass what the card has? */
static int card_full(size_t size)
{
    return card_full_at && fake_resident_bytes() + fake_vmm_gpu_bytes() + size > card_full_at;
}

EXPORT cudaError_t cudaMalloc(void **ptr, size_t size)
{
    COUNT(malloc);
    if (malloc_fails || card_full(size))
        return cudaErrorMemoryAllocation;
    cudaError_t err = host_alloc(ptr, size);
    if (err == cudaSuccess)
        residency(*ptr, size, 1);
    return err;
}

EXPORT cudaError_t cudaMallocAsync(void **ptr, size_t size, cudaStream_t stream)
{
    (void)stream;
    COUNT(malloc_async);
    return host_alloc(ptr, size);
}

EXPORT cudaError_t cudaMallocAsync_ptsz(void **ptr, size_t size, cudaStream_t stream)
{
    (void)stream;
    COUNT(malloc_async);
    return host_alloc(ptr, size);
}

EXPORT cudaError_t cudaFreeAsync_ptsz(void *ptr, cudaStream_t stream)
{
    (void)stream;
    COUNT(free_async);
    return host_free(ptr);
}

EXPORT cudaError_t cudaMallocManaged(void **ptr, size_t size, unsigned flags)
{
    (void)flags;
    COUNT(malloc_managed);
    return host_alloc(ptr, size);
}

EXPORT cudaError_t cudaFree(void *ptr)
{
    COUNT(free);
    return host_free(ptr);
}

EXPORT cudaError_t cudaFreeAsync(void *ptr, cudaStream_t stream)
{
    (void)stream;
    COUNT(free_async);
    return host_free(ptr);
}

/* Registered host memory: counted, mapped at its own address. The fake does
 * not remember sizes; tests pair register and unregister through the counters. */
static int host_register_fails;

void fake_set_host_register_fails(int on)
{
    host_register_fails = on;
}

EXPORT cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned flags)
{
    (void)flags;
    if (!ptr || !size)
        return last_error = cudaErrorInvalidValue;
    if (host_register_fails)
        return last_error = cudaErrorMemoryAllocation;
    COUNT(host_register);
    __atomic_add_fetch(&counters.bytes_pinned, size, __ATOMIC_RELAXED);
    return cudaSuccess;
}

EXPORT cudaError_t cudaHostUnregister(void *ptr)
{
    if (!ptr)
        return last_error = cudaErrorInvalidValue;
    COUNT(host_unregister);
    return cudaSuccess;
}

EXPORT cudaError_t cudaHostGetDevicePointer(void **device_ptr, void *host_ptr, unsigned flags)
{
    (void)flags;
    *device_ptr = host_ptr;
    return cudaSuccess;
}

EXPORT cudaError_t cudaMemAdvise(const void *ptr, size_t count, enum cudaMemoryAdvise advice,
                                 struct cudaMemLocation location)
{
    (void)ptr;
    (void)count;
    COUNT(advise);
    if (location.type == cudaMemLocationTypeDevice && (location.id < 0 || location.id >= 4))
        return last_error = cudaErrorInvalidDevice; /* like CUDA: a GPU this process cannot see */
    if (advice == cudaMemAdviseSetReadMostly)
        COUNT(advise_read_mostly);
    else if (advice == cudaMemAdviseSetPreferredLocation && location.type == cudaMemLocationTypeDevice)
        COUNT(advise_preferred);
    else if (advice == cudaMemAdviseSetPreferredLocation)
        COUNT(advise_preferred), COUNT(advise_preferred_host);
    else if (advice == cudaMemAdviseSetAccessedBy)
        COUNT(advise_accessed_by);
    else
        COUNT(advise_unset);
    return cudaSuccess;
}

EXPORT cudaError_t cudaMemPrefetchAsync(const void *ptr, size_t count,
                                        struct cudaMemLocation location, unsigned flags,
                                        cudaStream_t stream)
{
    (void)flags;
    COUNT(prefetch);
    if (location.type == cudaMemLocationTypeDevice && (location.id < 0 || location.id >= 4))
        return last_error = cudaErrorInvalidDevice;
    residency(ptr, count, location.type == cudaMemLocationTypeDevice);
    if (location.type != cudaMemLocationTypeDevice)
        __atomic_store_n(&counters.last_host_prefetch_stream, (uint64_t)(uintptr_t)stream,
                         __ATOMIC_RELAXED);
    if (location.type == cudaMemLocationTypeDevice)
        __atomic_fetch_add(&counters.prefetch_bytes_to_gpu, count, __ATOMIC_RELAXED);
    else
        __atomic_fetch_add(&counters.prefetch_bytes_to_host, count, __ATOMIC_RELAXED);
    return cudaSuccess;
}

EXPORT cudaError_t cudaMemPrefetchBatchAsync(void **ptrs, size_t *sizes, size_t count,
                                             struct cudaMemLocation *locs, size_t *loc_idxs,
                                             size_t num_locs, unsigned long long flags,
                                             cudaStream_t stream)
{
    (void)loc_idxs;
    (void)num_locs;
    (void)flags;
    if (!stream)
        return last_error = cudaErrorInvalidValue; /* like CUDA: no legacy stream */
    COUNT(prefetch_batch);
    for (size_t i = 0; i < count; i++) {
        residency(ptrs[i], sizes[i], locs[0].type == cudaMemLocationTypeDevice);
        if (locs[0].type == cudaMemLocationTypeDevice)
            __atomic_fetch_add(&counters.prefetch_bytes_to_gpu, sizes[i], __ATOMIC_RELAXED);
        else
            __atomic_fetch_add(&counters.prefetch_bytes_to_host, sizes[i], __ATOMIC_RELAXED);
    }
    return cudaSuccess;
}

EXPORT cudaError_t cudaMemDiscardBatchAsync(void **ptrs, size_t *sizes, size_t count,
                                            unsigned long long flags, cudaStream_t stream)
{
    (void)ptrs;
    (void)flags;
    if (!stream)
        return last_error = cudaErrorInvalidValue;
    COUNT(discard);
    for (size_t i = 0; i < count; i++)
        __atomic_fetch_add(&counters.discard_bytes, sizes[i], __ATOMIC_RELAXED);
    return cudaSuccess;
}

EXPORT cudaError_t cudaMemDiscardAndPrefetchBatchAsync(void **ptrs, size_t *sizes, size_t count,
                                                       struct cudaMemLocation *locs,
                                                       size_t *loc_idxs, size_t num_locs,
                                                       unsigned long long flags,
                                                       cudaStream_t stream)
{
    (void)loc_idxs;
    (void)num_locs;
    (void)flags;
    if (!stream || stream == cudaStreamLegacy || stream == cudaStreamPerThread)
        return last_error = cudaErrorInvalidValue;
    COUNT(discard_prefetch);
    for (size_t i = 0; i < count; i++) {
        residency(ptrs[i], sizes[i], locs[0].type == cudaMemLocationTypeDevice);
        __atomic_fetch_add(&counters.discard_prefetch_bytes, sizes[i], __ATOMIC_RELAXED);
    }
    return cudaSuccess;
}

static uint64_t other_used;

EXPORT void fake_set_other_used(uint64_t bytes)
{
    other_used = bytes;
}

EXPORT cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
    *total_bytes = fake_gpu_bytes();
    /* Movable memory's GPU side, and what a test says others hold. */
    *free_bytes = *total_bytes - fake_vmm_gpu_bytes() - other_used;
    return cudaSuccess;
}

EXPORT cudaError_t cudaGetDevice(int *device)
{
    *device = current_device;
    return cudaSuccess;
}

EXPORT cudaError_t cudaGetDeviceCount(int *count)
{
    *count = 4;
    return cudaSuccess;
}

EXPORT void fake_force_device(int device)
{
    current_device = device;
}

EXPORT cudaError_t cudaSetDevice(int device)
{
    if (device < 0 || device >= 4)
        return last_error = cudaErrorInvalidDevice;
    current_device = device;
    return cudaSuccess;
}

EXPORT cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    (void)device;
    *value = attr == cudaDevAttrHostNumaId ? 0 : 1;
    return cudaSuccess;
}

EXPORT cudaError_t cudaDeviceSynchronize(void)
{
    COUNT(device_sync);
    return cudaSuccess;
}

/* The device each stream was made on, by its handle (0x1010, 0x1020, ...). */
#define FAKE_STREAMS 4096
static int stream_devices[FAKE_STREAMS];

EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags)
{
    (void)flags;
    static uintptr_t next = 0x1000;
    uintptr_t s = __atomic_add_fetch(&next, 0x10, __ATOMIC_RELAXED);
    if ((s - 0x1010) / 0x10 < FAKE_STREAMS)
        stream_devices[(s - 0x1010) / 0x10] = current_device;
    *stream = (cudaStream_t)s;
    return cudaSuccess;
}

EXPORT int fake_stream_device(void *stream)
{
    uintptr_t s = (uintptr_t)stream;
    return s >= 0x1010 && (s - 0x1010) % 0x10 == 0 && (s - 0x1010) / 0x10 < FAKE_STREAMS
               ? stream_devices[(s - 0x1010) / 0x10]
               : -1;
}

EXPORT cudaError_t cudaStreamQuery(cudaStream_t stream)
{
    (void)stream;
    return streams_busy ? cudaErrorNotReady : cudaSuccess;
}

static int stream_wait_fails;

void fake_set_stream_wait_fails(int on)
{
    stream_wait_fails = on;
}

static uint64_t last_wait_serial;
static cudaStream_t last_waiter, last_waited_on;

EXPORT uint64_t fake_last_wait_serial(void)
{
    return last_wait_serial;
}

EXPORT void fake_last_wait(void **waiter, void **recorded_on)
{
    *waiter = (void *)last_waiter;
    *recorded_on = (void *)last_waited_on;
}

EXPORT cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags)
{
    (void)flags;
    if (stream_wait_fails)
        return last_error = cudaErrorInvalidResourceHandle;
    COUNT(stream_wait);
    memcpy(&last_wait_serial, (char *)event + 8, sizeof last_wait_serial);
    last_waiter = stream;
    memcpy(&last_waited_on, event, sizeof last_waited_on);
    return cudaSuccess;
}

EXPORT cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *status)
{
    (void)stream;
    *status = capturing ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
    return cudaSuccess;
}

EXPORT cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned flags)
{
    (void)flags;
    COUNT(event_create);
    *event = (cudaEvent_t)calloc(1, 16);
    return *event ? cudaSuccess : cudaErrorMemoryAllocation;
}

static cudaStream_t busy_stream; /* events recorded on it are not done */

EXPORT void fake_set_busy_stream(void *stream)
{
    busy_stream = (cudaStream_t)stream;
}

EXPORT cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    memcpy(event, &stream, sizeof stream); /* its stream, for cudaEventQuery */
    uint64_t serial = __atomic_add_fetch(&counters.event_record, 1, __ATOMIC_RELAXED);
    memcpy((char *)event + 8, &serial, sizeof serial); /* which record, for the waits */
    return cudaSuccess;
}

EXPORT cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    free(event);
    return cudaSuccess;
}

EXPORT cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
    (void)stream, (void)mode;
    capturing = 1;
    return cudaSuccess;
}

EXPORT cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph)
{
    (void)stream;
    *graph = NULL;
    if (!capturing)
        return last_error = cudaErrorIllegalState;
    capturing = 0;
    return cudaSuccess;
}

EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    (void)event;
    return cudaSuccess;
}

/* An event is done unless the streams are marked busy (fake_set_streams_busy)
 * or it was recorded on the busy stream (fake_set_busy_stream). */
EXPORT cudaError_t cudaEventQuery(cudaEvent_t event)
{
    cudaStream_t on;
    memcpy(&on, event, sizeof on);
    return streams_busy || (busy_stream && on == busy_stream) ? cudaErrorNotReady : cudaSuccess;
}

EXPORT cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count,
                                   enum cudaMemcpyKind kind, cudaStream_t stream)
{
    (void)stream;
    COUNT(memcpy);
    if (kind == cudaMemcpyDeviceToHost)
        __atomic_fetch_add(&counters.memcpy_bytes_to_host, count, __ATOMIC_RELAXED);
    if (kind == cudaMemcpyHostToDevice)
        __atomic_fetch_add(&counters.memcpy_bytes_to_gpu, count, __ATOMIC_RELAXED);
    memmove(dst, src, count);
    return cudaSuccess;
}

/* The driver's virtual memory management, with real memory behind it: a
 * reserved range is an inaccessible mapping, a physical allocation a memfd,
 * and a map maps the memfd at the range, so data follow the physical memory
 * from one range to another as on the GPU. Device allocations count on the
 * fake GPU (cudaMemGetInfo). */
#define FAKE_VMM_HANDLES 4096
static struct {
    int fd; /* -1: free slot */
    size_t size;
    int on_gpu;
} vmm_handles[FAKE_VMM_HANDLES];
static uint64_t vmm_gpu_bytes;
static int vmm_create_fails_after = -1, vmm_map_fails_after = -1, vmm_map_failures,
           vmm_unsupported;
/* What is mapped where: a map over a mapped range, or an unmap of what was
 * not mapped as one, is refused as the driver would. */
#define FAKE_VMM_MAPS 8192
static struct {
    uintptr_t va;
    size_t size;
} vmm_maps[FAKE_VMM_MAPS];

EXPORT void fake_set_vmm_map_fails(int after, int times)
{
    pthread_mutex_lock(&lock); /* the runtime's thread maps too */
    vmm_map_fails_after = after;
    vmm_map_failures = times;
    pthread_mutex_unlock(&lock);
}

EXPORT void fake_set_vmm_unsupported(int on)
{
    vmm_unsupported = on;
}

/* Index of the mapping overlapping [VA, VA+SIZE), or -1 (caller holds the lock). */
static int vmm_map_find(uintptr_t va, size_t size)
{
    for (int i = 0; i < FAKE_VMM_MAPS; i++)
        if (vmm_maps[i].size && va < vmm_maps[i].va + vmm_maps[i].size &&
            vmm_maps[i].va < va + size)
            return i;
    return -1;
}

EXPORT void fake_set_vmm_create_fails_after(int n)
{
    vmm_create_fails_after = n;
}

EXPORT uint64_t fake_vmm_gpu_bytes(void)
{
    return __atomic_load_n(&vmm_gpu_bytes, __ATOMIC_RELAXED);
}

static CUresult fake_mem_address_reserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                                         CUdeviceptr addr, unsigned long long flags)
{
    (void)addr, (void)flags;
    size_t align = alignment ? alignment : 2u << 20;
    void *p = mmap(NULL, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    uintptr_t start = ((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1);
    if (start > (uintptr_t)p)
        munmap(p, start - (uintptr_t)p);
    munmap((void *)(start + size), (uintptr_t)p + size + align - (start + size));
    *ptr = start;
    COUNT(vmm_reserve);
    return CUDA_SUCCESS;
}

static CUresult fake_mem_address_free(CUdeviceptr ptr, size_t size)
{
    pthread_mutex_lock(&lock);
    int mapped = vmm_map_find(ptr, size) >= 0; /* the driver refuses a range still mapped */
    pthread_mutex_unlock(&lock);
    if (mapped)
        return CUDA_ERROR_INVALID_VALUE;
    return munmap((void *)ptr, size) == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult fake_mem_create(CUmemGenericAllocationHandle *handle, size_t size,
                                const CUmemAllocationProp *prop, unsigned long long flags)
{
    (void)flags;
    int on_gpu = prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE;
    pthread_mutex_lock(&lock);
    if (vmm_create_fails_after == 0 ||
        (on_gpu && vmm_gpu_bytes + fake_gpu_resident() + size > fake_gpu_bytes())) {
        pthread_mutex_unlock(&lock);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (vmm_create_fails_after > 0)
        vmm_create_fails_after--;
    size_t i = 0;
    while (i < FAKE_VMM_HANDLES && vmm_handles[i].size)
        i++;
    int fd = i < FAKE_VMM_HANDLES ? memfd_create("fake-vmm", 0) : -1;
    if (fd < 0 || ftruncate(fd, (off_t)size) != 0) {
        if (fd >= 0)
            close(fd);
        pthread_mutex_unlock(&lock);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    vmm_handles[i].fd = fd;
    vmm_handles[i].size = size;
    vmm_handles[i].on_gpu = on_gpu;
    if (on_gpu)
        __atomic_add_fetch(&vmm_gpu_bytes, size, __ATOMIC_RELAXED); /* read unlocked */
    pthread_mutex_unlock(&lock);
    *handle = i + 1;
    COUNT(vmm_create);
    return CUDA_SUCCESS;
}

static CUresult fake_mem_release(CUmemGenericAllocationHandle handle)
{
    pthread_mutex_lock(&lock);
    size_t i = handle - 1;
    if (!handle || i >= FAKE_VMM_HANDLES || !vmm_handles[i].size) {
        pthread_mutex_unlock(&lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    close(vmm_handles[i].fd); /* its pages live on while mapped, as on the GPU */
    if (vmm_handles[i].on_gpu)
        __atomic_sub_fetch(&vmm_gpu_bytes, vmm_handles[i].size, __ATOMIC_RELAXED);
    vmm_handles[i].size = 0;
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

static CUresult fake_mem_map(CUdeviceptr ptr, size_t size, size_t offset,
                             CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    (void)flags;
    size_t i = handle - 1;
    if (offset || !handle || i >= FAKE_VMM_HANDLES || vmm_handles[i].size != size)
        return CUDA_ERROR_INVALID_VALUE; /* CUDA 13 maps whole allocations only */
    pthread_mutex_lock(&lock);
    int slot = 0;
    while (slot < FAKE_VMM_MAPS && vmm_maps[slot].size)
        slot++;
    CUresult r = CUDA_SUCCESS;
    if (vmm_map_fails_after == 0) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
        if (--vmm_map_failures <= 0)
            vmm_map_fails_after = -1;
    }
    else if (vmm_map_find(ptr, size) >= 0 || slot == FAKE_VMM_MAPS)
        r = CUDA_ERROR_INVALID_VALUE; /* mapped already */
    else if (mmap((void *)ptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                  vmm_handles[i].fd, 0) == MAP_FAILED)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (vmm_map_fails_after > 0)
        vmm_map_fails_after--;
    if (r == CUDA_SUCCESS) {
        vmm_maps[slot].va = ptr;
        vmm_maps[slot].size = size;
    }
    pthread_mutex_unlock(&lock);
    COUNT(vmm_map);
    return r;
}

static CUresult fake_mem_unmap(CUdeviceptr ptr, size_t size)
{
    pthread_mutex_lock(&lock);
    int i = vmm_map_find(ptr, size);
    CUresult r = i < 0 || vmm_maps[i].va != ptr || vmm_maps[i].size != size
                     ? CUDA_ERROR_INVALID_VALUE /* not mapped as one */
                 : mmap((void *)ptr, size, PROT_NONE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1,
                        0) == MAP_FAILED
                     ? CUDA_ERROR_INVALID_VALUE
                     : CUDA_SUCCESS;
    if (r == CUDA_SUCCESS)
        vmm_maps[i].size = 0;
    pthread_mutex_unlock(&lock);
    return r;
}

static CUresult fake_mem_granularity(size_t *granularity, const CUmemAllocationProp *prop,
                                     CUmemAllocationGranularity_flags option)
{
    (void)prop, (void)option;
    *granularity = 2u << 20;
    return CUDA_SUCCESS;
}

static CUresult fake_device_get(CUdevice *device, int ordinal)
{
    *device = ordinal;
    return CUDA_SUCCESS;
}

static CUresult fake_device_attribute(int *value, CUdevice_attribute attribute, CUdevice device)
{
    (void)device;
    *value = (attribute == CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED ||
              attribute == CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED) &&
             !vmm_unsupported;
    return CUDA_SUCCESS;
}

/* While held, a thread other than the one that held it waits in
 * cuMemSetAccess: a remap on the runtime's own thread stays half made. */
static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_released = PTHREAD_COND_INITIALIZER;
static int held;
static pthread_t hold_owner;
static unsigned long held_calls;

EXPORT void fake_set_vmm_hold(int on)
{
    pthread_mutex_lock(&hold_lock);
    held = on;
    hold_owner = pthread_self();
    if (!on)
        pthread_cond_broadcast(&hold_released);
    pthread_mutex_unlock(&hold_lock);
}

EXPORT unsigned long fake_vmm_held_calls(void)
{
    pthread_mutex_lock(&hold_lock);
    unsigned long n = held_calls;
    pthread_mutex_unlock(&hold_lock);
    return n;
}

static CUresult fake_mem_set_access(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                                    size_t count)
{
    (void)ptr, (void)size, (void)desc;
    pthread_mutex_lock(&hold_lock);
    if (held && !pthread_equal(pthread_self(), hold_owner)) {
        held_calls++;
        while (held)
            pthread_cond_wait(&hold_released, &hold_lock);
    }
    pthread_mutex_unlock(&hold_lock);
    return count ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static int vmm_off;

EXPORT void fake_set_vmm_off(int off)
{
    vmm_off = off;
}

EXPORT cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fn,
                                                    unsigned version, unsigned long long flags,
                                                    enum cudaDriverEntryPointQueryResult *status)
{
    (void)version, (void)flags;
    static const struct {
        const char *name;
        void *fn;
    } table[] = {
        {"cuMemAddressReserve", (void *)fake_mem_address_reserve},
        {"cuMemAddressFree", (void *)fake_mem_address_free},
        {"cuMemCreate", (void *)fake_mem_create},
        {"cuMemRelease", (void *)fake_mem_release},
        {"cuMemMap", (void *)fake_mem_map},
        {"cuMemUnmap", (void *)fake_mem_unmap},
        {"cuMemSetAccess", (void *)fake_mem_set_access},
        {"cuMemGetAllocationGranularity", (void *)fake_mem_granularity},
        {"cuDeviceGet", (void *)fake_device_get},
        {"cuDeviceGetAttribute", (void *)fake_device_attribute},
    };
    *fn = NULL;
    *status = cudaDriverEntryPointSymbolNotFound;
    for (size_t i = 0; !vmm_off && i < sizeof table / sizeof table[0]; i++)
        if (strcmp(symbol, table[i].name) == 0) {
            *fn = table[i].fn;
            *status = cudaDriverEntryPointSuccess;
        }
    return cudaSuccess;
}

EXPORT cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

EXPORT const char *cudaGetErrorString(cudaError_t error)
{
    return error == cudaSuccess ? "no error" : "fake CUDA error";
}
