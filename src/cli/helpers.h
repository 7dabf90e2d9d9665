/* helpers.h - the operator commands built on the protocol (tubes, peek
 * TUBE STATE, kick TUBE [N], list, clear, top, help) and the dispatch that
 * picks a helper or a protocol command for a command line. */
#ifndef ROCKSTALK_CLI_HELPERS_H
#define ROCKSTALK_CLI_HELPERS_H

#include <stdio.h>

#include "session.h"

/* Runs argv (argv[0] is the command; argc >= 1) on s: a helper, else a
 * protocol command (session_command). body as for session_command. Returns
 * RC_*; on RC_FAIL err holds the reason. */
int helpers_run(Session *s, int argc, char **argv, const Body *body, char *err,
                size_t errcap);

/* Checks argv before connecting: a known command with a fitting number of
 * arguments. Returns 0, or -1 with a message in err. */
int helpers_check(int argc, char **argv, char *err, size_t errcap);

/* Nonzero when argv names a command that needs no connection (help,
 * drain, hash-token). */
int helpers_offline(int argc, char **argv);

/* Prints the command list (helpers, then protocol commands) to f. */
void helpers_help(FILE *f);

#endif
