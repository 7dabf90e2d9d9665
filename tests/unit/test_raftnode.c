/* Tests of raftnode.c: three Raft nodes in this process on loopback ports,
 * each with its log in a temporary directory. A node's state machine here
 * is a count and a running hash of the entries it applied (and the list of
 * them since its last restore); its snapshot manifest is the count and the
 * hash. The cluster elects a leader, commits proposals everywhere in the
 * same order, elects a new leader within 5 s once the leader stops, and
 * catches the stopped node up when it restarts (through a snapshot: the
 * leader's log is compacted past it). Prints the election times seen. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <arpa/inet.h>
#include <ftw.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "cluster/cluster.h"
#include "cluster/raftnode.h"

#define NODES 3
#define PAYLOAD 40 /* bytes per test entry: an 8-byte value and filler */

/* One node's state machine and its RaftNode. */
typedef struct TNode {
    RaftNode *rn;
    char dir[128];
    pthread_mutex_t mu;
    uint64_t count, hash, last_index;
    uint64_t *vals; /* values applied since the last restore */
    size_t nvals, capvals;
    uint64_t restores, mine, lost_refused, lost_unknown, bad, entries;
    unsigned char seen[1024]; /* by proposal seq: apply(seq) + lost(seq) */
    _Atomic int notified;
} TNode;

static TNode nodes[NODES];
static int joining; /* start_node: join proposals (t_join), in their own
                       directories (a fresh log) */
static ClusterConfig cfg;
static char base[64];
static const RaftNodeOptions opts = {
    .snapshot_threshold = 64,
    .snapshot_trailing = 16,
};

static double
now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static uint64_t
fnv(uint64_t h, const void *p, size_t len)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < len; i++)
        h = (h ^ s[i]) * 1099511628211ull;
    return h;
}

/* Records one applied value (a PAYLOAD-byte proposal) under t->mu;
 * returns it. */
static uint64_t
apply_value(TNode *t, const unsigned char *p)
{
    uint64_t v;

    memcpy(&v, p, 8);
    t->hash = fnv(t->hash, p, PAYLOAD);
    t->count++;
    if (t->nvals == t->capvals) {
        t->capvals = t->capvals ? 2 * t->capvals : 256;
        t->vals = realloc(t->vals, t->capvals * sizeof *t->vals);
        assert_non_null(t->vals);
    }
    t->vals[t->nvals++] = v;
    return v;
}

/* An entry: one proposal, or with joining several back to back (count
 * and vals then go by proposal; entries counts the entries). */
static int
t_apply(void *arg, uint64_t index, const void *data, size_t len, uint64_t seq)
{
    TNode *t = arg;
    const unsigned char *p = data;

    pthread_mutex_lock(&t->mu);
    if (index <= t->last_index || len == 0 || len % PAYLOAD ||
        (len != PAYLOAD && !joining))
        t->bad++;
    for (size_t off = 0; off + PAYLOAD <= len; off += PAYLOAD)
        if (apply_value(t, p + off) % 64 == 0 && off > 0)
            t->bad++; /* t_join refused to join it */
    t->last_index = index;
    t->entries++;
    if (seq) t->mine++;
    if (seq < sizeof t->seen) t->seen[seq]++;
    pthread_mutex_unlock(&t->mu);
    return 0;
}

/* Joins proposal b to a: the values back to back, except that a value
 * that is a multiple of 64 refuses to be joined (it starts an entry). */
static int
t_join(void *arg, void *a, size_t *alen, const void *b, size_t blen)
{
    uint64_t v;

    (void)arg;
    memcpy(&v, b, 8);
    if (v % 64 == 0) return -1;
    memcpy((char *)a + *alen, b, blen);
    *alen += blen;
    return 0;
}

static void
t_lost(void *arg, uint64_t seq, int why)
{
    TNode *t = arg;
    pthread_mutex_lock(&t->mu);
    if (seq < sizeof t->seen) t->seen[seq]++;
    if (why == RAFTNODE_LOST_REFUSED)
        t->lost_refused++;
    else
        t->lost_unknown++;
    pthread_mutex_unlock(&t->mu);
}

static int
t_snapshot(void *arg, uint64_t index, void **buf, size_t *len)
{
    TNode *t = arg;
    uint64_t *m = malloc(2 * sizeof *m);

    if (!m) return -1;
    pthread_mutex_lock(&t->mu);
    if (index != t->last_index) t->bad++;
    m[0] = t->count;
    m[1] = t->hash;
    pthread_mutex_unlock(&t->mu);
    *buf = m;
    *len = 2 * sizeof *m;
    return 0;
}

static int
t_restore(void *arg, uint64_t index, const void *buf, size_t len)
{
    TNode *t = arg;
    uint64_t m[2];

    if (len != sizeof m) return -1;
    memcpy(m, buf, sizeof m);
    pthread_mutex_lock(&t->mu);
    t->count = m[0];
    t->hash = m[1];
    t->last_index = index;
    t->nvals = 0;
    t->restores++;
    pthread_mutex_unlock(&t->mu);
    return 0;
}

static void
t_notify(void *arg)
{
    TNode *t = arg;
    atomic_fetch_add(&t->notified, 1);
}

/* Starts node i (0-based) with a fresh state machine over its directory. */
static void
start_node(int i)
{
    TNode *t = &nodes[i];
    RaftNodeCallbacks cb = {.arg = t,
                            .apply = t_apply,
                            .lost = t_lost,
                            .snapshot = t_snapshot,
                            .restore = t_restore,
                            .notify = t_notify,
                            .join = joining ? t_join : NULL};
    ClusterConfig c = cfg;
    char err[256];

    free(t->vals);
    memset(t, 0, sizeof *t);
    pthread_mutex_init(&t->mu, NULL);
    t->hash = 14695981039346656037ull;
    snprintf(t->dir, sizeof t->dir, "%s/%s%d", base, joining ? "join" : "raft",
             i + 1);
    c.self_id = (uint64_t)i + 1;
    if (raftnode_start(&c, t->dir, &opts, &cb, &t->rn, err, sizeof err) != 0)
        fail_msg("node %d: %s", i + 1, err);
}

static void
stop_node(int i)
{
    raftnode_stop(nodes[i].rn);
    nodes[i].rn = NULL;
}

/* The node (0-based) that all running nodes of mask agree leads, or -1
 * once timeout_s passed. */
static int
wait_leader(unsigned mask, double timeout_s)
{
    double end = now_s() + timeout_s;
    do {
        int leader = -1, agree = 1;
        for (int i = 0; i < NODES; i++) {
            RaftNodeStatus st;
            if (!(mask & 1u << i)) continue;
            raftnode_status(nodes[i].rn, &st);
            if (st.role == RAFTNODE_LEADER) leader = i;
            if (st.leader_id == 0) agree = 0;
        }
        for (int i = 0; i < NODES && leader >= 0 && agree; i++) {
            RaftNodeStatus st;
            if (!(mask & 1u << i)) continue;
            raftnode_status(nodes[i].rn, &st);
            if (st.leader_id != (uint64_t)leader + 1) agree = 0;
        }
        if (leader >= 0 && agree) return leader;
        sleep_ms(5);
    } while (now_s() < end);
    return -1;
}

static uint64_t
count_of(int i)
{
    pthread_mutex_lock(&nodes[i].mu);
    uint64_t c = nodes[i].count;
    pthread_mutex_unlock(&nodes[i].mu);
    return c;
}

/* Waits until every node of mask applied want entries; fails after
 * timeout_s. */
static void
wait_count(unsigned mask, uint64_t want, double timeout_s)
{
    double end = now_s() + timeout_s;
    for (;;) {
        int done = 1;
        for (int i = 0; i < NODES; i++)
            if ((mask & 1u << i) && count_of(i) < want) done = 0;
        if (done) return;
        if (now_s() > end) {
            for (int i = 0; i < NODES; i++) {
                const char *e = nodes[i].rn ? raftnode_error(nodes[i].rn) : 0;
                if (e) printf("# node %d failed: %s\n", i + 1, e);
            }
            fail_msg("applied %llu/%llu/%llu of %llu after %.1f s",
                     (unsigned long long)count_of(0),
                     (unsigned long long)count_of(1),
                     (unsigned long long)count_of(2), (unsigned long long)want,
                     timeout_s);
        }
        sleep_ms(5);
    }
}

/* Proposes values first..first+n-1 on node i; all must be accepted. */
static void
propose_range(int i, uint64_t first, uint64_t n)
{
    unsigned char p[PAYLOAD];
    memset(p, 'x', sizeof p);
    for (uint64_t v = first; v < first + n; v++) {
        uint64_t seq;
        memcpy(p, &v, 8);
        assert_int_equal(raftnode_propose(nodes[i].rn, p, sizeof p, &seq),
                         RAFTNODE_OK);
    }
}

/* Every node of mask: same count and hash, no bad index; those that never
 * restored applied exactly values 1..count in order. */
static void
check_same(unsigned mask)
{
    int ref = -1;
    for (int i = 0; i < NODES; i++) {
        TNode *t = &nodes[i];
        if (!(mask & 1u << i)) continue;
        pthread_mutex_lock(&t->mu);
        assert_int_equal(t->bad, 0);
        if (t->restores == 0) {
            assert_int_equal(t->nvals, t->count);
            for (size_t k = 0; k < t->nvals; k++)
                assert_int_equal(t->vals[k], k + 1);
        }
        if (ref < 0) {
            ref = i;
        } else {
            assert_int_equal(t->count, nodes[ref].count);
            assert_true(t->hash == nodes[ref].hash);
        }
        pthread_mutex_unlock(&t->mu);
    }
}

static int
rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Three free loopback ports (bound at once, so distinct; released before
 * the nodes bind them). */
static void
free_ports(unsigned ports[NODES])
{
    int fds[NODES];
    for (int i = 0; i < NODES; i++) {
        struct sockaddr_in a = {.sin_family = AF_INET};
        socklen_t alen = sizeof a;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        fds[i] = socket(AF_INET, SOCK_STREAM, 0);
        assert_true(fds[i] >= 0);
        assert_int_equal(bind(fds[i], (struct sockaddr *)&a, sizeof a), 0);
        assert_int_equal(getsockname(fds[i], (struct sockaddr *)&a, &alen), 0);
        ports[i] = ntohs(a.sin_port);
    }
    for (int i = 0; i < NODES; i++)
        close(fds[i]);
}

static int
setup(void **state)
{
    unsigned ports[NODES];
    char spec[128], err[200];
    const char *tmp = getenv("TMPDIR");

    (void)state;
    snprintf(base, sizeof base, "%s/rockstalk-raft-XXXXXX",
             tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(base)) return -1;
    free_ports(ports);
    snprintf(spec, sizeof spec, "1@127.0.0.1:%u,2@127.0.0.1:%u,3@127.0.0.1:%u",
             ports[0], ports[1], ports[2]);
    if (cluster_parse(spec, "1", &cfg, err, sizeof err) != 0) return -1;
    return 0;
}

static int
teardown(void **state)
{
    (void)state;
    for (int i = 0; i < NODES; i++) {
        if (nodes[i].rn) stop_node(i);
        free(nodes[i].vals);
        nodes[i].vals = NULL;
    }
    nftw(base, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

static void
test_cluster(void **state)
{
    (void)state;
    const unsigned all = (1u << NODES) - 1;
    RaftNodeStatus st;

    double t0 = now_s();
    for (int i = 0; i < NODES; i++)
        start_node(i);
    int leader = wait_leader(all, 10);
    assert_true(leader >= 0);
    printf("# first election: node %d leads after %.2f s\n", leader + 1,
           now_s() - t0);

    /* A follower refuses proposals; the leader takes a burst of them. */
    int follower = (leader + 1) % NODES;
    uint64_t seq;
    unsigned char one[PAYLOAD] = {0};
    assert_int_equal(
        raftnode_propose(nodes[follower].rn, one, sizeof one, &seq),
        RAFTNODE_ENOTLEADER);
    assert_int_equal(
        raftnode_propose(nodes[leader].rn, one, RAFTNODE_ENTRY_MAX + 1, &seq),
        RAFTNODE_ETOOBIG);
    t0 = now_s();
    propose_range(leader, 1, 200);
    wait_count(1u << leader, 200, 10);
    printf("# 200 entries applied on the leader in %.3f s\n", now_s() - t0);
    wait_count(all, 200, 10);
    printf("# 200 entries applied on all three in %.3f s\n", now_s() - t0);
    check_same(all);
    assert_int_equal(nodes[leader].mine, 200);
    assert_int_equal(nodes[leader].lost_refused + nodes[leader].lost_unknown,
                     0);
    raftnode_status(nodes[leader].rn, &st);
    uint64_t term1 = st.term;
    assert_true(st.ready);
    assert_true(st.commit_index >= 200);
    assert_int_equal(st.applied, nodes[leader].last_index);
    for (int i = 0; i < NODES; i++)
        assert_true(atomic_load(&nodes[i].notified) > 0);

    /* The leader stops: the other two elect one of them within 5 s and go
     * on committing. */
    int old = leader;
    stop_node(old);
    t0 = now_s();
    leader = wait_leader(all & ~(1u << old), 5);
    double failover = now_s() - t0;
    assert_true(leader >= 0);
    printf("# leader %d stopped: node %d leads after %.2f s\n", old + 1,
           leader + 1, failover);
    raftnode_status(nodes[leader].rn, &st);
    assert_true(st.term > term1);
    while (!st.ready && now_s() < t0 + 5) {
        sleep_ms(5);
        raftnode_status(nodes[leader].rn, &st);
    }
    assert_true(st.ready);
    printf("# ... and is ready (its barrier applied) after %.2f s\n",
           now_s() - t0);
    propose_range(leader, 201, 100);
    wait_count(all & ~(1u << old), 300, 10);
    check_same(all & ~(1u << old));

    /* The stopped node restarts on its directory: it restores its own
     * snapshot, then catches up from the leader, whose log no longer
     * reaches back to where it stopped (a snapshot install). */
    t0 = now_s();
    start_node(old);
    wait_count(all, 300, 10);
    printf("# node %d restarted and caught up in %.2f s (%llu restores)\n",
           old + 1, now_s() - t0, (unsigned long long)nodes[old].restores);
    assert_true(nodes[old].restores >= 1);
    propose_range(leader, 301, 10);
    wait_count(all, 310, 10);
    check_same(all);
    raftnode_status(nodes[old].rn, &st);
    assert_int_equal(st.role, RAFTNODE_FOLLOWER);
    assert_int_equal(st.leader_id, (uint64_t)leader + 1);
    assert_false(st.ready);

    /* The leader stops with proposals queued and in flight: each of its
     * proposals ends exactly once, in apply (with its seq) or in lost. */
    propose_range(leader, 311, 25);
    sleep_ms(2); /* some are appended, maybe committed */
    propose_range(leader, 336, 25);
    TNode *t = &nodes[leader];
    /* Without its followers the leader can append but not commit (it steps
     * down after an election timeout without them, 1 s): what it appended
     * ends as lost UNKNOWN when it stops. */
    for (int i = 0; i < NODES; i++)
        if (i != leader) stop_node(i);
    pthread_mutex_lock(&t->mu);
    uint64_t before = t->mine;
    pthread_mutex_unlock(&t->mu);
    propose_range(leader, 361, 25);
    sleep_ms(20);
    stop_node(leader);
    for (size_t k = 1; k <= 110 + 75; k++)
        if (t->seen[k] != 1)
            fail_msg("proposal %zu ended %d times", k, t->seen[k]);
    assert_int_equal(t->seen[186], 0);
    assert_int_equal(t->mine, before); /* nothing more committed */
    assert_true(t->lost_unknown >= 25);
    printf("# leader stopped with 75 proposals pending: %llu applied, "
           "%llu refused, %llu unknown\n",
           (unsigned long long)t->mine - 110,
           (unsigned long long)t->lost_refused,
           (unsigned long long)t->lost_unknown);
}

/* The lease (raftnode_lease_ok): the leader gets one once readers ask,
 * followers never; once the leader cannot reach a majority its lease ends
 * within half an election timeout, before any other node may be elected
 * (an election timeout, 1 s, after the followers last heard from it). */
static void
test_lease(void **state)
{
    (void)state;
    const unsigned all = (1u << NODES) - 1;

    for (int i = 0; i < NODES; i++)
        start_node(i);
    int leader = wait_leader(all, 10);
    assert_true(leader >= 0);
    double t0 = now_s();
    int ok = 0;
    while (!(ok = raftnode_lease_ok(nodes[leader].rn)) && now_s() < t0 + 5)
        sleep_ms(5);
    assert_true(ok);
    printf("# the leader holds a lease %.3f s after asking\n", now_s() - t0);
    for (int i = 0; i < NODES; i++)
        if (i != leader) assert_false(raftnode_lease_ok(nodes[i].rn));
    /* readers keep asking: the lease stays for a second of them */
    for (t0 = now_s(); now_s() < t0 + 1.0; sleep_ms(20))
        ok &= raftnode_lease_ok(nodes[leader].rn);
    assert_true(ok);
    for (int i = 0; i < NODES; i++)
        if (i != leader) stop_node(i);
    t0 = now_s();
    while (raftnode_lease_ok(nodes[leader].rn) && now_s() < t0 + 5)
        sleep_ms(1);
    double gone = now_s() - t0;
    printf("# followers stopped: the lease ended after %.3f s\n", gone);
    assert_true(gone < 0.6);
    stop_node(leader);
}

/* With a join callback, the proposals the raft thread takes at once
 * become one entry: every node applies every value once, in order, in
 * fewer entries than proposals; the leader hears of each entry once, by
 * the seq of its last proposal (so of the last proposal of all), and a
 * proposal the callback refuses to join starts an entry of its own. */
static void
test_join(void **state)
{
    (void)state;
    const unsigned all = (1u << NODES) - 1;

    joining = 1;
    for (int i = 0; i < NODES; i++)
        start_node(i);
    int leader = wait_leader(all, 10);
    assert_true(leader >= 0);
    propose_range(leader, 1, 300);
    wait_count(all, 300, 10);
    check_same(all);
    for (int i = 0; i < NODES; i++)
        stop_node(i);
    TNode *t = &nodes[leader];
    printf("# 300 proposals applied as %llu entries\n",
           (unsigned long long)t->mine);
    assert_true(t->mine < 300);
    assert_int_equal(t->seen[300], 1);
    uint64_t reported = 0;
    for (size_t k = 1; k <= 300; k++) {
        assert_true(t->seen[k] <= 1);
        reported += t->seen[k];
    }
    assert_int_equal(reported, t->mine);
    assert_int_equal(t->lost_refused + t->lost_unknown, 0);
    /* every multiple of 64 began an entry (t_apply counts it bad if not) */
    for (int i = 0; i < NODES; i++)
        assert_true(nodes[i].entries >= 5);
    joining = 0;
}

/* start refuses a directory it cannot use, and a node id that is not a
 * voter, leaving nothing behind. */
static void
test_start_errors(void **state)
{
    (void)state;
    RaftNodeCallbacks cb = {.arg = &nodes[0], .apply = t_apply};
    RaftNode *rn = NULL;
    char path[128], err[256] = "";

    snprintf(path, sizeof path, "%s/a-file", base);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(
        raftnode_start(&cfg, path, NULL, &cb, &rn, err, sizeof err), -1);
    assert_null(rn);
    assert_true(err[0] != '\0');
    printf("# start on a file: %s\n", err);

    ClusterConfig c = cfg;
    c.self_id = 9;
    snprintf(path, sizeof path, "%s/raft9", base);
    assert_int_equal(raftnode_start(&c, path, NULL, &cb, &rn, err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "not a voter"));
    raftnode_stop(NULL);
}

int
main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* progress lines survive a crash */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_start_errors),
        cmocka_unit_test(test_cluster),
        cmocka_unit_test(test_lease),
        cmocka_unit_test(test_join),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
