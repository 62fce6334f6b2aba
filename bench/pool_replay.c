/* pool_replay: an allocation trace (UMPOL_TRACE, umpol(7)) replayed against
 * the runtime's own pools (src/runtime/pool.c: the same code and rules, no
 * CUDA), to study on any machine how a job's blocks fill its classes' slabs.
 * Per class: the most bytes live at once, the most slab bytes held at once,
 * the slabs held at the end and those given back, and the share of the slab
 * peak that was free space it could not reuse, which the runtime's report
 * shows as peak_bytes, slab_peak_bytes, slabs, slab_bytes and slab_releases.
 * The replay treats every stream as idle and models no eviction or reclaim:
 * for a run that had none (the report's evictions and reclaims are 0) its
 * figures are the report's. Blocks the step's plan served from its arena
 * (`learn step`, trace version 4) count in the live and peak bytes but take
 * nothing from the pools: they are counted apart. The arena, and the slabs
 * given back to make it, are not modelled: under `learn step` the slab
 * figures differ from the report's, which counts the arena as a slab.
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
#define MAX_DEVICES 64

/* A class: a pool per device, its figures summed over them as the report does. */
struct class_replay {
    char name[256], memory[16];
    struct pool *pools[MAX_DEVICES];
    bool slab_on_gpu; /* where the runtime last put a new slab of the class: whole on the GPU */
    uint64_t allocations, frees, live, peak, slabs, slab_bytes, dedicated, dedicated_bytes;
    uint64_t slab_peak_bytes, slab_releases;
    uint64_t planned, planned_bytes; /* allocations the step's plan served, and their bytes */
};

/* Live blocks by their allocation's sequence number: open addressing,
 * linear probing, at most half full. */
struct live_map {
    uint64_t *keys; /* seq + 1; 0: empty */
    struct block **blocks;
    size_t cap, count;
};

struct replay {
    struct class_replay classes[MAX_CLASSES];
    size_t nclasses, slab_bytes;
    uint64_t dropped, unknown_frees, next_base;
    struct live_map live;
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

static size_t slot_of(const struct live_map *m, uint64_t key)
{
    size_t i = (size_t)(key * 0x9E3779B97F4A7C15ull) & (m->cap - 1);
    while (m->keys[i] && m->keys[i] != key)
        i = (i + 1) & (m->cap - 1);
    return i;
}

static bool live_put(struct live_map *m, uint64_t seq, struct block *b)
{
    if (2 * (m->count + 1) > m->cap) {
        struct live_map n = {.cap = m->cap ? 2 * m->cap : 1024};
        n.keys = calloc(n.cap, sizeof *n.keys);
        n.blocks = calloc(n.cap, sizeof *n.blocks);
        if (!n.keys || !n.blocks) {
            free(n.keys);
            free(n.blocks);
            return false;
        }
        for (size_t i = 0; i < m->cap; i++)
            if (m->keys[i]) {
                size_t j = slot_of(&n, m->keys[i]);
                n.keys[j] = m->keys[i];
                n.blocks[j] = m->blocks[i];
            }
        n.count = m->count;
        free(m->keys);
        free(m->blocks);
        *m = n;
    }
    size_t i = slot_of(m, seq + 1);
    m->count += !m->keys[i];
    m->keys[i] = seq + 1;
    m->blocks[i] = b;
    return true;
}

/* The live block of SEQ, removed from M; NULL: none. */
static struct block *live_take(struct live_map *m, uint64_t seq)
{
    if (!m->cap)
        return NULL;
    size_t i = slot_of(m, seq + 1);
    if (!m->keys[i])
        return NULL;
    struct block *b = m->blocks[i];
    m->keys[i] = 0;
    m->count--;
    /* Close the gap: move back the entries of the run after it that probe past it. */
    for (size_t j = (i + 1) & (m->cap - 1); m->keys[j]; j = (j + 1) & (m->cap - 1)) {
        size_t home = (size_t)(m->keys[j] * 0x9E3779B97F4A7C15ull) & (m->cap - 1);
        if (((j - home) & (m->cap - 1)) >= ((j - i) & (m->cap - 1))) {
            m->keys[i] = m->keys[j];
            m->blocks[i] = m->blocks[j];
            m->keys[j] = 0;
            i = j;
        }
    }
    return b;
}

/* The trace's stream number as a handle the pool can compare. */
static cudaStream_t stream_handle(unsigned n)
{
    return (cudaStream_t)(uintptr_t)n;
}

static const char *replay_alloc(struct replay *r, uint64_t seq, unsigned device, unsigned cls,
                                unsigned stream, unsigned mode, uint64_t size, unsigned on_gpu,
                                unsigned growth, uint64_t slab_base)
{
    if (cls >= r->nclasses)
        return "allocation in a class the header does not name";
    if (device >= MAX_DEVICES)
        return "device number too large";
    if (growth > 3)
        return "growth is not 0, 1, 2 or 3";
    struct class_replay *c = &r->classes[cls];
    struct pool **pp = &c->pools[device];
    if (!*pp && !(*pp = calloc(1, sizeof **pp)))
        return "out of memory";
    (*pp)->class_idx = (int)cls;
    (*pp)->device = (int)device;
    (*pp)->in_place = strcmp(c->memory, "device") == 0 || strcmp(c->memory, "host") == 0;
    struct pool_request req;
    if (!pool_request_for(size, r->slab_bytes, &req))
        return "size too large";
    if (live_take(&r->live, seq))
        return "a sequence number allocated twice";
    if (growth == 3) { /* the plan's arena: a block of no pool, freed back to no pool */
        struct block *b = calloc(1, sizeof *b);
        if (!b || !live_put(&r->live, seq, b)) {
            free(b);
            return "out of memory";
        }
        b->class_idx = (int)cls;
        b->size = req.want;
        c->allocations++;
        c->planned++;
        c->planned_bytes += req.want;
        c->live += b->size;
        if (c->live > c->peak)
            c->peak = c->live;
        return NULL;
    }
    if (growth)
        c->slab_on_gpu = growth == 2;
    bool wait;
    enum alloc_mode m = mode ? MODE_ANY : MODE_STREAM;
    struct block *b = pool_find_free(*pp, req.want, req.max, stream_handle(stream), m, all_idle,
                                     NULL, &wait);
    if (!b) {
        /* As the runtime grows a pool on the card: its empty slabs go first. */
        if (strcmp(c->memory, "host") != 0)
            for (struct slab *s = pool_detach_empty_slabs(*pp), *next; s; s = next) {
                next = s->next;
                c->slabs--;
                c->slab_bytes -= s->size;
                c->slab_releases++;
                c->dedicated -= s->dedicated;
                c->dedicated_bytes -= s->dedicated ? s->size : 0;
                slab_destroy(*pp, s);
            }
        /* Where the runtime's slab was (version 3): the pools take the lowest
         * address first, so the replay follows it; else addresses in order. */
        uint64_t base = slab_base;
        if (!base) {
            base = r->next_base;
            r->next_base += (req.grow + (2u << 20) - 1) / (2u << 20) * (2u << 20);
        }
        struct slab *s = pool_add_slab(*pp, (uintptr_t)base, req.grow, req.dedicated);
        if (!s)
            return "out of memory";
        if (c->slab_on_gpu) /* placed whole on the GPU as the runtime placed the class's slabs */
            pool_idle_arrived_gpu(*pp, s->first);
        c->slabs++;
        c->slab_bytes += req.grow;
        if (c->slab_bytes > c->slab_peak_bytes)
            c->slab_peak_bytes = c->slab_bytes;
        c->dedicated += req.dedicated;
        c->dedicated_bytes += req.dedicated ? req.grow : 0;
        b = s->first;
    }
    pool_take(*pp, b, req.want);
    b->free = false;
    b->free_stream_count = 0;
    b->stream = stream_handle(stream);
    b->requested = size;
    b->on_gpu = on_gpu != 0; /* where the runtime placed it */
    if (!live_put(&r->live, seq, b))
        return "out of memory";
    c->allocations++;
    c->live += b->size;
    if (c->live > c->peak)
        c->peak = c->live;
    return NULL;
}

static void replay_free(struct replay *r, uint64_t seq, unsigned stream, unsigned mode,
                        unsigned on_gpu)
{
    struct block *b = live_take(&r->live, seq);
    if (!b) { /* allocated before the trace began (a forked child's) */
        r->unknown_frees++;
        return;
    }
    if (!b->slab) { /* the plan's */
        r->classes[b->class_idx].live -= b->size;
        r->classes[b->class_idx].frees++;
        free(b);
        return;
    }
    struct pool *p = b->slab->pool;
    struct class_replay *c = &r->classes[p->class_idx];
    c->frees++;
    c->live -= b->size;
    b->on_gpu = on_gpu != 0; /* where it was when freed: placement may have moved it */
    pool_put(p, b, stream_handle(stream), 0, mode ? MODE_ANY : MODE_STREAM);
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
    int version = 0;
    char tail;
    while (!rc && fgets(line, sizeof line, f)) {
        n++;
        if (!strchr(line, '\n') && !feof(f)) {
            rc = bad(path, n, "line too long");
            break;
        }
        if (n == 1) {
            header = sscanf(line, "# umpol allocation trace %d %c", &version, &tail) == 1 &&
                     version >= 2 && version <= 4;
            if (!header)
                rc = bad(path, n, "not an umpol allocation trace (version 2, 3 or 4)");
            continue;
        }
        uint64_t t, seq, size, v;
        uint64_t base = 0;
        unsigned device, cls, stream, mode, on_gpu, growth, idx;
        char mem[16], name[256];
        if (line[0] == '#' || line[0] == '\n')
            continue;
        /* Version 3 adds the address of the slab an allocation added; version 4
         * growth 3, an allocation the step's plan served. */
        bool alloc = version >= 3
                         ? sscanf(line, "a %" SCNu64 " %" SCNu64 " %u %u %u %u %" SCNu64
                                        " %u %u %" SCNu64 " %c",
                                  &t, &seq, &device, &cls, &stream, &mode, &size, &on_gpu, &growth,
                                  &base, &tail) == 10
                         : sscanf(line, "a %" SCNu64 " %" SCNu64 " %u %u %u %u %" SCNu64 " %u %u %c",
                                  &t, &seq, &device, &cls, &stream, &mode, &size, &on_gpu, &growth,
                                  &tail) == 9;
        if (alloc && growth == 3 && version < 4) {
            rc = bad(path, n, "growth 3 (planned) before version 4");
        } else if (alloc) {
            const char *why =
                replay_alloc(r, seq, device, cls, stream, mode, size, on_gpu, growth, base);
            if (why)
                rc = bad(path, n, why);
        } else if (sscanf(line, "f %" SCNu64 " %" SCNu64 " %u %u %u %u %u %c", &t, &seq, &device,
                          &cls, &stream, &mode, &on_gpu, &tail) == 7) {
            replay_free(r, seq, stream, mode, on_gpu);
        } else if (sscanf(line, "slab %" SCNu64 " %c", &v, &tail) == 1 && v > 0) {
            r->slab_bytes = v;
        } else if (sscanf(line, "class %u %15s %255s %c", &idx, mem, name, &tail) == 3) {
            if (idx != r->nclasses || idx >= MAX_CLASSES) {
                rc = bad(path, n, "classes out of order or too many");
                break;
            }
            struct class_replay *c = &r->classes[r->nclasses++];
            snprintf(c->name, sizeof c->name, "%s", name);
            snprintf(c->memory, sizeof c->memory, "%s", mem);
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
        printf("%-20s %-8s %12s %10s %14s %7s %9s %10s %7s %9s\n", "class", "memory", "allocations",
               "peak GiB", "slabs peak GiB", "slabs", "released", "dedicated", "spare", "planned");
    for (size_t i = 0; i < r->nclasses; i++) {
        const struct class_replay *c = &r->classes[i];
        uint64_t held = c->slab_peak_bytes;
        uint64_t spare = held > c->peak ? held - c->peak : 0;
        if (json)
            printf("%s\n  {\"name\": \"%s\", \"memory\": \"%s\", \"allocations\": %" PRIu64
                   ", \"frees\": %" PRIu64 ", \"peak_bytes\": %" PRIu64 ", \"slabs\": %" PRIu64
                   ", \"slab_bytes\": %" PRIu64 ", \"slab_peak_bytes\": %" PRIu64
                   ", \"slab_releases\": %" PRIu64 ", \"dedicated_slabs\": %" PRIu64
                   ", \"dedicated_bytes\": %" PRIu64 ", \"planned_allocations\": %" PRIu64
                   ", \"planned_bytes\": %" PRIu64 "}",
                   i ? "," : "", c->name, c->memory, c->allocations, c->frees, c->peak, c->slabs,
                   c->slab_bytes, held, c->slab_releases, c->dedicated, c->dedicated_bytes,
                   c->planned, c->planned_bytes);
        else
            printf("%-20s %-8s %12" PRIu64 " %10.2f %14.2f %7" PRIu64 " %9" PRIu64 " %10" PRIu64
                   " %6.0f%% %9" PRIu64 "\n",
                   c->name, c->memory, c->allocations, gib(c->peak), gib(held), c->slabs,
                   c->slab_releases, c->dedicated, held ? 100.0 * (double)spare / (double)held : 0,
                   c->planned);
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
                 "per class, the peak of live bytes, the slabs the pool grew to, the share\n"
                 "of them that was spare, and the allocations the step's plan served (not\n"
                 "from the pools). Every stream counts as idle; no eviction or reclaim is\n"
                 "modelled.\n\n"
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
    if (!r) {
        fputs("pool_replay: out of memory\n", stderr);
        return 1;
    }
    r->next_base = 1ull << 40;
    int rc = read_trace(r, path);
    if (!rc)
        print(r, json);
    for (size_t i = 0; i < r->live.cap; i++) /* the plan's blocks still live (no slab) */
        if (r->live.keys[i] && r->live.blocks[i] && !r->live.blocks[i]->slab)
            free(r->live.blocks[i]);
    for (size_t i = 0; i < r->nclasses; i++)
        for (int d = 0; d < MAX_DEVICES; d++)
            if (r->classes[i].pools[d])
                pool_destroy(r->classes[i].pools[d]);
    free(r->live.keys);
    free(r->live.blocks);
    free(r);
    return rc;
}
