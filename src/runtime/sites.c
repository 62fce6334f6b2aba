/* Allocation sites for the report (see sites.h). A block remembers its site
 * and birth time while it lives. */
#include "runtime/sites.h"

#include <stdlib.h>
#include <string.h>

#include "util/clock.h"

static uint32_t bucket_of(uint64_t size)
{
    return size ? 63u - (uint32_t)__builtin_clzll(size) : 0;
}

static struct site *site_find(struct sites *s, int class_idx, int phase, int tag, uint32_t bucket)
{
    uint64_t key = ((uint64_t)(uint32_t)class_idx << 40) ^ ((uint64_t)(uint32_t)phase << 8) ^
                   ((uint64_t)(uint32_t)tag << 24) ^ bucket;
    size_t h = (size_t)((key * 0x9e3779b97f4a7c15ull) >> 32) % SITES_SLOTS;
    for (;; h = (h + 1) % SITES_SLOTS) {
        if (s->slots[h]) {
            struct site *t = &s->table[s->slots[h] - 1];
            if (t->class_idx == class_idx && t->phase == phase && t->tag == tag &&
                t->bucket == bucket)
                return t;
            continue;
        }
        if (s->count == SITES_MAX) return NULL;
        struct site *t = &s->table[s->count++];
        *t = (struct site){.class_idx = class_idx,
                           .phase = phase,
                           .tag = tag,
                           .bucket = bucket,
                           .min_size = UINT64_MAX};
        s->slots[h] = (uint16_t)s->count;
        return t;
    }
}

int sites_tag_index(struct sites *s, const char *name)
{
    for (size_t i = 0; i < s->tag_count; i++)
        if (strcmp(s->tags[i], name) == 0) return (int)i;
    if (s->tag_count == SITES_TAGS_MAX || !(s->tags[s->tag_count] = strdup(name))) return -1;
    return (int)s->tag_count++;
}

void sites_note_alloc(struct sites *s, int phase, int tag, struct block *b, size_t requested)
{
    if (!s || !b) return;
    struct site *t = site_find(s, b->class_idx, phase, tag, bucket_of(requested));
    b->site = 0;
    if (!t) {
        s->dropped++;
        return;
    }
    uint64_t now = now_ns();
    if (!t->allocations) t->first_ns = now;
    t->last_ns = now;
    t->allocations++;
    t->bytes += requested;
    t->min_size = requested < t->min_size ? requested : t->min_size;
    t->max_size = requested > t->max_size ? requested : t->max_size;
    t->live_bytes += requested;
    if (t->live_bytes > t->peak_live_bytes) t->peak_live_bytes = t->live_bytes;
    b->site = (uint32_t)(t - s->table) + 1;
    b->born_ns = now;
}

void sites_note_free(struct sites *s, const struct block *b)
{
    if (!s || !b->site || b->site > s->count || b->born_ns < s->since_ns) return;
    struct site *t = &s->table[b->site - 1];
    uint64_t requested = b->requested ? b->requested : b->size;
    t->frees++;
    t->live_bytes -= requested <= t->live_bytes ? requested : t->live_bytes;
    t->lifetime_ns += now_ns() - b->born_ns;
}

void sites_after_fork_child(struct sites *s)
{
    if (!s) return;
    memset(s->slots, 0, sizeof s->slots);
    s->count = s->dropped = 0;
    s->since_ns = now_ns();
}

void sites_free(struct sites *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->tag_count; i++)
        free(s->tags[i]);
    free(s);
}
