/* peerdial.h - a blocking tunnel to a peer over the nodes' mutual TLS, for
 * a caller that cannot wait on an event loop: the state fetch, which runs
 * on the raft thread itself while libraft restores a snapshot.
 *
 * peer_dial connects, completes the TLS handshake, checks that the
 * server's certificate names the voter called and sends the preamble
 * (peerauth.h), all in the calling thread and within timeout_ms; then a
 * thread of its own pumps bytes between TLS and a socketpair whose other
 * end the caller gets, until either side closes or nothing moves for
 * PEERDIAL_IDLE_MS. Memory: two 64 KiB buffers and the TLS session. */
#ifndef ROCKSTALK_PEERDIAL_H
#define ROCKSTALK_PEERDIAL_H

#include <stddef.h>
#include <stdint.h>

#include "cluster/cluster.h"
#include "net/tls.h"

#define PEERDIAL_IDLE_MS 30000 /* the pump gives up after this silence */

/* Any thread: a tunnel of channel to voter id of cfg (not this node), with
 * the credentials current in tls. Returns the caller's end of a socketpair
 * (blocking, close-on-exec; the caller's to close), or -1 with a message
 * in err (no route, refused, timed out, or the server's certificate names
 * another node). */
int peer_dial(TlsSource *tls, const ClusterConfig *cfg, uint64_t id,
              unsigned channel, int timeout_ms, char *err, size_t errcap);

#endif
