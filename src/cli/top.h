/* top.h - `rockstalk top`: a full-screen view (ncurses) of the server's
 * totals and its tubes, fetched and redrawn every second until q or
 * Ctrl-C. Runs on the caller's session; keeps no global state of its own
 * (ncurses keeps the screen's). */
#ifndef ROCKSTALK_CLI_TOP_H
#define ROCKSTALK_CLI_TOP_H

#include <stddef.h>

#include "session.h"

/* Runs the view until the user quits. Keys: q or Ctrl-C quit; < and > (or
 * the arrow keys) move the sort column, 1-9 and 0 pick one, r reverses.
 * Returns 0, or -1 with a message in err when the terminal cannot be set up
 * or the server fails (the screen is restored first). */
int top_run(Session *s, char *err, size_t errcap);

#endif
