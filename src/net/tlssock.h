/* tlssock.h - a TLS session (net/tls.h) over a non-blocking stream socket,
 * in the shape of read(2) and write(2), for a readiness loop such as
 * libev's: a client connection (conn/) or a follower's relay to its
 * leader (cluster/proxy.c) swaps its read and write calls for these and
 * keeps its own loop and buffers.
 *
 * What read(2)/write(2) do not have:
 *   - ciphertext the socket did not take waits here (at most TLS_BUF_MAX
 *     bytes inside the session plus TLS_SOCK_OUT held here) and is sent by
 *     tls_sock_flush: while tls_sock_want_write says so, the caller
 *     watches the socket for writability, even when it has nothing to say
 *     (a handshake flight or an alert may wait, produced by a read);
 *   - plaintext may sit decrypted inside the session with the socket
 *     silent: when a read filled the caller's buffer (tls_sock_more), the
 *     caller reads again once it has room, without waiting for the socket.
 * The handshake runs inside the first reads and writes (or
 * tls_sock_handshake, for a client that speaks first).
 *
 * Thread: whichever drives the socket, one at a time. Errors: -1 with
 * errno (EAGAIN: wait for the socket; EPROTO: TLS failed, the reason in
 * tls_conn_error; any errno of recv/send). Nothing is printed. */
#ifndef ROCKSTALK_TLSSOCK_H
#define ROCKSTALK_TLSSOCK_H

#include <stddef.h>
#include <sys/types.h>

#include "net/tls.h"

/* Ciphertext bytes taken out of the session and held for the socket. */
#define TLS_SOCK_OUT 16384

typedef struct TlsSock TlsSock;

/* A socket's TLS over the session t (owned from now on: tls_sock_free
 * frees it). t may have finished its handshake elsewhere (a link the Raft
 * transport authenticated) or not have begun it. NULL when memory lacks
 * (t is freed then too). */
TlsSock *tls_sock_new(TlsConn *t);

/* Frees the session; sends nothing. NULL is ignored. */
void tls_sock_free(TlsSock *x);

/* The session (for tls_peer_node_id, tls_peer_cn, tls_conn_error). */
TlsConn *tls_sock_conn(TlsSock *x);

/* 1 once the handshake has completed, else 0. */
int tls_sock_handshaken(const TlsSock *x);

/* Advances the handshake over fd: 1 done (and on every later call), -1
 * with errno EAGAIN (wait for fd: readable, or writable when
 * tls_sock_want_write), -1 with errno EPROTO (failed: the alert is sent
 * if the socket takes it) or the socket's errno. */
int tls_sock_handshake(TlsSock *x, int fd);

/* Reads up to cap bytes of plaintext, finishing the handshake first:
 * > 0 bytes, 0 at the end of the peer's stream (close_notify, or a FIN:
 * clients and relays treat a truncation as an end), -1 with errno. */
ssize_t tls_sock_read(TlsSock *x, int fd, void *buf, size_t cap);

/* Encrypts up to n bytes of plaintext and sends what the socket takes:
 * the bytes taken (> 0; the rest is the caller's to retry), or -1 with
 * errno (EAGAIN: nothing taken, the socket is full). A completed write
 * may still leave ciphertext waiting: see tls_sock_want_write. */
ssize_t tls_sock_write(TlsSock *x, int fd, const void *buf, size_t n);

/* Sends waiting ciphertext: 0 when none waits, 1 when some still does
 * (the socket is full), -1 with errno on a socket error. */
int tls_sock_flush(TlsSock *x, int fd);

/* 1 while ciphertext waits for the socket. */
int tls_sock_want_write(TlsSock *x);

/* 1 when the last read filled the caller's buffer: more plaintext may be
 * waiting in the session though the socket is quiet. */
int tls_sock_more(const TlsSock *x);

/* Gives back the memory an idle session holds (tls_conn_trim, and the
 * buffer of ciphertext taken out, when empty): about 50 KiB after some
 * traffic, about half of it given back. For connections that have been quiet a
 * while; harmless on a busy one (it just allocates again). */
void tls_sock_trim(TlsSock *x);

/* Queues close_notify (once, after a completed handshake) and tries to
 * send it: the end of our stream. 0, or -1 with errno on a socket error;
 * what the socket did not take waits (tls_sock_want_write). */
int tls_sock_close_notify(TlsSock *x, int fd);

#endif
