/* The runtime's configuration comes from the environment through here only
 * (secure_getenv where there is one). */
#ifndef UMPOL_UTIL_ENV_H
#define UMPOL_UTIL_ENV_H

const char *runtime_env(const char *name);

#endif
