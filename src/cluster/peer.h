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
 *   - on an incoming one, the peer's preamble (PEER_PREAMBLE_LEN bytes:
 *     "RSPEER01", its node id and the channel, u64 little-endian each)
 *     names the same id and the Raft channel.
 * libraft learns the peer's id from the certificate and its address from
 * the configuration, never from the wire. An outgoing connection to an id
 * or address that is not a configured voter is refused without a connect,
 * so a Raft message cannot make this node dial anywhere else.
 *
 * Bounds: at most PEER_PENDING_MAX incoming connections not yet
 * authenticated (more are closed on accept), PEER_LINKS_PER_ID established
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
#include "net/tls.h"

#define PEER_HANDSHAKE_MS 5000    /* accept or connect to preamble, ms */
#define PEER_PENDING_MAX 8        /* incoming links not yet authenticated */
#define PEER_LINKS_PER_ID 4       /* established incoming links per peer */
#define PEER_QUEUE_MAX (8u << 20) /* bytes queued toward one side */
#define PEER_PREAMBLE_LEN 24      /* magic, node id, channel */
#define PEER_CHANNEL_RAFT 1u      /* the preamble's channel for Raft */

/* Fills t with the mutual-TLS transport for this node (cfg->self_id, whose
 * voter address it listens on once libraft asks) on loop. cfg is copied;
 * tls (credentials, re-read on SIGHUP by its owner) must outlive the
 * transport: every new connection takes the credentials current then.
 * Returns 0, or -1 with err set (out of memory). Free with peer_free once
 * libraft has closed the transport (raft_close's callback). */
int peer_init(struct raft_uv_transport *t, uv_loop_t *loop,
              const ClusterConfig *cfg, TlsSource *tls, char *err,
              size_t errcap);

/* Frees what peer_init allocated; t must be closed (libraft's raft_close
 * closes it through its close method). NULL-safe on a zeroed t. */
void peer_free(struct raft_uv_transport *t);

/* The cluster's security policy, checked before anything is opened: the
 * three files (cert, key, ca: PEM paths, or NULL) go together, and not
 * with --cluster-insecure (insecure, 0 or 1); without them the nodes talk
 * in plaintext, which is allowed only when every voter's address is on
 * loopback (127.0.0.0/8) or with insecure. Returns 0, or -1 with a
 * message in err. */
int peer_policy_check(const ClusterConfig *cc, const char *cert,
                      const char *key, const char *ca, int insecure, char *err,
                      size_t errcap);

/* Loads the credentials of node cc->self_id (tls_source_open) and checks
 * that its certificate names that node id. Returns 0 with *out (the
 * caller's, tls_source_close) and *key_exposed (1: the key file is
 * readable by group or others), or -1 with a message in err. */
int peer_open_creds(const ClusterConfig *cc, const char *cert, const char *key,
                    const char *ca, TlsSource **out, int *key_exposed,
                    char *err, size_t errcap);

/* Connections refused so far: failed or timed-out handshakes, unknown or
 * wrong node ids, bad preambles, connections over a bound. Any thread. */
uint64_t peer_refused(const struct raft_uv_transport *t);

#endif
