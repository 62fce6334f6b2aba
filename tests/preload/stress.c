/* Preload stress test: run against the fake CUDA runtime with libumpol.so
 * preloaded. Threads allocate and free at random — async on their own
 * stream, async freed on another thread's stream, and legacy cudaMalloc —
 * fill every block with a pattern and check it before freeing, so two live
 * blocks that overlap are caught. One block in four is reported saved, at an
 * address inside it, which moves it to another class while it is live. A fork while the threads run checks that the
 * child can still allocate (the runtime's locks survive fork). */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "fake/fake_cudart.h" /* declares the _ptsz entry points */
#include "umpol.h"

/* Weak: the API comes from the preloaded libumpol.so, when there is one. */
#pragma weak umpol_tag_push
#pragma weak umpol_tag_pop
#pragma weak umpol_phase_enter
#pragma weak umpol_phase_exit
#pragma weak umpol_mark
#pragma weak umpol_stats
#pragma weak umpol_note_saved

enum { LIVE = 16, MAX_THREADS = 64 };

struct live_block {
    unsigned char *ptr;
    size_t size;
    unsigned char pattern;
    int legacy; /* from cudaMalloc */
};

static int n_threads = 16;
static long n_pairs = 100000;
static cudaStream_t streams[MAX_THREADS];
static long failures[MAX_THREADS], ooms[MAX_THREADS];

static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static size_t pick_size(uint64_t r)
{
    unsigned roll = (unsigned)(r % 1000);
    if (roll < 700)
        return 1 + (r >> 10) % (64 << 10);                    /* small */
    if (roll < 960)
        return (64 << 10) + (r >> 10) % (2 << 20);            /* medium */
    if (roll < 995)
        return (8u << 20) + (r >> 10) % (8u << 20);           /* device */
    return (300u << 20) + (r >> 10) % (1u << 20);             /* passes through */
}

/* Small blocks are checked in full; large ones at both ends and the middle. */
static void fill(struct live_block *b)
{
    if (b->size <= (256 << 10)) {
        memset(b->ptr, b->pattern, b->size);
        return;
    }
    memset(b->ptr, b->pattern, 4096);
    memset(b->ptr + b->size / 2 - 2048, b->pattern, 4096);
    memset(b->ptr + b->size - 4096, b->pattern, 4096);
}

static int check(const struct live_block *b)
{
    size_t spans[3][2] = {{0, b->size}, {0, 0}, {0, 0}};
    if (b->size > (256 << 10)) {
        spans[0][1] = 4096;
        spans[1][0] = b->size / 2 - 2048;
        spans[1][1] = b->size / 2 + 2048;
        spans[2][0] = b->size - 4096;
        spans[2][1] = b->size;
    }
    for (int s = 0; s < 3; s++)
        for (size_t i = spans[s][0]; i < spans[s][1]; i++)
            if (b->ptr[i] != b->pattern)
                return -1;
    return 0;
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(id + 1);
    struct live_block live[LIVE] = {{0}};
    bool tagged = id % 4 == 1 && umpol_tag_push;
    if (tagged)
        umpol_tag_push("stress");
    for (long i = 0; i < n_pairs * 2; i++) {
        uint64_t r = next_rand(&seed);
        struct live_block *b = &live[r % LIVE];
        if (b->ptr) {
            if (check(b) != 0) {
                fprintf(stderr, "thread %d: block %p of %zu bytes was overwritten\n", id,
                        (void *)b->ptr, b->size);
                failures[id]++;
            }
            cudaError_t err;
            if (b->legacy)
                err = cudaFree(b->ptr);
            else /* free on another thread's stream one time in four */
                err = cudaFreeAsync(b->ptr, streams[(r >> 8) % 4 == 0 ? (id + 1) % n_threads : id]);
            if (err != cudaSuccess) {
                fprintf(stderr, "thread %d: free failed: %d\n", id, (int)err);
                failures[id]++;
            }
            b->ptr = NULL;
            continue;
        }
        b->size = pick_size(next_rand(&seed));
        b->legacy = (r >> 20) % 5 == 0;
        b->pattern = (unsigned char)(id * 31 + i);
        void *p = NULL;
        cudaError_t err = b->legacy ? cudaMalloc(&p, b->size)
                                    : cudaMallocAsync(&p, b->size, streams[id]);
        if (err == cudaErrorMemoryAllocation) {
            ooms[id]++;
            continue;
        }
        if (err != cudaSuccess || !p) {
            fprintf(stderr, "thread %d: allocation of %zu failed: %d\n", id, b->size, (int)err);
            failures[id]++;
            continue;
        }
        b->ptr = p;
        fill(b);
        if ((r >> 24) % 4 == 0 && umpol_note_saved)
            umpol_note_saved(b->ptr + (r >> 32) % b->size);
        if (id == 0 && i % 5000 == 0 && umpol_phase_enter) {
            umpol_phase_enter("step.forward");
            umpol_mark("hot");
            umpol_phase_exit();
        }
    }
    for (int k = 0; k < LIVE; k++) {
        if (!live[k].ptr)
            continue;
        if (check(&live[k]) != 0)
            failures[id]++;
        if ((live[k].legacy ? cudaFree(live[k].ptr) : cudaFreeAsync(live[k].ptr, streams[id])) !=
            cudaSuccess)
            failures[id]++;
    }
    if (tagged)
        umpol_tag_pop();
    return NULL;
}

/* With "exit", forked children leave through exit(), so the runtime's
 * destructor runs in them and writes their reports; else through _exit().
 * With "nofork", no child at all (a run without the runtime: the fake alone
 * does not order its lock across fork for ThreadSanitizer). */
static bool exit_children, no_fork;

static void leave(int status)
{
    if (exit_children)
        exit(status);
    _exit(status);
}

/* In the child of a fork: the runtime must still allocate and free. */
static int child_work(void)
{
    for (int i = 0; i < 1000; i++) {
        void *p;
        if (cudaMallocAsync(&p, 4096 + (size_t)i, streams[0]) != cudaSuccess)
            return 1;
        memset(p, 0xab, 4096);
        if (cudaFreeAsync(p, streams[0]) != cudaSuccess)
            return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        n_threads = atoi(argv[1]);
    if (argc > 2)
        n_pairs = atol(argv[2]);
    exit_children = argc > 3 && strcmp(argv[3], "exit") == 0;
    no_fork = argc > 3 && strcmp(argv[3], "nofork") == 0;
    if (n_threads < 1 || n_threads > MAX_THREADS || n_pairs < 1) {
        fprintf(stderr, "usage: stress [THREADS (1..%d)] [PAIRS] [exit|nofork]\n", MAX_THREADS);
        return 2;
    }
    if (cudaFree(NULL) != cudaSuccess) /* the usual context initialisation */
        return 1;
    for (int t = 0; t < n_threads; t++)
        cudaStreamCreateWithFlags(&streams[t], cudaStreamNonBlocking);
    pthread_t threads[MAX_THREADS];
    for (int t = 0; t < n_threads; t++)
        pthread_create(&threads[t], NULL, worker, (void *)(intptr_t)t);

    usleep(20000); /* fork while the workers run */
    pid_t pid = no_fork ? -1 : fork();
    if (pid == 0)
        leave(child_work());
    int wstatus = 0;
    if (pid > 0)
        waitpid(pid, &wstatus, 0);
    int fork_ok = no_fork || (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
    if (exit_children) { /* a child that does nothing at all */
        pid = fork();
        if (pid == 0)
            leave(0);
        waitpid(pid, &wstatus, 0);
        fork_ok = fork_ok && WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0;
    }

    long failed = 0, oom = 0;
    for (int t = 0; t < n_threads; t++) {
        pthread_join(threads[t], NULL);
        failed += failures[t];
        oom += ooms[t];
    }
    /* Code built with per-thread default streams allocates through the _ptsz
     * entry points: served by the runtime too. */
    struct umpol_stats st;
    int have_stats = umpol_stats && umpol_stats(&st) == 0;
    unsigned long long before = have_stats ? st.allocations : 0;
    void *p = NULL;
    if (cudaMallocAsync_ptsz(&p, 8192, 0) != cudaSuccess || !p ||
        cudaFreeAsync_ptsz(p, 0) != cudaSuccess)
        failed++;
    if (have_stats && (umpol_stats(&st) != 0 || st.allocations != before + 1)) {
        fprintf(stderr, "cudaMallocAsync_ptsz was not served by umpol\n");
        failed++;
    }
    printf("threads %d, pairs %ld each: %ld failures, %ld out-of-memory answers, fork child %s\n",
           n_threads, n_pairs, failed, oom, fork_ok ? "ok" : "FAILED");
    if (have_stats)
        printf("umpol: %llu allocations, %llu passed through, %llu live bytes, %llu prefetches, "
               "%llu evictions, %llu cap refusals\n",
               st.allocations, st.passthrough, st.live_bytes, st.prefetches, st.evictions,
               st.cap_refusals);
    else
        printf("umpol: not active\n");
    return failed == 0 && fork_ok ? 0 : 1;
}
