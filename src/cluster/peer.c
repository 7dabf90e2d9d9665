/* peer.c - the Raft transport over mutual TLS (see peer.h).
 *
 * libraft 0.15 facts it relies on (src/uv_recv.c, src/uv_send.c,
 * src/uv_tcp.c of v0.15.0): the stream handed to the accept or connect
 * callback is libraft's from then on, closed with uv_close and freed with
 * raft_free, so it is allocated with raft_malloc; the accept callback must
 * not run once close has begun; a connect request must end in its callback
 * exactly once (RAFT_CANCELED once close has begun); close ends with its
 * callback once no handle of ours is open.
 */
#include "cluster/peer.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <raft.h>

#define PEER_MAGIC "RSPEER01"
#define READ_CHUNK 65536

enum { LINK_CONNECT, LINK_HANDSHAKE, LINK_PREAMBLE, LINK_OPEN, LINK_CLOSING };

typedef struct Peer Peer;

/* One connection: TCP with TLS toward the peer, a socketpair end toward
 * libraft once authenticated. */
typedef struct Link {
    Peer *p;
    struct Link *prev, *next;
    int inbound;
    int state;
    raft_id id; /* outbound: asked for; inbound: from the certificate */
    uv_tcp_t tcp;
    uv_timer_t timer; /* the handshake's deadline */
    uv_pipe_t inner;  /* our end of the socketpair, once open */
    int inner_open;
    int handles; /* ours still open */
    uv_connect_t conn_req;
    struct raft_uv_connect *req; /* outbound, until its callback */
    raft_uv_connect_cb cb;
    TlsConn *tls;
    unsigned char pre[PEER_PREAMBLE_LEN];
    size_t pre_len;
    size_t to_inner, to_tcp; /* bytes queued in each direction */
    int tcp_paused, inner_paused;
} Link;

struct Peer {
    struct raft_uv_transport *t;
    uv_loop_t *loop;
    ClusterConfig cfg;
    TlsSource *tls;
    uv_tcp_t listener;
    int listening;
    raft_uv_accept_cb accept_cb;
    Link *links;
    int pending_in;
    int closing;
    raft_uv_transport_close_cb close_cb;
    _Atomic uint64_t refused;
    /* rbuf: TCP reads; pbuf: libraft's side's reads; obuf: ciphertext out;
     * xbuf: plaintext out of TLS. Each is used up within one callback. */
    char rbuf[READ_CHUNK], pbuf[READ_CHUNK], obuf[READ_CHUNK], xbuf[READ_CHUNK];
};

/* A write in flight: the bytes live until its callback. */
typedef struct WriteReq {
    uv_write_t req;
    Link *l;
    int to_tcp;
    size_t n;
    char data[];
} WriteReq;

static void link_close(Link *l, int refused);
static void tcp_pump(Link *l);

static int
parse_addr(const char *addr, struct sockaddr_in *sa)
{
    char host[64];
    const char *colon = strrchr(addr, ':');
    size_t hl = colon ? (size_t)(colon - addr) : 0;

    if (!colon || hl == 0 || hl >= sizeof host) return -1;
    memcpy(host, addr, hl);
    host[hl] = '\0';
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port <= 0 || port > 65535) return -1;
    return uv_ip4_addr(host, (int)port, sa) == 0 ? 0 : -1;
}

static const ClusterPeer *
voter(const Peer *p, raft_id id)
{
    int i = cluster_find(&p->cfg, id);
    return i < 0 ? NULL : &p->cfg.voters[i];
}

static void
put_u64le(unsigned char *b, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t
get_u64le(const unsigned char *b)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | b[i];
    return v;
}

/* ---- closing ---- */

static void
maybe_closed(Peer *p)
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
    maybe_closed(p);
}

/* Ends l: an outbound request still waiting hears of it (cancelled when
 * the transport closes), every handle of ours is closed, l is freed once
 * they are. refused counts it in peer_refused. */
static void
link_close(Link *l, int refused)
{
    Peer *p = l->p;

    if (l->state == LINK_CLOSING) return;
    if (refused) atomic_fetch_add(&p->refused, 1);
    if (l->inbound && l->state < LINK_OPEN) p->pending_in--;
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

/* The handshake's deadline: an incoming link not authenticated by then is
 * refused; an outgoing one failed (the peer may be down). */
static void
on_deadline(uv_timer_t *t)
{
    Link *l = t->data;
    link_close(l, l->inbound);
}

/* ---- writes ---- */

static void resume_reads(Link *l);

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
    else if (l->state != LINK_CLOSING)
        resume_reads(l);
}

/* Queues n bytes of data on l's TCP socket (to_tcp) or libraft's side. */
static int
queue_write(Link *l, int to_tcp, const void *data, size_t n)
{
    WriteReq *w = malloc(sizeof *w + n);

    if (!w) return -1;
    w->l = l;
    w->to_tcp = to_tcp;
    w->n = n;
    memcpy(w->data, data, n);
    uv_buf_t b = uv_buf_init(w->data, (unsigned)n);
    uv_stream_t *s = to_tcp ? (uv_stream_t *)&l->tcp : (uv_stream_t *)&l->inner;
    if (uv_write(&w->req, s, &b, 1, on_written) != 0) {
        free(w);
        return -1;
    }
    if (to_tcp)
        l->to_tcp += n;
    else
        l->to_inner += n;
    return 0;
}

/* Sends the ciphertext TLS has produced. */
static int
flush_tls(Link *l)
{
    size_t n;

    while ((n = tls_conn_take_out(l->tls, l->p->obuf, sizeof l->p->obuf)))
        if (queue_write(l, 1, l->p->obuf, n) != 0) return -1;
    return 0;
}

/* ---- the two directions ---- */

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
 * side once PEER_QUEUE_MAX bytes wait for libraft, libraft's once as many
 * wait for the network; each resumes below half of it. */
static void on_tcp_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b);
static void on_inner_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b);

static void
resume_reads(Link *l)
{
    if (l->tcp_paused && l->to_inner < PEER_QUEUE_MAX / 2) {
        l->tcp_paused = 0;
        uv_read_start((uv_stream_t *)&l->tcp, alloc_tcp, on_tcp_read);
        tcp_pump(l); /* plaintext TLS still holds */
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
        tls_conn_close_notify(l->tls);
        flush_tls(l);
        link_close(l, 0);
        return;
    }
    for (size_t off = 0; off < (size_t)nread;) {
        ssize_t k = tls_conn_write(l->tls, b->base + off, (size_t)nread - off);
        if (k <= 0 || flush_tls(l) != 0) {
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

/* ---- authentication ---- */

/* The socketpair: one end ours (l->inner), the other a libraft stream
 * (raft_malloc'd, libraft's to close and free). NULL on failure. */
static uv_stream_t *
open_inner(Link *l)
{
    int fd[2];
    uv_pipe_t *theirs = raft_malloc(sizeof *theirs);

    if (!theirs) return NULL;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fd) != 0) {
        raft_free(theirs);
        return NULL;
    }
    uv_pipe_init(l->p->loop, &l->inner, 0);
    l->inner.data = l;
    l->inner_open = 1;
    l->handles++;
    uv_pipe_init(l->p->loop, theirs, 0);
    /* uv_close of a pipe never opened closes no descriptor: a descriptor
     * not opened is closed here, ours once opened with the link */
    int mine = uv_pipe_open(&l->inner, fd[1]) == 0;
    if (!mine || uv_pipe_open(theirs, fd[0]) != 0) {
        if (!mine) close(fd[1]);
        close(fd[0]);
        uv_close((uv_handle_t *)theirs, (uv_close_cb)raft_free);
        return NULL;
    }
    uv_read_start((uv_stream_t *)&l->inner, alloc_inner, on_inner_read);
    return (uv_stream_t *)theirs;
}

/* An inbound link past its preamble: older links of the same peer beyond
 * PEER_LINKS_PER_ID - 1 are closed (a peer that reconnects is believed
 * over its own stale links), then libraft gets the stream. */
static void
hand_inbound(Link *l)
{
    Peer *p = l->p;
    int same = 0;

    for (Link *o = p->links; o; o = o->next)
        if (o != l && o->inbound && o->state == LINK_OPEN && o->id == l->id &&
            ++same >= PEER_LINKS_PER_ID)
            link_close(o, 0);
    uv_stream_t *s = open_inner(l);
    if (!s) {
        link_close(l, 0);
        return;
    }
    p->pending_in--;
    l->state = LINK_OPEN;
    uv_timer_stop(&l->timer);
    p->accept_cb(p->t, l->id, voter(p, l->id)->addr, s);
}

/* An outbound link whose server proved the id asked for: the preamble
 * goes out, then libraft gets the stream. */
static void
hand_outbound(Link *l)
{
    unsigned char pre[PEER_PREAMBLE_LEN];

    memcpy(pre, PEER_MAGIC, 8);
    put_u64le(pre + 8, l->p->cfg.self_id);
    put_u64le(pre + 16, PEER_CHANNEL_RAFT);
    uv_stream_t *s = NULL;
    if (tls_conn_write(l->tls, pre, sizeof pre) != (ssize_t)sizeof pre ||
        flush_tls(l) != 0 || !(s = open_inner(l))) {
        link_close(l, 0);
        return;
    }
    struct raft_uv_connect *req = l->req;
    l->req = NULL;
    l->state = LINK_OPEN;
    uv_timer_stop(&l->timer);
    l->cb(req, s, 0);
}

/* A completed handshake: the certificate's node id must be a voter other
 * than this node and, outbound, the one asked for. */
static void
handshake_done(Link *l)
{
    uint64_t id;
    Peer *p = l->p;

    if (tls_peer_node_id(tls_conn_ssl(l->tls), &id) != 0 || !voter(p, id) ||
        id == p->cfg.self_id || (!l->inbound && id != l->id)) {
        link_close(l, 1);
        return;
    }
    l->id = id;
    if (l->inbound)
        l->state = LINK_PREAMBLE;
    else
        hand_outbound(l);
}

/* Takes preamble bytes from data; returns how many, or -1 on a bad one
 * (closed). Once complete the link is handed to libraft. */
static ssize_t
take_preamble(Link *l, const unsigned char *data, size_t n)
{
    size_t k = PEER_PREAMBLE_LEN - l->pre_len;

    if (k > n) k = n;
    memcpy(l->pre + l->pre_len, data, k);
    l->pre_len += k;
    if (l->pre_len < PEER_PREAMBLE_LEN) return (ssize_t)k;
    if (memcmp(l->pre, PEER_MAGIC, 8) != 0 || get_u64le(l->pre + 8) != l->id ||
        get_u64le(l->pre + 16) != PEER_CHANNEL_RAFT) {
        link_close(l, 1);
        return -1;
    }
    hand_inbound(l);
    return l->state == LINK_OPEN ? (ssize_t)k : -1;
}

/* Moves what TLS holds: the handshake, then plaintext toward libraft
 * (after an inbound link's preamble). */
static void
tcp_pump(Link *l)
{
    if (l->state == LINK_HANDSHAKE) {
        int rc = tls_conn_handshake(l->tls);
        if (flush_tls(l) != 0 || rc < 0) {
            link_close(l, 1);
            return;
        }
        if (rc == 0) return;
        handshake_done(l);
    }
    while ((l->state == LINK_PREAMBLE || l->state == LINK_OPEN) &&
           !l->tcp_paused) {
        ssize_t n = tls_conn_read(l->tls, l->p->xbuf, sizeof l->p->xbuf);
        if (n == 0) break;
        if (n < 0) {
            link_close(l, l->state != LINK_OPEN);
            return;
        }
        const unsigned char *d = (const unsigned char *)l->p->xbuf;
        if (l->state == LINK_PREAMBLE) {
            ssize_t k = take_preamble(l, d, (size_t)n);
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
    if (l->state != LINK_CLOSING && flush_tls(l) != 0) link_close(l, 0);
}

/* The network -> TLS. */
static void
on_tcp_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    Link *l = s->data;

    if (nread == 0 || l->state == LINK_CLOSING) return;
    if (nread < 0 || tls_conn_feed(l->tls, b->base, (size_t)nread) != 0) {
        link_close(l, nread >= 0 || l->state < LINK_OPEN);
        return;
    }
    tcp_pump(l);
}

/* ---- links ---- */

/* Keepalive and a bound on unacknowledged data: a peer cut off by a
 * partition is noticed in about a minute rather than fifteen. */
static void
tune_tcp(uv_tcp_t *t)
{
    uv_os_fd_t fd;
    unsigned timeout_ms = 60000;

    uv_tcp_nodelay(t, 1);
    uv_tcp_keepalive(t, 1, 30);
    if (uv_fileno((uv_handle_t *)t, &fd) == 0)
        setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &timeout_ms,
                   sizeof timeout_ms);
}

/* A new link with its TCP handle and deadline timer started; NULL when
 * memory or credentials are lacking. */
static Link *
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

static void
on_accept(uv_stream_t *server, int status)
{
    Peer *p = server->data;
    Link *l;

    if (status < 0 || p->closing) return;
    if (!(l = link_new(p, 1))) {
        uv_tcp_t *t = malloc(sizeof *t); /* refuse: accept and close */
        if (!t) return;
        uv_tcp_init(p->loop, t);
        if (uv_accept(server, (uv_stream_t *)t) == 0)
            atomic_fetch_add(&p->refused, 1);
        uv_close((uv_handle_t *)t, (uv_close_cb)free);
        return;
    }
    p->pending_in++;
    if (uv_accept(server, (uv_stream_t *)&l->tcp) != 0 ||
        p->pending_in > PEER_PENDING_MAX) {
        link_close(l, 1);
        return;
    }
    tune_tcp(&l->tcp);
    uv_read_start((uv_stream_t *)&l->tcp, alloc_tcp, on_tcp_read);
}

static void
on_connected(uv_connect_t *req, int status)
{
    Link *l = req->data;

    if (l->state == LINK_CLOSING) return;
    if (status < 0) {
        link_close(l, 0);
        return;
    }
    tune_tcp(&l->tcp);
    l->state = LINK_HANDSHAKE;
    uv_read_start((uv_stream_t *)&l->tcp, alloc_tcp, on_tcp_read);
    tcp_pump(l); /* the ClientHello */
}

/* ---- struct raft_uv_transport's methods ---- */

static int
t_init(struct raft_uv_transport *t, raft_id id, const char *address)
{
    Peer *p = t->impl;

    if (id != p->cfg.self_id || !voter(p, id) ||
        strcmp(voter(p, id)->addr, address) != 0) {
        snprintf(t->errmsg, sizeof t->errmsg,
                 "peer transport: %llu at %s is not this voter",
                 (unsigned long long)id, address);
        return RAFT_INVALID;
    }
    return 0;
}

static int
t_listen(struct raft_uv_transport *t, raft_uv_accept_cb cb)
{
    Peer *p = t->impl;
    struct sockaddr_in sa;
    const char *addr = voter(p, p->cfg.self_id)->addr;
    int rv;

    if (parse_addr(addr, &sa) != 0) {
        snprintf(t->errmsg, sizeof t->errmsg, "bad address %s", addr);
        return RAFT_INVALID;
    }
    uv_tcp_init(p->loop, &p->listener);
    p->listener.data = p;
    p->listening = 1;
    if ((rv = uv_tcp_bind(&p->listener, (struct sockaddr *)&sa, 0)) != 0 ||
        (rv = uv_listen((uv_stream_t *)&p->listener, 64, on_accept)) != 0) {
        snprintf(t->errmsg, sizeof t->errmsg, "listen on %s: %s", addr,
                 uv_strerror(rv));
        return RAFT_IOERR; /* closed by t_close */
    }
    p->accept_cb = cb;
    return 0;
}

static int
t_connect(struct raft_uv_transport *t, struct raft_uv_connect *req, raft_id id,
          const char *address, raft_uv_connect_cb cb)
{
    Peer *p = t->impl;
    const ClusterPeer *v = voter(p, id);
    struct sockaddr_in sa;
    Link *l;

    /* Only a configured voter at its configured address: a Raft message
     * naming another id or address makes no connection. */
    if (p->closing || !v || id == p->cfg.self_id ||
        strcmp(v->addr, address) != 0 || parse_addr(v->addr, &sa) != 0) {
        atomic_fetch_add(&p->refused, 1);
        return RAFT_NOCONNECTION;
    }
    if (!(l = link_new(p, 0))) return RAFT_NOMEM;
    l->id = id;
    l->req = req;
    l->cb = cb;
    l->conn_req.data = l;
    if (uv_tcp_connect(&l->conn_req, &l->tcp, (struct sockaddr *)&sa,
                       on_connected) != 0) {
        l->req = NULL; /* refused synchronously: no callback */
        link_close(l, 0);
        return RAFT_NOCONNECTION;
    }
    return 0;
}

static void
on_listener_closed(uv_handle_t *h)
{
    Peer *p = h->data;

    p->listening = 0;
    maybe_closed(p);
}

static void
t_close(struct raft_uv_transport *t, raft_uv_transport_close_cb cb)
{
    Peer *p = t->impl;

    p->closing = 1;
    p->close_cb = cb;
    if (p->listening) uv_close((uv_handle_t *)&p->listener, on_listener_closed);
    for (Link *l = p->links; l; l = l->next)
        link_close(l, 0);
    maybe_closed(p);
}

int
peer_init(struct raft_uv_transport *t, uv_loop_t *loop,
          const ClusterConfig *cfg, TlsSource *tls, char *err, size_t errcap)
{
    Peer *p = calloc(1, sizeof *p);

    if (!p) return cluster_errf(err, errcap, "peer transport: no memory");
    p->t = t;
    p->loop = loop;
    p->cfg = *cfg;
    p->tls = tls;
    t->impl = p;
    t->init = t_init;
    t->listen = t_listen;
    t->connect = t_connect;
    t->close = t_close;
    return 0;
}

void
peer_free(struct raft_uv_transport *t)
{
    free(t->impl);
    t->impl = NULL;
}

uint64_t
peer_refused(const struct raft_uv_transport *t)
{
    const Peer *p = t->impl;
    return p ? atomic_load(&p->refused) : 0;
}

/* ---- policy ---- */

static int
on_loopback(const char *addr)
{
    struct sockaddr_in sa;
    return parse_addr(addr, &sa) == 0 &&
           (ntohl(sa.sin_addr.s_addr) >> 24) == 127;
}

int
peer_policy_check(const ClusterConfig *cc, const char *cert, const char *key,
                  const char *ca, int insecure, char *err, size_t errcap)
{
    int given = !!cert + !!key + !!ca;

    if (given && given < 3)
        return cluster_errf(err, errcap,
                            "--cluster-cert, --cluster-key and --cluster-ca "
                            "go together");
    if (given && insecure)
        return cluster_errf(err, errcap,
                            "--cluster-insecure contradicts --cluster-cert");
    if (given || insecure) return 0;
    for (int i = 0; i < cc->n; i++)
        if (!on_loopback(cc->voters[i].addr))
            return cluster_errf(err, errcap,
                                "voter %llu (%s) is off loopback: the nodes "
                                "need --cluster-cert, --cluster-key and "
                                "--cluster-ca (mutual TLS), or "
                                "--cluster-insecure to talk in plaintext",
                                (unsigned long long)cc->voters[i].id,
                                cc->voters[i].addr);
    return 0;
}

int
peer_open_creds(const ClusterConfig *cc, const char *cert, const char *key,
                const char *ca, TlsSource **out, int *key_exposed, char *err,
                size_t errcap)
{
    TlsSource *src;

    if (tls_source_open(cert, key, ca, &src, err, errcap) < 0) return -1;
    TlsCreds *c = tls_source_get(src);
    uint64_t id = c ? tls_creds_self_id(c) : 0;
    *key_exposed = c ? tls_creds_key_exposed(c) : 0;
    if (c) tls_creds_unref(c);
    if (id != cc->self_id) {
        tls_source_close(src);
        return cluster_errf(err, errcap,
                            "%s names node %llu (rockstalk-node-ID), not "
                            "this node, %llu",
                            cert, (unsigned long long)id,
                            (unsigned long long)cc->self_id);
    }
    *out = src;
    return 0;
}
