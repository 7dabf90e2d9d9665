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
#include "cluster/nodestep.h"
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

/* Where the fields of stats go: the YAML body (b) or a JSON object (j),
 * from one list, so the two never disagree. */
typedef struct Out {
    StatsBuf *b;
    Json *j;
} Out;

static void
kv_u(Out *o, const char *k, uint64_t v)
{
    if (!o->j) {
        put(o->b, "%s: %" PRIu64 "\n", k, v);
        return;
    }
    json_key(o->j, k);
    json_u64(o->j, v);
}

static void
kv_i(Out *o, const char *k, int64_t v)
{
    if (!o->j) {
        put(o->b, "%s: %" PRId64 "\n", k, v);
        return;
    }
    json_key(o->j, k);
    json_i64(o->j, v);
}

/* A number already formatted (a decimal). */
static void
kv_num(Out *o, const char *k, const char *num)
{
    if (!o->j) {
        put(o->b, "%s: %s\n", k, num);
        return;
    }
    json_key(o->j, k);
    json_num(o->j, num);
}

/* A string; quoted in YAML too when quote is set. */
static void
kv_s(Out *o, const char *k, const char *v, int quote)
{
    if (!o->j) {
        put(o->b, quote ? "%s: \"%s\"\n" : "%s: %s\n", k, v);
        return;
    }
    json_key(o->j, k);
    json_cstr(o->j, v);
}

static void
kv_b(Out *o, const char *k, int v)
{
    if (!o->j) {
        put(o->b, "%s: %s\n", k, v ? "true" : "false");
        return;
    }
    json_key(o->j, k);
    json_bool(o->j, v);
}

static void __attribute__((format(printf, 3, 4)))
kv_f(Out *o, const char *k, const char *fmt, ...)
{
    char num[64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(num, sizeof num, fmt, ap);
    va_end(ap);
    kv_num(o, k, num);
}

static void
stats_counts(Server *s, Out *o)
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
    char key[64];
    kv_u(o, "current-jobs-urgent", s->urgent_ct);
    kv_u(o, "current-jobs-ready", s->ready_ct);
    kv_u(o, "current-jobs-reserved", s->reserved_ct);
    kv_u(o, "current-jobs-delayed", s->delayed_ct);
    kv_u(o, "current-jobs-buried", s->buried_ct);
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        snprintf(key, sizeof key, "cmd-%s", proto_op_name(order[i]));
        kv_u(o, key, s->op_ct[order[i]]);
    }
    kv_u(o, "job-timeouts", s->timeout_ct);
    kv_u(o, "total-jobs", s->total_jobs);
    kv_u(o, "max-job-size", s->cfg.max_job_size);
    kv_u(o, "current-tubes", s->tubes.list.len);
    kv_u(o, "current-connections", s->cur_conns);
    kv_u(o, "current-producers", s->cur_producers);
    kv_u(o, "current-workers", s->cur_workers);
    kv_u(o, "current-waiting", s->waiting_ct);
    kv_u(o, "total-connections", s->total_conns);
}

/* rockstalk-auth-*: how clients authenticate, failures, and with
 * identities each identity's open connections. */
static void
stats_auth(Server *s, int identities, Out *o)
{
    const Access *a = s->access;
    char key[128];
    kv_s(o, "rockstalk-auth", a ? "file" : "none", 0);
    if (!a) return;
    kv_u(o, "rockstalk-auth-failures", a->failures);
    kv_u(o, "rockstalk-auth-timeouts", a->timeouts);
    kv_u(o, "rockstalk-auth-evicted", a->evicted);
    kv_u(o, "rockstalk-auth-unauthenticated", a->unauth);
    kv_u(o, "rockstalk-auth-reloads", a->reloads);
    if (!identities) return;
    kv_u(o, "rockstalk-auth-trusted-connections", a->trusted);
    for (size_t i = 0; i < a->table.n; i++) {
        snprintf(key, sizeof key, "rockstalk-auth-connections-%s",
                 a->table.users[i].name);
        kv_u(o, key, a->table.users[i].conns);
    }
}

/* The fields of stats after the counts: the process, the store, our
 * extensions, the cluster. */
static void
stats_process(Server *s, Out *o)
{
    struct rusage ru;
    struct utsname un;
    StoreStats st = {0};
    getrusage(RUSAGE_SELF, &ru);
    uname(&un);
    if (s->store) store_stats(s->store, &st);
    kv_i(o, "pid", (long)getpid());
    kv_s(o, "version", ROCKSTALK_VERSION, 1);
    kv_f(o, "rusage-utime", "%ld.%06ld", (long)ru.ru_utime.tv_sec,
         (long)ru.ru_utime.tv_usec);
    kv_f(o, "rusage-stime", "%ld.%06ld", (long)ru.ru_stime.tv_sec,
         (long)ru.ru_stime.tv_usec);
    kv_i(o, "uptime", (mono_ns() - s->started_at) / NS_PER_SEC);
    kv_u(o, "binlog-oldest-index", 0);
    kv_u(o, "binlog-current-index", 0);
    kv_u(o, "binlog-records-migrated", 0);
    kv_u(o, "binlog-records-written", st.records);
    kv_i(o, "binlog-max-size", s->cfg.binlog_size);
    kv_b(o, "draining", s->draining);
    kv_s(o, "id", s->instance_id, 0);
    kv_s(o, "hostname", un.nodename, 0);
    kv_s(o, "os", un.version, 0);
    kv_s(o, "platform", un.machine, 0);
    kv_s(o, "rockstalk-durability", durability_name(s), 0);
    kv_i(o, "rockstalk-shards", st.nshards);
    kv_u(o, "rockstalk-groups", st.groups);
    kv_f(o, "rockstalk-mutations-per-group", "%.2f",
         st.groups ? (double)st.records / (double)st.groups : 0.0);
    kv_u(o, "rockstalk-syncs", st.syncs);
    kv_f(o, "rockstalk-sync-latency-us", "%.1f",
         st.syncs ? (double)st.sync_ns / (double)st.syncs / 1000.0 : 0.0);
    kv_u(o, "rockstalk-body-ring-puts", st.ring_bodies);
    kv_u(o, "rockstalk-body-ring-bytes", st.ring_bytes);
    kv_u(o, "rockstalk-body-ring-waits", st.ring_waits);
    kv_u(o, "rockstalk-body-ring-flushes", st.ring_flushes);
    kv_u(o, "rockstalk-body-ring-restored", st.ring_restored);
    kv_u(o, "rockstalk-body-ring-held-files", st.ring_held_files);
    kv_u(o, "rockstalk-body-ring-held-bytes", st.ring_held_bytes);
    kv_u(o, "rockstalk-body-ring-copied", st.ring_copied);
    kv_u(o, "rockstalk-body-ring-dead-files", st.ring_dead_files);
    kv_u(o, "rockstalk-body-ring-dead-bytes", st.ring_dead_bytes);
    kv_u(o, "rockstalk-body-ring-copy-queue", st.ring_copy_queue);
    kv_u(o, "rockstalk-body-ring-spare-files", st.ring_spare_files);
    kv_u(o, "rockstalk-idle-flushes", st.idle_flushes);
    kv_u(o, "rockstalk-memtable-bytes",
         s->store ? store_memtable_bytes(s->store) : 0);
}

static void
stats_ours(Server *s, int identities, Out *o)
{
    kv_u(o, "rockstalk-body-cache-bytes", s->bodies.bytes);
    kv_u(o, "rockstalk-body-cache-misses", s->bodies.misses);
    kv_u(o, "rockstalk-body-prefetched", s->bodies.prefetched);
    kv_u(o, "rockstalk-cmd-reserve-batch", s->op_ct[OP_RESERVE_BATCH]);
    kv_u(o, "rockstalk-batch-jobs", s->batch_jobs);
    kv_u(o, "rockstalk-cmd-list-jobs", s->op_ct[OP_LIST_JOBS]);
    kv_u(o, "rockstalk-cmd-clear-tube", s->op_ct[OP_CLEAR_TUBE]);
    kv_u(o, "rockstalk-jobs-cleared", s->cleared_ct);
    kv_u(o, "rockstalk-timeout-buries", s->poison_ct);
    kv_u(o, "rockstalk-cmd-put-unique", s->op_ct[OP_PUT_UNIQUE]);
    kv_u(o, "rockstalk-dedup-hits", s->dedup_hits);
    kv_u(o, "rockstalk-dedup-keys", s->dedup.len);
    NodeStats ns;
    node_stats(s, &ns);
    kv_s(o, "rockstalk-cluster-role", ns.role, 0);
    kv_u(o, "rockstalk-cluster-leader", ns.leader);
    kv_u(o, "rockstalk-cluster-term", ns.term);
    kv_u(o, "rockstalk-cluster-commit-index", ns.commit_index);
    kv_s(o, "rockstalk-cluster-security", ns.security ? ns.security : "none",
         0);
    kv_u(o, "rockstalk-cluster-peer-refused", ns.peer_refused);
    stats_auth(s, identities, o);
}

void
stats_server(Server *s, int identities, StatsBuf *b)
{
    Out o = {.b = b};
    put(b, "---\n");
    stats_counts(s, &o);
    stats_process(s, &o);
    stats_ours(s, identities, &o);
    put(b, "\r\n");
}

void
stats_server_json(Server *s, Json *j)
{
    Out o = {.j = j};
    json_obj(j);
    stats_counts(s, &o);
    stats_process(s, &o);
    stats_ours(s, 0, &o);
    json_obj_end(j);
}

void
stats_job(const Server *s, const Job *j, StatsBuf *b)
{
    int64_t now = mono_ns(), left = 0;
    if (j->state == JOB_RESERVED || j->state == JOB_DELAYED)
        left = (j->deadline - now) / NS_PER_SEC;
    put(b, "---\nid: %" PRIu64 "\ntube: %s\nstate: %s\npri: %u\n", j->id,
        j->tube->name, job_state_name(j), j->pri);
    put(b, "age: %" PRId64 "\ndelay: %u\nttr: %u\ntime-left: %" PRId64 "\n",
        (state_wall_ns(s) - j->created_at) / NS_PER_SEC, j->delay, j->ttr,
        left);
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
    put(b,
        "# TYPE rockstalk_store_body_ring_puts_total counter\n"
        "rockstalk_store_body_ring_puts_total %" PRIu64 "\n"
        "# TYPE rockstalk_store_body_ring_bytes_total counter\n"
        "rockstalk_store_body_ring_bytes_total %" PRIu64 "\n"
        "# TYPE rockstalk_store_body_ring_waits_total counter\n"
        "rockstalk_store_body_ring_waits_total %" PRIu64 "\n"
        "# TYPE rockstalk_store_body_ring_flushes_total counter\n"
        "rockstalk_store_body_ring_flushes_total %" PRIu64 "\n"
        "# TYPE rockstalk_store_body_ring_restored gauge\n"
        "rockstalk_store_body_ring_restored %" PRIu64 "\n"
        "# TYPE rockstalk_store_body_ring_held_files gauge\n"
        "rockstalk_store_body_ring_held_files %" PRIu64 "\n"
        "# TYPE rockstalk_store_body_ring_held_bytes gauge\n"
        "rockstalk_store_body_ring_held_bytes %" PRIu64 "\n"
        "# TYPE rockstalk_store_body_ring_copied_total counter\n"
        "rockstalk_store_body_ring_copied_total %" PRIu64 "\n"
        "# TYPE rockstalk_store_body_ring_dead_files gauge\n"
        "rockstalk_store_body_ring_dead_files %" PRIu64 "\n"
        "# TYPE rockstalk_store_body_ring_dead_bytes gauge\n"
        "rockstalk_store_body_ring_dead_bytes %" PRIu64 "\n"
        "# TYPE rockstalk_store_body_ring_copy_queue gauge\n"
        "rockstalk_store_body_ring_copy_queue %" PRIu64 "\n"
        "# TYPE rockstalk_store_body_ring_spare_files gauge\n"
        "rockstalk_store_body_ring_spare_files %" PRIu64 "\n",
        st.ring_bodies, st.ring_bytes, st.ring_waits, st.ring_flushes,
        st.ring_restored, st.ring_held_files, st.ring_held_bytes,
        st.ring_copied, st.ring_dead_files, st.ring_dead_bytes,
        st.ring_copy_queue, st.ring_spare_files);
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
