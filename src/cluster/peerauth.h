/* peerauth.h - who a peer is, before a byte of it is trusted: the
 * cluster's security policy at start, this node's credentials, the
 * preamble a connecting node sends inside TLS, and the voters' addresses.
 * Shared by the Raft transport (peer.c, libuv) and the blocking dialer
 * (peerdial.c). No state; any thread.
 *
 * The preamble (PEER_PREAMBLE_LEN bytes, sent by the connecting side right
 * after the TLS handshake): "RSPEER01", the sender's node id and the
 * channel, u64 little-endian each. The receiver accepts it only if the id
 * is the one the sender's certificate names (tls_peer_node_id) and the
 * channel is one it serves.
 */
#ifndef ROCKSTALK_PEERAUTH_H
#define ROCKSTALK_PEERAUTH_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/cluster.h"
#include "net/tls.h"

#define PEER_PREAMBLE_LEN 24 /* magic, node id, channel */
#define PEER_CN_MAX 64       /* bytes of a relayed client's CN */

/* The preamble's channels: what a link carries. */
enum {
    PEER_CHANNEL_RAFT = 1,        /* libraft's messages */
    PEER_CHANNEL_CLIENT = 2,      /* a follower's client, relayed to the leader
                                     (the beanstalkd protocol, as on -p) */
    PEER_CHANNEL_SNAPSHOT = 3,    /* the state stream for a node that fell
                                     behind (PROTOCOL.md 11.6) */
    PEER_CHANNEL_CLIENT_CN = 4,   /* a relayed client whose TLS certificate
                                     the follower verified: a byte n
                                     (1..PEER_CN_MAX), its subject CN (n
                                     bytes), then as PEER_CHANNEL_CLIENT */
    PEER_CHANNEL_CLIENT_UNIX = 5, /* a client of the follower's unix socket,
                                     which the follower trusts as its own
                                     (no --auth-unix): the leader trusts it
                                     as one of its unix clients (PROTOCOL.md
                                     16), else as PEER_CHANNEL_CLIENT */
    PEER_CHANNEL_MUX = 6,         /* a follower's multiplexed relay: many
                                     clients over one link, framed
                                     (cluster/muxframe.h) */
    PEER_CHANNEL_MAX = 6
};

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

/* Writes the preamble of node id for channel into buf
 * (PEER_PREAMBLE_LEN bytes). */
void peer_preamble_put(unsigned char *buf, uint64_t id, unsigned channel);

/* Checks a received preamble (PEER_PREAMBLE_LEN bytes) against the node
 * id the sender's certificate names. Returns its channel (1 to
 * PEER_CHANNEL_MAX), or 0 for a bad magic, another id or an unknown
 * channel. */
unsigned peer_preamble_check(const unsigned char *buf, uint64_t id);

/* Parses a voter address "A.B.C.D:PORT" (cluster.h) into *sa. Returns 0,
 * or -1 if it is not one. */
int peer_parse_addr(const char *addr, struct sockaddr_in *sa);

/* Voter id's entry in cc, NULL if id is not a voter. */
const ClusterPeer *peer_voter(const ClusterConfig *cc, uint64_t id);

/* Sets a peer socket's options: TCP_NODELAY and net_keepalive's dead-peer
 * detection, so a peer cut off by a partition is noticed in about a
 * minute, not fifteen. Errors are ignored (the options only speed up
 * noticing). */
void peer_tune_fd(int fd);

#endif
