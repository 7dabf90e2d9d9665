/* httpsess.h - the web console's sessions (protocol/PROTOCOL.md 18.18):
 * POST /api/v1/session trades a token of the --auth-file for a cookie
 * (rs_session, HttpOnly, SameSite=Strict, Secure over HTTPS) and a CSRF
 * token; the cookie then authenticates like a bearer token of that
 * identity, and every request it authenticates that is not a GET or
 * HEAD must carry X-CSRF-Token equal to the session's. At most
 * HTTPSESS_MAX live (the oldest evicted), each ending after
 * HTTPSESS_IDLE_S idle or HTTPSESS_LIFE_S in all, or as soon as a SIGHUP
 * reload removes its identity or changes its token (checked at each use:
 * the identity is kept by name and token digest). Ids and CSRF tokens are
 * 32 random bytes (OpenSSL RAND_bytes) in hex, compared in constant time
 * and never logged. Without --auth-file there are no sessions, only one
 * CSRF token per process. The state lives in the Server (its HttpApi).
 * Loop thread only. */
#ifndef ROCKSTALK_HTTPSESS_H
#define ROCKSTALK_HTTPSESS_H

#include <stdint.h>

#include "http/httpd.h"
#include "queue/state.h"
#include "server/auth.h"
#include "server/httpact.h"

#define HTTPSESS_MAX 256
#define HTTPSESS_IDLE_S 3600
#define HTTPSESS_LIFE_S (12 * 3600)

/* One session (an empty id: a free slot). */
typedef struct HttpSess {
    char id[HTTPD_SID_HEX + 1];
    char csrf[HTTPD_SID_HEX + 1];
    char name[AUTH_NAME_MAX + 1];          /* its identity */
    unsigned char digest[AUTH_DIGEST_LEN]; /* ...and its token's digest */
    int64_t made, used;                    /* monotonic ns */
} HttpSess;

typedef struct HttpSessions {
    HttpSess s[HTTPSESS_MAX];
    char open_csrf[HTTPD_SID_HEX + 1]; /* the CSRF token without auth */
} HttpSessions;

/* Sets up ss (zeroed): the open mode's CSRF token. 0, or -1 when no
 * random bytes could be had. */
int httpsess_init(HttpSessions *ss);

/* The identity of r's session cookie and its session (*out), or NULL
 * when r has none that is live (an expired or stale one is dropped).
 * Marks it used. */
const AuthUser *httpsess_user(Server *s, HttpSessions *ss, const HttpdReq *r,
                              HttpSess **out);

/* Whether r carries the X-CSRF-Token csrf (constant time). */
int httpsess_csrf_ok(const HttpdReq *r, const char *csrf);

/* Whether r, not a GET, may go on in open mode: an Origin header, if
 * any, must be the scheme and Host of this server; an X-CSRF-Token, if
 * any, the process's. Answers 403 if not. */
int httpsess_open_check(HttpSessions *ss, const HttpdReq *r, HttpAns *a);

/* GET, POST and DELETE /api/v1/session: answers a (and sets r's
 * Set-Cookie). */
void httpsess_route(Server *s, HttpSessions *ss, HttpdReq *r, HttpAns *a);

#endif
