/* httpapi.c - see httpapi.h. */
#include "server/httpapi.h"

#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "base/log.h"
#include "cluster/nodestep.h"
#include "http/httpd.h"
#include "http/httpparse.h"
#include "http/json.h"
#include "queue/queue.h"
#include "proto/proto.h"
#include "server/access.h"
#include "server/httpact.h"
#include "server/httpcluster.h"
#include "server/httpsess.h"
#include "server/httptubes.h"
#include "server/jobreply.h"

/* A request whose answer waits (for the store, a body, the delay). */
typedef struct Held {
    HttpdReq *r;
    unsigned status;   /* 0 with a doc: serve it */
    Json body;         /* the answer; empty while fetch is set */
    uint64_t need;     /* acked_seq it waits for */
    int64_t at;        /* monotonic ns it may leave, at the earliest */
    uint64_t fetch;    /* a job whose body is being read (GET jobs/ID, or
                          a move when move_to is set) */
    HttpClear *clear;  /* a clear under way (owned) */
    uint64_t sent_tag; /* given to the HTTP thread with the answer */
    char move_to[TUBE_NAME_MAX + 1];
    char who[AUTH_WHO_MAX];
} Held;

typedef struct HttpApi HttpApi;
struct HttpApi {
    ev_async async_w;
    ev_timer delay_w;
    ev_idle idle_w; /* --memory: turns the loop while a clear works */
    int clearing;   /* a clear is under way */
    int64_t delay_ns;
    Held held[HTTPD_QUEUE_MAX]; /* at most HTTPD_QUEUE_MAX in flight */
    HttpSessions sess;          /* the console's sessions */
    size_t n;
};

typedef HttpAns Ans;

static void
error(Ans *a, unsigned status, const char *msg)
{
    httpans_error(a, status, msg);
}

/* ---- auth ---- */

/* The identity of r: its bearer token, else its session cookie (which a
 * request other than GET must back with its X-CSRF-Token). 0 and *u
 * (NULL without --auth-file, where a request other than GET passes the
 * Origin check), or -1 (answered 401 or 403). */
static int
identify(Server *s, const HttpdReq *r, const AuthUser **u, Ans *a)
{
    HttpSessions *ss = &s->httpapi->sess;
    HttpSess *e = NULL;
    *u = NULL;
    if (!s->access)
        return r->method == HTTPD_GET || httpsess_open_check(ss, r, a) ? 0 : -1;
    if (r->token[0])
        *u = auth_by_token(&s->access->table, r->token, strlen(r->token));
    else if (!r->auth && r->sid[0])
        *u = httpsess_user(s, ss, r, &e);
    if (*u && e && r->method != HTTPD_GET && !httpsess_csrf_ok(r, e->csrf)) {
        error(a, 403, "csrf");
        return -1;
    }
    if (*u) return 0;
    error(a, 401,
          r->auth || r->sid[0] ? "bad token"
                               : "authentication required: "
                                 "Authorization: Bearer TOKEN");
    return -1;
}

/* Whether u may act with class bit on the tube named name (NULL: on some
 * tube, the server-wide documents); answers 403 if not. */
static int
allowed(const AuthUser *u, unsigned bit, const char *name, Ans *a)
{
    if (!u) return 1;
    unsigned bits = name ? auth_bits(u, name) : u->any;
    if (bits & bit) return 1;
    error(a, 403,
          bit == AUTH_ADMIN ? "the identity lacks admin on the tube"
                            : "the identity lacks inspect on the tube");
    return 0;
}

/* ---- jobs as JSON ---- */

static int64_t
time_left(const Job *j)
{
    if (j->state != JOB_RESERVED && j->state != JOB_DELAYED) return 0;
    int64_t left = (j->deadline - mono_ns()) / NS_PER_SEC;
    return left > 0 ? left : 0;
}

static void
job_fields(const Server *s, const Job *j, Json *o)
{
    json_key(o, "id"), json_u64(o, j->id);
    json_key(o, "tube"), json_str(o, j->tube->name, j->tube->name_len);
    json_key(o, "state"), json_cstr(o, job_state_name(j));
    json_key(o, "pri"), json_u64(o, j->pri);
    json_key(o, "delay"), json_u64(o, j->delay);
    json_key(o, "ttr"), json_u64(o, j->ttr);
    json_key(o, "age"),
        json_i64(o, (state_wall_ns(s) - j->created_at) / NS_PER_SEC);
    json_key(o, "time-left"), json_i64(o, time_left(j));
    json_key(o, "body-size"), json_u64(o, j->body_size);
}

/* Length of the longest prefix of p[0..n) that is whole UTF-8 characters,
 * or -1 when p[0..n) is not valid UTF-8 (a character cut at n is fine:
 * the prefix stops before it). */
static long
utf8_prefix(const unsigned char *p, size_t n, size_t cap)
{
    size_t i = 0, good = 0;
    while (i < n) {
        unsigned c = p[i];
        size_t k = c < 0x80         ? 1
                   : (c >> 5) == 6  ? 2
                   : (c >> 4) == 14 ? 3
                   : (c >> 3) == 30 ? 4
                                    : 0;
        if (!k || (k == 2 && c < 0xc2) || (k == 4 && c > 0xf4)) return -1;
        if (i + k > n) return -1;
        for (size_t m = 1; m < k; m++)
            if ((p[i + m] & 0xc0) != 0x80) return -1;
        if (k == 3 &&
            ((c == 0xe0 && p[i + 1] < 0xa0) || (c == 0xed && p[i + 1] >= 0xa0)))
            return -1; /* overlong, or a surrogate */
        if (k == 4 &&
            ((c == 0xf0 && p[i + 1] < 0x90) || (c == 0xf4 && p[i + 1] >= 0x90)))
            return -1;
        i += k;
        if (i <= cap) good = i;
    }
    return (long)good;
}

/* The body fields of a job whose body is resident (or omitted). */
static void
body_fields(const Job *j, Json *o)
{
    size_t n = j->body_size;
    if (n > HTTPAPI_BODY_MAX) {
        json_key(o, "body"), json_null(o);
        json_key(o, "body-omitted"), json_bool(o, 1);
        json_key(o, "preview"), json_null(o);
        return;
    }
    char *b64 = malloc(4 * ((n + 2) / 3) + 1);
    if (!b64) {
        o->failed = 1;
        return;
    }
    int k = EVP_EncodeBlock((unsigned char *)b64,
                            (const unsigned char *)j->body, (int)n);
    json_key(o, "body"), json_str(o, b64, (size_t)k);
    free(b64);
    json_key(o, "body-omitted"), json_bool(o, 0);
    long pre =
        utf8_prefix((const unsigned char *)j->body, n, HTTPAPI_PREVIEW_MAX);
    json_key(o, "preview");
    if (pre < 0)
        json_null(o);
    else
        json_str(o, j->body, (size_t)pre);
}

/* GET jobs/ID once j's body is in memory (or could not be read). */
static void
job_doc(const Server *s, const Job *j, int unreadable, Json *o)
{
    json_obj(o);
    job_fields(s, j, o);
    json_key(o, "file"), json_u64(o, 0);
    json_key(o, "reserves"), json_u64(o, j->reserves);
    json_key(o, "timeouts"), json_u64(o, j->timeouts);
    json_key(o, "releases"), json_u64(o, j->releases);
    json_key(o, "buries"), json_u64(o, j->buries);
    json_key(o, "kicks"), json_u64(o, j->kicks);
    if (unreadable) {
        json_key(o, "body"), json_null(o);
        json_key(o, "body-error"), json_cstr(o, "cannot read the body");
    } else {
        body_fields(j, o);
    }
    json_obj_end(o);
}

/* ---- listing ---- */

/* A bounded max-heap (by less) of the k least elements seen. */
typedef struct Best {
    void **v;
    size_t n, k;
    int (*less)(const void *, const void *);
} Best;

static void
best_sift(Best *b, size_t c)
{
    for (;;) {
        size_t l = 2 * c + 1, m = c;
        if (l < b->n && b->less(b->v[m], b->v[l])) m = l;
        if (l + 1 < b->n && b->less(b->v[m], b->v[l + 1])) m = l + 1;
        if (m == c) return;
        void *t = b->v[c];
        b->v[c] = b->v[m], b->v[m] = t;
        c = m;
    }
}

static void
best_add(Best *b, void *x)
{
    if (b->n == b->k) {
        if (!b->less(x, b->v[0])) return;
        b->v[0] = x;
        best_sift(b, 0);
        return;
    }
    size_t c = b->n++;
    b->v[c] = x;
    while (c > 0 && b->less(b->v[(c - 1) / 2], b->v[c])) {
        void *t = b->v[c];
        b->v[c] = b->v[(c - 1) / 2], b->v[(c - 1) / 2] = t;
        c = (c - 1) / 2;
    }
}

/* The up to k elements of h that come after cur (NULL: from the first), in
 * order, into out; returns how many. Within the first HEAP_FIRST_MAX
 * elements a best-first walk (O(k log k)); deeper, one pass over the heap
 * (O(len log k)). */
static size_t
heap_after(const Heap *h, const void *cur, void **out, size_t k)
{
    void *first[HEAP_FIRST_MAX];
    size_t n = heap_first(h, first, HEAP_FIRST_MAX), i = 0;
    if (cur) {
        while (i < n && first[i] != cur)
            i++;
        i++; /* past it (n + 1 when not found) */
    }
    if (i + k <= n || n == h->len) {
        size_t got = 0;
        for (; i < n && got < k; i++)
            out[got++] = first[i];
        return got;
    }
    Best b = {.v = out, .k = k, .less = h->less};
    for (size_t x = 0; x < h->len; x++)
        if (h->less(cur, h->data[x])) best_add(&b, h->data[x]);
    size_t got = b.n;
    void *tmp[HTTPAPI_LIMIT_MAX + 1];
    for (size_t m = got; m > 0; m--) { /* pop the largest last */
        tmp[m - 1] = b.v[0];
        b.v[0] = b.v[--b.n];
        best_sift(&b, 0);
    }
    memcpy(out, tmp, got * sizeof *out);
    return got;
}

/* The reserved jobs of t after job cur (NULL: from the first), soonest
 * deadline first, up to k; -1 when cur is not among them. */
static long
reserved_after(const Server *s, const Tube *t, const Job *cur, Job **out,
               size_t k)
{
    size_t all = t->reserved_ct, i = 0, got = 0;
    Job **v = malloc((all ? all : 1) * sizeof *v);
    if (!v) abort(); /* out of memory */
    size_t n = queue_reserved_of(s, t, v, all);
    if (cur) {
        while (i < n && v[i] != cur)
            i++;
        if (i == n) {
            free(v);
            return -1;
        }
        i++;
    }
    for (; i < n && got < k; i++)
        out[got++] = v[i];
    free(v);
    return (long)got;
}

/* state= of GET tubes/NAME/jobs, and the job state each names. */
static const char *const state_names[] = {"ready", "delayed", "buried",
                                          "reserved"};
static const uint8_t state_of[] = {JOB_READY, JOB_DELAYED, JOB_BURIED,
                                   JOB_RESERVED};

static const Heap *
heap_of(const Tube *t, uint8_t st)
{
    return st == JOB_READY     ? &t->ready
           : st == JOB_DELAYED ? &t->delay
                               : &t->buried;
}

/* GET tubes/NAME/jobs. */
static void
list_jobs(Server *s, const HttpdReq *r, Tube *t, Ans *a)
{
    uint64_t after, limit;
    const char *sn =
        r->has_arg[HTTPD_ARG_STATE] ? r->arg[HTTPD_ARG_STATE] : "ready";
    int si = httpparse_name_index(sn, state_names, 4);
    if (si < 0)
        return error(a, 400, "state: ready, delayed, buried or reserved");
    int st = state_of[si];
    if (httpans_arg_u64(r, HTTPD_ARG_AFTER, 0, UINT64_MAX, &after, a,
                        "after: a job id") < 0 ||
        httpans_arg_u64(r, HTTPD_ARG_LIMIT, HTTPAPI_LIMIT_DEFAULT,
                        HTTPAPI_LIMIT_MAX, &limit, a, "limit: 1 to 1000") < 0)
        return;
    if (limit == 0) return error(a, 400, "limit: 1 to 1000");
    Job *cur = after ? jobtable_find(&s->jobs, after) : NULL;
    if (after && (!cur || cur->tube != t || cur->state != st))
        return error(a, 410,
                     "the job after= names is no longer in this "
                     "list: start again from the first page");
    void *v[HTTPAPI_LIMIT_MAX + 1];
    long n = st == JOB_RESERVED
                 ? reserved_after(s, t, cur, (Job **)v, limit + 1)
                 : (long)heap_after(heap_of(t, (uint8_t)st), cur, v, limit + 1);
    if (n < 0) n = 0;
    int more = (uint64_t)n > limit;
    if (more) n = (long)limit;
    jobreply_confirm_any(s); /* a deposed leader's answer waits (15.7) */
    json_obj(&a->j);
    json_key(&a->j, "tube"), json_str(&a->j, t->name, t->name_len);
    json_key(&a->j, "state"), json_cstr(&a->j, sn);
    json_key(&a->j, "jobs");
    json_arr(&a->j);
    for (long i = 0; i < n; i++) {
        json_obj(&a->j);
        job_fields(s, v[i], &a->j);
        json_obj_end(&a->j);
    }
    json_arr_end(&a->j);
    json_key(&a->j, "next");
    if (more)
        json_u64(&a->j, ((Job *)v[n - 1])->id);
    else
        json_null(&a->j);
    json_obj_end(&a->j);
    a->status = 200;
}

/* ---- routing ---- */

/* Wrong method: 405 (the HTTP thread adds Allow). */
static int
method_is(const HttpdReq *r, HttpdMethod m, Ans *a)
{
    if (r->method == m) return 1;
    error(a, 405, "method not allowed");
    return 0;
}

/* tubes/NAME/SUB. */
static void
tube_route(Server *s, const HttpdReq *r, const AuthUser *u, Ans *a)
{
    const char *name = r->path + strlen("tubes/"), *sub;
    size_t len;
    if (httpparse_tube_path(name, &len, &sub) < 0)
        return error(a, 404, "not found");
    int list = strcmp(sub, "jobs") == 0, kick = strcmp(sub, "kick") == 0;
    int clear = strcmp(sub, "clear") == 0;
    if (!list && !kick && !clear && strcmp(sub, "pause") != 0)
        return error(a, 404, "not found");
    if (!method_is(r, list ? HTTPD_GET : HTTPD_POST, a)) return;
    char nm[HTTPD_PATH_MAX + 1];
    memcpy(nm, name, len);
    nm[len] = '\0';
    if (!allowed(u, list ? AUTH_INSPECT : AUTH_ADMIN, nm, a)) return;
    Tube *t = len ? tubes_find(&s->tubes, nm, len) : NULL;
    if (!t) {
        if (list) jobreply_confirm_any(s);
        return error(a, 404, "no such tube");
    }
    if (list) return list_jobs(s, r, t, a);
    if (clear) return httpact_clear_start(s, r, t, httpact_who(u), a);
    httpact_tube(s, r, t, kick, u, a);
}

/* POST jobs/ID/move?tube=T: admin on T too; the body read first. */
static void
move_route(Server *s, const HttpdReq *r, Job *j, const AuthUser *u, Ans *a)
{
    const char *to = r->arg[HTTPD_ARG_TUBE];
    if (!r->has_arg[HTTPD_ARG_TUBE] || !proto_name_valid(to, strlen(to)))
        return error(a, 400, "tube: a valid tube name");
    if (!allowed(u, AUTH_ADMIN, to, a)) return;
    if (j->state == JOB_RESERVED)
        return error(a, 409, "the job is reserved: move it once released");
    snprintf(a->move_to, sizeof a->move_to, "%s", to);
    snprintf(a->who, sizeof a->who, "%s", httpact_who(u));
    if (j->body) return httpact_move(s, j, a);
    a->fetch = j->id; /* the move is made once its body is in memory */
    bodycache_fetch(&s->bodies, j, 1);
}

/* jobs/ID and jobs/ID/ACTION. */
static void
job_route(Server *s, const HttpdReq *r, const AuthUser *u, Ans *a)
{
    const char *act;
    uint64_t id;
    int bad_id = httpparse_job_path(r->path + strlen("jobs/"), &id, &act) < 0;
    if (act && strcmp(act, "kick") != 0 && strcmp(act, "priority") != 0 &&
        strcmp(act, "move") != 0)
        return error(a, 404, "not found");
    if (!act && r->method == HTTPD_POST)
        return error(a, 405, "method not allowed");
    if (act && !method_is(r, HTTPD_POST, a)) return;
    if (bad_id) return error(a, 400, "bad job id");
    Job *j = jobtable_find(&s->jobs, id);
    int write = act || r->method == HTTPD_DELETE;
    if (!j) {
        if (!write) jobreply_confirm_any(s);
        return error(a, 404, "no such job");
    }
    if (!allowed(u, write ? AUTH_ADMIN : AUTH_INSPECT, j->tube->name, a))
        return;
    if (act && strcmp(act, "move") == 0) return move_route(s, r, j, u, a);
    if (write) return httpact_job(s, r, j, act ? act : "delete", u, a);
    jobreply_confirm(s, &j, 1);
    a->status = 200;
    a->fetch = id; /* the answer is made once its body is in memory */
    if (!j->body) bodycache_fetch(&s->bodies, j, 1);
}

/* A published document's auth check: status 0 serves it. */
static void
doc_check(const Server *s, const HttpdReq *r, const AuthUser *u, Ans *a)
{
    if (strncmp(r->path, "tubes/", 6) == 0) {
        if (allowed(u, AUTH_INSPECT, r->path + 6, a)) a->status = 0;
        return;
    }
    if (strcmp(r->path, "tubes") == 0 && u && !u->superuser) {
        httptubes_render(s, u, &a->j, NULL); /* the tubes it may inspect */
        a->status = 200;
        return;
    }
    if (allowed(u, AUTH_INSPECT, NULL, a)) a->status = 0;
}

/* Runs r. */
static void
run(Server *s, HttpdReq *r, Ans *a)
{
    const AuthUser *u;
    NodeStats ns;
    if (strcmp(r->path, "session") == 0)
        return httpsess_route(s, &s->httpapi->sess, r, a);
    if (identify(s, r, &u, a) < 0) return;
    if (r->doc) return doc_check(s, r, u, a);
    if (strcmp(r->path, "cluster/transfer") == 0) /* 409 on a follower */
        return httpcluster_transfer(s, r, u, a);
    if (!node_serves(s)) {
        node_stats(s, &ns);
        a->status = 503;
        json_obj(&a->j);
        json_key(&a->j, "error"), json_cstr(&a->j, "this node does not serve");
        json_key(&a->j, "leader"), json_u64(&a->j, ns.leader);
        json_obj_end(&a->j);
        return;
    }
    if (strncmp(r->path, "tubes/", 6) == 0) return tube_route(s, r, u, a);
    if (strncmp(r->path, "jobs/", 5) == 0) return job_route(s, r, u, a);
    if (strcmp(r->path, "connections") == 0) {
        if (!method_is(r, HTTPD_GET, a)) return;
        if (u && !u->superuser)
            return error(a, 403,
                         "listing connections needs a bare admin "
                         "identity");
        return httpact_connections(s, a);
    }
    if (strcmp(r->path, "history") == 0) {
        if (method_is(r, HTTPD_GET, a) && allowed(u, AUTH_INSPECT, NULL, a))
            httpact_history(s, a);
        return;
    }
    error(a, 404, "not found");
}

/* ---- the held answers ---- */

/* Makes h's answer once its job's body is in memory: 1 when it is. */
static int
fetched(Server *s, Held *h)
{
    Job *j = jobtable_find(&s->jobs, h->fetch);
    Ans a = {0};
    if (!j) {
        error(&a, 404, "no such job");
    } else if (h->move_to[0] && j->body) {
        memcpy(a.move_to, h->move_to, sizeof a.move_to);
        memcpy(a.who, h->who, sizeof a.who);
        httpact_move(s, j, &a);
        h->need = state_reply_seq(s);
    } else if (h->move_to[0] && (j->flags & JOB_F_UNREADABLE)) {
        queue_body_unreadable(s, NULL, j);
        error(&a, 500, "cannot read the body");
    } else if (!j->body && (j->flags & JOB_F_UNREADABLE)) {
        queue_body_unreadable(s, NULL, j);
        a.status = 200;
        job_doc(s, j, 1, &a.j);
    } else if (!j->body) {
        if (!(j->flags & JOB_F_FETCHING)) bodycache_fetch(&s->bodies, j, 0);
        return 0;
    } else {
        a.status = 200;
        job_doc(s, j, 0, &a.j);
        bodycache_used(&s->bodies, j);
        if (queue_job_reply_seq(s, j) > h->need)
            h->need = queue_job_reply_seq(s, j);
    }
    h->status = a.status;
    h->body = a.j;
    h->fetch = 0;
    return 1;
}

/* One step of h's clear: 1 once it is done (its answer made). */
static int
cleared(Server *s, Held *h)
{
    Ans a = {0};
    if (!httpact_clear_step(s, h->clear, &a)) {
        s->httpapi->clearing = 1;
        return 0;
    }
    h->clear = NULL;
    h->status = a.status;
    h->body = a.j;
    h->need = state_reply_seq(s); /* its last deletes */
    return 1;
}

static void
answer(Server *s, Held *h)
{
    unsigned st = h->status;
    if (h->body.failed) {
        json_free(&h->body);
        h->body = (Json){0};
        st = 500;
    }
    if (st == 200) h->r->sent_tag = h->sent_tag;
    httpd_answer(s->http, h->r, st, h->body.buf, h->body.len);
}

void
httpapi_step(Server *s)
{
    HttpApi *api = s->httpapi;
    int64_t now = mono_ns(), next = INT64_MAX;
    size_t i = 0;
    if (!api || !api->n) return;
    api->clearing = 0;
    while (i < api->n) {
        Held *h = &api->held[i];
        if (h->fetch && !fetched(s, h)) {
            i++;
            continue;
        }
        if (h->clear && !cleared(s, h)) {
            i++;
            continue;
        }
        if (s->acked_seq < h->need || now < h->at) {
            if (h->at > now && h->at < next) next = h->at;
            i++;
            continue;
        }
        answer(s, h);
        api->held[i] = api->held[--api->n];
    }
    /* With a store the acknowledgement a clear waits for wakes the loop;
     * without one (--memory) the idle watcher keeps it turning. */
    if (api->clearing && !s->store)
        ev_idle_start(s->loop, &api->idle_w);
    else
        ev_idle_stop(s->loop, &api->idle_w);
    if (next != INT64_MAX && !ev_is_active(&api->delay_w)) {
        ev_timer_set(&api->delay_w, (double)(next - now) / 1e9 + 0.001, 0.);
        ev_timer_start(s->loop, &api->delay_w);
    }
}

static void
take_cb(struct ev_loop *loop, ev_async *w, int revents)
{
    Server *s = w->data;
    HttpApi *api = s->httpapi;
    HttpdReq *rs[HTTPD_QUEUE_MAX];
    (void)loop, (void)revents;
    uint64_t sent = httpd_take_sent(s->http);
    if (sent) httpcluster_sent(s, sent); /* a transfer's answer left */
    size_t n = httpd_take(s->http, rs, HTTPD_QUEUE_MAX - api->n);
    for (size_t i = 0; i < n; i++) {
        Ans a = {0};
        run(s, rs[i], &a);
        Held *h = &api->held[api->n++];
        *h = (Held){.r = rs[i],
                    .status = a.status,
                    .body = a.j,
                    .need = state_reply_seq(s),
                    .at = mono_ns() + api->delay_ns,
                    .fetch = a.fetch,
                    .clear = a.clear,
                    .sent_tag = a.sent_tag};
        memcpy(h->move_to, a.move_to, sizeof h->move_to);
        memcpy(h->who, a.who, sizeof h->who);
    }
    if (n == HTTPD_QUEUE_MAX) ev_async_send(s->loop, &api->async_w);
}

static void
delay_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop, (void)w, (void)revents; /* prepare answers them */
}

static void
idle_cb(struct ev_loop *loop, ev_idle *w, int revents)
{
    (void)loop, (void)w, (void)revents; /* prepare answers them */
}

void
httpapi_notify(void *arg)
{
    Server *s = arg;
    ev_async_send(s->loop, &s->httpapi->async_w);
}

int
httpapi_open(Server *s, unsigned delay_ms)
{
    HttpApi *api = calloc(1, sizeof *api);
    if (!api) return -1;
    if (httpsess_init(&api->sess) < 0) {
        free(api);
        return -1;
    }
    api->delay_ns = (int64_t)delay_ms * 1000000;
    ev_async_init(&api->async_w, take_cb);
    api->async_w.data = s;
    ev_async_start(s->loop, &api->async_w);
    ev_timer_init(&api->delay_w, delay_cb, 0., 0.);
    ev_idle_init(&api->idle_w, idle_cb);
    s->httpapi = api;
    const char *hist = getenv("ROCKSTALKD_FAULT_HTTP_HIST_MS");
    unsigned ms = hist ? (unsigned)atoi(hist) : 0;
    return httpact_hist_open(s, ms ? ms : HTTPACT_HIST_S * 1000);
}

void
httpapi_close(Server *s)
{
    HttpApi *api = s->httpapi;
    if (!api) return;
    for (size_t i = 0; i < api->n; i++) {
        Held *h = &api->held[i];
        json_free(&h->body);
        if (h->clear) httpact_clear_free(s, h->clear);
        httpd_answer(s->http, h->r, 503, NULL, 0);
    }
    ev_async_stop(s->loop, &api->async_w);
    ev_timer_stop(s->loop, &api->delay_w);
    ev_idle_stop(s->loop, &api->idle_w);
    httpact_hist_close(s);
    free(api);
    s->httpapi = NULL;
}
