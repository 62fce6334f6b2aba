/* Interning of names: string -> dense index, O(1) expected per lookup. */
#ifndef UMPOL_STRSET_H
#define UMPOL_STRSET_H

#include <stddef.h>

struct strset {
    const char **keys; /* borrowed; index i holds the i-th distinct key */
    size_t count, key_cap;
    size_t *slots; /* open addressing: index + 1, 0 = empty */
    size_t slot_cap;
};

void strset_init(struct strset *s);
void strset_free(struct strset *s);
/* Index of KEY, or -1. */
long strset_find(const struct strset *s, const char *key);
/* Index of KEY, adding it if new (KEY must outlive the set); -1 when out of memory. */
long strset_add(struct strset *s, const char *key);

#endif
