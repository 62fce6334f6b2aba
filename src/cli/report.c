/* `umpol report`: read one or more runtime reports (one per rank), sum them,
 * and show what a tuner needs first; or write them merged as JSON, or as a
 * Chrome/Perfetto trace. */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli/jsonv.h"
#include "lang/json.h"
#include "lang/program.h"

/* Counters summed per class and per phase; names match report fields. */
static const char *const class_fields[] = {
    "allocations", "frees",         "bytes_requested", "peak_bytes",   "slabs",
    "slab_bytes",  "prefetches",    "prefetch_bytes",  "evictions",    "evict_bytes",
    "cap_refusals", "budget_skips", "advice_errors",   "discard_bytes"};
static const char *const um_fields[] = {"htod_bytes", "dtoh_bytes", "gpu_faults",
                                        "cpu_faults", "thrashing",  "throttling"};
enum { NCLASS = sizeof class_fields / sizeof class_fields[0], NUM = 6 };

struct row {
    char *name;
    double v[NCLASS];
    double um[NUM];
    double entries, total_ns; /* phases */
    const struct jv *policy;  /* from the first report that has the class */
};

struct summary {
    struct jv **docs;
    const char **paths;
    size_t n;
    struct row *classes, *phases;
    size_t nclasses, nphases;
    bool profiled;
};

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += got;
        if (n + 1 < cap)
            continue;
        char *grown = realloc(buf, cap * 2);
        if (!grown) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = grown;
        cap *= 2;
    }
    fclose(f);
    if (buf)
        buf[n] = '\0';
    *len = n;
    return buf;
}

static struct row *find_row(struct row **rows, size_t *n, const char *name)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp((*rows)[i].name, name) == 0)
            return &(*rows)[i];
    struct row *grown = realloc(*rows, (*n + 1) * sizeof *grown);
    if (!grown)
        return NULL;
    *rows = grown;
    struct row *r = &(*rows)[(*n)++];
    memset(r, 0, sizeof *r);
    r->name = strdup(name);
    return r;
}

static void add_um(double *dst, const struct jv *um)
{
    for (int k = 0; k < NUM; k++)
        dst[k] += jv_num(um, um_fields[k], 0);
}

static int load(struct summary *s, int argc, char **argv)
{
    s->n = (size_t)argc;
    s->docs = calloc(s->n, sizeof *s->docs);
    s->paths = (const char **)argv;
    for (size_t i = 0; i < s->n; i++) {
        size_t len;
        char *text = read_file(argv[i], &len);
        if (!text) {
            fprintf(stderr, "umpol report: cannot read %s\n", argv[i]);
            return EXIT_USAGE;
        }
        const char *err;
        size_t off;
        s->docs[i] = jv_parse(text, len, &err, &off);
        free(text);
        if (!s->docs[i] || jv_num(s->docs[i], "umpol_report", 0) != 1) {
            fprintf(stderr, "umpol report: %s: %s%s at byte %zu\n", argv[i],
                    s->docs[i] ? "not an umpol report" : "invalid JSON: ", s->docs[i] ? "" : err,
                    s->docs[i] ? (size_t)0 : off);
            return EXIT_INVALID;
        }
        const struct jv *classes = jv_get(s->docs[i], "classes");
        for (size_t c = 0; classes && c < classes->count; c++) {
            const struct jv *cj = &classes->items[c];
            struct row *r = find_row(&s->classes, &s->nclasses, jv_str(cj, "name") ? jv_str(cj, "name") : "?");
            if (!r)
                return EXIT_USAGE;
            for (int k = 0; k < NCLASS; k++)
                r->v[k] += jv_num(cj, class_fields[k], 0);
            if (jv_get(cj, "um")) {
                add_um(r->um, jv_get(cj, "um"));
                s->profiled = true;
            }
            if (!r->policy)
                r->policy = jv_get(cj, "policy");
        }
        const struct jv *phases = jv_get(s->docs[i], "phases");
        for (size_t p = 0; phases && p < phases->count; p++) {
            const struct jv *pj = &phases->items[p];
            struct row *r = find_row(&s->phases, &s->nphases, jv_str(pj, "name") ? jv_str(pj, "name") : "?");
            if (!r)
                return EXIT_USAGE;
            r->entries += jv_num(pj, "entries", 0);
            r->total_ns += jv_num(pj, "total_ns", 0);
            add_um(r->um, jv_get(pj, "um"));
        }
    }
    return EXIT_VALID;
}

static void free_summary(struct summary *s)
{
    for (size_t i = 0; i < s->n; i++)
        jv_free(s->docs[i]);
    free(s->docs);
    for (size_t i = 0; i < s->nclasses; i++)
        free(s->classes[i].name);
    for (size_t i = 0; i < s->nphases; i++)
        free(s->phases[i].name);
    free(s->classes);
    free(s->phases);
}

/* What a row costs the job: bytes moved by faults or by the runtime, faults weighted by a 64 KiB page. */
static double class_cost(const struct row *r)
{
    return r->um[0] + r->um[1] + r->um[2] * 65536.0 + r->v[7] + r->v[9];
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

static bool policy_prefetches_gpu(const struct jv *policy)
{
    const struct jv *pf = jv_get(policy, "prefetch");
    for (size_t i = 0; pf && i < pf->count; i++)
        if (pf->items[i].type == JV_STRING && strncmp(pf->items[i].string, "gpu", 3) == 0)
            return true;
    return false;
}

static bool policy_places_host(const struct jv *policy)
{
    const struct jv *place = jv_get(policy, "place");
    return place && place->type == JV_STRING && strncmp(place->string, "host", 4) == 0;
}

static void print_hints(const struct summary *s)
{
    puts("Look here first:");
    int hints = 0;
    double faults = 0;
    for (size_t i = 0; i < s->nclasses; i++)
        faults += s->classes[i].um[2];
    const struct row *worst = NULL, *worst_phase = NULL;
    for (size_t i = 0; i < s->nclasses; i++)
        if (s->classes[i].um[2] > 0 && (!worst || s->classes[i].um[2] > worst->um[2]))
            worst = &s->classes[i];
    for (size_t i = 0; i < s->nphases; i++)
        if (s->phases[i].um[2] > 0 && (!worst_phase || s->phases[i].um[2] > worst_phase->um[2]))
            worst_phase = &s->phases[i];
    if (worst) {
        printf("  - class '%s' takes the most GPU page faults: %.0f of %.0f (%.0f%%)", worst->name,
               worst->um[2], faults, 100 * worst->um[2] / faults);
        if (worst_phase)
            printf(", most of all in phase '%s'", worst_phase->name);
        puts(".");
        if (policy_places_host(worst->policy) && worst->um[0] == 0)
            printf("    Its pages stay on the host, where its policy places them (nothing moved "
                   "to the GPU): these faults map them for the GPU, most at first touch. Prefetch "
                   "it to the GPU only if the budget has room for all of it.\n");
        else if (!policy_prefetches_gpu(worst->policy))
            printf("    It is never prefetched to the GPU: add 'prefetch gpu on enter \"%s\";' "
                   "to class %s.\n", worst_phase ? worst_phase->name : "PHASE", worst->name);
        else
            printf("    It is prefetched, but faults remain: prefetch earlier (on the enclosing "
                   "phase), or add 'access gpu' so the GPU maps pages instead of faulting them.\n");
        hints++;
    }
    for (size_t i = 0; i < s->nclasses; i++) {
        const struct row *r = &s->classes[i];
        char b[32];
        if (r->v[8] > 0 && r->v[8] >= r->v[0] / 2) {
            printf("  - class '%s' was evicted %.0f times (%s): raise its priority or the "
                   "budget, or place it on the host with 'access gpu'.\n",
                   r->name, r->v[8], human(r->v[9], b, sizeof b));
            hints++;
        }
        if (r->v[10] > 0) {
            printf("  - class '%s': %.0f allocations refused at the managed-memory cap.\n",
                   r->name, r->v[10]);
            hints++;
        }
        if (r->v[11] > 0) {
            printf("  - class '%s': %.0f placements skipped under the budget (nothing of lower "
                   "priority to evict).\n", r->name, r->v[11]);
            hints++;
        }
    }
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
        const struct jv *st = jv_get(s->docs[i], "step");
        if (!st || st->type != JV_OBJECT)
            continue;
        const char *phase = jv_str(st, "phase");
        const char *fallback = jv_str(st, "fallback");
        printf("%s: learned step (phase \"%s\"): %.0f steps, %.0f repeated the one before, %.0f "
               "differed, %.0f departed part way%s%s\n",
               s->paths[i], phase ? phase : "?", jv_num(st, "steps", 0), jv_num(st, "matched", 0),
               jv_num(st, "differed", 0), jv_num(st, "departures", 0), fallback ? "; " : "",
               fallback ? fallback : "");
        const struct jv *classes = jv_get(s->docs[i], "classes");
        for (size_t k = 0; classes && k < classes->count; k++) {
            const struct jv *nu = jv_get(&classes->items[k], "next_use");
            double n = jv_num(nu, "predictions", 0);
            if (!nu || (n == 0 && jv_num(nu, "demand_bytes", 0) == 0))
                continue;
            printf("  class '%s': %.0f uses predicted, %.0f at the predicted event (mean error "
                   "%.1f events); to the GPU ahead of use %s, on demand %s\n",
                   jv_str(&classes->items[k], "name"), n, jv_num(nu, "hits", 0),
                   n ? jv_num(nu, "error_events", 0) / n : 0.0,
                   human(jv_num(nu, "ahead_bytes", 0), b[0], 32),
                   human(jv_num(nu, "demand_bytes", 0), b[1], 32));
        }
        putchar('\n');
    }
}

static void print_text(const struct summary *s)
{
    char b[6][32];
    printf("umpol report: %zu report%s", s->n, s->n == 1 ? "" : "s");
    if (s->n > 1) {
        printf(" (ranks");
        for (size_t i = 0; i < s->n; i++) {
            const struct jv *rank = jv_get(s->docs[i], "rank");
            printf(i ? ", %s" : " %s", rank && rank->type == JV_NUMBER ? "" : "?");
            if (rank && rank->type == JV_NUMBER)
                printf("%.0f", rank->number);
        }
        printf(")");
    }
    double allocs = 0, pass = 0, rt_ns = 0, place_ns = 0, reclaim_ns = 0, evict_ns = 0;
    for (size_t i = 0; i < s->n; i++) {
        const struct jv *t = jv_get(s->docs[i], "totals");
        allocs += jv_num(t, "allocations", 0);
        pass += jv_num(t, "passthrough", 0);
        rt_ns += jv_num(t, "runtime_ns", 0);
        place_ns += jv_num(t, "place_ns", 0);
        reclaim_ns += jv_num(t, "reclaim_ns", 0);
        evict_ns += jv_num(t, "evict_ns", 0);
    }
    printf(": %.0f allocations placed, %.0f passed through, %.1f ms in runtime-issued CUDA work",
           allocs, pass, rt_ns / 1e6);
    if (place_ns + reclaim_ns + evict_ns > 0)
        printf(" (placing on allocation %.1f ms, taking back freed space %.1f ms, evicting %.1f ms)",
               place_ns / 1e6, reclaim_ns / 1e6, evict_ns / 1e6);
    printf("\n\n");
    print_steps(s);
    print_hints(s);
    struct row *classes = malloc(s->nclasses * sizeof *classes);
    if (classes && s->nclasses) {
        memcpy(classes, s->classes, s->nclasses * sizeof *classes);
        qsort(classes, s->nclasses, sizeof *classes, by_cost);
        printf("\nClasses, costliest first:\n  %-16s %10s %10s %10s %10s %10s %11s %9s\n", "class",
               "allocs", "peak", "GPU faults", "to GPU", "to host", "prefetched", "evictions");
        for (size_t i = 0; i < s->nclasses; i++) {
            const struct row *r = &classes[i];
            printf("  %-16s %10.0f %10s %10.0f %10s %10s %11s %9.0f\n", r->name, r->v[0],
                   human(r->v[3], b[0], 32), r->um[2], human(r->um[0], b[1], 32),
                   human(r->um[1], b[2], 32), human(r->v[7], b[3], 32), r->v[8]);
        }
    }
    free(classes);
    struct row *phases = malloc((s->nphases ? s->nphases : 1) * sizeof *phases);
    if (phases && s->nphases) {
        memcpy(phases, s->phases, s->nphases * sizeof *phases);
        qsort(phases, s->nphases, sizeof *phases, by_time);
        printf("\nPhases, longest first:\n  %-20s %9s %12s %10s %10s %10s\n", "phase", "entries",
               "time", "GPU faults", "to GPU", "to host");
        for (size_t i = 0; i < s->nphases; i++) {
            const struct row *r = &phases[i];
            printf("  %-20s %9.0f %9.1f ms %10.0f %10s %10s\n", r->name, r->entries,
                   r->total_ns / 1e6, r->um[2], human(r->um[0], b[0], 32), human(r->um[1], b[1], 32));
        }
    }
    free(phases);
    if (s->n > 1) {
        printf("\nPer rank (peak bytes / GPU faults):\n  %-16s", "class");
        for (size_t i = 0; i < s->n; i++)
            printf(" %20s", s->paths[i]);
        putchar('\n');
        for (size_t c = 0; c < s->nclasses; c++) {
            printf("  %-16s", s->classes[c].name);
            for (size_t i = 0; i < s->n; i++) {
                const struct jv *classes_i = jv_get(s->docs[i], "classes");
                const struct jv *cj = NULL;
                for (size_t k = 0; classes_i && k < classes_i->count; k++)
                    if (jv_str(&classes_i->items[k], "name") &&
                        strcmp(jv_str(&classes_i->items[k], "name"), s->classes[c].name) == 0)
                        cj = &classes_i->items[k];
                char cell[48];
                snprintf(cell, sizeof cell, "%s / %.0f", human(jv_num(cj, "peak_bytes", 0), b[0], 32),
                         jv_num(jv_get(cj, "um"), "gpu_faults", 0));
                printf(" %20s", cell);
            }
            putchar('\n');
        }
    }
}

static void print_json(const struct summary *s)
{
    printf("{\"umpol_report_summary\": 1, \"reports\": %zu, \"files\": [", s->n);
    for (size_t i = 0; i < s->n; i++) {
        if (i)
            fputs(", ", stdout);
        json_print_string(stdout, s->paths[i]);
    }
    fputs("],\n \"classes\": [", stdout);
    for (size_t c = 0; c < s->nclasses; c++) {
        const struct row *r = &s->classes[c];
        fputs(c ? ",\n  {\"name\": " : "\n  {\"name\": ", stdout);
        json_print_string(stdout, r->name);
        for (int k = 0; k < NCLASS; k++)
            printf(", \"%s\": %.0f", class_fields[k], r->v[k]);
        fputs(", \"um\": {", stdout);
        for (int k = 0; k < NUM; k++)
            printf("%s\"%s\": %.0f", k ? ", " : "", um_fields[k], r->um[k]);
        fputs("}}", stdout);
    }
    fputs("],\n \"phases\": [", stdout);
    for (size_t p = 0; p < s->nphases; p++) {
        const struct row *r = &s->phases[p];
        fputs(p ? ",\n  {\"name\": " : "\n  {\"name\": ", stdout);
        json_print_string(stdout, r->name);
        printf(", \"entries\": %.0f, \"total_ns\": %.0f, \"um\": {", r->entries, r->total_ns);
        for (int k = 0; k < NUM; k++)
            printf("%s\"%s\": %.0f", k ? ", " : "", um_fields[k], r->um[k]);
        fputs("}}", stdout);
    }
    fputs("]}\n", stdout);
}

/* Chrome trace: a process per report (rank), a track for phases, one per class,
 * and a counter track of each GPU's budgeted bytes. Times in microseconds. */
static int write_trace(const struct summary *s, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "umpol report: cannot write %s\n", path);
        return EXIT_USAGE;
    }
    fputs("{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n", f);
    bool first = true;
#define SEP() (first ? (first = false, "") : ",\n")
    for (size_t i = 0; i < s->n; i++) {
        const struct jv *doc = s->docs[i];
        const struct jv *rank = jv_get(doc, "rank");
        int pid = rank && rank->type == JV_NUMBER ? (int)rank->number : (int)i;
        fprintf(f, "%s{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": %d, \"args\": {\"name\": \"rank %d\"}}",
                SEP(), pid, pid);
        fprintf(f, "%s{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %d, \"tid\": 1, \"args\": {\"name\": \"phases\"}}",
                SEP(), pid);
        const struct jv *classes = jv_get(doc, "classes"), *phases = jv_get(doc, "phases");
        for (size_t c = 0; classes && c < classes->count; c++) {
            fprintf(f, "%s{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %d, \"tid\": %zu, \"args\": {\"name\": ",
                    SEP(), pid, 10 + c);
            json_print_string(f, jv_str(&classes->items[c], "name"));
            fputs("}}", f);
        }
        const struct jv *tl = jv_get(doc, "timeline");
        const struct jv *spans = jv_get(tl, "spans"), *events = jv_get(tl, "events");
        for (size_t k = 0; spans && k < spans->count; k++) {
            const struct jv *sp = &spans->items[k];
            size_t ph = (size_t)jv_num(sp, "phase", 0);
            double start = jv_num(sp, "start_ns", 0), end = jv_num(sp, "end_ns", start);
            fprintf(f, "%s{\"ph\": \"X\", \"pid\": %d, \"tid\": 1, \"ts\": %.3f, \"dur\": %.3f, \"name\": ",
                    SEP(), pid, start / 1e3, (end - start) / 1e3);
            json_print_string(f, phases && ph < phases->count ? jv_str(&phases->items[ph], "name") : "?");
            fputc('}', f);
        }
        for (size_t k = 0; events && k < events->count; k++) {
            const struct jv *e = &events->items[k];
            double t = jv_num(e, "t_ns", 0) / 1e3;
            int cls = (int)jv_num(e, "class", -1), dev = (int)jv_num(e, "device", 0);
            fprintf(f, "%s{\"ph\": \"i\", \"s\": \"t\", \"pid\": %d, \"tid\": %d, \"ts\": %.3f, \"name\": \"%s\", "
                       "\"args\": {\"bytes\": %.0f, \"device\": %d}}",
                    SEP(), pid, 10 + (cls < 0 ? 0 : cls), t, jv_str(e, "kind") ? jv_str(e, "kind") : "?",
                    jv_num(e, "bytes", 0), dev);
            fprintf(f, "%s{\"ph\": \"C\", \"pid\": %d, \"ts\": %.3f, \"name\": \"GPU %d placed bytes\", "
                       "\"args\": {\"bytes\": %.0f}}",
                    SEP(), pid, t, dev, jv_num(e, "resident_bytes", 0));
        }
    }
#undef SEP
    fputs("\n]}\n", f);
    if (fclose(f) != 0) {
        fprintf(stderr, "umpol report: cannot write %s\n", path);
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
        if (trace)
            rc = write_trace(&s, trace);
        if (json)
            print_json(&s);
        else if (!trace)
            print_text(&s);
    }
    free_summary(&s);
    return rc;
}
