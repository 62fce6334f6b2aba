/* Every CUDA call the runtime makes goes through this table: the real
 * libcudart functions in production, a recording fake in unit tests. */
#ifndef UMPOL_CUDA_API_H
#define UMPOL_CUDA_API_H

#include <cuda_runtime_api.h>

struct cuda_api {
    cudaError_t (*malloc)(void **ptr, size_t size);
    cudaError_t (*free)(void *ptr);
    cudaError_t (*malloc_async)(void **ptr, size_t size, cudaStream_t stream);
    cudaError_t (*free_async)(void *ptr, cudaStream_t stream);
    cudaError_t (*malloc_managed)(void **ptr, size_t size, unsigned flags);
    /* May be NULL: the per-thread-default-stream variants (stream 0 is the
     * calling thread's default stream). */
    cudaError_t (*malloc_async_ptsz)(void **ptr, size_t size, cudaStream_t stream);
    cudaError_t (*free_async_ptsz)(void *ptr, cudaStream_t stream);
    cudaError_t (*host_register)(void *ptr, size_t size, unsigned flags);
    cudaError_t (*host_unregister)(void *ptr);
    cudaError_t (*host_get_device_pointer)(void **device_ptr, void *host_ptr, unsigned flags);
    cudaError_t (*mem_advise)(const void *ptr, size_t count, enum cudaMemoryAdvise advice,
                              struct cudaMemLocation location);
    cudaError_t (*mem_prefetch_async)(const void *ptr, size_t count,
                                      struct cudaMemLocation location, unsigned flags,
                                      cudaStream_t stream);
    /* May be NULL on older runtimes; the caller falls back to single prefetches. */
    cudaError_t (*mem_prefetch_batch_async)(void **ptrs, size_t *sizes, size_t count,
                                            struct cudaMemLocation *locs, size_t *loc_idxs,
                                            size_t num_locs, unsigned long long flags,
                                            cudaStream_t stream);
    /* May be NULL: moving memory whose data is dead without copying it. */
    cudaError_t (*mem_discard_and_prefetch_batch_async)(void **ptrs, size_t *sizes, size_t count,
                                                        struct cudaMemLocation *locs,
                                                        size_t *loc_idxs, size_t num_locs,
                                                        unsigned long long flags,
                                                        cudaStream_t stream);
    cudaError_t (*mem_get_info)(size_t *free_bytes, size_t *total_bytes);
    cudaError_t (*get_device)(int *device);
    cudaError_t (*set_device)(int device);
    cudaError_t (*get_device_count)(int *count);
    cudaError_t (*device_get_attribute)(int *value, enum cudaDeviceAttr attr, int device);
    cudaError_t (*device_synchronize)(void);
    cudaError_t (*stream_create_with_flags)(cudaStream_t *stream, unsigned flags);
    cudaError_t (*stream_query)(cudaStream_t stream);
    cudaError_t (*stream_wait_event)(cudaStream_t stream, cudaEvent_t event, unsigned flags);
    cudaError_t (*stream_is_capturing)(cudaStream_t stream, enum cudaStreamCaptureStatus *status);
    /* Forwarded by the interposed capture calls, which count the captures in
     * progress; the _ptsz and ToGraph ones may be NULL. */
    cudaError_t (*stream_begin_capture)(cudaStream_t stream, enum cudaStreamCaptureMode mode);
    cudaError_t (*stream_begin_capture_ptsz)(cudaStream_t stream, enum cudaStreamCaptureMode mode);
    cudaError_t (*stream_begin_capture_to_graph)(cudaStream_t stream, cudaGraph_t graph,
                                                 const cudaGraphNode_t *deps,
                                                 const cudaGraphEdgeData *edges, size_t n,
                                                 enum cudaStreamCaptureMode mode);
    cudaError_t (*stream_begin_capture_to_graph_ptsz)(cudaStream_t stream, cudaGraph_t graph,
                                                      const cudaGraphNode_t *deps,
                                                      const cudaGraphEdgeData *edges, size_t n,
                                                      enum cudaStreamCaptureMode mode);
    cudaError_t (*stream_end_capture)(cudaStream_t stream, cudaGraph_t *graph);
    cudaError_t (*stream_end_capture_ptsz)(cudaStream_t stream, cudaGraph_t *graph);
    cudaError_t (*event_create_with_flags)(cudaEvent_t *event, unsigned flags);
    cudaError_t (*event_record)(cudaEvent_t event, cudaStream_t stream);
    cudaError_t (*event_destroy)(cudaEvent_t event);
    cudaError_t (*event_synchronize)(cudaEvent_t event);
    cudaError_t (*event_query)(cudaEvent_t event);
    cudaError_t (*memcpy_async)(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                                cudaStream_t stream);
    /* May be NULL: the driver's functions (the mover takes its virtual
     * memory calls from here, so the job need not link libcuda). */
    cudaError_t (*driver_entry)(const char *symbol, void **fn, unsigned version,
                                unsigned long long flags,
                                enum cudaDriverEntryPointQueryResult *status);
    cudaError_t (*get_last_error)(void);
    const char *(*get_error_string)(cudaError_t error);
};

/* Resolve the real functions once: the next definition after this library
 * (dlsym RTLD_NEXT), else an already loaded libcudart. Returns 0 when every
 * required function was found. */
int cuda_api_resolve_real(struct cuda_api *api, const char **missing);

#endif
