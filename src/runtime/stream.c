/* Floor 3, policy: streaming ahead of use (stream.h says what and why). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/log.h"
#include "runtime/mover.h"
#include "runtime/residency.h"
#include "runtime/state.h"
#include "runtime/stream.h"
#include "util/clock.h"

#define AHEAD_PIECES (STREAM_AHEAD_BYTES / MOVABLE_PIECE)

bool stream_init(struct runtime *rt)
{
    const struct program *p = rt->program;
    bool any = false;
    for (size_t c = 0; c < p->class_count; c++)
        any |= p->classes[c].stream_written >= 0;
    if (!any)
        return true;
    rt->stream.classes = calloc(p->class_count, sizeof *rt->stream.classes);
    return rt->stream.classes != NULL;
}

void stream_destroy(struct runtime *rt)
{
    struct stream_state *st = &rt->stream;
    for (size_t d = 0; d < RT_MAX_DEVICES; d++) {
        free(st->marks[d]);
        st->marks[d] = NULL;
    }
    for (size_t c = 0; st->classes && c < rt->program->class_count; c++) {
        free(st->classes[c].ref);
        free(st->classes[c].cur);
    }
    free(st->classes);
    st->classes = NULL;
}

bool stream_enabled(const struct runtime *rt)
{
    return rt->stream.classes != NULL;
}

bool stream_unwritten(const struct runtime *rt, int c)
{
    const struct stream_state *st = &rt->stream;
    return st->classes && !st->off && rt->program->classes[c].stream_written >= 0 &&
           !st->classes[c].writing;
}

static void cancel(struct runtime *rt, struct slab *s, size_t i);

/* VISIT(rt, s, i) for each piece i of every movable slab s of every pool. */
static void each_piece(struct runtime *rt, void (*visit)(struct runtime *, struct slab *, size_t))
{
    for (int d = 0; d < RT_MAX_DEVICES; d++)
        for (size_t c = 0; rt->devices[d].known && c < rt->program->class_count; c++) {
            struct pool *pool = rt->devices[d].pools[c];
            for (struct slab *s = pool ? pool->slabs : NULL; s; s = s->next) {
                const struct movable *mv = s->backing;
                for (size_t i = 0; mv && i < mv->pieces; i++)
                    visit(rt, s, i);
            }
        }
}

static void cancel_incoming(struct runtime *rt, struct slab *s, size_t i)
{
    if (((struct movable *)s->backing)->incoming[i])
        cancel(rt, s, i);
}

static void not_clean(struct runtime *rt, struct slab *s, size_t i)
{
    (void)rt;
    ((struct movable *)s->backing)->clean[i] = false;
}

/* Streaming off, no capture in progress (a cancel waits for a copy): the
 * pieces left on their way in give their GPU memory back. */
static void give_up_incoming(struct runtime *rt)
{
    rt->stream.off_settled = true;
    each_piece(rt, cancel_incoming);
}

/* A stream capture begun: a graph's replays will use the pieces with no
 * announcement, and waiting on or remapping now would break the capture.
 * Streaming stops for good: nothing is clean any more (every later move to
 * the host copies), and pieces stay where they are until placement moves
 * them. True when off. NOW: a capture the hooks did not count (begun through
 * the driver) is in progress, so nothing may wait yet. */
static bool captured(struct runtime *rt, bool now)
{
    struct stream_state *st = &rt->stream;
    bool quiet = !now && atomic_load(&rt->captures) == 0;
    if (now)
        atomic_store(&rt->capture_seen, true);
    if (st->off && !st->off_settled && quiet)
        give_up_incoming(rt);
    if (st->off || (!atomic_load(&rt->capture_seen) && atomic_load(&rt->captures) == 0))
        return st->off;
    st->off = true;
    stream_settle(rt); /* a graph's replays find every piece mapped (no CUDA call waits) */
    LOG(LOG_WARN, "a stream capture began: `stream written` stops streaming for the rest of the "
                  "run (a graph's replays read the pieces unannounced)");
    each_piece(rt, not_clean);
    if (quiet)
        give_up_incoming(rt);
    return true;
}

static bool streams(const struct runtime *rt, int c)
{
    return rt->stream.classes && c >= 0 && rt->program->classes[c].stream_written >= 0;
}

/* ---- marks: how far the GPU has got through the job's uses ---- */

static void marks_advance(struct runtime *rt, struct stream_marks *m)
{
    while (m->count && mover_event_done(&rt->mover, m->ev[m->head])) {
        m->done = m->use[m->head];
        m->head = (m->head + 1) % STREAM_MARKS;
        m->count--;
    }
}

/* Slot K's event, made on first use (on the current device); NULL: none could be. */
static cudaEvent_t slot_event(struct runtime *rt, struct stream_marks *m, size_t k)
{
    if (!m->ev[k] &&
        rt->mover.cuda->event_create_with_flags(&m->ev[k], cudaEventDisableTiming) != cudaSuccess) {
        m->ev[k] = NULL;
        rt->mover.cuda->get_last_error();
    }
    return m->ev[k];
}

/* Record on STREAM, a stream of the pieces' GPU (current), the mark of use
 * U: once it completes, every use before U has finished on the GPU. The job
 * moving to another stream: the old one is waited for once, so that no mark
 * on it is needed any more. */
static void marks_record(struct runtime *rt, struct stream_marks *m, cudaStream_t stream,
                         uint64_t u)
{
    const struct cuda_api *cuda = rt->mover.cuda;
    if (m->known && m->stream != stream) {
        /* All of the old stream's work is waited for, once: marks on the new
         * stream say nothing of it. (A failed wait: done is not raised.) */
        size_t k = m->count ? (m->head + m->count - 1) % STREAM_MARKS : m->head;
        cudaEvent_t e = slot_event(rt, m, k);
        if (e && cuda->event_record(e, m->stream) == cudaSuccess &&
            cuda->event_synchronize(e) == cudaSuccess)
            m->done = u;
        else
            cuda->get_last_error();
        m->head = m->count = 0;
    }
    m->stream = stream;
    m->known = true;
    marks_advance(rt, m);
    if (m->count == STREAM_MARKS)
        return; /* the GPU is far behind: this use gets no mark of its own */
    size_t k = (m->head + m->count) % STREAM_MARKS;
    cudaEvent_t e = slot_event(rt, m, k);
    if (!e || cuda->event_record(e, stream) != cudaSuccess) {
        cuda->get_last_error(); /* a stream of another GPU: no mark, nothing freed by it */
        return;
    }
    m->use[k] = u;
    m->count++;
}

static struct stream_marks *marks_of(struct runtime *rt, int device)
{
    struct stream_marks **m = &rt->stream.marks[device];
    if (!*m)
        *m = calloc(1, sizeof **m);
    return *m;
}

/* May piece I of MV be remapped: has the GPU finished the work queued up to
 * the piece's last use? */
static bool piece_free(const struct stream_marks *m, const struct movable *mv, size_t i)
{
    return m && m->done > mv->last_use[i];
}

/* ---- the learned cycle ---- */

static void cycle_note(struct stream_class *sc, uintptr_t addr)
{
    if (sc->overflow || (sc->cur_len && sc->cur[sc->cur_len - 1] == addr))
        return;
    if (sc->cur_len == sc->cur_cap) {
        size_t cap = sc->cur_cap ? sc->cur_cap * 2 : 256;
        uintptr_t *grown = cap <= STREAM_CYCLE_MAX ? realloc(sc->cur, cap * sizeof *grown) : NULL;
        if (!grown) {
            sc->overflow = true; /* too long to learn: this cycle predicts nothing */
            return;
        }
        sc->cur = grown;
        sc->cur_cap = cap;
    }
    sc->cur[sc->cur_len++] = addr;
}

/* Where ADDR is in the learned cycle: the cursor moves past it, searching
 * on from the cursor, then from the start; false (and no prediction until
 * found again) where it is not there. A use repeated at once stays put. */
static bool cycle_find(struct stream_class *sc, uintptr_t addr)
{
    if (sc->cursor && sc->ref[sc->cursor - 1] == addr)
        return !(sc->lost = false);
    for (size_t k = 0; k < sc->ref_len; k++) {
        size_t at = (sc->cursor + k) % sc->ref_len;
        if (sc->ref[at] == addr) {
            sc->cursor = at + 1;
            return !(sc->lost = false);
        }
    }
    sc->lost = true;
    return false;
}

/* ---- moving pieces ---- */

struct piece_ref {
    struct slab *slab;
    size_t i;
};

static size_t first_piece(const struct block *b)
{
    return (b->addr - b->slab->base) / MOVABLE_PIECE;
}

static size_t end_piece(const struct block *b)
{
    return (b->addr + b->size - 1 - b->slab->base) / MOVABLE_PIECE + 1;
}

/* The live block at ADDR, of a movable slab of a class that streams. */
static struct block *streamed_block(struct runtime *rt, uintptr_t addr)
{
    struct block *b = map_find(&rt->map, addr);
    if (!b || b->free || !b->slab || !b->slab->backing || b->moved_in ||
        !streams(rt, b->slab->pool->class_idx))
        return NULL;
    return b;
}

/* A piece a failed remap left mapped neither way is mapped to its host
 * memory again at once, before the job queues work on it; until then the
 * slab hands out none of its free space. */
static void settle(struct runtime *rt, struct slab *s)
{
    struct movable *mv = s->backing;
    if (mv->lost && !mover_movable_repair(&rt->mover, mv))
        LOG(LOG_ERROR, "class '%s': a streamed piece could not be mapped again",
            rt->program->classes[s->pool->class_idx].name);
    s->quarantined = mv->lost > 0;
}

/* Apply the remaps the mover's thread has made, waiting first for those up
 * to number UNTIL (mover_pieces_finish); one that did not go as counted
 * has its bytes counted again, and a piece it lost is mapped again. */
static void reap(struct runtime *rt, uint64_t until)
{
    enum { BATCH = 16 };
    struct piece_outcome out[BATCH];
    size_t n;
    if (!mover_pieces_pending(&rt->mover))
        return; /* (no clock read: this runs for every allocation of a streamed class) */
    do {
        uint64_t t0 = until ? now_ns() : 0;
        n = mover_pieces_finish(&rt->mover, until, out, BATCH);
        if (until)
            rt->remap_wait_ns += now_ns() - t0;
        for (size_t k = 0; k < n; k++) {
            struct slab *s = out[k].mv->owner;
            struct device_state *dev = &rt->devices[s->pool->device];
            int c = s->pool->class_idx;
            if (out[k].held > 0) { /* a drop that did not happen */
                resident_add(rt, dev, c, (uint64_t)out[k].held);
                rt->class_stats[c].stream_drop_bytes -= (uint64_t)out[k].held;
            } else if (out[k].held < 0) { /* a swap-in that did not happen */
                resident_sub(rt, dev, c, (uint64_t)-out[k].held);
            }
            settle(rt, s);
        }
    } while (n == BATCH);
}

void stream_settle(struct runtime *rt)
{
    reap(rt, UINT64_MAX);
}

/* Piece I of MV is about to be used or written by the job: its remap, if one
 * is being made, is made first. */
static void await_piece(struct runtime *rt, const struct movable *mv, size_t i)
{
    if (mv->busy[i])
        reap(rt, mv->busy[i]);
}

static void swap_in(struct runtime *rt, struct slab *s, size_t i)
{
    struct movable *mv = s->backing;
    if (mover_piece_swap_in(&rt->mover, mv, i))
        return;
    if (!mv->incoming[i]) { /* given up: it stays on the host, counted off the GPU */
        resident_sub(rt, &rt->devices[s->pool->device], s->pool->class_idx, mover_piece_size(mv, i));
        mv->streamed[i] = false;
    }
    settle(rt, s);
}

static bool drop(struct runtime *rt, struct slab *s, size_t i)
{
    struct movable *mv = s->backing;
    bool on_gpu = mv->gpu[i] != 0;
    bool dropped = mover_piece_drop(&rt->mover, mv, i);
    if (on_gpu && !mv->gpu[i]) { /* dropped, or lost with its GPU memory given back */
        int c = s->pool->class_idx;
        resident_sub(rt, &rt->devices[s->pool->device], c, mover_piece_size(mv, i));
        rt->class_stats[c].stream_drop_bytes += dropped ? mover_piece_size(mv, i) : 0;
    }
    settle(rt, s);
    return dropped;
}

static void cancel(struct runtime *rt, struct slab *s, size_t i)
{
    struct movable *mv = s->backing;
    mover_piece_cancel(&rt->mover, mv, i);
    resident_sub(rt, &rt->devices[s->pool->device], s->pool->class_idx, mover_piece_size(mv, i));
    mv->streamed[i] = false;
}

/* Piece I of S, brought by the stream and free: its GPU memory goes (a way in
 * whose copy is done is given up; a piece on the GPU leaves with no copy).
 * Returns the bytes the budget got back. */
static uint64_t let_go(struct runtime *rt, struct slab *s, size_t i)
{
    struct movable *mv = s->backing;
    if (mv->incoming[i] && mover_piece_copied(&rt->mover, mv, i)) {
        cancel(rt, s, i);
        return mover_piece_size(mv, i);
    }
    return mv->gpu[i] && drop(rt, s, i) ? mover_piece_size(mv, i) : 0;
}

static bool wanted(const struct piece_ref *want, size_t n, const struct slab *s, size_t i)
{
    for (size_t k = 0; k < n; k++)
        if (want[k].slab == s && want[k].i == i)
            return true;
    return false;
}

/* A piece the stream may let go to make room, and how far its next use
 * is in the learned cycle. */
struct drop_candidate {
    struct slab *slab;
    size_t i;
    size_t next; /* uses from the cursor to its next one; SIZE_MAX: none */
};

static int farther_first(const void *a, const void *b)
{
    size_t x = ((const struct drop_candidate *)a)->next, y = ((const struct drop_candidate *)b)->next;
    return x < y ? 1 : x > y ? -1 : 0;
}

static int by_piece(const void *a, const void *b)
{
    const struct drop_candidate *x = a, *y = b;
    if (x->slab != y->slab)
        return (uintptr_t)x->slab < (uintptr_t)y->slab ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* CAND[0..COUNT), each given the distance from the cursor to its next use
 * in the learned cycle (looked for within STREAM_SCAN uses; beyond: none). */
static void next_uses(struct runtime *rt, struct stream_class *sc, struct drop_candidate *cand,
                      size_t count)
{
    qsort(cand, count, sizeof *cand, by_piece);
    size_t found = 0, scan = sc->ref_len < STREAM_SCAN ? sc->ref_len : STREAM_SCAN;
    for (size_t k = 0; k < scan && found < count; k++) {
        struct block *b = streamed_block(rt, sc->ref[(sc->cursor + k) % sc->ref_len]);
        for (size_t i = b ? first_piece(b) : 0; b && i < end_piece(b); i++) {
            struct drop_candidate key = {b->slab, i, 0};
            struct drop_candidate *at = bsearch(&key, cand, count, sizeof *cand, by_piece);
            if (at && at->next == SIZE_MAX) {
                at->next = k;
                found++;
            }
        }
    }
}

/* Room for NEED bytes of class C on DEVICE: the pieces the stream brought
 * that the GPU is done with and that are not among WANT[0..N) leave with no
 * copy, the one whose next use in the learned cycle is farthest first (a
 * next use that is farthest away is the best to lose: Belady's rule).
 * Returns the bytes the budget got back. */
static uint64_t drop_farthest(struct runtime *rt, int c, int device, const struct piece_ref *want,
                              size_t n, uint64_t need)
{
    struct stream_class *sc = &rt->stream.classes[c];
    struct stream_marks *m = rt->stream.marks[device];
    struct pool *pool = rt->devices[device].pools[c];
    size_t count = 0, cap = 0;
    struct drop_candidate *cand = NULL;
    bool short_of_memory = false;
    for (struct slab *s = pool ? pool->slabs : NULL; s && !short_of_memory; s = s->next) {
        struct movable *mv = s->backing;
        for (size_t i = 0; mv && i < mv->pieces; i++) {
            if (!mv->streamed[i] || wanted(want, n, s, i) || !piece_free(m, mv, i))
                continue;
            if (count == cap) {
                size_t grown = cap ? cap * 2 : 64;
                struct drop_candidate *t = realloc(cand, grown * sizeof *cand);
                if (!t) {
                    short_of_memory = true; /* those found so far will do */
                    break;
                }
                cand = t;
                cap = grown;
            }
            cand[count++] = (struct drop_candidate){s, i, SIZE_MAX};
        }
    }
    if (count > 1 && sc->ref_len)
        next_uses(rt, sc, cand, count);
    if (count > 1)
        qsort(cand, count, sizeof *cand, farther_first);
    uint64_t freed = 0;
    for (size_t j = 0; j < count && freed < need; j++)
        freed += let_go(rt, cand[j].slab, cand[j].i);
    free(cand);
    return freed;
}

/* The pieces WANT[0..N) of class C on DEVICE found no room: say how many
 * bytes of them are still on the host, for the caller to make room. */
static uint64_t short_of_room(struct runtime *rt, int c, int device, const struct piece_ref *want,
                              size_t n)
{
    uint64_t bytes = 0;
    for (size_t k = 0; k < n; k++) {
        const struct movable *mv = want[k].slab->backing;
        size_t i = want[k].i;
        if (!mv->gpu[i] && !mv->incoming[i] && !mv->busy[i])
            bytes += mover_piece_size(mv, i);
    }
    rt->stream.short_class = c;
    rt->stream.short_device = device;
    rt->stream.short_bytes = bytes;
    return bytes;
}

/* After a use of class C on DEVICE: the pieces of the next uses in the
 * learned cycle come to the GPU (copies queued, remapped where the GPU is
 * done with them) while the budget has room. Where it has none, and
 * MAY_DROP, pieces the stream brought whose next use is farther leave to
 * make it (their room counts once their remaps are made: the next use
 * fetches into it); a piece with room to stay stays, so a step's later uses
 * (the optimizer's writes, the next pass) find it on the GPU. */
static void ahead_here(struct runtime *rt, int c, int device, bool may_drop)
{
    struct stream_class *sc = &rt->stream.classes[c];
    struct stream_marks *m = rt->stream.marks[device];
    struct device_state *dev = &rt->devices[device];
    struct pool *pool = dev->pools[c];
    struct class_stats *cs = &rt->class_stats[c];
    struct piece_ref want[AHEAD_PIECES];
    size_t n = 0;
    if (!pool || !m || sc->lost || sc->writing)
        return;
    marks_advance(rt, m);
    size_t end = sc->ref_len - sc->cursor > STREAM_SCAN ? sc->cursor + STREAM_SCAN : sc->ref_len;
    for (size_t k = sc->cursor; k < end && n < AHEAD_PIECES; k++) {
        struct block *b = streamed_block(rt, sc->ref[k]);
        if (!b || b->slab->pool != pool || b->slab->quarantined)
            continue;
        for (size_t i = first_piece(b); i < end_piece(b) && n < AHEAD_PIECES; i++)
            if (!wanted(want, n, b->slab, i))
                want[n++] = (struct piece_ref){b->slab, i};
    }
    cudaStream_t copy = dev->fetch_stream ? dev->fetch_stream : dev->stream;
    for (size_t k = 0; k < n && copy && !sc->unordered; k++) {
        struct movable *mv = want[k].slab->backing;
        size_t i = want[k].i, len = mover_piece_size(mv, i);
        if (mv->gpu[i] || mv->incoming[i] || mv->busy[i])
            continue; /* (busy: leaving, its remap being made) */
        if (dev->budget_bytes != UINT64_MAX &&
            dev->resident_bytes + mover_leaving_bytes(&rt->mover, device) + len > dev->budget_bytes) {
            uint64_t short_by = short_of_room(rt, c, device, want + k, n - k);
            /* Pieces already leaving are room to come: only the rest is dropped. */
            if (may_drop && dev->resident_bytes + short_by > dev->budget_bytes)
                drop_farthest(rt, c, device, want, n,
                              dev->resident_bytes + short_by - dev->budget_bytes);
            break; /* no room (pieces still leaving count): the rest is read where it lies */
        }
        if (!mover_piece_fetch(&rt->mover, mv, i, copy))
            break;
        resident_add(rt, dev, c, len);
        mv->streamed[i] = true;
        cs->stream_fetch_bytes += len;
    }
    for (size_t k = 0; k < n; k++) { /* copied in and free: the job's range maps them */
        struct movable *mv = want[k].slab->backing;
        if (mv->incoming[want[k].i] && piece_free(m, mv, want[k].i))
            swap_in(rt, want[k].slab, want[k].i);
    }
}

/* ahead_here with DEVICE current: its copies and events belong to it. */
static void ahead(struct runtime *rt, int c, int device, bool may_drop)
{
    int previous = mover_device_enter(&rt->mover, device);
    if (previous < 0)
        return;
    ahead_here(rt, c, device, may_drop);
    mover_device_leave(&rt->mover, device, previous);
}

void stream_use(struct runtime *rt, const void *const *ptrs, size_t n, cudaStream_t stream)
{
    struct stream_state *st = &rt->stream;
    uint64_t marked = 0; /* bit d: device d's mark recorded for this use */
    int touched_class = -1, touched_device = -1;
    st->short_bytes = 0; /* what the last use found short is stale */
    if (!st->classes || !n || captured(rt, mover_stream_capturing(&rt->mover, stream)))
        return;
    uint64_t u = ++st->uses;
    reap(rt, 0);
    for (size_t k = 0; k < n; k++) {
        struct block *b = streamed_block(rt, (uintptr_t)ptrs[k]);
        if (!b)
            continue;
        int c = b->slab->pool->class_idx, d = b->slab->pool->device;
        struct stream_class *sc = &st->classes[c];
        struct class_stats *cs = &rt->class_stats[c];
        struct stream_marks *m = marks_of(rt, d);
        if (!m)
            continue;
        if (!(marked >> (d & 63) & 1)) {
            int previous = mover_device_enter(&rt->mover, d);
            if (previous < 0)
                continue; /* no mark: its pieces are not used now, the use is not learned */
            marks_record(rt, m, stream, u);
            mover_device_leave(&rt->mover, d, previous);
            marked |= 1ull << (d & 63);
        }
        cs->stream_uses++;
        if (sc->writing)
            continue;
        cycle_note(sc, b->addr);
        if (sc->ref_len && !cycle_find(sc, b->addr))
            cs->stream_unlearned++;
        struct movable *mv = b->slab->backing;
        for (size_t i = first_piece(b); i < end_piece(b); i++)
            await_piece(rt, mv, i); /* the job's work is queued once this returns */
        if (mv->lost)
            settle(rt, b->slab); /* a piece a remap lost is mapped again before it is used */
        for (size_t i = first_piece(b); i < end_piece(b); i++) {
            if (mv->incoming[i] && piece_free(m, mv, i)) {
                swap_in(rt, b->slab, i);
                await_piece(rt, mv, i);
            }
            if (mv->gpu[i])
                cs->stream_ready_bytes += mover_piece_size(mv, i);
            else
                cs->stream_late_bytes += mover_piece_size(mv, i);
            mv->last_use[i] = u;
        }
        if (touched_class >= 0 && (touched_class != c || touched_device != d))
            ahead(rt, touched_class, touched_device, false);
        touched_class = c;
        touched_device = d;
    }
    if (touched_class >= 0)
        ahead(rt, touched_class, touched_device, false);
}

uint64_t stream_short(const struct runtime *rt, int *device)
{
    *device = rt->stream.short_device;
    return rt->stream.short_bytes;
}

void stream_retry(struct runtime *rt)
{
    struct stream_state *st = &rt->stream;
    if (!st->short_bytes || st->off)
        return;
    st->short_bytes = 0;
    ahead(rt, st->short_class, st->short_device, true);
}

static bool writing_now(const struct runtime *rt, int c)
{
    int32_t g = rt->program->classes[c].stream_written;
    return (atomic_load(&rt->phase_bits[g / 64]) >> (g % 64)) & 1;
}

/* Class C's write phases open: pieces on their way in are given up (the
 * writes go to the memory the job maps, and a copy made before would miss
 * them), pieces on the GPU are no longer clean, and the uses seen since the
 * last write phase become the learned cycle. */
static void writes_begin(struct runtime *rt, int c)
{
    struct stream_class *sc = &rt->stream.classes[c];
    stream_settle(rt); /* the writes find every piece mapped */
    sc->writing = true;
    if (sc->overflow) {
        sc->ref_len = 0; /* too long to learn: the next cycle predicts nothing */
    } else if (sc->cur_len) {
        uintptr_t *t = sc->ref;
        size_t cap = sc->ref_cap;
        sc->ref = sc->cur;
        sc->ref_len = sc->cur_len;
        sc->ref_cap = sc->cur_cap;
        sc->cur = t;
        sc->cur_cap = cap;
    }
    sc->cur_len = sc->cursor = 0;
    sc->overflow = sc->lost = false;
    for (int d = 0; d < RT_MAX_DEVICES; d++) {
        struct pool *pool = rt->devices[d].known ? rt->devices[d].pools[c] : NULL;
        for (struct slab *s = pool ? pool->slabs : NULL; s; s = s->next) {
            struct movable *mv = s->backing;
            for (size_t i = 0; mv && i < mv->pieces; i++) {
                if (mv->incoming[i])
                    cancel(rt, s, i);
                mv->clean[i] = false;
            }
        }
    }
}

/* Class C's write phases closed: every piece counts as used by the writes
 * (marked after them), and the pieces the stream brought are copied back to
 * their host memory after the writes, so that they can leave with no copy. */
static void writes_end(struct runtime *rt, int c)
{
    struct stream_class *sc = &rt->stream.classes[c];
    uint64_t u = ++rt->stream.uses;
    stream_settle(rt); /* the copies back read the job's range */
    sc->writing = false;
    sc->unordered = false;
    for (int d = 0; d < RT_MAX_DEVICES; d++) {
        struct device_state *dev = &rt->devices[d];
        struct pool *pool = dev->known ? dev->pools[c] : NULL;
        struct stream_marks *m = pool ? marks_of(rt, d) : NULL;
        if (!m)
            continue;
        int previous = mover_device_enter(&rt->mover, d);
        if (previous < 0) {
            sc->unordered = true;
            continue;
        }
        cudaStream_t job = m->known ? m->stream : 0;
        cudaStream_t copy = dev->fetch_stream ? dev->fetch_stream : dev->stream;
        /* Every copy from now on, in or back, comes after the writes. Where
         * that cannot be ordered (or the job's stream is not known yet),
         * nothing is fetched until the next write phase ends ordered. */
        bool ordered = copy && m->known && mover_follow(&rt->mover, dev, copy, job);
        sc->unordered |= !ordered;
        for (struct slab *s = pool->slabs; s; s = s->next) {
            struct movable *mv = s->backing;
            if (mv && ordered)
                mover_movable_writes_ordered(mv);
            for (size_t i = 0; mv && i < mv->pieces; i++) {
                mv->last_use[i] = u;
                if (mv->streamed[i] && mv->gpu[i] && ordered &&
                    mover_piece_save(&rt->mover, mv, i, copy))
                    rt->class_stats[c].stream_save_bytes += mover_piece_size(mv, i);
            }
        }
        marks_record(rt, m, job, u + 1);
        mover_device_leave(&rt->mover, d, previous);
    }
    rt->stream.uses++;
}

bool stream_phases(struct runtime *rt)
{
    const struct program *p = rt->program;
    bool ended = false;
    if (!rt->stream.classes || captured(rt, false))
        return false;
    for (size_t c = 0; c < p->class_count; c++) {
        if (!streams(rt, (int)c))
            continue;
        bool now = writing_now(rt, (int)c);
        if (now && !rt->stream.classes[c].writing)
            writes_begin(rt, (int)c);
        else if (!now && rt->stream.classes[c].writing) {
            writes_end(rt, (int)c);
            ended = true;
        }
    }
    return ended;
}

void stream_written(struct runtime *rt, const void *const *ptrs, size_t n)
{
    if (!rt->stream.classes || captured(rt, false))
        return;
    reap(rt, 0);
    for (size_t k = 0; k < n; k++) {
        struct block *b = streamed_block(rt, (uintptr_t)ptrs[k]);
        /* Inside a write phase every piece is unclean and nothing comes in already. */
        if (b && !rt->stream.classes[b->slab->pool->class_idx].writing)
            stream_block_written(rt, b);
    }
}

void stream_block_written(struct runtime *rt, const struct block *b)
{
    struct movable *mv = b->slab->backing;
    uint64_t u = ++rt->stream.uses; /* its writes come after this: no remap until they are done */
    for (size_t i = first_piece(b); i < end_piece(b) && i < mv->pieces; i++)
        await_piece(rt, mv, i); /* the job writes it once this returns */
    mover_movable_written(mv, b->addr - b->slab->base, b->size);
    for (size_t i = first_piece(b); i < end_piece(b) && i < mv->pieces; i++)
        mv->last_use[i] = u;
}

uint64_t stream_yield(struct runtime *rt, int device, uint64_t need)
{
    const struct program *p = rt->program;
    struct device_state *dev = &rt->devices[device];
    struct stream_marks *m = rt->stream.marks[device];
    uint64_t freed = 0;
    if (!m || captured(rt, false))
        return 0;
    marks_advance(rt, m);
    for (size_t c = 0; c < p->class_count && freed < need; c++) {
        struct pool *pool = dev->pools[c];
        if (!streams(rt, (int)c) || !pool || rt->stream.classes[c].writing)
            continue;
        freed += drop_farthest(rt, (int)c, device, NULL, 0, need - freed);
    }
    if (freed)
        stream_settle(rt); /* what placement makes of the room comes after the card has it */
    return freed;
}
