// CHECK(call): stop with the file, line, call and CUDA's message on any error;
// CU(call) the same for a driver call (the program links -lcuda).
// Shared by the GPU tests and benchmarks (the examples stay self-contained).
#ifndef UMPOL_CUDA_CHECK_H
#define UMPOL_CUDA_CHECK_H

#include <cstdio>
#include <cstdlib>

#include <cuda.h>
#include <cuda_runtime.h>

#define CHECK(call)                                                                          \
    do {                                                                                     \
        cudaError_t err_ = (call);                                                           \
        if (err_ != cudaSuccess) {                                                           \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                    \
                    cudaGetErrorString(err_));                                               \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

#define CU(call)                                                                             \
    do {                                                                                     \
        CUresult r_ = (call);                                                                \
        if (r_ != CUDA_SUCCESS) {                                                            \
            const char *s_ = "?";                                                            \
            cuGetErrorString(r_, &s_);                                                       \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, s_);               \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

#endif
