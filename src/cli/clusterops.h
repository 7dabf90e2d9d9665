/* clusterops.h - rockstalk cluster status, transfer ID, add
 * ID@HOST:PORT[/CLIENTPORT] and remove ID (rockstalk(1); PROTOCOL.md 15.8
 * to 15.10): the leader's view of the members as a table, a hand-over of
 * the leadership that waits, on new connections, until the chosen node
 * says it leads, and the membership changes, which wait for their commit
 * (removing the leader: it hands over first, then the command is sent
 * again). Against any member (a follower relays them to the leader).
 * Single-threaded; errors come back in err, never printed by the callee except
 * the table and the progress lines on stdout. */
#ifndef ROCKSTALK_CLI_CLUSTEROPS_H
#define ROCKSTALK_CLI_CLUSTEROPS_H

#include <stddef.h>

#include "session.h"

/* How long transfer waits for the new leader (seconds), and how often it
 * asks (milliseconds); each status request may take up to
 * CLUSTEROPS_READ_S seconds (a node holds a connection while it knows no
 * leader). */
#define CLUSTEROPS_WAIT_S 10
#define CLUSTEROPS_POLL_MS 100
#define CLUSTEROPS_READ_S 2
/* How long add and remove wait for the reply (seconds): longer than the
 * server's own bound on a change (NODEOPS_CHANGE_S, 60). */
#define CLUSTEROPS_CHANGE_S 90

/* argv: "cluster" then "status", or "transfer", "remove" and a node id,
 * or "add" and ID@HOST:PORT[/CLIENTPORT]. Returns
 * RC_OK; RC_REPLY when the server refuses (its reply printed as a status
 * line, with what it means in err) or the new leader did not show within
 * CLUSTEROPS_WAIT_S (in err); RC_FAIL with a message in err (usage,
 * connection). */
int clusterops_run(Session *s, int argc, char **argv, char *err, size_t errcap);

#endif
