/* nodestep.h - cluster mode on the loop thread, each iteration (issue
 * 15; protocol/PROTOCOL.md section 15; node.h describes the whole): where
 * a client connection goes (served here, relayed byte for byte to the
 * leader through proxy.h, or waiting up to NODE_PARK_S seconds for one
 * to be known), the role changes node_step makes (serving once leading
 * and ready, restarting the process once it leads no longer or its state
 * was fetched, stopping once removed from the configuration), and what
 * the rest of the loop reads of the node: whether it serves, its lease,
 * the connections it relays, its Raft node, its stats. Every function
 * takes the Server and is a no-op or answers as a standalone server when
 * s has no node (s->node NULL). Loop thread only. Errors: none returned;
 * a failed Raft node or a replay out of memory stops the process (exit
 * 2), a restart that cannot exec itself too (exit 1). */
#ifndef ROCKSTALK_NODESTEP_H
#define ROCKSTALK_NODESTEP_H

#include <stddef.h>
#include <stdint.h>

#include "cluster/raftnode.h"
#include "net/tlssock.h"
#include "queue/state.h"

/* Loop thread: an accepted client socket (fd, non-blocking) from a
 * listener of kind via (CONN_VIA_*, kept for a connection that waits and
 * is served here later), with tls its TLS session (a tls:// listener's;
 * NULL: plaintext). Returns 0 if this node serves (the caller makes it a
 * Conn with tls), 1 if the node took fd and tls (relayed to the leader,
 * this node running the client's TLS, or waiting for one). */
int node_accept(Server *s, int fd, int via, TlsSock *tls);

/* Loop thread, each iteration (prepare): stops the process on a Raft or
 * store failure, starts serving once leading and ready, steps down once
 * no longer leading, relays or closes waiting connections, closes the
 * relayed ones when the leader changes. */
void node_step(Server *s);

/* Loop thread: whether this process runs commands: standalone, or the
 * leader serving. A node that does not serve keeps its queue current from
 * the committed records, but its timers must not make changes of their
 * own (the leader makes them). */
int node_serves(const Server *s);

/* Loop thread: whether a read or a reservation answered from memory now
 * shows the cluster's committed state: standalone, or a serving leader
 * whose lease covers now (raftnode_lease_ok). 0: the reply must wait for a
 * change of its own to commit (jobreply_confirm), which a deposed leader
 * never sees. */
int node_lease_ok(const Server *s);

/* Loop thread: the client connections this node holds without serving
 * them, relayed to the leader or waiting for one (0 standalone or
 * serving); --max-connections counts them with the served ones. */
size_t node_relayed(const Server *s);

/* What stats shows of the cluster (PROTOCOL.md 15). role: "leader",
 * "follower", "candidate" or "standalone" (also before the Raft node
 * runs). */
typedef struct NodeStats {
    const char *role;
    uint64_t leader; /* the leader's node id, 0 if none known */
    uint64_t term, commit_index;
    /* "mtls" or "insecure" (the nodes' traffic, cluster/peer.h); NULL
     * standalone */
    const char *security;
    uint64_t peer_refused; /* peer connections refused (mtls) */
} NodeStats;

/* Loop thread: s's Raft node, NULL standalone or before node_start. A
 * read accessor for the HTTP API (server/httpcluster.h): it reads what
 * the raft thread publishes (raftnode_status, raftnode_view, copies that
 * cost the raft thread nothing) and asks for a leadership transfer with
 * raftnode_transfer, as rockstalk-cluster-transfer does through node_step.
 * Valid until node_close. */
RaftNode *node_raft(const Server *s);

/* Loop thread: s's cluster status (standalone when s has no node). */
void node_stats(const Server *s, NodeStats *out);

#endif
