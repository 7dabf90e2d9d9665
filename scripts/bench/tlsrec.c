/*
 * tlsrec - what OpenSSL itself costs per TLS record on this machine, without
 * sockets: a client and a server session joined by memory BIOs in one
 * thread. Each round is a put c=50 op's records: the client writes a
 * 150-byte record (a put of a 100-byte body), the server reads it and
 * writes a 20-byte one (INSERTED), the client reads that. Prints the CPU
 * time per round of the server's SSL_read + SSL_write, of the client's
 * SSL_write + SSL_read, and of moving the ciphertext between the BIOs (2
 * BIO_read and 2 BIO_write, what a memory-BIO server adds).
 *
 *   tlsrec CERT KEY [1.2|1.3 [ROUNDS [SUITES]]]
 *
 * (default 1.3, 200000, OpenSSL's default suites; SUITES: a TLS 1.3
 * ciphersuites list or a TLS 1.2 cipher list, e.g. TLS_AES_128_GCM_SHA256
 * or TLS_CHACHA20_POLY1305_SHA256)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

static double
cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void
fail(const char *what)
{
    fprintf(stderr, "tlsrec: %s\n", what);
    ERR_print_errors_fp(stderr);
    exit(1);
}

/* Moves every byte written to from into to. */
static void
pump(BIO *from, BIO *to)
{
    char b[65536];
    int n;
    while ((n = BIO_read(from, b, sizeof b)) > 0)
        if (BIO_write(to, b, n) != n) fail("BIO_write");
}

static SSL *
session(SSL_CTX *ctx, BIO **in, BIO **out)
{
    SSL *ssl = SSL_new(ctx);
    *in = BIO_new(BIO_s_mem());
    *out = BIO_new(BIO_s_mem());
    if (!ssl || !*in || !*out) fail("SSL_new");
    SSL_set_bio(ssl, *in, *out);
    return ssl;
}

int
main(int argc, char **argv)
{
    if (argc < 3) {
        fputs("usage: tlsrec CERT KEY [1.2|1.3 [ROUNDS [SUITES]]]\n", stderr);
        return 2;
    }
    int v12 = argc > 3 && strcmp(argv[3], "1.2") == 0;
    long rounds = argc > 4 ? atol(argv[4]) : 200000;
    if (rounds <= 0) fail("ROUNDS must be positive");
    SSL_CTX *sc = SSL_CTX_new(TLS_server_method());
    SSL_CTX *cc = SSL_CTX_new(TLS_client_method());
    if (!sc || !cc) fail("SSL_CTX_new");
    if (SSL_CTX_use_certificate_chain_file(sc, argv[1]) != 1 ||
        SSL_CTX_use_PrivateKey_file(sc, argv[2], SSL_FILETYPE_PEM) != 1)
        fail("certificate or key");
    SSL_CTX_set_max_proto_version(cc, v12 ? TLS1_2_VERSION : TLS1_3_VERSION);
    if (argc > 5 && (v12 ? SSL_CTX_set_cipher_list(cc, argv[5])
                         : SSL_CTX_set_ciphersuites(cc, argv[5])) != 1)
        fail("SUITES");
    BIO *sr, *sw, *cr, *cw;
    SSL *s = session(sc, &sr, &sw), *c = session(cc, &cr, &cw);
    SSL_set_accept_state(s);
    SSL_set_connect_state(c);
    for (int i = 0;
         i < 10 && !(SSL_is_init_finished(s) && SSL_is_init_finished(c)); i++) {
        SSL_do_handshake(c);
        pump(cw, sr);
        SSL_do_handshake(s);
        pump(sw, cr);
    }
    if (!SSL_is_init_finished(s) || !SSL_is_init_finished(c)) fail("handshake");
    printf("%s %s, %ld rounds\n", SSL_get_version(s), SSL_get_cipher(s),
           rounds);
    char req[150], rep[20], buf[4096];
    memset(req, 'a', sizeof req);
    memset(rep, 'b', sizeof rep);
    double ts = 0, tc = 0, tp = 0, t0;
    size_t k;
    for (long i = 0; i < rounds; i++) {
        t0 = cpu_now();
        if (SSL_write_ex(c, req, sizeof req, &k) != 1) fail("client write");
        tc += cpu_now() - t0;
        t0 = cpu_now();
        pump(cw, sr);
        tp += cpu_now() - t0;
        t0 = cpu_now();
        if (SSL_read_ex(s, buf, sizeof buf, &k) != 1 || k != sizeof req)
            fail("server read");
        if (SSL_write_ex(s, rep, sizeof rep, &k) != 1) fail("server write");
        ts += cpu_now() - t0;
        t0 = cpu_now();
        pump(sw, cr);
        tp += cpu_now() - t0;
        t0 = cpu_now();
        if (SSL_read_ex(c, buf, sizeof buf, &k) != 1 || k != sizeof rep)
            fail("client read");
        tc += cpu_now() - t0;
    }
    printf("us per round: server read+write %.2f, client write+read %.2f, "
           "BIO moves %.2f\n",
           ts / (double)rounds * 1e6, tc / (double)rounds * 1e6,
           tp / (double)rounds * 1e6);
    SSL_free(s);
    SSL_free(c);
    SSL_CTX_free(sc);
    SSL_CTX_free(cc);
    return 0;
}
