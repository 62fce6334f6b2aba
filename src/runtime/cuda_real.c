/* Resolving the real CUDA runtime behind the interposed symbols. */
#include <dlfcn.h>
#include <stddef.h>

#include "cuda_api.h"
#include "util/dlsyms.h"

static void *find(void *cudart, const char *name)
{
    void *fn = dlsym(RTLD_NEXT, name);
    if (!fn && cudart)
        fn = dlsym(cudart, name);
    /* Loaded with dlopen, the runtime's RTLD_NEXT sees only its own
     * dependencies: look in the program's global scope, skipping ourselves. */
    Dl_info self, found;
    if (!fn && (fn = dlsym(RTLD_DEFAULT, name)) && dladdr((void *)find, &self) &&
        dladdr(fn, &found) && found.dli_fbase == self.dli_fbase)
        fn = NULL;
    return fn;
}

int cuda_api_resolve_real(struct cuda_api *api, const char **missing)
{
    /* A libcudart loaded with RTLD_LOCAL is not in RTLD_NEXT's scope; find it by soname. */
    static const char *const sonames[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so"};
    void *cudart = NULL;
    for (size_t i = 0; i < sizeof sonames / sizeof sonames[0] && !cudart; i++)
        cudart = dlopen(sonames[i], RTLD_LAZY | RTLD_NOLOAD);
    const struct dl_symbol table[] = {
#define SLOT(field, sym, req) {(void **)&api->field, sym, req}
        SLOT(malloc, "cudaMalloc", 1),
        SLOT(free, "cudaFree", 1),
        SLOT(malloc_async, "cudaMallocAsync", 1),
        SLOT(free_async, "cudaFreeAsync", 1),
        SLOT(malloc_managed, "cudaMallocManaged", 1),
        SLOT(malloc_async_ptsz, "cudaMallocAsync_ptsz", 0),
        SLOT(free_async_ptsz, "cudaFreeAsync_ptsz", 0),
        SLOT(host_register, "cudaHostRegister", 1),
        SLOT(host_unregister, "cudaHostUnregister", 1),
        SLOT(host_get_device_pointer, "cudaHostGetDevicePointer", 1),
        SLOT(mem_advise, "cudaMemAdvise", 1),
        SLOT(mem_prefetch_async, "cudaMemPrefetchAsync", 1),
        SLOT(mem_prefetch_batch_async, "cudaMemPrefetchBatchAsync", 0),
        SLOT(mem_discard_and_prefetch_batch_async, "cudaMemDiscardAndPrefetchBatchAsync", 0),
        SLOT(mem_get_info, "cudaMemGetInfo", 1),
        SLOT(get_device, "cudaGetDevice", 1),
        SLOT(set_device, "cudaSetDevice", 1),
        SLOT(get_device_count, "cudaGetDeviceCount", 1),
        SLOT(device_get_attribute, "cudaDeviceGetAttribute", 1),
        SLOT(device_synchronize, "cudaDeviceSynchronize", 1),
        SLOT(stream_create_with_flags, "cudaStreamCreateWithFlags", 1),
        SLOT(stream_query, "cudaStreamQuery", 1),
        SLOT(stream_wait_event, "cudaStreamWaitEvent", 1),
        SLOT(stream_is_capturing, "cudaStreamIsCapturing", 1),
        SLOT(stream_begin_capture, "cudaStreamBeginCapture", 1),
        SLOT(stream_begin_capture_ptsz, "cudaStreamBeginCapture_ptsz", 0),
        SLOT(stream_begin_capture_to_graph, "cudaStreamBeginCaptureToGraph", 0),
        SLOT(stream_begin_capture_to_graph_ptsz, "cudaStreamBeginCaptureToGraph_ptsz", 0),
        SLOT(stream_end_capture, "cudaStreamEndCapture", 1),
        SLOT(stream_end_capture_ptsz, "cudaStreamEndCapture_ptsz", 0),
        SLOT(event_create_with_flags, "cudaEventCreateWithFlags", 1),
        SLOT(event_record, "cudaEventRecord", 1),
        SLOT(event_destroy, "cudaEventDestroy", 1),
        SLOT(event_synchronize, "cudaEventSynchronize", 1),
        SLOT(event_query, "cudaEventQuery", 1),
        SLOT(memcpy_async, "cudaMemcpyAsync", 1),
        SLOT(driver_entry, "cudaGetDriverEntryPointByVersion", 0),
        SLOT(get_last_error, "cudaGetLastError", 1),
        SLOT(get_error_string, "cudaGetErrorString", 1),
#undef SLOT
    };
    *missing = dl_fill(table, sizeof table / sizeof table[0], cudart, find);
    int rc = *missing ? -1 : 0;
    if (cudart)
        dlclose(cudart); /* NOLOAD took a reference; the library stays loaded */
    return rc;
}
