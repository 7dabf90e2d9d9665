/* cmd.h - the protocol commands: one handler per command, run on a parsed
 * line (proto.h) for a connection, changing queue state (queue.h) and
 * appending the reply (conn.h). The only module that formats replies: it
 * is the connections' handler (ConnHandler) and hears the queue's events
 * (QueueEvents), so the layers below it never call up. Loop thread only. */
#ifndef ROCKSTALK_CMD_H
#define ROCKSTALK_CMD_H

#include <stddef.h>

#include "conn/conn.h"
#include "queue/queue.h"

/* What the server plugs into Server.handler and Server.events. */
extern const ConnHandler cmd_handler;
extern const QueueEvents cmd_events;

/* Runs one command line (len bytes, CRLF excluded). A put leaves the
 * connection reading the body (or discarding it); quit marks it closing. */
void cmd_dispatch(Conn *c, const char *line, size_t len);

/* Completes the put whose body (c->in_body) has been read in full. */
void cmd_put_body(Conn *c);

/* Loop thread, once per iteration: the puts whose bodies the store's body
 * writer has synced are applied and answered (a failed write answers
 * INTERNAL_ERROR), their connections' input resumed; a body whose
 * connection closed meanwhile is dropped. */
void cmd_ring_done(Server *s);

#endif
