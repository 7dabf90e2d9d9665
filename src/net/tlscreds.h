/* tlscreds.h - the credentials of TLS on OpenSSL 3, with no socket and no
 * session inside: a node's (mutual TLS 1.3 between the nodes; its id
 * named by its certificate) and a tls:// listener's (TLS 1.2 and 1.3,
 * client certificates optional), reference-counted and reloadable on
 * SIGHUP through a TlsSource; and what a verified peer certificate names
 * (a node id, a subject CN). Sessions over these are net/tls.h's.
 *
 * Trust: the CA file given is the only trust anchor (the system's store is
 * never loaded). Threads: credentials are immutable and shared by any
 * number of threads; a TlsSource may be reloaded and read from any
 * thread. OpenSSL's error queue is per thread: every function here
 * leaves nothing in it. Nothing here prints, logs or copies key material:
 * error texts name files and OpenSSL's reasons only. */
#ifndef ROCKSTALK_TLSCREDS_H
#define ROCKSTALK_TLSCREDS_H

#include <openssl/types.h> /* SSL, SSL_CTX */
#include <stddef.h>
#include <stdint.h>

/* ---- credentials ---- */

/* One SSL_CTX with our certificate chain, private key and trust anchor;
 * immutable once loaded, reference-counted. */
typedef struct TlsCreds TlsCreds;

/* Loads the credentials of a node from three PEM files: cert_pem (our
 * certificate, then any intermediates, SSL_CTX_use_certificate_chain_file
 * (3)), key_pem (its private key, unencrypted: an encrypted one is refused,
 * never prompted for) and ca_pem (the CA certificates that are the only
 * trust anchors, SSL_CTX_load_verify_locations(3)). Checks that the key
 * matches the certificate (SSL_CTX_check_private_key(3)) and that the
 * certificate verifies against the CA for both TLS server and client use
 * (X509_verify_cert(3): an expired certificate or one from another CA is
 * refused). On success *out holds one reference (tls_creds_unref) and 0 is
 * returned; on failure -1 with a message in err (at most errcap bytes,
 * NUL-terminated) naming the file and OpenSSL's reason, never key
 * material. */
int tls_creds_load(const char *cert_pem, const char *key_pem,
                   const char *ca_pem, TlsCreds **out, char *err,
                   size_t errcap);

/* Loads the credentials of a client-facing TLS listener (tls://,
 * rockstalkd(1) SECURITY): our certificate chain and key as
 * tls_creds_load (an encrypted key refused), and ca_pem NULL (clients send
 * no certificate) or the CA file whose certificates are the only trust
 * anchors for the client certificate every client must then present
 * (mutual TLS). TLS 1.2 (ECDHE with AES-GCM or ChaCha20-Poly1305 only) and
 * TLS 1.3; no renegotiation, no compression; one session ticket per
 * handshake, so a client that reconnects may resume. The sessions made
 * from these are servers only. 0 with *out (one reference), or -1 with a
 * message in err naming the file and OpenSSL's reason. */
int tls_creds_load_serve(const char *cert_pem, const char *key_pem,
                         const char *ca_pem, TlsCreds **out, char *err,
                         size_t errcap);

/* Takes one more reference (atomic; any thread). */
void tls_creds_ref(TlsCreds *c);

/* Drops one reference (atomic; any thread); the last one frees the
 * credentials (the SSL_CTX lives on while a TlsConn made from it does, as
 * each holds its own reference). NULL is ignored. */
void tls_creds_unref(TlsCreds *c);

/* The node id our own certificate names (the rule at the top), 0 if it
 * names none or two different ones. */
uint64_t tls_creds_self_id(const TlsCreds *c);

/* 1 if the private key file had any permission bit for group or other when
 * it was loaded (as ssh refuses for its keys: mode & 077), else 0. Not
 * refused here; the caller logs a warning. */
int tls_creds_key_exposed(const TlsCreds *c);

/* ---- reloadable credentials (SIGHUP) ---- */

/* The current credentials loaded from three file names, replaced as a
 * whole by tls_source_reload. */
typedef struct TlsSource TlsSource;

/* Loads cert, key and ca as tls_creds_load and keeps the file names for
 * reloads. 0 with *out set, or -1 with a message in err. */
int tls_source_open(const char *cert, const char *key, const char *ca,
                    TlsSource **out, char *err, size_t errcap);

/* As tls_source_open for a client-facing listener's credentials
 * (tls_creds_load_serve; ca may be NULL). */
int tls_source_open_serve(const char *cert, const char *key, const char *ca,
                          TlsSource **out, char *err, size_t errcap);

/* Reads the files again, as the source was opened. On success the new
 * credentials replace the current ones for every later tls_source_get
 * (connections made before keep theirs) and 0 is returned; on failure the
 * current credentials stay and -1 is returned with a message in err. Any
 * thread. */
int tls_source_reload(TlsSource *s, char *err, size_t errcap);

/* A new reference to the current credentials (the caller unrefs it); any
 * thread (a mutex inside). Never NULL. */
TlsCreds *tls_source_get(TlsSource *s);

/* Drops the source's reference to its credentials and frees it; references
 * taken with tls_source_get stay valid. NULL is ignored. */
void tls_source_close(TlsSource *s);

/* ---- the peer's node id ---- */

/* After a completed handshake: 0 with *id set when the peer presented a
 * certificate that verified (SSL_get_verify_result(3) == X509_V_OK) and
 * that names exactly one node id (the same id named twice is one); -1
 * otherwise (handshake not finished, no certificate, failed verification,
 * no id, or two different ids), *id untouched. Uses
 * SSL_get0_peer_certificate(3). */
int tls_peer_node_id(SSL *ssl, uint64_t *id);

/* After a completed handshake: the subject CN (RFC 5280 commonName) of
 * the certificate the peer presented, if it verified, into buf
 * (NUL-terminated). 0, or -1 when there is none, it did not verify, its
 * subject has no CN or two, or the CN does not fit in cap - 1 bytes or
 * holds a byte outside printable ASCII. */
int tls_peer_cn(SSL *ssl, char *buf, size_t cap);

/* The OpenSSL context behind c (owned by c; for net/tls.c's sessions). */
SSL_CTX *tls_creds_ctx(const TlsCreds *c);

/* Empties this thread's OpenSSL error queue if it holds anything (cheaper
 * than ERR_clear_error(3) when it is empty), before a call whose result
 * SSL_get_error(3) reads. */
void tls_err_reset(void);

/* OpenSSL's reason for the earliest error in this thread's queue, copied
 * into buf (cap bytes, NUL-terminated); returns buf. */
const char *tls_ossl_reason(char *buf, size_t cap);

#endif
