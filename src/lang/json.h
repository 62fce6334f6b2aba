/* The one JSON string writer shared by check --json, explain and the report. */
#ifndef UMPOL_JSON_H
#define UMPOL_JSON_H

#include <stdio.h>

/* Writes S as a quoted JSON string with control characters escaped. */
void json_print_string(FILE *out, const char *s);

#endif
