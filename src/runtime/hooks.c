/* libumpol.so's face to the job: the interposed CUDA runtime functions, the
 * pluggable-allocator entry points, the public C API, and start-up and exit.
 *
 * The policy is loaded by the constructor (before the job runs); the real
 * CUDA functions are resolved on the first intercepted call, when libcudart
 * is certainly loaded. A per-thread depth counter sends any call the runtime
 * makes back into CUDA straight to the real function. */
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "config.h"
#include "lang/policy.h"
#include "runtime/log.h"
#include "runtime/process.h"
#include "runtime/profile.h"
#include "runtime/runtime.h"
#include "umpol.h"
#include "util/clock.h"

#define EXPORT __attribute__((visibility("default")))

static struct policy g_policy;
static struct runtime g_rt;
static struct cuda_api g_cuda;
static bool g_loaded;             /* a policy is compiled and the runtime set up */
static bool g_active;             /* ... and the real CUDA functions are resolved */
static bool g_cuda_missing;       /* resolution failed: nothing can be forwarded */
static bool g_refuse;             /* no policy and UMPOL_ON_ERROR=abort under dlopen */
static bool g_cuda_called;        /* an intercepted CUDA function was called */
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
    /* Evidence for `umpol run` that the job called the CUDA runtime at all,
     * given at once: a process may end without running its destructor. */
    if (!__atomic_load_n(&g_cuda_called, __ATOMIC_RELAXED) &&
        !__atomic_exchange_n(&g_cuda_called, true, __ATOMIC_RELAXED)) {
        char line[48];
        snprintf(line, sizeof line, "cuda %ld\n", (long)getpid());
        process_status(line);
    }
    return g_cuda_missing ? NULL : &g_cuda;
}

/* True when the runtime should handle this call. */
static bool ready(void)
{
    return real() && g_active && g_depth == 0;
}

/* ---- start-up, fork, exit ---- */

/* Every runtime lock is held across fork, in the one order the runtime ever
 * nests them (rt->lock, phase_lock, range_lock, then the profile's: CUPTI's
 * completion callback takes phase_lock inside a CUDA call made under
 * rt->lock), so the child finds none of them held by a thread that no
 * longer exists, and a fork beside that callback cannot deadlock. */
static void before_fork(void)
{
    if (g_loaded) {
        pthread_mutex_lock(&g_rt.lock);
        pthread_mutex_lock(&g_rt.phase_lock);
        pthread_mutex_lock(&g_rt.range_lock);
        profile_lock_all(&g_rt);
        mover_fork_prepare(&g_rt.mover);
    }
}

static void after_fork_parent(void)
{
    if (g_loaded) {
        mover_fork_parent(&g_rt.mover);
        profile_unlock_all(&g_rt);
        pthread_mutex_unlock(&g_rt.range_lock);
        pthread_mutex_unlock(&g_rt.phase_lock);
        pthread_mutex_unlock(&g_rt.lock);
    }
}

/* The child counts only its own work: summed reports count each allocation
 * once, and a child that does nothing writes no report over its parent's. */
static void after_fork_child(void)
{
    if (g_loaded)
        runtime_after_fork_child(&g_rt);
    __atomic_store_n(&g_cuda_called, false, __ATOMIC_RELAXED);
    if (g_loaded)
        mover_fork_child(&g_rt.mover); /* no thread here */
    after_fork_parent();
}

/* Did this process itself allocate or open a phase (not only inherit them)? */
static bool process_used(void)
{
    if (g_rt.allocations || __atomic_load_n(&g_rt.passthrough, __ATOMIC_RELAXED))
        return true;
    for (size_t i = 0; i < g_rt.phase_stat_count; i++)
        if (g_rt.phase_stats[i].entries)
            return true;
    return false;
}

/* `umpol run` learns from every process what it saw and what CUDA it used. */
static void write_run_status(void)
{
    struct cuda_evidence ev;
    process_cuda_evidence(&ev);
    char line[160];
    snprintf(line, sizeof line, "exit %ld %llu %llu %d %d\n", (long)getpid(),
             (unsigned long long)(g_loaded ? g_rt.allocations : 0),
             (unsigned long long)(g_loaded ? g_rt.passthrough : 0), ev.runtime, ev.driver);
    process_status(line);
}

__attribute__((destructor)) static void umpol_unload(void)
{
    write_run_status();
    if (!g_loaded)
        return;
    pthread_mutex_lock(&g_rt.lock);
    mover_destroy(&g_rt.mover); /* its remaps made, before CUDA itself goes */
    pthread_mutex_unlock(&g_rt.lock);
    const char *pattern = env("UMPOL_REPORT");
    /* A process that never touched CUDA or a phase (a launcher such as torchrun,
     * a shell, a forked child that did nothing) writes nothing: it would only
     * overwrite a worker's report. */
    bool used = process_used();
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
    const char *trace = env("UMPOL_TRACE");
    if (trace && *trace && used && g_rt.trace) {
        char path[4096];
        report_expand_path(trace, path, sizeof path);
        pthread_mutex_lock(&g_rt.lock);
        int rc = report_write_trace(&g_rt, path);
        size_t events = g_rt.trace->len;
        unsigned long long dropped = g_rt.trace->dropped;
        pthread_mutex_unlock(&g_rt.lock);
        if (rc != 0)
            LOG(LOG_ERROR, "cannot write the allocation trace to %s: %s", path, strerror(-rc));
        else
            LOG(LOG_INFO, "allocation trace written to %s (%zu events, %llu dropped)", path,
                events, dropped);
    }
    /* Pools and the policy stay: other destructors may still free memory. */
}

/* One UMPOL_* setting with a fixed set of values (matched ignoring case).
 * Unset or empty gives VALUES[FALLBACK]; anything else is a warning. */
static int setting(const char *name, const char *const *values, int fallback)
{
    const char *v = env(name);
    if (!v || !*v)
        return fallback;
    char list[128] = "";
    for (int i = 0; values[i]; i++) {
        if (strcasecmp(v, values[i]) == 0)
            return i;
        const char *sep = i == 0 ? "" : values[i + 1] ? ", " : " or ";
        size_t n = strlen(list);
        snprintf(list + n, sizeof list - n, "%s%s", sep, values[i]);
    }
    LOG(LOG_WARN, "%s=%.64s is not %s; using %s", name, v, list, values[fallback]);
    return fallback;
}

/* The runtime cannot start: say why, then run the job without it, unless
 * UMPOL_ON_ERROR=abort asks to stop. Even then a runtime loaded with dlopen
 * (PyTorch's pluggable allocator) never ends the process inside dlopen: its
 * allocator refuses instead, which the caller sees as out of memory. */
static void fail_to_load(const char *why, bool abort_on_error, bool preloaded)
{
    if (abort_on_error && preloaded) {
        LOG(LOG_ERROR, "%s; stopping before the job starts (UMPOL_ON_ERROR=abort)", why);
        _exit(1);
    }
    if (abort_on_error) {
        g_refuse = true;
        LOG(LOG_ERROR, "%s; umpol_torch_alloc refuses every allocation (UMPOL_ON_ERROR=abort)",
            why);
        return;
    }
    LOG(LOG_ERROR, "%s; running without umpol (UMPOL_ON_ERROR=abort stops instead)", why);
}

/* A setuid/setgid process sees no UMPOL_* variable (secure_getenv): it
 * applies UMPOL_POLICY only when that names a root-owned policy in a system
 * location, and never writes a report or a status line. */
static bool privileged_policy(char *path, size_t len)
{
    const char *named = getenv("UMPOL_POLICY");
    char resolved[PATH_MAX];
    if (named && *named && realpath(named, resolved) && process_policy_trusted(resolved)) {
        snprintf(path, len, "%s", resolved);
        return true;
    }
    LOG(LOG_WARN, "this process runs setuid or setgid: running without umpol (such a process "
                  "applies only a root-owned policy under /etc/umpol or %s)", UMPOL_POLICYDIR);
    return false;
}

static bool load_policy(const char *path, bool abort_on_error, bool preloaded)
{
    enum policy_status st = policy_load_file(&g_policy, path);
    if (st == POLICY_VALID)
        return true;
    diag_print(stderr, &g_policy.src, &g_policy.diags, false);
    policy_free(&g_policy);
    char why[PATH_MAX + 64];
    snprintf(why, sizeof why, "cannot load the policy %s", path);
    fail_to_load(why, abort_on_error, preloaded);
    return false;
}

__attribute__((constructor)) static void umpol_load(void)
{
    static const char *const levels[] = {"0", "1", "2", "3", NULL};
    static const char *const on_error[] = {"passthrough", "abort", NULL};
    static const char *const flag[] = {"0", "1", NULL};
    log_threshold = setting("UMPOL_LOG", levels, LOG_WARN);
    bool abort_on_error = setting("UMPOL_ON_ERROR", on_error, 0) == 1;
    bool discard = setting("UMPOL_DISCARD", flag, 0) == 1;
    setting("UMPOL_PROFILE", flag, 0); /* profile_init reads it */
    bool preloaded = process_preloaded();
    char path[PATH_MAX];
    const char *named = env("UMPOL_POLICY");
    bool have = false;
    if (process_privileged())
        have = privileged_policy(path, sizeof path);
    else if (!named || !*named)
        fail_to_load("UMPOL_POLICY is not set, so there is no policy to apply", abort_on_error,
                     preloaded);
    else if (strlen(named) >= sizeof path)
        fail_to_load("UMPOL_POLICY is too long", abort_on_error, preloaded);
    else if (strcmp(named, "-") == 0) /* the checker's standard input is the job's here */
        fail_to_load("UMPOL_POLICY is '-': the runtime does not read the job's standard input; "
                     "name a policy file", abort_on_error, preloaded);
    else
        have = snprintf(path, sizeof path, "%s", named) > 0;
    if (have && load_policy(path, abort_on_error, preloaded)) {
        if (runtime_init(&g_rt, g_policy.program, &g_cuda) != 0) {
            fail_to_load("out of memory while starting the runtime", abort_on_error, preloaded);
        } else {
            g_rt.record_timeline = env("UMPOL_REPORT") && *env("UMPOL_REPORT");
            if (g_rt.record_timeline && !(g_rt.sites = calloc(1, sizeof *g_rt.sites)))
                LOG(LOG_WARN, "out of memory: the report has no allocation sites");
            if (env("UMPOL_TRACE") && *env("UMPOL_TRACE") &&
                !(g_rt.trace = calloc(1, sizeof *g_rt.trace)))
                LOG(LOG_WARN, "out of memory: no allocation trace");
            if (profile_init(&g_rt) != 0)
                LOG(LOG_WARN, "out of memory: profiling is off");
            g_rt.discard = discard;
            pthread_atfork(before_fork, after_fork_parent, after_fork_child);
            g_loaded = true;
            LOG(LOG_INFO, "policy %s loaded: %zu classes", path, g_policy.program->class_count);
        }
    }
    /* A relative path would break in any child that changes directory: the
     * process tree gets the absolute one. (Only at start-up, before the job's
     * threads exist; setenv is not safe against concurrent getenv.) */
    char resolved[PATH_MAX];
    if (g_loaded && preloaded && path[0] != '/' && realpath(path, resolved))
        setenv("UMPOL_POLICY", resolved, 1);
    char line[64];
    snprintf(line, sizeof line, "load %ld %s\n", (long)getpid(), g_loaded ? "on" : "off");
    process_status(line);
}

/* ---- the interposed CUDA runtime ---- */

static cudaError_t alloc_hook(void **ptr, size_t size, unsigned api, cudaStream_t stream,
                              bool *handled)
{
    *handled = false;
    if (!ptr || size == 0 || !ready())
        return cudaSuccess;
    g_depth++;
    uint64_t t0 = now_ns();
    cudaError_t err = rt_alloc(&g_rt, ptr, size, api, stream, handled);
    if (*handled)
        rt_held(&g_rt, t0);
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
        uint64_t t0 = now_ns();
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
        if (ours) {
            rt_held(&g_rt, t0);
            return err != cudaSuccess ? err : free_err;
        }
    }
    return real() ? g_cuda.free(ptr) : cudaErrorInitializationError;
}

static bool free_async_hook(void *ptr, cudaStream_t stream, cudaError_t *err)
{
    if (!ptr || !ready())
        return false;
    g_depth++;
    uint64_t t0 = now_ns();
    bool ours = rt_free(&g_rt, ptr, stream, MODE_STREAM, err);
    if (ours)
        rt_held(&g_rt, t0);
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

/* ---- stream capture: counted, so that nothing waits for the whole GPU
 * while a capture is in progress (that would invalidate it) ---- */

static void capture_prepare(void)
{
    if (g_loaded) {
        uint64_t t0 = now_ns();
        rt_capture_prepare(&g_rt);
        rt_held(&g_rt, t0);
    }
}

static cudaError_t capture_begun(cudaError_t err)
{
    if (err == cudaSuccess) {
        atomic_fetch_add(&g_rt.captures, 1);
        atomic_store(&g_rt.capture_seen, true);
    }
    return err;
}

/* End STREAM's capture with END: counted as ended when the stream (AS
 * CUDA names it: the per-thread stream for _ptsz's 0) was capturing; its
 * capture ends whatever END returns. */
static cudaError_t capture_end(cudaStream_t stream, cudaStream_t as, cudaGraph_t *graph,
                               cudaError_t (*end)(cudaStream_t, cudaGraph_t *))
{
    enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (g_cuda.stream_is_capturing(as, &status) != cudaSuccess)
        status = cudaStreamCaptureStatusNone;
    cudaError_t err = end(stream, graph);
    if (status != cudaStreamCaptureStatusNone) {
        int n = atomic_load(&g_rt.captures);
        while (n > 0 && !atomic_compare_exchange_weak(&g_rt.captures, &n, n - 1)) {
        }
    }
    return err;
}

EXPORT cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
    if (!real())
        return cudaErrorInitializationError;
    capture_prepare();
    return capture_begun(g_cuda.stream_begin_capture(stream, mode));
}

EXPORT cudaError_t cudaStreamBeginCaptureToGraph(cudaStream_t stream, cudaGraph_t graph,
                                                 const cudaGraphNode_t *deps,
                                                 const cudaGraphEdgeData *edges, size_t n,
                                                 enum cudaStreamCaptureMode mode)
{
    if (!real() || !g_cuda.stream_begin_capture_to_graph)
        return cudaErrorInitializationError;
    capture_prepare();
    return capture_begun(g_cuda.stream_begin_capture_to_graph(stream, graph, deps, edges, n, mode));
}

EXPORT cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph)
{
    return real() ? capture_end(stream, stream, graph, g_cuda.stream_end_capture)
                  : cudaErrorInitializationError;
}

EXPORT cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream, enum cudaStreamCaptureMode mode);
EXPORT cudaError_t cudaStreamBeginCaptureToGraph_ptsz(cudaStream_t stream, cudaGraph_t graph,
                                                      const cudaGraphNode_t *deps,
                                                      const cudaGraphEdgeData *edges, size_t n,
                                                      enum cudaStreamCaptureMode mode);
EXPORT cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t *graph);

EXPORT cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
    if (!real())
        return cudaErrorInitializationError;
    capture_prepare();
    return capture_begun(g_cuda.stream_begin_capture_ptsz
                             ? g_cuda.stream_begin_capture_ptsz(stream, mode)
                             : g_cuda.stream_begin_capture(per_thread(stream), mode));
}

EXPORT cudaError_t cudaStreamBeginCaptureToGraph_ptsz(cudaStream_t stream, cudaGraph_t graph,
                                                      const cudaGraphNode_t *deps,
                                                      const cudaGraphEdgeData *edges, size_t n,
                                                      enum cudaStreamCaptureMode mode)
{
    if (!real())
        return cudaErrorInitializationError;
    capture_prepare();
    if (g_cuda.stream_begin_capture_to_graph_ptsz)
        return capture_begun(
            g_cuda.stream_begin_capture_to_graph_ptsz(stream, graph, deps, edges, n, mode));
    return g_cuda.stream_begin_capture_to_graph
               ? capture_begun(g_cuda.stream_begin_capture_to_graph(per_thread(stream), graph,
                                                                    deps, edges, n, mode))
               : cudaErrorInitializationError;
}

EXPORT cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t *graph)
{
    if (!real())
        return cudaErrorInitializationError;
    if (g_cuda.stream_end_capture_ptsz)
        return capture_end(stream, per_thread(stream), graph, g_cuda.stream_end_capture_ptsz);
    return capture_end(per_thread(stream), per_thread(stream), graph, g_cuda.stream_end_capture);
}

/* ---- PyTorch's pluggable allocator ---- */

EXPORT void *umpol_torch_alloc(ssize_t size, int device, void *stream)
{
    (void)device; /* PyTorch makes DEVICE current before it calls */
    if (size <= 0)
        return NULL;
    if (g_refuse) {
        static bool told;
        if (!__atomic_exchange_n(&told, true, __ATOMIC_RELAXED))
            LOG(LOG_ERROR, "umpol_torch_alloc: refusing allocations: the policy did not load "
                           "(UMPOL_ON_ERROR=abort)");
        return NULL;
    }
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
        uint64_t t0 = now_ns();
        phase_enter(&g_rt, name);
        rt_held(&g_rt, t0);
        g_depth--;
    }
}

EXPORT void umpol_phase_exit(void)
{
    if (phases_ready()) {
        g_depth++;
        uint64_t t0 = now_ns();
        phase_exit(&g_rt);
        rt_held(&g_rt, t0);
        g_depth--;
    }
}

EXPORT void umpol_phase_exit_named(const char *name)
{
    if (phases_ready() && name) {
        g_depth++;
        uint64_t t0 = now_ns();
        phase_exit_named(&g_rt, name);
        rt_held(&g_rt, t0);
        g_depth--;
    }
}

EXPORT void umpol_mark(const char *name)
{
    if (phases_ready()) {
        g_depth++;
        uint64_t t0 = now_ns();
        phase_mark(&g_rt, name);
        rt_held(&g_rt, t0);
        g_depth--;
    }
}

struct runtime *runtime_loaded(void)
{
    return g_loaded ? &g_rt : NULL;
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
