/* A training job's allocation pattern, against the fake CUDA runtime, for
 * `umpol suggest`'s tests: weights made once in model.init, activations made
 * in forward and freed in backward, gradients made in backward and freed in
 * optimizer.step, optimizer state made at the first optimizer.step and kept,
 * and small workspaces; with `kv`, also a cache made under tag "kv" in the
 * first forward and kept. Usage: train_like [STEPS] [kv]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "umpol.h"

#pragma weak umpol_phase_enter
#pragma weak umpol_phase_exit
#pragma weak umpol_tag_push
#pragma weak umpol_tag_pop

enum { WEIGHTS = 24, ACTIVATIONS = 12, STATE = 2 * WEIGHTS, SMALL = 8, CACHE = 16 };
#define MIB (1u << 20)

static void phase(const char *name)
{
    if (umpol_phase_enter) umpol_phase_enter(name);
}

static void end_phase(void)
{
    if (umpol_phase_exit) umpol_phase_exit();
}

/* The step's compute: long beside what a loaded machine adds (a sanitizer
 * build, parallel tests), since `umpol suggest` tells transient blocks from
 * the step's state by their lifetime against the step's period. */
static void work(long ms)
{
    struct timespec t = {0, ms * 1000000L};
    nanosleep(&t, NULL);
}

static void *alloc(size_t size, cudaStream_t s)
{
    void *p = NULL;
    if (cudaMallocAsync(&p, size, s) != cudaSuccess) {
        fprintf(stderr, "train_like: allocation of %zu bytes failed\n", size);
        exit(1);
    }
    return p;
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 4;
    int cache_blocks = argc > 2 && strcmp(argv[2], "kv") == 0 ? CACHE : 0;
    cudaStream_t s = 0;
    void *weights[WEIGHTS], *act[ACTIVATIONS], *grads[WEIGHTS], *state[STATE] = {0};
    void *cache[CACHE] = {0};
    void *small[SMALL];
    phase("model.init");
    for (int i = 0; i < WEIGHTS; i++)
        weights[i] = alloc(2 * MIB, s);
    work(5);
    end_phase();
    for (int step = 0; step < steps; step++) {
        phase("forward");
        for (int i = 0; i < ACTIVATIONS; i++)
            act[i] = alloc(4 * MIB, s);
        for (int i = 0; i < SMALL; i++)
            small[i] = alloc(4096, s);
        if (step == 0 && cache_blocks && umpol_tag_push) umpol_tag_push("kv");
        for (int i = 0; i < cache_blocks && step == 0; i++)
            cache[i] = alloc(8 * MIB, s);
        if (step == 0 && cache_blocks && umpol_tag_pop) umpol_tag_pop();
        work(30);
        end_phase();
        phase("backward");
        for (int i = 0; i < WEIGHTS; i++)
            grads[i] = alloc(2 * MIB, s);
        for (int i = 0; i < ACTIVATIONS; i++)
            cudaFreeAsync(act[i], s);
        for (int i = 0; i < SMALL; i++)
            cudaFreeAsync(small[i], s);
        work(30);
        end_phase();
        phase("optimizer.step");
        for (int i = 0; i < STATE && step == 0; i++)
            state[i] = alloc(2 * MIB, s);
        for (int i = 0; i < WEIGHTS; i++)
            cudaFreeAsync(grads[i], s);
        work(10);
        end_phase();
    }
    for (int i = 0; i < STATE; i++)
        if (state[i]) cudaFreeAsync(state[i], s);
    for (int i = 0; i < WEIGHTS; i++)
        cudaFreeAsync(weights[i], s);
    for (int i = 0; i < cache_blocks; i++)
        cudaFreeAsync(cache[i], s);
    printf("train_like: %d steps\n", steps);
    return 0;
}
