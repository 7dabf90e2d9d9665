/* proxy.c - see proxy.h. */
#include "cluster/proxy.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/net.h"
#include "net/tlssock.h"

enum { CLIENT = 0, UPSTREAM = 1 };

/* One socket of a pair and the bytes read from it that wait to be written
 * to the other socket. */
typedef struct ProxySide {
    int fd;
    ev_io rd;          /* readable: active while buf has room and !eof */
    ev_io wr;          /* writable: active while the other side's bytes
                        * wait (upstream: also while connecting) */
    char *buf;         /* PROXY_BUF_SIZE bytes inside the Proxy */
    size_t start, end; /* buf[start..end) read here, not yet sent onward */
    bool eof;          /* recv returned 0: nothing more comes from fd */
    bool shut;         /* shutdown(fd, SHUT_WR) done: nothing more goes out */
    bool notified;     /* tls: close_notify queued */
    TlsSock *tls;      /* the socket's TLS, or NULL */
} ProxySide;

struct Proxy {
    ProxySet *set;
    Proxy *prev, *next; /* set->head list */
    ProxySide side[2];  /* [CLIENT], [UPSTREAM] */
    ev_timer timer;     /* connect timeout: active while connecting */
    bool connecting;    /* the upstream connect (and with TLS, the
                         * handshake and hello) has not completed yet */
    bool handshaking;   /* TLS: connected, the handshake under way */
    uint64_t want_id;   /* TLS: the node id its certificate must name */
    ProxyHelloFn hello; /* TLS: makes what goes first, inside */
    void *hello_arg;
    char bufs[2][PROXY_BUF_SIZE];
};

static bool
again(void)
{
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

void
proxy_io_set(struct ev_loop *loop, ev_io *w, bool on)
{
    if (on && !ev_is_active(w))
        ev_io_start(loop, w);
    else if (!on && ev_is_active(w))
        ev_io_stop(loop, w);
}

/* Stops every watcher, closes both fds, unlinks and frees p. */
static void
pair_close(Proxy *p)
{
    ProxySet *ps = p->set;
    for (int i = 0; i < 2; i++) {
        ev_io_stop(ps->loop, &p->side[i].rd);
        ev_io_stop(ps->loop, &p->side[i].wr);
        close(p->side[i].fd);
        tls_sock_free(p->side[i].tls);
    }
    ev_timer_stop(ps->loop, &p->timer);
    if (p->prev)
        p->prev->next = p->next;
    else
        ps->head = p->next;
    if (p->next) p->next->prev = p->prev;
    ps->count--;
    free(p);
}

/* One recv into s's buffer (there is room: rd is active only then).
 * Returns 0 (bytes taken, EOF noted, or nothing yet), -1 on an error. */
static int
side_recv(ProxySide *s)
{
    if (s->start == s->end) {
        s->start = s->end = 0;
    } else if (s->end == PROXY_BUF_SIZE) {
        memmove(s->buf, s->buf + s->start, s->end - s->start);
        s->end -= s->start;
        s->start = 0;
    }
    char *dst = s->buf + s->end;
    size_t room = PROXY_BUF_SIZE - s->end;
    ssize_t n = s->tls ? tls_sock_read(s->tls, s->fd, dst, room)
                       : recv(s->fd, dst, room, 0);
    if (n > 0)
        s->end += (size_t)n;
    else if (n == 0)
        s->eof = true;
    else if (!again())
        return -1;
    return 0;
}

/* One send of from's buffered bytes to to's fd (through TLS toward a TLS
 * upstream, whose waiting ciphertext goes first). Returns 0 (sent some,
 * all or none yet), -1 on an error (EPIPE, ECONNRESET: never SIGPIPE). */
static int
side_send(ProxySide *to, ProxySide *from)
{
    TlsSock *x = to->tls;
    size_t len = from->end - from->start;
    const char *b = from->buf + from->start;
    if (x && tls_sock_flush(x, to->fd) < 0) return -1;
    if (len == 0) return 0;
    ssize_t n = x ? tls_sock_write(x, to->fd, b, len)
                  : send(to->fd, b, len, MSG_NOSIGNAL);
    if (n < 0) return again() ? 0 : -1;
    from->start += (size_t)n;
    if (from->start == from->end) from->start = from->end = 0;
    return 0;
}

/* TLS: advances the handshake; once done, checks that the upstream's
 * certificate names want_id and, once a TLS client has finished its own
 * handshake too, sends the hello. 0 (done or under way), -1 (failed:
 * close). */
static int
tls_step(Proxy *p)
{
    int fd = p->side[UPSTREAM].fd;
    TlsSock *x = p->side[UPSTREAM].tls, *ct = p->side[CLIENT].tls;
    unsigned char hello[PROXY_HELLO_MAX];
    uint64_t id;

    if (tls_sock_handshake(x, fd) < 0) return again() ? 0 : -1;
    if (tls_peer_node_id(tls_conn_ssl(tls_sock_conn(x)), &id) != 0 ||
        id != p->want_id)
        return -1;
    if (ct && !tls_sock_handshaken(ct)) return 0; /* its hello may say who */
    size_t n = p->hello(p->hello_arg, ct, hello, sizeof hello);
    if (n == 0 || tls_sock_write(x, fd, hello, n) != (ssize_t)n) return -1;
    p->handshaking = p->connecting = false;
    ev_timer_stop(p->set->loop, &p->timer);
    return 0;
}

/* The upstream became writable while connecting: 0 if the connect
 * succeeded (timer stopped), -1 with errno if it failed. */
static int
connect_done(Proxy *p)
{
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(p->side[UPSTREAM].fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
        return -1;
    if (err) {
        errno = err;
        return -1;
    }
    if (p->side[UPSTREAM].tls) {
        p->handshaking = true; /* the timer goes on */
        return tls_step(p);
    }
    p->connecting = false;
    ev_timer_stop(p->set->loop, &p->timer);
    return 0;
}

/* Half-closes toward a side whose source has ended and been flushed.
 * Returns -1 if shutdown fails (the peer is gone). */
static int
pair_shutdowns(Proxy *p)
{
    for (int i = 0; i < 2; i++) {
        ProxySide *to = &p->side[i], *from = &p->side[!i];
        if (!from->eof || from->start != from->end || to->shut) continue;
        if (to->tls) { /* close_notify, sent, then FIN */
            if (!to->notified && tls_sock_close_notify(to->tls, to->fd) < 0)
                return -1;
            to->notified = true;
            if (tls_sock_want_write(to->tls)) continue;
        }
        if (shutdown(to->fd, SHUT_WR) < 0) return -1;
        to->shut = true;
    }
    return 0;
}

/* The pair's deadline (ps->connect_timeout after it began) runs while
 * the upstream is not yet connected and ready, or a TLS client has not
 * finished its handshake: a client that never does holds no pair. */
static void
pair_deadline(Proxy *p)
{
    TlsSock *ct = p->side[CLIENT].tls;
    bool need = p->connecting || (ct && !tls_sock_handshaken(ct));
    if (need && !ev_is_active(&p->timer))
        ev_timer_start(p->set->loop, &p->timer);
    else if (!need && ev_is_active(&p->timer))
        ev_timer_stop(p->set->loop, &p->timer);
}

/* After any event: propagates finished directions, closes p once both are
 * finished (or shutdown failed), else starts exactly the watchers that
 * have something to do. p may be freed on return. */
static void
pair_update(Proxy *p)
{
    struct ev_loop *loop = p->set->loop;
    if (!p->connecting && pair_shutdowns(p) < 0) {
        pair_close(p);
        return;
    }
    if (p->side[CLIENT].shut && p->side[UPSTREAM].shut) {
        pair_close(p);
        return;
    }
    for (int i = 0; i < 2; i++) {
        ProxySide *s = &p->side[i], *o = &p->side[!i];
        bool up = i == UPSTREAM;
        bool wait_up = up && p->connecting && !p->handshaking;
        bool tls_out = s->tls && tls_sock_want_write(s->tls);
        bool rd = !s->eof && !wait_up && s->end - s->start < PROXY_BUF_SIZE;
        proxy_io_set(loop, &s->rd, rd);
        proxy_io_set(loop, &s->wr,
                     wait_up || tls_out ||
                         (!p->connecting && o->end > o->start));
        /* plaintext TLS decrypted past the buffer's end */
        if (rd && s->tls && tls_sock_more(s->tls))
            ev_feed_event(loop, &s->rd, EV_READ);
    }
    pair_deadline(p);
}

static void
on_read(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)loop, (void)revents;
    Proxy *p = w->data;
    int i = w == &p->side[UPSTREAM].rd;
    ProxySide *s = &p->side[i], *o = &p->side[!i];
    if (i == UPSTREAM && p->handshaking) {
        if (tls_step(p) < 0)
            pair_close(p);
        else
            pair_update(p);
        return;
    }
    // Forward at once: saves a loop iteration per chunk when o can take it.
    if (side_recv(s) < 0 || (p->handshaking && tls_step(p) < 0) ||
        (!p->connecting && side_send(o, s) < 0)) {
        pair_close(p);
        return;
    }
    pair_update(p);
}

static void
on_write(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)loop, (void)revents;
    Proxy *p = w->data;
    int i = w == &p->side[UPSTREAM].wr;
    int rc = p->handshaking ? tls_step(p) : p->connecting ? connect_done(p) : 0;
    if (rc < 0 ||
        (!p->connecting && side_send(&p->side[i], &p->side[!i]) < 0)) {
        pair_close(p);
        return;
    }
    pair_update(p);
}

static void
on_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop, (void)revents;
    pair_close(w->data);
}

/* A non-blocking TCP socket connecting to up. Returns the fd with
 * *connecting set (true: EINPROGRESS, false: connected at once), or -1
 * with errno. */
static int
upstream_connect(const struct sockaddr_in *up, bool *connecting)
{
    int one = 1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    net_keepalive(fd); /* a leader gone with its host ends the pair */
    if (connect(fd, (const struct sockaddr *)up, sizeof *up) == 0) {
        *connecting = false;
        return fd;
    }
    if (errno == EINPROGRESS) {
        *connecting = true;
        return fd;
    }
    int e = errno;
    close(fd);
    errno = e;
    return -1;
}

static void
side_init(Proxy *p, int i, int fd)
{
    ProxySide *s = &p->side[i];
    s->fd = fd;
    s->buf = p->bufs[i];
    s->start = s->end = 0;
    s->eof = s->shut = s->notified = false;
    s->tls = NULL;
    ev_io_init(&s->rd, on_read, fd, EV_READ);
    ev_io_init(&s->wr, on_write, fd, EV_WRITE);
    s->rd.data = s->wr.data = p;
}

void
proxy_set_init(ProxySet *ps, struct ev_loop *loop)
{
    ps->loop = loop;
    ps->head = NULL;
    ps->count = 0;
    ps->total = 0;
    ps->connect_timeout = PROXY_CONNECT_TIMEOUT;
}

static int pair_start(ProxySet *ps, int client_fd, int fd, bool connecting);

int
proxy_start(ProxySet *ps, int client_fd, const struct sockaddr_in *up)
{
    return proxy_start_tls(ps, client_fd, NULL, up, NULL, 0, NULL, NULL);
}

int
proxy_start_tls(ProxySet *ps, int client_fd, TlsSock *client_tls,
                const struct sockaddr_in *up, TlsConn *t, uint64_t want_id,
                ProxyHelloFn hello, void *arg)
{
    TlsSock *x = NULL;
    bool connecting = false;
    int fd = -1, e = ENOMEM;

    if (!t || (x = tls_sock_new(t))) /* frees t if it fails */
        fd = upstream_connect(up, &connecting), e = errno;
    if (fd < 0 || pair_start(ps, client_fd, fd, connecting || x) < 0) {
        e = fd < 0 ? e : errno;
        tls_sock_free(x);
        tls_sock_free(client_tls);
        if (fd < 0) close(client_fd);
        errno = e;
        return -1;
    }
    Proxy *p = ps->head; /* pair_start puts it first */
    p->side[CLIENT].tls = client_tls;
    p->side[UPSTREAM].tls = x;
    p->want_id = want_id;
    p->hello = hello;
    p->hello_arg = arg;
    if (x && !connecting && connect_done(p) < 0) {
        pair_close(p);
        return 0; /* ends as a connect failing later would */
    }
    pair_update(p);
    return 0;
}

/* A pair of client_fd and fd (upstream, connecting or connected), both
 * owned: 0, or -1 with errno and both closed. */
static int
pair_start(ProxySet *ps, int client_fd, int fd, bool connecting)
{
    int one = 1, flags = fcntl(client_fd, F_GETFL);
    Proxy *p = malloc(sizeof *p);
    if (!p || flags < 0 || fcntl(client_fd, F_SETFL, flags | O_NONBLOCK) < 0) {
        int e = p ? errno : ENOMEM;
        free(p);
        close(client_fd);
        close(fd);
        errno = e;
        return -1;
    }
    // Fails harmlessly on a non-TCP client (tests use socketpairs too).
    setsockopt(client_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    p->set = ps;
    p->connecting = connecting;
    p->handshaking = false;
    p->hello = NULL;
    side_init(p, CLIENT, client_fd);
    side_init(p, UPSTREAM, fd);
    ev_timer_init(&p->timer, on_timeout, ps->connect_timeout, 0.);
    p->timer.data = p;
    if (connecting) ev_timer_start(ps->loop, &p->timer);
    p->prev = NULL;
    p->next = ps->head;
    if (ps->head) ps->head->prev = p;
    ps->head = p;
    ps->count++;
    ps->total++;
    pair_update(p);
    return 0;
}

void
proxy_close_all(ProxySet *ps)
{
    while (ps->head)
        pair_close(ps->head);
}

void
proxy_set_free(ProxySet *ps)
{
    proxy_close_all(ps);
}
