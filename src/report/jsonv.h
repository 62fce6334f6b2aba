/* A strict RFC 8259 JSON reader: the whole document as a tree. Used through
 * report/report.h; other code should not need it. */
#ifndef UMPOL_JSONV_H
#define UMPOL_JSONV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum jv_type { JV_NULL, JV_BOOL, JV_NUMBER, JV_STRING, JV_ARRAY, JV_OBJECT };

struct jv {
    enum jv_type type;
    bool boolean;
    bool is_uint;     /* a number written as a non-negative integer that fits uint64_t */
    uint64_t uint;    /* its exact value */
    double number;    /* always finite */
    char *string;     /* valid UTF-8; "\u0000" reads as U+FFFD */
    struct jv *items; /* array elements or object values */
    char **keys;      /* object keys, parallel to items */
    size_t count;
};

/* Most values one document may hold, so that memory stays bounded. */
#define JV_MAX_VALUES (16u << 20)
/* Deepest nesting of arrays and objects. */
#define JV_MAX_DEPTH 64

/* Parses the LEN bytes of TEXT (no terminator needed). Returns NULL on
 * failure with *error (static text) and *offset (where it stopped) set:
 * malformed JSON, invalid UTF-8, a number out of double's range (1e400),
 * NaN or Infinity, too deep, too many values, or out of memory. */
struct jv *jv_parse(const char *text, size_t len, const char **error, size_t *offset);
void jv_free(struct jv *v);

/* Member KEY of an object (the first when repeated), or NULL. */
const struct jv *jv_get(const struct jv *obj, const char *key);

#endif
