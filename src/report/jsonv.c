#include "jsonv.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lang/text.h"

struct parser {
    const char *p, *end;
    const char *error;
    int depth;
    size_t values;
};

static bool fail(struct parser *ps, const char *error)
{
    if (!ps->error) ps->error = error;
    return false;
}

static void skip_ws(struct parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\n' || *ps->p == '\t' || *ps->p == '\r'))
        ps->p++;
}

static bool parse_value(struct parser *ps, struct jv *out);

/* A growing byte buffer for string contents. */
struct buf {
    char *data;
    size_t len, cap;
};

static bool buf_add(struct buf *b, const void *bytes, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 16;
        while (b->len + n + 1 > cap)
            cap *= 2;
        char *grown = realloc(b->data, cap);
        if (!grown) return false;
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, bytes, n);
    b->len += n;
    b->data[b->len] = '\0';
    return true;
}

static int hex4(const char *p)
{
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

static size_t utf8_encode(unsigned cp, char out[4])
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3f));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* A \uXXXX escape (P after the 'u'), with its low surrogate if any; a lone
 * surrogate or U+0000 reads as U+FFFD. Returns the code point or -1. */
static long unicode_escape(struct parser *ps)
{
    if (ps->end - ps->p < 4 || hex4(ps->p) < 0) return -1;
    long cp = hex4(ps->p);
    ps->p += 4;
    if (cp >= 0xd800 && cp <= 0xdbff && ps->end - ps->p >= 6 && ps->p[0] == '\\' &&
        ps->p[1] == 'u') {
        int low = hex4(ps->p + 2);
        if (low >= 0xdc00 && low <= 0xdfff) {
            ps->p += 6;
            return 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
        }
    }
    if ((cp >= 0xd800 && cp <= 0xdfff) || cp == 0) return 0xfffd;
    return cp;
}

static char *parse_string(struct parser *ps)
{
    ps->p++; /* opening quote */
    struct buf b = {0};
    if (!buf_add(&b, "", 0)) {
        fail(ps, "out of memory");
        return NULL;
    }
    for (;;) {
        if (ps->p >= ps->end) {
            fail(ps, "unterminated string");
            break;
        }
        const unsigned char c = (unsigned char)*ps->p;
        if (c == '"') {
            ps->p++;
            return b.data;
        }
        if (c < 0x20) {
            fail(ps, "control character in a string");
            break;
        }
        if (c == '\\') {
            if (ps->end - ps->p < 2) {
                fail(ps, "unterminated string");
                break;
            }
            char e = ps->p[1], ch;
            ps->p += 2;
            switch (e) {
            case '"':
                ch = '"';
                break;
            case '\\':
                ch = '\\';
                break;
            case '/':
                ch = '/';
                break;
            case 'n':
                ch = '\n';
                break;
            case 't':
                ch = '\t';
                break;
            case 'r':
                ch = '\r';
                break;
            case 'b':
                ch = '\b';
                break;
            case 'f':
                ch = '\f';
                break;
            case 'u': {
                long cp = unicode_escape(ps);
                if (cp < 0) {
                    ps->p -= 2;
                    fail(ps, "bad \\u escape");
                    goto out;
                }
                char enc[4];
                size_t n = utf8_encode((unsigned)cp, enc);
                if (!buf_add(&b, enc, n)) {
                    fail(ps, "out of memory");
                    goto out;
                }
                continue;
            }
            default:
                ps->p -= 2;
                fail(ps, "bad escape in a string");
                goto out;
            }
            if (!buf_add(&b, &ch, 1)) {
                fail(ps, "out of memory");
                break;
            }
            continue;
        }
        size_t len = utf8_sequence((const unsigned char *)ps->p, (size_t)(ps->end - ps->p));
        if (len == 0) {
            fail(ps, "invalid UTF-8 in a string");
            break;
        }
        if (!buf_add(&b, ps->p, len)) {
            fail(ps, "out of memory");
            break;
        }
        ps->p += len;
    }
out:
    free(b.data);
    return NULL;
}

static bool is_digit(const char *p, const char *end)
{
    return p < end && *p >= '0' && *p <= '9';
}

/* -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? and nothing else. */
static bool parse_number(struct parser *ps, struct jv *out)
{
    const char *p = ps->p, *end = ps->end;
    bool integer = true, negative = false;
    if (p < end && *p == '-') {
        negative = true;
        p++;
    }
    if (end - p >= 3 && (strncasecmp(p, "nan", 3) == 0 || strncasecmp(p, "inf", 3) == 0))
        return fail(ps, "NaN and Infinity are not JSON numbers");
    if (!is_digit(p, end)) return fail(ps, "unexpected character");
    if (*p == '0')
        p++;
    else
        while (is_digit(p, end))
            p++;
    if (p < end && *p == '.') {
        integer = false;
        if (!is_digit(++p, end)) return fail(ps, "bad number");
        while (is_digit(p, end))
            p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        integer = false;
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (!is_digit(p, end)) return fail(ps, "bad number");
        while (is_digit(p, end))
            p++;
    }
    /* strtod needs a terminated copy: the text may end right after the number. */
    size_t n = (size_t)(p - ps->p);
    char small[64], *copy = n < sizeof small ? small : malloc(n + 1);
    if (!copy) return fail(ps, "out of memory");
    memcpy(copy, ps->p, n);
    copy[n] = '\0';
    errno = 0;
    out->number = strtod(copy, NULL);
    bool finite = isfinite(out->number) && !(errno == ERANGE && fabs(out->number) > 1);
    if (integer && !negative) {
        errno = 0;
        unsigned long long u = strtoull(copy, NULL, 10);
        if (errno == 0) {
            out->is_uint = true;
            out->uint = u;
        }
    }
    if (copy != small) free(copy);
    if (!finite) return fail(ps, "number out of range");
    out->type = JV_NUMBER;
    ps->p = p;
    return true;
}

static void free_inner(struct jv *v)
{
    free(v->string);
    for (size_t i = 0; i < v->count; i++) {
        free_inner(&v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
}

/* Appends ITEM (and KEY) to V; on failure the caller still owns both. */
static bool push(struct jv *v, size_t *cap, struct jv *item, char *key)
{
    if (v->count == *cap) {
        size_t grown_cap = *cap ? *cap * 2 : 8;
        struct jv *items = realloc(v->items, grown_cap * sizeof *items);
        if (!items) return false;
        v->items = items;
        if (v->type == JV_OBJECT) {
            char **keys = realloc(v->keys, grown_cap * sizeof *keys);
            if (!keys) return false;
            v->keys = keys;
        }
        *cap = grown_cap;
    }
    v->items[v->count] = *item;
    if (v->type == JV_OBJECT) v->keys[v->count] = key;
    v->count++;
    return true;
}

/* On failure OUT keeps what was read so far; the caller frees it. */
static bool parse_container(struct parser *ps, struct jv *out, char close)
{
    if (++ps->depth > JV_MAX_DEPTH) return fail(ps, "nested too deeply");
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
            if (ps->p >= ps->end || *ps->p != '"') return fail(ps, "expected a key");
            if (!(key = parse_string(ps))) return false;
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') {
                free(key);
                return fail(ps, "expected ':'");
            }
            ps->p++;
        }
        struct jv item;
        bool ok = parse_value(ps, &item);
        if (!ok || !push(out, &cap, &item, key)) {
            free_inner(&item);
            free(key);
            return ok ? fail(ps, "out of memory") : false;
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
        return fail(ps, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static bool parse_value(struct parser *ps, struct jv *out)
{
    memset(out, 0, sizeof *out);
    skip_ws(ps);
    if (ps->p >= ps->end) return fail(ps, "unexpected end");
    if (++ps->values > JV_MAX_VALUES) return fail(ps, "too many values");
    char c = *ps->p;
    if (c == '{' || c == '[') return parse_container(ps, out, c == '{' ? '}' : ']');
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
    return parse_number(ps, out);
}

struct jv *jv_parse(const char *text, size_t len, const char **error, size_t *offset)
{
    struct parser ps = {text, text + len, NULL, 0, 0};
    struct jv *v = calloc(1, sizeof *v);
    if (v && parse_value(&ps, v)) {
        skip_ws(&ps);
        if (ps.p == ps.end) return v;
        fail(&ps, "trailing characters");
    }
    *error = ps.error ? ps.error : "out of memory";
    *offset = (size_t)(ps.p - text);
    jv_free(v);
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
    if (!obj || obj->type != JV_OBJECT) return NULL;
    for (size_t i = 0; i < obj->count; i++)
        if (strcmp(obj->keys[i], key) == 0) return &obj->items[i];
    return NULL;
}
