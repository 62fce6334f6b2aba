/* pool_replay: an allocation trace (UMPOL_TRACE, umpol(7)) replayed against
 * the runtime's own pools (src/runtime/pool.c: the same code and rules, no
 * CUDA), to study on any machine how a job's blocks fill its classes' slabs.
 * Per class: the most bytes live at once, the slabs the pool grew to, and the
 * free space in them it could not reuse, which the runtime's report shows as
 * peak_bytes, slabs and slab_bytes. The replay treats every stream as idle
 * and models no eviction or reclaim: for a run that had none (the report's
 * evictions and reclaims are 0) its figures are the report's.
 *
 *   pool_replay [--json] TRACE
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/pool.h"

#define MAX_CLASSES 256

struct class_replay {
    char name[64], memory[16];
    struct pool *pool;
    uint64_t allocations, frees, live, peak, slabs, slab_bytes, dedicated, dedicated_bytes;
};

struct replay {
    struct class_replay classes[MAX_CLASSES];
    size_t nclasses, slab_bytes;
    uint64_t dropped, unknown_frees, next_base;
    struct block **by_seq; /* live blocks by their allocation's sequence number */
    size_t seq_cap;
};

static bool all_idle(void *ctx, cudaStream_t stream)
{
    (void)ctx;
    (void)stream;
    return true;
}

static int bad(const char *path, long line, const char *what)
{
    fprintf(stderr, "pool_replay: %s:%ld: %s\n", path, line, what);
    return 1;
}

static struct block **seq_slot(struct replay *r, uint64_t seq)
{
    if (seq >= r->seq_cap) {
        size_t cap = r->seq_cap ? r->seq_cap : 4096;
        while (cap <= seq)
            cap *= 2;
        struct block **n = realloc(r->by_seq, cap * sizeof *n);
        if (!n)
            return NULL;
        memset(n + r->seq_cap, 0, (cap - r->seq_cap) * sizeof *n);
        r->by_seq = n;
        r->seq_cap = cap;
    }
    return &r->by_seq[seq];
}

/* The trace's stream number as a handle the pool can compare. */
static cudaStream_t stream_handle(unsigned n)
{
    return (cudaStream_t)(uintptr_t)n;
}

static const char *replay_alloc(struct replay *r, uint64_t seq, unsigned cls, unsigned stream,
                                unsigned mode, uint64_t size, unsigned on_gpu)
{
    if (cls >= r->nclasses)
        return "allocation in a class the header does not name";
    struct class_replay *c = &r->classes[cls];
    struct pool_request req;
    if (!pool_request_for(size, r->slab_bytes, &req))
        return "size too large";
    struct block **slot = seq_slot(r, seq);
    if (!slot)
        return "out of memory";
    if (*slot)
        return "a sequence number allocated twice";
    bool wait;
    enum alloc_mode m = mode ? MODE_ANY : MODE_STREAM;
    struct block *b = pool_find_free(c->pool, req.want, req.max, stream_handle(stream), m,
                                     all_idle, NULL, &wait);
    if (!b) {
        uint64_t base = r->next_base;
        r->next_base += (req.grow + (2u << 20) - 1) / (2u << 20) * (2u << 20);
        struct slab *s = pool_add_slab(c->pool, (uintptr_t)base, req.grow, req.dedicated);
        if (!s)
            return "out of memory";
        c->slabs++;
        c->slab_bytes += req.grow;
        c->dedicated += req.dedicated;
        c->dedicated_bytes += req.dedicated ? req.grow : 0;
        b = s->first;
    }
    pool_take(c->pool, b, req.want);
    b->free = false;
    b->free_stream_count = 0;
    b->stream = stream_handle(stream);
    b->requested = size;
    b->on_gpu = on_gpu != 0; /* where the runtime placed it */
    *slot = b;
    c->allocations++;
    c->live += b->size;
    if (c->live > c->peak)
        c->peak = c->live;
    return NULL;
}

static void replay_free(struct replay *r, uint64_t seq, unsigned stream, unsigned mode)
{
    struct block *b = seq < r->seq_cap ? r->by_seq[seq] : NULL;
    if (!b) { /* allocated before the trace began (a forked child's) */
        r->unknown_frees++;
        return;
    }
    r->by_seq[seq] = NULL;
    struct class_replay *c = &r->classes[b->slab->pool->class_idx];
    c->frees++;
    c->live -= b->size;
    pool_put(c->pool, b, stream_handle(stream), mode ? MODE_ANY : MODE_STREAM);
}

static int read_trace(struct replay *r, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "pool_replay: %s: %s\n", path, strerror(errno));
        return 1;
    }
    char line[512];
    long n = 0;
    int rc = 0;
    bool header = false;
    while (!rc && fgets(line, sizeof line, f)) {
        n++;
        if (!strchr(line, '\n') && !feof(f)) {
            rc = bad(path, n, "line too long");
            break;
        }
        if (n == 1) {
            header = strncmp(line, "# umpol allocation trace 1", 26) == 0;
            if (!header)
                rc = bad(path, n, "not an umpol allocation trace (version 1)");
            continue;
        }
        uint64_t t, seq, size, v;
        unsigned cls, stream, mode, on_gpu, idx;
        char mem[16], name[64], tail;
        if (line[0] == '#' || line[0] == '\n')
            continue;
        if (sscanf(line, "a %" SCNu64 " %" SCNu64 " %u %u %u %" SCNu64 " %u %c", &t, &seq, &cls,
                   &stream, &mode, &size, &on_gpu, &tail) == 7) {
            const char *why = replay_alloc(r, seq, cls, stream, mode, size, on_gpu);
            if (why)
                rc = bad(path, n, why);
        } else if (sscanf(line, "f %" SCNu64 " %" SCNu64 " %u %u %u %c", &t, &seq, &cls, &stream,
                          &mode, &tail) == 5) {
            replay_free(r, seq, stream, mode);
        } else if (sscanf(line, "slab %" SCNu64 " %c", &v, &tail) == 1 && v > 0) {
            r->slab_bytes = v;
        } else if (sscanf(line, "class %u %15s %63s %c", &idx, mem, name, &tail) == 3) {
            if (idx != r->nclasses || idx >= MAX_CLASSES) {
                rc = bad(path, n, "classes out of order or too many");
                break;
            }
            struct class_replay *c = &r->classes[r->nclasses++];
            snprintf(c->name, sizeof c->name, "%s", name);
            snprintf(c->memory, sizeof c->memory, "%s", mem);
            if (!(c->pool = calloc(1, sizeof *c->pool)))
                rc = bad(path, n, "out of memory");
            else
                c->pool->class_idx = (int)idx;
        } else if (sscanf(line, "dropped %" SCNu64 " %c", &v, &tail) == 1) {
            r->dropped = v;
        } else {
            rc = bad(path, n, "not a trace line (a, f, slab, class or dropped)");
        }
        if (!rc && (line[0] == 'a' || line[0] == 'f') && !r->slab_bytes)
            rc = bad(path, n, "an event before the 'slab' line");
    }
    if (!rc && ferror(f))
        rc = bad(path, n, strerror(errno));
    if (!rc && !header)
        rc = bad(path, 0, "empty file");
    fclose(f);
    return rc;
}

static double gib(uint64_t b)
{
    return (double)b / (1u << 30);
}

static void print(const struct replay *r, bool json)
{
    if (json)
        printf("{\"slab_bytes\": %zu, \"dropped\": %" PRIu64 ", \"unknown_frees\": %" PRIu64
               ", \"classes\": [",
               r->slab_bytes, r->dropped, r->unknown_frees);
    else
        printf("%-20s %-8s %12s %10s %10s %7s %10s %10s\n", "class", "memory", "allocations",
               "peak GiB", "slabs GiB", "slabs", "dedicated", "spare");
    for (size_t i = 0; i < r->nclasses; i++) {
        const struct class_replay *c = &r->classes[i];
        uint64_t spare = c->slab_bytes > c->peak ? c->slab_bytes - c->peak : 0;
        if (json)
            printf("%s\n  {\"name\": \"%s\", \"memory\": \"%s\", \"allocations\": %" PRIu64
                   ", \"frees\": %" PRIu64 ", \"peak_bytes\": %" PRIu64 ", \"slabs\": %" PRIu64
                   ", \"slab_bytes\": %" PRIu64 ", \"dedicated_slabs\": %" PRIu64
                   ", \"dedicated_bytes\": %" PRIu64 "}",
                   i ? "," : "", c->name, c->memory, c->allocations, c->frees, c->peak, c->slabs,
                   c->slab_bytes, c->dedicated, c->dedicated_bytes);
        else
            printf("%-20s %-8s %12" PRIu64 " %10.2f %10.2f %7" PRIu64 " %10" PRIu64
                   " %9.0f%%\n",
                   c->name, c->memory, c->allocations, gib(c->peak), gib(c->slab_bytes), c->slabs,
                   c->dedicated, c->slab_bytes ? 100.0 * (double)spare / (double)c->slab_bytes : 0);
    }
    if (json)
        puts("\n]}");
    else if (r->dropped || r->unknown_frees)
        printf("(%" PRIu64 " events dropped by the runtime, %" PRIu64
               " frees of blocks allocated before the trace)\n",
               r->dropped, r->unknown_frees);
}

int main(int argc, char **argv)
{
    bool json = false;
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            puts("usage: pool_replay [--json] TRACE\n\n"
                 "Replay an allocation trace (UMPOL_TRACE) against umpol's pools and print,\n"
                 "per class, the peak of live bytes, the slabs the pool grew to and the share\n"
                 "of them that was spare. Every stream counts as idle; no eviction or reclaim\n"
                 "is modelled.\n\n"
                 "options:\n"
                 "  --json     one JSON object instead of the table\n"
                 "  -h, --help this help\n\n"
                 "exit status: 0 replayed, 1 the trace is not valid, 2 usage");
            return 0;
        }
        if (strcmp(argv[i], "--json") == 0)
            json = true;
        else if (!path && argv[i][0] != '-')
            path = argv[i];
        else {
            fprintf(stderr, "pool_replay: unexpected argument '%s' (see --help)\n", argv[i]);
            return 2;
        }
    }
    if (!path) {
        fputs("usage: pool_replay [--json] TRACE\n", stderr);
        return 2;
    }
    struct replay *r = calloc(1, sizeof *r);
    if (!r)
        return 1;
    r->next_base = 1ull << 40;
    int rc = read_trace(r, path);
    if (!rc)
        print(r, json);
    for (size_t i = 0; i < r->nclasses; i++)
        pool_destroy(r->classes[i].pool);
    free(r->by_seq);
    free(r);
    return rc;
}
