/* proxy.h - a transparent TCP byte relay on the event loop: in cluster mode a
 * node that is not the leader hands each accepted client connection to
 * proxy_start, which connects to the leader's client port and copies bytes
 * both ways unchanged until both directions are finished (so a client on a
 * follower speaks the same protocol as on the leader, blocking reserves
 * included). Calls: libev, libc and net_keepalive (net/net.h).
 *
 * Thread: the loop thread only (the thread running ProxySet.loop); nothing
 * here blocks or locks. Memory: one allocation per pair, holding two fixed
 * buffers of PROXY_BUF_SIZE bytes (one per direction); a side is read only
 * while its buffer toward the other side has room, so a slow reader holds
 * back its peer instead of growing memory.
 *
 * Ends: EOF read from one side is passed on as shutdown(SHUT_WR) of the
 * other once the bytes buffered toward it are sent; the other direction
 * goes on. A pair ends quietly (both fds closed, memory freed) once both
 * directions have ended, on any socket error (reset, EPIPE: no SIGPIPE),
 * on a failed or timed out connect, or by proxy_close_all. There is no
 * idle timeout: a client blocked in reserve may stay silent for hours (but
 * a dead upstream is noticed, net_keepalive).
 *
 * Errors are returned (-1 and errno), never printed.
 */
#ifndef ROCKSTALK_PROXY_H
#define ROCKSTALK_PROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ev.h>
#include <netinet/in.h>

#include "net/tls.h"
#include "net/tlssock.h"

/* Bytes buffered per direction and pair: 64 KiB, one recv's worth, so a job
 * of the default size limit (65535 bytes) mostly passes in one read and
 * write; a larger message just takes several. 128 KiB per pair in all. */
#define PROXY_BUF_SIZE (64 * 1024)

/* Seconds the upstream has to accept a connect before the pair is closed
 * (the client sees its connection closed and may retry). */
#define PROXY_CONNECT_TIMEOUT 5.0

/* Bytes a TLS upstream is sent first, at most (proxy_start_tls). */
#define PROXY_HELLO_MAX 128

/* Makes the bytes a TLS upstream is sent first (at most cap) once the
 * upstream is authenticated and the client's own TLS, if any (client_tls,
 * else NULL), has finished its handshake; returns how many (0: close the
 * pair). */
typedef size_t (*ProxyHelloFn)(void *arg, TlsSock *client_tls,
                               unsigned char *buf, size_t cap);

/* Starts (on) or stops (!on) watcher w on loop unless it already is so;
 * shared by the relays (proxy.c, muxrelay.c). Loop thread only. */
void proxy_io_set(struct ev_loop *loop, ev_io *w, bool on);

/* One client <-> upstream pair; opaque, owned by its ProxySet. */
typedef struct Proxy Proxy;

/* All pairs of one loop. Owned by the caller (e.g. a field of Server),
 * which must not move it while it holds pairs (they point to it); the
 * fields are read-only outside proxy.c except connect_timeout. */
typedef struct ProxySet {
    struct ev_loop *loop;      /* the loop every pair's watchers run on */
    Proxy *head;               /* open pairs, an intrusive list */
    size_t count;              /* open pairs */
    uint64_t total;            /* pairs started since proxy_set_init */
    ev_tstamp connect_timeout; /* seconds; PROXY_CONNECT_TIMEOUT after init,
                                * read by each proxy_start */
} ProxySet;

/* Sets up an empty set whose pairs will run on loop (borrowed: it must
 * outlive the set). Allocates nothing. */
void proxy_set_init(ProxySet *ps, struct ev_loop *loop);

/* Takes ownership of client_fd (an accepted stream socket; made
 * non-blocking here if it is not) and starts a non-blocking connect to up
 * (IPv4), with TCP_NODELAY on both sockets (ignored where it does not
 * apply) and dead-peer detection on the upstream socket (net_keepalive;
 * the accepting side sets it on client_fd). Bytes the client sends before
 * the connect completes are buffered (up to PROXY_BUF_SIZE) and sent once
 * it does.
 *
 * Returns 0: the pair is in ps (count and total incremented) and ends on
 * its own. Returns -1 with errno set and client_fd already closed when
 * nothing could be started: memory, socket(), or a connect refused at once.
 * A connect that fails later, or does not complete within
 * ps->connect_timeout seconds, closes the client (it reads EOF, or a reset
 * if it sent more than the buffer took). */
int proxy_start(ProxySet *ps, int client_fd, const struct sockaddr_in *up);

/* As proxy_start, with TLS on either side, run on this loop:
 *   - client_tls (owned from now on, or NULL): the client's socket speaks
 *     TLS (a tls:// listener's connection; its handshake runs in the
 *     first reads and must end within ps->connect_timeout, or the pair
 *     closes);
 *   - t (a client session, owned from now on, or NULL for a plaintext
 *     upstream): once connected the handshake runs, the upstream's
 *     certificate must name node id want_id (tls_peer_node_id), then what
 *     hello(arg, ...) makes goes first (the peer preamble of a relayed
 *     client's link, cluster/peerauth.h; arg must outlive the pair), and
 *     the client's bytes follow. Connect, handshake and hello share
 *     ps->connect_timeout; an upstream that fails the handshake or names
 *     another id closes the pair.
 * Returns 0, or -1 with errno, client_fd closed and both sessions freed. */
int proxy_start_tls(ProxySet *ps, int client_fd, TlsSock *client_tls,
                    const struct sockaddr_in *up, TlsConn *t, uint64_t want_id,
                    ProxyHelloFn hello, void *arg);

/* Closes every pair of ps at once (both fds, buffered bytes dropped) and
 * frees them; count is 0 afterwards. For a change of leader: the clients
 * see their connections closed and reconnect. */
void proxy_close_all(ProxySet *ps);

/* Releases the set: the same as proxy_close_all. ps may be reused after
 * another proxy_set_init. */
void proxy_set_free(ProxySet *ps);

#endif
