/* Profiling state (profile.c), visible to the tests. */
#ifndef UMPOL_PROFILE_H
#define UMPOL_PROFILE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <cupti_activity.h>

#include "runtime/runtime.h"

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

/* Count one CUPTI Unified Memory record: to the class owning ADDRESS and the
 * phase open at TS, if the phase and step windows keep it. */
void profile_attribute(struct runtime *rt, CUpti_ActivityUnifiedMemoryCounterKind kind,
                       uint64_t value, uint64_t address, uint64_t ts);

#endif
