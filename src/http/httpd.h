/* httpd.h - the daemon's HTTP server (--http HOST:PORT, or its alias
 * --metrics), GNU libmicrohttpd on its own thread. It serves
 *
 *   GET /healthz         200 while the process runs
 *   GET /readyz          200 while the server serves clients, else 503
 *                        (httpd_set_ready)
 *   GET /metrics         the Prometheus text
 *   GET /api/v1/stats, /api/v1/tubes, /api/v1/tubes/NAME, /api/v1/cluster
 *                        JSON documents
 *   /api/v1/tubes/NAME/{jobs,kick,pause,clear}, /api/v1/jobs/...,
 *   /api/v1/connections, /api/v1/history, /api/v1/session,
 *   /api/v1/cluster/transfer
 *                        (GET, HEAD, POST, DELETE) a request for the
 *                        loop (HttpdReq)
 *
 * and nothing else (404; another method: 405). The loop thread renders
 * every document (server/httpdocs.h) and publishes them together
 * (httpd_publish) once a second; the HTTP thread serves the latest set and
 * never touches queue state. What the documents cannot answer (a tube's
 * jobs, a job, the actions; with an auth file, every /api/v1/ path) the
 * HTTP thread hands to the loop as an HttpdReq: it suspends the
 * connection, queues the request (at most HTTPD_QUEUE_MAX in flight, the
 * rest 503 at once) and calls the config's notify; the loop takes them
 * (httpd_take) and answers each (httpd_answer), which resumes the
 * connection. The loop never waits for the HTTP thread. protocol/PROTOCOL.md
 * section 18 describes the endpoints. Every answer carries the security
 * headers (httpd_security_headers); errors are JSON objects
 * {"error": TEXT}. With a certificate and key (HttpdConfig) it speaks
 * HTTPS only. */
#ifndef ROCKSTALK_HTTPD_H
#define ROCKSTALK_HTTPD_H

#include <stddef.h>
#include <stdint.h>

typedef struct Httpd Httpd;

/* The documents of a set, by what serves them. */
typedef enum HttpdDocKind {
    HTTPD_DOC_METRICS, /* /metrics: Prometheus text, format 0.0.4 */
    HTTPD_DOC_STATS,   /* /api/v1/stats */
    HTTPD_DOC_TUBES,   /* /api/v1/tubes */
    HTTPD_DOC_CLUSTER, /* /api/v1/cluster */
    HTTPD_DOC_COUNT
} HttpdDocKind;

/* A set of documents being built by the loop, then published. */
typedef struct HttpdDocs HttpdDocs;

/* Requests handed to the loop and not answered yet, at most; beyond it a
 * request is answered 503 at once. */
#define HTTPD_QUEUE_MAX 64
/* Bytes of a request's path (after /api/v1/), of a query argument's value
 * and of a bearer token, at most (longer: 400, or 401 for a token). */
#define HTTPD_PATH_MAX 256
#define HTTPD_ARG_MAX 200
#define HTTPD_TOKEN_MAX 256
/* Hex digits of a console session id and of a CSRF token (32 random
 * bytes each); bytes of an Origin or Host header kept, at most (longer:
 * kept empty, which fails the Origin check); bytes of a POST body read
 * (POST /api/v1/session only; longer: 400). */
#define HTTPD_SID_HEX 64
#define HTTPD_HOST_MAX 255
#define HTTPD_FORM_MAX 1024
/* Bytes of a Set-Cookie value the loop may give an answer. */
#define HTTPD_COOKIE_MAX 160

/* Request methods the loop sees. */
typedef enum HttpdMethod { HTTPD_GET, HTTPD_POST, HTTPD_DELETE } HttpdMethod;

/* The query arguments a request may carry (others are ignored). */
typedef enum HttpdArg {
    HTTPD_ARG_STATE,
    HTTPD_ARG_AFTER,
    HTTPD_ARG_LIMIT,
    HTTPD_ARG_N,
    HTTPD_ARG_SECONDS,
    HTTPD_ARG_PRI,
    HTTPD_ARG_TUBE,
    HTTPD_ARG_TO,
    HTTPD_ARG_COUNT
} HttpdArg;

/* A request handed to the loop. The HTTP thread owns it; the loop reads
 * these fields between httpd_take and httpd_answer, and must answer every
 * request it took. */
typedef struct HttpdReq {
    HttpdMethod method; /* HEAD is given as GET */
    int doc;            /* 1: a published document's path (stats, tubes,
                           tubes/NAME, cluster) sent only for its auth
                           check: answer status 0 to have it served */
    char path[HTTPD_PATH_MAX + 1]; /* after "/api/v1/", decoded */
    char arg[HTTPD_ARG_COUNT][HTTPD_ARG_MAX + 1];
    uint8_t has_arg[HTTPD_ARG_COUNT];
    int auth;                        /* 1: an Authorization header came */
    char token[HTTPD_TOKEN_MAX + 1]; /* its bearer token ("" if none or
                                        malformed); never log it */
    int has_login;                   /* a POST session body gave a token */
    char login[HTTPD_TOKEN_MAX + 1]; /* ...that token (form token=... or
                                        JSON {"token":...}); never log */
    char sid[HTTPD_SID_HEX + 1];     /* the rs_session cookie ("" if none or
                                        not 64 hex digits); never log it */
    int has_csrf;                    /* an X-CSRF-Token header came */
    char csrf[HTTPD_SID_HEX + 1];    /* ...its value ("" if malformed) */
    char origin[HTTPD_HOST_MAX + 1]; /* the Origin header ("" if none) */
    int has_origin;
    char host[HTTPD_HOST_MAX + 1]; /* the Host header ("" if none) */
    int tls;                       /* the request came over HTTPS */
    /* the loop's side, set before httpd_answer: a Set-Cookie header for
     * the answer ("" for none) */
    char set_cookie[HTTPD_COOKIE_MAX + 1];
    /* ...and a nonzero tag that httpd_take_sent gives back once the answer
     * has been sent (or its connection ended first): an action that must
     * wait for its answer to leave (a leadership transfer, whose leader
     * then restarts). 0: none. */
    uint64_t sent_tag;
    struct HttpdReqPriv *priv; /* the HTTP thread's */
} HttpdReq;

/* How the server is started. */
typedef struct HttpdConfig {
    const char *addr;          /* "HOST:PORT", ":PORT" or "PORT"; HOST an IPv4
                                  literal, "[IPv6]" or "localhost"; no HOST:
                                  127.0.0.1 (loopback unless told otherwise) */
    const char *opt;           /* the flag that gave it, for messages */
    int api_auth;              /* 1: every /api/v1/ request goes to the loop
                                  first (an --auth-file is set) */
    void (*notify)(void *arg); /* any thread: requests wait (wake the
                                  loop: ev_async_send) */
    void *notify_arg;
    const char *tls_cert; /* PEM files: serve HTTPS (both set), or NULL */
    const char *tls_key;
} HttpdConfig;

struct MHD_Response;

/* The security headers every answer carries, added to r (any thread;
 * api: an /api/v1/ answer, which also gets Cache-Control: no-store):
 * Content-Security-Policy (same-origin scripts, styles, fetches and
 * images, data: images, no framing, no base, forms to self),
 * X-Content-Type-Options: nosniff, Referrer-Policy: no-referrer and
 * X-Frame-Options: DENY. For every module that makes MHD responses (the
 * console's assets too). */
void httpd_security_headers(struct MHD_Response *r, int api);

/* Whether this libmicrohttpd was built with TLS (GnuTLS). */
int httpd_tls_supported(void);

/* Starts the HTTP thread. Until the first httpd_set_ready it reports
 * "recovering" (503), and until the first publish the documents answer
 * 503. Returns 0 and *out, or -1 with a message in err. */
int httpd_start(const HttpdConfig *cfg, Httpd **out, char *err, size_t errcap);

/* Any thread: what /readyz answers from now on. ready: 1 serving (200),
 * 0 not (503); status: a static string naming why ("serving",
 * "stopping", ...), shown in the body. */
void httpd_set_ready(Httpd *h, int ready, const char *status);

/* A new empty set, or NULL when memory ran out. */
HttpdDocs *httpd_docs_new(void);

/* Gives the set the document of kind k: buf (malloc'd, len bytes; the set
 * frees it). A kind never set answers 503. */
void httpd_docs_set(HttpdDocs *d, HttpdDocKind k, char *buf, size_t len);

/* Adds a tube to the set: its name (copied) and its object, the len bytes
 * at off in the HTTPD_DOC_TUBES document (set before or after: offsets are
 * checked at publish). Tubes must come in strictly ascending strcmp order
 * of name (/api/v1/tubes/NAME finds them by binary search). Returns 0, or
 * -1 when memory ran out (the set is then unusable: publish drops it). */
int httpd_docs_add_tube(HttpdDocs *d, const char *name, size_t off, size_t len);

/* Loop thread: replaces the published set with d (taking it; NULL does
 * nothing). A set that failed or whose tube offsets lie outside its tubes
 * document is freed and the previous set stays. Requests being answered
 * keep the set they started with. */
void httpd_publish(Httpd *h, HttpdDocs *d);

/* Frees a set not published. */
void httpd_docs_free(HttpdDocs *d);

/* Loop thread: takes up to max queued requests into out, oldest first;
 * returns how many. */
size_t httpd_take(Httpd *h, HttpdReq **out, size_t max);

/* Loop thread: answers r (taken) with HTTP status and body (malloc'd JSON,
 * len bytes; taken, NULL for none) and resumes its connection; r must not
 * be touched afterwards. status 0 (r->doc only): serve the document. */
void httpd_answer(Httpd *h, HttpdReq *r, unsigned status, char *body,
                  size_t len);

/* Loop thread: queues nothing more for the loop from now on (a request
 * that would be is answered 503 by the HTTP thread), and no notify call
 * is running or will run once this returns: the notify's target may then
 * be freed. httpd_stop does this first too. */
void httpd_close_queue(Httpd *h);

/* Loop thread: the sent_tag of the latest answer sent since the last
 * call (only the latest is kept), or 0. The HTTP thread calls the
 * config's notify once such an answer has left. */
uint64_t httpd_take_sent(Httpd *h);

/* Stops the HTTP thread and frees h; requests still queued are answered
 * 503 first (the loop must have answered those it took). */
void httpd_stop(Httpd *h);

#endif
