/* httpdreq.c - the requests the HTTP thread hands to the loop: copied
 * into a Box, queued (at most HTTPD_QUEUE_MAX), taken and answered by
 * the loop (httpd.h: httpd_take, httpd_answer, httpd_take_sent), the
 * answer sent once the connection resumes; see httpd_impl.h. */
#include "http/httpd_impl.h"
#include "http/httpparse.h"

#include <stdlib.h>
#include <string.h>

/* ---- requests for the loop ---- */

/* MHD is done with a request: its answer was sent, or the connection
 * ended. An answer with a sent_tag hands it to the loop (not once
 * httpd_stop began). */
void
hd_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
             enum MHD_RequestTerminationCode toe)
{
    Httpd *h = cls;
    Box *b = *req_cls;
    (void)conn, (void)toe;
    if (!b) return;
    if (b->priv.answered && b->pub.sent_tag) {
        pthread_mutex_lock(&h->mu); /* as enqueue: notify under mu */
        if (!h->closed) {           /* stopping: the loop is gone */
            h->sent_tag = b->pub.sent_tag;
            h->notify(h->notify_arg);
        }
        pthread_mutex_unlock(&h->mu);
    }
    free(b->priv.body);
    free(b->priv.form);
    free(b);
    *req_cls = NULL;
}

/* Copies the query argument key into b (0), or -1 when it is too long. */
static int
copy_arg(struct MHD_Connection *conn, Box *b, HttpdArg a, const char *key)
{
    const char *v =
        MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, key);
    if (!v) return 0;
    if (strlen(v) > HTTPD_ARG_MAX) return -1;
    strcpy(b->pub.arg[a], v);
    b->pub.has_arg[a] = 1;
    return 0;
}

/* The bearer token of the Authorization header into b. */
static void
copy_token(struct MHD_Connection *conn, Box *b)
{
    const char *v =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    if (!v) return;
    b->pub.auth = 1;
    httpparse_bearer(v, b->pub.token, sizeof b->pub.token);
}

/* Copies header key into out (cap bytes) when it fits: 1 if it came. */
static int
copy_header(struct MHD_Connection *conn, const char *key, char *out, size_t cap)
{
    const char *v = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, key);
    if (!v) return 0;
    if (strlen(v) < cap) strcpy(out, v);
    return 1;
}

_Static_assert(HTTPD_SID_HEX == HTTPPARSE_SID_HEX, "session id length");

/* What a browser sends: the session cookie, X-CSRF-Token, Origin, Host;
 * and whether the connection is TLS. */
static void
copy_browser(struct MHD_Connection *conn, Box *b)
{
    HttpdReq *q = &b->pub;
    const char *v =
        MHD_lookup_connection_value(conn, MHD_COOKIE_KIND, "rs_session");
    if (v && httpparse_is_sid(v)) strcpy(q->sid, v);
    q->has_csrf = copy_header(conn, "X-CSRF-Token", q->csrf, sizeof q->csrf);
    if (q->has_csrf && !httpparse_is_sid(q->csrf)) q->csrf[0] = '\0';
    q->has_origin = copy_header(conn, "Origin", q->origin, sizeof q->origin);
    copy_header(conn, "Host", q->host, sizeof q->host);
}

/* A new request for the loop, or NULL with *status and *msg saying why. */
static Box *
box_new(struct MHD_Connection *conn, const char *url, const char *method,
        Route r, HttpdDocKind kind, const char **msg)
{
    static const char *const keys[HTTPD_ARG_COUNT] = {
        "state", "after", "limit", "n", "seconds", "pri", "tube", "to"};
    const char *rest = url + strlen(API);
    if (strlen(rest) > HTTPD_PATH_MAX) {
        *msg = "{\"error\":\"path too long\"}";
        return NULL;
    }
    Box *b = calloc(1, sizeof *b);
    if (!b) {
        *msg = "{\"error\":\"out of memory\"}";
        return NULL;
    }
    strcpy(b->pub.path, rest);
    b->pub.method = strcmp(method, "POST") == 0     ? HTTPD_POST
                    : strcmp(method, "DELETE") == 0 ? HTTPD_DELETE
                                                    : HTTPD_GET;
    b->pub.doc = r != R_LOOP;
    b->pub.priv = &b->priv;
    b->priv.conn = conn;
    b->priv.route = r;
    b->priv.kind = kind;
    for (int a = 0; a < HTTPD_ARG_COUNT; a++)
        if (copy_arg(conn, b, (HttpdArg)a, keys[a]) < 0) {
            free(b);
            *msg = "{\"error\":\"query argument too long\"}";
            return NULL;
        }
    copy_token(conn, b);
    copy_browser(conn, b);
    return b;
}

/* Suspends conn and queues b for the loop: 0, or -1 when the queue is
 * full or the server stops (b is not queued). */
static int
enqueue(Httpd *h, Box *b)
{
    pthread_mutex_lock(&h->mu);
    if (h->closed || h->inflight >= HTTPD_QUEUE_MAX) {
        pthread_mutex_unlock(&h->mu);
        return -1;
    }
    MHD_suspend_connection(b->priv.conn); /* before the loop can answer */
    h->inflight++;
    if (h->qtail)
        h->qtail->priv.next = b;
    else
        h->qhead = b;
    h->qtail = b;
    /* under mu: once httpd_close_queue set closed, no notify runs (its
     * target may be gone); ev_async_send is cheap and never blocks */
    h->notify(h->notify_arg);
    pthread_mutex_unlock(&h->mu);
    return 0;
}

size_t
httpd_take(Httpd *h, HttpdReq **out, size_t max)
{
    size_t n = 0;
    pthread_mutex_lock(&h->mu);
    while (n < max && h->qhead) {
        Box *b = h->qhead;
        h->qhead = b->priv.next;
        if (!h->qhead) h->qtail = NULL;
        b->priv.next = NULL;
        out[n++] = &b->pub;
    }
    pthread_mutex_unlock(&h->mu);
    return n;
}

uint64_t
httpd_take_sent(Httpd *h)
{
    pthread_mutex_lock(&h->mu);
    uint64_t tag = h->sent_tag;
    h->sent_tag = 0;
    pthread_mutex_unlock(&h->mu);
    return tag;
}

void
httpd_answer(Httpd *h, HttpdReq *r, unsigned status, char *body, size_t len)
{
    struct HttpdReqPriv *p = r->priv;
    pthread_mutex_lock(&h->mu);
    p->status = status;
    p->body = body;
    p->len = len;
    p->answered = 1;
    h->inflight--;
    MHD_resume_connection(p->conn); /* r may be freed from here on */
    pthread_mutex_unlock(&h->mu);
}

/* The loop's answer to b. */
enum MHD_Result
hd_send_answer(Httpd *h, struct MHD_Connection *conn, Box *b)
{
    struct HttpdReqPriv *p = &b->priv;
    if (p->status == 0 && p->route == R_TUBE)
        return hd_serve_doc(h, conn, R_TUBE, p->kind,
                            b->pub.path + strlen("tubes/"));
    if (p->status == 0) return hd_serve_doc(h, conn, p->route, p->kind, NULL);
    if (!p->body)
        return hd_send_json(conn, p->status,
                            p->status == MHD_HTTP_SERVICE_UNAVAILABLE
                                ? "{\"error\":\"stopping\"}"
                                : "{\"error\":\"internal error\"}");
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(p->len, p->body, MHD_RESPMEM_MUST_FREE);
    if (resp) p->body = NULL; /* the response frees it */
    if (resp && b->pub.set_cookie[0])
        MHD_add_response_header(resp, "Set-Cookie", b->pub.set_cookie);
    return hd_send_response_allow(conn, p->status, resp, JSON_TYPE,
                                  p->status == MHD_HTTP_METHOD_NOT_ALLOWED
                                      ? "GET, HEAD, POST, DELETE"
                                      : NULL);
}

/* Hands the request to the loop (the connection waits, suspended); a
 * POST to session first reads its body (hd_read_form). */
enum MHD_Result
hd_to_loop(Httpd *h, struct MHD_Connection *conn, const char *url,
           const char *method, Route r, HttpdDocKind kind, void **req_cls)
{
    const char *msg = NULL;
    Box *b = box_new(conn, url, method, r, kind, &msg);
    if (!b) return hd_send_json(conn, MHD_HTTP_BAD_REQUEST, msg);
    b->pub.tls = h->tls;
    if (b->pub.method == HTTPD_POST && strcmp(b->pub.path, "session") == 0) {
        *req_cls = b; /* hd_completed frees it */
        return MHD_YES;
    }
    if (enqueue(h, b) < 0) {
        free(b);
        return hd_send_busy(conn);
    }
    b->priv.queued = 1;
    *req_cls = b;
    return MHD_YES;
}

/* POST session: gathers the body (at most HTTPD_FORM_MAX bytes), then
 * takes its token and hands the request to the loop. */
enum MHD_Result
hd_read_form(Httpd *h, struct MHD_Connection *conn, Box *b, const char *data,
             size_t *size)
{
    struct HttpdReqPriv *p = &b->priv;
    if (*size) {
        if (p->flen + *size > HTTPD_FORM_MAX) p->fover = 1;
        if (!p->fover && !p->form) p->form = malloc(HTTPD_FORM_MAX + 1);
        if (!p->fover && p->form) memcpy(p->form + p->flen, data, *size);
        if (!p->fover) p->flen += *size;
        *size = 0;
        return MHD_YES;
    }
    if (p->fover)
        return hd_send_json(conn, 413, "{\"error\":\"body too large\"}");
    if (p->form) {
        b->pub.has_login = httpparse_login(p->form, p->flen, b->pub.login,
                                           sizeof b->pub.login) == 0;
    }
    if (enqueue(h, b) < 0) return hd_send_busy(conn);
    p->queued = 1;
    return MHD_YES;
}
