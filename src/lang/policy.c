#include "policy.h"

#include <string.h>

#include "check.h"
#include "parse.h"

static enum policy_status finish(struct policy *pol, int loaded)
{
    if (loaded != 0) {
        for (size_t i = 0; i < pol->diags.count; i++)
            if (pol->diags.items[i].code == E_IO)
                return POLICY_IO_ERROR;
        return POLICY_INVALID;
    }
    struct policy_ast ast;
    ast_init(&ast);
    policy_parse(&pol->src, &ast, &pol->diags);
    if (pol->diags.errors == 0)
        policy_check(&ast, &pol->diags);
    enum policy_status status = POLICY_INVALID;
    if (pol->diags.errors == 0) {
        pol->program = program_compile(&ast);
        if (pol->program)
            status = POLICY_VALID;
        else
            diag_add(&pol->diags, DIAG_ERROR, E_IO, (struct loc){0, 0, 0, 0},
                     "out of memory while compiling the policy");
    }
    ast_free(&ast);
    return status;
}

enum policy_status policy_load_file(struct policy *pol, const char *path)
{
    memset(pol, 0, sizeof *pol);
    diag_list_init(&pol->diags);
    return finish(pol, source_load(&pol->src, path, &pol->diags));
}

enum policy_status policy_load_text(struct policy *pol, const char *name, const char *text,
                                    size_t len)
{
    memset(pol, 0, sizeof *pol);
    diag_list_init(&pol->diags);
    return finish(pol, source_from_memory(&pol->src, name, text, len, &pol->diags));
}

void policy_free(struct policy *pol)
{
    program_free(pol->program);
    diag_list_free(&pol->diags);
    source_free(&pol->src);
    memset(pol, 0, sizeof *pol);
}
