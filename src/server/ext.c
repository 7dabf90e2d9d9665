/* ext.c - see ext.h. */
#include "server/ext.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "queue/queue.h"
#include "server/jobreply.h"

static void
idle_cb(struct ev_loop *loop, ev_idle *w, int revents)
{
    (void)loop, (void)w, (void)revents; /* prepare does the work */
}

void
ext_init(Server *s)
{
    ev_idle_init(&s->clear_w, idle_cb);
}

void
ext_list_jobs(Conn *c, const Cmd *cmd)
{
    Server *s = c->srv;
    Tube *t = tubes_find(&s->tubes, cmd->name, cmd->name_len);
    void *jobs[PROTO_BATCH_MAX];
    size_t n = 0;
    jobreply_confirm_any(s); /* a deposed leader's reply waits (15.7) */
    if (!t) {
        conn_reply_lit(c, "NOT_FOUND\r\n");
        return;
    }
    if (cmd->state == LIST_READY) n = heap_first(&t->ready, jobs, cmd->count);
    if (cmd->state == LIST_DELAYED) n = heap_first(&t->delay, jobs, cmd->count);
    if (cmd->state == LIST_BURIED) n = heap_first(&t->buried, jobs, cmd->count);
    if (cmd->state == LIST_RESERVED)
        n = queue_reserved_of(s, t, (Job **)jobs, cmd->count);
    char *b = malloc(16 + n * 24), *p = b;
    if (!b) abort(); /* out of memory */
    p += sprintf(p, n ? "---\n" : "--- []\n");
    for (size_t i = 0; i < n; i++)
        p += sprintf(p, "- %" PRIu64 "\n", ((Job *)jobs[i])->id);
    p += sprintf(p, "\r\n");
    conn_reply_ok(c, b, (size_t)(p - b));
    free(b);
}

void
ext_clear_tube(Conn *c, const Cmd *cmd)
{
    Server *s = c->srv;
    Tube *t = tubes_find(&s->tubes, cmd->name, cmd->name_len);
    if (!t) {
        conn_reply_lit(c, "NOT_FOUND\r\n");
        return;
    }
    if (ptrset_append(&s->clearing, c) < 0) {
        conn_reply_lit(c, "OUT_OF_MEMORY\r\n");
        return;
    }
    tube_ref(t); /* deleting its last job must not free it */
    c->se.clearing = t;
    c->se.clear_left = t->ready.len + t->delay.len + t->buried.len;
    c->se.cleared = 0;
    c->se.clear_seq = 0;
    conn_pause(c);
    ev_idle_start(s->loop, &s->clear_w); /* the first step, this pass */
}

/* Deletes up to CLEAR_PER_PASS of c's tube's jobs; 1 once it is done. */
static int
clear_some(Conn *c)
{
    Server *s = c->srv;
    Session *se = &c->se;
    Tube *t = se->clearing;
    if (s->acked_seq < se->clear_seq)
        return 0; /* the last step's deletes
                      first: a reply of anyone
                      waits for them */
    for (int k = 0; k < CLEAR_PER_PASS; k++) {
        Job *j = se->clear_left ? heap_peek(&t->ready) : NULL;
        if (se->clear_left && !j) j = heap_peek(&t->delay);
        if (se->clear_left && !j) j = heap_peek(&t->buried);
        if (!j) return 1;
        queue_detach(s, j, NULL);
        t->delete_ct++;
        queue_delete(s, j);
        se->clear_left--;
        se->cleared++;
        s->cleared_ct++;
    }
    se->clear_seq = s->applied_seq;
    return 0;
}

void
ext_clear_cancel(Conn *c)
{
    Server *s = c->srv;
    if (!c->se.clearing) return;
    ptrset_remove(&s->clearing, c);
    queue_tube_unref(s, c->se.clearing);
    c->se.clearing = NULL;
    if (!s->clearing.len) ev_idle_stop(s->loop, &s->clear_w);
}

void
ext_clear_step(Server *s)
{
    size_t i = 0;
    if (!s->clearing.len) return;
    /* With a store, the acknowledgement a step waits for wakes the loop;
     * without one (--memory) the idle watcher keeps it turning. */
    if (s->store) ev_idle_stop(s->loop, &s->clear_w);
    while (i < s->clearing.len) {
        Conn *c = s->clearing.items[i];
        if (!clear_some(c)) {
            i++;
            continue;
        }
        uint64_t n = c->se.cleared;
        ext_clear_cancel(c); /* moves the last one into slot i */
        conn_resume(c);
        conn_replyf(c, "CLEARED %" PRIu64 "\r\n", n); /* after the deletes */
    }
}
