/* Included first in every source of a test that fails the library's
 * allocations (tests/fail_alloc.h): the test's own and the fake CUDA
 * runtime's allocations go to the real ones, so that only the code under
 * test sees a failure. */
#ifndef UMPOL_TESTS_REAL_ALLOC_H
#define UMPOL_TESTS_REAL_ALLOC_H

#include <stdlib.h>

#include "fail_alloc.h"

#define malloc __real_malloc
#define calloc __real_calloc
#define realloc __real_realloc
#define strdup __real_strdup

#endif
