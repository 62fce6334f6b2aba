/* Floor 1, data: the allocation trace. See trace.h. */
#include "runtime/trace.h"

#include <inttypes.h>
#include <stdlib.h>

/* The trace's number for STREAM: 0 for the legacy stream, then in order of
 * first use. */
static uint8_t stream_number(struct trace *t, cudaStream_t stream)
{
    if (!stream)
        return 0;
    for (size_t i = 0; i < t->stream_count; i++)
        if (t->streams[i] == stream)
            return (uint8_t)(i + 1);
    if (t->stream_count == TRACE_STREAMS)
        return TRACE_STREAMS;
    t->streams[t->stream_count++] = stream;
    return (uint8_t)t->stream_count;
}

void trace_note(struct trace *t, struct trace_event e, cudaStream_t stream)
{
    if (t->len == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 4096;
        if (cap > TRACE_MAX_EVENTS)
            cap = TRACE_MAX_EVENTS;
        struct trace_event *ev = cap > t->cap ? realloc(t->events, cap * sizeof *ev) : NULL;
        if (!ev) {
            t->dropped++;
            return;
        }
        t->events = ev;
        t->cap = cap;
    }
    e.stream = stream_number(t, stream);
    t->events[t->len++] = e;
}

int trace_write(const struct trace *t, FILE *f, const char *const *names,
                const char *const *memory, size_t nclasses, size_t slab_bytes)
{
    fprintf(f, "# umpol allocation trace 4\n");
    fprintf(f, "slab %zu\n", slab_bytes);
    for (size_t c = 0; c < nclasses; c++)
        fprintf(f, "class %zu %s %s\n", c, memory[c], names[c]);
    fprintf(f, "dropped %" PRIu64 "\n", t->dropped);
    uint64_t t0 = t->len ? t->events[0].t_ns : 0;
    for (size_t i = 0; i < t->len; i++) {
        const struct trace_event *e = &t->events[i];
        if (e->op == 'a')
            fprintf(f, "a %" PRIu64 " %" PRIu64 " %d %d %u %u %" PRIu64 " %u %u %" PRIu64 "\n",
                    e->t_ns - t0, e->seq, e->device, e->class_idx, e->stream, e->mode, e->size,
                    e->on_gpu, e->growth, e->slab_base);
        else
            fprintf(f, "f %" PRIu64 " %" PRIu64 " %d %d %u %u %u\n", e->t_ns - t0, e->seq,
                    e->device, e->class_idx, e->stream, e->mode, e->on_gpu);
    }
    return ferror(f) ? -1 : 0;
}

void trace_clear(struct trace *t)
{
    t->len = 0;
    t->dropped = 0;
    t->stream_count = 0;
}

void trace_free(struct trace *t)
{
    if (!t)
        return;
    free(t->events);
    free(t);
}
