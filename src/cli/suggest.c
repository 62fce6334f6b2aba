/* `umpol suggest`: draft a policy from recorded runtime reports.
 *
 * Reports are read into a `struct run_profile` by one adapter
 * (profile_from_report); the analysis sees only that struct. Allocation sites
 * (phase, tag, power-of-two size) are grouped by the tag they were made
 * under, else by the phase that made them, and by lifetime: blocks freed
 * within a step are transient (activations, gradients), blocks that outlive
 * a step are state, made once (weights) or in a repeated phase (optimizer
 * state). The budget then decides where state goes. The output is checked
 * with the policy front end before it is written, and written whole or not
 * at all. */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "lang/policy.h"
#include "report/report.h"
#include "util/outfile.h"

#define SMALL_BYTES (1u << 20) /* smaller blocks stay plain device memory */
#define MODEL_ROOM_MIN (64u << 20) /* one movable piece (MOVABLE_PIECE): less keeps none */

/* ---- what the analysis reads: one run, possibly several ranks ---- */

struct run_site {
    const char *phase; /* NULL: outside every phase */
    const char *tag;   /* the innermost tag pushed, NULL: none */
    const char *class_name;
    uint64_t allocations, frees, bytes, min_size, max_size, peak_live, lifetime_ns;
};

struct run_phase {
    const char *name;
    uint64_t entries, total_ns;
    int depth; /* least nesting seen in the timeline, 0 when unknown */
    /* From the timeline: the episodes (stretches of time covered by
     * overlapping spans of any phase, on any thread) the phase was entered
     * in, and the least time between two of them. A phase nested in itself
     * or run on autograd's threads inside another still counts once an
     * episode, so this is how often it repeats. */
    uint64_t episodes, episode_gap_ns;
};

struct run_class {
    const char *name;
    uint64_t peak_bytes, evictions, evict_bytes, prefetch_bytes, gpu_faults, htod, dtoh;
    bool profiled; /* the report has its Unified Memory counters */
};

struct run_profile {
    size_t reports;
    uint64_t gpu_bytes;    /* the GPU's memory */
    uint64_t budget_bytes; /* the recorded run's budget, 0: none */
    bool budget_card;      /* it was `budget card`: card_outside of it was not umpol's */
    uint64_t card_outside;
    struct run_site *sites;
    struct run_phase *phases;
    struct run_class *classes;
    size_t nsites, nphases, nclasses;
    bool timed; /* every report had a timeline: the phases' episodes are known */
};

static void profile_free(struct run_profile *p)
{
    free(p->sites);
    free(p->phases);
    free(p->classes);
}

/* ---- the adapter from the report module (report/report.h) ---- */

/* Why a report cannot be used. */
struct bad {
    char why[256];
};

__attribute__((format(printf, 2, 3))) static bool fail(struct bad *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->why, sizeof b->why, fmt, ap);
    va_end(ap);
    return false;
}

static bool printable(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) return false;
    return true;
}

static bool grow(void **arr, size_t n, size_t more, size_t size)
{
    void *g = realloc(*arr, (n + more + 1) * size);
    if (g) *arr = g;
    return g != NULL;
}

static int by_start(const void *a, const void *b)
{
    const struct report_span *x = *(const struct report_span *const *)a,
                             *y = *(const struct report_span *const *)b;
    if (x->start_ns != y->start_ns) return (x->start_ns > y->start_ns) - (x->start_ns < y->start_ns);
    return (x->end_ns < y->end_ns) - (x->end_ns > y->end_ns); /* the longer first */
}

/* R's spans into episodes, and each phase's count of episodes into P's
 * phase MERGED[i] for R's phase i: the most of any report, and the least gap
 * between the starts of two episodes of the phase. */
static bool count_episodes(struct run_profile *p, const struct report *r, const size_t *merged)
{
    struct seen {
        uint64_t episode, count, start_ns, gap_ns; /* episode 0: none yet */
    };
    const struct report_span **order = calloc(r->span_count + 1, sizeof *order);
    struct seen *seen = calloc(r->phase_count + 1, sizeof *seen);
    if (!order || !seen) {
        free(order);
        free(seen);
        return false;
    }
    /* A phase entered once (a range around the whole loop) would make the
     * run one stretch: its spans are left out. */
    size_t n = 0;
    for (size_t i = 0; i < r->span_count; i++)
        if (!r->spans[i].open && r->spans[i].end_ns >= r->spans[i].start_ns &&
            r->phases[r->spans[i].phase].entries > 1)
            order[n++] = &r->spans[i];
    qsort(order, n, sizeof *order, by_start);
    uint64_t episode = 0, start = 0, end = 0;
    for (size_t i = 0; i < n; i++) {
        const struct report_span *sp = order[i];
        if (i == 0 || sp->start_ns >= end) { /* no span before reaches here: a new episode */
            episode++;
            start = sp->start_ns;
            end = sp->end_ns;
        } else if (sp->end_ns > end) {
            end = sp->end_ns;
        }
        struct seen *ph = &seen[sp->phase];
        if (ph->episode == episode) continue;
        if (ph->episode && (!ph->gap_ns || start - ph->start_ns < ph->gap_ns))
            ph->gap_ns = start - ph->start_ns;
        ph->episode = episode;
        ph->start_ns = start;
        ph->count++;
    }
    for (size_t i = 0; i < r->phase_count; i++) {
        struct run_phase *rp = &p->phases[merged[i]];
        rp->episodes = seen[i].count > rp->episodes ? seen[i].count : rp->episodes;
        if (seen[i].gap_ns && (!rp->episode_gap_ns || seen[i].gap_ns < rp->episode_gap_ns))
            rp->episode_gap_ns = seen[i].gap_ns;
    }
    free(order);
    free(seen);
    return true;
}

/* R, already checked against the schema by report_load, into P; the names
 * stay R's, so R outlives P. */
static bool profile_from_report(struct run_profile *p, const struct report *r, struct bad *b)
{
    if (r->device_count != 1)
        return fail(b, r->device_count ? "the report covers several GPUs; give one report per GPU "
                                         "(rank)"
                                       : "the report saw no GPU");
    const struct report_device *dev = &r->devices[0];
    if (p->reports && dev->total_bytes != p->gpu_bytes)
        return fail(b, "recorded on a GPU of %" PRIu64 " bytes, the others on one of %" PRIu64,
                    dev->total_bytes, p->gpu_bytes);
    p->gpu_bytes = dev->total_bytes;
    p->budget_bytes = dev->has_budget ? dev->budget_bytes : 0;
    p->budget_card = dev->has_budget && dev->budget_counts_card;
    p->card_outside = dev->card_outside;
    if (!r->has_sites)
        return fail(b, "no allocation sites: written by an older umpol; record the run again "
                       "(umpol suggest -- COMMAND, or umpol run -r)");
    size_t class_base = p->nclasses;
    if (!grow((void **)&p->classes, p->nclasses, r->class_count, sizeof *p->classes) ||
        !grow((void **)&p->phases, p->nphases, r->phase_count, sizeof *p->phases) ||
        !grow((void **)&p->sites, p->nsites, r->site_count, sizeof *p->sites))
        return fail(b, "out of memory");
    for (size_t i = 0; i < r->class_count; i++) {
        const struct report_class *c = &r->classes[i];
        struct run_class *rc = &p->classes[class_base + i];
        if (!printable(c->name)) return fail(b, "a class without a printable name");
        *rc = (struct run_class){.name = c->name,
                                 .peak_bytes = c->v[RC_PEAK_BYTES],
                                 .evictions = c->v[RC_EVICTIONS],
                                 .evict_bytes = c->v[RC_EVICT_BYTES],
                                 .prefetch_bytes = c->v[RC_PREFETCH_BYTES],
                                 .gpu_faults = c->um[UM_GPU_FAULTS],
                                 .htod = c->um[UM_HTOD_BYTES],
                                 .dtoh = c->um[UM_DTOH_BYTES],
                                 .profiled = c->has_um};
    }
    p->nclasses += r->class_count;
    /* Phases are merged by name across reports; sites and spans refer to this
     * report's indices, MERGED maps them to P's. */
    size_t *merged = calloc(r->phase_count + 1, sizeof *merged);
    if (!merged) return fail(b, "out of memory");
    for (size_t i = 0; i < r->phase_count; i++) {
        const struct report_phase *ph = &r->phases[i];
        if (!printable(ph->name)) {
            free(merged);
            return fail(b, "a phase without a printable name");
        }
        size_t k = 0;
        while (k < p->nphases && strcmp(p->phases[k].name, ph->name) != 0)
            k++;
        if (k == p->nphases) p->phases[p->nphases++] = (struct run_phase){.name = ph->name, .depth = -1};
        struct run_phase *rp = &p->phases[k];
        rp->entries = ph->entries > rp->entries ? ph->entries : rp->entries;
        rp->total_ns += ph->total_ns;
        merged[i] = k;
    }
    for (size_t i = 0; i < r->span_count; i++) {
        const struct report_span *sp = &r->spans[i];
        struct run_phase *rp = &p->phases[merged[sp->phase]];
        if (rp->depth < 0 || sp->depth < (uint32_t)rp->depth) rp->depth = (int)sp->depth;
    }
    bool counted = count_episodes(p, r, merged);
    free(merged);
    if (!counted) return fail(b, "out of memory");
    for (size_t i = 0; i < r->site_count; i++) {
        const struct report_site *s = &r->sites[i];
        if (s->tag && !printable(s->tag)) return fail(b, "a tag without a printable name");
        p->sites[p->nsites++] =
            (struct run_site){.phase = s->phase >= 0 ? r->phases[s->phase].name : NULL,
                              .tag = s->tag,
                              .class_name = p->classes[class_base + s->class_index].name,
                              .allocations = s->allocations,
                              .frees = s->frees,
                              .bytes = s->bytes,
                              .min_size = s->min_size,
                              .max_size = s->max_size,
                              .peak_live = s->peak_live_bytes,
                              .lifetime_ns = s->lifetime_ns};
    }
    bool timed = r->span_count > 0 && r->spans_dropped == 0; /* a cut timeline misleads */
    p->timed = p->reports ? p->timed && timed : timed;
    p->reports++;
    return true;
}

/* ---- the analysis ---- */

enum role { ROLE_TRANSIENT, ROLE_MODEL_STATE, ROLE_STEP_STATE };

/* Sites made under one tag, or else in one phase, with one role. */
struct group {
    const char *phase; /* where its first site was made */
    const char *tag;   /* NULL: untagged sites of PHASE */
    enum role role;
    uint64_t allocations, frees, bytes, min_size, max_size, peak_live, lifetime_ns;
    char recorded[160]; /* the recorded classes' faults and moves, or "" */
    const char *classes[8];
    size_t nclasses;
    char name[64];
    uint32_t priority;
    int depth;
};

struct plan {
    uint64_t steps, period_ns, peak_all, transient, model, step_state, small;
    uint64_t budget, min_budget;
    bool budget_given, fits_all;
    bool budget_card;      /* the recorded run's `budget card`, written again */
    uint64_t card_outside; /* what that run's card held outside umpol: budget is the rest */
    bool model_on_host; /* the budget has no room for any model state beside the step's blocks */
    bool memory_goal;
};

static const char *human(double bytes, char *buf, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (u < 4 && bytes >= 1024) {
        bytes /= 1024;
        u++;
    }
    snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", bytes, units[u]);
    return buf;
}

static const char *duration(double ns, char *buf, size_t len)
{
    if (ns >= 1e9)
        snprintf(buf, len, "%.1f s", ns / 1e9);
    else if (ns >= 1e6)
        snprintf(buf, len, "%.1f ms", ns / 1e6);
    else
        snprintf(buf, len, "%.0f us", ns / 1e3);
    return buf;
}

static const struct run_phase *phase_named(const struct run_profile *p, const char *name)
{
    for (size_t i = 0; name && i < p->nphases; i++)
        if (strcmp(p->phases[i].name, name) == 0) return &p->phases[i];
    return NULL;
}

/* State outlives the step: most of its blocks are live at exit, or they
 * lived two steps on average. Two, not one: gradients freed by the next
 * step's zero_grad live about a step and are transient, and a mean lifetime
 * near one step moves with the machine's load (a stall while blocks are live
 * lengthens them all, the step period is the least gap seen). */
static bool persistent(const struct run_site *s, uint64_t period_ns)
{
    uint64_t freed = s->frees;
    if (freed * 2 < s->allocations) /* most still live at exit */
        return true;
    return freed && s->lifetime_ns / freed > 2 * period_ns;
}

static bool same_name(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* Tagged sites are told apart by their tag alone, whatever their phase. */
static bool same_key(const struct group *a, const char *phase, const char *tag)
{
    return same_name(a->tag, tag) && (tag || same_name(a->phase, phase));
}

static struct group *group_for(struct group *g, size_t *n, const struct run_site *s, enum role role)
{
    for (size_t i = 0; i < *n; i++)
        if (g[i].role == role && same_key(&g[i], s->phase, s->tag)) return &g[i];
    g[*n] = (struct group){.phase = s->phase, .tag = s->tag, .role = role, .min_size = UINT64_MAX};
    return &g[(*n)++];
}

static void note_class(struct group *g, const char *name)
{
    for (size_t i = 0; i < g->nclasses; i++)
        if (strcmp(g->classes[i], name) == 0) return;
    if (g->nclasses < sizeof g->classes / sizeof g->classes[0]) g->classes[g->nclasses++] = name;
}

/* How often PH ran: its episodes where the timeline tells, else its entries. */
static uint64_t repeats(const struct run_profile *p, const struct run_phase *ph)
{
    return p->timed ? ph->episodes : ph->entries;
}

/* A step: from the timeline, the phase run in the most episodes, one a step,
 * and the least time between two of them (the first steps are slower);
 * without a timeline (or a whole one), or when no phase repeats over its
 * stretches, the outermost repeated phases entered most often and their
 * time per entry. Either way a micro-step of gradient accumulation counts
 * as a step. Without a repeated phase the run is one step. */
static void step_period(struct run_profile *p, struct plan *pl)
{
    bool repeated = false;
    for (size_t i = 0; p->timed && i < p->nphases; i++)
        repeated |= p->phases[i].episodes > 1;
    if (!repeated) /* no phase repeats over stretches: count entries, as without a timeline */
        p->timed = false;
    if (p->timed) {
        for (size_t i = 0; i < p->nphases; i++) {
            const struct run_phase *ph = &p->phases[i];
            if (ph->episodes > 1 && ph->episodes >= pl->steps &&
                (ph->episodes > pl->steps || ph->episode_gap_ns > pl->period_ns)) {
                pl->steps = ph->episodes;
                pl->period_ns = ph->episode_gap_ns;
            }
        }
        if (pl->steps < 2) pl->period_ns = UINT64_MAX;
    } else {
        int depth = INT_MAX;
        for (size_t i = 0; i < p->nphases; i++)
            if (p->phases[i].entries > 1)
                depth = p->phases[i].depth < depth
                            ? (p->phases[i].depth < 0 ? 0 : p->phases[i].depth)
                            : depth;
        uint64_t ns = 0;
        for (size_t i = 0; i < p->nphases; i++)
            if (p->phases[i].entries > 1 &&
                (p->phases[i].depth < 0 ? 0 : p->phases[i].depth) == depth &&
                p->phases[i].entries > pl->steps)
                pl->steps = p->phases[i].entries;
        for (size_t i = 0; i < p->nphases; i++)
            if (p->phases[i].entries == pl->steps && pl->steps > 1 &&
                (p->phases[i].depth < 0 ? 0 : p->phases[i].depth) == depth)
                ns += p->phases[i].total_ns;
        pl->period_ns = pl->steps > 1 ? ns / p->reports / pl->steps : UINT64_MAX;
    }
    if (!pl->steps) pl->steps = 1;
    if (!pl->period_ns) pl->period_ns = 1;
}

/* Sites into groups; small sites are summed apart. Figures are per rank. */
static size_t build_groups(const struct run_profile *p, struct plan *pl, struct group *g)
{
    size_t n = 0, r = p->reports;
    for (size_t i = 0; i < p->nsites; i++) {
        const struct run_site *s = &p->sites[i];
        if (s->max_size < SMALL_BYTES) {
            pl->small += s->peak_live;
            continue;
        }
        enum role role = ROLE_TRANSIENT;
        if (persistent(s, pl->period_ns)) {
            const struct run_phase *ph = phase_named(p, s->phase);
            role = ph && repeats(p, ph) > 1 ? ROLE_STEP_STATE : ROLE_MODEL_STATE;
        }
        struct group *gr = group_for(g, &n, s, role);
        gr->allocations += s->allocations;
        gr->frees += s->frees;
        gr->bytes += s->bytes;
        gr->peak_live += s->peak_live;
        gr->lifetime_ns += s->lifetime_ns;
        gr->min_size = s->min_size < gr->min_size ? s->min_size : gr->min_size;
        gr->max_size = s->max_size > gr->max_size ? s->max_size : gr->max_size;
        note_class(gr, s->class_name);
    }
    pl->small /= r;
    for (size_t i = 0; i < n; i++) {
        g[i].allocations /= r;
        g[i].frees /= r;
        g[i].bytes /= r;
        g[i].peak_live /= r;
        const struct run_phase *ph = phase_named(p, g[i].phase);
        g[i].depth = ph && ph->depth > 0 ? ph->depth : 0;
    }
    return n;
}

/* Sizes of two groups of one phase (or tag) that do not overlap can tell them
 * apart; else they become one, of the role holding more bytes. */
static size_t merge_overlapping(struct group *g, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        for (size_t k = i + 1; k < n; k++) {
            if (!same_key(&g[i], g[k].phase, g[k].tag) || g[i].max_size < g[k].min_size ||
                g[k].max_size < g[i].min_size)
                continue;
            struct group *keep = g[i].bytes >= g[k].bytes ? &g[i] : &g[k];
            const struct group *gone = keep == &g[i] ? &g[k] : &g[i];
            keep->allocations += gone->allocations;
            keep->frees += gone->frees;
            keep->bytes += gone->bytes;
            keep->peak_live += gone->peak_live;
            keep->lifetime_ns += gone->lifetime_ns;
            keep->min_size = gone->min_size < keep->min_size ? gone->min_size : keep->min_size;
            keep->max_size = gone->max_size > keep->max_size ? gone->max_size : keep->max_size;
            for (size_t c = 0; c < gone->nclasses; c++)
                note_class(keep, gone->classes[c]);
            g[i] = *keep;
            memmove(&g[k], &g[k + 1], (n - k - 1) * sizeof *g);
            n--;
            k = i;
        }
    }
    return n;
}

static const char *role_word(enum role r)
{
    return r == ROLE_TRANSIENT ? "transient" : r == ROLE_MODEL_STATE ? "persistent" : "step_state";
}

static void name_group(struct group *g, struct group *all, size_t n)
{
    char base[48];
    const char *src = g->tag ? g->tag : g->phase ? g->phase : "outside";
    size_t o = 0;
    for (const char *c = src; *c && o < 24; c++)
        base[o++] =
            (char)((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9')
                       ? *c
                       : '_');
    base[o] = '\0';
    snprintf(g->name, sizeof g->name, "%s_%s%s", role_word(g->role), g->tag ? "tag_" : "", base);
    if (!g->tag && base[0] >= '0' && base[0] <= '9')
        snprintf(g->name, sizeof g->name, "%s_p%s", role_word(g->role), base);
    int suffix = 2;
    for (bool clash = true; clash;) {
        clash = !strcmp(g->name, "rest");
        for (size_t i = 0; i < n && !clash; i++)
            clash = &all[i] != g && all[i].name[0] && strcmp(all[i].name, g->name) == 0;
        if (clash) {
            char t[sizeof g->name];
            memcpy(t, g->name, sizeof t);
            snprintf(g->name, sizeof g->name, "%.50s_%d", t, suffix++ % 1000000);
        }
    }
}

static void recorded_figures(const struct run_profile *p, struct group *g)
{
    uint64_t faults = 0, evictions = 0, moved = 0;
    bool um = false;
    for (size_t c = 0; c < g->nclasses; c++)
        for (size_t i = 0; i < p->nclasses; i++)
            if (strcmp(p->classes[i].name, g->classes[c]) == 0) {
                faults += p->classes[i].gpu_faults;
                evictions += p->classes[i].evictions;
                moved += p->classes[i].evict_bytes + p->classes[i].prefetch_bytes +
                         p->classes[i].htod + p->classes[i].dtoh;
                um |= p->classes[i].profiled;
            }
    char b[32];
    size_t o = (size_t)snprintf(g->recorded, sizeof g->recorded, "Recorded in class%s ",
                                g->nclasses == 1 ? "" : "es");
    for (size_t c = 0; c < g->nclasses && o < sizeof g->recorded; c++)
        o += (size_t)snprintf(g->recorded + o, sizeof g->recorded - o, "%s'%s'", c ? ", " : "",
                              g->classes[c]);
    if (o < sizeof g->recorded)
        snprintf(g->recorded + o, sizeof g->recorded - o,
                 ": %" PRIu64 " GPU faults%s, %" PRIu64 " evictions, %s moved", faults,
                 um ? "" : " (not profiled)", evictions, human((double)moved, b, sizeof b));
}

static int by_order(const void *a, const void *b)
{
    const struct group *x = a, *y = b;
    if (!x->tag != !y->tag) /* tags first: a tagged block's phase class would also match it */
        return x->tag ? -1 : 1;
    if (x->depth != y->depth) /* inner phases first: an outer phase's glob also holds there */
        return y->depth - x->depth;
    if (x->role != y->role) return (int)x->role - (int)y->role;
    return (x->bytes < y->bytes) - (x->bytes > y->bytes);
}

/* Mean block size: larger state is evicted first (read over the link once a
 * step, where a small block costs a call per block). */
static int by_size_desc(const void *a, const void *b)
{
    const struct group *x = *(const struct group *const *)a, *y = *(const struct group *const *)b;
    double mx = (double)x->bytes / (double)(x->allocations ? x->allocations : 1);
    double my = (double)y->bytes / (double)(y->allocations ? y->allocations : 1);
    return (mx < my) - (mx > my);
}

/* Short-lived first: the transient blocks needed again soonest keep the GPU longest. */
static int by_lifetime(const void *a, const void *b)
{
    const struct group *x = *(const struct group *const *)a, *y = *(const struct group *const *)b;
    double lx = x->frees ? (double)x->lifetime_ns / (double)x->frees : 1e30;
    double ly = y->frees ? (double)y->lifetime_ns / (double)y->frees : 1e30;
    return (lx > ly) - (lx < ly);
}

static bool assign_priorities(struct group *g, size_t n)
{
    struct group **state = calloc(n + 1, sizeof *state), **trans = calloc(n + 1, sizeof *trans);
    if (!state || !trans) {
        free(state);
        free(trans);
        return false;
    }
    size_t ns = 0, nt = 0;
    for (size_t i = 0; i < n; i++) {
        if (g[i].role == ROLE_TRANSIENT)
            trans[nt++] = &g[i];
        else
            state[ns++] = &g[i];
    }
    qsort(state, ns, sizeof *state, by_size_desc);
    qsort(trans, nt, sizeof *trans, by_lifetime);
    /* Step state (read once a step where it lives) below model state. */
    uint32_t next = 10;
    for (size_t i = 0; i < ns; i++)
        if (state[i]->role == ROLE_STEP_STATE) state[i]->priority = next < 400 ? next++ : 400;
    for (size_t i = 0; i < ns; i++)
        if (state[i]->role == ROLE_MODEL_STATE) state[i]->priority = next < 400 ? next++ : 400;
    for (size_t i = 0; i < nt; i++)
        trans[nt - 1 - i]->priority = (uint32_t)(500 + (i < 400 ? i : 400));
    free(state);
    free(trans);
    return true;
}

/* ---- writing the policy ---- */

/* NAME as a policy string (tags are matched whole, not as globs). */
static void print_string(FILE *f, const char *name)
{
    fputc('"', f);
    for (const char *c = name; *c; c++) {
        if (*c == '"' || *c == '\\') fputc('\\', f);
        fputc(*c, f);
    }
    fputc('"', f);
}

static void print_glob(FILE *f, const char *name)
{
    fputc('"', f);
    for (const char *c = name; *c; c++) {
        if (*c == '*' || *c == '?' || *c == '\\')
            fputs("\\\\", f); /* a glob escape, itself escaped for the string */
        if (*c == '"' || *c == '\\') fputc('\\', f);
        fputc(*c, f);
    }
    fputc('"', f);
}

/* A size in the largest of a policy's units that holds it exactly. */
static void print_size(FILE *f, uint64_t bytes)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (u < 4 && bytes >= 1024 && bytes % 1024 == 0) {
        bytes /= 1024;
        u++;
    }
    fprintf(f, "%" PRIu64 "%s", bytes, units[u]);
}

static void print_size_up(FILE *f, uint64_t bytes)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (u < 4 && bytes >= 1024) {
        bytes = (bytes + 1023) / 1024;
        u++;
    }
    fprintf(f, "%" PRIu64 "%s", bytes, units[u]);
}

/* The predicate that matches G's sites, without "match" and ";". */
static void print_predicate(FILE *f, const struct group *g, const struct group *all, size_t n)
{
    if (g->tag) {
        fputs("tag ", f);
        print_string(f, g->tag);
    } else if (g->phase) {
        fputs("phase ", f);
        print_glob(f, g->phase);
    } else {
        fputs("not phase \"*\"", f);
    }
    /* Another group of the same phase or tag: tell them apart by size. */
    bool shared = false;
    for (size_t i = 0; i < n; i++)
        shared |= &all[i] != g && same_key(&all[i], g->phase, g->tag);
    fputs(" and size ", f);
    if (shared) {
        print_size(f, g->min_size);
        fputs("..", f);
        print_size_up(f, g->max_size);
    } else {
        fputs(">= ", f);
        print_size(f, SMALL_BYTES);
    }
}

static void print_match(FILE *f, const struct group *g, const struct group *all, size_t n)
{
    fputs("    match ", f);
    print_predicate(f, g, all, n);
    fputs(";\n", f);
}

/* G's figures: the comment's first lines. */
static void print_figures(FILE *f, const struct group *g, const struct plan *pl)
{
    char b[4][32];
    double life = g->frees ? (double)g->lifetime_ns / (double)g->frees : 0;
    fprintf(f, "%" PRIu64 " allocations of %s%s%s (%s in all), %s live at once; ", g->allocations,
            human((double)g->min_size, b[0], 32), g->min_size == g->max_size ? "" : "..",
            g->min_size == g->max_size ? "" : human((double)g->max_size, b[1], 32),
            human((double)g->bytes, b[2], 32), human((double)g->peak_live, b[3], 32));
    if (g->frees)
        fprintf(f, "mean lifetime %s", duration(life, b[0], 32));
    else
        fputs("never freed", f);
    if (pl->steps > 1)
        fprintf(f, " (a step takes %s).\n", duration((double)pl->period_ns, b[1], 32));
    else
        fputs(" (no repeated phase: the run is one step).\n", f);
    fprintf(f, "# %s.\n", g->recorded);
}

/* Untagged transient groups FROM..TO-1, next to each other in the order
 * classes are tried: one class, NAME. A class keeps its own free space, so
 * blocks freed by one phase's class would have to leave the GPU before the
 * next phase's class could use the room; in one class the next phase reuses
 * them where they are. (Only neighbours: a group after a state class must
 * stay after it, or its outer phase would take the state's blocks.) */
static void print_transients(FILE *f, const struct group *g, size_t from, size_t to, size_t n,
                             const struct plan *pl, const char *name)
{
    uint32_t priority = 0;
    fputs("\n# Made and freed within a step (activations, gradients), in one class so that "
          "what one phase frees the next reuses on the GPU; plain device memory, never evicted, "
          "so a step never waits for them to come back:\n",
          f);
    for (size_t i = from; i < to; i++) {
        if (g[i].phase)
            fprintf(f, "# In phase '%s': ", g[i].phase);
        else
            fputs("# Outside every phase: ", f);
        print_figures(f, &g[i], pl);
        priority = g[i].priority > priority ? g[i].priority : priority;
    }
    fprintf(f, "class %s {\n    match ", name);
    for (size_t i = from; i < to; i++) {
        if (i > from) fputs("\n       or ", f);
        print_predicate(f, &g[i], g, n);
    }
    fprintf(f, ";\n    memory device;\n    priority %u;\n}\n", priority);
}

static void print_group(FILE *f, const struct group *g, const struct group *all, size_t n,
                        const struct plan *pl)
{
    fputs("\n# ", f);
    print_figures(f, g, pl);
    if (g->tag) {
        fputs("# Tag ", f);
        print_string(f, g->tag);
        fprintf(f,
                " (first seen in %s%s%s): its own class, ahead of the phases' classes, placed "
                "by its lifetime like them.\n",
                g->phase ? "phase '" : "no phase", g->phase ? g->phase : "", g->phase ? "'" : "");
    }
    /* What the blocks are likely to be; a tag names them itself. */
    const char *kind = g->role == ROLE_TRANSIENT     ? "activations, gradients"
                       : g->role == ROLE_MODEL_STATE ? "model state"
                                                     : "optimizer-like state";
    if (g->tag) kind = "tagged";
    bool on_gpu = pl->fits_all;
    switch (g->role) {
    case ROLE_TRANSIENT:
        fprintf(f,
                "# Made and freed within a step (%s): plain device memory, never evicted, so a "
                "step never waits for them to come back.\n",
                kind);
        break;
    case ROLE_MODEL_STATE:
        if (on_gpu)
            fprintf(f, "# Kept for the whole run (%s): the budget holds it all, on the GPU.\n",
                    kind);
        else if (pl->memory_goal)
            fprintf(f,
                    "# Kept for the whole run (%s): in pinned host memory, mapped by the GPU, "
                    "which reads it over the link (goal: memory).\n",
                    kind);
        else if (pl->model_on_host)
            fprintf(f,
                    "# Kept for the whole run (%s): the budget has no room for it beside the "
                    "step's own blocks, so it lives in pinned host memory near the GPU, which "
                    "reads it over the link where it is and never moves it; the card holds no "
                    "page of it. This suits weights read once a pass, as mixed precision does "
                    "(each is cast to a 16-bit copy on the GPU); a job that multiplies by "
                    "full-precision weights directly reads them over the link many times a step "
                    "and needs a budget with room for them.\n",
                    kind);
        else
            fprintf(f,
                    "# Kept for the whole run (%s): on the GPU, but movable memory that leaves it "
                    "for anything transient when the budget is short (the card gets the memory "
                    "back): once on the host it is read over the link where it is, with no "
                    "further moves.\n",
                    kind);
        break;
    case ROLE_STEP_STATE:
        if (on_gpu)
            fprintf(f,
                    "# Made in a repeated phase and kept (%s): the budget holds it all, on the "
                    "GPU.\n",
                    kind);
        else if (pl->memory_goal)
            fprintf(f,
                    "# Made in a repeated phase and kept (%s, read and written once a step): in "
                    "pinned host memory near the GPU, mapped by it, never moved.\n",
                    kind);
        else
            fprintf(f,
                    "# Made in a repeated phase and kept (%s, read and written once a step): "
                    "what the budget has room for beside the step's peak on the GPU (spare), the "
                    "rest in pinned host memory near the GPU, mapped by it, never moved (the "
                    "class after).\n",
                    kind);
        break;
    }
    if (g->role == ROLE_STEP_STATE && !on_gpu && !pl->memory_goal) {
        /* Made after the step's peak was seen: the runtime knows its room. */
        fprintf(f, "class %s_gpu {\n    match ", g->name);
        print_predicate(f, g, all, n);
        fputs(" and spare;\n    memory device;\n}\n", f);
    }
    fprintf(f, "class %s {\n", g->name);
    print_match(f, g, all, n);
    if (g->role == ROLE_TRANSIENT) {
        /* Device memory: the card holds what the budget counts, and a new
         * slab of it sends movable state to the host first. */
        fputs("    memory device;\n", f);
    } else if (g->role == ROLE_MODEL_STATE && !on_gpu && !pl->memory_goal && !pl->model_on_host) {
        fputs("    memory movable;\n", f);
    } else if (on_gpu) {
        fputs("    place gpu;\n    access gpu;\n    prefetch gpu on alloc;\n", f);
    } else {
        /* Pinned host memory, not managed memory advised to the host: the
         * driver may keep managed pages the GPU touches on the card, where
         * the budget does not see them. */
        fputs("    memory host;\n", f);
        fputs("    place host near;\n", f);
        fputs("}\n", f);
        return;
    }
    fprintf(f, "    priority %u;\n}\n", g->priority);
}

/* A PyTorch training step (the Python package's "backward" and "optimizer*"
 * phases) whose optimizer state the draft puts on the host, in part or all:
 * `update in backward;`, so that the state crosses the link beside the
 * backward pass instead of after it. */
static void print_update(FILE *f, const struct plan *pl, const struct group *g, size_t n)
{
    bool backward = false, optimizer_state = false;
    for (size_t i = 0; i < n; i++) {
        backward |= g[i].phase && strcmp(g[i].phase, "backward") == 0;
        optimizer_state |= g[i].role == ROLE_STEP_STATE && !g[i].tag && g[i].phase &&
                           strncmp(g[i].phase, "optimizer", 9) == 0;
    }
    if (!backward || !optimizer_state || pl->fits_all)
        return;
    fputs("\n", f);
    fputs("# The optimizer's state lies on the host, at least in part. In a PyTorch job (the "
          "Python package; other jobs are not changed) each parameter is then updated in the "
          "backward pass, as soon as its gradient is complete, so the state crosses the link "
          "beside the backward pass instead of after it (umpol(5)). The package turns this off "
          "by itself, saying why, for a job that clips or accumulates its gradients; remove "
          "the line for a job whose own code reads them between backward() and step().\n",
          f);
    fputs("update in backward;\n", f);
}

static void print_policy(FILE *f, const struct plan *pl, const struct group *g, size_t n,
                         char **paths, size_t npaths)
{
    char b[6][32];
    fputs("# Drafted by umpol suggest from", f);
    for (size_t i = 0; i < npaths; i++)
        fprintf(f, " %s", paths[i]);
    fputs(".\n", f);
    if (pl->steps > 1)
        fprintf(f, "# Per rank: %" PRIu64 " steps of %s; ", pl->steps,
                duration((double)pl->period_ns, b[0], 32));
    else
        fputs("# Per rank: no repeated phase, so one step; ", f);
    fprintf(f,
            "at most %s live at once, of which %s made and freed within a step, %s model "
            "state, %s state made in a repeated phase and %s in blocks under ",
            human((double)pl->peak_all, b[1], 32), human((double)pl->transient, b[2], 32),
            human((double)pl->model, b[3], 32), human((double)pl->step_state, b[4], 32),
            human((double)pl->small, b[5], 32));
    fprintf(f, "%s.\n", human(SMALL_BYTES, b[0], 32));
    fprintf(f,
            "# The smallest budget that can work is %s: transient blocks and small ones on "
            "the GPU, everything else on the host.\n",
            human((double)pl->min_budget, b[0], 32));
    fputs("umpol 1;\n\n", f);
    if (pl->budget_given) {
        fputs(pl->budget_card ? "budget card " : "budget gpu ", f);
        print_size(f, pl->budget + pl->card_outside);
        const char *why = pl->fits_all      ? "everything fits"
                          : pl->memory_goal ? "goal memory: all state on the host"
                          : pl->model_on_host ? "no room for the model state: all state on the host"
                          : pl->budget >= pl->min_budget + pl->model
                              ? "room for the model state, not for the step state"
                              : "room for part of the model state, movable, the rest on the host";
        if (pl->budget_card)
            fprintf(f, ";   # %s for umpol (%s held outside it when recorded): %s\n",
                    human((double)pl->budget, b[0], 32), human((double)pl->card_outside, b[1], 32),
                    why);
        else
            fprintf(f, ";   # %s: %s\n", human((double)pl->budget, b[0], 32), why);
    }
    fputs("cap managed 90%;\n", f);
    print_update(f, pl, g, n);
    int runs = 0;
    for (size_t i = 0; i < n;) {
        size_t end = i;
        while (end < n && g[end].role == ROLE_TRANSIENT && !g[end].tag)
            end++;
        if (end - i < 2) {
            print_group(f, &g[i], g, n, pl);
            i++;
            continue;
        }
        char name[32];
        runs++;
        if (runs == 1)
            snprintf(name, sizeof name, "transient");
        else
            snprintf(name, sizeof name, "transient_%d", runs);
        print_transients(f, g, i, end, n, pl, name);
        i = end;
    }
    fprintf(f, "\n# Blocks under %s and anything else: plain device memory (%s live at once).\n",
            human(SMALL_BYTES, b[0], 32), human((double)pl->small, b[1], 32));
    fputs("class rest {\n    match any;\n    memory device;\n}\n", f);
}

/* Comment lines of TEXT wrapped at 80 columns, on word boundaries. */
static char *wrap_comments(const char *text, size_t *len)
{
    char *out = NULL;
    size_t out_len = 0;
    FILE *f = open_memstream(&out, &out_len);
    if (!f) return NULL;
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        if (n <= 80 || line[0] != '#') {
            fwrite(line, 1, n, f);
        } else {
            size_t col = 0;
            for (const char *w = line + 1; w < line + n;) {
                while (w < line + n && *w == ' ')
                    w++;
                const char *we = w;
                while (we < line + n && *we != ' ')
                    we++;
                if (we == w) break;
                if (col && col + 1 + (size_t)(we - w) > 80) {
                    fputc('\n', f);
                    col = 0;
                }
                col += (size_t)fprintf(f, "%s%.*s", col ? " " : "# ", (int)(we - w), w);
                w = we;
            }
        }
        if (!end) break;
        fputc('\n', f);
        line = end + 1;
    }
    if (fclose(f) != 0) {
        free(out);
        return NULL;
    }
    *len = out_len;
    return out;
}

/* ---- options, output ---- */

static bool parse_budget(const char *s, uint64_t gpu_bytes, uint64_t *out, bool *percent_out)
{
    /* Digits, at most one decimal point, then the unit: no sign, space,
     * exponent or hex, which strtod alone would take. */
    size_t digits = strspn(s, "0123456789");
    if (digits == 0) return false;
    if (s[digits] == '.') {
        size_t frac = strspn(s + digits + 1, "0123456789");
        if (frac == 0) return false;
        digits += 1 + frac;
    }
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end != s + digits || errno || !isfinite(v) || v <= 0) return false;
    static const struct {
        const char *unit;
        double mult;
    } units[] = {{"", 1},
                 {"B", 1},
                 {"KiB", 1024.0},
                 {"MiB", 1048576.0},
                 {"GiB", 1073741824.0},
                 {"TiB", 1099511627776.0}};
    *percent_out = strcmp(end, "%") == 0;
    if (*percent_out) {
        if (v > 100) return false;
        *out = (uint64_t)((double)gpu_bytes / 100.0 * v);
        return gpu_bytes == 0 || *out > 0;
    }
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcmp(end, units[i].unit) == 0 && v * units[i].mult < 1.8e19) {
            *out = (uint64_t)(v * units[i].mult);
            return *out > 0;
        }
    return false;
}

/* Write TEXT to PATH whole or not at all (util/outfile.h): 0 or -errno. */
static int write_whole(const char *path, const char *text, size_t len)
{
    struct outfile out;
    int rc = outfile_open(&out, path);
    if (rc == 0) {
        fwrite(text, 1, len, out.f); /* an error shows in outfile_close */
        rc = outfile_close(&out, path);
    }
    return rc;
}

/* Analyse the reports and write the policy; 0, 1 (budget cannot work) or 2. */
static int suggest_from_reports(char **paths, size_t npaths, const char *budget_arg,
                                bool memory_goal, const char *out_path)
{
    struct run_profile prof = {0};
    struct report *reports = calloc(npaths, sizeof *reports);
    int rc = EXIT_USAGE;
    struct group *g = NULL;
    char *text = NULL;
    size_t text_len = 0;
    if (!reports) goto done;
    for (size_t i = 0; i < npaths; i++) {
        struct bad b = {""};
        char why[512];
        enum report_status st = report_load(&reports[i], paths[i], why, sizeof why);
        if (st != REPORT_OK) {
            fprintf(stderr, "umpol suggest: %s; nothing written\n", why);
            goto done;
        }
        if (!profile_from_report(&prof, &reports[i], &b)) {
            fprintf(stderr, "umpol suggest: %s: %s; nothing written\n", paths[i], b.why);
            goto done;
        }
    }
    struct plan pl = {.memory_goal = memory_goal};
    step_period(&prof, &pl);
    for (size_t i = 0; i < prof.nclasses; i++)
        pl.peak_all += prof.classes[i].peak_bytes;
    pl.peak_all /= prof.reports;
    g = calloc(prof.nsites + 1, sizeof *g);
    if (!g) goto done;
    size_t n = merge_overlapping(g, build_groups(&prof, &pl, g));
    if (n == 0 && pl.small == 0) {
        fprintf(stderr, "umpol suggest: the reports record no allocation; nothing written\n");
        goto done;
    }
    uint64_t transient_sum = 0, transient_max = 0;
    for (size_t i = 0; i < n; i++) {
        recorded_figures(&prof, &g[i]);
        if (g[i].role == ROLE_TRANSIENT) {
            transient_sum += g[i].peak_live;
            transient_max = g[i].peak_live > transient_max ? g[i].peak_live : transient_max;
        } else {
            *(g[i].role == ROLE_MODEL_STATE ? &pl.model : &pl.step_state) += g[i].peak_live;
        }
    }
    /* Groups peak at different moments: what is live at the run's peak beside
     * the state is the transient peak, bounded by the sum of the groups' peaks. */
    uint64_t beside = pl.peak_all > pl.model + pl.step_state + pl.small
                          ? pl.peak_all - pl.model - pl.step_state - pl.small
                          : 0;
    pl.transient = beside < transient_max   ? transient_max
                   : beside > transient_sum ? transient_sum
                                            : beside;
    uint64_t need_all = pl.transient + pl.model + pl.step_state + pl.small;
    pl.min_budget = pl.transient + pl.small;
    bool percent = false;
    if (budget_arg) {
        if (!parse_budget(budget_arg, prof.gpu_bytes, &pl.budget, &percent)) {
            fprintf(stderr,
                    "umpol suggest: --budget %s: expected a size such as 8GiB or a "
                    "percentage such as 60%%\n",
                    budget_arg);
            goto done;
        }
        if (percent && prof.gpu_bytes == 0) {
            fprintf(stderr, "umpol suggest: --budget %s: the reports do not say the GPU's "
                            "memory; give a size such as 8GiB\n", budget_arg);
            goto done;
        }
        pl.budget_given = true;
    } else if (prof.budget_bytes) {
        /* The recorded run's `budget card` again: umpol's share is what the
         * card left it then. */
        pl.budget_card = prof.budget_card;
        pl.card_outside = prof.budget_card ? prof.card_outside : 0;
        pl.budget = prof.budget_bytes > pl.card_outside ? prof.budget_bytes - pl.card_outside : 0;
        pl.budget_given = true;
    } else if (memory_goal) { /* the least GPU memory that works, in whole MiB */
        pl.budget = (pl.min_budget + (1u << 20) - 1) & ~(uint64_t)((1u << 20) - 1);
        pl.budget_given = true;
    }
    char b[5][32];
    if (pl.budget_given && pl.budget < pl.min_budget) {
        fprintf(stderr,
                "umpol suggest: a budget of %s cannot work: within one step %s of blocks made and "
                "freed in the step are live at once, and %s of blocks under %s, all of which "
                "must be on the GPU (moving them out and back every step costs more than any "
                "saving). The smallest budget that can work is %s (%" PRIu64
                " bytes), with all state on the host; nothing written.\n",
                human((double)pl.budget, b[0], 32), human((double)pl.transient, b[1], 32),
                human((double)pl.small, b[2], 32), human(SMALL_BYTES, b[3], 32),
                human((double)pl.min_budget, b[4], 32), pl.min_budget);
        rc = EXIT_INVALID;
        goto done;
    }
    pl.fits_all = !memory_goal && (!pl.budget_given || pl.budget >= need_all);
    /* Movable model state keeps on the GPU what the step leaves room for: with
     * room for one piece of it, that beats all of it on the host (weights are
     * read every pass, so each byte kept saves link time each pass). */
    pl.model_on_host = !pl.fits_all && pl.budget < pl.min_budget + MODEL_ROOM_MIN;
    if (!assign_priorities(g, n)) goto done;
    qsort(g, n, sizeof *g, by_order);
    for (size_t i = 0; i < n; i++)
        g[i].name[0] = '\0';
    for (size_t i = 0; i < n; i++)
        name_group(&g[i], g, n);
    FILE *mem = open_memstream(&text, &text_len);
    if (!mem) goto done;
    print_policy(mem, &pl, g, n, paths, npaths);
    if (fclose(mem) != 0) goto done;
    char *wrapped = wrap_comments(text, &text_len);
    free(text);
    if (!(text = wrapped)) goto done;
    /* What is written must pass `umpol check` with nothing to say. */
    struct policy pol;
    enum policy_status st = policy_load_text(&pol, "suggested policy", text, text_len);
    bool clean = st == POLICY_VALID && pol.diags.warnings == 0;
    if (!clean) {
        diag_print(stderr, &pol.src, &pol.diags, false);
        fputs("umpol suggest: internal error: the drafted policy is not clean; nothing written\n",
              stderr);
    }
    policy_free(&pol);
    if (!clean) goto done;
    if (out_path) {
        int err = write_whole(out_path, text, text_len);
        if (err) {
            fprintf(stderr, "umpol suggest: cannot write %s: %s\n", out_path, strerror(-err));
            goto done;
        }
    } else if (fwrite(text, 1, text_len, stdout) != text_len || fflush(stdout) != 0) {
        goto done;
    }
    rc = EXIT_VALID;
done:
    for (size_t i = 0; reports && i < npaths; i++)
        report_free(&reports[i]);
    free(reports);
    free(g);
    free(text);
    profile_free(&prof);
    return rc;
}

/* Record COMMAND once under plain device memory, then draft from its reports. */
static const char record_policy[] = "# umpol suggest's recording policy: every allocation plain "
                                    "device memory, as without umpol.\numpol 1;\n"
                                    "class everything {\n    match any;\n    memory device;\n}\n";

static int suggest_from_command(char **cmd, const char *budget_arg, bool memory_goal,
                                const char *out_path)
{
    char dir[2048];
    if (cli_temp_dir("suggest", "umpol-suggest", dir, sizeof dir) != 0)
        return EXIT_USAGE;
    char policy[sizeof dir + 32], report[sizeof dir + 32];
    snprintf(policy, sizeof policy, "%s/record.umpol", dir);
    snprintf(report, sizeof report, "%s/report-%%p.json", dir);
    FILE *f = fopen(policy, "w");
    bool ok = f && fputs(record_policy, f) >= 0;
    ok = f && fclose(f) == 0 && ok;
    int rc = EXIT_USAGE;
    if (!ok) {
        fprintf(stderr, "umpol suggest: cannot write %s\n", policy);
    } else {
        fprintf(stderr, "umpol suggest: recording one run of %s (plain device memory)\n", cmd[0]);
        rc = run_job(policy, report, false, true, cmd);
        if (rc != 0)
            fprintf(stderr,
                    "umpol suggest: the job exited with status %d; suggesting from what "
                    "it recorded\n",
                    rc);
        char **paths = NULL; /* every report the job's processes wrote, however many */
        size_t n = 0;
        bool listed = true;
        DIR *d = opendir(dir);
        for (struct dirent *e; d && (e = readdir(d));) {
            if (strncmp(e->d_name, "report-", 7) != 0) continue;
            char *path = malloc(strlen(dir) + strlen(e->d_name) + 2);
            if (!path || !grow((void **)&paths, n, 1, sizeof *paths)) {
                free(path);
                listed = false;
                break;
            }
            sprintf(path, "%s/%s", dir, e->d_name);
            paths[n++] = path;
        }
        if (d) closedir(d);
        if (!listed) {
            fprintf(stderr, "umpol suggest: out of memory listing the job's reports in %s; "
                            "nothing written\n", dir);
            rc = EXIT_USAGE;
        } else if (n == 0) {
            fprintf(stderr, "umpol suggest: the job wrote no report (it made no CUDA allocation "
                            "umpol could see, or did not exit normally); nothing written\n");
            rc = EXIT_USAGE;
        } else {
            rc = suggest_from_reports(paths, n, budget_arg, memory_goal, out_path);
        }
        for (size_t i = 0; i < n; i++) {
            unlink(paths[i]);
            free(paths[i]);
        }
        free(paths);
    }
    unlink(policy);
    rmdir(dir);
    return rc;
}

int cmd_suggest(int argc, char **argv)
{
    const char *budget = NULL, *out = NULL;
    bool memory_goal = false;
    for (int c; (c = cli_getopt("suggest", argc, argv)) != -1;) {
        if (c == 'b') {
            budget = optarg;
        } else if (c == 'g') {
            if (strcmp(optarg, "speed") != 0 && strcmp(optarg, "memory") != 0)
                return cli_usage_error("suggest", "--goal must be speed or memory");
            memory_goal = strcmp(optarg, "memory") == 0;
        } else if (c == 'o') {
            out = optarg;
        }
    }
    if (optind >= argc) return cli_usage_error("suggest", "no report and no command given");
    /* What can be told wrong now is, before a command runs for hours. */
    uint64_t ignored;
    bool percent;
    if (budget && !parse_budget(budget, 0, &ignored, &percent)) /* 0: the form only */
        return cli_usage_error("suggest", "--budget %s: expected a size such as 8GiB or a "
                               "percentage such as 60%%", budget);
    int out_err = out ? outfile_check(out) : 0;
    if (out_err)
        return cli_usage_error("suggest", "--output %s: cannot write there: %s", out,
                               strerror(-out_err));
    /* `--` before the operands: a command to record, not reports. */
    int rc;
    if (strcmp(argv[optind - 1], "--") == 0 && argv[optind - 1] != out &&
        argv[optind - 1] != budget) {
        rc = suggest_from_command(argv + optind, budget, memory_goal, out);
    } else {
        for (int i = optind; i < argc; i++)
            if (strcmp(argv[i], "--") == 0)
                return cli_usage_error("suggest", "give reports or -- COMMAND, not both");
        rc = suggest_from_reports(argv + optind, (size_t)(argc - optind), budget, memory_goal, out);
    }
    return out ? rc : cli_finish_stdout("suggest", rc);
}
