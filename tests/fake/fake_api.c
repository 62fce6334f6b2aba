#include "fake_api.h"

#include "runtime/runtime.h"
#include "runtime/stream_state.h"

const struct cuda_api fake_api = {
    .malloc = cudaMalloc,
    .free = cudaFree,
    .malloc_async = cudaMallocAsync,
    .free_async = cudaFreeAsync,
    .malloc_managed = cudaMallocManaged,
    .host_register = cudaHostRegister,
    .host_unregister = cudaHostUnregister,
    .host_get_device_pointer = cudaHostGetDevicePointer,
    .mem_advise = cudaMemAdvise,
    .mem_prefetch_async = cudaMemPrefetchAsync,
    .mem_prefetch_batch_async = cudaMemPrefetchBatchAsync,
    .mem_discard_and_prefetch_batch_async = cudaMemDiscardAndPrefetchBatchAsync,
    .mem_get_info = cudaMemGetInfo,
    .get_device = cudaGetDevice,
    .set_device = cudaSetDevice,
    .get_device_count = cudaGetDeviceCount,
    .device_get_attribute = cudaDeviceGetAttribute,
    .device_synchronize = cudaDeviceSynchronize,
    .stream_create_with_flags = cudaStreamCreateWithFlags,
    .stream_query = cudaStreamQuery,
    .stream_wait_event = cudaStreamWaitEvent,
    .stream_is_capturing = cudaStreamIsCapturing,
    .stream_begin_capture = cudaStreamBeginCapture,
    .stream_end_capture = cudaStreamEndCapture,
    .event_create_with_flags = cudaEventCreateWithFlags,
    .event_record = cudaEventRecord,
    .event_destroy = cudaEventDestroy,
    .event_synchronize = cudaEventSynchronize,
    .event_query = cudaEventQuery,
    .memcpy_async = cudaMemcpyAsync,
    .driver_entry = cudaGetDriverEntryPointByVersion,
    .get_last_error = cudaGetLastError,
    .get_error_string = cudaGetErrorString,
};

void fake_release_runtime_events(struct runtime *rt)
{
    for (int d = 0; d < RT_MAX_DEVICES; d++) {
        struct device_state *dev = &rt->devices[d];
        if (dev->follow_event)
            cudaEventDestroy(dev->follow_event);
        for (int k = 0; k < POINT_STREAMS; k++)
            for (int i = 0; i < POINT_RING; i++)
                if (dev->points[k].events[i])
                    cudaEventDestroy(dev->points[k].events[i]);
        for (size_t k = 0; rt->stream.marks[d] && k < STREAM_MARKS; k++)
            if (rt->stream.marks[d]->ev[k])
                cudaEventDestroy(rt->stream.marks[d]->ev[k]);
    }
}
