/* cmd.c - see cmd.h. One handler per command, in protocol order. */
#include "server/cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "base/common.h"
#include "cluster/node.h"
#include "cluster/nodeops.h"
#include "proto/proto.h"
#include "queue/persist.h"
#include "queue/queue.h"
#include "server/access.h"
#include "server/backup.h"
#include "server/ext.h"
#include "server/jobreply.h"
#include "server/stats.h"

static void
set_producer(Conn *c)
{
    if (!c->producer) {
        c->producer = 1;
        c->srv->cur_producers++;
    }
}

static void
set_worker(Conn *c)
{
    if (!c->worker) {
        c->worker = 1;
        c->srv->cur_workers++;
    }
}

/* Discards the announced body (and its CRLF) of a put that cannot be
 * taken, then replies msg: a client's data is never run as commands. */
static void
skip_body(Conn *c, const Cmd *cmd, const char *msg)
{
    c->skip_left = (uint64_t)cmd->body_size + 2;
    c->skip_reply = msg;
    c->in_state = IN_SKIP;
}

/* put: JOB_TOO_BIG is decided before trailing garbage, and its body is
 * discarded, as is the body of a put with no memory for it (1.12 skips
 * it too); a put that gets this far uses up an id, as in 1.12. */
static void
cmd_put(Conn *c, const Cmd *cmd)
{
    Server *s = c->srv;
    if (cmd->body_size > s->cfg.max_job_size) {
        skip_body(c, cmd, "JOB_TOO_BIG\r\n");
        return;
    }
    if (cmd->put_garbage) {
        conn_reply_lit(c, "BAD_FORMAT\r\n");
        return;
    }
    set_producer(c);
    c->in_body = malloc((size_t)cmd->body_size + 2);
    if (!c->in_body) {
        skip_body(c, cmd, "OUT_OF_MEMORY\r\n");
        return;
    }
    c->put = *cmd;
    c->put.name = NULL; /* points into the input, which moves */
    c->put_key_len = (uint8_t)(cmd->op == OP_PUT_UNIQUE ? cmd->name_len : 0);
    if (c->put_key_len) memcpy(c->put_key, cmd->name, c->put_key_len);
    c->put_id = s->next_id++;
    c->in_read = 0;
    c->in_state = IN_BODY;
}

/* put-unique: if the used tube has seen c's key within its window, replies
 * INSERTED with the job that key created (as the first put-unique was
 * answered) and returns 1. */
static int
put_seen(Conn *c)
{
    Server *s = c->srv;
    Tube *t = c->se.use;
    DedupKey *k =
        dedup_find(&s->dedup, t->name, t->name_len, c->put_key, c->put_key_len);
    if (k && k->job_gone && k->expire_ns <= state_wall_ns(s)) {
        queue_dedup_forget(s, k); /* its window is over: the sweep is late */
        k = NULL;
    }
    if (!k) return 0;
    s->dedup_hits++;
    conn_replyf(c, "INSERTED %llu\r\n", (unsigned long long)k->id);
    return 1;
}

/* Remembers c's put-unique key for new job j; -1 out of memory. */
static int
remember_key(Conn *c, Job *j)
{
    Server *s = c->srv;
    int64_t until =
        state_wall_ns(s) + (int64_t)s->cfg.dedup_window * NS_PER_SEC;
    if (!dedup_add(&s->dedup, j->tube->name, j->tube->name_len, c->put_key,
                   c->put_key_len, j->id, until))
        return -1;
    j->flags |= JOB_F_UNIQUE;
    return 0;
}

/* Applies c's put of body (malloc'd, body_size + 2 bytes; the job takes
 * it): ref is where the body ring holds it, or NULL. */
static void
put_apply(Conn *c, char *body, const StoreRingRef *ref)
{
    Server *s = c->srv;
    const Cmd *p = &c->put;
    Job *j = queue_job_new(s, c->se.use, c->put_id, p->pri, p->delay, p->ttr,
                           p->body_size, body, state_wall_ns(s));
    if (!j || (c->put_key_len && remember_key(c, j) < 0)) {
        if (j) {
            j->body = NULL; /* never accounted in the body cache */
            queue_job_free(s, j);
        }
        free(body);
        conn_reply_lit(c, "OUT_OF_MEMORY\r\n");
        return;
    }
    s->total_jobs++;
    j->tube->total_jobs++;
    if (p->delay) {
        queue_make_delayed(s, j, mono_ns() + (int64_t)p->delay * NS_PER_SEC);
        queue_persist_put_ring(s, j, ref);
    } else {
        queue_persist_put_ring(s, j, ref); /* before any reserver sees it */
        queue_make_ready(s, j);
    }
    /* after the put's seq: a body past the budget goes once that is acked */
    bodycache_added(&s->bodies, j, s->applied_seq, s->store != NULL);
    char line[sizeof "INSERTED \r\n" + DEC_U64_MAX]; /* no printf per put */
    memcpy(line, "INSERTED ", 9);
    size_t n = 9 + dec_u64(line + 9, j->id);
    memcpy(line + n, "\r\n", 2);
    conn_reply(c, line, n + 2);
}

/* A large body goes to the store's body writer first (store.h, the body
 * ring): c's input waits until it is synced (cmd_ring_done), so that the
 * commit of everyone's small records never waits for it. Returns 1 if it
 * went (the store owns body until it comes back), 0 if not. A put-unique
 * stays on the plain path: its key is checked and taken in one step. */
static int
put_to_ring(Conn *c, char *body)
{
    Server *s = c->srv;
    size_t min = s->store ? store_ring_min(s->store) : 0;
    if (!min || c->put_key_len || c->put.body_size < min) return 0;
    if (ptrset_append(&s->ringwait, c) < 0) return 0; /* the plain path */
    uint64_t t = store_ring_submit(s->store, body, c->put.body_size);
    if (!t) {
        ptrset_remove(&s->ringwait, c);
        return 0;
    }
    c->ring_ticket = t;
    conn_pause(c);
    return 1;
}

void
cmd_put_body(Conn *c)
{
    Server *s = c->srv;
    const Cmd *p = &c->put;
    char *body = c->in_body;
    c->in_body = NULL;
    if (memcmp(body + p->body_size, "\r\n", 2) != 0) {
        free(body);
        conn_reply_lit(c, "EXPECTED_CRLF\r\n");
        return;
    }
    if (c->put_key_len && put_seen(c)) {
        free(body);
        return;
    }
    if (s->draining) {
        free(body);
        conn_reply_lit(c, "DRAINING\r\n");
        return;
    }
    if (!put_to_ring(c, body)) put_apply(c, body, NULL);
}

/* The parked connection whose ring ticket is t, or NULL (it closed). */
static Conn *
ring_waiter(Server *s, uint64_t t)
{
    for (size_t i = 0; i < s->ringwait.len; i++) {
        Conn *c = s->ringwait.items[i];
        if (c->ring_ticket == t) return c;
    }
    return NULL;
}

void
cmd_ring_done(Server *s)
{
    StoreRingDone *d;
    size_t n = s->store ? store_ring_take(s->store, &d) : 0;

    if (!n) return;
    for (size_t i = 0; i < n; i++) {
        Conn *c = ring_waiter(s, d[i].ticket);
        if (!c) { /* closed meanwhile: the put never happened */
            free(d[i].body);
            continue;
        }
        ptrset_remove(&s->ringwait, c);
        c->ring_ticket = 0;
        conn_resume(c);
        if (d[i].ok) {
            put_apply(c, d[i].body, &d[i].ref);
        } else {
            free(d[i].body);
            conn_reply_lit(c, "INTERNAL_ERROR\r\n");
        }
    }
    store_ring_resolved(s->store, s->applied_seq);
}

static void
reply_found(Conn *c, Job *j)
{
    if (j) {
        jobreply_send(c, JR_FOUND, &j, 1);
    } else {
        jobreply_confirm_any(c->srv); /* a deposed leader's waits */
        conn_reply_lit(c, "NOT_FOUND\r\n");
    }
}

static void
cmd_peek(Conn *c, const Cmd *cmd)
{
    Tube *t = c->se.use;
    switch (cmd->op) {
    case OP_PEEK:
        reply_found(c, jobtable_find(&c->srv->jobs, cmd->id));
        break;
    case OP_PEEK_READY:
        reply_found(c, heap_peek(&t->ready));
        break;
    case OP_PEEK_DELAYED:
        reply_found(c, heap_peek(&t->delay));
        break;
    default:
        reply_found(c, heap_peek(&t->buried));
        break;
    }
}

/* Nonzero if any watched tube has a ready job (pauses not considered, as
 * in 1.12's DEADLINE_SOON check). */
static int
any_ready(const Conn *c)
{
    for (size_t i = 0; i < c->se.watch.len; i++)
        if (((Tube *)c->se.watch.items[i])->ready.len) return 1;
    return 0;
}

static void
cmd_reserve(Conn *c, const Cmd *cmd)
{
    set_worker(c);
    if (queue_deadline_soon(&c->se, mono_ns()) && !any_ready(c)) {
        conn_reply_lit(c, "DEADLINE_SOON\r\n");
        return;
    }
    c->se.batch = cmd->op == OP_RESERVE_BATCH ? cmd->count : 0;
    queue_wait(c->srv, &c->se, cmd->op == OP_RESERVE ? -1 : cmd->timeout);
    if (c->se.waiting) conn_pause(c); /* until a job or its timer comes */
}

static void
cmd_reserve_job(Conn *c, const Cmd *cmd)
{
    Job *j = jobtable_find(&c->srv->jobs, cmd->id);
    if (!j || j->state == JOB_RESERVED) {
        conn_reply_lit(c, "NOT_FOUND\r\n");
        return;
    }
    set_worker(c);
    queue_detach(c->srv, j, NULL);
    queue_reserve(c->srv, &c->se, j);
}

/* The job id if c may act on it as its reserver, else NULL. */
static Job *
reserved_by(Conn *c, uint64_t id)
{
    Job *j = jobtable_find(&c->srv->jobs, id);
    return j && queue_holds(&c->se, j) ? j : NULL;
}

static void
cmd_delete(Conn *c, const Cmd *cmd)
{
    Server *s = c->srv;
    Job *j = jobtable_find(&s->jobs, cmd->id);
    if (!j || (j->state == JOB_RESERVED && !queue_holds(&c->se, j))) {
        conn_reply_lit(c, "NOT_FOUND\r\n");
        return;
    }
    queue_detach(s, j, &c->se);
    j->tube->delete_ct++;
    queue_delete(s, j);
    conn_reply_lit(c, "DELETED\r\n");
}

static void
cmd_release(Conn *c, const Cmd *cmd)
{
    Server *s = c->srv;
    Job *j = reserved_by(c, cmd->id);
    if (!j) {
        conn_reply_lit(c, "NOT_FOUND\r\n");
        return;
    }
    int changed = j->pri != cmd->pri;
    queue_detach(s, j, &c->se);
    j->pri = cmd->pri;
    j->delay = cmd->delay;
    j->releases++;
    if (cmd->delay) {
        queue_make_delayed(s, j, mono_ns() + (int64_t)cmd->delay * NS_PER_SEC);
        queue_persist_update(s, j);
    } else {
        queue_requeue(s, j, changed);
    }
    conn_reply_lit(c, "RELEASED\r\n");
}

static void
cmd_bury(Conn *c, const Cmd *cmd)
{
    Job *j = reserved_by(c, cmd->id);
    if (!j) {
        conn_reply_lit(c, "NOT_FOUND\r\n");
        return;
    }
    queue_detach(c->srv, j, &c->se);
    j->pri = cmd->pri;
    j->buries++;
    queue_make_buried(c->srv, j);
    queue_persist_update(c->srv, j);
    conn_reply_lit(c, "BURIED\r\n");
}

static void
cmd_kick(Conn *c, const Cmd *cmd)
{
    Tube *t = c->se.use;
    uint32_t n = 0;
    Heap *from = t->buried.len ? &t->buried : &t->delay;
    for (; n < cmd->count; n++) {
        Job *j = heap_peek(from);
        if (!j) break;
        queue_kick_job(c->srv, j);
    }
    conn_replyf(c, "KICKED %u\r\n", n);
}

static void
cmd_kick_job(Conn *c, const Cmd *cmd)
{
    Job *j = jobtable_find(&c->srv->jobs, cmd->id);
    if (!j || (j->state != JOB_BURIED && j->state != JOB_DELAYED)) {
        conn_reply_lit(c, "NOT_FOUND\r\n");
        return;
    }
    queue_kick_job(c->srv, j);
    conn_reply_lit(c, "KICKED\r\n");
}

static void
cmd_touch(Conn *c, const Cmd *cmd)
{
    Job *j = reserved_by(c, cmd->id);
    if (!j) {
        conn_reply_lit(c, "NOT_FOUND\r\n");
        return;
    }
    queue_touch(c->srv, &c->se, j);
    conn_reply_lit(c, "TOUCHED\r\n");
}

static void
cmd_use(Conn *c, const Cmd *cmd)
{
    Server *s = c->srv;
    Tube *t = tubes_get(&s->tubes, cmd->name, cmd->name_len);
    if (!t) {
        conn_reply_lit(c, "OUT_OF_MEMORY\r\n");
        return;
    }
    c->se.use->using_ct--;
    queue_tube_unref(s, c->se.use);
    c->se.use = t;
    t->using_ct++;
    if (s->access) access_used(c);
    char line[sizeof "USING \r\n" + TUBE_NAME_MAX]; /* no printf per use */
    memcpy(line, "USING ", 6);
    memcpy(line + 6, t->name, t->name_len);
    memcpy(line + 6 + t->name_len, "\r\n", 2);
    conn_reply(c, line, 6 + (size_t)t->name_len + 2);
}

static void
cmd_watch(Conn *c, const Cmd *cmd)
{
    Server *s = c->srv;
    Tube *t = tubes_get(&s->tubes, cmd->name, cmd->name_len);
    if (!t) {
        conn_reply_lit(c, "OUT_OF_MEMORY\r\n");
        return;
    }
    if (ptrset_find(&c->se.watch, t) >= 0) {
        queue_tube_unref(s, t);
    } else if (queue_watch(s, &c->se, t) < 0) {
        queue_tube_unref(s, t);
        conn_reply_lit(c, "OUT_OF_MEMORY\r\n");
        return;
    }
    conn_replyf(c, "WATCHING %zu\r\n", c->se.watch.len);
}

static void
cmd_ignore(Conn *c, const Cmd *cmd)
{
    Tube *t = tubes_find(&c->srv->tubes, cmd->name, cmd->name_len);
    long i = t ? ptrset_find(&c->se.watch, t) : -1;
    if (i >= 0 && c->se.watch.len < 2) {
        conn_reply_lit(c, "NOT_IGNORED\r\n");
        return;
    }
    if (i >= 0) queue_unwatch(c->srv, &c->se, (size_t)i);
    conn_replyf(c, "WATCHING %zu\r\n", c->se.watch.len);
}

static void
cmd_pause(Conn *c, const Cmd *cmd)
{
    Tube *t = tubes_find(&c->srv->tubes, cmd->name, cmd->name_len);
    if (!t) {
        conn_reply_lit(c, "NOT_FOUND\r\n");
        return;
    }
    queue_pause(c->srv, t, cmd->delay);
    conn_reply_lit(c, "PAUSED\r\n");
}

/* list-tubes with --auth-file: only the tubes c may inspect. */
static void
list_permitted(Conn *c, StatsBuf *b)
{
    PtrSet shown = {0};
    const PtrSet *all = &c->srv->tubes.list;
    for (size_t i = 0; i < all->len; i++)
        if (access_may_list(c, all->items[i]) &&
            ptrset_append(&shown, all->items[i]) < 0)
            abort(); /* out of memory, as stats' own buffer */
    stats_list(&shown, b);
    ptrset_free(&shown);
}

static void
cmd_stats(Conn *c, const Cmd *cmd)
{
    Server *s = c->srv;
    StatsBuf b = {0};
    if (cmd->op == OP_STATS) {
        stats_server(s, !s->access || access_sees_all(c), &b);
    } else if (cmd->op == OP_STATS_JOB) {
        Job *j = jobtable_find(&s->jobs, cmd->id);
        if (!j) {
            jobreply_confirm_any(s); /* a deposed leader's waits */
            conn_reply_lit(c, "NOT_FOUND\r\n");
            return;
        }
        stats_job(s, j, &b);
        jobreply_confirm(s, &j, 1); /* a stale leader's waits for ever */
    } else if (cmd->op == OP_STATS_TUBE) {
        Tube *t = tubes_find(&s->tubes, cmd->name, cmd->name_len);
        if (!t) {
            conn_reply_lit(c, "NOT_FOUND\r\n");
            return;
        }
        stats_tube(t, &b);
    } else if (cmd->op == OP_LIST_TUBES && s->access) {
        list_permitted(c, &b);
    } else {
        stats_list(cmd->op == OP_LIST_TUBES ? &s->tubes.list : &c->se.watch,
                   &b);
    }
    if (cmd->op != OP_STATS_JOB) jobreply_confirm_any(s);
    conn_reply_ok(c, b.buf, b.len);
    stats_buf_free(&b);
}

static void
cmd_run(Conn *c, const Cmd *cmd)
{
    switch (cmd->op) {
    case OP_PUT:
    case OP_PUT_UNIQUE:
        return cmd_put(c, cmd);
    case OP_PEEK:
    case OP_PEEK_READY:
    case OP_PEEK_DELAYED:
    case OP_PEEK_BURIED:
        return cmd_peek(c, cmd);
    case OP_RESERVE:
    case OP_RESERVE_TIMEOUT:
    case OP_RESERVE_BATCH:
        return cmd_reserve(c, cmd);
    case OP_LIST_JOBS:
        return ext_list_jobs(c, cmd);
    case OP_CLEAR_TUBE:
        return ext_clear_tube(c, cmd);
    case OP_RESERVE_JOB:
        return cmd_reserve_job(c, cmd);
    case OP_DELETE:
        return cmd_delete(c, cmd);
    case OP_RELEASE:
        return cmd_release(c, cmd);
    case OP_BURY:
        return cmd_bury(c, cmd);
    case OP_KICK:
        return cmd_kick(c, cmd);
    case OP_KICK_JOB:
        return cmd_kick_job(c, cmd);
    case OP_TOUCH:
        return cmd_touch(c, cmd);
    case OP_USE:
        return cmd_use(c, cmd);
    case OP_WATCH:
        return cmd_watch(c, cmd);
    case OP_IGNORE:
        return cmd_ignore(c, cmd);
    case OP_PAUSE_TUBE:
        return cmd_pause(c, cmd);
    case OP_LIST_TUBE_USED:
        return conn_replyf(c, "USING %s\r\n", c->se.use->name);
    case OP_QUIT:
        return conn_close_after_replies(c);
    case OP_SNAPSHOT:
        return node_snapshot_serve(c);
    case OP_BACKUP:
        return backup_serve(c);
    case OP_CLUSTER_STATUS:
        return nodeops_status(c);
    case OP_CLUSTER_TRANSFER:
        return nodeops_transfer(c, cmd->id);
    case OP_CLUSTER_ADD:
        return nodeops_add(c, cmd->id, cmd->addr, cmd->addr_len);
    case OP_CLUSTER_REMOVE:
        return nodeops_remove(c, cmd->id);
    default: /* stats, stats-job, stats-tube, list-tubes(-watched) */
        return cmd_stats(c, cmd);
    }
}

/* The identity may not run cmd: DENIED (a put's body is discarded). */
static void
deny(Conn *c, const Cmd *cmd)
{
    if (cmd->op == OP_PUT || cmd->op == OP_PUT_UNIQUE)
        skip_body(c, cmd, "DENIED\r\n");
    else
        conn_reply_lit(c, "DENIED\r\n");
}

void
cmd_dispatch(Conn *c, const char *line, size_t len)
{
    Server *s = c->srv;
    Cmd cmd;
    if (s->access && access_line(c, line, len)) return; /* the handshake */
    ParseStatus st = proto_parse(line, len, &cmd);
    if (cmd.counted) s->op_ct[cmd.op]++;
    if (st == PARSE_UNKNOWN_COMMAND)
        conn_reply_lit(c, "UNKNOWN_COMMAND\r\n");
    else if (st == PARSE_BAD_FORMAT)
        conn_reply_lit(c, "BAD_FORMAT\r\n");
    else if (s->access && access_denied(c, &cmd))
        deny(c, &cmd);
    else
        cmd_run(c, &cmd);
}

/* ---- the connection handler and the queue's events ---- */

static int
on_opened(Conn *c)
{
    if (queue_session_open(c->srv, &c->se) < 0) return -1;
    if (c->srv->access) access_opened(c);
    return 0;
}

static void
on_bad_line(Conn *c)
{
    if (c->srv->access && access_bad_line(c)) return;
    conn_reply_lit(c, "BAD_FORMAT\r\n");
}

/* The client sent FIN while its input is paused: a blocked reserve ends
 * with TIMED_OUT (as in 1.12); a reply waiting for a body comes first. */
static void
on_hangup(Conn *c)
{
    if (!c->se.waiting) return;
    c->se.batch = 0;
    queue_unwait(c->srv, &c->se);
    conn_reply_lit(c, "TIMED_OUT\r\n");
}

static void
on_closed(Conn *c)
{
    if (c->ring_ticket) { /* the store frees the body when it comes back */
        ptrset_remove(&c->srv->ringwait, c);
        c->ring_ticket = 0;
    }
    jobreply_cancel(c);
    ext_clear_cancel(c);
    if (c->srv->access) access_closed(c);
    nodeops_closed(c);
    queue_session_close(c->srv, &c->se);
}

const ConnHandler cmd_handler = {
    .opened = on_opened,
    .line = cmd_dispatch,
    .bad_line = on_bad_line,
    .body = cmd_put_body,
    .hangup = on_hangup,
    .closed = on_closed,
};

/* se got job j: RESERVED, or for a reserve-batch, j and as many more
 * ready jobs as it asked for, in the order reserve would take them. */
static void
on_reserved(Server *s, Session *se, Job *j)
{
    Job *jobs[PROTO_BATCH_MAX];
    size_t n = 0;
    if (!se->batch) {
        jobreply_send(conn_of(se), JR_RESERVED, &j, 1);
        return;
    }
    jobs[n++] = j;
    for (Job *next; n < se->batch && (next = queue_take_next(s, se));)
        jobs[n++] = next;
    se->batch = 0;
    s->batch_jobs += n;
    jobreply_send(conn_of(se), JR_BATCH, jobs, n);
}

static void
on_wait_over(Server *s, Session *se, int soon)
{
    (void)s;
    se->batch = 0;
    if (soon)
        conn_reply_lit(conn_of(se), "DEADLINE_SOON\r\n");
    else
        conn_reply_lit(conn_of(se), "TIMED_OUT\r\n");
}

static void
on_resume(Server *s, Session *se)
{
    (void)s;
    conn_resume(conn_of(se));
}

const QueueEvents cmd_events = {
    .reserved = on_reserved,
    .wait_over = on_wait_over,
    .resume = on_resume,
};
