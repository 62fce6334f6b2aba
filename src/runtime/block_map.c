#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/block_map.h"

static size_t slot_of(uintptr_t addr, size_t cap)
{
    uint64_t h = (uint64_t)addr * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 20) & (cap - 1);
}

void map_init(struct block_map *m)
{
    memset(m, 0, sizeof *m);
}

void map_free(struct block_map *m)
{
    free(m->slots);
    map_init(m);
}

static int map_grow(struct block_map *m)
{
    size_t cap = m->cap ? m->cap * 2 : 1024;
    struct block **slots = calloc(cap, sizeof *slots);
    if (!slots)
        return -1;
    for (size_t i = 0; i < m->cap; i++) {
        struct block *b = m->slots[i];
        if (!b)
            continue;
        size_t j = slot_of(b->addr, cap);
        while (slots[j])
            j = (j + 1) & (cap - 1);
        slots[j] = b;
    }
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return 0;
}

int map_insert(struct block_map *m, struct block *b)
{
    if ((m->count + 1) * 4 > m->cap * 3 && map_grow(m) != 0)
        return -1;
    size_t j = slot_of(b->addr, m->cap);
    while (m->slots[j])
        j = (j + 1) & (m->cap - 1);
    m->slots[j] = b;
    m->count++;
    return 0;
}

struct block *map_find(const struct block_map *m, uintptr_t addr)
{
    if (!m->cap)
        return NULL;
    for (size_t j = slot_of(addr, m->cap); m->slots[j]; j = (j + 1) & (m->cap - 1))
        if (m->slots[j]->addr == addr)
            return m->slots[j];
    return NULL;
}

struct block *map_remove(struct block_map *m, uintptr_t addr)
{
    if (!m->cap)
        return NULL;
    size_t mask = m->cap - 1, j = slot_of(addr, m->cap);
    while (m->slots[j] && m->slots[j]->addr != addr)
        j = (j + 1) & mask;
    struct block *found = m->slots[j];
    if (!found)
        return NULL;
    /* Backward-shift deletion: move later members of the probe run into the
     * hole unless their home slot lies cyclically in (hole, k]. */
    size_t hole = j;
    for (size_t k = (hole + 1) & mask; m->slots[k]; k = (k + 1) & mask) {
        size_t home = slot_of(m->slots[k]->addr, m->cap);
        bool stays = hole < k ? (home > hole && home <= k) : (home > hole || home <= k);
        if (!stays) {
            m->slots[hole] = m->slots[k];
            hole = k;
        }
    }
    m->slots[hole] = NULL;
    m->count--;
    return found;
}

