/* Counters and helpers of the fake CUDA runtime used by the tests. */
#ifndef UMPOL_FAKE_CUDART_H
#define UMPOL_FAKE_CUDART_H

#include <stddef.h>
#include <stdint.h>

struct fake_counters {
    uint64_t malloc, malloc_async, malloc_managed, free, free_async;
    uint64_t advise, advise_read_mostly, advise_preferred, advise_preferred_host, advise_accessed_by;
    uint64_t prefetch, prefetch_batch, prefetch_bytes_to_gpu, prefetch_bytes_to_host;
    uint64_t device_sync, stream_wait, event_create, event_record, discard, discard_bytes;
    uint64_t discard_prefetch, discard_prefetch_bytes;
    uint64_t last_host_prefetch_stream; /* the stream of the latest prefetch to the host */
    uint64_t bytes_held;
    uint64_t host_register, host_unregister, bytes_pinned; /* cudaHostRegister'd memory */
    uint64_t advise_unset; /* cudaMemAdviseUnset*: advice taken back */
    uint64_t memcpy, memcpy_bytes_to_gpu, memcpy_bytes_to_host; /* cudaMemcpyAsync */
    uint64_t vmm_reserve, vmm_create, vmm_map;                  /* the driver's VMM calls */
};

const struct fake_counters *fake_counters(void);
/* Make cudaStreamQuery answer "not ready" / cudaStreamIsCapturing "active". */
void fake_set_streams_busy(int busy);
/* Events recorded on STREAM report not done (NULL: none). */
void fake_set_busy_stream(void *stream); /* a cudaStream_t */
/* While on, cuMemSetAccess on any other thread than the caller's waits (a
 * remap on the runtime's thread stays half made); how many have waited. */
void fake_set_vmm_hold(int on);
unsigned long fake_vmm_held_calls(void);
void fake_set_capturing(int on);
/* Make cudaHostRegister fail as when pinned memory runs out. */
void fake_set_host_register_fails(int on);
/* Make cudaStreamWaitEvent fail (and set the last error), as for a stream
 * of another GPU. */
void fake_set_stream_wait_fails(int on);
/* The record the last cudaStreamWaitEvent waited for: the event_record
 * count just after that event was last recorded. */
uint64_t fake_last_wait_serial(void);
/* The last cudaStreamWaitEvent: the waiting stream, and the stream its
 * event was last recorded on (cudaStream_t). */
void fake_last_wait(void **waiter, void **recorded_on);
/* The device a stream made by cudaStreamCreateWithFlags was made on; -1:
 * not one. */
int fake_stream_device(void *stream);
/* Make cudaMalloc fail as on a full card. */
void fake_set_malloc_fails(int on);
/* The driver's VMM (cudaGetDriverEntryPointByVersion): OFF hides it; after
 * N more successful cuMemCreate calls the next fail (-1: never); the bytes
 * of device memory it holds (also taken off cudaMemGetInfo's free). */
void fake_set_vmm_off(int off);
void fake_set_vmm_create_fails_after(int n);
/* After AFTER more successful cuMemMap calls the next TIMES fail; the GPU
 * says it has no virtual memory management. The fake's cuMemMap refuses a
 * mapped range, its cuMemUnmap what was not mapped as one, and its
 * cuMemAddressFree a range still mapped, as the driver does. */
void fake_set_vmm_map_fails(int after, int times);
void fake_set_vmm_unsupported(int on);
/* cudaMalloc refuses what would take the fake GPU's device memory and movable
 * memory's GPU side past BYTES (0: never), as a card that small would. */
void fake_set_card_full_at(uint64_t bytes);
/* The host memory guard (4 x FAKE_GPU_BYTES) counts what is held from now on,
 * not what earlier tests of the process left held. */
void fake_set_held_base(void);
/* cudaMemGetInfo shows BYTES more in use (the driver's, other processes'). */
void fake_set_other_used(uint64_t bytes);
/* The calling thread's current device, unchecked (cudaSetDevice allows 0-3):
 * a process with more GPUs than the runtime keeps state for. */
void fake_force_device(int device);
uint64_t fake_vmm_gpu_bytes(void);

/* The per-thread-default-stream variants, which cuda_runtime_api.h declares
 * only for code built with them. */
#include <cuda_runtime_api.h>
cudaError_t cudaMallocAsync_ptsz(void **ptr, size_t size, cudaStream_t stream);
cudaError_t cudaFreeAsync_ptsz(void *ptr, cudaStream_t stream);

/* Memory of one fake GPU: FAKE_GPU_BYTES, default 1 GiB. */
uint64_t fake_gpu_bytes(void);
/* Size table of live fake allocations (caller holds the fake's lock). */
void fake_track(void *ptr, size_t size);
int fake_untrack(void *ptr, size_t *size);
/* Bytes on the fake GPU: device memory and managed memory moved there by
 * prefetches (exact bytes, no pages); set for [LO, HI) (caller holds the lock). */
void fake_residency_set(uintptr_t lo, uintptr_t hi, int on_gpu);
uint64_t fake_gpu_resident(void);
/* fake_gpu_resident under the fake's lock, for tests. */
uint64_t fake_resident_bytes(void);

#endif
