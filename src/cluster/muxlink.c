/* muxlink.c - see muxlink.h. */
#include "cluster/muxlink.h"

#include <errno.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/net.h"

#define IBUF_SIZE (2 * (MUX_HDR + MUX_FRAME_MAX))
#define PRE_MAX 64
#define READS_PER_EVENT 8

enum { ST_CONNECT, ST_HANDSHAKE, ST_READY };

struct MuxLink {
    struct ev_loop *loop;
    const MuxLinkOps *ops;
    void *arg;
    int fd;
    TlsSock *x;
    int state;
    uint64_t want_id;
    unsigned char pre[PRE_MAX];
    size_t pre_len;
    ev_io rd, wr;
    ev_prepare prep;
    ev_timer timer;
    unsigned char *obuf; /* queued output: [osent, olen) */
    size_t osent, olen, ocap;
    size_t ilen;
    unsigned char ibuf[IBUF_SIZE];
};

static bool
again(void)
{
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

static void
free_link(MuxLink *l)
{
    ev_io_stop(l->loop, &l->rd);
    ev_io_stop(l->loop, &l->wr);
    ev_prepare_stop(l->loop, &l->prep);
    ev_timer_stop(l->loop, &l->timer);
    if (l->fd >= 0) close(l->fd);
    tls_sock_free(l->x);
    free(l->obuf);
    free(l);
}

static void
die(MuxLink *l)
{
    l->ops->dead(l->arg, l);
    free_link(l);
}

void
mux_link_close(MuxLink *l)
{
    if (l) free_link(l);
}

int
mux_link_ready(const MuxLink *l)
{
    return l->state == ST_READY;
}

size_t
mux_link_queued(const MuxLink *l)
{
    return l->olen - l->osent;
}

/* Room for n more output bytes (drops what was sent first). */
static void
out_room(MuxLink *l, size_t n)
{
    if (l->osent && l->osent == l->olen) l->osent = l->olen = 0;
    if (l->olen + n <= l->ocap) return;
    if (l->osent) {
        memmove(l->obuf, l->obuf + l->osent, l->olen - l->osent);
        l->olen -= l->osent;
        l->osent = 0;
        if (l->olen + n <= l->ocap) return;
    }
    size_t cap = l->ocap ? l->ocap : 65536;
    while (cap < l->olen + n)
        cap *= 2;
    unsigned char *b = realloc(l->obuf, cap);
    if (!b) abort(); /* out of memory, as conn.c's output */
    l->obuf = b;
    l->ocap = cap;
}

void
mux_link_send(MuxLink *l, unsigned type, uint32_t id, const void *data,
              size_t len)
{
    out_room(l, MUX_HDR + len);
    mux_frame_head(l->obuf + l->olen, type, id, (uint32_t)len);
    if (len) memcpy(l->obuf + l->olen + MUX_HDR, data, len);
    l->olen += MUX_HDR + len;
}

unsigned char *
mux_link_data_begin(MuxLink *l, size_t max)
{
    out_room(l, MUX_HDR + max);
    return l->obuf + l->olen + MUX_HDR;
}

void
mux_link_data_end(MuxLink *l, uint32_t id, size_t n)
{
    if (!n) return;
    mux_frame_head(l->obuf + l->olen, MUX_DATA, id, (uint32_t)n);
    l->olen += MUX_HDR + n;
}

/* Sends what is queued: 0, or -1 on an error (the link must die). */
static int
out_flush(MuxLink *l)
{
    if (tls_sock_flush(l->x, l->fd) < 0) return -1;
    while (l->osent < l->olen) {
        ssize_t n =
            tls_sock_write(l->x, l->fd, l->obuf + l->osent, l->olen - l->osent);
        if (n < 0) {
            if (!again()) return -1;
            break;
        }
        l->osent += (size_t)n;
    }
    if (l->osent == l->olen) l->osent = l->olen = 0;
    bool w = tls_sock_want_write(l->x) || l->olen > l->osent;
    if (w && !ev_is_active(&l->wr)) ev_io_start(l->loop, &l->wr);
    if (!w && ev_is_active(&l->wr)) ev_io_stop(l->loop, &l->wr);
    return 0;
}

/* Parses and hands over every whole frame read: 0, or -1 (malformed). */
static int
in_frames(MuxLink *l)
{
    size_t at = 0;
    MuxFrame f;
    long k;

    while ((k = mux_frame_parse(l->ibuf + at, l->ilen - at, &f)) > 0) {
        if (l->ops->frame(l->arg, l, &f) < 0) return -1;
        at += (size_t)k;
    }
    if (k < 0) return -1;
    memmove(l->ibuf, l->ibuf + at, l->ilen - at);
    l->ilen -= at;
    return 0;
}

/* Handshake, id check and preamble of a dialled link: 0 (done or under
 * way), -1 failed. */
static int
dial_step(MuxLink *l)
{
    uint64_t id;

    if (tls_sock_handshake(l->x, l->fd) < 0) return again() ? 0 : -1;
    if (tls_peer_node_id(tls_conn_ssl(tls_sock_conn(l->x)), &id) != 0 ||
        id != l->want_id)
        return -1;
    if (tls_sock_write(l->x, l->fd, l->pre, l->pre_len) != (ssize_t)l->pre_len)
        return -1;
    l->state = ST_READY;
    ev_timer_stop(l->loop, &l->timer);
    ev_io_start(l->loop, &l->rd);
    return out_flush(l);
}

static void
on_read(struct ev_loop *loop, ev_io *w, int revents)
{
    MuxLink *l = w->data;
    (void)loop, (void)revents;
    if (l->state != ST_READY) {
        if (dial_step(l) < 0) die(l);
        return;
    }
    if (l->ilen >= MUX_HDR && in_frames(l) < 0) { /* an accepted head */
        die(l);
        return;
    }
    for (int k = 0; k < READS_PER_EVENT; k++) {
        ssize_t n = tls_sock_read(l->x, l->fd, l->ibuf + l->ilen,
                                  sizeof l->ibuf - l->ilen);
        if (n == 0 || (n < 0 && !again())) {
            die(l);
            return;
        }
        if (n < 0) break;
        l->ilen += (size_t)n;
        if (in_frames(l) < 0) {
            die(l);
            return;
        }
        if (!tls_sock_more(l->x)) break; /* the socket says when more */
    }
    if (tls_sock_want_write(l->x) && !ev_is_active(&l->wr))
        ev_io_start(l->loop, &l->wr);
}

static void
on_write(struct ev_loop *loop, ev_io *w, int revents)
{
    MuxLink *l = w->data;
    (void)loop, (void)revents;
    if (l->state == ST_CONNECT) {
        int err = 0;
        socklen_t len = sizeof err;
        if (getsockopt(l->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err) {
            die(l);
            return;
        }
        l->state = ST_HANDSHAKE;
        ev_io_start(l->loop, &l->rd);
    }
    if (l->state == ST_HANDSHAKE) {
        ev_io_stop(l->loop, &l->wr);
        if (dial_step(l) < 0)
            die(l);
        else if (l->state != ST_READY && tls_sock_want_write(l->x))
            ev_io_start(l->loop, &l->wr);
        return;
    }
    if (out_flush(l) < 0) die(l);
}

/* Once per loop iteration, after the server's work: one write of all. */
static void
on_prepare(struct ev_loop *loop, ev_prepare *w, int revents)
{
    MuxLink *l = w->data;
    (void)loop, (void)revents;
    if (l->state == ST_READY && !ev_is_active(&l->wr) && l->olen > l->osent &&
        out_flush(l) < 0)
        die(l);
}

static void
on_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop, (void)revents;
    die(w->data);
}

static MuxLink *
link_new(struct ev_loop *loop, int fd, const MuxLinkOps *ops, void *arg)
{
    MuxLink *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    l->loop = loop;
    l->ops = ops;
    l->arg = arg;
    l->fd = fd;
    ev_io_init(&l->rd, on_read, fd, EV_READ);
    ev_io_init(&l->wr, on_write, fd, EV_WRITE);
    ev_prepare_init(&l->prep, on_prepare);
    ev_set_priority(&l->prep, EV_MINPRI);
    ev_timer_init(&l->timer, on_timeout, 0., 0.);
    l->rd.data = l->wr.data = l->prep.data = l->timer.data = l;
    ev_prepare_start(loop, &l->prep);
    return l;
}

MuxLink *
mux_link_dial(struct ev_loop *loop, const struct sockaddr_in *up, TlsConn *t,
              uint64_t want_id, const unsigned char *pre, size_t pre_len,
              double timeout, const MuxLinkOps *ops, void *arg)
{
    int one = 1;
    TlsSock *x = tls_sock_new(t);
    if (!x || pre_len > PRE_MAX) {
        tls_sock_free(x);
        return NULL;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        tls_sock_free(x);
        return NULL;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    net_keepalive(fd);
    if (connect(fd, (const struct sockaddr *)up, sizeof *up) < 0 &&
        errno != EINPROGRESS) {
        close(fd);
        tls_sock_free(x);
        return NULL;
    }
    MuxLink *l = link_new(loop, fd, ops, arg);
    if (!l) {
        close(fd);
        tls_sock_free(x);
        return NULL;
    }
    l->x = x;
    l->state = ST_CONNECT;
    l->want_id = want_id;
    memcpy(l->pre, pre, pre_len);
    l->pre_len = pre_len;
    ev_timer_set(&l->timer, timeout, 0.);
    ev_timer_start(loop, &l->timer);
    ev_io_start(loop, &l->wr);
    return l;
}

MuxLink *
mux_link_accept(struct ev_loop *loop, int fd, TlsSock *x, const void *head,
                size_t n, const MuxLinkOps *ops, void *arg)
{
    MuxLink *l = n <= IBUF_SIZE ? link_new(loop, fd, ops, arg) : NULL;
    if (!l) {
        close(fd);
        tls_sock_free(x);
        return NULL;
    }
    l->x = x;
    l->state = ST_READY;
    if (n) memcpy(l->ibuf, head, n);
    l->ilen = n;
    ev_io_start(loop, &l->rd);
    /* the head, and records read off the socket already, next iteration */
    ev_feed_event(loop, &l->rd, EV_READ);
    return l;
}
