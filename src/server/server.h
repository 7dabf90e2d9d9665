/* server.h - the top of the loop side: start-up (listen, then store
 * recovery), the per-iteration work (ev_prepare), the single timer, accept
 * and signals. It wires the layers below together (see src/README). Loop
 * thread, and main.c. */
#ifndef ROCKSTALK_SERVER_H
#define ROCKSTALK_SERVER_H

#include <stddef.h>

#include "queue/state.h"

/* Initialises s for cfg: opens the listening socket first (a taken port
 * fails at once), then opens and recovers the store; watchers are created
 * but the loop not yet run, so connections wait in the listen backlog until
 * recovery is over. Returns 0, or -1 with a message in err. */
int server_init(Server *s, const ServerConfig *cfg, char *err, size_t errcap);

/* How long a clean shutdown waits for the store to acknowledge what was
 * applied and for clients to take their replies (seconds). */
#define SHUTDOWN_GRACE_S 10.0
/* Then how long it waits for clients to close after its FIN (seconds). */
#define SHUTDOWN_LINGER_S 2.0

/* Runs the event loop until a clean shutdown or a fatal storage error;
 * returns the process exit status (0 clean, 2 storage failure). On SIGTERM
 * or SIGINT the server stops accepting and running commands, then goes on
 * until every reply already made has been acknowledged by the store and
 * written (at most SHUTDOWN_GRACE_S seconds), then sends FIN and discards
 * input until every client closed (at most SHUTDOWN_LINGER_S seconds); a
 * second signal ends it at once. So a client is told of every change that
 * will survive. */
int server_run(Server *s);

/* Releases everything server_init made (closes the store). */
void server_free(Server *s);

#endif
