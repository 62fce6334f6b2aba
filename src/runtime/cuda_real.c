/* Resolving the real CUDA runtime behind the interposed symbols. */
#include <dlfcn.h>
#include <stddef.h>

#include "cuda_api.h"

static void *find(void *cudart, const char *name)
{
    void *fn = dlsym(RTLD_NEXT, name);
    if (!fn && cudart)
        fn = dlsym(cudart, name);
    return fn;
}

int cuda_api_resolve_real(struct cuda_api *api, const char **missing)
{
    /* A libcudart loaded with RTLD_LOCAL is not in RTLD_NEXT's scope; find it by soname. */
    static const char *const sonames[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so"};
    void *cudart = NULL;
    for (size_t i = 0; i < sizeof sonames / sizeof sonames[0] && !cudart; i++)
        cudart = dlopen(sonames[i], RTLD_LAZY | RTLD_NOLOAD);
    struct {
        void **slot;
        const char *name;
        int required;
    } table[] = {
#define SLOT(field, sym, req) {(void **)&api->field, sym, req}
        SLOT(malloc, "cudaMalloc", 1),
        SLOT(free, "cudaFree", 1),
        SLOT(malloc_async, "cudaMallocAsync", 1),
        SLOT(free_async, "cudaFreeAsync", 1),
        SLOT(malloc_managed, "cudaMallocManaged", 1),
        SLOT(mem_advise, "cudaMemAdvise", 1),
        SLOT(mem_prefetch_async, "cudaMemPrefetchAsync", 1),
        SLOT(mem_prefetch_batch_async, "cudaMemPrefetchBatchAsync", 0),
        SLOT(mem_discard_and_prefetch_batch_async, "cudaMemDiscardAndPrefetchBatchAsync", 0),
        SLOT(mem_get_info, "cudaMemGetInfo", 1),
        SLOT(get_device, "cudaGetDevice", 1),
        SLOT(get_device_count, "cudaGetDeviceCount", 1),
        SLOT(device_get_attribute, "cudaDeviceGetAttribute", 1),
        SLOT(device_synchronize, "cudaDeviceSynchronize", 1),
        SLOT(stream_create_with_flags, "cudaStreamCreateWithFlags", 1),
        SLOT(stream_query, "cudaStreamQuery", 1),
        SLOT(stream_wait_event, "cudaStreamWaitEvent", 1),
        SLOT(stream_is_capturing, "cudaStreamIsCapturing", 1),
        SLOT(event_create_with_flags, "cudaEventCreateWithFlags", 1),
        SLOT(event_record, "cudaEventRecord", 1),
        SLOT(event_destroy, "cudaEventDestroy", 1),
        SLOT(get_last_error, "cudaGetLastError", 1),
        SLOT(get_error_string, "cudaGetErrorString", 1),
#undef SLOT
    };
    int rc = 0;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        *table[i].slot = find(cudart, table[i].name);
        if (!*table[i].slot && table[i].required && rc == 0) {
            *missing = table[i].name;
            rc = -1;
        }
    }
    if (cudart)
        dlclose(cudart); /* NOLOAD took a reference; the library stays loaded */
    return rc;
}
