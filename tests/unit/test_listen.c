/* Unit tests for net/listen.c (the --listen URLs, -l/-p, bound addresses,
 * loopback, the step-down's names) and the listener parts of net/net.c
 * (unix sockets: mode, live, stale and foreign files, removal; the
 * hand-over of sockets to an exec and their inheritance, in a child). */
#include <setjmp.h>
#include <stdarg.h>
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
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "net/listen.h"
#include "net/net.h"

static void
parses(const char *url, ListenKind kind, const char *host, int port,
       const char *path)
{
    ListenAddr a;
    char err[512] = "";

    if (listen_parse(url, &a, err, sizeof err) != 0)
        fail_msg("%s refused: %s", url, err);
    assert_int_equal(a.kind, kind);
    assert_string_equal(a.host, host);
    assert_int_equal(a.port, port);
    assert_string_equal(a.path, path);
}

static void
test_parse_good(void **state)
{
    (void)state;
    parses("tcp://127.0.0.1:11300", LISTEN_TCP, "127.0.0.1", 11300, "");
    parses("tls://[::1]:1", LISTEN_TLS, "::1", 1, "");
    parses("tcp://[::]:65535", LISTEN_TCP, "::", 65535, "");
    parses("tcp://0.0.0.0:11300", LISTEN_TCP, "0.0.0.0", 11300, "");
    parses("tcp://queue-1.example.org:80", LISTEN_TCP, "queue-1.example.org",
           80, "");
    parses("tcp://[::ffff:127.0.0.1]:9", LISTEN_TCP, "::ffff:127.0.0.1", 9, "");
    parses("unix:/run/rockstalkd.sock", LISTEN_UNIX, "", 0,
           "/run/rockstalkd.sock");
    parses("unix:rel.sock", LISTEN_UNIX, "", 0, "rel.sock");
    char url[200];
    snprintf(url, sizeof url, "unix:/%0106d", 0); /* 107 bytes: the most */
    parses(url, LISTEN_UNIX, "", 0, url + 5);
}

/* url is refused, and the message names it and says why. */
static void
refused(const char *url, const char *why)
{
    ListenAddr a;
    char err[512] = "";

    if (listen_parse(url, &a, err, sizeof err) != -1)
        fail_msg("%s accepted", url);
    if (!strstr(err, why)) fail_msg("%s: \"%s\" lacks \"%s\"", url, err, why);
    if (strlen(url) < 200 && !strstr(err, url))
        fail_msg("%s: \"%s\" does not name the URL", url, err);
}

static void
test_parse_bad(void **state)
{
    (void)state;
    refused("tcp://127.0.0.1", "no port");
    refused("tcp://127.0.0.1:", "no port");
    refused("tcp://[::1]", "no port");
    refused("tcp://127.0.0.1:0", "port 0");
    refused("tcp://127.0.0.1:65536", "beyond 65535");
    refused("tcp://127.0.0.1:99999999999999999999", "beyond 65535");
    refused("tcp://127.0.0.1:-1", "not a number");
    refused("tcp://127.0.0.1:x", "not a number");
    refused("http://127.0.0.1:80", "unknown scheme");
    refused("TCP://127.0.0.1:80", "unknown scheme");
    refused("127.0.0.1:11300", "unknown scheme");
    refused("", "unknown scheme");
    refused("tcp:/127.0.0.1:1", "unknown scheme");
    refused("tcp://[::1:11300", "unterminated");
    refused("tcp://[nothex]:1", "not an IPv6 address");
    refused("tcp://[127.0.0.1]:1", "not an IPv6 address");
    refused("tcp://::1:11300", "brackets");
    refused("tcp://:11300", "no host");
    refused("tcp://[]:11300", "no host");
    refused("tcp://h/x:1", "not a name or an IP");
    refused("tcp://user@h:1", "not a name or an IP");
    refused("unix:", "empty path");
    refused("tcp://127.0.0.1:11300/", "junk after the port");
    refused("tcp://127.0.0.1:11300x", "junk after the port");
    refused("tcp://127.0.0.1:11300 ", "junk after the port");
    refused("tcp://[::1]x:1", "junk after the host");
    char url[400];
    snprintf(url, sizeof url, "unix:/%0107d", 0); /* 108 bytes: one too many */
    refused(url, "longer than 107");
    memset(url, 'a', 300);
    memcpy(url, "tcp://", 6);
    strcpy(url + 300, ":1");
    refused(url, "longer than 280"); /* and the message stays readable */
    memset(url, 'a', 270);
    memcpy(url, "tcp://", 6);
    strcpy(url + 270, ":1");
    refused(url, "host name too long");
}

static void
test_unprintable_url_shown_safely(void **state)
{
    (void)state;
    ListenAddr a;
    char err[512];

    assert_int_equal(listen_parse("tcp://\x1b[31m:1", &a, err, sizeof err), -1);
    assert_null(strchr(err, '\x1b'));
    assert_non_null(strstr(err, "tcp://?[31m:1"));
}

static void
test_from_flags(void **state)
{
    (void)state;
    ListenAddr a;
    char err[512], url[LISTEN_URL_MAX];

    assert_int_equal(listen_from_flags(NULL, 11300, &a, err, sizeof err), 0);
    listen_format(&a, url, sizeof url);
    assert_string_equal(url, "tcp://0.0.0.0:11300");
    assert_int_equal(listen_from_flags("::1", 0, &a, err, sizeof err), 0);
    listen_format(&a, url, sizeof url);
    assert_string_equal(url, "tcp://[::1]:0"); /* -p 0: any free port */
    assert_int_equal(listen_from_flags("[::1]", 5, &a, err, sizeof err), 0);
    assert_string_equal(a.host, "::1");
    assert_int_equal(listen_from_flags("unix:/tmp/x", 5, &a, err, sizeof err),
                     0);
    assert_int_equal(a.kind, LISTEN_UNIX);
    assert_string_equal(a.path, "/tmp/x");
    assert_int_equal(listen_from_flags("unix:", 5, &a, err, sizeof err), -1);
    assert_non_null(strstr(err, "-l 'unix:'"));
    assert_int_equal(listen_from_flags("", 5, &a, err, sizeof err), -1);
}

static void
test_format_round_trip(void **state)
{
    (void)state;
    const char *urls[] = {"tcp://127.0.0.1:11300", "tls://[::1]:443",
                          "unix:/run/x.sock", "tcp://host.example:1"};
    for (size_t i = 0; i < sizeof urls / sizeof urls[0]; i++) {
        ListenAddr a;
        char err[256], out[LISTEN_URL_MAX];
        assert_int_equal(listen_parse(urls[i], &a, err, sizeof err), 0);
        listen_format(&a, out, sizeof out);
        assert_string_equal(out, urls[i]);
    }
}

static int
loopback(const char *url)
{
    ListenAddr a;
    char err[256];

    if (listen_parse(url, &a, err, sizeof err) < 0) fail_msg("%s", err);
    return listen_is_loopback(&a);
}

static void
test_loopback(void **state)
{
    (void)state;
    assert_true(loopback("tcp://127.0.0.1:1"));
    assert_true(loopback("tcp://127.255.0.9:1"));
    assert_true(loopback("tls://[::1]:1"));
    assert_true(loopback("tcp://[::ffff:127.0.0.1]:1"));
    assert_true(loopback("unix:/x"));
    assert_false(loopback("tcp://0.0.0.0:1"));
    assert_false(loopback("tcp://[::]:1"));
    assert_false(loopback("tcp://10.0.0.1:1"));
    assert_false(loopback("tcp://128.0.0.1:1"));
    assert_false(loopback("tcp://[::2]:1"));
    assert_false(loopback("tcp://[::ffff:10.0.0.1]:1"));
    assert_false(loopback("tcp://localhost:1")); /* names: not trusted */
}

static void
test_from_sockaddr(void **state)
{
    (void)state;
    ListenAddr a;
    struct sockaddr_in v4 = {.sin_family = AF_INET, .sin_port = htons(7)};
    struct sockaddr_in6 v6 = {.sin6_family = AF_INET6, .sin6_port = htons(8)};
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    socklen_t off = offsetof(struct sockaddr_un, sun_path);

    inet_pton(AF_INET, "127.0.0.2", &v4.sin_addr);
    assert_int_equal(
        listen_from_sockaddr((struct sockaddr *)&v4, sizeof v4, LISTEN_TLS, &a),
        0);
    assert_int_equal(a.kind, LISTEN_TLS);
    assert_string_equal(a.host, "127.0.0.2");
    assert_int_equal(a.port, 7);
    inet_pton(AF_INET6, "::1", &v6.sin6_addr);
    assert_int_equal(
        listen_from_sockaddr((struct sockaddr *)&v6, sizeof v6, LISTEN_TCP, &a),
        0);
    assert_string_equal(a.host, "::1");
    assert_int_equal(a.port, 8);
    assert_true(listen_is_loopback(&a));
    /* a TCP address is not a unix listener, nor the other way round */
    assert_int_equal(listen_from_sockaddr((struct sockaddr *)&v4, sizeof v4,
                                          LISTEN_UNIX, &a),
                     -1);
    strcpy(un.sun_path, "/run/q.sock");
    socklen_t len = off + (socklen_t)strlen(un.sun_path) + 1;
    assert_int_equal(
        listen_from_sockaddr((struct sockaddr *)&un, len, LISTEN_TCP, &a), -1);
    assert_int_equal(
        listen_from_sockaddr((struct sockaddr *)&un, len, LISTEN_UNIX, &a), 0);
    assert_string_equal(a.path, "/run/q.sock");
    /* abstract: "@name"; unnamed: refused */
    memcpy(un.sun_path, "\0ab\x01", 4);
    assert_int_equal(
        listen_from_sockaddr((struct sockaddr *)&un, off + 4, LISTEN_UNIX, &a),
        0);
    assert_string_equal(a.path, "@ab?");
    assert_int_equal(
        listen_from_sockaddr((struct sockaddr *)&un, off, LISTEN_UNIX, &a), -1);
    /* a full sun_path without its NUL is one byte too long */
    memset(un.sun_path, 'p', sizeof un.sun_path);
    assert_int_equal(listen_from_sockaddr((struct sockaddr *)&un, sizeof un,
                                          LISTEN_UNIX, &a),
                     -1);
}

static void
test_same_and_names(void **state)
{
    (void)state;
    ListenAddr a, b;
    char err[256];
    ListenKind k;
    int owned;

    listen_parse("tcp://127.0.0.1:5", &a, err, sizeof err);
    listen_parse("tls://127.0.0.1:5", &b, err, sizeof err);
    assert_true(listen_same(&a, &b)); /* one port */
    listen_parse("tcp://127.0.0.1:6", &b, err, sizeof err);
    assert_false(listen_same(&a, &b));
    listen_parse("unix:/a", &a, err, sizeof err);
    listen_parse("unix:/a", &b, err, sizeof err);
    assert_true(listen_same(&a, &b));
    listen_parse("unix:/b", &b, err, sizeof err);
    assert_false(listen_same(&a, &b));
    const ListenKind kinds[] = {LISTEN_TCP, LISTEN_TLS, LISTEN_UNIX};
    for (int i = 0; i < 3; i++)
        for (int own = 0; own < 2; own++) {
            const char *name = listen_handover_name(kinds[i], own);
            assert_null(strchr(name, ':')); /* LISTEN_FDNAMES' separator */
            assert_int_equal(listen_handover_parse(name, &k, &owned), 1);
            assert_int_equal(k, kinds[i]);
            assert_int_equal(owned, kinds[i] == LISTEN_UNIX && own);
        }
    assert_int_equal(listen_handover_parse("tls", &k, &owned), 0);
    assert_int_equal(listen_handover_parse("", &k, &owned), 0);
    assert_int_equal(listen_handover_parse("rockstalkd-", &k, &owned), 0);
}

/* A fresh directory for socket files; its path in dir (64 bytes). */
static void
tmpdir(char *dir)
{
    strcpy(dir, "/tmp/test_listen.XXXXXX");
    assert_non_null(mkdtemp(dir));
}

static int
unix_listen(const char *dir, const char *name, NetFileId *id, char *err,
            size_t errcap)
{
    ListenAddr a = {.kind = LISTEN_UNIX};
    snprintf(a.path, sizeof a.path, "%s/%s", dir, name);
    return net_listen_addr(&a, id, err, errcap);
}

static int
unix_connect(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    strcpy(sa.sun_path, path);
    int r = connect(fd, (struct sockaddr *)&sa, sizeof sa);
    close(fd);
    return r;
}

static void
test_unix_socket_lifecycle(void **state)
{
    (void)state;
    char dir[64], path[128], err[512];
    NetFileId id, id2;
    struct stat st;

    tmpdir(dir);
    snprintf(path, sizeof path, "%s/s", dir);
    mode_t old = umask(0); /* the mode must not follow a lax umask */
    int fd = unix_listen(dir, "s", &id, err, sizeof err);
    umask(old);
    assert_true(fd >= 0);
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    assert_int_equal(st.st_mode & 0777, NET_UNIX_MODE);
    assert_int_equal(st.st_ino, id.ino);
    assert_int_equal(unix_connect(path), 0);
    /* a live server's socket is refused and left alone */
    assert_int_equal(unix_listen(dir, "s", &id2, err, sizeof err), -1);
    assert_non_null(strstr(err, "a server is listening"));
    assert_non_null(strstr(err, path));
    assert_int_equal(unix_connect(path), 0);
    /* once it is gone, its file is stale and replaced */
    close(fd);
    assert_int_equal(unix_connect(path), -1);
    assert_int_equal(errno, ECONNREFUSED);
    fd = unix_listen(dir, "s", &id2, err, sizeof err);
    assert_true(fd >= 0);
    /* (the file system may give the new file the old inode number) */
    assert_true(id2.ino != id.ino || id2.btime_s != id.btime_s ||
                id2.btime_ns != id.btime_ns);
    assert_int_equal(unix_connect(path), 0);
    /* the old identity does not remove the new file; its own does */
    assert_int_equal(net_unlink_socket(path, &id), -1);
    assert_int_equal(errno, ESTALE);
    assert_int_equal(access(path, F_OK), 0);
    assert_int_equal(net_unlink_socket(path, &id2), 0);
    assert_int_equal(access(path, F_OK), -1);
    assert_int_equal(net_unlink_socket(path, &id2), -1);
    close(fd);
    rmdir(dir);
}

static void
test_unix_path_not_a_socket(void **state)
{
    (void)state;
    char dir[64], path[128], err[512];
    NetFileId id = {0};

    tmpdir(dir);
    snprintf(path, sizeof path, "%s/f", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("precious", f);
    fclose(f);
    assert_int_equal(unix_listen(dir, "f", &id, err, sizeof err), -1);
    assert_non_null(strstr(err, "not a socket"));
    struct stat st;
    assert_int_equal(stat(path, &st), 0); /* still there, untouched */
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_size, 8);
    /* net_unlink_socket never removes a regular file either */
    assert_int_equal(net_socket_file(path, &id), -1);
    assert_int_equal(errno, EINVAL);
    id.dev = st.st_dev;
    id.ino = st.st_ino;
    assert_int_equal(net_unlink_socket(path, &id), -1);
    assert_int_equal(access(path, F_OK), 0);
    unlink(path);
    /* nor a directory */
    assert_int_equal(mkdir(path, 0700), 0);
    assert_int_equal(unix_listen(dir, "f", &id, err, sizeof err), -1);
    assert_non_null(strstr(err, "not a socket"));
    rmdir(path);
    rmdir(dir);
}

static int
tcp_listener(void)
{
    char err[256];
    int fd = net_listen("127.0.0.1", 0, err, sizeof err);
    assert_true(fd >= 0);
    return fd;
}

static int
port_of(int fd)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &len);
    return ntohs(a.sin_port);
}

/* In a child (it rearranges descriptors 3 and up): hands fds over and
 * takes them back as the exec'd process would; exit status 0 if all is as
 * expected, else the number of the failed check. */
static int
child_hand_over(const int *fds, int n, const int *ports)
{
    const char *names[] = {"rockstalkd-tcp", "tls", "rockstalkd-unix"};
    NetInherited in[4];
    char err[256];

    if (net_hand_over(fds, names, n) < 0) return 1;
    if (atol(getenv("LISTEN_PID")) != (long)getpid()) return 2;
    if (n == 3 && strcmp(getenv("LISTEN_FDNAMES"),
                         "rockstalkd-tcp:tls:rockstalkd-unix") != 0)
        return 3;
    for (int i = 0; i < n; i++)
        if (fcntl(3 + i, F_GETFD) != 0) return 4; /* kept across exec */
    int got = net_inherited(in, 4, err, sizeof err);
    if (got != n) return 5;
    for (int i = 0; i < n; i++) {
        if (in[i].fd != 3 + i || strcmp(in[i].name, names[i]) != 0) return 6;
        if (!(fcntl(3 + i, F_GETFD) & FD_CLOEXEC)) return 7;
        if (!(fcntl(3 + i, F_GETFL) & O_NONBLOCK)) return 8;
        if (ports[i] && port_of(3 + i) != ports[i]) return 9;
    }
    if (getenv("LISTEN_FDS") || getenv("LISTEN_PID")) return 10;
    if (net_inherited(in, 4, err, sizeof err) != 0) return 11; /* cleared */
    return 0;
}

static int
run_child(int (*fn)(const int *, int, const int *), const int *fds, int n,
          const int *ports)
{
    int status;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) _exit(fn(fds, n, ports));
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static void
test_hand_over_and_inherit(void **state)
{
    (void)state;
    char dir[64], err[512];
    NetFileId id;
    /* the sockets sit on 3.. already in some order: the moves must not
     * overwrite one not moved yet */
    int fds[3], ports[3] = {0};
    fds[1] = tcp_listener();
    fds[0] = tcp_listener();
    tmpdir(dir);
    fds[2] = unix_listen(dir, "h", &id, err, sizeof err);
    assert_true(fds[2] >= 0);
    ports[0] = port_of(fds[0]);
    ports[1] = port_of(fds[1]);
    assert_int_equal(run_child(child_hand_over, fds, 3, ports), 0);
    for (int i = 0; i < 3; i++)
        close(fds[i]);
    char path[128];
    snprintf(path, sizeof path, "%s/h", dir);
    unlink(path);
    rmdir(dir);
}

static int
child_too_many(const int *fds, int n, const int *ports)
{
    NetInherited in[1];
    char err[256];
    (void)ports;
    if (net_hand_over(fds, (const char *const[]){"a", "b"}, n) < 0) return 1;
    if (net_inherited(in, 1, err, sizeof err) != -1) return 2;
    return strstr(err, "at most 1") ? 0 : 3;
}

static int
child_not_listening(const int *fds, int n, const int *ports)
{
    NetInherited in[2];
    char err[256];
    (void)ports;
    if (net_hand_over(fds, (const char *const[]){"a", "b"}, n) < 0) return 1;
    if (net_inherited(in, 2, err, sizeof err) != -1) return 2;
    return strstr(err, "fd 4") && strstr(err, "not a listening") ? 0 : 3;
}

static void
test_inherit_refusals(void **state)
{
    (void)state;
    int fds[2];
    fds[0] = tcp_listener();
    fds[1] = tcp_listener();
    assert_int_equal(run_child(child_too_many, fds, 2, NULL), 0);
    close(fds[1]);
    fds[1] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0); /* no listen */
    assert_int_equal(run_child(child_not_listening, fds, 2, NULL), 0);
    close(fds[0]);
    close(fds[1]);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_good),
        cmocka_unit_test(test_parse_bad),
        cmocka_unit_test(test_unprintable_url_shown_safely),
        cmocka_unit_test(test_from_flags),
        cmocka_unit_test(test_format_round_trip),
        cmocka_unit_test(test_loopback),
        cmocka_unit_test(test_from_sockaddr),
        cmocka_unit_test(test_same_and_names),
        cmocka_unit_test(test_unix_socket_lifecycle),
        cmocka_unit_test(test_unix_path_not_a_socket),
        cmocka_unit_test(test_hand_over_and_inherit),
        cmocka_unit_test(test_inherit_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
