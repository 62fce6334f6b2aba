/* Floor 3, policy (data only): what streaming ahead of use keeps (stream.h
 * says what it does). Apart from stream.h so that state.h can hold it. */
#ifndef UMPOL_RUNTIME_STREAM_STATE_H
#define UMPOL_RUNTIME_STREAM_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/cuda_api.h"
#include "runtime/device.h"

#define STREAM_MARKS 1024              /* uses whose completion is watched at once */
#define STREAM_CYCLE_MAX (1u << 18)    /* blocks' uses in a cycle that is learned */
#define STREAM_SCAN 4096               /* learned uses looked through for the next pieces */
#define STREAM_AHEAD_BYTES (1ull << 30) /* what is brought ahead of the next use */
#define STREAM_ROOM_SLAB (256ull << 20) /* empty slabs given back for it: this large or more */

/* Per GPU: the marks recorded on the job's stream, oldest first. */
struct stream_marks {
    cudaEvent_t ev[STREAM_MARKS];
    uint64_t use[STREAM_MARKS]; /* the use each was recorded at, before its work */
    size_t head, count;
    uint64_t done;       /* every use below this has finished on the GPU */
    cudaStream_t stream; /* the job's stream the marks are on */
    bool known;          /* stream is set */
};

/* Per class that streams: the order of its uses, learned. */
struct stream_class {
    uintptr_t *ref, *cur; /* the blocks used, in order: the last cycle, this one */
    size_t ref_len, cur_len, ref_cap, cur_cap;
    size_t cursor;  /* in ref: where the next use is expected */
    bool writing;   /* one of its write phases is open: nothing streams */
    bool overflow;  /* this cycle outgrew STREAM_CYCLE_MAX: not learned */
    bool lost;      /* the last use was not found in the learned cycle */
    /* The copies in could not be ordered after the last write phase's
     * writes: nothing is fetched until the next one ends ordered. */
    bool unordered;
};

struct stream_state {
    struct stream_class *classes; /* per class; NULL: no class streams */
    struct stream_marks *marks[RT_MAX_DEVICES]; /* per GPU, made on first use */
    uint64_t uses;                /* umpol_use calls so far */
    /* A stream capture was seen: graph replays use the pieces unannounced,
     * so nothing streams any more (said once); and the pieces then on their
     * way in were given up, once no capture was in progress. */
    bool off, off_settled;
    /* The last use's next pieces that the budget had no room for: their
     * class, GPU and bytes (0: none). */
    int short_class, short_device;
    uint64_t short_bytes;
};

#endif
