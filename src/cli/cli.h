/* Subcommands of the umpol CLI; each returns the process exit status. */
#ifndef UMPOL_CLI_H
#define UMPOL_CLI_H

#include <stdbool.h>

/* Stable exit codes (documented in umpol(1)). */
enum { EXIT_VALID = 0, EXIT_INVALID = 1, EXIT_USAGE = 2 };

int cmd_check(int argc, char **argv);
int cmd_explain(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_topo(int argc, char **argv);
int cmd_suggest(int argc, char **argv);

/* Run CMD with the runtime preloaded under POLICY_PATH (REPORT: UMPOL_REPORT,
 * or NULL); returns the job's exit status, or EXIT_USAGE when it cannot start. */
int run_job(const char *policy_path, const char *report, bool verbose, char **cmd);

#endif
