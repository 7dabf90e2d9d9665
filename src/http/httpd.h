/* httpd.h - the daemon's HTTP server (--http HOST:PORT, or its alias
 * --metrics), GNU libmicrohttpd on its own thread. It serves
 *
 *   GET /healthz         200 while the process runs
 *   GET /readyz          200 while the server serves clients, else 503
 *                        (httpd_set_ready)
 *   GET /metrics         the Prometheus text
 *   GET /api/v1/stats, /api/v1/tubes, /api/v1/tubes/NAME, /api/v1/cluster
 *                        JSON documents
 *
 * and nothing else (404; a method other than GET or HEAD: 405). The loop
 * thread renders every document (server/httpdocs.h) and publishes them
 * together (httpd_publish) once a second; the HTTP thread serves the
 * latest set and never touches queue state. protocol/PROTOCOL.md section
 * 18 describes the endpoints. Every answer carries Cache-Control: no-store
 * and X-Content-Type-Options: nosniff; errors are JSON objects
 * {"error": TEXT}. */
#ifndef ROCKSTALK_HTTPD_H
#define ROCKSTALK_HTTPD_H

#include <stddef.h>

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

/* How the server is started. */
typedef struct HttpdConfig {
    const char *addr; /* "HOST:PORT", ":PORT" or "PORT"; HOST an IPv4
                         literal, "[IPv6]" or "localhost"; no HOST:
                         127.0.0.1 (loopback unless told otherwise) */
    const char *opt;  /* the flag that gave it, for messages */
    int api_closed;   /* 1: /api/v1/ answers 401 to every request (an
                         --auth-file is set and the API has no
                         authentication yet: it fails closed) */
} HttpdConfig;

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

/* Stops the HTTP thread and frees h. */
void httpd_stop(Httpd *h);

#endif
