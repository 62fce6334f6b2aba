/* Preload helper: one allocation, then each argument opened and closed as a
 * phase, so that a test can feed the runtime's report any phase name (">name"
 * opens it and leaves it open); "+capture" and "-capture" begin and end a
 * stream capture instead, and "?host" prints what umpol_on_host and
 * umpol_host_bytes say of the allocation and of an address not the runtime's,
 * "!changed" what umpol_step_changed returns. */
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "umpol.h"

#pragma weak umpol_phase_enter
#pragma weak umpol_phase_exit
#pragma weak umpol_on_host
#pragma weak umpol_host_bytes
#pragma weak umpol_step_changed

int main(int argc, char **argv)
{
    void *p = NULL;
    if (cudaMalloc(&p, 4096) != cudaSuccess) {
        fputs("phases: cudaMalloc failed\n", stderr);
        return 1;
    }
    cudaStream_t s = (cudaStream_t)0x5;
    cudaGraph_t graph;
    for (int i = 1; i < argc && umpol_phase_enter; i++) {
        if (strcmp(argv[i], "+capture") == 0) {
            cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
        } else if (strcmp(argv[i], "-capture") == 0) {
            cudaStreamEndCapture(s, &graph);
        } else if (strcmp(argv[i], "?host") == 0 && umpol_on_host) {
            printf("on host: the allocation %d, another address %d\n", umpol_on_host(p),
                   umpol_on_host(&graph));
            if (umpol_host_bytes)
                printf("host bytes: the allocation %lld, another address %lld\n",
                       umpol_host_bytes(p), umpol_host_bytes(&graph));
        } else if (strcmp(argv[i], "!changed") == 0 && umpol_step_changed) {
            printf("step changed: %d\n", umpol_step_changed());
        } else if (argv[i][0] == '>') {
            umpol_phase_enter(argv[i] + 1);
        } else {
            umpol_phase_enter(argv[i]);
            umpol_phase_exit();
        }
    }
    cudaFree(p);
    return 0;
}
