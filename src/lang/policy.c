#include "policy.h"

#include <string.h>

#include "check.h"
#include "parse.h"

/* The loader's problem as a diagnostic: a file that cannot be read is an I/O
 * error (exit 2), text that cannot be a policy makes it invalid (exit 1). */
static enum policy_status load_failed(struct policy *pol, const struct source_error *err)
{
    static const enum diag_code codes[] = {
        [SOURCE_OK] = E_IO,          [SOURCE_IO] = E_IO, [SOURCE_TOO_LARGE] = E_TOO_LARGE,
        [SOURCE_ENCODING] = E_ENCODING, [SOURCE_NO_MEMORY] = E_IO,
    };
    diag_add(&pol->diags, DIAG_ERROR, codes[err->problem], err->loc, "%s", err->message);
    return codes[err->problem] == E_IO ? POLICY_IO_ERROR : POLICY_INVALID;
}

/* Every mistake of a policy in one run: the checker also reads what the
 * parser could recover, and knows which parts may be missing. */
static enum policy_status finish(struct policy *pol, const struct policy_machine *machine)
{
    struct policy_ast ast;
    ast_init(&ast);
    policy_parse(&pol->src, &ast, &pol->diags);
    policy_check(&ast, &pol->diags);
    if (machine)
        policy_check_machine(&ast, machine, &pol->diags);
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
    diag_sort(&pol->diags);
    return status;
}

enum policy_status policy_load_file(struct policy *pol, const char *path)
{
    return policy_load_file_on(pol, path, NULL);
}

enum policy_status policy_load_file_on(struct policy *pol, const char *path,
                                       const struct policy_machine *machine)
{
    memset(pol, 0, sizeof *pol);
    diag_list_init(&pol->diags);
    struct source_error err;
    if (source_load(&pol->src, path, &err) != 0)
        return load_failed(pol, &err);
    return finish(pol, machine);
}

enum policy_status policy_load_text(struct policy *pol, const char *name, const char *text,
                                    size_t len)
{
    memset(pol, 0, sizeof *pol);
    diag_list_init(&pol->diags);
    struct source_error err;
    if (source_from_memory(&pol->src, name, text, len, &err) != 0)
        return load_failed(pol, &err);
    return finish(pol, NULL);
}

void policy_free(struct policy *pol)
{
    program_free(pol->program);
    diag_list_free(&pol->diags);
    source_free(&pol->src);
    memset(pol, 0, sizeof *pol);
}
