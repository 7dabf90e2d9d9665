/* httpd.c - see httpd.h: start and stop, TLS, routing a request, the
 * responses; the document sets are httpdpub.c, the requests for the
 * loop httpdreq.c (httpd_impl.h). */
#include "http/httpd.h"
#include "http/assets.h"
#include "http/httpd_impl.h"

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
