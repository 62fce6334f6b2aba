// Does spreading one migration over several streams move it faster? A 4 GiB
// managed buffer is moved host->GPU and GPU->host with cudaMemPrefetchAsync,
// whole on one stream and cut into equal parts, one stream per part, beside
// pinned cudaMemcpy of the same size. Plain CUDA, no umpol: what the
// driver's prefetch can reach on this host (bench/results/*-prefetch-streams).
//
//   prefetch_streams [GiB]    prints one JSON line per measurement
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>

#include "../tests/gpu/cuda_check.h"

static double seconds_since(std::chrono::steady_clock::time_point t0)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

__global__ void touch(char *p, size_t n)
{
    for (size_t i = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) * 4096; i < n;
         i += (size_t)gridDim.x * blockDim.x * 4096)
        p[i] = 1;
}

// Moves BUF to LOC in PARTS equal pieces, one stream each; GB/s.
static double move(char *buf, size_t n, cudaMemLocation loc, std::vector<cudaStream_t> &streams,
                   int parts)
{
    CHECK(cudaDeviceSynchronize());
    auto t0 = std::chrono::steady_clock::now();
    size_t piece = n / parts;
    for (int i = 0; i < parts; i++)
        CHECK(cudaMemPrefetchAsync(buf + i * piece, piece, loc, 0, streams[i]));
    CHECK(cudaDeviceSynchronize());
    return n / seconds_since(t0) / 1e9;
}

int main(int argc, char **argv)
{
    size_t n = (size_t)(argc > 1 ? atof(argv[1]) : 4.0) * (1ull << 30);
    std::vector<cudaStream_t> streams(8);
    for (auto &s : streams)
        CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    char *buf, *dev, *pinned;
    CHECK(cudaMallocManaged(&buf, n));
    CHECK(cudaMalloc(&dev, n));
    CHECK(cudaMallocHost(&pinned, n));
    auto t0 = std::chrono::steady_clock::now();
    CHECK(cudaMemcpy(dev, pinned, n, cudaMemcpyHostToDevice));
    double h2d_copy = n / seconds_since(t0) / 1e9;
    t0 = std::chrono::steady_clock::now();
    CHECK(cudaMemcpy(pinned, dev, n, cudaMemcpyDeviceToHost));
    double d2h_copy = n / seconds_since(t0) / 1e9;
    printf("{\"what\": \"pinned memcpy\", \"h2d_gbps\": %.1f, \"d2h_gbps\": %.1f}\n", h2d_copy, d2h_copy);
    cudaMemLocation gpu = {cudaMemLocationTypeDevice, 0}, host = {cudaMemLocationTypeHost, 0};
    for (int round = 0; round < 2; round++)
        for (int parts : {1, 2, 4, 8}) {
            // Host->GPU: CPU-initialised pages. GPU->host: pages the GPU wrote.
            for (size_t i = 0; i < n; i += 4096)
                buf[i] = 2;
            double h2d = move(buf, n, gpu, streams, parts);
            touch<<<1024, 256>>>(buf, n);
            CHECK(cudaDeviceSynchronize());
            double d2h = move(buf, n, host, streams, parts);
            printf("{\"what\": \"prefetch\", \"streams\": %d, \"round\": %d, \"h2d_gbps\": %.1f, "
                   "\"d2h_gbps\": %.1f, \"h2d_over_memcpy\": %.2f, \"d2h_over_memcpy\": %.2f}\n",
                   parts, round, h2d, d2h, h2d / h2d_copy, d2h / d2h_copy);
        }
    CHECK(cudaFree(buf));
    CHECK(cudaFree(dev));
    CHECK(cudaFreeHost(pinned));
    return 0;
}
