/* server/backup.h - the rockstalk-backup command (PROTOCOL.md 11.7): a
 * standalone server, or a cluster's leader, streams one consistent moment
 * of its store to the client from a thread of its own, which rockstalk
 * backup DIR writes into a new data directory.
 *
 * Threads: backup_serve on the loop thread; backup_stop and backup_free on
 * the main thread at shutdown, before the store closes; the senders'
 * threads (at most BACKUP_SENDERS_MAX, short-lived) call only
 * store_backup_send and the socket.
 */
#ifndef ROCKSTALK_SERVER_BACKUP_H
#define ROCKSTALK_SERVER_BACKUP_H

#include "conn/conn.h"
#include "queue/state.h"

/* Most backups streaming at once: as cluster mode's snapshot senders
 * (cluster/node.h NODE_SHIP_MAX). */
#define BACKUP_SENDERS_MAX 2
/* A sender's send timeout, seconds: a client that takes nothing for this
 * long ends its backup (as NODE_SHIP_SEND_S). */
#define BACKUP_SEND_S 30
/* How long backup_stop waits for the senders once their sockets are shut
 * down, milliseconds; one still running then exits the process (2) rather
 * than close the store under it (as NODE_SHIP_STOP_MS). */
#define BACKUP_STOP_MS 3000

/* Loop thread, rockstalk-backup on c (access already checked): on a
 * standalone server with a store or a cluster's leader, with no earlier
 * reply of c still waiting, takes c's socket and TLS session (if any) out
 * of the loop (c is closed without them; the socket is made
 * close-on-exec) and from a sender thread writes "BACKUP <shards>\r\n",
 * the snapshot stream of the moment the store took (store_backup_send),
 * then "BACKUP_DONE <jobs> <bytes>\r\n", each send waiting at most
 * BACKUP_SEND_S for the socket; a failure mid-stream closes the socket
 * without that line. Else c gets, and stays open: BACKUP_UNAVAILABLE
 * (--memory, a node that does not lead, replies still waiting),
 * BACKUP_BUSY (BACKUP_SENDERS_MAX running, or stopping) or OUT_OF_MEMORY. */
void backup_serve(Conn *c);

/* Main thread, at shutdown before the store closes: refuses new backups,
 * shuts the running senders' sockets down and waits for them (up to
 * BACKUP_STOP_MS, else _exit(2)). No sender is fine. */
void backup_stop(Server *s);

/* Main thread, after backup_stop: frees s->backups (NULL is fine). */
void backup_free(Server *s);

#endif
