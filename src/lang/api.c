#include "api.h"

#include <string.h>

const char *const api_names[API_COUNT] = {"cudaMalloc", "cudaMallocAsync", "cudaMallocManaged",
                                          "pluggable"};

const char *api_name(unsigned api)
{
    for (unsigned i = 0; i < API_COUNT; i++)
        if (api == 1u << i)
            return api_names[i];
    return "?";
}

unsigned api_from_name(const char *name)
{
    for (unsigned i = 0; i < API_COUNT; i++)
        if (strcmp(name, api_names[i]) == 0)
            return 1u << i;
    return 0;
}
