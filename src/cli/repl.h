/* repl.h - the interactive prompt: one command per line, a put's body on
 * the line after it, readable replies; line editing and history through
 * libedit on a terminal, plain lines from a pipe or file otherwise. */
#ifndef ROCKSTALK_CLI_REPL_H
#define ROCKSTALK_CLI_REPL_H

#include "session.h"

/* Reads and runs commands from stdin on s until quit, exit or end of
 * input. Errors are reported on stderr as they happen (this is the top
 * layer). Returns RC_OK, or RC_FAIL when the connection broke. */
int repl_run(Session *s);

#endif
