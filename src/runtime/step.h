/* Floor 3, policy (data only). The step model: a training step repeats the
 * same allocations, phase openings and placements in much the same order.
 * The model records each step's sequence of events, keeps the last complete
 * step as its reference, and while the current step follows it, predicts
 * when something happens next (an event index in the reference; past its
 * end: the next step). Frees are not in the sequence (other threads free in
 * no fixed order); each allocation keeps where its free came instead. The
 * current step may follow the reference loosely: an event the reference has
 * a little further on skips the reference there, and a few unexpected events
 * are passed over (a resync). A step that strays further departs: no more
 * predictions until the next step starts; the caller then falls back to its
 * static rules. No CUDA, no lock, no runtime. */
#ifndef UMPOL_RUNTIME_STEP_H
#define UMPOL_RUNTIME_STEP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STEP_MAX_EVENTS (1u << 20) /* a longer step is not learned */
#define STEP_LOOKAHEAD 64          /* reference events searched for a resync */
#define STEP_MAX_EXTRA 8           /* unexpected events in a row passed over */

enum step_kind { STEP_ALLOC = 1, STEP_ENTER = 3, STEP_EXIT, STEP_USE };

struct step_trace {
    uint32_t *keys;   /* one per event */
    int32_t *partner; /* an allocation: the event index its free came before, else -1 */
    int32_t *at;      /* the reference event this one matched, else -1 */
    size_t len, cap;
};

struct step_model {
    struct step_trace ref, cur;
    size_t ref_pos;             /* the reference event the current step is expected at */
    uint32_t extra;             /* unexpected events in a row */
    bool resyncing;             /* an event was passed over or skipped since the last match */
    bool have_ref;              /* a complete step is known */
    bool on_track;              /* the current step has followed the reference so far */
    bool overflow;              /* the current step outgrew STEP_MAX_EVENTS */
    uint64_t steps;             /* steps begun */
    uint64_t matched, differed; /* completed steps that followed / did not follow the one before */
    uint64_t departures;        /* steps that left the reference part way */
    uint64_t resyncs;           /* times a step found the reference again after straying */
};

/* The key of an event: its kind in the top 3 bits, and a hash of what
 * identifies it (class and size of an allocation, a phase's name). */
uint32_t step_key(enum step_kind kind, uint32_t what, uint64_t detail);
/* A class's placement by one of its rules: kind, class and rule, exactly. */
uint32_t step_use_key(uint32_t class_idx, uint32_t rule);
static inline enum step_kind step_kind_of(uint32_t key)
{
    return (enum step_kind)(key >> 29);
}
static inline uint32_t step_use_class(uint32_t key)
{
    return (key >> 8) & 0xfffff;
}
static inline uint32_t step_use_rule(uint32_t key)
{
    return key & 0xff;
}

void step_free(struct step_model *m);
/* A step begins: the step recorded so far becomes the reference. */
void step_begin(struct step_model *m);
/* Record event KEY in the current step: its index in the current step, or -1
 * before the first step or past STEP_MAX_EVENTS. Bounded work. */
long step_record(struct step_model *m, uint32_t key);
/* The allocation at index ALLOC of the current step was freed now. */
void step_freed(struct step_model *m, long alloc);
/* Are predictions valid now (a reference, followed so far)? */
bool step_predicting(const struct step_model *m);
/* Where the current step stands in the reference: the index of the event
 * expected next. */
size_t step_pos(const struct step_model *m);
/* The reference event that the current step's event I matched, or -1. */
long step_matched(const struct step_model *m, long i);
/* The reference's first event with KEY at index >= FROM, wrapping into the
 * next step (index + the reference's length); -1 when the reference has none. */
long step_next(const struct step_model *m, uint32_t key, size_t from);
/* For the current step's allocation at index ALLOC: the reference event
 * before which the matching allocation of the reference was freed, or -1. */
long step_partner(const struct step_model *m, size_t alloc);
/* The reference's key at index I (0 past its end). */
uint32_t step_ref_key(const struct step_model *m, size_t i);
/* The reference's events, its allocation I's free (the event index it came
 * before, -1: not in the step), and the event of the step before that each
 * of its events matched (-1: none; LEN of them). */
size_t step_ref_len(const struct step_model *m);
long step_ref_partner(const struct step_model *m, size_t i);
const int32_t *step_ref_at(const struct step_model *m);

#endif
