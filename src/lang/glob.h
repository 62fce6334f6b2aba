/* Shell-style globs for phase names: `*` any run, `?` one character, `\` escapes. */
#ifndef UMPOL_GLOB_H
#define UMPOL_GLOB_H

#include <stdbool.h>

bool glob_match(const char *pattern, const char *text);

#endif
