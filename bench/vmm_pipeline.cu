// Can a remapped block be moved at the link's rate including the remap, and
// can the CPU read it once it maps host memory? Pieces of a block are copied on
// a stream while the CPU remaps the pieces already copied, so the remap hides
// behind the copy. cuMemMap takes no offset into a physical allocation (CUDA
// 13.0: "operation not supported"), so each piece is an allocation of its own.
//
// Build: nvcc -O2 -o vmm_pipeline bench/vmm_pipeline.cu -lcuda
// Run:   ./vmm_pipeline [MiB total] [MiB a piece] [cpu]   (default 2048, 64; cpu: the
//        evicted block is mapped for the CPU too)
// Prints one JSON object; uses the block's size of GPU memory and of pinned host memory.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda.h>
#include <cuda_runtime.h>

#include "../tests/gpu/cuda_check.h"
#include "vmm_bench.h"

static size_t gpu_used()
{
    size_t f, t;
    CHECK(cudaMemGetInfo(&f, &t));
    return t - f;
}

int main(int argc, char **argv)
{
    size_t bytes = (argc > 1 ? strtoul(argv[1], NULL, 10) : 2048) << 20;
    size_t piece = (argc > 2 ? strtoul(argv[2], NULL, 10) : 64) << 20;
    int dev = 0;
    CHECK(cudaSetDevice(dev));
    CHECK(cudaFree(0));
    int numa_id = 0;
    cuDeviceGetAttribute(&numa_id, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev);
    if (numa_id < 0)
        numa_id = 0;
    CUmemAllocationProp dp, hp;
    CUmemAccessDesc acc[2]{};
    vmm_props(dev, numa_id, &dp, &hp, &acc[0]);
    acc[1].location.type = CU_MEM_LOCATION_TYPE_HOST;
    acc[1].location.id = 0;
    acc[1].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    size_t g;
    CU(cuMemGetAllocationGranularity(&g, &hp, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    printf("{\"granularity_host\": %zu", g);
    CU(cuMemGetAllocationGranularity(&g, &dp, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    printf(", \"granularity_device\": %zu", g);

    // Reference.
    double ref_h2d = 0, ref_d2h = 0;
    {
        void *h, *d;
        CHECK(cudaMallocHost(&h, bytes));
        CHECK(cudaMalloc(&d, bytes));
        memset(h, 1, bytes);
        for (int r = 0; r < 4; r++) {
            double t0 = now();
            CHECK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
            double t1 = now();
            CHECK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
            double t2 = now();
            if (r) {
                ref_h2d = std::max(ref_h2d, bytes / (t1 - t0) / 1e9);
                ref_d2h = std::max(ref_d2h, bytes / (t2 - t1) / 1e9);
            }
        }
        CHECK(cudaFree(d));
        CHECK(cudaFreeHost(h));
    }
    printf(", \"pinned_h2d_gbps\": %.2f, \"pinned_d2h_gbps\": %.2f", ref_h2d, ref_d2h);

    // CPU access to a host allocation mapped with HOST access.
    CUdeviceptr probe;
    CUmemGenericAllocationHandle ph;
    CU(cuMemAddressReserve(&probe, g * 2, g, 0, 0));
    CU(cuMemCreate(&ph, g * 2, &hp, 0));
    CU(cuMemMap(probe, g * 2, 0, ph, 0));
    CUresult host_acc = cuMemSetAccess(probe, g * 2, acc, 2);
    printf(", \"host_access_result\": %d", (int)host_acc);
    if (host_acc != CUDA_SUCCESS)
        CU(cuMemSetAccess(probe, g * 2, acc, 1));
    else {
        volatile uint32_t *cp = (volatile uint32_t *)probe;
        cp[5] = 1234;
        fill<<<64, 256>>>((uint32_t *)probe, 4, 9);
        CHECK(cudaDeviceSynchronize());
        printf(", \"cpu_reads_gpu_write\": %s, \"cpu_kept\": %s",
               cp[1] == ((uint32_t)1 * 2654435761u ^ 9) ? "true" : "false",
               cp[5] == 1234 ? "true" : "false");
    }
    CU(cuMemUnmap(probe, g * 2));
    CU(cuMemRelease(ph));
    CU(cuMemAddressFree(probe, g * 2));

    // The job's range on the GPU, filled.
    CUdeviceptr job, stage;
    CU(cuMemAddressReserve(&job, bytes, g, 0, 0));
    CU(cuMemAddressReserve(&stage, bytes, g, 0, 0));
    size_t n = bytes / piece;
    int access_n = host_acc == CUDA_SUCCESS && argc > 3 && !strcmp(argv[3], "cpu") ? 2 : 1;
    printf(", \"cpu_access_after_evict\": %s", access_n == 2 ? "true" : "false");
    for (int rep = 0; rep < 3; rep++) {
        std::vector<CUmemGenericAllocationHandle> dh(n), hh(n), dh2(n);
        for (size_t i = 0; i < n; i++) {
            CU(cuMemCreate(&dh[i], piece, &dp, 0));
            CU(cuMemMap(job + i * piece, piece, 0, dh[i], 0));
        }
        CU(cuMemSetAccess(job, bytes, acc, 1));
        fill<<<1024, 512>>>((uint32_t *)job, bytes / 4, 7 + rep);
        CHECK(cudaDeviceSynchronize());
        size_t used_on = gpu_used();
        cudaStream_t s;
        CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        std::vector<cudaEvent_t> ev(n);
        for (auto &e : ev)
            CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        // Evict, pipelined: host memory made and mapped at the stage, copies queued piece by
        // piece, each piece remapped once its copy is done.
        // The host memory is made and mapped at the stage before the clock starts: a
        // runtime keeps it for the block's life (making it costs ~5 GB/s: printed).
        double tc = now();
        for (size_t i = 0; i < n; i++)
            CU(cuMemCreate(&hh[i], piece, &hp, 0));
        double t_create = now() - tc;
        for (size_t i = 0; i < n; i++)
            CU(cuMemMap(stage + i * piece, piece, 0, hh[i], 0));
        CU(cuMemSetAccess(stage, bytes, acc, 1));
        double t_stage = now() - tc;
        double t0 = now();
        for (size_t i = 0; i < n; i++) {
            CHECK(cudaMemcpyAsync((void *)(stage + i * piece), (void *)(job + i * piece), piece,
                                  cudaMemcpyDeviceToHost, s));
            CHECK(cudaEventRecord(ev[i], s));
        }
        for (size_t i = 0; i < n; i++) {
            CHECK(cudaEventSynchronize(ev[i]));
            CU(cuMemUnmap(job + i * piece, piece));
            CU(cuMemMap(job + i * piece, piece, 0, hh[i], 0));
            CU(cuMemSetAccess(job + i * piece, piece, acc, access_n));
            CU(cuMemRelease(dh[i]));
        }
        for (size_t i = 0; i < n; i++)
            CU(cuMemUnmap(stage + i * piece, piece));
        double t_out = now() - t0;
        size_t used_off = gpu_used();
        // The CPU checks through the job's own pointer, if it may.
        long bad = -1;
        if (access_n == 2) {
            const uint32_t *cp = (const uint32_t *)job;
            bad = 0;
            for (size_t i = 0; i < bytes / 4; i += 1021)
                bad += cp[i] != ((uint32_t)i * 2654435761u ^ (7 + rep));
        }
        // Bring back, pipelined the same way.
        double t1 = now();
        for (size_t i = 0; i < n; i++) {
            CU(cuMemCreate(&dh2[i], piece, &dp, 0));
            CU(cuMemMap(stage + i * piece, piece, 0, dh2[i], 0));
        }
        CU(cuMemSetAccess(stage, bytes, acc, 1));
        double t_in_stage = now() - t1;
        for (size_t i = 0; i < n; i++) {
            CHECK(cudaMemcpyAsync((void *)(stage + i * piece), (void *)(job + i * piece), piece,
                                  cudaMemcpyHostToDevice, s));
            CHECK(cudaEventRecord(ev[i], s));
        }
        for (size_t i = 0; i < n; i++) {
            CHECK(cudaEventSynchronize(ev[i]));
            CU(cuMemUnmap(job + i * piece, piece));
            CU(cuMemMap(job + i * piece, piece, 0, dh2[i], 0));
            CU(cuMemSetAccess(job + i * piece, piece, acc, 1));
        }
        for (size_t i = 0; i < n; i++)
            CU(cuMemUnmap(stage + i * piece, piece));
        double t_in = now() - t1;
        for (size_t i = 0; i < n; i++)
            CU(cuMemRelease(hh[i])); // a runtime keeps it for the next eviction
        // GPU check after the round trip.
        std::vector<uint32_t> back(bytes / 4);
        CHECK(cudaMemcpy(back.data(), (void *)job, bytes, cudaMemcpyDeviceToHost));
        long bad2 = 0;
        for (size_t i = 0; i < bytes / 4; i++)
            bad2 += back[i] != ((uint32_t)i * 2654435761u ^ (7 + rep));
        printf(", \"rep%d\": {\"out_gbps\": %.2f, \"out_over_pinned\": %.3f, \"out_create_ms\": %.2f, "
               "\"out_stage_ms\": %.2f, \"in_gbps\": %.2f, \"in_over_pinned\": %.3f, \"in_stage_ms\": %.2f, "
               "\"gpu_used_on_mib\": %zu, \"gpu_used_off_mib\": %zu, \"cpu_bad\": %ld, \"roundtrip_bad\": %ld}",
               rep, bytes / t_out / 1e9, bytes / t_out / 1e9 / ref_d2h, t_create * 1e3,
               t_stage * 1e3, bytes / t_in / 1e9, bytes / t_in / 1e9 / ref_h2d, t_in_stage * 1e3,
               used_on >> 20, used_off >> 20, bad, bad2);
        for (size_t i = 0; i < n; i++) {
            CU(cuMemUnmap(job + i * piece, piece));
            CU(cuMemRelease(dh2[i]));
        }
        for (auto &e : ev)
            CHECK(cudaEventDestroy(e));
        CHECK(cudaStreamDestroy(s));
    }
    printf("}\n");
    return 0;
}
