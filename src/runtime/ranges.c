#include <stdlib.h>
#include <string.h>

#include "runtime/ranges.h"

void ranges_add(struct range_index *r, uintptr_t base, size_t size, int class_idx,
                const void *owner)
{
    if (r->count == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 64;
        struct addr_range *grown = realloc(r->ranges, cap * sizeof *grown);
        if (!grown)
            return;
        r->ranges = grown;
        r->cap = cap;
    }
    size_t i = r->count;
    while (i > 0 && r->ranges[i - 1].base > base) {
        r->ranges[i] = r->ranges[i - 1];
        i--;
    }
    r->ranges[i] = (struct addr_range){base, base + size, class_idx, owner};
    r->count++;
}

/* Index of the last range starting at or below ADDR, or -1. */
static long range_floor(const struct range_index *r, uintptr_t addr)
{
    long lo = 0, hi = (long)r->count - 1, found = -1;
    while (lo <= hi) {
        long mid = (lo + hi) / 2;
        if (r->ranges[mid].base <= addr) {
            found = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    return found;
}

void ranges_remove(struct range_index *r, uintptr_t base)
{
    long i = range_floor(r, base);
    if (i >= 0 && r->ranges[i].base == base) {
        memmove(&r->ranges[i], &r->ranges[i + 1],
                (r->count - (size_t)i - 1) * sizeof *r->ranges);
        r->count--;
    }
}

int ranges_class_of(const struct range_index *r, uintptr_t addr)
{
    long i = range_floor(r, addr);
    return i >= 0 && addr < r->ranges[i].end ? r->ranges[i].class_idx : -1;
}

const void *ranges_owner_of(const struct range_index *r, uintptr_t addr)
{
    long i = range_floor(r, addr);
    return i >= 0 && addr < r->ranges[i].end ? r->ranges[i].owner : NULL;
}

void ranges_free(struct range_index *r)
{
    free(r->ranges);
    *r = (struct range_index){0};
}
