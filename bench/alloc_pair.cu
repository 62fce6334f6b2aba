// Cost of one allocation + free pair as the job sees it, run natively and
// with libumpol.so preloaded by bench/run-gpu.sh.
//
//   alloc_pair LABEL async     cudaMallocAsync + cudaFreeAsync
//   alloc_pair LABEL managed   cudaMallocManaged + cudaFree (native only)
//
// Sizes are mixed: a fixed sequence of 64 sizes, log-uniform from 512 B to
// 64 MiB. Eight allocations stay live; each step allocates one and frees the
// oldest, so the allocator sees the churn of a training step rather than one
// size coming back. Two patterns: one stream (allocated and freed on it), and
// cross-stream (allocated on one stream, freed on another, so every reuse
// must be ordered after the other stream). Natively the default memory pool
// keeps its memory (release threshold at max, as PyTorch sets it), so both
// sides reuse cached memory. Prints one JSON line: ns per pair, best of 5.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cuda_runtime.h>

#include "../tests/gpu/cuda_check.h"

enum { SIZES = 64, LIVE = 8 };

static size_t sizes[SIZES];

static void make_sizes()
{
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t &s : sizes) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        double exponent = 9.0 + (double)(x >> 11) / (double)(1ull << 53) * 17.0; // 2^9 .. 2^26
        s = (size_t)__builtin_exp2(exponent);
    }
}

// PAIRS allocations through ALLOC(&ptr, size), each freed through RELEASE(ptr)
// eight allocations later; returns ns per pair.
template <typename Alloc, typename Release>
static double churn(int pairs, Alloc alloc, Release release)
{
    void *live[LIVE] = {};
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < pairs + LIVE; i++) {
        void *&slot = live[i % LIVE];
        if (slot)
            release(slot);
        slot = nullptr;
        if (i < pairs)
            alloc(&slot, sizes[i % SIZES]);
    }
    CHECK(cudaDeviceSynchronize());
    return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() /
           pairs;
}

// Allocates on ALLOC_ON and frees on FREE_ON.
static double run_async(int pairs, cudaStream_t alloc_on, cudaStream_t free_on)
{
    return churn(
        pairs, [&](void **p, size_t n) { CHECK(cudaMallocAsync(p, n, alloc_on)); },
        [&](void *p) { CHECK(cudaFreeAsync(p, free_on)); });
}

static double run_managed(int pairs)
{
    return churn(
        pairs, [](void **p, size_t n) { CHECK(cudaMallocManaged(p, n, cudaMemAttachGlobal)); },
        [](void *p) { CHECK(cudaFree(p)); });
}

template <typename F> static double best_of_5(F f)
{
    f(); // warm: pools and slabs exist
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        double ns = f();
        best = ns < best ? ns : best;
    }
    return best;
}

int main(int argc, char **argv)
{
    const char *label = argc > 1 ? argv[1] : "run";
    const char *kind = argc > 2 ? argv[2] : "async";
    make_sizes();
    if (!strcmp(kind, "managed")) {
        printf("{\"label\": \"%s\", \"kind\": \"managed\", \"pair_ns\": %.1f}\n", label,
               best_of_5([] { return run_managed(2000); }));
        return 0;
    }
    cudaStream_t s1, s2;
    CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    cudaMemPool_t pool;
    CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
    uint64_t threshold = UINT64_MAX;
    CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
    const int pairs = 100000;
    double one = best_of_5([&] { return run_async(pairs, s1, s1); });
    double cross = best_of_5([&] { return run_async(pairs, s1, s2); });
    printf("{\"label\": \"%s\", \"kind\": \"async\", \"pair_ns\": %.1f, \"cross_stream_pair_ns\": %.1f}\n",
           label, one, cross);
    return 0;
}
