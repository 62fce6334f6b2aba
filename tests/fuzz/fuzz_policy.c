/* libFuzzer target: any bytes through parse + check + compile, then the
 * classifier and explain on whatever compiles. Must never crash, leak or hang. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "lang/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *sink;
    if (!sink)
        sink = fopen("/dev/null", "w");
    struct policy pol;
    policy_load_text(&pol, "fuzz.umpol", (const char *)data, size);
    diag_print(sink, &pol.src, &pol.diags, false);
    diag_print_json(sink, &pol.src, &pol.diags);
    if (pol.program) {
        const struct program *p = pol.program;
        size_t words = program_bitset_words(p->phase_glob_count);
        uint64_t *phase_bits = calloc(words, sizeof *phase_bits);
        uint64_t *tag_bits = calloc(program_bitset_words(p->tag_count), sizeof *tag_bits);
        if (phase_bits && tag_bits) {
            program_match_phase(p, "forward.layer0", phase_bits);
            if (p->tag_count)
                tag_bits[0] = 1;
            for (uint64_t s = 1; s < (1ull << 40); s <<= 7) {
                struct alloc_ctx ctx = {s, s & 1023, API_CUDA_MALLOC_ASYNC, 0,
                                        phase_bits, tag_bits, (s >> 10) & 1};
                int cls = program_classify(p, &ctx);
                if (cls < -1 || cls >= (int)p->class_count)
                    abort();
            }
        }
        free(phase_bits);
        free(tag_bits);
        program_explain(sink, p);
        program_explain_json(sink, p);
    }
    policy_free(&pol);
    return 0;
}
