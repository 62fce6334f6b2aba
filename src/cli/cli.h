/* Subcommands of the umpol CLI; each returns the process exit status. */
#ifndef UMPOL_CLI_H
#define UMPOL_CLI_H

#include <stdbool.h>
#include <stddef.h>

/* Stable exit codes (documented in umpol(1)). */
enum { EXIT_VALID = 0, EXIT_INVALID = 1, EXIT_USAGE = 2 };

int cmd_check(int argc, char **argv);
int cmd_explain(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_topo(int argc, char **argv);
int cmd_suggest(int argc, char **argv);

/* Run CMD with the runtime preloaded under POLICY_PATH (REPORT: UMPOL_REPORT,
 * or NULL; PYTHON: put the umpol Python package on PYTHONPATH); returns the
 * job's exit status, or EXIT_USAGE when it cannot start. */
int run_job(const char *policy_path, const char *report, bool verbose, bool python, char **cmd);

/* Make a private directory NAME-XXXXXX in $TMPDIR (else /tmp) and put its
 * path in OUT (LEN bytes): 0, or -1 with the reason on stderr for COMMAND. */
int cli_temp_dir(const char *command, const char *name, char *out, size_t len);

/* Keys of options that have a long name only (short options use their letter). */
enum { OPT_JSON = 256, OPT_TOPOLOGY, OPT_TRACE, OPT_MEASURE, OPT_NO_PYTHON };

/* One option of a command, as its --help, its synopsis and getopt see it. */
struct cli_option {
    int key;          /* the short letter (-q), or an OPT_* key for a long-only option */
    const char *name; /* the long name, without "--" */
    const char *arg;  /* the argument's name; NULL: the option takes none */
    const char *help;
};

/* A command: the one place its usage is written (commands.c). */
struct cli_command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *args;    /* positional arguments, as the synopsis shows them */
    const char *summary; /* one line */
    const char *exits;   /* what its exit status means */
    const char *example;
    const struct cli_option *options; /* ends with a zeroed entry */
    /* Options end at the first operand, so that COMMAND keeps its own; the
     * other commands take options anywhere among their operands. */
    bool runs_command;
};

extern const struct cli_command cli_commands[]; /* ends with a zeroed entry */

const struct cli_command *cli_find(const char *name);

/* getopt_long over command NAME's options: returns an option's key, or -1
 * after the last option (optind is then the first operand). Answers -h and
 * --help itself (the command's help on stdout, exit 0); an unknown option or
 * a missing argument is a usage error (message on stderr, exit 2). */
int cli_getopt(const char *name, int argc, char **argv);

/* "umpol NAME: MESSAGE", the command's synopsis and where its help is, on
 * stderr; returns EXIT_USAGE. */
int cli_usage_error(const char *name, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* RC, or EXIT_USAGE with the reason on stderr when stdout could not be
 * written (a full disk, /dev/full, a closed pipe): call before returning. */
int cli_finish_stdout(const char *command, int rc);

#endif
