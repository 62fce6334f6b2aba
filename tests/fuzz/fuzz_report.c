/* libFuzzer target: any bytes through the report reader, then every name it
 * accepted through the JSON and terminal writers. Also any bytes as a string
 * through the JSON writer, whose output must always read back. Must never
 * crash, leak or hang. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lang/json.h"
#include "lang/text.h"
#include "report/jsonv.h"
#include "report/report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* S written as a JSON string must parse back; to S itself when S is UTF-8. */
static void roundtrip(const char *s, size_t max, bool exact)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (!mem) return;
    json_print_string_max(mem, s, max);
    if (fclose(mem) != 0) {
        free(text);
        return;
    }
    const char *error;
    size_t offset;
    struct jv *v = jv_parse(text, len, &error, &offset);
    if (!v || v->type != JV_STRING)
        abort(); /* the writer wrote something that is not a JSON string */
    if (exact && strcmp(v->string, s) != 0) abort();
    jv_free(v);
    free(text);
}

static void show(const char *s)
{
    char *shown = text_visible(s);
    /* Nothing a terminal acts on may remain. */
    for (const unsigned char *p = (const unsigned char *)shown; p && *p; p++)
        if (*p < 0x20 || *p == 0x7f) abort();
    free(shown);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct report r;
    char why[256];
    if (report_parse(&r, (const char *)data, size, why, sizeof why) == REPORT_OK) {
        for (size_t i = 0; i < r.class_count; i++) {
            roundtrip(r.classes[i].name, (size_t)-1, true);
            show(r.classes[i].name);
        }
        for (size_t i = 0; i < r.phase_count; i++) {
            roundtrip(r.phases[i].name, REPORT_NAME_MAX, true);
            show(r.phases[i].name);
        }
        for (size_t i = 0; i < r.span_count; i++)
            if (r.spans[i].phase >= r.phase_count) abort();
        for (size_t i = 0; i < r.event_count; i++)
            if (r.events[i].class_index >= (long)r.class_count || r.events[i].class_index < -1)
                abort();
        if (r.site_count > REPORT_SITES_MAX) abort();
        for (size_t i = 0; i < r.site_count; i++) {
            const struct report_site *s = &r.sites[i];
            if (s->class_index >= r.class_count || s->phase < -1 ||
                s->phase >= (long)r.phase_count || s->allocations == 0 ||
                s->frees > s->allocations || s->min_size == 0 || s->min_size > s->max_size ||
                s->first_ns > s->last_ns || (s->tag && strlen(s->tag) > REPORT_NAME_MAX))
                abort();
        }
        report_free(&r);
    } else if (!memchr(why, '\0', sizeof why)) {
        abort();
    }
    /* The raw bytes (up to the first NUL) as a name: always valid JSON out. */
    char *name = malloc(size + 1);
    if (name) {
        memcpy(name, data, size);
        name[size] = '\0';
        roundtrip(name, size % 7 == 0 ? 5 : (size_t)-1, false);
        show(name);
        free(name);
    }
    return 0;
}
