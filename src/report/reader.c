/* Reading a report: the file (regular, bounded, never blocking), its JSON,
 * and every field checked against the schema in report.h. */
#include "report.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "report/jsonv.h"

const char *const report_class_counters[RC_COUNT] = {
    "allocations", "frees",         "bytes_requested", "live_bytes",     "peak_bytes",
    "slabs",       "slab_bytes",    "prefetches",      "prefetch_bytes", "evictions",
    "evict_bytes", "cap_refusals",  "budget_skips",    "advice_errors",  "cross_stream_reuses",
    "discards",    "discard_bytes", "reclaims",        "reclaim_bytes",  "reclassified",
    "slab_peak_bytes", "slab_releases"};
const char *const report_um_counters[UM_COUNT] = {"htod_bytes", "dtoh_bytes", "gpu_faults",
                                                  "cpu_faults", "thrashing",  "throttling",
                                                  "gpu_fault_ns"};
const char *const report_next_use_counters[NU_COUNT] = {"predictions", "hits", "error_events",
                                                        "ahead_bytes", "demand_bytes"};
const char *const report_stream_counters[ST_COUNT] = {
    "uses", "ready_bytes", "late_bytes", "fetched_bytes", "dropped_bytes", "saved_bytes",
    "unlearned_uses"};
const char *const report_totals[TOT_COUNT] = {
    "allocations", "frees",    "passthrough", "jobs_managed_allocations",
    "runtime_ns",  "place_ns", "reclaim_ns",  "evict_ns",
    "held_ns",     "slab_grow_ns", "slab_release_ns", "remap_wait_ns"};
const char *const report_event_kinds[EV_COUNT] = {"prefetch_gpu", "prefetch_host", "evict",
                                                  "cap_refusal"};

/* Where the checker is, for messages such as "classes[3].peak_bytes: ...". */
struct ctx {
    char *why;
    size_t why_len;
    bool failed;
};

static bool invalid(struct ctx *c, const char *fmt, ...)
{
    if (!c->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->why, c->why_len, fmt, ap);
        va_end(ap);
        c->failed = true;
    }
    return false;
}

/* Member KEY of OBJ as a non-negative integer; absent or null reads as 0. */
static bool get_uint(struct ctx *c, const struct jv *obj, const char *where, const char *key,
                     uint64_t *out)
{
    const struct jv *v = jv_get(obj, key);
    *out = 0;
    if (!v || v->type == JV_NULL) return true;
    if (v->type == JV_NUMBER && v->is_uint) {
        *out = v->uint;
        return true;
    }
    /* 1e3 is an integer too; 1.5, -1 and 1e300 are not in range. */
    if (v->type == JV_NUMBER && v->number >= 0 && v->number < 18446744073709551616.0 &&
        v->number == (double)(uint64_t)v->number) {
        *out = (uint64_t)v->number;
        return true;
    }
    return invalid(c, "%s%s%s: expected an integer from 0 to 18446744073709551615", where,
                   *where ? "." : "", key);
}

/* Member KEY as an integer in [MIN, MAX] (bounds within +-2^53, so exact in a double);
 * absent or null gives FALLBACK. */
static bool get_int(struct ctx *c, const struct jv *obj, const char *where, const char *key,
                    long min, long max, long fallback, long *out)
{
    const struct jv *v = jv_get(obj, key);
    *out = fallback;
    if (!v || v->type == JV_NULL) return true;
    if (v->type == JV_NUMBER && v->number >= (double)min && v->number <= (double)max &&
        v->number == (double)(long)v->number) {
        *out = (long)v->number;
        return true;
    }
    return invalid(c, "%s%s%s: expected an integer from %ld to %ld", where, *where ? "." : "", key,
                   min, max);
}

static bool get_bool(struct ctx *c, const struct jv *obj, const char *where, const char *key,
                     bool *out)
{
    const struct jv *v = jv_get(obj, key);
    *out = false;
    if (!v) return true;
    if (v->type == JV_BOOL) {
        *out = v->boolean;
        return true;
    }
    return invalid(c, "%s.%s: expected true or false", where, key);
}

/* Member KEY as a bounded string: a copy, NULL when absent (an error when REQUIRED). */
static bool get_string(struct ctx *c, const struct jv *obj, const char *where, const char *key,
                       bool required, char **out)
{
    const struct jv *v = jv_get(obj, key);
    *out = NULL;
    if (!v || (v->type == JV_NULL && !required))
        return required ? invalid(c, "%s: no \"%s\"", where, key) : true;
    if (v->type != JV_STRING) return invalid(c, "%s.%s: expected a string", where, key);
    if (strlen(v->string) > REPORT_NAME_MAX)
        return invalid(c, "%s.%s: longer than %d bytes", where, key, REPORT_NAME_MAX);
    if (!(*out = strdup(v->string))) return invalid(c, "out of memory");
    return true;
}

/* Member KEY as an array (absent: none), with its length. */
static bool get_array(struct ctx *c, const struct jv *obj, const char *where, const char *key,
                      const struct jv **out)
{
    const struct jv *v = jv_get(obj, key);
    *out = NULL;
    if (!v || (v->type == JV_NULL)) return true;
    if (v->type != JV_ARRAY)
        return invalid(c, "%s%s%s: expected an array", where, *where ? "." : "", key);
    *out = v;
    return true;
}

static bool expect_object(struct ctx *c, const struct jv *v, const char *where)
{
    return v->type == JV_OBJECT || invalid(c, "%s: expected an object", where);
}

/* Room for N elements of SIZE bytes (N may be 0). */
static void *alloc_array(struct ctx *c, size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) invalid(c, "out of memory");
    return p;
}

/* Object KEY of OBJ holding the N counters NAMES (absent or null: HAS false, all 0). */
static bool read_counters(struct ctx *c, const struct jv *obj, const char *where, const char *key,
                          const char *const *names, int n, bool *has, uint64_t *out)
{
    const struct jv *v = jv_get(obj, key);
    *has = false;
    memset(out, 0, (size_t)n * sizeof *out);
    if (!v || v->type == JV_NULL) return true;
    char here[64];
    snprintf(here, sizeof here, "%s.%s", where, key);
    if (!expect_object(c, v, here)) return false;
    for (int k = 0; k < n; k++)
        if (!get_uint(c, v, here, names[k], &out[k])) return false;
    *has = true;
    return true;
}

static bool read_um(struct ctx *c, const struct jv *obj, const char *where, bool *has,
                    uint64_t um[UM_COUNT])
{
    return read_counters(c, obj, where, "um", report_um_counters, UM_COUNT, has, um);
}

static bool read_step(struct ctx *c, const struct jv *doc, struct report_step *st)
{
    const struct jv *v = jv_get(doc, "step");
    if (!v || v->type == JV_NULL) return true;
    if (!expect_object(c, v, "step")) return false;
    st->present = true;
    return get_string(c, v, "step", "phase", false, &st->phase) && /* null: by repetition */
           get_uint(c, v, "step", "period_events", &st->period_events) &&
           get_uint(c, v, "step", "steps", &st->steps) &&
           get_uint(c, v, "step", "matched", &st->matched) &&
           get_uint(c, v, "step", "differed", &st->differed) &&
           get_uint(c, v, "step", "departures", &st->departures) &&
           get_uint(c, v, "step", "resyncs", &st->resyncs) &&
           get_uint(c, v, "step", "events_per_step", &st->events_per_step) &&
           get_string(c, v, "step", "fallback", false, &st->fallback);
}

static bool read_string_list(struct ctx *c, const struct jv *obj, const char *where,
                             const char *key, char ***out, size_t *count)
{
    const struct jv *a;
    if (!get_array(c, obj, where, key, &a) || !a) return !c->failed;
    if (!(*out = alloc_array(c, a->count, sizeof **out))) return false;
    for (size_t i = 0; i < a->count; i++) {
        const struct jv *s = &a->items[i];
        if (s->type != JV_STRING) return invalid(c, "%s.%s[%zu]: expected a string", where, key, i);
        if (strlen(s->string) > REPORT_NAME_MAX)
            return invalid(c, "%s.%s[%zu]: longer than %d bytes", where, key, i, REPORT_NAME_MAX);
        if (!((*out)[i] = strdup(s->string))) return invalid(c, "out of memory");
        (*count)++;
    }
    return true;
}

static bool read_policy(struct ctx *c, const struct jv *obj, const char *where,
                        struct report_policy *pol)
{
    const struct jv *v = jv_get(obj, "policy");
    if (!v || v->type == JV_NULL) return true;
    char here[64];
    snprintf(here, sizeof here, "%s.policy", where);
    if (!expect_object(c, v, here)) return false;
    pol->present = true;
    return get_string(c, v, here, "place", false, &pol->place) &&
           read_string_list(c, v, here, "access", &pol->access, &pol->access_count) &&
           read_string_list(c, v, here, "prefetch", &pol->prefetch, &pol->prefetch_count) &&
           get_bool(c, v, here, "read_mostly", &pol->read_mostly) &&
           get_uint(c, v, here, "priority", &pol->priority);
}

static bool read_classes(struct ctx *c, const struct jv *doc, struct report *r)
{
    const struct jv *a;
    if (!get_array(c, doc, "", "classes", &a) || !a) return !c->failed;
    if (!(r->classes = alloc_array(c, a->count, sizeof *r->classes))) return false;
    for (size_t i = 0; i < a->count; i++) {
        const struct jv *cj = &a->items[i];
        struct report_class *cls = &r->classes[i];
        r->class_count++;
        char where[48];
        snprintf(where, sizeof where, "classes[%zu]", i);
        if (!expect_object(c, cj, where) || !get_string(c, cj, where, "name", true, &cls->name))
            return false;
        /* One table both checks the name and maps it: a kind added to the
         * runtime needs one line here. Absent: managed (older reports). */
        static const char *const memory_names[] = {
            [REPORT_MEMORY_MANAGED] = "managed", [REPORT_MEMORY_DEVICE] = "device",
            [REPORT_MEMORY_HOST] = "host", [REPORT_MEMORY_MOVABLE] = "movable"};
        const struct jv *memory = jv_get(cj, "memory");
        cls->memory = REPORT_MEMORY_MANAGED;
        if (memory) {
            size_t k = 0, n = sizeof memory_names / sizeof *memory_names;
            while (k < n && (memory->type != JV_STRING || strcmp(memory->string, memory_names[k])))
                k++;
            if (k == n)
                return invalid(c, "%s.memory: expected \"managed\", \"device\", \"host\" or "
                               "\"movable\"", where);
            cls->memory = (enum report_memory)k;
        }
        for (int k = 0; k < RC_COUNT; k++)
            if (!get_uint(c, cj, where, report_class_counters[k], &cls->v[k])) return false;
        if (!read_um(c, cj, where, &cls->has_um, cls->um) ||
            !read_counters(c, cj, where, "next_use", report_next_use_counters, NU_COUNT,
                           &cls->has_next_use, cls->next_use) ||
            !read_counters(c, cj, where, "stream", report_stream_counters, ST_COUNT,
                           &cls->has_stream, cls->stream) ||
            !read_policy(c, cj, where, &cls->policy))
            return false;
        r->profiled |= cls->has_um;
    }
    return true;
}

static bool read_phases(struct ctx *c, const struct jv *doc, struct report *r)
{
    const struct jv *a;
    if (!get_array(c, doc, "", "phases", &a) || !a) return !c->failed;
    if (!(r->phases = alloc_array(c, a->count, sizeof *r->phases))) return false;
    for (size_t i = 0; i < a->count; i++) {
        const struct jv *pj = &a->items[i];
        struct report_phase *ph = &r->phases[i];
        r->phase_count++;
        char where[48];
        snprintf(where, sizeof where, "phases[%zu]", i);
        if (!expect_object(c, pj, where) || !get_string(c, pj, where, "name", true, &ph->name) ||
            !get_uint(c, pj, where, "entries", &ph->entries) ||
            !get_uint(c, pj, where, "total_ns", &ph->total_ns) ||
            !read_um(c, pj, where, &ph->has_um, ph->um))
            return false;
    }
    return true;
}

static bool read_devices(struct ctx *c, const struct jv *doc, struct report *r)
{
    const struct jv *a;
    if (!get_array(c, doc, "", "devices", &a) || !a) return !c->failed;
    if (!(r->devices = alloc_array(c, a->count, sizeof *r->devices))) return false;
    for (size_t i = 0; i < a->count; i++) {
        const struct jv *dj = &a->items[i];
        struct report_device *d = &r->devices[i];
        r->device_count++;
        char where[48];
        snprintf(where, sizeof where, "devices[%zu]", i);
        long device, numa;
        const struct jv *budget = jv_get(dj, "budget_bytes");
        if (!expect_object(c, dj, where) ||
            !get_int(c, dj, where, "device", 0, INT_MAX, 0, &device) ||
            !get_int(c, dj, where, "host_numa_id", -1, INT_MAX, -1, &numa) ||
            !get_uint(c, dj, where, "total_bytes", &d->total_bytes) ||
            !get_uint(c, dj, where, "cap_bytes", &d->cap_bytes) ||
            !get_uint(c, dj, where, "managed_bytes", &d->managed_bytes) ||
            !get_uint(c, dj, where, "resident_bytes", &d->resident_bytes) ||
            !get_uint(c, dj, where, "budget_bytes", &d->budget_bytes))
            return false;
        d->device = (int)device;
        d->host_numa_id = (int)numa;
        d->has_budget = budget && budget->type == JV_NUMBER;
        const struct jv *spare = jv_get(dj, "spare");
        if (spare && spare->type != JV_NULL) {
            snprintf(where, sizeof where, "devices[%zu].spare", i);
            if (!expect_object(c, spare, where) ||
                !get_uint(c, spare, where, "held_bytes", &d->spare_held) ||
                !get_uint(c, spare, where, "others_peak_bytes", &d->spare_others_peak) ||
                !get_uint(c, spare, where, "judged_by_peak_bytes", &d->spare_judged_by) ||
                !get_uint(c, spare, where, "room_bytes", &d->spare_room) ||
                !get_uint(c, spare, where, "misses", &d->spare_misses))
                return false;
            d->has_spare = true;
        }
        const struct jv *card = jv_get(dj, "card");
        if (card && card->type != JV_NULL) {
            snprintf(where, sizeof where, "devices[%zu].card", i);
            if (!expect_object(c, card, where) ||
                !get_uint(c, card, where, "base_used_bytes", &d->card_base_used) ||
                !get_uint(c, card, where, "peak_used_bytes", &d->card_peak_used) ||
                !get_uint(c, card, where, "resident_at_peak_bytes", &d->card_resident_at_peak) ||
                !get_uint(c, card, where, "samples", &d->card_samples) ||
                !get_uint(c, card, where, "outside_bytes", &d->card_outside) ||
                !get_bool(c, card, where, "budget_counts_card", &d->budget_counts_card))
                return false;
            d->has_card = true;
        }
    }
    return true;
}

static bool read_timeline(struct ctx *c, const struct jv *doc, struct report *r)
{
    const struct jv *tl = jv_get(doc, "timeline");
    if (!tl || tl->type == JV_NULL) return true;
    const struct jv *spans, *events;
    if (!expect_object(c, tl, "timeline") ||
        !get_uint(c, tl, "timeline", "spans_dropped", &r->spans_dropped) ||
        !get_uint(c, tl, "timeline", "events_dropped", &r->events_dropped) ||
        !get_array(c, tl, "timeline", "spans", &spans) ||
        !get_array(c, tl, "timeline", "events", &events))
        return false;
    if (spans) {
        if (!(r->spans = alloc_array(c, spans->count, sizeof *r->spans))) return false;
        for (size_t i = 0; i < spans->count; i++) {
            const struct jv *sj = &spans->items[i];
            struct report_span *s = &r->spans[i];
            char where[48];
            snprintf(where, sizeof where, "timeline.spans[%zu]", i);
            long phase, depth;
            const struct jv *end = jv_get(sj, "end_ns");
            if (!expect_object(c, sj, where) ||
                !get_int(c, sj, where, "phase", 0, INT_MAX, -1, &phase) ||
                !get_int(c, sj, where, "depth", 0, UINT32_MAX, 0, &depth) ||
                !get_uint(c, sj, where, "start_ns", &s->start_ns) ||
                !get_uint(c, sj, where, "end_ns", &s->end_ns))
                return false;
            if (phase < 0 || (size_t)phase >= r->phase_count)
                return invalid(c, "%s.phase: no phase %ld in this report (it has %zu)", where,
                               phase, r->phase_count);
            s->phase = (size_t)phase;
            s->depth = (uint32_t)depth;
            s->open = !end || end->type == JV_NULL;
            if (!s->open && s->end_ns < s->start_ns)
                return invalid(c, "%s: ends before it starts", where);
            r->span_count++;
        }
    }
    if (events) {
        if (!(r->events = alloc_array(c, events->count, sizeof *r->events))) return false;
        for (size_t i = 0; i < events->count; i++) {
            const struct jv *ej = &events->items[i];
            struct report_event *e = &r->events[i];
            char where[48];
            snprintf(where, sizeof where, "timeline.events[%zu]", i);
            long device;
            if (!expect_object(c, ej, where) ||
                !get_int(c, ej, where, "class", -1, INT_MAX, -1, &e->class_index) ||
                !get_int(c, ej, where, "device", 0, INT_MAX, 0, &device) ||
                !get_uint(c, ej, where, "t_ns", &e->t_ns) ||
                !get_uint(c, ej, where, "bytes", &e->bytes) ||
                !get_uint(c, ej, where, "resident_bytes", &e->resident_bytes))
                return false;
            if (e->class_index >= 0 && (size_t)e->class_index >= r->class_count)
                return invalid(c, "%s.class: no class %ld in this report (it has %zu)", where,
                               e->class_index, r->class_count);
            e->device = (int)device;
            const struct jv *kind = jv_get(ej, "kind");
            int k = 0;
            while (kind && kind->type == JV_STRING && k < EV_COUNT &&
                   strcmp(kind->string, report_event_kinds[k]) != 0)
                k++;
            if (!kind || kind->type != JV_STRING || k == EV_COUNT)
                return invalid(c,
                               "%s.kind: expected one of prefetch_gpu, prefetch_host, evict, "
                               "cap_refusal",
                               where);
            e->kind = (enum report_event_kind)k;
            r->event_count++;
        }
    }
    return true;
}

static bool read_sites(struct ctx *c, const struct jv *doc, struct report *r)
{
    const struct jv *a;
    if (!get_array(c, doc, "", "sites", &a) ||
        !get_uint(c, doc, "", "sites_dropped", &r->sites_dropped))
        return false;
    if (!a) return true;
    if (a->count > REPORT_SITES_MAX)
        return invalid(c, "sites: %zu sites (a report holds at most %d)", a->count,
                       REPORT_SITES_MAX);
    r->has_sites = true;
    if (!(r->sites = alloc_array(c, a->count, sizeof *r->sites))) return false;
    for (size_t i = 0; i < a->count; i++) {
        const struct jv *sj = &a->items[i];
        struct report_site *s = &r->sites[i];
        char where[48];
        snprintf(where, sizeof where, "sites[%zu]", i);
        long cls;
        if (!expect_object(c, sj, where) || !get_int(c, sj, where, "class", 0, INT_MAX, -1, &cls) ||
            !get_int(c, sj, where, "phase", 0, INT_MAX, -1, &s->phase) ||
            !get_uint(c, sj, where, "allocations", &s->allocations) ||
            !get_uint(c, sj, where, "frees", &s->frees) ||
            !get_uint(c, sj, where, "bytes", &s->bytes) ||
            !get_uint(c, sj, where, "min_size", &s->min_size) ||
            !get_uint(c, sj, where, "max_size", &s->max_size) ||
            !get_uint(c, sj, where, "peak_live_bytes", &s->peak_live_bytes) ||
            !get_uint(c, sj, where, "lifetime_ns", &s->lifetime_ns) ||
            !get_uint(c, sj, where, "first_ns", &s->first_ns) ||
            !get_uint(c, sj, where, "last_ns", &s->last_ns))
            return false;
        if (cls < 0 || (size_t)cls >= r->class_count)
            return invalid(c, "%s.class: no class %ld in this report (it has %zu)", where, cls,
                           r->class_count);
        if (s->phase >= 0 && (size_t)s->phase >= r->phase_count)
            return invalid(c, "%s.phase: no phase %ld in this report (it has %zu)", where, s->phase,
                           r->phase_count);
        s->class_index = (size_t)cls;
        if (s->allocations == 0 || s->frees > s->allocations)
            return invalid(c, "%s: %" PRIu64 " frees of %" PRIu64 " allocations", where, s->frees,
                           s->allocations);
        if (s->min_size == 0 || s->min_size > s->max_size)
            return invalid(c, "%s: sizes from %" PRIu64 " to %" PRIu64 " bytes", where, s->min_size,
                           s->max_size);
        if (s->first_ns > s->last_ns)
            return invalid(c, "%s: last allocated before its first allocation", where);
        /* Optional: reports of sites without tags, and older ones, have none. */
        if (!get_string(c, sj, where, "tag", false, &s->tag)) return false;
        r->site_count++;
    }
    return true;
}

static bool read_report(struct ctx *c, const struct jv *doc, struct report *r)
{
    const struct jv *version = jv_get(doc, "umpol_report");
    if (doc->type != JV_OBJECT || !version)
        return invalid(c, "not an umpol report (no \"umpol_report\" member)");
    if (version->type != JV_NUMBER || !version->is_uint)
        return invalid(c, "umpol_report: expected a version number");
    if (version->uint != REPORT_VERSION)
        return invalid(c, "unsupported report version %llu (this umpol reads %d)",
                       (unsigned long long)version->uint, REPORT_VERSION);
    r->version = REPORT_VERSION;
    const struct jv *totals = jv_get(doc, "totals");
    if (totals && !expect_object(c, totals, "totals")) return false;
    for (int k = 0; k < TOT_COUNT; k++)
        if (!get_uint(c, totals, "totals", report_totals[k], &r->totals[k])) return false;
    return get_int(c, doc, "", "pid", 0, INT_MAX, 0, &r->pid) &&
           get_int(c, doc, "", "rank", 0, INT_MAX, -1, &r->rank) && read_devices(c, doc, r) &&
           read_classes(c, doc, r) && read_step(c, doc, &r->step) && read_phases(c, doc, r) &&
           read_sites(c, doc, r) && read_timeline(c, doc, r);
}

enum report_status report_parse(struct report *r, const char *text, size_t len, char *why,
                                size_t why_len)
{
    memset(r, 0, sizeof *r);
    const char *error;
    size_t offset;
    struct jv *doc = jv_parse(text, len, &error, &offset);
    if (!doc) {
        snprintf(why, why_len, "invalid JSON: %s at byte %zu", error, offset);
        return REPORT_INVALID;
    }
    struct ctx c = {why, why_len, false};
    bool ok = read_report(&c, doc, r);
    jv_free(doc);
    if (!ok) {
        report_free(r);
        return REPORT_INVALID;
    }
    return REPORT_OK;
}

/* The whole of PATH, a regular file of at most REPORT_FILE_MAX bytes. */
static char *read_regular_file(const char *path, size_t *len, char *why, size_t why_len)
{
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; fstat then refuses it. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        snprintf(why, why_len, "cannot open: %s", strerror(errno));
        return NULL;
    }
    struct stat st;
    char *buf = NULL;
    if (fstat(fd, &st) != 0) {
        snprintf(why, why_len, "cannot read: %s", strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
        snprintf(why, why_len, "not a regular file (%s)",
                 S_ISDIR(st.st_mode)                          ? "a directory"
                 : S_ISFIFO(st.st_mode)                       ? "a FIFO"
                 : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                                                              : "a socket or other special file");
    } else if ((uint64_t)st.st_size > REPORT_FILE_MAX) {
        snprintf(why, why_len, "too large: %lld bytes (reports are read up to %zu MiB)",
                 (long long)st.st_size, REPORT_FILE_MAX >> 20);
    } else if ((buf = malloc((size_t)st.st_size + 1))) {
        /* The file may grow while read: never read past the size checked. */
        size_t n = 0, want = (size_t)st.st_size;
        while (n < want) {
            ssize_t got = read(fd, buf + n, want - n);
            if (got < 0 && errno == EINTR) continue;
            if (got < 0) {
                snprintf(why, why_len, "cannot read: %s", strerror(errno));
                free(buf);
                buf = NULL;
                break;
            }
            if (got == 0) break;
            n += (size_t)got;
        }
        if (buf) {
            buf[n] = '\0';
            *len = n;
        }
    } else {
        snprintf(why, why_len, "out of memory");
    }
    close(fd);
    return buf;
}

enum report_status report_load(struct report *r, const char *path, char *why, size_t why_len)
{
    memset(r, 0, sizeof *r);
    char reason[256];
    size_t len = 0;
    char *text = read_regular_file(path, &len, reason, sizeof reason);
    if (!text) {
        snprintf(why, why_len, "%s: %s", path, reason);
        return REPORT_IO;
    }
    enum report_status st = report_parse(r, text, len, reason, sizeof reason);
    free(text);
    if (st != REPORT_OK) snprintf(why, why_len, "%s: %s", path, reason);
    return st;
}

static void free_list(char **list, size_t count)
{
    for (size_t i = 0; i < count; i++)
        free(list[i]);
    free(list);
}

void report_free(struct report *r)
{
    for (size_t i = 0; i < r->class_count; i++) {
        struct report_class *cls = &r->classes[i];
        free(cls->name);
        free(cls->policy.place);
        free_list(cls->policy.access, cls->policy.access_count);
        free_list(cls->policy.prefetch, cls->policy.prefetch_count);
    }
    for (size_t i = 0; i < r->phase_count; i++)
        free(r->phases[i].name);
    free(r->step.phase);
    free(r->step.fallback);
    free(r->classes);
    free(r->phases);
    free(r->devices);
    free(r->spans);
    free(r->events);
    for (size_t i = 0; i < r->site_count; i++)
        free(r->sites[i].tag);
    free(r->sites);
    memset(r, 0, sizeof *r);
}
