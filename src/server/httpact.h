/* httpact.h - the HTTP API's answers for the loop (server/httpapi.h runs
 * the requests): the answer being made (HttpAns), and the newer requests
 * of protocol/PROTOCOL.md section 18: POST tubes/NAME/clear (18.14), POST
 * jobs/ID/move (18.15), GET connections (18.16) and GET history (18.17,
 * with its 10-second sampler). Loop thread only. */
#ifndef ROCKSTALK_HTTPACT_H
#define ROCKSTALK_HTTPACT_H

#include <stdint.h>

#include "http/httpd.h"
#include "http/json.h"
#include "queue/queue.h"
#include "server/auth.h"

/* Bytes of an identity's name as logged, NUL included. */
#define AUTH_WHO_MAX (AUTH_NAME_MAX + 1)

/* n of POST tubes/NAME/kick, at most (default 1). */
#define HTTPACT_KICK_MAX 10000
/* Connections GET connections lists at most (the first by id). */
#define HTTPACT_CONNS_MAX 1000
/* The history: a sample every HTTPACT_HIST_S seconds, the last
 * HTTPACT_HIST_POINTS rates (one hour). */
#define HTTPACT_HIST_S 10
#define HTTPACT_HIST_POINTS 360

/* A clear under way: the jobs of t in the states of mask (bit 1 << state,
 * ready, delayed and buried only), at most CLEAR_PER_PASS a loop pass,
 * each step once the last one's deletes are acknowledged. */
typedef struct HttpClear {
    Tube *t;       /* holds a reference */
    unsigned mask; /* 1 << JOB_READY | ... */
    uint64_t left; /* most jobs it may still delete */
    uint64_t deleted;
    uint64_t seq; /* applied sequence after its latest step */
    char who[AUTH_WHO_MAX];
} HttpClear;

/* What one request came to: status and JSON body; fetch: a job whose body
 * must be read first (then move_to says a move waits for it, else GET
 * jobs/ID); clear: a clear to run step by step (owned); sent_tag: the
 * voter a leadership transfer hands over to once the answer has been
 * sent (HttpdReq.sent_tag, server/httpcluster.h), 0 for none. */
typedef struct HttpAns {
    unsigned status;
    Json j;
    uint64_t fetch;
    HttpClear *clear;
    uint64_t sent_tag;
    char move_to[TUBE_NAME_MAX + 1];
    char who[AUTH_WHO_MAX];
} HttpAns;

/* Sets a's answer to status with {"error": msg}. */
void httpans_error(HttpAns *a, unsigned status, const char *msg);

/* Sets a's answer to 200 {"ok": true, key: v} (no key when NULL). */
void httpans_done(HttpAns *a, const char *key, uint64_t v);

/* The optional query argument a of r as a number (def when absent; a
 * decimal in [0, max], http/httpparse.h's httpparse_u64): 0, or -1
 * (answered 400 with msg). */
int httpans_arg_u64(const HttpdReq *r, HttpdArg a, uint64_t def, uint64_t max,
                    uint64_t *out, HttpAns *ans, const char *msg);

/* The name an action is logged with: u's, or "(open API)". */
const char *httpact_who(const AuthUser *u);

/* POST tubes/NAME/kick (kick) or tubes/NAME/pause on t (the caller
 * checked admin): answers a. */
void httpact_tube(Server *s, const HttpdReq *r, Tube *t, int kick,
                  const AuthUser *u, HttpAns *a);

/* DELETE jobs/ID (act "delete"), POST jobs/ID/kick, POST
 * jobs/ID/priority on j (the caller checked admin): answers a. */
void httpact_job(Server *s, const HttpdReq *r, Job *j, const char *act,
                 const AuthUser *u, HttpAns *a);

/* POST tubes/NAME/clear on t (the caller checked admin): parses state=,
 * then either answers a (400) or sets a->clear. who: the identity, for
 * the log. */
void httpact_clear_start(Server *s, const HttpdReq *r, Tube *t, const char *who,
                         HttpAns *a);

/* One step of c: 1 when it is done (a holds the answer; c is freed), 0
 * while it goes on (or waits for its deletes' acknowledgement). */
int httpact_clear_step(Server *s, HttpClear *c, HttpAns *a);

/* Drops c unfinished (the server stops). */
void httpact_clear_free(Server *s, HttpClear *c);

/* POST jobs/ID/move to tube a->move_to, j's body in memory (the caller
 * checked admin on both tubes and fetched the body): answers a. */
void httpact_move(Server *s, Job *j, HttpAns *a);

/* GET connections into a. */
void httpact_connections(Server *s, HttpAns *a);

/* GET history into a. */
void httpact_history(Server *s, HttpAns *a);

/* Main thread: starts the history's sampler (every interval_ms ms,
 * normally HTTPACT_HIST_S s; the first sample now). Returns 0 or -1 out
 * of memory. */
int httpact_hist_open(Server *s, unsigned interval_ms);

/* Main thread, after the loop: stops it and frees it. */
void httpact_hist_close(Server *s);

#endif
