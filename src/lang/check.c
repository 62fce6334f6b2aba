#include "check.h"

#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "expr.h"
#include "strset.h"

static struct loc whole_file(void)
{
    return (struct loc){1, 1, 1, 2};
}

/* A class read after a broken header may have no name. */
static const char *class_label(const struct class_decl *c)
{
    return c->name ? c->name : "(unnamed)";
}

/* Whether the class is known in full: recovery from a syntax error may have
 * dropped its name or a directive, and what is missing must not be reported. */
static bool complete(const struct class_decl *c)
{
    return !c->recovered && !c->had_error;
}

static void check_expr(const struct expr *e, struct diag_list *diags)
{
    for (; e; e = e->left) {
        switch (e->kind) {
        case EXPR_SIZE:
        case EXPR_NTH:
            if (e->lo > e->hi)
                diag_add(diags, DIAG_ERROR, E_RANGE, e->loc,
                         "this %s range matches nothing: its low end is above its high end",
                         e->kind == EXPR_SIZE ? "size" : "nth");
            break;
        case EXPR_PHASE:
        case EXPR_TAG:
            if (!e->text[0])
                diag_add(diags, DIAG_ERROR, E_EMPTY_PATTERN, e->text_loc, "empty %s %s",
                         e->kind == EXPR_PHASE ? "phase" : "tag",
                         e->kind == EXPR_PHASE ? "pattern" : "name");
            break;
        case EXPR_API:
            if (!api_from_name(e->text)) {
                const char *hint = diag_suggest(e->text, api_names, API_COUNT);
                diag_add(diags, DIAG_ERROR, E_UNKNOWN_API, e->text_loc,
                         "unknown API '%s'%s%s%s (one of cudaMalloc, cudaMallocAsync, "
                         "cudaMallocManaged, pluggable)",
                         e->text, hint ? "; did you mean '" : "", hint ? hint : "",
                         hint ? "'?" : "");
            }
            break;
        case EXPR_DEVICE:
            if (e->lo > 1023)
                diag_add(diags, DIAG_ERROR, E_OUT_OF_RANGE, e->text_loc,
                         "device %llu is out of range (0..1023)", (unsigned long long)e->lo);
            break;
        case EXPR_AND:
        case EXPR_OR: check_expr(e->right, diags); break;
        default: break;
        }
    }
}

static const char *directive_name(enum directive_kind kind)
{
    static const char *const names[] = {"match",  "memory",   "advise",  "place",
                                        "access", "prefetch", "priority", "stream"};
    return names[kind];
}

static bool place_is_host(enum loc_kind k)
{
    return k == LOC_HOST || k == LOC_HOST_NUMA || k == LOC_HOST_NEAR;
}

static bool same_trigger(const struct prefetch *a, const struct prefetch *b)
{
    if (a->trigger != b->trigger)
        return false;
    return a->trigger == TRIGGER_ALLOC || strcmp(a->pattern, b->pattern) == 0;
}

/* A class of plain device memory takes no advice, placement or prefetch; one
 * of pinned host memory may name its host NUMA node with 'place host …', and
 * every GPU maps it, so it takes no 'access' either. MEMORY is the directive. */
static void check_unmanaged(const struct class_decl *c, const struct directive *const *first,
                            const struct directive *memory, struct diag_list *diags)
{
    static const enum directive_kind managed_only[] = {DIR_ADVISE, DIR_PLACE, DIR_ACCESS,
                                                       DIR_PREFETCH};
    const char *word = memory_kind_name(memory->memory);
    for (size_t i = 0; i < sizeof managed_only / sizeof managed_only[0]; i++) {
        const struct directive *d = first[managed_only[i]];
        if (!d || (d->kind == DIR_PLACE && memory->memory == MEMORY_HOST &&
                   place_is_host(d->place.kind)))
            continue;
        struct diag *dg;
        if (d->kind == DIR_ACCESS && memory->memory == MEMORY_HOST)
            dg = diag_add(diags, DIAG_ERROR, E_CONFLICT, d->loc,
                          "'access' in class '%s' is not needed: every GPU maps 'memory host'",
                          class_label(c));
        else if (d->kind == DIR_PLACE && memory->memory == MEMORY_HOST)
            dg = diag_add(diags, DIAG_ERROR, E_CONFLICT, d->loc,
                          "class '%s' uses 'memory host': it can only be placed on the host "
                          "('place host', 'place host near' or 'place host numa N')",
                          class_label(c));
        else
            dg = diag_add(diags, DIAG_ERROR, E_CONFLICT, d->loc,
                          "'%s' needs managed memory, but class '%s' uses 'memory %s'",
                          directive_name(d->kind), class_label(c), word);
        diag_note(dg, memory->loc, "'memory %s' given here", word);
    }
}

/* A class of movable memory is moved whole between its GPU and the host by
 * its prefetch rules and placed by 'place'; it takes no advice or access,
 * and no rule that fires on allocation (a new slab goes where 'place' says). */
static void check_movable(const struct class_decl *c, const struct directive *const *first,
                          const struct directive *memory, struct diag_list *diags)
{
    static const enum directive_kind managed_only[] = {DIR_ADVISE, DIR_ACCESS};
    for (size_t i = 0; i < sizeof managed_only / sizeof managed_only[0]; i++) {
        const struct directive *d = first[managed_only[i]];
        if (!d)
            continue;
        struct diag *dg = diag_add(diags, DIAG_ERROR, E_CONFLICT, d->loc,
                                   "'%s' needs managed memory, but class '%s' uses 'memory "
                                   "movable', which the runtime moves itself",
                                   directive_name(d->kind), class_label(c));
        diag_note(dg, memory->loc, "'memory movable' given here");
    }
    for (const struct directive *d = c->directives; d; d = d->next) {
        const struct place *where = d->kind == DIR_PLACE      ? &d->place
                                    : d->kind == DIR_PREFETCH ? &d->prefetch.dest
                                                              : NULL;
        if (!where)
            continue;
        struct diag *dg = NULL;
        if (d->kind == DIR_PREFETCH && d->prefetch.trigger == TRIGGER_ALLOC)
            dg = diag_add(diags, DIAG_ERROR, E_CONFLICT, d->loc,
                          "class '%s' uses 'memory movable': a new slab goes where 'place' says, "
                          "so nothing is prefetched on alloc",
                          class_label(c));
        else if (where->kind == LOC_GPU && where->index >= 0)
            dg = diag_add(diags, DIAG_ERROR, E_CONFLICT, where->loc,
                          "class '%s' uses 'memory movable', which lives on its own GPU or on "
                          "the host: say 'gpu' (no number) or a host place",
                          class_label(c));
        if (dg)
            diag_note(dg, memory->loc, "'memory movable' given here");
    }
}

/* BUDGET: the policy's 'budget gpu' or 'budget card', or NULL. */
static void check_class(const struct class_decl *c, const struct global_decl *budget,
                        struct diag_list *diags)
{
    const char *name = class_label(c);
    const struct directive *first[DIR_STREAM + 1] = {0};
    const struct directive *memory_other = NULL, *prefetch_gpu = NULL; /* not managed memory */
    const struct expr *takes_saved = NULL, *spare = NULL;
    bool access_gpu = false;
    for (const struct directive *d = c->directives; d; d = d->next) {
        if (d->kind != DIR_PREFETCH && first[d->kind]) {
            struct diag *dg = diag_add(diags, DIAG_ERROR, E_DUP_DIRECTIVE, d->loc,
                                       "'%s' given twice in class '%s'", directive_name(d->kind),
                                       name);
            diag_note(dg, first[d->kind]->loc, "first given here");
            continue;
        }
        if (!first[d->kind])
            first[d->kind] = d;
        switch (d->kind) {
        case DIR_MATCH:
            check_expr(d->match, diags);
            if (d->match) {
                takes_saved = expr_uses_saved(d->match);
                spare = expr_find(d->match, EXPR_SPARE);
            }
            break;
        case DIR_MEMORY:
            if (d->memory != MEMORY_MANAGED)
                memory_other = d;
            break;
        case DIR_ACCESS:
            if (d->access_count > MAX_ACCESS)
                diag_add(diags, DIAG_ERROR, E_TOO_MANY, d->value_loc,
                         "'access' lists more than %d locations", MAX_ACCESS);
            for (int i = 0; i < d->access_count && i < MAX_ACCESS; i++) {
                if (d->access[i].kind == LOC_NONE)
                    diag_add(diags, DIAG_ERROR, E_BAD_LOCATION, d->access[i].loc,
                             "'none' is not a location that can access memory");
                access_gpu |= d->access[i].kind == LOC_GPU;
            }
            break;
        case DIR_PREFETCH: {
            const struct prefetch *pf = &d->prefetch;
            if (pf->dest.kind == LOC_UNSET)
                diag_add(diags, DIAG_ERROR, E_PREFETCH_NO_LOC, d->loc,
                         "prefetch needs a destination: 'prefetch gpu on …' or 'prefetch host "
                         "on …'");
            else if (pf->dest.kind == LOC_NONE)
                diag_add(diags, DIAG_ERROR, E_BAD_LOCATION, pf->dest.loc,
                         "cannot prefetch to 'none'");
            if (pf->pattern && !pf->pattern[0])
                diag_add(diags, DIAG_ERROR, E_EMPTY_PATTERN, pf->pattern_loc, "empty %s",
                         pf->trigger == TRIGGER_MARK ? "mark name" : "phase pattern");
            for (const struct directive *e = c->directives; e != d; e = e->next) {
                if (e->kind == DIR_PREFETCH && same_trigger(&e->prefetch, pf)) {
                    struct diag *dg = diag_add(diags, DIAG_ERROR, E_DUP_DIRECTIVE, d->loc,
                                               "two prefetches on the same trigger in class '%s'",
                                               name);
                    diag_note(dg, e->loc, "first given here");
                    break;
                }
            }
            if (pf->dest.kind == LOC_GPU && !prefetch_gpu)
                prefetch_gpu = d;
            break;
        }
        case DIR_STREAM:
            if (!d->written[0])
                diag_add(diags, DIAG_ERROR, E_EMPTY_PATTERN, d->value_loc, "empty phase pattern");
            break;
        case DIR_PRIORITY:
            if (d->priority > POLICY_MAX_PRIORITY)
                diag_add(diags, DIAG_ERROR, E_OUT_OF_RANGE, d->value_loc,
                         "priority %llu is out of range (0..%d)", (unsigned long long)d->priority,
                         POLICY_MAX_PRIORITY);
            break;
        default: break;
        }
    }
    if (!first[DIR_MATCH] && complete(c))
        diag_add(diags, DIAG_ERROR, E_NO_MATCH, c->name_loc,
                 "class '%s' has no 'match' directive: say which allocations it takes", name);
    /* Streaming moves pieces of movable memory; other memory has none. */
    if (first[DIR_STREAM] && !(memory_other && memory_other->memory == MEMORY_MOVABLE)) {
        const char *word = memory_kind_name(memory_other ? memory_other->memory : MEMORY_MANAGED);
        struct diag *dg = diag_add(diags, DIAG_ERROR, E_CONFLICT, first[DIR_STREAM]->loc,
                                   "'stream' needs 'memory movable', but class '%s' uses "
                                   "'memory %s'%s",
                                   name, word, memory_other ? "" : " (the default)");
        if (memory_other)
            diag_note(dg, memory_other->loc, "'memory %s' given here", word);
    }
    if (memory_other && memory_other->memory == MEMORY_MOVABLE)
        check_movable(c, first, memory_other, diags);
    else if (memory_other)
        check_unmanaged(c, first, memory_other, diags);
    /* Saved blocks exist already, as managed memory: they cannot become
     * device or pinned host memory. */
    if (memory_other && takes_saved) {
        const char *word = memory_kind_name(memory_other->memory);
        struct diag *dg = diag_add(
            diags, DIAG_ERROR, E_SAVED_DEVICE, takes_saved->loc,
            "class '%s' takes 'saved' blocks but uses 'memory %s': a block reported "
            "saved exists already, and moves only between classes of managed memory",
            name, word);
        diag_note(dg, memory_other->loc, "'memory %s' given here", word);
    }
    /* Movable memory moves by its prefetch rules, and off the GPU under a
     * budget's pressure: a class with neither never moves. */
    bool placed_host = first[DIR_PLACE] && first[DIR_PLACE]->place.kind != LOC_GPU;
    if (memory_other && memory_other->memory == MEMORY_MOVABLE && !first[DIR_PREFETCH] &&
        !first[DIR_STREAM] && (placed_host || !budget) && complete(c))
        diag_add(diags, DIAG_WARNING, W_MOVABLE_STILL, memory_other->loc,
                 "class '%s' uses 'memory movable' but has no 'prefetch' rule and %s, so it "
                 "never moves: add 'prefetch host on …' and 'prefetch gpu on …', or say "
                 "'memory %s'",
                 name, placed_host ? "lives on the host" : "no budget pushes it off the GPU",
                 placed_host ? "host" : "device");
    /* The room `spare` measures is the GPU's: pinned host memory never takes it. */
    if (memory_other && memory_other->memory == MEMORY_HOST && spare) {
        struct diag *dg = diag_add(
            diags, DIAG_WARNING, W_SPARE_HOST, spare->loc,
            "class '%s' takes blocks by the GPU's spare room but uses 'memory host', which "
            "never occupies the GPU: 'memory device' puts them in that room",
            name);
        diag_note(dg, memory_other->loc, "'memory host' given here");
    }
    const struct directive *place = first[DIR_PLACE];
    if (place && place_is_host(place->place.kind) && prefetch_gpu && !access_gpu && !memory_other &&
        complete(c)) {
        struct diag *dg = diag_add(
            diags, DIAG_WARNING, W_HOST_NO_ACCESS, place->loc,
            "class '%s' lives on the host and is prefetched to the GPU without 'access gpu': "
            "each prefetch migrates pages that the preferred location pulls back",
            name);
        diag_note(dg, prefetch_gpu->loc, "prefetched to the GPU here");
    }
    /* Measured: managed pages advised to the host that the GPU touches first
     * can be kept on the card, where no budget sees them. Pinned host memory
     * cannot. A class that is prefetched moves by design and keeps managed memory. */
    if (place && place_is_host(place->place.kind) && !first[DIR_PREFETCH] && !memory_other &&
        complete(c)) {
        struct diag *dg = diag_add(
            diags, DIAG_WARNING, W_HOST_MANAGED, place->loc,
            "class '%s' lives on the host and never moves, in managed memory: pages the GPU "
            "touches first may be kept on the card, outside the budget; 'memory host' keeps "
            "them off it",
            name);
        (void)dg;
    }
    /* The card counts the GPU memory the driver keeps for managed pages that
     * were evicted: under `budget card` each eviction could shrink the budget. */
    if (budget && budget->card && !memory_other && complete(c)) {
        struct diag *dg = diag_add(
            diags, DIAG_WARNING, W_MANAGED_CARD, c->name_loc,
            "class '%s' is managed memory under 'budget card': the driver keeps the GPU memory "
            "of managed pages that leave the GPU, the card counts it, and umpol's share shrinks "
            "by it; 'memory device', 'memory movable' or 'memory host' keep the card to what "
            "umpol counts",
            name);
        diag_note(dg, budget->loc, "budget given here");
    }
    if (budget && first[DIR_ADVISE] && !memory_other) {
        struct diag *dg = diag_add(
            diags, DIAG_WARNING, W_READ_MOSTLY_BUDGET, first[DIR_ADVISE]->loc,
            "'advise read_mostly' in class '%s' is not applied under a budget: a read-only "
            "GPU copy would stay behind when the block is evicted",
            name);
        diag_note(dg, budget->loc, "budget given here");
    }
}

/* The match expression of C, or NULL. */
static const struct expr *match_of(const struct class_decl *c)
{
    for (const struct directive *d = c->directives; d; d = d->next)
        if (d->kind == DIR_MATCH)
            return d->match;
    return NULL;
}

enum { MAX_CONJUNCTS = 32 };

/* The terms of E's top-level `and`s into OUT; false when there are more than
 * MAX_CONJUNCTS. */
static bool conjuncts(const struct expr *e, const struct expr **out, size_t *n)
{
    if (e->kind == EXPR_AND)
        return conjuncts(e->left, out, n) && conjuncts(e->right, out, n);
    if (*n == MAX_CONJUNCTS)
        return false;
    out[(*n)++] = e;
    return true;
}

/* Does every term of E appear among the N terms TERMS? Then whatever
 * matches them matches E. */
static bool terms_imply(const struct expr *e, const struct expr *const *terms, size_t n)
{
    const struct expr *mine[MAX_CONJUNCTS];
    size_t count = 0;
    if (!conjuncts(e, mine, &count))
        return false;
    for (size_t i = 0; i < count; i++) {
        size_t k = 0;
        while (k < n && !expr_equal(mine[i], terms[k]))
            k++;
        if (k == n)
            return false;
    }
    return true;
}

/* A class that takes saved blocks after a class whose terms, none about
 * `saved`, are all among its own (`phase "f*"` before `phase "f*" and
 * saved`): the earlier class matches each block first, saved or not. Capped
 * at a million comparisons. */
static void check_saved_shadowed(const struct policy_ast *ast, struct diag_list *diags)
{
    size_t budget = 1000000;
    for (const struct class_decl *s = ast->classes; s; s = s->next) {
        const struct expr *m = match_of(s), *saved = m ? expr_uses_saved(m) : NULL;
        const struct expr *terms[MAX_CONJUNCTS];
        size_t n = 0;
        if (!saved || s->recovered || !conjuncts(m, terms, &n))
            continue;
        for (const struct class_decl *e = ast->classes; e != s && budget > 0; e = e->next, budget--) {
            const struct expr *em = match_of(e);
            if (e->recovered || !em || expr_always(em) || expr_mentions_saved(em) ||
                !terms_imply(em, terms, n))
                continue;
            struct diag *d = diag_add(
                diags, DIAG_WARNING, W_SAVED_SHADOWED, saved->loc,
                "class '%s' takes saved blocks, but class '%s' before it matches each of them "
                "first: put '%s' before '%s'",
                s->name, e->name, s->name, e->name);
            diag_note(d, e->name_loc, "'%s' matches them whether they are saved or not", e->name);
            break;
        }
    }
}

static const struct global_decl *check_globals(const struct policy_ast *ast,
                                               struct diag_list *diags)
{
    const struct global_decl *first[GLOBAL_UPDATE + 1] = {0};
    static const char *const names[] = {"budget gpu", "cap managed", "slab", "umpol",
                                        "learn step", "update in backward"};
    for (const struct global_decl *g = ast->globals; g; g = g->next) {
        const char *name = g->card ? "budget card" : names[g->kind];
        if (first[g->kind] && g->kind == GLOBAL_BUDGET && g->card != first[g->kind]->card) {
            struct diag *d = diag_add(diags, DIAG_ERROR, E_DUP_GLOBAL, g->loc,
                                      "a policy has one budget: 'budget gpu' (umpol's own "
                                      "memory) or 'budget card' (the card's), not both");
            diag_note(d, first[g->kind]->loc, "first given here");
            continue;
        }
        if (first[g->kind]) {
            struct diag *d =
                diag_add(diags, DIAG_ERROR, E_DUP_GLOBAL, g->loc, "'%s' given twice", name);
            diag_note(d, first[g->kind]->loc, "first given here");
            continue;
        }
        first[g->kind] = g;
        const struct amount *a = &g->amount;
        switch (g->kind) {
        case GLOBAL_VERSION:
            if (a->value != 1)
                diag_add(diags, DIAG_ERROR, E_VERSION, a->loc,
                         "unsupported policy version %llu: this umpol reads version 1",
                         (unsigned long long)a->value);
            else if (!ast->first_item_is_version && !ast->error_before_first_item)
                diag_add(diags, DIAG_ERROR, E_NO_HEADER, g->loc,
                         "'umpol 1;' must come before everything else in the policy");
            break;
        case GLOBAL_BUDGET:
        case GLOBAL_CAP:
            if (a->percent && (a->value == 0 || a->value > 100))
                diag_add(diags, DIAG_ERROR, E_PERCENT, a->loc,
                         "percentage must be between 1%% and 100%%, not %llu%%",
                         (unsigned long long)a->value);
            else if (!a->percent && a->value == 0)
                diag_add(diags, DIAG_ERROR, E_OUT_OF_RANGE, a->loc,
                         "'%s' of 0 bytes leaves nothing to place", name);
            break;
        case GLOBAL_SLAB:
            if (a->value < (1ull << 20) || a->value > (1ull << 40))
                diag_add(diags, DIAG_ERROR, E_OUT_OF_RANGE, a->loc,
                         "slab size must be between 1 MiB and 1 TiB");
            break;
        case GLOBAL_LEARN:
            if (g->pattern && !*g->pattern) /* no pattern: the step is found by repetition */
                diag_add(diags, DIAG_ERROR, E_EMPTY_PATTERN, g->pattern_loc,
                         "'learn step' needs the phase that starts each step, e.g. \"forward\", "
                         "or no phase at all: 'learn step;'");
            break;
        case GLOBAL_UPDATE:
            break;
        }
    }
    return first[GLOBAL_VERSION];
}

size_t policy_check(const struct policy_ast *ast, struct diag_list *diags)
{
    size_t errors_before = diags->errors;
    if (diags->stopped)
        return 0;
    const struct global_decl *budget = NULL;
    for (const struct global_decl *g = ast->globals; g && !budget; g = g->next)
        if (g->kind == GLOBAL_BUDGET)
            budget = g;
    if (!check_globals(ast, diags) && !ast->error_before_first_item)
        diag_add(diags, DIAG_ERROR, E_NO_HEADER, whole_file(),
                 "missing version header: a policy starts with 'umpol 1;'");
    if (ast->class_count == 0) {
        if (ast->syntax_errors == 0)
            diag_add(diags, DIAG_ERROR, E_NO_CLASSES, whole_file(),
                     "policy defines no class, so it would change nothing");
        return diags->errors - errors_before;
    }
    if (ast->class_count > POLICY_MAX_CLASSES)
        diag_add(diags, DIAG_ERROR, E_TOO_MANY, ast->classes->loc,
                 "policy defines %zu classes; the limit is %d", ast->class_count,
                 POLICY_MAX_CLASSES);

    struct strset names;
    strset_init(&names);
    const struct class_decl **by_index = calloc(ast->class_count, sizeof *by_index);
    bool no_memory = !by_index; /* the duplicate names go unchecked: said, never valid */
    const struct class_decl *catch_all = NULL, *last = NULL;
    for (const struct class_decl *c = ast->classes; c; c = c->next) {
        /* Capped like syntax errors: 65,000 copies of one mistake need not be
         * read 65,000 times. */
        if (diag_stop(diags, c->name_loc, "checking"))
            break;
        check_class(c, budget, diags);
        if (c->recovered)
            continue; /* its name and place in the order are guesses */
        last = c;
        long idx = no_memory ? -1 : strset_add(&names, c->name);
        if (idx < 0) {
            no_memory = true;
        } else if (by_index[idx]) {
            struct diag *d = diag_add(diags, DIAG_ERROR, E_DUP_CLASS, c->name_loc,
                                      "class '%s' is defined twice", c->name);
            diag_note(d, by_index[idx]->name_loc, "first defined here");
        } else {
            by_index[idx] = c;
        }
        if (catch_all) {
            struct diag *d = diag_add(diags, DIAG_WARNING, W_UNREACHABLE, c->name_loc,
                                      "class '%s' can never match: an earlier class takes "
                                      "every allocation",
                                      c->name);
            diag_note(d, catch_all->name_loc, "'%s' matches everything", catch_all->name);
            continue;
        }
        for (const struct directive *d = c->directives; d; d = d->next)
            if (d->kind == DIR_MATCH && d->match && expr_always(d->match)) {
                catch_all = c;
                break;
            }
    }
    free(by_index);
    strset_free(&names);
    if (no_memory)
        diag_add(diags, DIAG_ERROR, E_IO, whole_file(), "out of memory while checking the policy");
    if (!diags->stopped)
        check_saved_shadowed(ast, diags);
    /* After a syntax error the catch-all may be what was lost. */
    if (!catch_all && last && ast->syntax_errors == 0 && !diags->stopped)
        diag_add(diags, DIAG_WARNING, W_NO_CATCH_ALL, last->name_loc,
                 "no class matches every allocation: the rest pass through untouched; "
                 "end with 'class rest { match any; memory device; }' to say so");
    return diags->errors - errors_before;
}

/* One place a policy names, with the words that name it in a message. */
static void check_gpu_index(const struct class_decl *c, const char *what, long index,
                            struct loc loc, const struct policy_machine *m,
                            struct diag_list *diags, struct loc *unchecked, char *unchecked_text,
                            size_t text_len, size_t *unchecked_count)
{
    if (index < 0)
        return;
    if (m->gpu_count > 0) {
        if (index >= m->gpu_count)
            diag_add(diags, DIAG_WARNING, W_TOPOLOGY, loc,
                     "class '%s': this machine has no GPU %ld (it has %d)", class_label(c), index,
                     m->gpu_count);
        return;
    }
    if ((*unchecked_count)++ == 0) {
        *unchecked = loc;
        snprintf(unchecked_text, text_len, "%s %ld", what, index);
    }
}

static void check_place(const struct class_decl *c, const char *directive, struct place pl,
                        const struct policy_machine *m, struct diag_list *diags,
                        struct loc *unchecked, char *text, size_t text_len, size_t *count)
{
    char what[32];
    if (pl.kind == LOC_GPU) {
        snprintf(what, sizeof what, "%s gpu", directive);
        check_gpu_index(c, what, pl.index, pl.loc, m, diags, unchecked, text, text_len, count);
    } else if (pl.kind == LOC_HOST_NUMA && pl.index >= 0 && m->node_has_memory &&
               !m->node_has_memory(pl.index, m->ctx)) {
        diag_add(diags, DIAG_WARNING, W_TOPOLOGY, pl.loc,
                 "class '%s': this machine has no NUMA node %d with memory; the runtime will "
                 "use plain host memory",
                 class_label(c), pl.index);
    }
}

/* `device N` predicates; the left spine iteratively like check_expr, so depth
 * follows parentheses only (bounded by the scanner). */
static void check_devices(const struct class_decl *c, const struct expr *e,
                          const struct policy_machine *m, struct diag_list *diags,
                          struct loc *unchecked, char *text, size_t text_len, size_t *count)
{
    for (; e; e = e->left) {
        if (e->kind == EXPR_DEVICE && e->lo <= 1023)
            check_gpu_index(c, "device", (long)e->lo, e->loc, m, diags, unchecked, text,
                            text_len, count);
        if (e->right)
            check_devices(c, e->right, m, diags, unchecked, text, text_len, count);
    }
}

void policy_check_machine(const struct policy_ast *ast, const struct policy_machine *m,
                          struct diag_list *diags)
{
    struct loc unchecked = {0, 0, 0, 0};
    char text[64] = "";
    size_t count = 0;
    for (const struct class_decl *c = ast->classes; c; c = c->next) {
        for (const struct directive *d = c->directives; d; d = d->next) {
            switch (d->kind) {
            case DIR_PLACE:
                check_place(c, "place", d->place, m, diags, &unchecked, text, sizeof text, &count);
                break;
            case DIR_ACCESS:
                for (int i = 0; i < d->access_count && i < MAX_ACCESS; i++)
                    check_place(c, "access", d->access[i], m, diags, &unchecked, text,
                                sizeof text, &count);
                break;
            case DIR_PREFETCH:
                check_place(c, "prefetch", d->prefetch.dest, m, diags, &unchecked, text,
                            sizeof text, &count);
                break;
            case DIR_MATCH:
                check_devices(c, d->match, m, diags, &unchecked, text, sizeof text, &count);
                break;
            default: break;
            }
        }
    }
    char more[32] = "";
    if (count > 1)
        snprintf(more, sizeof more, ", and %zu more", count - 1);
    if (count)
        diag_add(diags, DIAG_NOTE, W_TOPOLOGY, unchecked,
                 "no GPU visible (%s): GPU numbers not checked (%s%s)",
                 m->no_gpu_why ? m->no_gpu_why : "none found", text, more);
}
