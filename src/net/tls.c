/* tls.c - see tls.h. */
#include "net/tls.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

/* Plaintext per record written (the TLS maximum, RFC 8446 5.1). */
#define TLS_RECORD 16384

struct TlsConn {
    TlsCreds *creds;
    SSL *ssl;
    BIO *rbio, *wbio; /* owned by ssl */
    int done;         /* handshake completed */
    int failed;       /* a fatal error: every call fails from now on */
    int closed;       /* the peer's close_notify was read */
    int sent_close;   /* ours was queued */
    int direct;       /* reads and writes its socket itself (tls_conn_direct) */
    char err[160];
};

/* ---- a session over memory BIOs ---- */

TlsConn *
tls_conn_new(TlsCreds *c, int is_server)
{
    TlsConn *t = calloc(1, sizeof *t);
    BIO *r = NULL, *w = NULL;
    ERR_clear_error();
    if (!t || !(t->ssl = SSL_new(tls_creds_ctx(c))) ||
        !(r = BIO_new(BIO_s_mem())) || !(w = BIO_new(BIO_s_mem()))) {
        BIO_free(r);
        if (t) SSL_free(t->ssl);
        free(t);
        ERR_clear_error();
        return NULL;
    }
    /* empty: "retry later", not end of stream (BIO_s_mem(3)) */
    BIO_set_mem_eof_return(r, -1);
    BIO_set_mem_eof_return(w, -1);
    SSL_set_bio(t->ssl, r, w);
    t->rbio = r;
    t->wbio = w;
    if (is_server)
        SSL_set_accept_state(t->ssl);
    else
        SSL_set_connect_state(t->ssl);
    tls_creds_ref(c);
    t->creds = c;
    return t;
}

void
tls_conn_free(TlsConn *t)
{
    if (!t) return;
    SSL_free(t->ssl); /* frees both BIOs */
    tls_creds_unref(t->creds);
    free(t);
}

/* Marks t failed with what failed, OpenSSL's reason and the verification
 * result, and empties this thread's error queue. */
static void
conn_fail(TlsConn *t, const char *what)
{
    char why[96];
    long v = SSL_get_verify_result(t->ssl);
    t->failed = 1;
    tls_ossl_reason(why, sizeof why);
    if (v != X509_V_OK)
        snprintf(t->err, sizeof t->err, "%s: %s (%s)", what, why,
                 X509_verify_cert_error_string(v));
    else
        snprintf(t->err, sizeof t->err, "%s: %s", what, why);
    ERR_clear_error();
}

size_t
tls_conn_feed_room(TlsConn *t)
{
    size_t held = BIO_ctrl_pending(t->rbio);
    return held < TLS_BUF_MAX ? TLS_BUF_MAX - held : 0;
}

int
tls_conn_feed(TlsConn *t, const void *cipher, size_t n)
{
    if (t->failed || t->direct) return -1;
    if (n > tls_conn_feed_room(t)) {
        snprintf(t->err, sizeof t->err,
                 "feed: more than %d bytes of ciphertext unread", TLS_BUF_MAX);
        return -1;
    }
    if (n == 0) return 0;
    tls_err_reset();
    if (BIO_write(t->rbio, cipher, (int)n) != (int)n) {
        conn_fail(t, "feed");
        return -1;
    }
    return 0;
}

int
tls_conn_handshake(TlsConn *t)
{
    if (t->failed) return -1;
    if (t->done) return 1;
    ERR_clear_error();
    int r = SSL_do_handshake(t->ssl);
    if (r == 1) {
        t->done = 1;
        return 1;
    }
    int e = SSL_get_error(t->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        ERR_clear_error();
        return 0;
    }
    conn_fail(t, "handshake");
    return -1;
}

SSL *
tls_conn_ssl(TlsConn *t)
{
    return t->ssl;
}

/* -1 (and t failed) unless the handshake completed and t has not failed. */
static int
conn_ready(TlsConn *t, const char *what)
{
    if (t->failed) return -1;
    if (t->done) return 0;
    t->failed = 1;
    snprintf(t->err, sizeof t->err, "%s: handshake not completed", what);
    return -1;
}

ssize_t
tls_conn_read(TlsConn *t, void *buf, size_t cap)
{
    size_t n = 0;
    if (t->closed) return TLS_CLOSED;
    if (conn_ready(t, "read") < 0) return -1;
    if (cap == 0) return 0;
    tls_err_reset();
    if (SSL_read_ex(t->ssl, buf, cap, &n) == 1) return (ssize_t)n;
    switch (SSL_get_error(t->ssl, 0)) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
        ERR_clear_error();
        return 0;
    case SSL_ERROR_ZERO_RETURN:
        t->closed = 1;
        ERR_clear_error();
        return TLS_CLOSED;
    default:
        conn_fail(t, "read");
        return -1;
    }
}

ssize_t
tls_conn_write(TlsConn *t, const void *buf, size_t n)
{
    size_t taken = 0;
    if (conn_ready(t, "write") < 0) return -1;
    if (t->sent_close) {
        snprintf(t->err, sizeof t->err, "write: after close_notify");
        return -1;
    }
    tls_err_reset();
    while (taken < n &&
           (t->direct || BIO_ctrl_pending(t->wbio) < TLS_BUF_MAX)) {
        size_t chunk = n - taken < TLS_RECORD ? n - taken : TLS_RECORD;
        size_t w = 0;
        if (SSL_write_ex(t->ssl, (const char *)buf + taken, chunk, &w) != 1) {
            int e = SSL_get_error(t->ssl, 0);
            if (t->direct &&
                (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ)) {
                ERR_clear_error(); /* the socket is full: retry the rest */
                break;
            }
            conn_fail(t, "write");
            return -1;
        }
        taken += w;
    }
    return (ssize_t)taken;
}

size_t
tls_conn_pending_out(TlsConn *t)
{
    return t->direct ? 0 : BIO_ctrl_pending(t->wbio);
}

size_t
tls_conn_take_out(TlsConn *t, void *buf, size_t cap)
{
    if (t->direct) return 0; /* BIO_read would read the socket */
    int n = BIO_read(t->wbio, buf, cap > INT_MAX ? INT_MAX : (int)cap);
    return n > 0 ? (size_t)n : 0;
}

void
tls_conn_close_notify(TlsConn *t)
{
    if (!t->done || t->failed || t->sent_close) return;
    ERR_clear_error();
    SSL_shutdown(t->ssl);
    t->sent_close = 1;
    ERR_clear_error();
}

/* A fresh memory BIO that reads "retry later" when empty. */
static BIO *
mem_bio(void)
{
    BIO *b = BIO_new(BIO_s_mem());
    if (b) BIO_set_mem_eof_return(b, -1);
    return b;
}

void
tls_conn_trim(TlsConn *t)
{
    BIO *r, *w;
    if (t->failed || (!t->direct &&
                      (BIO_ctrl_pending(t->rbio) || BIO_ctrl_pending(t->wbio))))
        return;
    ERR_clear_error();
    SSL_free_buffers(t->ssl); /* refuses while a record is partly held */
    if (t->direct) {
        ERR_clear_error();
        return;
    }
    if (!(r = mem_bio()) || !(w = mem_bio())) {
        BIO_free(r);
        ERR_clear_error();
        return;
    }
    SSL_set_bio(t->ssl, r, w); /* frees the old pair */
    t->rbio = r;
    t->wbio = w;
    ERR_clear_error();
}

int
tls_conn_direct(TlsConn *t, int fd)
{
    if (t->direct) return 0;
    if (t->failed || BIO_ctrl_pending(t->rbio) || BIO_ctrl_pending(t->wbio) ||
        SSL_pending(t->ssl) > 0)
        return -1;
    ERR_clear_error();
    if (SSL_set_fd(t->ssl, fd) != 1) { /* frees the memory BIOs */
        ERR_clear_error();
        return -1;
    }
    SSL_set_mode(t->ssl, SSL_MODE_ENABLE_PARTIAL_WRITE |
                             SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    t->rbio = SSL_get_rbio(t->ssl);
    t->wbio = SSL_get_wbio(t->ssl);
    t->direct = 1;
    return 0;
}

int
tls_conn_done(const TlsConn *t)
{
    return t->done && !t->failed;
}

int
tls_conn_wants_write(TlsConn *t)
{
    return t->direct && SSL_want_write(t->ssl);
}

const char *
tls_conn_error(TlsConn *t)
{
    return t->err;
}
