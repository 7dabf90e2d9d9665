/* stats.c - see stats.h. */
#include "server/stats.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "base/common.h"
#include "cluster/node.h"
#include "server/access.h"

static void __attribute__((format(printf, 2, 3)))
put(StatsBuf *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->buf + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) abort();
        if (b->buf && (size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        b->cap = (b->cap + (size_t)n + 1) * 2;
        if (!(b->buf = realloc(b->buf, b->cap))) abort();
    }
}

void
stats_buf_free(StatsBuf *b)
{
    free(b->buf);
    b->buf = NULL;
    b->len = b->cap = 0;
}

static const char *
durability_name(const Server *s)
{
    if (!s->store) return "none";
    if (s->node) return "raft";
    switch (s->cfg.sync_mode) {
    case STORE_SYNC_ALWAYS:
        return "fsync";
    case STORE_SYNC_INTERVAL:
        return "interval";
    default:
        return "write";
    }
}

static void
stats_counts(Server *s, StatsBuf *b)
{
    static const Op order[] = {
        OP_PUT,
        OP_PEEK,
        OP_PEEK_READY,
        OP_PEEK_DELAYED,
        OP_PEEK_BURIED,
        OP_RESERVE,
        OP_RESERVE_TIMEOUT,
        OP_DELETE,
        OP_RELEASE,
        OP_USE,
        OP_WATCH,
        OP_IGNORE,
        OP_BURY,
        OP_KICK,
        OP_TOUCH,
        OP_STATS,
        OP_STATS_JOB,
        OP_STATS_TUBE,
        OP_LIST_TUBES,
        OP_LIST_TUBE_USED,
        OP_LIST_TUBES_WATCHED,
        OP_PAUSE_TUBE,
    };
    put(b, "---\ncurrent-jobs-urgent: %" PRIu64 "\n", s->urgent_ct);
    put(b, "current-jobs-ready: %" PRIu64 "\n", s->ready_ct);
    put(b, "current-jobs-reserved: %" PRIu64 "\n", s->reserved_ct);
    put(b, "current-jobs-delayed: %" PRIu64 "\n", s->delayed_ct);
    put(b, "current-jobs-buried: %" PRIu64 "\n", s->buried_ct);
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        put(b, "cmd-%s: %" PRIu64 "\n", proto_op_name(order[i]),
            s->op_ct[order[i]]);
    put(b, "job-timeouts: %" PRIu64 "\n", s->timeout_ct);
    put(b, "total-jobs: %" PRIu64 "\n", s->total_jobs);
    put(b, "max-job-size: %u\n", s->cfg.max_job_size);
    put(b, "current-tubes: %zu\n", s->tubes.list.len);
    put(b, "current-connections: %u\n", s->cur_conns);
    put(b, "current-producers: %u\n", s->cur_producers);
    put(b, "current-workers: %u\n", s->cur_workers);
    put(b, "current-waiting: %" PRIu64 "\n", s->waiting_ct);
    put(b, "total-connections: %u\n", s->total_conns);
}

/* rockstalk-auth-*: how clients authenticate, failures, and with
 * identities each identity's open connections. */
static void
stats_auth(Server *s, int identities, StatsBuf *b)
{
    const Access *a = s->access;
    put(b, "rockstalk-auth: %s\n", a ? "file" : "none");
    if (!a) return;
    put(b, "rockstalk-auth-failures: %" PRIu64 "\n", a->failures);
    put(b, "rockstalk-auth-timeouts: %" PRIu64 "\n", a->timeouts);
    put(b, "rockstalk-auth-evicted: %" PRIu64 "\n", a->evicted);
    put(b, "rockstalk-auth-unauthenticated: %u\n", a->unauth);
    put(b, "rockstalk-auth-reloads: %" PRIu64 "\n", a->reloads);
    if (!identities) return;
    put(b, "rockstalk-auth-trusted-connections: %u\n", a->trusted);
    for (size_t i = 0; i < a->table.n; i++)
        put(b, "rockstalk-auth-connections-%s: %u\n", a->table.users[i].name,
            a->table.users[i].conns);
}

void
stats_server(Server *s, int identities, StatsBuf *b)
{
    struct rusage ru;
    struct utsname un;
    StoreStats st = {0};
    getrusage(RUSAGE_SELF, &ru);
    uname(&un);
    if (s->store) store_stats(s->store, &st);
    stats_counts(s, b);
    put(b, "pid: %ld\n", (long)getpid());
    put(b, "version: \"%s\"\n", ROCKSTALK_VERSION);
    put(b, "rusage-utime: %ld.%06ld\n", (long)ru.ru_utime.tv_sec,
        (long)ru.ru_utime.tv_usec);
    put(b, "rusage-stime: %ld.%06ld\n", (long)ru.ru_stime.tv_sec,
        (long)ru.ru_stime.tv_usec);
    put(b, "uptime: %" PRId64 "\n", (mono_ns() - s->started_at) / NS_PER_SEC);
    put(b, "binlog-oldest-index: 0\nbinlog-current-index: 0\n");
    put(b, "binlog-records-migrated: 0\n");
    put(b, "binlog-records-written: %" PRIu64 "\n", st.records);
    put(b, "binlog-max-size: %ld\n", s->cfg.binlog_size);
    put(b, "draining: %s\n", s->draining ? "true" : "false");
    put(b, "id: %s\nhostname: %s\nos: %s\nplatform: %s\n", s->instance_id,
        un.nodename, un.version, un.machine);
    put(b, "rockstalk-durability: %s\n", durability_name(s));
    put(b, "rockstalk-shards: %d\n", st.nshards);
    put(b, "rockstalk-groups: %" PRIu64 "\n", st.groups);
    put(b, "rockstalk-mutations-per-group: %.2f\n",
        st.groups ? (double)st.records / (double)st.groups : 0.0);
    put(b, "rockstalk-syncs: %" PRIu64 "\n", st.syncs);
    put(b, "rockstalk-sync-latency-us: %.1f\n",
        st.syncs ? (double)st.sync_ns / (double)st.syncs / 1000.0 : 0.0);
    put(b, "rockstalk-body-cache-bytes: %zu\n", s->bodies.bytes);
    put(b, "rockstalk-body-cache-misses: %" PRIu64 "\n", s->bodies.misses);
    put(b, "rockstalk-body-prefetched: %" PRIu64 "\n", s->bodies.prefetched);
    put(b, "rockstalk-cmd-reserve-batch: %" PRIu64 "\n",
        s->op_ct[OP_RESERVE_BATCH]);
    put(b, "rockstalk-batch-jobs: %" PRIu64 "\n", s->batch_jobs);
    put(b, "rockstalk-cmd-list-jobs: %" PRIu64 "\n", s->op_ct[OP_LIST_JOBS]);
    put(b, "rockstalk-cmd-clear-tube: %" PRIu64 "\n", s->op_ct[OP_CLEAR_TUBE]);
    put(b, "rockstalk-jobs-cleared: %" PRIu64 "\n", s->cleared_ct);
    put(b, "rockstalk-timeout-buries: %" PRIu64 "\n", s->poison_ct);
    put(b, "rockstalk-cmd-put-unique: %" PRIu64 "\n", s->op_ct[OP_PUT_UNIQUE]);
    put(b, "rockstalk-dedup-hits: %" PRIu64 "\n", s->dedup_hits);
    put(b, "rockstalk-dedup-keys: %zu\n", s->dedup.len);
    NodeStats ns;
    node_stats(s, &ns);
    put(b, "rockstalk-cluster-role: %s\n", ns.role);
    put(b, "rockstalk-cluster-leader: %" PRIu64 "\n", ns.leader);
    put(b, "rockstalk-cluster-term: %" PRIu64 "\n", ns.term);
    put(b, "rockstalk-cluster-commit-index: %" PRIu64 "\n", ns.commit_index);
    put(b, "rockstalk-cluster-security: %s\n",
        ns.security ? ns.security : "none");
    put(b, "rockstalk-cluster-peer-refused: %" PRIu64 "\n", ns.peer_refused);
    stats_auth(s, identities, b);
    put(b, "\r\n");
}

void
stats_job(const Job *j, StatsBuf *b)
{
    int64_t now = mono_ns(), left = 0;
    if (j->state == JOB_RESERVED || j->state == JOB_DELAYED)
        left = (j->deadline - now) / NS_PER_SEC;
    put(b, "---\nid: %" PRIu64 "\ntube: %s\nstate: %s\npri: %u\n", j->id,
        j->tube->name, job_state_name(j), j->pri);
    put(b, "age: %" PRId64 "\ndelay: %u\nttr: %u\ntime-left: %" PRId64 "\n",
        (wall_ns() - j->created_at) / NS_PER_SEC, j->delay, j->ttr, left);
    put(b, "file: 0\nreserves: %u\ntimeouts: %u\nreleases: %u\n", j->reserves,
        j->timeouts, j->releases);
    put(b, "buries: %u\nkicks: %u\n\r\n", j->buries, j->kicks);
}

void
stats_tube(const Tube *t, StatsBuf *b)
{
    int64_t left = 0;
    if (t->pause_ns) left = (t->unpause_at - mono_ns()) / NS_PER_SEC;
    put(b, "---\nname: %s\ncurrent-jobs-urgent: %" PRIu64 "\n", t->name,
        t->urgent_ct);
    put(b, "current-jobs-ready: %zu\n", t->ready.len);
    put(b, "current-jobs-reserved: %" PRIu64 "\n", t->reserved_ct);
    put(b, "current-jobs-delayed: %zu\n", t->delay.len);
    put(b, "current-jobs-buried: %" PRIu64 "\n", t->buried_ct);
    put(b, "total-jobs: %" PRIu64 "\n", t->total_jobs);
    put(b, "current-using: %u\ncurrent-watching: %u\n", t->using_ct,
        t->watching_ct);
    put(b, "current-waiting: %zu\n", t->waiting.len);
    put(b, "cmd-delete: %" PRIu64 "\ncmd-pause-tube: %" PRIu64 "\n",
        t->delete_ct, t->pause_ct);
    put(b, "pause: %" PRId64 "\npause-time-left: %" PRId64 "\n\r\n",
        t->pause_ns / NS_PER_SEC, left);
}

void
stats_list(const PtrSet *tubes, StatsBuf *b)
{
    put(b, "---\n");
    for (size_t i = 0; i < tubes->len; i++)
        put(b, "- %s\n", ((const Tube *)tubes->items[i])->name);
    put(b, "\r\n");
}

static void
prom_tubes(Server *s, StatsBuf *b)
{
    static const char *const states[] = {"ready", "reserved", "delayed",
                                         "buried"};
    put(b, "# TYPE rockstalk_tube_jobs gauge\n");
    for (size_t i = 0; i < s->tubes.list.len; i++) {
        const Tube *t = s->tubes.list.items[i];
        uint64_t n[] = {t->ready.len, t->reserved_ct, t->delay.len,
                        t->buried_ct};
        for (int k = 0; k < 4; k++)
            put(b,
                "rockstalk_tube_jobs{tube=\"%s\",state=\"%s\"} %" PRIu64 "\n",
                t->name, states[k], n[k]);
    }
    put(b, "# TYPE rockstalk_tube_waiting gauge\n");
    for (size_t i = 0; i < s->tubes.list.len; i++) {
        const Tube *t = s->tubes.list.items[i];
        put(b, "rockstalk_tube_waiting{tube=\"%s\"} %zu\n", t->name,
            t->waiting.len);
    }
    put(b, "# TYPE rockstalk_tube_jobs_total counter\n");
    for (size_t i = 0; i < s->tubes.list.len; i++) {
        const Tube *t = s->tubes.list.items[i];
        put(b, "rockstalk_tube_jobs_total{tube=\"%s\"} %" PRIu64 "\n", t->name,
            t->total_jobs);
    }
}

/* rockstalk_cluster_*: the same as stats' rockstalk-cluster-* lines, the
 * role as a label of a gauge that is 1. */
static void
prom_cluster(Server *s, StatsBuf *b)
{
    NodeStats ns;
    node_stats(s, &ns);
    put(b,
        "# TYPE rockstalk_cluster_role gauge\n"
        "rockstalk_cluster_role{role=\"%s\"} 1\n"
        "# TYPE rockstalk_cluster_leader gauge\n"
        "rockstalk_cluster_leader %" PRIu64 "\n"
        "# TYPE rockstalk_cluster_term gauge\n"
        "rockstalk_cluster_term %" PRIu64 "\n"
        "# TYPE rockstalk_cluster_commit_index gauge\n"
        "rockstalk_cluster_commit_index %" PRIu64 "\n"
        "# TYPE rockstalk_cluster_peer_refused counter\n"
        "rockstalk_cluster_peer_refused %" PRIu64 "\n",
        ns.role, ns.leader, ns.term, ns.commit_index, ns.peer_refused);
}

static void
prom_store(Server *s, StatsBuf *b)
{
    StoreStats st = {0};
    if (s->store) store_stats(s->store, &st);
    put(b,
        "# TYPE rockstalk_store_records_total counter\n"
        "rockstalk_store_records_total %" PRIu64 "\n",
        st.records);
    put(b,
        "# TYPE rockstalk_store_groups_total counter\n"
        "rockstalk_store_groups_total %" PRIu64 "\n",
        st.groups);
    put(b,
        "# TYPE rockstalk_store_group_size gauge\n"
        "rockstalk_store_group_size %.2f\n",
        st.groups ? (double)st.records / (double)st.groups : 0.0);
    put(b, "# TYPE rockstalk_store_sync_seconds histogram\n");
    uint64_t cum = 0;
    for (int i = 0; i < STORE_SYNC_BUCKETS - 1; i++) {
        cum += st.sync_hist[i];
        put(b, "rockstalk_store_sync_seconds_bucket{le=\"%g\"} %" PRIu64 "\n",
            store_sync_bucket_us[i] / 1e6, cum);
    }
    put(b, "rockstalk_store_sync_seconds_bucket{le=\"+Inf\"} %" PRIu64 "\n",
        st.syncs);
    put(b, "rockstalk_store_sync_seconds_sum %.6f\n", (double)st.sync_ns / 1e9);
    put(b, "rockstalk_store_sync_seconds_count %" PRIu64 "\n", st.syncs);
}

/* rockstalk_auth_*: the same as stats' rockstalk-auth-* lines. */
static void
prom_auth(Server *s, StatsBuf *b)
{
    const Access *a = s->access;
    put(b, "# TYPE rockstalk_auth_enabled gauge\nrockstalk_auth_enabled %d\n",
        a != NULL);
    if (!a) return;
    put(b,
        "# TYPE rockstalk_auth_failures_total counter\n"
        "rockstalk_auth_failures_total %" PRIu64 "\n"
        "# TYPE rockstalk_auth_timeouts_total counter\n"
        "rockstalk_auth_timeouts_total %" PRIu64 "\n"
        "# TYPE rockstalk_auth_evicted_total counter\n"
        "rockstalk_auth_evicted_total %" PRIu64 "\n"
        "# TYPE rockstalk_auth_unauthenticated gauge\n"
        "rockstalk_auth_unauthenticated %u\n"
        "# TYPE rockstalk_auth_connections gauge\n"
        "rockstalk_auth_connections{identity=\"\",kind=\"trusted\"} %u\n",
        a->failures, a->timeouts, a->evicted, a->unauth, a->trusted);
    for (size_t i = 0; i < a->table.n; i++)
        put(b,
            "rockstalk_auth_connections{identity=\"%s\",kind=\"identity\"} "
            "%u\n",
            a->table.users[i].name, a->table.users[i].conns);
}

void
stats_prometheus(Server *s, StatsBuf *b)
{
    put(b, "# TYPE rockstalk_commands_total counter\n");
    for (int op = OP_UNKNOWN + 1; op < OP_COUNT; op++)
        put(b, "rockstalk_commands_total{cmd=\"%s\"} %" PRIu64 "\n",
            proto_op_name((Op)op), s->op_ct[op]);
    put(b,
        "# TYPE rockstalk_jobs gauge\n"
        "rockstalk_jobs{state=\"ready\"} %" PRIu64 "\n"
        "rockstalk_jobs{state=\"urgent\"} %" PRIu64 "\n"
        "rockstalk_jobs{state=\"reserved\"} %" PRIu64 "\n"
        "rockstalk_jobs{state=\"delayed\"} %" PRIu64 "\n"
        "rockstalk_jobs{state=\"buried\"} %" PRIu64 "\n",
        s->ready_ct, s->urgent_ct, s->reserved_ct, s->delayed_ct, s->buried_ct);
    put(b,
        "# TYPE rockstalk_jobs_total counter\nrockstalk_jobs_total %" PRIu64
        "\n# TYPE rockstalk_job_timeouts_total counter\n"
        "rockstalk_job_timeouts_total %" PRIu64 "\n",
        s->total_jobs, s->timeout_ct);
    put(b,
        "# TYPE rockstalk_connections gauge\n"
        "rockstalk_connections{kind=\"current\"} %u\n"
        "rockstalk_connections{kind=\"producers\"} %u\n"
        "rockstalk_connections{kind=\"workers\"} %u\n"
        "rockstalk_connections{kind=\"waiting\"} %" PRIu64 "\n"
        "# TYPE rockstalk_connections_total counter\n"
        "rockstalk_connections_total %u\n",
        s->cur_conns, s->cur_producers, s->cur_workers, s->waiting_ct,
        s->total_conns);
    put(b,
        "# TYPE rockstalk_tubes gauge\nrockstalk_tubes %zu\n"
        "# TYPE rockstalk_draining gauge\nrockstalk_draining %d\n"
        "# TYPE rockstalk_body_cache_bytes gauge\n"
        "rockstalk_body_cache_bytes %zu\n"
        "# TYPE rockstalk_body_cache_misses_total counter\n"
        "rockstalk_body_cache_misses_total %" PRIu64 "\n"
        "# TYPE rockstalk_body_prefetched_total counter\n"
        "rockstalk_body_prefetched_total %" PRIu64 "\n"
        "# TYPE rockstalk_uptime_seconds gauge\n"
        "rockstalk_uptime_seconds %" PRId64 "\n",
        s->tubes.list.len, s->draining, s->bodies.bytes, s->bodies.misses,
        s->bodies.prefetched, (mono_ns() - s->started_at) / NS_PER_SEC);
    put(b,
        "# TYPE rockstalk_batch_jobs_total counter\n"
        "rockstalk_batch_jobs_total %" PRIu64 "\n"
        "# TYPE rockstalk_jobs_cleared_total counter\n"
        "rockstalk_jobs_cleared_total %" PRIu64 "\n"
        "# TYPE rockstalk_timeout_buries_total counter\n"
        "rockstalk_timeout_buries_total %" PRIu64 "\n"
        "# TYPE rockstalk_dedup_hits_total counter\n"
        "rockstalk_dedup_hits_total %" PRIu64 "\n"
        "# TYPE rockstalk_dedup_keys gauge\n"
        "rockstalk_dedup_keys %zu\n",
        s->batch_jobs, s->cleared_ct, s->poison_ct, s->dedup_hits,
        s->dedup.len);
    prom_store(s, b);
    prom_cluster(s, b);
    prom_auth(s, b);
    prom_tubes(s, b);
}
