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

#include "http/json.h"
#include "queue/state.h"
#include "server/auth.h"

/* Tubes /api/v1/tubes lists at most (the first by name; "truncated" says
 * when there were more), and so /api/v1/tubes/NAME finds: the set stays
 * bounded (a tube's object is about 400 bytes). */
#define HTTPDOCS_TUBES_MAX 1000

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

/* GET /api/v1/tubes for identity u (not a bare admin): the document of
 * the tubes u may inspect, rendered now into j (count and listed count
 * those only). O(tubes) auth checks and a sort. */
void httpdocs_tubes_for(const Server *s, const AuthUser *u, Json *j);

/* Main thread, after the loop: stops the HTTP server. */
void httpdocs_close(Server *s);

#endif
