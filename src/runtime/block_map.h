/* Floor 1, data. Address -> live block: open addressing with linear probing
 * and backward-shift deletion. No lock: the caller holds the runtime's. */
#ifndef UMPOL_RUNTIME_BLOCK_MAP_H
#define UMPOL_RUNTIME_BLOCK_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/pool.h"

struct block_map {
    struct block **slots;
    size_t cap, count;
};

void map_init(struct block_map *m);
void map_free(struct block_map *m);
int map_insert(struct block_map *m, struct block *b);
struct block *map_find(const struct block_map *m, uintptr_t addr);
struct block *map_remove(struct block_map *m, uintptr_t addr);

#endif
