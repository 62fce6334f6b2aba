/* Included first in every source of a test that wraps malloc, calloc and
 * realloc at link time (-Wl,--wrap) to fail the library's allocations: the
 * test's own and the fake CUDA runtime's allocations go to the real ones,
 * so that only the code under test sees a failure. */
#ifndef UMPOL_TESTS_REAL_ALLOC_H
#define UMPOL_TESTS_REAL_ALLOC_H

#include <stdlib.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
#define malloc __real_malloc
#define calloc __real_calloc
#define realloc __real_realloc

#endif
