/* `umpol check` and `umpol explain`: thin clients of the policy front end. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli/topo.h"
#include "lang/json.h"
#include "lang/policy.h"
#include "lang/text.h"

static bool want_color(FILE *out)
{
    const char *no_color = getenv("NO_COLOR");
    return isatty(fileno(out)) && !(no_color && *no_color);
}

static bool node_has_memory(int node, const void *topology)
{
    return topo_node_has_memory(topology, node);
}

/* What the checker needs to know of this machine for --topology. */
static struct policy_machine machine_of(const struct topology *t)
{
    return (struct policy_machine){
        .gpu_count = t->gpu_count,
        .no_gpu_why = t->gpu_count < 0 ? t->gpu_error : "the CUDA driver reports no device",
        .node_has_memory = node_has_memory,
        .ctx = t,
    };
}

int cmd_check(int argc, char **argv)
{
    bool json = false, quiet = false, topology = false;
    for (int c; (c = cli_getopt("check", argc, argv)) != -1;) {
        if (c == OPT_JSON)
            json = true;
        else if (c == 'q')
            quiet = true;
        else if (c == OPT_TOPOLOGY)
            topology = true;
    }
    static struct topology topo;
    struct policy_machine machine;
    if (topology) {
        topo_probe(&topo);
        machine = machine_of(&topo);
    }
    if (optind >= argc)
        return cli_usage_error("check", "no policy file given");
    int worst = EXIT_VALID;
    if (json)
        fputs("{\"files\":[", stdout);
    for (int i = optind; i < argc; i++) {
        struct policy pol;
        enum policy_status st = policy_load_file_on(&pol, argv[i], topology ? &machine : NULL);
        if ((int)st > worst)
            worst = (int)st;
        if (json) {
            fprintf(stdout, "%s{\"file\":", i > optind ? "," : "");
            json_print_string(stdout, argv[i]);
            fprintf(stdout, ",\"valid\":%s,\"errors\":%zu,\"warnings\":%zu,\"diagnostics\":",
                    st == POLICY_VALID ? "true" : "false", pol.diags.errors, pol.diags.warnings);
            diag_print_json(stdout, &pol.src, &pol.diags);
            fputc('}', stdout);
        } else {
            if (!quiet || st != POLICY_VALID)
                diag_print(stderr, &pol.src, &pol.diags, want_color(stderr));
            if (!quiet) {
                FILE *out = st == POLICY_VALID ? stdout : stderr;
                text_print_visible(out, argv[i]);
                fprintf(out, ": %s (%zu error%s, %zu warning%s)\n",
                        st == POLICY_VALID ? "valid" : "invalid", pol.diags.errors,
                        pol.diags.errors == 1 ? "" : "s", pol.diags.warnings,
                        pol.diags.warnings == 1 ? "" : "s");
            }
        }
        policy_free(&pol);
    }
    if (json)
        fputs("]}\n", stdout);
    return cli_finish_stdout("check", worst);
}

/* The explanation, line by line, with control characters that a policy's
 * strings may hold escaped for the terminal. */
static void print_explained(const struct program *p)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (!mem)
        return;
    program_explain(mem, p);
    if (fclose(mem) == 0) {
        for (char *line = text, *nl; line && *line; line = nl ? nl + 1 : NULL) {
            nl = strchr(line, '\n');
            if (nl)
                *nl = '\0';
            text_print_visible(stdout, line);
            putchar('\n');
        }
    }
    free(text);
}

int cmd_explain(int argc, char **argv)
{
    bool json = false;
    for (int c; (c = cli_getopt("explain", argc, argv)) != -1;)
        if (c == OPT_JSON)
            json = true;
    if (optind != argc - 1)
        return cli_usage_error("explain", "give one policy file");
    struct policy pol;
    enum policy_status st = policy_load_file(&pol, argv[optind]);
    if (json) {
        /* Always one object, so a script reads the diagnostics of an invalid
         * policy the same way as the classes of a valid one. */
        fputs("{\"file\":", stdout);
        json_print_string(stdout, argv[optind]);
        printf(",\"valid\":%s,\"errors\":%zu,\"warnings\":%zu,\"diagnostics\":",
               st == POLICY_VALID ? "true" : "false", pol.diags.errors, pol.diags.warnings);
        diag_print_json(stdout, &pol.src, &pol.diags);
        if (st == POLICY_VALID) {
            fputc(',', stdout);
            program_explain_json(stdout, pol.program);
        }
        fputs("}\n", stdout);
    } else {
        diag_print(stderr, &pol.src, &pol.diags, want_color(stderr));
        if (st == POLICY_VALID) {
            fputs("policy:       ", stdout);
            text_print_visible(stdout, argv[optind]);
            putchar('\n');
            print_explained(pol.program);
        }
    }
    policy_free(&pol);
    return cli_finish_stdout("explain", (int)st);
}
