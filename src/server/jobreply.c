/* jobreply.c - see jobreply.h. */
#include "server/jobreply.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "cluster/nodestep.h"
#include "queue/persist.h"
#include "queue/queue.h"

void
jobreply_confirm(Server *s, Job **jobs, size_t n)
{
    if (node_lease_ok(s)) return;
    for (size_t i = 0; i < n; i++)
        queue_persist_update(s, jobs[i]);
}

void
jobreply_confirm_any(Server *s)
{
    if (node_lease_ok(s)) return;
    for (size_t i = 0; i < s->tubes.list.len; i++) {
        Tube *t = s->tubes.list.items[i];
        Job *j = heap_peek(&t->ready);
        if (!j) j = heap_peek(&t->delay);
        if (!j) j = heap_peek(&t->buried);
        if (j) {
            queue_persist_update(s, j);
            return;
        }
    }
    queue_persist_barrier(s); /* no job to rewrite */
}

/* Writes j's reply line ("FOUND id bytes" or "RESERVED id bytes", CRLF)
 * into head (64 bytes); returns its length. No printf per reserve. */
static size_t
reply_head(char *head, int kind, const Job *j)
{
    size_t n = kind == JR_FOUND ? 5 : 8;
    memcpy(head, kind == JR_FOUND ? "FOUND " : "RESERVED ", n + 1);
    n += 1 + dec_u64(head + n + 1, j->id);
    head[n++] = ' ';
    n += dec_u64(head + n, j->body_size);
    memcpy(head + n, "\r\n", 2);
    return n + 2;
}

/* Appends the reply of the jobs still there (all bodies in memory). */
static void
emit(Conn *c, int kind, Job **jobs, size_t n)
{
    Server *s = c->srv;
    char head[64];
    uint64_t need = 0;
    jobreply_confirm(s, jobs, n); /* after the jobs were taken or read */
    for (size_t i = 0; i < n; i++) {
        uint64_t q = queue_job_reply_seq(s, jobs[i]);
        if (q > need) need = q;
    }
    if (kind == JR_BATCH) {
        int k = snprintf(head, sizeof head, "RESERVED_BATCH %zu\r\n", n);
        conn_reply_at(c, head, (size_t)k, NULL, 0, need);
    }
    for (size_t i = 0; i < n; i++) {
        Job *j = jobs[i];
        size_t k = reply_head(head, kind, j);
        conn_reply_at(c, head, k, j->body, (size_t)j->body_size + 2, need);
        bodycache_used(&s->bodies, j);
    }
}

/* Pauses c until the bodies of jobs[0..n) are in memory. */
static void
wait_bodies(Conn *c, int kind, Job **jobs, size_t n)
{
    Server *s = c->srv;
    Session *se = &c->se;
    se->fetch_ids = n == 1 ? &se->fetch_one : malloc(n * sizeof(uint64_t));
    if (!se->fetch_ids) abort(); /* out of memory */
    for (size_t i = 0; i < n; i++) {
        se->fetch_ids[i] = jobs[i]->id;
        if (!jobs[i]->body) bodycache_fetch(&s->bodies, jobs[i], 1);
    }
    se->fetch_n = (uint32_t)n;
    se->fetch_kind = (uint8_t)kind;
    conn_pause(c);
    if (ptrset_append(&s->fetching, c) < 0) abort();
}

void
jobreply_send(Conn *c, int kind, Job **jobs, size_t n)
{
    if (c->closed) return;
    for (size_t i = 0; i < n; i++)
        if (!jobs[i]->body) {
            wait_bodies(c, kind, jobs, n);
            return;
        }
    emit(c, kind, jobs, n);
}

void
jobreply_cancel(Conn *c)
{
    Session *se = &c->se;
    if (!se->fetch_ids) return;
    ptrset_remove(&c->srv->fetching, c);
    if (se->fetch_ids != &se->fetch_one) free(se->fetch_ids);
    se->fetch_ids = NULL;
    se->fetch_n = 0;
}

/* Checks c's waiting jobs: sets *lost if one is gone or failed; returns
 * how many still wait for a body, and keeps the ready ones in jobs. */
static size_t
check(Conn *c, Job **jobs, size_t *n, int *lost)
{
    Server *s = c->srv;
    Session *se = &c->se;
    size_t waiting = 0, k = 0;
    for (uint32_t i = 0; i < se->fetch_n; i++) {
        Job *j = jobtable_find(&s->jobs, se->fetch_ids[i]);
        if (j && se->fetch_kind != JR_FOUND && !queue_holds(se, j))
            j = NULL; /* its lease ended meanwhile; c never got it */
        if (j && !j->body && (j->flags & JOB_F_UNREADABLE)) {
            queue_body_unreadable(s, se->fetch_kind == JR_FOUND ? NULL : se, j);
            j = NULL;
        }
        if (!j) {
            *lost = 1;
            continue;
        }
        if (!j->body) {
            waiting++;
            if (!(j->flags & JOB_F_FETCHING)) bodycache_fetch(&s->bodies, j, 0);
        }
        jobs[k] = j;
        se->fetch_ids[k++] = j->id; /* drop the lost ones for good */
    }
    se->fetch_n = (uint32_t)k;
    *n = k;
    return waiting;
}

/* Completes c's waiting reply if it can: 1 if it did, 0 if not yet. */
static int
step(Conn *c)
{
    Session *se = &c->se;
    Job *jobs[PROTO_BATCH_MAX];
    size_t n;
    int lost = 0, kind = se->fetch_kind;
    uint64_t first = se->fetch_ids[0];
    if (check(c, jobs, &n, &lost)) return 0;
    jobreply_cancel(c);
    conn_resume(c);
    if (n == 0 || (lost && kind != JR_BATCH)) {
        int gone = kind == JR_FOUND && !jobtable_find(&c->srv->jobs, first);
        if (gone)
            conn_reply_lit(c, "NOT_FOUND\r\n");
        else
            conn_reply_lit(c, "INTERNAL_ERROR\r\n");
        return 1;
    }
    for (size_t i = 0; kind != JR_FOUND && i < n; i++)
        queue_touch(c->srv, se, jobs[i]); /* TTR from the reply */
    emit(c, kind, jobs, n);
    return 1;
}

void
jobreply_done(Server *s)
{
    size_t i = 0;
    while (i < s->fetching.len) /* a done one leaves; the last takes slot i */
        if (!step(s->fetching.items[i])) i++;
}
