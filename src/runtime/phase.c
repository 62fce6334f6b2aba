/* Phases, tags and marks.
 *
 * Phases are process-wide: NVTX ranges opened on the main thread classify
 * allocations made on any thread (PyTorch's autograd threads allocate during
 * `backward`). Each phase name is matched against the policy's globs once, on
 * first use; opening and closing then only count, and the classifier reads
 * one bit per glob. Tags are per thread. What a phase triggers is not decided
 * here: opening and closing return the glob bits, and the caller acts on them. */
#include <stdlib.h>
#include <string.h>

#include "runtime/log.h"
#include "runtime/phase.h"
#include "runtime/state.h"
#include "util/clock.h"

/* Per phase name: its glob bits, cached. Index RT_MAX_PHASE_NAMES-1 collects the overflow. */
static uint64_t *name_bits[RT_MAX_PHASE_NAMES];

int phases_init(struct runtime *rt)
{
    if (pthread_mutex_init(&rt->phase_lock, NULL) != 0) /* first: phases_free destroys it */
        return -1;
    rt->phase_words = program_bitset_words(rt->program->phase_glob_count);
    rt->phase_open_count = calloc(rt->program->phase_glob_count + 1, sizeof *rt->phase_open_count);
    rt->phase_bits = calloc(rt->phase_words, sizeof *rt->phase_bits);
    return rt->phase_open_count && rt->phase_bits ? 0 : -1;
}

void phases_free(struct runtime *rt)
{
    for (size_t i = 0; i < rt->phase_stat_count; i++) {
        free(rt->phase_stats[i].name);
        free(name_bits[i]);
        name_bits[i] = NULL;
    }
    rt->phase_stat_count = 0;
    free(rt->phase_open_count);
    free(rt->spans);
    free(rt->openings);
    rt->openings = NULL;
    rt->opening_count = rt->opening_cap = 0;
    free((void *)rt->phase_bits);
    pthread_mutex_destroy(&rt->phase_lock);
}

/* Index of NAME's statistics and cached bits (phase_lock held). */
static size_t phase_index(struct runtime *rt, const char *name)
{
    for (size_t i = 0; i < rt->phase_stat_count; i++)
        if (strcmp(rt->phase_stats[i].name, name) == 0)
            return i;
    size_t i = rt->phase_stat_count;
    const char *stored = name;
    if (i == RT_MAX_PHASE_NAMES - 1) {
        stored = "(other phases)";
        for (size_t k = 0; k < i; k++)
            if (strcmp(rt->phase_stats[k].name, stored) == 0)
                return k;
    }
    if (i >= RT_MAX_PHASE_NAMES)
        return RT_MAX_PHASE_NAMES - 1;
    char *copy = strdup(stored);
    if (!copy) /* out of memory: the phase counts among the others, unnamed */
        return RT_MAX_PHASE_NAMES - 1;
    rt->phase_stats[i] = (struct phase_stat){.name = copy};
    name_bits[i] = calloc(rt->phase_words, sizeof(uint64_t));
    if (name_bits[i] && stored == name)
        program_match_phase(rt->program, name, name_bits[i]);
    rt->phase_stat_count++;
    return i;
}

struct open_phase {
    size_t index;
    uint64_t seq; /* its entry in rt->openings, 0: none (out of memory) */
    size_t span;  /* in rt->spans, or SIZE_MAX when the timeline is full */
    uint64_t start_ns;
    uint64_t *bits; /* the bits this opening set (may differ for the overflow slot) */
};

static _Thread_local struct open_phase *phase_stack;
static _Thread_local size_t phase_depth, phase_cap;

/* ---- tags: a per-thread stack, with a count per tag for nesting ---- */

/* A pushed tag: its index among the policy's tags and among the report's
 * site tags (-1: not one of them). */
struct pushed_tag {
    int policy, site;
};

static _Thread_local struct pushed_tag *tag_stack;
static _Thread_local size_t tag_depth, tag_cap;
static _Thread_local uint32_t *tag_counts;
static _Thread_local uint64_t *tag_bits;
static _Thread_local size_t tag_slots; /* tags tag_counts and tag_bits have room for */
static _Thread_local bool tag_any;

/* Per-thread state is freed when its thread exits (a key destructor runs
 * while the thread's own storage is still there). */
static pthread_key_t thread_key;
static pthread_once_t thread_key_once = PTHREAD_ONCE_INIT;

static uint64_t *phase_close(struct runtime *rt, size_t at, uint64_t ts, uint64_t *outer);

/* RT: the runtime the thread's phases were opened in. Phases a thread leaves
 * open when it exits are closed: they hold for no one any more (no trigger
 * runs for them; the CUPTI timestamp of their end is unknown). */
static void thread_state_free(void *rt) /* never NULL: a key's destructor runs for a value only */
{
    while (phase_depth)
        free(phase_close(rt, phase_depth - 1, 0, NULL));
    free(phase_stack);
    free(tag_stack);
    free(tag_counts);
    free(tag_bits);
    phase_stack = NULL;
    tag_stack = NULL;
    tag_counts = NULL;
    tag_bits = NULL;
    tag_slots = 0;
    phase_depth = phase_cap = tag_depth = tag_cap = 0;
    tag_any = false;
}

static void thread_key_create(void)
{
    pthread_key_create(&thread_key, thread_state_free);
}

static void track_thread(struct runtime *rt)
{
    pthread_once(&thread_key_once, thread_key_create);
    pthread_setspecific(thread_key, rt);
}

/* Add (delta = +1) or remove (-1) one opening of the globs in BITS; OUTER,
 * where given, gets those an added opening is the first of, or a removed
 * one the last of. */
static void count_globs(struct runtime *rt, const uint64_t *bits, int delta, uint64_t *outer)
{
    for (size_t w = 0; w < rt->phase_words; w++) {
        for (uint64_t word = bits[w]; word; word &= word - 1) {
            size_t g = w * 64 + (size_t)__builtin_ctzll(word);
            uint64_t mask = 1ull << (g & 63);
            if (delta > 0 && rt->phase_open_count[g]++ == 0) {
                atomic_fetch_or(&rt->phase_bits[w], mask);
                if (outer)
                    outer[w] |= mask;
            }
            else if (delta < 0 && rt->phase_open_count[g] > 0 &&
                     --rt->phase_open_count[g] == 0) {
                atomic_fetch_and(&rt->phase_bits[w], ~mask);
                if (outer)
                    outer[w] |= mask;
            }
        }
    }
}

/* Note an opening of phase INDEX process-wide; its sequence number, 0 when
 * there is no memory for it (once its thread has closed everything, other
 * threads' allocations are then recorded under an opening before it).
 * phase_lock held. */
static uint64_t opening_add(struct runtime *rt, size_t index)
{
    if (rt->opening_count == rt->opening_cap) {
        size_t cap = rt->opening_cap ? rt->opening_cap * 2 : 32;
        struct open_opening *grown = realloc(rt->openings, cap * sizeof *grown);
        if (!grown) return 0;
        rt->openings = grown;
        rt->opening_cap = cap;
    }
    rt->openings[rt->opening_count++] = (struct open_opening){++rt->opening_seq, (uint32_t)index};
    return rt->opening_seq;
}

/* The phase allocations are recorded under: this thread's innermost, else
 * the latest opening still open on any thread (autograd's thread closing a
 * recomputed forward leaves the job's backward open). phase_lock held. */
static void phase_current_update(struct runtime *rt)
{
    int innermost = phase_depth                ? (int)phase_stack[phase_depth - 1].index
                    : rt->opening_count > 0 ? (int)rt->openings[rt->opening_count - 1].phase
                                             : -1;
    atomic_store_explicit(&rt->phase_current, innermost, memory_order_relaxed);
}

/* Forget opening SEQ. phase_lock held. */
static void opening_remove(struct runtime *rt, uint64_t seq)
{
    for (size_t k = rt->opening_count; seq && k-- > 0;)
        if (rt->openings[k].seq == seq) {
            memmove(&rt->openings[k], &rt->openings[k + 1],
                    (--rt->opening_count - k) * sizeof *rt->openings);
            break;
        }
    phase_current_update(rt);
}

const uint64_t *phases_push(struct runtime *rt, const char *name, uint64_t ts, uint64_t *outer)
{
    if (phase_depth == phase_cap) {
        track_thread(rt);
        size_t cap = phase_cap ? phase_cap * 2 : 16;
        struct open_phase *grown = realloc(phase_stack, cap * sizeof *grown);
        if (!grown)
            return NULL;
        phase_stack = grown;
        phase_cap = cap;
    }
    uint64_t *bits = calloc(rt->phase_words, sizeof *bits);
    if (!bits)
        return NULL;
    pthread_mutex_lock(&rt->phase_lock);
    size_t i = phase_index(rt, name);
    if (i == RT_MAX_PHASE_NAMES - 1 || !name_bits[i])
        program_match_phase(rt->program, name, bits);
    else
        memcpy(bits, name_bits[i], rt->phase_words * sizeof *bits);
    rt->phase_stats[i].entries++;
    count_globs(rt, bits, +1, outer);
    uint64_t start = now_ns();
    size_t span = SIZE_MAX;
    if (rt->span_count == rt->span_cap && rt->span_cap < RT_SPANS_MAX) {
        size_t cap = rt->span_cap ? rt->span_cap * 2 : 256;
        struct phase_span *grown = realloc(rt->spans, cap * sizeof *grown);
        if (grown) {
            rt->spans = grown;
            rt->span_cap = cap;
        }
    }
    if (rt->span_count < rt->span_cap) {
        span = rt->span_count++;
        rt->spans[span] = (struct phase_span){start, 0, ts, 0, (uint32_t)i,
                                              (uint32_t)phase_depth};
    } else {
        rt->spans_dropped++;
    }
    uint64_t seq = opening_add(rt, i);
    pthread_mutex_unlock(&rt->phase_lock);
    phase_stack[phase_depth++] = (struct open_phase){i, seq, span, start, bits};
    atomic_store_explicit(&rt->phase_current, (int)i, memory_order_relaxed);
    return bits;
}

size_t phases_depth(void)
{
    return phase_depth;
}

/* Close the opening at position AT of this thread's stack; returns its bits. */
static uint64_t *phase_close(struct runtime *rt, size_t at, uint64_t ts, uint64_t *outer)
{
    struct open_phase op = phase_stack[at];
    memmove(&phase_stack[at], &phase_stack[at + 1], (--phase_depth - at) * sizeof *phase_stack);
    pthread_mutex_lock(&rt->phase_lock);
    count_globs(rt, op.bits, -1, outer);
    uint64_t end = now_ns();
    rt->phase_stats[op.index].total_ns += end - op.start_ns;
    if (op.span != SIZE_MAX) {
        rt->spans[op.span].end_ns = end;
        rt->spans[op.span].end_ts = ts;
    }
    opening_remove(rt, op.seq);
    pthread_mutex_unlock(&rt->phase_lock);
    return op.bits;
}

uint64_t *phases_pop(struct runtime *rt, uint64_t ts, uint64_t *outer)
{
    if (phase_depth == 0) {
        LOG(LOG_DEBUG, "phase exit without an open phase on this thread; ignored");
        return NULL;
    }
    return phase_close(rt, phase_depth - 1, ts, outer);
}

/* Automatic phases (the Python package's) close by name, so that the job's own
 * ranges opened inside them and still open are left alone. */
uint64_t *phases_pop_named(struct runtime *rt, const char *name, uint64_t ts, uint64_t *outer)
{
    for (size_t k = phase_depth; k-- > 0;) {
        pthread_mutex_lock(&rt->phase_lock);
        const char *open = rt->phase_stats[phase_stack[k].index].name; /* NULL: out of memory */
        bool match = open && strcmp(open, name) == 0;
        pthread_mutex_unlock(&rt->phase_lock);
        if (match)
            return phase_close(rt, k, ts, outer);
    }
    LOG(LOG_DEBUG, "no open phase named %s on this thread; ignored", name);
    return NULL;
}

const uint64_t *tag_bits_current(void)
{
    return tag_any ? tag_bits : NULL;
}

int tag_site_current(void)
{
    return tag_depth ? tag_stack[tag_depth - 1].site : -1;
}

void tag_push(struct runtime *rt, const char *name)
{
    const struct program *p = rt->program;
    track_thread(rt);
    if (tag_slots < p->tag_count) { /* first push, or a program with more tags (tests) */
        uint32_t *counts = calloc(p->tag_count, sizeof *counts);
        uint64_t *bits = calloc(program_bitset_words(p->tag_count), sizeof *bits);
        if (counts && bits) {
            if (tag_slots) {
                memcpy(counts, tag_counts, tag_slots * sizeof *counts);
                memcpy(bits, tag_bits, program_bitset_words(tag_slots) * sizeof *bits);
            }
            free(tag_counts);
            free(tag_bits);
            tag_counts = counts;
            tag_bits = bits;
            tag_slots = p->tag_count;
        } else {
            free(counts);
            free(bits);
        }
    }
    if (tag_depth == tag_cap) {
        size_t cap = tag_cap ? tag_cap * 2 : 16;
        struct pushed_tag *grown = realloc(tag_stack, cap * sizeof *grown);
        if (!grown)
            return;
        tag_stack = grown;
        tag_cap = cap;
    }
    int t = name && tag_slots >= p->tag_count ? program_tag_index(p, name) : -1;
    int site = -1;
    if (name && rt->sites) { /* the report names every tag, known to the policy or not */
        pthread_mutex_lock(&rt->lock);
        site = sites_tag_index(rt->sites, name);
        pthread_mutex_unlock(&rt->lock);
    }
    /* unknown tags are pushed too, to keep pops balanced */
    tag_stack[tag_depth++] = (struct pushed_tag){.policy = t, .site = site};
    if (t >= 0 && tag_counts[t]++ == 0) {
        tag_bits[t / 64] |= 1ull << (t % 64);
        tag_any = true;
    }
}

void tag_pop(void)
{
    if (tag_depth == 0)
        return;
    int t = tag_stack[--tag_depth].policy;
    if (t >= 0 && --tag_counts[t] == 0)
        tag_bits[t / 64] &= ~(1ull << (t % 64));
}

/* In the child of a fork, only the forking thread is left: the phases it has
 * open stay open (from the fork on, each with a new span), the phases other
 * threads had open are closed, and the counts start again. */
void phases_after_fork_child(struct runtime *rt, uint64_t ts)
{
    for (size_t i = 0; i < rt->phase_stat_count; i++) {
        rt->phase_stats[i].entries = 0;
        rt->phase_stats[i].total_ns = 0;
        memset(&rt->phase_stats[i].um, 0, sizeof rt->phase_stats[i].um);
    }
    memset(rt->phase_open_count, 0,
           (rt->program->phase_glob_count + 1) * sizeof *rt->phase_open_count);
    for (size_t w = 0; w < rt->phase_words; w++)
        atomic_store(&rt->phase_bits[w], 0);
    rt->span_count = rt->spans_dropped = 0;
    rt->opening_count = 0;
    uint64_t now = now_ns();
    for (size_t d = 0; d < phase_depth; d++) {
        struct open_phase *op = &phase_stack[d];
        count_globs(rt, op->bits, +1, NULL);
        op->seq = opening_add(rt, op->index);
        op->start_ns = now;
        op->span = rt->span_count < rt->span_cap ? rt->span_count++ : SIZE_MAX;
        if (op->span != SIZE_MAX)
            rt->spans[op->span] = (struct phase_span){now, 0, ts, 0,
                                                      (uint32_t)op->index, (uint32_t)d};
    }
    phase_current_update(rt);
}
