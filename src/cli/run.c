/* `umpol run`: check the policy, hand the job a snapshot of it, preload the
 * runtime, make sure it loads, run the job, and say plainly what the runtime
 * saw (and, when it saw no allocation, why). */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "lang/policy.h"

/* The first of REL (paths relative to this executable's directory), then
 * FALLBACK, for which FOUND holds; OUT holds the last path tried. */
static bool find_installed(const char *const rel[2], const char *fallback,
                           bool (*found)(const char *), char *out, size_t len)
{
    char exe[PATH_MAX / 2]; /* leaves room for the suffixes */
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            for (size_t i = 0; i < 2; i++) {
                snprintf(out, len, "%s%s", exe, rel[i]);
                if (found(out))
                    return true;
            }
        }
    }
    snprintf(out, len, "%s", fallback);
    return found(out);
}

static bool readable(const char *path)
{
    return access(path, R_OK) == 0;
}

/* Where libumpol.so is: $UMPOL_LIBRARY, beside this executable (build tree:
 * .libs/), ../lib beside it, then the configured library directory. */
static bool find_library(char *out, size_t len)
{
    const char *env = getenv("UMPOL_LIBRARY");
    if (env && *env) {
        snprintf(out, len, "%s", env);
        return readable(out);
    }
    static const char *const rel[] = {"/.libs/libumpol.so", "/../lib/libumpol.so"};
    return find_installed(rel, UMPOL_LIBDIR "/libumpol.so", readable, out, len);
}

/* DIR holds the Python package's sitecustomize.py. */
static bool has_sitecustomize(const char *dir)
{
    char probe[PATH_MAX + 32];
    snprintf(probe, sizeof probe, "%s/sitecustomize.py", dir);
    return readable(probe);
}

/* Where the Python package is: beside this executable (a build tree),
 * ../share/umpol/python, then the configured data directory. */
static bool find_python_dir(char *out, size_t len)
{
    static const char *const rel[] = {"/python", "/../share/umpol/python"};
    return find_installed(rel, UMPOL_PYTHONDIR, has_sitecustomize, out, len);
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

/* What the job's processes wrote to the status file: "load PID on|off" when
 * a process loads the runtime, "cuda PID" at its first intercepted CUDA call,
 * "exit PID ALLOCATIONS PASSTHROUGH CUDART DRIVER" when it exits normally. */
struct job_status {
    int loaded, off;  /* processes that loaded the runtime; of them, without a policy */
    int exited;       /* processes that reached exit (forked children included) */
    int silent;       /* processes that loaded it and never reached exit (signal, _exit) */
    unsigned long long allocs, pass;
    int called, runtime, driver, static_driver; /* processes with that evidence */
};

static bool read_status(const char *path, struct job_status *js)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    memset(js, 0, sizeof *js);
    char line[256], state[8];
    long pid;
    unsigned long long a, p;
    int runtime, driver;
    /* Processes that loaded the runtime and have not reached exit yet (exec
     * keeps the pid: a shell that execs its command loads it twice). */
    long *open_pids = NULL;
    size_t open_count = 0, open_cap = 0;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "load %ld %7s", &pid, state) == 2) {
            js->loaded++;
            js->off += strcmp(state, "on") != 0;
            bool known = false;
            for (size_t i = 0; i < open_count && !known; i++)
                known = open_pids[i] == pid;
            if (!known && open_count == open_cap) {
                size_t cap = open_cap ? open_cap * 2 : 16;
                long *grown = realloc(open_pids, cap * sizeof *grown);
                if (grown) {
                    open_pids = grown;
                    open_cap = cap;
                }
            }
            if (!known && open_count < open_cap)
                open_pids[open_count++] = pid;
        } else if (sscanf(line, "cuda %ld", &pid) == 1) {
            js->called++; /* the first intercepted CUDA call of a process */
        } else if (sscanf(line, "exit %ld %llu %llu %d %d", &pid, &a, &p, &runtime, &driver) ==
                   5) {
            for (size_t i = 0; i < open_count; i++)
                if (open_pids[i] == pid)
                    open_pids[i--] = open_pids[--open_count];
            js->exited++;
            js->allocs += a;
            js->pass += p;
            js->runtime += runtime != 0;
            js->driver += driver != 0;
            js->static_driver += driver && !runtime;
        }
    }
    fclose(f);
    js->silent = (int)open_count;
    free(open_pids);
    return true;
}

/* A private directory for the run: the policy's snapshot and the status files. */
struct run_dir {
    char path[PATH_MAX / 2];
    char policy[PATH_MAX], status[PATH_MAX], probe[PATH_MAX], probe_err[PATH_MAX];
};

static void run_dir_remove(const struct run_dir *d)
{
    unlink(d->policy);
    unlink(d->status);
    unlink(d->probe);
    unlink(d->probe_err);
    rmdir(d->path);
}

static int write_file(const char *path, mode_t mode, const char *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0)
        return -1;
    for (size_t off = 0; off < len;) {
        ssize_t w = write(fd, data + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            close(fd);
            return -1;
        }
        off += (size_t)w;
    }
    return close(fd);
}

/* The policy is read and checked once; every process of the job loads this
 * read-only copy, so editing, moving or deleting the file during the run, or
 * changing directory, changes nothing for it. */
int cli_temp_dir(const char *command, const char *name, char *out, size_t len)
{
    const char *tmpdir = getenv("TMPDIR");
    if (!tmpdir || !*tmpdir)
        tmpdir = "/tmp";
    int n = snprintf(out, len, "%s/%s-XXXXXX", tmpdir, name);
    if (n < 0 || (size_t)n >= len || !mkdtemp(out)) {
        fprintf(stderr, "umpol %s: cannot create a directory in %s: %s\n", command, tmpdir,
                n < 0 || (size_t)n >= len ? "path too long" : strerror(errno));
        return -1;
    }
    return 0;
}

static int run_dir_create(struct run_dir *d, const struct source *policy)
{
    if (cli_temp_dir("run", "umpol-run", d->path, sizeof d->path) != 0)
        return -1;
    const char *base = strrchr(policy->name, '/');
    base = base ? base + 1 : policy->name;
    snprintf(d->policy, sizeof d->policy, "%s/%s", d->path, base);
    snprintf(d->status, sizeof d->status, "%s/status", d->path);
    snprintf(d->probe, sizeof d->probe, "%s/probe", d->path);
    snprintf(d->probe_err, sizeof d->probe_err, "%s/probe.err", d->path);
    if (write_file(d->policy, 0400, policy->text, policy->len) != 0 ||
        write_file(d->status, 0600, "", 0) != 0 || write_file(d->probe, 0600, "", 0) != 0) {
        fprintf(stderr, "umpol run: cannot write in %s: %s\n", d->path, strerror(errno));
        run_dir_remove(d);
        return -1;
    }
    return 0;
}

/* The handshake, before the job runs: a short process (umpol --version) with
 * the job's environment must load the runtime and say so in its status file.
 * It fails when the dynamic loader refuses the library or the library is not
 * this umpol's runtime. */
static bool probe_runtime(const struct run_dir *d, const char *lib)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return true; /* nothing to probe with: the job's own handshake still counts */
    exe[n] = '\0';
    pid_t pid = fork();
    if (pid < 0)
        return true;
    if (pid == 0) {
        int out = open("/dev/null", O_WRONLY);
        int err = open(d->probe_err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (out >= 0)
            dup2(out, STDOUT_FILENO);
        if (err >= 0)
            dup2(err, STDERR_FILENO);
        setenv("UMPOL_RUN_STATUS", d->probe, 1);
        execl(exe, "umpol", "--version", (char *)NULL);
        _exit(127);
    }
    int wstatus;
    while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR)
        ;
    struct job_status js;
    if (read_status(d->probe, &js) && js.loaded > 0 && js.off == 0)
        return true;
    fprintf(stderr, "umpol run: error: the runtime %s did not load in a test process, so the job "
                    "would run without umpol; not running it.\n", lib);
    FILE *f = fopen(d->probe_err, "r");
    char line[512];
    bool said = false;
    while (f && fgets(line, sizeof line, f)) {
        if (!said)
            fputs("umpol run: the test process said:\n", stderr);
        said = true;
        fprintf(stderr, "    %s%s", line, strchr(line, '\n') ? "" : "\n");
    }
    if (f)
        fclose(f);
    if (!said)
        fputs("umpol run: it loaded without a word: it is not the umpol runtime (check "
              "UMPOL_LIBRARY)\n", stderr);
    return false;
}

/* PyTorch settings the user kept that hide tensors from the runtime. */
static void check_alloc_conf(const char *name, const char *conf)
{
    bool async = false, expandable = false;
    for (const char *p = conf; *p;) {
        size_t n = strcspn(p, ",");
        char item[128];
        size_t k = 0;
        for (size_t i = 0; i < n && k + 1 < sizeof item; i++)
            if (p[i] != ' ' && p[i] != '\t')
                item[k++] = p[i];
        item[k] = '\0';
        async = async || strcmp(item, "backend:cudaMallocAsync") == 0;
        expandable = expandable || strcasecmp(item, "expandable_segments:true") == 0;
        p += n + (p[n] == ',');
    }
    if (async)
        return;
    if (expandable)
        fprintf(stderr, "umpol run: warning: keeping %s=%s: with expandable segments PyTorch "
                        "maps its memory through the CUDA driver, which umpol cannot see, so the "
                        "policy places no tensor; add backend:cudaMallocAsync or unset it\n",
                name, conf);
    else
        fprintf(stderr, "umpol run: warning: keeping %s=%s: PyTorch's own caching allocator "
                        "then carves tensors out of large segments, so umpol sees and places "
                        "whole segments, not tensors; add backend:cudaMallocAsync or unset it\n",
                name, conf);
}

/* Why the runtime saw no allocation, from what the processes reported. */
static void explain_no_allocation(const struct job_status *js, int wstatus)
{
    char status[96] = "";
    if (WIFSIGNALED(wstatus))
        snprintf(status, sizeof status, "; it was killed by signal %d (%s)", WTERMSIG(wstatus),
                 strsignal(WTERMSIG(wstatus)));
    else if (WEXITSTATUS(wstatus))
        snprintf(status, sizeof status, "; it exited with status %d", WEXITSTATUS(wstatus));
    if (js->silent > 0 && WIFSIGNALED(wstatus)) {
        fprintf(stderr, "umpol run: the runtime saw no CUDA allocation, but %d process%s of the "
                        "job ended without a normal exit, so what %s did is unknown%s\n", js->silent, js->silent == 1 ? "" : "es",
                js->silent == 1 ? "it" : "they", status);
        return;
    }
    if (js->static_driver > 0) {
        fprintf(stderr, "umpol run: the runtime saw no CUDA allocation: %d process%s used the "
                        "CUDA driver without the shared CUDA runtime, so %s probably linked with "
                        "the static CUDA runtime (nvcc's default), which cannot be intercepted: "
                        "build it with 'nvcc -cudart shared'%s\n",
                js->static_driver, js->static_driver == 1 ? "" : "es",
                js->static_driver == 1 ? "it is" : "they are", status);
        return;
    }
    if (js->called > 0 || (js->runtime > 0 && js->driver > 0)) {
        fprintf(stderr, "umpol run: the job used the CUDA runtime but allocated no GPU memory "
                        "through it%s\n", status);
        return;
    }
    void *driver = NULL;
    if (js->runtime > 0 || !WIFEXITED(wstatus) || WEXITSTATUS(wstatus))
        driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (js->runtime > 0)
        fprintf(stderr, "umpol run: the job loaded the CUDA runtime but made no CUDA call%s%s\n",
                status, driver ? "" : "; no CUDA driver is installed here (libcuda.so.1 cannot "
                                      "be loaded), so any CUDA call fails");
    else if (status[0] && !driver)
        fprintf(stderr, "umpol run: the job loaded no CUDA library%s; no CUDA driver is installed "
                        "here (libcuda.so.1 cannot be loaded), so a program linked with the "
                        "static CUDA runtime fails at its first CUDA call without loading one\n",
                status);
    else
        fprintf(stderr, "umpol run: the job made no CUDA call (no process loaded the CUDA runtime "
                        "or driver)%s\n", status);
    if (driver)
        dlclose(driver);
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
    return run_job(policy_path, report, verbose, python, argv + optind);
}

int run_job(const char *policy_path, const char *report, bool verbose, bool python, char **cmd)
{
    /* Read and check the policy once: the job gets this very text. */
    struct policy pol;
    enum policy_status st = policy_load_file(&pol, policy_path);
    diag_print(stderr, &pol.src, &pol.diags, isatty(STDERR_FILENO));
    if (st != POLICY_VALID) {
        policy_free(&pol);
        return (int)st;
    }

    char lib[PATH_MAX];
    if (!find_library(lib, sizeof lib)) {
        fprintf(stderr, "umpol run: cannot find libumpol.so (looked for %s; set UMPOL_LIBRARY)\n",
                lib);
        policy_free(&pol);
        return EXIT_USAGE;
    }
    if (strpbrk(lib, " :\t\n")) {
        fprintf(stderr, "umpol run: cannot preload '%s': the dynamic loader splits LD_PRELOAD at "
                        "spaces and colons; put the library (or a link to it) at a path "
                        "without them and set UMPOL_LIBRARY\n", lib);
        policy_free(&pol);
        return EXIT_USAGE;
    }
    struct run_dir dir;
    int made = run_dir_create(&dir, &pol.src);
    policy_free(&pol);
    if (made != 0)
        return EXIT_USAGE;
    char preload[2 * PATH_MAX + 2];
    const char *old = getenv("LD_PRELOAD");
    /* The job's own preloads keep their place; the runtime comes after them and
     * before libcudart, which is all interposition needs. */
    snprintf(preload, sizeof preload, "%s%s%s", old ? old : "", old && *old ? " " : "", lib);
    if (set("LD_PRELOAD", preload, verbose) || set("UMPOL_POLICY", dir.policy, verbose) ||
        set("NVTX_INJECTION64_PATH", lib, verbose) ||
        set("UMPOL_RUN_STATUS", dir.status, false) ||
        (report && set("UMPOL_REPORT", report, verbose))) {
        run_dir_remove(&dir);
        return EXIT_USAGE;
    }
    /* PyTorch reads PYTORCH_ALLOC_CONF first, PYTORCH_CUDA_ALLOC_CONF after. */
    const char *general = getenv("PYTORCH_ALLOC_CONF");
    const char *conf = getenv("PYTORCH_CUDA_ALLOC_CONF");
    const char *kept = general && *general ? "PYTORCH_ALLOC_CONF" : conf ? "PYTORCH_CUDA_ALLOC_CONF"
                                                                         : NULL;
    if (kept) {
        check_alloc_conf(kept, getenv(kept));
        if (verbose)
            fprintf(stderr, "umpol run: keeping %s=%s\n", kept, getenv(kept));
    } else if (set("PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync", verbose)) {
        run_dir_remove(&dir);
        return EXIT_USAGE;
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
    if (!probe_runtime(&dir, lib)) {
        run_dir_remove(&dir);
        return EXIT_USAGE;
    }

    pid_t child = fork();
    if (child < 0) {
        fprintf(stderr, "umpol run: fork: %s\n", strerror(errno));
        run_dir_remove(&dir);
        return EXIT_USAGE;
    }
    if (child == 0) {
        execvp(cmd[0], cmd);
        fprintf(stderr, "umpol run: cannot run %s: %s\n", cmd[0], strerror(errno));
        _exit(127);
    }
    /* Like a shell: the job gets the terminal's signals; we wait for it. */
    signal(SIGINT, SIG_IGN);
    signal(SIGQUIT, SIG_IGN);
    int wstatus;
    while (waitpid(child, &wstatus, 0) < 0 && errno == EINTR)
        ;
    int rc = WIFSIGNALED(wstatus) ? 128 + WTERMSIG(wstatus) : WEXITSTATUS(wstatus);
    struct job_status js;
    bool have = read_status(dir.status, &js);
    run_dir_remove(&dir);
    if (rc == 127 && have && js.loaded == 0)
        return rc; /* the command could not be started; execvp's message said why */
    if (!have || js.loaded == 0) {
        fprintf(stderr, "umpol run: error: no process of the job loaded the runtime, so the job "
                        "ran without umpol (a statically linked or setuid program, or one that "
                        "clears LD_PRELOAD, loads no preloaded library)\n");
        return rc ? rc : EXIT_USAGE;
    }
    if (js.off > 0)
        fprintf(stderr, "umpol run: warning: %d of %d process%s of the job ran without umpol "
                        "(see the messages above)\n",
                js.off, js.loaded, js.loaded == 1 ? "" : "es");
    if (js.allocs == 0 && js.pass == 0)
        explain_no_allocation(&js, wstatus);
    else if (verbose)
        fprintf(stderr, "umpol run: %llu allocations placed by the policy, %llu passed "
                        "through, in %d process%s\n",
                js.allocs, js.pass, js.exited, js.exited == 1 ? "" : "es");
    return rc;
}
