/* Unit tests of the runtime core (pools, placement, budget, triggers, tags,
 * report) against the fake CUDA runtime linked in-process: no preloading,
 * no GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fake/fake_api.h"
#include "fake/fake_cudart.h"
#include "lang/policy.h"
#include "runtime/placement.h"
#include "runtime/profile.h"
#include "runtime/runtime.h"
#include "runtime/stream.h"
#include "runtime/trace.h"
#include "report_text.h"


struct fixture {
    struct policy pol;
    struct runtime rt;
    struct fake_counters before;
    uint64_t resident_before; /* bytes on the fake GPU at setup */
};

static struct fixture *setup(const char *policy_text)
{
    struct fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    if (policy_load_text(&f->pol, "t.umpol", policy_text, strlen(policy_text)) != POLICY_VALID) {
        diag_print(stderr, &f->pol.src, &f->pol.diags, false);
        fail_msg("test policy is invalid");
    }
    assert_int_equal(runtime_init(&f->rt, f->pol.program, &fake_api), 0);
    f->before = *fake_counters();
    f->resident_before = fake_resident_bytes();
    fake_set_streams_busy(0);
    fake_set_busy_stream(NULL);
    fake_set_capturing(0);
    fake_set_card_full_at(0); /* a failed test may have left it set */
    fake_set_held_base();
    fake_set_vmm_hold(0);
    cudaSetDevice(0);
    return f;
}

/* The runtime leaves its CUDA handles to the end of the process (it makes no
 * CUDA call at exit); the fake's events are heap memory, released here. */
static void teardown(struct fixture *f)
{
    fake_release_runtime_events(&f->rt);
    runtime_destroy(&f->rt);
    policy_free(&f->pol);
    free(f);
}

/* Counter change since setup. */
#define DELTA(f, field) (fake_counters()->field - (f)->before.field)

static void *alloc(struct fixture *f, size_t size, unsigned api, cudaStream_t stream)
{
    void *p = NULL;
    bool handled = false;
    cudaError_t err = rt_alloc(&f->rt, &p, size, api, stream, &handled);
    assert_true(handled);
    assert_int_equal(err, cudaSuccess);
    assert_non_null(p);
    return p;
}

static void release(struct fixture *f, void *p, cudaStream_t stream, enum alloc_mode mode)
{
    cudaError_t err;
    assert_true(rt_free(&f->rt, p, stream, mode, &err));
    assert_int_equal(err, cudaSuccess);
}

/* What the runtime counts on GPU 0 is what the fake GPU holds since setup. */
static void assert_residency_exact(const struct fixture *f)
{
    assert_int_equal(f->rt.devices[0].resident_bytes, fake_resident_bytes() - f->resident_before);
}

/* Every pool's bin mask says which of its bins hold a free block. */
static void assert_bins_consistent(const struct fixture *f)
{
    for (size_t c = 0; c < f->rt.program->class_count; c++) {
        const struct pool *p = f->rt.devices[0].pools ? f->rt.devices[0].pools[c] : NULL;
        for (int k = 0; p && k < 2; k++)
            for (int i = 0; i < RT_BINS; i++)
                assert_int_equal(!!(p->bin_mask[k] >> i & 1), p->bins[k][i] != NULL);
    }
}

#define S1 ((cudaStream_t)0x100)
#define S2 ((cudaStream_t)0x200)

static const char basic_policy[] = "umpol 1;\n"
                                   "slab 4MiB;\n"
                                   "class hot { match size < 1MiB; advise read_mostly; place gpu;\n"
                                   "            access gpu, host; }\n"
                                   "class dev { match size >= 1MiB and size < 1GiB; memory device; }\n";

static void test_runtime_slab_advised_once(void **state)
{
    (void)state;
    struct fixture *f = setup(basic_policy);
    void *a = alloc(f, 1000, API_CUDA_MALLOC_ASYNC, S1);
    void *b = alloc(f, 2000, API_CUDA_MALLOC_ASYNC, S1);
    assert_int_equal(DELTA(f, malloc_managed), 1); /* one slab for both */
    assert_int_equal(DELTA(f, advise_read_mostly), 1);
    assert_int_equal(DELTA(f, advise_preferred), 1);
    assert_int_equal(DELTA(f, advise_accessed_by), 2);
    assert_true((uintptr_t)a % RT_ALIGN == 0 && (uintptr_t)b % RT_ALIGN == 0);
    assert_true((uintptr_t)b >= (uintptr_t)a + 1024 || (uintptr_t)a >= (uintptr_t)b + 2048);
    assert_int_equal(f->rt.class_stats[0].slabs, 1);
    assert_int_equal(f->rt.class_stats[0].allocations, 2);
    release(f, a, S1, MODE_STREAM);
    release(f, b, S1, MODE_STREAM);
    assert_int_equal(f->rt.class_stats[0].live_bytes, 0);
    teardown(f);
}

static void test_runtime_device_class_uses_cuda_malloc(void **state)
{
    (void)state;
    struct fixture *f = setup(basic_policy);
    void *a = alloc(f, 2u << 20, API_CUDA_MALLOC_ASYNC, S1);
    assert_int_equal(DELTA(f, malloc), 1);
    assert_int_equal(DELTA(f, malloc_managed), 0);
    assert_int_equal(DELTA(f, advise), 0);
    release(f, a, S1, MODE_STREAM);
    teardown(f);
}

/* memory host: pinned pages the GPU maps, never advised, prefetched, counted
 * against the budget or the managed cap; given back after the GPU's work. */
static void test_runtime_host_class_is_pinned(void **state)
{
    (void)state;
    struct fixture *f = setup("umpol 1;\nslab 4MiB;\nbudget gpu 1MiB;\n"
                              "class opt { match size >= 1MiB; memory host; place host near; }\n"
                              "class rest { match any; memory device; }\n");
    void *a = alloc(f, 3u << 20, API_CUDA_MALLOC, S1);
    memset(a, 0x5a, 3u << 20); /* the host can write it */
    assert_int_equal(DELTA(f, host_register), 1);
    assert_int_equal(DELTA(f, malloc_managed), 0);
    assert_int_equal(DELTA(f, malloc), 0);
    assert_int_equal(DELTA(f, advise) + DELTA(f, prefetch), 0);
    assert_int_equal(f->rt.devices[0].resident_bytes, 0);
    assert_int_equal(f->rt.devices[0].managed_bytes, 0);
    assert_int_equal(f->rt.class_stats[0].live_bytes, 3u << 20);
    release(f, a, S1, MODE_ANY);
    uint64_t syncs = fake_counters()->device_sync;
    assert_true(place_trim(&f->rt, -1, -1) >= (3u << 20));
    assert_int_equal(DELTA(f, host_unregister), 1);
    assert_true(fake_counters()->device_sync > syncs); /* waited before unpinning */
    teardown(f);
}

/* A pool on the card that must grow first gives back its empty slabs (they
 * could not serve the request): the card never holds them beside the new
 * one. Not while the stream is captured into a graph (a cudaFree would
 * invalidate the capture), nor for pinned host memory. */
static void test_runtime_grow_gives_back_empty_slabs(void **state)
{
    (void)state;
    for (int capturing = 0; capturing <= 1; capturing++) {
        struct fixture *f = setup("umpol 1;\nslab 4MiB;\n"
                                  "class acts { match any; memory managed; }\n");
        /* Stream-ordered allocations pass through while captured: cudaMalloc's are pooled. */
        unsigned api = capturing ? API_CUDA_MALLOC : API_CUDA_MALLOC_ASYNC;
        enum alloc_mode mode = capturing ? MODE_ANY : MODE_STREAM;
        f->rt.trace = calloc(1, sizeof *f->rt.trace); /* freed by runtime_destroy */
        assert_non_null(f->rt.trace);
        void *a = alloc(f, 3u << 20, api, S1); /* a slab of its own */
        release(f, a, S1, mode);
        fake_set_capturing(capturing);
        void *b = alloc(f, 9u << 20, api, S1); /* too large for it */
        fake_set_capturing(0);
        const struct class_stats *st = &f->rt.class_stats[0];
        assert_int_equal(DELTA(f, malloc_managed), 2);
        assert_int_equal(DELTA(f, free), capturing ? 0 : 1);
        assert_int_equal(st->slab_releases, capturing ? 0 : 1);
        assert_true(capturing ? f->rt.slab_release_ns == 0 : f->rt.slab_release_ns > 0);
        assert_true(f->rt.slab_grow_ns > 0); /* the report's times */
        assert_int_equal(st->slabs, capturing ? 2 : 1);
        assert_int_equal(st->slab_bytes, (capturing ? 4u << 20 : 0) + (10u << 20));
        assert_int_equal(st->slab_peak_bytes, (4u << 20) + (10u << 20) - (capturing ? 0 : 4u << 20));
        assert_int_equal(f->rt.devices[0].managed_bytes, st->slab_bytes);
        /* The trace says the second allocation made a slab, though one went first. */
        assert_int_equal(f->rt.trace->len, 3);
        assert_int_equal(f->rt.trace->events[2].op, 'a');
        assert_int_not_equal(f->rt.trace->events[2].growth, TRACE_NO_SLAB);
        release(f, b, S1, mode);
        teardown(f);
    }
    struct fixture *f = setup("umpol 1;\nslab 4MiB;\n"
                              "class opt { match any; memory host; }\n");
    void *a = alloc(f, 3u << 20, API_CUDA_MALLOC, S1);
    release(f, a, S1, MODE_ANY);
    void *b = alloc(f, 9u << 20, API_CUDA_MALLOC, S1);
    assert_int_equal(f->rt.class_stats[0].slab_releases, 0);
    assert_int_equal(DELTA(f, host_unregister), 0);
    release(f, b, S1, MODE_ANY);
    teardown(f);
}

/* `spare`: nothing while the job climbs to its peak; after it, device memory
 * up to the budget less that peak and the reserve, then the next class; a
 * block the card refuses goes to the next class too. */
static const char spare_policy[] =
    "umpol 1;\nbudget gpu 400MiB;\nslab 1MiB;\n"
    "class opt_gpu { match size == 24MiB and spare; memory device; }\n"
    "class opt { match size == 24MiB; memory host; }\n"
    "class acts { match any; memory device; }\n";

static const char movable_policy[] =
    "umpol 1;\nbudget gpu 200MiB;\nslab 64MiB;\n"
    "class states { match size >= 1MiB; memory movable;\n"
    "  prefetch host on enter \"optimizer*\"; prefetch gpu on exit \"optimizer*\"; }\n"
    "class rest { match any; memory device; }\n";

/* A pattern in every STRIDE-th word of N bytes at P, and its last word. */
static void fill_every(void *p, size_t n, unsigned seed, size_t stride)
{
    uint32_t *w = p;
    for (size_t i = 0; i < n / 4; i = i + stride < n / 4 || i == n / 4 - 1 ? i + stride : n / 4 - 1)
        w[i] = (uint32_t)i * 2654435761u ^ seed;
}

static bool filled_every(const void *p, size_t n, unsigned seed, size_t stride)
{
    const uint32_t *w = p;
    for (size_t i = 0; i < n / 4; i = i + stride < n / 4 || i == n / 4 - 1 ? i + stride : n / 4 - 1)
        if (w[i] != ((uint32_t)i * 2654435761u ^ seed))
            return false;
    return true;
}

static void fill(void *p, size_t n, unsigned seed)
{
    fill_every(p, n, seed, 1);
}

static bool filled(const void *p, size_t n, unsigned seed)
{
    return filled_every(p, n, seed, 1);
}

/* `memory movable`: whole slabs move between the GPU's memory and the host's
 * behind the job's pointers, the data kept, the card's memory given back, the
 * budget kept on the way in; a move that cannot be made leaves the data where
 * they are. */
/* While a stream is captured into a graph (its capture begun through the
 * interposed calls, on any stream), no slab is given back: a cudaFree or a
 * wait for the GPU would invalidate the capture. cudaMalloc carries no
 * stream, so its own stream cannot tell. */
static void test_runtime_no_release_in_capture(void **state)
{
    (void)state;
    struct fixture *f = setup("umpol 1;\nslab 4MiB;\nclass acts { match any; memory managed; }\n");
    void *a = alloc(f, 3u << 20, API_CUDA_MALLOC, 0);
    release(f, a, 0, MODE_ANY); /* an empty slab, which the next growth would give back */
    atomic_store(&f->rt.captures, 1);
    void *b = alloc(f, 9u << 20, API_CUDA_MALLOC, 0);
    assert_int_equal(DELTA(f, free), 0);
    atomic_store(&f->rt.captures, 0);
    release(f, b, 0, MODE_ANY);
    place_trim(&f->rt, -1, -1); /* after the capture, both go */
    assert_int_equal(DELTA(f, free), 2);
    teardown(f);
}

/* A placement that no eviction could make room for is skipped without
 * evicting anything: moving every block out first would gain nothing. */
static void test_runtime_no_futile_eviction(void **state)
{
    (void)state;
    struct fixture *f = setup("umpol 1;\nbudget gpu 3MiB;\nslab 8MiB;\n"
                              "class acts { match any; prefetch gpu on alloc; priority 5; }\n");
    for (int i = 0; i < 3; i++)
        alloc(f, 1u << 20, API_CUDA_MALLOC_ASYNC, S1);
    alloc(f, 4u << 20, API_CUDA_MALLOC_ASYNC, S1); /* larger than the budget */
    assert_int_equal(f->rt.class_stats[0].budget_skips, 1);
    assert_int_equal(f->rt.class_stats[0].evictions, 0);
    assert_int_equal(f->rt.devices[0].resident_bytes, 3u << 20);
    alloc(f, 2u << 20, API_CUDA_MALLOC_ASYNC, S1); /* room can be made: two leave */
    assert_int_equal(f->rt.class_stats[0].evictions, 2);
    assert_int_equal(f->rt.class_stats[0].budget_skips, 1);
    teardown(f);
}

static void test_runtime_movable(void **state)
{
    (void)state;
    const uint64_t MiB = 1u << 20;
    uint64_t vmm_before = fake_vmm_gpu_bytes();
    struct fixture *f = setup(movable_policy);
    const struct class_stats *st = f->rt.class_stats;
    const struct device_state *dev = &f->rt.devices[0];
    void *a = alloc(f, 100 * MiB, API_CUDA_MALLOC, S1); /* a dedicated slab: pieces of 64 + 36 */
    void *b = alloc(f, 10 * MiB, API_CUDA_MALLOC_ASYNC, S1); /* a 64 MiB slab */
    fill(a, 100 * MiB, 1);
    fill(b, 10 * MiB, 2);
    assert_int_equal(dev->resident_bytes, 164 * MiB);
    assert_int_equal(fake_vmm_gpu_bytes() - vmm_before, 164 * MiB);
    assert_int_equal(DELTA(f, malloc), 0); /* no plain device memory */

    phase_enter(&f->rt, "optimizer.step"); /* all to the host */
    assert_int_equal(dev->resident_bytes, 0);
    assert_int_equal(fake_vmm_gpu_bytes() - vmm_before, 0); /* the card has it back */
    assert_int_equal(st[0].movable_to_host_bytes, 164 * MiB);
    assert_int_equal(DELTA(f, memcpy_bytes_to_host), 164 * MiB);
    assert_true(filled(a, 100 * MiB, 1) && filled(b, 10 * MiB, 2));
    fill(a, 100 * MiB, 3); /* written where it lies, as the GPU would over the link */
    phase_exit(&f->rt); /* all back */
    assert_int_equal(dev->resident_bytes, 164 * MiB);
    assert_int_equal(fake_vmm_gpu_bytes() - vmm_before, 164 * MiB);
    assert_int_equal(st[0].movable_to_gpu_bytes, 164 * MiB);
    assert_true(filled(a, 100 * MiB, 3) && filled(b, 10 * MiB, 2));

    /* The budget: a new slab without room starts on the host, and a move to
     * the GPU takes whole pieces while they fit. */
    void *c = alloc(f, 60 * MiB, API_CUDA_MALLOC, S1);
    fill(c, 60 * MiB, 4);
    assert_int_equal(dev->resident_bytes, 164 * MiB);
    phase_enter(&f->rt, "optimizer.step");
    phase_exit(&f->rt);
    assert_true(dev->resident_bytes <= 200 * MiB);
    assert_int_equal(dev->resident_bytes, 188 * MiB); /* 60 + 64 + 64; 36 left */
    assert_int_equal(fake_vmm_gpu_bytes() - vmm_before, dev->resident_bytes);
    assert_int_equal(st[0].movable_budget_left, 36 * MiB); /* of the pieces it would move */
    assert_true(filled(a, 100 * MiB, 3) && filled(b, 10 * MiB, 2) && filled(c, 60 * MiB, 4));

    /* The GPU has no memory for the way back: everything stays on the host. */
    phase_enter(&f->rt, "optimizer.step");
    fake_set_vmm_create_fails_after(0);
    phase_exit(&f->rt);
    fake_set_vmm_create_fails_after(-1);
    assert_int_equal(dev->resident_bytes, 0);
    assert_int_equal(fake_vmm_gpu_bytes() - vmm_before, 0);
    assert_true(filled(a, 100 * MiB, 3) && filled(b, 10 * MiB, 2) && filled(c, 60 * MiB, 4));
    phase_enter(&f->rt, "optimizer.step");
    phase_exit(&f->rt);
    assert_int_equal(dev->resident_bytes, 188 * MiB);

    /* A remap refused on the way out: the piece goes back to its GPU memory and
     * the move stops there, every piece mapped and counted where it is. */
    fake_set_vmm_map_fails(0, 1);
    phase_enter(&f->rt, "optimizer.step");
    assert_int_equal(dev->resident_bytes, fake_vmm_gpu_bytes() - vmm_before);
    assert_true(dev->resident_bytes > 0);
    assert_true(filled(a, 100 * MiB, 3) && filled(b, 10 * MiB, 2) && filled(c, 60 * MiB, 4));
    phase_exit(&f->rt);
    phase_enter(&f->rt, "optimizer.step"); /* the next move is whole again */
    assert_int_equal(dev->resident_bytes, 0);
    assert_int_equal(fake_vmm_gpu_bytes() - vmm_before, 0);
    /* Refused both ways: that piece stays unmapped (the error is logged), and
     * its slab neither moves nor hands out free space until the piece is mapped
     * again; the others still move, their data intact. */
    fake_set_vmm_map_fails(1, 3); /* the first slab's stage map; its remap, back, and repair */
    phase_exit(&f->rt);
    assert_int_equal(dev->resident_bytes, fake_vmm_gpu_bytes() - vmm_before);
    const struct slab *lost = NULL;
    int lost_slabs = 0;
    for (const struct slab *sl = f->rt.devices[0].pools[0]->slabs; sl; sl = sl->next)
        if (((const struct movable *)sl->backing)->lost) {
            lost = sl;
            lost_slabs++;
        }
    assert_int_equal(lost_slabs, 1);
    assert_true(lost->quarantined);
    assert_true(filled(a, 100 * MiB, 3) && filled(b, 10 * MiB, 2)); /* c's piece is unmapped */
    assert_int_equal(dev->resident_bytes, 164 * MiB);
    fake_set_vmm_map_fails(-1, 0);
    void *d = alloc(f, 2 * MiB, API_CUDA_MALLOC, S1); /* never in the unmapped piece */
    assert_ptr_not_equal(map_find(&f->rt.map, (uintptr_t)d)->slab, lost);
    release(f, d, S1, MODE_ANY);
    /* The slab's next move maps the piece again first: its data is all there. */
    phase_enter(&f->rt, "optimizer.step");
    assert_int_equal(((const struct movable *)lost->backing)->lost, 0);
    assert_false(lost->quarantined);
    assert_true(filled(a, 100 * MiB, 3) && filled(b, 10 * MiB, 2) && filled(c, 60 * MiB, 4));
    assert_int_equal(dev->resident_bytes, fake_vmm_gpu_bytes() - vmm_before);
    phase_exit(&f->rt);

    release(f, a, S1, MODE_ANY);
    release(f, b, S1, MODE_STREAM);
    release(f, c, S1, MODE_ANY);
    place_trim(&f->rt, -1, -1);
    assert_int_equal(dev->resident_bytes, 0);
    assert_int_equal(fake_vmm_gpu_bytes(), vmm_before);
    assert_int_equal(st[0].slabs, 0);
    teardown(f);

    /* A slab made inside a phase whose rule sends the class to the host
     * starts there, and the rule on leaving the phase brings it in. */
    f = setup(movable_policy);
    phase_enter(&f->rt, "optimizer.step");
    a = alloc(f, 10 * MiB, API_CUDA_MALLOC, S1);
    assert_int_equal(f->rt.devices[0].resident_bytes, 0);
    assert_int_equal(fake_vmm_gpu_bytes(), vmm_before);
    phase_exit(&f->rt);
    assert_int_equal(f->rt.devices[0].resident_bytes, 64 * MiB);
    assert_int_equal(fake_vmm_gpu_bytes() - vmm_before, 64 * MiB);
    release(f, a, S1, MODE_ANY);
    place_trim(&f->rt, -1, -1);
    teardown(f);

    /* Without the driver's virtual memory calls: plain device memory. */
    fake_set_vmm_off(1);
    f = setup(movable_policy);
    a = alloc(f, 10 * MiB, API_CUDA_MALLOC, S1);
    assert_int_equal(DELTA(f, malloc), 1);
    uint64_t held = f->rt.class_stats[0].slab_bytes;
    assert_int_equal(f->rt.devices[0].resident_bytes, held);
    phase_enter(&f->rt, "optimizer.step"); /* nothing to move */
    phase_exit(&f->rt);
    assert_int_equal(f->rt.devices[0].resident_bytes, held);
    release(f, a, S1, MODE_ANY);
    place_trim(&f->rt, -1, -1);
    assert_int_equal(f->rt.devices[0].resident_bytes, 0);
    teardown(f);
    fake_set_vmm_off(0);

    /* The card's own figure, sampled as phases open: its peak above what it
     * held when the runtime first saw the GPU, and umpol's count then. */
    f = setup(movable_policy);
    a = alloc(f, 10 * MiB, API_CUDA_MALLOC, S1);
    fake_set_other_used(3ull << 30);
    phase_enter(&f->rt, "optimizer.step"); /* sampled before the move */
    phase_exit(&f->rt);
    fake_set_other_used(0);
    const struct device_state *d0 = &f->rt.devices[0];
    assert_int_equal(d0->card_peak_used - d0->card_base_used, (3ull << 30) + 64 * MiB);
    assert_int_equal(d0->card_resident_at_peak, 64 * MiB);
    assert_true(d0->card_samples >= 1);
    release(f, a, S1, MODE_ANY);
    place_trim(&f->rt, -1, -1);
    teardown(f);

    /* A GPU without host memory at reserved ranges, and movable memory that
     * cannot be made (pinned memory short): plain device memory, the job
     * served either way. */
    for (int round = 0; round < 2; round++) {
        fake_set_vmm_unsupported(round == 0);
        fake_set_vmm_create_fails_after(round == 1 ? 0 : -1);
        f = setup(movable_policy);
        a = alloc(f, 10 * MiB, API_CUDA_MALLOC, S1);
        assert_int_equal(DELTA(f, malloc), 1);
        assert_null(f->rt.devices[0].pools[0]->slabs->backing);
        fill(a, 10 * MiB, 5);
        phase_enter(&f->rt, "optimizer.step");
        assert_true(filled(a, 10 * MiB, 5));
        phase_exit(&f->rt);
        release(f, a, S1, MODE_ANY);
        place_trim(&f->rt, -1, -1);
        assert_int_equal(f->rt.devices[0].resident_bytes, 0);
        teardown(f);
    }
    fake_set_vmm_unsupported(0);
    fake_set_vmm_create_fails_after(-1);
}

/* Movable memory under a budget's pressure: a lower-priority movable slab
 * sends whole pieces to the host for a managed block that needs the room
 * (the card gets them back, the data stay), a prefetch rule brings them
 * back into freed space, and none leaves while a stream capture is in
 * progress. A new slab of device memory sends them out alike. */
static const char movable_pressure_policy[] =
    "umpol 1;\nbudget gpu 200MiB;\nslab 64MiB;\n"
    "class weights { match size >= 32MiB; memory movable; priority 20;\n"
    "  prefetch gpu on enter \"forward*\"; }\n"
    "class acts { match size >= 1MiB; place gpu; prefetch gpu on alloc; priority 50; }\n"
    "class rest { match any; memory device; }\n";

static const char movable_device_policy[] =
    "umpol 1;\nbudget gpu 200MiB;\nslab 64MiB;\n"
    "class weights { match size >= 100MiB; memory movable; priority 20; }\n"
    "class acts { match any; memory device; priority 50; }\n";

/* Weights that only the budget sends out, brought back at each forward
 * pass's start; activations in slabs of their own. */
static const char movable_return_policy[] =
    "umpol 1;\nbudget gpu 200MiB;\nslab 16MiB;\n"
    "class weights { match size >= 100MiB; memory movable; priority 20;\n"
    "  prefetch gpu on enter \"forward*\"; }\n"
    "class acts { match any; memory device; priority 50; }\n";

/* `stream written` under a budget of BUDGET: weights made in "init", all on
 * the host, and the optimizer ("opt") the only phase that writes. */
#define STREAM_POLICY(budget)                                                                 \
    "umpol 1;\nbudget gpu " budget ";\nslab 64MiB;\n"                                          \
    "class weights { match phase \"init\" and size >= 32MiB; memory movable; place host;\n"    \
    "  stream written \"opt*\"; priority 20; }\n"                                               \
    "class acts { match any; memory device; priority 50; }\n"

/* Six weights of one piece each under a budget of three pieces. */
static const char stream_policy[] = STREAM_POLICY("192MiB");

/* What the fake GPU holds since setup, device memory and movable pieces'
 * GPU memory (VMM_BEFORE: the latter's bytes at setup). */
static uint64_t card_holds(const struct fixture *f, uint64_t vmm_before)
{
    return fake_vmm_gpu_bytes() - vmm_before + fake_resident_bytes() - f->resident_before;
}

/* The bytes of movable pieces the job's ranges map on the GPU. */
static uint64_t mapped_on_gpu(struct fixture *f)
{
    uint64_t n = 0;
    const struct pool *p = f->rt.devices[0].pools[0];
    for (const struct slab *s = p ? p->slabs : NULL; s; s = s->next)
        n += ((const struct movable *)s->backing)->gpu_bytes;
    return n;
}

/* Does the job's range of the one-piece weight W map GPU memory? */
static bool piece_on_gpu(struct fixture *f, void *w)
{
    struct block *b = map_find(&f->rt.map, (uintptr_t)w);
    return ((const struct movable *)b->slab->backing)->gpu[0] != 0;
}

/* A use of W announced, and the remaps it handed to the runtime's thread
 * made and applied, so what follows does not depend on that thread's pace. */
static void use_one(struct fixture *f, void *w)
{
    const void *ptrs[1] = {w};
    rt_use(&f->rt, ptrs, 1, S1);
    stream_settle(&f->rt);
}

static void test_runtime_stream_ahead(void **state)
{
    (void)state;
    const uint64_t MiB = 1u << 20;
    enum { N = 6 };
    uint64_t vmm_before = fake_vmm_gpu_bytes();
    struct fixture *f = setup(stream_policy);
    const struct class_stats *st = &f->rt.class_stats[0];
    const struct device_state *dev = &f->rt.devices[0];
#define ASSERT_STREAM_COUNTED()                                                               \
    do {                                                                                      \
        stream_settle(&f->rt); /* the remaps handed over are made */                         \
        assert_int_equal(dev->resident_bytes, card_holds(f, vmm_before));                     \
        assert_true(dev->resident_bytes <= 192 * MiB);                                       \
    } while (0)
    void *w[N];
    phase_enter(&f->rt, "init");
    for (int i = 0; i < N; i++) {
        w[i] = alloc(f, 64 * MiB, API_CUDA_MALLOC, S1);
        fill(w[i], 64 * MiB, 1 + i);
    }
    phase_exit(&f->rt);
    assert_int_equal(fake_vmm_gpu_bytes() - vmm_before, 0); /* `place host` */

    /* The first cycle is only learned: every use reads over the link. */
    for (int i = 0; i < N; i++)
        use_one(f, w[i]);
    assert_int_equal(st->stream_uses, N);
    assert_int_equal(st->stream_late_bytes, N * 64 * MiB);
    assert_int_equal(fake_vmm_gpu_bytes() - vmm_before, 0);
    phase_enter(&f->rt, "opt.step"); /* written where they lie: on the host */
    for (int i = 0; i < N; i++)
        fill(w[i], 64 * MiB, 10 + i);
    phase_exit(&f->rt);

    /* From the second on, the next uses' pieces come ahead, within the
     * budget, and those used leave with no copy once the GPU is past them. */
    uint64_t to_host = DELTA(f, memcpy_bytes_to_host);
    fake_set_busy_stream(dev->fetch_stream); /* the copies in are not done yet */
    use_one(f, w[0]);
    assert_int_equal(st->stream_fetch_bytes, 3 * 64 * MiB); /* w1..w3: the budget's room */
    assert_int_equal(mapped_on_gpu(f), 0); /* a copy writes through the stage: no remap yet */
    ASSERT_STREAM_COUNTED();
    fake_set_busy_stream(NULL);
    use_one(f, w[1]);
    assert_int_equal(mapped_on_gpu(f), 3 * 64 * MiB);
    ASSERT_STREAM_COUNTED();
    for (int i = 2; i < N; i++) {
        use_one(f, w[i]);
        ASSERT_STREAM_COUNTED();
    }
    assert_true(st->stream_ready_bytes >= 3 * 64 * MiB);
    assert_true(st->stream_drop_bytes > 0);
    assert_int_equal(DELTA(f, memcpy_bytes_to_host), to_host); /* dropped, not copied */
    for (int i = 0; i < N; i++)
        assert_true(filled(w[i], 64 * MiB, 10 + i));

    /* While the GPU has not finished the work queued at a piece's last use,
     * that piece is not remapped, whatever comes next (copies may start). */
    fake_set_busy_stream(S1); /* the job's stream; the runtime's copies are done */
    bool kept[N];
    int held = 0;
    for (int i = 0; i < N; i++) {
        use_one(f, w[i]);
        kept[i] = piece_on_gpu(f, w[i]);
        held += kept[i];
        ASSERT_STREAM_COUNTED();
    }
    assert_true(held > 0);
    for (int i = 0; i < N; i++) /* on the GPU at its use: still there */
        assert_true(!kept[i] || piece_on_gpu(f, w[i]));
    fake_set_busy_stream(NULL);
    use_one(f, w[0]);
    ASSERT_STREAM_COUNTED();

    /* A write phase: pieces on their way in are given up; the writes land
     * where each piece lies, and the pieces the stream brought are copied
     * back after it, so that they can leave later with no copy and no loss. */
    void *tmp = alloc(f, 16 * MiB, API_CUDA_MALLOC, S1); /* an empty slab of device memory */
    release(f, tmp, S1, MODE_ANY); /* (too small to be given back for the stream) */
    ASSERT_STREAM_COUNTED();
    phase_enter(&f->rt, "opt.step");
    uint64_t streamed_on_gpu = mapped_on_gpu(f);
    assert_true(streamed_on_gpu > 0);
    ASSERT_STREAM_COUNTED();
    for (int i = 0; i < N; i++)
        fill(w[i], 64 * MiB, 20 + i);
    to_host = DELTA(f, memcpy_bytes_to_host);
    phase_exit(&f->rt);
    assert_int_equal(DELTA(f, memcpy_bytes_to_host) - to_host, streamed_on_gpu);
    assert_int_equal(st->stream_save_bytes, streamed_on_gpu);
    assert_int_equal(f->rt.class_stats[1].slab_releases, 0); /* it stays */
    ASSERT_STREAM_COUNTED();
    /* Until the runtime's copies are done nothing is remapped: neither a
     * piece brought in (its copy writes through the stage) nor one copied back. */
    fake_set_busy_stream(dev->fetch_stream);
    uint64_t mapped = mapped_on_gpu(f);
    for (int i = 0; i < N; i++)
        use_one(f, w[i]);
    assert_int_equal(mapped_on_gpu(f), mapped);
    ASSERT_STREAM_COUNTED();
    fake_set_busy_stream(NULL);
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < N; i++) {
            use_one(f, w[i]);
            ASSERT_STREAM_COUNTED();
        }
    for (int i = 0; i < N; i++)
        assert_true(filled(w[i], 64 * MiB, 20 + i));

    /* A use the learned cycle does not have predicts nothing, and says so. */
    phase_enter(&f->rt, "init");
    void *stray = alloc(f, 64 * MiB, API_CUDA_MALLOC, S1);
    phase_exit(&f->rt);
    uint64_t unlearned = st->stream_unlearned;
    use_one(f, stray);
    assert_int_equal(st->stream_unlearned, unlearned + 1);
    release(f, stray, S1, MODE_ANY);

    /* A budget move takes the streamed pieces first, with no copy. */
    to_host = DELTA(f, memcpy_bytes_to_host);
    void *a = alloc(f, 128 * MiB, API_CUDA_MALLOC, S1);
    assert_true(dev->resident_bytes <= 192 * MiB);
    assert_int_equal(DELTA(f, memcpy_bytes_to_host), to_host);
    release(f, a, S1, MODE_ANY);
    stream_settle(&f->rt); /* (the CPU reads the pieces here, unannounced) */
    for (int i = 0; i < N; i++) {
        assert_true(filled(w[i], 64 * MiB, 20 + i));
        release(f, w[i], S1, MODE_ANY);
    }
    place_trim(&f->rt, -1, -1);
    assert_int_equal(fake_vmm_gpu_bytes(), vmm_before);
    assert_int_equal(dev->resident_bytes, 0);
#undef ASSERT_STREAM_COUNTED
    teardown(f);
}

/* Six weights made in "init" under POLICY (w[1] of 32 MiB, leaving room in
 * its slab, the rest of 64), one cycle of their uses learned (in the order
 * ORDER gives, else as made), and a write phase ended. */
enum { STREAM_N = 6 };

static struct fixture *stream_learned_in(const char *policy, const int *order, void *w[STREAM_N])
{
    const uint64_t MiB = 1u << 20;
    struct fixture *f = setup(policy);
    phase_enter(&f->rt, "init");
    for (int i = 0; i < STREAM_N; i++) {
        w[i] = alloc(f, (i == 1 ? 32 : 64) * MiB, API_CUDA_MALLOC, S1);
        fill(w[i], (i == 1 ? 32 : 64) * MiB, 1 + i);
    }
    phase_exit(&f->rt);
    for (int k = 0; k < STREAM_N; k++)
        use_one(f, w[order ? order[k] : k]);
    phase_enter(&f->rt, "opt.step");
    phase_exit(&f->rt);
    return f;
}

static struct fixture *stream_learned_under(const char *policy, void *w[STREAM_N])
{
    return stream_learned_in(policy, NULL, w);
}

static struct fixture *stream_learned(void *w[STREAM_N])
{
    return stream_learned_under(stream_policy, w);
}

/* Every weight of stream_learned still holds what it was made with. */
static void assert_weights_as_made(void *w[STREAM_N])
{
    for (int i = 0; i < STREAM_N; i++)
        assert_true(filled(w[i], (i == 1 ? 32u : 64u) << 20, 1 + i));
}

/* Every weight freed, the slabs given back, nothing left counted. */
static void stream_done(struct fixture *f, void *w[STREAM_N])
{
    for (int i = 0; i < STREAM_N; i++)
        release(f, w[i], S1, MODE_ANY);
    place_trim(&f->rt, -1, -1);
    assert_int_equal(f->rt.devices[0].resident_bytes, 0);
    teardown(f);
}

/* A 32 MiB block of the weights made now in the free half of W's piece,
 * and written (fill SEED). */
static void *new_block_beside(struct fixture *f, void *w, unsigned seed)
{
    phase_enter(&f->rt, "init");
    void *x = alloc(f, 32u << 20, API_CUDA_MALLOC, S1);
    phase_exit(&f->rt);
    assert_ptr_equal(map_find(&f->rt.map, (uintptr_t)x)->slab,
                     map_find(&f->rt.map, (uintptr_t)w)->slab); /* the same piece */
    fill(x, 32u << 20, seed);
    return x;
}

/* A block carved, outside the write phases, from a piece the stream brought
 * in is written by the job: that piece no longer leaves without a copy. */
static void test_runtime_stream_new_block_in_clean_piece(void **state)
{
    (void)state;
    const uint64_t MiB = 1u << 20;
    void *w[STREAM_N];
    struct fixture *f = stream_learned(w);
    use_one(f, w[0]); /* w1's piece comes in, clean */
    assert_true(piece_on_gpu(f, w[1]));
    void *x = new_block_beside(f, w[1], 99);
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < STREAM_N; i++)
            use_one(f, w[i]);
    assert_true(filled(x, 32 * MiB, 99));
    assert_true(filled(w[1], 32 * MiB, 2));
    release(f, x, S1, MODE_ANY);
    stream_done(f, w);
}

/* The optimizer's step in backward writes one parameter at a time outside
 * the write phases, announcing each (umpol_written): the piece the stream
 * brought keeps the write when it leaves, and is clean again once the next
 * write phase has copied it back. The control: the same write unannounced is
 * lost when its piece leaves (the promise `stream written` makes). */
static void test_runtime_stream_written_outside_phases(void **state)
{
    (void)state;
    const uint64_t MiB = 1u << 20;
    void *w[STREAM_N];
    struct fixture *f = stream_learned(w);
    use_one(f, w[0]); /* w1's and w2's pieces come in, clean */
    assert_true(piece_on_gpu(f, w[1]) && piece_on_gpu(f, w[2]));
    const void *p[1] = {w[1]};
    rt_written(&f->rt, p, 1);
    fill(w[1], 32 * MiB, 77);
    fill(w[2], 64 * MiB, 78); /* unannounced */
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < STREAM_N; i++)
            use_one(f, w[i]);
    assert_true(filled(w[1], 32 * MiB, 77));
    assert_true(filled(w[2], 64 * MiB, 3)); /* the control: its write was lost */
    struct movable *mv1 = map_find(&f->rt.map, (uintptr_t)w[1])->slab->backing;
    assert_false(mv1->clean[0]);
    phase_enter(&f->rt, "opt.step");
    phase_exit(&f->rt);
    stream_settle(&f->rt);
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < STREAM_N; i++)
            use_one(f, w[i]);
    assert_true(filled(w[1], 32 * MiB, 77));
    stream_done(f, w);
}

/* The same with the piece on its way in when the block is handed out: the
 * copy begun before the block's writes is never mapped. */
static void test_runtime_stream_new_block_in_incoming_piece(void **state)
{
    (void)state;
    const uint64_t MiB = 1u << 20;
    void *w[STREAM_N];
    struct fixture *f = stream_learned(w);
    fake_set_busy_stream(S1); /* the GPU is not past the writes: nothing is remapped */
    use_one(f, w[0]);
    struct block *wb = map_find(&f->rt.map, (uintptr_t)w[1]);
    assert_true(((const struct movable *)wb->slab->backing)->incoming[0] != 0);
    void *x = new_block_beside(f, w[1], 77);
    fake_set_busy_stream(NULL);
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < STREAM_N; i++) {
            use_one(f, w[i]);
            assert_true(filled(x, 32 * MiB, 77));
        }
    fill(x, 32 * MiB, 78);
    for (int i = 0; i < STREAM_N; i++)
        use_one(f, w[i]);
    assert_true(filled(x, 32 * MiB, 78));
    assert_true(filled(w[1], 32 * MiB, 2));
    release(f, x, S1, MODE_ANY);
    stream_done(f, w);
}

/* A helper thread that lets the held remaps be made once the test's thread
 * blocks for them (the mover's count of waits grows), or after 10 s where it
 * never does. hold_release_join says whether the call blocked: an order, not
 * a duration, so a busy machine that stalls the test's thread anywhere can
 * fail no check. */
struct hold_release {
    pthread_t thread;
    struct mover *mover;
    uint64_t waits; /* the mover's count when started */
};

static void *release_hold_once_waited(void *arg)
{
    struct hold_release *h = arg;
    for (int k = 0; k < 10000 && atomic_load(&h->mover->worker.waits) == h->waits; k++)
        usleep(1000);
    fake_set_vmm_hold(0);
    return NULL;
}

static void hold_release_start(struct hold_release *h, struct fixture *f)
{
    h->mover = &f->rt.mover;
    h->waits = atomic_load(&h->mover->worker.waits);
    assert_int_equal(pthread_create(&h->thread, NULL, release_hold_once_waited, h), 0);
}

static bool hold_release_join(struct hold_release *h)
{
    assert_int_equal(pthread_join(h->thread, NULL), 0);
    return atomic_load(&h->mover->worker.waits) > h->waits;
}

/* Until the runtime's thread waits in a cuMemSetAccess held since BEFORE. */
static void wait_held(unsigned long before)
{
    for (int k = 0; k < 30000 && fake_vmm_held_calls() == before; k++) /* 30 s at most */
        usleep(1000);
    assert_true(fake_vmm_held_calls() > before);
}

/* Where the next pieces find no room under the budget and a slab of device
 * memory of STREAM_ROOM_SLAB or more is empty (a loss's logits, past a
 * step's peak), that slab is given back and the pieces come in; smaller
 * empty slabs stay (the backward pass's gradients fill them again). */
static void test_runtime_stream_room_from_empty_slab(void **state)
{
    (void)state;
    const uint64_t MiB = 1u << 20;
    uint64_t vmm_before = fake_vmm_gpu_bytes();
    void *w[STREAM_N];
    struct fixture *f = stream_learned_under(STREAM_POLICY("448MiB"), w);
    void *small = alloc(f, 16 * MiB, API_CUDA_MALLOC, S1); /* a regular slab */
    void *big = alloc(f, 256 * MiB, API_CUDA_MALLOC, S1);  /* a slab of its own, large */
    release(f, small, S1, MODE_ANY);
    release(f, big, S1, MODE_ANY); /* their slabs stay, empty */
    assert_int_equal(f->rt.devices[0].resident_bytes, 320 * MiB);
    uint64_t releases = f->rt.class_stats[1].slab_releases;
    use_one(f, w[0]); /* w1..w5 next: 320 MiB */
    assert_int_equal(f->rt.class_stats[1].slab_releases, releases + 1);
    assert_int_equal(mapped_on_gpu(f), 320 * MiB);
    assert_int_equal(f->rt.devices[0].resident_bytes, card_holds(f, vmm_before));
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < STREAM_N; i++)
            use_one(f, w[i]);
    assert_weights_as_made(w);
    stream_done(f, w);
}

/* Where the next piece has no room, of the pieces the stream brought that
 * the GPU is done with, the one whose next use in the cycle is farthest
 * leaves, and only as many as the room needs. */
static void test_runtime_stream_drops_farthest(void **state)
{
    (void)state;
    const uint64_t MiB = 1u << 20;
    void *w[STREAM_N];
    struct fixture *f = stream_learned_under(STREAM_POLICY("256MiB"), w);
    use_one(f, w[0]); /* w1..w4 come in: the budget's 256 MiB */
    for (int i = 1; i <= 4; i++)
        assert_true(piece_on_gpu(f, w[i]));
    fake_set_busy_stream(S1); /* the GPU is not past w1 and w2: they cannot leave yet */
    use_one(f, w[1]);
    use_one(f, w[2]);
    assert_true(piece_on_gpu(f, w[1]) && piece_on_gpu(f, w[2]));
    fake_set_busy_stream(NULL);
    use_one(f, w[3]); /* w5 needs room: w2, next used after w1, leaves */
    assert_true(piece_on_gpu(f, w[1]));
    assert_false(piece_on_gpu(f, w[2]));
    assert_true(piece_on_gpu(f, w[3]) && piece_on_gpu(f, w[4]));
    use_one(f, w[4]); /* into the room w2 left */
    assert_true(piece_on_gpu(f, w[5]));
    assert_true(f->rt.devices[0].resident_bytes <= 256 * MiB);
    assert_weights_as_made(w);
    stream_done(f, w);
}

/* A drop still being made on the runtime's thread counts as room to come:
 * the next use that finds no room yet does not drop another piece for it. */
static void test_runtime_stream_drops_once_while_leaving(void **state)
{
    (void)state;
    const uint64_t MiB = 1u << 20;
    void *w[STREAM_N];
    struct fixture *f = stream_learned_under(STREAM_POLICY("256MiB"), w);
    const struct class_stats *st = &f->rt.class_stats[0];
    use_one(f, w[0]); /* w1..w4 come in: the budget's 256 MiB */
    use_one(f, w[1]);
    unsigned long held = fake_vmm_held_calls();
    fake_set_vmm_hold(1);
    const void *p[1] = {w[2]};
    rt_use(&f->rt, p, 1, S1); /* w1 leaves for w5: its remap held on the thread */
    wait_held(held);
    assert_int_equal(st->stream_drop_bytes, 64 * MiB);
    p[0] = w[3];
    rt_use(&f->rt, p, 1, S1); /* still no room for w5, but w1's is on its way */
    assert_int_equal(st->stream_drop_bytes, 64 * MiB);
    assert_true(piece_on_gpu(f, w[2]));
    fake_set_vmm_hold(0);
    stream_settle(&f->rt);
    use_one(f, w[4]); /* w5 comes into w1's room */
    assert_true(piece_on_gpu(f, w[5]));
    assert_int_equal(f->rt.devices[0].resident_bytes, 256 * MiB);
    assert_weights_as_made(w);
    stream_done(f, w);
}


/* The step's plan keeps to the stream most of its blocks come on (here the
 * default stream, whose handle is 0): a block on a side stream goes to the
 * pool. A planned block freed on another stream leaves its pages to the next
 * block only after the arena's stream has been made to follow that stream's
 * work. */
static void test_runtime_step_plan_streams(void **state)
{
    (void)state;
    struct fixture *f = setup("umpol 1;\nslab 4MiB;\nlearn step \"forward\";\n"
                              "class acts { match any; memory device; }\n");
    const struct class_stats *st = &f->rt.class_stats[0];
    const size_t MiB = 1u << 20;
    const cudaStream_t main_stream = (cudaStream_t)0;
    for (int step = 0; step < 5; step++) {
        uint64_t planned = st->planned_allocations, misses = st->plan_misses;
        phase_enter(&f->rt, "forward");
        void *side = alloc(f, 4 * MiB, API_CUDA_MALLOC_ASYNC, S2); /* first, on a side stream */
        void *a = alloc(f, 8 * MiB, API_CUDA_MALLOC_ASYNC, main_stream);
        void *b = alloc(f, 6 * MiB, API_CUDA_MALLOC_ASYNC, main_stream);
        fill(b, 6 * MiB, 7);
        release(f, side, S2, MODE_STREAM);
        uint64_t waits = DELTA(f, stream_wait);
        release(f, a, S2, MODE_STREAM); /* used last on the side stream */
        void *c = alloc(f, 8 * MiB, API_CUDA_MALLOC_ASYNC, main_stream); /* a's place */
        if (step >= 2) {
            assert_ptr_equal(c, a);
            assert_true(DELTA(f, stream_wait) > waits); /* the main stream follows S2 first */
        }
        fill(c, 8 * MiB, 8);
        assert_true(filled(b, 6 * MiB, 7));
        release(f, b, main_stream, MODE_STREAM);
        assert_true(filled(c, 8 * MiB, 8));
        release(f, c, main_stream, MODE_STREAM);
        phase_exit(&f->rt);
        if (step >= 2) {
            assert_int_equal(st->planned_allocations - planned, 3);
            assert_int_equal(st->plan_misses - misses, 0); /* the side block was never planned */
        }
    }
    assert_int_equal(st->plan_bytes, 14 * MiB);
    teardown(f);
}

/* Blocks on cudaStreamPerThread are never planned: a plan's pages go from
 * block to block on its arena's one stream with no wait, and that handle
 * names another stream in every thread. The same step on a stream of its
 * own is planned. */
static void test_runtime_step_plan_not_per_thread(void **state)
{
    (void)state;
    const size_t MiB = 1u << 20;
    const cudaStream_t streams[2] = {cudaStreamPerThread, S1};
    for (int k = 0; k < 2; k++) {
        struct fixture *f = setup("umpol 1;\nslab 4MiB;\nlearn step \"forward\";\n"
                                  "class acts { match any; memory device; }\n");
        const struct class_stats *st = &f->rt.class_stats[0];
        for (int step = 0; step < 5; step++) {
            phase_enter(&f->rt, "forward");
            void *a = alloc(f, 8 * MiB, API_CUDA_MALLOC_ASYNC, streams[k]);
            void *b = alloc(f, 6 * MiB, API_CUDA_MALLOC_ASYNC, streams[k]);
            release(f, a, streams[k], MODE_STREAM);
            release(f, b, streams[k], MODE_STREAM);
            phase_exit(&f->rt);
        }
        if (k == 0) {
            assert_int_equal(st->planned_allocations, 0);
            assert_int_equal(st->plan_bytes, 0);
        } else {
            assert_true(st->planned_allocations > 0);
        }
        teardown(f);
    }
}

/* A step that changes (other sizes, as an evaluation or a new sequence
 * length would bring): the arena that served nothing in a step is given
 * back, and once the new step repeats, a plan of its own is made. */
static void test_runtime_step_plan_follows_a_new_step(void **state)
{
    (void)state;
    struct fixture *f = setup("umpol 1;\nslab 4MiB;\nlearn step \"forward\";\n"
                              "class acts { match any; memory device; }\n");
    const struct class_stats *st = &f->rt.class_stats[0];
    const size_t MiB = 1u << 20;
    for (int step = 0; step < 10; step++) {
        size_t unit = step < 4 ? MiB : 3 * MiB;
        phase_enter(&f->rt, "forward");
        void *a = alloc(f, 4 * unit, API_CUDA_MALLOC_ASYNC, S1);
        void *b = alloc(f, 2 * unit, API_CUDA_MALLOC_ASYNC, S1);
        release(f, a, S1, MODE_STREAM);
        void *c = alloc(f, 3 * unit, API_CUDA_MALLOC_ASYNC, S1);
        release(f, b, S1, MODE_STREAM);
        release(f, c, S1, MODE_STREAM);
        phase_exit(&f->rt);
        if (step == 3 || step == 4) /* a and b at once; step 4 had nothing planned */
            assert_int_equal(st->plan_bytes, 6 * MiB);
        /* Step 5 began: the arena that served nothing was given back, and step 4
         * (its phases as before, its three allocations passed over by the step
         * model: a repeat) laid out the new plan, whose arena step 5 made. */
        if (step == 5) {
            assert_int_equal(st->plans_made, 2);
            assert_int_equal(st->plan_bytes, 18 * MiB);
        }
    }
    assert_int_equal(st->plans_made, 2);
    assert_int_equal(st->plan_bytes, 18 * MiB);
    /* The new arena and nothing of the old one: the pool's slabs are empty and given back. */
    assert_int_equal(f->rt.devices[0].resident_bytes, st->slab_bytes);
    assert_int_equal(st->slab_bytes, 18 * MiB);
    teardown(f);
}

/* An arena that served nothing in a whole step (the step now allocates
 * blocks no plan holds) is given back. */
static void test_runtime_step_plan_idle_arena_goes(void **state)
{
    (void)state;
    struct fixture *f = setup("umpol 1;\nslab 4MiB;\nlearn step \"forward\";\n"
                              "class acts { match any; memory device; }\n");
    const struct class_stats *st = &f->rt.class_stats[0];
    const size_t MiB = 1u << 20;
    for (int step = 0; step < 7; step++) {
        size_t size = step < 4 ? 8 * MiB : 256u << 10; /* then too small to plan */
        phase_enter(&f->rt, "forward");
        void *a = alloc(f, size, API_CUDA_MALLOC_ASYNC, S1);
        void *b = alloc(f, size, API_CUDA_MALLOC_ASYNC, S1);
        release(f, a, S1, MODE_STREAM);
        release(f, b, S1, MODE_STREAM);
        phase_exit(&f->rt);
        if (step == 3)
            assert_int_equal(st->plan_bytes, 16 * MiB);
    }
    assert_int_equal(st->plan_bytes, 0);
    assert_int_equal(st->slab_bytes, 4 * MiB); /* the small blocks' slab alone */
    assert_int_equal(f->rt.devices[0].resident_bytes, 4 * MiB);
    teardown(f);
}

/* One step of the plan tests, in phase "forward" on S1, every block's data
 * checked: a 8 MiB [a, c), b 3 MiB [b, d), c 6 MiB [c, end), d 12 MiB
 * [d, end); HOLD keeps a past d's allocation (d's planned place is a's);
 * EXTRAS adds a 64 KiB block and a cudaMalloc one, which no plan holds.
 * Where CARRY is given, c is not freed but left there, for the next step to
 * free first (its CARRY); *CARRY is NULL where nothing is left. */
static void abcd_step_carry(struct fixture *f, bool hold, bool extras, void **carry)
{
    const size_t MiB = 1u << 20;
    void *small = NULL, *any = NULL;
    phase_enter(&f->rt, "forward");
    if (carry && *carry) {
        assert_true(filled(*carry, 6 * MiB, 3));
        release(f, *carry, S1, MODE_STREAM);
        *carry = NULL;
    }
    void *a = alloc(f, 8 * MiB, API_CUDA_MALLOC_ASYNC, S1);
    fill(a, 8 * MiB, 1);
    void *b = alloc(f, 3 * MiB, API_CUDA_MALLOC_ASYNC, S1);
    fill(b, 3 * MiB, 2);
    if (extras) {
        small = alloc(f, 64u << 10, API_CUDA_MALLOC_ASYNC, S1);
        any = alloc(f, 2 * MiB, API_CUDA_MALLOC, S1);
    }
    if (!hold) {
        assert_true(filled(a, 8 * MiB, 1));
        release(f, a, S1, MODE_STREAM);
    }
    void *c = alloc(f, 6 * MiB, API_CUDA_MALLOC_ASYNC, S1);
    fill(c, 6 * MiB, 3);
    assert_true(filled(b, 3 * MiB, 2));
    release(f, b, S1, MODE_STREAM);
    void *d = alloc(f, 12 * MiB, API_CUDA_MALLOC_ASYNC, S1);
    fill(d, 12 * MiB, 4);
    assert_true(filled(c, 6 * MiB, 3));
    if (hold) { /* d's place was a's: the pool serves it */
        assert_true(filled(a, 8 * MiB, 1));
        release(f, a, S1, MODE_STREAM);
    }
    assert_true(filled(d, 12 * MiB, 4));
    if (carry && hold)
        *carry = c;
    else
        release(f, c, S1, MODE_STREAM);
    release(f, d, S1, MODE_STREAM);
    if (extras) {
        release(f, small, S1, MODE_STREAM);
        release(f, any, S1, MODE_ANY);
    }
    phase_exit(&f->rt);
}

static void abcd_step(struct fixture *f, bool hold, bool extras)
{
    abcd_step_carry(f, hold, extras, NULL);
}

/* `learn step` and device memory: once a step has repeated the one before,
 * its blocks go where the step's plan put them, in one arena as large as the
 * step's peak (18 MiB here, where the pool's slabs came to 28 MiB or more); a block
 * whose planned place is still held goes to the pool; cudaMalloc's blocks
 * and small ones are never planned. The data of every live block stay its own. */
static void test_runtime_step_plan(void **state)
{
    (void)state;
    struct fixture *f = setup("umpol 1;\nslab 4MiB;\nlearn step \"forward\";\n"
                              "class acts { match any; memory device; }\n");
    const struct class_stats *st = &f->rt.class_stats[0];
    const size_t MiB = 1u << 20;
    uint64_t slab_peak_unplanned = 0;
    for (int step = 0; step < 6; step++) {
        bool hold = step == 5; /* a step that keeps its first block longer */
        uint64_t planned = st->planned_allocations;
        abcd_step(f, hold, true);
        if (step < 2) { /* no plan yet: the first step is the reference, the second repeats it */
            assert_int_equal(st->planned_allocations, 0);
            slab_peak_unplanned = st->slab_peak_bytes;
        } else {
            assert_int_equal(st->planned_allocations - planned, hold ? 3 : 4);
        }
    }
    assert_int_equal(st->plans_made, 1);
    assert_int_equal(st->plan_bytes, 18 * MiB); /* c and d at once */
    assert_int_equal(st->plan_misses, 1);
    /* 8 + 4 + 4 + 12 MiB or more, as the slabs' addresses fall */
    assert_true(slab_peak_unplanned >= 8 * MiB + 4 * MiB + 4 * MiB + 12 * MiB);
    /* The arena took the empty slabs' place; the small block's slab stays, and d's of the last step. */
    assert_int_equal(st->slab_bytes, 18 * MiB + 4 * MiB + 12 * MiB);
    assert_int_equal(f->rt.devices[0].resident_bytes, st->slab_bytes);
    teardown(f);
}
/* A step that strays from the plan but holds no more at once: a block whose
 * planned place is still held takes free pages elsewhere in the arena (a
 * refit), and the pool grows by nothing. Plan: p at 0, q at 4 MiB, r at 0
 * (p is freed before r); the stray step frees q before r and p after it. */
static void test_runtime_step_plan_refits_a_stray_block(void **state)
{
    (void)state;
    struct fixture *f = setup("umpol 1;\nslab 4MiB;\nlearn step \"forward\";\n"
                              "class acts { match any; memory device; }\n");
    const struct class_stats *st = &f->rt.class_stats[0];
    const size_t MiB = 1u << 20;
    for (int step = 0; step < 8; step++) {
        bool stray = step == 6;
        phase_enter(&f->rt, "forward");
        void *p = alloc(f, 4 * MiB, API_CUDA_MALLOC_ASYNC, S1);
        fill(p, 4 * MiB, 1);
        void *q = alloc(f, 4 * MiB, API_CUDA_MALLOC_ASYNC, S1);
        fill(q, 4 * MiB, 2);
        assert_true(filled(stray ? q : p, 4 * MiB, stray ? 2 : 1));
        release(f, stray ? q : p, S1, MODE_STREAM);
        void *r = alloc(f, 4 * MiB, API_CUDA_MALLOC_ASYNC, S1);
        fill(r, 4 * MiB, 3);
        if (stray) /* r's planned place is p's, still held: it took q's */
            assert_ptr_equal(r, q);
        assert_true(filled(stray ? p : q, 4 * MiB, stray ? 1 : 2));
        release(f, stray ? p : q, S1, MODE_STREAM);
        assert_true(filled(r, 4 * MiB, 3));
        release(f, r, S1, MODE_STREAM);
        phase_exit(&f->rt);
        if (step == 5 || step == 7)
            assert_int_equal(st->slab_bytes, 8 * MiB); /* the arena alone */
    }
    assert_int_equal(st->plan_bytes, 8 * MiB);
    assert_int_equal(st->plan_refits, 1);
    assert_int_equal(st->plan_misses, 0);
    assert_false(st->plan_given_up);
    assert_int_equal(f->rt.devices[0].resident_bytes, st->slab_bytes);
    teardown(f);
}

/* Nine steps of abcd_step under a `learn step` POLICY; step 5 strays as HOW
 * says. The plan is given up as step GIVEN_UP_AT begins (never where 0):
 * from then on it serves nothing, its arena is gone and the card holds no
 * more than the budget (BUDGET_MIB); before, it served every step from the
 * third. Every block keeps its data throughout (abcd_step). */
enum stray {
    STRAY_HOLD,       /* a held past d's allocation: d misses, the pool grows for it */
    STRAY_HOLD_CARRY, /* the same, and c lives into the next step, which frees it first */
    STRAY_UNPLANNED,  /* an unplanned cudaMalloc block grows the pool past the budget: no miss */
};
static void plan_stray_steps(const char *policy, enum stray how, int given_up_at,
                             uint64_t budget_mib)
{
    struct fixture *f = setup(policy);
    const struct class_stats *st = &f->rt.class_stats[0];
    const uint64_t MiB = 1u << 20;
    void *carry = NULL;
    for (int step = 0; step < 9; step++) {
        bool stray = step == 5;
        uint64_t planned = st->planned_allocations;
        abcd_step_carry(f, stray && how != STRAY_UNPLANNED, false,
                        how == STRAY_HOLD_CARRY ? &carry : NULL);
        if (stray && how == STRAY_UNPLANNED) { /* in the step's tail, after its phase */
            void *x = alloc(f, 8 * MiB, API_CUDA_MALLOC, S1);
            release(f, x, S1, MODE_ANY);
        }
        bool gone = given_up_at && step >= given_up_at;
        assert_int_equal(st->plan_given_up, gone);
        if (gone) {
            assert_int_equal(st->planned_allocations, planned);
            assert_int_equal(st->plan_bytes, 0);
            assert_true(f->rt.devices[0].resident_bytes <= budget_mib * MiB);
        } else if (step >= 2) {
            assert_true(st->planned_allocations - planned >= 3);
        }
    }
    assert_int_equal(st->plans_made, 1); /* none after it was given up */
    assert_int_equal(st->plan_misses, how == STRAY_UNPLANNED ? 0 : 1);
    assert_int_equal(f->rt.devices[0].resident_bytes, st->slab_bytes);
    assert_residency_exact(f);
    static char buf[1 << 16];
    report_text(&f->rt, buf, sizeof buf);
    char want[160];
    snprintf(want, sizeof want,
             "\"misses\": %d, \"refits\": 0, \"given_up\": %s, \"refused_blocks\": 0}",
             how == STRAY_UNPLANNED ? 0 : 1, given_up_at ? "true" : "false");
    assert_non_null(strstr(buf, want));
    teardown(f);
}

#define PLAN_POLICY(budget)                                                                        \
    "umpol 1;\nbudget gpu " budget ";\nslab 4MiB;\nlearn step \"forward\";\n"                        \
    "class acts { match any; memory device; }\n"

/* A step that strays from the plan under a budget: its block whose planned
 * place is still held goes to the pool, whose new slab takes the card past
 * the budget beside the arena (18 MiB of the plan and d's 12 MiB, against
 * 24). The plan is given up as the next step begins, and the pool serves
 * the class within the budget; the report says so. */
static void test_runtime_step_plan_given_up_past_budget(void **state)
{
    (void)state;
    plan_stray_steps(PLAN_POLICY("24MiB"), STRAY_HOLD, 6, 24);
}

/* The same stray where the budget has room for d's slab beside the arena:
 * the plan stays. */
static void test_runtime_step_plan_kept_within_budget(void **state)
{
    (void)state;
    plan_stray_steps(PLAN_POLICY("40MiB"), STRAY_HOLD, 0, 40);
}

/* A block of the arena still live as the step after the stray one begins:
 * the plan is given up at the next step that begins with none. */
static void test_runtime_step_plan_given_up_when_arena_empty(void **state)
{
    (void)state;
    plan_stray_steps(PLAN_POLICY("24MiB"), STRAY_HOLD_CARRY, 7, 24);
}

/* A block no plan holds takes the class past its budget, with no miss: the
 * plan stays. */
static void test_runtime_step_plan_kept_past_budget_without_miss(void **state)
{
    (void)state;
    plan_stray_steps(PLAN_POLICY("24MiB"), STRAY_UNPLANNED, 0, 24);
}

/* A step with more blocks than a plan lays out gets none: the pool serves
 * them all, and the report says how many there were. */
static void test_runtime_step_plan_refuses_too_many_blocks(void **state)
{
    (void)state;
    struct fixture *f = setup("umpol 1;\nslab 4MiB;\nlearn step \"forward\";\n"
                              "class acts { match any; memory device; }\n");
    const struct class_stats *st = &f->rt.class_stats[0];
    for (int step = 0; step < 4; step++) {
        phase_enter(&f->rt, "forward");
        for (unsigned i = 0; i <= PLAN_MAX_BLOCKS; i++)
            release(f, alloc(f, PLAN_MIN_BLOCK, API_CUDA_MALLOC_ASYNC, S1), S1, MODE_STREAM);
        phase_exit(&f->rt);
    }
    assert_int_equal(st->plans_made, 0);
    assert_int_equal(st->planned_allocations, 0);
    assert_int_equal(st->plan_refused_blocks, PLAN_MAX_BLOCKS + 1);
    static char buf[1 << 16];
    report_text(&f->rt, buf, sizeof buf);
    char want[64];
    snprintf(want, sizeof want, "\"refused_blocks\": %u}", PLAN_MAX_BLOCKS + 1);
    assert_non_null(strstr(buf, want));
    teardown(f);
}

/* A step with more blocks in all than the runtime notes for plans (four
 * times a class's limit) gets no new plan for any class, though each class
 * alone is under its limit: a plan from part of the step would be wrong. */
static void test_runtime_step_plan_refuses_an_overlong_step(void **state)
{
    (void)state;
    struct fixture *f = setup("umpol 1;\nslab 8MiB;\nlearn step \"forward\";\n"
                              "class c1 { match size < 2MiB; memory device; }\n"
                              "class c2 { match size < 3MiB; memory device; }\n"
                              "class c3 { match size < 4MiB; memory device; }\n"
                              "class c4 { match size < 5MiB; memory device; }\n"
                              "class c5 { match any; memory device; }\n");
    const unsigned each = PLAN_MAX_BLOCKS * 4 / 5 + 1; /* 13108: under a class's limit */
    for (int step = 0; step < 4; step++) {
        phase_enter(&f->rt, "forward");
        for (size_t c = 1; c <= 5; c++)
            for (unsigned i = 0; i < each; i++)
                release(f, alloc(f, c * PLAN_MIN_BLOCK, API_CUDA_MALLOC_ASYNC, S1), S1, MODE_STREAM);
        phase_exit(&f->rt);
    }
    for (size_t c = 0; c < 5; c++) {
        const struct class_stats *st = &f->rt.class_stats[c];
        assert_int_equal(st->plans_made, 0);
        assert_true(st->plan_refused_blocks > 0 && st->plan_refused_blocks <= each);
    }
    teardown(f);
}

/* Placement's pressure takes the streamed piece whose next use in the
 * learned cycle is farthest, whatever the order the slabs were made in. */
static void test_runtime_stream_yields_farthest(void **state)
{
    (void)state;
    const uint64_t MiB = 1u << 20;
    static const int order[STREAM_N] = {0, 4, 1, 2, 3, 5}; /* not the order they were made */
    void *w[STREAM_N];
    struct fixture *f = stream_learned_in(STREAM_POLICY("256MiB"), order, w);
    use_one(f, w[0]); /* w4, w1, w2, w3 come in: the budget's 256 MiB */
    for (int i = 1; i <= 4; i++)
        assert_true(piece_on_gpu(f, w[i]));
    void *a = alloc(f, 64 * MiB, API_CUDA_MALLOC, S1); /* room for it: w3, used last of them */
    assert_false(piece_on_gpu(f, w[3]));
    assert_true(piece_on_gpu(f, w[4]) && piece_on_gpu(f, w[1]) && piece_on_gpu(f, w[2]));
    release(f, a, S1, MODE_ANY);
    assert_weights_as_made(w);
    stream_done(f, w);
}

/* Pieces the stream brought give way to a slab of device memory, for the
 * budget and for a card that is full: their GPU memory is back (their
 * remaps made on the runtime's thread) before the card is asked again. */
static void test_runtime_stream_gives_way_to_full_card(void **state)
{
    (void)state;
    const uint64_t MiB = 1u << 20;
    void *w[STREAM_N];
    struct fixture *f = stream_learned(w);
    use_one(f, w[0]); /* w1..w3 come in: the budget's 192 MiB */
    assert_int_equal(mapped_on_gpu(f), 192 * MiB);
    fake_set_card_full_at(fake_resident_bytes() + fake_vmm_gpu_bytes());
    fake_set_vmm_hold(1); /* the drop's remap is slow to be made */
    struct hold_release h;
    hold_release_start(&h, f);
    void *a = alloc(f, 64 * MiB, API_CUDA_MALLOC, S1);
    assert_true(hold_release_join(&h)); /* it waited for the drop's remap */
    fake_set_card_full_at(0);
    assert_int_equal(mapped_on_gpu(f), 128 * MiB); /* one piece left, no more */
    release(f, a, S1, MODE_ANY);
    stream_done(f, w);
}

/* Remaps made on the runtime's thread that fail, the job's range mapped
 * back as it was or mapped neither way (then mapped again), leave each piece
 * counted where it is and every byte of the weights intact. */
static void test_runtime_stream_remap_fails_on_thread(void **state)
{
    (void)state;
    const uint64_t MiB = 1u << 20;
    uint64_t vmm_before = fake_vmm_gpu_bytes();
    void *w[STREAM_N];
    struct fixture *f = stream_learned(w);
    const struct device_state *dev = &f->rt.devices[0];
    for (int round = 0; round < 24; round++) {
        fake_set_vmm_map_fails(round % 5, 1 + round % 3);
        for (int i = 0; i < STREAM_N; i++) {
            const void *p[1] = {w[i]};
            rt_use(&f->rt, p, 1, S1); /* the thread runs free */
        }
        fake_set_vmm_map_fails(-1, 0);
        use_one(f, w[0]); /* every remap handed over applied */
        assert_int_equal(dev->resident_bytes, card_holds(f, vmm_before));
        assert_true(dev->resident_bytes <= 192 * MiB);
    }
    for (int i = 0; i < STREAM_N; i++) {
        use_one(f, w[i]); /* a piece lost while the failures went on is mapped again */
        assert_true(filled(w[i], (i == 1 ? 32 : 64) * MiB, 1 + i));
    }
    stream_done(f, w);
}

/* The stream's remaps are made on the runtime's own thread. Meanwhile each
 * piece is counted where its remap puts it, and a piece the job is about to
 * use, or to write in a new block, waits for its remap to be made. */
static void test_runtime_stream_remap_on_thread(void **state)
{
    (void)state;
    const uint64_t MiB = 1u << 20;
    uint64_t vmm_before = fake_vmm_gpu_bytes();
    void *w[STREAM_N];
    struct fixture *f = stream_learned(w);
    const struct device_state *dev = &f->rt.devices[0];
    struct block *b1 = map_find(&f->rt.map, (uintptr_t)w[1]);
    struct movable *mv1 = b1->slab->backing;
    size_t i1 = (b1->addr - b1->slab->base) / (64 * MiB);
    const void *p[1];

    /* Swapped in: w1's piece (with w2's and w3's) handed over at w0's use. */
    unsigned long held = fake_vmm_held_calls();
    fake_set_vmm_hold(1);
    p[0] = w[0];
    rt_use(&f->rt, p, 1, S1);
    wait_held(held);
    assert_true(mv1->busy[i1] != 0);
    assert_true(mv1->gpu[i1] != 0); /* counted on the GPU already */
    struct hold_release h;
    hold_release_start(&h, f);
    uint64_t waited = f->rt.remap_wait_ns;
    p[0] = w[1];
    rt_use(&f->rt, p, 1, S1); /* waits for w1's remap */
    assert_true(hold_release_join(&h));
    assert_true(f->rt.remap_wait_ns > waited); /* the report's remap_wait_ns */
    assert_int_equal(mv1->busy[i1], 0);
    assert_true(filled(w[1], 32 * MiB, 2));
    stream_settle(&f->rt);
    assert_int_equal(dev->resident_bytes, card_holds(f, vmm_before));

    /* Dropped: at w4's use w1's piece leaves; counted off the GPU at once,
     * its GPU memory given back once the remap is made. */
    held = fake_vmm_held_calls();
    fake_set_vmm_hold(1);
    for (int i = 2; i < STREAM_N; i++) {
        p[0] = w[i];
        rt_use(&f->rt, p, 1, S1);
        if (!mv1->gpu[i1] && mv1->busy[i1])
            break;
    }
    wait_held(held);
    assert_true(mv1->busy[i1] != 0 && !mv1->gpu[i1]);
    assert_true(dev->resident_bytes < card_holds(f, vmm_before));
    /* What the card still holds of the pieces leaving is no room for a fetch. */
    uint64_t leaving = mover_leaving_bytes(&f->rt.mover, 0);
    assert_true(leaving > 0);
    assert_int_equal(dev->resident_bytes + leaving, card_holds(f, vmm_before));
    assert_true(dev->resident_bytes + leaving <= 192 * MiB);
    /* A new block in that piece: the job writes it once rt_alloc returns. */
    hold_release_start(&h, f);
    void *x = new_block_beside(f, w[1], 99);
    assert_true(hold_release_join(&h)); /* it waited for the drop */
    assert_int_equal(mv1->busy[i1], 0);
    assert_true(filled(w[1], 32 * MiB, 2) && filled(x, 32 * MiB, 99));
    stream_settle(&f->rt);
    assert_int_equal(dev->resident_bytes, card_holds(f, vmm_before));
    release(f, x, S1, MODE_ANY);
    stream_done(f, w);
}

/* A stream capture stops streaming for good: nothing is remapped, fetched or
 * dropped any more, and pieces on the GPU are no longer clean, so a move to
 * the host copies them (a graph's replays may have written nothing, or
 * anything). */
static void test_runtime_stream_off_after_capture(void **state)
{
    (void)state;
    const uint64_t MiB = 1u << 20;
    enum { N = 6 };
    struct fixture *f = setup(stream_policy);
    const struct class_stats *st = &f->rt.class_stats[0];
    void *w[N];
    phase_enter(&f->rt, "init");
    for (int i = 0; i < N; i++) {
        w[i] = alloc(f, 64 * MiB, API_CUDA_MALLOC, S1);
        fill(w[i], 64 * MiB, 1 + i);
    }
    phase_exit(&f->rt);
    for (int i = 0; i < N; i++)
        use_one(f, w[i]);
    phase_enter(&f->rt, "opt.step");
    phase_exit(&f->rt);
    use_one(f, w[0]);
    uint64_t mapped = mapped_on_gpu(f), fetched = st->stream_fetch_bytes;
    assert_true(mapped > 0);
    atomic_store(&f->rt.captures, 1);
    for (int i = 0; i < N; i++)
        use_one(f, w[i]);
    atomic_store(&f->rt.captures, 0);
    for (int i = 0; i < N; i++)
        use_one(f, w[i]);
    assert_true(f->rt.stream.off);
    assert_int_equal(mapped_on_gpu(f), mapped);
    assert_int_equal(st->stream_fetch_bytes, fetched);
    phase_enter(&f->rt, "opt.step");
    for (int i = 0; i < N; i++)
        fill(w[i], 64 * MiB, 30 + i); /* written where each lies, the GPU pieces too */
    phase_exit(&f->rt);
    uint64_t to_host = DELTA(f, memcpy_bytes_to_host);
    void *a = alloc(f, 128 * MiB, API_CUDA_MALLOC, S1); /* the weights give way */
    assert_true(mapped_on_gpu(f) < mapped);
    assert_true(DELTA(f, memcpy_bytes_to_host) > to_host); /* copied, not dropped */
    for (int i = 0; i < N; i++)
        assert_true(filled(w[i], 64 * MiB, 30 + i));
    release(f, a, S1, MODE_ANY);
    for (int i = 0; i < N; i++)
        release(f, w[i], S1, MODE_ANY);
    place_trim(&f->rt, -1, -1);
    assert_int_equal(f->rt.devices[0].resident_bytes, 0);
    teardown(f);
}

/* Before a capture begins (rt_capture_prepare, from the hooks): the remap
 * the runtime's thread is making is made first, so no driver call of that
 * thread runs beside the capture, and streaming stops for good. */
static void test_runtime_capture_prepare_waits_for_remaps(void **state)
{
    (void)state;
    void *w[STREAM_N];
    struct fixture *f = stream_learned(w);
    struct block *b1 = map_find(&f->rt.map, (uintptr_t)w[1]);
    const struct movable *mv1 = b1->slab->backing;
    size_t i1 = (b1->addr - b1->slab->base) / (64u << 20);
    unsigned long held = fake_vmm_held_calls();
    fake_set_vmm_hold(1);
    const void *p[1] = {w[0]};
    rt_use(&f->rt, p, 1, S1); /* w1's piece swapped in on the thread, held there */
    wait_held(held);
    assert_true(mv1->busy[i1] != 0);
    struct hold_release h;
    hold_release_start(&h, f);
    rt_capture_prepare(&f->rt);
    assert_true(hold_release_join(&h)); /* it waited for the remap */
    assert_int_equal(mv1->busy[i1], 0);
    uint64_t mapped = mapped_on_gpu(f);
    for (int i = 0; i < STREAM_N; i++)
        use_one(f, w[i]);
    assert_true(f->rt.stream.off);
    assert_int_equal(mapped_on_gpu(f), mapped); /* nothing fetched or dropped since */
    assert_weights_as_made(w);
    stream_done(f, w);
}

/* A capture begun through the driver on the job's stream (the hooks do not
 * count it) stops streaming as well, and the pieces then on their way in are
 * given up once it is over. */
static void test_runtime_stream_off_after_driver_capture(void **state)
{
    (void)state;
    void *w[STREAM_N];
    struct fixture *f = stream_learned(w);
    const struct class_stats *st = &f->rt.class_stats[0];
    fake_set_busy_stream(f->rt.devices[0].fetch_stream); /* pieces stay on their way in */
    use_one(f, w[0]);
    fake_set_busy_stream(NULL);
    uint64_t mapped = mapped_on_gpu(f), fetched = st->stream_fetch_bytes;
    assert_true(fetched > 0);
    fake_set_capturing(1);
    use_one(f, w[1]);
    assert_true(f->rt.stream.off);
    assert_int_equal(mapped_on_gpu(f), mapped);
    fake_set_capturing(0);
    for (int i = 0; i < STREAM_N; i++)
        use_one(f, w[i]);
    assert_int_equal(st->stream_fetch_bytes, fetched);
    assert_int_equal(mapped_on_gpu(f), mapped);
    for (const struct slab *s = f->rt.devices[0].pools[0]->slabs; s; s = s->next)
        assert_int_equal(((const struct movable *)s->backing)->incoming_bytes, 0);
    assert_int_equal(f->rt.devices[0].resident_bytes, mapped);
    stream_done(f, w);
}

/* A fixture on POLICY whose first class holds W: 100 MiB of weights, a
 * movable slab of pieces of 64 and 36 MiB, filled with SEED. */
static struct fixture *setup_weights(const char *policy, void **w, int seed)
{
    struct fixture *f = setup(policy);
    *w = alloc(f, 100u << 20, API_CUDA_MALLOC, S1);
    fill(*w, 100u << 20, seed);
    return f;
}

/* The end of such a test: W freed, every slab given back, and the card's
 * memory as it was before (VMM_BEFORE). */
static void weights_done(struct fixture *f, void *w, uint64_t vmm_before)
{
    release(f, w, S1, MODE_ANY);
    place_trim(&f->rt, -1, -1);
    assert_int_equal(fake_vmm_gpu_bytes(), vmm_before);
    teardown(f);
}

/* One forward pass that takes N activations of 16 MiB (each a slab of its
 * own) and frees them. A "forward" opens inside the pass's own, as a
 * framework's does inside the job's NVTX range: it fires the rule again,
 * which must not cut the step short. */
static void forward_pass(struct fixture *f, int n)
{
    void *a[8];
    phase_enter(&f->rt, "forward");
    phase_enter(&f->rt, "forward");
    for (int i = 0; i < n; i++)
        a[i] = alloc(f, 16u << 20, API_CUDA_MALLOC, S1);
    for (int i = 0; i < n; i++)
        release(f, a[i], S1, MODE_ANY);
    phase_exit(&f->rt);
    phase_exit(&f->rt);
}

/* A movable class that only the budget sends out comes back only into room
 * that stayed free through a whole pass: while the activations' peak has
 * none, its rule moves nothing and does not wait for the GPU; once a pass
 * left slabs unused, they are given back and a piece returns, and the next
 * pass's peak does not send it out again. */
static void test_runtime_movable_returns_into_steady_room(void **state)
{
    (void)state;
    const uint64_t MiB = 1u << 20;
    uint64_t vmm_before = fake_vmm_gpu_bytes();
    void *w;
    struct fixture *f = setup_weights(movable_return_policy, &w, 3);
    const struct class_stats *st = f->rt.class_stats;
    const struct device_state *dev = &f->rt.devices[0];
    forward_pass(f, 2);
    forward_pass(f, 0);
    forward_pass(f, 0); /* two slabs unused a whole step, but nothing to bring back: kept */
    assert_int_equal(st[1].slab_releases, 0);
    assert_int_equal(st[1].slabs, 2);
    forward_pass(f, 8); /* 228 MiB at the peak: the 64 MiB piece leaves */
    assert_int_equal(st[0].evict_bytes, 64 * MiB);
    assert_int_equal(dev->resident_bytes, 36 * MiB + 128 * MiB);

    /* The last pass's peak left 36 MiB: the piece stays out, with no wait. */
    uint64_t syncs = fake_counters()->device_sync;
    forward_pass(f, 4); /* four of the eight slabs unused */
    assert_int_equal(st[0].movable_to_gpu_bytes, 0);
    assert_int_equal(fake_counters()->device_sync, syncs);
    assert_int_equal(st[1].slab_releases, 0);

    /* Those four go, and the piece comes back into their room. */
    forward_pass(f, 4);
    assert_int_equal(st[1].slab_releases, 4);
    assert_int_equal(st[0].movable_to_gpu_bytes, 64 * MiB);
    assert_int_equal(st[0].evict_bytes, 64 * MiB); /* the pass's peak fit beside it */
    assert_int_equal(dev->resident_bytes, 100 * MiB + 64 * MiB);
    assert_int_equal(card_holds(f, vmm_before), dev->resident_bytes);
    assert_true(filled(w, 100 * MiB, 3));

    forward_pass(f, 4); /* steady: nothing given back, nothing moved */
    assert_int_equal(st[1].slab_releases, 4);
    assert_int_equal(st[0].movable_to_gpu_bytes, 64 * MiB);
    assert_int_equal(st[0].evict_bytes, 64 * MiB);
    release(f, w, S1, MODE_ANY);
    place_trim(&f->rt, -1, -1);
    assert_int_equal(fake_vmm_gpu_bytes(), vmm_before);
    assert_int_equal(dev->resident_bytes, 0);
    teardown(f);

    /* Managed activations free their GPU space at once: the room now is
     * ample, but the last pass's peak had none, and the piece that would
     * come back would only be sent out again. */
    f = setup_weights(movable_pressure_policy, &w, 4);
    st = f->rt.class_stats;
    forward_pass(f, 8); /* 228 MiB at the peak: the 64 MiB piece leaves */
    assert_int_equal(st[0].evict_bytes, 64 * MiB);
    syncs = fake_counters()->device_sync;
    forward_pass(f, 8);
    assert_int_equal(st[0].movable_to_gpu_bytes, 0);
    assert_int_equal(st[0].evict_bytes, 64 * MiB);
    assert_int_equal(fake_counters()->device_sync, syncs);
    assert_true(filled(w, 100 * MiB, 4));
    weights_done(f, w, vmm_before);
}

/* The job's step changed (umpol_step_changed: a mechanism that holds less
 * turned on, maybe mid-step): at the next return the empty activation slabs
 * the old step's peak made go, a step of the new kind is measured, and the
 * class comes back into the room it left, where the old step's peak would
 * have left it none. */
static void test_runtime_movable_returns_after_step_changed(void **state)
{
    (void)state;
    const uint64_t MiB = 1u << 20;
    uint64_t vmm_before = fake_vmm_gpu_bytes();
    void *w;
    struct fixture *f = setup_weights(movable_return_policy, &w, 5);
    const struct class_stats *st = f->rt.class_stats;
    const struct device_state *dev = &f->rt.devices[0];
    forward_pass(f, 8); /* the old step: 228 MiB at the peak, the 64 MiB piece leaves */
    forward_pass(f, 8);
    assert_int_equal(st[0].evict_bytes, 64 * MiB);
    assert_int_equal(st[0].movable_to_gpu_bytes, 0);
    assert_int_equal(st[1].slabs, 8);

    rt_step_changed(&f->rt); /* nothing given back yet: at the next return */
    assert_int_equal(st[1].slab_releases, 0);
    assert_int_equal(st[1].slabs, 8);

    uint64_t syncs = fake_counters()->device_sync;
    forward_pass(f, 2); /* the first step of the new kind: measured, nothing comes back */
    assert_int_equal(st[1].slab_releases, 8);
    assert_int_equal(st[1].slabs, 2);
    assert_int_equal(st[0].movable_to_gpu_bytes, 0);
    assert_int_equal(dev->resident_bytes, 36 * MiB + 32 * MiB);
    assert_int_equal(fake_counters()->device_sync, syncs); /* no move, no wait for it */

    forward_pass(f, 2); /* the piece comes back into the room that step left, and stays */
    assert_int_equal(st[0].movable_to_gpu_bytes, 64 * MiB);
    assert_int_equal(st[0].evict_bytes, 64 * MiB);
    assert_int_equal(dev->resident_bytes, 100 * MiB + 32 * MiB);
    forward_pass(f, 2);
    assert_int_equal(st[0].movable_to_gpu_bytes, 64 * MiB);
    assert_int_equal(st[0].evict_bytes, 64 * MiB);
    assert_int_equal(st[1].slab_releases, 8);
    assert_int_equal(card_holds(f, vmm_before), dev->resident_bytes);
    assert_true(filled(w, 100 * MiB, 5));
    weights_done(f, w, vmm_before);
}

/* Two classes that come back at one opening, a class that comes back when
 * the pass closes (its nested "forward" closing first), and a class with two
 * rules that fire at one opening: each measures
 * its own whole step, so none gives back the activations' slabs or brings a
 * piece in only for the next pass to send it out. */
static const char movable_two_return_policy[] =
    "umpol 1;\nbudget gpu 160MiB;\nslab 16MiB;\n"
    "class w1 { match size >= 100MiB; memory movable; priority 20;\n"
    "  prefetch gpu on enter \"forward*\"; }\n"
    "class w2 { match size >= 64MiB; memory movable; priority 20;\n"
    "  prefetch gpu on enter \"forward*\"; }\n"
    "class acts { match any; memory device; priority 50; }\n";
static const char movable_exit_return_policy[] =
    "umpol 1;\nbudget gpu 200MiB;\nslab 16MiB;\n"
    "class w1 { match size >= 100MiB; memory movable; priority 20;\n"
    "  prefetch gpu on exit \"forward*\"; }\n"
    "class acts { match any; memory device; priority 50; }\n";

/* One class, two rules that fire at one opening. */
static const char movable_two_rule_policy[] =
    "umpol 1;\nbudget gpu 200MiB;\nslab 16MiB;\n"
    "class w1 { match size >= 100MiB; memory movable; priority 20;\n"
    "  prefetch gpu on enter \"forward\"; prefetch gpu on enter \"forw*\"; }\n"
    "class acts { match any; memory device; priority 50; }\n";

static void test_runtime_movable_returns_keep_their_own_step(void **state)
{
    (void)state;
    const uint64_t MiB = 1u << 20;
    const char *policies[] = {movable_two_return_policy, movable_exit_return_policy,
                              movable_two_rule_policy};
    for (int k = 0; k < 3; k++) {
        uint64_t vmm_before = fake_vmm_gpu_bytes();
        struct fixture *f = setup(policies[k]);
        const struct class_stats *st = f->rt.class_stats;
        size_t acts = k == 0 ? 2 : 1;
        void *w1 = alloc(f, 100 * MiB, API_CUDA_MALLOC, S1);
        void *w2 = k == 0 ? alloc(f, 64 * MiB, API_CUDA_MALLOC, S1) : NULL;
        /* Two classes: w2 starts on the host (no room), w1 leaves whole; one
         * class (one rule or two): one 64 MiB piece of w1 leaves. */
        forward_pass(f, 8);
        forward_pass(f, 8);
        uint64_t out = st[0].evict_bytes + (k == 0 ? st[1].evict_bytes : 0);
        assert_int_equal(out, k == 0 ? 100 * MiB : 64 * MiB);
        uint64_t syncs = fake_counters()->device_sync;
        for (int pass = 0; pass < 4; pass++)
            forward_pass(f, 8);
        assert_int_equal(st[acts].slab_releases, 0);
        assert_int_equal(st[0].movable_to_gpu_bytes + (k == 0 ? st[1].movable_to_gpu_bytes : 0), 0);
        assert_int_equal(st[0].evict_bytes + (k == 0 ? st[1].evict_bytes : 0), out);
        assert_int_equal(fake_counters()->device_sync, syncs);
        release(f, w1, S1, MODE_ANY);
        if (w2)
            release(f, w2, S1, MODE_ANY);
        place_trim(&f->rt, -1, -1);
        assert_int_equal(fake_vmm_gpu_bytes(), vmm_before);
        teardown(f);
    }
}

/* After a step change, a class with two rules at one opening brings nothing
 * back in the step it measures (its second rule is the same step); and the
 * empty slabs go at the first class that has pieces to bring back, whichever
 * class fires first. */
static const char step_changed_two_classes_policy[] =
    "umpol 1;\nbudget gpu 200MiB;\nslab 16MiB;\n"
    "class w1 { match size >= 100MiB; memory movable; priority 40;\n"
    "  prefetch gpu on enter \"forward*\"; }\n"
    "class w2 { match size >= 64MiB; memory movable; priority 20;\n"
    "  prefetch gpu on enter \"forward*\"; }\n"
    "class acts { match any; memory device; priority 50; }\n";
static void test_runtime_step_changed_measures_first(void **state)
{
    (void)state;
    const uint64_t MiB = 1u << 20;
    uint64_t vmm_before = fake_vmm_gpu_bytes();
    void *w;
    struct fixture *f = setup_weights(movable_two_rule_policy, &w, 6);
    const struct class_stats *st = f->rt.class_stats;
    forward_pass(f, 8);
    forward_pass(f, 8);
    assert_int_equal(st[0].evict_bytes, 64 * MiB);
    rt_step_changed(&f->rt);
    forward_pass(f, 8); /* the step that measures: nothing comes back, nothing goes out again */
    assert_int_equal(st[1].slab_releases, 8);
    assert_int_equal(st[0].movable_to_gpu_bytes, 0);
    assert_int_equal(st[0].evict_bytes, 64 * MiB);
    assert_true(filled(w, 100 * MiB, 6));
    weights_done(f, w, vmm_before);

    /* w1 (all on the GPU) fires first and wants nothing: the slabs go at w2. */
    f = setup(step_changed_two_classes_policy);
    st = f->rt.class_stats;
    void *w1 = alloc(f, 100 * MiB, API_CUDA_MALLOC, S1);
    void *w2 = alloc(f, 64 * MiB, API_CUDA_MALLOC, S1);
    forward_pass(f, 4); /* 228 MiB: w2 (the lower priority) leaves */
    forward_pass(f, 4);
    assert_int_equal(st[0].evict_bytes, 0);
    assert_int_equal(st[1].evict_bytes, 64 * MiB);
    rt_step_changed(&f->rt);
    forward_pass(f, 1);
    assert_int_equal(st[2].slab_releases, 4);
    assert_int_equal(st[1].movable_to_gpu_bytes, 0);
    forward_pass(f, 1);
    assert_int_equal(st[1].movable_to_gpu_bytes, 64 * MiB);
    release(f, w1, S1, MODE_ANY);
    release(f, w2, S1, MODE_ANY);
    place_trim(&f->rt, -1, -1);
    teardown(f);
}

static void test_runtime_movable_pressure(void **state)
{
    (void)state;
    const uint64_t MiB = 1u << 20;
    uint64_t vmm_before = fake_vmm_gpu_bytes();
    struct fixture *f = setup(movable_pressure_policy);
    const struct class_stats *st = f->rt.class_stats;
    const struct device_state *dev = &f->rt.devices[0];
#define ASSERT_CARD_EXACT()                                                                   \
    assert_int_equal(dev->resident_bytes, fake_resident_bytes() - f->resident_before +       \
                                              fake_vmm_gpu_bytes() - vmm_before)
    void *w = alloc(f, 100 * MiB, API_CUDA_MALLOC, S1); /* pieces of 64 and 36 MiB */
    fill(w, 100 * MiB, 7);
    assert_int_equal(dev->resident_bytes, 100 * MiB);
    void *a[13];
    for (int i = 0; i < 6; i++) /* 196 MiB: within the budget */
        a[i] = alloc(f, 16 * MiB, API_CUDA_MALLOC, S1);
    assert_int_equal(st[0].evictions, 0);
    a[6] = alloc(f, 16 * MiB, API_CUDA_MALLOC, S1); /* 12 MiB short: one piece leaves */
    assert_int_equal(st[0].evictions, 1);
    assert_int_equal(st[0].evict_bytes, 64 * MiB);
    assert_int_equal(st[0].movable_to_host_bytes, 64 * MiB);
    assert_int_equal(st[1].evictions, 0);
    assert_int_equal(fake_vmm_gpu_bytes() - vmm_before, 36 * MiB); /* the card has it back */
    assert_int_equal(dev->resident_bytes, 36 * MiB + 7 * 16 * MiB);
    ASSERT_CARD_EXACT();
    assert_true(filled(w, 100 * MiB, 7));
    fill(w, 100 * MiB, 8); /* written where it lies, as the GPU would over the link */
    for (int i = 7; i < 13; i++) /* the last piece leaves, then activations (208 MiB) */
        a[i] = alloc(f, 16 * MiB, API_CUDA_MALLOC, S1);
    assert_int_equal(st[0].evict_bytes, 100 * MiB);
    assert_int_equal(fake_vmm_gpu_bytes() - vmm_before, 0);
    assert_true(st[1].evictions > 0); /* then the activations' own oldest */
    assert_true(dev->resident_bytes <= 200 * MiB);
    ASSERT_CARD_EXACT();
    assert_true(filled(w, 100 * MiB, 8));

    /* Its rule brings it back once the activations are freed: their space,
     * still on the GPU, makes the room. */
    for (int i = 0; i < 13; i++)
        release(f, a[i], S1, MODE_ANY);
    phase_enter(&f->rt, "forward");
    assert_int_equal(fake_vmm_gpu_bytes() - vmm_before, 100 * MiB);
    assert_int_equal(st[0].movable_to_gpu_bytes, 100 * MiB);
    ASSERT_CARD_EXACT();
    assert_true(filled(w, 100 * MiB, 8));

    /* While a stream capture is in progress nothing movable leaves: the
     * activations' blocks make the room among themselves, or go unplaced. */
    atomic_store(&f->rt.captures, 1);
    uint64_t out = st[0].evict_bytes;
    for (int i = 0; i < 8; i++)
        a[i] = alloc(f, 16 * MiB, API_CUDA_MALLOC, S1);
    assert_int_equal(st[0].evict_bytes, out);
    assert_int_equal(fake_vmm_gpu_bytes() - vmm_before, 100 * MiB);
    assert_true(dev->resident_bytes <= 200 * MiB);
    atomic_store(&f->rt.captures, 0);
    ASSERT_CARD_EXACT();
    for (int i = 0; i < 8; i++)
        release(f, a[i], S1, MODE_ANY);
    release(f, w, S1, MODE_ANY);
    place_trim(&f->rt, -1, -1);
    assert_int_equal(fake_vmm_gpu_bytes(), vmm_before);
    assert_int_equal(dev->resident_bytes, 0);
    teardown(f);

    /* A new slab of device memory makes room the same way; where none is
     * left it is made all the same, and counted. */
    f = setup(movable_device_policy);
    st = f->rt.class_stats;
    dev = &f->rt.devices[0];
    w = alloc(f, 100 * MiB, API_CUDA_MALLOC, S1);
    fill(w, 100 * MiB, 9);
    a[0] = alloc(f, 10 * MiB, API_CUDA_MALLOC, S1); /* a 64 MiB slab: 164 */
    a[1] = alloc(f, 20 * MiB, API_CUDA_MALLOC, S1); /* in it */
    assert_int_equal(st[0].evictions, 0);
    a[2] = alloc(f, 40 * MiB, API_CUDA_MALLOC, S1); /* a slab of its own: one piece leaves */
    assert_int_equal(st[0].evict_bytes, 64 * MiB);
    assert_int_equal(dev->resident_bytes, 36 * MiB + 64 * MiB + 40 * MiB);
    ASSERT_CARD_EXACT();
    a[3] = alloc(f, 50 * MiB, API_CUDA_MALLOC, S1); /* 190 MiB: room enough */
    assert_int_equal(st[0].evict_bytes, 64 * MiB);
    a[4] = alloc(f, 40 * MiB, API_CUDA_MALLOC, S1); /* the last piece leaves */
    assert_int_equal(st[0].evict_bytes, 100 * MiB);
    assert_int_equal(fake_vmm_gpu_bytes(), vmm_before);
    assert_int_equal(st[1].budget_skips, 0);
    a[5] = alloc(f, 40 * MiB, API_CUDA_MALLOC, S1); /* nothing left to move: made, counted */
    assert_non_null(a[5]);
    assert_int_equal(st[1].budget_skips, 1);
    assert_int_equal(dev->resident_bytes, (64 + 40 + 50 + 40 + 40) * MiB);
    ASSERT_CARD_EXACT();
    assert_true(filled(w, 100 * MiB, 9));
    for (int i = 0; i < 6; i++)
        release(f, a[i], S1, MODE_ANY);
    release(f, w, S1, MODE_ANY);
    place_trim(&f->rt, -1, -1);
    assert_int_equal(dev->resident_bytes, 0);
#undef ASSERT_CARD_EXACT
    teardown(f);
}

/* `budget card`: what the card holds outside umpol (here "another" user's
 * 48 MiB), learned as phases open from the least of CARD_WINDOW samples, so a
 * one-sample spike does not count, comes off the runtime's own budget; a new
 * device slab then sends a movable piece home that `budget gpu` keeps. */
static const char budget_card_policy[] =
    "umpol 1;\nbudget card 200MiB;\nslab 64MiB;\n"
    "class weights { match size >= 100MiB; memory movable; priority 20; }\n"
    "class acts { match any; memory device; priority 50; }\n";

static void sample_card_at_phases(struct fixture *f, int samples)
{
    for (int i = 0; i < samples; i++) {
        usleep(1100); /* the card is read at most once a millisecond */
        phase_enter(&f->rt, "forward");
        phase_exit(&f->rt);
    }
}

static void test_runtime_budget_card(void **state)
{
    (void)state;
    const uint64_t MiB = 1u << 20;
    for (int card = 0; card < 2; card++) {
        fake_set_other_used(16 * MiB); /* the card's base: not the process's growth */
        struct fixture *f = setup(card ? budget_card_policy : movable_device_policy);
        const struct device_state *dev = &f->rt.devices[0];
        void *w = alloc(f, 100 * MiB, API_CUDA_MALLOC, S1);
        fill(w, 100 * MiB, 3);
        fake_set_other_used(64 * MiB);
        sample_card_at_phases(f, CARD_WINDOW - 1);
        assert_int_equal(dev->card_outside, 0); /* not before CARD_WINDOW readings */
        sample_card_at_phases(f, 1);
        assert_int_equal(dev->card_outside, 48 * MiB);
        fake_set_other_used(316 * MiB); /* one sample: a block not yet given back */
        sample_card_at_phases(f, 1);
        fake_set_other_used(16 * MiB); /* back to the base: what was learned stays */
        sample_card_at_phases(f, CARD_WINDOW);
        assert_int_equal(dev->card_outside, 48 * MiB); /* learned either way */
        assert_int_equal(dev->budget_set, 200 * MiB);
        assert_int_equal(dev->budget_bytes, card ? 152 * MiB : 200 * MiB);
        void *a = alloc(f, 64 * MiB, API_CUDA_MALLOC, S1); /* 164 MiB in all */
        assert_int_equal(f->rt.class_stats[0].evictions, card ? 1 : 0);
        assert_int_equal(dev->resident_bytes, card ? 100 * MiB : 164 * MiB);
        assert_true(filled(w, 100 * MiB, 3));
        if (card) { /* more outside than the whole budget: umpol holds to nothing (the
                     * fake card does not show device slabs: 300 - 64 MiB outside) */
            fake_set_other_used(316 * MiB);
            sample_card_at_phases(f, CARD_WINDOW);
            assert_int_equal(dev->budget_bytes, 0);
        }
        fake_set_other_used(0);
        release(f, a, S1, MODE_ANY);
        release(f, w, S1, MODE_ANY);
        place_trim(&f->rt, -1, -1);
        teardown(f);
    }
}

/* A card smaller than umpol thinks (no budget here; on a real card, memory
 * umpol does not count): where cudaMalloc has no memory for a new slab of
 * device memory, movable pieces of no higher priority leave the GPU and it
 * is tried again; where none is left, the job is told there is no memory. */
static const char movable_card_full_policy[] =
    "umpol 1;\nslab 64MiB;\n"
    "class weights { match size >= 100MiB; memory movable; priority 20; }\n"
    "class acts { match any; memory device; priority 50; }\n";

static void test_runtime_movable_card_full(void **state)
{
    (void)state;
    const uint64_t MiB = 1u << 20;
    struct fixture *f = setup(movable_card_full_policy);
    const struct class_stats *st = f->rt.class_stats;
    uint64_t start = fake_resident_bytes() + fake_vmm_gpu_bytes();
    fake_set_card_full_at(start + 180 * MiB);
    void *w = alloc(f, 100 * MiB, API_CUDA_MALLOC, S1);
    fill(w, 100 * MiB, 5);
    void *a[3];
    a[0] = alloc(f, 30 * MiB, API_CUDA_MALLOC, S1); /* a 64 MiB slab: 164 of 180 */
    assert_int_equal(st[0].evictions, 0);
    a[1] = alloc(f, 40 * MiB, API_CUDA_MALLOC, S1); /* not in the 34 left: 204, a piece leaves */
    assert_int_equal(st[0].evict_bytes, 64 * MiB);
    a[2] = alloc(f, 60 * MiB, API_CUDA_MALLOC, S1); /* 200: the last piece leaves */
    assert_int_equal(st[0].evict_bytes, 100 * MiB);
    assert_int_equal(fake_resident_bytes() + fake_vmm_gpu_bytes() - start, 164 * MiB);
    void *p = NULL;
    bool handled = false;
    assert_int_equal(rt_alloc(&f->rt, &p, 40 * MiB, API_CUDA_MALLOC, S1, &handled),
                     cudaErrorMemoryAllocation); /* nothing left to move */
    assert_true(handled);
    assert_true(filled(w, 100 * MiB, 5));
    fake_set_card_full_at(0);
    for (int i = 0; i < 3; i++)
        release(f, a[i], S1, MODE_ANY);
    release(f, w, S1, MODE_ANY);
    place_trim(&f->rt, -1, -1);
    assert_int_equal(f->rt.devices[0].resident_bytes, 0);
    teardown(f);
}

static void test_runtime_spare(void **state)
{
    (void)state;
    const uint64_t MiB = 1u << 20, budget = 400 * MiB, reserve = 44 * MiB, blk = 24 * MiB;
    struct fixture *f = setup(spare_policy);
    const struct class_stats *st = f->rt.class_stats;
    const struct device_state *dev = &f->rt.devices[0];
    void *w = alloc(f, 100 * MiB, API_CUDA_MALLOC, S1);
    void *o = alloc(f, blk, API_CUDA_MALLOC, S1); /* climbing: no room */
    assert_int_equal(st[0].allocations, 0);
    assert_int_equal(st[1].allocations, 1);
    void *a = alloc(f, 120 * MiB, API_CUDA_MALLOC, S1);
    release(f, a, S1, MODE_ANY); /* past the peak; the pool keeps the slab */
    /* Live again within the reserve of the peak, but past it by more than 1/32
     * of the budget: that is enough. */
    void *c = alloc(f, 100 * MiB, API_CUDA_MALLOC, S1);
    assert_int_equal(dev->others_peak, 220 * MiB);
    assert_int_equal(place_spare_room(&f->rt, 0), budget - 220 * MiB - reserve); /* a fifth */
    void *kept[64];
    int n = 0;
    for (; n < 64; n++) {
        kept[n] = alloc(f, blk, API_CUDA_MALLOC, S1);
        if (st[0].allocations == (uint64_t)n) /* went to the host class */
            break;
    }
    assert_int_equal(n, 5); /* 136 MiB of room */
    assert_int_equal(st[1].allocations, 2);
    assert_int_equal(dev->spare_held, st[0].slab_bytes);
    assert_true(dev->others_peak + dev->spare_held + reserve <= budget);
    assert_true(place_spare_room(&f->rt, 0) < blk);
    assert_int_equal(dev->others_peak, 220 * MiB); /* the spare is not the job's peak */
    assert_int_equal(dev->spare_judged_by, 220 * MiB);
    assert_residency_exact(f);
    for (int i = 0; i <= n; i++)
        release(f, kept[i], S1, MODE_ANY);
    release(f, o, S1, MODE_ANY);
    release(f, c, S1, MODE_ANY);
    release(f, w, S1, MODE_ANY);
    place_trim(&f->rt, -1, -1); /* the fake GPU's memory, for the tests after */
    assert_int_equal(dev->spare_held, 0);
    teardown(f);

    /* The card has not the room the budget has: classified again without it. */
    f = setup(spare_policy);
    st = f->rt.class_stats;
    a = alloc(f, 120 * MiB, API_CUDA_MALLOC, S1);
    release(f, a, S1, MODE_ANY);
    fake_set_malloc_fails(1);
    o = alloc(f, blk, API_CUDA_MALLOC, S1);
    fake_set_malloc_fails(0);
    assert_int_equal(st[0].allocations, 0);
    assert_int_equal(st[1].allocations, 1);
    assert_int_equal(f->rt.spare_misses, 1);
    assert_residency_exact(f);
    release(f, o, S1, MODE_ANY);
    place_trim(&f->rt, -1, -1);
    teardown(f);

    /* No class matches without the room: the allocation goes to CUDA as asked. */
    f = setup("umpol 1;\nbudget gpu 400MiB;\nslab 1MiB;\n"
              "class opt_gpu { match size == 24MiB and spare; memory device; }\n"
              "class acts { match size > 24MiB; memory device; }\n");
    a = alloc(f, 120 * MiB, API_CUDA_MALLOC, S1);
    release(f, a, S1, MODE_ANY);
    fake_set_malloc_fails(1);
    bool handled = true;
    void *p = NULL;
    assert_int_equal(rt_alloc(&f->rt, &p, blk, API_CUDA_MALLOC, S1, &handled), cudaSuccess);
    fake_set_malloc_fails(0);
    assert_false(handled);
    assert_int_equal(f->rt.passthrough, 1);
    assert_int_equal(f->rt.class_stats[0].allocations, 0);
    place_trim(&f->rt, -1, -1);
    teardown(f);
}

/* `spare` at a peak that stood through a phase's end: an optimizer that steps
 * after backward makes its state with every gradient, the job's peak, still
 * live. The climb is over once a phase has closed on that peak; raising it
 * again is a climb again. */
static void test_runtime_spare_after_phase(void **state)
{
    (void)state;
    const uint64_t MiB = 1u << 20, blk = 24 * MiB;
    struct fixture *f = setup(spare_policy);
    const struct class_stats *st = f->rt.class_stats;
    phase_enter(&f->rt, "backward");
    void *g = alloc(f, 100 * MiB, API_CUDA_MALLOC, S1);
    void *o[4];
    phase_enter(&f->rt, "layer0"); /* a nested range's end is no step part's */
    phase_exit(&f->rt);
    o[0] = alloc(f, blk, API_CUDA_MALLOC, S1); /* climbing: no room */
    assert_int_equal(st[0].allocations, 0);
    assert_int_equal(place_spare_room(&f->rt, 0), 0);
    phase_exit(&f->rt);
    phase_enter(&f->rt, "optimizer.step");
    /* Live at the peak, yet a phase closed on it: 400 - 100 - a fifth of it. */
    assert_int_equal(place_spare_room(&f->rt, 0), 280 * MiB);
    o[1] = alloc(f, blk, API_CUDA_MALLOC, S1);
    assert_int_equal(st[0].allocations, 1);
    void *more = alloc(f, 50 * MiB, API_CUDA_MALLOC, S1); /* a new peak, in this phase */
    o[2] = alloc(f, blk, API_CUDA_MALLOC, S1);
    assert_int_equal(st[0].allocations, 1);
    assert_int_equal(st[1].allocations, 2);
    phase_exit(&f->rt);
    o[3] = alloc(f, blk, API_CUDA_MALLOC, S1); /* closed on it: room again */
    assert_int_equal(st[0].allocations, 2);
    assert_int_equal(f->rt.devices[0].others_peak, 150 * MiB);
    assert_residency_exact(f);
    for (int i = 0; i < 4; i++)
        release(f, o[i], S1, MODE_ANY);
    release(f, more, S1, MODE_ANY);
    release(f, g, S1, MODE_ANY);
    place_trim(&f->rt, -1, -1);
    teardown(f);
}

/* No pinned memory to be had: the allocation passes through to CUDA. */
static void test_runtime_host_class_falls_back(void **state)
{
    (void)state;
    struct fixture *f = setup("umpol 1;\nclass opt { match any; memory host; }\n");
    fake_set_host_register_fails(1);
    bool handled = true;
    void *p = NULL;
    assert_int_equal(rt_alloc(&f->rt, &p, 3u << 20, API_CUDA_MALLOC, S1, &handled), cudaSuccess);
    fake_set_host_register_fails(0);
    assert_false(handled);
    assert_int_equal(cudaGetLastError(), cudaSuccess); /* nothing left for the job's next check */
    assert_int_equal(f->rt.passthrough, 1);
    assert_int_equal(f->rt.class_stats[0].allocations, 0);
    /* Once refused, the class is not pinned again: no slab is tried. */
    uint64_t tries = fake_counters()->host_register;
    assert_int_equal(rt_alloc(&f->rt, &p, 3u << 20, API_CUDA_MALLOC, S1, &handled), cudaSuccess);
    assert_false(handled);
    assert_int_equal(fake_counters()->host_register, tries);
    teardown(f);
}

/* Advice and prefetches for a GPU this process cannot see (a per-rank
 * CUDA_VISIBLE_DEVICES) fail in the runtime: the job's allocation succeeds
 * and its next cudaGetLastError finds nothing of the runtime's. */
static void test_runtime_failed_advice_leaves_no_error(void **state)
{
    (void)state;
    struct fixture *f = setup("umpol 1;\nslab 4MiB;\n"
                              "class far { match any; place gpu 7; access gpu 7, host;\n"
                              "            prefetch gpu 7 on alloc; }\n");
    bool handled = false;
    void *p = NULL;
    assert_int_equal(rt_alloc(&f->rt, &p, 1u << 20, API_CUDA_MALLOC, S1, &handled), cudaSuccess);
    assert_true(handled);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
    release(f, p, S1, MODE_STREAM);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
    teardown(f);
}

/* A card with less room than a slab still serves a small request, in a slab
 * of its size, as the job's own cudaMalloc would. */
static void test_runtime_small_request_when_no_slab_fits(void **state)
{
    (void)state;
    struct fixture *f = setup("umpol 1;\nslab 64MiB;\nclass dev { match any; memory device; }\n");
    fake_set_card_full_at(fake_resident_bytes() + (24u << 20));
    void *a = alloc(f, 1u << 20, API_CUDA_MALLOC, S1);
    void *b = alloc(f, 3u << 20, API_CUDA_MALLOC, S1);
    assert_int_equal(f->rt.class_stats[0].slab_bytes, (2u << 20) + (4u << 20));
    memset(a, 1, 1u << 20);
    memset(b, 2, 3u << 20);
    release(f, a, S1, MODE_ANY);
    release(f, b, S1, MODE_ANY);
    fake_set_card_full_at(0);
    teardown(f);
}

/* A pointer inside a slab that is no live block (freed twice, or not a
 * block's start) is refused as CUDA refuses it, and never passed to CUDA,
 * which would free the slab under the blocks still in it. */
static void test_runtime_free_twice_refused(void **state)
{
    (void)state;
    struct fixture *f = setup(basic_policy);
    for (size_t size = 1000; size <= (2u << 20); size += (2u << 20) - 1000) { /* hot, then dev */
        void *a = alloc(f, size, API_CUDA_MALLOC, S1);
        void *b = alloc(f, size, API_CUDA_MALLOC, S1);
        release(f, a, S1, MODE_ANY);
        uint64_t frees = fake_counters()->free;
        cudaError_t err = cudaSuccess;
        assert_true(rt_free(&f->rt, a, S1, MODE_ANY, &err)); /* the runtime's: not passed on */
        assert_int_equal(err, cudaErrorInvalidValue);
        assert_true(rt_free(&f->rt, (char *)b + 512, S1, MODE_ANY, &err));
        assert_int_equal(err, cudaErrorInvalidValue);
        assert_int_equal(fake_counters()->free, frees);
        memset(b, 0x5a, size); /* still the job's */
        release(f, b, S1, MODE_ANY);
    }
    /* Nowhere near the runtime's memory: the job's own, for CUDA to judge. */
    cudaError_t err;
    int local;
    assert_false(rt_free(&f->rt, &local, S1, MODE_ANY, &err));
    teardown(f);
}

/* A forked child does not inherit pinned pages (MADV_DONTFORK): a host
 * class's allocations there go to CUDA, not to the parent's slabs. */
static void test_runtime_host_class_after_fork(void **state)
{
    (void)state;
    struct fixture *f = setup("umpol 1;\nclass opt { match any; memory host; }\n");
    void *a = alloc(f, 1u << 20, API_CUDA_MALLOC, S1);
    release(f, a, S1, MODE_ANY); /* a free block in a pinned slab */
    runtime_after_fork_child(&f->rt);
    bool handled = true;
    void *p = NULL;
    assert_int_equal(rt_alloc(&f->rt, &p, 1u << 20, API_CUDA_MALLOC, S1, &handled), cudaSuccess);
    assert_false(handled);
    teardown(f);
}

/* A block freed on S1 and taken on S2 after S1 has queued more work: S2
 * waits for S1's point recorded when S1 next allocated, just after the free,
 * not for all S1 has queued by the time the block is handed out. */
static void test_runtime_cross_stream_reuse_waits_for_the_free(void **state)
{
    (void)state;
    struct fixture *f = setup("umpol 1;\nslab 2MiB;\nclass all { match any; }\n");
    /* A block that goes to another stream first: points are kept from then. */
    void *e = alloc(f, 8u << 20, API_CUDA_MALLOC_ASYNC, S1);
    release(f, e, S1, MODE_STREAM);
    e = alloc(f, 8u << 20, API_CUDA_MALLOC_ASYNC, S2);
    assert_int_equal(DELTA(f, event_record), 1); /* recorded at hand-out, as without points */
    void *a = alloc(f, 1u << 20, API_CUDA_MALLOC_ASYNC, S1);
    void *filler = alloc(f, 1u << 20, API_CUDA_MALLOC_ASYNC, S1); /* the slab is full */
    release(f, a, S1, MODE_STREAM);
    usleep(2 * POINT_EVERY_NS / 1000);
    void *c = alloc(f, 4u << 20, API_CUDA_MALLOC_ASYNC, S1); /* S1's next work */
    assert_int_equal(DELTA(f, event_record), 2);             /* its point, before that work */
    uint64_t point = fake_counters()->event_record;
    release(f, c, S1, MODE_STREAM);
    usleep(2 * POINT_EVERY_NS / 1000);
    void *d = alloc(f, 4u << 20, API_CUDA_MALLOC_ASYNC, S1); /* and more */
    assert_ptr_equal(c, d);
    assert_int_equal(DELTA(f, event_record), 3);
    void *b = alloc(f, 1u << 20, API_CUDA_MALLOC_ASYNC, S2);
    assert_ptr_equal(a, b);
    assert_int_equal(DELTA(f, event_record), 3); /* no point recorded at hand-out */
    assert_int_equal(DELTA(f, stream_wait), 2);
    assert_int_equal(fake_last_wait_serial(), point);
    assert_int_equal(f->rt.class_stats[0].cross_stream_reuses, 2);
    release(f, b, S2, MODE_STREAM);
    release(f, d, S1, MODE_STREAM);
    release(f, e, S2, MODE_STREAM);
    release(f, filler, S1, MODE_STREAM);
    teardown(f);
}

/* A job whose blocks never change streams records no points; nor does
 * cudaStreamPerThread, which names another stream in every thread (a point
 * one thread records orders nothing of another's): a block freed there
 * keeps the thread's proxy, which gets the points. */
static void test_runtime_free_points_only_where_wanted(void **state)
{
    (void)state;
    /* Blocks of a whole slab: no neighbour merges its streams in. */
    struct fixture *f = setup("umpol 1;\nslab 2MiB;\nclass all { match any; }\n");
    for (int i = 0; i < 4; i++) {
        void *p = alloc(f, 2u << 20, API_CUDA_MALLOC_ASYNC, S1);
        release(f, p, S1, MODE_STREAM);
        usleep(2 * POINT_EVERY_NS / 1000);
    }
    assert_int_equal(DELTA(f, event_record), 0);
    /* Points wanted from here (a block went from S1 to S2). */
    void *p = alloc(f, 2u << 20, API_CUDA_MALLOC_ASYNC, S2);
    release(f, p, S2, MODE_STREAM);
    assert_int_equal(DELTA(f, event_record), 1);
    void *q = alloc(f, 2u << 20, API_CUDA_MALLOC_ASYNC, cudaStreamPerThread);
    assert_ptr_equal(p, q);
    assert_int_equal(DELTA(f, event_record), 2); /* S2 followed at hand-out */
    release(f, q, cudaStreamPerThread, MODE_STREAM);
    assert_int_equal(DELTA(f, event_record), 3); /* the proxy waits for the free */
    void *t = alloc(f, 2u << 20, API_CUDA_MALLOC_ASYNC, S1);
    assert_ptr_equal(q, t);
    /* The proxy's first point, at hand-out; none of the per-thread stream. */
    assert_int_equal(DELTA(f, event_record), 4);
    assert_int_equal(fake_last_wait_serial(), fake_counters()->event_record);
    void *waiter, *on;
    fake_last_wait(&waiter, &on);
    assert_ptr_equal(waiter, S1);
    assert_true(on != cudaStreamPerThread && on != S1 && on != S2);
    for (int i = 0; i < POINT_STREAMS; i++)
        assert_false(f->rt.devices[0].points[i].taken &&
                     f->rt.devices[0].points[i].stream == cudaStreamPerThread);
    release(f, t, S1, MODE_STREAM);
    teardown(f);
}

/* cudaStreamPerThread names another stream in every thread. A block one
 * thread frees there and another reuses there must wait for the first
 * thread's work, not pass as the same stream; the first thread reusing it
 * waits too, for its own work (harmless). Each thread's proxy is its own,
 * waits for an event its per-thread stream records at the free, and runs
 * nothing else. */
struct per_thread_free {
    struct fixture *f;
    void *ptr;
    void *waiter, *on; /* the wait the free made (streams) */
};

static void *free_on_per_thread(void *arg)
{
    struct per_thread_free *a = arg;
    release(a->f, a->ptr, cudaStreamPerThread, MODE_STREAM);
    fake_last_wait(&a->waiter, &a->on);
    return NULL;
}

static void test_runtime_per_thread_stream_frees_follow_their_thread(void **state)
{
    (void)state;
    struct fixture *f = setup("umpol 1;\nslab 2MiB;\nclass all { match any; }\n");
    /* This thread's proxy first: a thread that exits leaves its own for the
     * next to need one. */
    void *mine = alloc(f, 2u << 20, API_CUDA_MALLOC_ASYNC, cudaStreamPerThread);
    release(f, mine, cudaStreamPerThread, MODE_STREAM);
    mine = alloc(f, 2u << 20, API_CUDA_MALLOC_ASYNC, cudaStreamPerThread); /* live to the end */
    void *p = alloc(f, 2u << 20, API_CUDA_MALLOC_ASYNC, cudaStreamPerThread);
    struct per_thread_free other = {.f = f, .ptr = p};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, free_on_per_thread, &other), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    void *proxy = other.waiter;
    assert_true(proxy != NULL && proxy != cudaStreamPerThread);
    assert_ptr_equal(other.on, cudaStreamPerThread); /* recorded by the freeing thread */
    uint64_t waits = fake_counters()->stream_wait;
    void *q = alloc(f, 2u << 20, API_CUDA_MALLOC_ASYNC, cudaStreamPerThread);
    assert_ptr_equal(p, q);
    assert_int_equal(fake_counters()->stream_wait, waits + 1); /* not the same stream */
    void *waiter, *on;
    fake_last_wait(&waiter, &on);
    assert_ptr_equal(waiter, cudaStreamPerThread);
    assert_ptr_equal(on, proxy); /* the other thread's work up to its free */
    assert_int_equal(f->rt.class_stats[0].cross_stream_reuses, 2); /* its own, then this */
    /* This thread's own free: a proxy of its own. */
    release(f, q, cudaStreamPerThread, MODE_STREAM);
    fake_last_wait(&waiter, &on);
    void *own = waiter;
    assert_true(own != proxy && own != cudaStreamPerThread);
    assert_ptr_equal(on, cudaStreamPerThread);
    /* Its next allocation there records the proxy's point first, and the
     * block waits for that point (this thread's work up to its free). */
    uint64_t records = fake_counters()->event_record;
    void *r = alloc(f, 2u << 20, API_CUDA_MALLOC_ASYNC, cudaStreamPerThread);
    assert_ptr_equal(r, q);
    assert_int_equal(fake_counters()->event_record, records + 1);
    assert_int_equal(fake_last_wait_serial(), records + 1);
    fake_last_wait(&waiter, &on);
    assert_ptr_equal(waiter, cudaStreamPerThread);
    assert_ptr_equal(on, own);
    /* A stream being captured keeps its own name: no wait from outside. */
    fake_set_capturing(1);
    waits = fake_counters()->stream_wait;
    release(f, r, cudaStreamPerThread, MODE_STREAM);
    assert_int_equal(fake_counters()->stream_wait, waits);
    fake_set_capturing(0);
    release(f, mine, cudaStreamPerThread, MODE_STREAM);
    teardown(f);
}

/* A block of GPU 1 freed on cudaStreamPerThread while GPU 0 is current:
 * the proxy is made on the block's GPU (events recorded on it later are
 * that GPU's), the event on the current GPU's per-thread stream, and the
 * current GPU is put back. */
static void test_runtime_per_thread_proxy_on_the_blocks_gpu(void **state)
{
    (void)state;
    struct fixture *f = setup("umpol 1;\nslab 2MiB;\nclass all { match any; }\n");
    cudaSetDevice(1);
    void *p = alloc(f, 2u << 20, API_CUDA_MALLOC_ASYNC, cudaStreamPerThread);
    cudaSetDevice(0);
    release(f, p, cudaStreamPerThread, MODE_STREAM);
    void *proxy, *on;
    fake_last_wait(&proxy, &on);
    assert_ptr_equal(on, cudaStreamPerThread);
    assert_int_equal(fake_stream_device(proxy), 1);
    int current = -1;
    cudaGetDevice(&current);
    assert_int_equal(current, 0);
    cudaSetDevice(1);
    void *q = alloc(f, 2u << 20, API_CUDA_MALLOC_ASYNC, S1);
    assert_ptr_equal(p, q);
    void *waiter;
    fake_last_wait(&waiter, &on);
    assert_ptr_equal(waiter, S1);
    assert_ptr_equal(on, proxy);
    release(f, q, S1, MODE_STREAM);
    cudaSetDevice(0);
    teardown(f);
}

/* The runtime's own work on another GPU: that GPU made current and the
 * job's put back; a GPU that cannot be made current leaves the job's current
 * one and no error for the job's next cudaGetLastError. */
static void test_runtime_device_enter_leave(void **state)
{
    (void)state;
    struct fixture *f = setup(basic_policy);
    cudaSetDevice(2);
    int previous = mover_device_enter(&f->rt.mover, 1), current = -1;
    cudaGetDevice(&current);
    assert_int_equal(previous, 2);
    assert_int_equal(current, 1);
    mover_device_leave(&f->rt.mover, 1, previous);
    cudaGetDevice(&current);
    assert_int_equal(current, 2);
    assert_int_equal(mover_device_enter(&f->rt.mover, 7), -1);
    cudaGetDevice(&current);
    assert_int_equal(current, 2);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
    mover_device_leave(&f->rt.mover, 7, -1); /* nothing to put back */
    cudaGetDevice(&current);
    assert_int_equal(current, 2);
    cudaSetDevice(0);
    teardown(f);
}

static void test_runtime_same_stream_reuse(void **state)
{
    (void)state;
    struct fixture *f = setup(basic_policy);
    void *a = alloc(f, 4096, API_CUDA_MALLOC_ASYNC, S1);
    release(f, a, S1, MODE_STREAM);
    void *b = alloc(f, 4096, API_CUDA_MALLOC_ASYNC, S1);
    assert_ptr_equal(a, b);
    assert_int_equal(DELTA(f, stream_wait), 0);
    release(f, b, S1, MODE_STREAM);
    teardown(f);
}

static void test_runtime_cross_stream_reuse_waits(void **state)
{
    (void)state;
    struct fixture *f = setup("umpol 1;\nslab 2MiB;\nclass all { match any; }\n");
    void *a = alloc(f, 1u << 20, API_CUDA_MALLOC_ASYNC, S1);
    void *filler = alloc(f, 1u << 20, API_CUDA_MALLOC_ASYNC, S1); /* the slab is full */
    release(f, a, S1, MODE_STREAM);
    void *b = alloc(f, 1u << 20, API_CUDA_MALLOC_ASYNC, S2);
    assert_ptr_equal(a, b); /* reused, not a new slab */
    assert_int_equal(DELTA(f, malloc_managed), 1);
    assert_int_equal(DELTA(f, event_record), 1);
    assert_int_equal(DELTA(f, stream_wait), 1);
    assert_int_equal(f->rt.class_stats[0].cross_stream_reuses, 1);
    /* Back and forth: each reuse waits, on an event of the stream it follows
     * (a few for each stream, made once). */
    for (int i = 0; i < 4; i++) {
        release(f, b, i % 2 ? S1 : S2, MODE_STREAM);
        b = alloc(f, 1u << 20, API_CUDA_MALLOC_ASYNC, i % 2 ? S2 : S1);
        assert_ptr_equal(a, b);
    }
    assert_int_equal(DELTA(f, stream_wait), 5);
    assert_int_equal(DELTA(f, event_record), 5);
    assert_in_range(DELTA(f, event_create), 2, 2 + 2 * POINT_RING);
    /* A wait that cannot be made: the block is not reused, and the failure
     * is not left for the job's next error check. */
    release(f, b, S2, MODE_STREAM);
    fake_set_stream_wait_fails(1);
    b = alloc(f, 1u << 20, API_CUDA_MALLOC_ASYNC, S1);
    fake_set_stream_wait_fails(0);
    assert_ptr_not_equal(a, b);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
    release(f, b, S1, MODE_STREAM);
    release(f, filler, S1, MODE_STREAM);
    teardown(f);
}

static void test_runtime_legacy_malloc_avoids_busy_streams(void **state)
{
    (void)state;
    struct fixture *f = setup("umpol 1;\nslab 2MiB;\nclass all { match any; }\n");
    void *a = alloc(f, 1u << 20, API_CUDA_MALLOC_ASYNC, S1);
    void *filler = alloc(f, 1u << 20, API_CUDA_MALLOC_ASYNC, S1);
    release(f, a, S1, MODE_STREAM);
    fake_set_streams_busy(1);
    void *b = alloc(f, 1u << 20, API_CUDA_MALLOC, 0); /* S1 may still use a */
    assert_ptr_not_equal(a, b);
    assert_int_equal(DELTA(f, malloc_managed), 2);
    release(f, b, 0, MODE_ANY);
    fake_set_streams_busy(0);
    void *c = alloc(f, 1u << 20, API_CUDA_MALLOC, 0); /* S1 idle now */
    assert_true(c == a || c == b);
    release(f, c, 0, MODE_ANY);
    release(f, filler, S1, MODE_STREAM);
    teardown(f);
}

static void test_runtime_free_blocks_coalesce(void **state)
{
    (void)state;
    struct fixture *f = setup("umpol 1;\nslab 1MiB;\nclass all { match any; }\n");
    void *p[4];
    for (int i = 0; i < 4; i++)
        p[i] = alloc(f, 256 << 10, API_CUDA_MALLOC_ASYNC, S1);
    assert_int_equal(DELTA(f, malloc_managed), 1);
    release(f, p[1], S1, MODE_STREAM);
    release(f, p[3], S1, MODE_STREAM);
    release(f, p[0], S1, MODE_STREAM);
    release(f, p[2], S1, MODE_STREAM);
    void *whole = alloc(f, 1u << 20, API_CUDA_MALLOC_ASYNC, S1);
    assert_ptr_equal(whole, p[0]); /* the four merged back into one block */
    assert_int_equal(DELTA(f, malloc_managed), 1);
    release(f, whole, S1, MODE_STREAM);
    teardown(f);
}

static void test_runtime_large_requests_get_dedicated_slabs(void **state)
{
    (void)state;
    struct fixture *f = setup("umpol 1;\nslab 4MiB;\nclass all { match any; }\n");
    void *big = alloc(f, 10u << 20, API_CUDA_MALLOC_ASYNC, S1);
    assert_int_equal(DELTA(f, malloc_managed), 1);
    assert_int_equal(f->rt.class_stats[0].slab_bytes, 10u << 20);
    release(f, big, S1, MODE_STREAM);
    void *again = alloc(f, (10u << 20) - 4096, API_CUDA_MALLOC_ASYNC, S1);
    assert_ptr_equal(big, again); /* close in size: reused */
    release(f, again, S1, MODE_STREAM);
    void *small = alloc(f, 3u << 20, API_CUDA_MALLOC_ASYNC, S1);
    /* Far smaller: not carved from the 10 MiB slab, which is given back first
     * (the new slab may then have its address). */
    assert_int_equal(DELTA(f, malloc_managed), 2);
    assert_int_equal(f->rt.class_stats[0].slab_releases, 1);
    assert_int_equal(f->rt.class_stats[0].slab_bytes, 4u << 20);
    release(f, small, S1, MODE_STREAM);
    teardown(f);
}

/* A large request takes the free block close to its size even when a much
 * larger one comes first in its bin, instead of a new slab. */
static void test_runtime_large_request_finds_the_close_block(void **state)
{
    (void)state;
    struct fixture *f = setup("umpol 1;\nslab 64MiB;\nclass all { match any; }\n");
    void *mid = alloc(f, 44u << 20, API_CUDA_MALLOC_ASYNC, S1);
    void *big = alloc(f, 60u << 20, API_CUDA_MALLOC_ASYNC, S1);
    release(f, mid, S1, MODE_STREAM);
    release(f, big, S1, MODE_STREAM); /* first in the 32-64 MiB bin now */
    assert_int_equal(DELTA(f, malloc_managed), 2);
    void *again = alloc(f, 40u << 20, API_CUDA_MALLOC_ASYNC, S1);
    assert_ptr_equal(again, mid);
    assert_int_equal(DELTA(f, malloc_managed), 2);
    release(f, again, S1, MODE_STREAM);
    teardown(f);
}

static void test_runtime_cap_refuses_then_trims(void **state)
{
    (void)state;
    setenv("FAKE_GPU_BYTES", "104857600", 1); /* 100 MiB GPU */
    struct fixture *f = setup("umpol 1;\ncap managed 12MiB;\nslab 4MiB;\n"
                              "class h { match size == 1000; memory host; }\n"
                              "class a { match size < 2MiB; }\n"
                              "class b { match size >= 2MiB; }\n");
    void *blocks[3];
    for (int i = 0; i < 3; i++)
        blocks[i] = alloc(f, 2u << 20, API_CUDA_MALLOC_ASYNC, S1); /* class b: 3 x 2 MiB */
    void *s = alloc(f, 1u << 20, API_CUDA_MALLOC_ASYNC, S1);       /* class a: a 4 MiB slab */
    release(f, alloc(f, 1000, API_CUDA_MALLOC_ASYNC, S1), S1, MODE_STREAM); /* class h: empty */
    assert_int_equal(f->rt.devices[0].managed_bytes, 12u << 20);
    void *p = NULL;
    bool handled;
    cudaError_t err = rt_alloc(&f->rt, &p, 3u << 20, API_CUDA_MALLOC_ASYNC, S1, &handled);
    assert_true(handled);
    assert_int_equal(err, cudaErrorMemoryAllocation);
    assert_int_equal(f->rt.class_stats[2].cap_refusals, 1);
    release(f, s, S1, MODE_STREAM); /* class a's slab is now empty: trimmed on demand */
    void *q = alloc(f, 3u << 20, API_CUDA_MALLOC_ASYNC, S1);
    assert_true(f->rt.devices[0].managed_bytes <= 12u << 20);
    /* The pinned host slab stays: it holds no managed memory, and its release
     * would wait for the GPU. */
    assert_int_equal(DELTA(f, host_unregister), 0);
    assert_int_equal(f->rt.class_stats[0].slabs, 1);
    release(f, q, S1, MODE_STREAM);
    for (int i = 0; i < 3; i++)
        release(f, blocks[i], S1, MODE_STREAM);
    teardown(f);
    unsetenv("FAKE_GPU_BYTES");
}

static void test_runtime_budget_evicts_low_priority_first(void **state)
{
    (void)state;
    setenv("FAKE_GPU_BYTES", "104857600", 1);
    /* Budget 3 MiB; 1 MiB blocks prefetched to the GPU on allocation. */
    struct fixture *f = setup("umpol 1;\nbudget gpu 3MiB;\nslab 8MiB;\n"
                              "class low { match tag \"low\"; prefetch gpu on alloc; priority 1; }\n"
                              "class high { match any; prefetch gpu on alloc; priority 9; }\n");
    tag_push(&f->rt, "low");
    void *l1 = alloc(f, 1u << 20, API_CUDA_MALLOC_ASYNC, S1);
    void *l2 = alloc(f, 1u << 20, API_CUDA_MALLOC_ASYNC, S1);
    tag_pop();
    void *h1 = alloc(f, 1u << 20, API_CUDA_MALLOC_ASYNC, S1);
    assert_int_equal(f->rt.devices[0].resident_bytes, 3u << 20);
    assert_int_equal(DELTA(f, prefetch_bytes_to_host), 0);
    void *h2 = alloc(f, 1u << 20, API_CUDA_MALLOC_ASYNC, S1); /* evicts l1, the oldest low */
    assert_int_equal(f->rt.class_stats[0].evictions, 1);
    assert_int_equal(DELTA(f, prefetch_bytes_to_host), 1u << 20);
    /* on a stream of its own, so placements do not queue behind it */
    assert_int_equal(fake_counters()->last_host_prefetch_stream,
                     (uint64_t)(uintptr_t)f->rt.devices[0].evict_stream);
    assert_true(f->rt.devices[0].evict_stream != f->rt.devices[0].stream);
    struct block *b1 = map_find(&f->rt.map, (uintptr_t)l1);
    struct block *b2 = map_find(&f->rt.map, (uintptr_t)l2);
    assert_false(b1->on_gpu);
    assert_true(b2->on_gpu);
    void *h3 = alloc(f, 1u << 20, API_CUDA_MALLOC_ASYNC, S1); /* evicts l2 */
    assert_int_equal(f->rt.class_stats[0].evictions, 2);
    assert_false(b2->on_gpu);
    assert_residency_exact(f);
    /* Only high-priority blocks are left: a low one may not evict them. */
    tag_push(&f->rt, "low");
    void *l3 = alloc(f, 1u << 20, API_CUDA_MALLOC_ASYNC, S1);
    tag_pop();
    assert_int_equal(f->rt.class_stats[0].budget_skips, 1);
    assert_int_equal(f->rt.class_stats[1].evictions, 0);
    assert_true(f->rt.devices[0].resident_bytes <= 3u << 20);
    void *all[] = {l1, l2, h1, h2, h3, l3};
    for (int i = 0; i < 6; i++)
        release(f, all[i], S1, MODE_STREAM);
    /* Freed blocks keep their pages on the GPU, still counted, until needed. */
    assert_int_equal(f->rt.devices[0].resident_bytes, 3u << 20);
    assert_residency_exact(f);
    teardown(f);
    unsetenv("FAKE_GPU_BYTES");
}

/* Under a budget the runtime is the only way pages reach the GPU: slabs
 * prefer the host and are mapped by the GPU, no read-mostly copies. */
static void test_runtime_budget_steers_slabs_to_host(void **state)
{
    (void)state;
    struct fixture *f = setup("umpol 1;\nbudget gpu 64MiB;\n"
                              "class w { match any; advise read_mostly; place gpu; access gpu; }\n");
    void *a = alloc(f, 4096, API_CUDA_MALLOC_ASYNC, S1);
    assert_int_equal(DELTA(f, advise_read_mostly), 0);
    assert_int_equal(DELTA(f, advise_preferred_host), 1);
    assert_int_equal(DELTA(f, advise_accessed_by), 1);
    /* `place gpu` under a budget: placed by the runtime as it is allocated. */
    assert_true(map_find(&f->rt.map, (uintptr_t)a)->on_gpu);
    assert_int_equal(f->rt.devices[0].resident_bytes, 4096);
    assert_residency_exact(f);
    release(f, a, S1, MODE_STREAM);
    teardown(f);
}

/* Free space left on the GPU is the first thing the budget takes back, and
 * its dead data is not copied: discarded and populated on the host, on the
 * stream that freed it. A new block's pages are placed the same way. */
static void test_runtime_budget_reclaims_free_space_without_copies(void **state)
{
    (void)state;
    struct fixture *f = setup("umpol 1;\nbudget gpu 8MiB;\nslab 32MiB;\n"
                              "class g { match tag \"g\"; place gpu; prefetch gpu on alloc; }\n"
                              "class h { match any; place gpu; prefetch gpu on alloc; }\n");
    tag_push(&f->rt, "g");
    void *a = alloc(f, 6u << 20, API_CUDA_MALLOC_ASYNC, S1);
    tag_pop();
    assert_int_equal(DELTA(f, discard_prefetch), 1); /* whole pages inside: no copy */
    /* Nothing may touch a range while it is discarded: the runtime's own
     * streams (triggers, evictions) now follow S1. */
    assert_int_equal(DELTA(f, stream_wait), 2);
    assert_int_equal(DELTA(f, prefetch_bytes_to_gpu) + DELTA(f, discard_prefetch_bytes), 6u << 20);
    release(f, a, S1, MODE_STREAM);
    assert_int_equal(f->rt.devices[0].resident_bytes, 6u << 20); /* still there, idle */
    void *b = alloc(f, 4u << 20, API_CUDA_MALLOC_ASYNC, S2); /* class h needs room */
    assert_int_equal(f->rt.class_stats[0].reclaims, 1);
    assert_int_equal(f->rt.class_stats[0].reclaim_bytes, 6u << 20);
    assert_int_equal(f->rt.class_stats[0].evictions, 0);
    /* a placed, a taken back, b placed: each through whole pages, no copy of
     * them; only the edges that share a page with a neighbour are copied. */
    assert_int_equal(DELTA(f, discard_prefetch), 3);
    assert_true(DELTA(f, prefetch_bytes_to_host) < 4u << 20);
    assert_int_equal(f->rt.devices[0].resident_bytes, 4u << 20);
    assert_residency_exact(f);
    release(f, b, S2, MODE_STREAM);
    teardown(f);
}

/* Free space already on the GPU is reused before free space that is not:
 * reusing it moves nothing. */
static void test_runtime_reuse_prefers_free_space_on_the_gpu(void **state)
{
    (void)state;
    struct fixture *f = setup("umpol 1;\nbudget gpu 8MiB;\nslab 32MiB;\n"
                              "class g { match tag \"g\"; place gpu; prefetch gpu on alloc; }\n"
                              "class h { match any; place gpu; prefetch gpu on alloc; }\n");
    tag_push(&f->rt, "g");
    void *a = alloc(f, 2u << 20, API_CUDA_MALLOC_ASYNC, S1);
    void *sep = alloc(f, 512, API_CUDA_MALLOC_ASYNC, S1); /* keeps a and b apart */
    void *b = alloc(f, 4u << 20, API_CUDA_MALLOC_ASYNC, S1);
    tag_pop();
    release(f, a, S1, MODE_STREAM);
    release(f, b, S1, MODE_STREAM); /* both free, both still on the GPU */
    void *h = alloc(f, 2u << 20, API_CUDA_MALLOC_ASYNC, S1); /* takes a's space back */
    assert_int_equal(f->rt.class_stats[0].reclaims, 1);
    uint64_t moves = DELTA(f, prefetch) + DELTA(f, discard_prefetch);
    tag_push(&f->rt, "g");
    void *c = alloc(f, 3u << 19, API_CUDA_MALLOC_ASYNC, S1); /* a's space fits, b's is on the GPU */
    tag_pop();
    assert_ptr_equal(c, b);
    assert_int_equal(DELTA(f, prefetch) + DELTA(f, discard_prefetch), moves);
    assert_residency_exact(f);
    release(f, c, S1, MODE_STREAM);
    release(f, sep, S1, MODE_STREAM);
    release(f, h, S1, MODE_STREAM);
    teardown(f);
}

/* Free space on the GPU serves a large request whatever its size: the
 * rest stays there, free. A new slab would have to be placed, and the budget
 * would take the free space back to make room for it. */
static void test_runtime_large_request_splits_free_space_on_the_gpu(void **state)
{
    (void)state;
    struct fixture *f = setup("umpol 1;\nbudget gpu 64MiB;\nslab 64MiB;\n"
                              "class all { match any; place gpu; prefetch gpu on alloc; }\n");
    void *big = alloc(f, 60u << 20, API_CUDA_MALLOC_ASYNC, S1);
    release(f, big, S1, MODE_STREAM);
    uint64_t moves = DELTA(f, prefetch) + DELTA(f, discard_prefetch);
    void *a = alloc(f, 40u << 20, API_CUDA_MALLOC_ASYNC, S1);
    void *b = alloc(f, 20u << 20, API_CUDA_MALLOC_ASYNC, S1); /* the rest of it */
    assert_ptr_equal(a, big);
    assert_ptr_equal(b, (char *)big + (40u << 20));
    assert_int_equal(DELTA(f, malloc_managed), 1);
    assert_int_equal(DELTA(f, prefetch) + DELTA(f, discard_prefetch), moves);
    assert_int_equal(f->rt.class_stats[0].reclaims, 0);
    assert_residency_exact(f);
    release(f, a, S1, MODE_STREAM);
    release(f, b, S1, MODE_STREAM);
    teardown(f);
}

/* A trigger that moves more than the budget holds places what fits and
 * never evicts what it placed itself. */
static void test_runtime_trigger_never_evicts_its_own_batch(void **state)
{
    (void)state;
    struct fixture *f = setup("umpol 1;\nbudget gpu 2MiB;\n"
                              "class opt { match any; place host; access gpu;\n"
                              "            prefetch gpu on enter \"optimizer*\"; }\n");
    void *m[3];
    for (int i = 0; i < 3; i++)
        m[i] = alloc(f, 1u << 20, API_CUDA_MALLOC_ASYNC, S1);
    phase_enter(&f->rt, "optimizer.step");
    assert_int_equal(f->rt.class_stats[0].evictions, 0);
    assert_int_equal(f->rt.class_stats[0].budget_skips, 1);
    assert_int_equal(f->rt.devices[0].resident_bytes, 2u << 20);
    assert_residency_exact(f);
    phase_exit(&f->rt);
    phase_enter(&f->rt, "optimizer.step"); /* the next round may evict the last one's */
    assert_int_equal(f->rt.devices[0].resident_bytes, 2u << 20);
    assert_residency_exact(f);
    phase_exit(&f->rt);
    for (int i = 0; i < 3; i++)
        release(f, m[i], S1, MODE_STREAM);
    teardown(f);
}

/* A random mix of allocations, frees on several streams, phases and device
 * memory: the fake GPU never holds more than the budget, and holds exactly
 * what the runtime counts. */
static void test_runtime_budget_bounds_what_the_gpu_holds(void **state)
{
    (void)state;
    setenv("FAKE_GPU_BYTES", "1073741824", 1);
    const uint64_t budget = 24u << 20;
    struct fixture *f = setup("umpol 1;\nbudget gpu 24MiB;\nslab 4MiB;\n"
                              "class opt { match phase \"optimizer*\"; place host near; access gpu;\n"
                              "            prefetch gpu on enter \"optimizer*\"; priority 1; }\n"
                              "class act { match tag \"act\"; place gpu; prefetch gpu on alloc;\n"
                              "            priority 5; }\n"
                              "class w { match tag \"w\"; place gpu; priority 9; }\n"
                              "class dev { match tag \"dev\"; memory device; }\n");
    enum { LIVE = 64 };
    void *live[LIVE] = {0};
    cudaStream_t streams[] = {S1, S2, 0};
    uint64_t x = 88172645463325252ull;
    bool in_opt = false;
    void *dev_block = NULL;
    tag_push(&f->rt, "dev");
    dev_block = alloc(f, 64u << 10, API_CUDA_MALLOC_ASYNC, S1); /* one 4 MiB device slab */
    tag_pop();
    for (int op = 0; op < 4000; op++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int slot = (int)(x % LIVE);
        cudaStream_t st = streams[(x >> 8) % 3];
        if ((x >> 16) % 17 == 0) {
            if (in_opt)
                phase_exit(&f->rt);
            else
                phase_enter(&f->rt, "optimizer.step");
            in_opt = !in_opt;
        } else if (live[slot]) {
            release(f, live[slot], st, st ? MODE_STREAM : MODE_ANY);
            live[slot] = NULL;
        } else {
            static const char *const tags[] = {"act", "w", NULL};
            const char *tag = tags[(x >> 24) % 3];
            if (!tag && !in_opt)
                tag = "act"; /* untagged outside the optimizer: no class */
            size_t size = 1024 + (size_t)((x >> 32) % (3u << 20));
            if (tag)
                tag_push(&f->rt, tag);
            live[slot] = alloc(f, size, st ? API_CUDA_MALLOC_ASYNC : API_CUDA_MALLOC, st);
            if (tag)
                tag_pop();
        }
        assert_true(fake_resident_bytes() - f->resident_before <= budget);
        assert_residency_exact(f);
        assert_bins_consistent(f);
    }
    const struct class_stats *cs = f->rt.class_stats;
    assert_true(cs[0].evictions + cs[1].evictions > 0);
    assert_true(cs[0].reclaims + cs[1].reclaims + cs[2].reclaims > 0);
    assert_true(cs[0].budget_skips + cs[1].budget_skips + cs[2].budget_skips > 0);
    assert_true(DELTA(f, discard_prefetch) > 0);
    if (in_opt)
        phase_exit(&f->rt);
    for (int i = 0; i < LIVE; i++)
        if (live[i])
            release(f, live[i], S1, MODE_STREAM);
    release(f, dev_block, S1, MODE_STREAM);
    assert_residency_exact(f);
    teardown(f);
    unsetenv("FAKE_GPU_BYTES");
}

static void test_runtime_phase_triggers_batch_prefetch(void **state)
{
    (void)state;
    struct fixture *f = setup("umpol 1;\n"
                              "class opt { match phase \"optimizer*\"; place host; access gpu;\n"
                              "            prefetch gpu on enter \"optimizer*\";\n"
                              "            prefetch host on exit \"optimizer*\"; }\n"
                              "class kv { match tag \"kv\"; prefetch gpu on mark \"hot\"; }\n"
                              "class rest { match any; memory device; }\n");
    phase_enter(&f->rt, "optimizer.step");
    void *m1 = alloc(f, 100000, API_CUDA_MALLOC_ASYNC, S1);
    void *m2 = alloc(f, 200000, API_CUDA_MALLOC_ASYNC, S1);
    phase_exit(&f->rt); /* both moved to the host in one batch */
    assert_int_equal(DELTA(f, prefetch_batch), 1);
    uint64_t to_host = DELTA(f, prefetch_bytes_to_host);
    assert_true(to_host >= 300000);
    void *other = alloc(f, 5000, API_CUDA_MALLOC_ASYNC, S1); /* no phase: class rest */
    assert_int_equal(map_find(&f->rt.map, (uintptr_t)other)->class_idx, 2);
    phase_enter(&f->rt, "optimizer.step");
    assert_int_equal(DELTA(f, prefetch_batch), 2);
    assert_true(DELTA(f, prefetch_bytes_to_gpu) >= 300000);
    /* Placed on allocation inside the open phase, then out on exit, in on entry. */
    assert_int_equal(f->rt.class_stats[0].prefetches, 6);
    phase_exit(&f->rt);
    phase_enter(&f->rt, "forward"); /* matches no trigger */
    phase_exit(&f->rt);
    assert_int_equal(DELTA(f, prefetch_batch), 3);
    tag_push(&f->rt, "kv");
    void *k = alloc(f, 4096, API_CUDA_MALLOC_ASYNC, S1);
    tag_pop();
    uint64_t before = DELTA(f, prefetch_bytes_to_gpu);
    phase_mark(&f->rt, "cold"); /* no such mark */
    phase_mark(&f->rt, "hot");
    assert_true(DELTA(f, prefetch_bytes_to_gpu) - before >= 4096);
    assert_int_equal(f->rt.phase_stat_count, 2);
    assert_int_equal(f->rt.phase_stats[0].entries, 2);
    void *all[] = {m1, m2, other, k};
    for (int i = 0; i < 4; i++)
        release(f, all[i], S1, MODE_STREAM);
    teardown(f);
}

/* umpol_note_saved's work: the block at PTR reported saved for backward. */
static void note_saved(struct fixture *f, void *ptr)
{
    pthread_mutex_lock(&f->rt.lock);
    struct block *b = map_find(&f->rt.map, (uintptr_t)ptr);
    assert_non_null(b);
    rt_saved(&f->rt, b);
    pthread_mutex_unlock(&f->rt.lock);
}

static int class_of(struct fixture *f, void *ptr)
{
    return map_find(&f->rt.map, (uintptr_t)ptr)->class_idx;
}

/* A block allocated in class activations moves to saved_acts when reported
 * saved: its counts, advice, LRU and triggers follow it, and it goes back to
 * its slab's class when freed. A weight (allocated outside forward) and a
 * block of plain device memory stay where they are. */
static void test_runtime_saved_block_moves_class(void **state)
{
    (void)state;
    struct fixture *f = setup("umpol 1;\n"
                              "slab 8MiB;\n"
                              "class saved_acts { match phase \"forward*\" and saved; place host;\n"
                              "    access gpu; priority 1; prefetch gpu on enter \"backward\";\n"
                              "    prefetch host on exit \"forward\"; }\n"
                              "class big { match size >= 16MiB; memory device; }\n"
                              "class activations { match phase \"forward*\"; place gpu; priority 5;\n"
                              "    prefetch gpu on alloc; }\n"
                              "class weights { match phase \"init\"; }\n"
                              "class rest { match any; }\n");
    enum { SAVED_ACTS, BIG, ACTS, WEIGHTS };
    const size_t mib = 1u << 20;
    phase_enter(&f->rt, "init");
    void *w = alloc(f, mib, API_CUDA_MALLOC_ASYNC, S1);
    phase_exit(&f->rt);
    phase_enter(&f->rt, "forward");
    void *a1 = alloc(f, 4 * mib, API_CUDA_MALLOC_ASYNC, S1);
    void *a2 = alloc(f, 4 * mib, API_CUDA_MALLOC_ASYNC, S1);
    void *d = alloc(f, 18 * mib, API_CUDA_MALLOC_ASYNC, S1);
    assert_int_equal(class_of(f, a1), ACTS);
    assert_int_equal(class_of(f, d), BIG);
    const struct class_stats *st = f->rt.class_stats;
    assert_int_equal(st[ACTS].allocations, 2);
    assert_int_equal(st[ACTS].live_bytes, 8 * mib);
    struct pool *acts = f->rt.devices[0].pools[ACTS];
    assert_ptr_equal(acts->lru_head, map_find(&f->rt.map, (uintptr_t)a1));
    uint64_t unset = DELTA(f, advise_unset), host = DELTA(f, advise_preferred_host);

    note_saved(f, a1);
    struct block *b1 = map_find(&f->rt.map, (uintptr_t)a1);
    assert_int_equal(b1->class_idx, SAVED_ACTS);
    assert_true(b1->moved_in);
    assert_int_equal(st[ACTS].allocations, 1);
    assert_int_equal(st[ACTS].live_bytes, 4 * mib);
    assert_int_equal(st[SAVED_ACTS].allocations, 1);
    assert_int_equal(st[SAVED_ACTS].reclassified, 1);
    assert_int_equal(st[SAVED_ACTS].live_bytes, 4 * mib);
    assert_int_equal(st[SAVED_ACTS].peak_bytes, 4 * mib);
    assert_int_equal(st[ACTS].reclassified, 0);
    /* Its whole pages take saved_acts's advice: preferred location host. */
    assert_true(DELTA(f, advise_unset) > unset);
    assert_int_equal(DELTA(f, advise_preferred_host), host + 1);
    /* It left activations' LRU for saved_acts's, still on the GPU. */
    struct pool *saved = f->rt.devices[0].pools[SAVED_ACTS];
    assert_non_null(saved);
    assert_ptr_equal(saved->lru_head, b1);
    assert_ptr_equal(saved->guests, b1);
    assert_ptr_equal(acts->lru_head, map_find(&f->rt.map, (uintptr_t)a2));
    assert_residency_exact(f);

    /* A tensor inside a block (a caching allocator's segment) finds it; plain
     * device memory is found only at its start. */
    pthread_mutex_lock(&f->rt.lock);
    struct block *b2 = map_find(&f->rt.map, (uintptr_t)a2);
    assert_ptr_equal(rt_block_holding(&f->rt, (uintptr_t)a2 + 4096), b2);
    assert_ptr_equal(rt_block_holding(&f->rt, (uintptr_t)a2 + 4 * mib - 1), b2);
    assert_ptr_equal(rt_block_holding(&f->rt, (uintptr_t)a2), b2);
    assert_non_null(rt_block_holding(&f->rt, (uintptr_t)d));
    assert_null(rt_block_holding(&f->rt, (uintptr_t)d + 4096));
    assert_null(rt_block_holding(&f->rt, 4096));
    pthread_mutex_unlock(&f->rt.lock);

    note_saved(f, a1); /* moved once: stays */
    note_saved(f, w);  /* a weight, allocated in "init": stays a weight */
    note_saved(f, d);  /* device memory: cannot move */
    assert_int_equal(class_of(f, a1), SAVED_ACTS);
    assert_int_equal(class_of(f, w), WEIGHTS);
    assert_int_equal(class_of(f, d), BIG);
    assert_int_equal(st[SAVED_ACTS].reclassified, 1);
    assert_int_equal(st[SAVED_ACTS].allocations, 1);
    /* The job's own managed memory moves too: its counts and its range's class. */
    void *m = alloc(f, mib, API_CUDA_MALLOC_MANAGED, S1);
    assert_int_equal(class_of(f, m), ACTS);
    note_saved(f, m);
    assert_int_equal(class_of(f, m), SAVED_ACTS);
    assert_int_equal(st[SAVED_ACTS].reclassified, 2);
    assert_int_equal(st[SAVED_ACTS].live_bytes, 4 * mib + mib);
    assert_int_equal(st[ACTS].live_bytes, 4 * mib);
    assert_int_equal(ranges_class_of(&f->rt.ranges, (uintptr_t)m + 100), SAVED_ACTS);
    release(f, m, S1, MODE_STREAM);
    assert_int_equal(st[SAVED_ACTS].frees, 1);
    assert_int_equal(st[SAVED_ACTS].live_bytes, 4 * mib);
    assert_int_equal(ranges_class_of(&f->rt.ranges, (uintptr_t)m + 100), -1);

    /* saved_acts's triggers move the block it took, and only it. */
    assert_true(b1->on_gpu);
    /* One block: moved alone, not in a batch. */
    uint64_t moves = DELTA(f, prefetch), to_host = DELTA(f, prefetch_bytes_to_host);
    uint64_t prefetches = st[SAVED_ACTS].prefetches;
    phase_exit(&f->rt);
    assert_int_equal(DELTA(f, prefetch), moves + 1);
    assert_int_equal(DELTA(f, prefetch_bytes_to_host), to_host + 4 * mib);
    assert_int_equal(st[SAVED_ACTS].prefetches, prefetches + 1);
    assert_false(b1->on_gpu);
    assert_null(saved->lru_head);
    assert_true(map_find(&f->rt.map, (uintptr_t)a2)->on_gpu);
    assert_residency_exact(f);
    phase_enter(&f->rt, "backward");
    assert_int_equal(DELTA(f, prefetch), moves + 2);
    assert_int_equal(st[SAVED_ACTS].prefetches, prefetches + 2);
    assert_true(b1->on_gpu);
    assert_ptr_equal(saved->lru_tail, b1);
    assert_residency_exact(f);
    phase_exit(&f->rt);

    /* Freed: counted in saved_acts, the space is activations' again. */
    release(f, a1, S1, MODE_STREAM);
    assert_int_equal(st[SAVED_ACTS].frees, 2);
    assert_int_equal(st[SAVED_ACTS].live_bytes, 0);
    assert_null(saved->guests);
    assert_null(saved->lru_head);
    assert_int_equal(st[ACTS].frees, 0);
    assert_int_equal(DELTA(f, advise_preferred_host), host + 2); /* a1 and m; a1 is back to place gpu */
    pthread_mutex_lock(&f->rt.lock);
    assert_null(rt_block_holding(&f->rt, (uintptr_t)a1 + 4096)); /* free space */
    pthread_mutex_unlock(&f->rt.lock);
    phase_enter(&f->rt, "forward");
    void *a3 = alloc(f, 4 * mib, API_CUDA_MALLOC_ASYNC, S1);
    assert_ptr_equal(a3, a1);
    assert_int_equal(class_of(f, a3), ACTS);
    assert_false(map_find(&f->rt.map, (uintptr_t)a3)->moved_in);
    phase_exit(&f->rt);
    assert_bins_consistent(f);
    assert_residency_exact(f);
    void *all[] = {w, a2, a3, d};
    for (int i = 0; i < 4; i++)
        release(f, all[i], S1, MODE_STREAM);
    assert_int_equal(st[ACTS].live_bytes, 0);
    assert_int_equal(st[SAVED_ACTS].live_bytes, 0);
    teardown(f);
}

/* Under a budget, a block moved to a class of lower priority is evicted
 * before the older blocks of the class it left. */
static void test_runtime_saved_block_takes_its_new_priority(void **state)
{
    (void)state;
    struct fixture *f = setup("umpol 1;\nbudget gpu 3MiB;\nslab 8MiB;\n"
                              "class saved_acts { match saved; priority 1; }\n"
                              "class acts { match any; prefetch gpu on alloc; priority 9; }\n");
    void *a[4];
    for (int i = 0; i < 3; i++)
        a[i] = alloc(f, 1u << 20, API_CUDA_MALLOC_ASYNC, S1);
    assert_int_equal(f->rt.devices[0].resident_bytes, 3u << 20);
    note_saved(f, a[2]); /* the most recent, now of priority 1 */
    struct block *moved = map_find(&f->rt.map, (uintptr_t)a[2]);
    assert_int_equal(moved->class_idx, 0);
    assert_true(moved->on_gpu);
    assert_residency_exact(f);
    a[3] = alloc(f, 1u << 20, API_CUDA_MALLOC_ASYNC, S1); /* evicts the moved block */
    assert_false(moved->on_gpu);
    assert_int_equal(f->rt.class_stats[0].evictions, 1);
    assert_int_equal(f->rt.class_stats[1].evictions, 0);
    assert_true(map_find(&f->rt.map, (uintptr_t)a[0])->on_gpu);
    assert_residency_exact(f);
    for (int i = 0; i < 4; i++)
        release(f, a[i], S1, MODE_STREAM);
    assert_int_equal(f->rt.class_stats[0].live_bytes, 0);
    assert_int_equal(f->rt.class_stats[1].live_bytes, 0);
    assert_bins_consistent(f);
    assert_residency_exact(f);
    teardown(f);
}

static void test_runtime_reused_block_is_not_prefetched_again(void **state)
{
    (void)state;
    struct fixture *f = setup("umpol 1;\nclass g { match any; place gpu; prefetch gpu on alloc; }\n");
    void *a = alloc(f, 4096, API_CUDA_MALLOC_ASYNC, S1);
    assert_int_equal(DELTA(f, prefetch), 1); /* the new slab, once, whole */
    assert_int_equal(DELTA(f, prefetch_bytes_to_gpu), 64u << 20);
    void *c = alloc(f, 8192, API_CUDA_MALLOC_ASYNC, S1); /* carved from it: no prefetch */
    release(f, a, S1, MODE_STREAM);
    void *b = alloc(f, 4096, API_CUDA_MALLOC_ASYNC, S1); /* same block, pages still on the GPU */
    assert_ptr_equal(a, b);
    assert_int_equal(DELTA(f, prefetch), 1);
    assert_int_equal(f->rt.devices[0].resident_bytes, 64u << 20); /* the whole slab is there */
    assert_residency_exact(f);
    release(f, b, S1, MODE_STREAM);
    release(f, c, S1, MODE_STREAM);
    teardown(f);
}

static void test_runtime_discard_only_whole_pages_of_dead_blocks(void **state)
{
    (void)state;
    struct fixture *f = setup("umpol 1;\nslab 16MiB;\nclass m { match size < 1GiB; }\n"
                              "class d { match any; memory device; }\n");
    f->rt.discard = true;
    void *small = alloc(f, 1u << 20, API_CUDA_MALLOC_ASYNC, S1);   /* no whole 2 MiB page */
    void *big = alloc(f, 6u << 20, API_CUDA_MALLOC_ASYNC, S1);     /* offset 1 MiB: pages 2..6 */
    release(f, small, S1, MODE_STREAM);
    assert_int_equal(DELTA(f, discard_prefetch), 0);
    release(f, big, S1, MODE_STREAM);
    assert_int_equal(DELTA(f, discard_prefetch), 1);
    assert_int_equal(DELTA(f, discard_prefetch_bytes), 4u << 20); /* [2 MiB, 6 MiB) of the slab */
    void *c = alloc(f, 6u << 20, API_CUDA_MALLOC, 0);
    release(f, c, 0, MODE_ANY); /* cudaFree: synchronous, nothing to order a discard on */
    assert_int_equal(DELTA(f, discard_prefetch), 1);
    assert_int_equal(f->rt.class_stats[0].discard_bytes, 4u << 20);
    /* Freed on the legacy stream, which CUDA refuses for a discard: done on the
     * runtime's stream between waits both ways, so the legacy stream, which
     * the block's next user follows, comes after it. */
    void *d = alloc(f, 6u << 20, API_CUDA_MALLOC_ASYNC, 0);
    uint64_t waits = DELTA(f, stream_wait);
    release(f, d, 0, MODE_STREAM);
    assert_int_equal(DELTA(f, discard_prefetch), 2);
    assert_int_equal(DELTA(f, stream_wait), waits + 3); /* and the eviction stream after it */
    struct block *freed = NULL;
    for (struct slab *s = f->rt.devices[0].pools[0]->slabs; s && !freed; s = s->next)
        for (struct block *b = s->first; b; b = b->next)
            if (b->addr == (uintptr_t)d)
                freed = b;
    assert_non_null(freed);
    assert_ptr_equal(freed->free_streams[0], (cudaStream_t)0);
    teardown(f);
}

static void test_runtime_allocation_inside_open_trigger_phase_is_placed(void **state)
{
    (void)state;
    struct fixture *f = setup("umpol 1;\nclass opt { match any; place host; access gpu;\n"
                              "  prefetch gpu on enter \"optimizer*\"; }\n");
    void *before = alloc(f, 4096, API_CUDA_MALLOC_ASYNC, S1); /* no phase: stays put */
    assert_int_equal(DELTA(f, prefetch), 0);
    phase_enter(&f->rt, "optimizer.step"); /* moves `before` */
    uint64_t batch = DELTA(f, prefetch) + DELTA(f, prefetch_batch);
    void *inside = alloc(f, 8192, API_CUDA_MALLOC_ASYNC, S1); /* AdamW's first step */
    assert_int_equal(DELTA(f, prefetch) + DELTA(f, prefetch_batch), batch + 1);
    assert_true(map_find(&f->rt.map, (uintptr_t)inside)->on_gpu);
    phase_exit(&f->rt);
    void *after = alloc(f, 4096, API_CUDA_MALLOC_ASYNC, S1);
    assert_false(map_find(&f->rt.map, (uintptr_t)after)->on_gpu);
    release(f, before, S1, MODE_STREAM);
    release(f, inside, S1, MODE_STREAM);
    release(f, after, S1, MODE_STREAM);
    teardown(f);
}

static void test_runtime_phases_nest_and_count(void **state)
{
    (void)state;
    struct fixture *f = setup("umpol 1;\nclass b { match phase \"backward\"; }\n"
                              "class rest { match any; memory device; }\n");
    phase_enter(&f->rt, "step");
    phase_enter(&f->rt, "backward");
    phase_enter(&f->rt, "backward"); /* nested twice */
    phase_exit(&f->rt);
    void *a = alloc(f, 64, API_CUDA_MALLOC_ASYNC, S1);
    assert_int_equal(map_find(&f->rt.map, (uintptr_t)a)->class_idx, 0);
    phase_exit(&f->rt);
    void *b = alloc(f, 64, API_CUDA_MALLOC_ASYNC, S1);
    assert_int_equal(map_find(&f->rt.map, (uintptr_t)b)->class_idx, 1);
    phase_exit(&f->rt);
    phase_exit(&f->rt); /* unbalanced: ignored */
    release(f, a, S1, MODE_STREAM);
    release(f, b, S1, MODE_STREAM);
    teardown(f);
}

static int phase_named(struct runtime *rt, const char *name)
{
    for (size_t i = 0; i < rt->phase_stat_count; i++)
        if (strcmp(rt->phase_stats[i].name, name) == 0) return (int)i;
    return -2;
}

static void *recompute_on_another_thread(void *arg)
{
    struct runtime *rt = arg;
    phase_enter(rt, "forward.recompute");
    assert_int_equal(atomic_load(&rt->phase_current), phase_named(rt, "forward.recompute"));
    phase_exit(rt);
    return NULL;
}

/* Allocations are recorded (the report's sites) under the innermost phase
 * open anywhere: when autograd's thread closes its recomputed forward, the
 * job's backward, open on the main thread, is the phase again, not none. */
static void test_runtime_site_phase_is_process_wide(void **state)
{
    (void)state;
    struct fixture *f = setup("umpol 1;\nclass rest { match any; memory device; }\n");
    phase_enter(&f->rt, "backward");
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, recompute_on_another_thread, &f->rt), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(atomic_load(&f->rt.phase_current), phase_named(&f->rt, "backward"));
    assert_int_equal(f->rt.opening_count, 1);
    phase_exit(&f->rt);
    assert_int_equal(atomic_load(&f->rt.phase_current), -1);
    assert_int_equal(f->rt.opening_count, 0);
    teardown(f);
}

static void *open_backward_and_exit(void *arg)
{
    phase_enter(arg, "backward");
    return NULL;
}

/* A thread that exits with a phase open closes it: the phase no longer holds
 * for the other threads' allocations, nor is it their recorded phase. */
static void test_runtime_thread_exit_closes_its_phases(void **state)
{
    (void)state;
    struct fixture *f = setup("umpol 1;\nclass b { match phase \"backward\"; }\n"
                              "class rest { match any; memory device; }\n");
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, open_backward_and_exit, &f->rt), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(f->rt.opening_count, 0);
    assert_int_equal(atomic_load(&f->rt.phase_current), -1);
    assert_int_not_equal(f->rt.spans[0].end_ns, 0);
    void *a = alloc(f, 64, API_CUDA_MALLOC_ASYNC, S1);
    assert_int_equal(map_find(&f->rt.map, (uintptr_t)a)->class_idx, 1);
    release(f, a, S1, MODE_STREAM);
    teardown(f);
}

/* After fork the child's counters start at zero (each allocation is counted
 * once over parent and child) and its peaks at what it holds; its blocks
 * stay live and the phase its thread had open stays open, from the fork on. */
static void test_runtime_fork_child_counts_only_its_own_work(void **state)
{
    (void)state;
    struct fixture *f = setup("umpol 1;\nclass b { match phase \"step\"; }\n"
                              "class big { match size >= 32MiB; memory device; }\n"
                              "class rest { match any; }\n");
    /* The parent's peak on the card, above what it holds at the fork. */
    void *big = alloc(f, 64u << 20, API_CUDA_MALLOC_ASYNC, S1);
    release(f, big, S1, MODE_STREAM);
    place_trim(&f->rt, -1, -1);
    const struct device_state *dev = &f->rt.devices[0];
    assert_true(dev->resident_peak > dev->resident_bytes);
    void *a = alloc(f, 4096, API_CUDA_MALLOC_ASYNC, S1);
    phase_enter(&f->rt, "step");
    void *b = alloc(f, 8192, API_CUDA_MALLOC_ASYNC, S1);
    phase_enter(&f->rt, "inner");
    phase_exit(&f->rt);
    assert_int_equal(f->rt.allocations, 3);
    assert_int_equal(f->rt.span_count, 2);
    uint64_t live_b = f->rt.class_stats[0].live_bytes;

    runtime_after_fork_child(&f->rt);
    assert_int_equal(dev->resident_peak, dev->resident_bytes);
    assert_int_equal(f->rt.allocations, 0);
    assert_int_equal(f->rt.class_stats[0].allocations, 0);
    assert_int_equal(f->rt.class_stats[2].bytes_requested, 0);
    assert_int_equal(f->rt.class_stats[0].live_bytes, live_b);
    assert_int_equal(f->rt.class_stats[0].peak_bytes, live_b);
    for (size_t i = 0; i < f->rt.phase_stat_count; i++)
        assert_int_equal(f->rt.phase_stats[i].entries, 0);
    assert_int_equal(f->rt.span_count, 1); /* "step", still open */
    assert_int_equal(f->rt.spans[0].end_ns, 0);

    void *c = alloc(f, 1024, API_CUDA_MALLOC_ASYNC, S1);
    assert_int_equal(map_find(&f->rt.map, (uintptr_t)c)->class_idx, 0); /* "step" still open */
    assert_int_equal(f->rt.allocations, 1);
    phase_exit(&f->rt);
    assert_int_not_equal(f->rt.spans[0].end_ns, 0);
    void *d = alloc(f, 1024, API_CUDA_MALLOC_ASYNC, S1);
    assert_int_equal(map_find(&f->rt.map, (uintptr_t)d)->class_idx, 2);
    release(f, a, S1, MODE_STREAM);
    release(f, b, S1, MODE_STREAM);
    release(f, c, S1, MODE_STREAM);
    release(f, d, S1, MODE_STREAM);
    assert_int_equal(f->rt.frees, 4); /* the child's: the big block was freed before the fork */
    assert_int_equal(f->rt.class_stats[0].live_bytes + f->rt.class_stats[2].live_bytes, 0);
    teardown(f);
}

static void test_runtime_passthrough_and_capture(void **state)
{
    (void)state;
    struct fixture *f = setup("umpol 1;\nclass small { match size < 1MiB; }\n");
    void *p = NULL;
    bool handled = true;
    rt_alloc(&f->rt, &p, 2u << 20, API_CUDA_MALLOC_ASYNC, S1, &handled);
    assert_false(handled); /* no class: the hook calls CUDA itself */
    fake_set_capturing(1);
    rt_alloc(&f->rt, &p, 100, API_CUDA_MALLOC_ASYNC, S1, &handled);
    assert_false(handled); /* graph capture: left to CUDA's graph allocator */
    fake_set_capturing(0);
    assert_int_equal(f->rt.passthrough, 2);
    fake_force_device(RT_MAX_DEVICES); /* a GPU the runtime keeps no state for */
    rt_alloc(&f->rt, &p, 100, API_CUDA_MALLOC_ASYNC, S1, &handled);
    assert_false(handled); /* CUDA serves it, as the job asked */
    fake_force_device(0);
    assert_int_equal(f->rt.passthrough, 3);
    cudaError_t err;
    int local;
    assert_false(rt_free(&f->rt, &local, S1, MODE_STREAM, &err)); /* not ours */
    teardown(f);
}

static void test_runtime_adopts_jobs_managed_memory(void **state)
{
    (void)state;
    struct fixture *f = setup("umpol 1;\nclass um { match api cudaMallocManaged; place host; "
                              "access gpu; prefetch gpu on alloc; }\n");
    void *p = alloc(f, 123456, API_CUDA_MALLOC_MANAGED, 0);
    assert_int_equal(DELTA(f, malloc_managed), 1);
    assert_int_equal(DELTA(f, advise_preferred), 1);
    assert_int_equal(DELTA(f, advise_accessed_by), 1);
    assert_int_equal(DELTA(f, prefetch), 1);
    assert_int_equal(f->rt.devices[0].managed_bytes, 123456);
    release(f, p, 0, MODE_ANY);
    assert_int_equal(DELTA(f, free), 1); /* really freed: it was the job's */
    assert_int_equal(f->rt.devices[0].managed_bytes, 0);
    teardown(f);
}

static void test_runtime_devices_have_own_pools(void **state)
{
    (void)state;
    struct fixture *f = setup("umpol 1;\nclass g { match any; prefetch gpu on alloc; }\n");
    void *a = alloc(f, 4096, API_CUDA_MALLOC_ASYNC, S1);
    cudaSetDevice(1);
    void *b = alloc(f, 4096, API_CUDA_MALLOC_ASYNC, S1);
    cudaSetDevice(0);
    assert_true(f->rt.devices[0].known && f->rt.devices[1].known);
    assert_int_equal(map_find(&f->rt.map, (uintptr_t)b)->slab->pool->device, 1);
    assert_int_equal(DELTA(f, malloc_managed), 2);
    release(f, a, S1, MODE_STREAM);
    release(f, b, S1, MODE_STREAM);
    teardown(f);
}

static void test_runtime_map_random_churn(void **state)
{
    (void)state;
    struct block_map m;
    map_init(&m);
    enum { N = 5000 };
    struct block *blocks = calloc(N, sizeof *blocks);
    bool in[N] = {false};
    uint64_t seed = 1;
    for (int i = 0; i < N; i++)
        blocks[i].addr = 0x10000 + (uintptr_t)i * 512;
    for (int step = 0; step < 200000; step++) {
        seed = seed * 6364136223846793005ull + 1;
        int i = (int)((seed >> 33) % N);
        if (in[i]) {
            assert_ptr_equal(map_remove(&m, blocks[i].addr), &blocks[i]);
            in[i] = false;
        } else {
            assert_int_equal(map_insert(&m, &blocks[i]), 0);
            in[i] = true;
        }
        int j = (int)((seed >> 13) % N);
        assert_ptr_equal(map_find(&m, blocks[j].addr), in[j] ? &blocks[j] : NULL);
    }
    map_free(&m);
    free(blocks);
}

static void test_runtime_report_is_written_atomically(void **state)
{
    (void)state;
    struct fixture *f = setup(basic_policy);
    void *a = alloc(f, 1000, API_CUDA_MALLOC_ASYNC, S1);
    phase_enter(&f->rt, "forward \"quoted\"");
    phase_exit(&f->rt);
    char dir[] = "/tmp/umpol-test-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char pattern[128], path[256];
    snprintf(pattern, sizeof pattern, "%s/report-%%p-%%r.json", dir);
    setenv("RANK", "3", 1);
    report_expand_path(pattern, path, sizeof path);
    char want[256];
    snprintf(want, sizeof want, "%s/report-%ld-3.json", dir, (long)getpid());
    assert_string_equal(path, want);
    assert_int_equal(report_write(&f->rt, path), 0);
    unsetenv("RANK");
    FILE *in = fopen(path, "r");
    assert_non_null(in);
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, in);
    buf[n] = '\0';
    fclose(in);
    assert_non_null(strstr(buf, "\"umpol_report\": 1"));
    assert_non_null(strstr(buf, "\"rank\": 3"));
    assert_non_null(strstr(buf, "{\"name\": \"hot\", \"memory\": \"managed\", \"allocations\": 1"));
    assert_non_null(strstr(buf, "\"forward \\\"quoted\\\"\", \"entries\": 1"));
    unlink(path);
    rmdir(dir);
    release(f, a, S1, MODE_STREAM);
    teardown(f);
}

static uint64_t fake_now;
static uint64_t fake_clock(void)
{
    return fake_now;
}

static struct fixture *setup_profiled(const char *policy, const char *steps)
{
    setenv("UMPOL_PROFILE", "1", 1);
    setenv("UMPOL_CUPTI_LIBRARY", "/nonexistent/libcupti.so", 1); /* attribution only */
    if (steps)
        setenv("UMPOL_PROFILE_STEPS", steps, 1);
    struct fixture *f = setup(policy);
    assert_int_equal(profile_init(&f->rt), 0);
    assert_non_null(f->rt.profile);
    f->rt.profile->clock = fake_clock;
    unsetenv("UMPOL_PROFILE");
    unsetenv("UMPOL_CUPTI_LIBRARY");
    unsetenv("UMPOL_PROFILE_STEPS");
    return f;
}

static void test_runtime_profile_attributes_to_class_and_phase(void **state)
{
    (void)state;
    struct fixture *f = setup_profiled("umpol 1;\nclass a { match tag \"a\"; }\n"
                                       "class b { match any; }\n", NULL);
    tag_push(&f->rt, "a");
    void *pa = alloc(f, 4096, API_CUDA_MALLOC_ASYNC, S1);
    tag_pop();
    void *pb = alloc(f, 4096, API_CUDA_MALLOC_ASYNC, S1);
    fake_now = 100;
    phase_enter(&f->rt, "forward");
    fake_now = 120;
    phase_enter(&f->rt, "attention");
    fake_now = 130;
    phase_exit(&f->rt);
    fake_now = 200;
    phase_exit(&f->rt);
    struct runtime *rt = &f->rt;
    profile_attribute(rt, CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT, 5,
                      (uintptr_t)pa + 100, 110, 117);
    profile_attribute(rt, CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT, 2,
                      (uintptr_t)pb, 125, 128); /* inside the nested phase */
    profile_attribute(rt, CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT, 1,
                      (uintptr_t)pb, 126, 0); /* no end: no time */
    profile_attribute(rt, CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD, 65536,
                      (uintptr_t)pa, 250, 260); /* after every phase */
    profile_attribute(rt, CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH, 7,
                      0x10, 150, 151); /* nobody's address */
    assert_int_equal(rt->class_stats[0].um.gpu_faults, 5);
    assert_int_equal(rt->class_stats[0].um.gpu_fault_ns, 7); /* the driver's time on its faults */
    assert_int_equal(rt->class_stats[1].um.gpu_fault_ns, 3);
    assert_int_equal(rt->phase_stats[1].um.gpu_fault_ns, 3);
    assert_int_equal(rt->class_stats[0].um.htod_bytes, 65536);
    assert_int_equal(rt->class_stats[0].um.gpu_fault_ns, 7); /* a transfer adds no fault time */
    assert_int_equal(rt->class_stats[0].um.htod_bytes, 65536);
    assert_int_equal(rt->class_stats[1].um.gpu_faults, 3);
    assert_int_equal(rt->phase_stats[0].um.gpu_faults, 5); /* forward */
    assert_int_equal(rt->phase_stats[1].um.gpu_faults, 3); /* attention, the innermost */
    assert_int_equal(rt->phase_stats[0].um.htod_bytes, 0);
    assert_int_equal(rt->profile->unattributed.dtoh_bytes, 7);
    release(f, pa, S1, MODE_STREAM);
    release(f, pb, S1, MODE_STREAM);
    teardown(f);
}

static void test_runtime_profile_step_window(void **state)
{
    (void)state;
    struct fixture *f = setup_profiled("umpol 1;\nclass b { match any; }\n", "1..2");
    void *p = alloc(f, 4096, API_CUDA_MALLOC_ASYNC, S1);
    for (int step = 0; step < 4; step++) { /* forward at 10, 30, 50, 70 */
        fake_now = 10 + 20 * (uint64_t)step;
        phase_enter(&f->rt, "forward");
        fake_now += 5;
        phase_exit(&f->rt);
    }
    assert_int_equal(f->rt.profile->step, 4);
    for (uint64_t ts = 15; ts <= 75; ts += 20) /* steps 0, 1, 2, 3 */
        profile_attribute(&f->rt, CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT, 1,
                          (uintptr_t)p, ts, ts + 1);
    assert_int_equal(f->rt.profile->records, 4);
    assert_int_equal(f->rt.profile->kept, 2); /* steps 1 and 2 only */
    assert_int_equal(f->rt.class_stats[0].um.gpu_faults, 2);
    release(f, p, S1, MODE_STREAM);
    teardown(f);
}

/* What the runtime holds on GPU 0 by its pools' own records: movable pieces
 * on the GPU, device-memory slabs whole, managed blocks on the GPU. */
static uint64_t pools_resident(const struct fixture *f)
{
    const struct runtime *rt = &f->rt;
    const struct device_state *dev = &rt->devices[0];
    uint64_t total = 0;
    for (size_t c = 0; dev->pools && c < rt->program->class_count; c++) {
        const struct pool *p = dev->pools[c];
        enum memory_kind kind = rt->program->classes[c].memory;
        for (const struct slab *s = p ? p->slabs : NULL; s; s = s->next) {
            if (s->backing)
                total += ((const struct movable *)s->backing)->gpu_bytes;
            else if (kind == MEMORY_DEVICE || kind == MEMORY_MOVABLE) /* movable: as device */
                total += s->size;
            else
                for (const struct block *b = s->first; b; b = b->next)
                    total += b->on_gpu ? b->size : 0;
        }
    }
    return total;
}

/* A lost piece that was its slab's last on the GPU is mapped again though
 * its class has no rule that moves it: the victim search repairs first. */
static void test_runtime_lost_piece_repaired(void **state)
{
    (void)state;
    const uint64_t MiB = 1u << 20;
    struct fixture *f = setup("umpol 1;\nbudget gpu 100MiB;\nslab 64MiB;\n"
                              "class weights { match size == 10MiB; memory movable; priority 20; }\n"
                              "class acts { match size == 16MiB; prefetch gpu on alloc; priority 50; }\n"
                              "class rest { match any; memory device; }\n");
    void *w = alloc(f, 10 * MiB, API_CUDA_MALLOC, S1); /* a 64 MiB slab: one piece */
    fill(w, 10 * MiB, 1);
    void *a[3];
    for (int i = 0; i < 2; i++)
        a[i] = alloc(f, 16 * MiB, API_CUDA_MALLOC, S1); /* 96 MiB */
    fake_set_vmm_map_fails(0, 3); /* the piece's remap to the host, back, and the repair */
    a[2] = alloc(f, 16 * MiB, API_CUDA_MALLOC, S1);  /* the piece leaves: lost */
    fake_set_vmm_map_fails(-1, 0);
    struct slab *s = f->rt.devices[0].pools[0]->slabs;
    struct movable *mv = s->backing;
    assert_int_equal(mv->lost, 1);
    assert_int_equal(mv->gpu_bytes, 0);
    assert_true(s->quarantined);
    void *b[4];
    for (int i = 0; i < 4; i++) /* 48 + 64 MiB: pressure, and the victim search */
        b[i] = alloc(f, 16 * MiB, API_CUDA_MALLOC, S1);
    assert_int_equal(mv->lost, 0);
    assert_false(s->quarantined);
    assert_true(filled(w, 10 * MiB, 1));
    for (int i = 0; i < 3; i++)
        release(f, a[i], S1, MODE_ANY);
    for (int i = 0; i < 4; i++)
        release(f, b[i], S1, MODE_ANY);
    release(f, w, S1, MODE_ANY);
    place_trim(&f->rt, -1, -1); /* the fake GPU's memory, for the tests after */
    teardown(f);
}

/* What eviction could free includes a slab with a lost piece, which the
 * victim search repairs and evicts: the placement is not skipped. */
static void test_runtime_room_counts_lost_slabs(void **state)
{
    (void)state;
    const uint64_t MiB = 1u << 20;
    struct fixture *f = setup("umpol 1;\nbudget gpu 100MiB;\nslab 64MiB;\n"
                              "class weights { match size >= 64MiB; memory movable; priority 20; }\n"
                              "class hi { match size == 16MiB; prefetch gpu on alloc; priority 50; }\n"
                              "class acts { match size == 12MiB; prefetch gpu on alloc; priority 30; }\n"
                              "class rest { match any; memory device; }\n");
    void *w = alloc(f, 100 * MiB, API_CUDA_MALLOC, S1); /* pieces of 64 and 36 MiB */
    fake_set_vmm_map_fails(0, 3); /* piece 0's remap, back, and the repair */
    void *h[5];
    h[0] = alloc(f, 16 * MiB, API_CUDA_MALLOC, S1);
    fake_set_vmm_map_fails(-1, 0);
    struct movable *mv = f->rt.devices[0].pools[0]->slabs->backing;
    assert_int_equal(mv->lost, 1);
    assert_int_equal(mv->gpu_bytes, 36 * MiB);
    /* The lost piece is mapped again as the next placements look for room. */
    for (int i = 1; i < 5; i++)
        h[i] = alloc(f, 16 * MiB, API_CUDA_MALLOC, S1);
    assert_int_equal(mv->lost, 0);
    uint64_t skips = f->rt.class_stats[2].budget_skips;
    void *x = alloc(f, 12 * MiB, API_CUDA_MALLOC, S1);
    assert_int_equal(f->rt.class_stats[2].budget_skips, skips);
    assert_true(f->rt.devices[0].resident_bytes <= 100 * MiB);
    for (int i = 0; i < 5; i++)
        release(f, h[i], S1, MODE_ANY);
    release(f, x, S1, MODE_ANY);
    release(f, w, S1, MODE_ANY);
    place_trim(&f->rt, -1, -1); /* the fake GPU's memory, for the tests after */
    teardown(f);
}

/* Each pool's byte counts of its on-GPU lists are their blocks' sizes. */
static bool lists_counted(const struct fixture *f)
{
    const struct device_state *dev = &f->rt.devices[0];
    for (size_t c = 0; dev->pools && c < f->rt.program->class_count; c++) {
        const struct pool *p = dev->pools[c];
        uint64_t lru = 0, idle = 0;
        for (const struct block *b = p ? p->lru_head : NULL; b; b = b->gpu_next)
            lru += b->size;
        for (const struct block *b = p ? p->idle_head : NULL; b; b = b->gpu_next)
            idle += b->size;
        if (p && (lru != p->lru_bytes || idle != p->idle_bytes))
            return false;
    }
    return true;
}

/* Random allocations, frees, saved blocks, phases, marks and trims, under a
 * budget (of the GPU, or of the card), with CUDA failing now and then (remaps,
 * GPU memory, a full card, memory used outside the runtime):
 * after every operation the budget's count is what the pools hold, and every
 * live block still holds its data. UMPOL_TEST_SEED and UMPOL_TEST_ROUNDS
 * explore further. */
static void test_runtime_random_operations(void **state)
{
    (void)state;
    const char *seed_env = getenv("UMPOL_TEST_SEED"), *rounds_env = getenv("UMPOL_TEST_ROUNDS");
    unsigned seed = seed_env ? (unsigned)strtoul(seed_env, NULL, 10) : 1;
    int rounds = rounds_env ? atoi(rounds_env) : 8;
    enum { LIVE = 128, OPS = 500, SAMPLE = 4093 /* words apart, checked */ };
    static const size_t sizes[] = {4096, 100000, 1u << 20, 3u << 20, 9u << 20,
                                   25u << 20, 50u << 20, 70u << 20};
    static const char *const phases[] = {"forward", "backward", "optimizer.step",
                                         "forward.recompute"};
    static const char card_policy[] =
        "umpol 1;\nbudget card 256MiB;\nslab 16MiB;\n"
        "class opt_gpu { match phase \"optimizer*\" and spare; memory device; }\n"
        "class opt { match phase \"optimizer*\"; memory host; }\n"
        "class w { match size >= 48MiB; memory movable; priority 20;\n"
        "    prefetch gpu on enter \"forward*\"; }\n"
        "class acts { match phase \"forward*\" or phase \"backward\"; memory device; priority 50; }\n"
        "class rest { match any; memory device; }\n";
    for (int round = 0; round < rounds; round++, seed++) {
        srand(seed);
        /* Odd rounds: the card's own budget over device, pinned host and
         * movable memory, a class taking the spare room, and a card whose
         * use outside the runtime changes. */
        struct fixture *f = setup(round % 2 ? card_policy :
            "umpol 1;\nbudget gpu 256MiB;\nslab 16MiB;\nlearn step \"forward\";\n"
            "class saved_acts { match phase \"forward*\" and saved; place host; priority 1;\n"
            "    prefetch gpu on enter \"backward\"; prefetch host on exit \"forward\"; }\n"
            "class w { match size >= 48MiB; memory movable; priority 20;\n"
            "    prefetch gpu on enter \"forward*\"; prefetch host on enter \"optimizer*\"; }\n"
            "class dev { match size >= 20MiB; memory device; priority 30; }\n"
            "class acts { match phase \"forward*\"; place gpu; priority 5; prefetch gpu on alloc; }\n"
            "class grads { match phase \"backward\"; priority 7; prefetch gpu on enter \"backward\"; }\n"
            "class rest { match any; priority 3; prefetch gpu on enter \"optimizer*\"; }\n");
        void *live[LIVE];
        size_t size[LIVE];
        unsigned mark[LIVE];
        int n = 0, depth = 0;
        for (int op = 0; op < OPS; op++) {
            int r = rand() % 100;
            bool moved = r < 45 || r >= 88; /* what may move or evict live blocks */
            if (r < 45 && n < LIVE) {
                size_t sz = sizes[rand() % 8];
                void *p = NULL;
                bool handled = false;
                cudaError_t err = rt_alloc(&f->rt, &p, sz,
                                           rand() % 2 ? API_CUDA_MALLOC : API_CUDA_MALLOC_ASYNC,
                                           rand() % 2 ? S1 : S2, &handled);
                if (handled && err == cudaSuccess) {
                    const struct block *b = map_find(&f->rt.map, (uintptr_t)p);
                    assert_non_null(b);
                    if (b->slab && b->slab->quarantined)
                        fail_msg("seed %u op %d: a block served from a slab with a piece unmapped",
                                 seed, op);
                    size[n] = sz;
                    mark[n] = (unsigned)rand();
                    fill_every(p, sz, mark[n], SAMPLE);
                    live[n++] = p;
                }
            } else if (r < 80 && n > 0) {
                int k = rand() % n;
                cudaError_t err;
                rt_free(&f->rt, live[k], rand() % 2 ? S1 : S2, rand() % 2 ? MODE_ANY : MODE_STREAM,
                        &err);
                n--;
                live[k] = live[n], size[k] = size[n], mark[k] = mark[n];
            } else if (r < 88 && n > 0) {
                note_saved(f, live[rand() % n]);
            } else if (r < 96) {
                if (depth > 0 && rand() % 2) {
                    phase_exit(&f->rt);
                    depth--;
                } else if (depth < 3) {
                    if (round % 2)
                        usleep(1100); /* the card is read at most once a millisecond */
                    phase_enter(&f->rt, phases[rand() % 4]);
                    depth++;
                }
            } else if (r < 98) {
                pthread_mutex_lock(&f->rt.lock);
                place_trim(&f->rt, -1, -1);
                pthread_mutex_unlock(&f->rt.lock);
            } else {
                phase_mark(&f->rt, "x");
            }
            int fault = rand() % 100; /* CUDA fails now and then, and recovers */
            if (fault < 3)
                fake_set_vmm_map_fails(rand() % 4, 1 + rand() % 3);
            else if (fault < 5)
                fake_set_vmm_create_fails_after(rand() % 3);
            else if (fault < 7)
                fake_set_vmm_create_fails_after(-1);
            else if (fault < 9)
                fake_set_card_full_at(fake_resident_bytes() + fake_vmm_gpu_bytes() +
                                      (uint64_t)(rand() % 200) * (1u << 20));
            else if (fault < 11)
                fake_set_card_full_at(0);
            else if (fault < 14)
                fake_set_other_used((uint64_t)(rand() % 700) * (1u << 20));
            for (int k = 0; moved && k < n; k++) {
                const struct block *b = map_find(&f->rt.map, (uintptr_t)live[k]);
                const struct movable *mv = b && b->slab ? b->slab->backing : NULL;
                if (mv && mv->lost)
                    continue; /* a piece of it is unmapped until repaired: not to be touched */
                if (!filled_every(live[k], size[k], mark[k], SAMPLE))
                    fail_msg("seed %u op %d: a live block of %zu bytes lost its data", seed, op,
                             size[k]);
            }
            if (!lists_counted(f))
                fail_msg("seed %u op %d: a pool's list bytes drifted from its blocks", seed, op);
            if (f->rt.devices[0].known && pools_resident(f) != f->rt.devices[0].resident_bytes)
                fail_msg("seed %u op %d: the budget counts %llu bytes, the pools hold %llu", seed,
                         op, (unsigned long long)f->rt.devices[0].resident_bytes,
                         (unsigned long long)pools_resident(f));
        }
        fake_set_vmm_map_fails(-1, 0);
        fake_set_vmm_create_fails_after(-1);
        fake_set_card_full_at(0);
        fake_set_other_used(0);
        while (depth-- > 0)
            phase_exit(&f->rt);
        for (int k = 0; k < n; k++) {
            cudaError_t err;
            rt_free(&f->rt, live[k], S1, MODE_ANY, &err);
        }
        pthread_mutex_lock(&f->rt.lock);
        place_trim(&f->rt, -1, -1);
        pthread_mutex_unlock(&f->rt.lock);
        assert_int_equal(f->rt.devices[0].resident_bytes, 0);
        assert_int_equal(f->rt.devices[0].managed_bytes, 0);
        teardown(f);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_runtime_slab_advised_once),
        cmocka_unit_test(test_runtime_device_class_uses_cuda_malloc),
        cmocka_unit_test(test_runtime_host_class_is_pinned),
        cmocka_unit_test(test_runtime_grow_gives_back_empty_slabs),
        cmocka_unit_test(test_runtime_spare),
        cmocka_unit_test(test_runtime_spare_after_phase),
        cmocka_unit_test(test_runtime_no_release_in_capture),
        cmocka_unit_test(test_runtime_no_futile_eviction),
        cmocka_unit_test(test_runtime_random_operations),
        cmocka_unit_test(test_runtime_lost_piece_repaired),
        cmocka_unit_test(test_runtime_room_counts_lost_slabs),
        cmocka_unit_test(test_runtime_movable),
        cmocka_unit_test(test_runtime_movable_pressure),
        cmocka_unit_test(test_runtime_movable_returns_into_steady_room),
        cmocka_unit_test(test_runtime_movable_returns_keep_their_own_step),
        cmocka_unit_test(test_runtime_movable_returns_after_step_changed),
        cmocka_unit_test(test_runtime_step_changed_measures_first),
        cmocka_unit_test(test_runtime_stream_ahead),
        cmocka_unit_test(test_runtime_stream_remap_on_thread),
        cmocka_unit_test(test_runtime_stream_room_from_empty_slab),
        cmocka_unit_test(test_runtime_stream_drops_farthest),
        cmocka_unit_test(test_runtime_stream_drops_once_while_leaving),
        cmocka_unit_test(test_runtime_stream_yields_farthest),
        cmocka_unit_test(test_runtime_step_plan),
        cmocka_unit_test(test_runtime_step_plan_given_up_past_budget),
        cmocka_unit_test(test_runtime_step_plan_kept_within_budget),
        cmocka_unit_test(test_runtime_step_plan_given_up_when_arena_empty),
        cmocka_unit_test(test_runtime_step_plan_kept_past_budget_without_miss),
        cmocka_unit_test(test_runtime_step_plan_refits_a_stray_block),
        cmocka_unit_test(test_runtime_step_plan_refuses_too_many_blocks),
        cmocka_unit_test(test_runtime_step_plan_refuses_an_overlong_step),
        cmocka_unit_test(test_runtime_step_plan_streams),
        cmocka_unit_test(test_runtime_step_plan_not_per_thread),
        cmocka_unit_test(test_runtime_step_plan_follows_a_new_step),
        cmocka_unit_test(test_runtime_step_plan_idle_arena_goes),
        cmocka_unit_test(test_runtime_stream_gives_way_to_full_card),
        cmocka_unit_test(test_runtime_stream_remap_fails_on_thread),
        cmocka_unit_test(test_runtime_stream_new_block_in_clean_piece),
        cmocka_unit_test(test_runtime_stream_written_outside_phases),
        cmocka_unit_test(test_runtime_stream_new_block_in_incoming_piece),
        cmocka_unit_test(test_runtime_stream_off_after_capture),
        cmocka_unit_test(test_runtime_capture_prepare_waits_for_remaps),
        cmocka_unit_test(test_runtime_stream_off_after_driver_capture),
        cmocka_unit_test(test_runtime_movable_card_full),
        cmocka_unit_test(test_runtime_budget_card),
        cmocka_unit_test(test_runtime_host_class_falls_back),
        cmocka_unit_test(test_runtime_failed_advice_leaves_no_error),
        cmocka_unit_test(test_runtime_free_twice_refused),
        cmocka_unit_test(test_runtime_small_request_when_no_slab_fits),
        cmocka_unit_test(test_runtime_host_class_after_fork),
        cmocka_unit_test(test_runtime_same_stream_reuse),
        cmocka_unit_test(test_runtime_cross_stream_reuse_waits),
        cmocka_unit_test(test_runtime_cross_stream_reuse_waits_for_the_free),
        cmocka_unit_test(test_runtime_free_points_only_where_wanted),
        cmocka_unit_test(test_runtime_per_thread_stream_frees_follow_their_thread),
        cmocka_unit_test(test_runtime_per_thread_proxy_on_the_blocks_gpu),
        cmocka_unit_test(test_runtime_device_enter_leave),
        cmocka_unit_test(test_runtime_legacy_malloc_avoids_busy_streams),
        cmocka_unit_test(test_runtime_free_blocks_coalesce),
        cmocka_unit_test(test_runtime_large_requests_get_dedicated_slabs),
        cmocka_unit_test(test_runtime_cap_refuses_then_trims),
        cmocka_unit_test(test_runtime_large_request_finds_the_close_block),
        cmocka_unit_test(test_runtime_budget_evicts_low_priority_first),
        cmocka_unit_test(test_runtime_budget_steers_slabs_to_host),
        cmocka_unit_test(test_runtime_budget_reclaims_free_space_without_copies),
        cmocka_unit_test(test_runtime_reuse_prefers_free_space_on_the_gpu),
        cmocka_unit_test(test_runtime_large_request_splits_free_space_on_the_gpu),
        cmocka_unit_test(test_runtime_trigger_never_evicts_its_own_batch),
        cmocka_unit_test(test_runtime_budget_bounds_what_the_gpu_holds),
        cmocka_unit_test(test_runtime_phase_triggers_batch_prefetch),
        cmocka_unit_test(test_runtime_reused_block_is_not_prefetched_again),
        cmocka_unit_test(test_runtime_saved_block_moves_class),
        cmocka_unit_test(test_runtime_saved_block_takes_its_new_priority),
        cmocka_unit_test(test_runtime_discard_only_whole_pages_of_dead_blocks),
        cmocka_unit_test(test_runtime_allocation_inside_open_trigger_phase_is_placed),
        cmocka_unit_test(test_runtime_phases_nest_and_count),
        cmocka_unit_test(test_runtime_site_phase_is_process_wide),
        cmocka_unit_test(test_runtime_thread_exit_closes_its_phases),
        cmocka_unit_test(test_runtime_passthrough_and_capture),
        cmocka_unit_test(test_runtime_adopts_jobs_managed_memory),
        cmocka_unit_test(test_runtime_devices_have_own_pools),
        cmocka_unit_test(test_runtime_map_random_churn),
        cmocka_unit_test(test_runtime_report_is_written_atomically),
        cmocka_unit_test(test_runtime_fork_child_counts_only_its_own_work),
        cmocka_unit_test(test_runtime_profile_attributes_to_class_and_phase),
        cmocka_unit_test(test_runtime_profile_step_window),
    };
    return cmocka_run_group_tests_name("runtime", tests, NULL, NULL);
}
