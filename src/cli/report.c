/* `umpol report`: read one or more runtime reports (one per rank), sum them,
 * and show what a tuner needs first; or write them merged as JSON, or as a
 * Chrome/Perfetto trace. Reports are read through report/report.h. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "lang/json.h"
#include "lang/text.h"
#include "report/report.h"

/* Counters summed per class and per phase, as doubles: sums of many reports
 * may pass 2^64. */
static const enum report_class_counter summed[] = {
    RC_ALLOCATIONS,  RC_FREES,        RC_BYTES_REQUESTED, RC_PEAK_BYTES,   RC_SLABS,
    RC_SLAB_BYTES,   RC_PREFETCHES,   RC_PREFETCH_BYTES,  RC_EVICTIONS,    RC_EVICT_BYTES,
    RC_CAP_REFUSALS, RC_BUDGET_SKIPS, RC_ADVICE_ERRORS,   RC_DISCARD_BYTES, RC_SLAB_PEAK_BYTES,
    RC_SLAB_RELEASES};
enum { NSUM = sizeof summed / sizeof summed[0] };

struct row {
    const char *name; /* owned by the report it first appears in */
    char *shown;      /* the name with control characters escaped, for the terminal */
    double v[RC_COUNT];
    double um[UM_COUNT];
    double entries, total_ns;           /* phases */
    const struct report_policy *policy; /* from the first report that has the class */
    enum report_memory memory;          /* classes: from the first report that has the class */
};

/* Rows by name: an open-addressing table of row indices, so that reading N
 * classes costs O(N), not O(N^2). */
struct rows {
    struct row *items;
    size_t count, cap;
    size_t *slots; /* row index + 1, 0 when empty */
    size_t nslots;
};

struct summary {
    struct report *reports;
    char **paths_shown;
    const char **paths;
    size_t n;
    struct rows classes, phases;
    size_t **class_row; /* per report, per class: its row in classes */
    bool profiled;
};

static uint64_t hash_name(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static bool rows_rehash(struct rows *t, size_t nslots)
{
    size_t *slots = calloc(nslots, sizeof *slots);
    if (!slots) return false;
    for (size_t i = 0; i < t->count; i++) {
        size_t s = hash_name(t->items[i].name) & (nslots - 1);
        while (slots[s])
            s = (s + 1) & (nslots - 1);
        slots[s] = i + 1;
    }
    free(t->slots);
    t->slots = slots;
    t->nslots = nslots;
    return true;
}

/* The row of NAME, added when new; SIZE_MAX when out of memory. */
static size_t find_row(struct rows *t, const char *name)
{
    if ((t->count + 1) * 2 > t->nslots && !rows_rehash(t, t->nslots ? t->nslots * 2 : 64))
        return SIZE_MAX;
    size_t s = hash_name(name) & (t->nslots - 1);
    for (; t->slots[s]; s = (s + 1) & (t->nslots - 1))
        if (strcmp(t->items[t->slots[s] - 1].name, name) == 0) return t->slots[s] - 1;
    if (t->count == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        struct row *grown = realloc(t->items, cap * sizeof *grown);
        if (!grown) return SIZE_MAX;
        t->items = grown;
        t->cap = cap;
    }
    struct row *r = &t->items[t->count];
    memset(r, 0, sizeof *r);
    r->name = name;
    if (!(r->shown = text_visible(name))) return SIZE_MAX;
    t->slots[s] = ++t->count;
    return t->count - 1;
}

static void rows_free(struct rows *t)
{
    for (size_t i = 0; i < t->count; i++)
        free(t->items[i].shown);
    free(t->items);
    free(t->slots);
}

static void add_um(double *dst, const uint64_t *um)
{
    for (int k = 0; k < UM_COUNT; k++)
        dst[k] += (double)um[k];
}

static int load(struct summary *s, int argc, char **argv)
{
    s->n = (size_t)argc;
    s->paths = (const char **)argv;
    s->reports = calloc(s->n, sizeof *s->reports);
    s->paths_shown = calloc(s->n, sizeof *s->paths_shown);
    s->class_row = calloc(s->n, sizeof *s->class_row);
    if (!s->reports || !s->paths_shown || !s->class_row) goto oom;
    for (size_t i = 0; i < s->n; i++) {
        char why[512];
        enum report_status st = report_load(&s->reports[i], argv[i], why, sizeof why);
        if (st != REPORT_OK) {
            fputs("umpol report: ", stderr);
            text_print_visible(stderr, why);
            fputc('\n', stderr);
            return st == REPORT_IO ? EXIT_USAGE : EXIT_INVALID;
        }
        const struct report *r = &s->reports[i];
        if (!(s->paths_shown[i] = text_visible(argv[i])) ||
            !(s->class_row[i] = calloc(r->class_count + 1, sizeof *s->class_row[i])))
            goto oom;
        for (size_t c = 0; c < r->class_count; c++) {
            const struct report_class *cls = &r->classes[c];
            size_t k = find_row(&s->classes, cls->name);
            if (k == SIZE_MAX) goto oom;
            s->class_row[i][c] = k;
            struct row *row = &s->classes.items[k];
            for (int f = 0; f < RC_COUNT; f++)
                row->v[f] += (double)cls->v[f];
            if (cls->has_um) {
                add_um(row->um, cls->um);
                s->profiled = true;
            }
            if (!row->policy && cls->policy.present) {
                row->policy = &cls->policy;
                row->memory = cls->memory;
            }
        }
        for (size_t p = 0; p < r->phase_count; p++) {
            const struct report_phase *ph = &r->phases[p];
            size_t k = find_row(&s->phases, ph->name);
            if (k == SIZE_MAX) goto oom;
            struct row *row = &s->phases.items[k];
            row->entries += (double)ph->entries;
            row->total_ns += (double)ph->total_ns;
            add_um(row->um, ph->um);
        }
    }
    return EXIT_VALID;
oom:
    fputs("umpol report: out of memory\n", stderr);
    return EXIT_USAGE;
}

static void free_summary(struct summary *s)
{
    for (size_t i = 0; s->reports && i < s->n; i++)
        report_free(&s->reports[i]);
    for (size_t i = 0; s->paths_shown && i < s->n; i++)
        free(s->paths_shown[i]);
    for (size_t i = 0; s->class_row && i < s->n; i++)
        free(s->class_row[i]);
    free(s->reports);
    free(s->paths_shown);
    free(s->class_row);
    rows_free(&s->classes);
    rows_free(&s->phases);
}

/* What a row costs the job: bytes moved by faults or by the runtime, faults weighted by a 64 KiB
 * page. */
static double class_cost(const struct row *r)
{
    return r->um[UM_HTOD_BYTES] + r->um[UM_DTOH_BYTES] + r->um[UM_GPU_FAULTS] * 65536.0 +
           r->v[RC_PREFETCH_BYTES] + r->v[RC_EVICT_BYTES];
}

static int by_cost(const void *a, const void *b)
{
    double x = class_cost(a), y = class_cost(b);
    return (x < y) - (x > y);
}

static int by_time(const void *a, const void *b)
{
    double x = ((const struct row *)a)->total_ns, y = ((const struct row *)b)->total_ns;
    return (x < y) - (x > y);
}

static const char *human(double bytes, char *buf, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (u < 4 && fabs(bytes) >= 1024) {
        bytes /= 1024;
        u++;
    }
    snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", bytes, units[u]);
    return buf;
}

static bool policy_prefetches_gpu(const struct report_policy *policy)
{
    for (size_t i = 0; policy && i < policy->prefetch_count; i++)
        if (strncmp(policy->prefetch[i], "gpu", 3) == 0) return true;
    return false;
}

static bool policy_places_host(const struct report_policy *policy)
{
    return policy && policy->place && strncmp(policy->place, "host", 4) == 0;
}

/* Freed space taken back for another class costs a move off the GPU and,
 * for the next block of the class, one back: a class keeps its own free
 * space. Worth a word from 1 GiB, once it exceeds what the class ever held. */
static bool gives_back_much(const struct row *r)
{
    return r->v[RC_RECLAIM_BYTES] >= (double)(1u << 30) && r->v[RC_RECLAIM_BYTES] > r->v[RC_PEAK_BYTES];
}

/* The most slab bytes the class held at once (reports before
 * slab_peak_bytes: those it held at the end). */
static double slab_peak(const struct row *r)
{
    return r->v[RC_SLAB_PEAK_BYTES] > r->v[RC_SLAB_BYTES] ? r->v[RC_SLAB_PEAK_BYTES]
                                                          : r->v[RC_SLAB_BYTES];
}

/* Slabs beyond the class's live peak are free space its pools kept and could
 * not reuse for the sizes that came: the card holds them all the same. Worth
 * a word from 512 MiB and 15% of its slabs, on the GPU's side only. */
static bool holds_much_free(const struct row *r)
{
    double spare = slab_peak(r) - r->v[RC_PEAK_BYTES];
    return r->memory != REPORT_MEMORY_HOST && spare >= (double)(512u << 20) &&
           spare >= 0.15 * slab_peak(r);
}

/* The card held well beyond the budget (the stated 1 GiB covers what umpol
 * does not place: the job's cuBLAS workspaces, communication buffers, the
 * context's growth): say how much, and what usually holds it. */
static int card_hints(const struct summary *s)
{
    int hints = 0;
    const uint64_t slack = 1ull << 30;
    for (size_t k = 0; k < s->n; k++) {
        for (size_t i = 0; i < s->reports[k].device_count; i++) {
            const struct report_device *d = &s->reports[k].devices[i];
            if (!d->has_card || !d->has_budget || d->card_peak_used < d->card_base_used)
                continue;
            uint64_t seen = d->card_peak_used - d->card_base_used;
            if (seen <= d->budget_bytes + slack)
                continue;
            char b[5][32];
            const char *rank = s->n > 1 ? s->paths_shown[k] : "";
            printf("  - %s%sGPU %d: the card held up to %s more than when umpol started, %s beyond ",
                   rank, *rank ? ": " : "", d->device, human(seen, b[0], sizeof b[0]),
                   human(seen - d->budget_bytes, b[1], sizeof b[1]));
            human(d->budget_bytes, b[2], sizeof b[2]);
            human(d->card_resident_at_peak, b[3], sizeof b[3]);
            if (d->budget_counts_card)
                printf("'budget card %s'. umpol held itself to the budget less the %s it learned "
                       "outside its count (%s counted at that peak); the rest grew between "
                       "readings of the card, or is the GPU memory the driver keeps for managed "
                       "pages that left it: classes of 'memory device', 'movable' or 'host' keep "
                       "the card to what umpol counts (umpol(5)).\n",
                       b[2], human(d->card_outside, b[4], sizeof b[4]), b[3]);
            else
                printf("the budget of %s (umpol counted %s then). The driver keeps the GPU memory "
                       "of managed pages that left the GPU, and memory outside the policy is not "
                       "counted: state that lives on the host belongs in 'memory host', or in "
                       "'memory movable' where it moves whole (umpol(5)).\n",
                       b[2], b[3]);
            hints++;
        }
    }
    return hints;
}

/* `spare` judged the room beside the job's peak by the peak it had seen;
 * where the job later held more, the budget ran short by the overlap (and
 * took back freed space to make room); where the card refused a block the
 * budget had room for, something outside the budget holds the card. */
static int spare_hints(const struct summary *s)
{
    int hints = 0;
    for (size_t k = 0; k < s->n; k++) {
        for (size_t i = 0; i < s->reports[k].device_count; i++) {
            const struct report_device *d = &s->reports[k].devices[i];
            char b[4][32];
            if (!d->has_spare)
                continue;
            const char *rank = s->n > 1 ? s->paths_shown[k] : "";
            uint64_t limit = d->has_budget ? d->budget_bytes : d->total_bytes;
            uint64_t need = d->spare_others_peak + d->spare_held;
            if (d->spare_held && d->spare_others_peak > d->spare_judged_by && need > limit) {
                printf("  - %s%sGPU %d: 'spare' classes hold %s, judged beside a peak of %s; "
                       "the job later held %s without them, %s more than %s. The "
                       "budget makes room by taking back freed space (reclaims); a smaller "
                       "budget leaves 'spare' less to take.\n",
                       rank, *rank ? ": " : "", d->device, human(d->spare_held, b[0], sizeof b[0]),
                       human(d->spare_judged_by, b[1], sizeof b[1]),
                       human(d->spare_others_peak, b[2], sizeof b[2]),
                       human(need - limit, b[3], sizeof b[3]),
                       d->has_budget ? "the budget allows" : "the GPU has");
                hints++;
            }
            if (d->spare_misses) {
                printf("  - %s%sGPU %d: the card refused %" PRIu64 " block%s that 'spare' had "
                       "room for under the budget: other processes or memory outside the "
                       "policy hold part of it. A budget below what the card has free keeps "
                       "'spare' within it.\n",
                       rank, *rank ? ": " : "", d->device, d->spare_misses,
                       d->spare_misses == 1 ? "" : "s");
                hints++;
            }
        }
    }
    return hints;
}

static void print_hints(const struct summary *s)
{
    puts("Look here first:");
    int hints = 0;
    double faults = 0;
    const struct rows *classes = &s->classes, *phases = &s->phases;
    for (size_t i = 0; i < classes->count; i++)
        faults += classes->items[i].um[UM_GPU_FAULTS];
    const struct row *worst = NULL, *worst_phase = NULL;
    for (size_t i = 0; i < classes->count; i++) {
        const struct row *r = &classes->items[i];
        if (r->um[UM_GPU_FAULTS] > 0 && (!worst || r->um[UM_GPU_FAULTS] > worst->um[UM_GPU_FAULTS]))
            worst = r;
    }
    for (size_t i = 0; i < phases->count; i++) {
        const struct row *r = &phases->items[i];
        if (r->um[UM_GPU_FAULTS] > 0 &&
            (!worst_phase || r->um[UM_GPU_FAULTS] > worst_phase->um[UM_GPU_FAULTS]))
            worst_phase = r;
    }
    if (worst) {
        printf("  - class '%s' takes the most GPU page faults: %.0f of %.0f (%.0f%%)", worst->shown,
               worst->um[UM_GPU_FAULTS], faults, 100 * worst->um[UM_GPU_FAULTS] / faults);
        if (worst->um[UM_GPU_FAULT_NS] > 0)
            printf(", %.1f ms of the driver's time servicing them", worst->um[UM_GPU_FAULT_NS] / 1e6);
        if (worst_phase) printf(", most of all in phase '%s'", worst_phase->shown);
        puts(".");
        if (policy_places_host(worst->policy) && worst->um[UM_HTOD_BYTES] == 0)
            printf("    Its pages stay on the host, where its policy places them (nothing moved "
                   "to the GPU): these faults map them for the GPU, most at first touch. Prefetch "
                   "it to the GPU only if the budget has room for all of it.\n");
        else if (!policy_prefetches_gpu(worst->policy))
            printf("    It is never prefetched to the GPU: add 'prefetch gpu on enter \"%s\";' "
                   "to class %s.\n",
                   worst_phase ? worst_phase->shown : "PHASE", worst->shown);
        else
            printf("    It is prefetched, but faults remain: prefetch earlier (on the enclosing "
                   "phase), or add 'access gpu' so the GPU maps pages instead of faulting them.\n");
        hints++;
    }
    for (size_t i = 0; i < classes->count; i++) {
        const struct row *r = &classes->items[i];
        char b[32];
        if (r->v[RC_EVICTIONS] > 0 && r->v[RC_EVICTIONS] >= r->v[RC_ALLOCATIONS] / 2) {
            printf("  - class '%s' was evicted %.0f times (%s): raise its priority or the "
                   "budget, or place it on the host with 'access gpu'.\n",
                   r->shown, r->v[RC_EVICTIONS], human(r->v[RC_EVICT_BYTES], b, sizeof b));
            hints++;
        }
        if (r->v[RC_CAP_REFUSALS] > 0) {
            printf("  - class '%s': %.0f allocations refused at the managed-memory cap.\n",
                   r->shown, r->v[RC_CAP_REFUSALS]);
            hints++;
        }
        if (r->v[RC_BUDGET_SKIPS] > 0) {
            printf("  - class '%s': %.0f placements skipped under the budget (nothing of lower "
                   "priority to evict).\n",
                   r->shown, r->v[RC_BUDGET_SKIPS]);
            hints++;
        }
    }
    for (size_t i = 0; i < classes->count; i++) {
        const struct row *r = &classes->items[i];
        char b[32];
        if (r->memory == REPORT_MEMORY_MANAGED && policy_places_host(r->policy) &&
            !policy_prefetches_gpu(r->policy) && r->v[RC_PEAK_BYTES] >= (1u << 30)) {
            printf("  - class '%s' (%s at its peak) lives on the host in managed memory and never "
                   "moves: the GPU may keep its pages on the card, beyond what umpol counts. "
                   "'memory host' keeps them off it (W107, umpol(5)).\n",
                   r->shown, human(r->v[RC_PEAK_BYTES], b, sizeof b));
            hints++;
        }
    }
    for (size_t i = 0; i < classes->count; i++) {
        const struct row *r = &classes->items[i];
        char b[3][32];
        if (holds_much_free(r)) {
            double held = slab_peak(r), spare = held - r->v[RC_PEAK_BYTES];
            printf("  - class '%s' held up to %s of slabs for %s live at its peak: %s (%.0f%%) "
                   "was free space its blocks' sizes could not reuse, %s. The report's sites "
                   "list its blocks by phase and size; UMPOL_TRACE records their order.\n",
                   r->shown, human(held, b[0], sizeof b[0]),
                   human(r->v[RC_PEAK_BYTES], b[1], sizeof b[1]), human(spare, b[2], sizeof b[2]),
                   100 * spare / held,
                   r->memory == REPORT_MEMORY_DEVICE    ? "on the card all the same"
                   : r->memory == REPORT_MEMORY_MOVABLE ? "on the card while its slabs were there"
                                                        : "on the card wherever it was placed, "
                                                          "until the budget takes it back");
            hints++;
        }
    }
    /* Only where two classes or more did so: one class reclaiming its own old
     * free space is not helped by merging classes. */
    size_t reclaiming = 0;
    for (size_t i = 0; i < classes->count; i++)
        reclaiming += gives_back_much(&classes->items[i]);
    for (size_t i = 0; reclaiming >= 2 && i < classes->count; i++) {
        const struct row *r = &classes->items[i];
        char b[2][32];
        if (gives_back_much(r)) {
            printf("  - class '%s' gave back %s of freed space %.0f times (%s at its peak): each "
                   "give-back moves the space off the GPU and its next blocks are moved back on. "
                   "A class keeps its own free space; blocks of phases that follow one another "
                   "(forward, backward) in one class reuse it on the GPU.\n",
                   r->shown, human(r->v[RC_RECLAIM_BYTES], b[0], sizeof b[0]), r->v[RC_RECLAIMS],
                   human(r->v[RC_PEAK_BYTES], b[1], sizeof b[1]));
            hints++;
        }
    }
    hints += spare_hints(s);
    hints += card_hints(s);
    if (!s->profiled)
        puts("  - no fault or migration counters in this report: run with UMPOL_PROFILE=1.");
    else if (!hints)
        puts("  - nothing stands out: no GPU page faults, evictions or refusals.");
}

/* `learn step`: how often the step repeated, and per class what it predicted. */
static void print_steps(const struct summary *s)
{
    char b[2][32];
    for (size_t i = 0; i < s->n; i++) {
        const struct report *r = &s->reports[i];
        const struct report_step *st = &r->step;
        if (!st->present)
            continue;
        fputs(s->paths_shown[i], stdout);
        if (st->phase) {
            fputs(": learned step (phase \"", stdout);
            text_print_visible(stdout, st->phase);
            fputs("\")", stdout);
        } else {
            printf(": learned step (found by repetition, %" PRIu64 " events a step)",
                   st->period_events);
        }
        printf(": %" PRIu64 " steps, %" PRIu64 " repeated the one before, %" PRIu64
               " differed, %" PRIu64 " departed part way, %" PRIu64 " resyncs",
               st->steps, st->matched, st->differed, st->departures, st->resyncs);
        if (st->fallback) {
            fputs("; ", stdout);
            text_print_visible(stdout, st->fallback);
        }
        putchar('\n');
        for (size_t k = 0; k < r->class_count; k++) {
            const struct report_class *cls = &r->classes[k];
            const uint64_t *nu = cls->next_use;
            if (!cls->has_next_use || (nu[NU_PREDICTIONS] == 0 && nu[NU_DEMAND_BYTES] == 0))
                continue;
            fputs("  class '", stdout);
            text_print_visible(stdout, cls->name);
            printf("': %" PRIu64 " uses predicted, %" PRIu64
                   " at the predicted event (mean error %.1f events); to the GPU ahead of use %s, "
                   "on demand %s\n",
                   nu[NU_PREDICTIONS], nu[NU_HITS],
                   nu[NU_PREDICTIONS] ? (double)nu[NU_ERROR_EVENTS] / (double)nu[NU_PREDICTIONS]
                                      : 0.0,
                   human((double)nu[NU_AHEAD_BYTES], b[0], 32),
                   human((double)nu[NU_DEMAND_BYTES], b[1], 32));
        }
        putchar('\n');
    }
}

/* `stream written`: per class, how the announced uses found their pieces. */
static void print_streams(const struct summary *s)
{
    char b[5][32];
    bool any = false;
    for (size_t i = 0; i < s->n; i++)
        for (size_t k = 0; k < s->reports[i].class_count; k++)
            any |= s->reports[i].classes[k].has_stream;
    if (!any)
        return;
    puts("Streaming ahead (stream written):");
    for (size_t i = 0; i < s->n; i++) {
        const struct report *r = &s->reports[i];
        for (size_t k = 0; k < r->class_count; k++) {
            const struct report_class *cls = &r->classes[k];
            const uint64_t *st = cls->stream;
            if (!cls->has_stream)
                continue;
            double needed = (double)st[ST_READY_BYTES] + (double)st[ST_LATE_BYTES];
            fputs("  ", stdout);
            if (s->n > 1)
                printf("%s: ", s->paths_shown[i]);
            fputs("class '", stdout);
            text_print_visible(stdout, cls->name);
            printf("': %" PRIu64 " uses announced; of the pieces they read, %s on the GPU by then "
                   "(%.0f%%), %s still on the host, read over the link; %s brought ahead, %s "
                   "left with no copy, %s copied back after write phases",
                   st[ST_USES], human((double)st[ST_READY_BYTES], b[0], 32),
                   needed > 0 ? 100.0 * (double)st[ST_READY_BYTES] / needed : 0.0,
                   human((double)st[ST_LATE_BYTES], b[1], 32),
                   human((double)st[ST_FETCHED_BYTES], b[2], 32),
                   human((double)st[ST_DROPPED_BYTES], b[3], 32),
                   human((double)st[ST_SAVED_BYTES], b[4], 32));
            if (st[ST_UNLEARNED_USES])
                printf("; %" PRIu64 " uses not in the learned cycle (nothing predicted for them)",
                       st[ST_UNLEARNED_USES]);
            putchar('\n');
        }
    }
    putchar('\n');
}

static void print_per_rank(const struct summary *s)
{
    char b[32];
    size_t nrows = s->classes.count;
    /* Per row and report, the class of that report (+1; 0 when it has none). */
    size_t *cell = nrows && s->n <= SIZE_MAX / nrows ? calloc(nrows * s->n, sizeof *cell) : NULL;
    if (!cell) {
        if (nrows) fputs("umpol report: out of memory for the per-rank table\n", stderr);
        return;
    }
    for (size_t i = 0; i < s->n; i++)
        for (size_t c = 0; c < s->reports[i].class_count; c++)
            if (!cell[s->class_row[i][c] * s->n + i]) cell[s->class_row[i][c] * s->n + i] = c + 1;
    printf("\nPer rank (peak bytes / GPU faults):\n  %-16s", "class");
    for (size_t i = 0; i < s->n; i++)
        printf(" %20s", s->paths_shown[i]);
    putchar('\n');
    for (size_t k = 0; k < nrows; k++) {
        printf("  %-16s", s->classes.items[k].shown);
        for (size_t i = 0; i < s->n; i++) {
            size_t c = cell[k * s->n + i];
            const struct report_class *cls = c ? &s->reports[i].classes[c - 1] : NULL;
            char text[48];
            snprintf(text, sizeof text, "%s / %.0f",
                     human(cls ? (double)cls->v[RC_PEAK_BYTES] : 0, b, sizeof b),
                     cls ? (double)cls->um[UM_GPU_FAULTS] : 0);
            printf(" %20s", text);
        }
        putchar('\n');
    }
    free(cell);
}

static void print_text(const struct summary *s)
{
    char b[6][32];
    printf("umpol report: %zu report%s", s->n, s->n == 1 ? "" : "s");
    if (s->n > 1) {
        printf(" (ranks");
        for (size_t i = 0; i < s->n; i++) {
            fputs(i ? ", " : " ", stdout);
            if (s->reports[i].rank >= 0)
                printf("%ld", s->reports[i].rank);
            else
                putchar('?');
        }
        printf(")");
    }
    double t[TOT_COUNT] = {0};
    for (size_t i = 0; i < s->n; i++)
        for (int k = 0; k < TOT_COUNT; k++)
            t[k] += (double)s->reports[i].totals[k];
    printf(": %.0f allocations placed, %.0f passed through, %.1f ms in runtime-issued CUDA work",
           t[TOT_ALLOCATIONS], t[TOT_PASSTHROUGH], t[TOT_RUNTIME_NS] / 1e6);
    if (t[TOT_PLACE_NS] + t[TOT_RECLAIM_NS] + t[TOT_EVICT_NS] > 0)
        printf(
            " (placing on allocation %.1f ms, taking back freed space %.1f ms, evicting %.1f ms)",
            t[TOT_PLACE_NS] / 1e6, t[TOT_RECLAIM_NS] / 1e6, t[TOT_EVICT_NS] / 1e6);
    if (t[TOT_HELD_NS] > 0)
        printf(";\nthe job's threads spent %.1f ms in the runtime, of it %.1f ms making new slabs, "
               "%.1f ms giving slabs back (each release waits for the GPU's work) and %.1f ms "
               "waiting for remaps on the runtime's thread",
               t[TOT_HELD_NS] / 1e6, t[TOT_SLAB_GROW_NS] / 1e6, t[TOT_SLAB_RELEASE_NS] / 1e6,
               t[TOT_REMAP_WAIT_NS] / 1e6);
    printf("\n\n");
    print_steps(s);
    print_streams(s);
    print_hints(s);
    size_t nclasses = s->classes.count, nphases = s->phases.count;
    struct row *classes = nclasses ? malloc(nclasses * sizeof *classes) : NULL;
    if (classes) {
        memcpy(classes, s->classes.items, nclasses * sizeof *classes);
        qsort(classes, nclasses, sizeof *classes, by_cost);
        printf("\nClasses, costliest first:\n  %-16s %10s %10s %10s %11s %10s %10s %11s %9s\n",
               "class", "allocs", "peak", "GPU faults", "fault time", "to GPU", "to host",
               "prefetched", "evictions");
        for (size_t i = 0; i < nclasses; i++) {
            const struct row *r = &classes[i];
            printf("  %-16s %10.0f %10s %10.0f %8.1f ms %10s %10s %11s %9.0f\n", r->shown,
                   r->v[RC_ALLOCATIONS], human(r->v[RC_PEAK_BYTES], b[0], 32), r->um[UM_GPU_FAULTS],
                   r->um[UM_GPU_FAULT_NS] / 1e6, human(r->um[UM_HTOD_BYTES], b[1], 32),
                   human(r->um[UM_DTOH_BYTES], b[2], 32), human(r->v[RC_PREFETCH_BYTES], b[3], 32),
                   r->v[RC_EVICTIONS]);
        }
        for (size_t i = 0; i < nclasses; i++)
            if (classes[i].v[RC_RECLASSIFIED] > 0)
                printf("  class '%s': %.0f of its blocks came from another class when reported "
                       "saved for backward ('match saved').\n",
                       classes[i].shown, classes[i].v[RC_RECLASSIFIED]);
    }
    free(classes);
    struct row *phases = nphases ? malloc(nphases * sizeof *phases) : NULL;
    if (phases) {
        memcpy(phases, s->phases.items, nphases * sizeof *phases);
        qsort(phases, nphases, sizeof *phases, by_time);
        printf("\nPhases, longest first:\n  %-20s %9s %12s %10s %11s %10s %10s\n", "phase",
               "entries", "time", "GPU faults", "fault time", "to GPU", "to host");
        for (size_t i = 0; i < nphases; i++) {
            const struct row *r = &phases[i];
            printf("  %-20s %9.0f %9.1f ms %10.0f %8.1f ms %10s %10s\n", r->shown, r->entries,
                   r->total_ns / 1e6, r->um[UM_GPU_FAULTS], r->um[UM_GPU_FAULT_NS] / 1e6,
                   human(r->um[UM_HTOD_BYTES], b[0], 32), human(r->um[UM_DTOH_BYTES], b[1], 32));
        }
    }
    free(phases);
    if (s->n > 1) print_per_rank(s);
}

static void print_um_json(const double *um)
{
    fputs(", \"um\": {", stdout);
    for (int k = 0; k < UM_COUNT; k++)
        printf("%s\"%s\": %.0f", k ? ", " : "", report_um_counters[k], um[k]);
    fputs("}}", stdout);
}

static void print_json(const struct summary *s)
{
    printf("{\"umpol_report_summary\": 1, \"reports\": %zu, \"files\": [", s->n);
    for (size_t i = 0; i < s->n; i++) {
        if (i) fputs(", ", stdout);
        json_print_string(stdout, s->paths[i]);
    }
    fputs("],\n \"classes\": [", stdout);
    for (size_t c = 0; c < s->classes.count; c++) {
        const struct row *r = &s->classes.items[c];
        fputs(c ? ",\n  {\"name\": " : "\n  {\"name\": ", stdout);
        json_print_string(stdout, r->name);
        for (int k = 0; k < NSUM; k++)
            printf(", \"%s\": %.0f", report_class_counters[summed[k]], r->v[summed[k]]);
        print_um_json(r->um);
    }
    fputs("],\n \"phases\": [", stdout);
    for (size_t p = 0; p < s->phases.count; p++) {
        const struct row *r = &s->phases.items[p];
        fputs(p ? ",\n  {\"name\": " : "\n  {\"name\": ", stdout);
        json_print_string(stdout, r->name);
        printf(", \"entries\": %.0f, \"total_ns\": %.0f", r->entries, r->total_ns);
        print_um_json(r->um);
    }
    fputs("]}\n", stdout);
}

/* Chrome trace: a process per report (rank), a track for phases, one per class,
 * and a counter track of each GPU's budgeted bytes. Times in microseconds. */
static int write_trace(const struct summary *s, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fputs("umpol report: cannot write ", stderr);
        text_print_visible(stderr, path);
        fprintf(stderr, ": %s\n", strerror(errno));
        return EXIT_USAGE;
    }
    fputs("{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n", f);
    bool first = true;
#define SEP() (first ? (first = false, "") : ",\n")
    for (size_t i = 0; i < s->n; i++) {
        const struct report *r = &s->reports[i];
        long pid = r->rank >= 0 ? r->rank : (long)i;
        fprintf(f,
                "%s{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": %ld, \"args\": {\"name\": "
                "\"rank %ld\"}}",
                SEP(), pid, pid);
        fprintf(f,
                "%s{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %ld, \"tid\": 1, \"args\": "
                "{\"name\": \"phases\"}}",
                SEP(), pid);
        for (size_t c = 0; c < r->class_count; c++) {
            fprintf(f,
                    "%s{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %ld, \"tid\": %zu, "
                    "\"args\": {\"name\": ",
                    SEP(), pid, 10 + c);
            json_print_string(f, r->classes[c].name);
            fputs("}}", f);
        }
        for (size_t k = 0; k < r->span_count; k++) {
            const struct report_span *sp = &r->spans[k];
            double start = (double)sp->start_ns, end = sp->open ? start : (double)sp->end_ns;
            fprintf(f,
                    "%s{\"ph\": \"X\", \"pid\": %ld, \"tid\": 1, \"ts\": %.3f, \"dur\": %.3f, "
                    "\"name\": ",
                    SEP(), pid, start / 1e3, (end - start) / 1e3);
            json_print_string(f, r->phases[sp->phase].name);
            fputc('}', f);
        }
        for (size_t k = 0; k < r->event_count; k++) {
            const struct report_event *e = &r->events[k];
            double t = (double)e->t_ns / 1e3;
            fprintf(f,
                    "%s{\"ph\": \"i\", \"s\": \"t\", \"pid\": %ld, \"tid\": %ld, \"ts\": %.3f, "
                    "\"name\": \"%s\", "
                    "\"args\": {\"bytes\": %" PRIu64 ", \"device\": %d}}",
                    SEP(), pid, 10 + (e->class_index < 0 ? 0 : e->class_index), t,
                    report_event_kinds[e->kind], e->bytes, e->device);
            fprintf(
                f,
                "%s{\"ph\": \"C\", \"pid\": %ld, \"ts\": %.3f, \"name\": \"GPU %d placed bytes\", "
                "\"args\": {\"bytes\": %" PRIu64 "}}",
                SEP(), pid, t, e->device, e->resident_bytes);
        }
    }
#undef SEP
    fputs("\n]}\n", f);
    int err = ferror(f) ? EIO : 0;
    if (fclose(f) != 0 && !err) err = errno;
    if (err) {
        fputs("umpol report: cannot write ", stderr);
        text_print_visible(stderr, path);
        fprintf(stderr, ": %s\n", strerror(err));
        return EXIT_USAGE;
    }
    return EXIT_VALID;
}

int cmd_report(int argc, char **argv)
{
    bool json = false;
    const char *trace = NULL;
    for (int c; (c = cli_getopt("report", argc, argv)) != -1;) {
        if (c == OPT_JSON)
            json = true;
        else if (c == OPT_TRACE)
            trace = optarg;
    }
    if (optind >= argc)
        return cli_usage_error("report", "no report given");
    struct summary s = {0};
    int rc = load(&s, argc - optind, argv + optind);
    if (rc == EXIT_VALID) {
        if (trace) rc = write_trace(&s, trace);
        if (json)
            print_json(&s);
        else if (!trace)
            print_text(&s);
    }
    free_summary(&s);
    return cli_finish_stdout("report", rc);
}
