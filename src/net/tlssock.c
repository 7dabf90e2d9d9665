/* tlssock.c - see tlssock.h. */
#include "net/tlssock.h"

#include <errno.h>
#include <openssl/ssl.h>
#include <stdlib.h>
#include <sys/socket.h>

/* Ciphertext read from the socket at once, at most (bytes). */
#define TLS_SOCK_IN 32768

struct TlsSock {
    TlsConn *t;
    int done;          /* the handshake completed */
    int more;          /* the last read filled the caller's buffer */
    int dry;           /* the session holds nothing unread */
    int direct;        /* the session reads and writes fd itself */
    int wblock;        /* direct: a write or the handshake waits for fd */
    size_t obeg, oend; /* out[obeg..oend): taken from t, not yet sent */
    char *out;         /* TLS_SOCK_OUT bytes, or NULL (trimmed) */
};

TlsSock *
tls_sock_new(TlsConn *t)
{
    TlsSock *x = calloc(1, sizeof *x);

    if (!x) {
        tls_conn_free(t);
        return NULL;
    }
    x->t = t;
    x->done = tls_conn_done(t); /* a link authenticated elsewhere */
    return x;
}

void
tls_sock_free(TlsSock *x)
{
    if (!x) return;
    tls_conn_free(x->t);
    free(x->out);
    free(x);
}

void
tls_sock_trim(TlsSock *x)
{
    if (x->direct) {
        tls_conn_trim(x->t);
        return;
    }
    if (x->obeg == x->oend) {
        free(x->out);
        x->out = NULL;
        x->obeg = x->oend = 0;
    }
    if (x->dry) tls_conn_trim(x->t);
}

TlsConn *
tls_sock_conn(TlsSock *x)
{
    return x->t;
}

/* Once nothing waits in the memory BIOs (at once for a fresh session; a
 * handed-over one once drained), the session takes the socket itself
 * (tls_conn_direct), with OpenSSL reading ahead so that one recv serves
 * every record that has arrived. */
static void
go_direct(TlsSock *x, int fd)
{
    if (x->direct || x->obeg != x->oend || tls_conn_direct(x->t, fd) != 0)
        return;
    SSL_set_read_ahead(tls_conn_ssl(x->t), 1);
    x->direct = 1;
    free(x->out);
    x->out = NULL;
}

int
tls_sock_flush(TlsSock *x, int fd)
{
    go_direct(x, fd);
    if (x->direct) { /* what waits is the caller's to write again */
        if (x->done) x->wblock = 0;
        return x->done || tls_sock_handshake(x, fd) == 1 ? 0
               : errno == EAGAIN                         ? x->wblock
                                                         : -1;
    }
    for (;;) {
        if (x->obeg == x->oend) {
            x->obeg = x->oend = 0;
            if (tls_conn_pending_out(x->t) == 0) return 0;
            if (!x->out && !(x->out = malloc(TLS_SOCK_OUT))) {
                errno = ENOMEM;
                return -1;
            }
            x->oend = tls_conn_take_out(x->t, x->out, TLS_SOCK_OUT);
            if (x->oend == 0) return 0;
        }
        ssize_t n = send(fd, x->out + x->obeg, x->oend - x->obeg, MSG_NOSIGNAL);
        if (n > 0)
            x->obeg += (size_t)n;
        else if (n < 0 && errno == EINTR)
            continue;
        else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 1;
        else
            return -1;
    }
}

int
tls_sock_want_write(TlsSock *x)
{
    if (x->direct) return x->wblock;
    return x->obeg < x->oend || tls_conn_pending_out(x->t) > 0;
}

int
tls_sock_handshaken(const TlsSock *x)
{
    return x->done;
}

int
tls_sock_more(const TlsSock *x)
{
    return x->more;
}

/* One recv of ciphertext into the session: 1 fed, 0 end of stream, -1
 * with errno (EAGAIN: nothing now; EPROTO: the session holds its bound
 * of unread ciphertext without a whole record in it). */
static int
feed(TlsSock *x, int fd)
{
    char in[TLS_SOCK_IN];
    size_t room = tls_conn_feed_room(x->t);
    ssize_t n;

    if (room == 0) {
        errno = EPROTO;
        return -1;
    }
    do
        n = recv(fd, in, room < sizeof in ? room : sizeof in, 0);
    while (n < 0 && errno == EINTR);
    if (n <= 0) return n == 0 ? 0 : -1;
    if (tls_conn_feed(x->t, in, (size_t)n) != 0) {
        errno = EPROTO;
        return -1;
    }
    x->dry = 0;
    return 1;
}

/* The direct session's handshake step: as tls_sock_handshake. */
static int
direct_handshake(TlsSock *x)
{
    int rc = tls_conn_handshake(x->t);
    x->wblock = rc == 0 && tls_conn_wants_write(x->t);
    if (rc == 1) {
        x->done = 1;
        return 1;
    }
    errno = rc == 0 ? EAGAIN : EPROTO;
    return -1;
}

int
tls_sock_handshake(TlsSock *x, int fd)
{
    go_direct(x, fd);
    if (x->direct && !x->done) return direct_handshake(x);
    while (!x->done) {
        int rc = tls_conn_handshake(x->t);
        int f = tls_sock_flush(x, fd); /* a flight, or the alert */
        if (rc < 0) {
            errno = EPROTO;
            return -1;
        }
        if (f < 0) return -1;
        if (rc == 1) {
            x->done = 1;
            break;
        }
        int r = feed(x, fd);
        if (r == 0) errno = ECONNRESET; /* the peer left mid-handshake */
        if (r <= 0) return -1;
    }
    return 1;
}

/* 1 when the session holds nothing unread: no ciphertext fed and not
 * yet decrypted, no plaintext decrypted and not yet read. */
static int
empty(TlsSock *x)
{
    return tls_conn_feed_room(x->t) == TLS_BUF_MAX &&
           SSL_pending(tls_conn_ssl(x->t)) == 0;
}

/* Plaintext the session holds, into buf[got..cap): the new total, or -1
 * (errno EPROTO) on a failed session with nothing read; *closed is set at
 * close_notify. Stops without asking OpenSSL again once nothing is left
 * (x->dry). */
static ssize_t
drain(TlsSock *x, char *buf, size_t got, size_t cap, int *closed)
{
    while (got < cap && !x->dry) {
        ssize_t n = tls_conn_read(x->t, buf + got, cap - got);
        if (n > 0) {
            got += (size_t)n;
            x->dry = empty(x);
            continue;
        }
        if (n == 0) x->dry = 1; /* a partial record at most */
        if (n == TLS_CLOSED) *closed = 1;
        if (n < 0 && n != TLS_CLOSED && got == 0) {
            errno = EPROTO; /* reported now; after bytes, at the next call */
            return -1;
        }
        break;
    }
    return (ssize_t)got;
}

/* The direct session's read: records until cap is full or the socket has
 * no whole one more (OpenSSL reads ahead: what it holds past the last
 * record is a partial one, which the socket will complete). */
static ssize_t
direct_read(TlsSock *x, char *buf, size_t cap)
{
    SSL *ssl = tls_conn_ssl(x->t);
    size_t got = 0;

    while (got < cap) {
        ssize_t n = tls_conn_read(x->t, buf + got, cap - got);
        if (n > 0) {
            got += (size_t)n;
            if (!SSL_has_pending(ssl)) break;
            continue;
        }
        if (got) break; /* the end or an error shows at the next call */
        if (n == TLS_CLOSED) return 0;
        errno = n == 0 ? EAGAIN : EPROTO;
        return -1;
    }
    x->more = got == cap && SSL_has_pending(ssl);
    return (ssize_t)got;
}

ssize_t
tls_sock_read(TlsSock *x, int fd, void *buf, size_t cap)
{
    ssize_t got = 0;
    int closed = 0;

    x->more = 0;
    if (tls_sock_handshake(x, fd) < 0) return -1;
    if (x->direct) return direct_read(x, buf, cap);
    for (;;) {
        got = drain(x, buf, (size_t)got, cap, &closed);
        if (got != 0 || closed) break;
        int r = feed(x, fd);
        if (r <= 0) return r; /* the end (a FIN), or errno */
    }
    if (got > 0 && (size_t)got == cap && !x->dry) x->more = 1;
    /* reading may have produced output (a key update's answer): what the
     * socket refuses now waits, and a socket error shows in the next
     * write */
    if (tls_conn_pending_out(x->t) > 0) (void)tls_sock_flush(x, fd);
    return got;
}

ssize_t
tls_sock_write(TlsSock *x, int fd, const void *buf, size_t n)
{
    int f;

    if (tls_sock_handshake(x, fd) < 0) return -1;
    if (x->direct) {
        ssize_t k = tls_conn_write(x->t, buf, n);
        x->wblock = k >= 0 && (size_t)k < n;
        if (k > 0) return k;
        errno = k < 0 ? EPROTO : EAGAIN;
        return -1;
    }
    if ((f = tls_sock_flush(x, fd)) != 0) { /* older ciphertext first */
        if (f > 0) errno = EAGAIN;
        return -1;
    }
    ssize_t k = tls_conn_write(x->t, buf, n);
    if (k <= 0) {
        errno = k < 0 ? EPROTO : EAGAIN;
        return -1;
    }
    if (tls_sock_flush(x, fd) < 0) return -1;
    return k;
}

int
tls_sock_close_notify(TlsSock *x, int fd)
{
    tls_conn_close_notify(x->t); /* direct: sent, or dropped if full */
    if (x->direct) return 0;
    return tls_sock_flush(x, fd) < 0 ? -1 : 0;
}
