/* raftnode.c - one Raft node on its own thread and libuv loop (see
 * raftnode.h): the thread, the loop's handles, libraft's start and close,
 * the published status and the cross-thread calls. The entries themselves
 * (proposals in flight, the state machine) are raftfsm.c's.
 *
 * libraft facts this file relies on, true of 0.15.0 (Debian 12) and of
 * 0.22.1 (cowsql's, bookworm-backports) alike:
 *  - every call on the thread running the loop; raft_apply's buffers come
 *    from raft_malloc and are raft's once it returns 0 (and still ours when
 *    it returns RAFT_NOTLEADER, refused before anything is appended);
 *  - the FSM's apply runs for entry last_applied + 1 (last_applied moves on
 *    after it returns), so raft_last_applied() + 1 is the entry's index;
 *  - a snapshot is taken at last_applied (with everything applied);
 *  - raft_apply takes one buffer per call (0.22.1 asserts n == 1; 0.15
 *    takes n but calls back once, at the first entry);
 *  - a new leader appends no entry of its own (so ready waits for a
 *    barrier);
 *  - restore owns the buffer it was given once it returns 0.
 * Which proposal an applied entry is comes from the in-flight list (index
 * and term of each entry this leader appended), not from raft_apply's
 * callback, which fires after the FSM's apply.
 */
#include "cluster/raftnode.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/common.h"
#include "cluster/raftnode_impl.h"

/* A barrier this leader appends (see publish): the first of its term
 * makes it ready, each one that commits renews its lease; freed by its
 * callback. */
typedef struct BarrierReq {
    struct raft_barrier req;
    RaftNode *node;
    uint64_t term;
    int64_t sent; /* CLOCK_MONOTONIC ns when it was appended */
} BarrierReq;

/* Raft thread: the role as published (NONE once failed: libraft's
 * UNAVAILABLE while not closing is a failure, check_unavailable). */
static int
current_role(RaftNode *n)
{
    if (n->closing || atomic_load(&n->failed)) return RAFTNODE_NONE;
    switch (raft_state(&n->raft)) {
    case RAFT_FOLLOWER:
        return RAFTNODE_FOLLOWER;
    case RAFT_CANDIDATE:
        return RAFTNODE_CANDIDATE;
    case RAFT_LEADER:
        return RAFTNODE_LEADER;
    default:
        return RAFTNODE_NONE;
    }
}

static void
on_barrier(struct raft_barrier *req, int status)
{
    BarrierReq *br = (BarrierReq *)req;
    RaftNode *n = br->node;

    n->barrier_pending = 0;
    rn_check_status(n, status, "appending a barrier");
    if (status == 0 && raft_state(&n->raft) == RAFT_LEADER &&
        n->raft.current_term == br->term) {
        n->ready_term = br->term;
        /* A majority stored it, each after br->sent: none of them starts
         * an election or grants a vote (libraft refuses votes while it
         * has a leader) before br->sent plus its election timeout, at
         * least election_ms; the lease ends at half of that. */
        int64_t until = br->sent + n->lease_ns;
        if (until > atomic_load(&n->lease_until))
            atomic_store(&n->lease_until, until);
    }
    free(br);
}

/* Raft thread: a leader appends a barrier. The first of its term: once it
 * is applied, so is every entry committed by earlier leaders (libraft 0.15
 * appends no entry of its own on election), and the leader is ready to
 * serve. The later ones renew its lease (on_barrier). */
static void
start_barrier(RaftNode *n)
{
    BarrierReq *br = malloc(sizeof *br);

    if (!br) return; /* tried again at the next loop iteration */
    br->node = n;
    br->term = n->raft.current_term;
    br->sent = mono_ns();
    if (raft_barrier(&n->raft, &br->req, on_barrier) != 0) {
        free(br);
        return;
    }
    n->barrier_pending = 1;
}

/* Raft thread: whether to renew the lease now: a reader asked for it in
 * the last two lease lengths and less than a lease minus a heartbeat
 * interval is left (so one barrier each heartbeat interval at most, and
 * none while nobody reads). */
static int
lease_wanted(RaftNode *n)
{
    int64_t now = mono_ns();

    return now - atomic_load(&n->lease_wanted) < 2 * n->lease_ns &&
           atomic_load(&n->lease_until) - now <
               n->lease_ns - (int64_t)n->opt.heartbeat_ms * 1000000;
}

/* Raft thread: publishes the status; notifies on a change of role, leader,
 * term or readiness. */
static void
publish(RaftNode *n)
{
    int role = current_role(n);
    raft_id leader = 0;
    const char *addr = NULL;
    uint64_t term = n->raft.current_term;

    if (role != RAFTNODE_NONE) raft_leader(&n->raft, &leader, &addr);
    int ready = role == RAFTNODE_LEADER && n->ready_term == term;
    if (!ready) atomic_store(&n->lease_until, 0);
    if (role == RAFTNODE_LEADER && !n->barrier_pending &&
        (!ready || lease_wanted(n)))
        start_barrier(n);
    int changed =
        atomic_load_explicit(&n->role, memory_order_relaxed) != role ||
        atomic_load_explicit(&n->leader_id, memory_order_relaxed) != leader ||
        atomic_load_explicit(&n->term, memory_order_relaxed) != term ||
        atomic_load_explicit(&n->ready, memory_order_relaxed) != ready;
    atomic_store(&n->term, term);
    atomic_store(&n->leader_id, leader);
    atomic_store(&n->commit_index, n->raft.commit_index);
    if (n->opt.tls) atomic_store(&n->peer_refused, peer_refused(&n->transport));
    atomic_store(&n->ready, ready);
    atomic_store(&n->role, role);
    if (changed && n->cb.notify) n->cb.notify(n->cb.arg);
}

/* Frees the transport libraft has closed (or never used). */
static void
transport_free(RaftNode *n)
{
    if (n->opt.tls)
        peer_free(&n->transport);
    else
        raft_uv_tcp_close(&n->transport);
}

static void
on_raft_closed(struct raft *r)
{
    RaftNode *n = r->data;

    rn_lose_all(n, &n->inflight, RAFTNODE_LOST_UNKNOWN);
    raft_uv_close(&n->io);
    transport_free(n);
}

/* Raft thread: closes libraft (if started) and our handles; the loop ends
 * once everything is closed. */
static void
begin_close(RaftNode *n, int raft_open)
{
    n->closing = 1;
    atomic_store(&n->role, RAFTNODE_NONE);
    atomic_store(&n->ready, 0);
    pthread_mutex_lock(&n->mu);
    n->wake_open = 0;
    pthread_mutex_unlock(&n->mu);
    if (raft_open) raft_close(&n->raft, on_raft_closed);
    uv_close((uv_handle_t *)&n->wake, NULL);
    uv_close((uv_handle_t *)&n->check, NULL);
    rafttune_close(&n->tune);
}

static void
on_transferred(struct raft_transfer *req)
{
    ((RaftNode *)req->data)->transferring = 0;
}

/* Raft thread: hands leadership to voter id, or with id 0 to the most
 * up-to-date one (libraft's raft_transfer: it catches the target up, then
 * sends it TimeoutNow, so it starts an election at once). Not a leader,
 * one already transferring, or an id libraft refuses: nothing. */
static void
start_transfer(RaftNode *n, uint64_t id)
{
    if (n->transferring || raft_state(&n->raft) != RAFT_LEADER) return;
    n->transfer.data = n;
    if (raft_transfer(&n->raft, &n->transfer, id, on_transferred) == 0)
        n->transferring = 1;
}

/* Raft thread, leading: what the leader knows of voter i of libraft's
 * configuration (vv->id): its match index, and when it last saw the
 * voter's recent_recv flag set (a reply since the flag was last cleared,
 * once per election timeout), in *contact. libraft 0.15 only: later
 * versions keep struct raft_progress private. */
static void
voter_progress(RaftNode *n, unsigned i, RaftNodeVoterView *vv, int64_t *contact,
               int64_t now)
{
#ifndef RAFT_VERSION_NUMBER
    const struct raft_progress *p = &n->raft.leader_state.progress[i];
    int k = cluster_find(&n->cfg, vv->id);

    if (vv->id == n->cfg.self_id) {
        vv->match_index = n->raft.last_stored;
        *contact = now;
        return;
    }
    vv->match_index = p->match_index;
    if (k < 0) return;
    if (p->recent_recv) n->contact_ns[k] = now;
    *contact = n->contact_ns[k];
#else
    (void)n, (void)i, (void)vv, (void)contact, (void)now;
#endif
}

/* libraft's role as RAFTNODE_VOTER, _STANDBY or _SPARE. */
static int
member_role(int role)
{
    return role == RAFT_VOTER     ? RAFTNODE_VOTER
           : role == RAFT_STANDBY ? RAFTNODE_STANDBY
                                  : RAFTNODE_SPARE;
}

/* Raft thread, each iteration: publishes the voters' view
 * (raftnode_view). */
static void
publish_view(RaftNode *n)
{
    RaftNodeView v;
    int64_t contact[CLUSTER_MAX_VOTERS] = {0}, now = mono_ns();
    const struct raft_configuration *conf = &n->raft.configuration;

    memset(&v, 0, sizeof v);
    v.leader = current_role(n) == RAFTNODE_LEADER;
    v.term = n->raft.current_term;
    v.last_index = raft_last_index(&n->raft);
    v.commit_index = n->raft.commit_index;
    v.applied = raft_last_applied(&n->raft);
#ifndef RAFT_VERSION_NUMBER
    v.progress = v.leader;
#endif
    if (v.leader && n->contact_term != v.term) {
        memset(n->contact_ns, 0, sizeof n->contact_ns);
        n->contact_term = v.term;
    }
    for (unsigned i = 0; i < conf->n && v.n < CLUSTER_MAX_VOTERS; i++) {
        const struct raft_server *sv = &conf->servers[i];
        RaftNodeVoterView *vv = &v.voters[v.n];
        vv->id = sv->id;
        vv->role = member_role(sv->role);
        /* as snprintf "%s" would, without its cost on every iteration */
        size_t al = strnlen(sv->address, sizeof vv->addr - 1);
        memcpy(vv->addr, sv->address, al);
        vv->addr[al] = '\0';
        if (v.leader) voter_progress(n, i, vv, &contact[v.n], now);
        v.n++;
    }
    pthread_mutex_lock(&n->view_mu);
    n->view = v;
    memcpy(n->view_contact, contact, sizeof contact);
    pthread_mutex_unlock(&n->view_mu);
}

static void
on_wake(uv_async_t *h)
{
    RaftNode *n = h->data;
    PropList l;

    pthread_mutex_lock(&n->mu);
    l = n->queue;
    if (!l.head) l.tail = &l.head;
    rn_list_init(&n->queue);
    n->queued_bytes = 0;
    int stopping = n->stopping, transfer = n->transfer_asked;
    uint64_t transfer_id = n->transfer_id;
    n->transfer_asked = 0;
    pthread_mutex_unlock(&n->mu);

    if (n->closing || stopping || atomic_load(&n->failed)) {
        rn_lose_all(n, &l, RAFTNODE_LOST_REFUSED);
        if (stopping && !n->closing) begin_close(n, 1);
        return;
    }
    rn_submit(n, &l);
    if (transfer) start_transfer(n, transfer_id);
    rn_change_take(n);
}

/* Raft thread: libraft's configuration as members (ClusterConfig): each
 * server's id and Raft address, its client port from the address (a
 * member added online) or from the members before; this node's role in it
 * (-1: not a member) in *self_role. */
static void
conf_members(RaftNode *n, ClusterConfig *m, int *self_role)
{
    const struct raft_configuration *conf = &n->raft.configuration;

    memset(m, 0, sizeof *m);
    *self_role = -1;
    m->self_id = n->cfg.self_id;
    m->state = n->cfg.state;
    for (unsigned i = 0; i < conf->n && m->n < CLUSTER_MAX_VOTERS; i++) {
        const struct raft_server *sv = &conf->servers[i];
        ClusterPeer *p = &m->voters[m->n];
        if (sv->id == n->cfg.self_id) *self_role = member_role(sv->role);
        if (cluster_parse_peer(sv->id, sv->address, strlen(sv->address), p) < 0)
            continue;
        int k = cluster_find(&n->cfg, sv->id);
        if (!p->client_port && k >= 0)
            p->client_port = n->cfg.voters[k].client_port;
        m->n++;
    }
    cluster_sort(m);
}

/* Raft thread, each iteration: once libraft's configuration changed (an
 * entry appended, committed, replayed or restored), takes its members as
 * this node's (the transport's peers, the voter view) and hands them to
 * the members callback. */
static void
check_members(RaftNode *n)
{
    ClusterConfig m;
    int self_role;

    if (n->raft.configuration_index == n->conf_seen &&
        n->raft.configuration_uncommitted_index == n->conf_unc_seen)
        return;
    n->conf_seen = n->raft.configuration_index;
    n->conf_unc_seen = n->raft.configuration_uncommitted_index;
    if (n->raft.configuration.n == 0) return; /* joining: none yet */
    conf_members(n, &m, &self_role);
    if (n->opt.tls) peer_set_members(&n->transport, &m);
    n->cfg.n = m.n;
    memcpy(n->cfg.voters, m.voters, sizeof m.voters);
    memset(n->contact_ns, 0, sizeof n->contact_ns);
    if (n->cb.members)
        n->cb.members(n->cb.arg, &m,
                      n->raft.configuration_uncommitted_index == 0, self_role);
}

/* Raft thread: libraft 0.15 turns itself off for good (state
 * RAFT_UNAVAILABLE, as raft_close does) when a message it receives
 * conflicts with an entry it holds as committed, or when handling one or a
 * tick fails. The node then answers nobody, so unless we are closing it,
 * it has failed: the owner stops the process rather than keep a node that
 * looks up and takes no part in the cluster. */
static void
check_unavailable(RaftNode *n)
{
    if (n->closing || raft_state(&n->raft) != RAFT_UNAVAILABLE) return;
    rn_fail(n, "raft: libraft turned this node off (state UNAVAILABLE): a "
               "peer's message conflicted with a committed entry, or "
               "handling a message or timer failed; it takes no further "
               "part in the cluster");
}

static void
on_check(uv_check_t *h)
{
    RaftNode *n = h->data;

    atomic_fetch_add(&n->iterations, 1);
    if (n->closing) return;
    check_unavailable(n);
    rn_check_inflight(n);
    check_members(n);
    rn_change_check(n);
    if (n->opt.seed && !n->seeded && n->raft.log.snapshot.last_index > 0) {
        n->seeded = 1;
        if (n->cb.seeded) n->cb.seeded(n->cb.arg);
    }
    publish(n);
    publish_view(n);
}

/* Writes why raft_start failed (rv, a RAFT_* code) into err: libraft's
 * message, else its I/O's, else the transport's (libraft 0.15 copies
 * neither up, and its TCP transport says nothing when uv_listen fails:
 * a Raft port already in use printed "raft start in DIR: " alone), else
 * the code's name with the address this node listens on. */
static void
start_error(RaftNode *n, int rv, char *err, size_t errcap)
{
    const char *m = raft_errmsg(&n->raft);
    if (!m || !*m) m = n->io.errmsg;
    if (!*m) m = n->transport.errmsg;
    if (*m)
        errfmt(err, errcap, "raft start in %s: %s", n->dir, m);
    else
        errfmt(err, errcap,
               "raft start in %s: %s (could it listen on %s? a port "
               "in use is one cause)",
               n->dir, raft_strerror(rv), n->self_addr);
}

/* Raft thread: sets up the loop, libraft and the bootstrap. Returns 0 with
 * everything running, or -1 (err set) with everything closed but the loop,
 * which the caller runs to its end and closes. */
static int
node_open(RaftNode *n, char *err, size_t errcap)
{
    struct raft_configuration conf;
    int rv;

    uv_async_init(&n->loop, &n->wake, on_wake);
    uv_check_init(&n->loop, &n->check);
    uv_check_start(&n->check, on_check);
    rafttune_start(&n->tune, &n->loop);
    n->wake.data = n->check.data = n;
    pthread_mutex_lock(&n->mu);
    n->wake_open = 1;
    pthread_mutex_unlock(&n->mu);

#ifdef RAFT_VERSION_NUMBER
    /* libraft >= 0.16 (it defines RAFT_VERSION_NUMBER; 0.15 does not) wants
     * the transport struct's version filled in by its user. */
    n->transport.version = 1;
#endif
    if (n->opt.tls) {
        if (peer_init(&n->transport, &n->loop, &n->cfg, n->opt.tls, err,
                      errcap) < 0)
            goto fail_handles;
        peer_serve(&n->transport, n->cb.serve, n->cb.arg);
    } else if ((rv = raft_uv_tcp_init(&n->transport, &n->loop)) != 0) {
        errfmt(err, errcap, "raft transport: %s", raft_strerror(rv));
        goto fail_handles;
    }
    rv = raft_uv_init(&n->io, &n->loop, n->dir, &n->transport);
    if (rv != 0) {
        errfmt(err, errcap, "raft log in %s: %s", n->dir, n->io.errmsg);
        transport_free(n);
        goto fail_handles;
    }
    if (n->opt.segment_bytes)
        raft_uv_set_segment_size(&n->io, n->opt.segment_bytes);
    rn_io_wrap(n);
    rn_fsm_init(n);
    rv = raft_init(&n->raft, &n->io, &n->fsm, n->cfg.self_id, n->self_addr);
    if (rv != 0) {
        errfmt(err, errcap, "raft log in %s: %s", n->dir,
               raft_errmsg(&n->raft));
        raft_uv_close(&n->io);
        transport_free(n);
        goto fail_handles;
    }
    n->raft.data = n;
    raft_set_election_timeout(&n->raft, n->opt.election_ms);
    raft_set_heartbeat_timeout(&n->raft, n->opt.heartbeat_ms);
    /* A follower that installs a snapshot fetches the state, then restarts
     * itself to load it (node.c), often before libraft has sent the
     * leader its reply: the leader then waits this long before it sends
     * the snapshot again, and the follower lags meanwhile (libraft's
     * default, 30 s; the chaos harness saw followers stuck that long).
     * Manifests are tiny: a resend costs nothing. */
    raft_set_install_snapshot_timeout(&n->raft, 2 * n->opt.election_ms);
    rafttune_attach(&n->tune, &n->raft, n->opt.snapshot_threshold,
                    n->opt.snapshot_trailing, RAFTNODE_LOG_BYTES);
    raft_set_pre_vote(&n->raft, !n->opt.no_pre_vote);
    if (n->opt.seed) rafttune_seed(&n->tune);

    /* Every voter bootstraps the same configuration (cluster.h keeps it
     * canonical); a used directory refuses with RAFT_CANTBOOTSTRAP. A node
     * that joins never does: its configuration comes from the leader. */
    raft_configuration_init(&conf);
    for (int i = 0; i < n->cfg.n && rv == 0 && n->cfg.state != CLUSTER_JOINING;
         i++)
        rv = raft_configuration_add(&conf, n->cfg.voters[i].id,
                                    n->cfg.voters[i].addr, RAFT_VOTER);
    if (rv == 0 && n->cfg.state != CLUSTER_JOINING)
        rv = raft_bootstrap(&n->raft, &conf);
    raft_configuration_close(&conf);
    if (rv != 0 && rv != RAFT_CANTBOOTSTRAP) {
        errfmt(err, errcap, "raft bootstrap in %s: %s", n->dir,
               raft_errmsg(&n->raft));
        goto fail_raft;
    }
    rv = raft_start(&n->raft);
    if (rv != 0) {
        if (atomic_load(&n->failed))
            errfmt(err, errcap, "%s", n->fail_msg);
        else
            start_error(n, rv, err, errcap);
        goto fail_raft;
    }
    publish(n);
    publish_view(n);
    return 0;

fail_raft:
    begin_close(n, 1);
    return -1;
fail_handles:
    begin_close(n, 0);
    return -1;
}

static void *
node_main(void *arg)
{
    RaftNode *n = arg;
    char err[ERR_MAX] = "";
    int rc = node_open(n, err, sizeof err);

    pthread_mutex_lock(&n->mu);
    n->init_rc = rc;
    memcpy(n->init_err, err, sizeof err);
    n->init_done = 1;
    pthread_cond_signal(&n->cv);
    pthread_mutex_unlock(&n->mu);

    uv_run(&n->loop, UV_RUN_DEFAULT);
    uv_loop_close(&n->loop);
    return NULL;
}

static void
node_free(RaftNode *n)
{
    Prop *p;
    while ((p = rn_list_pop(&n->queue))) {
        raft_free(p->buf.base);
        free(p);
    }
    pthread_mutex_destroy(&n->mu);
    pthread_mutex_destroy(&n->view_mu);
    pthread_cond_destroy(&n->cv);
    free(n->dir);
    free(n);
}

int
raftnode_start(const ClusterConfig *cfg, const char *dir,
               const RaftNodeOptions *opt, const RaftNodeCallbacks *cb,
               RaftNode **out, char *err, size_t errcap)
{
    int self = cluster_find(cfg, cfg->self_id);
    RaftNode *n;

    *out = NULL;
    if (self < 0)
        return errfmt(err, errcap, "raft: node %llu is not a voter",
                      (unsigned long long)cfg->self_id);
    if (!cb || !cb->apply)
        return errfmt(err, errcap, "raft: no apply callback");
    if (mkdir(dir, 0755) < 0 && errno != EEXIST)
        return errfmt(err, errcap, "mkdir %s: %s", dir, strerror(errno));
    n = calloc(1, sizeof *n);
    if (!n || !(n->dir = strdup(dir))) {
        free(n);
        return errfmt(err, errcap, "raft: out of memory");
    }
    n->cfg = *cfg;
    snprintf(n->self_addr, sizeof n->self_addr, "%s", n->cfg.voters[self].addr);
    if (opt) n->opt = *opt;
    if (!n->opt.election_ms) n->opt.election_ms = 1000;
    if (!n->opt.heartbeat_ms) n->opt.heartbeat_ms = 100;
    n->lease_ns = (int64_t)n->opt.election_ms * 1000000 / 2;
    if (!n->opt.snapshot_threshold) n->opt.snapshot_threshold = 8192;
    if (!n->opt.snapshot_trailing) n->opt.snapshot_trailing = 2048;
    n->cb = *cb;
    n->next_seq = 1;
    rn_list_init(&n->queue);
    rn_list_init(&n->inflight);
    pthread_mutex_init(&n->mu, NULL);
    pthread_mutex_init(&n->view_mu, NULL);
    pthread_cond_init(&n->cv, NULL);
    if (uv_loop_init(&n->loop) != 0) {
        node_free(n);
        return errfmt(err, errcap, "raft: uv_loop_init failed");
    }
    /* The thread starts with every signal blocked: signals are the owner's
     * (ev_signal on the loop), and a write to a peer that closed its socket
     * gets EPIPE rather than a SIGPIPE that would kill the process. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int prc = pthread_create(&n->thread, NULL, node_main, n);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (prc != 0) {
        uv_loop_close(&n->loop);
        node_free(n);
        return errfmt(err, errcap, "raft: cannot start its thread");
    }
    pthread_setname_np(n->thread, "rs-raft"); /* top -H, perf */
    pthread_mutex_lock(&n->mu);
    while (!n->init_done)
        pthread_cond_wait(&n->cv, &n->mu);
    int rc = n->init_rc;
    pthread_mutex_unlock(&n->mu);
    if (rc != 0) {
        pthread_join(n->thread, NULL);
        errfmt(err, errcap, "%s", n->init_err);
        node_free(n);
        return -1;
    }
    *out = n;
    return 0;
}

int
raftnode_propose(RaftNode *n, const void *data, size_t len, uint64_t *seq)
{
    if (len > RAFTNODE_ENTRY_MAX) return RAFTNODE_ETOOBIG;
    if (atomic_load(&n->failed)) return RAFTNODE_ESTOPPED;
    if (atomic_load(&n->role) != RAFTNODE_LEADER) return RAFTNODE_ENOTLEADER;

    Prop *p = malloc(sizeof *p);
    /* libraft's uv log lays entries out in 8-byte units and expects the
     * data to fill them: an unpadded length misplaces the next batch on
     * disk, which then fails to load (found by a kill -9 test) */
    size_t padded = (len + 7) & ~(size_t)7;
    void *copy = raft_malloc(padded ? padded : 8);
    if (!p || !copy) {
        free(p);
        raft_free(copy);
        return RAFTNODE_ENOMEM;
    }
    memset((char *)copy + len, 0, (padded ? padded : 8) - len);
    if (len) memcpy(copy, data, len);
    p->buf.base = copy;
    p->buf.len = padded ? padded : 8;
    p->len = len;
    p->index = 0;

    int rc = RAFTNODE_OK;
    pthread_mutex_lock(&n->mu);
    if (n->stopping || !n->wake_open)
        rc = RAFTNODE_ESTOPPED;
    else if (n->queued_bytes + len > RAFTNODE_QUEUE_MAX && n->queue.head)
        rc = RAFTNODE_EFULL;
    if (rc == RAFTNODE_OK) {
        p->seq = *seq = n->next_seq++;
        int was_empty = n->queue.head == NULL;
        rn_list_push(&n->queue, p);
        n->queued_bytes += len;
        if (was_empty) uv_async_send(&n->wake);
    }
    pthread_mutex_unlock(&n->mu);
    if (rc != RAFTNODE_OK) {
        raft_free(copy);
        free(p);
    }
    return rc;
}

int
raftnode_lease_ok(RaftNode *n)
{
    int64_t now = mono_ns();

    atomic_store_explicit(&n->lease_wanted, now, memory_order_relaxed);
    return atomic_load(&n->role) == RAFTNODE_LEADER &&
           now < atomic_load(&n->lease_until);
}

void
raftnode_status(const RaftNode *n, RaftNodeStatus *st)
{
    st->role = atomic_load(&n->role);
    st->leader_id = atomic_load(&n->leader_id);
    st->term = atomic_load(&n->term);
    st->commit_index = atomic_load(&n->commit_index);
    st->applied = atomic_load(&n->applied);
    st->ready = atomic_load(&n->ready);
    st->failed = atomic_load(&n->failed);
    st->peer_refused = atomic_load(&n->peer_refused);
}

const char *
raftnode_error(const RaftNode *n)
{
    return atomic_load(&n->failed) ? n->fail_msg : NULL;
}

const char *
raftnode_role_name(int role)
{
    switch (role) {
    case RAFTNODE_FOLLOWER:
        return "follower";
    case RAFTNODE_CANDIDATE:
        return "candidate";
    case RAFTNODE_LEADER:
        return "leader";
    default:
        return "none";
    }
}

size_t
raftnode_queued_bytes(RaftNode *n)
{
    size_t b;

    pthread_mutex_lock(&n->mu);
    b = n->queued_bytes;
    pthread_mutex_unlock(&n->mu);
    return b;
}

void
raftnode_transfer(RaftNode *n, uint64_t id)
{
    if (!n) return;
    pthread_mutex_lock(&n->mu);
    if (n->wake_open && !n->stopping) {
        n->transfer_asked = 1;
        n->transfer_id = id;
        uv_async_send(&n->wake);
    }
    pthread_mutex_unlock(&n->mu);
}

void
raftnode_settle(RaftNode *n, unsigned timeout_ms)
{
    if (!n) return;
    uint64_t want = atomic_load(&n->iterations) + 2;
    int64_t end = mono_ns() + (int64_t)timeout_ms * 1000000;
    struct timespec ms = {0, 1000000};

    while (atomic_load(&n->iterations) < want && mono_ns() < end) {
        pthread_mutex_lock(&n->mu);
        if (n->wake_open) uv_async_send(&n->wake); /* an idle loop iterates */
        pthread_mutex_unlock(&n->mu);
        nanosleep(&ms, NULL);
    }
}

void
raftnode_view(RaftNode *n, RaftNodeView *out)
{
    int64_t now = mono_ns();

    pthread_mutex_lock(&n->view_mu);
    *out = n->view;
    for (int i = 0; i < out->n; i++) {
        int64_t at = n->view_contact[i];
        out->voters[i].contact_ms =
            out->progress && at ? (now > at ? (now - at) / 1000000 : 0) : -1;
    }
    pthread_mutex_unlock(&n->view_mu);
}

void
raftnode_stop(RaftNode *n)
{
    if (!n) return;
    pthread_mutex_lock(&n->mu);
    n->stopping = 1;
    if (n->wake_open) uv_async_send(&n->wake);
    pthread_mutex_unlock(&n->mu);
    pthread_join(n->thread, NULL);
    node_free(n);
}
