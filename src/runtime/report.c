/* The JSON report written at exit (UMPOL_REPORT): written whole or not at all
 * (util/outfile.h), so a reader never sees half a report. Schema in
 * umpol(7) and report/report.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lang/json.h"
#include "report/report.h"
#include "runtime/placement.h"
#include "runtime/profile.h"
#include "runtime/report.h"
#include "runtime/state.h"
#include "util/clock.h"
#include "util/env.h"
#include "util/outfile.h"

/* This process's rank as its launcher set it (torchrun, Slurm, Open MPI), or NULL. */
static const char *rank_of_process(void)
{
    static const char *const vars[] = {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "LOCAL_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *rank = runtime_env(vars[i]);
        /* Digits only, and few enough for an int: the report stays readable. */
        size_t len = rank ? strlen(rank) : 0;
        if (len > 0 && len <= 9 && strspn(rank, "0123456789") == len)
            return rank;
    }
    return NULL;
}

void report_expand_path(const char *pattern, char *out, size_t len)
{
    const char *rank = rank_of_process();
    if (!rank)
        rank = "0";
    size_t o = 0;
    for (const char *p = pattern; *p && o + 1 < len; p++) {
        if (p[0] == '%' && (p[1] == 'p' || p[1] == 'r')) {
            int n = p[1] == 'p' ? snprintf(out + o, len - o, "%ld", (long)getpid())
                                : snprintf(out + o, len - o, "%s", rank);
            o += n > 0 ? (size_t)n : 0;
            p++;
        } else {
            out[o++] = *p;
        }
    }
    out[o < len ? o : len - 1] = '\0';
}

/* The class's directives, so that `umpol report` can say what to change. */
static void write_policy(FILE *f, const struct program *p, const struct program_class *cls)
{
    static const char *const triggers[] = {"alloc", "enter", "exit", "mark"};
    char buf[64];
    fputs(", \"policy\": {\"place\": ", f);
    json_print_string(f, program_place_str(cls->place, buf, sizeof buf));
    fputs(", \"access\": [", f);
    for (int a = 0; a < cls->access_count; a++) {
        if (a)
            fputs(", ", f);
        json_print_string(f, program_place_str(cls->access[a], buf, sizeof buf));
    }
    fputs("], \"prefetch\": [", f);
    for (uint32_t k = 0; k < cls->prefetch_count; k++) {
        const struct program_prefetch *pf = &p->prefetches[cls->prefetch_first + k];
        const char *pattern = pf->trigger == TRIGGER_MARK    ? p->marks[pf->pattern]
                              : pf->trigger == TRIGGER_ALLOC ? NULL
                                                             : p->phase_globs[pf->pattern];
        char text[512];
        snprintf(text, sizeof text, "%s on %s%s%s%s", program_place_str(pf->dest, buf, sizeof buf),
                 triggers[pf->trigger], pattern ? " \"" : "", pattern ? pattern : "",
                 pattern ? "\"" : "");
        if (k)
            fputs(", ", f);
        json_print_string_max(f, text, REPORT_NAME_MAX);
    }
    fprintf(f, "], \"read_mostly\": %s, \"priority\": %u}", cls->read_mostly ? "true" : "false",
            cls->priority);
}

static void write_class(FILE *f, const struct runtime *rt, size_t c)
{
    const struct class_stats *s = &rt->class_stats[c];
    const struct program_class *cls = &rt->program->classes[c];
    fputs("    {\"name\": ", f);
    json_print_string_max(f, cls->name, REPORT_NAME_MAX);
    fprintf(f,
            ", \"memory\": \"%s\", \"allocations\": %" PRIu64 ", \"frees\": %" PRIu64
            ", \"bytes_requested\": %" PRIu64 ", \"live_bytes\": %" PRIu64
            ", \"peak_bytes\": %" PRIu64 ", \"slabs\": %" PRIu64 ", \"slab_bytes\": %" PRIu64
            ", \"prefetches\": %" PRIu64 ", \"prefetch_bytes\": %" PRIu64
            ", \"evictions\": %" PRIu64 ", \"evict_bytes\": %" PRIu64
            ", \"cap_refusals\": %" PRIu64 ", \"budget_skips\": %" PRIu64
            ", \"advice_errors\": %" PRIu64 ", \"cross_stream_reuses\": %" PRIu64
            ", \"discards\": %" PRIu64 ", \"discard_bytes\": %" PRIu64
            ", \"reclaims\": %" PRIu64 ", \"reclaim_bytes\": %" PRIu64
            ", \"reclassified\": %" PRIu64 ", \"slab_peak_bytes\": %" PRIu64
            ", \"slab_releases\": %" PRIu64,
            memory_kind_name(cls->memory), s->allocations, s->frees,
            s->bytes_requested, s->live_bytes, s->peak_bytes, s->slabs, s->slab_bytes,
            s->prefetches, s->prefetch_bytes, s->evictions, s->evict_bytes, s->cap_refusals,
            s->budget_skips, s->advice_errors, s->cross_stream_reuses, s->discards, s->discard_bytes,
            s->reclaims, s->reclaim_bytes, s->reclassified, s->slab_peak_bytes,
            s->slab_releases);
    if (cls->memory == MEMORY_MOVABLE) /* moved whole by the copy engines */
        fprintf(f,
                ", \"movable\": {\"to_gpu_bytes\": %" PRIu64 ", \"to_host_bytes\": %" PRIu64
                ", \"move_ns\": %" PRIu64 ", \"budget_left_on_host_bytes\": %" PRIu64
                ", \"skipped_in_capture\": %" PRIu64 "}",
                s->movable_to_gpu_bytes, s->movable_to_host_bytes, s->movable_move_ns,
                s->movable_budget_left, s->movable_capture_skips);
    if (cls->stream_written >= 0) /* streamed ahead of the uses the job announced */
        fprintf(f,
                ", \"stream\": {\"uses\": %" PRIu64 ", \"ready_bytes\": %" PRIu64
                ", \"late_bytes\": %" PRIu64 ", \"fetched_bytes\": %" PRIu64
                ", \"dropped_bytes\": %" PRIu64 ", \"saved_bytes\": %" PRIu64
                ", \"unlearned_uses\": %" PRIu64 "}",
                s->stream_uses, s->stream_ready_bytes, s->stream_late_bytes,
                s->stream_fetch_bytes, s->stream_drop_bytes, s->stream_save_bytes,
                s->stream_unlearned);
    if (rt->learn) /* predicted uses against the actual ones, and how bytes reached the GPU */
        fprintf(f,
                ", \"next_use\": {\"predictions\": %" PRIu64 ", \"hits\": %" PRIu64
                ", \"error_events\": %" PRIu64 ", \"ahead_bytes\": %" PRIu64
                ", \"demand_bytes\": %" PRIu64 "}",
                s->next_use_predictions, s->next_use_hits, s->next_use_error, s->ahead_bytes,
                s->demand_bytes);
    if (rt->learn && cls->memory == MEMORY_DEVICE) /* blocks where the step's plan put them */
        fprintf(f,
                ", \"plan\": {\"bytes\": %" PRIu64 ", \"made\": %" PRIu64
                ", \"planned_allocations\": %" PRIu64 ", \"misses\": %" PRIu64
                ", \"refits\": %" PRIu64 ", \"given_up\": %s, \"refused_blocks\": %" PRIu64 "}",
                s->plan_bytes, s->plans_made, s->planned_allocations, s->plan_misses,
                s->plan_refits, s->plan_given_up ? "true" : "false", s->plan_refused_blocks);
    if (rt->profile) {
        fputs(", \"um\": ", f);
        profile_print_um(f, &s->um);
    }
    write_policy(f, rt->program, cls);
    fputc('}', f);
}

/* What the job allocated, by class, phase and size (sites.h), for `umpol suggest`. */
static void write_sites(FILE *f, const struct sites *s)
{
    fprintf(f, ",\n  \"sites_dropped\": %zu,\n  \"sites\": [", s ? s->dropped : 0);
    for (size_t i = 0; s && i < s->count; i++) {
        const struct site *t = &s->table[i];
        fprintf(f, "%s\n    {\"class\": %d, \"phase\": ", i ? "," : "", t->class_idx);
        if (t->phase >= 0)
            fprintf(f, "%d", t->phase);
        else
            fputs("null", f);
        fprintf(f,
                ", \"allocations\": %" PRIu64 ", \"frees\": %" PRIu64 ", \"bytes\": %" PRIu64
                ", \"min_size\": %" PRIu64 ", \"max_size\": %" PRIu64
                ", \"peak_live_bytes\": %" PRIu64 ", \"lifetime_ns\": %" PRIu64
                ", \"first_ns\": %" PRIu64 ", \"last_ns\": %" PRIu64,
                t->allocations, t->frees, t->bytes, t->min_size, t->max_size, t->peak_live_bytes,
                t->lifetime_ns, t->first_ns, t->last_ns);
        if (t->tag >= 0) { /* the tag's member only when one was pushed: older readers skip it */
            fputs(", \"tag\": ", f);
            json_print_string_max(f, s->tags[t->tag], REPORT_NAME_MAX);
        }
        fputc('}', f);
    }
    fputs(s && s->count ? "\n  ]" : "]", f);
}

/* Phase spans and placement events, times in ns since the first of them. */
static void write_timeline(FILE *f, const struct runtime *rt)
{
    static const char *const kinds[] = {"prefetch_gpu", "prefetch_host", "evict", "cap_refusal"};
    uint64_t t0 = UINT64_MAX;
    if (rt->span_count)
        t0 = rt->spans[0].start_ns;
    if (rt->timeline_count && rt->timeline[0].t_ns < t0)
        t0 = rt->timeline[0].t_ns;
    if (t0 == UINT64_MAX)
        t0 = 0;
    fprintf(f, ",\n  \"timeline\": {\"origin_ns\": %" PRIu64 ", \"spans_dropped\": %zu"
               ", \"events_dropped\": %zu,\n    \"spans\": [",
            t0, rt->spans_dropped, rt->timeline_dropped);
    for (size_t i = 0; i < rt->span_count; i++) {
        const struct phase_span *s = &rt->spans[i];
        fprintf(f, "%s\n      {\"phase\": %u, \"start_ns\": %" PRIu64 ", \"end_ns\": ",
                i ? "," : "", s->phase, s->start_ns - t0);
        if (s->end_ns)
            fprintf(f, "%" PRIu64, s->end_ns - t0);
        else
            fputs("null", f);
        fprintf(f, ", \"depth\": %u}", s->depth);
    }
    fputs("],\n    \"events\": [", f);
    for (size_t i = 0; i < rt->timeline_count; i++) {
        const struct timeline_event *e = &rt->timeline[i];
        fprintf(f,
                "%s\n      {\"t_ns\": %" PRIu64 ", \"kind\": \"%s\", \"class\": %d"
                ", \"device\": %d, \"bytes\": %" PRIu64 ", \"resident_bytes\": %" PRIu64 "}",
                i ? "," : "", e->t_ns - t0, kinds[e->kind], e->class_idx, e->device, e->bytes,
                e->resident_bytes);
    }
    fputs("]}", f);
}

int report_write_trace(const struct runtime *rt, const char *path)
{
    size_t n = rt->program->class_count;
    const char **names = calloc(n ? n : 1, sizeof *names), **memory = calloc(n ? n : 1, sizeof *memory);
    if (!names || !memory) {
        free(names);
        free(memory);
        return -ENOMEM;
    }
    for (size_t c = 0; c < n; c++) {
        names[c] = rt->program->classes[c].name;
        memory[c] = memory_kind_name(rt->program->classes[c].memory);
    }
    struct outfile out;
    int rc = outfile_open(&out, path);
    if (rc == 0) {
        trace_write(rt->trace, out.f, names, memory, n, rt->program->slab_bytes);
        rc = outfile_close(&out, path);
    }
    free(names);
    free(memory);
    return rc;
}

int report_write(const struct runtime *rt, const char *path)
{
    struct outfile out;
    int rc = outfile_open(&out, path);
    if (rc != 0)
        return rc;
    FILE *f = out.f;
    const char *rank = rank_of_process();
    fprintf(f, "{\n  \"umpol_report\": %d,\n  \"pid\": %ld,\n  \"rank\": %s,\n", REPORT_VERSION,
            (long)getpid(), rank ? rank : "null");
    fprintf(f,
            "  \"totals\": {\"allocations\": %" PRIu64 ", \"frees\": %" PRIu64
            ", \"passthrough\": %" PRIu64 ", \"jobs_managed_allocations\": %" PRIu64
            ", \"runtime_ns\": %" PRIu64 ", \"place_ns\": %" PRIu64 ", \"reclaim_ns\": %" PRIu64
            ", \"evict_ns\": %" PRIu64 ", \"held_ns\": %" PRIu64 ", \"slab_grow_ns\": %" PRIu64
            ", \"slab_release_ns\": %" PRIu64 ", \"remap_wait_ns\": %" PRIu64 "},\n",
            rt->allocations, rt->frees, rt->passthrough, rt->foreign_managed, rt->runtime_ns,
            rt->place_ns, rt->reclaim_ns, rt->evict_ns, atomic_load(&rt->held_ns),
            rt->slab_grow_ns, rt->slab_release_ns, rt->remap_wait_ns);
    if (rt->learn) {
        const struct step_model *m = &rt->step;
        const char *not_found = rt->program->step_by_repetition ? step_find_said(&rt->finder)
                                                                : NULL;
        const char *fallback = not_found         ? not_found
                               : m->steps < 2    ? "fewer than two steps: nothing was predicted"
                               : m->departures ? "steps that departed from the one before were "
                                                 "placed by the static rules from there on"
                                               : NULL;
        fputs("  \"step\": {\"phase\": ", f);
        if (rt->program->step_glob >= 0)
            json_print_string(f, rt->program->phase_globs[rt->program->step_glob]);
        else /* found by repetition: the events a step took when it was found */
            fprintf(f, "null, \"period_events\": %zu", rt->finder.period);
        fprintf(f,
                ", \"steps\": %" PRIu64 ", \"matched\": %" PRIu64 ", \"differed\": %" PRIu64
                ", \"departures\": %" PRIu64 ", \"resyncs\": %" PRIu64
                ", \"events_per_step\": %zu, \"fallback\": ",
                m->steps, m->matched, m->differed, m->departures, m->resyncs, m->ref.len);
        if (fallback)
            json_print_string(f, fallback);
        else
            fputs("null", f);
        fputs("},\n", f);
    }
    fputs("  \"devices\": [", f);
    bool first = true;
    for (int d = 0; d < RT_MAX_DEVICES; d++) {
        const struct device_state *dev = &rt->devices[d];
        if (!dev->known)
            continue;
        char budget[32] = "null";
        if (dev->budget_set != UINT64_MAX)
            snprintf(budget, sizeof budget, "%" PRIu64, dev->budget_set);
        fprintf(f,
                "%s\n    {\"device\": %d, \"total_bytes\": %" PRIu64 ", \"budget_bytes\": %s"
                ", \"cap_bytes\": %" PRIu64 ", \"managed_bytes\": %" PRIu64
                ", \"resident_bytes\": %" PRIu64 ", \"resident_peak_bytes\": %" PRIu64
                ", \"host_numa_id\": %d",
                first ? "" : ",", d, dev->total_bytes, budget, dev->cap_bytes, dev->managed_bytes,
                dev->resident_bytes, dev->resident_peak, dev->host_numa_id);
        if (rt->program->uses_spare)
            fprintf(f,
                    ", \"spare\": {\"held_bytes\": %" PRIu64 ", \"others_peak_bytes\": %" PRIu64
                    ", \"judged_by_peak_bytes\": %" PRIu64 ", \"room_bytes\": %" PRIu64
                    ", \"misses\": %" PRIu64 "}",
                    dev->spare_held, dev->others_peak, dev->spare_judged_by,
                    place_spare_room(rt, d), rt->spare_misses);
        fprintf(f,
                ", \"card\": {\"base_used_bytes\": %" PRIu64 ", \"peak_used_bytes\": %" PRIu64
                ", \"resident_at_peak_bytes\": %" PRIu64 ", \"samples\": %" PRIu64
                ", \"outside_bytes\": %" PRIu64 ", \"budget_counts_card\": %s}",
                dev->card_base_used, dev->card_peak_used, dev->card_resident_at_peak,
                dev->card_samples, dev->card_outside,
                rt->program->budget_counts_card ? "true" : "false");
        fputc('}', f);
        first = false;
    }
    fputs("\n  ],\n  \"classes\": [\n", f);
    for (size_t c = 0; c < rt->program->class_count; c++) {
        write_class(f, rt, c);
        fputs(c + 1 < rt->program->class_count ? ",\n" : "\n", f);
    }
    fputs("  ],\n  \"phases\": [", f);
    for (size_t i = 0; i < rt->phase_stat_count; i++) {
        const struct phase_stat *ps = &rt->phase_stats[i];
        fputs(i ? ",\n    {\"name\": " : "\n    {\"name\": ", f);
        json_print_string_max(f, ps->name, REPORT_NAME_MAX);
        fprintf(f, ", \"entries\": %" PRIu64 ", \"total_ns\": %" PRIu64, ps->entries,
                ps->total_ns);
        if (rt->profile) {
            fputs(", \"um\": ", f);
            profile_print_um(f, &ps->um);
        }
        fputc('}', f);
    }
    fputs("\n  ],\n  \"profile\": ", f);
    profile_report(rt, f);
    write_sites(f, rt->sites);
    write_timeline(f, rt);
    fputs("\n}\n", f);
    return outfile_close(&out, path);
}
