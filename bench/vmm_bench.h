// What the benchmarks of movable memory (CUDA virtual memory) share: a clock,
// a pattern kernel, and the allocation properties of a piece's GPU memory
// and of its host memory on the GPU's nearest NUMA node.
#ifndef UMPOL_BENCH_VMM_BENCH_H
#define UMPOL_BENCH_VMM_BENCH_H

#include <chrono>
#include <cstddef>
#include <cstdint>

#include <cuda.h>

static inline double now()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

__global__ void fill(uint32_t *p, size_t n, unsigned seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = (uint32_t)i * 2654435761u ^ seed;
}

// Pinned GPU memory of DEV, host memory on NUMA node NUMA (< 0: node 0), and
// read-write access for DEV.
static inline void vmm_props(int dev, int numa, CUmemAllocationProp *gpu, CUmemAllocationProp *host,
                             CUmemAccessDesc *access)
{
    *gpu = CUmemAllocationProp{};
    gpu->type = CU_MEM_ALLOCATION_TYPE_PINNED;
    gpu->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    gpu->location.id = dev;
    *host = *gpu;
    host->location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    host->location.id = numa < 0 ? 0 : numa;
    *access = CUmemAccessDesc{};
    access->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access->location.id = dev;
    access->flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
}

#endif
