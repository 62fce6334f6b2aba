#include <stdlib.h>
#include <string.h>

#include "runtime/plan.h"

static uint64_t pages_of(uint64_t size)
{
    return (size + PLAN_PAGE - 1) / PLAN_PAGE;
}

void plan_free(struct step_plan *plan)
{
    free(plan->offset);
    free(plan->busy);
    *plan = (struct step_plan){0};
}

/* Largest first; among equals, the earliest. */
static int larger_first(const void *a, const void *b, void *blocks)
{
    const struct plan_block *x = &((const struct plan_block *)blocks)[*(const uint32_t *)a];
    const struct plan_block *y = &((const struct plan_block *)blocks)[*(const uint32_t *)b];
    if (x->size != y->size)
        return x->size < y->size ? 1 : -1;
    return (x->start > y->start) - (x->start < y->start);
}

struct span {
    uint64_t lo, hi;
};

static int by_lo(const void *a, const void *b)
{
    const struct span *x = a, *y = b;
    return (x->lo > y->lo) - (x->lo < y->lo);
}

bool plan_build(struct step_plan *plan, const struct plan_block *blocks, size_t n, size_t len)
{
    plan_free(plan);
    if (n == 0 || n > PLAN_MAX_BLOCKS)
        return false;
    for (size_t i = 0; i < n; i++)
        if (blocks[i].end <= blocks[i].start || blocks[i].end > len || blocks[i].size == 0)
            return false;
    uint32_t *order = malloc(n * sizeof *order);
    uint64_t *at = malloc(n * sizeof *at); /* each block's offset, in page units */
    struct span *near = malloc(n * sizeof *near);
    uint64_t *offset = calloc(len, sizeof *offset);
    bool ok = order && at && near && offset;
    uint64_t top = 0;
    if (ok) {
        for (size_t i = 0; i < n; i++)
            order[i] = (uint32_t)i;
        qsort_r(order, n, sizeof *order, larger_first, (void *)blocks);
        /* Each block at the lowest offset that the blocks placed before it and
         * living at the same time leave free. */
        for (size_t k = 0; k < n; k++) {
            const struct plan_block *b = &blocks[order[k]];
            size_t m = 0;
            for (size_t q = 0; q < k; q++) {
                const struct plan_block *o = &blocks[order[q]];
                if (o->start < b->end && b->start < o->end)
                    near[m++] = (struct span){at[order[q]], at[order[q]] + pages_of(o->size)};
            }
            qsort(near, m, sizeof *near, by_lo);
            uint64_t lo = 0, need = pages_of(b->size);
            for (size_t q = 0; q < m && near[q].lo < lo + need; q++)
                if (near[q].hi > lo)
                    lo = near[q].hi;
            at[order[k]] = lo;
            if (lo + need > top)
                top = lo + need;
        }
        for (size_t i = 0; i < n; i++)
            offset[blocks[i].start] = at[i] * PLAN_PAGE + 1;
    }
    size_t words = (top + 63) / 64;
    uint64_t *busy = ok ? calloc(words ? words : 1, sizeof *busy) : NULL;
    free(order);
    free(at);
    free(near);
    if (!busy) {
        free(offset);
        return false;
    }
    *plan = (struct step_plan){.bytes = top * PLAN_PAGE, .offset = offset, .len = len,
                               .planned = n, .busy = busy, .pages = top};
    return true;
}

bool plan_offset(const struct step_plan *plan, size_t i, uint64_t *offset)
{
    if (i >= plan->len || !plan->offset[i])
        return false;
    *offset = plan->offset[i] - 1;
    return true;
}

bool plan_reindex(struct step_plan *plan, const int32_t *at, size_t len)
{
    uint64_t *offset = calloc(len ? len : 1, sizeof *offset);
    if (!offset) {
        free(plan->offset);
        plan->offset = NULL;
        plan->len = plan->planned = 0;
        return false;
    }
    size_t planned = 0;
    for (size_t i = 0; i < len; i++)
        if (at[i] >= 0 && (size_t)at[i] < plan->len && plan->offset[at[i]]) {
            offset[i] = plan->offset[at[i]];
            planned++;
        }
    free(plan->offset);
    plan->offset = offset;
    plan->len = len;
    plan->planned = planned;
    return true;
}

static bool page_busy(const struct step_plan *plan, uint64_t p)
{
    return (plan->busy[p / 64] >> (p % 64)) & 1;
}

bool plan_claim(struct step_plan *plan, uint64_t offset, uint64_t size)
{
    uint64_t first = offset / PLAN_PAGE, end = first + pages_of(size);
    if (offset % PLAN_PAGE || end > plan->pages)
        return false;
    for (uint64_t p = first; p < end; p++)
        if (page_busy(plan, p))
            return false;
    for (uint64_t p = first; p < end; p++)
        plan->busy[p / 64] |= 1ull << (p % 64);
    return true;
}

bool plan_claim_free(struct step_plan *plan, uint64_t size, uint64_t *offset)
{
    uint64_t need = pages_of(size), run = 0;
    for (uint64_t p = plan->pages; p-- > 0;) {
        run = page_busy(plan, p) ? 0 : run + 1;
        if (run == need && need) { /* free pages P .. P + NEED: plan_claim holds them */
            *offset = p * PLAN_PAGE;
            return plan_claim(plan, *offset, size);
        }
    }
    return false;
}

void plan_release(struct step_plan *plan, uint64_t offset, uint64_t size)
{
    uint64_t first = offset / PLAN_PAGE, end = first + pages_of(size);
    for (uint64_t p = first; p < end && p < plan->pages; p++)
        plan->busy[p / 64] &= ~(1ull << (p % 64));
}

bool plan_in_use(const struct step_plan *plan)
{
    for (size_t w = 0; w < (plan->pages + 63) / 64; w++)
        if (plan->busy[w])
            return true;
    return false;
}
