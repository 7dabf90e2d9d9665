/* clitls.c - see clitls.h. */
#include "clitls.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

struct CliTls {
    SSL_CTX *ctx;
    SSL *ssl;
};

/* OpenSSL's reason for the last failure (and the queue emptied). */
static const char *
reason(char *buf, size_t cap)
{
    unsigned long e = ERR_get_error();
    ERR_error_string_n(e, buf, cap);
    ERR_clear_error();
    return e ? buf : "unknown error";
}

static int
setup_ctx(SSL_CTX *ctx, const ClientTls *o, char *err, size_t errcap)
{
    char why[160];
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    if (o->cacert ? SSL_CTX_load_verify_locations(ctx, o->cacert, NULL) != 1
                  : SSL_CTX_set_default_verify_paths(ctx) != 1) {
        snprintf(err, errcap, "TLS: CA certificates %s: %s",
                 o->cacert ? o->cacert : "(system)", reason(why, sizeof why));
        return -1;
    }
    if (!o->cert) return 0;
    if (SSL_CTX_use_certificate_chain_file(ctx, o->cert) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx, o->key ? o->key : o->cert,
                                    SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(ctx) != 1) {
        snprintf(err, errcap, "TLS: client certificate %s: %s", o->cert,
                 reason(why, sizeof why));
        return -1;
    }
    return 0;
}

/* The name or address the server's certificate must carry; SNI too for a
 * name. */
static int
expect_name(SSL *ssl, const char *name)
{
    unsigned char a[16];
    X509_VERIFY_PARAM *p = SSL_get0_param(ssl);
    if (inet_pton(AF_INET, name, a) == 1 || inet_pton(AF_INET6, name, a) == 1)
        return X509_VERIFY_PARAM_set1_ip_asc(p, name) == 1 ? 0 : -1;
    return SSL_set_tlsext_host_name(ssl, name) == 1 &&
                   SSL_set1_host(ssl, name) == 1
               ? 0
               : -1;
}

CliTls *
clitls_open(int fd, const char *host, const ClientTls *o, char *err,
            size_t errcap)
{
    char why[160];
    CliTls *t = calloc(1, sizeof *t);
    ERR_clear_error();
    if (!t || !(t->ctx = SSL_CTX_new(TLS_client_method()))) {
        snprintf(err, errcap, "TLS: out of memory");
        free(t);
        return NULL;
    }
    if (setup_ctx(t->ctx, o, err, errcap) < 0) goto fail;
    if (!(t->ssl = SSL_new(t->ctx)) || SSL_set_fd(t->ssl, fd) != 1 ||
        expect_name(t->ssl, o->name ? o->name : host) < 0) {
        snprintf(err, errcap, "TLS: %s", reason(why, sizeof why));
        goto fail;
    }
    if (SSL_connect(t->ssl) != 1) {
        long v = SSL_get_verify_result(t->ssl);
        snprintf(err, errcap, "TLS handshake: %s%s%s%s",
                 reason(why, sizeof why), v != X509_V_OK ? " (" : "",
                 v != X509_V_OK ? X509_verify_cert_error_string(v) : "",
                 v != X509_V_OK ? ")" : "");
        goto fail;
    }
    return t;
fail:
    SSL_free(t->ssl);
    SSL_CTX_free(t->ctx);
    free(t);
    return NULL;
}

void
clitls_free(CliTls *t)
{
    if (!t) return;
    SSL_shutdown(t->ssl);
    SSL_free(t->ssl);
    SSL_CTX_free(t->ctx);
    ERR_clear_error();
    free(t);
}

ssize_t
clitls_send(CliTls *t, const void *buf, size_t n, char *err, size_t errcap)
{
    size_t w = 0;
    char why[160];
    if (SSL_write_ex(t->ssl, buf, n, &w) == 1) return (ssize_t)w;
    snprintf(err, errcap, "TLS: %s", reason(why, sizeof why));
    return -1;
}

ssize_t
clitls_recv(CliTls *t, void *buf, size_t n, char *err, size_t errcap)
{
    size_t r = 0;
    char why[160];
    if (SSL_read_ex(t->ssl, buf, n, &r) == 1) return (ssize_t)r;
    int e = SSL_get_error(t->ssl, 0);
    if (e == SSL_ERROR_ZERO_RETURN ||
        (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0)) {
        ERR_clear_error();
        return 0; /* close_notify, or the server's FIN */
    }
    snprintf(err, errcap, "TLS: %s", reason(why, sizeof why));
    return -1;
}
