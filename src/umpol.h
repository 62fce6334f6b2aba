/* umpol.h — the public C API of the umpol runtime (libumpol.so).
 *
 * Everything here is safe to call whether or not a policy is loaded: with no
 * runtime active the calls do nothing. See umpol(7). */
#ifndef UMPOL_H
#define UMPOL_H

#include <stddef.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Tags: allocations made by this thread while NAME is pushed match `tag "NAME"`. */
void umpol_tag_push(const char *name);
void umpol_tag_pop(void);

/* Phases: process-wide, like NVTX ranges (which drive them too). */
void umpol_phase_enter(const char *name);
void umpol_phase_exit(void);

/* Marks fire `prefetch … on mark "NAME"`. */
void umpol_mark(const char *name);

struct umpol_stats {
    unsigned long long allocations;   /* served by umpol's pools */
    unsigned long long passthrough;   /* handed to CUDA untouched */
    unsigned long long live_bytes;    /* in blocks handed out now */
    unsigned long long managed_bytes; /* managed memory held (slabs and the job's own) */
    unsigned long long prefetches;
    unsigned long long evictions;
    unsigned long long cap_refusals;
};
/* Returns 0 and fills STATS, or -1 when no policy is active. */
int umpol_stats(struct umpol_stats *stats);

/* PyTorch pluggable allocator entry points
 * (torch.cuda.memory.CUDAPluggableAllocator(path, "umpol_torch_alloc", "umpol_torch_free")). */
void *umpol_torch_alloc(ssize_t size, int device, void *stream);
void umpol_torch_free(void *ptr, ssize_t size, int device, void *stream);

#ifdef __cplusplus
}
#endif

#endif
