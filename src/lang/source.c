#include "source.h"
#include "text.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct loc loc_at(int line, int col)
{
    return (struct loc){line, col, line, col + 1};
}

/* Describe why loading failed; always returns -1. */
__attribute__((format(printf, 4, 5))) static int fail(struct source_error *err,
                                                      enum source_problem problem, struct loc loc,
                                                      const char *fmt, ...)
{
    err->problem = problem;
    err->loc = loc;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return -1;
}

static int no_memory(struct source_error *err)
{
    return fail(err, SOURCE_NO_MEMORY, loc_at(0, 0), "out of memory while reading the policy");
}

/* Validate encoding and index lines in one pass. */
static int index_text(struct source *src, struct source_error *err)
{
    size_t cap = 64;
    src->line_starts = malloc(cap * sizeof *src->line_starts);
    if (!src->line_starts)
        return no_memory(err);
    src->line_starts[0] = 0;
    src->line_count = 1;
    int line = 1, col = 1;
    const unsigned char *t = (const unsigned char *)src->text;
    for (size_t i = 0; i < src->len;) {
        if (t[i] == '\0') {
            return fail(err, SOURCE_ENCODING, loc_at(line, col),
                        "NUL byte in policy text: this looks like a binary file, not a policy");
        }
        size_t n = utf8_sequence(t + i, src->len - i);
        if (n == 0) {
            return fail(err, SOURCE_ENCODING, loc_at(line, col),
                        "invalid UTF-8 byte 0x%02x: policies are UTF-8 text", t[i]);
        }
        if (t[i] == '\n') {
            if (src->line_count == cap) {
                cap *= 2;
                size_t *grown = realloc(src->line_starts, cap * sizeof *grown);
                if (!grown)
                    return no_memory(err);
                src->line_starts = grown;
            }
            src->line_starts[src->line_count++] = i + 1;
            line++;
            col = 1;
        } else {
            col++;
        }
        i += n;
    }
    return 0;
}

int source_from_memory(struct source *src, const char *name, const char *text, size_t len,
                       struct source_error *err)
{
    memset(src, 0, sizeof *src);
    memset(err, 0, sizeof *err);
    src->name = strdup(name);
    if (!src->name)
        return no_memory(err);
    if (len > SOURCE_MAX_BYTES)
        return fail(err, SOURCE_TOO_LARGE, loc_at(0, 0), "policy is %zu bytes; the limit is %u MiB",
                    len, SOURCE_MAX_BYTES >> 20);
    src->text = malloc(len + 1);
    if (!src->text)
        return no_memory(err);
    memcpy(src->text, text, len);
    src->text[len] = '\0';
    src->len = len;
    return index_text(src, err);
}

int source_load(struct source *src, const char *path, struct source_error *err)
{
    memset(src, 0, sizeof *src);
    memset(err, 0, sizeof *err);
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) {
        src->name = strdup(path);
        return fail(err, SOURCE_IO, loc_at(0, 0), "cannot open: %s", strerror(errno));
    }
    /* Read at most one byte past the limit: enough to know it is too large. */
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    int e = buf ? 0 : ENOMEM; /* why the read failed; 0: it reached the end or the limit */
    while (!e) {
        if (len == cap) {
            size_t want = cap * 2 > SOURCE_MAX_BYTES + 1 ? SOURCE_MAX_BYTES + 1 : cap * 2;
            if (want == cap)
                break;
            char *grown = realloc(buf, want);
            if (!grown) {
                e = ENOMEM;
                break;
            }
            buf = grown;
            cap = want;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) {
            e = ferror(f) ? errno : 0;
            break;
        }
    }
    if (f != stdin)
        fclose(f);
    if (e) {
        src->name = strdup(path);
        free(buf);
        return fail(err, SOURCE_IO, loc_at(0, 0), "cannot read: %s", strerror(e));
    }
    if (len > SOURCE_MAX_BYTES) {
        src->name = strdup(path);
        free(buf);
        return fail(err, SOURCE_TOO_LARGE, loc_at(0, 0), "policy is larger than the %u MiB limit",
                    SOURCE_MAX_BYTES >> 20);
    }
    int rc = source_from_memory(src, path, buf, len, err);
    free(buf);
    return rc;
}

void source_free(struct source *src)
{
    free(src->name);
    free(src->text);
    free(src->line_starts);
    memset(src, 0, sizeof *src);
}

const char *source_line(const struct source *src, int line, size_t *len)
{
    if (!src->text || line < 1 || (size_t)line > src->line_count)
        return NULL;
    size_t start = src->line_starts[line - 1];
    const char *nl = memchr(src->text + start, '\n', src->len - start);
    size_t end = nl ? (size_t)(nl - src->text) : src->len;
    if (end > start && src->text[end - 1] == '\r')
        end--;
    *len = end - start;
    return src->text + start;
}
