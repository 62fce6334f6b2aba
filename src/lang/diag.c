#include "diag.h"
#include "json.h"
#include "text.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void diag_list_init(struct diag_list *list)
{
    memset(list, 0, sizeof *list);
}

void diag_list_free(struct diag_list *list)
{
    for (size_t i = 0; i < list->count; i++) {
        free(list->items[i].message);
        free(list->items[i].note);
    }
    free(list->items);
    memset(list, 0, sizeof *list);
}

static char *vformat(const char *fmt, va_list ap)
{
    va_list copy;
    va_copy(copy, ap);
    int n = vsnprintf(NULL, 0, fmt, copy);
    va_end(copy);
    if (n < 0)
        return NULL;
    char *s = malloc((size_t)n + 1);
    if (s)
        vsnprintf(s, (size_t)n + 1, fmt, ap);
    return s;
}

/* A diagnostic counted but not kept (out of memory, or past the warning cap):
 * callers may still attach a note to it. */
static struct diag discarded;

struct diag *diag_add(struct diag_list *list, enum diag_severity sev, enum diag_code code,
                      struct loc loc, const char *fmt, ...)
{
    if (sev == DIAG_ERROR) {
        list->errors++;
    } else if (sev == DIAG_NOTE) {
        list->notes++;
    } else if (++list->warnings > DIAG_MAX_WARNINGS) {
        list->hidden_warnings++;
        return &discarded;
    }
    if (list->count == list->cap) {
        size_t cap = list->cap ? list->cap * 2 : 8;
        struct diag *grown = realloc(list->items, cap * sizeof *grown);
        if (!grown)
            return &discarded;
        list->items = grown;
        list->cap = cap;
    }
    struct diag *d = &list->items[list->count++];
    memset(d, 0, sizeof *d);
    d->severity = sev;
    d->code = code;
    d->loc = loc;
    va_list ap;
    va_start(ap, fmt);
    d->message = vformat(fmt, ap);
    va_end(ap);
    return d;
}

bool diag_stop(struct diag_list *list, struct loc loc, const char *doing)
{
    if (list->stopped)
        return true;
    if (list->errors < DIAG_MAX_ERRORS)
        return false;
    list->stopped = true;
    diag_add(list, DIAG_ERROR, E_TOO_MANY_ERRORS, loc, "too many errors (%d); stopped %s here",
             DIAG_MAX_ERRORS, doing);
    return true;
}

void diag_note(struct diag *d, struct loc loc, const char *fmt, ...)
{
    if (d == &discarded)
        return;
    va_list ap;
    va_start(ap, fmt);
    free(d->note);
    d->note = vformat(fmt, ap);
    va_end(ap);
    d->note_loc = loc;
    d->has_note = d->note != NULL;
}

static int by_place(const void *a, const void *b)
{
    const struct diag *x = a, *y = b;
    if (x->loc.first_line != y->loc.first_line)
        return x->loc.first_line < y->loc.first_line ? -1 : 1;
    if (x->loc.first_column != y->loc.first_column)
        return x->loc.first_column < y->loc.first_column ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

void diag_sort(struct diag_list *list)
{
    for (size_t i = 0; i < list->count; i++)
        list->items[i].seq = i;
    if (list->count > 1)
        qsort(list->items, list->count, sizeof *list->items, by_place);
}

const char *diag_code_name(enum diag_code code, char *buf)
{
    snprintf(buf, 8, "%c%03d", code >= 100 ? 'W' : 'E', (int)code);
    return buf;
}

/* Long lines are shown as a window around the caret. */
#define EXCERPT_WIDTH 100

/* Print the source line and an underline below LOC (columns count characters).
 * Bytes that are not printable UTF-8 show as '?', so the excerpt is safe to print. */
static void print_excerpt(FILE *out, const struct source *src, struct loc loc, const char *mark)
{
    size_t len;
    const char *line = source_line(src, loc.first_line, &len);
    if (!line)
        return;
    int skip = loc.first_column > EXCERPT_WIDTH - 20 ? loc.first_column - 40 : 0;
    fprintf(out, "%5d | %s", loc.first_line, skip ? "..." : "");
    int col = 1, shown = 0;
    for (size_t i = 0; i < len && shown < EXCERPT_WIDTH;) {
        const unsigned char *p = (const unsigned char *)line + i;
        size_t n = utf8_sequence(p, len - i);
        if (col > skip) {
            if (n == 0 || (*p < 0x20 && *p != '\t') || *p == 0x7f)
                fputc('?', out);
            else
                fwrite(p, 1, n, out);
            shown++;
        }
        i += n ? n : 1;
        col++;
    }
    if (shown == EXCERPT_WIDTH)
        fputs("...", out);
    fprintf(out, "\n      | %s", skip ? "   " : "");
    col = 1;
    for (size_t i = 0; i < len && col < loc.first_column;) {
        const unsigned char *p = (const unsigned char *)line + i;
        size_t n = utf8_sequence(p, len - i);
        /* As many cells as the character above takes: the caret stays under
         * its column after wide (CJK) and zero-width characters. */
        int cells = n ? text_cell_width(utf8_decode(p, n)) : 1;
        for (int k = 0; col > skip && k < cells; k++)
            fputc(line[i] == '\t' ? '\t' : ' ', out);
        i += n ? n : 1;
        col++;
    }
    int width = 1;
    if (loc.last_line == loc.first_line && loc.last_column > loc.first_column + 1)
        width = loc.last_column - loc.first_column;
    if (width > EXCERPT_WIDTH)
        width = EXCERPT_WIDTH;
    fprintf(out, "%s^", mark);
    for (int k = 1; k < width; k++)
        fputc('~', out);
    fprintf(out, "%s\n", *mark ? "\033[0m" : "");
}

void diag_print(FILE *out, const struct source *src, const struct diag_list *list, bool color)
{
    const char *bold = color ? "\033[1m" : "", *reset = color ? "\033[0m" : "";
    for (size_t i = 0; i < list->count; i++) {
        const struct diag *d = &list->items[i];
        char code[8];
        static const char *const sev_names[] = {"error", "warning", "note"};
        static const char *const sev_colors[] = {"\033[1;31m", "\033[1;35m", "\033[1;36m"};
        const char *sev = sev_names[d->severity];
        const char *sev_color = color ? sev_colors[d->severity] : "";
        /* File names and messages may hold any byte: shown escaped. */
        fputs(bold, out);
        text_print_visible(out, src->name);
        if (d->loc.first_line > 0)
            fprintf(out, ":%d:%d", d->loc.first_line, d->loc.first_column);
        fprintf(out, ":%s %s%s[%s]:%s ", reset, sev_color, sev, diag_code_name(d->code, code),
                reset);
        text_print_visible(out, d->message ? d->message : "(out of memory)");
        fputc('\n', out);
        if (d->loc.first_line > 0)
            print_excerpt(out, src, d->loc, color ? "\033[1;32m" : "");
        if (d->has_note) {
            fputs(bold, out);
            text_print_visible(out, src->name);
            fprintf(out, ":%d:%d:%s note: ", d->note_loc.first_line, d->note_loc.first_column,
                    reset);
            text_print_visible(out, d->note);
            fputc('\n', out);
            print_excerpt(out, src, d->note_loc, color ? "\033[1;36m" : "");
        }
    }
    if (list->hidden_warnings) {
        text_print_visible(out, src->name);
        fprintf(out, ": %zu more warning%s not shown\n", list->hidden_warnings,
                list->hidden_warnings == 1 ? "" : "s");
    }
}

void diag_print_json(FILE *out, const struct source *src, const struct diag_list *list)
{
    (void)src;
    fputc('[', out);
    for (size_t i = 0; i < list->count; i++) {
        const struct diag *d = &list->items[i];
        char code[8];
        fprintf(out, "%s{\"severity\":\"%s\",\"code\":\"%s\",\"line\":%d,\"column\":%d,"
                     "\"end_line\":%d,\"end_column\":%d,\"message\":",
                i ? "," : "",
                d->severity == DIAG_ERROR     ? "error"
                : d->severity == DIAG_WARNING ? "warning"
                                              : "note",
                diag_code_name(d->code, code), d->loc.first_line, d->loc.first_column,
                d->loc.last_line, d->loc.last_column);
        json_print_string(out, d->message);
        if (d->has_note) {
            fprintf(out, ",\"note\":{\"line\":%d,\"column\":%d,\"message\":",
                    d->note_loc.first_line, d->note_loc.first_column);
            json_print_string(out, d->note);
            fputc('}', out);
        }
        fputc('}', out);
    }
    fputc(']', out);
}

static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64)
        return (size_t)-1;
    size_t row[65];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            size_t best = diag + cost;
            if (row[j] + 1 < best)
                best = row[j] + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

const char *diag_suggest(const char *word, const char *const *candidates, size_t n)
{
    const char *best = NULL;
    size_t best_d = (size_t)-1;
    for (size_t i = 0; i < n; i++) {
        size_t d = edit_distance(word, candidates[i]);
        if (d < best_d) {
            best_d = d;
            best = candidates[i];
        }
    }
    /* Allow about one typo per three characters, and at least one. */
    size_t limit = strlen(word) / 3 + 1;
    return best_d <= limit ? best : NULL;
}
