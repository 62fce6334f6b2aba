/* The allocation APIs a policy can name, shared by the checker and the compiler. */
#ifndef UMPOL_API_H
#define UMPOL_API_H

/* Which CUDA entry point made an allocation (bit flags, so `api` can test a set). */
enum alloc_api {
    API_CUDA_MALLOC = 1u << 0,
    API_CUDA_MALLOC_ASYNC = 1u << 1,
    API_CUDA_MALLOC_MANAGED = 1u << 2,
    API_PLUGGABLE = 1u << 3,
};

#define API_COUNT 4

/* Name of an API bit as written in policies, and the reverse (0 if unknown). */
const char *api_name(unsigned api);
unsigned api_from_name(const char *name);
extern const char *const api_names[API_COUNT];

#endif
