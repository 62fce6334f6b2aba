// A CUDA C program for umpol: allocates through the runtime API and marks its
// phases with NVTX, so a policy can place its buffers. Build it with the
// shared CUDA runtime, or umpol cannot see its allocations:
//
//   nvcc -cudart shared -o um_example examples/c/um_example.cu
//   umpol run -p examples/c/um_example.umpol -r report.json -- ./um_example
#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#define CHECK(call)                                                                          \
    do {                                                                                     \
        cudaError_t err_ = (call);                                                           \
        if (err_ != cudaSuccess) {                                                           \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                    \
                    cudaGetErrorString(err_));                                               \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

__global__ void axpy(float a, const float *x, float *y, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = a * x[i] + y[i];
}

int main()
{
    const size_t n = 64u << 20; // 64 Mi floats: 256 MiB per vector
    cudaStream_t stream;
    CHECK(cudaStreamCreate(&stream));
    float *x, *y;
    nvtxRangePushA("load");
    CHECK(cudaMallocAsync((void **)&x, n * sizeof(float), stream)); // weights: placed by policy
    CHECK(cudaMallocAsync((void **)&y, n * sizeof(float), stream));
    nvtxRangePop();
    CHECK(cudaMemsetAsync(x, 0, n * sizeof(float), stream));
    CHECK(cudaMemsetAsync(y, 0, n * sizeof(float), stream));
    for (int step = 0; step < 10; step++) {
        nvtxRangePushA("compute");
        axpy<<<1024, 256, 0, stream>>>(2.0f, x, y, n);
        CHECK(cudaGetLastError());
        nvtxRangePop();
    }
    float last;
    CHECK(cudaMemcpyAsync(&last, y + n - 1, sizeof last, cudaMemcpyDeviceToHost, stream));
    CHECK(cudaStreamSynchronize(stream));
    CHECK(cudaFreeAsync(x, stream));
    CHECK(cudaFreeAsync(y, stream));
    CHECK(cudaStreamSynchronize(stream));
    printf("y[n-1] = %g (expected 0)\n", last);
    return last == 0.0f ? 0 : 1;
}
