/* The one JSON string writer shared by check --json, explain, the runtime's
 * report and `umpol report`: whatever the bytes, the output is RFC 8259 UTF-8. */
#ifndef UMPOL_JSON_H
#define UMPOL_JSON_H

#include <stddef.h>
#include <stdio.h>

/* Writes S as a quoted JSON string: quotes, backslashes and control characters
 * escaped, each byte that is not part of valid UTF-8 replaced by U+FFFD. */
void json_print_string(FILE *out, const char *s);

/* The same for at most MAX bytes of S, cut at a character boundary. */
void json_print_string_max(FILE *out, const char *s, size_t max);

#endif
