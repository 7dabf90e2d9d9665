/* httpdocs.c - see httpdocs.h. */
#include "server/httpdocs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "cluster/nodestep.h"
#include "http/httpd.h"
#include "http/json.h"
#include "server/httpapi.h"
#include "server/httpcluster.h"
#include "server/httptubes.h"
#include "server/stats.h"

/* /api/v1/tubes into d: the first HTTPDOCS_TUBES_MAX tubes by name, each
 * object also findable by its name. */
static void
tubes_doc(const Server *s, HttpdDocs *d)
{
    Json j = {0};
    httptubes_render(s, NULL, &j, d);
    if (j.failed)
        json_free(&j);
    else
        httpd_docs_set(d, HTTPD_DOC_TUBES, j.buf, j.len);
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
    httpcluster_json(s, &cl);
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
    httptubes_sample(s);
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
    httpd_close_queue(s->http); /* no notify reaches the API once closed */
    httpapi_close(s); /* answers what it holds, before the thread stops */
    httpd_stop(s->http);
    s->http = NULL;
}
