/* Unit tests for proxy.c, the loop's TCP byte relay: real sockets on
 * 127.0.0.1 and a real libev loop. The test's own endpoints (the client
 * and the upstream server) run on the same loop as the proxy, as Peers:
 * each sends a position-dependent byte pattern and checks the one it
 * receives, so a lost, repeated or reordered byte is caught. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <ev.h>

#include "cluster/proxy.h"

#define MIB (1024 * 1024)

/* Byte i of the stream with this seed. */
static uint8_t
pat(uint8_t seed, size_t i)
{
    uint32_t x = (uint32_t)i * 2654435761u;
    return (uint8_t)((x >> 24) ^ (x >> 13) ^ seed);
}

/* One test endpoint on the loop. */
typedef struct Peer {
    struct ev_loop *loop;
    int fd;
    ev_io rd, wr;
    size_t to_send, sent; /* pattern tx_seed: bytes to send, sent so far */
    size_t recvd;         /* bytes received, checked against rx_seed */
    uint8_t tx_seed, rx_seed;
    bool paused;         /* do not read for now */
    bool send_after_eof; /* start sending only once EOF was read */
    bool shut_when_sent; /* shutdown(SHUT_WR) once everything is sent */
    bool shut, eof, bad; /* shut down; read EOF; a byte differed */
    int err;             /* errno of a failed recv or send, else 0 */
} Peer;

static void peer_update(Peer *pr);

static void
peer_on_read(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)loop, (void)revents;
    Peer *pr = w->data;
    static uint8_t buf[64 * 1024];
    ssize_t n = recv(pr->fd, buf, sizeof buf, 0);
    if (n < 0 && errno != EAGAIN) pr->err = errno;
    if (n == 0) pr->eof = true;
    for (ssize_t k = 0; k < n; k++)
        if (buf[k] != pat(pr->rx_seed, pr->recvd + (size_t)k)) pr->bad = true;
    if (n > 0) pr->recvd += (size_t)n;
    peer_update(pr);
}

static void
peer_on_write(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)loop, (void)revents;
    Peer *pr = w->data;
    static uint8_t buf[64 * 1024];
    size_t len = pr->to_send - pr->sent;
    if (len > sizeof buf) len = sizeof buf;
    for (size_t k = 0; k < len; k++)
        buf[k] = pat(pr->tx_seed, pr->sent + k);
    ssize_t n = len ? send(pr->fd, buf, len, MSG_NOSIGNAL) : 0;
    if (n < 0 && errno != EAGAIN) pr->err = errno;
    if (n > 0) pr->sent += (size_t)n;
    if (pr->sent == pr->to_send && pr->shut_when_sent && !pr->shut) {
        shutdown(pr->fd, SHUT_WR);
        pr->shut = true;
    }
    peer_update(pr);
}

static void
io_set(struct ev_loop *loop, ev_io *w, bool on)
{
    if (on && !ev_is_active(w))
        ev_io_start(loop, w);
    else if (!on && ev_is_active(w))
        ev_io_stop(loop, w);
}

static void
peer_update(Peer *pr)
{
    bool can_send = !pr->err && (!pr->send_after_eof || pr->eof);
    bool more = pr->sent < pr->to_send || (pr->shut_when_sent && !pr->shut);
    io_set(pr->loop, &pr->rd, !pr->err && !pr->eof && !pr->paused);
    io_set(pr->loop, &pr->wr, can_send && more);
}

/* Starts pr on fd (made non-blocking); the other fields are set before. */
static void
peer_start(Peer *pr, struct ev_loop *loop, int fd)
{
    pr->loop = loop;
    pr->fd = fd;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    ev_io_init(&pr->rd, peer_on_read, fd, EV_READ);
    ev_io_init(&pr->wr, peer_on_write, fd, EV_WRITE);
    pr->rd.data = pr->wr.data = pr;
    peer_update(pr);
}

static void
peer_stop(Peer *pr)
{
    ev_io_stop(pr->loop, &pr->rd);
    ev_io_stop(pr->loop, &pr->wr);
    close(pr->fd);
}

/* A listening socket on 127.0.0.1 (port chosen by the kernel, in *sa). */
static int
listen_local(int backlog, struct sockaddr_in *sa)
{
    socklen_t len = sizeof *sa;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)sa, sizeof *sa), 0);
    assert_int_equal(listen(fd, backlog), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)sa, &len), 0);
    return fd;
}

/* A connected TCP pair on loopback: *a for the test, *b for the proxy. */
static void
tcp_pair(int *a, int *b)
{
    struct sockaddr_in sa;
    int l = listen_local(1, &sa);
    *a = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_int_equal(connect(*a, (struct sockaddr *)&sa, sizeof sa), 0);
    *b = accept4(l, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    assert_true(*b >= 0);
    close(l);
}

/* The upstream server: accepts each connection into the next Peer. */
typedef struct Upstream {
    ev_io w;
    int fd;
    struct sockaddr_in sa;
    Peer *peers;
    int n, accepted;
} Upstream;

static void
up_on_accept(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)revents;
    Upstream *u = w->data;
    int fd = accept4(u->fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) return;
    assert_true(u->accepted < u->n);
    peer_start(&u->peers[u->accepted++], loop, fd);
}

static void
up_start(Upstream *u, struct ev_loop *loop, int backlog, Peer *peers, int n)
{
    u->fd = listen_local(backlog, &u->sa);
    u->peers = peers;
    u->n = n;
    u->accepted = 0;
    ev_io_init(&u->w, up_on_accept, u->fd, EV_READ);
    u->w.data = u;
    ev_io_start(loop, &u->w);
}

static void
up_stop(Upstream *u, struct ev_loop *loop)
{
    ev_io_stop(loop, &u->w);
    close(u->fd);
    for (int i = 0; i < u->accepted; i++)
        peer_stop(&u->peers[i]);
}

static void
on_deadline(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop, (void)revents;
    *(bool *)w->data = true;
}

/* Runs the loop until done(arg) or secs have passed; returns done(arg). */
static bool
run_until(struct ev_loop *loop, bool (*done)(void *), void *arg, double secs)
{
    bool expired = false;
    ev_timer t;
    ev_timer_init(&t, on_deadline, secs, 0.);
    t.data = &expired;
    ev_now_update(loop);
    ev_timer_start(loop, &t);
    while (!(done && done(arg)) && !expired)
        ev_run(loop, EVRUN_ONCE);
    ev_timer_stop(loop, &t);
    return done && done(arg);
}

static void
run_for(struct ev_loop *loop, double secs)
{
    run_until(loop, NULL, NULL, secs);
}

/* What the tests wait for. */
typedef struct Wait {
    ProxySet *ps;
    Peer *cl, *up; /* cl[0..n), up[0..n) */
    int n;
    size_t cl_recvd, up_recvd;
} Wait;

static bool
all_received(void *arg)
{
    Wait *w = arg;
    for (int i = 0; i < w->n; i++)
        if (w->cl[i].recvd < w->cl_recvd || w->up[i].recvd < w->up_recvd)
            return false;
    return true;
}

static bool
all_eof_and_closed(void *arg)
{
    Wait *w = arg;
    for (int i = 0; i < w->n; i++)
        if (!w->cl[i].eof || (w->up && !w->up[i].eof)) return false;
    return w->ps->count == 0;
}

static bool
up_eof(void *arg)
{
    Wait *w = arg;
    return w->up[0].eof;
}

/* 1 MiB each way at once, then both sides half-close: every byte arrives
 * in order, and the pair closes itself once both directions are done. The
 * connect timer no longer runs once connected. */
static void
test_relay_both_ways(void **state)
{
    (void)state;
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    ProxySet ps;
    proxy_set_init(&ps, loop);
    ps.connect_timeout = 0.2;
    Peer cl = {.to_send = MIB, .tx_seed = 1, .rx_seed = 2};
    Peer up = {.to_send = MIB, .tx_seed = 2, .rx_seed = 1};
    Upstream u;
    up_start(&u, loop, 16, &up, 1);
    int a, b;
    tcp_pair(&a, &b);
    peer_start(&cl, loop, a);
    assert_int_equal(proxy_start(&ps, b, &u.sa), 0);
    assert_int_equal(ps.count, 1);
    assert_int_equal(ps.total, 1);

    Wait w = {&ps, &cl, &up, 1, MIB, MIB};
    assert_true(run_until(loop, all_received, &w, 10));
    assert_false(cl.bad || up.bad);
    assert_int_equal(cl.err, 0);
    assert_int_equal(up.err, 0);
    run_for(loop, 0.3);
    assert_int_equal(ps.count, 1);

    cl.shut_when_sent = up.shut_when_sent = true;
    peer_update(&cl);
    peer_update(&up);
    assert_true(run_until(loop, all_eof_and_closed, &w, 5));
    assert_int_equal(cl.recvd, MIB);
    assert_int_equal(up.recvd, MIB);

    peer_stop(&cl);
    up_stop(&u, loop);
    proxy_set_free(&ps);
    ev_loop_destroy(loop);
}

/* The upstream does not read: the client is held back (the proxy stops
 * reading once its 64 KiB buffer is full), and everything arrives once
 * the upstream reads again. */
static void
test_backpressure(void **state)
{
    (void)state;
    enum { TOTAL = 64 * MIB };
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    ProxySet ps;
    proxy_set_init(&ps, loop);
    Peer cl = {.to_send = TOTAL, .tx_seed = 3, .shut_when_sent = true};
    Peer up = {.rx_seed = 3, .paused = true};
    Upstream u;
    up_start(&u, loop, 16, &up, 1);
    int a, b;
    tcp_pair(&a, &b);
    peer_start(&cl, loop, a);
    assert_int_equal(proxy_start(&ps, b, &u.sa), 0);

    run_for(loop, 0.3);
    size_t stalled = cl.sent;
    run_for(loop, 0.2);
    assert_int_equal(cl.sent, stalled);
    assert_true(stalled < TOTAL);
    assert_int_equal(up.recvd, 0);

    up.paused = false;
    peer_update(&up);
    Wait w = {&ps, &cl, &up, 1, 0, 0};
    assert_true(run_until(loop, up_eof, &w, 20));
    assert_int_equal(up.recvd, TOTAL);
    assert_false(up.bad);

    up.shut_when_sent = true;
    peer_update(&up);
    assert_true(run_until(loop, all_eof_and_closed, &w, 5));

    peer_stop(&cl);
    up_stop(&u, loop);
    ev_loop_destroy(loop);
}

/* The client half-closes after its request; the upstream sees EOF after
 * all of it, and only then answers: the answer still reaches the client,
 * then the upstream half-closes too and the pair is gone. */
static void
test_client_half_close(void **state)
{
    (void)state;
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    ProxySet ps;
    proxy_set_init(&ps, loop);
    Peer cl = {
        .to_send = 100000, .tx_seed = 4, .rx_seed = 5, .shut_when_sent = true};
    Peer up = {.to_send = 50000,
               .tx_seed = 5,
               .rx_seed = 4,
               .send_after_eof = true,
               .shut_when_sent = true};
    Upstream u;
    up_start(&u, loop, 16, &up, 1);
    int a, b;
    tcp_pair(&a, &b);
    peer_start(&cl, loop, a);
    assert_int_equal(proxy_start(&ps, b, &u.sa), 0);

    Wait w = {&ps, &cl, &up, 1, 0, 0};
    assert_true(run_until(loop, all_eof_and_closed, &w, 5));
    assert_int_equal(up.recvd, 100000);
    assert_int_equal(cl.recvd, 50000);
    assert_int_equal(up.sent, 50000);
    assert_false(cl.bad || up.bad);
    assert_int_equal(cl.err, 0);

    peer_stop(&cl);
    up_stop(&u, loop);
    ev_loop_destroy(loop);
}

/* Nothing listens on the upstream port: the client is closed at once. */
static void
test_connect_refused(void **state)
{
    (void)state;
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    ProxySet ps;
    proxy_set_init(&ps, loop);
    struct sockaddr_in sa;
    close(listen_local(1, &sa)); /* a port nobody listens on */
    Peer cl = {.to_send = 1000, .tx_seed = 6};
    int a, b;
    tcp_pair(&a, &b);
    peer_start(&cl, loop, a);
    ev_tstamp t0 = ev_time();
    int r = proxy_start(&ps, b, &sa); /* -1 if refused at once */
    assert_int_equal(ps.count, r == 0 ? 1 : 0);

    Wait w = {&ps, &cl, NULL, 1, 0, 0};
    assert_true(run_until(loop, all_eof_and_closed, &w, 3));
    assert_true(ev_time() - t0 < 1.0);
    assert_int_equal(ps.count, 0);
    assert_int_equal(cl.recvd, 0);

    peer_stop(&cl);
    ev_loop_destroy(loop);
}

/* An upstream whose accept queue is full: the filler connection fills a
 * backlog-0 listener (one queued connection), so the proxy's SYN is
 * dropped and its connect stays in progress. Returns the filler's fd. */
static int
fill_backlog(Upstream *u)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&u->sa, sizeof u->sa), 0);
    return fd;
}

/* The upstream never accepts: the pair is closed after connect_timeout. */
static void
test_connect_timeout(void **state)
{
    (void)state;
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    ProxySet ps;
    proxy_set_init(&ps, loop);
    ps.connect_timeout = 0.3;
    Upstream u;
    up_start(&u, loop, 0, NULL, 0);
    ev_io_stop(loop, &u.w); /* accepts nothing */
    int filler = fill_backlog(&u);
    Peer cl = {.to_send = 1000, .tx_seed = 7};
    int a, b;
    tcp_pair(&a, &b);
    peer_start(&cl, loop, a);
    ev_tstamp t0 = ev_time();
    assert_int_equal(proxy_start(&ps, b, &u.sa), 0);

    Wait w = {&ps, &cl, NULL, 1, 0, 0};
    assert_true(run_until(loop, all_eof_and_closed, &w, 3));
    double took = ev_time() - t0;
    assert_true(took >= 0.25 && took < 2.0);

    close(filler);
    peer_stop(&cl);
    up_stop(&u, loop);
    ev_loop_destroy(loop);
}

/* The client's request, sent while the connect is still in progress, is
 * held and delivered once the upstream accepts (after its SYN is
 * retransmitted, about 1 s later). */
static void
test_buffered_before_connect(void **state)
{
    (void)state;
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    ProxySet ps;
    proxy_set_init(&ps, loop);
    Peer up = {.rx_seed = 8};
    Upstream u;
    up_start(&u, loop, 0, &up, 1);
    ev_io_stop(loop, &u.w);
    int filler = fill_backlog(&u);
    Peer cl = {.to_send = 1000, .tx_seed = 8, .shut_when_sent = true};
    int a, b;
    tcp_pair(&a, &b);
    peer_start(&cl, loop, a);
    assert_int_equal(proxy_start(&ps, b, &u.sa), 0);

    run_for(loop, 0.2);
    assert_int_equal(cl.sent, 1000);
    assert_int_equal(ps.count, 1);
    /* Take the filler off the queue, close it, and serve the proxy. */
    close(accept4(u.fd, NULL, NULL, SOCK_CLOEXEC));
    close(filler);
    ev_io_start(loop, &u.w);

    Wait w = {&ps, &cl, &up, 1, 0, 0};
    assert_true(run_until(loop, up_eof, &w, 4));
    assert_int_equal(up.recvd, 1000);
    assert_false(up.bad);
    up.shut_when_sent = true;
    peer_update(&up);
    assert_true(run_until(loop, all_eof_and_closed, &w, 3));

    peer_stop(&cl);
    up_stop(&u, loop);
    ev_loop_destroy(loop);
}

/* proxy_close_all ends every open pair at once: each client and each
 * upstream connection sees EOF, and nothing is left (ASan checks leaks). */
static void
test_close_all(void **state)
{
    (void)state;
    enum { N = 3 };
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    ProxySet ps;
    proxy_set_init(&ps, loop);
    Peer cl[N], up[N];
    Upstream u;
    up_start(&u, loop, 16, up, N);
    for (int i = 0; i < N; i++) {
        cl[i] = (Peer){.to_send = 1000, .tx_seed = (uint8_t)i};
        up[i] = (Peer){.rx_seed = (uint8_t)i};
    }
    for (int i = 0; i < N; i++) {
        int a, b;
        tcp_pair(&a, &b);
        peer_start(&cl[i], loop, a);
        assert_int_equal(proxy_start(&ps, b, &u.sa), 0);
        /* One at a time, so that up[i] is cl[i]'s upstream. */
        Wait one = {&ps, &cl[i], &up[i], 1, 0, 1000};
        assert_true(run_until(loop, all_received, &one, 5));
    }
    assert_int_equal(ps.count, N);
    assert_int_equal(ps.total, N);

    proxy_close_all(&ps);
    assert_int_equal(ps.count, 0);
    assert_null(ps.head);
    Wait w = {&ps, cl, up, N, 0, 0};
    assert_true(run_until(loop, all_eof_and_closed, &w, 3));
    for (int i = 0; i < N; i++)
        assert_false(up[i].bad);

    for (int i = 0; i < N; i++)
        peer_stop(&cl[i]);
    up_stop(&u, loop);
    proxy_set_free(&ps);
    ev_loop_destroy(loop);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_relay_both_ways),
        cmocka_unit_test(test_backpressure),
        cmocka_unit_test(test_client_half_close),
        cmocka_unit_test(test_connect_refused),
        cmocka_unit_test(test_connect_timeout),
        cmocka_unit_test(test_buffered_before_connect),
        cmocka_unit_test(test_close_all),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
