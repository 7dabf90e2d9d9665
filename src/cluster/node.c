/* node.c - cluster mode on the loop side (see node.h). */
#include "cluster/node.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "cluster/node_impl.h"
#include "cluster/peer.h"
#include "queue/clock.h"
#include "queue/recover.h"
#include "store/store.h"

_Static_assert(STORE_RAFT_ENTRY_MAX <= RAFTNODE_ENTRY_MAX,
               "a store entry must fit in a Raft entry");

/* ---- raft thread ---- */

static int
cb_apply(void *arg, uint64_t index, const void *data, size_t len, uint64_t seq)
{
    Node *n = arg;
    /* past a gap, nothing of ours is published: a later entry's sequence
     * would acknowledge the changes of the lost one */
    int rc = store_raft_apply(n->store, index, data, len,
                              seq != 0 && !atomic_load(&n->gap));
    /* the records for the loop (cb_replay) in bulk: a wake-up per record,
     * then per entry, cost a follower an eventfd write, an epoll round and
     * two context switches each (node.h, NODE_REPLAY_WAKE) */
    n->rstamp_ns = 0;
    if (n->rqueued) {
        int64_t now = mono_ns();
        if (n->rqueued >= NODE_REPLAY_WAKE ||
            now - n->rwoke_ns >= (int64_t)NODE_REPLAY_WAKE_MS * 1000000) {
            n->rqueued = 0;
            n->rwoke_ns = now;
            ev_async_send(n->loop, &n->async_w);
        }
    }
    return rc;
}

static void cb_notify(void *arg);

/* Raft thread: two proposals of this node's store become one entry. */
static int
cb_join(void *arg, void *a, size_t *alen, const void *b, size_t blen)
{
    (void)arg;
    return store_raft_join(a, alen, b, blen);
}

/* A proposal will not be applied with its seq: never appended (refused) or
 * of unknown fate (appended, then the leadership or the entry was lost). */
static void
cb_lost(void *arg, uint64_t seq, int why)
{
    Node *n = arg;

    (void)seq, (void)why;
    atomic_store(&n->gap, 1);
    cb_notify(arg);
}

static int
cb_snapshot(void *arg, uint64_t index, void **buf, size_t *len)
{
    Node *n = arg;
    return store_raft_snapshot(n->store, index, buf, len);
}

static int
cb_restore(void *arg, uint64_t index, const void *buf, size_t len)
{
    Node *n = arg;

    if (!store_raft_manifest_ok(n->store, buf, len)) return -1;
    if (store_raft_applied(n->store) >= index) return 0; /* already here */
    return node_fetch_state(n, index);
}

void
node_record(Node *n, const ClusterConfig *m, int role)
{
    char err[256], a[CLUSTER_TEXT_MAX], b[CLUSTER_TEXT_MAX];
    ClusterConfig c;
    int in = role == RAFTNODE_VOTER;

    pthread_mutex_lock(&n->rec_mu);
    if (n->rec.state == CLUSTER_REMOVED || n->rec.state == CLUSTER_SEEDING ||
        (!in && n->rec.state != CLUSTER_MEMBER)) {
        pthread_mutex_unlock(&n->rec_mu);
        return;
    }
    c = in ? *m : n->rec;
    c.self_id = n->rec.self_id;
    c.state = in ? CLUSTER_MEMBER : CLUSTER_REMOVED;
    size_t la = cluster_format(&n->rec, a, sizeof a);
    size_t lb = cluster_format(&c, b, sizeof b);
    if (la != lb || memcmp(a, b, la) != 0) {
        if (cluster_identity_write(n->srv->cfg.dir, &c, err, sizeof err) < 0) {
            log_msg(0, "cluster: recording the %s: %s",
                    in ? "configuration" : "removal", err);
        } else {
            n->rec = c;
            log_msg(0, "cluster: %s recorded (%d members)",
                    in ? "configuration" : "removal from the cluster", c.n);
        }
    }
    int none = 0;
    if (!in) atomic_compare_exchange_strong(&n->removed, &none, 1);
    pthread_mutex_unlock(&n->rec_mu);
}

/* Raft thread (RaftNodeCallbacks.members): libraft's configuration
 * changed. The loop takes the members (node_step); a committed one is
 * recorded; one in which this node is no voter starts the removal's grace
 * period (NODE_REMOVED_GRACE_MS), committed or not: a node being removed
 * sees its demotion, rarely its commit (raftnode_change). */
static void
cb_members(void *arg, const ClusterConfig *m, int committed, int role)
{
    Node *n = arg;

    pthread_mutex_lock(&n->cfg_mu);
    n->members = *m;
    n->members_new = 1;
    pthread_mutex_unlock(&n->cfg_mu);
    if (role == RAFTNODE_VOTER)
        atomic_store(&n->absent_since, 0);
    else if (!atomic_load(&n->absent_since))
        atomic_store(&n->absent_since, mono_ns());
    if (committed) node_record(n, m, role);
    ev_async_send(n->loop, &n->async_w);
}

/* Raft thread (RaftNodeCallbacks.seeded): the seeding node's first
 * snapshot is on disk: it is an ordinary member from now on (nodes may
 * join: they get the snapshot). */
static void
cb_seeded(void *arg)
{
    Node *n = arg;
    char err[256];

    pthread_mutex_lock(&n->rec_mu);
    ClusterConfig c = n->rec;
    c.state = CLUSTER_MEMBER;
    if (cluster_identity_write(n->srv->cfg.dir, &c, err, sizeof err) < 0) {
        log_msg(0, "cluster: recording the seeded cluster: %s", err);
    } else {
        n->rec = c;
        log_msg(0, "cluster: seeded: the first snapshot is on disk; nodes "
                   "may join (rockstalkd --join, rockstalk cluster add)");
    }
    pthread_mutex_unlock(&n->rec_mu);
}

void
node_members(Node *n, ClusterConfig *out)
{
    pthread_mutex_lock(&n->cfg_mu);
    *out = n->members;
    pthread_mutex_unlock(&n->cfg_mu);
}

/* One record for the in-memory queue (cb_replay -> node_step). */
typedef struct Replay {
    int op; /* STORE_REPLAY_* */
    uint64_t id;
    int64_t at_ns; /* put: wall_ns() as its entry was applied (clock.h) */
    StoreJob job;  /* put, update */
} Replay;

static void cb_notify(void *arg);

/* Copies the fields of j that queue_replay reads: the fixed ones, and the
 * tube and key up to their lengths (and NULs); a slot's other bytes were
 * 8 cache lines written per record for nothing. */
static void
job_copy(StoreJob *d, const StoreJob *j)
{
    memcpy(d, j, offsetof(StoreJob, tube) + j->tube_len + 1u);
    d->key_len = j->key_len;
    memcpy(d->key, j->key, j->key_len + 1u);
}

/* Raft thread: a committed record for the in-memory queue of a node that
 * does not serve (StoreReplayFn), queued for the loop (node_step), which
 * cb_apply wakes for the queued records in bulk (NODE_REPLAY_WAKE); past
 * NODE_REPLAY_MAX records this wakes the loop and waits for it, as it does
 * nothing else on such a node. On a serving leader (every entry applied
 * there is its own) such a record means its memory is not the log: it only
 * marks foreign, and node_step restarts the process. */
static void
cb_replay(void *arg, int op, uint64_t id, const StoreJob *job)
{
    Node *n = arg;

    if (atomic_load(&n->serving_seen)) { /* not ours, yet serving */
        atomic_store(&n->foreign, 1);
        cb_notify(n);
        return;
    }
    pthread_mutex_lock(&n->rmu);
    if (n->rlen >= NODE_REPLAY_MAX) ev_async_send(n->loop, &n->async_w);
    while (n->rlen >= NODE_REPLAY_MAX && !n->rstop)
        pthread_cond_wait(&n->rcv, &n->rmu);
    if (n->rlen == n->rcap) {
        n->rcap = n->rcap ? 2 * n->rcap : 256;
        Replay *nb = realloc(n->rbuf, n->rcap * sizeof *nb);
        if (!nb) abort(); /* out of memory */
        n->rbuf = nb;
    }
    Replay *r = &n->rbuf[n->rlen++];
    r->op = op;
    r->id = id;
    if (op == STORE_REPLAY_PUT && !n->rstamp_ns) n->rstamp_ns = wall_ns();
    r->at_ns = n->rstamp_ns;
    if (job) job_copy(&r->job, job);
    pthread_mutex_unlock(&n->rmu);
    n->rqueued++;
}

void
node_drain_replay(Server *s)
{
    Node *n = s->node;

    pthread_mutex_lock(&n->rmu);
    Replay *b = n->rbuf;
    size_t len = n->rlen, cap = n->rcap;
    n->rbuf = n->rspare;
    n->rcap = n->rspare_cap;
    n->rlen = 0;
    pthread_cond_broadcast(&n->rcv);
    pthread_mutex_unlock(&n->rmu);
    if (len) queue_clock_window(s, mono_ns());
    for (size_t i = 0; i < len; i++) {
        if (queue_replay(s, b[i].op, b[i].id, &b[i].job, b[i].at_ns) < 0) {
            log_msg(0, "cluster: out of memory replaying job %llu",
                    (unsigned long long)b[i].id);
            _exit(2);
        }
        if (b[i].op == STORE_REPLAY_PUT && b[i].id >= s->next_id)
            s->next_id = b[i].id + 1;
    }
    n->rspare = b;
    n->rspare_cap = cap;
}

static void
cb_notify(void *arg)
{
    Node *n = arg;
    ev_async_send(n->loop, &n->async_w); /* thread-safe (ev(3) ev_async) */
}

static void
async_cb(struct ev_loop *loop, ev_async *w, int revents)
{
    (void)loop, (void)w, (void)revents; /* the prepare watcher does the work */
}

static void
grace_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop, (void)w, (void)revents; /* the prepare watcher does the work */
}

/* Loop thread (store_flush): StoreProposeFn over raftnode_propose. */
static int
propose(void *arg, const void *entry, size_t len)
{
    Node *n = arg;
    uint64_t seq;
    int rc = RAFTNODE_ESTOPPED;

    pthread_mutex_lock(&n->raft_mu);
    if (n->raft) rc = raftnode_propose(n->raft, entry, len, &seq);
    pthread_mutex_unlock(&n->raft_mu);
    if (rc == RAFTNODE_OK) return 0;
    if (rc == RAFTNODE_EFULL) return 1;
    atomic_store(&n->gap, 1); /* store/propose.c drops the entry */
    return -1;
}

size_t
node_backlog_bytes(const Server *s)
{
    Node *n = s->node;
    size_t b = 0;

    if (!n) return 0;
    pthread_mutex_lock(&n->raft_mu);
    if (n->raft) b = raftnode_queued_bytes(n->raft);
    pthread_mutex_unlock(&n->raft_mu);
    return 2 * b; /* see node.h */
}

/* ---- main thread: start and stop ---- */

/* Tuning for tests (a smaller snapshot threshold makes a log drop early):
 * ROCKSTALKD_RAFT_THRESHOLD and ROCKSTALKD_RAFT_TRAILING, entries;
 * ROCKSTALKD_RAFT_SEGMENT, bytes (small segments: a full disk bites). */
static unsigned
env_uint(const char *name)
{
    const char *v = getenv(name);
    return v ? (unsigned)strtoul(v, NULL, 10) : 0;
}

int
node_seed_first(const Server *s)
{
    char path[4096];

    if (!s->node || s->node->rec.state != CLUSTER_SEEDING) return 0;
    snprintf(path, sizeof path, "%s/%s", s->cfg.dir, CLUSTER_RAFT_SUBDIR);
    return access(path, F_OK) != 0;
}

int
node_standalone_dir(const char *dir, char *err, size_t errcap)
{
    char path[4096];

    snprintf(path, sizeof path, "%s/%s", dir, CLUSTER_FILE);
    if (access(path, F_OK) == 0)
        return errfmt(err, errcap,
                      "%s belongs to a cluster node (%s): start it "
                      "with --cluster and --node-id",
                      dir, path);
    return 0;
}

/* The nodes' credentials (--cluster-cert, -key, -ca) into n->tls, or the
 * warning that they talk in plaintext (peer_policy_check allowed it). */
static int
open_security(const Server *s, Node *n, const ClusterConfig *cc, char *err,
              size_t errcap)
{
    int exposed = 0;

    if (!s->cfg.peer_cert) {
        log_msg(0,
                "cluster: WARNING: the nodes talk in plaintext, "
                "unauthenticated (%s): whoever reaches a Raft port "
                "controls the cluster",
                s->cfg.peer_insecure ? "--cluster-insecure"
                                     : "every voter on loopback");
        return 0;
    }
    if (peer_open_creds(cc, s->cfg.peer_cert, s->cfg.peer_key, s->cfg.peer_ca,
                        &n->tls, &exposed, err, errcap) < 0)
        return -1;
    if (exposed)
        log_msg(0, "cluster: WARNING: %s is readable by group or others",
                s->cfg.peer_key);
    log_msg(0, "cluster: mutual TLS between the nodes (CA %s)", s->cfg.peer_ca);
    return 0;
}

void
node_reload_tls(Server *s)
{
    char err[512];
    Node *n = s->node;

    if (!n || !n->tls) return;
    /* the files must name this node before they replace what it has */
    TlsCreds *c = NULL;
    if (tls_creds_load(s->cfg.peer_cert, s->cfg.peer_key, s->cfg.peer_ca, &c,
                       err, sizeof err) == 0 &&
        tls_creds_self_id(c) != n->cfg.self_id)
        snprintf(err, sizeof err, "%s does not name node %llu",
                 s->cfg.peer_cert, (unsigned long long)n->cfg.self_id);
    else if (c && tls_source_reload(n->tls, err, sizeof err) == 0)
        err[0] = '\0';
    if (c) tls_creds_unref(c);
    if (err[0]) {
        log_msg(0, "SIGHUP: cluster certificates kept: %s", err);
        return;
    }
    log_msg(0, "SIGHUP: cluster certificates re-read; new connections use "
               "them");
    c = tls_source_get(n->tls);
    if (c && tls_creds_key_exposed(c))
        log_msg(0, "cluster: WARNING: %s is readable by group or others",
                s->cfg.peer_key);
    if (c) tls_creds_unref(c);
}

int
node_prepare(Server *s, const ClusterConfig *cc, char *const *argv, char *err,
             size_t errcap)
{
    char path[4096];
    ClusterConfig me = *cc;
    Node *n;
    const uint16_t one = 1;

    if (*(const unsigned char *)&one != 1)
        return errfmt(err, errcap, "cluster mode needs a little-endian host");
    snprintf(path, sizeof path, "%s/FORMAT", s->cfg.dir);
    int formatted = access(path, F_OK) == 0;
    snprintf(path, sizeof path, "%s/%s", s->cfg.dir, CLUSTER_FILE);
    if (formatted && access(path, F_OK) != 0)
        return errfmt(err, errcap,
                      "%s is a standalone data directory; a cluster "
                      "node needs a directory of its own",
                      s->cfg.dir);
    /* with mutual TLS relays go over the peer links, not to client ports */
    for (int i = 0; !s->cfg.peer_cert && i < s->nlisteners; i++)
        if (cluster_check_relay(cc, s->listeners[i].fd, s->cfg.port, err,
                                errcap) < 0)
            return -1;
    /* a restart of its own (nodestep.c's restart()) takes the recorded
     * members */
    int again = getenv(NODE_RESTART_ENV) != NULL;
    unsetenv(NODE_RESTART_ENV);
    if ((again ? cluster_identity_adopt(s->cfg.dir, &me, err, errcap)
               : cluster_identity_check(s->cfg.dir, &me, err, errcap)) < 0)
        return -1;
    if (!(n = calloc(1, sizeof *n)))
        return errfmt(err, errcap, "out of memory");
    if (open_security(s, n, cc, err, errcap) < 0) {
        free(n);
        return -1;
    }
    n->cfg = n->members = n->rec = me;
    pthread_mutex_init(&n->cfg_mu, NULL);
    pthread_mutex_init(&n->rec_mu, NULL);
    if (me.state == CLUSTER_JOINING)
        log_msg(0,
                "cluster: node %llu joins: it serves nothing until a "
                "member adds it (rockstalk cluster add)",
                (unsigned long long)me.self_id);
    n->loop = s->loop;
    n->argv = argv;
    n->port = s->cfg.port;
    pthread_mutex_init(&n->raft_mu, NULL);
    pthread_mutex_init(&n->rmu, NULL);
    pthread_cond_init(&n->rcv, NULL);
    pthread_mutex_init(&n->ship_mu, NULL);
    for (int i = 0; i < NODE_SHIP_MAX; i++)
        n->ship_fd[i] = -1;
    n->ship_timeout_s = (int)env_uint("ROCKSTALKD_SNAPSHOT_SEND_TIMEOUT");
    if (n->ship_timeout_s <= 0) n->ship_timeout_s = NODE_SHIP_SEND_S;
    proxy_set_init(&n->proxies, s->loop);
    mux_relay_init(&n->relays, s->loop);
    mux_serve_init(&n->muxserve, s, NULL);            /* others: serve_mux's */
    const char *mux = getenv("ROCKSTALKD_RELAY_MUX"); /* "0": one link each */
    n->relay_mux = !mux || strcmp(mux, "0") != 0;
    ev_async_init(&n->async_w, async_cb);
    ev_async_start(s->loop, &n->async_w);
    ev_timer_init(&n->grace_w, grace_cb, 0., 0.);
    pthread_mutex_init(&n->served_mu, NULL);
    ev_async_init(&n->served_w, node_served_cb);
    n->served_w.data = n;
    ev_async_start(s->loop, &n->served_w);
    n->srv = s;
    s->node = n;
    return 0;
}

/* Loads the in-memory queue from the shards (as a standalone start does)
 * while the raft thread may already apply entries: those it writes are
 * also queued for node_drain_replay, whose records replace what the scan read,
 * in log order, so the queue ends as the shards are. A state fetched
 * meanwhile (fetched) makes node_step start the process again. */
static int
load_queue(Server *s, char *err, size_t errcap)
{
    Node *n = s->node;
    uint64_t next_id = 1;
    int64_t t0 = mono_ns();

    n->fetched_seen = atomic_load(&n->fetched);
    if (store_recover(s->store, queue_recover_job, s, &next_id, err, errcap) <
        0)
        return -1;
    if (next_id > s->next_id) s->next_id = next_id;
    log_msg(0, "recovered %zu jobs from %s in %.3f s (next id %llu)",
            s->jobs.len, s->cfg.dir, (double)(mono_ns() - t0) / 1e9,
            (unsigned long long)next_id);
    return 0;
}

int
node_start(Server *s, char *err, size_t errcap)
{
    Node *n = s->node;
    char dir[4096];
    RaftNodeOptions opt = {
        .snapshot_threshold = env_uint("ROCKSTALKD_RAFT_THRESHOLD"),
        .snapshot_trailing = env_uint("ROCKSTALKD_RAFT_TRAILING"),
        .fault_refuse = env_uint("ROCKSTALKD_FAULT_RAFT_REFUSE"),
        .segment_bytes = env_uint("ROCKSTALKD_RAFT_SEGMENT"),
        .tls = n->tls,
        .seed = n->rec.state == CLUSTER_SEEDING,
    };
    RaftNodeCallbacks cb = {.arg = n,
                            .apply = cb_apply,
                            .lost = cb_lost,
                            .join = cb_join,
                            .snapshot = cb_snapshot,
                            .restore = cb_restore,
                            .notify = cb_notify,
                            .members = cb_members,
                            .seeded = cb_seeded,
                            .serve = node_cb_serve};
    RaftNode *r;

    n->store = s->store;
    store_cluster_mode(s->store, (uint16_t)n->cfg.self_id, propose, n);
    store_raft_replay(s->store, cb_replay, n);
    if (store_start(s->store, err, errcap) < 0) return -1;
    snprintf(dir, sizeof dir, "%s/%s", s->cfg.dir, CLUSTER_RAFT_SUBDIR);
    if (raftnode_start(&n->cfg, dir, &opt, &cb, &r, err, errcap) < 0) return -1;
    pthread_mutex_lock(&n->raft_mu);
    n->raft = r;
    pthread_mutex_unlock(&n->raft_mu);
    log_msg(0, "cluster: node %llu of %d, Raft log in %s",
            (unsigned long long)n->cfg.self_id, n->cfg.n, dir);
    return load_queue(s, err, errcap);
}

/* Stops the Raft node (no proposal reaches it afterwards) and ends the
 * snapshot senders. */
static void
stop_raft(Node *n)
{
    pthread_mutex_lock(&n->rmu); /* cb_replay may wait for the loop */
    n->rstop = 1;
    pthread_cond_broadcast(&n->rcv);
    pthread_mutex_unlock(&n->rmu);
    pthread_mutex_lock(&n->raft_mu);
    RaftNode *r = n->raft;
    n->raft = NULL;
    pthread_mutex_unlock(&n->raft_mu);
    raftnode_stop(r);
    node_stop_senders(n);
}

/* A leader that stops hands its leadership over first (raftnode_transfer),
 * so the cluster serves again at once rather than after an election
 * timeout; waits up to NODE_TRANSFER_MS for another node to take it. The
 * loop no longer runs, so nothing new is proposed meanwhile. */
static void
hand_over(Node *n)
{
    RaftNodeStatus st;
    int64_t t0 = mono_ns();

    raftnode_status(n->raft, &st);
    if (st.role != RAFTNODE_LEADER || st.failed) return;
    raftnode_transfer(n->raft, 0);
    do {
        usleep(2000);
        raftnode_status(n->raft, &st);
    } while (st.role == RAFTNODE_LEADER && !st.failed &&
             mono_ns() - t0 < (int64_t)NODE_TRANSFER_MS * 1000000);
    if (st.role == RAFTNODE_LEADER)
        log_msg(0, "cluster: no other node took the leadership in %d ms",
                NODE_TRANSFER_MS);
    else
        log_msg(0, "cluster: leadership handed over in %.0f ms (leader: %llu)",
                (double)(mono_ns() - t0) / 1e6,
                (unsigned long long)st.leader_id);
}

void
node_close(Server *s)
{
    Node *n = s->node;

    if (!n) return;
    if (n->raft) hand_over(n);
    stop_raft(n);
    proxy_close_all(&n->proxies);
    mux_relay_close_all(&n->relays);
    mux_serve_close_all(&n->muxserve);
    for (int i = 0; i < n->nparked; i++) {
        node_park_unwatch(n, &n->parked[i]);
        close(n->parked[i].fd);
        tls_sock_free(n->parked[i].tls);
    }
    n->nparked = 0;
}

void
node_free(Server *s)
{
    Node *n = s->node;

    if (!n) return;
    ev_async_stop(s->loop, &n->async_w);
    ev_async_stop(s->loop, &n->served_w);
    ev_timer_stop(s->loop, &n->grace_w);
    for (int i = 0; i < n->nserved; i++)
        peer_service_free(&n->served[i]);
    pthread_mutex_destroy(&n->served_mu);
    proxy_set_free(&n->proxies);
    pthread_mutex_destroy(&n->raft_mu);
    pthread_mutex_destroy(&n->rmu);
    pthread_cond_destroy(&n->rcv);
    pthread_mutex_destroy(&n->ship_mu);
    pthread_mutex_destroy(&n->cfg_mu);
    pthread_mutex_destroy(&n->rec_mu);
    free(n->rbuf);
    free(n->rspare);
    if (n->tls) tls_source_close(n->tls);
    free(n);
    s->node = NULL;
}
