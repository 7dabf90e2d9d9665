/* peer.h - cluster mode's Raft transport over mutual TLS: an
 * implementation of libraft's `struct raft_uv_transport` (raft/uv.h, "the
 * interface to establish outgoing connections to other Raft servers and to
 * accept incoming connections from them") that authenticates every peer
 * before libraft reads a byte from it.
 *
 * Shape: each connection is a TCP socket carrying TLS 1.3 (net/tls.h) on
 * our side and one end of a socketpair on libraft's: libraft reads and
 * writes plaintext on its end as on its own TCP transport's streams, and
 * this module pumps the bytes through TLS between the two. A connection
 * reaches libraft only once:
 *   - the TLS handshake completed within PEER_HANDSHAKE_MS, the peer's
 *     certificate chains to the cluster CA and names one node id
 *     (`rockstalk-node-<id>`, tls_peer_node_id), a voter of the configured
 *     cluster other than this node;
 *   - on an outgoing connection, that id is the one libraft asked for;
 *   - on an incoming one, the peer's preamble (peerauth.h) names the same
 *     id and the Raft channel.
 * The same port takes the links of the other channels (peerauth.h),
 * authenticated the same way and handed to peer_serve's callee: a
 * follower's relayed clients (the follower's loop dials them itself,
 * cluster/proxy.h; this side hands each link over whole, socket and TLS
 * session, to the loop) and the state stream (cluster/peerdial.h).
 * libraft learns the peer's id from the certificate and its address from
 * the configuration, never from the wire. An outgoing connection to an id
 * or address that is not a configured voter is refused without a connect,
 * so a Raft message cannot make this node dial anywhere else.
 *
 * Bounds: at most PEER_PENDING_MAX incoming connections not yet
 * authenticated (one more closes the oldest of them: a peer's burst of
 * relayed clients fits, and a stranger holding slots cannot lock the
 * peers out), PEER_LINKS_PER_ID established
 * ones per peer id (a newer one closes the oldest), PEER_QUEUE_MAX bytes
 * queued toward either side before reading the other pauses, and the
 * TLS layer's own bound on unread input.
 *
 * Threads: the raft thread only (the libuv loop given to peer_init), as
 * libraft calls its transport; peer_refused may be read from any thread.
 */
#ifndef ROCKSTALK_PEER_H
#define ROCKSTALK_PEER_H

#include <stddef.h>
#include <stdint.h>

#include <raft/uv.h>
#include <uv.h>

#include "cluster/cluster.h"
#include "cluster/peerauth.h"
#include "net/tls.h"

#define PEER_HANDSHAKE_MS 5000    /* accept or connect to preamble, ms */
#define PEER_PENDING_MAX 64       /* incoming links not yet authenticated */
#define PEER_LINKS_PER_ID 4       /* established incoming Raft links a peer */
#define PEER_QUEUE_MAX (8u << 20) /* bytes queued toward one side */
/* a link one side of which ended, at most (an outbound Raft link whose
 * peer ended closes at once: peerlink.c) */
#define PEER_DRAIN_MS 30000

/* Fills t with the mutual-TLS transport for this node (cfg->self_id, whose
 * voter address it listens on once libraft asks) on loop. cfg is copied;
 * tls (credentials, re-read on SIGHUP by its owner) must outlive the
 * transport: every new connection takes the credentials current then.
 * Returns 0, or -1 with err set (out of memory). Free with peer_free once
 * libraft has closed the transport (raft_close's callback). */
int peer_init(struct raft_uv_transport *t, uv_loop_t *loop,
              const ClusterConfig *cfg, TlsSource *tls, char *err,
              size_t errcap);

/* Raft thread: the members libraft's configuration now holds (cfg, with
 * their Raft addresses; copied): links to and from ids no longer in it are
 * refused from now on, the new ones accepted. This node's own entry stays
 * (it keeps listening). */
void peer_set_members(struct raft_uv_transport *t, const ClusterConfig *cfg);

/* Frees what peer_init allocated; t must be closed (libraft's raft_close
 * closes it through its close method). NULL-safe on a zeroed t. */
void peer_free(struct raft_uv_transport *t);

/* An authenticated incoming link of a channel other than Raft, handed to
 * its user (peer_serve). A relayed client's link (PEER_CHANNEL_CLIENT)
 * leaves the transport whole when nothing of it is queued: fd is then the
 * link's own TCP socket and tls its session, so the user's event loop
 * speaks TLS to the peer without this thread in between. Otherwise (and
 * for every other channel) fd is one end of a socketpair whose other end
 * the transport pumps through the link's TLS. */
typedef struct PeerService {
    unsigned channel; /* PEER_CHANNEL_* from the preamble */
    uint64_t peer_id; /* from the peer's certificate */
    int fd;           /* tls: the TCP socket, non-blocking; else the
                       * socketpair end, blocking; close-on-exec either way */
    TlsConn *tls;     /* the session (handshake done, peer checked), or NULL */
    unsigned char *head; /* tls: plaintext that came after the preamble,
                          * already decrypted (malloc'd), or NULL */
    size_t head_len;     /* bytes at head */
} PeerService;

/* Raft thread: what to do with such links: fn(arg, svc) owns svc's fd,
 * tls and head from then on (peer_service_free releases them). Without fn
 * (the default) such links are refused. */
typedef void (*PeerServeFn)(void *arg, PeerService *svc);
void peer_serve(struct raft_uv_transport *t, PeerServeFn fn, void *arg);

/* Closes svc's fd and frees its session and head; the fields are left
 * cleared (fd -1). Any thread. */
void peer_service_free(PeerService *svc);

/* Connections refused so far: failed or timed-out handshakes, unknown or
 * wrong node ids, bad preambles, connections over a bound. Any thread. */
uint64_t peer_refused(const struct raft_uv_transport *t);

#endif
