/* node_impl.h - cluster mode's loop-side node insides, shared by node.c
 * (start and stop, the raft callbacks, the replay buffer), nodestep.c
 * (each loop iteration: serving, relaying, stepping down), nodepeer.c
 * (what a node does with its peers out of band: the state stream served
 * and fetched, and the links peers open to it) and nodeops.c. Private to
 * those files; the rest of the process sees node.h and nodestep.h. */
#ifndef ROCKSTALK_NODE_IMPL_H
#define ROCKSTALK_NODE_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "cluster/node.h"
#include "cluster/muxrelay.h"
#include "cluster/muxserve.h"
#include "cluster/proxy.h"
#include "cluster/raftnode.h"
#include "net/tls.h"

/* Links from peers waiting for the loop (cb_serve); more are closed. */
#define NODE_SERVED_MAX 64

/* Set in the environment of a restart of its own (nodestep.c's restart()):
 * node_prepare then takes the members the CLUSTER file records, not
 * --cluster's, which may predate membership changes. */
#define NODE_RESTART_ENV "ROCKSTALKD_CLUSTER_RESTART"

/* How long that restart waits at most for the raft thread to send what it
 * last wrote (raftnode_settle), ms: a vote just granted, say. */
#define NODE_SETTLE_MS 500

struct Node {
    /* The members as the loop uses them (relays, status): --cluster's at
     * first, then libraft's configuration (node_step takes members).
     * Loop thread. */
    ClusterConfig cfg;
    /* libraft's configuration as the raft thread last saw it (cb_members),
     * and whether node_step has yet to take it; under cfg_mu, which the
     * raft thread also takes to read it (the state fetch's peers) */
    pthread_mutex_t cfg_mu;
    ClusterConfig members;
    int members_new;
    /* The CLUSTER file's record (node_record: raft thread, and the loop
     * once this node is found removed), under rec_mu */
    pthread_mutex_t rec_mu;
    ClusterConfig rec;
    /* CLOCK_MONOTONIC ns since libraft's latest configuration has this
     * node as no voter (0: a voter); past NODE_REMOVED_GRACE_MS node_step
     * records a member's removal even if no commit of it reached it */
    _Atomic int64_t absent_since;
    _Atomic int removed; /* 1: recorded removed (node_record); 2: node_step
                            has asked the process to stop */
    ev_timer grace_w;    /* wakes the loop when the grace period ends */
    /* The membership change a client waits for (nodeops.c): its
     * connection (paused; NULL once answered or closed), the member, and
     * when the wait began and ends (CLOCK_MONOTONIC ns) */
    Conn *change_conn;
    int change_op;
    uint64_t change_id;
    int64_t change_t0, change_end;
    TlsSource *tls; /* the nodes' mutual TLS; NULL: plaintext (peer.h) */
    RaftNode *raft;
    Store *store; /* borrowed: the Server's */
    struct ev_loop *loop;
    ev_async async_w; /* the raft thread's "status changed" */
    ProxySet proxies;
    MuxRelaySet relays;   /* follower: clients multiplexed to the leader */
    MuxServeSet muxserve; /* leader: the followers' multiplexed links */
    int relay_mux;        /* multiplex relays over mTLS (ROCKSTALKD_RELAY_MUX=0:
                           * a link per client, as before; for comparison) */
    uint64_t proxied_leader; /* the leader the relays go to */
    int serving;
    uint64_t serving_term; /* the term it began serving in (promote) */
    /* A proposal of this leader was refused or lost (raftnode's lost(), or
     * propose failed): its changes are in the loop's memory and may be in
     * no log. From then on no entry publishes its sequence (cb_apply), so
     * no reply past the gap leaves, and node_step restarts the process. */
    _Atomic int gap;
    /* serving, as the raft thread sees it (cb_replay), and whether an entry
     * this leader did not propose was applied while it served: its memory
     * is then not the log, and node_step restarts the process (rather than
     * the raft thread waiting for ever on a replay buffer the serving loop
     * never drains) */
    _Atomic int serving_seen, foreign;
    int port; /* this node's client port (-p) */
    /* rockstalk-cluster-transfer asked to hand the leadership to this
     * voter (nodeops.c); node_step starts it once the reply is written.
     * 0: none. Loop thread. */
    uint64_t transfer_to;
    char *const *argv;
    pthread_mutex_t raft_mu; /* orders propose against node_close */
    /* snapshot senders (node_snapshot_serve, ship_main), under ship_mu */
    pthread_mutex_t ship_mu;
    int ship_fd[NODE_SHIP_MAX]; /* a running sender's socket, or -1 */
    int ship_timeout_s;         /* its SO_SNDTIMEO (NODE_SHIP_SEND_S) */
    /* committed records for the in-memory queue of a node that does not
     * serve (cb_replay -> node_step): headers and metas, no bodies */
    pthread_mutex_t rmu;
    pthread_cond_t rcv;            /* the loop took the buffer */
    struct Replay *rbuf, *rspare;  /* filling; the loop's last one */
    size_t rlen, rcap, rspare_cap; /* records */
    int rstop;                     /* stopping: cb_replay waits no more */
    /* raft thread only: records queued since the loop was last woken for
     * them, and when that was (mono_ns); cb_apply wakes it at most once per
     * entry, and only past NODE_REPLAY_WAKE records or NODE_REPLAY_WAKE_MS */
    size_t rqueued;
    int64_t rwoke_ns;
    /* raft thread only: wall_ns() at the first put record of the entry
     * being applied (its records' Replay.at_ns), 0 between entries */
    int64_t rstamp_ns;
    _Atomic unsigned fetched; /* states fetched by restore (fetch_state) */
    unsigned fetched_seen;    /* ... when the queue was loaded */
    /* links the peers opened to this node (cb_serve, raft thread) for the
     * loop (served_cb): relayed clients and state streams, under served_mu */
    pthread_mutex_t served_mu;
    PeerService served[NODE_SERVED_MAX];
    int nserved;
    ev_async served_w;
    Server *srv; /* the Server this node is part of */
    struct Parked {
        int fd;
        uint8_t via;  /* CONN_VIA_* */
        TlsSock *tls; /* a tls:// client's session, or NULL */
        int64_t at;   /* monotonic ns */
        ev_io *rd;    /* owned: watches for rockstalk-snapshot, or NULL
                         (node_park_watch) */
    } parked[NODE_PARK_MAX];
    int nparked;
};

/* ---- node.c ---- */

/* Any thread: a copy of the members the raft thread last saw (n->members,
 * under cfg_mu). */
void node_members(Node *n, ClusterConfig *out);

/* Raft thread, or the loop once this node is found removed: records a
 * committed configuration in the CLUSTER file (cluster_identity_write)
 * when it changes what the file says: the members, once this node is a
 * voter among them (a node that joins passes through configurations
 * without itself, then as a spare and a standby), or its removal, once it
 * was a member and is a voter no longer (role: this node's role in m, -1
 * if it lacks it; a voter being removed is demoted to standby first,
 * raftnode_change). A failed write is logged: the file then names the
 * members before, which a restart with them still accepts. Takes rec_mu;
 * sets removed to 1 with a removal. */
void node_record(Node *n, const ClusterConfig *m, int role);

/* Loop thread: applies the records the raft thread queued to the
 * in-memory queue (queue_replay) and keeps next_id above every id put;
 * wakes a cb_replay waiting for room. Out of memory it stops the process
 * (exit 2). */
void node_drain_replay(Server *s);

/* ---- nodepeer.c ---- */

/* Raft thread: fetches the state as of index or later from a peer, into
 * the shards (over the nodes' mutual TLS when n->tls, else the peers'
 * client ports). Returns 0, or -1 after FETCH_TRY_S seconds of failures. */
int node_fetch_state(Node *n, uint64_t index);

/* Main thread, stopping: ends the snapshot senders, which read the store:
 * shuts their sockets down and waits up to NODE_SHIP_STOP_MS for them;
 * one still running then stops the process (exit 2). */
void node_stop_senders(Node *n);

/* Loop thread, p just parked (n->parked): in plaintext cluster mode
 * without --auth-file, a plain TCP client's connection is watched for a
 * peer's rockstalk-snapshot, which this node answers although it does not
 * serve, as the serving leader would (the fetching peer may be the vote
 * it needs to serve; node_snapshot_serve). Its first bytes are peeked once
 * there are as many as the request's (SO_RCVLOWAT, back to 1 when the
 * watch ends); anything else stays unread, and so does all from then on:
 * the connection waits for a leader as before. After OUT_OF_MEMORY it is
 * still watched; one that does not take that reply is closed. Without
 * memory for the watcher it just waits. */
void node_park_watch(Node *n, struct Parked *p);

/* Loop thread: stops and frees p's watcher, if any, and sets its socket's
 * SO_RCVLOWAT back to 1; before p's socket is relayed, served or closed. */
void node_park_unwatch(Node *n, struct Parked *p);

/* Raft thread (RaftNodeCallbacks.serve): a peer's link of another channel
 * than Raft, queued for the loop (at most NODE_SERVED_MAX; fd closed
 * past that). */
void node_cb_serve(void *arg, PeerService *svc);

/* Loop thread: the links cb_serve queued: a relayed client becomes a
 * connection of a serving leader (within --max-connections), a state
 * stream request gets a sender; anything else is closed. */
void node_served_cb(struct ev_loop *loop, ev_async *w, int revents);

#endif
