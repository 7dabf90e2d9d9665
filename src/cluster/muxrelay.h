/* muxrelay.h - the follower's end of the multiplexed relay (muxframe.h):
 * its plaintext clients (TCP and unix listeners) relayed to the leader as
 * streams of one mutual-TLS link (muxlink.h) instead of one link each, so
 * that a loop iteration's bytes of every client leave in one TLS record.
 * The leader sees each stream as a connection (muxserve.h).
 *
 * Per client: its bytes are read only while the leader's credit for the
 * stream lasts (MUX_WINDOW, granted back as the leader takes them); the
 * leader's bytes wait here (at most MUX_WINDOW) while the client does not
 * read them, and credit goes back as it does: a client that stops reading
 * stops only its own stream. The client's FIN is passed on (EOF); the
 * leader's CLOSE is passed on once its bytes are written, as FIN, and the
 * client's socket closes at its own EOF. A link that ends (leader gone,
 * network, malformed frame) closes every client on it at once.
 *
 * Loop thread only. Errors are returned, never printed.
 */
#ifndef ROCKSTALK_MUXRELAY_H
#define ROCKSTALK_MUXRELAY_H

#include <ev.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/muxlink.h"

/* The relay of one loop: one link (to the leader of the moment) at a
 * time. The caller owns it and does not move it while it holds clients. */
typedef struct MuxRelaySet {
    struct ev_loop *loop;
    struct MuxRelay *cur; /* the link new clients go on, or NULL */
    size_t count;         /* clients open over every link */
    uint64_t total;       /* clients relayed since init */
} MuxRelaySet;

/* An empty set on loop (borrowed). */
void mux_relay_init(MuxRelaySet *set, struct ev_loop *loop);

/* 1 when new clients have a link to go on. */
int mux_relay_linked(const MuxRelaySet *set);

/* Dials the link new clients go on: to up, whose certificate must name
 * want_id, with the session t (owned from now on), pre (the preamble,
 * pre_len bytes) first; timeout seconds for all that. 0, or -1 (t freed). */
int mux_relay_dial(MuxRelaySet *set, const struct sockaddr_in *up, TlsConn *t,
                   uint64_t want_id, const unsigned char *pre, size_t pre_len,
                   double timeout);

/* Relays client_fd (an accepted stream socket, owned from now on if 0 is
 * returned) of kind (MUX_KIND_*) over the current link. -1 (fd not
 * taken) with no link, MUX_STREAMS_MAX clients on it, or no memory. */
int mux_relay_add(MuxRelaySet *set, int client_fd, unsigned kind);

/* Closes every link and every client on them (a change of leader). */
void mux_relay_close_all(MuxRelaySet *set);

#endif
