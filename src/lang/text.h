/* Text for a terminal: names and file names shown with their control
 * characters and invalid bytes escaped, so that a hostile name cannot move the
 * cursor, recolour or retitle the terminal. */
#ifndef UMPOL_TEXT_H
#define UMPOL_TEXT_H

#include <stddef.h>
#include <stdio.h>

/* Length (1 to 4) of the valid UTF-8 sequence at P (N bytes available), or 0
 * when P does not start one (overlong forms and surrogates are invalid). */
size_t utf8_sequence(const unsigned char *p, size_t n);

/* Code point of the valid sequence of LEN bytes at P. */
unsigned utf8_decode(const unsigned char *p, size_t len);

/* Terminal cells code point CP takes: 0 for combining marks and zero-width
 * characters, 2 for East Asian wide and fullwidth ones and emoji, else 1. */
int text_cell_width(unsigned cp);

/* S with C0 and C1 controls and DEL written as \xNN or \u{NN}, and invalid
 * UTF-8 bytes as \xNN; a new string (NULL when out of memory). */
char *text_visible(const char *s);

/* Writes S to OUT as text_visible shows it. */
void text_print_visible(FILE *out, const char *s);

#endif
