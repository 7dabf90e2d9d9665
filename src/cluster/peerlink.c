/* peerlink.c - a link's bytes (see peer_impl.h): TCP toward the peer
 * through TLS (net/tls.h), the socketpair toward the local user (libraft,
 * a relayed client, a snapshot stream), and backpressure: reading pauses
 * on the side whose bytes the other cannot take, PEER_QUEUE_MAX queued.
 * Raft thread only. */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cluster/peer_impl.h"

/* A write in flight: the bytes live until its callback. */
typedef struct WriteReq {
    uv_write_t req;
    Link *l;
    int to_tcp;
    size_t n;
    char data[];
} WriteReq;

static void link_pump(Link *l);
static void resume_reads(Link *l);
static int maybe_done(Link *l);
static void on_tcp_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b);
static void on_inner_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b);

void
peer_maybe_closed(Peer *p)
{
    if (p->closing && !p->links && !p->listening && p->close_cb) {
        raft_uv_transport_close_cb cb = p->close_cb;
        p->close_cb = NULL;
        cb(p->t);
    }
}

static void
on_handle_closed(uv_handle_t *h)
{
    Link *l = h->data;

    if (--l->handles > 0) return;
    Peer *p = l->p;
    if (l->prev)
        l->prev->next = l->next;
    else
        p->links = l->next;
    if (l->next) l->next->prev = l->prev;
    tls_conn_free(l->tls);
    free(l);
    peer_maybe_closed(p);
}

/* Ends l: an outbound request still waiting hears of it (cancelled when
 * the transport closes), every handle of ours is closed, l is freed once
 * they are. refused counts it in peer_refused. */
void
link_close(Link *l, int refused)
{
    Peer *p = l->p;

    if (l->state == LINK_CLOSING) return;
    if (refused) atomic_fetch_add(&p->refused, 1);
    if (link_pending(l)) p->pending_in--;
    l->state = LINK_CLOSING;
    if (l->req) {
        struct raft_uv_connect *req = l->req;
        l->req = NULL;
        l->cb(req, NULL, p->closing ? RAFT_CANCELED : RAFT_NOCONNECTION);
    }
    uv_close((uv_handle_t *)&l->tcp, on_handle_closed);
    uv_close((uv_handle_t *)&l->timer, on_handle_closed);
    if (l->inner_open) uv_close((uv_handle_t *)&l->inner, on_handle_closed);
}

/* The handshake's deadline (an incoming link not authenticated by then
 * is refused, an outgoing one failed: the peer may be down), or a
 * half-closed Raft link's. */
static void
on_deadline(uv_timer_t *t)
{
    Link *l = t->data;
    link_close(l, link_pending(l));
}

static void
on_written(uv_write_t *req, int status)
{
    WriteReq *w = (WriteReq *)req;
    Link *l = w->l;

    if (w->to_tcp)
        l->to_tcp -= w->n;
    else
        l->to_inner -= w->n;
    free(w);
    if (status < 0)
        link_close(l, 0);
    else if (l->state != LINK_CLOSING && !maybe_done(l))
        resume_reads(l);
}

/* Each direction of an open link ends on its own, as TCP's half-close:
 * the local user's end of writing goes to the peer as TLS close_notify
 * (local_done), the peer's (close_notify or FIN) to the local user as
 * shutdown(SHUT_WR) of the socketpair (peer_done), and the other
 * direction goes on: a client that sent its commands and its FIN still
 * gets its replies. Once both have ended and what is queued either way is
 * written, the link closes. A Raft link half-closed is done (libraft
 * closes whole streams): it gets PEER_DRAIN_MS to finish. */
static int
maybe_done(Link *l)
{
    if (!l->local_done || !l->peer_done || l->to_tcp || l->to_inner) return 0;
    link_close(l, 0);
    return 1;
}

static void
half_closed(Link *l)
{
    if (l->channel == PEER_CHANNEL_RAFT &&
        !uv_is_active((uv_handle_t *)&l->timer))
        uv_timer_start(&l->timer, on_deadline, PEER_DRAIN_MS, 0);
    maybe_done(l);
}

/* The local user will write no more. */
static void
local_done(Link *l)
{
    if (l->local_done || l->state == LINK_CLOSING) return;
    l->local_done = 1;
    uv_read_stop((uv_stream_t *)&l->inner);
    tls_conn_close_notify(l->tls);
    if (link_flush(l) != 0) {
        link_close(l, 0);
        return;
    }
    half_closed(l);
}

static void
on_inner_shut(uv_shutdown_t *req, int status)
{
    (void)req, (void)status; /* a failure shows in the link's next I/O */
}

/* The peer will send no more: once what it sent is written, the local
 * user reads EOF. An outbound Raft link closes at once instead: its peer
 * writes nothing on it (libraft reads nothing on the links it opens), so
 * its end means that process closed it (it stopped, or restarted: a
 * leader that loses the leadership does) and nothing written to it
 * afterwards arrives. Kept half-open for PEER_DRAIN_MS, it took in
 * libraft's messages until a TCP write failed (a vote reply to a
 * restarted leadership-transfer target among them: three lost in a row,
 * tests/test_cluster_ops.py); closed, libraft's next write fails and the
 * one after it reconnects. */
static void
peer_done(Link *l)
{
    if (l->peer_done || l->state == LINK_CLOSING) return;
    if (!l->inbound && l->channel == PEER_CHANNEL_RAFT) {
        link_close(l, 0);
        return;
    }
    l->peer_done = 1;
    uv_read_stop((uv_stream_t *)&l->tcp);
    if (uv_shutdown(&l->shut_req, (uv_stream_t *)&l->inner, on_inner_shut))
        l->local_done = 1; /* the local side is gone already */
    half_closed(l);
}

/* Writes n bytes of data to l's TCP socket (to_tcp) or the local user's
 * side: at once while nothing is queued that way (uv_try_write), the rest
 * copied and queued. 0, or -1. */
static int
queue_write(Link *l, int to_tcp, const void *data, size_t n)
{
    uv_stream_t *s = to_tcp ? (uv_stream_t *)&l->tcp : (uv_stream_t *)&l->inner;
    size_t *queued = to_tcp ? &l->to_tcp : &l->to_inner;

    if (*queued == 0) {
        uv_buf_t now = uv_buf_init((char *)data, (unsigned)n);
        int w = uv_try_write(s, &now, 1);
        if (w == (int)n) return 0;
        if (w < 0 && w != UV_EAGAIN) return -1;
        if (w > 0) {
            data = (const char *)data + w;
            n -= (size_t)w;
        }
    }
    WriteReq *w = malloc(sizeof *w + n);
    if (!w) return -1;
    w->l = l;
    w->to_tcp = to_tcp;
    w->n = n;
    memcpy(w->data, data, n);
    uv_buf_t b = uv_buf_init(w->data, (unsigned)n);
    if (uv_write(&w->req, s, &b, 1, on_written) != 0) {
        free(w);
        return -1;
    }
    *queued += n;
    return 0;
}

/* Sends the ciphertext TLS has produced. */
int
link_flush(Link *l)
{
    size_t n;

    while ((n = tls_conn_take_out(l->tls, l->p->obuf, sizeof l->p->obuf)))
        if (queue_write(l, 1, l->p->obuf, n) != 0) return -1;
    return 0;
}

/* No more than TLS will take (tls_conn_feed_room): a read it refused
 * would be lost. None at all (UV_ENOBUFS) cannot last: TLS's input is
 * drained before reading the network again. */
static void
alloc_tcp(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
    Link *l = h->data;
    size_t room = tls_conn_feed_room(l->tls);
    (void)hint;
    *b = uv_buf_init(
        l->p->rbuf,
        (unsigned)(room < sizeof l->p->rbuf ? room : sizeof l->p->rbuf));
}

static void
alloc_inner(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
    Link *l = h->data;
    (void)hint;
    *b = uv_buf_init(l->p->pbuf, sizeof l->p->pbuf);
}

/* Reading pauses on the side whose bytes the other cannot take: the TCP
 * side once PEER_QUEUE_MAX bytes wait for the local user, the local
 * user's once as many wait for the network; each resumes below half. */
static void
resume_reads(Link *l)
{
    if (l->tcp_paused && l->to_inner < PEER_QUEUE_MAX / 2) {
        l->tcp_paused = 0;
        uv_read_start((uv_stream_t *)&l->tcp, alloc_tcp, on_tcp_read);
        link_pump(l); /* plaintext TLS still holds */
    }
    if (l->inner_paused && l->to_tcp < PEER_QUEUE_MAX / 2) {
        l->inner_paused = 0;
        uv_read_start((uv_stream_t *)&l->inner, alloc_inner, on_inner_read);
    }
}

/* libraft's side -> TLS -> the network. EOF: libraft closed its end. */
static void
on_inner_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    Link *l = s->data;

    if (nread == 0 || l->state == LINK_CLOSING) return;
    if (nread < 0) {
        local_done(l);
        return;
    }
    for (size_t off = 0; off < (size_t)nread;) {
        ssize_t k = tls_conn_write(l->tls, b->base + off, (size_t)nread - off);
        if (k <= 0 || link_flush(l) != 0) {
            link_close(l, 0);
            return;
        }
        off += (size_t)k;
    }
    if (l->to_tcp >= PEER_QUEUE_MAX) {
        uv_read_stop(s);
        l->inner_paused = 1;
    }
}

/* Opens fd as l->inner, our end toward the local user of the link; reads
 * start once the link is open. 0, or -1 (fd closed). */
int
link_attach_inner(Link *l, int fd)
{
    uv_pipe_init(l->p->loop, &l->inner, 0);
    l->inner.data = l;
    l->inner_open = 1;
    l->handles++;
    if (uv_pipe_open(&l->inner, fd) != 0) {
        close(fd); /* a pipe never opened closes no descriptor */
        return -1;
    }
    return 0;
}

/* A socketpair whose one end becomes l->inner, open and read; returns the
 * other end, or -1. */
int
link_open_pair(Link *l)
{
    int fd[2];

    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fd) != 0) return -1;
    if (link_attach_inner(l, fd[1]) != 0) {
        close(fd[0]);
        return -1;
    }
    link_read_inner(l);
    return fd[0];
}

/* Moves what TLS holds: the handshake, then plaintext toward libraft
 * (after an inbound link's preamble). */
static void
link_pump(Link *l)
{
    if (l->state == LINK_HANDSHAKE) {
        int rc = tls_conn_handshake(l->tls);
        if (link_flush(l) != 0 || rc < 0) {
            link_close(l, 1);
            return;
        }
        if (rc == 0) return;
        peer_link_authenticated(l);
    }
    while ((l->state == LINK_PREAMBLE || l->state == LINK_OPEN) &&
           !l->tcp_paused) {
        ssize_t n = tls_conn_read(l->tls, l->p->xbuf, sizeof l->p->xbuf);
        if (n == 0) break;
        if (n == TLS_CLOSED && l->state == LINK_OPEN) {
            peer_done(l); /* close_notify: what came before still goes */
            return;
        }
        if (n < 0) {
            link_close(l, l->state != LINK_OPEN);
            return;
        }
        const unsigned char *d = (const unsigned char *)l->p->xbuf;
        if (l->state == LINK_PREAMBLE) {
            ssize_t k = peer_link_preamble(l, d, (size_t)n);
            if (k < 0) return;
            d += k;
            n -= k;
        }
        if (n > 0 && queue_write(l, 0, d, (size_t)n) != 0) {
            link_close(l, 0);
            return;
        }
        if (l->to_inner >= PEER_QUEUE_MAX) {
            uv_read_stop((uv_stream_t *)&l->tcp);
            l->tcp_paused = 1;
        }
    }
    if (l->state != LINK_CLOSING && link_flush(l) != 0) link_close(l, 0);
}

/* The network -> TLS. */
static void
on_tcp_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    Link *l = s->data;

    if (nread == 0 || l->state == LINK_CLOSING) return;
    if (nread < 0 && l->state == LINK_OPEN) {
        peer_done(l); /* a FIN without close_notify: the same */
        return;
    }
    if (nread < 0 || tls_conn_feed(l->tls, b->base, (size_t)nread) != 0) {
        link_close(l, nread >= 0 || l->state < LINK_OPEN);
        return;
    }
    link_pump(l);
}

void
link_start(Link *l)
{
    uv_os_fd_t fd;

    if (uv_fileno((uv_handle_t *)&l->tcp, &fd) == 0) peer_tune_fd(fd);
    if (!l->inbound) l->state = LINK_HANDSHAKE;
    uv_read_start((uv_stream_t *)&l->tcp, alloc_tcp, on_tcp_read);
    if (!l->inbound) link_pump(l); /* the ClientHello */
}

void
link_read_inner(Link *l)
{
    uv_read_start((uv_stream_t *)&l->inner, alloc_inner, on_inner_read);
}

/* A new link with its TCP handle and deadline timer started; NULL when
 * memory or credentials are lacking. */
Link *
link_new(Peer *p, int inbound)
{
    Link *l = calloc(1, sizeof *l);
    TlsCreds *c = tls_source_get(p->tls);

    if (!l || !c || !(l->tls = tls_conn_new(c, inbound))) {
        if (c) tls_creds_unref(c);
        free(l);
        return NULL;
    }
    tls_creds_unref(c);
    l->p = p;
    l->inbound = inbound;
    l->state = inbound ? LINK_HANDSHAKE : LINK_CONNECT;
    uv_tcp_init(p->loop, &l->tcp);
    uv_timer_init(p->loop, &l->timer);
    l->tcp.data = l->timer.data = l;
    l->handles = 2;
    uv_timer_start(&l->timer, on_deadline, PEER_HANDSHAKE_MS, 0);
    l->next = p->links;
    if (p->links) p->links->prev = l;
    p->links = l;
    return l;
}

void
link_on_connected(uv_connect_t *req, int status)
{
    Link *l = req->data;

    if (l->state == LINK_CLOSING) return;
    if (status < 0) {
        link_close(l, 0);
        return;
    }
    link_start(l);
}
