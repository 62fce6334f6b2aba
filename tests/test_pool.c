/* Unit tests of the pool as a data structure (src/runtime/pool.c): bins and
 * their mask, split and merge, stream-ordered reuse, the GPU lists, empty
 * slabs. No runtime, no CUDA: slab memory is a made-up address range. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "runtime/pool.h"

#define S1 ((cudaStream_t)0x100)
#define S2 ((cudaStream_t)0x200)
#define MiB ((size_t)1 << 20)

static cudaStream_t busy_stream;

static bool idle(void *ctx, cudaStream_t s)
{
    (void)ctx;
    return s != busy_stream;
}

static struct block *find(struct pool *p, size_t size, cudaStream_t s, bool *wait)
{
    return pool_find_free(p, size, SIZE_MAX, s, MODE_STREAM, idle, NULL, wait);
}

/* Bins match their mask; the blocks of every slab tile it in address order,
 * and each free block is in the bin of its size and GPU side. */
static void assert_pool_consistent(const struct pool *p)
{
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < RT_BINS; i++) {
            assert_int_equal(!!(p->bin_mask[k] >> i & 1), p->bins[k][i] != NULL);
            for (const struct block *b = p->bins[k][i]; b; b = b->link_next) {
                assert_true(b->free);
                assert_int_equal(b->on_gpu, k);
                assert_int_equal(63 - __builtin_clzll(b->size), i);
            }
        }
    for (const struct slab *s = p->slabs; s; s = s->next) {
        uintptr_t at = s->base;
        assert_null(s->first->prev);
        for (const struct block *b = s->first; b; b = b->next) {
            assert_int_equal(b->addr, at);
            assert_ptr_equal(b->slab, s);
            at += b->size;
        }
        assert_int_equal(at, s->base + s->size);
    }
}

static struct pool *new_pool(void)
{
    struct pool *p = calloc(1, sizeof *p);
    assert_non_null(p);
    return p;
}

static void test_pool_split_and_merge(void **state)
{
    (void)state;
    struct pool *p = new_pool();
    struct slab *s = pool_add_slab(p, 0x100000, 4 * MiB, false);
    assert_non_null(s);
    assert_int_equal(p->bin_mask[0], 1ull << 22);
    bool wait;
    struct block *a = find(p, 4096, S1, &wait);
    assert_ptr_equal(a, s->first);
    pool_take(p, a, 4096);
    a->free = false;
    struct block *b = find(p, 8192, S1, &wait);
    pool_take(p, b, 8192);
    b->free = false;
    assert_int_equal(b->addr, a->addr + 4096);
    assert_pool_consistent(p);
    pool_put(p, a, S1, 7, MODE_STREAM);
    assert_pool_consistent(p);
    assert_true(a->next == b); /* not merged with the live block */
    pool_put(p, b, S1, 5, MODE_STREAM);
    assert_pool_consistent(p);
    assert_int_equal(s->first->size, 4 * MiB); /* one block again */
    assert_null(s->first->next);
    /* One stream: its next user waits for the later of the two frees. */
    assert_int_equal(s->first->free_stream_count, 1);
    assert_int_equal(s->first->free_points[0], 7);
    pool_destroy(p);
}

static void test_pool_reuse_waits_for_other_streams(void **state)
{
    (void)state;
    struct pool *p = new_pool();
    pool_add_slab(p, 0x100000, 4 * MiB, false);
    bool wait;
    struct block *a = find(p, 4 * MiB, S1, &wait);
    assert_false(wait);
    pool_take(p, a, 4 * MiB);
    a->free = false;
    pool_put(p, a, S1, 0, MODE_STREAM);
    assert_ptr_equal(find(p, 4096, S1, &wait), a);
    assert_false(wait);
    assert_ptr_equal(find(p, 4096, S2, &wait), a);
    assert_true(wait); /* S2 must wait for S1 first */
    /* cudaMalloc (MODE_ANY) takes it only once S1 is idle. */
    busy_stream = S1;
    assert_null(pool_find_free(p, 4096, SIZE_MAX, NULL, MODE_ANY, idle, NULL, &wait));
    busy_stream = NULL;
    assert_ptr_equal(pool_find_free(p, 4096, SIZE_MAX, NULL, MODE_ANY, idle, NULL, &wait), a);
    assert_false(wait);
    pool_destroy(p);
}

static void test_pool_prefers_a_block_without_wait(void **state)
{
    (void)state;
    struct pool *p = new_pool();
    pool_add_slab(p, 0x100000, 1 * MiB, false);
    pool_add_slab(p, 0x900000, 1 * MiB, false);
    bool wait;
    struct block *x = find(p, MiB, S1, &wait);
    pool_take(p, x, MiB);
    x->free = false;
    struct block *y = find(p, MiB, S1, &wait);
    pool_take(p, y, MiB);
    y->free = false;
    pool_put(p, x, S1, 0, MODE_STREAM);
    pool_put(p, y, S2, 0, MODE_STREAM); /* y is first in the bin, but S1 would wait for it */
    assert_ptr_equal(find(p, 4096, S1, &wait), x);
    assert_false(wait);
    pool_destroy(p);
}

/* In a bin, the lowest address first, whatever order the blocks were freed
 * in: live blocks pack into the older slabs and the newer ones can empty. */
static void test_pool_lowest_address_first(void **state)
{
    (void)state;
    struct pool *p = new_pool();
    struct slab *high = pool_add_slab(p, 0x4000000, 1 * MiB, false);
    struct slab *low = pool_add_slab(p, 0x100000, 1 * MiB, false);
    struct slab *mid = pool_add_slab(p, 0x2000000, 1 * MiB, false);
    (void)high;
    (void)mid;
    bool wait;
    assert_ptr_equal(find(p, 4096, S1, &wait), low->first); /* mid is first in the bin */
    assert_false(wait);
    /* Among blocks that need a wait, too: */
    struct block *blocks[3];
    for (int i = 0; i < 3; i++) {
        blocks[i] = find(p, MiB, S1, &wait);
        pool_take(p, blocks[i], MiB);
        blocks[i]->free = false;
    }
    for (int i = 0; i < 3; i++)
        pool_put(p, blocks[i], S2, 0, MODE_STREAM);
    assert_ptr_equal(find(p, 4096, S1, &wait), low->first);
    assert_true(wait);
    assert_pool_consistent(p);
    pool_destroy(p);
}

static void test_pool_gpu_space_first(void **state)
{
    (void)state;
    struct pool *p = new_pool();
    struct slab *host = pool_add_slab(p, 0x100000, 2 * MiB, false);
    struct slab *gpu = pool_add_slab(p, 0x1000000, 32 * MiB, false);
    pool_idle_arrived_gpu(p, gpu->first);
    assert_ptr_equal(p->idle_head, gpu->first);
    assert_pool_consistent(p);
    bool wait;
    /* Larger, but already on the GPU: taken first. */
    assert_ptr_equal(find(p, 4096, S1, &wait), gpu->first);
    /* Off the GPU, a block larger than MAX is passed over. */
    pool_idle_left_gpu(p, gpu->first);
    assert_null(p->idle_head);
    assert_ptr_equal(pool_find_free(p, 4096, 4 * MiB, S1, MODE_STREAM, idle, NULL, &wait),
                     host->first);
    assert_null(pool_find_free(p, 4 * MiB, 4 * MiB, S1, MODE_STREAM, idle, NULL, &wait));
    assert_pool_consistent(p);
    pool_destroy(p);
}

/* A pool whose memory never moves (device or host memory) takes a large
 * request from a free block close to its size first, and then from any larger
 * one rather than growing: growing would give back its empty slabs and make
 * new ones each step of a job whose large requests vary in size. */
static void test_pool_in_place_serves_large_requests_from_any_block(void **state)
{
    (void)state;
    struct pool *p = new_pool();
    struct slab *big = pool_add_slab(p, 0x100000, 64 * MiB, true);
    bool wait;
    struct pool_request req;
    assert_true(pool_request_for(40 * MiB, 64 * MiB, &req));
    assert_true(req.dedicated);
    assert_int_equal(req.grow, 40 * MiB);
    assert_int_equal(req.fitted, 40 * MiB);
    /* A small request grows by a whole slab, or by one of its own size
     * rounded to 2 MiB when no whole slab fits. */
    struct pool_request small;
    assert_true(pool_request_for(3 * MiB + 1, 64 * MiB, &small));
    assert_false(small.dedicated);
    assert_int_equal(small.grow, 64 * MiB);
    assert_int_equal(small.fitted, 4 * MiB);
    /* Managed memory off the GPU: 64 MiB is too far from 40. */
    assert_null(pool_find_free(p, req.want, req.max, S1, MODE_STREAM, idle, NULL, &wait));
    p->in_place = true;
    assert_ptr_equal(pool_find_free(p, req.want, req.max, S1, MODE_STREAM, idle, NULL, &wait),
                     big->first);
    /* A block close to the size still comes first, even at a higher address. */
    struct slab *close = pool_add_slab(p, 0x8000000, 40 * MiB, true);
    assert_ptr_equal(pool_find_free(p, req.want, req.max, S1, MODE_STREAM, idle, NULL, &wait),
                     close->first);
    /* Not a block too small. */
    assert_true(pool_request_for(80 * MiB, 64 * MiB, &req));
    assert_null(pool_find_free(p, req.want, req.max, S1, MODE_STREAM, idle, NULL, &wait));
    assert_pool_consistent(p);
    pool_destroy(p);
}

static void test_pool_merge_keeps_sides_and_streams_apart(void **state)
{
    (void)state;
    struct pool *p = new_pool();
    struct slab *s = pool_add_slab(p, 0x100000, 4 * MiB, false);
    bool wait;
    struct block *blocks[RT_FREE_STREAMS + 2];
    for (int i = 0; i < RT_FREE_STREAMS + 2; i++) {
        blocks[i] = find(p, 4096, S1, &wait);
        pool_take(p, blocks[i], 4096);
        blocks[i]->free = false;
    }
    /* One stream each: neighbours merge up to RT_FREE_STREAMS streams. */
    for (int i = 0; i < RT_FREE_STREAMS + 1; i++)
        pool_put(p, blocks[i], (cudaStream_t)(uintptr_t)(0x1000 + i), 0, MODE_STREAM);
    assert_pool_consistent(p);
    assert_int_equal(s->first->size, 4096 * RT_FREE_STREAMS);
    assert_int_equal(s->first->free_stream_count, RT_FREE_STREAMS);
    assert_int_equal(s->first->next->size, 4096); /* a fifth stream does not fit */
    /* A free block on the GPU does not merge with one off it. */
    struct block *last = blocks[RT_FREE_STREAMS + 1];
    last->on_gpu = true;
    pool_put(p, last, S1, 0, MODE_STREAM);
    assert_true(last->on_gpu && last->free);
    assert_ptr_equal(p->idle_head, last);
    assert_pool_consistent(p);
    pool_destroy(p);
}

static void test_pool_detaches_only_empty_slabs(void **state)
{
    (void)state;
    struct pool *p = new_pool();
    struct slab *busy = pool_add_slab(p, 0x100000, 2 * MiB, false);
    struct slab *empty = pool_add_slab(p, 0x400000, 2 * MiB, true);
    pool_idle_arrived_gpu(p, empty->first);
    struct block *live = busy->first;
    pool_take(p, live, 4096);
    live->free = false;
    struct slab *detached = pool_detach_empty_slabs(p);
    assert_ptr_equal(detached, empty);
    assert_null(detached->next);
    assert_ptr_equal(p->slabs, busy);
    assert_int_equal(slab_gpu_bytes(detached), 2 * MiB);
    slab_destroy(p, detached);
    assert_null(p->idle_head);
    assert_int_equal(p->bin_mask[1], 0);
    assert_pool_consistent(p);
    pool_destroy(p);
}

/* A slab is stamped by its pool's clock when made and when a block is taken
 * from it; giving the block back leaves the stamp. */
static void test_pool_stamps_slabs_taken(void **state)
{
    (void)state;
    struct pool *p = new_pool();
    uint64_t clock = 0;
    p->clock = &clock;
    struct slab *a = pool_add_slab(p, 0x100000, 2 * MiB, false);
    struct slab *b = pool_add_slab(p, 0x400000, 2 * MiB, false);
    assert_int_equal(a->taken, 1);
    assert_int_equal(b->taken, 2);
    uint64_t mark = ++clock;
    struct block *live = b->first;
    pool_take(p, live, 4096);
    live->free = false;
    assert_true(a->taken < mark);
    assert_true(b->taken > mark);
    uint64_t stamp = b->taken;
    pool_put(p, live, NULL, 0, MODE_ANY);
    assert_int_equal(b->taken, stamp);
    assert_pool_consistent(p);
    pool_destroy(p);
}

/* 20,000 random takes and puts on three streams, some blocks placed on the
 * GPU and sent back: the pool stays consistent, and once everything is free
 * on one stream, off the GPU, each slab is one block again. */
static void test_pool_random_mix(void **state)
{
    (void)state;
    struct pool *p = new_pool();
    for (int i = 0; i < 4; i++)
        pool_add_slab(p, 0x10000000 + (uintptr_t)i * 0x1000000, 8 * MiB, false);
    enum { LIVE = 256 };
    struct block *live[LIVE] = {0};
    uint64_t seed = 7;
    for (int op = 0; op < 20000; op++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        int i = (int)((seed >> 33) % LIVE);
        cudaStream_t s = (cudaStream_t)(uintptr_t)(0x100 * (1 + (seed >> 20) % 3));
        if (live[i]) {
            pool_put(p, live[i], s, 0, MODE_STREAM);
            live[i] = NULL;
        } else {
            size_t size = (size_t)RT_ALIGN << ((seed >> 40) % 10);
            bool wait;
            struct block *b = find(p, size, s, &wait);
            if (!b)
                continue;
            pool_take(p, b, size);
            b->free = false;
            live[i] = b;
        }
        if (op % 97 == 0 && p->idle_head)
            pool_idle_left_gpu(p, p->idle_head);
        else if (op % 89 == 0 && p->bins[0][13])
            pool_idle_arrived_gpu(p, p->bins[0][13]);
        if (op % 500 == 0)
            assert_pool_consistent(p);
    }
    for (int i = 0; i < LIVE; i++)
        if (live[i])
            pool_put(p, live[i], S1, 0, MODE_STREAM);
    while (p->idle_head)
        pool_idle_left_gpu(p, p->idle_head);
    assert_pool_consistent(p);
    int blocks = 0;
    for (struct slab *s = p->slabs; s; s = s->next)
        for (struct block *b = s->first; b; b = b->next)
            blocks++;
    assert_true(blocks >= 4);
    pool_destroy(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_split_and_merge),
        cmocka_unit_test(test_pool_reuse_waits_for_other_streams),
        cmocka_unit_test(test_pool_prefers_a_block_without_wait),
        cmocka_unit_test(test_pool_lowest_address_first),
        cmocka_unit_test(test_pool_gpu_space_first),
        cmocka_unit_test(test_pool_in_place_serves_large_requests_from_any_block),
        cmocka_unit_test(test_pool_merge_keeps_sides_and_streams_apart),
        cmocka_unit_test(test_pool_detaches_only_empty_slabs),
        cmocka_unit_test(test_pool_stamps_slabs_taken),
        cmocka_unit_test(test_pool_random_mix),
    };
    return cmocka_run_group_tests_name("pool", tests, NULL, NULL);
}
