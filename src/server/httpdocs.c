/* httpdocs.c - see httpdocs.h. */
#include "server/httpdocs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "cluster/node.h"
#include "http/httpd.h"
#include "http/json.h"
#include "queue/readyage.h"
#include "server/auth.h"
#include "server/httpapi.h"
#include "server/stats.h"

/* Takes this second's sample of every tube's counters (TubeRates). */
static void
sample(Server *s)
{
    uint32_t k = ++s->rate_tick;
    unsigned slot = k % TUBE_RATE_SAMPLES;
    s->rate_at[slot] = mono_ns();
    for (size_t i = 0; i < s->tubes.list.len; i++) {
        Tube *t = s->tubes.list.items[i];
        if (!t->rates.since) t->rates.since = k;
        t->rates.n[slot][0] = t->total_jobs;
        t->rates.n[slot][1] = t->reserve_ct;
        t->rates.n[slot][2] = t->delete_ct;
    }
}

/* Counter c of t per second, over the oldest sample it has within the
 * last TUBE_RATE_SAMPLES (0 with fewer than two). */
static double
rate(const Server *s, const Tube *t, int c)
{
    uint32_t k = s->rate_tick, o = t->rates.since;
    if (k >= TUBE_RATE_SAMPLES && k - (TUBE_RATE_SAMPLES - 1) > o)
        o = k - (TUBE_RATE_SAMPLES - 1);
    if (!o || o >= k) return 0;
    const uint64_t *now = t->rates.n[k % TUBE_RATE_SAMPLES];
    const uint64_t *then = t->rates.n[o % TUBE_RATE_SAMPLES];
    int64_t dt =
        s->rate_at[k % TUBE_RATE_SAMPLES] - s->rate_at[o % TUBE_RATE_SAMPLES];
    if (dt <= 0 || now[c] < then[c]) return 0;
    return (double)(now[c] - then[c]) * 1e9 / (double)dt;
}

/* Seconds since the oldest ready job of t was put; 0 when none. */
static int64_t
oldest_ready_age(const Server *s, Tube *t)
{
    const Job *o = readyage_oldest(s, t);
    if (!o) return 0;
    int64_t age = (state_wall_ns(s) - o->created_at) / NS_PER_SEC;
    return age > 0 ? age : 0;
}

static void
tube_json(const Server *s, Tube *t, Json *j)
{
    static const char *const names[] = {"puts", "reserves", "deletes"};
    int64_t left = 0;
    if (t->pause_ns) left = (t->unpause_at - mono_ns()) / NS_PER_SEC;
    json_key(j, "name"), json_str(j, t->name, t->name_len);
    json_key(j, "ready"), json_u64(j, t->ready.len);
    json_key(j, "urgent"), json_u64(j, t->urgent_ct);
    json_key(j, "reserved"), json_u64(j, t->reserved_ct);
    json_key(j, "delayed"), json_u64(j, t->delay.len);
    json_key(j, "buried"), json_u64(j, t->buried_ct);
    json_key(j, "total-jobs"), json_u64(j, t->total_jobs);
    json_key(j, "using"), json_u64(j, t->using_ct);
    json_key(j, "watching"), json_u64(j, t->watching_ct);
    json_key(j, "waiting"), json_u64(j, t->waiting.len);
    json_key(j, "cmd-delete"), json_u64(j, t->delete_ct);
    json_key(j, "cmd-pause-tube"), json_u64(j, t->pause_ct);
    json_key(j, "paused"), json_bool(j, t->pause_ns != 0);
    json_key(j, "pause"), json_i64(j, t->pause_ns / NS_PER_SEC);
    json_key(j, "pause-time-left"), json_i64(j, left > 0 ? left : 0);
    json_key(j, "oldest-ready-age"), json_i64(j, oldest_ready_age(s, t));
    json_key(j, "rates");
    json_obj(j);
    for (int c = 0; c < 3; c++)
        json_key(j, names[c]), json_dbl(j, rate(s, t, c), 2);
    json_obj_end(j);
}

static int
by_name(const void *a, const void *b)
{
    return strcmp((*(const Tube *const *)a)->name,
                  (*(const Tube *const *)b)->name);
}

/* The tubes u may inspect (NULL: all) into *out (malloc'd), sorted by
 * name; returns how many, or -1 out of memory. */
static long
tubes_for(const Server *s, const AuthUser *u, Tube ***out)
{
    size_t n = s->tubes.list.len, k = 0;
    Tube **v = malloc((n ? n : 1) * sizeof *v);
    if (!v) return -1;
    for (size_t i = 0; i < n; i++) {
        Tube *t = s->tubes.list.items[i];
        if (!u || (auth_bits(u, t->name) & AUTH_INSPECT)) v[k++] = t;
    }
    qsort(v, k, sizeof *v, by_name);
    *out = v;
    return (long)k;
}

/* The tubes document of the tubes u may inspect (NULL: all) into j; each
 * object also given to d (NULL: none) under its name. */
static void
tubes_render(const Server *s, const AuthUser *u, Json *j, HttpdDocs *d)
{
    Tube **v;
    long got = tubes_for(s, u, &v);
    if (got < 0) {
        j->failed = 1;
        return;
    }
    size_t n = (size_t)got, shown = n;
    if (shown > HTTPDOCS_TUBES_MAX) shown = HTTPDOCS_TUBES_MAX;
    json_obj(j);
    json_key(j, "count"), json_u64(j, n);
    json_key(j, "listed"), json_u64(j, shown);
    json_key(j, "truncated"), json_bool(j, shown < n);
    json_key(j, "rate-window-s"), json_u64(j, TUBE_RATE_SAMPLES - 1);
    json_key(j, "tubes");
    json_arr(j);
    for (size_t i = 0; i < shown && !j->failed; i++) {
        json_obj(j);
        size_t off = j->len - 1; /* its '{' */
        tube_json(s, v[i], j);
        json_obj_end(j);
        if (d) httpd_docs_add_tube(d, v[i]->name, off, j->len - off);
    }
    json_arr_end(j);
    json_obj_end(j);
    free(v);
}

void
httpdocs_tubes_for(const Server *s, const AuthUser *u, Json *j)
{
    tubes_render(s, u, j, NULL);
}

/* /api/v1/tubes into d: the first HTTPDOCS_TUBES_MAX tubes by name, each
 * object also findable by its name. */
static void
tubes_doc(const Server *s, HttpdDocs *d)
{
    Json j = {0};
    tubes_render(s, NULL, &j, d);
    if (j.failed)
        json_free(&j);
    else
        httpd_docs_set(d, HTTPD_DOC_TUBES, j.buf, j.len);
}

static void
cluster_json(const Server *s, Json *j)
{
    const ClusterConfig *cc = s->cfg.cluster;
    NodeStats ns;
    json_obj(j);
    json_key(j, "mode");
    if (!cc) {
        json_cstr(j, "standalone");
        json_obj_end(j);
        return;
    }
    node_stats(s, &ns);
    json_cstr(j, "cluster");
    json_key(j, "node-id"), json_u64(j, cc->self_id);
    json_key(j, "role"), json_cstr(j, ns.role);
    json_key(j, "serving"), json_bool(j, node_serves(s));
    json_key(j, "leader"), json_u64(j, ns.leader);
    json_key(j, "term"), json_u64(j, ns.term);
    json_key(j, "commit-index"), json_u64(j, ns.commit_index);
    json_key(j, "security"), json_cstr(j, ns.security ? ns.security : "none");
    json_key(j, "peer-refused"), json_u64(j, ns.peer_refused);
    json_key(j, "voters");
    json_arr(j);
    for (int i = 0; i < cc->n; i++) {
        json_obj(j);
        json_key(j, "id"), json_u64(j, cc->voters[i].id);
        json_key(j, "raft"), json_cstr(j, cc->voters[i].addr);
        json_obj_end(j);
    }
    json_arr_end(j);
    json_obj_end(j);
}

/* Hands j's text to d as document k (or drops it if it failed). */
static void
set_json(HttpdDocs *d, HttpdDocKind k, Json *j)
{
    if (j->failed) {
        json_free(j);
        return;
    }
    httpd_docs_set(d, k, j->buf, j->len);
}

static void
publish(Server *s)
{
    HttpdDocs *d = httpd_docs_new();
    StatsBuf b = {0};
    Json st = {0}, cl = {0};
    if (!d) return;
    stats_prometheus(s, &b);
    httpd_docs_set(d, HTTPD_DOC_METRICS, b.buf, b.len); /* d frees it */
    stats_server_json(s, &st);
    set_json(d, HTTPD_DOC_STATS, &st);
    cluster_json(s, &cl);
    set_json(d, HTTPD_DOC_CLUSTER, &cl);
    tubes_doc(s, d);
    httpd_publish(s->http, d);
}

void
httpdocs_ready(Server *s)
{
    const char *status;
    int ready = 0;
    NodeStats ns;
    if (!s->http) return;
    if (s->stopping) {
        status = "stopping";
    } else if (node_serves(s)) {
        ready = 1;
        status = s->draining ? "serving (draining: puts refused)" : "serving";
    } else {
        node_stats(s, &ns);
        if (strcmp(ns.role, "leader") == 0)
            status = "leading, not serving yet";
        else if (ns.leader && ns.leader != s->cfg.cluster->self_id)
            ready = 1, status = "relaying to the leader";
        else
            status = "no leader";
    }
    httpd_set_ready(s->http, ready, status);
}

static void
tick_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    Server *s = w->data;
    (void)loop, (void)revents;
    sample(s);
    publish(s);
    httpdocs_ready(s);
}

int
httpdocs_open(Server *s, char *err, size_t errcap)
{
    if (!s->cfg.http_addr) return 0;
    HttpdConfig hc = {
        .addr = s->cfg.http_addr,
        .opt = s->cfg.http_opt ? s->cfg.http_opt : "--http",
        .api_auth = s->cfg.auth_file != NULL,
        .notify = httpapi_notify,
        .notify_arg = s,
        .tls_cert = s->cfg.http_plain ? NULL : s->cfg.tls_cert,
        .tls_key = s->cfg.http_plain ? NULL : s->cfg.tls_key,
    };
    const char *delay = getenv("ROCKSTALKD_FAULT_HTTP_DELAY_MS");
    if (httpapi_open(s, delay ? (unsigned)atoi(delay) : 0) < 0) {
        snprintf(err, errcap, "out of memory");
        return -1;
    }
    if (httpd_start(&hc, &s->http, err, errcap) < 0) return -1;
    ev_timer_init(&s->http_w, tick_cb, 0., 1.);
    s->http_w.data = s;
    ev_timer_start(s->loop, &s->http_w);
    return 0;
}

void
httpdocs_close(Server *s)
{
    if (!s->http) return;
    httpapi_close(s); /* answers what it holds, before the thread stops */
    httpd_stop(s->http);
    s->http = NULL;
}
