/* Unit tests for net.c: dead-peer detection (net_keepalive) read back with
 * getsockopt from live sockets, both ends of a loopback TCP connection
 * (an accepted one, as the daemon's clients are, and a connected one, as
 * a relay's or a state fetch's), and its refusal on a unix socket. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "net/net.h"

static int
opt(int fd, int level, int name)
{
    int v = -1;
    socklen_t len = sizeof v;

    assert_int_equal(getsockopt(fd, level, name, &v, &len), 0);
    return v;
}

static void
assert_keepalive(int fd)
{
    assert_int_equal(opt(fd, SOL_SOCKET, SO_KEEPALIVE), 1);
    assert_int_equal(opt(fd, IPPROTO_TCP, TCP_KEEPIDLE), NET_KEEPIDLE_S);
    assert_int_equal(opt(fd, IPPROTO_TCP, TCP_KEEPINTVL), NET_KEEPINTVL_S);
    assert_int_equal(opt(fd, IPPROTO_TCP, TCP_KEEPCNT), NET_KEEPCNT);
    assert_int_equal(opt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT),
                     NET_USER_TIMEOUT_MS);
}

/* A listening socket on 127.0.0.1 (net_listen, port 0), a client
 * connected to it and the accepted end. */
static void
tcp_pair(int *lfd, int *cfd, int *afd)
{
    char err[200];
    struct sockaddr_in a;
    socklen_t len = sizeof a;

    *lfd = net_listen("127.0.0.1", 0, err, sizeof err);
    assert_true(*lfd >= 0);
    assert_int_equal(getsockname(*lfd, (struct sockaddr *)&a, &len), 0);
    *cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(*cfd >= 0);
    assert_int_equal(connect(*cfd, (struct sockaddr *)&a, sizeof a), 0);
    do
        *afd = accept4(*lfd, NULL, NULL, SOCK_CLOEXEC);
    while (*afd < 0 && errno == EAGAIN);
    assert_true(*afd >= 0);
}

static void
test_keepalive_on_live_sockets(void **state)
{
    (void)state;
    int lfd, cfd, afd;

    tcp_pair(&lfd, &cfd, &afd);
    /* off by default: the test would pass without net_keepalive if not */
    assert_int_equal(opt(afd, SOL_SOCKET, SO_KEEPALIVE), 0);
    assert_int_equal(opt(afd, IPPROTO_TCP, TCP_USER_TIMEOUT), 0);
    assert_int_equal(net_keepalive(afd), 0);
    assert_keepalive(afd);
    assert_int_equal(net_keepalive(cfd), 0);
    assert_keepalive(cfd);
    /* the connection still carries bytes */
    assert_int_equal(send(cfd, "ping", 4, 0), 4);
    char buf[8];
    assert_int_equal(recv(afd, buf, sizeof buf, 0), 4);
    close(afd);
    close(cfd);
    close(lfd);
}

/* Before connect, as proxy.c and the state fetch set it. */
static void
test_keepalive_before_connect(void **state)
{
    (void)state;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    assert_true(fd >= 0);
    assert_int_equal(net_keepalive(fd), 0);
    assert_keepalive(fd);
    close(fd);
}

static void
test_keepalive_refused_on_unix_socket(void **state)
{
    (void)state;
    int sv[2];

    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    errno = 0;
    assert_int_equal(net_keepalive(sv[0]), -1);
    assert_int_not_equal(errno, 0);
    close(sv[0]);
    close(sv[1]);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keepalive_on_live_sockets),
        cmocka_unit_test(test_keepalive_before_connect),
        cmocka_unit_test(test_keepalive_refused_on_unix_socket),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
