/* The fake CUDA runtime as the runtime core's function table, for tests and
 * benchmarks that link the core in-process. */
#ifndef UMPOL_FAKE_API_H
#define UMPOL_FAKE_API_H

#include "runtime/cuda_api.h"

struct runtime;

extern const struct cuda_api fake_api;

/* Destroy the events the runtime keeps for its process's life (it makes no
 * CUDA call when torn down, the context may be gone): each device's follow
 * event, streaming's marks and the pools' free points. Before
 * runtime_destroy, so that the fake's event memory does not leak. */
void fake_release_runtime_events(struct runtime *rt);

#endif
