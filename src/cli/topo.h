/* The machine as umpol sees it: GPUs (through the CUDA runtime, loaded only if
 * present) and host NUMA nodes (libnuma). Used by `umpol topo` and
 * `umpol check --topology`. */
#ifndef UMPOL_TOPO_H
#define UMPOL_TOPO_H

#include <stdbool.h>
#include <stdint.h>

#define TOPO_MAX_NODES 256
#define TOPO_MAX_GPUS 64

struct topo_gpu {
    char name[256];
    uint64_t total_bytes;
    int cc_major, cc_minor;
    int concurrent_managed, pageable_access, host_native_atomics, direct_managed_from_host;
    int host_numa_id, memory_numa_id;
};

struct topo_node {
    bool present;
    uint64_t bytes, free_bytes;
    int cpus;
};

struct topology {
    int gpu_count; /* -1: no CUDA runtime or driver */
    const char *gpu_error;
    struct topo_gpu gpus[TOPO_MAX_GPUS];
    bool numa; /* libnuma available */
    int max_node;
    struct topo_node nodes[TOPO_MAX_NODES];
};

void topo_probe(struct topology *t);
bool topo_node_has_memory(const struct topology *t, int node);

#endif
