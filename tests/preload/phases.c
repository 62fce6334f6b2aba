/* Preload helper: one allocation, then each argument opened and closed as a
 * phase, so that a test can feed the runtime's report any phase name; "+capture"
 * and "-capture" begin and end a stream capture instead. */
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "umpol.h"

#pragma weak umpol_phase_enter
#pragma weak umpol_phase_exit

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
        } else {
            umpol_phase_enter(argv[i]);
            umpol_phase_exit();
        }
    }
    cudaFree(p);
    return 0;
}
