/* clienttls.h - the credentials of the tls:// listeners (issue 32,
 * rockstalkd(1) SECURITY): --tls-cert and --tls-key, with --tls-ca the CA
 * whose client certificates are required (mutual TLS). Loaded at start,
 * re-read on SIGHUP (connections open keep their session; new ones take
 * the new files), and a TLS session per accepted connection, which then
 * speaks TLS on the loop (net/tlssock.h; conn/ and cluster/proxy.c drive
 * it). Loop thread. */
#ifndef ROCKSTALK_CLIENTTLS_H
#define ROCKSTALK_CLIENTTLS_H

#include <stddef.h>

#include "net/tlssock.h"
#include "queue/state.h"

/* Loads s->tls from s->cfg's tls_cert, tls_key and tls_ca (net/tls.h,
 * tls_source_open_serve). Nothing to do without --tls-cert: 0 and s->tls
 * stays NULL. -1 with a message in err when only one of cert and key is
 * given, when --tls-ca comes without them, or when a file does not load.
 * Logs a warning when the key file is readable by group or others. */
int clienttls_open(Server *s, char *err, size_t errcap);

/* SIGHUP: reads the files again; on failure logs why and keeps the
 * current credentials. Nothing without s->tls. */
void clienttls_reload(Server *s);

/* A new server session with the current credentials, for a connection
 * accepted on a tls:// listener (its handshake runs in its first reads):
 * the caller owns it. NULL without s->tls or when memory lacks. */
TlsSock *clienttls_session(Server *s);

/* 1 when tls:// clients must present a certificate (--tls-ca). */
int clienttls_mutual(const Server *s);

/* Frees s->tls (sessions made from it keep their credentials). */
void clienttls_close(Server *s);

#endif
