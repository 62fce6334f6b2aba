#include "fail_alloc.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

long fail_alloc_at = -1, fail_alloc_calls;

static int fails(void)
{
    return fail_alloc_at >= 0 && fail_alloc_calls++ == fail_alloc_at;
}

void *__wrap_malloc(size_t n)
{
    return fails() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size)
{
    return fails() ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n)
{
    return fails() ? NULL : __real_realloc(p, n);
}

char *__wrap_strdup(const char *s)
{
    return fails() ? NULL : __real_strdup(s);
}

int fail_alloc_each_policy(const char *dir, long (*sweep)(const char *path), long *points)
{
    const char *top = getenv("top_srcdir");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", top ? top : ".", dir);
    DIR *d = opendir(path);
    if (!d) return -1;
    int files = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (n < 7 || strcmp(e->d_name + n - 6, ".umpol") != 0) continue;
        char file[4096 + 256];
        snprintf(file, sizeof file, "%s/%s", path, e->d_name);
        *points += sweep(file);
        files++;
    }
    closedir(d);
    return files;
}
