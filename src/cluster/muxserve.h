/* muxserve.h - the leader's end of the multiplexed relay links
 * (muxframe.h): each stream a follower opens becomes a virtual connection
 * (conn_new_sink) of this server, so the queue and the protocol see an
 * ordinary client: --max-connections counts it (one more closes the
 * stream at once, as a refused relayed link), the client's verified CN
 * (OPEN) is its identity as on a relayed link of PEER_CHANNEL_CLIENT_CN.
 *
 * Flow control per stream: at most MUX_WINDOW bytes of a stream's input
 * wait here for its connection (more is malformed: the link ends); credit
 * goes back as the connection takes them; its output waits in the
 * connection (OUT_CAP) while the follower's credit for it is out.
 *
 * A link that ends closes every connection on it. Loop thread only.
 */
#ifndef ROCKSTALK_MUXSERVE_H
#define ROCKSTALK_MUXSERVE_H

#include <stddef.h>

#include "cluster/muxlink.h"
#include "queue/state.h"

/* Every link of one server. Owned by the caller (Node), not moved while
 * it holds links. */
typedef struct MuxServeSet {
    Server *srv;
    struct MuxServe *head;
    size_t links;
    size_t streams; /* open streams over every link */
    /* connections srv holds beyond cur_conns, for --max-connections */
    size_t (*others)(const Server *srv);
} MuxServeSet;

/* An empty set for srv (borrowed); others as above (NULL: none). */
void mux_serve_init(MuxServeSet *set, Server *srv,
                    size_t (*others)(const Server *srv));

/* Takes an authenticated link of the mux channel: fd (non-blocking) and x
 * (handshake done), owned from now on; head (n bytes) was read past the
 * preamble. 0, or -1 (both freed) when memory lacks. */
int mux_serve_accept(MuxServeSet *set, int fd, TlsSock *x, const void *head,
                     size_t n);

/* Closes every link and every connection on them. */
void mux_serve_close_all(MuxServeSet *set);

#endif
