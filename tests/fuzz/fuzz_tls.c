/* fuzz_tls.c - libFuzzer target for the TLS server session (src/net/tls.c).
 *
 * Each input is what a client sends first: it is fed whole to a new server
 * TlsConn of each kind (a node's, a tls:// listener's with and without
 * client certificates; credentials loaded once, at start) and the
 * handshake is run.
 * Checks: feeding is refused only past TLS_BUF_MAX; the handshake waits or
 * fails, never completes (a client's Finished needs the server's fresh key
 * share); a failure has a reason and is final; all output can be taken;
 * plaintext is refused; OpenSSL's error queue is left empty.
 * Build and run: `make fuzz` (see the Makefile's fuzzing block); seeds in
 * tests/fuzz/corpus/tls/ (ClientHellos, tests/fuzz/make_corpus.py). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/err.h>

#include "net/tls.h"

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz_tls: check failed at line %d: %s\n",         \
                    __LINE__, #cond);                                          \
            abort();                                                           \
        }                                                                      \
    } while (0)

/* TEST-ONLY CREDENTIALS. Made once with `scripts/cluster-certs.sh -d 36500
 * DIR 1` (valid until 2126, so that the target does not expire) for this
 * fuzzer and published here, key included: they protect nothing and must
 * never be used outside tests/fuzz/. */
static const char TEST_CA_PEM[] =
    "-----BEGIN CERTIFICATE-----\n"
    "MIIBgzCCASmgAwIBAgIQOdUruKN+e92dRYYZZeQ9iTAKBggqhkjOPQQDAjAfMR0w\n"
    "GwYDVQQDDBRyb2Nrc3RhbGsgY2x1c3RlciBDQTAgFw0yNjExMjYxMDE1MzVaGA8y\n"
    "MTI2MTEwMjEwMTUzNVowHzEdMBsGA1UEAwwUcm9ja3N0YWxrIGNsdXN0ZXIgQ0Ew\n"
    "WTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAATG8sd2yr4N3dQpm2J0HkEHbErR9IRC\n"
    "/noiygRfLtobSBW1KrXql73N7DpM1tRkczUKytCNW4VnJKQXMs4JdrEho0UwQzAS\n"
    "BgNVHRMBAf8ECDAGAQH/AgEAMA4GA1UdDwEB/wQEAwIBBjAdBgNVHQ4EFgQU96Pk\n"
    "WVCLDRyKy9HtEAKDC0gLQTYwCgYIKoZIzj0EAwIDSAAwRQIgRDCNnjKJuvdmnTd0\n"
    "f/oAmczGI1P8Ksc5nXqFHVuO78sCIQCXeJLFqUZSJBx0URysIjb9nusOBT3hl2VF\n"
    "mcKrtGLmGw==\n"
    "-----END CERTIFICATE-----\n";
static const char TEST_NODE1_PEM[] =
    "-----BEGIN CERTIFICATE-----\n"
    "MIIB2DCCAX6gAwIBAgIQS8cb1cBCdCVkipeexPgxwjAKBggqhkjOPQQDAjAfMR0w\n"
    "GwYDVQQDDBRyb2Nrc3RhbGsgY2x1c3RlciBDQTAgFw0yNjExMjYxMDE1MzVaGA8y\n"
    "MTI2MTEwMjEwMTUzNVowGzEZMBcGA1UEAwwQcm9ja3N0YWxrLW5vZGUtMTBZMBMG\n"
    "ByqGSM49AgEGCCqGSM49AwEHA0IABG9jZSHl2uPAN4xy0ZwiQMlV+dfwF2XbCFgP\n"
    "0qzk1BTarwxkCLiKYCVvn8eDBRGmT7gmki4sehVVgomEICb/F5WjgZ0wgZowDAYD\n"
    "VR0TAQH/BAIwADAOBgNVHQ8BAf8EBAMCB4AwHQYDVR0lBBYwFAYIKwYBBQUHAwEG\n"
    "CCsGAQUFBwMCMB0GA1UdDgQWBBSEnWTqXWAIGiRH8eSOEMnJO7B67jAfBgNVHSME\n"
    "GDAWgBT3o+RZUIsNHIrL0e0QAoMLSAtBNjAbBgNVHREEFDASghByb2Nrc3RhbGst\n"
    "bm9kZS0xMAoGCCqGSM49BAMCA0gAMEUCID4qLheahg3XFhS5e7fJGbWNkJmhZ00s\n"
    "adfihO8gdb44AiEA+tSZeLTNxe1+S9XgRSRjNCGZy5XdUsTUDKMElSBfNNg=\n"
    "-----END CERTIFICATE-----\n";
static const char TEST_NODE1_KEY[] =
    "-----BEGIN PRIVATE KEY-----\n"
    "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgEIB5lfJgtgplv+cZ\n"
    "hlnd+FVtlF5MFIW9vuq9b8kpXbOhRANCAARvY2Uh5drjwDeMctGcIkDJVfnX8Bdl\n"
    "2whYD9Ks5NQU2q8MZAi4imAlb5/HgwURpk+4JpIuLHoVVYKJhCAm/xeV\n"
    "-----END PRIVATE KEY-----\n";

/* The servers' credentials, loaded by LLVMFuzzerInitialize: a node's
 * (TLS 1.3, mutual), a tls:// listener's (TLS 1.2 and 1.3, no client
 * certificate) and a tls:// listener's with --tls-ca (mutual). Every
 * input goes to a session of each. */
static TlsCreds *creds[3];

/* Writes text to DIR/name (mode 0600); its path into p. */
static void
put_file(const char *dir, const char *name, const char *text, char *p,
         size_t cap)
{
    snprintf(p, cap, "%s/%s", dir, name);
    FILE *fp = fopen(p, "w");
    CHECK(fp != NULL);
    CHECK(fputs(text, fp) >= 0);
    CHECK(fclose(fp) == 0);
    CHECK(chmod(p, 0600) == 0);
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    char dir[] = "/tmp/fuzz_tls.XXXXXX", ca[64], cert[64], key[64];
    char err[300];
    (void)argc, (void)argv;
    CHECK(mkdtemp(dir) != NULL);
    put_file(dir, "ca.pem", TEST_CA_PEM, ca, sizeof ca);
    put_file(dir, "node1.pem", TEST_NODE1_PEM, cert, sizeof cert);
    put_file(dir, "node1.key", TEST_NODE1_KEY, key, sizeof key);
    int r = tls_creds_load(cert, key, ca, &creds[0], err, sizeof err);
    if (r == 0)
        r = tls_creds_load_serve(cert, key, NULL, &creds[1], err, sizeof err);
    if (r == 0)
        r = tls_creds_load_serve(cert, key, ca, &creds[2], err, sizeof err);
    unlink(ca);
    unlink(cert);
    unlink(key);
    rmdir(dir);
    if (r < 0) {
        fprintf(stderr, "fuzz_tls: %s\n", err);
        abort();
    }
    CHECK(tls_creds_self_id(creds[0]) == 1);
    return 0;
}

/* One server session of c fed the input whole. */
static void
one(TlsCreds *c, const uint8_t *data, size_t size)
{
    unsigned char out[4096];
    TlsConn *s = tls_conn_new(c, 1);
    CHECK(s != NULL);
    if (tls_conn_feed(s, data, size) < 0) {
        CHECK(size > TLS_BUF_MAX);
    } else {
        int r = tls_conn_handshake(s);
        CHECK(r == 0 || r == -1);
        CHECK((r == -1) == (tls_conn_error(s)[0] != '\0'));
        CHECK(tls_conn_handshake(s) == r);
        while (tls_conn_take_out(s, out, sizeof out) > 0)
            ;
        CHECK(tls_conn_pending_out(s) == 0);
        CHECK(tls_conn_read(s, out, sizeof out) == -1);
    }
    CHECK(ERR_peek_error() == 0);
    tls_conn_free(s);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (int i = 0; i < 3; i++)
        one(creds[i], data, size);
    return 0;
}
