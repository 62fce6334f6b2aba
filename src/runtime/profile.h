/* Observer. CUPTI Unified Memory counters (profile.c): its state, visible
 * to the tests, and what the runtime tells it. */
#ifndef UMPOL_PROFILE_H
#define UMPOL_PROFILE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <cupti_activity.h>

#include <stdio.h>

#include "runtime/state.h"

struct cupti_api {
    CUptiResult (*configure)(CUpti_ActivityUnifiedMemoryCounterConfig *, uint32_t);
    CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc,
                                      CUpti_BuffersCallbackCompleteFunc);
    CUptiResult (*enable)(CUpti_ActivityKind);
    CUptiResult (*disable)(CUpti_ActivityKind);
    CUptiResult (*next_record)(uint8_t *, size_t, CUpti_Activity **);
    CUptiResult (*flush_all)(uint32_t);
    CUptiResult (*timestamp)(uint64_t *);
};

struct profile {
    struct cupti_api api;
    pthread_mutex_t lock;   /* counters and the step window */
    pthread_mutex_t toggle; /* enabling and disabling CUPTI */
    bool configured, enabled, failed;
    char *phase_glob;            /* UMPOL_PROFILE_PHASES */
    char *step_phase;            /* UMPOL_PROFILE_STEP_PHASE */
    long first_step, last_step;  /* -1: every step */
    long step;                   /* openings of step_phase so far */
    uint64_t window_start, window_end; /* CUPTI clock; end 0: open */
    uint64_t records, kept, dropped_buffers;
    struct um_counters unattributed;
    uint64_t (*clock)(void); /* tests: a clock in place of CUPTI's */
};

/* Count one CUPTI Unified Memory record, of TS to END_TS: to the class owning
 * ADDRESS and the phase open at TS, if the phase and step windows keep it. */
void profile_attribute(struct runtime *rt, CUpti_ActivityUnifiedMemoryCounterKind kind,
                       uint64_t value, uint64_t address, uint64_t ts, uint64_t end_ts);

int profile_init(struct runtime *rt);           /* UMPOL_PROFILE*; 0 when off or on */
void profile_device_seen(struct runtime *rt);   /* rt->lock held: configure counters */
uint64_t profile_timestamp(struct runtime *rt); /* CUPTI clock, 0 when off */
void profile_phase_entered(struct runtime *rt, const char *name);
void profile_flush(struct runtime *rt); /* no lock held */
void profile_free(struct runtime *rt);
void profile_lock_all(struct runtime *rt); /* around fork */
void profile_unlock_all(struct runtime *rt);
void profile_after_fork_child(struct runtime *rt); /* counters start again */
void profile_report(const struct runtime *rt, FILE *out);
void profile_print_um(FILE *out, const struct um_counters *c);

#endif
