// Ways to move a GPU-resident managed block to the host, keeping its address
// and its contents, timed against pinned cudaMemcpy:
//   prefetch   cudaMemPrefetchAsync to the host (the driver's migration)
//   staged     per chunk, stream-ordered on one stream: copy the chunk to a
//              GPU scratch buffer, discard it and prefetch it to the host
//              (no data moves, host pages are made), then copy the scratch
//              back into the now host-resident pages with the copy engine
//   discard    the discard-and-prefetch alone (contents lost): the cost of
//              making the host pages, a floor for "staged"
// After each move a kernel reads the block under host-preferred, accessed-by
// advice: ~1 ms means the pages are still on the GPU, tens of ms that they are
// on the host. Then the CPU checks every word. Run alone on a GPU.
//   evict_paths [GiB] [chunk MiB]
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cuda_runtime.h>

#include "../tests/gpu/cuda_check.h"

static double now()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

__global__ void fill(uint32_t *p, size_t n, uint32_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = (uint32_t)i * 2654435761u + seed;
}

__global__ void read_all(const uint32_t *p, size_t n, unsigned long long *sum)
{
    unsigned long long local = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        local += p[i];
    atomicAdd(sum, local);
}

static size_t used_mib()
{
    size_t f, t;
    CHECK(cudaMemGetInfo(&f, &t));
    return (t - f) >> 20;
}

static size_t mismatches(const uint32_t *p, size_t n, uint32_t seed)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += p[i] != (uint32_t)i * 2654435761u + seed;
    return bad;
}

int main(int argc, char **argv)
{
    const size_t bytes = (size_t)(argc > 1 ? atof(argv[1]) : 2) * (1ull << 30);
    const size_t chunk = (size_t)(argc > 2 ? atoi(argv[2]) : 64) << 20;
    const size_t n = bytes / 4;
    int dev = 0;
    CHECK(cudaSetDevice(dev));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    struct cudaMemLocation gpu = {cudaMemLocationTypeDevice, dev}, host = {cudaMemLocationTypeHost, 0};
    unsigned long long *sum;
    CHECK(cudaMalloc(&sum, sizeof *sum));

    void *pinned, *devbuf, *scratch;
    CHECK(cudaMallocHost(&pinned, bytes));
    CHECK(cudaMalloc(&devbuf, bytes));
    CHECK(cudaMalloc(&scratch, 2 * chunk));
    memset(pinned, 1, bytes);
    double d2h = 0;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now();
        CHECK(cudaMemcpy(pinned, devbuf, bytes, cudaMemcpyDeviceToHost));
        double g = bytes / (now() - t0) / 1e9;
        if (g > d2h)
            d2h = g;
    }
    CHECK(cudaFree(devbuf));
    CHECK(cudaFreeHost(pinned));
    printf("{\"what\":\"pinned_memcpy_d2h\",\"gbps\":%.2f,\"bytes\":%zu,\"chunk\":%zu}\n", d2h, bytes, chunk);

    uint32_t *b;
    CHECK(cudaMallocManaged(&b, bytes));
    const char *ways[] = {"prefetch", "staged", "staged-advised", "discard", "prefetch", "staged", "staged-advised"};
    for (unsigned w = 0; w < sizeof ways / sizeof *ways; w++) {
        const char *way = ways[w];
        uint32_t seed = 17 + w;
        CHECK(cudaMemAdvise(b, bytes, cudaMemAdviseUnsetPreferredLocation, gpu));
        CHECK(cudaMemAdvise(b, bytes, cudaMemAdviseUnsetAccessedBy, gpu));
        CHECK(cudaMemPrefetchAsync(b, bytes, gpu, 0, s));
        fill<<<1056, 256, 0, s>>>(b, n, seed);
        CHECK(cudaStreamSynchronize(s));
        size_t before = used_mib();
        if (!strcmp(way, "staged-advised")) {
            CHECK(cudaMemAdvise(b, bytes, cudaMemAdviseSetPreferredLocation, host));
            CHECK(cudaMemAdvise(b, bytes, cudaMemAdviseSetAccessedBy, gpu));
        }
        double t0 = now();
        if (!strcmp(way, "prefetch")) {
            CHECK(cudaMemPrefetchAsync(b, bytes, host, 0, s));
        } else {
            size_t idx = 0;
            for (size_t off = 0, k = 0; off < bytes; off += chunk, k++) {
                size_t len = bytes - off < chunk ? bytes - off : chunk;
                char *src = (char *)b + off, *tmp = (char *)scratch + (k & 1) * chunk;
                void *ptr = src;
                if (strcmp(way, "discard"))
                    CHECK(cudaMemcpyAsync(tmp, src, len, cudaMemcpyDefault, s));
                CHECK(cudaMemDiscardAndPrefetchBatchAsync(&ptr, &len, 1, &host, &idx, 1, 0, s));
                if (strcmp(way, "discard"))
                    CHECK(cudaMemcpyAsync(src, tmp, len, cudaMemcpyDefault, s));
            }
        }
        CHECK(cudaStreamSynchronize(s));
        double secs = now() - t0;
        size_t after = used_mib();
        CHECK(cudaMemAdvise(b, bytes, cudaMemAdviseSetPreferredLocation, host));
        CHECK(cudaMemAdvise(b, bytes, cudaMemAdviseSetAccessedBy, gpu));
        CHECK(cudaMemsetAsync(sum, 0, sizeof *sum, s));
        double r0 = now();
        read_all<<<1056, 256, 0, s>>>(b, n, sum);
        CHECK(cudaStreamSynchronize(s));
        double read_ms = (now() - r0) * 1e3;
        double c0 = now();
        size_t bad = strcmp(way, "discard") ? mismatches(b, n, seed) : 0;
        double cpu_ms = (now() - c0) * 1e3;
        printf("{\"what\":\"%s\",\"gbps\":%.2f,\"over_memcpy\":%.3f,\"gpu_read_after_ms\":%.1f,"
               "\"cpu_check_ms\":%.1f,\"mismatches\":%zu,\"used_mib_before\":%zu,\"used_mib_after\":%zu}\n",
               way, bytes / secs / 1e9, bytes / secs / 1e9 / d2h, read_ms, cpu_ms, bad, before, after);
        fflush(stdout);
    }
    CHECK(cudaFree(b));
    CHECK(cudaFree(scratch));
    return 0;
}
