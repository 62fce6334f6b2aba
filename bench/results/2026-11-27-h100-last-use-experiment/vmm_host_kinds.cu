// Experiment: what mapping host memory costs by its kind and page granularity.
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cuda.h>
#include <cuda_runtime.h>
#include "../../../tests/gpu/cuda_check.h"
#include "../../vmm_bench.h"

static double med(std::vector<double> v){std::sort(v.begin(),v.end());return v[v.size()/2];}

static void try_kind(const char *name, CUmemAllocationProp prop, CUmemAccessDesc acc, size_t size, CUdeviceptr va)
{
    size_t gmin = 0, grec = 0;
    CUresult r1 = cuMemGetAllocationGranularity(&gmin, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    CUresult r2 = cuMemGetAllocationGranularity(&grec, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
    CUmemGenericAllocationHandle h;
    double t0 = now();
    CUresult rc = cuMemCreate(&h, size, &prop, 0);
    double create = (now() - t0) * 1e3;
    if (rc != CUDA_SUCCESS) { printf("%s: granularity %zu/%zu (rc %d %d), create failed %d\n", name, gmin, grec, r1, r2, rc); return; }
    std::vector<double> map, access, unmap;
    for (int i = 0; i < 12; i++) {
        t0 = now(); CU(cuMemMap(va, size, 0, h, 0)); map.push_back((now() - t0) * 1e3);
        t0 = now(); CU(cuMemSetAccess(va, size, &acc, 1)); access.push_back((now() - t0) * 1e3);
        if (i == 0) { // touch it from the GPU so the mapping is real
            CHECK(cudaMemset((void *)va, 1, size)); CHECK(cudaDeviceSynchronize());
        }
        t0 = now(); CU(cuMemUnmap(va, size)); unmap.push_back((now() - t0) * 1e3);
    }
    printf("%s: granularity min %zu rec %zu; %zu MiB: create %.3f ms, map %.3f, access %.3f (first %.3f), unmap %.3f\n",
           name, gmin, grec, size >> 20, create, med(map), med(access), access[0], med(unmap));
    CU(cuMemRelease(h));
}

int main()
{
    CHECK(cudaSetDevice(0)); CHECK(cudaFree(0));
    int numa = 0; cuDeviceGetAttribute(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, 0);
    CUmemAllocationProp gpu, host; CUmemAccessDesc acc;
    vmm_props(0, numa, &gpu, &host, &acc);
    size_t sizes[] = {2u << 20, 64u << 20};
    CUdeviceptr va; CU(cuMemAddressReserve(&va, 64u << 20, 64u << 20, 0, 0));
    for (size_t s : sizes) {
        try_kind("gpu", gpu, acc, s, va);
        try_kind("host_numa", host, acc, s, va);
        CUmemAllocationProp h2 = host; h2.location.type = CU_MEM_LOCATION_TYPE_HOST; h2.location.id = 0;
        try_kind("host", h2, acc, s, va);
    }
    printf("numa %d\n", numa);
    return 0;
}
