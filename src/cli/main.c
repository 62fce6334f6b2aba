/* umpol: validate, explain and run Unified Memory policies. */
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "cli.h"

static void usage(FILE *out)
{
    fputs("usage: umpol <command> [options]\n"
          "\n"
          "commands:\n"
          "  check [--json] [-q] [--] FILE...   validate policies (exit 0 valid, 1 invalid, 2 error)\n"
          "  explain [--json] FILE              show the compiled classes in the order they are tried\n"
          "  run [-p POLICY] [-r REPORT] [-v] -- COMMAND...\n"
          "                                     run COMMAND with the umpol runtime preloaded\n"
          "  report [--json] [--trace OUT] REPORT...\n"
          "                                     summarise runtime reports (several ranks are summed)\n"
          "  suggest [--budget SIZE] [--goal speed|memory] [-o FILE] REPORT... | -- COMMAND...\n"
          "                                     draft a policy from a recorded run\n"
          "  topo [--measure]                   GPUs, Unified Memory attributes and NUMA nodes\n"
          "  help                               show this help\n"
          "  --version                          show the version\n"
          "\n"
          "See umpol(1) for the commands and umpol(5) for the policy language.\n",
          out);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "check") == 0)
        return cmd_check(argc - 1, argv + 1);
    if (strcmp(cmd, "explain") == 0)
        return cmd_explain(argc - 1, argv + 1);
    if (strcmp(cmd, "run") == 0)
        return cmd_run(argc - 1, argv + 1);
    if (strcmp(cmd, "report") == 0)
        return cmd_report(argc - 1, argv + 1);
    if (strcmp(cmd, "suggest") == 0)
        return cmd_suggest(argc - 1, argv + 1);
    if (strcmp(cmd, "topo") == 0)
        return cmd_topo(argc - 1, argv + 1);
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        usage(stdout);
        return EXIT_VALID;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("umpol %s (policy language version 1)\n", PACKAGE_VERSION);
        return EXIT_VALID;
    }
    fprintf(stderr, "umpol: unknown command '%s'\n", cmd);
    usage(stderr);
    return EXIT_USAGE;
}
