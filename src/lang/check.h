/* Semantic checks on a parsed policy: what cannot be right is an error,
 * what is suspicious a warning. Pure: no GPU, no files, no environment. */
#ifndef UMPOL_CHECK_H
#define UMPOL_CHECK_H

#include "ast.h"
#include "diag.h"

/* Returns the number of errors added to DIAGS. The tree may come from a
 * parse with syntax errors: what they may have swallowed is not reported. */
size_t policy_check(const struct policy_ast *ast, struct diag_list *diags);

/* What `umpol check --topology` learnt of the machine it runs on. */
struct policy_machine {
    int gpu_count;          /* -1: unknown (no CUDA runtime or driver) */
    const char *no_gpu_why; /* when gpu_count <= 0: why no GPU is visible */
    bool (*node_has_memory)(int node, const void *ctx); /* host NUMA node usable? */
    const void *ctx;
};

/* Warn (W104) about GPUs and NUMA nodes the policy names that MACHINE lacks;
 * with no GPU visible, a note says which GPU numbers went unchecked. */
void policy_check_machine(const struct policy_ast *ast, const struct policy_machine *machine,
                          struct diag_list *diags);

#define POLICY_MAX_CLASSES 65536
#define POLICY_MAX_PRIORITY 1000

#endif
