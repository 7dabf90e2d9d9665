/* tlscreds.c - see tlscreds.h. */
#include "net/tlscreds.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

/* A private key file larger than this is not a key (bytes). */
#define KEY_FILE_MAX (64 * 1024)

struct TlsCreds {
    atomic_uint refs;
    SSL_CTX *ctx;
    uint64_t self_id;
    int key_exposed;
};

struct TlsSource {
    pthread_mutex_t mu; /* guards cur */
    TlsCreds *cur;
    char *cert, *key, *ca; /* ca NULL: a listener's, without client certs */
    int serve;             /* a client-facing listener's (load_serve) */
};

static void seterr(char *err, size_t errcap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
seterr(char *err, size_t errcap, const char *fmt, ...)
{
    va_list ap;
    if (!err || errcap == 0) return;
    va_start(ap, fmt);
    vsnprintf(err, errcap, fmt, ap);
    va_end(ap);
}

/* Empties this thread's error queue before a TLS I/O call, as
 * SSL_get_error needs; asks OpenSSL 3 to clear it only when it holds
 * something (ERR_clear_error walks every slot: on the per-record path
 * of a busy connection that cost more than the check). */
void
tls_err_reset(void)
{
    if (ERR_peek_error() != 0) ERR_clear_error();
}

/* OpenSSL's reason for the earliest error in this thread's queue (the
 * cause; later entries are the callers' "PEM lib", "system lib"), copied
 * into buf. Reason strings hold no key material. */
const char *
tls_ossl_reason(char *buf, size_t cap)
{
    unsigned long e = ERR_peek_error();
    const char *r = NULL;
    if (e == 0) {
        r = "no reason given";
    } else if (ERR_SYSTEM_ERROR(e)) {
        char tmp[96];
        r = strerror_r(ERR_GET_REASON(e), tmp, sizeof tmp);
        snprintf(buf, cap, "%s", r);
        return buf;
    } else {
        r = ERR_reason_error_string(e);
    }
    snprintf(buf, cap, "%s", r ? r : "unknown reason");
    return buf;
}

/* ---- node ids ---- */

/* The id that s (n bytes, not NUL-terminated) names as
 * "rockstalk-node-<id>", or 0 if it is not exactly of that form. */
static uint64_t
node_name_id(const unsigned char *s, size_t n)
{
    static const char pfx[] = "rockstalk-node-";
    const size_t p = sizeof pfx - 1;
    if (n <= p || n > p + 5 || memcmp(s, pfx, p) != 0 || s[p] == '0') return 0;
    uint64_t v = 0;
    for (size_t i = p; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    return v <= 65535 ? v : 0;
}

/* Adds the id a name gives (0: none) to *found; -1 if it differs from one
 * found before. */
static int
add_id(uint64_t *found, const ASN1_STRING *s)
{
    uint64_t v =
        node_name_id(ASN1_STRING_get0_data(s), (size_t)ASN1_STRING_length(s));
    if (v == 0) return 0;
    if (*found != 0 && *found != v) return -1;
    *found = v;
    return 0;
}

/* Adds the ids x's SAN DNS entries name to *found: 0, or -1 on two
 * different ids or a repeated or undecodable SAN extension. */
static int
san_ids(X509 *x, uint64_t *found)
{
    int crit = -1, bad = 0;
    GENERAL_NAMES *gens =
        X509_get_ext_d2i(x, NID_subject_alt_name, &crit, NULL);
    if (!gens) return crit == -1 ? 0 : -1; /* -1: absent; -2: repeated */
    for (int i = 0; i < sk_GENERAL_NAME_num(gens); i++) {
        const GENERAL_NAME *g = sk_GENERAL_NAME_value(gens, i);
        if (g->type == GEN_DNS) bad |= add_id(found, g->d.dNSName);
    }
    GENERAL_NAMES_free(gens);
    return bad;
}

/* The same for the subject's CN entries. */
static int
cn_ids(X509 *x, uint64_t *found)
{
    const X509_NAME *nm = X509_get_subject_name(x);
    int bad = 0;
    for (int i = X509_NAME_get_index_by_NID(nm, NID_commonName, -1); i >= 0;
         i = X509_NAME_get_index_by_NID(nm, NID_commonName, i))
        bad |=
            add_id(found, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(nm, i)));
    return bad;
}

/* The node id x names (tls.h): its SAN DNS entries, or its CNs when none
 * of those names one. 0 with *id, or -1 (none, or two different ones). */
static int
cert_node_id(X509 *x, uint64_t *id)
{
    uint64_t found = 0;
    if (san_ids(x, &found) < 0) return -1;
    if (!found && cn_ids(x, &found) < 0) return -1;
    if (!found) return -1;
    *id = found;
    return 0;
}

int
tls_peer_node_id(SSL *ssl, uint64_t *id)
{
    int r = -1;
    X509 *peer;
    if (!ssl || !SSL_is_init_finished(ssl)) return -1;
    peer = SSL_get0_peer_certificate(ssl);
    if (peer && SSL_get_verify_result(ssl) == X509_V_OK)
        r = cert_node_id(peer, id);
    ERR_clear_error();
    return r;
}

/* ---- credentials ---- */

/* TLS 1.3 suites, ours first: AES-128-GCM costs the least per record on
 * hardware with AES instructions (OpenSSL 3.0.19, scripts/bench/tlsrec's
 * put round of a 150-byte record and a 20-byte one: 1.9-2.3 us against
 * 2.4-2.7 for ChaCha20-Poly1305 on the reading and writing server;
 * BENCHMARKS.md, "Per thread, through a follower"). `openssl speed -evp`,
 * which times the cipher calls alone, says the opposite on small blocks
 * (990 against 263 MB/s at 128 bytes); the first order followed it. A
 * client that prefers ChaCha20-Poly1305 (no AES instructions) still gets
 * it from a listener (SSL_OP_PRIORITIZE_CHACHA). */
#define TLS_SUITES                                                             \
    "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256:"                     \
    "TLS_AES_256_GCM_SHA384"

/* A context with the settings of tls.h and nothing loaded yet. */
static SSL_CTX *
ctx_new(void)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_method());
    if (!ctx) return NULL;
    if (!SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) ||
        !SSL_CTX_set_ciphersuites(ctx, TLS_SUITES)) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    /* No tickets (stateless or stateful) nor cached sessions: every
     * connection is a full handshake with both certificates checked. */
    /* a FIN without close_notify ends the stream (tls_conn_direct's
     * sessions see it; the memory BIOs never report an end) */
    SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET | SSL_OP_NO_COMPRESSION |
                                 SSL_OP_NO_RENEGOTIATION |
                                 SSL_OP_IGNORE_UNEXPECTED_EOF);
    SSL_CTX_set_num_tickets(ctx, 0);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                       NULL);
    return ctx;
}

/* The key file's bytes, read whole into a buffer the caller cleanses and
 * frees; *exposed from the same descriptor's mode. NULL with err set. */
static char *
read_key_file(const char *path, size_t *len, int *exposed, char *err,
              size_t errcap)
{
    struct stat st = {0};
    char *buf = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) < 0) goto fail;
    if (!S_ISREG(st.st_mode) || st.st_size > KEY_FILE_MAX) {
        seterr(err, errcap, "private key %s: not a key file", path);
        close(fd);
        return NULL;
    }
    *exposed = (st.st_mode & 077) != 0;
    buf = malloc((size_t)st.st_size + 1);
    size_t n = 0;
    ssize_t r = 1;
    while (buf && n <= (size_t)st.st_size && r > 0)
        if ((r = read(fd, buf + n, (size_t)st.st_size + 1 - n)) > 0)
            n += (size_t)r;
    if (!buf || r < 0) goto fail;
    close(fd);
    *len = n;
    return buf;
fail:
    seterr(err, errcap, "private key %s: %s", path, strerror(errno));
    if (buf) OPENSSL_cleanse(buf, (size_t)st.st_size + 1);
    free(buf);
    if (fd >= 0) close(fd);
    return NULL;
}

/* A password callback that gives none: an encrypted key is refused rather
 * than prompted for on the terminal (pem_password_cb(3)). */
static int
no_password(char *buf, int size, int rwflag, void *u)
{
    (void)buf, (void)size, (void)rwflag, (void)u;
    return -1;
}

/* Why a key file that OpenSSL could not read is not a key, when its text
 * says (OpenSSL 3.0's decoders say "unsupported" for any of these); NULL
 * otherwise. Looks at PEM labels only. */
static const char *
key_problem(const char *pem, size_t len)
{
    if (memmem(pem, len, "ENCRYPTED", 9))
        return "an encrypted key (not supported: store it decrypted, mode "
               "0600)";
    if (!memmem(pem, len, "PRIVATE KEY-----", 16))
        return "no PEM private key in it";
    return NULL;
}

/* Loads the private key into ctx and checks it against the certificate
 * already there. */
static int
load_key(SSL_CTX *ctx, const char *key, const char *cert, int *exposed,
         char *err, size_t errcap)
{
    char why[96];
    size_t len = 0;
    char *pem = read_key_file(key, &len, exposed, err, errcap);
    if (!pem) return -1;
    BIO *b = BIO_new_mem_buf(pem, (int)len);
    EVP_PKEY *pk =
        b ? PEM_read_bio_PrivateKey(b, NULL, no_password, NULL) : NULL;
    const char *problem = pk ? NULL : key_problem(pem, len);
    BIO_free(b);
    OPENSSL_cleanse(pem, len);
    free(pem);
    if (!pk) {
        if (problem)
            seterr(err, errcap, "private key %s: %s", key, problem);
        else
            seterr(err, errcap, "private key %s: cannot read it: %s", key,
                   tls_ossl_reason(why, sizeof why));
        return -1;
    }
    int ok = SSL_CTX_use_PrivateKey(ctx, pk) == 1 &&
             SSL_CTX_check_private_key(ctx) == 1;
    EVP_PKEY_free(pk);
    if (!ok)
        seterr(err, errcap,
               "private key %s does not match the certificate in %s: %s", key,
               cert, tls_ossl_reason(why, sizeof why));
    return ok ? 0 : -1;
}

/* Checks that our certificate (with its chain) verifies against the trust
 * store for both roles, as a peer will check it (X509_verify_cert(3)). */
static int
verify_own(SSL_CTX *ctx, const char *cert, const char *ca, char *err,
           size_t errcap)
{
    static const struct {
        int purpose;
        const char *role;
    } uses[] = {{X509_PURPOSE_SSL_SERVER, "server"},
                {X509_PURPOSE_SSL_CLIENT, "client"}};
    STACK_OF(X509) *chain = NULL;
    X509_STORE_CTX *v = X509_STORE_CTX_new();
    int rc = 0;
    SSL_CTX_get0_chain_certs(ctx, &chain);
    for (size_t i = 0; rc == 0 && i < sizeof uses / sizeof uses[0]; i++) {
        if (!v || !X509_STORE_CTX_init(v, SSL_CTX_get_cert_store(ctx),
                                       SSL_CTX_get0_certificate(ctx), chain)) {
            seterr(err, errcap, "certificate %s: out of memory", cert);
            rc = -1;
            break;
        }
        X509_STORE_CTX_set_purpose(v, uses[i].purpose);
        if (X509_verify_cert(v) != 1) {
            seterr(err, errcap,
                   "certificate %s does not verify against the CA in %s "
                   "as a TLS %s: %s",
                   cert, ca, uses[i].role,
                   X509_verify_cert_error_string(X509_STORE_CTX_get_error(v)));
            rc = -1;
        }
        X509_STORE_CTX_cleanup(v);
    }
    X509_STORE_CTX_free(v);
    return rc;
}

/* Fills ctx from the three files (tls_creds_load). */
static int
load_files(SSL_CTX *ctx, const char *cert, const char *key, const char *ca,
           int *exposed, char *err, size_t errcap)
{
    char why[96];
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
        seterr(err, errcap, "certificate %s: %s", cert,
               tls_ossl_reason(why, sizeof why));
        return -1;
    }
    if (load_key(ctx, key, cert, exposed, err, errcap) < 0) return -1;
    if (SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1) {
        seterr(err, errcap, "CA certificates %s: %s", ca,
               tls_ossl_reason(why, sizeof why));
        return -1;
    }
    return verify_own(ctx, cert, ca, err, errcap);
}

int
tls_creds_load(const char *cert_pem, const char *key_pem, const char *ca_pem,
               TlsCreds **out, char *err, size_t errcap)
{
    TlsCreds *c = calloc(1, sizeof *c);
    ERR_clear_error();
    if (!c || !(c->ctx = ctx_new())) {
        seterr(err, errcap, "TLS context: out of memory");
        free(c);
        ERR_clear_error();
        return -1;
    }
    if (load_files(c->ctx, cert_pem, key_pem, ca_pem, &c->key_exposed, err,
                   errcap) < 0) {
        SSL_CTX_free(c->ctx);
        free(c);
        ERR_clear_error();
        return -1;
    }
    if (cert_node_id(SSL_CTX_get0_certificate(c->ctx), &c->self_id) < 0)
        c->self_id = 0;
    atomic_init(&c->refs, 1);
    ERR_clear_error();
    *out = c;
    return 0;
}

/* A context for a client-facing listener: TLS 1.2 (forward-secret AEAD
 * suites only) and 1.3, no renegotiation or compression, one session
 * ticket so that a client reconnecting resumes cheaply; with ca, a client
 * must send a certificate that verifies against it. */
static SSL_CTX *
ctx_serve_new(const char *ca)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) return NULL;
    if (!SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) ||
        !SSL_CTX_set_ciphersuites(ctx, TLS_SUITES) ||
        !SSL_CTX_set_cipher_list(ctx, "ECDHE+AESGCM+AES128:ECDHE+CHACHA20:"
                                      "ECDHE+AESGCM")) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
                                 SSL_OP_CIPHER_SERVER_PREFERENCE |
                                 SSL_OP_PRIORITIZE_CHACHA |
                                 SSL_OP_IGNORE_UNEXPECTED_EOF);
    SSL_CTX_set_num_tickets(ctx, 1);
    if (ca)
        SSL_CTX_set_verify(
            ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    return ctx;
}

int
tls_creds_load_serve(const char *cert_pem, const char *key_pem,
                     const char *ca_pem, TlsCreds **out, char *err,
                     size_t errcap)
{
    TlsCreds *c = calloc(1, sizeof *c);
    char why[96];
    ERR_clear_error();
    if (!c || !(c->ctx = ctx_serve_new(ca_pem))) {
        seterr(err, errcap, "TLS context: out of memory");
        free(c);
        ERR_clear_error();
        return -1;
    }
    int rc = 0;
    if (SSL_CTX_use_certificate_chain_file(c->ctx, cert_pem) != 1) {
        seterr(err, errcap, "certificate %s: %s", cert_pem,
               tls_ossl_reason(why, sizeof why));
        rc = -1;
    } else if (load_key(c->ctx, key_pem, cert_pem, &c->key_exposed, err,
                        errcap) < 0) {
        rc = -1;
    } else if (ca_pem &&
               SSL_CTX_load_verify_locations(c->ctx, ca_pem, NULL) != 1) {
        seterr(err, errcap, "CA certificates %s: %s", ca_pem,
               tls_ossl_reason(why, sizeof why));
        rc = -1;
    }
    ERR_clear_error();
    if (rc < 0) {
        SSL_CTX_free(c->ctx);
        free(c);
        return -1;
    }
    atomic_init(&c->refs, 1);
    *out = c;
    return 0;
}

/* The source's files loaded as its kind says. */
static int
source_load(const TlsSource *s, TlsCreds **out, char *err, size_t errcap)
{
    return s->serve
               ? tls_creds_load_serve(s->cert, s->key, s->ca, out, err, errcap)
               : tls_creds_load(s->cert, s->key, s->ca, out, err, errcap);
}

void
tls_creds_ref(TlsCreds *c)
{
    atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
}

void
tls_creds_unref(TlsCreds *c)
{
    if (!c) return;
    if (atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1)
        return;
    SSL_CTX_free(c->ctx);
    free(c);
}

uint64_t
tls_creds_self_id(const TlsCreds *c)
{
    return c->self_id;
}

int
tls_creds_key_exposed(const TlsCreds *c)
{
    return c->key_exposed;
}

/* ---- reloadable credentials ---- */

/* A source of either kind (serve: tls_creds_load_serve, ca may be NULL). */
static int
source_open(const char *cert, const char *key, const char *ca, int serve,
            TlsSource **out, char *err, size_t errcap)
{
    TlsSource *s = calloc(1, sizeof *s);
    if (!s || !(s->cert = strdup(cert)) || !(s->key = strdup(key)) ||
        (ca && !(s->ca = strdup(ca)))) {
        seterr(err, errcap, "TLS credentials: out of memory");
        goto fail;
    }
    s->serve = serve;
    if (source_load(s, &s->cur, err, errcap) < 0) goto fail;
    if (pthread_mutex_init(&s->mu, NULL) != 0) {
        seterr(err, errcap, "TLS credentials: cannot make a mutex");
        tls_creds_unref(s->cur);
        goto fail;
    }
    *out = s;
    return 0;
fail:
    if (s) {
        free(s->cert);
        free(s->key);
        free(s->ca);
    }
    free(s);
    return -1;
}

int
tls_source_open(const char *cert, const char *key, const char *ca,
                TlsSource **out, char *err, size_t errcap)
{
    return source_open(cert, key, ca, 0, out, err, errcap);
}

int
tls_source_open_serve(const char *cert, const char *key, const char *ca,
                      TlsSource **out, char *err, size_t errcap)
{
    return source_open(cert, key, ca, 1, out, err, errcap);
}

int
tls_source_reload(TlsSource *s, char *err, size_t errcap)
{
    TlsCreds *c, *old;
    if (source_load(s, &c, err, errcap) < 0) return -1;
    pthread_mutex_lock(&s->mu);
    old = s->cur;
    s->cur = c;
    pthread_mutex_unlock(&s->mu);
    tls_creds_unref(old);
    return 0;
}

TlsCreds *
tls_source_get(TlsSource *s)
{
    pthread_mutex_lock(&s->mu);
    TlsCreds *c = s->cur;
    tls_creds_ref(c);
    pthread_mutex_unlock(&s->mu);
    return c;
}

void
tls_source_close(TlsSource *s)
{
    if (!s) return;
    tls_creds_unref(s->cur);
    pthread_mutex_destroy(&s->mu);
    free(s->cert);
    free(s->key);
    free(s->ca);
    free(s);
}

int
tls_peer_cn(SSL *ssl, char *buf, size_t cap)
{
    X509 *peer = SSL_get0_peer_certificate(ssl);
    X509_NAME *name = peer ? X509_get_subject_name(peer) : NULL;
    int i = name ? X509_NAME_get_index_by_NID(name, NID_commonName, -1) : -1;

    if (i < 0 || SSL_get_verify_result(ssl) != X509_V_OK ||
        X509_NAME_get_index_by_NID(name, NID_commonName, i) >= 0)
        return -1;
    const ASN1_STRING *v =
        X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, i));
    const unsigned char *d = ASN1_STRING_get0_data(v);
    int n = ASN1_STRING_length(v);
    if (n <= 0 || (size_t)n >= cap) return -1;
    for (int k = 0; k < n; k++)
        if (d[k] < 0x20 || d[k] > 0x7e) return -1;
    memcpy(buf, d, (size_t)n);
    buf[n] = '\0';
    return 0;
}

SSL_CTX *
tls_creds_ctx(const TlsCreds *c)
{
    return c->ctx;
}
