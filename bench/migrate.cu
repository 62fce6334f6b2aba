// Migration benchmark, run with libumpol.so preloaded (bench/run-gpu.sh):
//   h2d: a managed buffer initialised by the CPU, then read by a GPU kernel
//        inside phase "compute"
//   d2h: a buffer written by a GPU kernel, then read by the CPU inside phase
//        "host_read"
// The policy decides what happens on those phases: nothing (pages move on
// faults) or a prefetch. Prints one JSON line with the effective bandwidth and,
// measured in the same process, pinned cudaMemcpy in the same direction.
//
// With a fourth argument "movable" (policy migrate-movable.umpol) the buffer
// is movable memory, which the CPU does not map: a kernel fills it where it
// lies, the move is the phase's opening (the runtime moves the buffer before
// phase_enter returns), timed alone, and a kernel then checks every word
// where the buffer landed.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cuda_runtime.h>

#include "../tests/gpu/cuda_check.h"

#include "umpol.h"


__global__ void read_all(const uint4 *p, size_t n, unsigned long long *sum)
{
    unsigned long long local = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        local += p[i].x ^ p[i].w;
    atomicAdd(sum, local);
}

__global__ void write_all(uint4 *p, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = make_uint4((unsigned)i, 1, 2, (unsigned)(i >> 7));
}

static double now()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static double memcpy_gbps(size_t bytes, bool h2d)
{
    void *host, *dev;
    CHECK(cudaMallocHost(&host, bytes));
    CHECK(cudaMalloc(&dev, bytes)); // matches no class of the benchmark policies: plain
    memset(host, 1, bytes);
    double best = 0;
    for (int rep = 0; rep < 4; rep++) {
        double t0 = now();
        CHECK(cudaMemcpy(h2d ? dev : host, h2d ? host : dev, bytes,
                         h2d ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost));
        double gbps = bytes / (now() - t0) / 1e9;
        if (rep > 0 && gbps > best)
            best = gbps;
    }
    CHECK(cudaFree(dev));
    CHECK(cudaFreeHost(host));
    return best;
}

int main(int argc, char **argv)
{
    if (argc != 4 && !(argc == 5 && strcmp(argv[4], "movable") == 0)) {
        fprintf(stderr, "usage: migrate h2d|d2h GIB LABEL [movable]\n");
        return 2;
    }
    bool movable = argc == 5;
    bool h2d = strcmp(argv[1], "h2d") == 0;
    size_t bytes = (size_t)atof(argv[2]) * (1ull << 30);
    size_t n = bytes / sizeof(uint4);
    unsigned long long *sum;
    CHECK(cudaMalloc((void **)&sum, sizeof *sum));
    CHECK(cudaMemset(sum, 0, sizeof *sum));
    uint4 *buf;
    umpol_tag_push("buf");
    CHECK(cudaMallocAsync((void **)&buf, bytes, 0));
    umpol_tag_pop();
    CHECK(cudaStreamSynchronize(0));
    double seconds;
    unsigned long long check = 0;
    size_t used_moved = 0, used_before = 0, free_b, total_b;
    if (movable) {
        // GPU memory the card shows for the buffer before and after the move.
        CHECK(cudaMemGetInfo(&free_b, &total_b));
        used_before = total_b - free_b;
        if (!h2d) { // produced on the GPU
            umpol_phase_enter("produce");
            umpol_phase_exit();
        }
        write_all<<<1056, 512>>>(buf, n);
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());
        read_all<<<1056, 512>>>(buf, n, sum);
        CHECK(cudaDeviceSynchronize());
        unsigned long long want;
        CHECK(cudaMemcpy(&want, sum, sizeof want, cudaMemcpyDeviceToHost));
        CHECK(cudaMemset(sum, 0, sizeof *sum));
        CHECK(cudaMemGetInfo(&free_b, &total_b));
        used_before = total_b - free_b;
        double t0 = now();
        umpol_phase_enter(h2d ? "compute" : "host_read");
        seconds = now() - t0;
        CHECK(cudaMemGetInfo(&free_b, &total_b));
        used_moved = total_b - free_b;
        read_all<<<1056, 512>>>(buf, n, sum); // where it landed
        CHECK(cudaDeviceSynchronize());
        umpol_phase_exit();
        CHECK(cudaMemcpy(&check, sum, sizeof check, cudaMemcpyDeviceToHost));
        if (check != want) {
            fprintf(stderr, "migrate: the buffer's checksum changed in the move\n");
            return 1;
        }
    } else if (h2d) {
        memset(buf, 3, bytes); // first touch on the CPU: the pages live on the host
        double t0 = now();
        umpol_phase_enter("compute");
        read_all<<<1056, 512>>>(buf, n, sum);
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());
        umpol_phase_exit();
        seconds = now() - t0;
        CHECK(cudaMemcpy(&check, sum, sizeof check, cudaMemcpyDeviceToHost));
    } else {
        umpol_phase_enter("produce");
        write_all<<<1056, 512>>>(buf, n);
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());
        umpol_phase_exit();
        double t0 = now();
        umpol_phase_enter("host_read");
        CHECK(cudaDeviceSynchronize()); // a prefetch to the host, if the policy asked for one
        const volatile unsigned *words = (const volatile unsigned *)buf;
        for (size_t i = 0; i < bytes / 4; i += 1024) // one word per 4 KiB page
            check += words[i];
        umpol_phase_exit();
        seconds = now() - t0;
    }
    double gbps = bytes / seconds / 1e9, ceiling = memcpy_gbps(bytes, h2d);
    struct umpol_stats st;
    umpol_stats(&st);
    printf("{\"label\": \"%s\", \"direction\": \"%s\", \"bytes\": %zu, \"seconds\": %.4f, "
           "\"gbps\": %.2f, \"memcpy_gbps\": %.2f, \"ratio_to_memcpy\": %.3f, \"prefetches\": %llu, "
           "\"checksum\": %llu",
           argv[3], argv[1], bytes, seconds, gbps, ceiling, gbps / ceiling, st.prefetches, check);
    if (movable) // the card's own count of its used memory, before and after the move
        printf(", \"card_used_mib_before\": %zu, \"card_used_mib_after\": %zu", used_before >> 20,
               used_moved >> 20);
    printf("}\n");
    CHECK(cudaFreeAsync(buf, 0));
    CHECK(cudaFree(sum));
    CHECK(cudaDeviceSynchronize());
    return 0;
}
