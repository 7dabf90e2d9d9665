/* tls.h - a TLS session on OpenSSL 3 with no socket inside (TlsConn): an
 * event loop (libuv for the Raft transport, libev for clients through
 * net/tlssock.h) feeds it the ciphertext it reads and sends what it gives
 * out, over memory BIOs; a loop that owns its socket may let the session
 * read and write it directly (tls_conn_direct). Its credentials are
 * net/tlscreds.h's: a node's session is mutual TLS 1.3 (both roles send
 * their certificate and refuse a peer that sends none or one that does
 * not verify; no renegotiation, tickets or compression) and the caller
 * then checks the peer's node id; a tls:// listener's is TLS 1.2 or 1.3.
 *
 * Node identity: a node's certificate names its id in a subjectAltName DNS
 * entry "rockstalk-node-<id>" (decimal 1..65535, no leading zero, nothing
 * else in that entry, lower case); the subject CN "rockstalk-node-<id>" is
 * taken only when no SAN DNS entry of that form exists (tls_peer_node_id).
 *
 * Threads: a TlsConn belongs to one thread at a time. OpenSSL's error
 * queue is per thread; every function here empties it before its OpenSSL
 * calls and leaves nothing in it. Nothing here prints, logs or copies key
 * material. */
#ifndef ROCKSTALK_TLS_H
#define ROCKSTALK_TLS_H

#include <openssl/types.h> /* SSL */
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "net/tlscreds.h"

/* Ciphertext a TlsConn buffers unread at most (bytes): tls_conn_feed
 * refuses more. Also the most ciphertext tls_conn_write lets pile up
 * untaken before it takes no more plaintext. */
#define TLS_BUF_MAX (256 * 1024)

/* tls_conn_read's return when the peer closed cleanly (close_notify). */
#define TLS_CLOSED (-2)

/* ---- a session over memory BIOs ---- */

/* One TLS session with no socket: ciphertext goes in with tls_conn_feed and
 * comes out with tls_conn_take_out; plaintext goes in with tls_conn_write
 * and comes out with tls_conn_read (BIO_s_mem(3), SSL_set_bio(3)).
 *
 * The caller's loop: feed what the network gave (no more than
 * tls_conn_feed_room), call tls_conn_handshake until it returns 1 and then
 * tls_conn_read until it returns 0, and after every call send what
 * tls_conn_pending_out reports (a handshake flight, records, an alert, a
 * key update, close_notify). A failed handshake leaves its alert there too:
 * send it before closing the socket. An end of stream from the network
 * before TLS_CLOSED is a truncation: treat it as an error.
 *
 * TLS 1.3 lets the client finish first: a client's tls_conn_handshake
 * returns 1 once it has sent its Finished, before the server has checked
 * the client's certificate. A server that refuses it answers with an alert
 * that makes the client's next tls_conn_read return -1. */
typedef struct TlsConn TlsConn;

/* A new session with the credentials c (its own reference to them), as
 * the server (is_server != 0, SSL_set_accept_state(3)) or the client
 * (SSL_set_connect_state(3)). NULL on allocation failure. */
TlsConn *tls_conn_new(TlsCreds *c, int is_server);

/* Frees the session (no close_notify is sent: see tls_conn_close_notify)
 * and drops its reference to the credentials. NULL is ignored. */
void tls_conn_free(TlsConn *t);

/* Bytes tls_conn_feed takes now: TLS_BUF_MAX less the ciphertext already
 * buffered unread. */
size_t tls_conn_feed_room(TlsConn *t);

/* Hands over n bytes of ciphertext read from the network (copied). 0, or
 * -1 with nothing taken if that would leave more than TLS_BUF_MAX bytes
 * buffered unread (a peer cannot make us buffer without limit; the
 * session stays usable: read, then feed the rest) or if the session has
 * failed. */
int tls_conn_feed(TlsConn *t, const void *cipher, size_t n);

/* Advances the handshake with what was fed (SSL_do_handshake(3)): 1 done
 * (and on every later call), 0 more network input needed (send the pending
 * output first), -1 failed (tls_conn_error says why; final). Once it
 * returns 1 the caller checks the peer: tls_peer_node_id(tls_conn_ssl(t),
 * &id). */
int tls_conn_handshake(TlsConn *t);

/* The session's SSL object, owned by t (for tls_peer_node_id). */
SSL *tls_conn_ssl(TlsConn *t);

/* Plaintext received (SSL_read_ex(3)): up to cap bytes into buf. Returns
 * the number of bytes (> 0), 0 when no whole record is buffered yet,
 * TLS_CLOSED (-2) when the peer sent close_notify (clean end; returned
 * again by later calls), or -1 on an error (a bad record, an alert from
 * the peer, a handshake not completed with tls_conn_handshake; final). */
ssize_t tls_conn_read(TlsConn *t, void *buf, size_t cap);

/* Encrypts plaintext (SSL_write_ex(3)) into the pending output, in records
 * of at most 16 KiB, while less than TLS_BUF_MAX bytes of ciphertext wait
 * there untaken. Returns the bytes taken (0..n: fewer than n when the
 * output is full, so send it and write the rest later), or -1 on an error
 * (the handshake not completed, the session failed or closed). */
ssize_t tls_conn_write(TlsConn *t, const void *buf, size_t n);

/* Ciphertext waiting to be sent to the network (bytes). */
size_t tls_conn_pending_out(TlsConn *t);

/* Moves up to cap bytes of that ciphertext into buf; returns how many. */
size_t tls_conn_take_out(TlsConn *t, void *buf, size_t cap);

/* Queues close_notify in the pending output (SSL_shutdown(3), once; only
 * after a completed handshake, otherwise nothing). No plaintext can be
 * written after it. */
void tls_conn_close_notify(TlsConn *t);

/* Makes t read and write the socket fd (non-blocking) itself from now on
 * (a socket BIO, SSL_set_fd(3)) instead of the memory BIOs: what a loop
 * that owns the socket uses, saving a copy and the BIO work per record.
 * Only when nothing is buffered either way: 0, or -1 (keep using the
 * memory BIOs; try again once drained). After it tls_conn_feed refuses,
 * tls_conn_pending_out and tls_conn_take_out give nothing, and
 * tls_conn_handshake, tls_conn_read and tls_conn_write return 0 (or fewer
 * bytes taken) where the socket would block; tls_conn_wants_write says
 * whether it is writability they wait for. A record the socket took in
 * part must be written again with the same bytes
 * (SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER: from any address). */
int tls_conn_direct(TlsConn *t, int fd);

/* 1 once the handshake has completed (and the session has not failed). */
int tls_conn_done(const TlsConn *t);

/* 1 when a direct session (tls_conn_direct) waits for its socket to be
 * writable (SSL_want_write(3)), else 0. */
int tls_conn_wants_write(TlsConn *t);

/* Gives back the memory an idle session holds: OpenSSL's record buffers
 * (SSL_free_buffers(3)) and the high-water allocations of both memory
 * BIOs, when nothing is buffered either way (else nothing is done). The
 * next record allocates again. For a connection that has been quiet a
 * while (tls_sock_trim). */
void tls_conn_trim(TlsConn *t);

/* Why the last -1 was returned: a short text for logs made of what failed,
 * OpenSSL's reason and the certificate verification result (e.g.
 * "handshake: certificate verify failed (unable to get local issuer
 * certificate)"), never key material; "" while nothing failed. Owned by t,
 * valid until the next call on t. */
const char *tls_conn_error(TlsConn *t);

#endif
