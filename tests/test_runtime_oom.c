/* The runtime when host memory runs out: every allocation the runtime makes
 * (malloc, calloc and realloc of the library's objects, wrapped at link
 * time; the test's and the fake CUDA runtime's go to the real ones through
 * fake/real_alloc.h) is failed in turn while it starts under each stock
 * policy and serves a run of allocations and frees on the fake GPU. A start
 * that fails says so (runtime_init returns -1); an allocation either
 * succeeds, is refused with an error, or is left to CUDA; every pointer the
 * runtime handed out is its own to free; and once all is freed and trimmed
 * the fake GPU holds what it held before: a failed host allocation never
 * loses GPU memory. Under CI's sanitizer build a failed start or step that
 * leaks host memory fails the test too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "fake/fake_api.h"
#include "fake/fake_cudart.h"
#include "fail_alloc.h"
#include "lang/policy.h"
#include "runtime/placement.h"
#include "runtime/runtime.h"

enum { BLOCKS = 48 };

/* What one start and run did. */
struct outcome {
    bool started;
    int served, refused, passed_on;
};

/* Free P: the runtime's (SERVED), or the fake's own (left to CUDA). */
static void give_back(struct runtime *rt, void *p, bool served)
{
    cudaError_t err = cudaSuccess;
    bool ours = rt_free(rt, p, NULL, MODE_ANY, &err);
    if (served) {
        assert_true(ours);
        assert_int_equal(err, cudaSuccess);
    } else if (!ours) {
        assert_int_equal(cudaFree(p), cudaSuccess);
    }
}

/* Start the runtime under PROGRAM, allocate BLOCKS blocks of mixed sizes,
 * free every other one, allocate those again (reusing freed space), free
 * all and trim. */
static struct outcome run(const struct program *program)
{
    struct outcome o = {0};
    uint64_t resident = fake_resident_bytes(), vmm = fake_vmm_gpu_bytes();
    struct runtime *rt = calloc(1, sizeof *rt); /* the real one (real_alloc.h) */
    assert_non_null(rt);
    o.started = runtime_init(rt, program, &fake_api) == 0;
    if (!o.started) {
        free(rt);
        return o;
    }
    cudaSetDevice(0);
    void *p[BLOCKS] = {0};
    bool served[BLOCKS] = {0};
    for (int round = 0; round < 2; round++) {
        for (int i = round; i < BLOCKS; i += round + 1) {
            size_t size = i % 4 == 0 ? (24u << 20) : i % 4 == 1 ? (3u << 20) : (256u << 10);
            bool handled = false;
            cudaError_t err = rt_alloc(rt, &p[i], size, API_CUDA_MALLOC, NULL, &handled);
            if (handled && err != cudaSuccess) {
                p[i] = NULL;
                o.refused++;
            } else if (handled) {
                served[i] = true;
                o.served++;
            } else {
                assert_int_equal(err, cudaSuccess);
                assert_int_equal(cudaMalloc(&p[i], size), cudaSuccess); /* as CUDA would */
                o.passed_on++;
            }
        }
        for (int i = 1; i < BLOCKS; i += 2)
            if (p[i]) {
                give_back(rt, p[i], served[i]);
                p[i] = NULL;
            }
    }
    for (int i = 0; i < BLOCKS; i++)
        if (p[i]) give_back(rt, p[i], served[i]);
    place_trim(rt, -1, -1);
    long failing = fail_alloc_at;
    fail_alloc_at = -1; /* the fake's figures, read with nothing failing */
    assert_int_equal(fake_resident_bytes(), resident);
    assert_int_equal(fake_vmm_gpu_bytes(), vmm);
    fail_alloc_at = failing;
    fake_release_runtime_events(rt);
    runtime_destroy(rt);
    free(rt);
    return o;
}

/* Fail each allocation of a run under the policy in PATH in turn; returns
 * how many there were. */
static long sweep(const char *path)
{
    struct policy pol;
    assert_int_equal(policy_load_file(&pol, path), POLICY_VALID);
    struct outcome clean = run(pol.program);
    assert_true(clean.started);
    assert_int_equal(clean.refused, 0);
    print_message("%s: %d served, %d left to CUDA\n", path, clean.served, clean.passed_on);
    long k = 0;
    for (;; k++) {
        fail_alloc_at = k;
        fail_alloc_calls = 0;
        struct outcome o = run(pol.program);
        long made = fail_alloc_calls;
        fail_alloc_at = -1;
        if (made <= k) { /* nothing left to fail: the run as without a failure */
            assert_memory_equal(&o, &clean, sizeof o);
            break;
        }
        /* One allocation failed: at most one request goes unserved for it. */
        if (o.started) assert_true(o.refused <= 1);
    }
    policy_free(&pol);
    return k;
}

static void test_stock_policies(void **state)
{
    (void)state;
    long points = 0;
    int files = fail_alloc_each_policy("policies", sweep, &points);
    print_message("%d stock policies, %ld allocations failed in turn\n", files, points);
    assert_true(files > 0 && points > files);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stock_policies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
