#include "util/dlsyms.h"

#include <dlfcn.h>

const char *dl_fill(const struct dl_symbol *table, size_t count, void *handle,
                    void *(*lookup)(void *handle, const char *name))
{
    const char *missing = NULL;
    for (size_t i = 0; i < count; i++) {
        *table[i].slot = lookup ? lookup(handle, table[i].name) : dlsym(handle, table[i].name);
        if (!*table[i].slot && table[i].required && !missing)
            missing = table[i].name;
    }
    return missing;
}
