/* clitls.h - the rockstalk client's TLS (rockstalk --tls): a blocking
 * OpenSSL 3 session over a connected socket, the server's certificate
 * verified against --cacert (else the system's trust store) and checked
 * for the name the client dialled (or --tls-name), an optional client
 * certificate for mutual TLS. TLS 1.2 or 1.3. Errors are returned with a
 * message, never printed. */
#ifndef ROCKSTALK_CLI_CLITLS_H
#define ROCKSTALK_CLI_CLITLS_H

#include <stddef.h>
#include <sys/types.h>

/* What --tls and its options ask for. */
typedef struct ClientTls {
    const char *cacert; /* PEM file of trusted CAs; NULL: the system's */
    const char *cert;   /* client certificate chain (PEM) for mutual TLS */
    const char *key;    /* its private key (PEM); with cert only */
    const char *name;   /* name (or IP) the server's certificate must
                           carry; NULL: the host dialled */
} ClientTls;

typedef struct CliTls CliTls;

/* Runs the handshake on fd (connected, blocking) toward host. Returns the
 * session (the caller frees it with clitls_free, which does not close
 * fd), or NULL with a message in err: a file that does not load, a
 * handshake that fails, a certificate that does not verify or does not
 * name the host. */
CliTls *clitls_open(int fd, const char *host, const ClientTls *opt, char *err,
                    size_t errcap);

/* Sends close_notify (best effort) and frees the session. NULL is
 * ignored. */
void clitls_free(CliTls *t);

/* As send(2) and recv(2) on the session (blocking): bytes, 0 at the end
 * of the server's stream (recv only), or -1 with a message in err. */
ssize_t clitls_send(CliTls *t, const void *buf, size_t n, char *err,
                    size_t errcap);
ssize_t clitls_recv(CliTls *t, void *buf, size_t n, char *err, size_t errcap);

#endif
