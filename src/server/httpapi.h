/* httpapi.h - the loop's side of the HTTP API's requests (http/httpd.h,
 * HttpdReq): routing, auth (the auth file's bearer tokens, a console
 * session's cookie and CSRF token: server/httpsess.h; per-tube rules), a
 * tube's jobs, a job with its body, and the answers held; the actions,
 * clear, move, connections and history are server/httpact.h's, the
 * cluster's transfer server/httpcluster.h's (protocol/PROTOCOL.md
 * section 18). The HTTP thread queues requests and wakes
 * the loop (ev_async); the loop takes at most HTTPD_QUEUE_MAX of them per wake,
 * runs each with bounded work (one page of at most HTTPAPI_LIMIT_MAX jobs, a
 * kick of at most HTTPACT_KICK_MAX) and holds its answer until the store has
 * acknowledged every change made before it (as a protocol reply waits)
 * and, for a job whose body is only on disk, until the reader thread has
 * read it (as a peek waits). Nothing here blocks the loop. Loop thread
 * only (httpapi_notify: any thread). */
#ifndef ROCKSTALK_HTTPAPI_H
#define ROCKSTALK_HTTPAPI_H

#include "queue/state.h"

/* limit of GET tubes/NAME/jobs: default and most. */
#define HTTPAPI_LIMIT_DEFAULT 100
#define HTTPAPI_LIMIT_MAX 1000
/* Bodies larger than this (bytes) are not sent by GET jobs/ID (body null,
 * "body-omitted": true): an answer stays under about 1.4 MiB. */
#define HTTPAPI_BODY_MAX (1u << 20)
/* Bytes of a body's text preview, at most. */
#define HTTPAPI_PREVIEW_MAX 256

/* Any thread (the config's notify of http/httpd.h; arg: the Server):
 * requests wait, wakes the loop. */
void httpapi_notify(void *arg);

/* Main thread, before httpd_start: sets up the wake-up and the delay
 * timer. delay_ms: every answer waits at least this long (a fault seam
 * for tests, ROCKSTALKD_FAULT_HTTP_DELAY_MS; 0 normally). Returns 0, or
 * -1 out of memory. */
int httpapi_open(Server *s, unsigned delay_ms);

/* Loop thread, once per iteration (after jobreply_done): answers the
 * requests whose changes the store has acknowledged and whose bodies have
 * arrived. */
void httpapi_step(Server *s);

/* Main thread, after the loop, before httpd_stop: answers every request
 * still held with 503 and frees the state. */
void httpapi_close(Server *s);

#endif
