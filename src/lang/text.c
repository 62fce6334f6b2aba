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

int text_cell_width(unsigned cp)
{
    static const unsigned zero[][2] = {
        {0x0300, 0x036f}, {0x0483, 0x0489}, {0x0591, 0x05bd}, {0x0610, 0x061a},
        {0x061c, 0x061c}, {0x064b, 0x065f}, {0x200b, 0x200f}, {0x202a, 0x202e}, {0x2060, 0x206f},
        {0x20d0, 0x20ff}, {0xfe00, 0xfe0f}, {0xfe20, 0xfe2f}, {0xfeff, 0xfeff},
    };
    static const unsigned wide[][2] = {
        {0x1100, 0x115f},   {0x2e80, 0x303e},   {0x3041, 0x33ff},   {0x3400, 0x4dbf},
        {0x4e00, 0x9fff},   {0xa000, 0xa4cf},   {0xac00, 0xd7a3},   {0xf900, 0xfaff},
        {0xfe30, 0xfe4f},   {0xff00, 0xff60},   {0xffe0, 0xffe6},   {0x1f300, 0x1f64f},
        {0x1f900, 0x1f9ff}, {0x20000, 0x3fffd},
    };
    for (size_t i = 0; i < sizeof zero / sizeof zero[0]; i++)
        if (cp >= zero[i][0] && cp <= zero[i][1]) return 0;
    for (size_t i = 0; i < sizeof wide / sizeof wide[0]; i++)
        if (cp >= wide[i][0] && cp <= wide[i][1]) return 2;
    return 1;
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
