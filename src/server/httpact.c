/* httpact.c - see httpact.h. */
#include "server/httpact.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/common.h"
#include "base/log.h"
#include "conn/conn.h"
#include "http/httpparse.h"
#include "proto/proto.h"
#include "queue/persist.h"
#include "server/ext.h"

void
httpans_error(HttpAns *a, unsigned status, const char *msg)
{
    json_free(&a->j);
    a->j = (Json){0};
    a->status = status;
    json_obj(&a->j);
    json_key(&a->j, "error"), json_cstr(&a->j, msg);
    json_obj_end(&a->j);
}

void
httpans_done(HttpAns *a, const char *key, uint64_t v)
{
    json_obj(&a->j);
    json_key(&a->j, "ok"), json_bool(&a->j, 1);
    if (key) json_key(&a->j, key), json_u64(&a->j, v);
    json_obj_end(&a->j);
    a->status = 200;
}

/* ---- numbers and names ---- */

/* The optional argument a of r as a number (def when absent): 0, or -1
 * (answered 400). */
int
httpans_arg_u64(const HttpdReq *r, HttpdArg a, uint64_t def, uint64_t max,
                uint64_t *out, HttpAns *ans, const char *msg)
{
    *out = def;
    if (!r->has_arg[a]) return 0;
    if (httpparse_u64(r->arg[a], max, out) == 0) return 0;
    httpans_error(ans, 400, msg);
    return -1;
}

/* ---- actions ---- */

const char *
httpact_who(const AuthUser *u)
{
    return u ? u->name : "(open API)";
}

/* POST tubes/NAME/kick and tubes/NAME/pause. */
void
httpact_tube(Server *s, const HttpdReq *r, Tube *t, int kick, const AuthUser *u,
             HttpAns *a)
{
    uint64_t v;
    if (kick) {
        if (httpans_arg_u64(r, HTTPD_ARG_N, 1, HTTPACT_KICK_MAX, &v, a,
                            "n: 0 to 10000") < 0)
            return;
        uint64_t n = 0;
        Heap *from = t->buried.len ? &t->buried : &t->delay;
        for (; n < v; n++) {
            Job *j = heap_peek(from);
            if (!j) break;
            queue_kick_job(s, j);
        }
        log_msg(0, "http: %s kicked %llu jobs of tube %s", httpact_who(u),
                (unsigned long long)n, t->name);
        return httpans_done(a, "kicked", n);
    }
    if (!r->has_arg[HTTPD_ARG_SECONDS])
        return httpans_error(a, 400, "seconds: required, 0 to 4294967295");
    if (httpans_arg_u64(r, HTTPD_ARG_SECONDS, 0, UINT32_MAX, &v, a,
                        "seconds: 0 to 4294967295") < 0)
        return;
    queue_pause(s, t, (uint32_t)v);
    log_msg(0, "http: %s paused tube %s for %llu s", httpact_who(u), t->name,
            (unsigned long long)v);
    httpans_done(a, "seconds", v);
}

/* POST jobs/ID/priority: a ready job moves in its heap; a delayed or
 * buried one keeps its place (due time, bury order); a reserved one is its
 * holder's (409). */
static void
set_priority(Server *s, const HttpdReq *r, Job *j, const AuthUser *u,
             HttpAns *a)
{
    uint64_t pri;
    if (!r->has_arg[HTTPD_ARG_PRI])
        return httpans_error(a, 400, "pri: required, 0 to 4294967295");
    if (httpans_arg_u64(r, HTTPD_ARG_PRI, 0, UINT32_MAX, &pri, a,
                        "pri: 0 to 4294967295") < 0)
        return;
    if (j->state == JOB_RESERVED)
        return httpans_error(a, 409,
                             "the job is reserved: its holder sets its "
                             "priority (release, bury)");
    if (j->state == JOB_READY) { /* its place in the ready heap moves */
        queue_detach(s, j, NULL);
        j->pri = (uint32_t)pri;
        queue_persist_update(s, j);
        queue_make_ready(s, j);
    } else { /* delayed and buried heaps do not order by priority */
        j->pri = (uint32_t)pri;
        queue_persist_update(s, j);
    }
    log_msg(0, "http: %s set the priority of job %llu to %llu", httpact_who(u),
            (unsigned long long)j->id, (unsigned long long)pri);
    httpans_done(a, "pri", pri);
}

/* DELETE jobs/ID, POST jobs/ID/kick, POST jobs/ID/priority. */
void
httpact_job(Server *s, const HttpdReq *r, Job *j, const char *act,
            const AuthUser *u, HttpAns *a)
{
    uint64_t id = j->id;
    if (strcmp(act, "priority") == 0) return set_priority(s, r, j, u, a);
    if (strcmp(act, "kick") == 0) {
        if (j->state != JOB_BURIED && j->state != JOB_DELAYED)
            return httpans_error(a, 409,
                                 "only a buried or delayed job is kicked");
        queue_kick_job(s, j);
        log_msg(0, "http: %s kicked job %llu", httpact_who(u),
                (unsigned long long)id);
        return httpans_done(a, "kicked", id);
    }
    if (j->state == JOB_RESERVED) /* as the protocol's delete by another */
        return httpans_error(a, 409,
                             "the job is reserved: delete it once released "
                             "or through its holder");
    queue_detach(s, j, NULL);
    j->tube->delete_ct++;
    queue_delete(s, j);
    log_msg(0, "http: %s deleted job %llu", httpact_who(u),
            (unsigned long long)id);
    httpans_done(a, "deleted", id);
}

/* ---- clear ---- */

/* state= of clear: a comma list of ready, delayed, buried (default all):
 * the mask, or 0 when it is bad. */
static unsigned
clear_mask(const HttpdReq *r)
{
    static const char *const names[] = {"ready", "delayed", "buried"};
    static const unsigned bits[] = {1u << JOB_READY, 1u << JOB_DELAYED,
                                    1u << JOB_BURIED};
    unsigned list, mask = 0;
    if (!r->has_arg[HTTPD_ARG_STATE]) return bits[0] | bits[1] | bits[2];
    if (httpparse_name_list(r->arg[HTTPD_ARG_STATE], names, 3, &list) < 0)
        return 0;
    for (size_t i = 0; i < 3; i++)
        if (list & 1u << i) mask |= bits[i];
    return mask;
}

void
httpact_clear_start(Server *s, const HttpdReq *r, Tube *t, const char *who,
                    HttpAns *a)
{
    unsigned mask = clear_mask(r);
    (void)s;
    if (!mask)
        return httpans_error(a, 400,
                             "state: a comma list of ready, delayed, buried");
    HttpClear *c = calloc(1, sizeof *c);
    if (!c) return httpans_error(a, 500, "out of memory");
    tube_ref(t); /* deleting its last job must not free it */
    c->t = t;
    c->mask = mask;
    c->left = (mask & 1u << JOB_READY ? t->ready.len : 0) +
              (mask & 1u << JOB_DELAYED ? t->delay.len : 0) +
              (mask & 1u << JOB_BURIED ? t->buried.len : 0);
    snprintf(c->who, sizeof c->who, "%s", who);
    a->clear = c;
}

/* The next job c deletes, or NULL. */
static Job *
clear_next(const HttpClear *c)
{
    Job *j = NULL;
    if (!c->left) return NULL;
    if (c->mask & 1u << JOB_READY) j = heap_peek(&c->t->ready);
    if (!j && c->mask & 1u << JOB_DELAYED) j = heap_peek(&c->t->delay);
    if (!j && c->mask & 1u << JOB_BURIED) j = heap_peek(&c->t->buried);
    return j;
}

void
httpact_clear_free(Server *s, HttpClear *c)
{
    queue_tube_unref(s, c->t);
    free(c);
}

int
httpact_clear_step(Server *s, HttpClear *c, HttpAns *a)
{
    if (s->acked_seq < c->seq) return 0; /* the last step's deletes first */
    for (int k = 0; k < CLEAR_PER_PASS; k++) {
        Job *j = clear_next(c);
        if (!j) {
            log_msg(0, "http: %s cleared %llu jobs of tube %s", c->who,
                    (unsigned long long)c->deleted, c->t->name);
            httpans_done(a, "deleted", c->deleted);
            httpact_clear_free(s, c);
            return 1;
        }
        queue_detach(s, j, NULL);
        c->t->delete_ct++;
        queue_delete(s, j);
        c->left--;
        c->deleted++;
    }
    c->seq = s->applied_seq;
    return 0;
}

/* ---- move ---- */

void
httpact_move(Server *s, Job *j, HttpAns *a)
{
    uint64_t old = j->id;
    if (j->state == JOB_RESERVED)
        return httpans_error(a, 409,
                             "the job is reserved: move it once released");
    char *body = malloc((size_t)j->body_size + 2);
    Tube *to = tubes_get(&s->tubes, a->move_to, strlen(a->move_to));
    if (!body || !to) {
        free(body);
        if (to) queue_tube_unref(s, to);
        return httpans_error(a, 500, "out of memory");
    }
    memcpy(body, j->body, (size_t)j->body_size + 2);
    Job *n = queue_move(s, j, to, body);
    queue_tube_unref(s, to); /* the new job holds its own */
    if (!n) {
        free(body);
        return httpans_error(a, 500, "out of memory");
    }
    bodycache_added(&s->bodies, n, s->applied_seq, s->store != NULL);
    log_msg(0, "http: %s moved job %llu to tube %s as job %llu", a->who,
            (unsigned long long)old, a->move_to, (unsigned long long)n->id);
    json_obj(&a->j);
    json_key(&a->j, "ok"), json_bool(&a->j, 1);
    json_key(&a->j, "moved"), json_u64(&a->j, old);
    json_key(&a->j, "id"), json_u64(&a->j, n->id);
    json_key(&a->j, "tube"), json_cstr(&a->j, a->move_to);
    json_obj_end(&a->j);
    a->status = 200;
}

/* ---- connections ---- */

static const char *
transport(const Conn *c)
{
    switch (c->via) {
    case CONN_VIA_TLS:
        return "tls";
    case CONN_VIA_UNIX:
        return "unix";
    case CONN_VIA_RELAY:
    case CONN_VIA_RELAY_UNIX:
        return "relay";
    default:
        return "tcp";
    }
}

/* "HOST:PORT" of c's peer ([HOST]:PORT for IPv6), or null. */
static void
peer_addr(const Conn *c, Json *o)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    char host[INET6_ADDRSTRLEN], out[INET6_ADDRSTRLEN + 16];
    if ((c->via != CONN_VIA_TCP && c->via != CONN_VIA_TLS) || c->fd < 0 ||
        getpeername(c->fd, (struct sockaddr *)&ss, &len) < 0)
        return json_null(o);
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
        snprintf(out, sizeof out, "%s:%u", host, ntohs(a->sin_port));
    } else if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
        snprintf(out, sizeof out, "[%s]:%u", host, ntohs(a->sin6_port));
    } else {
        return json_null(o);
    }
    json_cstr(o, out);
}

static void
conn_json(Server *s, const Conn *c, Json *o)
{
    const Session *se = &c->se;
    double idle = ev_now(s->loop) - c->last_cmd;
    json_obj(o);
    json_key(o, "id"), json_u64(o, c->id);
    json_key(o, "transport"), json_cstr(o, transport(c));
    json_key(o, "addr"), peer_addr(c, o);
    json_key(o, "identity");
    if (c->user)
        json_cstr(o, c->user->name);
    else
        json_null(o);
    json_key(o, "using");
    if (se->use)
        json_str(o, se->use->name, se->use->name_len);
    else
        json_null(o);
    json_key(o, "watching");
    json_arr(o);
    for (size_t i = 0; i < se->watch.len; i++) {
        const Tube *t = se->watch.items[i];
        json_str(o, t->name, t->name_len);
    }
    json_arr_end(o);
    json_key(o, "reserved"), json_u64(o, se->reserved.len);
    json_key(o, "waiting"), json_bool(o, se->waiting != 0);
    json_key(o, "producer"), json_bool(o, c->producer);
    json_key(o, "worker"), json_bool(o, c->worker);
    json_key(o, "age"), json_i64(o, (mono_ns() - c->opened_ns) / NS_PER_SEC);
    json_key(o, "idle"), json_i64(o, idle > 0 ? (int64_t)idle : 0);
    json_obj_end(o);
}

void
httpact_connections(Server *s, HttpAns *a)
{
    Conn *c = s->conns, *last = NULL;
    size_t n = 0, listed = 0;
    for (; c; c = c->next, n++) /* newest first: the oldest is last */
        last = c;
    json_obj(&a->j);
    json_key(&a->j, "count"), json_u64(&a->j, n);
    listed = n < HTTPACT_CONNS_MAX ? n : HTTPACT_CONNS_MAX;
    json_key(&a->j, "listed"), json_u64(&a->j, listed);
    json_key(&a->j, "truncated"), json_bool(&a->j, listed < n);
    json_key(&a->j, "connections");
    json_arr(&a->j);
    for (c = last; c && listed; c = c->prev, listed--)
        conn_json(s, c, &a->j);
    json_arr_end(&a->j);
    json_obj_end(&a->j);
    a->status = 200;
}

/* ---- history ---- */

/* The ring: HTTPACT_HIST_POINTS + 1 samples of the cumulative counters
 * (puts, reserves, deletes, timeouts), the latest at head. */
#define HIST_SLOTS (HTTPACT_HIST_POINTS + 1)
typedef struct HttpHist {
    ev_timer w;
    double interval; /* seconds */
    size_t head, n;  /* newest slot; samples held */
    int64_t mono[HIST_SLOTS], unix_s[HIST_SLOTS];
    uint64_t c[HIST_SLOTS][4];
} HttpHist;

static void
hist_sample(Server *s, HttpHist *h)
{
    size_t k = h->n ? (h->head + 1) % HIST_SLOTS : 0;
    h->mono[k] = mono_ns();
    h->unix_s[k] = wall_ns() / NS_PER_SEC;
    h->c[k][0] = s->total_jobs;
    h->c[k][1] = s->handed_ct;
    h->c[k][2] = s->deleted_ct;
    h->c[k][3] = s->timeout_ct;
    h->head = k;
    if (h->n < HIST_SLOTS) h->n++;
}

static void
hist_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    Server *s = w->data;
    (void)loop, (void)revents;
    hist_sample(s, s->hist);
}

int
httpact_hist_open(Server *s, unsigned interval_ms)
{
    HttpHist *h = calloc(1, sizeof *h);
    if (!h) return -1;
    h->interval = interval_ms / 1000.0;
    s->hist = h;
    hist_sample(s, h);
    ev_timer_init(&h->w, hist_cb, h->interval, h->interval);
    h->w.data = s;
    ev_timer_start(s->loop, &h->w);
    return 0;
}

void
httpact_hist_close(Server *s)
{
    if (!s->hist) return;
    ev_timer_stop(s->loop, &s->hist->w);
    free(s->hist);
    s->hist = NULL;
}

void
httpact_history(Server *s, HttpAns *a)
{
    static const char *const keys[] = {"puts", "reserves", "deletes",
                                       "timeouts"};
    const HttpHist *h = s->hist;
    size_t pts = h->n ? h->n - 1 : 0;
    size_t first = (h->head + HIST_SLOTS - pts) % HIST_SLOTS; /* oldest */
    json_obj(&a->j);
    json_key(&a->j, "interval");
    if (h->interval >= 1)
        json_u64(&a->j, (uint64_t)h->interval);
    else /* a test's seam (ROCKSTALKD_FAULT_HTTP_HIST_MS) */
        json_dbl(&a->j, h->interval, 3);
    json_key(&a->j, "t");
    json_arr(&a->j);
    for (size_t i = 1; i <= pts; i++)
        json_i64(&a->j, h->unix_s[(first + i) % HIST_SLOTS]);
    json_arr_end(&a->j);
    for (int k = 0; k < 4; k++) {
        json_key(&a->j, keys[k]);
        json_arr(&a->j);
        for (size_t i = 1; i <= pts; i++) {
            size_t x = (first + i) % HIST_SLOTS,
                   p = (first + i - 1) % HIST_SLOTS;
            double dt = (double)(h->mono[x] - h->mono[p]) / 1e9;
            uint64_t d = h->c[x][k] >= h->c[p][k] ? h->c[x][k] - h->c[p][k] : 0;
            json_dbl(&a->j, dt > 0 ? (double)d / dt : 0, 2);
        }
        json_arr_end(&a->j);
    }
    json_obj_end(&a->j);
    a->status = 200;
}
