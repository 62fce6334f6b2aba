/* `umpol topo`: GPUs, the Unified Memory attributes that decide what a policy
 * can do, host NUMA nodes, and optionally the measured host<->GPU bandwidth. */
#include "topo.h"

#include <dlfcn.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "config.h"
#include "cli.h"
#include "util/dlsyms.h"

#ifdef HAVE_NUMA
#include <numa.h>
#endif

/* The few runtime functions topo needs, from a libcudart found at run time:
 * the CLI itself never links CUDA. */
struct cudart {
    cudaError_t (*get_device_count)(int *);
    cudaError_t (*get_device_properties)(struct cudaDeviceProp *, int);
    cudaError_t (*device_get_attribute)(int *, enum cudaDeviceAttr, int);
    cudaError_t (*set_device)(int);
    cudaError_t (*mem_get_info)(size_t *, size_t *);
    cudaError_t (*malloc)(void **, size_t);
    cudaError_t (*malloc_host)(void **, size_t);
    cudaError_t (*free)(void *);
    cudaError_t (*free_host)(void *);
    cudaError_t (*memcpy)(void *, const void *, size_t, enum cudaMemcpyKind);
    const char *(*error_string)(cudaError_t);
};

static bool load_cudart(struct cudart *c)
{
    static const char *const names[] = {"libcudart.so.13", "libcudart.so",
                                        "/usr/local/cuda/lib64/libcudart.so.13"};
    void *h = NULL;
    for (size_t i = 0; i < 3 && !h; i++)
        h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return false;
    const struct dl_symbol table[] = {
        {(void **)&c->get_device_count, "cudaGetDeviceCount", true},
        {(void **)&c->get_device_properties, "cudaGetDeviceProperties", true},
        {(void **)&c->device_get_attribute, "cudaDeviceGetAttribute", true},
        {(void **)&c->set_device, "cudaSetDevice", true},
        {(void **)&c->mem_get_info, "cudaMemGetInfo", true},
        {(void **)&c->malloc, "cudaMalloc", true},
        {(void **)&c->malloc_host, "cudaMallocHost", true},
        {(void **)&c->free, "cudaFree", true},
        {(void **)&c->free_host, "cudaFreeHost", true},
        {(void **)&c->memcpy, "cudaMemcpy", true},
        {(void **)&c->error_string, "cudaGetErrorString", true},
    };
    return dl_fill(table, sizeof table / sizeof table[0], h, NULL) == NULL;
}

static struct cudart cudart;
static bool cudart_loaded;

/* Why there is no GPU to use, in the user's terms: cudart reports a missing
 * driver as "CUDA driver version is insufficient for CUDA runtime version". */
static const char *no_gpu_reason(cudaError_t err)
{
    static char why[256];
    if (err == cudaErrorNoDevice)
        return "no GPU: the CUDA driver found none";
    if (err == cudaErrorInsufficientDriver) {
        void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!driver)
            return "no CUDA driver found: libcuda.so.1 is not installed or not on the library "
                   "path (an NVIDIA driver provides it)";
        dlclose(driver);
        return "the CUDA driver is older than the CUDA runtime umpol loaded (libcudart.so.13 "
               "needs a CUDA 13 driver)";
    }
    snprintf(why, sizeof why, "the CUDA runtime says: %s", cudart.error_string(err));
    return why;
}

static int attr(enum cudaDeviceAttr a, int dev)
{
    int v = -1;
    if (cudart.device_get_attribute(&v, a, dev) != cudaSuccess)
        v = -1;
    return v;
}

void topo_probe(struct topology *t)
{
    memset(t, 0, sizeof *t);
    t->gpu_count = -1;
    cudart_loaded = load_cudart(&cudart);
    if (!cudart_loaded) {
        t->gpu_error = "no CUDA runtime library found (libcudart.so.13, from the CUDA Toolkit "
                       "or a PyTorch install)";
    } else {
        int n = 0;
        cudaError_t err = cudart.get_device_count(&n);
        if (err != cudaSuccess) {
            t->gpu_error = no_gpu_reason(err);
        } else if (n == 0) {
            t->gpu_count = 0;
            t->gpu_error = "no GPU: the CUDA driver found none";
        } else {
            t->gpu_count = n > TOPO_MAX_GPUS ? TOPO_MAX_GPUS : n;
            for (int d = 0; d < t->gpu_count; d++) {
                struct topo_gpu *g = &t->gpus[d];
                struct cudaDeviceProp prop;
                if (cudart.get_device_properties(&prop, d) == cudaSuccess) {
                    snprintf(g->name, sizeof g->name, "%s", prop.name);
                    g->total_bytes = prop.totalGlobalMem;
                }
                g->cc_major = attr(cudaDevAttrComputeCapabilityMajor, d);
                g->cc_minor = attr(cudaDevAttrComputeCapabilityMinor, d);
                g->concurrent_managed = attr(cudaDevAttrConcurrentManagedAccess, d);
                g->pageable_access = attr(cudaDevAttrPageableMemoryAccess, d);
                g->host_native_atomics = attr(cudaDevAttrHostNativeAtomicSupported, d);
                g->direct_managed_from_host = attr(cudaDevAttrDirectManagedMemAccessFromHost, d);
                g->host_numa_id = attr(cudaDevAttrHostNumaId, d);
                g->memory_numa_id = attr(cudaDevAttrNumaId, d);
            }
        }
    }
#ifdef HAVE_NUMA
    if (numa_available() >= 0) {
        t->numa = true;
        t->max_node = numa_max_node();
        if (t->max_node >= TOPO_MAX_NODES)
            t->max_node = TOPO_MAX_NODES - 1;
        struct bitmask *cpus = numa_allocate_cpumask();
        for (int node = 0; node <= t->max_node; node++) {
            long long free_b = 0;
            long long size = numa_node_size64(node, &free_b);
            if (size < 0)
                continue;
            struct topo_node *nd = &t->nodes[node];
            nd->present = true;
            nd->bytes = (uint64_t)size;
            nd->free_bytes = (uint64_t)free_b;
            if (cpus && numa_node_to_cpus(node, cpus) == 0)
                nd->cpus = (int)numa_bitmask_weight(cpus);
        }
        if (cpus)
            numa_free_cpumask(cpus);
    }
#endif
}

bool topo_node_has_memory(const struct topology *t, int node)
{
    if (!t->numa)
        return node == 0; /* without libnuma, only the one node a machine always has */
    return node >= 0 && node <= t->max_node && t->nodes[node].present && t->nodes[node].bytes > 0;
}

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Pinned host <-> plain device memory copies: the link's ceiling. */
static void measure(int dev)
{
    const size_t bytes = 256u << 20;
    void *host = NULL, *gpu = NULL;
    if (cudart.set_device(dev) != cudaSuccess || cudart.malloc_host(&host, bytes) != cudaSuccess ||
        cudart.malloc(&gpu, bytes) != cudaSuccess) {
        printf("    bandwidth: cannot allocate 256 MiB to measure\n");
    } else {
        memset(host, 1, bytes);
        double best[2] = {0, 0};
        for (int dir = 0; dir < 2; dir++) {
            for (int rep = 0; rep < 6; rep++) {
                double t0 = seconds();
                cudart.memcpy(dir ? host : gpu, dir ? gpu : host, bytes,
                              dir ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice);
                double gbps = (double)bytes / (seconds() - t0) / 1e9;
                if (rep > 0 && gbps > best[dir]) /* the first copy warms up */
                    best[dir] = gbps;
            }
        }
        printf("    bandwidth (pinned cudaMemcpy, 256 MiB, best of 5): host->GPU %.1f GB/s, "
               "GPU->host %.1f GB/s\n", best[0], best[1]);
    }
    if (gpu)
        cudart.free(gpu);
    if (host)
        cudart.free_host(host);
}

static const char *yes_no(int v)
{
    return v < 0 ? "unknown" : v ? "yes" : "no";
}

int cmd_topo(int argc, char **argv)
{
    bool do_measure = false;
    for (int c; (c = cli_getopt("topo", argc, argv)) != -1;)
        if (c == OPT_MEASURE)
            do_measure = true;
    if (optind != argc)
        return cli_usage_error("topo", "unexpected argument '%s'", argv[optind]);
    struct topology t;
    topo_probe(&t);
    if (t.gpu_count <= 0) {
        printf("GPUs: none\n  %s\n", t.gpu_error);
        if (do_measure)
            printf("  bandwidth: nothing measured, as there is no GPU\n");
    } else {
        printf("GPUs: %d\n", t.gpu_count);
        for (int d = 0; d < t.gpu_count; d++) {
            const struct topo_gpu *g = &t.gpus[d];
            printf("  GPU %d: %s, %.1f GiB, compute capability %d.%d\n", d, g->name,
                   (double)g->total_bytes / (1 << 30), g->cc_major, g->cc_minor);
            printf("    concurrent managed access: %s (prefetch and advice %s)\n",
                   yes_no(g->concurrent_managed),
                   g->concurrent_managed == 1 ? "work" : "are limited: pages move on faults only");
            printf("    pageable memory access: %s%s\n", yes_no(g->pageable_access),
                   g->pageable_access == 1 ? " (the GPU reads plain host memory: HMM or ATS)" : "");
            printf("    host native atomics: %s, host reads GPU-resident managed memory directly: %s\n",
                   yes_no(g->host_native_atomics), yes_no(g->direct_managed_from_host));
            printf("    nearest host NUMA node: %d%s", g->host_numa_id,
                   g->host_numa_id < 0 ? " (none: 'host near' means plain host)" : "");
            if (g->memory_numa_id >= 0)
                printf("; its memory is NUMA node %d", g->memory_numa_id);
            putchar('\n');
            if (do_measure)
                measure(d);
        }
    }
    if (!t.numa) {
        printf("host NUMA: libnuma %s; 'host numa N' is checked against node 0 only\n",
#ifdef HAVE_NUMA
               "reports no NUMA support"
#else
               "not built in"
#endif
        );
        return EXIT_VALID;
    }
    printf("host NUMA nodes: %d\n", t.max_node + 1);
    for (int node = 0; node <= t.max_node; node++) {
        const struct topo_node *nd = &t.nodes[node];
        if (!nd->present)
            continue;
        bool gpu_memory = false;
        for (int d = 0; d < t.gpu_count; d++)
            gpu_memory |= t.gpus[d].memory_numa_id == node;
        printf("  node %d: %.1f GiB (%.1f GiB free), %d CPUs%s\n", node,
               (double)nd->bytes / (1 << 30), (double)nd->free_bytes / (1 << 30), nd->cpus,
               gpu_memory ? ", GPU memory" : nd->cpus == 0 && nd->bytes ? ", memory only" : "");
    }
    return EXIT_VALID;
}
