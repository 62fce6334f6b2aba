/* libumpol.so's face to the job: the interposed CUDA runtime functions, the
 * pluggable-allocator entry points, the public C API, and start-up and exit.
 *
 * The policy is loaded by the constructor (before the job runs); the real
 * CUDA functions are resolved on the first intercepted call, when libcudart
 * is certainly loaded. A per-thread depth counter sends any call the runtime
 * makes back into CUDA straight to the real function. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "lang/policy.h"
#include "runtime/log.h"
#include "runtime/runtime.h"
#include "umpol.h"

#define EXPORT __attribute__((visibility("default")))

static struct policy g_policy;
static struct runtime g_rt;
static struct cuda_api g_cuda;
static bool g_loaded;             /* a policy is compiled and the runtime set up */
static bool g_active;             /* ... and the real CUDA functions are resolved */
static bool g_cuda_missing;       /* resolution failed: nothing can be forwarded */
static pthread_once_t g_resolve_once = PTHREAD_ONCE_INIT;
static _Thread_local int g_depth; /* > 0 while the runtime itself is running */

#define env runtime_env

static void resolve_cuda(void)
{
    const char *missing = NULL;
    if (cuda_api_resolve_real(&g_cuda, &missing) != 0) {
        g_cuda_missing = true;
        LOG(LOG_ERROR, "cannot find the CUDA runtime function %s; umpol is inactive", missing);
        return;
    }
    g_active = g_loaded;
}

/* The real CUDA runtime, resolved on first use; NULL when it cannot be found. */
static const struct cuda_api *real(void)
{
    pthread_once(&g_resolve_once, resolve_cuda);
    return g_cuda_missing ? NULL : &g_cuda;
}

/* True when the runtime should handle this call. */
static bool ready(void)
{
    return real() && g_active && g_depth == 0;
}

/* ---- start-up, fork, exit ---- */

/* Every runtime lock is held across fork, in the one order the runtime ever
 * nests them (phase_lock, rt->lock, range_lock, then the profile's), so the
 * child finds none of them held by a thread that no longer exists. */
static void before_fork(void)
{
    if (g_loaded) {
        pthread_mutex_lock(&g_rt.phase_lock);
        pthread_mutex_lock(&g_rt.lock);
        pthread_mutex_lock(&g_rt.range_lock);
        profile_lock_all(&g_rt);
    }
}

static void after_fork(void)
{
    if (g_loaded) {
        profile_unlock_all(&g_rt);
        pthread_mutex_unlock(&g_rt.range_lock);
        pthread_mutex_unlock(&g_rt.lock);
        pthread_mutex_unlock(&g_rt.phase_lock);
    }
}

/* `umpol run` asks every process of the job to say how many allocations it saw. */
static void write_run_status(void)
{
    const char *path = env("UMPOL_RUN_STATUS");
    if (!path || !*path)
        return;
    int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0)
        return;
    char line[96];
    int n = snprintf(line, sizeof line, "%llu %llu\n",
                     (unsigned long long)(g_loaded ? g_rt.allocations : 0),
                     (unsigned long long)(g_loaded ? g_rt.passthrough : 0));
    if (n > 0 && write(fd, line, (size_t)n) < 0)
        LOG(LOG_DEBUG, "cannot write the run status");
    close(fd);
}

__attribute__((destructor)) static void umpol_unload(void)
{
    write_run_status();
    if (!g_loaded)
        return;
    const char *pattern = env("UMPOL_REPORT");
    /* A process that never touched CUDA or a phase (a launcher such as torchrun,
     * a shell) writes nothing: it would only overwrite a worker's report. */
    bool used = g_rt.allocations || __atomic_load_n(&g_rt.passthrough, __ATOMIC_RELAXED) ||
                g_rt.phase_stat_count;
    if (pattern && *pattern && !used)
        LOG(LOG_INFO, "no allocation and no phase seen: no report written");
    if (pattern && *pattern && used) {
        profile_flush(&g_rt); /* CUPTI hands over its last records; takes our locks itself */
        char path[4096];
        report_expand_path(pattern, path, sizeof path);
        pthread_mutex_lock(&g_rt.lock);
        int rc = report_write(&g_rt, path);
        pthread_mutex_unlock(&g_rt.lock);
        if (rc != 0)
            LOG(LOG_ERROR, "cannot write the report to %s: %s", path, strerror(-rc));
        else
            LOG(LOG_INFO, "report written to %s", path);
    }
    /* Pools and the policy stay: other destructors may still free memory. */
}

static void fail_to_load(const char *why)
{
    const char *mode = env("UMPOL_ON_ERROR");
    if (mode && strcmp(mode, "passthrough") == 0) {
        LOG(LOG_WARN, "%s; running without umpol (UMPOL_ON_ERROR=passthrough)", why);
        return;
    }
    LOG(LOG_ERROR, "%s; stopping before the job starts (set UMPOL_ON_ERROR=passthrough to run "
                   "without umpol instead)", why);
    _exit(1);
}

__attribute__((constructor)) static void umpol_load(void)
{
    const char *level = env("UMPOL_LOG");
    if (level && *level >= '0' && *level <= '3')
        log_threshold = *level - '0';
    const char *path = env("UMPOL_POLICY");
    if (!path || !*path) {
        fail_to_load("UMPOL_POLICY is not set, so there is no policy to apply");
        return;
    }
    enum policy_status st = policy_load_file(&g_policy, path);
    if (st != POLICY_VALID) {
        diag_print(stderr, &g_policy.src, &g_policy.diags, false);
        char why[4200];
        snprintf(why, sizeof why, "cannot load the policy %s", path);
        policy_free(&g_policy);
        fail_to_load(why);
        return;
    }
    if (runtime_init(&g_rt, g_policy.program, &g_cuda) != 0) {
        fail_to_load("out of memory while starting the runtime");
        return;
    }
    const char *report = env("UMPOL_REPORT");
    g_rt.record_timeline = report && *report;
    if (profile_init(&g_rt) != 0)
        LOG(LOG_WARN, "out of memory: profiling is off");
    const char *discard = env("UMPOL_DISCARD");
    g_rt.discard = discard && strcmp(discard, "1") == 0;
    pthread_atfork(before_fork, after_fork, after_fork);
    g_loaded = true;
    LOG(LOG_INFO, "policy %s loaded: %zu classes", path, g_policy.program->class_count);
}

/* ---- the interposed CUDA runtime ---- */

static cudaError_t alloc_hook(void **ptr, size_t size, unsigned api, cudaStream_t stream,
                              bool *handled)
{
    *handled = false;
    if (!ptr || size == 0 || !ready())
        return cudaSuccess;
    g_depth++;
    cudaError_t err = rt_alloc(&g_rt, ptr, size, api, stream, handled);
    g_depth--;
    return err;
}

EXPORT cudaError_t cudaMalloc(void **ptr, size_t size)
{
    bool handled;
    cudaError_t err = alloc_hook(ptr, size, API_CUDA_MALLOC, 0, &handled);
    if (handled)
        return err;
    return real() ? g_cuda.malloc(ptr, size) : cudaErrorInitializationError;
}

EXPORT cudaError_t cudaMallocAsync(void **ptr, size_t size, cudaStream_t stream)
{
    bool handled;
    cudaError_t err = alloc_hook(ptr, size, API_CUDA_MALLOC_ASYNC, stream, &handled);
    if (handled)
        return err;
    return real() ? g_cuda.malloc_async(ptr, size, stream) : cudaErrorInitializationError;
}

EXPORT cudaError_t cudaMallocManaged(void **ptr, size_t size, unsigned flags)
{
    bool handled = false;
    cudaError_t err = cudaSuccess;
    /* Host-attached managed memory is the job's explicit choice: leave it alone. */
    if (flags == cudaMemAttachGlobal)
        err = alloc_hook(ptr, size, API_CUDA_MALLOC_MANAGED, 0, &handled);
    if (handled)
        return err;
    return real() ? g_cuda.malloc_managed(ptr, size, flags) : cudaErrorInitializationError;
}

EXPORT cudaError_t cudaFree(void *ptr)
{
    if (ptr && ready()) {
        g_depth++;
        pthread_mutex_lock(&g_rt.lock);
        struct block *b = map_find(&g_rt.map, (uintptr_t)ptr);
        bool pooled = b && b->slab;
        pthread_mutex_unlock(&g_rt.lock);
        /* cudaFree synchronises the device; a pooled block is then safe for
         * every stream. The job's own managed memory is freed for real below. */
        cudaError_t err = pooled ? g_cuda.device_synchronize() : cudaSuccess;
        cudaError_t free_err;
        bool ours = rt_free(&g_rt, ptr, 0, MODE_ANY, &free_err);
        g_depth--;
        if (ours)
            return err != cudaSuccess ? err : free_err;
    }
    return real() ? g_cuda.free(ptr) : cudaErrorInitializationError;
}

static bool free_async_hook(void *ptr, cudaStream_t stream, cudaError_t *err)
{
    if (!ptr || !ready())
        return false;
    g_depth++;
    bool ours = rt_free(&g_rt, ptr, stream, MODE_STREAM, err);
    g_depth--;
    return ours;
}

EXPORT cudaError_t cudaFreeAsync(void *ptr, cudaStream_t stream)
{
    cudaError_t err;
    if (free_async_hook(ptr, stream, &err))
        return err;
    return real() ? g_cuda.free_async(ptr, stream) : cudaErrorInitializationError;
}

/* Code built with --default-stream per-thread calls these: the same
 * functions, where stream 0 is the calling thread's default stream.
 * cuda_runtime_api.h declares them only for such code. */
EXPORT cudaError_t cudaMallocAsync_ptsz(void **ptr, size_t size, cudaStream_t stream);
EXPORT cudaError_t cudaFreeAsync_ptsz(void *ptr, cudaStream_t stream);

static cudaStream_t per_thread(cudaStream_t stream)
{
    return stream ? stream : cudaStreamPerThread;
}

EXPORT cudaError_t cudaMallocAsync_ptsz(void **ptr, size_t size, cudaStream_t stream)
{
    bool handled;
    cudaError_t err = alloc_hook(ptr, size, API_CUDA_MALLOC_ASYNC, per_thread(stream), &handled);
    if (handled)
        return err;
    if (!real())
        return cudaErrorInitializationError;
    return g_cuda.malloc_async_ptsz ? g_cuda.malloc_async_ptsz(ptr, size, stream)
                                    : g_cuda.malloc_async(ptr, size, per_thread(stream));
}

EXPORT cudaError_t cudaFreeAsync_ptsz(void *ptr, cudaStream_t stream)
{
    cudaError_t err;
    if (free_async_hook(ptr, per_thread(stream), &err))
        return err;
    if (!real())
        return cudaErrorInitializationError;
    return g_cuda.free_async_ptsz ? g_cuda.free_async_ptsz(ptr, stream)
                                  : g_cuda.free_async(ptr, per_thread(stream));
}

/* ---- PyTorch's pluggable allocator ---- */

EXPORT void *umpol_torch_alloc(ssize_t size, int device, void *stream)
{
    (void)device; /* PyTorch makes DEVICE current before it calls */
    if (size <= 0)
        return NULL;
    void *ptr = NULL;
    bool handled;
    cudaError_t err = alloc_hook(&ptr, (size_t)size, API_PLUGGABLE, (cudaStream_t)stream, &handled);
    if (!handled) {
        if (!real())
            return NULL;
        err = g_cuda.malloc_async(&ptr, (size_t)size, (cudaStream_t)stream);
    }
    return err == cudaSuccess ? ptr : NULL;
}

EXPORT void umpol_torch_free(void *ptr, ssize_t size, int device, void *stream)
{
    (void)size;
    (void)device;
    cudaFreeAsync(ptr, (cudaStream_t)stream);
}

/* ---- the public API (umpol.h) ---- */

EXPORT void umpol_tag_push(const char *name)
{
    if (g_loaded)
        tag_push(&g_rt, name);
}

EXPORT void umpol_tag_pop(void)
{
    if (g_loaded)
        tag_pop();
}

/* Phases need no CUDA: before the first allocation no block can move. */
static bool phases_ready(void)
{
    return g_loaded && g_depth == 0;
}

EXPORT void umpol_phase_enter(const char *name)
{
    if (phases_ready()) {
        g_depth++;
        phase_enter(&g_rt, name);
        g_depth--;
    }
}

EXPORT void umpol_phase_exit(void)
{
    if (phases_ready()) {
        g_depth++;
        phase_exit(&g_rt);
        g_depth--;
    }
}

EXPORT void umpol_mark(const char *name)
{
    if (phases_ready()) {
        g_depth++;
        phase_mark(&g_rt, name);
        g_depth--;
    }
}

EXPORT int umpol_stats(struct umpol_stats *stats)
{
    if (!g_loaded || !stats)
        return -1;
    memset(stats, 0, sizeof *stats);
    pthread_mutex_lock(&g_rt.lock);
    stats->allocations = g_rt.allocations;
    stats->passthrough = __atomic_load_n(&g_rt.passthrough, __ATOMIC_RELAXED);
    for (size_t c = 0; c < g_rt.program->class_count; c++) {
        const struct class_stats *s = &g_rt.class_stats[c];
        stats->live_bytes += s->live_bytes;
        stats->prefetches += s->prefetches;
        stats->evictions += s->evictions;
        stats->cap_refusals += s->cap_refusals;
    }
    for (int d = 0; d < RT_MAX_DEVICES; d++)
        stats->managed_bytes += g_rt.devices[d].managed_bytes;
    pthread_mutex_unlock(&g_rt.lock);
    return 0;
}
