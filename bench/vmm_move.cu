// What a block costs to move between the GPU and the host when its address
// stays put but its physical memory changes (CUDA virtual memory management),
// against pinned cudaMemcpy and against the driver's managed-memory prefetch.
//
// A job's pointer is a reserved virtual range. "On the GPU" it maps a physical
// allocation in GPU memory; "on the host" it maps one in host memory (a
// HOST_NUMA allocation, which the GPU reads over the link like accessed-by
// managed memory). Evicting copies GPU -> host with the copy engines
// (cudaMemcpyAsync between the two mappings), remaps the range to the host
// memory and releases the GPU memory, so the card really gets it back;
// bringing back does the reverse. The data are checked after every move.
//
// Build: nvcc -O2 -o vmm_move bench/vmm_move.cu -lcuda
// Run:   ./vmm_move [GiB]   (default 4; uses GiB of GPU memory and 2x GiB of
//        pinned host memory; no managed memory except a 256 MiB prefetch probe)
// Prints one JSON object.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda.h>
#include <cuda_runtime.h>

#include "../tests/gpu/cuda_check.h"
#include "vmm_bench.h"

__global__ void fill(uint4 *p, size_t n, unsigned seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = make_uint4((unsigned)i ^ seed, seed, (unsigned)(i >> 11), (unsigned)i * 2654435761u);
}

__global__ void checksum(const uint4 *p, size_t n, unsigned long long *sum)
{
    unsigned long long local = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        local += (p[i].x ^ p[i].w) + p[i].y + ((unsigned long long)p[i].z << 20);
    atomicAdd(sum, local);
}

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

static size_t gpu_used()
{
    size_t free_b, total;
    CHECK(cudaMemGetInfo(&free_b, &total));
    return total - free_b;
}

static unsigned long long sum_of(CUdeviceptr p, size_t bytes, unsigned long long *dsum, double *secs)
{
    CHECK(cudaMemset(dsum, 0, sizeof *dsum));
    CHECK(cudaDeviceSynchronize());
    double t0 = now();
    checksum<<<1024, 512>>>((const uint4 *)p, bytes / 16, dsum);
    CHECK(cudaDeviceSynchronize());
    if (secs)
        *secs = now() - t0;
    unsigned long long h;
    CHECK(cudaMemcpy(&h, dsum, sizeof h, cudaMemcpyDeviceToHost));
    return h;
}

struct vmm {
    CUmemAllocationProp dev_prop{}, host_prop{};
    CUmemAccessDesc access{};
    size_t gran = 0;
};

static void map(CUdeviceptr va, size_t bytes, CUmemGenericAllocationHandle h, const vmm &m)
{
    CU(cuMemMap(va, bytes, 0, h, 0));
    CU(cuMemSetAccess(va, bytes, &m.access, 1));
}

int main(int argc, char **argv)
{
    size_t gib = argc > 1 ? strtoul(argv[1], NULL, 10) : 4;
    size_t bytes = gib << 30;
    int dev = 0;
    CHECK(cudaSetDevice(dev));
    CHECK(cudaFree(0));
    CU(cuInit(0));
    int vmm_ok = 0, host_numa_ok = 0, numa_id = -1;
    CU(cuDeviceGetAttribute(&vmm_ok, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev));
    CU(cuDeviceGetAttribute(&host_numa_ok,
                            CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev));
    CU(cuDeviceGetAttribute(&numa_id, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev));
    if (!vmm_ok || !host_numa_ok) {
        printf("{\"vmm\": %d, \"host_numa_vmm\": %d, \"error\": \"not supported here\"}\n", vmm_ok,
               host_numa_ok);
        return 2;
    }
    size_t free0, total;
    CHECK(cudaMemGetInfo(&free0, &total));
    if (bytes * 2 + (1ull << 30) > free0) {
        fprintf(stderr, "vmm_move: %zu GiB does not fit twice in the %zu MiB free\n", gib,
                free0 >> 20);
        return 2;
    }

    // Reference: pinned cudaMemcpy, both directions.
    std::vector<double> ref_h2d, ref_d2h;
    {
        void *host, *d;
        CHECK(cudaMallocHost(&host, bytes));
        CHECK(cudaMalloc(&d, bytes));
        CHECK(cudaMemset(d, 1, bytes));
        for (int rep = 0; rep < 4; rep++) {
            double t0 = now();
            CHECK(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice));
            double t1 = now();
            CHECK(cudaMemcpy(host, d, bytes, cudaMemcpyDeviceToHost));
            double t2 = now();
            if (rep) {
                ref_h2d.push_back(bytes / (t1 - t0) / 1e9);
                ref_d2h.push_back(bytes / (t2 - t1) / 1e9);
            }
        }
        CHECK(cudaFree(d));
        CHECK(cudaFreeHost(host));
    }

    vmm m;
    vmm_props(dev, numa_id, &m.dev_prop, &m.host_prop, &m.access);
    size_t g1, g2;
    CU(cuMemGetAllocationGranularity(&g1, &m.dev_prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    CU(cuMemGetAllocationGranularity(&g2, &m.host_prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    m.gran = std::max(g1, g2);
    bytes = (bytes + m.gran - 1) / m.gran * m.gran;

    // The job's range, a staging range for the host memory, a spare for the way back.
    CUdeviceptr job, stage, spare;
    CU(cuMemAddressReserve(&job, bytes, m.gran, 0, 0));
    CU(cuMemAddressReserve(&stage, bytes, m.gran, 0, 0));
    CU(cuMemAddressReserve(&spare, bytes, m.gran, 0, 0));
    CUmemGenericAllocationHandle on_gpu, on_host;
    size_t used_before = gpu_used();
    CU(cuMemCreate(&on_gpu, bytes, &m.dev_prop, 0));
    CU(cuMemCreate(&on_host, bytes, &m.host_prop, 0));
    map(job, bytes, on_gpu, m);
    map(stage, bytes, on_host, m);
    size_t used_resident = gpu_used();

    unsigned long long *dsum;
    CHECK(cudaMalloc(&dsum, sizeof *dsum));
    fill<<<1024, 512>>>((uint4 *)job, bytes / 16, 7u);
    CHECK(cudaDeviceSynchronize());
    unsigned long long want = sum_of(job, bytes, dsum, NULL);

    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    std::vector<double> out_copy, out_all, in_copy, in_all, remote_read, local_read;
    std::vector<double> unmap_ms, map_ms, release_ms, create_ms; // the evict remap, by step
    size_t used_evicted = 0;
    int bad = 0;
    for (int rep = 0; rep < 4; rep++) {
        double secs;
        sum_of(job, bytes, dsum, &secs);
        local_read.push_back(bytes / secs / 1e9);
        // Evict: copy out, point the range at the host memory, give the GPU memory back.
        double t0 = now();
        CHECK(cudaMemcpyAsync((void *)stage, (void *)job, bytes, cudaMemcpyDefault, s));
        CHECK(cudaStreamSynchronize(s));
        double t1 = now();
        CU(cuMemUnmap(job, bytes));
        double tu = now();
        map(job, bytes, on_host, m);
        double tm = now();
        CU(cuMemRelease(on_gpu));
        double t2 = now();
        used_evicted = gpu_used();
        bad += sum_of(job, bytes, dsum, &secs) != want; // read where it lies, over the link
        remote_read.push_back(bytes / secs / 1e9);
        // Bring back: new GPU memory behind a spare range, copy in, remap the job's range.
        double t3 = now();
        CU(cuMemCreate(&on_gpu, bytes, &m.dev_prop, 0));
        double tc = now();
        map(spare, bytes, on_gpu, m);
        CHECK(cudaMemcpyAsync((void *)spare, (void *)stage, bytes, cudaMemcpyDefault, s));
        CHECK(cudaStreamSynchronize(s));
        double t4 = now();
        CU(cuMemUnmap(spare, bytes));
        CU(cuMemUnmap(job, bytes));
        map(job, bytes, on_gpu, m);
        double t5 = now();
        bad += sum_of(job, bytes, dsum, NULL) != want;
        if (rep) {
            out_copy.push_back(bytes / (t1 - t0) / 1e9);
            out_all.push_back(bytes / (t2 - t0) / 1e9);
            in_copy.push_back(bytes / (t4 - t3) / 1e9);
            in_all.push_back(bytes / (t5 - t3) / 1e9);
            unmap_ms.push_back((tu - t1) * 1e3);
            map_ms.push_back((tm - tu) * 1e3);
            release_ms.push_back((t2 - tm) * 1e3);
            create_ms.push_back((tc - t3) * 1e3);
        }
    }

    // The driver's managed prefetch of the same bytes, for comparison (a small
    // probe keeps managed memory far under what the card has free).
    size_t probe = std::min(bytes, (size_t)256 << 20);
    void *um;
    CHECK(cudaMallocManaged(&um, probe));
    cudaMemLocation gpu_loc = {cudaMemLocationTypeDevice, dev};
    cudaMemLocation host_loc = {cudaMemLocationTypeHost, 0};
    fill<<<1024, 512>>>((uint4 *)um, probe / 16, 3u);
    CHECK(cudaDeviceSynchronize());
    std::vector<double> um_d2h, um_h2d;
    for (int rep = 0; rep < 4; rep++) {
        double t0 = now();
        CHECK(cudaMemPrefetchAsync(um, probe, host_loc, 0, s));
        CHECK(cudaStreamSynchronize(s));
        double t1 = now();
        CHECK(cudaMemPrefetchAsync(um, probe, gpu_loc, 0, s));
        CHECK(cudaStreamSynchronize(s));
        double t2 = now();
        if (rep) {
            um_d2h.push_back(probe / (t1 - t0) / 1e9);
            um_h2d.push_back(probe / (t2 - t1) / 1e9);
        }
    }
    CHECK(cudaFree(um));

    double h2d = median(ref_h2d), d2h = median(ref_d2h);
    printf("{\"bytes\": %zu, \"granularity\": %zu, \"host_numa_id\": %d,\n", bytes, m.gran, numa_id);
    printf(" \"pinned_memcpy_h2d_gbps\": %.2f, \"pinned_memcpy_d2h_gbps\": %.2f,\n", h2d, d2h);
    printf(" \"vmm_evict_copy_gbps\": %.2f, \"vmm_evict_gbps\": %.2f,\n", median(out_copy),
           median(out_all));
    printf(" \"vmm_bring_back_copy_gbps\": %.2f, \"vmm_bring_back_gbps\": %.2f,\n", median(in_copy),
           median(in_all));
    printf(" \"vmm_evict_over_memcpy\": %.3f, \"vmm_bring_back_over_memcpy\": %.3f,\n",
           median(out_all) / d2h, median(in_all) / h2d);
    printf(" \"managed_prefetch_d2h_gbps\": %.2f, \"managed_prefetch_h2d_gbps\": %.2f,"
           " \"managed_probe_bytes\": %zu,\n",
           median(um_d2h), median(um_h2d), probe);
    printf(" \"kernel_read_on_gpu_gbps\": %.1f, \"kernel_read_evicted_over_link_gbps\": %.1f,\n",
           median(local_read), median(remote_read));
    printf(" \"gpu_used_before_mib\": %zu, \"gpu_used_resident_mib\": %zu,"
           " \"gpu_used_evicted_mib\": %zu,\n",
           used_before >> 20, used_resident >> 20, used_evicted >> 20);
    printf(" \"evict_unmap_ms\": %.2f, \"evict_map_ms\": %.2f, \"evict_release_ms\": %.2f,"
           " \"bring_back_create_ms\": %.2f,\n",
           median(unmap_ms), median(map_ms), median(release_ms), median(create_ms));
    printf(" \"card_gave_back_mib\": %lld, \"checksum_mismatches\": %d}\n",
           (long long)(used_resident - used_evicted) / (1 << 20), bad);
    return bad ? 1 : 0;
}
