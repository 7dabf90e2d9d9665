/* raftnode_impl.h - the Raft node's insides, shared by raftnode.c (its
 * thread, loop and cross-thread API) and raftfsm.c (the entries: proposals
 * in flight and the state machine libraft calls back). Private to those two
 * files: everyone else sees raftnode.h. */
#ifndef ROCKSTALK_RAFTNODE_IMPL_H
#define ROCKSTALK_RAFTNODE_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <raft.h>
#include <raft/uv.h>
#include <uv.h>

#include "cluster/raftnode.h"
#include "cluster/peer.h"
#include "cluster/rafttune.h"

#define ERR_MAX 256 /* bytes of an error message, NUL included */

/* A proposal: queued by propose, then in flight once appended. */
typedef struct Prop {
    struct Prop *next;
    uint64_t seq;
    uint64_t index;         /* raft thread: its log index once appended */
    size_t len;             /* bytes proposed (buf.len: padded) */
    struct raft_buffer buf; /* raft_malloc'd; raft's once appended */
} Prop;

/* A list of proposals, oldest first. */
typedef struct PropList {
    Prop *head, **tail;
} PropList;

/* A membership change on the raft thread (raftchange.c). */
typedef struct Change {
    int op;                           /* RAFTNODE_CHANGE_*, 0: none */
    ClusterPeer peer;                 /* the member */
    char addr[CLUSTER_RAFT_ADDR_MAX]; /* its Raft address (ADD) */
    int phase;                        /* what it waits for (raftchange.c) */
    int64_t deadline;                 /* CLOCK_MONOTONIC ns */
    int pending;                      /* req is libraft's until its cb */
    int answered;                     /* the outcome is published */
    uint64_t demote_index;            /* REMOVE: the index of the demotion */
    int64_t demoted_until; /* ... how long to wait for its copy (ns) */
    int demote_late;       /* ... and it did not store it in time */
    struct raft_change req;
} Change;

struct RaftNode {
    /* set by raftnode_start; cfg's members then follow libraft's
     * configuration on the raft thread (check_members), read only there */
    ClusterConfig cfg;
    char self_addr[CLUSTER_ADDR_MAX]; /* this node's Raft address */
    char *dir;
    RaftNodeOptions opt;
    RaftNodeCallbacks cb;
    pthread_t thread;

    /* any thread, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv; /* the start handshake */
    int init_done, init_rc;
    char init_err[ERR_MAX];
    PropList queue; /* proposed, not yet taken by the raft thread */
    size_t queued_bytes;
    uint64_t next_seq;
    int stopping;         /* raftnode_stop asked */
    int wake_open;        /* the raft thread may be woken through wake */
    int transfer_asked;   /* raftnode_transfer asked, not yet started */
    uint64_t transfer_id; /* ... to this voter (0: any) */
    /* membership changes: asked (ch_asked, ch_in), under way (ch_busy:
     * until the raft thread ends it, libraft's callback included) and
     * their outcome (ch_result, RAFTNODE_CH_*, and ch_msg) */
    int ch_asked, ch_busy, ch_result;
    Change ch_in;
    char ch_msg[ERR_MAX];

    /* published: written by the raft thread, read by any */
    _Atomic int role;
    _Atomic uint64_t leader_id, term, commit_index, applied;
    _Atomic int ready;
    _Atomic int failed;
    /* The lease (raftnode_lease_ok): CLOCK_MONOTONIC ns until which this
     * leader's leadership is confirmed, 0 when none; and when a reader last
     * asked for it (the raft thread renews it only while someone reads). */
    _Atomic int64_t lease_until;
    _Atomic int64_t lease_wanted;
    _Atomic uint64_t peer_refused; /* peer_refused(), as published */
    _Atomic uint64_t iterations;   /* the raft loop's, counted by on_check */
    char fail_msg[ERR_MAX];        /* written once before failed is set */
    /* the view (raftnode_view), written by the raft thread each iteration
     * (publish_view), under view_mu */
    pthread_mutex_t view_mu;
    RaftNodeView view;
    int64_t view_contact[CLUSTER_MAX_VOTERS]; /* contact_ns of view.voters[]
                                                 (raftnode_view ages it) */

    /* raft thread only */
    uv_loop_t loop;
    uv_async_t wake;
    uv_check_t check;
    RaftTune tune; /* libraft 0.15 workarounds (rafttune.h) */
    struct raft_uv_transport transport;
    struct raft_io io;
    /* the uv io's own append, which rn_io_wrap's wrapper calls */
    int (*io_append)(struct raft_io *io, struct raft_io_append *req,
                     const struct raft_entry entries[], unsigned n,
                     raft_io_append_cb cb);
    struct raft_fsm fsm;
    struct raft raft;
    PropList inflight; /* appended by this leader, index order */
    uint64_t inflight_term;
    uint64_t last_index; /* latest index applied or restored */
    int barrier_pending; /* a barrier is in the log, not yet applied */
    int64_t lease_ns;    /* a lease's length: half the election timeout */
    unsigned submitted;  /* proposals taken (opt.fault_refuse counts them) */
    uint64_t ready_term; /* the term whose barrier was applied here */
    struct raft_transfer transfer; /* in use while transferring */
    int transferring;
    int closing;
    /* CLOCK_MONOTONIC ns when this leader last saw each voter's
     * recent_recv set (0: not in view_term), by index in cfg.voters */
    int64_t contact_ns[CLUSTER_MAX_VOTERS];
    uint64_t contact_term; /* the term contact_ns belongs to */
    Change ch;             /* the membership change under way */
    int seeded;            /* RaftNodeCallbacks.seeded was called */
    /* libraft's configuration indexes when members were last published */
    uint64_t conf_seen, conf_unc_seen;
};

/* ---- raftchange.c ---- */

/* Raft thread (on_wake): starts the change raftnode_change asked for. */
void rn_change_take(RaftNode *n);

/* Raft thread, each iteration: moves the change under way on (a standby
 * caught up is promoted) and ends it past its deadline or once this node
 * no longer leads. */
void rn_change_check(RaftNode *n);

/* Proposal lists (raftfsm.c): rn_list_init empties l, rn_list_push appends
 * p, rn_list_pop takes the oldest (NULL when l is empty). The caller
 * serialises access (mu, or the raft thread alone). */
void rn_list_init(PropList *l);
void rn_list_push(PropList *l, Prop *p);
Prop *rn_list_pop(PropList *l);

/* Raft thread: reports every proposal of l lost (why: RAFTNODE_LOST_*),
 * oldest first, and frees each, with its buffer if still ours. */
void rn_lose_all(RaftNode *n, PropList *l, int why);

/* Raft thread: the in-flight proposals are lost (UNKNOWN) once this node no
 * longer leads in the term that appended them. */
void rn_check_inflight(RaftNode *n);

/* Raft thread: hands l's proposals to raft_apply, one entry per call; those
 * appended go in flight; once one is refused, so are the rest. Empties l. */
void rn_submit(RaftNode *n, PropList *l);

/* Raft thread: marks the node failed with a message (printf's fmt; the
 * first failure wins), publishes role NONE and calls notify. */
void rn_fail(RaftNode *n, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Raft thread: a libraft request (what: "appending an entry", ...) ended
 * with status: fails the node (rn_fail) unless it is 0, the leadership
 * was lost (RAFT_LEADERSHIPLOST) or libraft is closing. */
void rn_check_status(RaftNode *n, int status, const char *what);

/* Raft thread, after raft_uv_init: wraps n->io's append so that a failed
 * write of the log fails the node (rn_fail) on a follower too, where
 * libraft 0.15 only answers the leader "rejected" and, its uv layer
 * errored, fails every later append while it keeps answering heartbeats
 * (replication.c appendFollowerCb). */
void rn_io_wrap(RaftNode *n);

/* Raft thread: fills n->fsm with the state machine (apply, snapshot,
 * restore), its data pointing at n. */
void rn_fsm_init(RaftNode *n);

#endif
