/* Unit tests for cluster.c: the --cluster/--node-id parser, the CLUSTER
 * identity file of a data directory, and the refusal of a voter set that
 * relays clients to this node's own listening socket. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cmocka.h>

#include "cluster/cluster.h"

#define THREE "1@127.0.0.1:7001,2@127.0.0.1:7002,3@127.0.0.1:7003"

static void
test_parse_three_and_five(void **state)
{
    (void)state;
    ClusterConfig c;
    char err[200], spec[200];

    assert_int_equal(cluster_parse(THREE, "2", &c, err, sizeof err), 0);
    assert_int_equal(c.n, 3);
    assert_int_equal(c.self_id, 2);
    assert_int_equal(c.voters[1].id, 2);
    assert_string_equal(c.voters[1].addr, "127.0.0.1:7002");
    assert_int_equal(cluster_find(&c, 3), 2);
    assert_int_equal(cluster_find(&c, 4), -1);

    /* Order given does not matter: voters come back sorted by id. */
    assert_int_equal(cluster_parse("5@10.0.0.5:1,3@10.0.0.3:1,4@10.0.0.4:1,"
                                   "1@10.0.0.1:1,2@10.0.0.2:65535",
                                   "4", &c, err, sizeof err),
                     0);
    assert_int_equal(c.n, 5);
    for (int i = 0; i < 5; i++)
        assert_int_equal(c.voters[i].id, (uint64_t)i + 1);
    cluster_spec(&c, spec, sizeof spec);
    assert_string_equal(spec, "1@10.0.0.1:1,2@10.0.0.2:65535,3@10.0.0.3:1,"
                              "4@10.0.0.4:1,5@10.0.0.5:1");
}

/* A host name is resolved when parsed: the voter's address, and so the
 * identity, is the IPv4 address it resolved to. */
static void
test_parse_host_names(void **state)
{
    (void)state;
    ClusterConfig c;
    char err[200] = "", spec[200];

    assert_int_equal(cluster_parse("1@localhost:7001,2@127.0.0.1:7002,"
                                   "3@localhost:7003/11303",
                                   "1", &c, err, sizeof err),
                     0);
    assert_string_equal(c.voters[0].addr, "127.0.0.1:7001");
    assert_string_equal(c.voters[2].addr, "127.0.0.1:7003");
    assert_int_equal(c.voters[2].client_port, 11303);
    cluster_spec(&c, spec, sizeof spec);
    assert_string_equal(spec, "1@127.0.0.1:7001,2@127.0.0.1:7002,"
                              "3@127.0.0.1:7003");
    /* the same address under two spellings is one address given twice */
    assert_int_equal(cluster_parse("1@localhost:7001,2@127.0.0.1:7001,"
                                   "3@127.0.0.1:7003",
                                   "1", &c, err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "given twice"));
}

/* "/CLIENTPORT" after an item gives that voter's client port; without it,
 * 0 (the node's own -p). It is not part of the identity. */
static void
test_parse_client_ports(void **state)
{
    (void)state;
    ClusterConfig c;
    char err[200], spec[200];

    assert_int_equal(cluster_parse("3@127.0.0.1:7003/11303,1@127.0.0.1:7001/"
                                   "11301,2@127.0.0.1:7002",
                                   "1", &c, err, sizeof err),
                     0);
    assert_int_equal(c.voters[0].client_port, 11301);
    assert_int_equal(c.voters[1].client_port, 0);
    assert_int_equal(c.voters[2].client_port, 11303);
    assert_string_equal(c.voters[2].addr, "127.0.0.1:7003");
    cluster_spec(&c, spec, sizeof spec);
    assert_string_equal(spec, THREE);
    assert_int_equal(cluster_parse("1@127.0.0.1:7001/0,2@127.0.0.1:7002,"
                                   "3@127.0.0.1:7003",
                                   "1", &c, err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "CLIENTPORT"));
    assert_int_equal(cluster_parse("1@127.0.0.1:7001/,2@127.0.0.1:7002,"
                                   "3@127.0.0.1:7003",
                                   "1", &c, err, sizeof err),
                     -1);
    assert_int_equal(cluster_parse("1@127.0.0.1:7001/70000,2@127.0.0.1:7002,"
                                   "3@127.0.0.1:7003",
                                   "1", &c, err, sizeof err),
                     -1);
}

/* Each bad input is refused with a message naming what is wrong. */
static void
test_parse_refuses(void **state)
{
    (void)state;
    static const struct {
        const char *cluster, *node, *msg;
    } bad[] = {
        {"", "1", "empty"},
        {"1@127.0.0.1:1,2@127.0.0.1:2,3@127.0.0.1:3,4@127.0.0.1:4,"
         "5@127.0.0.1:5,6@127.0.0.1:6",
         "1", "more than 5"},
        {"1@127.0.0.1:1,1@127.0.0.1:2,3@127.0.0.1:3", "1", "id 1 given twice"},
        {"1@127.0.0.1:1,2@127.0.0.1:1,3@127.0.0.1:3", "1",
         "127.0.0.1:1 given twice"},
        {THREE, "4", "--node-id 4 is not"},
        {THREE, "0", "--node-id"},
        {THREE, "x", "--node-id"},
        {THREE, "", "--node-id"},
        {THREE, "2 ", "--node-id"},
        {"0@127.0.0.1:1,2@127.0.0.1:2,3@127.0.0.1:3", "2", "voter 1"},
        {"65536@127.0.0.1:1,2@127.0.0.1:2,3@127.0.0.1:3", "2", "ID"},
        {"a@127.0.0.1:1,2@127.0.0.1:2,3@127.0.0.1:3", "2", "ID"},
        {"1127.0.0.1:1,2@127.0.0.1:2,3@127.0.0.1:3", "2", "ID@HOST:PORT"},
        {"1@127.0.0.1,2@127.0.0.1:2,3@127.0.0.1:3", "2", "no :PORT"},
        {"1@127.0.0.1:0,2@127.0.0.1:2,3@127.0.0.1:3", "2", "PORT"},
        {"1@127.0.0.1:65536,2@127.0.0.1:2,3@127.0.0.1:3", "2", "PORT"},
        {"1@127.0.0.1:1x,2@127.0.0.1:2,3@127.0.0.1:3", "2", "PORT"},
        {"1@no-such-host.invalid:1,2@127.0.0.1:2,3@127.0.0.1:3", "2", "IPv4"},
        {"1@[::1]:1,2@127.0.0.1:2,3@127.0.0.1:3", "2", "IPv4"},
        {"1@:1,2@127.0.0.1:2,3@127.0.0.1:3", "2", "IPv4"},
        {"1@127.0.0.1:1,,3@127.0.0.1:3", "2", "empty voter 2"},
        {"1@127.0.0.1:1,2@127.0.0.1:2,3@127.0.0.1:3,", "2", "empty voter 4"},
        {" 1@127.0.0.1:1,2@127.0.0.1:2,3@127.0.0.1:3", "2", "ID"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ClusterConfig c;
        char err[200] = "";
        int rc =
            cluster_parse(bad[i].cluster, bad[i].node, &c, err, sizeof err);
        if (rc != -1 || !strstr(err, bad[i].msg))
            fail_msg("case %zu (%s / %s): rc %d, err \"%s\", want \"%s\"", i,
                     bad[i].cluster, bad[i].node, rc, err, bad[i].msg);
    }
}

static void
test_format_roundtrip(void **state)
{
    (void)state;
    ClusterConfig c, d;
    char err[200], text[CLUSTER_TEXT_MAX];

    assert_int_equal(
        cluster_parse("3@127.0.0.1:7003,1@127.0.0.1:7001,2@127.0.0.1:7002", "3",
                      &c, err, sizeof err),
        0);
    size_t n = cluster_format(&c, text, sizeof text);
    assert_string_equal(text, "rockstalk-cluster 1\nnode 3\n"
                              "voter 1 127.0.0.1:7001\n"
                              "voter 2 127.0.0.1:7002\n"
                              "voter 3 127.0.0.1:7003\n");
    assert_int_equal(cluster_identity_parse(text, n, &d, err, sizeof err), 0);
    assert_memory_equal(&c, &d, sizeof c);

    /* Truncated, newer or damaged files are refused. */
    assert_int_equal(cluster_identity_parse(text, n - 1, &d, err, sizeof err),
                     -1);
    assert_int_equal(cluster_identity_parse("rockstalk-cluster 3\n", 20, &d,
                                            err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "version 3"));
    assert_int_equal(cluster_identity_parse("hello\n", 6, &d, err, sizeof err),
                     -1);
    /* A configuration grown to four members (online) is a record too. */
    const char *four = "rockstalk-cluster 1\nnode 1\nvoter 1 127.0.0.1:1\n"
                       "voter 2 127.0.0.1:2\nvoter 3 127.0.0.1:3\n"
                       "voter 4 127.0.0.1:4\n";
    assert_int_equal(
        cluster_identity_parse(four, strlen(four), &d, err, sizeof err), 0);
    assert_int_equal(d.n, 4);
    assert_int_equal(d.state, CLUSTER_MEMBER);
    /* Version 2: a state line; an address with a client port. */
    const char *v2 = "rockstalk-cluster 2\nnode 4\nstate joining\n"
                     "voter 1 127.0.0.1:1\nvoter 4 127.0.0.1:4/11304\n";
    assert_int_equal(
        cluster_identity_parse(v2, strlen(v2), &d, err, sizeof err), 0);
    assert_int_equal(d.state, CLUSTER_JOINING);
    assert_int_equal(d.voters[1].client_port, 11304);
    n = cluster_format(&d, text, sizeof text);
    assert_string_equal(text, "rockstalk-cluster 2\nnode 4\nstate joining\n"
                              "voter 1 127.0.0.1:1\nvoter 4 127.0.0.1:4\n");
    const char *bad = "rockstalk-cluster 2\nnode 4\nstate gone\n"
                      "voter 4 127.0.0.1:4\n";
    assert_int_equal(
        cluster_identity_parse(bad, strlen(bad), &d, err, sizeof err), -1);
    assert_non_null(strstr(err, "state"));
    const char *v1port = "rockstalk-cluster 1\nnode 1\n"
                         "voter 1 127.0.0.1:1/5\n";
    assert_int_equal(
        cluster_identity_parse(v1port, strlen(v1port), &d, err, sizeof err),
        -1);
}

/* A new cluster starts with 3 or 5 voters; a joining node's list is the
 * members and itself; a directory recorded as removed refuses to start;
 * a record of a grown configuration matches the grown --cluster. */
static void
test_identity_membership(void **state)
{
    (void)state;
    char tmpl[] = "/tmp/rockstalk-cluster-XXXXXX";
    char dir[64], err[400];
    ClusterConfig c;
    const char *four = "1@127.0.0.1:7001,2@127.0.0.1:7002,3@127.0.0.1:7003,"
                       "4@127.0.0.1:7004";

    assert_non_null(mkdtemp(tmpl));
    snprintf(dir, sizeof dir, "%s/data", tmpl);
    assert_int_equal(cluster_parse(four, "4", &c, err, sizeof err), 0);
    assert_int_equal(cluster_identity_check(dir, &c, err, sizeof err), -1);
    assert_non_null(strstr(err, "a new cluster has 3 or 5"));
    assert_int_equal(
        cluster_parse("1@127.0.0.1:1,2@127.0.0.1:2", "1", &c, err, sizeof err),
        0);
    assert_int_equal(cluster_identity_check(dir, &c, err, sizeof err), -1);
    assert_non_null(strstr(err, "2 voters"));

    /* --join: four is fine, and recorded as joining */
    assert_int_equal(cluster_parse(four, "4", &c, err, sizeof err), 0);
    c.state = CLUSTER_JOINING;
    assert_int_equal(cluster_identity_check(dir, &c, err, sizeof err),
                     CLUSTER_ID_WRITTEN);
    c.state = CLUSTER_MEMBER; /* a restart without --join stays joining */
    assert_int_equal(cluster_identity_check(dir, &c, err, sizeof err),
                     CLUSTER_ID_MATCH);
    assert_int_equal(c.state, CLUSTER_JOINING);

    /* the record follows the committed configuration */
    c.state = CLUSTER_MEMBER;
    assert_int_equal(cluster_identity_write(dir, &c, err, sizeof err), 0);
    assert_int_equal(cluster_identity_check(dir, &c, err, sizeof err),
                     CLUSTER_ID_MATCH);
    assert_int_equal(c.state, CLUSTER_MEMBER);
    assert_int_equal(
        cluster_parse(THREE ",4@127.0.0.1:7005", "4", &c, err, sizeof err), 0);
    assert_int_equal(cluster_identity_check(dir, &c, err, sizeof err), -1);
    assert_non_null(strstr(err, "committed configuration"));

    /* removed: refused, naming the removal */
    assert_int_equal(cluster_parse(four, "4", &c, err, sizeof err), 0);
    c.state = CLUSTER_REMOVED;
    assert_int_equal(cluster_identity_write(dir, &c, err, sizeof err), 0);
    c.state = CLUSTER_MEMBER;
    assert_int_equal(cluster_identity_check(dir, &c, err, sizeof err), -1);
    assert_non_null(strstr(err, "node 4 was removed from the cluster"));

    char path[128];
    snprintf(path, sizeof path, "%s/CLUSTER", dir);
    unlink(path);

    /* --seed: this node alone; recorded as seeding until its snapshot */
    assert_int_equal(cluster_parse(THREE, "1", &c, err, sizeof err), 0);
    c.state = CLUSTER_SEEDING;
    assert_int_equal(cluster_identity_check(dir, &c, err, sizeof err), -1);
    assert_non_null(strstr(err, "names this node alone"));
    assert_int_equal(
        cluster_parse("1@127.0.0.1:7001", "1", &c, err, sizeof err), 0);
    c.state = CLUSTER_SEEDING;
    assert_int_equal(cluster_identity_check(dir, &c, err, sizeof err),
                     CLUSTER_ID_WRITTEN);
    c.state = CLUSTER_MEMBER;
    assert_int_equal(cluster_identity_check(dir, &c, err, sizeof err),
                     CLUSTER_ID_MATCH);
    assert_int_equal(c.state, CLUSTER_SEEDING);
    unlink(path);
    rmdir(dir);
    rmdir(tmpl);
}

/* A fresh directory gets a CLUSTER file; the same flags match it later; a
 * different node id or voter set is refused and changes nothing. */
static void
test_identity_file(void **state)
{
    (void)state;
    char tmpl[] = "/tmp/rockstalk-cluster-XXXXXX";
    char dir[64], path[128], err[300], before[CLUSTER_TEXT_MAX],
        after[CLUSTER_TEXT_MAX];
    ClusterConfig c, other;

    assert_non_null(mkdtemp(tmpl));
    snprintf(dir, sizeof dir, "%s/data", tmpl); /* created by the check */
    snprintf(path, sizeof path, "%s/CLUSTER", dir);
    assert_int_equal(cluster_parse(THREE, "1", &c, err, sizeof err), 0);

    assert_int_equal(cluster_identity_check(dir, &c, err, sizeof err),
                     CLUSTER_ID_WRITTEN);
    assert_int_equal(cluster_identity_check(dir, &c, err, sizeof err),
                     CLUSTER_ID_MATCH);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(before, 1, sizeof before - 1, f);
    before[n] = '\0';
    fclose(f);

    assert_int_equal(cluster_parse(THREE, "2", &other, err, sizeof err), 0);
    assert_int_equal(cluster_identity_check(dir, &other, err, sizeof err), -1);
    assert_non_null(strstr(err, "belongs to node 1; --node-id 2"));

    assert_int_equal(cluster_parse("1@127.0.0.1:7001,2@127.0.0.1:7002,"
                                   "3@127.0.0.1:7004",
                                   "1", &other, err, sizeof err),
                     0);
    assert_int_equal(cluster_identity_check(dir, &other, err, sizeof err), -1);
    assert_non_null(strstr(err, "belongs to cluster 1@127.0.0.1:7001,"
                                "2@127.0.0.1:7002,3@127.0.0.1:7003"));

    f = fopen(path, "r");
    assert_non_null(f);
    n = fread(after, 1, sizeof after - 1, f);
    after[n] = '\0';
    fclose(f);
    assert_string_equal(before, after);

    /* A damaged file is an error, not a fresh start. */
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("rockstalk-cluster 1\nnode 1\n", f);
    fclose(f);
    assert_int_equal(cluster_identity_check(dir, &c, err, sizeof err), -1);
    assert_non_null(strstr(err, "voters"));

    /* A Raft log without its CLUSTER file is refused. */
    unlink(path);
    char raft[128];
    snprintf(raft, sizeof raft, "%s/raft", dir);
    assert_int_equal(mkdir(raft, 0755), 0);
    assert_int_equal(cluster_identity_check(dir, &c, err, sizeof err), -1);
    assert_non_null(strstr(err, "no CLUSTER file"));
    assert_int_equal(access(path, F_OK), -1);

    rmdir(raft);
    rmdir(dir);
    rmdir(tmpl);
}

/* A listening TCP socket on addr (an IPv4 literal) and a free port; the
 * port in *port. */
static int
listen_on(const char *addr, int *port)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    assert_true(fd >= 0);
    assert_int_equal(inet_pton(AF_INET, addr, &a.sin_addr), 1);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fd, 4), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

/* Whether a socket can be bound to addr (an address of this host). */
static int
bindable(const char *addr)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    int ok;

    assert_true(fd >= 0);
    assert_int_equal(inet_pton(AF_INET, addr, &a.sin_addr), 1);
    ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

/* Voters on one address without /CLIENTPORT relay to this node's own -p:
 * refused, naming a voter and /CLIENTPORT; with their client ports, or on
 * addresses of other hosts, or listening elsewhere, accepted. */
static void
test_relay_to_self_refused(void **state)
{
    (void)state;
    ClusterConfig c;
    char err[400] = "", spec[200];
    int port, lfd = listen_on("127.0.0.1", &port);
    int any, afd = listen_on("0.0.0.0", &any);
    int other = port == 65535 ? port - 1 : port + 1;
    struct sockaddr_in a;

    assert_int_equal(cluster_parse(THREE, "1", &c, err, sizeof err), 0);
    cluster_client_addr(&c, 1, port, &a);
    assert_int_equal(ntohs(a.sin_port), port);
    assert_int_equal(cluster_check_relay(&c, lfd, port, err, sizeof err), -1);
    assert_non_null(strstr(err, "voter 2"));
    assert_non_null(strstr(err, "/CLIENTPORT"));
    /* a wildcard listener takes loopback connections too */
    assert_int_equal(cluster_check_relay(&c, afd, any, err, sizeof err), -1);
    /* another port than the one listened on: not this node */
    assert_int_equal(cluster_check_relay(&c, lfd, other, err, sizeof err), 0);
    /* each voter's own client port */
    snprintf(spec, sizeof spec,
             "1@127.0.0.1:7001/%d,2@127.0.0.1:7002/%d,3@127.0.0.1:7003/%d",
             port, other, other);
    assert_int_equal(cluster_parse(spec, "1", &c, err, sizeof err), 0);
    cluster_client_addr(&c, 1, port, &a);
    assert_int_not_equal(ntohs(a.sin_port), port);
    assert_int_equal(cluster_check_relay(&c, lfd, port, err, sizeof err), 0);
    /* other hosts on the same port (TEST-NET-3, unless this host has one
     * of them: then a socket can be bound to it, and the check is moot) */
    assert_int_equal(cluster_parse("1@203.0.113.1:7001,2@203.0.113.2:7002,"
                                   "3@203.0.113.3:7003",
                                   "1", &c, err, sizeof err),
                     0);
    if (!bindable("203.0.113.2") && !bindable("203.0.113.3"))
        assert_int_equal(cluster_check_relay(&c, afd, any, err, sizeof err), 0);
    close(lfd);
    close(afd);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_three_and_five),
        cmocka_unit_test(test_parse_refuses),
        cmocka_unit_test(test_parse_client_ports),
        cmocka_unit_test(test_parse_host_names),
        cmocka_unit_test(test_format_roundtrip),
        cmocka_unit_test(test_identity_file),
        cmocka_unit_test(test_identity_membership),
        cmocka_unit_test(test_relay_to_self_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
