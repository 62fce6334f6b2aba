/* `umpol check` and `umpol explain`: thin clients of the policy front end. */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli/topo.h"
#include "lang/json.h"
#include "lang/policy.h"

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
    static const struct option opts[] = {{"json", no_argument, NULL, 'j'},
                                         {"quiet", no_argument, NULL, 'q'},
                                         {"topology", no_argument, NULL, 't'},
                                         {0, 0, 0, 0}};
    optind = 1;
    for (int c; (c = getopt_long(argc, argv, "+jqt", opts, NULL)) != -1;) {
        if (c == 'j')
            json = true;
        else if (c == 'q')
            quiet = true;
        else if (c == 't')
            topology = true;
        else
            return EXIT_USAGE;
    }
    static struct topology topo;
    struct policy_machine machine;
    if (topology) {
        topo_probe(&topo);
        machine = machine_of(&topo);
    }
    if (optind >= argc) {
        fputs("usage: umpol check [--json] [-q] [--topology] FILE...\n", stderr);
        return EXIT_USAGE;
    }
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
            if (!quiet)
                fprintf(st == POLICY_VALID ? stdout : stderr, "%s: %s (%zu error%s, %zu warning%s)\n",
                        argv[i], st == POLICY_VALID ? "valid" : "invalid", pol.diags.errors,
                        pol.diags.errors == 1 ? "" : "s", pol.diags.warnings,
                        pol.diags.warnings == 1 ? "" : "s");
        }
        policy_free(&pol);
    }
    if (json)
        fputs("]}\n", stdout);
    return worst;
}

int cmd_explain(int argc, char **argv)
{
    bool json = false;
    static const struct option opts[] = {{"json", no_argument, NULL, 'j'}, {0, 0, 0, 0}};
    optind = 1;
    for (int c; (c = getopt_long(argc, argv, "+j", opts, NULL)) != -1;) {
        if (c == 'j')
            json = true;
        else
            return EXIT_USAGE;
    }
    if (optind != argc - 1) {
        fputs("usage: umpol explain [--json] FILE\n", stderr);
        return EXIT_USAGE;
    }
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
            printf("policy:       %s\n", argv[optind]);
            program_explain(stdout, pol.program);
        }
    }
    policy_free(&pol);
    return (int)st;
}
