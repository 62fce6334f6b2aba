/* Filling a table of function pointers from a library loaded at run time:
 * the runtime's CUDA and CUPTI entry points, and the CLI's CUDA runtime. */
#ifndef UMPOL_DLSYMS_H
#define UMPOL_DLSYMS_H

#include <stdbool.h>
#include <stddef.h>

struct dl_symbol {
    void **slot;
    const char *name;
    bool required;
};

/* Look up every NAME with LOOKUP(HANDLE, NAME), or dlsym(HANDLE, NAME) when
 * LOOKUP is NULL, and store it in its slot (NULL when absent). Returns the
 * first required name that was not found, or NULL when all were. */
const char *dl_fill(const struct dl_symbol *table, size_t count, void *handle,
                    void *(*lookup)(void *handle, const char *name));

#endif
