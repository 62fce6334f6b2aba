// Can movable memory move while the GPU computes on other memory? A move of
// `memory movable` today waits for the whole GPU first, so the GPU idles for
// the copies. Moving ahead of use needs three facts this program measures:
//   1. whether cuMemUnmap / cuMemMap / cuMemSetAccess of one range wait for
//      kernels that run on another (each call is timed while kernels run);
//   2. whether the kernels slow down, or compute anything different, while
//      another range is copied and remapped beside them;
//   3. whether a stream can be held at a point by a host function while the
//      host remaps (the gate a runtime would put before a predicted use), or
//      whether the driver's calls then deadlock (the gate gives up after 2 s
//      and says so, so the program always ends).
// Uses MiB of GPU memory and of pinned host memory for the moved range, plus
// 2 x 256 MiB for the computation; no managed memory.
//
// Build: nvcc -O2 -o vmm_overlap bench/vmm_overlap.cu -lcuda
// Run:   ./vmm_overlap [MiB moved] [ms of compute]   (default 2048, 400)
// Prints one JSON object.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include <cuda.h>
#include <cuda_runtime.h>

#include "../tests/gpu/cuda_check.h"
#include "vmm_bench.h"

static const size_t PIECE = 64u << 20;
static const size_t WORK = 256u << 20; // the computation's buffer

__global__ void spin(float *a, size_t n, int iters)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float x = a[i];
        for (int k = 0; k < iters; k++)
            x = x * 0.999f + 0.001f;
        a[i] = x;
    }
}

// The moved range: the job's addresses, each piece mapping either its GPU
// memory or its host memory (kept for the range's life, also mapped at the
// shadow), and a stage where new GPU memory is mapped for the way in.
struct range {
    CUdeviceptr job, shadow, stage;
    size_t pieces;
    std::vector<CUmemGenericAllocationHandle> gpu, host;
    CUmemAllocationProp dp{}, hp{};
    CUmemAccessDesc acc{};
    double max_call_ms = 0; // the longest single unmap, map or access call
    // Every call of the moves by kind, whole run: count and total time, for
    // what one piece's way in and out costs the thread that makes it.
    enum { CREATE, MAP, ACCESS, UNMAP, RELEASE, KINDS };
    long calls[KINDS] = {0};
    double call_ms[KINDS] = {0};
};

// Time one driver call of KIND made by the moves.
#define TIMED(r, kind, call)                                                                   \
    do {                                                                                       \
        double t_ = now();                                                                     \
        CU(call);                                                                              \
        (r).call_ms[range::kind] += (now() - t_) * 1e3;                                        \
        (r).calls[range::kind]++;                                                              \
    } while (0)

static void timed(range &r, CUresult res, double t0, const char *what)
{
    r.max_call_ms = std::max(r.max_call_ms, (now() - t0) * 1e3);
    if (res != CUDA_SUCCESS) {
        const char *s = "?";
        cuGetErrorString(res, &s);
        fprintf(stderr, "%s: %s\n", what, s);
        exit(1);
    }
}

static void remap(range &r, size_t i, CUmemGenericAllocationHandle h)
{
    CUdeviceptr at = r.job + i * PIECE;
    double t0 = now();
    timed(r, cuMemUnmap(at, PIECE), t0, "cuMemUnmap");
    r.call_ms[range::UNMAP] += (now() - t0) * 1e3, r.calls[range::UNMAP]++;
    t0 = now();
    timed(r, cuMemMap(at, PIECE, 0, h, 0), t0, "cuMemMap");
    r.call_ms[range::MAP] += (now() - t0) * 1e3, r.calls[range::MAP]++;
    t0 = now();
    timed(r, cuMemSetAccess(at, PIECE, &r.acc, 1), t0, "cuMemSetAccess");
    r.call_ms[range::ACCESS] += (now() - t0) * 1e3, r.calls[range::ACCESS]++;
}

// Every piece to the host: copies queued on S, each piece remapped once its
// copy is done, its GPU memory released. Returns the seconds it took.
static double move_out(range &r, cudaStream_t s, std::vector<cudaEvent_t> &ev)
{
    double t0 = now();
    for (size_t i = 0; i < r.pieces; i++) {
        CHECK(cudaMemcpyAsync((void *)(r.shadow + i * PIECE), (void *)(r.job + i * PIECE), PIECE,
                              cudaMemcpyDeviceToHost, s));
        CHECK(cudaEventRecord(ev[i], s));
    }
    for (size_t i = 0; i < r.pieces; i++) {
        CHECK(cudaEventSynchronize(ev[i]));
        remap(r, i, r.host[i]);
        TIMED(r, RELEASE, cuMemRelease(r.gpu[i]));
    }
    return now() - t0;
}

// Every piece back: new GPU memory mapped at the stage, copies queued, each
// piece remapped at the job's range once copied.
static double move_in(range &r, cudaStream_t s, std::vector<cudaEvent_t> &ev)
{
    double t0 = now();
    for (size_t i = 0; i < r.pieces; i++) {
        TIMED(r, CREATE, cuMemCreate(&r.gpu[i], PIECE, &r.dp, 0));
        TIMED(r, MAP, cuMemMap(r.stage + i * PIECE, PIECE, 0, r.gpu[i], 0));
        TIMED(r, ACCESS, cuMemSetAccess(r.stage + i * PIECE, PIECE, &r.acc, 1));
        CHECK(cudaMemcpyAsync((void *)(r.stage + i * PIECE), (void *)(r.job + i * PIECE), PIECE,
                              cudaMemcpyHostToDevice, s));
        CHECK(cudaEventRecord(ev[i], s));
    }
    for (size_t i = 0; i < r.pieces; i++) {
        CHECK(cudaEventSynchronize(ev[i]));
        remap(r, i, r.gpu[i]);
        TIMED(r, UNMAP, cuMemUnmap(r.stage + i * PIECE, PIECE));
    }
    return now() - t0;
}

static long bad_words(range &r, unsigned seed)
{
    size_t n = r.pieces * PIECE / 4;
    std::vector<uint32_t> back(n);
    CHECK(cudaMemcpy(back.data(), (void *)r.job, n * 4, cudaMemcpyDeviceToHost));
    long bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += back[i] != ((uint32_t)i * 2654435761u ^ seed);
    return bad;
}

// The gate: a host function on the compute stream that holds it until the
// host says go, or 2 s pass.
struct gate {
    std::atomic<int> reached{0}, go{0}, timed_out{0};
};

static void CUDART_CB gate_wait(void *arg)
{
    gate *g = (gate *)arg;
    g->reached = 1;
    double t0 = now();
    while (!g->go.load()) {
        if (now() - t0 > 2.0) {
            g->timed_out = 1;
            return;
        }
        std::this_thread::yield();
    }
}

int main(int argc, char **argv)
{
    size_t bytes = (argc > 1 ? strtoul(argv[1], NULL, 10) : 2048) << 20;
    double target_ms = argc > 2 ? atof(argv[2]) : 400;
    bytes = std::max(PIECE, bytes / PIECE * PIECE);
    int dev = 0;
    CHECK(cudaSetDevice(dev));
    CHECK(cudaFree(0));
    size_t free0, total;
    CHECK(cudaMemGetInfo(&free0, &total));
    if (bytes + 2 * WORK + (1ull << 30) > free0) {
        fprintf(stderr, "vmm_overlap: %zu MiB free, %zu MiB asked: smaller, please\n",
                free0 >> 20, (bytes + 2 * WORK) >> 20);
        return 1;
    }
    int numa = 0;
    cuDeviceGetAttribute(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev);
    range r;
    r.pieces = bytes / PIECE;
    r.gpu.resize(r.pieces);
    r.host.resize(r.pieces);
    vmm_props(dev, numa, &r.dp, &r.hp, &r.acc);
    CU(cuMemAddressReserve(&r.job, bytes, PIECE, 0, 0));
    CU(cuMemAddressReserve(&r.shadow, bytes, PIECE, 0, 0));
    CU(cuMemAddressReserve(&r.stage, bytes, PIECE, 0, 0));
    for (size_t i = 0; i < r.pieces; i++) {
        CU(cuMemCreate(&r.gpu[i], PIECE, &r.dp, 0));
        CU(cuMemMap(r.job + i * PIECE, PIECE, 0, r.gpu[i], 0));
        CU(cuMemCreate(&r.host[i], PIECE, &r.hp, 0));
        CU(cuMemMap(r.shadow + i * PIECE, PIECE, 0, r.host[i], 0));
    }
    CU(cuMemSetAccess(r.job, bytes, &r.acc, 1));
    CU(cuMemSetAccess(r.shadow, bytes, &r.acc, 1));
    fill<<<1024, 512>>>((uint32_t *)r.job, bytes / 4, 11);

    // The computation, and a copy of its input for the reference run.
    float *work, *ref;
    size_t n = WORK / sizeof(float);
    CHECK(cudaMalloc(&work, WORK));
    CHECK(cudaMalloc(&ref, WORK));
    fill<<<1024, 512>>>((uint32_t *)work, n, 3);
    CHECK(cudaDeviceSynchronize());
    spin<<<1024, 512>>>(work, n, 1); // warm up, and a known state for both
    CHECK(cudaMemcpy(ref, work, WORK, cudaMemcpyDeviceToDevice));
    cudaStream_t compute, copy;
    CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
    cudaEvent_t c0, c1;
    CHECK(cudaEventCreate(&c0));
    CHECK(cudaEventCreate(&c1));
    std::vector<cudaEvent_t> ev(r.pieces);
    for (auto &e : ev)
        CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));

    // Kernels of about 2 ms each, as many as make the target.
    int iters = 64;
    float ms = 0;
    for (;;) {
        CHECK(cudaEventRecord(c0, compute));
        spin<<<1024, 512, 0, compute>>>(ref, n, iters);
        CHECK(cudaEventRecord(c1, compute));
        CHECK(cudaEventSynchronize(c1));
        CHECK(cudaEventElapsedTime(&ms, c0, c1));
        if (ms >= 2 || iters > (1 << 24))
            break;
        iters *= 2;
    }
    CHECK(cudaMemcpy(ref, work, WORK, cudaMemcpyDeviceToDevice)); // undo the calibration
    int kernels = std::max(1, (int)(target_ms / ms));
    auto run_compute = [&](float *a) {
        CHECK(cudaEventRecord(c0, compute));
        for (int k = 0; k < kernels; k++)
            spin<<<1024, 512, 0, compute>>>(a, n, iters);
        CHECK(cudaEventRecord(c1, compute));
    };

    // 1. Alone: the computation, then the moves.
    run_compute(ref);
    CHECK(cudaEventSynchronize(c1));
    float compute_alone = 0;
    CHECK(cudaEventElapsedTime(&compute_alone, c0, c1));
    double out_alone = move_out(r, copy, ev);
    double in_alone = move_in(r, copy, ev);
    double call_alone = r.max_call_ms;
    long bad_alone = bad_words(r, 11);

    // 2. Together: the kernels queued, then both moves while they run.
    r.max_call_ms = 0;
    double t0 = now();
    run_compute(work);
    double out_together = move_out(r, copy, ev);
    double in_together = move_in(r, copy, ev);
    double moves_done = now() - t0;
    CHECK(cudaEventSynchronize(c1));
    float compute_together = 0;
    CHECK(cudaEventElapsedTime(&compute_together, c0, c1));
    double call_together = r.max_call_ms;
    // The kernels were queued at t0: moves done sooner than they took ran beside them.
    bool compute_was_running = moves_done * 1e3 < compute_together;
    long bad_together = bad_words(r, 11);
    // Compared bit for bit: the fill pattern read as floats holds NaNs.
    std::vector<uint32_t> a(n), b(n);
    CHECK(cudaMemcpy(a.data(), work, WORK, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(b.data(), ref, WORK, cudaMemcpyDeviceToHost));
    long compute_differs = 0;
    for (size_t i = 0; i < n; i++)
        compute_differs += a[i] != b[i];

    // 3. The gate: the stream held by a host function while the host moves
    // the range out and back.
    gate g;
    r.max_call_ms = 0;
    spin<<<1024, 512, 0, compute>>>(work, n, iters);
    CHECK(cudaLaunchHostFunc(compute, gate_wait, &g));
    spin<<<1024, 512, 0, compute>>>(work, n, iters);
    CHECK(cudaEventRecord(c1, compute));
    while (!g.reached.load())
        std::this_thread::yield();
    double tg = now();
    double out_gated = move_out(r, copy, ev);
    double in_gated = move_in(r, copy, ev);
    double gate_held_ms = (now() - tg) * 1e3;
    g.go = 1;
    CHECK(cudaEventSynchronize(c1));
    long bad_gated = bad_words(r, 11);

    printf("{\"moved_mib\": %zu, \"piece_mib\": %zu, \"kernels\": %d, \"kernel_ms\": %.3f, "
           "\"compute_alone_ms\": %.1f, \"compute_together_ms\": %.1f, "
           "\"compute_slowdown\": %.3f, \"compute_differs\": %ld, \"moves_ended_before_compute\": %s, "
           "\"out_alone_gbps\": %.2f, \"in_alone_gbps\": %.2f, "
           "\"out_together_gbps\": %.2f, \"in_together_gbps\": %.2f, "
           "\"max_call_alone_ms\": %.3f, \"max_call_together_ms\": %.3f, "
           "\"bad_alone\": %ld, \"bad_together\": %ld, "
           "\"gate_timed_out\": %s, \"gate_held_ms\": %.1f, \"out_gated_gbps\": %.2f, "
           "\"in_gated_gbps\": %.2f, \"max_call_gated_ms\": %.3f, \"bad_gated\": %ld, "
           "\"mean_call_ms\": {\"create\": %.4f, \"map\": %.4f, \"access\": %.4f, \"unmap\": %.4f, "
           "\"release\": %.4f}}\n",
           bytes >> 20, PIECE >> 20, kernels, ms, compute_alone, compute_together,
           compute_together / compute_alone, compute_differs,
           compute_was_running ? "true" : "false", bytes / out_alone / 1e9,
           bytes / in_alone / 1e9, bytes / out_together / 1e9, bytes / in_together / 1e9,
           call_alone, call_together, bad_alone, bad_together,
           g.timed_out.load() ? "true" : "false", gate_held_ms, bytes / out_gated / 1e9,
           bytes / in_gated / 1e9, r.max_call_ms, bad_gated,
           r.call_ms[range::CREATE] / std::max(1L, r.calls[range::CREATE]),
           r.call_ms[range::MAP] / std::max(1L, r.calls[range::MAP]),
           r.call_ms[range::ACCESS] / std::max(1L, r.calls[range::ACCESS]),
           r.call_ms[range::UNMAP] / std::max(1L, r.calls[range::UNMAP]),
           r.call_ms[range::RELEASE] / std::max(1L, r.calls[range::RELEASE]));
    return bad_alone || bad_together || bad_gated || compute_differs ? 1 : 0;
}
