/* CPU benchmarks of the policy front end (`make bench`):
 *   compile  parse + check + compile of a generated 10,000-class policy (goal < 100 ms)
 *   classify one allocation against a 50-class policy (goal < 100 ns on average) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lang/policy.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A policy of N classes that uses every kind of predicate and directive. */
static char *generate(int n, size_t *len_out)
{
    size_t cap = (size_t)n * 256 + 256, len = 0;
    char *t = malloc(cap);
    if (!t)
        exit(2);
    len += (size_t)snprintf(t, cap, "umpol 1;\nbudget gpu 80%%;\ncap managed 90%%;\n");
    for (int i = 0; i < n - 1; i++) {
        switch (i % 5) {
        case 0:
            len += (size_t)snprintf(t + len, cap - len,
                                    "class c%d {\n  match phase \"layer%d.*\" and size >= %dKiB;\n"
                                    "  place gpu;\n  prefetch gpu on enter \"layer%d.fwd\";\n"
                                    "  priority %d;\n}\n",
                                    i, i, i % 4096 + 1, i, i % 1000);
            break;
        case 1:
            len += (size_t)snprintf(t + len, cap - len,
                                    "class c%d {\n  match tag \"t%d\" and not api cudaMalloc;\n"
                                    "  place host;\n  access gpu;\n}\n",
                                    i, i);
            break;
        case 2:
            len += (size_t)snprintf(t + len, cap - len,
                                    "class c%d { match size %dMiB..%dMiB and device %d; "
                                    "advise read_mostly; }\n",
                                    i, i % 100 + 1, i % 100 + 2, i % 8);
            break;
        case 3:
            len += (size_t)snprintf(t + len, cap - len,
                                    "class c%d { match (phase \"opt%d*\" or nth %d..%d) and "
                                    "size > 4KiB; prefetch host on exit \"opt%d*\"; }\n",
                                    i, i, i * 10, i * 10 + 5, i);
            break;
        default:
            len += (size_t)snprintf(t + len, cap - len,
                                    "class c%d { match api cudaMallocManaged and size < %dB; "
                                    "memory managed; prefetch gpu on mark \"m%d\"; }\n",
                                    i, 512 + i, i);
        }
    }
    len += (size_t)snprintf(t + len, cap - len, "class rest { match any; memory device; }\n");
    *len_out = len;
    return t;
}

int main(void)
{
    enum { COMPILE_RUNS = 21, CLASSES = 10000, SMALL = 50, CONTEXTS = 1024, ROUNDS = 2000 };
    size_t len;
    char *text = generate(CLASSES, &len);
    double times[COMPILE_RUNS];
    for (int r = 0; r < COMPILE_RUNS; r++) {
        struct policy pol;
        double t0 = now_s();
        enum policy_status st = policy_load_text(&pol, "bench.umpol", text, len);
        times[r] = now_s() - t0;
        if (st != POLICY_VALID) {
            diag_print(stderr, &pol.src, &pol.diags, false);
            return 1;
        }
        policy_free(&pol);
    }
    qsort(times, COMPILE_RUNS, sizeof times[0], cmp_double);
    double compile_ms = times[COMPILE_RUNS / 2] * 1e3;
    size_t policy_bytes = len;
    free(text);

    /* Classification against 50 classes; contexts spread over all kinds of
     * allocation, so that many fall through most classes. */
    text = generate(SMALL, &len);
    struct policy pol;
    if (policy_load_text(&pol, "bench50.umpol", text, len) != POLICY_VALID)
        return 1;
    const struct program *p = pol.program;
    size_t words = program_bitset_words(p->phase_glob_count);
    uint64_t *phase_bits = calloc(words * 8, sizeof *phase_bits);
    uint64_t *tag_bits = calloc(program_bitset_words(p->tag_count), sizeof *tag_bits);
    program_match_phase(p, "layer20.fwd", phase_bits + words * 1);
    program_match_phase(p, "opt33.step", phase_bits + words * 2);
    struct alloc_ctx ctx[CONTEXTS];
    uint64_t seed = 42;
    for (int i = 0; i < CONTEXTS; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        ctx[i] = (struct alloc_ctx){
            .size = (seed >> 20) % (256ull << 20),
            .seq = (seed >> 8) % 1000,
            .api = 1u << ((seed >> 40) % 4),
            .device = (int)((seed >> 50) % 8),
            .phase_bits = phase_bits + words * ((seed >> 33) % 3),
            .tag_bits = tag_bits,
        };
    }
    volatile long sink = 0;
    double best = 1e9;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now_s();
        for (int r = 0; r < ROUNDS; r++)
            for (int i = 0; i < CONTEXTS; i++)
                sink += program_classify(p, &ctx[i]);
        double ns = (now_s() - t0) * 1e9 / ((double)ROUNDS * CONTEXTS);
        if (ns < best)
            best = ns;
    }
    long hist_rest = 0;
    for (int i = 0; i < CONTEXTS; i++)
        hist_rest += program_classify(p, &ctx[i]) == (int)p->class_count - 1;
    printf("compile  %5d classes (%zu bytes): %8.2f ms median of %d  (goal < 100 ms)\n", CLASSES,
           policy_bytes, compile_ms, COMPILE_RUNS);
    printf("classify %5d classes: %8.1f ns per allocation, best of 5 x %d  (goal < 100 ns; "
           "%ld of %d contexts fall through to the last class)\n",
           SMALL, best, ROUNDS * CONTEXTS, hist_rest, CONTEXTS);
    printf("{\"compile_10000_ms\":%.3f,\"classify_50_ns\":%.2f}\n", compile_ms, best);
    free(phase_bits);
    free(tag_bits);
    policy_free(&pol);
    free(text);
    return sink < 0 ? 1 : 0;
}
