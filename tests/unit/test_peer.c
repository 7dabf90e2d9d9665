/* Tests of cluster/peer.c, the Raft transport over mutual TLS: two
 * transports (nodes 1 and 2, certificates from scripts/cluster-certs.sh in
 * a temporary directory, run from the repository's root as `make unit`
 * does) on one libuv loop on loopback, this test playing libraft on both.
 *
 * A link node 1 opened to node 2 carries node 1's bytes; once node 2's
 * process is gone (here: its transport closed, as an exec or a stop does)
 * node 1's next write on that link fails, as on libraft's own TCP, so
 * libraft reconnects for the one after. It used to be taken in and lost
 * for up to PEER_DRAIN_MS: a restarted node's peers lost their vote
 * replies to it (tests/test_cluster_ops.py, a leadership transfer back to
 * a node that had handed it over). */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <raft.h>
#include <raft/uv.h>
#include <uv.h>

#include "cluster/cluster.h"
#include "cluster/peer.h"
#include "net/tlscreds.h"

#define SCRIPT "scripts/cluster-certs.sh"
#define WAIT_MS 5000 /* for any one step on loopback */

/* One transport and what this test, as its libraft, got from it. */
typedef struct Side {
    struct raft_uv_transport t;
    ClusterConfig cfg;
    TlsSource *tls;
    const char *addr;      /* its Raft address, in cfg */
    uv_stream_t *accepted; /* the last incoming Raft stream */
    int closed;            /* the transport's close callback ran */
} Side;

static char dir[64];
static uv_loop_t loop;
static Side sides[2];

static uv_stream_t *connected;
static int connect_status = 1; /* 1: no callback yet */
static char got[64];           /* read on the accepted stream */
static size_t ngot;
static ssize_t out_read; /* the outbound stream's last read result */
static int write_status = 1;

static void
sleep_ms(int ms)
{
    struct timespec ts = {0, (long)ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* Runs the loop until *flag is nonzero or WAIT_MS pass; *flag. */
static int
run_until(const volatile int *flag)
{
    for (int i = 0; i < WAIT_MS && !*flag; i++) {
        uv_run(&loop, UV_RUN_NOWAIT);
        if (!*flag) sleep_ms(1);
    }
    return *flag;
}

/* A free loopback TCP port (bound once, then released). */
static int
free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

static void
on_accept(struct raft_uv_transport *t, raft_id id, const char *address,
          uv_stream_t *stream)
{
    Side *s = t->data;
    (void)address;
    assert_int_equal(id, s == &sides[1] ? 1 : 2);
    s->accepted = stream;
}

static void
on_connect(struct raft_uv_connect *req, uv_stream_t *stream, int status)
{
    (void)req;
    connected = stream;
    connect_status = status;
}

static void
on_alloc(uv_handle_t *h, size_t want, uv_buf_t *b)
{
    static char buf[4096];
    (void)h, (void)want;
    *b = uv_buf_init(buf, sizeof buf);
}

static void
on_accepted_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    (void)s;
    if (n > 0 && ngot + (size_t)n < sizeof got) {
        memcpy(got + ngot, b->base, (size_t)n);
        ngot += (size_t)n;
    }
}

static void
on_out_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    (void)s, (void)b;
    if (n < 0) out_read = n;
}

static void
on_written(uv_write_t *req, int status)
{
    (void)req;
    write_status = status;
}

static void
on_closed(struct raft_uv_transport *t)
{
    ((Side *)t->data)->closed = 1;
}

/* Node id's side: its credentials, both voters, listening. */
static void
side_open(int id, const char *spec)
{
    Side *s = &sides[id - 1];
    char err[256], idtext[4], cert[128], key[128], ca[128];

    memset(s, 0, sizeof *s);
    snprintf(idtext, sizeof idtext, "%d", id);
    assert_int_equal(cluster_parse(spec, idtext, &s->cfg, err, sizeof err), 0);
    snprintf(cert, sizeof cert, "%s/node%d.pem", dir, id);
    snprintf(key, sizeof key, "%s/node%d.key", dir, id);
    snprintf(ca, sizeof ca, "%s/ca.pem", dir);
    assert_int_equal(tls_source_open(cert, key, ca, &s->tls, err, sizeof err),
                     0);
    assert_int_equal(peer_init(&s->t, &loop, &s->cfg, s->tls, err, sizeof err),
                     0);
    s->t.data = s;
    s->addr = s->cfg.voters[cluster_find(&s->cfg, (uint64_t)id)].addr;
    assert_int_equal(s->t.init(&s->t, (raft_id)id, s->addr), 0);
    assert_int_equal(s->t.listen(&s->t, on_accept), 0);
}

static void
side_close(Side *s)
{
    s->t.close(&s->t, on_closed);
    assert_true(run_until(&s->closed));
    peer_free(&s->t);
    tls_source_close(s->tls);
}

static void
close_stream(uv_stream_t *s)
{
    uv_close((uv_handle_t *)s, (uv_close_cb)raft_free);
}

/* Writes text on stream s; the write's status once its callback ran. */
static int
write_text(uv_stream_t *s, const char *text)
{
    uv_write_t req;
    uv_buf_t b = uv_buf_init((char *)text, (unsigned)strlen(text));

    write_status = 1;
    assert_int_equal(uv_write(&req, s, &b, 1, on_written), 0);
    for (int i = 0; i < WAIT_MS && write_status == 1; i++) {
        uv_run(&loop, UV_RUN_NOWAIT);
        if (write_status == 1) sleep_ms(1);
    }
    assert_int_not_equal(write_status, 1);
    return write_status;
}

/* Node 1's link to node 2 carries bytes; node 2 goes away; node 1's next
 * write on the link fails (it used to succeed, and the bytes were lost). */
static void
test_link_to_a_gone_peer_fails(void **state)
{
    char spec[128];
    int has_stream = 0;
    (void)state;

    snprintf(spec, sizeof spec, "1@127.0.0.1:%d,2@127.0.0.1:%d", free_port(),
             free_port());
    side_open(1, spec);
    side_open(2, spec);

    struct raft_uv_connect req;
    assert_int_equal(
        sides[0].t.connect(&sides[0].t, &req, 2, sides[1].addr, on_connect), 0);
    for (int i = 0; i < WAIT_MS && connect_status == 1; i++) {
        uv_run(&loop, UV_RUN_NOWAIT);
        sleep_ms(1);
    }
    assert_int_equal(connect_status, 0);
    assert_int_equal(write_text(connected, "ping"), 0);
    for (int i = 0; i < WAIT_MS && ngot < 4; i++) {
        if (sides[1].accepted && !has_stream) {
            has_stream = 1;
            uv_read_start(sides[1].accepted, on_alloc, on_accepted_read);
        }
        uv_run(&loop, UV_RUN_NOWAIT);
        sleep_ms(1);
    }
    assert_int_equal(ngot, 4);
    assert_memory_equal(got, "ping", 4);

    /* node 2's process ends: its Raft streams and transport close */
    close_stream(sides[1].accepted);
    side_close(&sides[1]);

    /* node 1 sees the end (libraft itself reads nothing here) ... */
    uv_read_start(connected, on_alloc, on_out_read);
    for (int i = 0; i < WAIT_MS && out_read == 0; i++) {
        uv_run(&loop, UV_RUN_NOWAIT);
        sleep_ms(1);
    }
    assert_true(out_read < 0);
    /* ... and its next write fails rather than vanish */
    assert_true(write_text(connected, "vote") < 0);

    close_stream(connected);
    side_close(&sides[0]);
}

static int
group_setup(void **state)
{
    (void)state;
    signal(SIGPIPE, SIG_IGN); /* as rockstalkd: EPIPE, not a signal */
    if (access(SCRIPT, X_OK) != 0) {
        fprintf(stderr, "test_peer: run from the repository's root (%s)\n",
                SCRIPT);
        return -1;
    }
    strcpy(dir, "/tmp/test_peer.XXXXXX");
    if (!mkdtemp(dir)) return -1;
    char cmd[256];
    snprintf(cmd, sizeof cmd, SCRIPT " %s 2 >/dev/null", dir);
    int r = system(cmd);
    if (!WIFEXITED(r) || WEXITSTATUS(r) != 0) return -1;
    return uv_loop_init(&loop);
}

static int
group_teardown(void **state)
{
    char cmd[128];
    (void)state;
    uv_run(&loop, UV_RUN_NOWAIT);
    uv_loop_close(&loop);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_link_to_a_gone_peer_fails),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
