/* Floor 3, policy (data only). Finding the training step in the job's own
 * events, for `learn step;` without a phase: the sequence of allocations,
 * phase openings and marks repeats once a step. The finder keeps the events
 * from the start and, as their number reaches each power of two from 1024,
 * looks for the shortest period p whose repetition covers the later half of
 * everything seen. A period is taken only when the next look, twice as long,
 * finds it again (or at the last look, which has no next): a
 * layer repeated within a step can cover the later half of one look (a deep
 * model's forward pass), but its repetition ends where the step's other
 * events begin. Then it picks an event that occurs exactly once in a period,
 * a phase opening or mark first, as the step's first: each of its
 * occurrences begins a step. No CUDA, no lock, no runtime. */
#ifndef UMPOL_RUNTIME_STEP_FIND_H
#define UMPOL_RUNTIME_STEP_FIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STEP_FIND_MIN 1024u      /* events before the first look */
#define STEP_FIND_MAX (1u << 19) /* events after which the finder gives up */

enum step_find_state {
    FIND_LOOKING,
    FIND_FOUND,     /* anchor and period are set */
    FIND_NO_PERIOD, /* no repetition within STEP_FIND_MAX events */
    FIND_NO_ANCHOR, /* a period, but no event occurs once in it */
    FIND_NO_MEMORY,
};

struct step_finder {
    uint32_t *keys;
    size_t len, cap;
    enum step_find_state state;
    uint32_t anchor;  /* FIND_FOUND: the key that begins each step */
    size_t period;    /* FIND_FOUND or FIND_NO_ANCHOR: events in a step */
    size_t candidate; /* the period the last look found, to be confirmed by the next */
};

/* Add event KEY (a step_key). true when this event completed the search
 * (state is no longer FIND_LOOKING); the events are then let go. */
bool step_find_add(struct step_finder *f, uint32_t key);
void step_find_free(struct step_finder *f);
/* A sentence for the report: how the step was found, or why not. */
const char *step_find_said(const struct step_finder *f);

#endif
