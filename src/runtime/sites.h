/* Allocation sites: what the job allocates, grouped by (class, innermost open
 * phase, power-of-two size), with counts, bytes and lifetimes. Kept only when
 * a report is asked for; read by `umpol suggest`. Called with rt->lock held. */
#ifndef UMPOL_SITES_H
#define UMPOL_SITES_H

#include <stdint.h>
#include <stdio.h>

#define SITES_MAX 4096

struct site {
    int32_t class_idx, phase; /* phase: index into phase_stats, -1 outside every phase */
    uint32_t bucket;          /* floor(log2(size)) */
    uint64_t allocations, frees, bytes, min_size, max_size;
    uint64_t live_bytes, peak_live_bytes;
    uint64_t lifetime_ns;       /* summed over the freed blocks */
    uint64_t first_ns, last_ns; /* CLOCK_MONOTONIC of the first and last allocation */
};

#define SITES_SLOTS (2 * SITES_MAX) /* open addressing: at most half full */

struct sites {
    struct site table[SITES_MAX];
    uint16_t slots[SITES_SLOTS]; /* index into table + 1, 0: empty */
    size_t count, dropped;       /* dropped: allocations of sites past SITES_MAX */
};

struct runtime;
struct block;
void sites_note_alloc(struct runtime *rt, struct block *b, size_t requested);
void sites_note_free(struct runtime *rt, const struct block *b);
void sites_report(const struct runtime *rt, FILE *f);

#endif
