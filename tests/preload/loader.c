/* Loads libumpol.so with dlopen, as PyTorch's pluggable allocator does, and
 * asks it for one allocation: the runtime must never end the process inside
 * dlopen, whatever its policy. Prints what happened; exits 0 when it got that far. */
#include <dlfcn.h>
#include <stdio.h>
#include <sys/auxv.h>
#include <sys/types.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: loader LIBUMPOL\n");
        return 2;
    }
    printf("secure %lu\n", getauxval(AT_SECURE));
    fflush(stdout);
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("dlopen failed: %s\n", dlerror());
        return 1;
    }
    printf("dlopen ok\n");
    void *(*alloc)(ssize_t, int, void *);
    void (*release)(void *, ssize_t, int, void *);
    *(void **)&alloc = dlsym(h, "umpol_torch_alloc");
    *(void **)&release = dlsym(h, "umpol_torch_free");
    if (!alloc || !release) {
        printf("no pluggable-allocator entry points\n");
        return 1;
    }
    void *p = alloc(4096, 0, NULL);
    printf("alloc %s\n", p ? "ok" : "refused");
    if (p)
        release(p, 4096, 0, NULL);
    return 0;
}
