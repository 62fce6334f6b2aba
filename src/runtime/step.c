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
    *t = (struct step_trace){0};
}

void step_free(struct step_model *m)
{
    trace_free(&m->ref);
    trace_free(&m->cur);
}

static bool same(const struct step_trace *a, const struct step_trace *b)
{
    return a->len == b->len && !memcmp(a->keys, b->keys, a->len * sizeof *a->keys);
}

void step_begin(struct step_model *m)
{
    if (m->steps > 0 && !m->overflow) {
        if (m->have_ref) {
            if (same(&m->ref, &m->cur))
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
    m->overflow = false;
    m->on_track = true;
    m->steps++;
}

long step_record(struct step_model *m, uint32_t key)
{
    if (m->steps == 0 || m->overflow)
        return -1;
    struct step_trace *t = &m->cur;
    if (t->len == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 1024;
        uint32_t *keys = cap <= STEP_MAX_EVENTS ? realloc(t->keys, cap * sizeof *keys) : NULL;
        if (keys)
            t->keys = keys;
        int32_t *partner = keys ? realloc(t->partner, cap * sizeof *partner) : NULL;
        if (partner)
            t->partner = partner;
        if (!keys || !partner) {
            m->overflow = true;
            m->on_track = false;
            return -1;
        }
        t->cap = cap;
    }
    size_t i = t->len++;
    t->keys[i] = key;
    t->partner[i] = -1;
    if (m->on_track && m->have_ref && (i >= m->ref.len || m->ref.keys[i] != key)) {
        m->on_track = false;
        m->departures++;
    }
    return (long)i;
}

void step_pair(struct step_model *m, long alloc, long free_idx)
{
    if (alloc >= 0 && (size_t)alloc < m->cur.len)
        m->cur.partner[alloc] = (int32_t)free_idx;
}

bool step_predicting(const struct step_model *m)
{
    return m->have_ref && m->on_track && !m->overflow;
}

size_t step_pos(const struct step_model *m)
{
    return m->cur.len;
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
    return alloc < m->ref.len ? m->ref.partner[alloc] : -1;
}

uint32_t step_ref_key(const struct step_model *m, size_t i)
{
    return i < m->ref.len ? m->ref.keys[i] : 0;
}
