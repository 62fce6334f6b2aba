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

static bool want_color(FILE *out)
{
    const char *no_color = getenv("NO_COLOR");
    return isatty(fileno(out)) && !(no_color && *no_color);
}

/* Warn about places the policy names that this machine lacks. */
static void check_topology(struct policy *pol, const struct topology *t)
{
    const struct program *p = pol->program;
    for (size_t c = 0; c < p->class_count; c++) {
        const struct program_class *cls = &p->classes[c];
        struct program_place places[2 + MAX_ACCESS + 16];
        size_t n = 0;
        places[n++] = cls->place;
        for (int a = 0; a < cls->access_count; a++)
            places[n++] = cls->access[a];
        for (uint32_t k = 0; k < cls->prefetch_count && n < sizeof places / sizeof places[0]; k++)
            places[n++] = p->prefetches[cls->prefetch_first + k].dest;
        struct loc loc = {cls->line, 1, cls->line, 6};
        for (size_t i = 0; i < n; i++) {
            if (places[i].kind == LOC_HOST_NUMA && !topo_node_has_memory(t, places[i].index))
                diag_add(&pol->diags, DIAG_WARNING, W_TOPOLOGY, loc,
                         "class '%s': this machine has no NUMA node %d with memory; the runtime "
                         "will use plain host memory", cls->name, places[i].index);
            if (places[i].kind == LOC_GPU && places[i].index >= 0 && t->gpu_count >= 0 &&
                places[i].index >= t->gpu_count)
                diag_add(&pol->diags, DIAG_WARNING, W_TOPOLOGY, loc,
                         "class '%s': this machine has no GPU %d (it has %d)", cls->name,
                         places[i].index, t->gpu_count);
        }
    }
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
    if (topology)
        topo_probe(&topo);
    if (optind >= argc)
        return cli_usage_error("check", "no policy file given");
    int worst = EXIT_VALID;
    if (json)
        fputs("{\"files\":[", stdout);
    for (int i = optind; i < argc; i++) {
        struct policy pol;
        enum policy_status st = policy_load_file(&pol, argv[i]);
        if (topology && st == POLICY_VALID)
            check_topology(&pol, &topo);
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
    for (int c; (c = cli_getopt("explain", argc, argv)) != -1;)
        if (c == OPT_JSON)
            json = true;
    if (optind != argc - 1)
        return cli_usage_error("explain", "give one policy file");
    struct policy pol;
    enum policy_status st = policy_load_file(&pol, argv[optind]);
    diag_print(stderr, &pol.src, &pol.diags, want_color(stderr));
    if (st == POLICY_VALID) {
        if (json) {
            program_explain_json(stdout, pol.program);
        } else {
            printf("policy:       %s\n", argv[optind]);
            program_explain(stdout, pol.program);
        }
    }
    policy_free(&pol);
    return (int)st;
}
