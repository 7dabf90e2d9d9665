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

#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <raft.h>

#include "cluster/peer_impl.h"

/* ---- authentication ---- */

/* The other end of link_open_pair as a libraft stream (raft_malloc'd, libraft's
 * to close and free); NULL on failure. */
static uv_stream_t *
raft_stream(Link *l)
{
    uv_pipe_t *theirs = raft_malloc(sizeof *theirs);
    int fd = theirs ? link_open_pair(l) : -1;

    if (fd < 0) {
        raft_free(theirs);
        return NULL;
    }
    uv_pipe_init(l->p->loop, theirs, 0);
    if (uv_pipe_open(theirs, fd) != 0) {
        close(fd); /* a pipe never opened closes no descriptor */
        uv_close((uv_handle_t *)theirs, (uv_close_cb)raft_free);
        return NULL;
    }
    return (uv_stream_t *)theirs;
}

/* An inbound Raft link past its preamble: older Raft links of the same
 * peer beyond PEER_LINKS_PER_ID - 1 are closed (a peer that reconnects is
 * believed over its own stale links), then libraft gets the stream. */
static int
hand_raft(Link *l)
{
    Peer *p = l->p;
    int same = 0;

    for (Link *o = p->links; o; o = o->next)
        if (o != l && o->inbound && o->state == LINK_OPEN &&
            o->channel == PEER_CHANNEL_RAFT && o->id == l->id &&
            ++same >= PEER_LINKS_PER_ID)
            link_close(o, 0);
    uv_stream_t *s = raft_stream(l);
    if (!s) return -1;
    l->state = LINK_OPEN;
    p->accept_cb(p->t, l->id, peer_voter(&p->cfg, l->id)->addr, s);
    return 0;
}

void
peer_service_free(PeerService *svc)
{
    if (svc->fd >= 0) close(svc->fd);
    tls_conn_free(svc->tls);
    free(svc->head);
    svc->fd = -1;
    svc->tls = NULL;
    svc->head = NULL;
    svc->head_len = 0;
}

/* A relayed client's link with nothing queued either way leaves the
 * transport whole: its socket (a duplicate: closing the handle closes the
 * original), its session and the plaintext read past the preamble go to
 * serve, and the link closes. 1 done, 0 not possible here, -1 failed. */
static int
hand_whole(Link *l, const unsigned char *rest, size_t n)
{
    Peer *p = l->p;
    PeerService svc = {.channel = l->channel, .peer_id = l->id, .fd = -1};
    uv_os_fd_t fd;

    if ((l->channel != PEER_CHANNEL_CLIENT &&
         l->channel != PEER_CHANNEL_CLIENT_CN &&
         l->channel != PEER_CHANNEL_CLIENT_UNIX &&
         l->channel != PEER_CHANNEL_MUX) ||
        l->to_tcp || l->to_inner || tls_conn_pending_out(l->tls) ||
        uv_fileno((uv_handle_t *)&l->tcp, &fd) != 0)
        return 0;
    if (n && !(svc.head = malloc(n))) return -1;
    if ((svc.fd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0) {
        free(svc.head);
        return -1;
    }
    if (n) memcpy(svc.head, rest, n);
    svc.head_len = n;
    svc.tls = l->tls;
    l->tls = NULL;
    uv_read_stop((uv_stream_t *)&l->tcp);
    link_close(l, 0);
    p->serve(p->serve_arg, &svc);
    return 1;
}

/* An inbound link of another channel: the owner's serve gets the link
 * whole (hand_whole) or a socketpair's end. rest (n bytes) is plaintext
 * after the preamble. 1 handed whole (the link is closed), 0 a pair, -1
 * failed. */
static int
hand_service(Link *l, const unsigned char *rest, size_t n)
{
    Peer *p = l->p;
    PeerService svc = {.channel = l->channel, .peer_id = l->id, .fd = -1};
    int rc;

    if (!p->serve) return -1;
    if ((rc = hand_whole(l, rest, n)) != 0) return rc;
    /* a certificate's CN comes first: only the loop's connection reads it */
    if (l->channel == PEER_CHANNEL_CLIENT_CN ||
        l->channel == PEER_CHANNEL_MUX) /* the loop's link only */
        return -1;
    if ((svc.fd = link_open_pair(l)) < 0) return -1;
    l->state = LINK_OPEN;
    p->serve(p->serve_arg, &svc);
    return 0;
}

/* An outbound (Raft) link whose server proved the id asked for: the
 * preamble goes out, then libraft gets the stream. */
static void
hand_outbound(Link *l)
{
    unsigned char pre[PEER_PREAMBLE_LEN];
    uv_stream_t *s = NULL;

    peer_preamble_put(pre, l->p->cfg.self_id, l->channel);
    if (tls_conn_write(l->tls, pre, sizeof pre) != (ssize_t)sizeof pre ||
        link_flush(l) != 0 || !(s = raft_stream(l))) {
        link_close(l, 0);
        return;
    }
    l->state = LINK_OPEN;
    uv_timer_stop(&l->timer);
    struct raft_uv_connect *req = l->req;
    l->req = NULL;
    l->cb(req, s, 0);
}

/* A completed handshake: the certificate's node id must be a voter other
 * than this node and, outbound, the one asked for. */
void
peer_link_authenticated(Link *l)
{
    uint64_t id;
    Peer *p = l->p;

    if (tls_peer_node_id(tls_conn_ssl(l->tls), &id) != 0 ||
        !peer_voter(&p->cfg, id) || id == p->cfg.self_id ||
        (!l->inbound && id != l->id)) {
        link_close(l, 1);
        return;
    }
    l->id = id;
    if (l->inbound)
        l->state = LINK_PREAMBLE;
    else
        hand_outbound(l);
}

/* Takes preamble bytes from data; returns how many, or -1 (closed) on a
 * bad one. Once complete the link goes to libraft or to serve. */
ssize_t
peer_link_preamble(Link *l, const unsigned char *data, size_t n)
{
    size_t k = PEER_PREAMBLE_LEN - l->pre_len;

    if (k > n) k = n;
    memcpy(l->pre + l->pre_len, data, k);
    l->pre_len += k;
    if (l->pre_len < PEER_PREAMBLE_LEN) return (ssize_t)k;
    l->channel = peer_preamble_check(l->pre, l->id);
    if (!l->channel) {
        link_close(l, 1);
        return -1;
    }
    l->p->pending_in--;
    l->state = LINK_OPEN; /* no longer pending, whatever follows */
    uv_timer_stop(&l->timer);
    int rc = l->channel == PEER_CHANNEL_RAFT ? hand_raft(l)
                                             : hand_service(l, data + k, n - k);
    if (rc < 0) {
        link_close(l, l->channel != PEER_CHANNEL_RAFT && !l->p->serve);
        return -1;
    }
    return rc > 0 ? -1 : (ssize_t)k; /* whole: nothing more here */
}

/* ---- links ---- */

/* Closes the incoming link that has waited longest for authentication
 * (the list is newest first). */
static void
close_oldest_pending(Peer *p)
{
    Link *old = NULL;

    for (Link *l = p->links; l; l = l->next)
        if (link_pending(l)) old = l;
    if (old) link_close(old, 1);
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
    if (uv_accept(server, (uv_stream_t *)&l->tcp) != 0) {
        link_close(l, 1);
        return;
    }
    if (p->pending_in > PEER_PENDING_MAX) close_oldest_pending(p);
    link_start(l);
}

/* ---- struct raft_uv_transport's methods ---- */

static int
t_init(struct raft_uv_transport *t, raft_id id, const char *address)
{
    Peer *p = t->impl;

    if (id != p->cfg.self_id || !peer_voter(&p->cfg, id) ||
        !cluster_addr_eq(peer_voter(&p->cfg, id)->addr, address)) {
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
    const char *addr = peer_voter(&p->cfg, p->cfg.self_id)->addr;
    int rv;

    if (peer_parse_addr(addr, &sa) != 0) {
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
    const ClusterPeer *v = peer_voter(&p->cfg, id);
    struct sockaddr_in sa;
    Link *l;

    /* Only a configured voter at its configured address: a Raft message
     * naming another id or address makes no connection. */
    if (p->closing || !v || id == p->cfg.self_id ||
        !cluster_addr_eq(v->addr, address) ||
        peer_parse_addr(v->addr, &sa) != 0) {
        atomic_fetch_add(&p->refused, 1);
        return RAFT_NOCONNECTION;
    }
    if (!(l = link_new(p, 0))) return RAFT_NOMEM;
    l->id = id;
    l->channel = PEER_CHANNEL_RAFT;
    l->req = req;
    l->cb = cb;
    l->conn_req.data = l;
    if (uv_tcp_connect(&l->conn_req, &l->tcp, (struct sockaddr *)&sa,
                       link_on_connected) != 0) {
        l->req = NULL; /* refused synchronously: no callback */
        link_close(l, 0);
        return RAFT_NOCONNECTION;
    }
    return 0;
}

void
peer_serve(struct raft_uv_transport *tr, PeerServeFn fn, void *arg)
{
    Peer *p = tr->impl;

    p->serve = fn;
    p->serve_arg = arg;
}

static void
on_listener_closed(uv_handle_t *h)
{
    Peer *p = h->data;

    p->listening = 0;
    peer_maybe_closed(p);
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
    peer_maybe_closed(p);
}

int
peer_init(struct raft_uv_transport *t, uv_loop_t *loop,
          const ClusterConfig *cfg, TlsSource *tls, char *err, size_t errcap)
{
    Peer *p = calloc(1, sizeof *p);

    if (!p) return errfmt(err, errcap, "peer transport: no memory");
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
peer_set_members(struct raft_uv_transport *t, const ClusterConfig *cfg)
{
    Peer *p = t->impl;
    uint64_t self = p->cfg.self_id;
    int k = cluster_find(&p->cfg, self);
    ClusterPeer me;

    if (k >= 0) me = p->cfg.voters[k];
    p->cfg = *cfg;
    p->cfg.self_id = self;
    /* this node keeps its own entry (t_listen's address) while a
     * configuration without it is replayed or it is being removed */
    if (k >= 0 && cluster_find(&p->cfg, self) < 0 &&
        p->cfg.n < CLUSTER_MAX_VOTERS) {
        p->cfg.voters[p->cfg.n++] = me;
        cluster_sort(&p->cfg);
    }
}

void
peer_free(struct raft_uv_transport *t)
{
    Peer *p = t->impl;

    if (!p) return;
    free(p);
    t->impl = NULL;
}

uint64_t
peer_refused(const struct raft_uv_transport *t)
{
    const Peer *p = t->impl;
    return p ? atomic_load(&p->refused) : 0;
}
