/* Rendering a compiled program for people (`umpol explain`) and machines (--json). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "program.h"

const char *format_bytes(uint64_t bytes, char *buf, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (u < 4 && bytes >= 1024 && bytes % 1024 == 0) {
        bytes /= 1024;
        u++;
    }
    snprintf(buf, len, "%" PRIu64 " %s", bytes, units[u]);
    return buf;
}

const char *program_place_str(struct program_place pl, char *buf, size_t len)
{
    switch (pl.kind) {
    case LOC_UNSET: return "-";
    case LOC_GPU:
        if (pl.index < 0)
            return "gpu";
        snprintf(buf, len, "gpu %d", pl.index);
        return buf;
    case LOC_HOST: return "host";
    case LOC_HOST_NUMA: snprintf(buf, len, "host numa %d", pl.index); return buf;
    case LOC_HOST_NEAR: return "host near";
    case LOC_NONE: return "none";
    }
    return "?";
}

static int precedence(uint8_t op)
{
    return op == OP_OR ? 1 : op == OP_AND ? 2 : op == OP_NOT ? 3 : 4;
}

static void print_range(FILE *out, const char *what, uint64_t lo, uint64_t hi, bool bytes)
{
    char a[32], b[32];
    if (bytes) {
        format_bytes(lo, a, sizeof a);
        format_bytes(hi, b, sizeof b);
    } else {
        snprintf(a, sizeof a, "%" PRIu64, lo);
        snprintf(b, sizeof b, "%" PRIu64, hi);
    }
    if (lo == hi)
        fprintf(out, "%s == %s", what, a);
    else if (hi == UINT64_MAX)
        fprintf(out, "%s >= %s", what, a);
    else if (lo == 0)
        fprintf(out, "%s <= %s", what, b);
    else
        fprintf(out, "%s %s..%s", what, a, b);
}

static void print_node(FILE *out, const struct program *p, uint32_t i, int parent_prec)
{
    const struct program_node *n = &p->nodes[i];
    bool paren = precedence(n->op) < parent_prec;
    if (paren)
        fputc('(', out);
    switch (n->op) {
    case OP_ANY: fputs("any", out); break;
    case OP_SIZE: print_range(out, "size", n->lo, n->hi, true); break;
    case OP_NTH: print_range(out, "nth", n->lo, n->hi, false); break;
    case OP_PHASE: fprintf(out, "phase \"%s\"", p->phase_globs[n->lo]); break;
    case OP_TAG: fprintf(out, "tag \"%s\"", p->tags[n->lo]); break;
    case OP_API: fprintf(out, "api %s", api_name((unsigned)n->lo)); break;
    case OP_DEVICE: fprintf(out, "device %" PRIu64, n->lo); break;
    case OP_SAVED: fputs("saved", out); break;
    case OP_SPARE: fputs("spare", out); break;
    case OP_NOT:
        fputs("not ", out);
        print_node(out, p, n->left, 3);
        break;
    case OP_AND:
    case OP_OR:
        print_node(out, p, n->left, precedence(n->op));
        fputs(n->op == OP_AND ? " and " : " or ", out);
        print_node(out, p, n->right, precedence(n->op) + 1);
        break;
    }
    if (paren)
        fputc(')', out);
}

void program_print_expr(FILE *out, const struct program *p, uint32_t node)
{
    print_node(out, p, node, 0);
}

static const char *trigger_word(enum trigger_kind t)
{
    static const char *const words[] = {"alloc", "enter", "exit", "mark"};
    return words[t];
}

static const char *pattern_of(const struct program *p, const struct program_prefetch *pf)
{
    if (pf->trigger == TRIGGER_MARK)
        return p->marks[pf->pattern];
    if (pf->trigger == TRIGGER_ALLOC)
        return NULL;
    return p->phase_globs[pf->pattern];
}

/* The runtime applies both limits to each GPU on its own (src/runtime/placement.c). */
static void print_limit(FILE *out, const char *label, struct program_limit lim, bool is_default)
{
    char buf[32];
    const char *tail = is_default ? " (default)" : "";
    if (!lim.given)
        fprintf(out, "%-13s none\n", label);
    else if (lim.percent)
        fprintf(out, "%-13s %" PRIu64 "%% of each GPU's memory%s\n", label, lim.value, tail);
    else
        fprintf(out, "%-13s %s per GPU%s\n", label, format_bytes(lim.value, buf, sizeof buf), tail);
}

/* The cap the runtime applies: the policy's, or the default. */
static struct program_limit cap_applied(const struct program *p, bool *is_default)
{
    *is_default = !p->cap_managed.given;
    if (*is_default)
        return (struct program_limit){true, true, PROGRAM_DEFAULT_CAP_PERCENT};
    return p->cap_managed;
}

void program_explain(FILE *out, const struct program *p)
{
    char buf[32];
    bool cap_default;
    struct program_limit cap = cap_applied(p, &cap_default);
    print_limit(out, p->budget_counts_card ? "budget card:" : "budget gpu:", p->budget_gpu, false);
    if (p->budget_counts_card)
        fprintf(out, "%-13s less what the process holds on the card outside umpol\n", "");
    print_limit(out, "cap managed:", cap, cap_default);
    fprintf(out, "%-13s %s\n", "slab:", format_bytes(p->slab_bytes, buf, sizeof buf));
    if (p->step_glob >= 0)
        fprintf(out, "%-13s each opening of phase \"%s\" starts a step; from the second step on, "
                     "eviction by predicted next use and prefetch one phase ahead\n",
                "learn step:", p->phase_globs[p->step_glob]);
    else if (p->step_by_repetition)
        fprintf(out, "%-13s found in the repetition of the job's allocations, phases and marks; "
                     "from the second step on, eviction by predicted next use and prefetch one "
                     "phase ahead\n",
                "learn step:");
    if (p->update_in_backward)
        fprintf(out, "%-13s the optimizer updates each parameter as soon as backward completes its "
                     "gradient, on a side stream (Python package; UMPOL_STEP_IN_BACKWARD decides "
                     "where set)\n",
                "update:");
    fputc('\n', out);
    fprintf(out, "Classes, in the order they are tried (the first match wins):\n\n");
    size_t name_w = 5;
    for (size_t i = 0; i < p->class_count; i++)
        if (strlen(p->classes[i].name) > name_w)
            name_w = strlen(p->classes[i].name);
    fprintf(out, "  #  %-*s  %-7s  %-12s  %-12s  %-11s  %s\n", (int)name_w, "class", "memory",
            "place", "access", "advice", "priority");
    for (size_t i = 0; i < p->class_count; i++) {
        const struct program_class *c = &p->classes[i];
        char access[96] = "-";
        size_t len = 0;
        for (int a = 0; a < c->access_count; a++) {
            char pb[32];
            len += (size_t)snprintf(access + len, sizeof access - len, "%s%s", a ? ", " : "",
                                    program_place_str(c->access[a], pb, sizeof pb));
            if (len >= sizeof access)
                break;
        }
        /* Managed and movable memory are evicted by it; a device slab makes
         * room by it (shown where given: it moves only movable memory). */
        char priority[16] = "-";
        if (c->memory == MEMORY_MANAGED || c->memory == MEMORY_MOVABLE ||
            (c->memory == MEMORY_DEVICE && c->priority))
            snprintf(priority, sizeof priority, "%u", c->priority);
        fprintf(out, "%3zu  %-*s  %-7s  %-12s  %-12s  %-11s  %s\n", i + 1, (int)name_w, c->name,
                memory_kind_name(c->memory),
                program_place_str(c->place, buf, sizeof buf), access,
                c->read_mostly ? "read_mostly" : "-", priority);
        fprintf(out, "     match:    ");
        program_print_expr(out, p, c->root);
        fputc('\n', out);
        if (c->takes_saved)
            fprintf(out, "     saved:    a block reported saved for backward moves here if it "
                         "matches then\n");
        if (c->memory == MEMORY_MOVABLE)
            fprintf(out, "     movable:  its slabs move whole (64 MiB pieces, copy engines) when a "
                         "prefetch fires,\n               and leave the GPU under budget "
                         "pressure by priority; the card gets\n               the memory back; "
                         "the job's thread waits for the GPU\n");
        if (c->memory == MEMORY_MOVABLE && c->prefetch_count &&
            !program_class_leaves_by_rule(p, i))
            fprintf(out, "     returns:  only the budget sends it out, so a prefetch to the GPU, "
                         "at an outermost\n               opening or closing of its phase, brings "
                         "back what fits beside the\n               most the GPU held since the "
                         "class last came back (device slabs\n               unused since then "
                         "are given back first, where it has pieces out)\n");
        if (c->stream_written >= 0)
            fprintf(out, "     stream:   written only in phases \"%s\"; outside them, its pieces "
                         "on the host\n               are copied to the GPU ahead of the uses "
                         "the Python package\n               announces (learned from one write "
                         "phase to the next)\n               and leave with no copy once not "
                         "needed soon\n",
                    p->phase_globs[c->stream_written]);
        if (c->uses_spare)
            fprintf(out, "     spare:    takes a block while the GPU's budget has room for it beside "
                         "the\n               job's peak there and a fifth more (at least 1/32 of "
                         "the budget and\n               two slabs)\n");
        for (uint32_t k = 0; k < c->prefetch_count; k++) {
            const struct program_prefetch *pf = &p->prefetches[c->prefetch_first + k];
            const char *pat = pattern_of(p, pf);
            fprintf(out, "     prefetch: %s on %s", program_place_str(pf->dest, buf, sizeof buf),
                    trigger_word(pf->trigger));
            if (pat)
                fprintf(out, " \"%s\"", pat);
            fputc('\n', out);
        }
        /* The comment written above the class: for a drafted policy, why it is so. */
        for (const char *line = c->doc, *nl; line; line = nl ? nl + 1 : NULL) {
            nl = strchr(line, '\n');
            int n = (int)(nl ? (size_t)(nl - line) : strlen(line));
            if (n || line == c->doc)
                fprintf(out, "     %-10s%.*s", line == c->doc ? "doc:" : "", n, line);
            fputc('\n', out);
        }
    }
    bool catch_all = false;
    for (size_t i = 0; i < p->class_count; i++)
        catch_all |= p->classes[i].always;
    if (!catch_all)
        fprintf(out, "\nAllocations that match no class pass through to CUDA untouched.\n");
}

static void json_place(FILE *out, struct program_place pl)
{
    char buf[32];
    if (pl.kind == LOC_UNSET)
        fputs("null", out);
    else
        json_print_string(out, program_place_str(pl, buf, sizeof buf));
}

static void json_limit(FILE *out, struct program_limit lim, bool is_default)
{
    if (!lim.given)
        fputs("null", out);
    else
        fprintf(out, "{\"%s\":%" PRIu64 "%s}", lim.percent ? "percent" : "bytes", lim.value,
                is_default ? ",\"default\":true" : "");
}

void program_explain_json(FILE *out, const struct program *p)
{
    bool cap_default;
    struct program_limit cap = cap_applied(p, &cap_default);
    fputs("\"budget_gpu\":", out);
    json_limit(out, p->budget_gpu, false);
    if (p->budget_counts_card)
        fputs(",\"budget_counts_card\":true", out);
    fputs(",\"cap_managed\":", out);
    json_limit(out, cap, cap_default);
    fprintf(out, ",\"slab_bytes\":%" PRIu64, p->slab_bytes);
    if (p->step_glob >= 0) {
        fputs(",\"learn_step\":", out);
        json_print_string(out, p->phase_globs[p->step_glob]);
    } else if (p->step_by_repetition) {
        fputs(",\"learn_step\":null", out); /* present and null: found by repetition */
    }
    if (p->update_in_backward)
        fputs(",\"update_in_backward\":true", out);
    fputs(",\"classes\":[", out);
    for (size_t i = 0; i < p->class_count; i++) {
        const struct program_class *c = &p->classes[i];
        fprintf(out, "%s{\"order\":%zu,\"name\":", i ? "," : "", i + 1);
        json_print_string(out, c->name);
        fprintf(out, ",\"line\":%d,\"match\":", c->line);
        /* The predicate as text, rendered through a memory stream. */
        char *text = NULL;
        size_t text_len = 0;
        FILE *mem = open_memstream(&text, &text_len);
        if (mem) {
            program_print_expr(mem, p, c->root);
            fclose(mem);
        }
        json_print_string(out, text ? text : "");
        free(text);
        fprintf(out,
                ",\"always\":%s,\"takes_saved\":%s,\"uses_spare\":%s,\"memory\":\"%s\","
                "\"read_mostly\":%s,\"place\":",
                c->always ? "true" : "false", c->takes_saved ? "true" : "false",
                c->uses_spare ? "true" : "false",
                memory_kind_name(c->memory),
                c->read_mostly ? "true" : "false");
        json_place(out, c->place);
        fputs(",\"access\":[", out);
        for (int a = 0; a < c->access_count; a++) {
            if (a)
                fputc(',', out);
            json_place(out, c->access[a]);
        }
        fputs("],\"prefetch\":[", out);
        for (uint32_t k = 0; k < c->prefetch_count; k++) {
            const struct program_prefetch *pf = &p->prefetches[c->prefetch_first + k];
            fprintf(out, "%s{\"to\":", k ? "," : "");
            json_place(out, pf->dest);
            fprintf(out, ",\"on\":\"%s\",\"pattern\":", trigger_word(pf->trigger));
            const char *pat = pattern_of(p, pf);
            if (pat)
                json_print_string(out, pat);
            else
                fputs("null", out);
            fputc('}', out);
        }
        fprintf(out, "],\"priority\":%u,\"stream_written\":", c->priority);
        if (c->stream_written >= 0)
            json_print_string(out, p->phase_globs[c->stream_written]);
        else
            fputs("null", out);
        fputs(",\"doc\":", out);
        if (c->doc)
            json_print_string(out, c->doc);
        else
            fputs("null", out);
        fputc('}', out);
    }
    fputc(']', out);
}
