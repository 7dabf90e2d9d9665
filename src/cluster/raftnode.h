/* raftnode.h - one Raft node (libraft, canonical raft's C library) on its
 * own thread, with its own libuv loop: libraft's uv disk I/O for the log in
 * a directory of its own and its uv TCP transport to the other voters.
 * libraft takes no locks, so every libraft call happens on that thread;
 * other threads talk to it only through what this header offers:
 *
 *   in   raftnode_propose: a mutex-protected queue of entries and a
 *        uv_async wake-up; the raft thread hands everything queued to
 *        raft_apply at once, one entry per call (the subset both libraft
 *        versions take), and libraft writes the appends that arrive during
 *        a disk write together. Batching many commands into one entry is
 *        the proposer's: one propose per group of mutations.
 *   out  callbacks on the raft thread (apply, lost, snapshot, restore,
 *        notify) and the status published in atomics (raftnode_status).
 *
 * The state machine lives outside: apply is called for every committed
 * entry, in index order, on every node (the leader included). Snapshots
 * are small manifests (the caller's state lives in its own storage, e.g.
 * RocksDB, and moves out of band); raftnode prefixes each with its index.
 *
 * Threads: raftnode_start, raftnode_stop on the owner's thread (one call
 * each); raftnode_propose and raftnode_status on any thread; every callback
 * on the raft thread, never on the caller's. Calls: cluster (ClusterConfig)
 * and libraft, libuv. Errors: start returns -1 with a message in err
 * (errcap bytes); propose returns a RAFTNODE_E* code; nothing here prints.
 */
#ifndef ROCKSTALK_RAFTNODE_H
#define ROCKSTALK_RAFTNODE_H

#include <stddef.h>
#include <stdint.h>

#include "cluster/cluster.h"
#include "cluster/peer.h"
#include "net/tls.h"

/* Roles as published (RaftNodeStatus.role). NONE: not running (before
 * start, while stopping, or once failed). */
enum {
    RAFTNODE_NONE = 0,
    RAFTNODE_FOLLOWER,
    RAFTNODE_CANDIDATE,
    RAFTNODE_LEADER
};

/* raftnode_propose's results. */
enum {
    RAFTNODE_OK = 0,
    RAFTNODE_ENOTLEADER = -1, /* not the leader as last published */
    RAFTNODE_ETOOBIG = -2,    /* len > RAFTNODE_ENTRY_MAX */
    RAFTNODE_EFULL = -3,      /* RAFTNODE_QUEUE_MAX bytes already queued */
    RAFTNODE_ESTOPPED = -4,   /* stopping, or failed */
    RAFTNODE_ENOMEM = -5
};

/* Why a proposal ends in lost() rather than in apply() with its seq. */
enum {
    /* Never appended to the log (this node was not the leader when the
     * raft thread took it, or it was stopping): it will not commit. */
    RAFTNODE_LOST_REFUSED = 1,
    /* Appended, but this node lost its leadership (or stopped) before the
     * entry was applied here: it may still commit under the next leader,
     * and then arrives in apply() with seq 0. Whoever needs to know must
     * recognise the entry by its content. */
    RAFTNODE_LOST_UNKNOWN = 2
};

/* Largest entry: half of libraft's 8 MiB log segment, so an entry never
 * needs a segment of its own. Bytes. */
#define RAFTNODE_ENTRY_MAX (4u << 20)
/* Bytes of entries libraft's in-memory log may hold since the last
 * snapshot (and, at the mean entry size, behind it) before a snapshot is
 * taken early: bounds the log's memory when entries are large. */
#define RAFTNODE_LOG_BYTES (64u << 20)
/* Most bytes queued for the raft thread; propose refuses more
 * (backpressure on the proposer, not memory without bound). */
#define RAFTNODE_QUEUE_MAX (64u << 20)

/* A member's role in libraft's configuration (RaftNodeVoterView.role,
 * RaftNodeCallbacks.members). */
enum {
    RAFTNODE_VOTER = 0,   /* votes and counts for the majority */
    RAFTNODE_STANDBY = 1, /* gets the log, does not vote: catching up */
    RAFTNODE_SPARE = 2    /* gets nothing yet: just added */
};

/* Callbacks, all on the raft thread; arg is handed to each. A callback must
 * not call raftnode_stop (propose and status are fine). */
typedef struct RaftNodeCallbacks {
    void *arg;
    /* A committed entry: index (strictly increasing, except that a restore
     * restarts it from the snapshot's index), data[0..len) borrowed for the
     * call. seq is propose's number if this node proposed it as leader, 0
     * otherwise. After a restart, entries after the last snapshot come
     * again: an idempotent state machine skips index <= what it has.
     * Returns 0, or -1 to fail the node: it stops applying, publishes
     * failed and role NONE and calls notify; the owner should stop it. */
    int (*apply)(void *arg, uint64_t index, const void *data, size_t len,
                 uint64_t seq);
    /* A proposal that will not reach apply() with its seq; why is
     * RAFTNODE_LOST_*. May be NULL. */
    void (*lost)(void *arg, uint64_t seq, int why);
    /* Joins proposal b[0..blen) to proposal a[0..*alen) (both as proposed,
     * unpadded; a has room for blen more bytes) into one entry whose apply
     * does what applying a then b would; returns 0 with *alen set, or -1
     * (a unchanged) if they cannot be joined. The raft thread joins the
     * proposals it takes at once, up to RAFTNODE_ENTRY_MAX bytes: fewer
     * entries, so fewer messages, log writes and applies per proposal.
     * May be NULL: every proposal is an entry of its own. */
    int (*join)(void *arg, void *a, size_t *alen, const void *b, size_t blen);
    /* Takes a snapshot manifest of the state as of index (every entry up to
     * it applied): *buf malloc'd (the node frees it), *len bytes, small
     * (the log keeps it in memory and sends it whole). Returns 0 or -1
     * (raft retries later). NULL: an empty manifest. */
    int (*snapshot)(void *arg, uint64_t index, void **buf, size_t *len);
    /* Replaces the state with the manifest of a snapshot at index (borrowed
     * for the call): at start from the local snapshot, or later from the
     * leader's when this node fell behind its log. Entries after index
     * follow through apply. Returns 0 or -1 (the node fails). NULL: only
     * an empty manifest is accepted. */
    int (*restore)(void *arg, uint64_t index, const void *buf, size_t len);
    /* The role, leader, term or ready changed (read raftnode_status).
     * Cheap and non-blocking, e.g. ev_async_send. May be NULL. */
    void (*notify)(void *arg);
    /* libraft's configuration changed (an entry appended, committed or
     * replayed): m holds its members (ids, Raft addresses, client ports
     * from the addresses or from the members before; self_id this node's,
     * which m may lack), committed whether it is the committed one, and
     * self_role this node's role in it (RAFTNODE_VOTER, _STANDBY, _SPARE,
     * or -1 if it is not in it). On a node that joins, nothing comes
     * before the leader sends a configuration. May be NULL. */
    void (*members)(void *arg, const ClusterConfig *m, int committed,
                    int self_role);
    /* With RaftNodeOptions.seed: the first snapshot is on disk (libraft's
     * log starts after it); called once. May be NULL. */
    void (*seeded)(void *arg);
    /* With mutual TLS (RaftNodeOptions.tls): an authenticated peer opened
     * a link of another channel than Raft (peer.h, PeerServeFn: what svc
     * holds is the callee's). Must not block. May be NULL: such links are
     * refused. */
    PeerServeFn serve;
} RaftNodeCallbacks;

/* Tuning; zero fields take the defaults. */
typedef struct RaftNodeOptions {
    unsigned election_ms;        /* election timeout, ms (libraft's 1000) */
    unsigned heartbeat_ms;       /* heartbeat interval, ms (libraft's 100) */
    unsigned snapshot_threshold; /* entries between snapshots (8192; fewer
                                    once RAFTNODE_LOG_BYTES were applied) */
    unsigned snapshot_trailing;  /* entries kept behind one (2048; fewer
                                    if they would hold more than
                                    RAFTNODE_LOG_BYTES) */
    int no_pre_vote; /* 1: no pre-vote round (default: pre-vote on) */
    /* Tests only (ROCKSTALKD_FAULT_RAFT_REFUSE): the raft thread refuses
     * the entry it submits in this position (1: the first; proposals it
     * joined count once), as if raft_apply had failed with RAFT_NOMEM.
     * 0: never. */
    unsigned fault_refuse;
    /* Tests only (ROCKSTALKD_RAFT_SEGMENT): the size of libraft's log
     * segment files, bytes (raft_uv_set_segment_size; 0: libraft's 8 MiB).
     * Small segments make a full disk bite at once (a new segment is
     * allocated every few hundred entries). */
    size_t segment_bytes;
    /* 1: this node seeds a new cluster (a single voter on a restored
     * backup): its first snapshot, taken at once, keeps no log entries
     * behind it, so the nodes that join get the snapshot (and fetch the
     * state) rather than the log, which lacks the backup's jobs;
     * RaftNodeCallbacks.seeded follows once it is on disk. */
    int seed;
    /* Credentials for mutual TLS between the voters (cluster/peer.h);
     * NULL: libraft's own TCP transport, plaintext and unauthenticated.
     * Borrowed: must outlive the node. */
    TlsSource *tls;
} RaftNodeOptions;

/* A copy of the published status. */
typedef struct RaftNodeStatus {
    int role;              /* RAFTNODE_NONE..RAFTNODE_LEADER */
    uint64_t leader_id;    /* 0: none known */
    uint64_t term;         /* current term */
    uint64_t commit_index; /* highest index known committed */
    uint64_t applied;      /* highest index applied here (or restored) */
    int ready;  /* leader, and everything committed before its term is
                   applied here (its barrier entry applied): it may serve */
    int failed; /* an apply or restore failed, or libraft turned the
                   node off (RAFT_UNAVAILABLE) while it was not stopping */
    uint64_t peer_refused; /* connections the TLS transport refused */
} RaftNodeStatus;

typedef struct RaftNode RaftNode;

/* Starts node cfg->self_id of cfg's voters on its own thread, its log in
 * dir (created if missing; its parent must exist), listening on its own
 * voter address. A fresh dir is bootstrapped with cfg's configuration
 * (every node bootstraps the same one, as libraft allows) unless
 * cfg->state is CLUSTER_JOINING: such a node waits, with no configuration,
 * for a leader to add it (raftnode_change on the leader); a used dir
 * starts from what it holds (its snapshot is restored before this returns).
 * cb is copied; opt may be NULL. Returns 0 and the node in *out, or -1 with
 * a message in err (nothing left running). */
int raftnode_start(const ClusterConfig *cfg, const char *dir,
                   const RaftNodeOptions *opt, const RaftNodeCallbacks *cb,
                   RaftNode **out, char *err, size_t errcap);

/* Any thread: queues data[0..len) (copied, and padded with zero bytes to
 * a multiple of 8, as libraft's log needs: apply gets the padded length)
 * as one log entry. Returns
 * RAFTNODE_OK and the proposal's number in *seq (from 1, increasing), then
 * exactly one of apply(seq) or lost(seq) follows; or a RAFTNODE_E* code and
 * nothing follows. With RaftNodeCallbacks.join, proposals the raft thread
 * takes together may become one entry: then apply or lost comes once, with
 * the seq of the last of them, and stands for all of them. */
int raftnode_propose(RaftNode *n, const void *data, size_t len, uint64_t *seq);

/* Any thread: the published status (each field read atomically; fields may
 * come from consecutive updates). */
void raftnode_status(const RaftNode *n, RaftNodeStatus *st);

/* Any thread: whether this node leads and its leadership is confirmed now
 * (its lease): a barrier it appended at time t (CLOCK_MONOTONIC) has
 * committed, and now < t + election_ms / 2. A majority stored that barrier
 * after t, and none of them starts an election or grants a vote within an
 * election timeout (at least election_ms) of hearing from this leader, so
 * no other leader can exist before the lease ends: what this node's memory
 * says now is the cluster's committed state. Each call also asks the raft
 * thread to keep renewing the lease (one barrier per heartbeat interval
 * at most, only while someone asks). 0: not confirmed; a reader then
 * needs a Raft round trip of its own (a read barrier). */
int raftnode_lease_ok(RaftNode *n);

/* Any thread: why the node failed (status.failed), or NULL. The text
 * stays valid until raftnode_stop. */
const char *raftnode_error(const RaftNode *n);

/* "leader", "follower", "candidate" or "none". */
const char *raftnode_role_name(int role);

/* Any thread: bytes proposed and not yet taken by the raft thread (what
 * RAFTNODE_QUEUE_MAX bounds); a proposer throttles its input by it. */
size_t raftnode_queued_bytes(RaftNode *n);

/* Any thread: asks the raft thread to hand leadership over to voter id
 * (libraft's raft_transfer), or with id 0 to the most up-to-date voter;
 * the target is caught up first, then starts an election at once instead
 * of after an election timeout. Nothing happens if this node does not
 * lead, if a transfer is already under way (the first one wins) or if
 * libraft refuses id (not another voter); whether it worked shows in
 * raftnode_status (the role leaves RAFTNODE_LEADER). libraft gives up
 * after an election timeout. NULL is fine. */
void raftnode_transfer(RaftNode *n, uint64_t id);

/* Any thread: returns once the raft thread has finished the loop
 * iteration under way and one more (waking it if idle), or after
 * timeout_ms. What libraft sent in the first has by then left through the
 * transport: its messages go into a socketpair (peer.h), which the next
 * iteration reads and writes to TCP, where the kernel delivers them even
 * if the process then ends. For a stop without an orderly close (node.c's
 * restart after losing the leadership, an exec): the vote a stepping-down
 * leader just granted to a leadership-transfer target was lost otherwise,
 * tests/test_cluster_ops.py. NULL is fine. */
void raftnode_settle(RaftNode *n, unsigned timeout_ms);

/* One member as this node last saw it (RaftNodeView). */
typedef struct RaftNodeVoterView {
    uint64_t id;
    int role;                         /* RAFTNODE_VOTER, _STANDBY, _SPARE */
    char addr[CLUSTER_RAFT_ADDR_MAX]; /* its Raft address, from libraft's
                                         configuration */
    /* With RaftNodeView.progress (else 0 and -1): */
    uint64_t match_index; /* highest log index the leader knows stored
                             there (for the leader itself: its last_stored,
                             the highest index on its own disk) */
    int64_t contact_ms;   /* milliseconds since the leader last had a reply
                             from it (seen as libraft's recent_recv flag);
                             -1: none since this node leads; 0 for itself */
} RaftNodeVoterView;

/* What this node knows of the voters (raftnode_view). */
typedef struct RaftNodeView {
    int leader;   /* this node led when the view was published; else the
                     counts below are this node's own, and voters[] holds
                     ids and addresses only */
    int progress; /* the leader's per-voter progress is known: libraft 0.15
                     declares struct raft_progress in raft.h; later
                     versions (RAFT_VERSION_NUMBER) keep it private */
    /* this node's term and log: last index, commit index, and libraft's
     * last applied index (barriers and configuration entries included,
     * unlike RaftNodeStatus.applied) */
    uint64_t term, last_index, commit_index, applied;
    int n; /* members in libraft's configuration (voters, standbys and
              spares; CLUSTER_MAX_VOTERS at most) */
    RaftNodeVoterView voters[CLUSTER_MAX_VOTERS];
} RaftNodeView;

/* Any thread: the view the raft thread published last (at each of its
 * loop iterations, so it is as old as the latest Raft message at most).
 * Copied under a mutex. */
void raftnode_view(RaftNode *n, RaftNodeView *out);

/* Membership changes (raftnode_change). */
enum { RAFTNODE_CHANGE_ADD = 1, RAFTNODE_CHANGE_REMOVE = 2 };

/* What a membership change came to (raftnode_change, _change_poll). */
enum {
    RAFTNODE_CH_OK = 0,       /* committed */
    RAFTNODE_CH_RUNNING = 1,  /* under way */
    RAFTNODE_CH_FAILED = -1,  /* libraft refused it or lost the leadership
                                 (the message says which) */
    RAFTNODE_CH_TIMEOUT = -2, /* not done by its deadline: an added node
                                 that did not catch up stays a standby */
    RAFTNODE_CH_BUSY = -3     /* another change is under way (libraft
                                 makes one at a time) */
};

/* Entries a standby may lag behind the leader's last index and be
 * promoted (libraft then catches it up the rest of the way before the
 * promotion's entry is appended). */
#define RAFTNODE_CATCHUP_SLACK 64
/* Milliseconds a leader waits for a voter it removes to store its
 * demotion to standby (so that it learns of its removal) before it
 * removes it anyway (it may be down). */
#define RAFTNODE_DEMOTE_WAIT_MS 3000

/* Any thread: asks the raft thread, on the leader, for one membership
 * change: ADD p (libraft's raft_add as a spare, raft_assign to standby,
 * then, once its match index is within RAFTNODE_CATCHUP_SLACK of the last
 * index, raft_assign to voter), or REMOVE p->id (a voter is demoted to
 * standby first, raft_assign: it still gets the log, so it learns that it
 * is being removed, which after raft_remove nobody tells it; once it
 * stored that, or RAFTNODE_DEMOTE_WAIT_MS later, raft_remove). timeout_ms
 * bounds the whole change. Returns RAFTNODE_CH_RUNNING, then
 * raftnode_change_poll gives the outcome; or RAFTNODE_CH_BUSY when a
 * change is already under way (one asked before has not ended, libraft's
 * request included), or RAFTNODE_CH_FAILED when the node is stopping. */
int raftnode_change(RaftNode *n, int op, const ClusterPeer *p,
                    unsigned timeout_ms);

/* Any thread: whether a change is under way (raftnode_change would answer
 * RAFTNODE_CH_BUSY). */
int raftnode_change_busy(RaftNode *n);

/* Any thread: the outcome of the change raftnode_change started
 * (RAFTNODE_CH_*; RUNNING until it is known), with a message for
 * FAILED and TIMEOUT in msg (cap bytes, NUL-terminated). */
int raftnode_change_poll(RaftNode *n, char *msg, size_t cap);

/* Stops the node: fails what is queued (lost REFUSED) and in flight (lost
 * UNKNOWN), closes libraft and joins the thread; frees everything. No
 * callback runs after it returns. NULL is fine. */
void raftnode_stop(RaftNode *n);

#endif
