// What a remap costs the thread that makes it, and whether batching helps.
// Streaming movable memory ahead of use (`stream written`) measured slower on
// an H100 because about 1.8 ms of driver calls a 64 MiB piece ran on the
// job's thread, cuMemSetAccess (0.4 ms) and cuMemUnmap (0.18 ms) the most
// (bench/results/2026-11-25-h100-stream/). This program times, for pieces of
// SIZE MiB in a contiguous range of N of them, each kind of call made per
// piece, and the same work made as one call over the whole range where the
// driver allows it (cuMemSetAccess and cuMemUnmap may span several
// mappings), for GPU memory and for pinned host memory on the GPU's node.
// It uses N x SIZE MiB of GPU memory and as much host memory; no managed
// memory, no kernel.
//
// Build: nvcc -O2 -o vmm_calls bench/vmm_calls.cu -lcuda
// Run:   ./vmm_calls [N pieces] [SIZE MiB] [rounds]   (default 16, 64, 5)
// Prints one JSON object: milliseconds per piece, median over the rounds.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda.h>
#include <cuda_runtime.h>

#include "../tests/gpu/cuda_check.h"
#include "vmm_bench.h"

struct timings {
    std::vector<double> map, access, unmap, access_range, unmap_range, create, release;
};

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

// One round: N new handles of PROP at [VA, VA + N x SIZE), mapped, given
// access and unmapped piece by piece, then once more with one access call
// and one unmap for the whole range; T gets the time per piece of each.
static void round_of(CUdeviceptr va, size_t n, size_t size, const CUmemAllocationProp &prop,
                     const CUmemAccessDesc &acc, timings &t)
{
    std::vector<CUmemGenericAllocationHandle> h(n);
    double t0 = now();
    for (size_t i = 0; i < n; i++)
        CU(cuMemCreate(&h[i], size, &prop, 0));
    t.create.push_back((now() - t0) * 1e3 / n);
    // Per piece: map, access, unmap.
    t0 = now();
    for (size_t i = 0; i < n; i++)
        CU(cuMemMap(va + i * size, size, 0, h[i], 0));
    t.map.push_back((now() - t0) * 1e3 / n);
    t0 = now();
    for (size_t i = 0; i < n; i++)
        CU(cuMemSetAccess(va + i * size, size, &acc, 1));
    t.access.push_back((now() - t0) * 1e3 / n);
    t0 = now();
    for (size_t i = 0; i < n; i++)
        CU(cuMemUnmap(va + i * size, size));
    t.unmap.push_back((now() - t0) * 1e3 / n);
    // Whole range: each piece mapped, then one access and one unmap for all.
    for (size_t i = 0; i < n; i++)
        CU(cuMemMap(va + i * size, size, 0, h[i], 0));
    t0 = now();
    CU(cuMemSetAccess(va, n * size, &acc, 1));
    t.access_range.push_back((now() - t0) * 1e3 / n);
    t0 = now();
    CU(cuMemUnmap(va, n * size));
    t.unmap_range.push_back((now() - t0) * 1e3 / n);
    t0 = now();
    for (size_t i = 0; i < n; i++)
        CU(cuMemRelease(h[i]));
    t.release.push_back((now() - t0) * 1e3 / n);
}

static void print(const char *name, const timings &t, bool last)
{
    printf("\"%s\": {\"create\": %.4f, \"map\": %.4f, \"access\": %.4f, \"unmap\": %.4f, "
           "\"release\": %.4f, \"access_one_call\": %.4f, \"unmap_one_call\": %.4f}%s",
           name, median(t.create), median(t.map), median(t.access), median(t.unmap),
           median(t.release), median(t.access_range), median(t.unmap_range), last ? "" : ", ");
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 16;
    size_t size = (argc > 2 ? strtoul(argv[2], NULL, 10) : 64) << 20;
    int rounds = argc > 3 ? atoi(argv[3]) : 5;
    int dev = 0;
    CHECK(cudaSetDevice(dev));
    CHECK(cudaFree(0));
    size_t free0, total;
    CHECK(cudaMemGetInfo(&free0, &total));
    if (!n || size < (2u << 20) || size % (2u << 20) || n * size + (1ull << 30) > free0) {
        fprintf(stderr, "vmm_calls: %zu pieces of %zu MiB: a multiple of 2 MiB, and less than "
                        "the %zu MiB free less 1 GiB, please\n",
                n, size >> 20, free0 >> 20);
        return 1;
    }
    int numa = 0;
    cuDeviceGetAttribute(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev);
    CUmemAllocationProp gpu, host;
    CUmemAccessDesc acc;
    vmm_props(dev, numa, &gpu, &host, &acc);
    CUdeviceptr va;
    CU(cuMemAddressReserve(&va, n * size, size, 0, 0));
    timings tg, th;
    for (int r = 0; r < rounds; r++) {
        round_of(va, n, size, gpu, acc, tg);
        round_of(va, n, size, host, acc, th);
    }
    CU(cuMemAddressFree(va, n * size));
    printf("{\"pieces\": %zu, \"piece_mib\": %zu, \"rounds\": %d, \"ms_per_piece\": {", n,
           size >> 20, rounds);
    print("gpu", tg, false);
    print("host", th, true);
    printf("}}\n");
    return 0;
}
