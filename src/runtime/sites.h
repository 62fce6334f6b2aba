/* Floor 1, data. Allocation sites: what the job allocates, grouped by
 * (class, innermost open phase, innermost tag, power-of-two size), with counts, bytes and
 * lifetimes. Kept only when a report is asked for (the report writes them,
 * `umpol suggest` reads them); an observer's table, it changes no placement.
 * Not thread-safe: the caller holds rt->lock. */
#ifndef UMPOL_RUNTIME_SITES_H
#define UMPOL_RUNTIME_SITES_H

#include <stddef.h>
#include <stdint.h>

#include "report/report.h"
#include "runtime/pool.h"

#define SITES_MAX REPORT_SITES_MAX
#define SITES_SLOTS (2 * SITES_MAX) /* open addressing: at most half full */
#define SITES_TAGS_MAX 256          /* tag names kept; later ones count as untagged */

struct site {
    int32_t class_idx, phase; /* phase: index into phase_stats, -1 outside every phase */
    int32_t tag;              /* index into sites.tags, -1: no tag pushed */
    uint32_t bucket;          /* floor(log2(size)) */
    uint64_t allocations, frees, bytes, min_size, max_size;
    uint64_t live_bytes, peak_live_bytes;
    uint64_t lifetime_ns;       /* summed over the freed blocks */
    uint64_t first_ns, last_ns; /* CLOCK_MONOTONIC of the first and last allocation */
};

struct sites {
    struct site table[SITES_MAX];
    uint16_t slots[SITES_SLOTS]; /* index into table + 1, 0: empty */
    size_t count, dropped;       /* dropped: allocations of sites past SITES_MAX */
    uint64_t since_ns;           /* blocks born before it belong to a parent process */
    char *tags[SITES_TAGS_MAX];  /* every tag name pushed, whether the policy names it or not */
    size_t tag_count;
};

/* The index of tag NAME in S->tags, added on first use; -1 when the table is
 * full or out of memory. */
int sites_tag_index(struct sites *s, const char *name);

/* Block B of REQUESTED bytes was allocated while PHASE was the innermost open
 * phase and TAG (an index from sites_tag_index) the allocating thread's
 * innermost tag (-1: none); B remembers its site and birth until it is freed. */
void sites_note_alloc(struct sites *s, int phase, int tag, struct block *b, size_t requested);
/* Block B is being freed. */
void sites_note_free(struct sites *s, const struct block *b);
/* In the child of a fork: the table starts again, and the blocks inherited
 * from the parent count no more (their frees were not the child's work). */
void sites_after_fork_child(struct sites *s);
/* Frees S and its tag names (S may be NULL). */
void sites_free(struct sites *s);

#endif
