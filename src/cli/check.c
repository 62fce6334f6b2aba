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
#include "lang/text.h"

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
    if (topology)
        topo_probe(&topo);
    if (optind >= argc) {
        fputs("usage: umpol check [--json] [-q] [--topology] FILE...\n", stderr);
        return EXIT_USAGE;
    }
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
    diag_print(stderr, &pol.src, &pol.diags, want_color(stderr));
    if (st == POLICY_VALID) {
        if (json) {
            program_explain_json(stdout, pol.program);
        } else {
            fputs("policy:       ", stdout);
            text_print_visible(stdout, argv[optind]);
            putchar('\n');
            print_explained(pol.program);
        }
    }
    policy_free(&pol);
    return cli_finish_stdout("explain", (int)st);
}
