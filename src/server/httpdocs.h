/* httpdocs.h - what the HTTP server (http/httpd.h; --http, or its alias
 * --metrics) serves, made on the loop thread. Once a second it samples
 * every tube's put, reserve and delete counts (TubeRates), renders the
 * Prometheus text and the JSON documents of /api/v1/ (stats, tubes,
 * cluster; protocol/PROTOCOL.md section 18) and publishes them as one
 * set, and tells the HTTP server whether this process is ready. The HTTP
 * thread never touches the loop's state: it serves the latest set.
 * Loop thread only (httpdocs_open and httpdocs_close: the main thread,
 * before and after the loop runs). */
#ifndef ROCKSTALK_HTTPDOCS_H
#define ROCKSTALK_HTTPDOCS_H

#include <stddef.h>

#include "queue/state.h"

/* Main thread, before the store recovers: starts the HTTP server when
 * s->cfg.http_addr is set (its /readyz answers "recovering" until the
 * loop's first second) and arms the loop's once-a-second timer, whose
 * first run is at once. Returns 0 (nothing to do without --http), or -1
 * with a message in err. */
int httpdocs_open(Server *s, char *err, size_t errcap);

/* Tells the HTTP server whether this process is ready, now: not while it
 * stops (SIGTERM); ready while it serves (standalone, or the cluster's
 * leader serving) or relays to a leader it knows (a follower); not while
 * it knows no leader, or leads but does not serve yet. Nothing without
 * --http. The timer calls it each second; server.c when it starts to
 * stop. */
void httpdocs_ready(Server *s);

/* Main thread, after the loop: stops the HTTP server. */
void httpdocs_close(Server *s);

#endif
