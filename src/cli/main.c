/* umpol: validate, explain and run Unified Memory policies. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

int main(int argc, char **argv)
{
    const char *name = argc < 2 ? "" : argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0)
        name = "help";
    else if (strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0)
        name = "version";
    const struct cli_command *cmd = cli_find(name);
    if (!cmd) {
        if (*name)
            fprintf(stderr, "umpol: unknown command '%s'\n", name);
        fputs("usage: umpol COMMAND [OPTION...] [ARG...]\ncommands:", stderr);
        for (const struct cli_command *c = cli_commands; c->name; c++)
            fprintf(stderr, " %s", c->name);
        fputs("\nTry 'umpol help' for more.\n", stderr);
        return EXIT_USAGE;
    }
    optind = 1;
    int rc = cmd->run(argc - 1, argv + 1);
    return cli_finish_stdout(cmd->name, rc); /* help, version, topo: unwritten output is exit 2 */
}
