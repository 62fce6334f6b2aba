/* A small JSON reader for `umpol report`: the whole document as a tree. */
#ifndef UMPOL_JSONV_H
#define UMPOL_JSONV_H

#include <stdbool.h>
#include <stddef.h>

enum jv_type { JV_NULL, JV_BOOL, JV_NUMBER, JV_STRING, JV_ARRAY, JV_OBJECT };

struct jv {
    enum jv_type type;
    bool boolean;
    double number;
    char *string;
    struct jv *items; /* array elements or object values */
    char **keys;      /* object keys, parallel to items */
    size_t count;
};

/* Parse TEXT; returns NULL and sets *error (static text) and *offset on failure. */
struct jv *jv_parse(const char *text, size_t len, const char **error, size_t *offset);
void jv_free(struct jv *v);

/* Member KEY of an object, or NULL. */
const struct jv *jv_get(const struct jv *obj, const char *key);
/* Number of member KEY, or FALLBACK when absent or not a number. */
double jv_num(const struct jv *obj, const char *key, double fallback);
const char *jv_str(const struct jv *obj, const char *key);

#endif
