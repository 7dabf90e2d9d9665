/* muxlink.h - one multiplexed relay link's transport (the framing is
 * muxframe.h): a TCP socket carrying the nodes' mutual TLS on the event
 * loop, its input cut into frames for the owner, and its output gathered
 * during a loop iteration and sent once per iteration (an ev_prepare of the
 * lowest priority, after the server's own), so one TLS record carries
 * every stream's bytes of the iteration. Used by both ends: the follower
 * dials (muxrelay.h), the leader accepts (muxserve.h).
 *
 * Bounds: input is parsed in place from a buffer of MUX_HDR +
 * MUX_FRAME_MAX bytes; output grows with what the owner queues (the
 * owners' per-stream credit bounds it). A malformed frame, a socket or
 * TLS error, the peer's end of stream or a missed deadline ends the link:
 * the owner's dead callback runs once, then the link is freed.
 *
 * Thread: the loop thread only. Errors are returned, never printed.
 */
#ifndef ROCKSTALK_MUXLINK_H
#define ROCKSTALK_MUXLINK_H

#include <ev.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/muxframe.h"
#include "net/tls.h"
#include "net/tlssock.h"

typedef struct MuxLink MuxLink;

/* What the owner does with a link's events. */
typedef struct MuxLinkOps {
    /* A frame arrived (its data valid during the call only): 0, or -1 to
     * end the link (malformed for this side). May queue frames; must not
     * close the link. */
    int (*frame)(void *arg, MuxLink *l, const MuxFrame *f);
    /* The link ended (error, peer, deadline): the owner forgets it and
     * its streams; l is freed after this returns. */
    void (*dead)(void *arg, MuxLink *l);
} MuxLinkOps;

/* Dials up (IPv4, non-blocking) with the client session t (owned from now
 * on); once the handshake is done and the server's certificate names
 * want_id, the pre bytes (pre_len <= 64, the peer preamble) go first, then
 * what was queued. Connect, handshake and preamble must end within
 * timeout seconds. NULL (t freed) when nothing could be started. */
MuxLink *mux_link_dial(struct ev_loop *loop, const struct sockaddr_in *up,
                       TlsConn *t, uint64_t want_id, const unsigned char *pre,
                       size_t pre_len, double timeout, const MuxLinkOps *ops,
                       void *arg);

/* Takes an authenticated link (fd: its non-blocking socket; x: its TLS,
 * handshake done; both owned from now on); head (n bytes, at most
 * MUX_HDR + MUX_FRAME_MAX) is plaintext read already. Its frames are
 * parsed from the next loop iteration. NULL (both freed) on no memory. */
MuxLink *mux_link_accept(struct ev_loop *loop, int fd, TlsSock *x,
                         const void *head, size_t n, const MuxLinkOps *ops,
                         void *arg);

/* Queues a frame (header and len bytes of data). */
void mux_link_send(MuxLink *l, unsigned type, uint32_t id, const void *data,
                   size_t len);

/* Reserves room for a DATA frame of up to max payload bytes and returns
 * where its payload goes; mux_link_data_end(l, id, n) commits n of them
 * (0: nothing). Between the two nothing else may be queued. */
unsigned char *mux_link_data_begin(MuxLink *l, size_t max);
void mux_link_data_end(MuxLink *l, uint32_t id, size_t n);

/* Queued output bytes not yet taken by TLS. */
size_t mux_link_queued(const MuxLink *l);

/* 1 once the link is established (dialled: preamble sent). */
int mux_link_ready(const MuxLink *l);

/* Ends the link now without calling dead (the owner drops its streams
 * itself) and frees it. */
void mux_link_close(MuxLink *l);

#endif
