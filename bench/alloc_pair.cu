// Cost of one cudaMallocAsync + cudaFreeAsync pair on a stream, as the job
// sees it: run natively and with libumpol.so preloaded by bench/run-gpu.sh.
// Natively the default memory pool keeps its memory (release threshold at
// max, as PyTorch sets it), so both sides reuse cached memory.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cuda_runtime.h>

#include "../tests/gpu/cuda_check.h"


int main(int argc, char **argv)
{
    const char *label = argc > 1 ? argv[1] : "run";
    int pairs = argc > 2 ? atoi(argv[2]) : 200000;
    cudaStream_t stream;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaMemPool_t pool;
    CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
    uint64_t threshold = UINT64_MAX;
    CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
    static const size_t sizes[] = {4096, 1u << 20, 64u << 20};
    printf("{\"label\": \"%s\"", label);
    for (size_t s : sizes) {
        double best = 1e30;
        for (int rep = 0; rep < 5; rep++) {
            void *p;
            CHECK(cudaMallocAsync(&p, s, stream)); // warm: pool or slab exists
            CHECK(cudaFreeAsync(p, stream));
            CHECK(cudaStreamSynchronize(stream));
            auto t0 = std::chrono::steady_clock::now();
            for (int i = 0; i < pairs; i++) {
                CHECK(cudaMallocAsync(&p, s, stream));
                CHECK(cudaFreeAsync(p, stream));
            }
            CHECK(cudaStreamSynchronize(stream));
            double ns = std::chrono::duration<double, std::nano>(
                            std::chrono::steady_clock::now() - t0).count() / pairs;
            best = ns < best ? ns : best;
        }
        printf(", \"pair_ns_%zu\": %.1f", s, best);
    }
    printf("}\n");
    return 0;
}
