/* The fake runtime's table of live allocations: pointer -> size. */
#include <stdlib.h>

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
