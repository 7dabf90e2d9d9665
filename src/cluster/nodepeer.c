/* nodepeer.c - what a cluster node does with its peers out of band (see
 * node_impl.h): the state stream, served to a peer that fell behind and
 * fetched from one, and the links peers open to this node over the nodes'
 * mutual TLS (relayed clients, state requests). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/log.h"
#include "cluster/node_impl.h"
#include "cluster/nodestep.h"
#include "cluster/peerauth.h"
#include "cluster/peerdial.h"
#include "net/net.h"
#include "store/store.h"

/* How long a node that needs the state out of band keeps trying its peers
 * (seconds) before it gives up (the Raft node fails; a restart retries). */
#define FETCH_TRY_S 120
/* Its connect, send and receive timeouts, seconds. */
#define FETCH_IO_S 30

/* A snapshot sender's work. */
typedef struct Ship {
    Node *n;
    int slot; /* in n->ship_fd */
    int fd;
    uint64_t applied;
} Ship;

/* Reads the sender's "SNAPSHOT <applied>" line from fd (blocking, its
 * receive timeout); returns fd once applied is at least want, else closes
 * it, says why in why[0..whycap) and returns -1. */
static int
fetch_reply(int fd, uint64_t want, char *why, size_t whycap)
{
    struct timeval tv = {FETCH_IO_S, 0};
    char line[64];
    size_t got = 0;
    unsigned long long applied;

    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    while (got < sizeof line - 1) { /* the reply line, byte by byte */
        ssize_t r = recv(fd, line + got, 1, 0);
        if (r <= 0) {
            snprintf(why, whycap, "no reply line (%s)",
                     r == 0 ? "closed" : strerror(errno));
            goto fail;
        }
        if (line[got++] == '\n') break;
    }
    line[got] = '\0';
    if (sscanf(line, "SNAPSHOT %llu\r\n", &applied) != 1) {
        for (size_t i = 0; i < got; i++) /* printable, for the log */
            if (line[i] < 0x20 || line[i] > 0x7e) line[i] = ' ';
        snprintf(why, whycap, "answered \"%.40s\"", line);
        goto fail;
    }
    if (applied < want) {
        snprintf(why, whycap, "its leader applied %llu only", applied);
        goto fail;
    }
    return fd;
fail:
    close(fd);
    return -1;
}

/* Asks member k of m for the state: over the nodes' mutual TLS (the
 * snapshot channel, peer_dial) when n->tls, else on its client port
 * (rockstalk-snapshot). Blocking, FETCH_IO_S timeouts. Returns the stream
 * once the peer answered SNAPSHOT with at least want applied, else -1 with
 * the reason in why[0..whycap). */
static int
fetch_open(Node *n, const ClusterConfig *m, int k, uint64_t want, char *why,
           size_t whycap)
{
    struct timeval tv = {FETCH_IO_S, 0};
    struct sockaddr_in a;
    int fd;

    if (n->tls) {
        fd = peer_dial(n->tls, m, m->voters[k].id, PEER_CHANNEL_SNAPSHOT,
                       FETCH_IO_S * 1000, why, whycap);
        return fd < 0 ? -1 : fetch_reply(fd, want, why, whycap);
    }
    cluster_client_addr(m, k, n->port, &a);
    if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
        snprintf(why, whycap, "socket: %s", strerror(errno));
        return -1;
    }
    net_keepalive(fd);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, (const struct sockaddr *)&a, sizeof a) < 0 ||
        send(fd, "rockstalk-snapshot\r\n", 20, MSG_NOSIGNAL) != 20) {
        snprintf(why, whycap, "connect or send: %s", strerror(errno));
        close(fd);
        return -1;
    }
    return fetch_reply(fd, want, why, whycap);
}

/* One attempt at member k of m: 1 when the state as of index or later is
 * in the shards now, else 0 with the reason in why. */
static int
fetch_from(Node *n, const ClusterConfig *m, int k, uint64_t index, char *why,
           size_t whycap)
{
    int fd = fetch_open(n, m, k, index, why, whycap);
    if (fd < 0) return 0;
    int64_t t0 = mono_ns();
    int rc = store_ship_recv(n->store, fd, why, whycap);
    close(fd);
    if (rc < 0) return 0;
    uint64_t got = store_raft_applied(n->store);
    if (got < index) {
        snprintf(why, whycap, "its stream held the state as of entry %llu only",
                 (unsigned long long)got);
        return 0;
    }
    log_msg(0,
            "cluster: fetched the state as of entry %llu from node %llu in "
            "%.3f s",
            (unsigned long long)got, (unsigned long long)m->voters[k].id,
            (double)(mono_ns() - t0) / 1e9);
    return 1;
}

int
node_fetch_state(Node *n, uint64_t index)
{
    char why[256], last[CLUSTER_MAX_VOTERS][256] = {{0}};
    int64_t end = mono_ns() + (int64_t)FETCH_TRY_S * NS_PER_SEC;

    log_msg(0,
            "cluster: the leader's snapshot is at entry %llu, past this "
            "node's %llu: fetching the state from a peer",
            (unsigned long long)index,
            (unsigned long long)store_raft_applied(n->store));
    while (mono_ns() < end) {
        ClusterConfig m; /* the members now: a joining node's grow */
        node_members(n, &m);
        for (int k = 0; k < m.n && k < CLUSTER_MAX_VOTERS; k++) {
            if (m.voters[k].id == m.self_id) continue;
            why[0] = '\0';
            if (fetch_from(n, &m, k, index, why, sizeof why)) {
                atomic_fetch_add(&n->fetched, 1); /* the queue is stale */
                return 0;
            }
            if (strcmp(why, last[k]) != 0) /* each new reason, once */
                log_msg(0, "cluster: state fetch from node %llu: %s",
                        (unsigned long long)m.voters[k].id, why);
            memcpy(last[k], why, sizeof why);
        }
        usleep(200000);
    }
    return -1;
}

/* The number of snapshot senders running; with shut set, first shuts
 * their sockets down, so that a send blocked on a reader that takes
 * nothing fails at once. */
static int
ship_count(Node *n, int shut)
{
    int k = 0;

    pthread_mutex_lock(&n->ship_mu);
    for (int i = 0; i < NODE_SHIP_MAX; i++) {
        if (n->ship_fd[i] < 0) continue;
        if (shut) shutdown(n->ship_fd[i], SHUT_RDWR);
        k++;
    }
    pthread_mutex_unlock(&n->ship_mu);
    return k;
}

/* A sender still running once its socket was shut down (a disk that does
 * not answer) stops the process rather than letting the store close under
 * it. */
void
node_stop_senders(Node *n)
{
    int64_t end = mono_ns() + (int64_t)NODE_SHIP_STOP_MS * 1000000;
    int k = ship_count(n, 1);

    while (k > 0 && mono_ns() < end) {
        usleep(10000);
        k = ship_count(n, 0);
    }
    if (k == 0) return;
    log_msg(0,
            "cluster: %d snapshot senders still running %d ms after "
            "their sockets were shut down; exiting with the store open",
            k, NODE_SHIP_STOP_MS);
    _exit(2);
}

static void *
ship_main(void *arg)
{
    Ship *sp = arg;
    Node *n = sp->n;
    char line[48], err[256];
    struct timeval tv = {n->ship_timeout_s, 0};
    int len = snprintf(line, sizeof line, "SNAPSHOT %llu\r\n",
                       (unsigned long long)sp->applied);

    fcntl(sp->fd, F_SETFL, fcntl(sp->fd, F_GETFL) & ~O_NONBLOCK);
    setsockopt(sp->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (send(sp->fd, line, (size_t)len, MSG_NOSIGNAL) == len &&
        store_ship_send(n->store, sp->fd, err, sizeof err) < 0)
        log_msg(1, "cluster: sending a snapshot: %s", err);
    pthread_mutex_lock(&n->ship_mu); /* stop_senders may shut it down */
    close(sp->fd);
    n->ship_fd[sp->slot] = -1;
    pthread_mutex_unlock(&n->ship_mu);
    free(sp);
    return NULL;
}

/* A free sender slot in n->ship_fd, taken with fd; -1 if all are busy. */
static int
ship_slot(Node *n, int fd)
{
    int slot = -1;

    pthread_mutex_lock(&n->ship_mu);
    for (int i = 0; i < NODE_SHIP_MAX && slot < 0; i++)
        if (n->ship_fd[i] < 0) n->ship_fd[slot = i] = fd;
    pthread_mutex_unlock(&n->ship_mu);
    return slot;
}

/* A sender of the state as of applied on fd, its slot taken; NULL (fd
 * untouched) when NODE_SHIP_MAX run or memory is lacking. */
static Ship *
ship_new(Node *n, int fd, uint64_t applied)
{
    Ship *sp = malloc(sizeof *sp);

    if (!sp || (sp->slot = ship_slot(n, fd)) < 0) {
        free(sp);
        return NULL;
    }
    sp->n = n;
    sp->fd = fd;
    sp->applied = applied;
    return sp;
}

/* Starts sp's thread; a failure closes its socket and frees its slot. */
static void
ship_run(Ship *sp)
{
    pthread_t t;

    if (pthread_create(&t, NULL, ship_main, sp) == 0) {
        pthread_detach(t);
        return;
    }
    pthread_mutex_lock(&sp->n->ship_mu);
    close(sp->fd);
    sp->n->ship_fd[sp->slot] = -1;
    pthread_mutex_unlock(&sp->n->ship_mu);
    free(sp);
}

void
node_snapshot_serve(Conn *c)
{
    Node *n = c->srv->node;
    RaftNodeStatus st;
    Ship *sp = NULL;
    int fd;

    /* with mutual TLS the state goes to authenticated peers only, over
     * the snapshot channel (node_served_cb); without it, on a plain TCP
     * client port only, where a peer asks (fetch_open): on a tls://
     * listener the raw stream would go under the client's TLS session */
    if (!n || !n->serving || !n->raft || n->tls || c->via != CONN_VIA_TCP) {
        conn_reply(c, "UNKNOWN_COMMAND\r\n", 17);
        return;
    }
    raftnode_status(n->raft, &st);
    /* close-on-exec: a step-down's exec must not keep the stream open */
    if ((fd = fcntl(c->fd, F_DUPFD_CLOEXEC, 0)) < 0) {
        conn_close(c);
        return;
    }
    if (!(sp = ship_new(n, fd, st.applied))) { /* NODE_SHIP_MAX running */
        close(fd);
        conn_reply_lit(c, "OUT_OF_MEMORY\r\n");
        return;
    }
    conn_close(c);
    ship_run(sp);
}

/* ---- connections waiting for a leader: a peer's state request ---- */

#define SNAPSHOT_REQ "rockstalk-snapshot\r\n"
#define SNAPSHOT_REQ_LEN (sizeof SNAPSHOT_REQ - 1)

/* Sets fd's SO_RCVLOWAT (bytes): poll and epoll say readable only once
 * that many are there, or at EOF or an error; a failure leaves it. */
static void
park_lowat(int fd, int bytes)
{
    setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &bytes, sizeof bytes);
}

void
node_park_unwatch(Node *n, struct Parked *p)
{
    if (!p->rd) return;
    ev_io_stop(n->loop, p->rd);
    free(p->rd);
    p->rd = NULL;
    park_lowat(p->fd, 1); /* the relay or connection reads every byte */
}

/* Parked connection i, watched no more, closed (a client that does not
 * read the replies it asked for). */
static void
park_drop(Node *n, int i)
{
    node_park_unwatch(n, &n->parked[i]);
    close(n->parked[i].fd);
    tls_sock_free(n->parked[i].tls);
    n->parked[i] = n->parked[--n->nparked];
}

/* Parked connection i asked for the state (its request still unread): a
 * sender takes its socket, as node_snapshot_serve's; with none free it gets
 * OUT_OF_MEMORY and waits on, watched still (a request consumed, as a
 * serving node's connection would go on). */
static void
park_snapshot(Node *n, int i)
{
    struct Parked *p = &n->parked[i];
    char req[SNAPSHOT_REQ_LEN];
    RaftNodeStatus st;
    Ship *sp;

    raftnode_status(n->raft, &st);
    if (recv(p->fd, req, sizeof req, MSG_DONTWAIT) != (ssize_t)sizeof req) {
        node_park_unwatch(n, p); /* it was peeked: cannot happen */
        return;
    }
    if (!(sp = ship_new(n, p->fd, st.applied))) { /* NODE_SHIP_MAX running */
        if (send(p->fd, "OUT_OF_MEMORY\r\n", 15, MSG_NOSIGNAL | MSG_DONTWAIT) !=
            15)
            park_drop(n, i);
        return;
    }
    log_msg(0,
            "cluster: sending the state as of entry %llu to a client port "
            "request (%s)",
            (unsigned long long)st.applied, raftnode_role_name(st.role));
    node_park_unwatch(n, p);
    n->parked[i] = n->parked[--n->nparked]; /* the sender's socket now */
    ship_run(sp);
}

/* A watched parked connection has a request's length of input (its
 * SO_RCVLOWAT), or ended: its first bytes, peeked, are a state request or
 * not; if not (or cut short, EOF, an error), it is watched no more. */
static void
park_read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    Node *n = w->data;
    char head[SNAPSHOT_REQ_LEN];
    int i = 0;
    ssize_t r;

    (void)loop, (void)revents;
    while (i < n->nparked && n->parked[i].rd != w)
        i++;
    if (i == n->nparked) { /* not parked: cannot happen */
        ev_io_stop(n->loop, w);
        return;
    }
    r = recv(w->fd, head, sizeof head, MSG_PEEK | MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (r == (ssize_t)sizeof head && memcmp(head, SNAPSHOT_REQ, r) == 0 &&
        !n->srv->stopping && n->raft)
        park_snapshot(n, i);
    else
        node_park_unwatch(n, &n->parked[i]);
}

void
node_park_watch(Node *n, struct Parked *p)
{
    p->rd = NULL;
    if (n->tls || n->srv->access || p->via != CONN_VIA_TCP) return;
    if (!(p->rd = malloc(sizeof *p->rd))) return;
    park_lowat(p->fd, (int)SNAPSHOT_REQ_LEN); /* no wake-up per byte */
    ev_io_init(p->rd, park_read_cb, p->fd, EV_READ);
    p->rd->data = n;
    ev_io_start(n->loop, p->rd);
}

/* ---- links the peers open to this node ---- */

void
node_cb_serve(void *arg, PeerService *svc)
{
    Node *n = arg;

    pthread_mutex_lock(&n->served_mu);
    if (n->nserved < NODE_SERVED_MAX) {
        n->served[n->nserved++] = *svc;
        svc->fd = -1;
        svc->tls = NULL;
        svc->head = NULL;
    }
    pthread_mutex_unlock(&n->served_mu);
    peer_service_free(svc); /* what the queue had no room for */
    ev_async_send(n->loop, &n->served_w);
}

/* A relayed client from a peer becomes a connection of this leader, as an
 * accepted one would (--max-connections counts it): over the link's own
 * socket and TLS session when the transport handed it over whole, else
 * over the socketpair the transport pumps. */
static void
serve_client(Node *n, PeerService *svc)
{
    Server *s = n->srv;
    int flags = fcntl(svc->fd, F_GETFL);
    TlsSock *x = NULL;

    /* as the client port: nothing new once stopping (server.c) */
    if (!n->serving || s->stopping || flags < 0 ||
        fcntl(svc->fd, F_SETFL, flags | O_NONBLOCK) < 0 ||
        (s->cfg.max_conns &&
         s->cur_conns + node_relayed(s) >= s->cfg.max_conns)) {
        peer_service_free(svc);
        return;
    }
    const unsigned char *head = svc->head;
    size_t len = svc->head_len, cn = 0;
    if (svc->channel == PEER_CHANNEL_CLIENT_CN) { /* the client's CN first */
        cn = len ? head[0] : 0;
        if (cn < 1 || cn > PEER_CN_MAX || len < 1 + cn ||
            memchr(head + 1, '\0', cn)) {
            peer_service_free(svc);
            return;
        }
        head += 1 + cn;
        len -= 1 + cn;
    }
    if (svc->tls) {
        x = tls_sock_new(svc->tls); /* frees the session if it fails */
        svc->tls = NULL;
        if (!x) {
            peer_service_free(svc);
            return;
        }
    }
    Conn *c = conn_new_via(s, svc->fd,
                           svc->channel == PEER_CHANNEL_CLIENT_UNIX
                               ? CONN_VIA_RELAY_UNIX
                               : CONN_VIA_RELAY,
                           x, head, len);
    svc->fd = -1;
    if (c && cn) /* the follower verified it; the peer link proves the node */
        c->peer_cn = strndup((const char *)svc->head + 1, cn);
    peer_service_free(svc); /* the head, copied */
}

/* A follower's multiplexed relay link: its streams become connections
 * (muxserve.h), while this node serves. */
static void
serve_mux(Node *n, PeerService *svc)
{
    int flags = fcntl(svc->fd, F_GETFL);
    TlsSock *x;

    if (!n->serving || n->srv->stopping || flags < 0 ||
        fcntl(svc->fd, F_SETFL, flags | O_NONBLOCK) < 0 ||
        svc->head_len > MUX_HDR + MUX_FRAME_MAX) {
        peer_service_free(svc);
        return;
    }
    x = tls_sock_new(svc->tls); /* frees the session if it fails */
    svc->tls = NULL;
    n->muxserve.others = node_relayed; /* relays and parked: node.c cannot */
    if (x) mux_serve_accept(&n->muxserve, svc->fd, x, svc->head, svc->head_len);
    if (x) svc->fd = -1;
    peer_service_free(svc);
}

/* A peer that fell behind asks for the state: a sender, if one is free,
 * whatever this node's role. The state of any node is the committed
 * log's up to its applied index (only committed entries are applied), and
 * the reply says that index, which the peer checks (fetch_reply). Only the
 * serving leader answering would deadlock: the peer blocks its raft
 * thread while it fetches (libraft's restore callback), so it neither
 * acknowledges entries nor votes, and a leader that needs its vote (a
 * cluster of three with one down) can neither commit its barrier, to
 * serve, nor stay leader: it stays a candidate and the peer retries it
 * for FETCH_TRY_S. */
static void
serve_snapshot(Node *n, PeerService *svc)
{
    RaftNodeStatus st;
    Ship *sp;

    if (!n->raft || n->srv->stopping) {
        peer_service_free(svc);
        return;
    }
    raftnode_status(n->raft, &st);
    if (!(sp = ship_new(n, svc->fd, st.applied))) {
        peer_service_free(svc); /* the peer tries again */
        return;
    }
    log_msg(0, "cluster: sending the state as of entry %llu to node %llu (%s)",
            (unsigned long long)st.applied, (unsigned long long)svc->peer_id,
            n->serving ? "serving" : raftnode_role_name(st.role));
    svc->fd = -1; /* the sender's */
    peer_service_free(svc);
    ship_run(sp);
}

void
node_served_cb(struct ev_loop *loop, ev_async *w, int revents)
{
    Node *n = w->data;
    PeerService svc[NODE_SERVED_MAX];
    int k;

    (void)loop, (void)revents;
    pthread_mutex_lock(&n->served_mu);
    k = n->nserved;
    memcpy(svc, n->served, sizeof svc[0] * (size_t)k);
    n->nserved = 0;
    pthread_mutex_unlock(&n->served_mu);
    for (int i = 0; i < k; i++) {
        if (svc[i].channel == PEER_CHANNEL_CLIENT ||
            svc[i].channel == PEER_CHANNEL_CLIENT_UNIX ||
            (svc[i].channel == PEER_CHANNEL_CLIENT_CN && svc[i].tls))
            serve_client(n, &svc[i]);
        else if (svc[i].channel == PEER_CHANNEL_MUX && svc[i].tls)
            serve_mux(n, &svc[i]);
        else if (svc[i].channel == PEER_CHANNEL_SNAPSHOT && !svc[i].tls)
            serve_snapshot(n, &svc[i]);
        else
            peer_service_free(&svc[i]);
    }
}
