/* httpd_impl.h - the HTTP server's insides, shared by httpd.c (start and
 * stop, TLS, routing a request, the responses every part sends),
 * httpdpub.c (the document sets the loop publishes, and serving them) and
 * httpdreq.c (the requests handed to the loop: copying them, the queue,
 * the loop's answers). Private to those files; the rest of the process
 * sees httpd.h.
 *
 * Threads: everything here runs on libmicrohttpd's thread except what
 * httpd.h says the loop calls (httpd_publish, httpd_take, httpd_answer,
 * httpd_take_sent, httpd_close_queue); Httpd.mu guards what both touch.
 * Memory: a published set is shared by reference count (HttpdDocs.refs:
 * the published slot's and each answer's); a request (Box) is the HTTP
 * thread's, freed by hd_completed once MHD is done with it. */
#ifndef ROCKSTALK_HTTPD_IMPL_H
#define ROCKSTALK_HTTPD_IMPL_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "http/httpd.h"

/* Where the JSON API lives, and the type of what it answers. */
#define API "/api/v1/"
#define JSON_TYPE "application/json"

/* A set of documents (httpd.h); immutable once published, shared by
 * reference count. */
struct HttpdDocs {
    atomic_int refs; /* the published slot's and each answer's */
    int failed;
    char *doc[HTTPD_DOC_COUNT];
    size_t len[HTTPD_DOC_COUNT];
    struct TubeEnt {
        size_t name; /* offset in names */
        size_t off, len;
    } * tubes;
    size_t ntubes, tcap;
    char *names; /* NUL-terminated names, one after the other */
    size_t nlen, ncap;
};

/* What a path names. */
typedef enum Route {
    R_NONE,
    R_HEALTHZ,
    R_READYZ,
    R_DOC,  /* a whole document: kind */
    R_TUBE, /* /api/v1/tubes/NAME: name */
    R_LOOP  /* tubes/NAME/{jobs,kick,pause}, jobs/...: the loop answers */
} Route;

/* The HTTP thread's side of a request handed to the loop. */
struct HttpdReqPriv {
    struct MHD_Connection *conn;
    struct Box *next; /* in Httpd's queue */
    Route route;      /* R_DOC, R_TUBE (an auth check) or R_LOOP */
    HttpdDocKind kind;
    int queued;   /* handed to the loop (else its body is still read) */
    char *form;   /* POST session: the body read so far (malloc'd) */
    size_t flen;  /* ...its bytes */
    int fover;    /* ...it was longer than HTTPD_FORM_MAX */
    int answered; /* set by httpd_answer, under Httpd.mu */
    unsigned status;
    char *body; /* malloc'd JSON, or NULL */
    size_t len;
};

/* A request for the loop: the loop's part (pub, whose priv points at
 * priv) and the HTTP thread's. Malloc'd; hd_completed frees it. */
typedef struct Box {
    HttpdReq pub;
    struct HttpdReqPriv priv;
} Box;

/* The server (httpd.h). */
struct Httpd {
    struct MHD_Daemon *daemon;
    pthread_mutex_t mu; /* guards cur (the pointer; a set is immutable),
                           the queue and the answers */
    HttpdDocs *cur;     /* NULL until the first publish */
    atomic_int ready;
    _Atomic(const char *) status;
    int api_auth;
    int tls;          /* serves HTTPS */
    char *cert, *key; /* ...its PEM certificate chain and key (owned) */
    void (*notify)(void *);
    void *notify_arg;
    Box *qhead, *qtail; /* queued for the loop, oldest first */
    uint64_t sent_tag;  /* the latest answer's tag sent (httpd_take_sent) */
    size_t inflight;    /* queued or taken, not answered */
    int closed;         /* stopping: no more requests queue */
};

/* ---- httpd.c ---- */

/* Queues r (taken; NULL: MHD_NO) with status, Content-Type type and the
 * API's security headers; a 405 gets Allow: allow (NULL: "GET, HEAD"), a
 * 401 a Bearer challenge. */
enum MHD_Result hd_send_response_allow(struct MHD_Connection *conn,
                                       unsigned status, struct MHD_Response *r,
                                       const char *type, const char *allow);

/* hd_send_response_allow without an Allow of its own. */
enum MHD_Result hd_send_response(struct MHD_Connection *conn, unsigned status,
                                 struct MHD_Response *r, const char *type);

/* A JSON body made here (copied; NUL-terminated). */
enum MHD_Result hd_send_json(struct MHD_Connection *conn, unsigned status,
                             const char *body);

/* 503: too many requests in flight for the loop. */
enum MHD_Result hd_send_busy(struct MHD_Connection *conn);

/* ---- httpdpub.c ---- */

/* Drops a reference to set arg (HttpdDocs *); the last one frees it. Also
 * MHD's free callback of a response that serves a set's bytes. */
void hd_docs_unref(void *arg);

/* Serves the published document r names (R_DOC: kind; R_TUBE: the tube
 * name), or 503 when none is published yet (404 for an unknown tube). */
enum MHD_Result hd_serve_doc(Httpd *h, struct MHD_Connection *conn, Route r,
                             HttpdDocKind kind, const char *name);

/* ---- httpdreq.c ---- */

/* MHD's MHD_OPTION_NOTIFY_COMPLETED (cls: the Httpd): frees the request's
 * Box, and hands an answer's sent_tag to the loop once it has left. */
void hd_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                  enum MHD_RequestTerminationCode toe);

/* Sends the loop's answer to b (answered; status 0: the document it
 * asked for), once its connection resumed. */
enum MHD_Result hd_send_answer(Httpd *h, struct MHD_Connection *conn, Box *b);

/* Hands the request (route r, kind for a document) to the loop, its
 * connection suspended; *req_cls gets its Box (a POST to session first
 * has its body read: hd_read_form). 400 when it cannot be copied, 503
 * when the queue is full or closed. */
enum MHD_Result hd_to_loop(Httpd *h, struct MHD_Connection *conn,
                           const char *url, const char *method, Route r,
                           HttpdDocKind kind, void **req_cls);

/* POST session: takes the next *size bytes of its body at data (0: the
 * body is complete: its token is parsed and the request queued for the
 * loop; 413 past HTTPD_FORM_MAX bytes, 503 when the queue is full). */
enum MHD_Result hd_read_form(Httpd *h, struct MHD_Connection *conn, Box *b,
                             const char *data, size_t *size);

#endif
