/* httpdpub.c - the document sets the loop publishes (httpd.h:
 * httpd_docs_*, httpd_publish) and serving them on the HTTP thread
 * (hd_serve_doc); see httpd_impl.h. */
#include "http/httpd_impl.h"

#include <stdlib.h>
#include <string.h>

/* ---- document sets ---- */

HttpdDocs *
httpd_docs_new(void)
{
    HttpdDocs *d = calloc(1, sizeof *d);
    if (d) atomic_init(&d->refs, 1);
    return d;
}

void
httpd_docs_free(HttpdDocs *d)
{
    if (!d) return;
    for (int k = 0; k < HTTPD_DOC_COUNT; k++)
        free(d->doc[k]);
    free(d->tubes);
    free(d->names);
    free(d);
}

void
hd_docs_unref(void *arg)
{
    HttpdDocs *d = arg;
    if (atomic_fetch_sub(&d->refs, 1) == 1) httpd_docs_free(d);
}

void
httpd_docs_set(HttpdDocs *d, HttpdDocKind k, char *buf, size_t len)
{
    free(d->doc[k]);
    d->doc[k] = buf;
    d->len[k] = len;
}

int
httpd_docs_add_tube(HttpdDocs *d, const char *name, size_t off, size_t len)
{
    size_t n = strlen(name) + 1;
    if (d->ntubes == d->tcap) {
        size_t cap = d->tcap ? d->tcap * 2 : 64;
        struct TubeEnt *t = realloc(d->tubes, cap * sizeof *t);
        if (!t) return d->failed = 1, -1;
        d->tubes = t, d->tcap = cap;
    }
    if (d->nlen + n > d->ncap) {
        size_t cap = d->ncap ? d->ncap : 1024;
        while (cap < d->nlen + n)
            cap *= 2;
        char *b = realloc(d->names, cap);
        if (!b) return d->failed = 1, -1;
        d->names = b, d->ncap = cap;
    }
    if (d->ntubes && strcmp(d->names + d->tubes[d->ntubes - 1].name, name) >= 0)
        return d->failed = 1, -1; /* not ascending */
    memcpy(d->names + d->nlen, name, n);
    d->tubes[d->ntubes++] = (struct TubeEnt){d->nlen, off, len};
    d->nlen += n;
    return 0;
}

static int
docs_valid(const HttpdDocs *d)
{
    if (d->failed) return 0;
    for (size_t i = 0; i < d->ntubes; i++)
        if (d->tubes[i].off > d->len[HTTPD_DOC_TUBES] ||
            d->tubes[i].len > d->len[HTTPD_DOC_TUBES] - d->tubes[i].off)
            return 0;
    return 1;
}

void
httpd_publish(Httpd *h, HttpdDocs *d)
{
    if (!d) return;
    if (!docs_valid(d)) {
        httpd_docs_free(d);
        return;
    }
    pthread_mutex_lock(&h->mu);
    HttpdDocs *old = h->cur;
    h->cur = d;
    pthread_mutex_unlock(&h->mu);
    if (old) hd_docs_unref(old);
}

/* The published set with a reference taken, or NULL. */
static HttpdDocs *
docs_get(Httpd *h)
{
    pthread_mutex_lock(&h->mu);
    HttpdDocs *d = h->cur;
    if (d) atomic_fetch_add(&d->refs, 1);
    pthread_mutex_unlock(&h->mu);
    return d;
}

/* ---- serving a set ---- */

/* len bytes at p of set d (its reference passes to the response). */
static enum MHD_Result
send_doc(struct MHD_Connection *conn, HttpdDocs *d, const char *p, size_t len,
         const char *type)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer_with_free_callback_cls(
            len, (void *)p, hd_docs_unref, d);
    if (!r) hd_docs_unref(d);
    return hd_send_response(conn, MHD_HTTP_OK, r, type);
}

/* /api/v1/tubes/NAME: the tube's object, found by binary search. */
static enum MHD_Result
send_tube(struct MHD_Connection *conn, HttpdDocs *d, const char *name)
{
    size_t lo = 0, hi = d->ntubes;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(d->names + d->tubes[mid].name, name);
        if (c == 0)
            return send_doc(conn, d,
                            d->doc[HTTPD_DOC_TUBES] + d->tubes[mid].off,
                            d->tubes[mid].len, JSON_TYPE);
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    hd_docs_unref(d);
    return hd_send_json(conn, MHD_HTTP_NOT_FOUND,
                        "{\"error\":\"no such tube\"}");
}

/* The published document r names (R_DOC: kind; R_TUBE: name). */
enum MHD_Result
hd_serve_doc(Httpd *h, struct MHD_Connection *conn, Route r, HttpdDocKind kind,
             const char *name)
{
    HttpdDocs *d = docs_get(h);
    if (!d || (r == R_DOC && !d->doc[kind])) {
        if (d) hd_docs_unref(d);
        return hd_send_json(conn, MHD_HTTP_SERVICE_UNAVAILABLE,
                            "{\"error\":\"not available yet\"}");
    }
    if (r == R_TUBE) return send_tube(conn, d, name);
    return send_doc(conn, d, d->doc[kind], d->len[kind],
                    kind == HTTPD_DOC_METRICS
                        ? "text/plain; version=0.0.4; charset=utf-8"
                        : JSON_TYPE);
}
