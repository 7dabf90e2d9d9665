/* peer_impl.h - the mutual-TLS transport's insides, shared by peer.c (the
 * transport: libraft's methods, who a link is, channels) and
 * peerlink.c (a link's bytes: TCP, TLS, the socketpair toward the local
 * user, backpressure). Private to those two files; the rest of the
 * process sees peer.h. Raft thread only, but for Peer.mu's fields. */
#ifndef ROCKSTALK_PEER_IMPL_H
#define ROCKSTALK_PEER_IMPL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <raft.h>
#include <raft/uv.h>
#include <uv.h>

#include "cluster/peer.h"

#define READ_CHUNK 65536 /* bytes of one read, either side */

enum { LINK_CONNECT, LINK_HANDSHAKE, LINK_PREAMBLE, LINK_OPEN, LINK_CLOSING };

typedef struct Peer Peer;

/* One connection: TCP with TLS toward the peer, a socketpair end toward
 * libraft once authenticated. */
typedef struct Link {
    Peer *p;
    struct Link *prev, *next;
    int inbound;
    int state;
    raft_id id;       /* outbound: asked for; inbound: from the certificate */
    unsigned channel; /* outbound: asked for; inbound: from the preamble */
    uv_tcp_t tcp;
    uv_timer_t timer; /* the handshake's deadline */
    uv_pipe_t inner;  /* our end of the socketpair, once open */
    int inner_open;
    int handles; /* ours still open */
    uv_connect_t conn_req;
    struct raft_uv_connect *req; /* outbound Raft, until its callback */
    raft_uv_connect_cb cb;
    TlsConn *tls;
    unsigned char pre[PEER_PREAMBLE_LEN];
    size_t pre_len;
    size_t to_inner, to_tcp; /* bytes queued in each direction */
    int tcp_paused, inner_paused;
    int local_done; /* the local user wrote its last (close_notify sent) */
    int peer_done;  /* the peer wrote its last (the socketpair shut) */
    uv_shutdown_t shut_req;
} Link;

struct Peer {
    struct raft_uv_transport *t;
    uv_loop_t *loop;
    ClusterConfig cfg;
    TlsSource *tls;
    uv_tcp_t listener;
    int listening;
    raft_uv_accept_cb accept_cb;
    Link *links;
    int pending_in;
    int closing;
    raft_uv_transport_close_cb close_cb;
    _Atomic uint64_t refused;
    PeerServeFn serve; /* incoming links of the other channels */
    void *serve_arg;
    /* rbuf: TCP reads; pbuf: libraft's side's reads; obuf: ciphertext out;
     * xbuf: plaintext out of TLS. Each is used up within one callback. */
    char rbuf[READ_CHUNK], pbuf[READ_CHUNK], obuf[READ_CHUNK], xbuf[READ_CHUNK];
};

/* An incoming link not yet authenticated (it counts in pending_in). */
static inline int
link_pending(const Link *l)
{
    return l->inbound && l->state < LINK_OPEN;
}

/* ---- peerlink.c ---- */

/* A new link (inbound: accepted, else to be connected) with its TCP
 * handle initialised and the handshake's deadline running; NULL when
 * memory or credentials are lacking. */
Link *link_new(Peer *p, int inbound);

/* Ends l: an outbound Raft request still waiting hears of it (cancelled
 * when the transport closes), every handle is closed, l is freed once they
 * are. refused: count it in peer_refused. Safe on a closing link. */
void link_close(Link *l, int refused);

/* An accepted or connected link starts: socket options, reads, and (when
 * connected) the ClientHello. */
void link_start(Link *l);

/* uv_tcp_connect's callback for an outbound link. */
void link_on_connected(uv_connect_t *req, int status);

/* Opens fd as l->inner (the local user's side); 0, or -1 (fd closed). */
int link_attach_inner(Link *l, int fd);

/* A socketpair whose one end becomes l->inner, open and read; returns the
 * other end, or -1. */
int link_open_pair(Link *l);

/* Starts reading l->inner (attached by link_attach_inner). */
void link_read_inner(Link *l);

/* Queues the ciphertext TLS has produced on l's socket; 0, or -1. */
int link_flush(Link *l);

/* Fires the transport's close callback once nothing of it is open. */
void peer_maybe_closed(Peer *p);

/* ---- peer.c, called by the pump ---- */

/* A link's handshake completed: checks the certificate's node id, then an
 * outbound link is handed over, an inbound one waits for its preamble. */
void peer_link_authenticated(Link *l);

/* Takes preamble bytes from data (n bytes); returns how many, or -1 when
 * the link is no longer the caller's: closed (a bad preamble, no one to
 * hand it to) or handed whole, with the rest of data, to serve. */
ssize_t peer_link_preamble(Link *l, const unsigned char *data, size_t n);

#endif
