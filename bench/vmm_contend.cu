// Does a remap on one thread hold up the job's launches on another?
// bench/vmm_calls.cu found that a 64 MiB piece of host memory costs about
// 0.85 ms of cuMemSetAccess and 0.18 ms of cuMemUnmap, the cost following the
// bytes, so batching the calls cannot remove it. Streaming ahead of use can
// only stop costing the job those milliseconds by making the calls on a
// runtime thread of its own, and that helps only if the driver lets the job's
// thread queue work meanwhile. This program launches short kernels on the
// main thread, each followed by an event record and query (what the job and
// the runtime's marks do), paced so the GPU keeps up, and times each call,
// first alone, then while a second thread remaps pieces of host memory (map,
// access, unmap) as fast as it can, then pieces of GPU memory.
//
// Build: nvcc -O2 -o vmm_contend bench/vmm_contend.cu -lcuda -lpthread
// Run:   ./vmm_contend [launches] [piece MiB]   (default 2000, 64)
// Prints one JSON object: per mode, the launch+record+query time in
// microseconds (mean, p99, max) and the remaps the other thread made.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include <cuda.h>
#include <cuda_runtime.h>

#include "../tests/gpu/cuda_check.h"
#include "vmm_bench.h"

__global__ void spin(long long cycles)
{
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
}

struct result {
    double mean_us, p99_us, max_us;
    long remaps;
};

// The other thread: remap one piece of PROP at VA until told to stop.
static void remapper(CUcontext ctx, CUdeviceptr va, size_t size, CUmemAllocationProp prop,
                     CUmemAccessDesc acc, std::atomic<bool> *stop, std::atomic<long> *done)
{
    CU(cuCtxSetCurrent(ctx));
    CUmemGenericAllocationHandle h;
    CU(cuMemCreate(&h, size, &prop, 0));
    while (!stop->load()) {
        CU(cuMemMap(va, size, 0, h, 0));
        CU(cuMemSetAccess(va, size, &acc, 1));
        CU(cuMemUnmap(va, size));
        done->fetch_add(1);
    }
    CU(cuMemRelease(h));
}

static result launches(int n, long long cycles, cudaStream_t s, cudaEvent_t ev,
                       const CUmemAllocationProp *other, CUdeviceptr va, size_t size,
                       CUmemAccessDesc acc)
{
    std::atomic<bool> stop{false};
    std::atomic<long> done{0};
    std::thread t;
    CUcontext ctx;
    CU(cuCtxGetCurrent(&ctx));
    if (other) {
        t = std::thread(remapper, ctx, va, size, *other, acc, &stop, &done);
        while (done.load() < 2) /* the other thread is remapping by now */
            std::this_thread::yield();
    }
    std::vector<double> us(n);
    for (int i = 0; i < n; i++) {
        double t0 = now();
        spin<<<1, 1, 0, s>>>(cycles);
        CHECK(cudaEventRecord(ev, s));
        cudaError_t q = cudaEventQuery(ev);
        if (q != cudaSuccess && q != cudaErrorNotReady)
            CHECK(q);
        double t1 = now();
        us[i] = (t1 - t0) * 1e6;
        while (now() - t0 < 60e-6) /* pace: each kernel spins about 20 us */
            ;
    }
    long remaps = done.load();
    stop = true;
    if (t.joinable())
        t.join();
    CHECK(cudaStreamSynchronize(s));
    double sum = 0;
    for (double u : us)
        sum += u;
    std::sort(us.begin(), us.end());
    return {sum / n, us[(size_t)(n * 0.99)], us.back(), remaps};
}

static void print(const char *name, result r, bool last)
{
    printf("\"%s\": {\"mean_us\": %.1f, \"p99_us\": %.1f, \"max_us\": %.1f, \"remaps\": %ld}%s",
           name, r.mean_us, r.p99_us, r.max_us, r.remaps, last ? "" : ", ");
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 2000;
    size_t size = (argc > 2 ? strtoul(argv[2], NULL, 10) : 64) << 20;
    int dev = 0;
    CHECK(cudaSetDevice(dev));
    CHECK(cudaFree(0));
    size_t free0, total;
    CHECK(cudaMemGetInfo(&free0, &total));
    if (n < 100 || size < (2u << 20) || size % (2u << 20) || size + (1ull << 30) > free0) {
        fprintf(stderr, "vmm_contend: at least 100 launches, and a piece that is a multiple of "
                        "2 MiB and less than the %zu MiB free less 1 GiB, please\n",
                free0 >> 20);
        return 1;
    }
    int numa = 0, clock_khz = 0;
    cuDeviceGetAttribute(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev);
    CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev));
    long long cycles = (long long)clock_khz * 20 / 1000; /* about 20 us */
    CUmemAllocationProp gpu, host;
    CUmemAccessDesc acc;
    vmm_props(dev, numa, &gpu, &host, &acc);
    CUdeviceptr va;
    CU(cuMemAddressReserve(&va, size, size, 0, 0));
    cudaStream_t s;
    cudaEvent_t ev;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    launches(200, cycles, s, ev, nullptr, va, size, acc); /* warm up */
    result alone = launches(n, cycles, s, ev, nullptr, va, size, acc);
    result beside_host = launches(n, cycles, s, ev, &host, va, size, acc);
    result beside_gpu = launches(n, cycles, s, ev, &gpu, va, size, acc);
    result alone_again = launches(n, cycles, s, ev, nullptr, va, size, acc);
    CU(cuMemAddressFree(va, size));
    printf("{\"launches\": %d, \"piece_mib\": %zu, \"launch_record_query\": {", n, size >> 20);
    print("alone", alone, false);
    print("beside_host_remaps", beside_host, false);
    print("beside_gpu_remaps", beside_gpu, false);
    print("alone_again", alone_again, true);
    printf("}}\n");
    return 0;
}
