/* The fake CUDA runtime as the runtime core's function table, for tests and
 * benchmarks that link the core in-process. */
#ifndef UMPOL_FAKE_API_H
#define UMPOL_FAKE_API_H

#include "runtime/cuda_api.h"

extern const struct cuda_api fake_api;

#endif
