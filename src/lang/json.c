#include "json.h"

#include <string.h>

#include "text.h"

void json_print_string_max(FILE *out, const char *s, size_t max)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    size_t n = strnlen((const char *)p, max);
    /* Cut before a character that MAX would split, not through it. */
    for (int back = 0; p[n] && (p[n] & 0xc0) == 0x80 && n > 0 && back < 3; back++)
        n--;
    fputc('"', out);
    while (n > 0) {
        size_t len = utf8_sequence(p, n);
        if (len == 0) {
            /* Not UTF-8: U+FFFD, one per byte. */
            fputs("\xef\xbf\xbd", out);
            len = 1;
        } else if (*p == '"') {
            fputs("\\\"", out);
        } else if (*p == '\\') {
            fputs("\\\\", out);
        } else if (*p == '\n') {
            fputs("\\n", out);
        } else if (*p == '\t') {
            fputs("\\t", out);
        } else if (*p == '\r') {
            fputs("\\r", out);
        } else if (*p < 0x20 || *p == 0x7f) {
            fprintf(out, "\\u%04x", *p);
        } else {
            fwrite(p, 1, len, out);
        }
        p += len;
        n -= len;
    }
    fputc('"', out);
}

void json_print_string(FILE *out, const char *s)
{
    json_print_string_max(out, s, (size_t)-1);
}
