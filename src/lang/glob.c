#include "glob.h"

#include <stddef.h>

/* Iterative matcher with one backtrack point: linear in practice, and never
 * exponential, whatever the pattern (the last `*` absorbs all retries). */
bool glob_match(const char *pattern, const char *text)
{
    const char *p = pattern, *t = text;
    const char *star_p = NULL, *star_t = NULL;
    while (*t) {
        if (*p == '*') {
            star_p = ++p;
            star_t = t;
            continue;
        }
        char want = *p;
        const char *next = p + 1;
        if (want == '\\' && p[1]) {
            want = p[1];
            next = p + 2;
        }
        if (want && (want == *t || (*p == '?'))) {
            p = next;
            t++;
            continue;
        }
        if (!star_p)
            return false;
        p = star_p;
        t = ++star_t;
    }
    while (*p == '*')
        p++;
    return *p == '\0';
}
