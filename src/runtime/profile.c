/* Unified Memory counters from CUPTI (UMPOL_PROFILE=1): bytes migrated each
 * way, GPU and CPU page faults, thrashing and throttling, each record
 * attributed to the class that owns its address and to the phase open when it
 * happened. CUPTI is loaded with dlopen, so the runtime needs it only when
 * profiling is asked for.
 *
 *   UMPOL_PROFILE=1                  counters on for the whole run
 *   UMPOL_PROFILE_PHASES=GLOB        keep only records made while such a phase is open
 *   UMPOL_PROFILE_STEPS=N..M         counters on only for steps N to M (from 0), a step
 *   UMPOL_PROFILE_STEP_PHASE=NAME    being each opening of phase NAME (default "forward")
 *
 * Locks: the completion callback takes range_lock alone, then phase_lock and
 * inside it profile->lock, and calls no CUDA: CUPTI may run it from inside a
 * CUDA call the runtime makes with rt->lock held. */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cupti_activity.h>

#include "lang/glob.h"
#include "lang/json.h"
#include "runtime/log.h"
#include "runtime/profile.h"
#include "util/dlsyms.h"
#include "util/env.h"

static struct runtime *the_rt; /* CUPTI's callbacks carry no context */

static void *load_cupti(void)
{
    const char *chosen = runtime_env("UMPOL_CUPTI_LIBRARY");
    if (chosen && *chosen)
        return dlopen(chosen, RTLD_NOW | RTLD_LOCAL);
    static const char *const names[] = {
        "libcupti.so.13", "libcupti.so", "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so",
        "/usr/local/cuda/lib64/libcupti.so", "/usr/local/cuda/lib/libcupti.so"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h)
            return h;
    }
    return NULL;
}

static int resolve(struct cupti_api *api, void *h)
{
    const struct dl_symbol table[] = {
        {(void **)&api->configure, "cuptiActivityConfigureUnifiedMemoryCounter", true},
        {(void **)&api->register_callbacks, "cuptiActivityRegisterCallbacks", true},
        {(void **)&api->enable, "cuptiActivityEnable", true},
        {(void **)&api->disable, "cuptiActivityDisable", true},
        {(void **)&api->next_record, "cuptiActivityGetNextRecord", true},
        {(void **)&api->flush_all, "cuptiActivityFlushAll", true},
        {(void **)&api->timestamp, "cuptiGetTimestamp", true},
    };
    return dl_fill(table, sizeof table / sizeof table[0], h, NULL) ? -1 : 0;
}

enum { BUFFER_BYTES = 8u << 20, BUFFER_ALIGN = 8 };

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    void *p = NULL;
    if (posix_memalign(&p, BUFFER_ALIGN, BUFFER_BYTES) != 0)
        p = NULL;
    *buffer = p;
    *size = p ? BUFFER_BYTES : 0;
    *max_records = 0;
}

/* A GPU fault record's start and end are when the driver began and finished
 * servicing the fault group: the warps that faulted wait that long. */
static void add(struct um_counters *c, CUpti_ActivityUnifiedMemoryCounterKind kind, uint64_t value,
                uint64_t start, uint64_t end)
{
    switch (kind) {
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD: c->htod_bytes += value; break;
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH: c->dtoh_bytes += value; break;
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT:
        c->gpu_faults += value;
        c->gpu_fault_ns += end > start ? end - start : 0;
        break;
    /* One record per CPU fault; its value field holds a timestamp on H200 (seen 2026-11-22). */
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_CPU_PAGE_FAULT_COUNT: c->cpu_faults += 1; (void)value; break;
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THRASHING: c->thrashing += value; break;
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THROTTLING: c->throttling += value; break;
    default: break;
    }
}

/* The innermost phase open at CUPTI time TS, or -1 (phase_lock held). */
static long phase_at(const struct runtime *rt, uint64_t ts)
{
    long lo = 0, hi = (long)rt->span_count - 1, last = -1;
    while (lo <= hi) { /* spans are in order of their start */
        long mid = (lo + hi) / 2;
        if (rt->spans[mid].start_ts <= ts) {
            last = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    for (long i = last, steps = 0; i >= 0 && steps < 256; i--, steps++) {
        const struct phase_span *s = &rt->spans[i];
        if (s->end_ts == 0 || s->end_ts >= ts)
            return (long)s->phase;
    }
    return -1;
}

void profile_attribute(struct runtime *rt, CUpti_ActivityUnifiedMemoryCounterKind kind,
                       uint64_t value, uint64_t address, uint64_t ts, uint64_t end_ts)
{
    struct profile *pr = rt->profile;
    pthread_mutex_lock(&rt->range_lock);
    int cls = ranges_class_of(&rt->ranges, (uintptr_t)address);
    pthread_mutex_unlock(&rt->range_lock);
    pthread_mutex_lock(&rt->phase_lock);
    long phase = phase_at(rt, ts);
    const char *phase_name = phase >= 0 ? rt->phase_stats[phase].name : NULL;
    bool keep = !pr->phase_glob || (phase_name && glob_match(pr->phase_glob, phase_name));
    pthread_mutex_lock(&pr->lock);
    pr->records++;
    /* A step window keeps what starts inside it; before the window opens, nothing. */
    bool in_window = pr->first_step < 0 ||
                     (pr->window_start && ts >= pr->window_start && (!pr->window_end || ts < pr->window_end));
    keep = keep && in_window;
    if (keep) {
        pr->kept++;
        add(cls >= 0 ? &rt->class_stats[cls].um : &pr->unattributed, kind, value, ts, end_ts);
        if (phase >= 0)
            add(&rt->phase_stats[phase].um, kind, value, ts, end_ts);
    }
    pthread_mutex_unlock(&pr->lock);
    pthread_mutex_unlock(&rt->phase_lock);
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid)
{
    (void)ctx;
    (void)stream;
    (void)size;
    struct runtime *rt = the_rt;
    CUpti_Activity *a = NULL;
    while (rt && rt->profile->api.next_record(buffer, valid, &a) == CUPTI_SUCCESS) {
        if (a->kind != CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER)
            continue;
        const CUpti_ActivityUnifiedMemoryCounter3 *r = (const CUpti_ActivityUnifiedMemoryCounter3 *)a;
        profile_attribute(rt, r->counterKind, r->value, r->address, r->start, r->end);
    }
    free(buffer);
}

static long parse_long(const char *s, const char **end)
{
    char *e;
    long v = strtol(s, &e, 10);
    *end = e;
    return e == s || v < 0 ? -1 : v;
}

int profile_init(struct runtime *rt)
{
    const char *on = runtime_env("UMPOL_PROFILE");
    if (!on || strcmp(on, "1") != 0)
        return 0;
    struct profile *pr = calloc(1, sizeof *pr);
    if (!pr)
        return -1;
    pthread_mutex_init(&pr->lock, NULL);
    pthread_mutex_init(&pr->toggle, NULL);
    pr->first_step = pr->last_step = -1;
    const char *steps = runtime_env("UMPOL_PROFILE_STEPS");
    if (steps && *steps) {
        const char *e;
        pr->first_step = parse_long(steps, &e);
        pr->last_step = strncmp(e, "..", 2) == 0 ? parse_long(e + 2, &e) : pr->first_step;
        if (pr->first_step < 0 || pr->last_step < pr->first_step || *e) {
            LOG(LOG_WARN, "UMPOL_PROFILE_STEPS=%s is not N..M; profiling every step", steps);
            pr->first_step = pr->last_step = -1;
        }
    }
    const char *glob = runtime_env("UMPOL_PROFILE_PHASES");
    pr->phase_glob = glob && *glob ? strdup(glob) : NULL;
    const char *step_phase = runtime_env("UMPOL_PROFILE_STEP_PHASE");
    pr->step_phase = strdup(step_phase && *step_phase ? step_phase : "forward");
    if (!pr->step_phase) /* out of memory: no step to count, every step profiled */
        pr->first_step = pr->last_step = -1;
    void *h = load_cupti();
    if (!h || resolve(&pr->api, h) != 0) {
        LOG(LOG_WARN, "UMPOL_PROFILE=1 but CUPTI cannot be loaded (%s): no fault or migration "
                      "counters", h ? "missing functions" : dlerror());
        pr->failed = true;
    } else if (pr->api.register_callbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS) {
        LOG(LOG_WARN, "CUPTI refused activity callbacks: no fault or migration counters");
        pr->failed = true;
    }
    the_rt = rt;
    rt->profile = pr;
    return 0;
}

void profile_lock_all(struct runtime *rt)
{
    if (rt->profile) {
        pthread_mutex_lock(&rt->profile->toggle);
        pthread_mutex_lock(&rt->profile->lock);
    }
}

void profile_unlock_all(struct runtime *rt)
{
    if (rt->profile) {
        pthread_mutex_unlock(&rt->profile->lock);
        pthread_mutex_unlock(&rt->profile->toggle);
    }
}

void profile_after_fork_child(struct runtime *rt)
{
    struct profile *pr = rt->profile;
    if (pr) {
        pr->records = pr->kept = pr->dropped_buffers = 0;
        memset(&pr->unattributed, 0, sizeof pr->unattributed);
    }
}

void profile_free(struct runtime *rt)
{
    struct profile *pr = rt->profile;
    if (!pr)
        return;
    if (the_rt == rt)
        the_rt = NULL;
    free(pr->phase_glob);
    free(pr->step_phase);
    pthread_mutex_destroy(&pr->lock);
    pthread_mutex_destroy(&pr->toggle);
    free(pr);
    rt->profile = NULL;
}

uint64_t profile_timestamp(struct runtime *rt)
{
    uint64_t ts = 0;
    if (rt->profile && rt->profile->clock)
        ts = rt->profile->clock();
    else if (rt->profile && !rt->profile->failed)
        rt->profile->api.timestamp(&ts);
    return ts;
}

static void set_enabled(struct runtime *rt, bool on)
{
    struct profile *pr = rt->profile;
    pthread_mutex_lock(&pr->toggle);
    if (pr->failed || !pr->configured || pr->enabled == on) {
        pthread_mutex_unlock(&pr->toggle);
        return;
    }
    CUptiResult r = on ? pr->api.enable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER)
                       : pr->api.disable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER);
    if (r != CUPTI_SUCCESS) {
        LOG(LOG_WARN, "CUPTI could not %s the Unified Memory counters (error %d)",
            on ? "enable" : "disable", (int)r);
        if (on)
            pr->failed = true;
    } else {
        pr->enabled = on;
    }
    pthread_mutex_unlock(&pr->toggle);
}

/* Counters are configured once the first device is known (every device the
 * process can see), then enabled unless a step window says later. */
void profile_device_seen(struct runtime *rt)
{
    struct profile *pr = rt->profile;
    if (!pr || pr->failed || pr->configured)
        return;
    static const CUpti_ActivityUnifiedMemoryCounterKind kinds[] = {
        CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD,
        CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH,
        CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT,
        CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_CPU_PAGE_FAULT_COUNT,
        CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THRASHING,
        CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THROTTLING,
    };
    enum { KINDS = sizeof kinds / sizeof kinds[0] };
    int count = 1;
    if (rt->cuda->get_device_count(&count) != cudaSuccess || count < 1)
        count = 1;
    if (count > RT_MAX_DEVICES)
        count = RT_MAX_DEVICES;
    CUpti_ActivityUnifiedMemoryCounterConfig *config = calloc((size_t)count * KINDS, sizeof *config);
    if (!config)
        return;
    /* Platforms lack some kinds (CPU faults, thrashing): drop the tail until CUPTI agrees. */
    for (int n = KINDS; n >= 2 && !pr->configured; n--) {
        for (int d = 0; d < count; d++)
            for (int k = 0; k < n; k++)
                config[d * n + k] = (CUpti_ActivityUnifiedMemoryCounterConfig){
                    CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_SINGLE_DEVICE, kinds[k],
                    (uint32_t)d, 1};
        if (pr->api.configure(config, (uint32_t)(count * n)) == CUPTI_SUCCESS) {
            pr->configured = true;
            LOG(LOG_INFO, "profiling: %d Unified Memory counters on %d GPU%s", n, count,
                count == 1 ? "" : "s");
        }
    }
    free(config);
    if (!pr->configured) {
        LOG(LOG_WARN, "CUPTI refused the Unified Memory counters on this platform");
        pr->failed = true;
        return;
    }
    pthread_mutex_lock(&pr->lock);
    long current = pr->step - 1; /* the step running now, -1 before the first */
    pthread_mutex_unlock(&pr->lock);
    if (pr->first_step < 0 || (current >= pr->first_step && current <= pr->last_step))
        set_enabled(rt, true);
}

void profile_phase_entered(struct runtime *rt, const char *name)
{
    struct profile *pr = rt->profile;
    if (!pr || pr->first_step < 0 || strcmp(name, pr->step_phase) != 0)
        return;
    pthread_mutex_lock(&pr->lock);
    long step = pr->step++;
    uint64_t ts = profile_timestamp(rt);
    if (step == pr->first_step)
        pr->window_start = ts;
    else if (step == pr->last_step + 1)
        pr->window_end = ts;
    pthread_mutex_unlock(&pr->lock);
    if (step == pr->first_step)
        set_enabled(rt, true);
    else if (step == pr->last_step + 1)
        set_enabled(rt, false);
}

void profile_flush(struct runtime *rt)
{
    struct profile *pr = rt->profile;
    if (pr && !pr->failed && pr->configured)
        pr->api.flush_all(1);
}

static void print_um(FILE *out, const struct um_counters *c)
{
    fprintf(out,
            "{\"htod_bytes\": %" PRIu64 ", \"dtoh_bytes\": %" PRIu64 ", \"gpu_faults\": %" PRIu64
            ", \"cpu_faults\": %" PRIu64 ", \"thrashing\": %" PRIu64 ", \"throttling\": %" PRIu64
            ", \"gpu_fault_ns\": %" PRIu64 "}",
            c->htod_bytes, c->dtoh_bytes, c->gpu_faults, c->cpu_faults, c->thrashing,
            c->throttling, c->gpu_fault_ns);
}

void profile_report(const struct runtime *rt, FILE *out)
{
    const struct profile *pr = rt->profile;
    if (!pr) {
        fputs("null", out);
        return;
    }
    fprintf(out, "{\"active\": %s, \"records\": %" PRIu64 ", \"kept\": %" PRIu64 ", \"phases\": ",
            pr->configured && !pr->failed ? "true" : "false", pr->records, pr->kept);
    if (pr->phase_glob)
        json_print_string(out, pr->phase_glob);
    else
        fputs("null", out);
    if (pr->first_step >= 0) {
        fprintf(out, ", \"steps\": [%ld, %ld], \"step_phase\": ", pr->first_step, pr->last_step);
        json_print_string(out, pr->step_phase);
    } else
        fputs(", \"steps\": null, \"step_phase\": null", out);
    fputs(", \"unattributed\": ", out);
    print_um(out, &pr->unattributed);
    fputc('}', out);
}

void profile_print_um(FILE *out, const struct um_counters *c)
{
    print_um(out, c);
}
