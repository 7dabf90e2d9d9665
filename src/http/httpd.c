/* httpd.c - see httpd.h: start and stop, TLS, routing a request, the
 * responses, the requests for the loop; the document sets are httpdpub.c
 * (httpd_impl.h). */
#include "http/httpd.h"
#include "http/assets.h"
#include "http/httpd_impl.h"
#include "http/httpparse.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HTTPD_CSP                                                              \
    "default-src 'self'; script-src 'self'; style-src 'self'; "                \
    "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; "       \
    "base-uri 'none'; form-action 'self'"

void
httpd_set_ready(Httpd *h, int ready, const char *status)
{
    atomic_store(&h->status, status);
    atomic_store(&h->ready, ready);
}

/* ---- answers ---- */

void
httpd_security_headers(struct MHD_Response *r, int api)
{
    MHD_add_response_header(r, "Content-Security-Policy", HTTPD_CSP);
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(r, "X-Frame-Options", "DENY");
    if (api) MHD_add_response_header(r, "Cache-Control", "no-store");
}

int
httpd_tls_supported(void)
{
    return MHD_is_feature_supported(MHD_FEATURE_TLS) == MHD_YES;
}

enum MHD_Result
hd_send_response_allow(struct MHD_Connection *conn, unsigned status,
                       struct MHD_Response *r, const char *type,
                       const char *allow)
{
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    httpd_security_headers(r, 1); /* every document here is the API's kind */
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(r, "Allow", allow ? allow : "GET, HEAD");
    if (status == MHD_HTTP_UNAUTHORIZED)
        MHD_add_response_header(r, "WWW-Authenticate",
                                "Bearer realm=\"rockstalk\"");
    enum MHD_Result ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ret;
}

enum MHD_Result
hd_send_response(struct MHD_Connection *conn, unsigned status,
                 struct MHD_Response *r, const char *type)
{
    return hd_send_response_allow(conn, status, r, type, NULL);
}

/* A JSON body made here (copied). */
enum MHD_Result
hd_send_json(struct MHD_Connection *conn, unsigned status, const char *body)
{
    return hd_send_response(
        conn, status,
        MHD_create_response_from_buffer(strlen(body), (void *)body,
                                        MHD_RESPMEM_MUST_COPY),
        JSON_TYPE);
}

enum MHD_Result
hd_send_busy(struct MHD_Connection *conn)
{
    return hd_send_json(conn, MHD_HTTP_SERVICE_UNAVAILABLE,
                        "{\"error\":\"busy: too many requests in flight\"}");
}

static enum MHD_Result
send_readyz(Httpd *h, struct MHD_Connection *conn)
{
    char body[160];
    int ready = atomic_load(&h->ready);
    snprintf(body, sizeof body, "{\"ready\":%s,\"status\":\"%s\"}",
             ready ? "true" : "false", atomic_load(&h->status));
    return hd_send_json(
        conn, ready ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, body);
}

/* Nonzero when the tube path rest ("tubes/...") names a tube's sub-resource
 * (.../jobs, .../kick, .../pause, .../clear), which the loop answers. */
static int
tube_sub(const char *rest)
{
    static const char *const subs[] = {"/jobs", "/kick", "/pause", "/clear"};
    size_t n = strlen(rest);
    for (size_t i = 0; i < 4; i++) {
        size_t k = strlen(subs[i]);
        if (n > k && strcmp(rest + n - k, subs[i]) == 0) return 1;
    }
    return 0;
}

static Route
route(const char *url, HttpdDocKind *kind, const char **name)
{
    static const struct {
        const char *path;
        HttpdDocKind kind;
    } docs[] = {{"/metrics", HTTPD_DOC_METRICS},
                {API "stats", HTTPD_DOC_STATS},
                {API "tubes", HTTPD_DOC_TUBES},
                {API "cluster", HTTPD_DOC_CLUSTER}};
    if (strcmp(url, "/healthz") == 0) return R_HEALTHZ;
    if (strcmp(url, "/readyz") == 0) return R_READYZ;
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++)
        if (strcmp(url, docs[i].path) == 0) {
            *kind = docs[i].kind;
            return R_DOC;
        }
    if (strncmp(url, API "tubes/", strlen(API "tubes/")) == 0 &&
        url[strlen(API "tubes/")] && !tube_sub(url + strlen(API "tubes/"))) {
        *name = url + strlen(API "tubes/");
        return R_TUBE;
    }
    if ((strncmp(url, API "tubes/", strlen(API "tubes/")) == 0 &&
         url[strlen(API "tubes/")]) ||
        (strncmp(url, API "jobs/", strlen(API "jobs/")) == 0 &&
         url[strlen(API "jobs/")]) ||
        strcmp(url, API "connections") == 0 ||
        strcmp(url, API "history") == 0 || strcmp(url, API "session") == 0 ||
        strcmp(url, API "cluster/transfer") == 0)
        return R_LOOP;
    return R_NONE;
}

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

static int
is_get(const char *method)
{
    return strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
}

static enum MHD_Result
handle(void *cls, struct MHD_Connection *conn, const char *url,
       const char *method, const char *version, const char *upload_data,
       size_t *upload_data_size, void **req_cls)
{
    Httpd *h = cls;
    HttpdDocKind kind = HTTPD_DOC_METRICS;
    const char *name = NULL;
    (void)version;
    if (*req_cls) { /* resumed, or a body arriving: ignored */
        Box *b = *req_cls;
        if (!b->priv.queued)
            return hd_read_form(h, conn, b, upload_data, upload_data_size);
        if (*upload_data_size) {
            *upload_data_size = 0;
            return MHD_YES;
        }
        return b->priv.answered ? hd_send_answer(h, conn, b) : MHD_YES;
    }
    enum MHD_Result ret;
    if (assets_serve(conn, url, method, httpd_security_headers, &ret))
        return ret; /* the console */
    Route r = route(url, &kind, &name);
    if (r == R_NONE)
        return hd_send_json(conn, MHD_HTTP_NOT_FOUND,
                            "{\"error\":\"not found\"}");
    if (r == R_LOOP && (is_get(method) || strcmp(method, "POST") == 0 ||
                        strcmp(method, "DELETE") == 0))
        return hd_to_loop(h, conn, url, method, r, kind, req_cls);
    if (!is_get(method))
        return hd_send_response_allow(
            conn, MHD_HTTP_METHOD_NOT_ALLOWED,
            MHD_create_response_from_buffer(
                strlen("{\"error\":\"method not allowed\"}"),
                (void *)"{\"error\":\"method not allowed\"}",
                MHD_RESPMEM_PERSISTENT),
            JSON_TYPE, r == R_LOOP ? "GET, HEAD, POST, DELETE" : NULL);
    if (r == R_HEALTHZ)
        return hd_send_json(conn, MHD_HTTP_OK, "{\"status\":\"ok\"}");
    if (r == R_READYZ) return send_readyz(h, conn);
    if (h->api_auth && (r == R_TUBE || kind != HTTPD_DOC_METRICS))
        return hd_to_loop(h, conn, url, method, r, kind, req_cls);
    return hd_serve_doc(h, conn, r, kind, name);
}

/* ---- start and stop ---- */

/* addr: "HOST:PORT", ":PORT" or "PORT" -> ss (IPv4 or IPv6) and *portp.
 * No host: 127.0.0.1. Returns 0, or -1. */
static int
parse_addr(const char *addr, struct sockaddr_storage *ss, uint16_t *portp)
{
    const char *colon = strrchr(addr, ':');
    const char *ps = colon ? colon + 1 : addr;
    char host[64] = "";
    size_t hl = colon ? (size_t)(colon - addr) : 0;
    if (hl >= sizeof host) return -1;
    memcpy(host, addr, hl);
    host[hl] = '\0';
    char *end;
    long port = strtol(ps, &end, 10);
    if (*end || end == ps || port < 0 || port > 65535) return -1;
    memset(ss, 0, sizeof *ss);
    *portp = (uint16_t)port;
    if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
        host[hl - 1] = '\0';
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)port);
        return inet_pton(AF_INET6, host + 1, &s6->sin6_addr) == 1 ? 0 : -1;
    }
    struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
    s4->sin_family = AF_INET;
    s4->sin_port = htons((uint16_t)port);
    if (!host[0] || strcmp(host, "localhost") == 0) {
        s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        return 0;
    }
    return inet_pton(AF_INET, host, &s4->sin_addr) == 1 ? 0 : -1;
}

/* The whole file path as a NUL-terminated string (malloc'd), or NULL. */
static char *
read_pem(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *b = NULL;
    long n;
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && n < (1L << 20) &&
        fseek(f, 0, SEEK_SET) == 0 && (b = malloc((size_t)n + 1)) != NULL) {
        if (fread(b, 1, (size_t)n, f) != (size_t)n) {
            free(b);
            b = NULL;
        } else {
            b[n] = '\0';
        }
    }
    fclose(f);
    return b;
}

/* Loads cfg's certificate and key into h (h->tls set): 0, or -1 with a
 * message in err. */
static int
load_tls(Httpd *h, const HttpdConfig *cfg, char *err, size_t errcap)
{
    if (!cfg->tls_cert || !cfg->tls_key) return 0;
    if (!httpd_tls_supported()) {
        snprintf(err, errcap,
                 "%s with --tls-cert: this libmicrohttpd has no TLS; give "
                 "--http-plain to serve plain HTTP",
                 cfg->opt);
        return -1;
    }
    h->cert = read_pem(cfg->tls_cert);
    h->key = read_pem(cfg->tls_key);
    if (!h->cert || !h->key) {
        snprintf(err, errcap, "%s: cannot read %s", cfg->opt,
                 h->cert ? cfg->tls_key : cfg->tls_cert);
        return -1;
    }
    h->tls = 1;
    return 0;
}

static void
httpd_free(Httpd *h)
{
    pthread_mutex_destroy(&h->mu);
    free(h->cert);
    if (h->key) memset(h->key, 0, strlen(h->key));
    free(h->key);
    free(h);
}

/* Starts h's daemon on ss (HTTPS when h->tls): 0, or -1. */
static int
start_daemon(Httpd *h, const struct sockaddr_storage *ss, uint16_t port)
{
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
                     MHD_ALLOW_SUSPEND_RESUME;
    if (ss->ss_family == AF_INET6) flags |= MHD_USE_IPv6;
    if (h->tls) flags |= MHD_USE_TLS;
    struct MHD_OptionItem tls[] = {{MHD_OPTION_HTTPS_MEM_CERT, 0, h->cert},
                                   {MHD_OPTION_HTTPS_MEM_KEY, 0, h->key},
                                   {MHD_OPTION_END, 0, NULL}};
    if (!h->tls) tls[0].option = MHD_OPTION_END;
    h->daemon = MHD_start_daemon(
        flags, port, NULL, NULL, handle, h, MHD_OPTION_SOCK_ADDR,
        (const struct sockaddr *)ss, MHD_OPTION_CONNECTION_LIMIT, 128U,
        MHD_OPTION_NOTIFY_COMPLETED, hd_completed, h,
        MHD_OPTION_CONNECTION_TIMEOUT, 10U, MHD_OPTION_ARRAY, tls,
        MHD_OPTION_END);
    return h->daemon ? 0 : -1;
}

int
httpd_start(const HttpdConfig *cfg, Httpd **out, char *err, size_t errcap)
{
    struct sockaddr_storage ss;
    uint16_t port;
    if (parse_addr(cfg->addr, &ss, &port) < 0) {
        snprintf(err, errcap, "bad %s address %s (want HOST:PORT)", cfg->opt,
                 cfg->addr);
        return -1;
    }
    Httpd *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(err, errcap, "out of memory");
        return -1;
    }
    pthread_mutex_init(&h->mu, NULL);
    atomic_init(&h->ready, 0);
    atomic_init(&h->status, "recovering");
    h->api_auth = cfg->api_auth;
    h->notify = cfg->notify;
    h->notify_arg = cfg->notify_arg;
    if (load_tls(h, cfg, err, errcap) < 0) {
        httpd_free(h);
        return -1;
    }
    if (start_daemon(h, &ss, port) < 0) {
        snprintf(err, errcap, "cannot serve %s on %s (%s)",
                 h->tls ? "HTTPS (check the certificate and key)" : "HTTP",
                 cfg->addr, cfg->opt);
        httpd_free(h);
        return -1;
    }
    *out = h;
    return 0;
}

void
httpd_close_queue(Httpd *h)
{
    pthread_mutex_lock(&h->mu);
    h->closed = 1;
    pthread_mutex_unlock(&h->mu);
}

void
httpd_stop(Httpd *h)
{
    HttpdReq *r;
    httpd_close_queue(h);
    while (httpd_take(h, &r, 1))
        httpd_answer(h, r, MHD_HTTP_SERVICE_UNAVAILABLE, NULL, 0);
    MHD_stop_daemon(h->daemon); /* answers in flight hold their sets */
    if (h->cur) hd_docs_unref(h->cur);
    httpd_free(h);
}
