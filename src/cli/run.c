/* `umpol run`: check the policy, preload the runtime, run the job, and say
 * plainly when the runtime saw no allocation at all. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "lang/policy.h"

/* Where libumpol.so is: $UMPOL_LIBRARY, beside this executable (build tree:
 * .libs/), ../lib beside it, then the configured library directory. */
static bool find_library(char *out, size_t len)
{
    const char *env = getenv("UMPOL_LIBRARY");
    if (env && *env) {
        snprintf(out, len, "%s", env);
        return access(out, R_OK) == 0;
    }
    char exe[PATH_MAX / 2]; /* leaves room for the suffixes below */
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            static const char *const rel[] = {"/.libs/libumpol.so", "/../lib/libumpol.so"};
            for (size_t i = 0; i < 2; i++) {
                snprintf(out, len, "%s%s", exe, rel[i]);
                if (access(out, R_OK) == 0)
                    return true;
            }
        }
    }
    snprintf(out, len, "%s/libumpol.so", UMPOL_LIBDIR);
    return access(out, R_OK) == 0;
}

/* DIR holds the Python package's sitecustomize.py. */
static bool has_sitecustomize(const char *dir)
{
    char probe[PATH_MAX + 32];
    snprintf(probe, sizeof probe, "%s/sitecustomize.py", dir);
    return access(probe, R_OK) == 0;
}

/* Where the Python package is: beside this executable (a build tree),
 * ../share/umpol/python, then the configured data directory. */
static bool find_python_dir(char *out, size_t len)
{
    char exe[PATH_MAX / 2];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            static const char *const rel[] = {"/python", "/../share/umpol/python"};
            for (size_t i = 0; i < 2; i++) {
                snprintf(out, len, "%s%s", exe, rel[i]);
                if (has_sitecustomize(out))
                    return true;
            }
        }
    }
    snprintf(out, len, "%s", UMPOL_PYTHONDIR);
    return has_sitecustomize(out);
}

static int set(const char *name, const char *value, bool verbose)
{
    if (setenv(name, value, 1) != 0) {
        fprintf(stderr, "umpol run: cannot set %s: %s\n", name, strerror(errno));
        return -1;
    }
    if (verbose)
        fprintf(stderr, "umpol run: %s=%s\n", name, value);
    return 0;
}

/* Sum the "allocations passthrough" lines every process of the job wrote. */
static bool read_status(const char *path, unsigned long long *allocs, unsigned long long *pass,
                        int *processes)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    unsigned long long a, p;
    *allocs = *pass = 0;
    *processes = 0;
    while (fscanf(f, "%llu %llu", &a, &p) == 2) {
        *allocs += a;
        *pass += p;
        (*processes)++;
    }
    fclose(f);
    return true;
}

int cmd_run(int argc, char **argv)
{
    const char *policy_path = getenv("UMPOL_POLICY"), *report = NULL;
    bool verbose = false, python = true;
    for (int c; (c = cli_getopt("run", argc, argv)) != -1;) {
        if (c == 'p')
            policy_path = optarg;
        else if (c == 'r')
            report = optarg;
        else if (c == 'v')
            verbose = true;
        else if (c == OPT_NO_PYTHON)
            python = false;
    }
    if (optind >= argc)
        return cli_usage_error("run", "no command to run");
    if (!policy_path || !*policy_path) {
        fputs("umpol run: no policy: give -p POLICY or set UMPOL_POLICY\n", stderr);
        return EXIT_USAGE;
    }

    /* The runtime reads the same file: refuse it here, with diagnostics, first. */
    struct policy pol;
    enum policy_status st = policy_load_file(&pol, policy_path);
    diag_print(stderr, &pol.src, &pol.diags, isatty(STDERR_FILENO));
    policy_free(&pol);
    if (st != POLICY_VALID)
        return (int)st;

    char lib[PATH_MAX], abs_policy[PATH_MAX];
    if (!find_library(lib, sizeof lib)) {
        fprintf(stderr, "umpol run: cannot find libumpol.so (looked for %s; set UMPOL_LIBRARY)\n",
                lib);
        return EXIT_USAGE;
    }
    if (!realpath(policy_path, abs_policy)) {
        fprintf(stderr, "umpol run: %s: %s\n", policy_path, strerror(errno));
        return EXIT_USAGE;
    }
    char preload[2 * PATH_MAX + 2];
    const char *old = getenv("LD_PRELOAD");
    /* The job's own preloads keep their place; the runtime comes after them and
     * before libcudart, which is all interposition needs. */
    snprintf(preload, sizeof preload, "%s%s%s", old ? old : "", old && *old ? " " : "", lib);
    char status_path[] = "/tmp/umpol-run-XXXXXX";
    int status_fd = mkstemp(status_path);
    if (status_fd < 0) {
        fprintf(stderr, "umpol run: cannot create a status file: %s\n", strerror(errno));
        return EXIT_USAGE;
    }
    close(status_fd);
    if (set("LD_PRELOAD", preload, verbose) || set("UMPOL_POLICY", abs_policy, verbose) ||
        set("NVTX_INJECTION64_PATH", lib, verbose) ||
        set("UMPOL_RUN_STATUS", status_path, false) ||
        (report && set("UMPOL_REPORT", report, verbose)))
        return EXIT_USAGE;
    if (!getenv("PYTORCH_CUDA_ALLOC_CONF")) {
        if (set("PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync", verbose))
            return EXIT_USAGE;
    } else if (verbose) {
        fprintf(stderr, "umpol run: keeping PYTORCH_CUDA_ALLOC_CONF=%s\n",
                getenv("PYTORCH_CUDA_ALLOC_CONF"));
    }
    /* Python jobs import the umpol package at start-up (its sitecustomize),
     * which opens PyTorch's phases without a change to the job: see umpol-python(7). */
    char python_dir[PATH_MAX];
    if (python && find_python_dir(python_dir, sizeof python_dir)) {
        const char *old_path = getenv("PYTHONPATH");
        char path[2 * PATH_MAX + 2];
        snprintf(path, sizeof path, "%s%s%s", python_dir, old_path && *old_path ? ":" : "",
                 old_path ? old_path : "");
        if (set("PYTHONPATH", path, verbose))
            return EXIT_USAGE;
    } else if (python && verbose) {
        fprintf(stderr, "umpol run: the umpol Python package is not installed; Python jobs "
                        "get no automatic phases\n");
    }
    if (verbose && !getenv("UMPOL_LOG"))
        set("UMPOL_LOG", "2", verbose);

    pid_t child = fork();
    if (child < 0) {
        fprintf(stderr, "umpol run: fork: %s\n", strerror(errno));
        unlink(status_path);
        return EXIT_USAGE;
    }
    if (child == 0) {
        execvp(argv[optind], argv + optind);
        fprintf(stderr, "umpol run: cannot run %s: %s\n", argv[optind], strerror(errno));
        _exit(127);
    }
    /* Like a shell: the job gets the terminal's signals; we wait for it. */
    signal(SIGINT, SIG_IGN);
    signal(SIGQUIT, SIG_IGN);
    int wstatus;
    while (waitpid(child, &wstatus, 0) < 0 && errno == EINTR)
        ;
    unsigned long long allocs = 0, pass = 0;
    int processes = 0;
    if (read_status(status_path, &allocs, &pass, &processes) && processes > 0) {
        if (allocs == 0 && pass == 0)
            fprintf(stderr,
                    "umpol run: the runtime saw no CUDA allocation in %d process%s. If the job "
                    "allocates GPU memory, it is probably linked with the static CUDA runtime "
                    "(nvcc's default), which cannot be intercepted: build it with "
                    "'nvcc -cudart shared'.\n",
                    processes, processes == 1 ? "" : "es");
        else if (verbose)
            fprintf(stderr, "umpol run: %llu allocations placed by the policy, %llu passed "
                            "through, in %d process%s\n",
                    allocs, pass, processes, processes == 1 ? "" : "es");
    }
    unlink(status_path);
    if (WIFSIGNALED(wstatus))
        return 128 + WTERMSIG(wstatus);
    return WEXITSTATUS(wstatus);
}
