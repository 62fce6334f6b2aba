/* Floor 1, data. The allocation trace (UMPOL_TRACE): every block the
 * runtime's pools hand out and take back, in order, with its class, stream
 * and size, so that the pools' behaviour on a real job can be replayed and
 * studied away from the GPU (bench/pool_replay). An observer's record: it
 * changes no placement. Not thread-safe: the caller holds rt->lock. */
#ifndef UMPOL_RUNTIME_TRACE_H
#define UMPOL_RUNTIME_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cuda_runtime_api.h> /* cudaStream_t, a handle only */

#define TRACE_MAX_EVENTS (4u << 20) /* then events are counted as dropped */
#define TRACE_STREAMS 255           /* streams told apart; later ones share the last number */

/* What an allocation did to its pool besides taking a block; or that the
 * step's plan served it from its class's arena, no pool (version 4). */
enum trace_growth { TRACE_NO_SLAB, TRACE_SLAB_OFF_GPU, TRACE_SLAB_ON_GPU, TRACE_PLANNED };

struct trace_event {
    uint64_t t_ns, seq, size; /* seq: the allocation's sequence number, pairs a free with it */
    uint64_t slab_base;       /* allocation that added a slab: the slab's address, else 0 */
    int32_t class_idx;
    int16_t device;
    uint8_t op;     /* 'a' allocation, 'f' free */
    uint8_t stream; /* the trace's number for the stream, 0 for the legacy stream */
    uint8_t mode;   /* enum alloc_mode */
    uint8_t on_gpu; /* the block's pages on the GPU: once placed (allocation), when freed */
    uint8_t growth; /* allocation: enum trace_growth, the slab it added and where it went */
};

struct trace {
    struct trace_event *events;
    size_t len, cap;
    uint64_t dropped;
    cudaStream_t streams[TRACE_STREAMS];
    size_t stream_count;
};

/* Append event E, its stream given as STREAM; counted as dropped past
 * TRACE_MAX_EVENTS or without memory. */
void trace_note(struct trace *t, struct trace_event e, cudaStream_t stream);
/* Write T as text to F: a header naming each of the NCLASSES classes
 * (NAMES, MEMORY: "managed", "device" or "host") and the slab size, then an
 * event a line (umpol(7), FILES). Returns 0, or -1 when F reported an error. */
int trace_write(const struct trace *t, FILE *f, const char *const *names,
                const char *const *memory, size_t nclasses, size_t slab_bytes);
/* Forget every event (a forked child starts its own trace). */
void trace_clear(struct trace *t);
void trace_free(struct trace *t);

#endif
