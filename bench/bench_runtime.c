/* CPU fast path of the runtime (`make bench`): one allocation and its free
 * through classify + pool, against the fake CUDA runtime linked in-process,
 * so what is timed is umpol's own work. Goal: under 200 ns per pair. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "fake/fake_api.h"
#include "lang/policy.h"
#include "runtime/runtime.h"


static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(void)
{
    static const char text[] = "umpol 1;\n"
                               "class weights { match phase \"model.init*\" and size >= 1MiB; "
                               "place gpu; }\n"
                               "class optimizer { match phase \"optimizer*\"; place host; access gpu; "
                               "prefetch gpu on enter \"optimizer*\"; }\n"
                               "class activations { match phase \"forward*\" or phase \"backward*\"; "
                               "place gpu; }\n"
                               "class rest { match any; memory device; }\n";
    struct policy pol;
    if (policy_load_text(&pol, "bench.umpol", text, strlen(text)) != POLICY_VALID)
        return 1;
    struct runtime rt;
    if (runtime_init(&rt, pol.program, &fake_api) != 0)
        return 1;
    phase_enter(&rt, "forward");
    cudaStream_t stream = (cudaStream_t)0x10;
    static const size_t sizes[] = {512, 4096, 65536, 1u << 20};
    enum { PAIRS = 2000000 };
    double best[4];
    for (int s = 0; s < 4; s++) {
        best[s] = 1e9;
        for (int rep = 0; rep < 5; rep++) {
            double t0 = now_s();
            for (int i = 0; i < PAIRS; i++) {
                void *p;
                bool handled;
                rt_alloc(&rt, &p, sizes[s], API_CUDA_MALLOC_ASYNC, stream, &handled);
                cudaError_t err;
                rt_free(&rt, p, stream, MODE_STREAM, &err);
            }
            double ns = (now_s() - t0) * 1e9 / PAIRS;
            if (ns < best[s])
                best[s] = ns;
        }
        printf("alloc+free pair, %7zu bytes, class activations: %6.1f ns (best of 5 x %d)\n",
               sizes[s], best[s], PAIRS);
    }
    printf("{\"pair_ns_512\":%.1f,\"pair_ns_4k\":%.1f,\"pair_ns_64k\":%.1f,\"pair_ns_1m\":%.1f}\n",
           best[0], best[1], best[2], best[3]);
    phase_exit(&rt);
    runtime_destroy(&rt);
    policy_free(&pol);
    return 0;
}
