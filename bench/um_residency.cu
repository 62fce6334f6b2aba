// What the GPU memory in use (cudaMemGetInfo) shows as managed pages move:
// prefetched in and out, read by kernels under host-preferred + accessed-by
// advice, fault-migrated without advice, discarded. Settles whether the
// driver gives memory back when pages leave the GPU and whether mapped
// host pages stay on the host. 1 GiB buffers; run alone on a GPU.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cuda_runtime.h>

#include "../tests/gpu/cuda_check.h"

static size_t base;

static size_t used()
{
    size_t f, t;
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemGetInfo(&f, &t));
    return t - f;
}

static void show(const char *what)
{
    printf("%-62s %7.0f MiB in use\n", what, (double)(used() - base) / (1 << 20));
}

__global__ void read_all(const float *p, size_t n, float *sink)
{
    float acc = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        acc += p[i];
    if (acc == 12345.f)
        *sink = acc;
}

int main()
{
    const size_t bytes = 1ull << 30, n = bytes / sizeof(float);
    int dev = 0;
    CHECK(cudaSetDevice(dev));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float *sink;
    CHECK(cudaMalloc(&sink, 4));
    base = used();
    struct cudaMemLocation gpu = {cudaMemLocationTypeDevice, dev}, host = {cudaMemLocationTypeHost, 0};
    float *a, *b;
    CHECK(cudaMallocManaged(&a, bytes));
    memset(a, 1, bytes);
    show("A: 1 GiB managed, written by the CPU");
    CHECK(cudaMemPrefetchAsync(a, bytes, gpu, 0, s));
    show("A prefetched to the GPU");
    CHECK(cudaMemPrefetchAsync(a, bytes, host, 0, s));
    show("A prefetched to the host");
    CHECK(cudaMemAdvise(a, bytes, cudaMemAdviseSetPreferredLocation, host));
    CHECK(cudaMemAdvise(a, bytes, cudaMemAdviseSetAccessedBy, gpu));
    for (int i = 0; i < 3; i++)
        read_all<<<528, 256, 0, s>>>(a, n, sink);
    show("A (host preferred, accessed by GPU) read 3x by a kernel");
    CHECK(cudaMemPrefetchAsync(a, bytes, gpu, 0, s));
    show("A prefetched to the GPU again");
    CHECK(cudaMemPrefetchAsync(a, bytes, host, 0, s));
    show("A prefetched to the host again");
    CHECK(cudaMallocManaged(&b, bytes));
    memset(b, 1, bytes);
    read_all<<<528, 256, 0, s>>>(b, n, sink);
    show("B: 1 GiB managed, no advice, CPU-written, read by a kernel");
    void *ptr = b;
    size_t size = bytes, idx = 0;
    CHECK(cudaMemDiscardAndPrefetchBatchAsync(&ptr, &size, 1, &host, &idx, 1, 0, s));
    show("B discarded and prefetched to the host");
    CHECK(cudaMemDiscardAndPrefetchBatchAsync(&ptr, &size, 1, &gpu, &idx, 1, 0, s));
    show("B discarded and prefetched to the GPU");
    CHECK(cudaFree(a));
    show("A freed");
    CHECK(cudaFree(b));
    show("B freed");
    return 0;
}
