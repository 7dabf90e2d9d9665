/* nodestep.c - see nodestep.h. */
#include "cluster/nodestep.h"

#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "cluster/node_impl.h"
#include "cluster/peerauth.h"
#include "net/net.h"

/* The preamble of a relayed client's link (ProxyHelloFn): the client
 * channel, or with a tls:// client that presented a verified certificate,
 * the channel that carries its CN first (peerauth.h), for the leader's
 * cert identities. */
static size_t
relay_hello(void *arg, TlsSock *client, unsigned char *buf, size_t cap)
{
    Node *n = arg;
    char cn[PEER_CN_MAX + 1];
    size_t len = 0;

    if (client &&
        tls_peer_cn(tls_conn_ssl(tls_sock_conn(client)), cn, sizeof cn) == 0)
        len = strlen(cn);
    if (cap < PEER_PREAMBLE_LEN + 1 + len) return 0;
    peer_preamble_put(buf, n->cfg.self_id,
                      len ? PEER_CHANNEL_CLIENT_CN : PEER_CHANNEL_CLIENT);
    if (!len) return PEER_PREAMBLE_LEN;
    buf[PEER_PREAMBLE_LEN] = (unsigned char)len;
    memcpy(buf + PEER_PREAMBLE_LEN + 1, cn, len);
    return PEER_PREAMBLE_LEN + 1 + len;
}

/* The same for a client of this node's unix socket that it trusts (no
 * --auth-unix): the leader trusts it as its own unix clients. */
static size_t
relay_hello_unix(void *arg, TlsSock *client, unsigned char *buf, size_t cap)
{
    Node *n = arg;

    (void)client;
    if (cap < PEER_PREAMBLE_LEN) return 0;
    peer_preamble_put(buf, n->cfg.self_id, PEER_CHANNEL_CLIENT_UNIX);
    return PEER_PREAMBLE_LEN;
}

/* A client relayed to the leader over a link of the client channel that
 * this loop drives itself (proxy_start_tls), as the peer transport would:
 * the leader's certificate must name it, the preamble goes first. */
static void
relay_tls(Node *n, int fd, TlsSock *x, uint64_t leader, int k, int via)
{
    struct sockaddr_in a;
    TlsCreds *c = tls_source_get(n->tls);
    TlsConn *t = tls_conn_new(c, 0);

    tls_creds_unref(c);
    if (!t || peer_parse_addr(n->cfg.voters[k].addr, &a) != 0) {
        tls_conn_free(t);
        tls_sock_free(x);
        close(fd);
        return;
    }
    proxy_start_tls(&n->proxies, fd, x, &a, t, leader,
                    via == CONN_VIA_UNIX && !n->srv->cfg.auth_unix
                        ? relay_hello_unix
                        : relay_hello,
                    n);
}

/* A plaintext client of the listener kind via relayed as a stream of the
 * multiplexed link to the leader (member k), dialled first if there is
 * none: 0, or -1 (fd not taken: the caller relays it on its own link). */
static int
relay_mux(Node *n, int fd, uint64_t leader, int k, int via)
{
    struct sockaddr_in a;
    unsigned char pre[PEER_PREAMBLE_LEN];
    unsigned kind = via == CONN_VIA_UNIX && !n->srv->cfg.auth_unix
                        ? MUX_KIND_UNIX
                        : MUX_KIND_TCP;

    if (!mux_relay_linked(&n->relays)) {
        TlsCreds *c = tls_source_get(n->tls);
        TlsConn *t = tls_conn_new(c, 0);
        tls_creds_unref(c);
        if (!t || peer_parse_addr(n->cfg.voters[k].addr, &a) != 0) {
            tls_conn_free(t);
            return -1;
        }
        peer_preamble_put(pre, n->cfg.self_id, PEER_CHANNEL_MUX);
        if (mux_relay_dial(&n->relays, &a, t, leader, pre, sizeof pre,
                           n->proxies.connect_timeout) < 0)
            return -1;
    }
    return mux_relay_add(&n->relays, fd, kind);
}

/* A client (x: its TLS session, or NULL) of the listener kind via
 * (CONN_VIA_*) relayed to the leader. */
static void
relay(Node *n, int fd, TlsSock *x, uint64_t leader, int via)
{
    struct sockaddr_in a;
    int k = cluster_find(&n->cfg, leader);

    if (k < 0) {
        close(fd);
        tls_sock_free(x);
        return;
    }
    if (n->tls && n->relay_mux && !x && relay_mux(n, fd, leader, k, via) == 0)
        return;
    if (n->tls) { /* to the leader's Raft port, over the nodes' mTLS */
        relay_tls(n, fd, x, leader, k, via);
        return;
    }
    cluster_client_addr(&n->cfg, k, n->port, &a);
    proxy_start_tls(&n->proxies, fd, x, &a, NULL, 0, NULL, NULL);
}

int
node_accept(Server *s, int fd, int via, TlsSock *tls)
{
    Node *n = s->node;
    RaftNodeStatus st;

    if (!n || n->serving) return 0;
    raftnode_status(n->raft, &st);
    if (st.leader_id && st.leader_id != n->cfg.self_id &&
        st.leader_id == n->proxied_leader) {
        relay(n, fd, tls, st.leader_id, via);
        return 1;
    }
    if (n->nparked == NODE_PARK_MAX) {
        close(fd);
        tls_sock_free(tls);
        return 1;
    }
    n->parked[n->nparked] = (struct Parked){
        .fd = fd, .via = (uint8_t)via, .tls = tls, .at = mono_ns()};
    node_park_watch(n, &n->parked[n->nparked++]);
    return 1;
}

/* Leading and ready: loads the queue from the shards (as a restart does)
 * and serves; waiting connections become clients. */
static void
promote(Server *s, const RaftNodeStatus *st)
{
    Node *n = s->node;

    proxy_close_all(&n->proxies);
    mux_relay_close_all(&n->relays);
    n->proxied_leader = n->cfg.self_id;
    node_drain_replay(s); /* every entry before the barrier */
    n->serving = 1;
    atomic_store(&n->serving_seen, 1);
    n->serving_term = st->term;
    log_msg(0, "cluster: leader in term %llu; serving %zu jobs (next id %llu)",
            (unsigned long long)st->term, s->jobs.len,
            (unsigned long long)s->next_id);
    for (int i = 0; i < n->nparked; i++) {
        node_park_unwatch(n, &n->parked[i]);
        conn_new_via(s, n->parked[i].fd, n->parked[i].via, n->parked[i].tls,
                     NULL, 0);
    }
    n->nparked = 0;
}

/* Starts this program again in this process (see node.h, stepping down),
 * every listening socket handed over as systemd does (net_hand_over, each
 * named for its kind: listen_handover_name), without stopping anything first:
 * to the data that is the same as a kill -9 (the Raft log is synced, the
 * shards' WALs are written), which recovery is built for, and every other
 * descriptor is close-on-exec. The raft thread first gets to send what it
 * wrote last (raftnode_settle): a stepping-down leader's vote for the node
 * taking over, say, which would be lost otherwise. An orderly stop is not
 * safe here: closing libraft 0.15 while its libuv threadpool still works
 * for it (a snapshot being installed, a segment being finalised) frees
 * what that work reads
 * (ASan: heap-use-after-free under raft_uv_close, seen in 1 of ~13 runs of
 * test_paused_leader_steps_down). */
static void
restart(Server *s)
{
    int fds[SERVER_LISTENERS_MAX];
    const char *names[SERVER_LISTENERS_MAX];
    int n = s->nlisteners;

    raftnode_settle(s->node->raft, NODE_SETTLE_MS); /* its last messages */
    for (int i = 0; i < n; i++) {
        fds[i] = s->listeners[i].fd;
        names[i] = listen_handover_name(s->listeners[i].addr.kind,
                                        s->listeners[i].owned);
    }
    if (net_hand_over(fds, names, n) < 0) {
        log_msg(0, "cluster: cannot keep the listening sockets: %s",
                strerror(errno));
        _exit(1);
    }
    /* only 0 to 2 and the listeners go on, whatever a library opened
     * without O_CLOEXEC (every open of ours has it; this kernel may lack
     * close_range: no harm) */
    close_range(3 + (unsigned)n, ~0U, CLOSE_RANGE_CLOEXEC);
    setenv(NODE_RESTART_ENV, "1", 1);
    execv("/proc/self/exe", s->node->argv);
    log_msg(0, "cluster: execv: %s", strerror(errno));
    _exit(1);
}

/* Not serving: relays the waiting connections once a leader is known,
 * closes those that waited too long. */
static void
unpark(Node *n, const RaftNodeStatus *st)
{
    int64_t old = mono_ns() - (int64_t)NODE_PARK_S * NS_PER_SEC;
    int k = 0;
    int lead = st->leader_id && st->leader_id != n->cfg.self_id;

    for (int i = 0; i < n->nparked; i++) {
        struct Parked *p = &n->parked[i];
        if (lead) {
            node_park_unwatch(n, p);
            relay(n, p->fd, p->tls, st->leader_id, p->via);
        } else if (p->at < old) {
            node_park_unwatch(n, p);
            close(p->fd);
            tls_sock_free(p->tls);
        } else {
            n->parked[k++] = *p;
        }
    }
    n->nparked = k;
}

/* A serving leader, once the replies of this pass are written (node_step
 * runs after them): starts the transfer rockstalk-cluster-transfer asked
 * for (nodeops.c), so its TRANSFERRING leaves before the hand-over can
 * close the connection. */
static void
start_asked_transfer(Node *n)
{
    if (!n->transfer_to) return;
    log_msg(0,
            "cluster: handing the leadership to node %llu (asked by a "
            "client)",
            (unsigned long long)n->transfer_to);
    raftnode_transfer(n->raft, n->transfer_to);
    n->transfer_to = 0;
}

/* Loop thread: takes the members the raft thread saw last (relays and
 * the status follow libraft's configuration), and stops the process once
 * this node is removed: at once when the removal was recorded, or once
 * the configuration lacked it for NODE_REMOVED_GRACE_MS (the leader sends
 * a removed node nothing more, so the commit may never reach it). */
static void
take_members(Server *s)
{
    Node *n = s->node;

    pthread_mutex_lock(&n->cfg_mu);
    if (n->members_new) {
        n->cfg = n->members;
        n->members_new = 0;
    }
    pthread_mutex_unlock(&n->cfg_mu);
    int64_t since = atomic_load(&n->absent_since);
    int64_t left =
        since ? since + (int64_t)NODE_REMOVED_GRACE_MS * 1000000 - mono_ns()
              : 0;
    if (since && !atomic_load(&n->removed) && left < 0) {
        ClusterConfig m;
        node_members(n, &m);
        node_record(n, &m, -1);
    } else if (left > 0 && !ev_is_active(&n->grace_w)) {
        /* nothing else may wake this loop then: a removed node hears
         * nothing more */
        ev_timer_set(&n->grace_w, (double)left / 1e9 + 0.01, 0.);
        ev_timer_start(s->loop, &n->grace_w);
    }
    int expect = 1; /* recorded, not yet acted on: once */
    if (!s->stopping &&
        atomic_compare_exchange_strong(&n->removed, &expect, 2)) {
        log_msg(0,
                "cluster: node %llu was removed from the cluster's "
                "configuration: stopping (this data directory will not "
                "start as a member again)",
                (unsigned long long)n->cfg.self_id);
        kill(getpid(), SIGTERM); /* the loop's orderly stop (signalfd) */
    }
}

void
node_step(Server *s)
{
    Node *n = s->node;
    RaftNodeStatus st;

    if (!n || !n->raft) return;
    raftnode_status(n->raft, &st);
    if (st.failed) {
        log_msg(0, "cluster: the Raft node failed: %s",
                raftnode_error(n->raft));
        _exit(2);
    }
    take_members(s);
    if (n->serving) {
        const char *why = NULL;
        if (s->stopping) return;
        if (st.role != RAFTNODE_LEADER)
            why = "it lost the leadership";
        else if (st.term != n->serving_term)
            why = "the term moved while serving (leadership lost and won)";
        else if (atomic_load(&n->gap))
            why = "a proposal was refused or lost (its changes may be in no "
                  "log)";
        else if (atomic_load(&n->foreign))
            why = "an entry it did not propose was applied (its memory is "
                  "not the log)";
        if (why) {
            log_msg(
                0,
                "cluster: no longer the leader (%s; %s in term %llu, serving "
                "since term %llu): restarting as a follower",
                why, raftnode_role_name(st.role), (unsigned long long)st.term,
                (unsigned long long)n->serving_term);
            restart(s);
        }
        start_asked_transfer(n);
        return;
    }
    if (atomic_load(&n->fetched) != n->fetched_seen && !s->stopping) {
        log_msg(0, "cluster: the state was fetched from a peer: restarting "
                   "to load it");
        restart(s);
    }
    node_drain_replay(s);
    if (st.role == RAFTNODE_LEADER && st.ready) {
        promote(s, &st);
        return;
    }
    if (st.leader_id != n->proxied_leader) {
        if (n->proxies.count + n->relays.count)
            log_msg(1, "cluster: leader %llu -> %llu: closing %zu relays",
                    (unsigned long long)n->proxied_leader,
                    (unsigned long long)st.leader_id,
                    n->proxies.count + n->relays.count);
        proxy_close_all(&n->proxies);
        mux_relay_close_all(&n->relays);
        n->proxied_leader = st.leader_id;
    }
    if (n->nparked) unpark(n, &st);
}

RaftNode *
node_raft(const Server *s)
{
    return s->node ? s->node->raft : NULL;
}

int
node_serves(const Server *s)
{
    return !s->node || s->node->serving;
}

int
node_lease_ok(const Server *s)
{
    const Node *n = s->node;

    if (!n || !n->raft) return 1;
    return n->serving && raftnode_lease_ok(n->raft);
}

size_t
node_relayed(const Server *s)
{
    const Node *n = s->node;

    return n ? n->proxies.count + n->relays.count + (size_t)n->nparked : 0;
}

void
node_stats(const Server *s, NodeStats *out)
{
    const Node *n = s->node;
    RaftNodeStatus st;

    memset(out, 0, sizeof *out);
    out->role = "standalone";
    if (n) out->security = n->tls ? "mtls" : "insecure";
    if (!n || !n->raft) return;
    raftnode_status(n->raft, &st);
    out->peer_refused = st.peer_refused;
    out->role = st.role == RAFTNODE_LEADER      ? "leader"
                : st.role == RAFTNODE_CANDIDATE ? "candidate"
                                                : "follower";
    out->leader = st.leader_id;
    out->term = st.term;
    out->commit_index = st.commit_index;
}
