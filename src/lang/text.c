#include "text.h"

#include <stdlib.h>
#include <string.h>

size_t utf8_sequence(const unsigned char *p, size_t n)
{
    if (n == 0) return 0;
    if (p[0] < 0x80) return 1;
    size_t len = p[0] >= 0xc2 && p[0] <= 0xdf   ? 2
                 : p[0] >= 0xe0 && p[0] <= 0xef ? 3
                 : p[0] >= 0xf0 && p[0] <= 0xf4 ? 4
                                                : 0;
    if (len == 0 || n < len) return 0;
    for (size_t i = 1; i < len; i++)
        if ((p[i] & 0xc0) != 0x80) return 0;
    /* Overlong three- and four-byte forms, surrogates, and beyond U+10FFFF. */
    if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0) ||
        (p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90))
        return 0;
    return len;
}

unsigned utf8_decode(const unsigned char *p, size_t len)
{
    if (len == 1) return p[0];
    unsigned cp = p[0] & (0x7fu >> len);
    for (size_t i = 1; i < len; i++)
        cp = cp << 6 | (p[i] & 0x3fu);
    return cp;
}

/* Appends the visible form of S to a memory stream. */
static void write_visible(FILE *out, const char *s)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    size_t n = strlen((const char *)p);
    while (n > 0) {
        size_t len = utf8_sequence(p, n);
        unsigned cp = len ? utf8_decode(p, len) : 0;
        if (len == 0 || cp < 0x20 || cp == 0x7f)
            fprintf(out, "\\x%02x", p[0]);
        else if (cp >= 0x80 && cp < 0xa0)
            fprintf(out, "\\u{%02x}", cp);
        else
            fwrite(p, 1, len, out);
        len = len ? len : 1;
        p += len;
        n -= len;
    }
}

char *text_visible(const char *s)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (!mem) return NULL;
    write_visible(mem, s);
    if (fclose(mem) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

void text_print_visible(FILE *out, const char *s)
{
    write_visible(out, s);
}
