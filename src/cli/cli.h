/* Subcommands of the umpol CLI; each returns the process exit status. */
#ifndef UMPOL_CLI_H
#define UMPOL_CLI_H

/* Stable exit codes (documented in umpol(1)). */
enum { EXIT_VALID = 0, EXIT_INVALID = 1, EXIT_USAGE = 2 };

int cmd_check(int argc, char **argv);
int cmd_explain(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_topo(int argc, char **argv);

/* RC, or EXIT_USAGE with the reason on stderr when stdout could not be
 * written (a full disk, /dev/full, a closed pipe): call before returning. */
int cli_finish_stdout(const char *command, int rc);

#endif
