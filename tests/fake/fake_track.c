/* The fake runtime's table of live allocations: pointer -> size. */
#include <stdlib.h>
#include <string.h>

#include "fake_cudart.h"

struct entry {
    void *ptr;
    size_t size;
    struct entry *next;
};

static struct entry *buckets[65536];

static size_t bucket_of(void *ptr)
{
    return ((uintptr_t)ptr >> 9) & 65535;
}

uint64_t fake_gpu_bytes(void)
{
    const char *env = getenv("FAKE_GPU_BYTES");
    return env ? strtoull(env, NULL, 10) : 1ull << 30;
}

void fake_track(void *ptr, size_t size)
{
    struct entry *e = malloc(sizeof *e);
    if (!e)
        abort();
    *e = (struct entry){ptr, size, buckets[bucket_of(ptr)]};
    buckets[bucket_of(ptr)] = e;
}

int fake_untrack(void *ptr, size_t *size)
{
    for (struct entry **ep = &buckets[bucket_of(ptr)]; *ep; ep = &(*ep)->next) {
        if ((*ep)->ptr == ptr) {
            struct entry *e = *ep;
            *size = e->size;
            *ep = e->next;
            free(e);
            return 1;
        }
    }
    return 0;
}

/* The fake GPU's residency: which bytes are on the GPU, as sorted disjoint
 * intervals, moved exactly as the runtime's prefetches and frees say. */
struct interval {
    uintptr_t lo, hi;
};

static struct interval *spans;
static size_t span_count, span_cap;
static uint64_t resident;

static void span_insert_at(size_t i, uintptr_t lo, uintptr_t hi)
{
    if (span_count == span_cap) {
        span_cap = span_cap ? span_cap * 2 : 256;
        spans = realloc(spans, span_cap * sizeof *spans);
        if (!spans)
            abort();
    }
    memmove(&spans[i + 1], &spans[i], (span_count - i) * sizeof *spans);
    spans[i] = (struct interval){lo, hi};
    span_count++;
}

void fake_residency_set(uintptr_t lo, uintptr_t hi, int on_gpu)
{
    if (hi <= lo)
        return;
    /* Cut [lo, hi) out of every interval, then add it back when on the GPU. */
    for (size_t i = 0; i < span_count;) {
        struct interval s = spans[i];
        if (s.hi <= lo || s.lo >= hi) {
            i++;
            continue;
        }
        resident -= s.hi - s.lo;
        memmove(&spans[i], &spans[i + 1], (span_count - i - 1) * sizeof *spans);
        span_count--;
        if (s.lo < lo) {
            span_insert_at(i++, s.lo, lo);
            resident += lo - s.lo;
        }
        if (s.hi > hi) {
            span_insert_at(i++, hi, s.hi);
            resident += s.hi - hi;
        }
    }
    if (!on_gpu)
        return;
    size_t i = 0;
    while (i < span_count && spans[i].lo < lo)
        i++;
    span_insert_at(i, lo, hi);
    resident += hi - lo;
}

uint64_t fake_gpu_resident(void)
{
    return resident;
}
