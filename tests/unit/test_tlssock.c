/* Unit tests for net/tlssock.c: two TlsSock sessions (client: node 1,
 * server: node 2 of a cluster made by scripts/cluster-certs.sh, run from
 * the repository's root as `make unit` does) over a non-blocking
 * socketpair with small buffers, so that every EAGAIN path is taken. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "net/tlssock.h"

#define SCRIPT "scripts/cluster-certs.sh"

static char dir[64];

static TlsCreds *
creds(int node)
{
    char cert[128], key[128], ca[128], err[300] = "";
    TlsCreds *c = NULL;
    snprintf(cert, sizeof cert, "%s/node%d.pem", dir, node);
    snprintf(key, sizeof key, "%s/node%d.key", dir, node);
    snprintf(ca, sizeof ca, "%s/ca.pem", dir);
    if (tls_creds_load(cert, key, ca, &c, err, sizeof err) != 0)
        fail_msg("loading node %d: %s", node, err);
    return c;
}

/* A session of node as client (0) or server (1), in a TlsSock. */
static TlsSock *
sock(int node, int server)
{
    TlsCreds *c = creds(node);
    TlsSock *x = tls_sock_new(tls_conn_new(c, server));
    tls_creds_unref(c);
    assert_non_null(x);
    return x;
}

typedef struct {
    int fd[2]; /* [0] client's, [1] server's */
    TlsSock *x[2];
} Pair;

static void
pair_open(Pair *p)
{
    int small = 4096;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, p->fd),
                     0);
    for (int i = 0; i < 2; i++)
        setsockopt(p->fd[i], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    p->x[0] = sock(1, 0);
    p->x[1] = sock(2, 1);
}

static void
pair_close(Pair *p)
{
    for (int i = 0; i < 2; i++) {
        tls_sock_free(p->x[i]);
        if (p->fd[i] >= 0) close(p->fd[i]);
    }
}

/* Runs both handshakes to completion (the server's inside a read, as a
 * connection's first read runs it). */
static void
handshake(Pair *p)
{
    char b[16];
    for (int k = 0; k < 100; k++) {
        int c = tls_sock_handshake(p->x[0], p->fd[0]);
        assert_true(c == 1 || errno == EAGAIN);
        ssize_t n = tls_sock_read(p->x[1], p->fd[1], b, sizeof b);
        assert_true(n < 0 && errno == EAGAIN);
        if (c == 1 && tls_sock_handshaken(p->x[1])) return;
    }
    fail_msg("handshake did not complete");
}

static void
test_handshake_names_the_peer(void **state)
{
    Pair p;
    uint64_t id = 0;
    char cn[64];
    (void)state;
    pair_open(&p);
    handshake(&p);
    SSL *srv = tls_conn_ssl(tls_sock_conn(p.x[1]));
    assert_int_equal(tls_peer_node_id(srv, &id), 0);
    assert_int_equal(id, 1);
    assert_int_equal(tls_peer_cn(srv, cn, sizeof cn), 0);
    assert_string_equal(cn, "rockstalk-node-1");
    assert_int_equal(tls_peer_cn(srv, cn, 5), -1); /* does not fit */
    pair_close(&p);
}

/* Sends len bytes from client to server through sockets that take 4 KiB
 * at a time, reading at most cap bytes a call; checks them. */
static void
stream(Pair *p, size_t len, size_t cap)
{
    unsigned char *src = malloc(len), *dst = malloc(len);
    size_t sent = 0, got = 0;
    int full = 0;
    for (size_t i = 0; i < len; i++)
        src[i] = (unsigned char)(i * 7 + (i >> 9));
    while (got < len) {
        if (sent < len) {
            ssize_t n =
                tls_sock_write(p->x[0], p->fd[0], src + sent, len - sent);
            if (n > 0)
                sent += (size_t)n;
            else
                assert_int_equal(errno, EAGAIN);
        }
        if (tls_sock_want_write(p->x[0])) full = 1;
        assert_int_not_equal(tls_sock_flush(p->x[0], p->fd[0]), -1);
        while (got < len) {
            size_t room = len - got < cap ? len - got : cap;
            ssize_t n = tls_sock_read(p->x[1], p->fd[1], dst + got, room);
            if (n < 0) {
                assert_int_equal(errno, EAGAIN);
                assert_int_equal(tls_sock_more(p->x[1]), 0);
                break;
            }
            if (n <= 0)
                fail_msg("read %zd at %zu of %zu: %s", n, got, len,
                         tls_conn_error(tls_sock_conn(p->x[1])));
            got += (size_t)n;
        }
    }
    assert_true(full); /* the socket refused ciphertext at some point */
    assert_memory_equal(src, dst, len);
    free(src);
    free(dst);
}

static void
test_stream_through_full_sockets(void **state)
{
    Pair p;
    (void)state;
    pair_open(&p);
    handshake(&p);
    stream(&p, 1 << 20, 65536);
    stream(&p, 200000, 700); /* reads smaller than a record */
    pair_close(&p);
}

static void
test_more_without_the_socket(void **state)
{
    Pair p;
    char b[64];
    (void)state;
    pair_open(&p);
    handshake(&p);
    assert_int_equal(tls_sock_write(p.x[0], p.fd[0], "0123456789", 10), 10);
    assert_int_equal(tls_sock_read(p.x[1], p.fd[1], b, 4), 4);
    assert_int_equal(tls_sock_more(p.x[1]), 1);
    /* the rest comes out of the session: the socket holds nothing */
    assert_int_equal(tls_sock_read(p.x[1], p.fd[1], b + 4, sizeof b - 4), 6);
    assert_int_equal(tls_sock_more(p.x[1]), 0);
    assert_memory_equal(b, "0123456789", 10);
    assert_int_equal(tls_sock_read(p.x[1], p.fd[1], b, sizeof b), -1);
    assert_int_equal(errno, EAGAIN);
    pair_close(&p);
}

static void
test_ends(void **state)
{
    Pair p;
    char b[64];
    (void)state;
    /* close_notify after data: the data, then the end, again and again */
    pair_open(&p);
    handshake(&p);
    assert_int_equal(tls_sock_write(p.x[0], p.fd[0], "bye", 3), 3);
    assert_int_equal(tls_sock_close_notify(p.x[0], p.fd[0]), 0);
    assert_int_equal(tls_sock_write(p.x[0], p.fd[0], "x", 1), -1);
    assert_int_equal(tls_sock_read(p.x[1], p.fd[1], b, sizeof b), 3);
    assert_int_equal(tls_sock_read(p.x[1], p.fd[1], b, sizeof b), 0);
    assert_int_equal(tls_sock_read(p.x[1], p.fd[1], b, sizeof b), 0);
    pair_close(&p);
    /* a FIN without close_notify is an end too */
    pair_open(&p);
    handshake(&p);
    shutdown(p.fd[0], SHUT_WR);
    assert_int_equal(tls_sock_read(p.x[1], p.fd[1], b, sizeof b), 0);
    pair_close(&p);
    /* garbage after the handshake: EPROTO, for good */
    pair_open(&p);
    handshake(&p);
    assert_int_equal(write(p.fd[0], "\x17\x03\x03\x00\x05hello", 10), 10);
    assert_int_equal(tls_sock_read(p.x[1], p.fd[1], b, sizeof b), -1);
    assert_int_equal(errno, EPROTO);
    assert_int_equal(tls_sock_read(p.x[1], p.fd[1], b, sizeof b), -1);
    assert_int_equal(errno, EPROTO);
    pair_close(&p);
    /* plaintext instead of a ClientHello: EPROTO, for good */
    pair_open(&p);
    assert_int_equal(write(p.fd[0], "put 0 0 1 1\r\nx\r\n", 16), 16);
    assert_int_equal(tls_sock_read(p.x[1], p.fd[1], b, sizeof b), -1);
    assert_int_equal(errno, EPROTO);
    assert_int_equal(tls_sock_write(p.x[1], p.fd[1], "x", 1), -1);
    assert_int_equal(errno, EPROTO);
    pair_close(&p);
    /* the peer leaves mid-handshake */
    pair_open(&p);
    close(p.fd[0]);
    p.fd[0] = -1;
    assert_int_equal(tls_sock_read(p.x[1], p.fd[1], b, sizeof b), -1);
    /* the session reads its socket itself: OpenSSL's "unexpected EOF" */
    assert_true(errno == ECONNRESET || errno == EPROTO);
    pair_close(&p);
}

/* Moves what fd holds into the bare session t and t's output onto fd. */
static void
pump_bare(TlsConn *t, int fd)
{
    char c[16384];
    ssize_t n = read(fd, c, sizeof c);
    if (n > 0) assert_int_equal(tls_conn_feed(t, c, (size_t)n), 0);
    size_t k;
    while ((k = tls_conn_take_out(t, c, sizeof c)) > 0)
        assert_int_equal(write(fd, c, k), (ssize_t)k);
}

/* A session that read records off the socket before a TlsSock took it
 * (the Raft transport hands relayed links over so) gives them out first,
 * though the socket is quiet. */
static void
test_handed_over_session(void **state)
{
    Pair p;
    char b[64];
    (void)state;
    pair_open(&p);
    tls_sock_free(p.x[1]);
    TlsCreds *cr = creds(2);
    TlsConn *t = tls_conn_new(cr, 1);
    tls_creds_unref(cr);
    for (int k = 0; k < 100 && tls_conn_handshake(t) != 1; k++) {
        pump_bare(t, p.fd[1]);
        int c = tls_sock_handshake(p.x[0], p.fd[0]);
        assert_true(c == 1 || errno == EAGAIN);
    }
    pump_bare(t, p.fd[1]);
    assert_int_equal(tls_conn_handshake(t), 1);
    assert_int_equal(tls_sock_handshake(p.x[0], p.fd[0]), 1);
    assert_int_equal(tls_sock_write(p.x[0], p.fd[0], "early", 5), 5);
    pump_bare(t, p.fd[1]); /* the record is in the session, not read */
    p.x[1] = tls_sock_new(t);
    assert_non_null(p.x[1]);
    assert_int_equal(tls_sock_read(p.x[1], p.fd[1], b, sizeof b), 5);
    assert_memory_equal(b, "early", 5);
    assert_int_equal(tls_sock_read(p.x[1], p.fd[1], b, sizeof b), -1);
    assert_int_equal(errno, EAGAIN);
    pair_close(&p);
}

static int
rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static int
setup(void **state)
{
    char cmd[256];
    (void)state;
    strcpy(dir, "/tmp/test_tlssock.XXXXXX");
    if (access(SCRIPT, X_OK) != 0 || !mkdtemp(dir)) return -1;
    snprintf(cmd, sizeof cmd, SCRIPT " %s 2 >/dev/null", dir);
    int r = system(cmd);
    return WIFEXITED(r) && WEXITSTATUS(r) == 0 ? 0 : -1;
}

static int
teardown(void **state)
{
    (void)state;
    return nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handshake_names_the_peer),
        cmocka_unit_test(test_stream_through_full_sockets),
        cmocka_unit_test(test_more_without_the_socket),
        cmocka_unit_test(test_ends),
        cmocka_unit_test(test_handed_over_session),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
