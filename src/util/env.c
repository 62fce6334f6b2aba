#include <stdlib.h>

#include "config.h"
#include "util/env.h"

const char *runtime_env(const char *name)
{
#ifdef HAVE_SECURE_GETENV
    return secure_getenv(name);
#else
    return getenv(name);
#endif
}
