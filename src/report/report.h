/* The runtime's report file (UMPOL_REPORT): its schema and its reader.
 *
 * The runtime (src/runtime/report.c) writes one report per process at exit;
 * `umpol report` and `umpol suggest` read them through this module only.
 * The schema is documented in umpol(7); this header is its one definition
 * in code: the version, the limits and the name of every counter.
 *
 * Reading a report:
 *
 *     struct report r;
 *     char why[256];
 *     switch (report_load(&r, path, why, sizeof why)) {
 *     case REPORT_OK: ...use r.classes[i].v[RC_PEAK_BYTES]...; report_free(&r); break;
 *     case REPORT_IO: fprintf(stderr, "%s\n", why); return 2;      // cannot read the file
 *     case REPORT_INVALID: fprintf(stderr, "%s\n", why); return 1; // not a valid report
 *     }
 *
 * After REPORT_OK every field is checked: counters are integers in uint64_t,
 * names are valid UTF-8 of at most REPORT_NAME_MAX bytes (they may still hold
 * control characters: escape them for a terminal), every span names a phase
 * of the report, every event a class of it or none, and every site a class
 * of it and a phase of it or none. On any other result
 * R is empty and needs no report_free. */
#ifndef UMPOL_REPORT_H
#define UMPOL_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The "umpol_report" member: the schema version this build writes and reads. */
#define REPORT_VERSION 1

/* Longest class or phase name in a report, in bytes. The runtime writes the
 * first REPORT_NAME_MAX bytes of a longer name (cut at a character boundary);
 * the reader refuses longer ones. */
#define REPORT_NAME_MAX 4096

/* Largest report file the reader accepts. A report of the runtime's largest
 * tables (4096 phases, 200,000 spans and events, 100,000 classes) is smaller. */
#define REPORT_FILE_MAX ((size_t)256 << 20)

/* Most allocation sites a report holds ("sites"; the runtime counts the
 * allocations of sites past it in "sites_dropped"). */
#define REPORT_SITES_MAX 4096

/* Per-class counters, in the order of report_class_counters[]. Absent
 * counters read as 0 (older reports lack the later ones). */
enum report_class_counter {
    RC_ALLOCATIONS,
    RC_FREES,
    RC_BYTES_REQUESTED,
    RC_LIVE_BYTES,
    RC_PEAK_BYTES,
    RC_SLABS,
    RC_SLAB_BYTES,
    RC_PREFETCHES,
    RC_PREFETCH_BYTES,
    RC_EVICTIONS,
    RC_EVICT_BYTES,
    RC_CAP_REFUSALS,
    RC_BUDGET_SKIPS,
    RC_ADVICE_ERRORS,
    RC_CROSS_STREAM_REUSES,
    RC_DISCARDS,
    RC_DISCARD_BYTES,
    RC_RECLAIMS,
    RC_RECLAIM_BYTES,
    RC_RECLASSIFIED, /* blocks that came from another class when reported saved */
    RC_SLAB_PEAK_BYTES, /* the most slab bytes held at once */
    RC_SLAB_RELEASES,   /* empty slabs given back */
    RC_COUNT
};
extern const char *const report_class_counters[RC_COUNT];

/* Unified Memory counters ("um" objects, with UMPOL_PROFILE=1). */
enum report_um_counter {
    UM_HTOD_BYTES,
    UM_DTOH_BYTES,
    UM_GPU_FAULTS,
    UM_CPU_FAULTS,
    UM_THRASHING,
    UM_THROTTLING,
    UM_GPU_FAULT_NS, /* absent (0) in reports of older umpol */
    UM_COUNT
};
extern const char *const report_um_counters[UM_COUNT];

/* The process's totals ("totals" object). */
enum report_total {
    TOT_ALLOCATIONS,
    TOT_FREES,
    TOT_PASSTHROUGH,
    TOT_JOBS_MANAGED_ALLOCATIONS,
    TOT_RUNTIME_NS,
    TOT_PLACE_NS,
    TOT_RECLAIM_NS,
    TOT_EVICT_NS,
    TOT_HELD_NS,
    TOT_SLAB_GROW_NS,
    TOT_SLAB_RELEASE_NS,
    TOT_REMAP_WAIT_NS,
    TOT_COUNT
};
extern const char *const report_totals[TOT_COUNT];

/* Timeline event kinds ("kind" of an event). */
enum report_event_kind { EV_PREFETCH_GPU, EV_PREFETCH_HOST, EV_EVICT, EV_CAP_REFUSAL, EV_COUNT };
extern const char *const report_event_kinds[EV_COUNT];

/* With `learn step`: per class, the uses the step model predicted against
 * those that came, and how bytes reached the GPU ("next_use" object). */
enum report_next_use {
    NU_PREDICTIONS,
    NU_HITS,
    NU_ERROR_EVENTS,
    NU_AHEAD_BYTES,
    NU_DEMAND_BYTES,
    NU_COUNT
};
extern const char *const report_next_use_counters[NU_COUNT];

/* With `stream written`: per class, the announced uses and how their pieces
 * reached the GPU ("stream" object). */
enum report_stream {
    ST_USES,
    ST_READY_BYTES,
    ST_LATE_BYTES,
    ST_FETCHED_BYTES,
    ST_DROPPED_BYTES,
    ST_SAVED_BYTES,
    ST_UNLEARNED_USES,
    ST_COUNT
};
extern const char *const report_stream_counters[ST_COUNT];

/* With `learn step`: what the step model saw ("step" object). */
struct report_step {
    bool present;
    char *phase; /* the step phase's glob; NULL: found in the job's repetition */
    uint64_t period_events; /* found by repetition: the events of a step then */
    uint64_t steps, matched, differed, departures, resyncs, events_per_step;
    char *fallback; /* why static rules placed some steps, or NULL */
};

/* A class's directives as the runtime applied them ("policy" object). */
struct report_policy {
    bool present;
    char *place;   /* "gpu", "host near", ... or NULL */
    char **access; /* access_count places */
    size_t access_count;
    char **prefetch; /* "gpu on enter \"optimizer*\"", ... */
    size_t prefetch_count;
    bool read_mostly;
    uint64_t priority;
};

/* Where a class's blocks came from (its "memory"). */
enum report_memory {
    REPORT_MEMORY_MANAGED,
    REPORT_MEMORY_DEVICE,
    REPORT_MEMORY_HOST,
    REPORT_MEMORY_MOVABLE
};

struct report_class {
    char *name;
    enum report_memory memory; /* "memory": "managed", "device", "host" or "movable" */
    uint64_t v[RC_COUNT];
    bool has_um;
    uint64_t um[UM_COUNT];
    bool has_next_use;
    uint64_t next_use[NU_COUNT];
    bool has_stream;
    uint64_t stream[ST_COUNT];
    struct report_policy policy;
};

struct report_phase {
    char *name;
    uint64_t entries, total_ns;
    bool has_um;
    uint64_t um[UM_COUNT];
};

struct report_device {
    int device;
    uint64_t total_bytes, cap_bytes, managed_bytes, resident_bytes;
    bool has_budget; /* "budget_bytes" is null when no budget applies */
    uint64_t budget_bytes;
    int host_numa_id;
    /* `spare` (policies that use it): bytes its classes held, the job's
     * peak without them and the peak when they last grew, their room now,
     * and the blocks the card refused them. */
    bool has_spare;
    uint64_t spare_held, spare_others_peak, spare_judged_by, spare_room, spare_misses;
    /* The card's used memory (all processes) when umpol first saw the GPU, its
     * peak when phases opened, umpol's resident bytes then, the samples
     * (absent in older reports). */
    bool has_card;
    uint64_t card_base_used, card_peak_used, card_resident_at_peak, card_samples;
    /* What the card held beyond its base and umpol's count (the most learned),
     * and whether the budget was `budget card` (absent before 82107fa). */
    uint64_t card_outside;
    bool budget_counts_card;
};

/* An opening of a phase; times in ns since the timeline's origin. */
struct report_span {
    size_t phase; /* index in report.phases */
    uint64_t start_ns;
    bool open; /* still open at exit: end_ns is meaningless */
    uint64_t end_ns;
    uint32_t depth;
};

struct report_event {
    uint64_t t_ns;
    enum report_event_kind kind;
    long class_index; /* in report.classes, or -1 */
    int device;
    uint64_t bytes, resident_bytes;
};

/* What the job allocated, grouped by class, innermost open phase, the
 * allocating thread's innermost tag and power-of-two size ("sites"): the
 * figures `umpol suggest` drafts from.
 * The reader checks that allocations >= 1, frees <= allocations,
 * 1 <= min_size <= max_size and first_ns <= last_ns. */
struct report_site {
    size_t class_index; /* in report.classes */
    long phase;         /* in report.phases, or -1: outside every phase */
    char *tag;          /* the innermost tag pushed, NULL: none (or an older report) */
    uint64_t allocations, frees, bytes, min_size, max_size;
    uint64_t peak_live_bytes;   /* the most of its bytes live at once */
    uint64_t lifetime_ns;       /* summed over its freed blocks */
    uint64_t first_ns, last_ns; /* CLOCK_MONOTONIC of its first and last allocation */
};

/* One process's report. */
struct report {
    int version;
    long pid;
    long rank; /* -1 when the process had no rank ("rank": null) */
    uint64_t totals[TOT_COUNT];
    struct report_step step;
    struct report_device *devices;
    size_t device_count;
    struct report_class *classes;
    size_t class_count;
    struct report_phase *phases;
    size_t phase_count;
    bool profiled; /* the classes carry "um" counters */
    struct report_span *spans;
    size_t span_count;
    struct report_event *events;
    size_t event_count;
    uint64_t spans_dropped, events_dropped;
    bool has_sites; /* older reports have no "sites" */
    struct report_site *sites;
    size_t site_count;
    uint64_t sites_dropped;
};

enum report_status {
    REPORT_OK = 0,
    REPORT_INVALID = 1, /* read, but not a valid report of this version */
    REPORT_IO = 2       /* cannot be read: missing, not a regular file, too large */
};

/* Reads the regular file PATH (at most REPORT_FILE_MAX bytes; directories,
 * devices and FIFOs are refused without blocking). On failure WHY holds one
 * line naming PATH and the reason, e.g. "r.json: unsupported report version 2
 * (this umpol reads 1)". */
enum report_status report_load(struct report *r, const char *path, char *why, size_t why_len);

/* The same for LEN bytes of TEXT already in memory; WHY does not name a file. */
enum report_status report_parse(struct report *r, const char *text, size_t len, char *why,
                                size_t why_len);

void report_free(struct report *r);

#endif
