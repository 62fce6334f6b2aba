/* What the runtime learns about the process it is loaded into: how it was
 * loaded, whether it runs with privileges, which CUDA libraries it has, and
 * the lines it hands to `umpol run` through UMPOL_RUN_STATUS. */
#ifndef UMPOL_PROCESS_H
#define UMPOL_PROCESS_H

#include <stdbool.h>
#include <stdint.h>

/* True when the library was loaded at process start (LD_PRELOAD or
 * /etc/ld.so.preload), false when a running program loaded it with dlopen. */
bool process_preloaded(void);

/* True in a setuid/setgid (secure-execution) process, where secure_getenv
 * hides every UMPOL_* variable. */
bool process_privileged(void);

/* True when PATH (absolute, resolved) may be applied in a privileged process:
 * a regular file under /etc/umpol/ or the installed policies directory, owned
 * by root and writable by no one else. */
bool process_policy_trusted(const char *path);

/* Evidence of CUDA use, for `umpol run`'s closing message. */
struct cuda_evidence {
    bool runtime; /* a shared CUDA runtime (cudaMalloc) is loaded */
    bool driver;  /* the CUDA driver library (libcuda.so) is loaded */
};
void process_cuda_evidence(struct cuda_evidence *ev);

/* Append LINE to the status file `umpol run` named in UMPOL_RUN_STATUS, if any. */
void process_status(const char *line);

#endif
