#include <stdlib.h>
#include <string.h>

#include "runtime/step.h"

uint32_t step_key(enum step_kind kind, uint32_t what, uint64_t detail)
{
    uint64_t h = ((uint64_t)what << 40) ^ detail;
    h *= 0x9e3779b97f4a7c15ull;
    return (uint32_t)kind << 29 | (uint32_t)(h >> 35);
}

uint32_t step_use_key(uint32_t class_idx, uint32_t rule)
{
    return (uint32_t)STEP_USE << 29 | (class_idx & 0xfffff) << 8 | (rule & 0xff);
}

static void trace_free(struct step_trace *t)
{
    free(t->keys);
    free(t->partner);
    free(t->at);
    *t = (struct step_trace){0};
}

void step_free(struct step_model *m)
{
    trace_free(&m->ref);
    trace_free(&m->cur);
}

/* Did the step just completed follow the reference to (near) its end? */
static bool followed(const struct step_model *m)
{
    return m->on_track && m->ref.len - m->ref_pos <= STEP_LOOKAHEAD;
}

void step_begin(struct step_model *m)
{
    if (m->steps > 0 && !m->overflow) {
        if (m->have_ref) {
            if (followed(m))
                m->matched++;
            else
                m->differed++;
        }
        struct step_trace t = m->ref;
        m->ref = m->cur;
        m->cur = t;
        m->have_ref = m->ref.len > 0;
    }
    m->cur.len = 0;
    m->ref_pos = 0;
    m->extra = 0;
    m->resyncing = false;
    m->overflow = false;
    m->on_track = true;
    m->steps++;
}

static bool grow(struct step_trace *t)
{
    size_t cap = t->cap ? t->cap * 2 : 1024;
    if (cap > STEP_MAX_EVENTS)
        return false;
    uint32_t *keys = realloc(t->keys, cap * sizeof *keys);
    if (!keys)
        return false;
    t->keys = keys;
    int32_t *partner = realloc(t->partner, cap * sizeof *partner);
    if (!partner)
        return false;
    t->partner = partner;
    int32_t *at = realloc(t->at, cap * sizeof *at);
    if (!at)
        return false;
    t->at = at;
    t->cap = cap;
    return true;
}

/* Where in the reference the current step's event KEY belongs: the expected
 * event, else one a little further on (the events between did not come this
 * time); -1 when neither. */
static long follow(struct step_model *m, uint32_t key)
{
    const struct step_trace *r = &m->ref;
    size_t end = m->ref_pos + STEP_LOOKAHEAD < r->len ? m->ref_pos + STEP_LOOKAHEAD : r->len;
    for (size_t j = m->ref_pos; j < end; j++) {
        if (r->keys[j] == key) {
            if (j > m->ref_pos || m->resyncing)
                m->resyncs++;
            m->resyncing = false;
            m->extra = 0;
            m->ref_pos = j + 1;
            return (long)j;
        }
    }
    return -1;
}

long step_record(struct step_model *m, uint32_t key)
{
    if (m->steps == 0 || m->overflow)
        return -1;
    struct step_trace *t = &m->cur;
    if (t->len == t->cap && !grow(t)) {
        m->overflow = true;
        m->on_track = false;
        return -1;
    }
    size_t i = t->len++;
    t->keys[i] = key;
    t->partner[i] = -1;
    t->at[i] = -1;
    if (!m->on_track || !m->have_ref)
        return (long)i;
    if (m->ref_pos < m->ref.len && m->ref.keys[m->ref_pos] == key && !m->resyncing) {
        t->at[i] = (int32_t)m->ref_pos++; /* the usual case: the expected event */
        return (long)i;
    }
    long j = follow(m, key);
    if (j >= 0) {
        t->at[i] = (int32_t)j;
    } else if (++m->extra <= STEP_MAX_EXTRA) {
        m->resyncing = true; /* passed over: not in the reference near here */
    } else {
        m->on_track = false;
        m->departures++;
    }
    return (long)i;
}

void step_freed(struct step_model *m, long alloc)
{
    if (alloc >= 0 && (size_t)alloc < m->cur.len)
        m->cur.partner[alloc] = (int32_t)m->cur.len;
}

bool step_predicting(const struct step_model *m)
{
    return m->have_ref && m->on_track && !m->overflow;
}

size_t step_pos(const struct step_model *m)
{
    return m->ref_pos;
}

long step_matched(const struct step_model *m, long i)
{
    return i >= 0 && (size_t)i < m->cur.len ? m->cur.at[i] : -1;
}

long step_next(const struct step_model *m, uint32_t key, size_t from)
{
    const struct step_trace *r = &m->ref;
    for (size_t i = from; i < r->len; i++)
        if (r->keys[i] == key)
            return (long)i;
    for (size_t i = 0; i < from && i < r->len; i++)
        if (r->keys[i] == key)
            return (long)(i + r->len);
    return -1;
}

long step_partner(const struct step_model *m, size_t alloc)
{
    long j = step_matched(m, (long)alloc);
    return j >= 0 ? step_ref_partner(m, (size_t)j) : -1;
}

uint32_t step_ref_key(const struct step_model *m, size_t i)
{
    return i < m->ref.len ? m->ref.keys[i] : 0;
}

size_t step_ref_len(const struct step_model *m)
{
    return m->ref.len;
}

long step_ref_partner(const struct step_model *m, size_t i)
{
    return i < m->ref.len ? m->ref.partner[i] : -1;
}

const int32_t *step_ref_at(const struct step_model *m)
{
    return m->ref.at;
}
