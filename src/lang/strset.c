#include "strset.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

void strset_init(struct strset *s)
{
    memset(s, 0, sizeof *s);
}

void strset_free(struct strset *s)
{
    free(s->keys);
    free(s->slots);
    strset_init(s);
}

long strset_find(const struct strset *s, const char *key)
{
    if (!s->slot_cap)
        return -1;
    for (size_t i = hash(key) & (s->slot_cap - 1);; i = (i + 1) & (s->slot_cap - 1)) {
        size_t v = s->slots[i];
        if (!v)
            return -1;
        if (strcmp(s->keys[v - 1], key) == 0)
            return (long)(v - 1);
    }
}

static int grow(struct strset *s)
{
    size_t cap = s->slot_cap ? s->slot_cap * 2 : 16;
    size_t *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return -1;
    for (size_t k = 0; k < s->count; k++) {
        size_t i = hash(s->keys[k]) & (cap - 1);
        while (slots[i])
            i = (i + 1) & (cap - 1);
        slots[i] = k + 1;
    }
    free(s->slots);
    s->slots = slots;
    s->slot_cap = cap;
    return 0;
}

long strset_add(struct strset *s, const char *key)
{
    long found = strset_find(s, key);
    if (found >= 0)
        return found;
    if ((s->count + 1) * 2 > s->slot_cap && grow(s) != 0)
        return -1;
    if (s->count == s->key_cap) {
        size_t cap = s->key_cap ? s->key_cap * 2 : 8;
        const char **keys = realloc(s->keys, cap * sizeof *keys);
        if (!keys)
            return -1;
        s->keys = keys;
        s->key_cap = cap;
    }
    s->keys[s->count] = key;
    size_t i = hash(key) & (s->slot_cap - 1);
    while (s->slots[i])
        i = (i + 1) & (s->slot_cap - 1);
    s->slots[i] = ++s->count;
    return (long)(s->count - 1);
}
