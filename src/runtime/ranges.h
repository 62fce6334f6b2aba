/* Floor 1, data. The memory the runtime knows, by address (all its slabs
 * and the job's own managed allocations), sorted: to attribute CUPTI
 * records to classes, and to tell a pointer inside a slab from the job's
 * own. No lock: the caller holds the runtime's range_lock. */
#ifndef UMPOL_RUNTIME_RANGES_H
#define UMPOL_RUNTIME_RANGES_H

#include <stddef.h>
#include <stdint.h>

struct addr_range {
    uintptr_t base, end;
    int class_idx;
    const void *owner; /* the caller's record of the range (a slab), or NULL */
};

struct range_index {
    struct addr_range *ranges;
    size_t count, cap;
};

/* Out of memory loses this range: its CUPTI attribution, and rt_free's
 * refusal of a pointer inside it that is no live block. */
void ranges_add(struct range_index *r, uintptr_t base, size_t size, int class_idx,
                const void *owner);
void ranges_remove(struct range_index *r, uintptr_t base);
/* The class owning ADDR, or -1. */
int ranges_class_of(const struct range_index *r, uintptr_t addr);
/* The owner of the range holding ADDR, or NULL. */
const void *ranges_owner_of(const struct range_index *r, uintptr_t addr);
void ranges_free(struct range_index *r);

#endif
