/* Floor 3, policy. Phases and tags: which of the policy's phase globs are
 * open (process-wide bits the classifier reads), per-phase statistics and
 * spans, and each thread's tag stack. Opening and closing a phase returns
 * the glob bits it set; the runtime decides what they trigger. */
#ifndef UMPOL_RUNTIME_PHASE_H
#define UMPOL_RUNTIME_PHASE_H

#include <stddef.h>
#include <stdint.h>

struct runtime;

int phases_init(struct runtime *rt);
void phases_free(struct runtime *rt);
/* Open phase NAME on this thread (TS: the profile's clock, 0 when off).
 * Returns the glob bits it set, valid until the matching phases_pop; NULL
 * when out of memory (the phase is then not counted). OUTER (phase_words
 * words, or NULL): set to those of its globs that no other open phase
 * matched (this opening is their outermost). */
const uint64_t *phases_push(struct runtime *rt, const char *name, uint64_t ts, uint64_t *outer);
/* Close this thread's innermost phase. Returns its glob bits, which the
 * caller frees; NULL when none is open. OUTER (or NULL): set to those of its
 * globs that no phase still open matches (this closing is their outermost). */
uint64_t *phases_pop(struct runtime *rt, uint64_t ts, uint64_t *outer);
/* Close this thread's innermost phase named NAME, with the phases opened
 * inside it left open; NULL when none is open. OUTER: as phases_pop's. */
uint64_t *phases_pop_named(struct runtime *rt, const char *name, uint64_t ts, uint64_t *outer);
/* How many phases are open on this thread. */
size_t phases_depth(void);
/* In the child of a fork: the forking thread's phases stay open (new spans
 * stamped TS), counts restart. */
void phases_after_fork_child(struct runtime *rt, uint64_t ts);

/* This thread's tag bits (NULL when no tag is pushed). */
const uint64_t *tag_bits_current(void);
/* This thread's innermost tag as an index into the report's site tags
 * (sites.h), -1: none pushed, or no sites kept. */
int tag_site_current(void);
void tag_push(struct runtime *rt, const char *name);
void tag_pop(void);

#endif
