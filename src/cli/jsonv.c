#include "jsonv.h"

#include <stdlib.h>
#include <string.h>

struct parser {
    const char *p, *end, *start;
    const char *error;
    int depth;
};

static void skip_ws(struct parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\n' || *ps->p == '\t' || *ps->p == '\r'))
        ps->p++;
}

static bool parse_value(struct parser *ps, struct jv *out);
static void free_inner(struct jv *v);

static char *parse_string(struct parser *ps)
{
    ps->p++; /* opening quote */
    size_t cap = 16, n = 0;
    char *s = malloc(cap);
    while (s && ps->p < ps->end && *ps->p != '"') {
        char c = *ps->p++;
        if (c == '\\') {
            if (ps->p >= ps->end)
                break;
            char e = *ps->p++;
            switch (e) {
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'u': /* keep ASCII; other code points become '?' */
                if (ps->end - ps->p < 4) {
                    ps->error = "bad \\u escape";
                    free(s);
                    return NULL;
                }
                c = (char)strtol((char[]){ps->p[0], ps->p[1], ps->p[2], ps->p[3], 0}, NULL, 16);
                if ((unsigned char)c >= 0x80 || (c == 0 && memcmp(ps->p, "0000", 4) != 0))
                    c = '?';
                ps->p += 4;
                break;
            default: c = e;
            }
        }
        if (n + 1 >= cap) {
            char *grown = realloc(s, cap *= 2);
            if (!grown) {
                free(s);
                return NULL;
            }
            s = grown;
        }
        s[n++] = c;
    }
    if (!s || ps->p >= ps->end) {
        ps->error = "unterminated string";
        free(s);
        return NULL;
    }
    ps->p++;
    s[n] = '\0';
    return s;
}

static bool push(struct jv *v, size_t *cap, struct jv item, char *key)
{
    if (v->count == *cap) {
        *cap = *cap ? *cap * 2 : 8;
        struct jv *items = realloc(v->items, *cap * sizeof *items);
        if (!items)
            return false;
        v->items = items;
        if (v->type == JV_OBJECT) {
            char **keys = realloc(v->keys, *cap * sizeof *keys);
            if (!keys)
                return false;
            v->keys = keys;
        }
    }
    v->items[v->count] = item;
    if (v->type == JV_OBJECT)
        v->keys[v->count] = key;
    v->count++;
    return true;
}

static bool parse_container(struct parser *ps, struct jv *out, char close)
{
    if (++ps->depth > 64) {
        ps->error = "nested too deeply";
        return false;
    }
    out->type = close == '}' ? JV_OBJECT : JV_ARRAY;
    ps->p++;
    size_t cap = 0;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        ps->depth--;
        return true;
    }
    for (;;) {
        char *key = NULL;
        skip_ws(ps);
        if (out->type == JV_OBJECT) {
            if (ps->p >= ps->end || *ps->p != '"') {
                ps->error = "expected a key";
                return false;
            }
            if (!(key = parse_string(ps)))
                return false;
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') {
                free(key);
                ps->error = "expected ':'";
                return false;
            }
            ps->p++;
        }
        struct jv item;
        if (!parse_value(ps, &item) || !push(out, &cap, item, key)) {
            free_inner(&item); /* what a failed value had built, or the unpushed item */
            free(key);
            return false;
        }
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == close) {
            ps->p++;
            ps->depth--;
            return true;
        }
        ps->error = close == '}' ? "expected ',' or '}'" : "expected ',' or ']'";
        return false;
    }
}

static bool parse_value(struct parser *ps, struct jv *out)
{
    memset(out, 0, sizeof *out);
    skip_ws(ps);
    if (ps->p >= ps->end) {
        ps->error = "unexpected end";
        return false;
    }
    char c = *ps->p;
    if (c == '{' || c == '[')
        return parse_container(ps, out, c == '{' ? '}' : ']');
    if (c == '"') {
        out->type = JV_STRING;
        return (out->string = parse_string(ps)) != NULL;
    }
    static const struct {
        const char *word;
        enum jv_type type;
        bool value;
    } words[] = {{"null", JV_NULL, false}, {"true", JV_BOOL, true}, {"false", JV_BOOL, false}};
    for (size_t i = 0; i < 3; i++) {
        size_t n = strlen(words[i].word);
        if ((size_t)(ps->end - ps->p) >= n && memcmp(ps->p, words[i].word, n) == 0) {
            out->type = words[i].type;
            out->boolean = words[i].value;
            ps->p += n;
            return true;
        }
    }
    char *end;
    out->number = strtod(ps->p, &end);
    if (end == ps->p || end > ps->end) {
        ps->error = "unexpected character";
        return false;
    }
    out->type = JV_NUMBER;
    ps->p = end;
    return true;
}

static void free_inner(struct jv *v)
{
    free(v->string);
    for (size_t i = 0; i < v->count; i++) {
        free_inner(&v->items[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
}

struct jv *jv_parse(const char *text, size_t len, const char **error, size_t *offset)
{
    /* strtod needs a terminator: the caller's text is NUL-terminated (read_file). */
    struct parser ps = {text, text + len, text, NULL, 0};
    struct jv *v = calloc(1, sizeof *v);
    if (v && parse_value(&ps, v)) {
        skip_ws(&ps);
        if (ps.p == ps.end)
            return v;
        ps.error = "trailing characters";
    }
    *error = ps.error ? ps.error : "out of memory";
    *offset = (size_t)(ps.p - text);
    if (v) {
        free_inner(v);
        free(v);
    }
    return NULL;
}

void jv_free(struct jv *v)
{
    if (v) {
        free_inner(v);
        free(v);
    }
}

const struct jv *jv_get(const struct jv *obj, const char *key)
{
    if (!obj || obj->type != JV_OBJECT)
        return NULL;
    for (size_t i = 0; i < obj->count; i++)
        if (strcmp(obj->keys[i], key) == 0)
            return &obj->items[i];
    return NULL;
}

double jv_num(const struct jv *obj, const char *key, double fallback)
{
    const struct jv *v = jv_get(obj, key);
    return v && v->type == JV_NUMBER ? v->number : fallback;
}

const char *jv_str(const struct jv *obj, const char *key)
{
    const struct jv *v = jv_get(obj, key);
    return v && v->type == JV_STRING ? v->string : NULL;
}
