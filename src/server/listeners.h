/* listeners.h - the server's listening sockets (Server.listeners): which
 * ones a start opens (sockets inherited from systemd or from a cluster
 * node's exec, -l/-p, --listen; rockstalkd(1) says how they combine), the
 * start-up checks (at most SERVER_LISTENERS_MAX, none twice, tls:// only
 * with TLS, a warning for each beyond loopback), and their close, which
 * removes the unix socket files the process made. Loop thread, at start
 * and at exit; server.c runs their accept watchers. */
#ifndef ROCKSTALK_LISTENERS_H
#define ROCKSTALK_LISTENERS_H

#include <stddef.h>
#include <sys/types.h>

#include "queue/state.h"

/* Opens s's listeners for cfg into s->listeners (fds only; the watchers
 * are the caller's): the inherited sockets, then -l/-p (when nothing was
 * inherited, and -l or -p was given or no --listen), then every --listen
 * URL; with sockets a step-down handed over (listen_handover_name), those
 * alone. Logs each, and warns of each TCP or TLS one beyond loopback.
 * Returns 0, or -1 with a message in err (what was opened stays in
 * s->listeners for listeners_close). */
int listeners_open(Server *s, const ServerConfig *cfg, char *err,
                   size_t errcap);

/* Running as root with -u: gives the unix socket files the process made
 * to uid and gid (mode NET_UNIX_MODE stays), so that user's group may
 * connect and the server may remove them at exit. Returns 0, or -1 with a
 * message. */
int listeners_chown(Server *s, uid_t uid, gid_t gid, char *err, size_t errcap);

/* Stops nothing (the caller stops the watchers): closes every listener and
 * removes each unix socket file the process made, if the path still is
 * that file. Idempotent. */
void listeners_close(Server *s);

#endif
