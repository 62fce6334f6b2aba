#include <stdlib.h>
#include <string.h>

#include "runtime/step.h"
#include "runtime/step_find.h"

/* Events at the end of the first LEN that repeat with period P. */
static size_t periodic_tail(const uint32_t *k, size_t len, size_t p, size_t enough)
{
    size_t run = 0;
    while (run < enough && run + p < len && k[len - 1 - run] == k[len - 1 - run - p])
        run++;
    return run;
}

/* Does period P repeat over the later half of the first LEN events? */
static bool covers(const uint32_t *k, size_t len, size_t p)
{
    return periodic_tail(k, len, p, len / 2) >= len / 2;
}

/* The shortest period that covers the later half, or 0. */
static size_t find_period(const uint32_t *k, size_t len)
{
    for (size_t p = 1; p <= len / 4; p++)
        if (covers(k, len, p))
            return p;
    return 0;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* In the last period: a key that occurs once, a phase opening or mark first
 * (the step's own markers), else the earliest allocation. */
static enum step_find_state pick_anchor(struct step_finder *f)
{
    const uint32_t *w = f->keys + f->len - f->period;
    uint32_t *sorted = malloc(f->period * sizeof *sorted);
    if (!sorted)
        return FIND_NO_MEMORY;
    memcpy(sorted, w, f->period * sizeof *sorted);
    qsort(sorted, f->period, sizeof *sorted, cmp_u32);
    bool found = false;
    for (int pass = 0; pass < 2 && !found; pass++) {
        for (size_t i = 0; i < f->period && !found; i++) {
            if ((step_kind_of(w[i]) == STEP_ENTER) != (pass == 0))
                continue;
            const uint32_t *at = bsearch(&w[i], sorted, f->period, sizeof *sorted, cmp_u32);
            while (at > sorted && at[-1] == w[i])
                at--;
            bool once = at + 1 == sorted + f->period || at[1] != w[i];
            if (once) {
                f->anchor = w[i];
                found = true;
            }
        }
    }
    free(sorted);
    return found ? FIND_FOUND : FIND_NO_ANCHOR;
}

static void let_go(struct step_finder *f)
{
    free(f->keys);
    f->keys = NULL;
    f->len = f->cap = 0;
}

bool step_find_add(struct step_finder *f, uint32_t key)
{
    if (f->state != FIND_LOOKING)
        return false;
    if (f->len == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : STEP_FIND_MIN;
        uint32_t *grown = cap <= STEP_FIND_MAX ? realloc(f->keys, cap * sizeof *grown) : NULL;
        if (!grown) {
            f->state = cap <= STEP_FIND_MAX ? FIND_NO_MEMORY : FIND_NO_PERIOD;
            let_go(f);
            return true;
        }
        f->keys = grown;
        f->cap = cap;
    }
    f->keys[f->len++] = key;
    if (f->len < STEP_FIND_MIN || (f->len & (f->len - 1)) != 0)
        return false; /* look at each power of two */
    /* A period is taken when the look after the one that found it, twice as
     * long, still finds it: a run of layers can fill the later half of one
     * look (a deep model's forward pass), the step's events follow it. At the
     * last look there is no next one: what it finds is taken. */
    bool last = f->len == STEP_FIND_MAX;
    if (!f->candidate || !covers(f->keys, f->len, f->candidate)) {
        f->candidate = find_period(f->keys, f->len);
        if (!last || !f->candidate)
            return false;
    }
    f->period = f->candidate;
    f->state = pick_anchor(f);
    let_go(f);
    return true;
}

void step_find_free(struct step_finder *f)
{
    let_go(f);
}

const char *step_find_said(const struct step_finder *f)
{
    switch (f->state) {
    case FIND_LOOKING: return "no repetition found yet";
    case FIND_FOUND: return NULL;
    case FIND_NO_PERIOD: return "no repetition within the first 524288 events";
    case FIND_NO_ANCHOR: return "the events repeat, but none occurs once a step to begin it";
    case FIND_NO_MEMORY: return "no memory to look for the repetition";
    }
    return NULL;
}
