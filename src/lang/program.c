/* Compiling a checked AST into flat tables, and classifying allocations against them. */
#include "program.h"

#include <stdlib.h>
#include <string.h>

#include "expr.h"
#include "glob.h"
#include "strset.h"

/* Grow-on-demand array append; returns the new element's index or -1. */
static long push(void **items, size_t *count, size_t *cap, size_t elem_size)
{
    if (*count == *cap) {
        size_t n = *cap ? *cap * 2 : 16;
        void *grown = realloc(*items, n * elem_size);
        if (!grown)
            return -1;
        *items = grown;
        *cap = n;
    }
    memset((char *)*items + *count * elem_size, 0, elem_size);
    return (long)(*count)++;
}

struct names {
    struct strset set;
    char ***out; /* the program's owned copies */
    size_t *out_count, cap;
};

struct compiler {
    struct program *p;
    size_t node_cap, prefetch_cap;
    struct names phases, tags, marks;
    bool failed;
};

static long intern(struct compiler *cc, struct names *n, const char *name)
{
    long idx = strset_find(&n->set, name);
    if (idx >= 0)
        return idx;
    long slot = push((void **)n->out, n->out_count, &n->cap, sizeof(char *));
    char *copy = slot >= 0 ? strdup(name) : NULL;
    if (!copy || strset_add(&n->set, copy) != slot) {
        if (slot >= 0)
            (*n->out_count)--;
        free(copy);
        cc->failed = true;
        return 0;
    }
    (*n->out)[slot] = copy;
    return slot;
}

static uint32_t compile_expr(struct compiler *cc, const struct expr *e)
{
    struct program *p = cc->p;
    long idx = push((void **)&p->nodes, &p->node_count, &cc->node_cap, sizeof *p->nodes);
    if (idx < 0) {
        cc->failed = true;
        return 0;
    }
    struct program_node node = {0};
    switch (e->kind) {
    case EXPR_ANY: node.op = OP_ANY; break;
    case EXPR_SIZE: node = (struct program_node){OP_SIZE, 0, 0, e->lo, e->hi}; break;
    case EXPR_NTH: node = (struct program_node){OP_NTH, 0, 0, e->lo, e->hi}; break;
    case EXPR_PHASE: node.op = OP_PHASE; node.lo = (uint64_t)intern(cc, &cc->phases, e->text); break;
    case EXPR_TAG: node.op = OP_TAG; node.lo = (uint64_t)intern(cc, &cc->tags, e->text); break;
    case EXPR_API: node.op = OP_API; node.lo = api_from_name(e->text); break;
    case EXPR_DEVICE: node.op = OP_DEVICE; node.lo = e->lo; break;
    case EXPR_SAVED: node.op = OP_SAVED; break;
    case EXPR_SPARE: node.op = OP_SPARE; break;
    case EXPR_AND:
    case EXPR_OR:
    case EXPR_NOT:
        node.op = e->kind == EXPR_AND ? OP_AND : e->kind == EXPR_OR ? OP_OR : OP_NOT;
        node.left = compile_expr(cc, e->left);
        if (e->right)
            node.right = compile_expr(cc, e->right);
        break;
    }
    p->nodes[idx] = node; /* after the children: push may have moved the array */
    return (uint32_t)idx;
}

#define API_ALL (API_CUDA_MALLOC | API_CUDA_MALLOC_ASYNC | API_CUDA_MALLOC_MANAGED | API_PLUGGABLE)

/* The weakest filter implied by E: intersected over AND, hulled over OR.
 * Interned indexes come from the already compiled node of each leaf. */
static struct class_filter filter_of(const struct program *p, uint32_t i)
{
    const struct program_node *n = &p->nodes[i];
    struct class_filter f = {0, UINT64_MAX, API_ALL, -1, -1, -1, false, 0, false};
    switch (n->op) {
    case OP_SIZE:
        f.size_lo = n->lo;
        f.size_hi = n->hi;
        break;
    case OP_API: f.api_mask = (unsigned)n->lo; break;
    case OP_DEVICE: f.device = (int)n->lo; break;
    case OP_PHASE: f.need_phase = (int32_t)n->lo; break;
    case OP_TAG: f.need_tag = (int32_t)n->lo; break;
    case OP_SAVED: f.need_saved = true; break;
    case OP_NOT: {
        /* Complements that stay simple: an API set, a size bound open on one side. */
        const struct program_node *c = &p->nodes[n->left];
        if (c->op == OP_API)
            f.api_mask = API_ALL & ~(unsigned)c->lo;
        else if (c->op == OP_SIZE && c->lo == 0 && c->hi != UINT64_MAX)
            f.size_lo = c->hi + 1;
        else if (c->op == OP_SIZE && c->hi == UINT64_MAX && c->lo != 0)
            f.size_hi = c->lo - 1;
        break;
    }
    case OP_AND: {
        struct class_filter a = filter_of(p, n->left), b = filter_of(p, n->right);
        f.size_lo = a.size_lo > b.size_lo ? a.size_lo : b.size_lo;
        f.size_hi = a.size_hi < b.size_hi ? a.size_hi : b.size_hi;
        f.api_mask = a.api_mask & b.api_mask;
        f.device = a.device >= 0 ? a.device : b.device;
        if (a.device >= 0 && b.device >= 0 && a.device != b.device)
            f.api_mask = 0; /* two devices at once: never */
        f.need_phase = a.need_phase >= 0 ? a.need_phase : b.need_phase;
        f.need_tag = a.need_tag >= 0 ? a.need_tag : b.need_tag;
        f.need_saved = a.need_saved || b.need_saved;
        break;
    }
    case OP_OR: {
        struct class_filter a = filter_of(p, n->left), b = filter_of(p, n->right);
        f.size_lo = a.size_lo < b.size_lo ? a.size_lo : b.size_lo;
        f.size_hi = a.size_hi > b.size_hi ? a.size_hi : b.size_hi;
        f.api_mask = a.api_mask | b.api_mask;
        f.device = a.device == b.device ? a.device : -1;
        f.need_phase = a.need_phase == b.need_phase ? a.need_phase : -1;
        f.need_tag = a.need_tag == b.need_tag ? a.need_tag : -1;
        f.need_saved = a.need_saved && b.need_saved;
        break;
    }
    default: break; /* nth, any: no necessary condition */
    }
    return f;
}

static struct program_place place_of(struct place pl)
{
    return (struct program_place){pl.kind, pl.index};
}

static void compile_class(struct compiler *cc, const struct class_decl *c, struct program_class *pc,
                          struct class_filter *filter)
{
    struct program *p = cc->p;
    pc->line = c->loc.first_line;
    pc->memory = MEMORY_MANAGED;
    pc->priority = PROGRAM_DEFAULT_PRIORITY;
    pc->prefetch_first = (uint32_t)p->prefetch_count;
    pc->stream_written = -1;
    for (const struct directive *d = c->directives; d; d = d->next) {
        switch (d->kind) {
        case DIR_MATCH:
            pc->root = compile_expr(cc, d->match);
            pc->always = expr_always(d->match);
            pc->takes_saved = expr_uses_saved(d->match) != NULL;
            pc->uses_spare = expr_find(d->match, EXPR_SPARE) != NULL;
            p->uses_spare |= pc->uses_spare;
            if (!cc->failed)
                *filter = filter_of(p, pc->root);
            filter->root = pc->root;
            filter->always = pc->always;
            break;
        case DIR_MEMORY: pc->memory = d->memory; break;
        case DIR_ADVISE: pc->read_mostly = true; break;
        case DIR_PLACE: pc->place = place_of(d->place); break;
        case DIR_ACCESS:
            for (int i = 0; i < d->access_count && i < MAX_ACCESS; i++)
                pc->access[i] = place_of(d->access[i]);
            pc->access_count = d->access_count < MAX_ACCESS ? d->access_count : MAX_ACCESS;
            break;
        case DIR_PREFETCH: {
            long idx = push((void **)&p->prefetches, &p->prefetch_count, &cc->prefetch_cap,
                            sizeof *p->prefetches);
            if (idx < 0) {
                cc->failed = true;
                break;
            }
            struct program_prefetch *pf = &p->prefetches[idx];
            pf->dest = place_of(d->prefetch.dest);
            pf->trigger = d->prefetch.trigger;
            pf->pattern = -1;
            if (d->prefetch.trigger == TRIGGER_ENTER || d->prefetch.trigger == TRIGGER_EXIT)
                pf->pattern = (int32_t)intern(cc, &cc->phases, d->prefetch.pattern);
            else if (d->prefetch.trigger == TRIGGER_MARK)
                pf->pattern = (int32_t)intern(cc, &cc->marks, d->prefetch.pattern);
            break;
        }
        case DIR_PRIORITY: pc->priority = (uint32_t)d->priority; break;
        case DIR_STREAM: pc->stream_written = (int32_t)intern(cc, &cc->phases, d->written); break;
        }
    }
    pc->prefetch_count = (uint32_t)p->prefetch_count - pc->prefetch_first;
}

static void names_init(struct names *n, char ***out, size_t *count)
{
    strset_init(&n->set);
    n->out = out;
    n->out_count = count;
    n->cap = 0;
}

struct program *program_compile(const struct policy_ast *ast)
{
    struct program *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    struct compiler cc = {.p = p};
    names_init(&cc.phases, &p->phase_globs, &p->phase_glob_count);
    names_init(&cc.tags, &p->tags, &p->tag_count);
    names_init(&cc.marks, &p->marks, &p->mark_count);
    p->slab_bytes = PROGRAM_DEFAULT_SLAB;
    p->step_glob = -1;
    for (const struct global_decl *g = ast->globals; g; g = g->next) {
        if (g->kind == GLOBAL_LEARN) {
            if (g->pattern)
                p->step_glob = (int32_t)intern(&cc, &cc.phases, g->pattern);
            else
                p->step_by_repetition = true;
            continue;
        }
        if (g->kind == GLOBAL_UPDATE) {
            p->update_in_backward = true;
            continue;
        }
        struct program_limit lim = {true, g->amount.percent, g->amount.value};
        if (g->kind == GLOBAL_BUDGET) {
            p->budget_gpu = lim;
            p->budget_counts_card = g->card;
        }
        else if (g->kind == GLOBAL_CAP)
            p->cap_managed = lim;
        else if (g->kind == GLOBAL_SLAB)
            p->slab_bytes = g->amount.value;
    }
    size_t n = ast->class_count ? ast->class_count : 1;
    p->classes = calloc(n, sizeof *p->classes);
    p->filters = calloc(n, sizeof *p->filters);
    if (!p->classes || !p->filters)
        cc.failed = true;
    size_t i = 0;
    for (const struct class_decl *c = ast->classes; c && !cc.failed; c = c->next, i++) {
        compile_class(&cc, c, &p->classes[i], &p->filters[i]);
        p->classes[i].name = strdup(c->name);
        p->classes[i].doc = c->doc ? strdup(c->doc) : NULL;
        p->class_count = i + 1;
        if (!p->classes[i].name || (c->doc && !p->classes[i].doc))
            cc.failed = true;
    }
    strset_free(&cc.phases.set);
    strset_free(&cc.tags.set);
    strset_free(&cc.marks.set);
    if (cc.failed) {
        program_free(p);
        return NULL;
    }
    return p;
}

static void free_names(char **names, size_t count)
{
    for (size_t i = 0; i < count; i++)
        free(names[i]);
    free(names);
}

void program_free(struct program *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->class_count; i++) {
        free((char *)p->classes[i].name);
        free((char *)p->classes[i].doc);
    }
    free(p->classes);
    free(p->filters);
    free(p->nodes);
    free(p->prefetches);
    free_names(p->phase_globs, p->phase_glob_count);
    free_names(p->tags, p->tag_count);
    free_names(p->marks, p->mark_count);
    free(p);
}

static inline bool bit_set(const uint64_t *bits, uint64_t i)
{
    return bits && (bits[i >> 6] >> (i & 63)) & 1;
}

static bool eval(const struct program_node *nodes, uint32_t i, const struct alloc_ctx *ctx)
{
    for (;;) {
        const struct program_node *n = &nodes[i];
        switch (n->op) {
        case OP_ANY: return true;
        case OP_SIZE: return ctx->size >= n->lo && ctx->size <= n->hi;
        case OP_NTH: return ctx->seq >= n->lo && ctx->seq <= n->hi;
        case OP_PHASE: return bit_set(ctx->phase_bits, n->lo);
        case OP_TAG: return bit_set(ctx->tag_bits, n->lo);
        case OP_API: return (ctx->api & n->lo) != 0;
        case OP_DEVICE: return ctx->device >= 0 && (uint64_t)ctx->device == n->lo;
        case OP_SAVED: return ctx->saved;
        case OP_SPARE: return ctx->size <= ctx->spare_bytes;
        case OP_NOT: return !eval(nodes, n->left, ctx);
        case OP_AND:
            if (!eval(nodes, n->left, ctx))
                return false;
            i = n->right; /* tail position: loop instead of recursing */
            break;
        case OP_OR:
            if (eval(nodes, n->left, ctx))
                return true;
            i = n->right;
            break;
        default: return false;
        }
    }
}

int program_classify(const struct program *p, const struct alloc_ctx *ctx)
{
    const struct class_filter *f = p->filters;
    for (size_t i = 0; i < p->class_count; i++, f++) {
        if (f->always)
            return (int)i;
        if (ctx->size < f->size_lo || ctx->size > f->size_hi || !(ctx->api & f->api_mask) ||
            (f->device >= 0 && f->device != ctx->device) ||
            (f->need_phase >= 0 && !bit_set(ctx->phase_bits, (uint64_t)f->need_phase)) ||
            (f->need_tag >= 0 && !bit_set(ctx->tag_bits, (uint64_t)f->need_tag)) ||
            (f->need_saved && !ctx->saved))
            continue;
        if (eval(p->nodes, f->root, ctx))
            return (int)i;
    }
    return -1;
}

bool program_class_matches(const struct program *p, size_t i, const struct alloc_ctx *ctx)
{
    return eval(p->nodes, p->classes[i].root, ctx);
}

size_t program_bitset_words(size_t count)
{
    return count ? (count + 63) / 64 : 1;
}

size_t program_match_phase(const struct program *p, const char *name, uint64_t *bits)
{
    size_t matched = 0;
    for (size_t i = 0; i < p->phase_glob_count; i++) {
        if (glob_match(p->phase_globs[i], name)) {
            bits[i >> 6] |= 1ull << (i & 63);
            matched++;
        }
    }
    return matched;
}

static int find_name(char *const *names, size_t count, const char *name)
{
    for (size_t i = 0; i < count; i++)
        if (strcmp(names[i], name) == 0)
            return (int)i;
    return -1;
}

int program_tag_index(const struct program *p, const char *name)
{
    return find_name(p->tags, p->tag_count, name);
}

int program_mark_index(const struct program *p, const char *name)
{
    return find_name(p->marks, p->mark_count, name);
}
