/* The commands of umpol and their options: the one table that dispatch,
 * `umpol help`, each command's --help, its usage errors and its option
 * parsing are all made from, so they cannot disagree. */
#include <ctype.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "cli.h"

static int cmd_help(int argc, char **argv);
static int cmd_version(int argc, char **argv);

static const struct cli_option check_options[] = {
    {OPT_JSON, "json", NULL, "print one JSON object with every file's diagnostics"},
    {'q', "quiet", NULL, "print nothing for valid files"},
    {OPT_TOPOLOGY, "topology", NULL, "also warn about GPUs and NUMA nodes this machine lacks"},
    {0, NULL, NULL, NULL}};

static const struct cli_option explain_options[] = {
    {OPT_JSON, "json", NULL, "print the compiled policy as one JSON object"},
    {0, NULL, NULL, NULL}};

static const struct cli_option run_options[] = {
    {'p', "policy", "POLICY", "the policy file (default: $UMPOL_POLICY)"},
    {'r', "report", "REPORT", "write a JSON report at exit (%p: process id, %r: rank)"},
    {'v', "verbose", NULL, "say what is set in the environment; log the runtime's decisions"},
    {OPT_NO_PYTHON, "no-python", NULL, "leave PYTHONPATH alone (no automatic PyTorch phases)"},
    {0, NULL, NULL, NULL}};

static const struct cli_option report_options[] = {
    {OPT_JSON, "json", NULL, "print the reports merged as one JSON object"},
    {OPT_TRACE, "trace", "OUT.json", "write a Chrome/Perfetto trace of phases and placements"},
    {0, NULL, NULL, NULL}};

static const struct cli_option suggest_options[] = {
    {'b', "budget", "SIZE", "GPU memory the policy may hold: 8GiB, 512MiB or N% of the GPU"},
    {'g', "goal", "GOAL", "speed (fastest steps within the budget, default) or memory"},
    {'o', "output", "FILE", "write the policy to FILE, whole or not at all"},
    {0, NULL, NULL, NULL}};

static const struct cli_option topo_options[] = {
    {OPT_MEASURE, "measure", NULL, "also measure each GPU's pinned host<->GPU copy bandwidth"},
    {0, NULL, NULL, NULL}};

static const struct cli_option no_options[] = {{0, NULL, NULL, NULL}};

const struct cli_command cli_commands[] = {
    {"check", cmd_check, "[--] FILE...",
     "validate policies: every problem with file:line:col, the line and a caret",
     "0 every policy valid (warnings allowed), 1 one is invalid, 2 usage or I/O error",
     "umpol check policies/*.umpol", check_options, false},
    {"explain", cmd_explain, "FILE",
     "show the compiled classes in the order they are tried, each with its doc comment",
     "0 valid, 1 invalid policy, 2 usage or I/O error",
     "umpol explain policies/llm-finetune.umpol", explain_options, false},
    {"run", cmd_run, "-- COMMAND [ARG...]",
     "check the policy, then run COMMAND with the umpol runtime preloaded",
     "COMMAND's own (128+N when signal N ends it); 1 invalid policy, 2 usage error or no "
     "runtime library, 127 COMMAND cannot be started",
     "umpol run -p policies/llm-finetune.umpol -r report.json -- python3 train.py", run_options,
     true},
    {"report", cmd_report, "REPORT...", "summarise runtime reports (several ranks are summed)",
     "0 read, 1 a file is not an umpol report, 2 usage or I/O error",
     "umpol report report-*.json", report_options, false},
    {"suggest", cmd_suggest, "REPORT... or -- COMMAND [ARG...]",
     "draft a policy from a recorded run, or record COMMAND once and draft from it",
     "0 policy written, 1 the budget cannot work, 2 usage error or a report that cannot be used",
     "umpol suggest --budget 12GiB -o train.umpol -- python3 train.py --steps 4",
     suggest_options, true},
    {"topo", cmd_topo, "", "GPUs, Unified Memory attributes, NUMA nodes, link bandwidth",
     "0 (also without a GPU), 2 usage error", "umpol topo --measure", topo_options, false},
    {"help", cmd_help, "[COMMAND]", "show the commands, or one command's help",
     "0, 2 unknown command", "umpol help run", no_options, false},
    {"version", cmd_version, "", "show the version of umpol and of its policy language",
     "0", "umpol version", no_options, false},
    {NULL, NULL, NULL, NULL, NULL, NULL, NULL, false}};

const struct cli_command *cli_find(const char *name)
{
    for (const struct cli_command *c = cli_commands; c->name; c++)
        if (strcmp(c->name, name) == 0)
            return c;
    return NULL;
}

static void print_synopsis(FILE *out, const struct cli_command *c)
{
    fprintf(out, "umpol %s", c->name);
    for (const struct cli_option *o = c->options; o->name; o++) {
        if (o->key < 256)
            fprintf(out, " [-%c", o->key);
        else
            fprintf(out, " [--%s", o->name);
        fprintf(out, "%s%s]", o->arg ? " " : "", o->arg ? o->arg : "");
    }
    fprintf(out, "%s%s\n", *c->args ? " " : "", c->args);
}

static void print_option(FILE *out, int key, const char *name, const char *arg, const char *help)
{
    char left[64];
    int n = key < 256 ? snprintf(left, sizeof left, "-%c, --%s", key, name)
                      : snprintf(left, sizeof left, "--%s", name);
    if (arg)
        snprintf(left + n, sizeof left - (size_t)n, " %s", arg);
    fprintf(out, "  %-24s %s\n", left, help);
}

static void print_help(FILE *out, const struct cli_command *c)
{
    fputs("usage: ", out);
    print_synopsis(out, c);
    fprintf(out, "\n%c%s.\n\noptions:\n", toupper((unsigned char)c->summary[0]), c->summary + 1);
    for (const struct cli_option *o = c->options; o->name; o++)
        print_option(out, o->key, o->name, o->arg, o->help);
    print_option(out, 'h', "help", NULL, "show this help");
    fprintf(out, "\nexit status: %s\nexample: %s\n", c->exits, c->example);
}

static void print_overview(FILE *out)
{
    fputs("usage: umpol COMMAND [OPTION...] [ARG...]\n\ncommands:\n", out);
    for (const struct cli_command *c = cli_commands; c->name; c++) {
        fputs("  ", out);
        print_synopsis(out, c);
        fprintf(out, "        %s\n", c->summary);
    }
    fputs("\nEvery command answers -h and --help; 'umpol help COMMAND' prints the same.\n"
          "'umpol --version' and 'umpol -V' are 'umpol version'.\n"
          "See umpol(1) for the commands, umpol(5) for the policy language and umpol(7) for\n"
          "the runtime and its environment.\n",
          out);
}

int cli_usage_error(const char *name, const char *fmt, ...)
{
    const struct cli_command *c = cli_find(name);
    va_list ap;
    fprintf(stderr, "umpol %s: ", name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\nusage: ", stderr);
    if (c)
        print_synopsis(stderr, c);
    fprintf(stderr, "Try 'umpol %s --help' for more.\n", name);
    return EXIT_USAGE;
}

enum { MAX_OPTIONS = 16 };

int cli_getopt(const char *name, int argc, char **argv)
{
    /* getopt's tables for the command being parsed, built on its first call. */
    static const struct cli_command *built;
    static struct option longopts[MAX_OPTIONS + 2];
    static char shortopts[2 * MAX_OPTIONS + 8];
    const struct cli_command *c = cli_find(name);
    if (!c) {
        fprintf(stderr, "umpol: internal error: no command '%s'\n", name);
        exit(EXIT_USAGE);
    }
    if (built != c) {
        size_t n = 0, s = 0;
        if (c->runs_command)
            shortopts[s++] = '+';
        shortopts[s++] = ':'; /* a missing argument is told apart from an unknown option */
        shortopts[s++] = 'h';
        for (const struct cli_option *o = c->options; o->name && n < MAX_OPTIONS; o++, n++) {
            longopts[n] = (struct option){o->name, o->arg ? required_argument : no_argument,
                                          NULL, o->key};
            if (o->key < 256) {
                shortopts[s++] = (char)o->key;
                if (o->arg)
                    shortopts[s++] = ':';
            }
        }
        longopts[n++] = (struct option){"help", no_argument, NULL, 'h'};
        longopts[n] = (struct option){NULL, 0, NULL, 0};
        shortopts[s] = '\0';
        built = c;
    }
    opterr = 0; /* the messages below name the command and its --help */
    int key = getopt_long(argc, argv, shortopts, longopts, NULL);
    if (key == 'h') {
        print_help(stdout, c);
        exit(cli_finish_stdout(name, EXIT_VALID));
    }
    if (key == ':') {
        for (const struct cli_option *o = c->options; o->name; o++)
            if (o->key == optopt)
                exit(cli_usage_error(name, "option --%s needs an argument (%s)", o->name,
                                     o->arg));
        exit(cli_usage_error(name, "option '%s' needs an argument", argv[optind - 1]));
    }
    if (key == '?') {
        if (optopt > 0 && optopt < 256 && isprint(optopt) && !strchr(shortopts + strspn(shortopts, "+:"), optopt))
            exit(cli_usage_error(name, "unknown option '-%c'", optopt));
        exit(cli_usage_error(name, "unknown option '%s'", argv[optind - 1]));
    }
    return key;
}

static int cmd_help(int argc, char **argv)
{
    while (cli_getopt("help", argc, argv) != -1)
        ;
    if (optind == argc) {
        print_overview(stdout);
        return EXIT_VALID;
    }
    const struct cli_command *c = cli_find(argv[optind]);
    if (optind + 1 != argc)
        return cli_usage_error("help", "give at most one command");
    if (!c)
        return cli_usage_error("help", "unknown command '%s'", argv[optind]);
    print_help(stdout, c);
    return EXIT_VALID;
}

static int cmd_version(int argc, char **argv)
{
    while (cli_getopt("version", argc, argv) != -1)
        ;
    if (optind != argc)
        return cli_usage_error("version", "unexpected argument '%s'", argv[optind]);
    printf("umpol %s (policy language version 1)\n", PACKAGE_VERSION);
    return EXIT_VALID;
}
