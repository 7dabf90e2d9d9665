/* Unit tests for net/tls.c: credentials, node ids, and two TlsConn sessions
 * (or one and a plain OpenSSL client) driven against each other in memory.
 *
 * The group's setup makes the certificates in a fresh temporary directory:
 * scripts/cluster-certs.sh (run from the repository's root, as `make unit`
 * does) for a cluster of 3 and, under other/, an unrelated cluster of 1;
 * then, signed by the first CA with the OpenSSL API, certificates that name
 * no node id, two ids, an id only in the CN, ids that are not of the form,
 * and an expired one. The teardown removes the directory. */
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "net/tls.h"

#define SCRIPT "scripts/cluster-certs.sh"

typedef struct {
    char dir[64];
} Fx;

typedef struct {
    char s[512];
} Path;

/* DIR/name (a temporary valid for the full expression it is used in). */
static Path
path(const Fx *f, const char *name)
{
    Path p;
    snprintf(p.s, sizeof p.s, "%s/%s", f->dir, name);
    return p;
}

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Runs a shell command; its exit status. */
static int
sh(const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int r = system(cmd);
    return WIFEXITED(r) ? WEXITSTATUS(r) : -1;
}

/* ---- certificates made with the OpenSSL API ---- */

static void
add_ext(X509 *x, X509 *ca, int nid, const char *value)
{
    X509V3_CTX c;
    X509V3_set_ctx_nodb(&c);
    X509V3_set_ctx(&c, ca, x, NULL, NULL, 0);
    X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &c, nid, value);
    assert_non_null(e);
    assert_int_equal(X509_add_ext(x, e, -1), 1);
    X509_EXTENSION_free(e);
}

static void
write_pem(const char *p, X509 *x, EVP_PKEY *key)
{
    FILE *fp = fopen(p, "w");
    assert_non_null(fp);
    if (x) assert_int_equal(PEM_write_X509(fp, x), 1);
    if (key)
        assert_int_equal(
            PEM_write_PrivateKey(fp, key, NULL, NULL, 0, NULL, NULL), 1);
    assert_int_equal(fclose(fp), 0);
    assert_int_equal(chmod(p, key ? 0600 : 0644), 0);
}

/* Writes DIR/<name>.pem and DIR/<name>.key: a new P-256 key and its
 * certificate signed by DIR/ca.pem, with the subject CN cn (NULL: an empty
 * subject), the subjectAltName san ("DNS:a,DNS:b"; NULL: none), valid from
 * now + from_s to now + to_s seconds. */
static void
make_cert(const Fx *f, const char *name, const char *cn, const char *san,
          long from_s, long to_s)
{
    char file[80];
    FILE *fp = fopen(path(f, "ca.key").s, "r");
    assert_non_null(fp);
    EVP_PKEY *cakey = PEM_read_PrivateKey(fp, NULL, NULL, NULL);
    fclose(fp);
    fp = fopen(path(f, "ca.pem").s, "r");
    assert_non_null(fp);
    X509 *ca = PEM_read_X509(fp, NULL, NULL, NULL);
    fclose(fp);
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    assert_true(cakey && ca && key && x);

    X509_set_version(x, X509_VERSION_3);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1000 + (long)strlen(name));
    X509_gmtime_adj(X509_getm_notBefore(x), from_s);
    X509_gmtime_adj(X509_getm_notAfter(x), to_s);
    X509_set_pubkey(x, key);
    if (cn)
        X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
                                   (const unsigned char *)cn, -1, -1, 0);
    X509_set_issuer_name(x, X509_get_subject_name(ca));
    add_ext(x, ca, NID_basic_constraints, "critical,CA:FALSE");
    add_ext(x, ca, NID_ext_key_usage, "serverAuth,clientAuth");
    if (san) add_ext(x, ca, NID_subject_alt_name, san);
    assert_true(X509_sign(x, cakey, EVP_sha256()) > 0);

    snprintf(file, sizeof file, "%s.pem", name);
    write_pem(path(f, file).s, x, NULL);
    snprintf(file, sizeof file, "%s.key", name);
    write_pem(path(f, file).s, NULL, key);
    X509_free(x);
    X509_free(ca);
    EVP_PKEY_free(key);
    EVP_PKEY_free(cakey);
}

static int
group_setup(void **state)
{
    static Fx fx;
    strcpy(fx.dir, "/tmp/test_tls.XXXXXX");
    if (access(SCRIPT, X_OK) != 0) {
        fprintf(stderr, "test_tls: run from the repository's root (%s)\n",
                SCRIPT);
        return -1;
    }
    if (!mkdtemp(fx.dir)) return -1;
    *state = &fx;
    if (sh(SCRIPT " %s 3 >/dev/null", fx.dir) != 0 ||
        sh(SCRIPT " %s/other 1 >/dev/null", fx.dir) != 0)
        return -1;
    make_cert(&fx, "noid", "example", "DNS:example.org", 0, 86400);
    make_cert(&fx, "twoids", "rockstalk-node-4",
              "DNS:rockstalk-node-4,DNS:rockstalk-node-5", 0, 86400);
    make_cert(&fx, "sameid", "example",
              "DNS:rockstalk-node-6,DNS:example.org,DNS:rockstalk-node-6", 0,
              86400);
    make_cert(&fx, "cnonly", "rockstalk-node-7", NULL, 0, 86400);
    make_cert(&fx, "sanwins", "rockstalk-node-8", "DNS:rockstalk-node-9", 0,
              86400);
    make_cert(&fx, "badform", "rockstalk-node-65536",
              "DNS:rockstalk-node-010,DNS:rockstalk-node-0,"
              "DNS:rockstalk-node-3x,DNS:xrockstalk-node-3",
              0, 86400);
    make_cert(&fx, "expired", "rockstalk-node-1", "DNS:rockstalk-node-1",
              -2 * 86400, -86400);
    return 0;
}

static int
rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(p);
}

static int
group_teardown(void **state)
{
    Fx *f = *state;
    return f ? nftw(f->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS) : 0;
}

/* ---- driving sessions ---- */

/* Credentials from DIR/<name>.pem and .key with the CA ca (a name in
 * DIR); the test fails if they do not load. */
static TlsCreds *
creds_ca(const Fx *f, const char *name, const char *ca)
{
    char cert[80], key[80], err[300] = "";
    TlsCreds *c = NULL;
    snprintf(cert, sizeof cert, "%s.pem", name);
    snprintf(key, sizeof key, "%s.key", name);
    int r = tls_creds_load(path(f, cert).s, path(f, key).s, path(f, ca).s, &c,
                           err, sizeof err);
    if (r != 0) fail_msg("loading %s: %s", name, err);
    return c;
}

static TlsCreds *
creds(const Fx *f, const char *name)
{
    return creds_ca(f, name, "ca.pem");
}

/* A session with new credentials; the session keeps the only reference. */
static TlsConn *
conn(TlsCreds *c, int is_server)
{
    TlsConn *t = tls_conn_new(c, is_server);
    assert_non_null(t);
    tls_creds_unref(c);
    return t;
}

/* Moves from's pending output into to, as much as to takes. */
static void
shuttle(TlsConn *from, TlsConn *to)
{
    unsigned char buf[16384];
    size_t room, n;
    while ((room = tls_conn_feed_room(to)) > 0 &&
           (n = tls_conn_take_out(from, buf,
                                  room < sizeof buf ? room : sizeof buf)) > 0)
        if (tls_conn_feed(to, buf, n) < 0) break;
}

/* Runs both handshakes until neither waits; their last results. */
static void
handshake(TlsConn *c, TlsConn *s, int *rc, int *rs)
{
    *rc = *rs = 0;
    for (int i = 0; i < 10 && (*rc == 0 || *rs == 0); i++) {
        if (*rc == 0) *rc = tls_conn_handshake(c);
        shuttle(c, s);
        if (*rs == 0) *rs = tls_conn_handshake(s);
        shuttle(s, c);
    }
}

/* The peer's node id as the session sees it; 0 when tls_peer_node_id
 * refuses. */
static uint64_t
peer_id(TlsConn *t)
{
    uint64_t id = 12345;
    if (tls_peer_node_id(tls_conn_ssl(t), &id) < 0) {
        assert_int_equal(id, 12345); /* untouched */
        return 0;
    }
    return id;
}

/* A client and a server with the named certificates, handshaken: both must
 * complete. */
static void
good_pair(const Fx *f, const char *client, const char *server, TlsConn **c,
          TlsConn **s)
{
    int rc, rs;
    *c = conn(creds(f, client), 0);
    *s = conn(creds(f, server), 1);
    handshake(*c, *s, &rc, &rs);
    if (rc != 1 || rs != 1)
        fail_msg("handshake %s -> %s: client %d (%s), server %d (%s)", client,
                 server, rc, tls_conn_error(*c), rs, tls_conn_error(*s));
}

/* Sends total bytes from w to r through both sessions, in writes of odd
 * sizes, and checks they arrive whole and in order. */
static void
transfer(TlsConn *w, TlsConn *r, size_t total)
{
    unsigned char *src = malloc(total), *dst = malloc(total);
    size_t sent = 0, got = 0;
    assert_true(src && dst);
    for (size_t i = 0; i < total; i++)
        src[i] = (unsigned char)((i * 2654435761u) >> 13);
    for (int round = 0; got < total; round++) {
        ssize_t k;
        assert_true(round < 10000);
        if (sent < total) {
            size_t chunk = total - sent < 40009 ? total - sent : 40009;
            k = tls_conn_write(w, src + sent, chunk);
            assert_true(k >= 0);
            sent += (size_t)k;
        }
        shuttle(w, r);
        while ((k = tls_conn_read(r, dst + got, total - got)) > 0)
            got += (size_t)k;
        assert_int_equal(k, 0);
    }
    assert_int_equal(got, total);
    assert_memory_equal(src, dst, total);
    free(src);
    free(dst);
}

/* ---- the script ---- */

/* cluster-certs.sh: key modes, refusal of a used directory, -f. */
static void
test_script(void **state)
{
    const Fx *f = *state;
    struct stat st;
    char ca1[4096] = "", ca2[4096] = "";
    FILE *fp;

    assert_int_equal(stat(path(f, "node3.key").s, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(stat(path(f, "ca.key").s, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(stat(path(f, "node3.pem").s, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);
    assert_int_not_equal(stat(path(f, "node4.pem").s, &st), 0);

    assert_int_equal(sh(SCRIPT " %s/again 1 >/dev/null", f->dir), 0);
    fp = fopen(path(f, "again/ca.pem").s, "r");
    assert_non_null(fp);
    assert_true(fread(ca1, 1, sizeof ca1 - 1, fp) > 0);
    fclose(fp);
    /* a used directory is refused, and left as it was */
    assert_int_not_equal(sh(SCRIPT " %s/again 1 2>/dev/null", f->dir), 0);
    fp = fopen(path(f, "again/ca.pem").s, "r");
    assert_true(fp && fread(ca2, 1, sizeof ca2 - 1, fp) > 0);
    fclose(fp);
    assert_string_equal(ca1, ca2);
    /* -f makes a new CA */
    assert_int_equal(sh(SCRIPT " -f %s/again 1 >/dev/null", f->dir), 0);
    fp = fopen(path(f, "again/ca.pem").s, "r");
    assert_true(fp && fread(ca2, 1, sizeof ca2 - 1, fp) > 0);
    fclose(fp);
    assert_string_not_equal(ca1, ca2);
    /* bad arguments */
    assert_int_equal(sh(SCRIPT " %s/x 2>/dev/null", f->dir), 2);
    assert_int_equal(sh(SCRIPT " %s/x 0 2>/dev/null", f->dir), 2);
    assert_int_equal(sh(SCRIPT " %s/x 65536 2>/dev/null", f->dir), 2);
}

/* ---- credentials ---- */

static uint64_t
self_id(const Fx *f, const char *name)
{
    TlsCreds *c = creds(f, name);
    uint64_t id = tls_creds_self_id(c);
    tls_creds_unref(c);
    return id;
}

/* Good credentials load; the id of each certificate by the naming rule. */
static void
test_load_and_self_id(void **state)
{
    const Fx *f = *state;
    assert_int_equal(self_id(f, "node1"), 1);
    assert_int_equal(self_id(f, "node3"), 3);
    assert_int_equal(self_id(f, "cnonly"), 7);
    assert_int_equal(self_id(f, "sanwins"), 9);
    assert_int_equal(self_id(f, "sameid"), 6);
    assert_int_equal(self_id(f, "noid"), 0);
    assert_int_equal(self_id(f, "twoids"), 0);
    assert_int_equal(self_id(f, "badform"), 0);

    TlsCreds *c = creds(f, "node2");
    assert_int_equal(tls_creds_key_exposed(c), 0);
    tls_creds_ref(c);
    tls_creds_unref(c);
    tls_creds_unref(c);
    /* a key readable by the group is loaded, and flagged */
    assert_int_equal(sh("cp %s/node2.pem %s/exposed.pem && cp %s/node2.key "
                        "%s/exposed.key && chmod 640 %s/exposed.key",
                        f->dir, f->dir, f->dir, f->dir, f->dir),
                     0);
    c = creds(f, "exposed");
    assert_int_equal(tls_creds_key_exposed(c), 1);
    assert_int_equal(tls_creds_self_id(c), 2);
    tls_creds_unref(c);
}

/* tls_creds_load must fail, with err naming file and holding want. */
static void
refused(const Fx *f, const char *cert, const char *key, const char *ca,
        const char *file, const char *want)
{
    char err[300] = "";
    TlsCreds *c = NULL;
    assert_int_equal(tls_creds_load(path(f, cert).s, path(f, key).s,
                                    path(f, ca).s, &c, err, sizeof err),
                     -1);
    assert_null(c);
    if (!strstr(err, path(f, file).s) || !strstr(err, want))
        fail_msg("error \"%s\" lacks %s or \"%s\"", err, file, want);
    assert_null(strstr(err, "BEGIN")); /* no PEM in the message */
    assert_int_equal(ERR_peek_error(), 0);
}

static void
test_load_refuses(void **state)
{
    const Fx *f = *state;
    /* a key not matching the certificate: both files named */
    refused(f, "node1.pem", "node2.key", "ca.pem", "node2.key",
            "does not match");
    refused(f, "node1.pem", "node2.key", "ca.pem", "node1.pem",
            "key values mismatch");
    refused(f, "nosuch.pem", "node1.key", "ca.pem", "nosuch.pem",
            "No such file");
    refused(f, "node1.pem", "nosuch.key", "ca.pem", "nosuch.key",
            "No such file");
    refused(f, "node1.pem", "node1.key", "nosuch.pem", "nosuch.pem", "");
    /* a key file that is a certificate, a certificate that is a key, an
     * encrypted key (never prompted for) */
    refused(f, "node1.pem", "node1.pem", "ca.pem", "node1.pem",
            "no PEM private key");
    refused(f, "node1.key", "node1.key", "ca.pem", "node1.key",
            "no start line");
    assert_int_equal(sh("openssl pkey -in %s/node1.key -aes128 -passout "
                        "pass:x -out %s/enc.key",
                        f->dir, f->dir),
                     0);
    refused(f, "node1.pem", "enc.key", "ca.pem", "enc.key", "encrypted");
    /* a certificate of another CA, an expired one */
    refused(f, "other/node1.pem", "other/node1.key", "ca.pem",
            "other/node1.pem", "unable to get local issuer");
    refused(f, "expired.pem", "expired.key", "ca.pem", "expired.pem",
            "expired");
}

/* ---- sessions ---- */

/* Two nodes of one cluster: both sides complete and see the right id. */
static void
test_handshake_good(void **state)
{
    const Fx *f = *state;
    TlsConn *c, *s;
    uint64_t id = 0;
    good_pair(f, "node1", "node2", &c, &s);
    assert_int_equal(peer_id(c), 2);
    assert_int_equal(peer_id(s), 1);
    assert_string_equal(tls_conn_error(c), "");
    assert_string_equal(tls_conn_error(s), "");
    assert_int_equal(tls_conn_handshake(c), 1); /* and stays done */
    assert_int_equal(tls_conn_pending_out(c), 0);
    assert_int_equal(tls_conn_pending_out(s), 0); /* no session ticket */
    assert_int_equal(SSL_version(tls_conn_ssl(c)), TLS1_3_VERSION);
    assert_int_equal(SSL_session_reused(tls_conn_ssl(c)), 0);
    assert_int_equal(tls_peer_node_id(NULL, &id), -1);
    tls_conn_free(c);
    tls_conn_free(s);
}

/* Data both ways, 1 MiB each in writes of ~40 KB, then close_notify. */
static void
test_data_both_ways(void **state)
{
    const Fx *f = *state;
    TlsConn *c, *s;
    char buf[64];
    good_pair(f, "node3", "node1", &c, &s);
    assert_int_equal(tls_conn_write(c, "ping", 4), 4);
    shuttle(c, s);
    assert_int_equal(tls_conn_read(s, buf, sizeof buf), 4);
    assert_memory_equal(buf, "ping", 4);
    assert_int_equal(tls_conn_read(s, buf, sizeof buf), 0);
    transfer(c, s, 1 << 20);
    transfer(s, c, 1 << 20);
    transfer(c, s, 1);

    tls_conn_close_notify(c);
    assert_true(tls_conn_pending_out(c) > 0);
    assert_int_equal(tls_conn_write(c, "x", 1), -1);
    shuttle(c, s);
    assert_int_equal(tls_conn_read(s, buf, sizeof buf), TLS_CLOSED);
    assert_int_equal(tls_conn_read(s, buf, sizeof buf), TLS_CLOSED);
    tls_conn_close_notify(s);
    shuttle(s, c);
    assert_int_equal(tls_conn_read(c, buf, sizeof buf), TLS_CLOSED);
    tls_conn_free(c);
    tls_conn_free(s);
}

/* tls_conn_write stops taking plaintext once TLS_BUF_MAX of ciphertext
 * waits untaken, and takes more once it is sent. */
static void
test_write_backpressure(void **state)
{
    const Fx *f = *state;
    TlsConn *c, *s;
    size_t big = 1 << 20;
    char *p = calloc(1, big);
    good_pair(f, "node1", "node2", &c, &s);
    ssize_t k = tls_conn_write(c, p, big);
    assert_true(k >= TLS_BUF_MAX - 16384 && k < TLS_BUF_MAX + 16384);
    assert_true(tls_conn_pending_out(c) >= TLS_BUF_MAX);
    assert_int_equal(tls_conn_write(c, p, big), 0);
    assert_int_equal(tls_conn_write(c, p, 0), 0);
    char *out = malloc(TLS_BUF_MAX + 65536);
    size_t pending = tls_conn_pending_out(c);
    assert_int_equal(tls_conn_take_out(c, out, TLS_BUF_MAX + 65536), pending);
    assert_int_equal(tls_conn_pending_out(c), 0);
    assert_true(tls_conn_write(c, p, big) > 0);
    free(out);
    free(p);
    tls_conn_free(c);
    tls_conn_free(s);
}

/* A client and a server with certificates of two different CAs: both
 * handshakes fail, each with its reason. */
static void
test_other_ca_refused(void **state)
{
    const Fx *f = *state;
    for (int other_is_server = 0; other_is_server < 2; other_is_server++) {
        TlsCreds *o = creds_ca(f, "other/node1", "other/ca.pem");
        TlsConn *c = conn(other_is_server ? creds(f, "node1") : o, 0);
        TlsConn *s = conn(other_is_server ? o : creds(f, "node2"), 1);
        int rc, rs;
        handshake(c, s, &rc, &rs);
        assert_int_equal(rc, -1);
        assert_int_equal(rs, -1);
        assert_non_null(strstr(tls_conn_error(c), "certificate verify failed"));
        assert_non_null(strstr(tls_conn_error(s), "unknown ca"));
        assert_int_equal(peer_id(c), 0);
        assert_int_equal(peer_id(s), 0);
        assert_int_equal(tls_conn_handshake(c), -1); /* final */
        assert_int_equal(tls_conn_read(c, (char[8]){0}, 8), -1);
        assert_int_equal(tls_conn_write(s, "x", 1), -1);
        assert_int_equal(tls_conn_feed(s, "x", 1), -1);
        tls_conn_free(c);
        tls_conn_free(s);
    }
}

/* ---- a plain OpenSSL client, for what TlsCreds cannot be ---- */

typedef struct {
    SSL_CTX *ctx;
    SSL *ssl;
    BIO *in, *out; /* owned by ssl */
} Raw;

/* A client trusting DIR/ca.pem, with the certificate DIR/<name>.pem (NULL:
 * none), at most TLS version max_version (0: any). */
static void
raw_client(Raw *r, const Fx *f, const char *name, int max_version)
{
    char file[80];
    r->ctx = SSL_CTX_new(TLS_client_method());
    assert_non_null(r->ctx);
    assert_int_equal(
        SSL_CTX_load_verify_locations(r->ctx, path(f, "ca.pem").s, NULL), 1);
    SSL_CTX_set_verify(r->ctx, SSL_VERIFY_PEER, NULL);
    if (max_version) SSL_CTX_set_max_proto_version(r->ctx, max_version);
    if (name) {
        snprintf(file, sizeof file, "%s.pem", name);
        assert_int_equal(SSL_CTX_use_certificate_file(r->ctx, path(f, file).s,
                                                      SSL_FILETYPE_PEM),
                         1);
        snprintf(file, sizeof file, "%s.key", name);
        assert_int_equal(SSL_CTX_use_PrivateKey_file(r->ctx, path(f, file).s,
                                                     SSL_FILETYPE_PEM),
                         1);
    }
    r->ssl = SSL_new(r->ctx);
    r->in = BIO_new(BIO_s_mem());
    r->out = BIO_new(BIO_s_mem());
    assert_true(r->ssl && r->in && r->out);
    BIO_set_mem_eof_return(r->in, -1);
    SSL_set_bio(r->ssl, r->in, r->out);
    SSL_set_connect_state(r->ssl);
}

static void
raw_free(Raw *r)
{
    SSL_free(r->ssl);
    SSL_CTX_free(r->ctx);
    ERR_clear_error();
}

/* Runs the raw client against the server s; *rc 1 if the client's
 * handshake completed and it could then read without error (it waits for
 * data), -1 if either failed; *rs the server's last result. */
static void
raw_handshake(Raw *r, TlsConn *s, int *rc, int *rs)
{
    unsigned char buf[16384];
    int n, done = 0;
    *rc = *rs = 0;
    for (int i = 0; i < 10 && (*rc == 0 || *rs == 0); i++) {
        if (!done && *rc == 0) {
            int h = SSL_do_handshake(r->ssl);
            if (h == 1) done = 1;
            if (h <= 0 && SSL_get_error(r->ssl, h) != SSL_ERROR_WANT_READ)
                *rc = -1;
        }
        while ((n = BIO_read(r->out, buf, sizeof buf)) > 0)
            assert_int_equal(tls_conn_feed(s, buf, (size_t)n), 0);
        if (*rs == 0) *rs = tls_conn_handshake(s);
        size_t k;
        while ((k = tls_conn_take_out(s, buf, sizeof buf)) > 0)
            BIO_write(r->in, buf, (int)k);
        if (done && *rc == 0 && *rs != 0) {
            size_t got;
            int ok = SSL_read_ex(r->ssl, buf, sizeof buf, &got);
            int e = SSL_get_error(r->ssl, 0);
            *rc = ok || e == SSL_ERROR_WANT_READ ? 1 : -1;
        }
    }
}

/* A client that sends no certificate: the server refuses it. TLS 1.3: the
 * client's own handshake completes first; the server's alert ends it. */
static void
test_client_without_cert(void **state)
{
    const Fx *f = *state;
    Raw r;
    int rc, rs;
    raw_client(&r, f, NULL, 0);
    TlsConn *s = conn(creds(f, "node1"), 1);
    raw_handshake(&r, s, &rc, &rs);
    assert_int_equal(rs, -1);
    assert_int_equal(rc, -1);
    assert_non_null(strstr(tls_conn_error(s), "did not return a certificate"));
    assert_int_equal(peer_id(s), 0);
    tls_conn_free(s);
    raw_free(&r);
}

/* A client whose certificate comes from another CA (while it trusts ours),
 * and a client offering TLS 1.2 at most: both refused by the server. */
static void
test_server_refuses_client(void **state)
{
    const Fx *f = *state;
    Raw r;
    int rc, rs;
    raw_client(&r, f, "other/node1", 0);
    TlsConn *s = conn(creds(f, "node2"), 1);
    raw_handshake(&r, s, &rc, &rs);
    assert_int_equal(rs, -1);
    assert_int_equal(rc, -1);
    assert_non_null(strstr(tls_conn_error(s), "certificate verify failed"));
    assert_non_null(strstr(tls_conn_error(s), "unable to get local issuer"));
    tls_conn_free(s);
    raw_free(&r);

    raw_client(&r, f, "node1", TLS1_2_VERSION);
    s = conn(creds(f, "node2"), 1);
    raw_handshake(&r, s, &rc, &rs);
    assert_int_equal(rs, -1);
    assert_int_equal(rc, -1);
    assert_non_null(strstr(tls_conn_error(s), "unsupported protocol"));
    tls_conn_free(s);
    raw_free(&r);

    /* the same client with TLS 1.3 allowed is accepted */
    raw_client(&r, f, "node1", 0);
    s = conn(creds(f, "node2"), 1);
    raw_handshake(&r, s, &rc, &rs);
    assert_int_equal(rs, 1);
    assert_int_equal(rc, 1);
    assert_int_equal(peer_id(s), 1);
    tls_conn_free(s);
    raw_free(&r);
}

/* Certificates of our CA that name no id or two ids handshake, but
 * tls_peer_node_id refuses them, on either side. */
static void
test_no_id_or_two_ids(void **state)
{
    const Fx *f = *state;
    static const struct {
        const char *name;
        uint64_t id;
    } certs[] = {{"noid", 0},   {"twoids", 0},  {"badform", 0},
                 {"cnonly", 7}, {"sanwins", 9}, {"sameid", 6}};
    for (size_t i = 0; i < sizeof certs / sizeof certs[0]; i++) {
        TlsConn *c, *s;
        good_pair(f, certs[i].name, "node2", &c, &s);
        assert_int_equal(peer_id(s), certs[i].id);
        assert_int_equal(peer_id(c), 2);
        tls_conn_free(c);
        tls_conn_free(s);
        good_pair(f, "node3", certs[i].name, &c, &s);
        assert_int_equal(peer_id(c), certs[i].id);
        assert_int_equal(peer_id(s), 3);
        tls_conn_free(c);
        tls_conn_free(s);
    }
}

/* A certificate that expires after it was loaded: the peer refuses it. */
static void
test_expired_peer(void **state)
{
    const Fx *f = *state;
    int rc, rs;
    char buf[8];
    make_cert(f, "shortlived", "rockstalk-node-2", "DNS:rockstalk-node-2", 0,
              2);
    TlsConn *c = conn(creds(f, "shortlived"), 0);
    TlsConn *s = conn(creds(f, "node1"), 1);
    sleep(3);
    handshake(c, s, &rc, &rs);
    assert_int_equal(rs, -1);
    assert_non_null(strstr(tls_conn_error(s), "certificate has expired"));
    assert_int_equal(rc, 1); /* TLS 1.3: the client finished first */
    assert_int_equal(tls_conn_read(c, buf, sizeof buf), -1);
    assert_non_null(strstr(tls_conn_error(c), "alert"));
    tls_conn_free(c);
    tls_conn_free(s);
}

/* Bytes that are not TLS fail the server's handshake, with a reason. */
static void
test_garbage_to_server(void **state)
{
    const Fx *f = *state;
    static const char http[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    unsigned char junk[4096];
    uint32_t x = 12345;
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (unsigned char)((x = x * 1103515245u + 12345u) >> 16);
    for (int round = 0; round < 3; round++) {
        TlsConn *s = conn(creds(f, "node1"), 1);
        if (round == 0) assert_int_equal(tls_conn_feed(s, junk, 4096), 0);
        if (round == 1) assert_int_equal(tls_conn_feed(s, http, 27), 0);
        /* a record header announcing 16 KiB of handshake, then junk */
        if (round == 2) {
            assert_int_equal(tls_conn_feed(s, "\x16\x03\x01\x40\x00", 5), 0);
            assert_int_equal(tls_conn_feed(s, junk, 4096), 0);
            assert_int_equal(tls_conn_handshake(s), 0); /* waits for more */
            assert_int_equal(tls_conn_feed(s, junk, 4096), 0);
            assert_int_equal(tls_conn_feed(s, junk, 4096), 0);
            assert_int_equal(tls_conn_feed(s, junk, 4096), 0);
        }
        assert_int_equal(tls_conn_handshake(s), -1);
        assert_true(tls_conn_error(s)[0] != '\0');
        assert_int_equal(tls_conn_handshake(s), -1);
        assert_int_equal(ERR_peek_error(), 0);
        tls_conn_free(s);
    }
}

/* A peer cannot make a session buffer more than TLS_BUF_MAX unread. */
static void
test_feed_bound(void **state)
{
    const Fx *f = *state;
    char *p = calloc(1, TLS_BUF_MAX + 1);
    TlsConn *s = conn(creds(f, "node1"), 1);
    assert_int_equal(tls_conn_feed_room(s), TLS_BUF_MAX);
    assert_int_equal(tls_conn_feed(s, p, TLS_BUF_MAX + 1), -1);
    assert_non_null(strstr(tls_conn_error(s), "unread"));
    assert_int_equal(tls_conn_feed(s, p, TLS_BUF_MAX - 10), 0);
    assert_int_equal(tls_conn_feed_room(s), 10);
    assert_int_equal(tls_conn_feed(s, p, 11), -1);
    assert_int_equal(tls_conn_feed(s, p, 10), 0);
    assert_int_equal(tls_conn_feed(s, p, 1), -1);
    assert_int_equal(tls_conn_feed(s, p, 0), 0);
    tls_conn_free(s);
    free(p);
}

/* Plaintext is refused before the handshake completed. */
static void
test_before_handshake(void **state)
{
    const Fx *f = *state;
    char buf[8];
    uint64_t id;
    TlsConn *s = conn(creds(f, "node1"), 1);
    assert_int_equal(tls_peer_node_id(tls_conn_ssl(s), &id), -1);
    tls_conn_close_notify(s); /* nothing to close */
    assert_int_equal(tls_conn_pending_out(s), 0);
    assert_int_equal(tls_conn_read(s, buf, sizeof buf), -1);
    assert_non_null(strstr(tls_conn_error(s), "handshake not completed"));
    tls_conn_free(s);
    TlsConn *c = conn(creds(f, "node1"), 0);
    assert_int_equal(tls_conn_handshake(c), 0);
    assert_true(tls_conn_pending_out(c) > 0); /* the ClientHello */
    assert_int_equal(tls_conn_write(c, "x", 1), -1);
    tls_conn_free(c);
    tls_conn_free(NULL);
    tls_creds_unref(NULL);
    tls_source_close(NULL);
}

/* ---- reloading ---- */

static uint64_t
source_id(TlsSource *src)
{
    TlsCreds *c = tls_source_get(src);
    uint64_t id = tls_creds_self_id(c);
    tls_creds_unref(c);
    return id;
}

/* Copies DIR/<name>.pem and .key over DIR/rl.pem and rl.key. */
static void
install(const Fx *f, const char *name)
{
    assert_int_equal(sh("cp %s/%s.pem %s/rl.pem && cp %s/%s.key %s/rl.key",
                        f->dir, name, f->dir, f->dir, name, f->dir),
                     0);
}

/* tls_source_reload takes new files, and keeps the current credentials
 * when the new files are bad. */
static void
test_source_reload(void **state)
{
    const Fx *f = *state;
    TlsSource *src = NULL;
    char err[300] = "";
    install(f, "node1");
    assert_int_equal(tls_source_open(path(f, "rl.pem").s, path(f, "rl.key").s,
                                     path(f, "ca.pem").s, &src, err,
                                     sizeof err),
                     0);
    TlsCreds *old = tls_source_get(src);
    assert_int_equal(source_id(src), 1);

    install(f, "node2");
    assert_int_equal(tls_source_reload(src, err, sizeof err), 0);
    assert_int_equal(source_id(src), 2);
    assert_int_equal(tls_creds_self_id(old), 1); /* still valid */

    /* a key that does not match, a broken certificate: the current stay */
    assert_int_equal(sh("cp %s/node3.pem %s/rl.pem", f->dir, f->dir), 0);
    assert_int_equal(tls_source_reload(src, err, sizeof err), -1);
    assert_non_null(strstr(err, path(f, "rl.key").s));
    assert_int_equal(source_id(src), 2);
    assert_int_equal(sh("echo junk > %s/rl.pem", f->dir), 0);
    assert_int_equal(tls_source_reload(src, err, sizeof err), -1);
    assert_non_null(strstr(err, path(f, "rl.pem").s));
    assert_int_equal(source_id(src), 2);

    /* sessions from the old and the current credentials still talk */
    TlsCreds *cur = tls_source_get(src);
    TlsConn *c = tls_conn_new(old, 0), *s = tls_conn_new(cur, 1);
    int rc, rs;
    handshake(c, s, &rc, &rs);
    assert_int_equal(rc, 1);
    assert_int_equal(rs, 1);
    assert_int_equal(peer_id(s), 1);
    tls_creds_unref(old);
    tls_creds_unref(cur);
    tls_source_close(src);
    tls_conn_free(c);
    tls_conn_free(s);

    assert_int_equal(tls_source_open(path(f, "rl.pem").s, path(f, "rl.key").s,
                                     path(f, "ca.pem").s, &src, err,
                                     sizeof err),
                     -1);
    assert_non_null(strstr(err, path(f, "rl.pem").s));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_script),
        cmocka_unit_test(test_load_and_self_id),
        cmocka_unit_test(test_load_refuses),
        cmocka_unit_test(test_handshake_good),
        cmocka_unit_test(test_data_both_ways),
        cmocka_unit_test(test_write_backpressure),
        cmocka_unit_test(test_other_ca_refused),
        cmocka_unit_test(test_client_without_cert),
        cmocka_unit_test(test_server_refuses_client),
        cmocka_unit_test(test_no_id_or_two_ids),
        cmocka_unit_test(test_expired_peer),
        cmocka_unit_test(test_garbage_to_server),
        cmocka_unit_test(test_feed_bound),
        cmocka_unit_test(test_before_handshake),
        cmocka_unit_test(test_source_reload),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
