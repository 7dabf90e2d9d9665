/* node.h - cluster mode on the loop side (issue 15; protocol/PROTOCOL.md
 * section 15): this process as one voter of a Raft cluster (raftnode.h),
 * its store in cluster mode (store.h), and where its clients go.
 *
 *   queue      every node loads its in-memory queue from its shards at
 *              start (as a standalone restart does: reservations come
 *              back ready); a node that does not serve keeps it current
 *              from the records of the committed entries (cb_replay ->
 *              queue_replay), and its timers change nothing of their own.
 *   serving    only the leader serves, once its barrier is applied
 *              (RaftNodeStatus.ready, every earlier entry replayed into
 *              its queue): at once, with the queue it holds. Each change
 *              is a Raft entry, and a reply leaves once its entry is
 *              committed on a majority and applied here
 *              (store_acked_seq).
 *   forwarding a node that does not serve relays each client connection it
 *              accepts, byte for byte, to the leader's client port
 *              (proxy.h), so a client on a follower speaks the same
 *              protocol; relayed connections close when the leader
 *              changes. With no leader known, accepted connections wait
 *              (up to NODE_PARK_S seconds, NODE_PARK_MAX of them).
 *   stepping down  a serving node that stops leading restarts itself
 *              (execv of /proc/self/exe with the same arguments, the
 *              listening socket inherited as under systemd; nothing is
 *              stopped first: to the data an exec is a kill -9; only
 *              what the raft thread sent last, a vote say, is let out
 *              first, raftnode_settle): its memory may hold changes
 *              that never committed, and its
 *              clients' connections cannot be carried over; it comes back
 *              as a follower from its shards and the Raft log. So does a
 *              follower whose shards were replaced by a fetched state.
 *   snapshots  Raft snapshots are small manifests; a node that fell behind
 *              the leader's log, or lost its directory, fetches the state
 *              out of band from a peer's client port (rockstalk-snapshot,
 *              store/ship.h: the serving leader answers, and a node that
 *              does not serve on a connection waiting for a leader; with
 *              mutual TLS a peer link, which any node answers,
 *              nodepeer.c), bounded in memory.
 *
 * Threads: node_open and node_close on the main thread; node_accept,
 * node_step, node_stats (nodestep.h) and node_snapshot_serve on the loop
 * thread; the raft callbacks on the raft thread; a snapshot is sent on a
 * thread of its own. Errors: node_open returns -1 with a message in err;
 * failures later (the Raft node or the store) stop the process (fail-stop, exit
 * 2).
 */
#ifndef ROCKSTALK_NODE_H
#define ROCKSTALK_NODE_H

#include <stddef.h>
#include <stdint.h>

#include "cluster/cluster.h"
#include "cluster/raftnode.h"
#include "conn/conn.h"
#include "queue/state.h"

typedef struct Node Node; /* in Server.node */

/* Accepted connections that may wait for a leader, and for how long
 * (seconds) before they are closed. */
#define NODE_PARK_MAX 1024
#define NODE_PARK_S 10
/* Snapshot senders (node_snapshot_serve) running at a time: each holds a
 * RocksDB snapshot per shard and a thread; a request beyond gets
 * OUT_OF_MEMORY (retry later). */
#define NODE_SHIP_MAX 2
/* Seconds a sender's send may stay blocked on a reader that takes nothing
 * (SO_SNDTIMEO) before the stream fails and its snapshot is released
 * (ROCKSTALKD_SNAPSHOT_SEND_TIMEOUT sets another, for tests). */
#define NODE_SHIP_SEND_S 30
/* Milliseconds a stop waits for the senders once their sockets are shut
 * down (node_close). */
#define NODE_SHIP_STOP_MS 3000
/* Committed records a node that does not serve holds for its loop before
 * the raft thread waits for it (about 500 bytes each). */
#define NODE_REPLAY_MAX 32768
/* A node that does not serve wakes its loop for the queued records once
 * NODE_REPLAY_WAKE of them wait, or at the first entry applied
 * NODE_REPLAY_WAKE_MS after the last wake-up; else the loop takes them at
 * its next wake-up for anything else (at the latest its 1 s tick, or a
 * change of the Raft status: a promotion takes them all first). */
#define NODE_REPLAY_WAKE 4096
#define NODE_REPLAY_WAKE_MS 5

/* Milliseconds a member stays in a configuration that has it as no voter
 * (demoted, the first step of its removal, or without it) before it takes
 * itself for removed even if no commit of that reached it (the leader
 * sends a removed node nothing): longer than an election timeout, so an
 * uncommitted change that a new leader undoes first does not count. */
#define NODE_REMOVED_GRACE_MS 3000

/* Main thread, before the store opens, with s->listeners open: refuses a
 * voter set that would relay clients to this node itself
 * (cluster_check_relay), binds the data directory to this node
 * (cluster_identity_check, which follows the committed configuration; a
 * standalone directory, one with FORMAT but no CLUSTER, is refused; with
 * cc->state CLUSTER_JOINING (--join) a fresh one waits to be added) and
 * sets up s->node. argv: the process's
 * arguments, kept for stepping down. Returns 0, or -1 with a message in
 * err. */
int node_prepare(Server *s, const ClusterConfig *cc, char *const *argv,
                 char *err, size_t errcap);

/* Main thread, after node_prepare: whether this node seeds a new cluster
 * (--seed, CLUSTER state seeding) and its Raft log does not exist yet:
 * its backup (RESTORE) may then be loaded in cluster mode. 0 standalone. */
int node_seed_first(const Server *s);

/* Main thread, standalone: refuses (-1, message in err) a data directory
 * bound to a cluster node (it has a CLUSTER file). */
int node_standalone_dir(const char *dir, char *err, size_t errcap);

/* Main thread, once the store is open (with STORE_SYNC_NEVER and no
 * journal): puts it in cluster mode, starts the mutation thread and the
 * Raft node (its log in DIR/raft; a fresh log is bootstrapped with the
 * static configuration). The queue stays empty until this node leads.
 * Returns 0, or -1 with a message in err. */
int node_start(Server *s, char *err, size_t errcap);

/* Loop thread: bytes proposed to the Raft node that its thread has not
 * taken yet, counted twice (0 standalone); the loop throttles its input on
 * them with the store's backlog (server.c, at 64 MiB), as it did on the
 * mutation thread's queue. Counted twice so that it stops reading with at
 * most half of RAFTNODE_QUEUE_MAX (64 MiB) queued: the input of the
 * iteration that crosses the mark still fits, where at the full cap the
 * loop itself would wait in store_flush for the raft thread to make room
 * (a stalled raft thread, say a snapshot's syncs). */
size_t node_backlog_bytes(const Server *s);

/* Loop thread, on SIGHUP: re-reads the nodes' certificate files; new
 * peer connections use them, a failure (logged) keeps the old ones. */
void node_reload_tls(Server *s);

/* Loop thread, the rockstalk-snapshot command on a serving node: takes c's
 * socket out of the loop (c is closed; the sender's copy of the descriptor
 * is close-on-exec) and streams every shard on it from a thread of its own,
 * with a send timeout of NODE_SHIP_SEND_S: "SNAPSHOT <applied>\r\n" and the
 * stream of store/ship.h. With NODE_SHIP_MAX senders running, c gets
 * OUT_OF_MEMORY and stays open. UNKNOWN_COMMAND on a standalone server,
 * on a node that does not serve (without TLS between the nodes, such a
 * node answers the request before it runs commands, on a connection
 * waiting for a leader: node_park_watch), with mutual TLS between the
 * nodes, and on any client listener but plain TCP (Conn.via
 * CONN_VIA_TCP: over tls:// the stream would go under the session). */
void node_snapshot_serve(Conn *c);

/* How long a leader that stops waits for another node to take the
 * leadership it hands over (node_close), milliseconds: on loopback it
 * takes 40-60 ms; when no other node answers (all stop together), this is
 * what the stop costs. */
#define NODE_TRANSFER_MS 500

/* Main thread, at shutdown before the store closes: a leader hands its
 * leadership over (up to NODE_TRANSFER_MS); then stops the Raft node
 * (proposals are refused from then on), shuts the snapshot senders'
 * sockets down and waits for them (up to NODE_SHIP_STOP_MS, else exit 2),
 * and closes relayed and waiting connections. No node is fine. */
void node_close(Server *s);

/* Main thread, after the store closed (the mutation thread, which
 * proposes through the node, is gone): frees s->node. */
void node_free(Server *s);

#endif
