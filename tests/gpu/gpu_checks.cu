// GPU checks of the preloaded runtime, one per argument, each run by
// tests/gpu.sh under its own policy (tests/gpu/*.umpol):
//   integrity  checksums of every block survive forced evictions and prefetches
//   advice     every directive is really applied (cudaMemRangeGetAttribute)
//   cap        the managed-memory cap refuses with cudaErrorMemoryAllocation
//   residency  kernels touching evicted blocks read them where they are:
//              nothing reaches the GPU but what the runtime placed there
//              (tests/gpu.sh checks the CUPTI counters of its report)
//   movable    blocks of `memory movable` keep their data and address through
//              moves to the host and back, kernels use them where they lie,
//              and the card gets their memory back while they are away
// Built with `nvcc -cudart shared` so the runtime API calls can be intercepted.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cuda_runtime.h>

#include "cuda_check.h"

#include "umpol.h"


static int failures;
#define EXPECT(cond, ...)                                                                    \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                  \
            fprintf(stderr, __VA_ARGS__);                                                    \
            fputc('\n', stderr);                                                             \
            failures++;                                                                      \
        }                                                                                    \
    } while (0)

__device__ __host__ static inline uint32_t pattern(uint32_t block, size_t i, uint32_t round)
{
    uint64_t x = ((uint64_t)block << 40) ^ (uint64_t)i ^ ((uint64_t)round << 56);
    x *= 0x9e3779b97f4a7c15ull;
    return (uint32_t)(x >> 32);
}

__global__ void fill(uint32_t *p, size_t n, uint32_t block, uint32_t round)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = pattern(block, i, round);
}

__global__ void verify(const uint32_t *p, size_t n, uint32_t block, uint32_t round,
                       unsigned long long *bad)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        if (p[i] != pattern(block, i, round))
            atomicAdd(bad, 1ull);
}

// 48 blocks of 16 MiB (768 MiB) under a 256 MiB budget: every placement
// evicts; data must survive GPU writes, host reads and host writes.
static int check_integrity()
{
    enum { BLOCKS = 48 };
    const size_t bytes = 16u << 20, n = bytes / 4;
    cudaStream_t stream;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    unsigned long long *bad;
    CHECK(cudaMalloc((void **)&bad, sizeof *bad));
    uint32_t *blocks[BLOCKS];
    umpol_tag_push("data");
    for (int b = 0; b < BLOCKS; b++) {
        CHECK(cudaMallocAsync((void **)&blocks[b], bytes, stream));
        fill<<<264, 256, 0, stream>>>(blocks[b], n, b, 0);
        CHECK(cudaGetLastError());
    }
    umpol_tag_pop();
    for (uint32_t round = 0; round < 3; round++) {
        // Everything to the host; read and rewrite every block from the CPU.
        umpol_mark("evict");
        CHECK(cudaStreamSynchronize(stream));
        CHECK(cudaDeviceSynchronize());
        unsigned long long host_bad = 0;
        for (int b = 0; b < BLOCKS; b++) {
            for (size_t i = 0; i < n; i += 97)
                host_bad += blocks[b][i] != pattern(b, i, round);
            for (size_t i = 0; i < n; i++)
                blocks[b][i] = pattern(b, i, round + 1);
        }
        EXPECT(host_bad == 0, "round %u: %llu words wrong when read on the host", round, host_bad);
        // Back to the GPU (within budget, with evictions), verified there.
        umpol_phase_enter("compute");
        CHECK(cudaMemsetAsync(bad, 0, sizeof *bad, stream));
        for (int b = 0; b < BLOCKS; b++)
            verify<<<264, 256, 0, stream>>>(blocks[b], n, b, round + 1, bad);
        umpol_phase_exit();
        unsigned long long gpu_bad = 0;
        CHECK(cudaMemcpyAsync(&gpu_bad, bad, sizeof gpu_bad, cudaMemcpyDeviceToHost, stream));
        CHECK(cudaStreamSynchronize(stream));
        EXPECT(gpu_bad == 0, "round %u: %llu words wrong when read on the GPU", round, gpu_bad);
        for (int b = 0; b < BLOCKS; b++)
            fill<<<264, 256, 0, stream>>>(blocks[b], n, b, round + 1);
        CHECK(cudaStreamSynchronize(stream));
    }
    struct umpol_stats st;
    EXPECT(umpol_stats(&st) == 0, "runtime not active");
    EXPECT(st.evictions > 0, "no eviction happened (%llu)", st.evictions);
    EXPECT(st.prefetches > 0, "no prefetch happened");
    printf("integrity: %d blocks x %zu MiB, 3 rounds; %llu prefetches, %llu evictions\n", BLOCKS,
           bytes >> 20, st.prefetches, st.evictions);
    for (int b = 0; b < BLOCKS; b++)
        CHECK(cudaFreeAsync(blocks[b], stream));
    CHECK(cudaStreamSynchronize(stream));
    CHECK(cudaFree(bad));
    return failures;
}

static size_t gpu_used()
{
    size_t free_b, total_b;
    CHECK(cudaMemGetInfo(&free_b, &total_b));
    return total_b - free_b;
}

__global__ void bump(uint32_t *p, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] += 1;
}

// 768 MiB of blocks under a 256 MiB budget (residency.umpol), every block
// read and written by kernels each round, half of them freed and allocated
// again: the data must stay right, and (checked by tests/gpu.sh from the
// report's CUPTI counters) no GPU page fault may bring a block in. The GPU
// memory in use is printed for information only: the driver keeps the GPU
// memory of pages that left the GPU until cudaFree (bench/um_residency.cu).
static int check_residency()
{
    enum { BLOCKS = 48, ROUNDS = 4 };
    const size_t bytes = 16u << 20, n = bytes / 4, budget = 256u << 20;
    cudaStream_t stream;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    unsigned long long *bad;
    CHECK(cudaMalloc((void **)&bad, sizeof *bad));
    CHECK(cudaDeviceSynchronize());
    const size_t base = gpu_used();
    size_t peak = 0;
    uint32_t *blocks[BLOCKS];
    uint32_t bumps[BLOCKS] = {0};
    umpol_tag_push("data");
    for (int b = 0; b < BLOCKS; b++) {
        CHECK(cudaMallocAsync((void **)&blocks[b], bytes, stream));
        fill<<<264, 256, 0, stream>>>(blocks[b], n, b, 0);
        CHECK(cudaGetLastError());
    }
    for (int round = 0; round < ROUNDS; round++) {
        for (int b = 0; b < BLOCKS; b++) {
            bump<<<264, 256, 0, stream>>>(blocks[b], n);
            bumps[b]++;
            if (b % 8 == 7) {
                CHECK(cudaStreamSynchronize(stream));
                size_t used = gpu_used() - base;
                peak = used > peak ? used : peak;
            }
        }
        for (int b = round % 2; b < BLOCKS; b += 2) { // free half, allocate again
            CHECK(cudaFreeAsync(blocks[b], stream));
            CHECK(cudaMallocAsync((void **)&blocks[b], bytes, stream));
            fill<<<264, 256, 0, stream>>>(blocks[b], n, b, 0);
            bumps[b] = 0;
        }
        CHECK(cudaStreamSynchronize(stream));
        size_t used = gpu_used() - base;
        peak = used > peak ? used : peak;
    }
    umpol_tag_pop();
    unsigned long long host_bad = 0;
    for (int b = 0; b < BLOCKS; b++)
        for (size_t i = 0; i < n; i += 101)
            host_bad += blocks[b][i] != pattern(b, i, 0) + bumps[b];
    EXPECT(host_bad == 0, "%llu words wrong", host_bad);
    struct umpol_stats st;
    EXPECT(umpol_stats(&st) == 0, "runtime not active");
    EXPECT(st.evictions > 0, "no eviction happened (%llu)", st.evictions);
    printf("residency: %d blocks x %zu MiB touched by kernels %d times, budget %zu MiB: "
           "GPU memory in use (driver's view) %zu MiB above the start; %llu evictions\n", BLOCKS,
           bytes >> 20, ROUNDS, budget >> 20, peak >> 20, st.evictions);
    for (int b = 0; b < BLOCKS; b++)
        CHECK(cudaFreeAsync(blocks[b], stream));
    CHECK(cudaStreamSynchronize(stream));
    CHECK(cudaFree(bad));
    return failures;
}

static int range_attr(void *p, size_t bytes, cudaMemRangeAttribute attr)
{
    int v = -100;
    CHECK(cudaMemRangeGetAttribute(&v, sizeof v, attr, p, bytes));
    return v;
}

static int check_advice()
{
    int dev;
    CHECK(cudaGetDevice(&dev));
    const size_t bytes = 8u << 20;
    cudaStream_t stream;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    void *rm, *host, *pf, *plain;
    umpol_tag_push("read_mostly");
    CHECK(cudaMallocAsync(&rm, bytes, stream));
    umpol_tag_pop();
    umpol_tag_push("host");
    CHECK(cudaMallocAsync(&host, bytes, stream));
    umpol_tag_pop();
    umpol_tag_push("to_host");
    CHECK(cudaMallocAsync(&pf, bytes, stream));
    umpol_tag_pop();
    CHECK(cudaMallocAsync(&plain, bytes, stream));
    CHECK(cudaStreamSynchronize(stream));

    EXPECT(range_attr(rm, bytes, cudaMemRangeAttributeReadMostly) == 1, "read_mostly not set");
    EXPECT(range_attr(rm, bytes, cudaMemRangeAttributePreferredLocation) == dev,
           "read_mostly class: preferred location %d, want GPU %d",
           range_attr(rm, bytes, cudaMemRangeAttributePreferredLocation), dev);
    EXPECT(range_attr(rm, bytes, cudaMemRangeAttributeLastPrefetchLocation) == dev,
           "read_mostly class: last prefetch %d, want GPU %d",
           range_attr(rm, bytes, cudaMemRangeAttributeLastPrefetchLocation), dev);

    EXPECT(range_attr(host, bytes, cudaMemRangeAttributePreferredLocation) == cudaCpuDeviceId,
           "host class: preferred location %d, want host",
           range_attr(host, bytes, cudaMemRangeAttributePreferredLocation));
    int accessed[4] = {-100, -100, -100, -100};
    CHECK(cudaMemRangeGetAttribute(accessed, sizeof accessed, cudaMemRangeAttributeAccessedBy,
                                   host, bytes));
    bool gpu_listed = false;
    for (int i = 0; i < 4; i++)
        gpu_listed |= accessed[i] == dev;
    EXPECT(gpu_listed, "host class: GPU %d not in accessed-by (%d %d %d %d)", dev, accessed[0],
           accessed[1], accessed[2], accessed[3]);
    EXPECT(range_attr(host, bytes, cudaMemRangeAttributeReadMostly) == 0, "host class: read-mostly set");

    EXPECT(range_attr(pf, bytes, cudaMemRangeAttributeLastPrefetchLocation) == cudaCpuDeviceId,
           "prefetch host class: last prefetch %d, want host",
           range_attr(pf, bytes, cudaMemRangeAttributeLastPrefetchLocation));

    // The catch-all class is plain device memory: not managed at all.
    cudaPointerAttributes attrs;
    CHECK(cudaPointerGetAttributes(&attrs, plain));
    EXPECT(attrs.type == cudaMemoryTypeDevice, "rest class: memory type %d, want device",
           (int)attrs.type);
    CHECK(cudaPointerGetAttributes(&attrs, rm));
    EXPECT(attrs.type == cudaMemoryTypeManaged, "read_mostly class: memory type %d, want managed",
           (int)attrs.type);
    printf("advice: read-mostly, preferred location, accessed-by, last prefetch and memory kind "
           "checked\n");
    void *all[] = {rm, host, pf, plain};
    for (void *p : all)
        CHECK(cudaFreeAsync(p, stream));
    CHECK(cudaStreamSynchronize(stream));
    return failures;
}

// Policy: cap managed 256MiB. 96 MiB blocks: two fit, the third is refused.
static int check_cap()
{
    void *p[3] = {nullptr, nullptr, nullptr};
    cudaError_t e0 = cudaMalloc(&p[0], 96u << 20);
    cudaError_t e1 = cudaMalloc(&p[1], 96u << 20);
    cudaError_t e2 = cudaMalloc(&p[2], 96u << 20);
    EXPECT(e0 == cudaSuccess && e1 == cudaSuccess, "allocations under the cap failed: %d %d", e0, e1);
    EXPECT(e2 == cudaErrorMemoryAllocation, "allocation over the cap returned %d (%s)", e2,
           cudaGetErrorString(e2));
    struct umpol_stats st;
    EXPECT(umpol_stats(&st) == 0 && st.cap_refusals == 1, "cap refusals: %llu", st.cap_refusals);
    CHECK(cudaFree(p[0]));
    e2 = cudaMalloc(&p[2], 96u << 20); // room again
    EXPECT(e2 == cudaSuccess, "allocation after a free returned %d", e2);
    printf("cap: third 96 MiB block refused with cudaErrorMemoryAllocation, accepted after a free\n");
    CHECK(cudaFree(p[1]));
    if (e2 == cudaSuccess)
        CHECK(cudaFree(p[2]));
    return failures;
}

// pinned.umpol: a `memory host` class. 256 MiB written and read by kernels,
// memset and copied with the device-to-device kind the job's frameworks use,
// read by the CPU: the data must be right and the card must not hold it.
static int check_pinned()
{
    const size_t bytes = 256u << 20, n = bytes / sizeof(uint32_t);
    unsigned long long *bad, gpu_bad = 0;
    uint32_t *dev, *host_side;
    CHECK(cudaMalloc((void **)&bad, sizeof *bad)); // class rest: device memory
    CHECK(cudaMalloc((void **)&dev, bytes));
    CHECK(cudaMemset(bad, 0, sizeof *bad));
    CHECK(cudaDeviceSynchronize());
    size_t used_before = gpu_used();
    umpol_tag_push("pinned");
    CHECK(cudaMalloc((void **)&host_side, bytes));
    umpol_tag_pop();
    long long taken_mib = ((long long)gpu_used() - (long long)used_before) >> 20;
    EXPECT(taken_mib < (long long)(bytes >> 21), "the card took %lld MiB for a memory-host block",
           taken_mib);
    fill<<<256, 256>>>(host_side, n, 7, 1);
    verify<<<256, 256>>>(host_side, n, 7, 1, bad);
    CHECK(cudaDeviceSynchronize());
    EXPECT(host_side[12345] == pattern(7, 12345, 1), "the CPU reads another value");
    fill<<<256, 256>>>(dev, n, 8, 2);
    CHECK(cudaMemcpy(host_side, dev, bytes, cudaMemcpyDeviceToDevice));
    verify<<<256, 256>>>(host_side, n, 8, 2, bad);
    CHECK(cudaMemset(dev, 0, bytes));
    CHECK(cudaMemcpy(dev, host_side, bytes, cudaMemcpyDeviceToDevice));
    verify<<<256, 256>>>(dev, n, 8, 2, bad);
    CHECK(cudaMemset(host_side, 0, bytes / 2));
    CHECK(cudaMemcpy(&gpu_bad, bad, sizeof gpu_bad, cudaMemcpyDeviceToHost));
    EXPECT(gpu_bad == 0, "%llu words wrong", gpu_bad);
    EXPECT(host_side[0] == 0 && host_side[n - 1] == pattern(8, n - 1, 2), "memset reached %s",
           host_side[0] ? "nothing" : "too far");
    struct umpol_stats st;
    EXPECT(umpol_stats(&st) == 0, "runtime not active");
    CHECK(cudaFree(host_side));
    CHECK(cudaFree(dev));
    CHECK(cudaFree(bad));
    printf("pinned: 256 MiB of memory host checked; the card took %lld MiB for it\n", taken_mib);
    return failures;
}

// movable.umpol: three blocks (a dedicated slab of 300 MiB, two small ones
// sharing a slab) filled by kernels, moved to the host on entering "away",
// read and rewritten there by kernels over the link, and moved back on
// leaving it, under a 1 GiB budget. The card must show the memory leave and
// come back, and every word must survive.
static int check_movable()
{
    const size_t sizes[3] = {300u << 20, 6u << 20, 10u << 20};
    uint32_t *blocks[3];
    unsigned long long *bad, gpu_bad = 0;
    CHECK(cudaMalloc((void **)&bad, sizeof *bad)); // class rest
    CHECK(cudaMemset(bad, 0, sizeof *bad));
    CHECK(cudaDeviceSynchronize());
    size_t used_before = gpu_used();
    umpol_tag_push("moved");
    for (int i = 0; i < 3; i++) {
        if (i == 1)
            CHECK(cudaMallocAsync((void **)&blocks[i], sizes[i], 0));
        else
            CHECK(cudaMalloc((void **)&blocks[i], sizes[i]));
        fill<<<256, 256>>>(blocks[i], sizes[i] / 4, (uint32_t)i, 1);
    }
    umpol_tag_pop();
    CHECK(cudaDeviceSynchronize());
    long long on_mib = ((long long)gpu_used() - (long long)used_before) >> 20;
    umpol_phase_enter("away");
    long long away_mib = ((long long)gpu_used() - (long long)used_before) >> 20;
    for (int i = 0; i < 3; i++) {
        verify<<<256, 256>>>(blocks[i], sizes[i] / 4, (uint32_t)i, 1, bad);
        fill<<<256, 256>>>(blocks[i], sizes[i] / 4, (uint32_t)i, 2); // over the link
    }
    CHECK(cudaDeviceSynchronize());
    umpol_phase_exit();
    long long back_mib = ((long long)gpu_used() - (long long)used_before) >> 20;
    // A rule that fires during a stream capture must not wait for the GPU (that
    // would invalidate the capture): the class stays put, the graph is good.
    cudaStream_t cs;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    CHECK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    CHECK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeGlobal));
    umpol_phase_enter("away");
    fill<<<256, 256, 0, cs>>>(blocks[1], sizes[1] / 4, 1u, 2);
    umpol_phase_exit();
    cudaError_t captured = cudaStreamEndCapture(cs, &graph);
    EXPECT(captured == cudaSuccess, "the capture was invalidated: %s", cudaGetErrorString(captured));
    long long captured_mib = ((long long)gpu_used() - (long long)used_before) >> 20;
    EXPECT(captured_mib >= on_mib - 4, "the class moved during the capture (%lld MiB)", captured_mib);
    if (captured == cudaSuccess) {
        CHECK(cudaGraphInstantiate(&exec, graph, 0));
        CHECK(cudaGraphLaunch(exec, cs));
        CHECK(cudaStreamSynchronize(cs));
        CHECK(cudaGraphExecDestroy(exec));
        CHECK(cudaGraphDestroy(graph));
    }
    CHECK(cudaStreamDestroy(cs));
    for (int i = 0; i < 3; i++)
        verify<<<256, 256>>>(blocks[i], sizes[i] / 4, (uint32_t)i, 2, bad);
    CHECK(cudaMemcpy(&gpu_bad, bad, sizeof gpu_bad, cudaMemcpyDeviceToHost));
    EXPECT(gpu_bad == 0, "%llu words wrong", gpu_bad);
    EXPECT(on_mib >= 300 + 64, "the card took only %lld MiB for the blocks", on_mib);
    EXPECT(away_mib <= 16, "the card kept %lld MiB while the blocks were away", away_mib);
    EXPECT(back_mib >= on_mib - 4, "the card holds %lld MiB after the way back (%lld before)",
           back_mib, on_mib);
    struct umpol_stats st;
    EXPECT(umpol_stats(&st) == 0, "runtime not active");
    CHECK(cudaFree(blocks[0]));
    CHECK(cudaFreeAsync(blocks[1], 0));
    CHECK(cudaFree(blocks[2]));
    CHECK(cudaFree(bad));
    CHECK(cudaDeviceSynchronize());
    printf("movable: 316 MiB moved away and back, data intact; the card held %lld MiB, %lld "
           "away, %lld back; a capture over a rule: %s, %lld MiB held\n",
           on_mib, away_mib, back_mib, cudaGetErrorString(captured), captured_mib);
    return failures;
}

// faults.umpol: a managed class left on the host with no prefetch and no
// mapping. The CPU writes it first, so its pages are on the host; a kernel
// reading it then takes GPU page faults, which the report counts under
// UMPOL_PROFILE=1 with the driver's time servicing them (tests/gpu.sh).
static int check_faults()
{
    const size_t bytes = 64u << 20, n = bytes / sizeof(uint32_t);
    unsigned long long *bad, gpu_bad = 0;
    uint32_t *p;
    CHECK(cudaMalloc((void **)&bad, sizeof *bad)); // class rest: device memory
    CHECK(cudaMemset(bad, 0, sizeof *bad));
    umpol_tag_push("faulting");
    CHECK(cudaMalloc((void **)&p, bytes));
    umpol_tag_pop();
    for (size_t i = 0; i < n; i++)
        p[i] = pattern(9, i, 1);
    verify<<<256, 256>>>(p, n, 9, 1, bad);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(&gpu_bad, bad, sizeof gpu_bad, cudaMemcpyDeviceToHost));
    EXPECT(gpu_bad == 0, "%llu words wrong when read on the GPU", gpu_bad);
    CHECK(cudaFree(p));
    CHECK(cudaFree(bad));
    printf("faults: 64 MiB written by the CPU, read by a kernel where it lies\n");
    return failures;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gpu_checks integrity|advice|cap|residency|pinned|faults|movable\n");
        return 2;
    }
    struct umpol_stats st;
    if (umpol_stats(&st) != 0) {
        fprintf(stderr, "gpu_checks: run me with libumpol.so preloaded and a policy\n");
        return 2;
    }
    int rc = strcmp(argv[1], "integrity") == 0 ? check_integrity()
             : strcmp(argv[1], "advice") == 0  ? check_advice()
             : strcmp(argv[1], "cap") == 0     ? check_cap()
             : strcmp(argv[1], "residency") == 0 ? check_residency()
             : strcmp(argv[1], "pinned") == 0    ? check_pinned()
             : strcmp(argv[1], "faults") == 0    ? check_faults()
             : strcmp(argv[1], "movable") == 0   ? check_movable()
                                               : -1;
    if (rc < 0) {
        fprintf(stderr, "gpu_checks: unknown check %s\n", argv[1]);
        return 2;
    }
    return rc == 0 ? 0 : 1;
}
