/* queue.c - see queue.h. */
#include "queue/queue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "base/log.h"
#include "queue/persist.h"
#include "queue/readyage.h"
#include "queue/timers.h"
#include "queue/watch.h"

int
queue_session_open(Server *s, Session *se)
{
    memset(se, 0, sizeof *se);
    watch_init(se);
    if (ptrset_append(&se->watch, s->default_tube) < 0) return -1;
    se->wait_pos = se->lease_pos = SIZE_MAX;
    se->timeout = -1;
    heap_init(&se->reserved, job_deadline_less, job_setpos);
    se->use = s->default_tube;
    tube_ref(se->use);
    se->use->using_ct++;
    tube_ref(s->default_tube);
    s->default_tube->watching_ct++;
    return 0;
}

void
queue_session_close(Server *s, Session *se)
{
    queue_unwait(s, se);
    while (se->reserved.len) {
        Job *j = heap_peek(&se->reserved);
        queue_detach(s, j, se);
        queue_requeue(s, j, 0);
    }
    heap_free(&se->reserved);
    watch_free(se);
    for (size_t i = 0; i < se->watch.len; i++) {
        Tube *t = se->watch.items[i];
        t->watching_ct--;
        queue_tube_unref(s, t);
    }
    ptrset_free(&se->watch);
    free(se->wait_at);
    se->wait_at = NULL;
    se->wait_cap = 0;
    se->use->using_ct--;
    queue_tube_unref(s, se->use);
    se->use = NULL;
}

static Tube *best_ready(const Server *s, Session *se, int64_t now);

/* Copies the key of t's best ready job into t (tube_top_less reads it);
 * after every change of t's ready heap. */
static void
top_update(Tube *t)
{
    const Job *j = heap_peek(&t->ready);
    if (!j) return;
    t->top_id = j->id;
    t->top_pri = j->pri;
}

static void
must(int r)
{
    if (r < 0) abort(); /* heap growth failed: out of memory */
}

Job *
queue_job_new(Server *s, Tube *t, uint64_t id, uint32_t pri, uint32_t delay,
              uint32_t ttr, uint32_t body_size, char *body, int64_t created_at)
{
    Job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->id = id;
    j->pri = pri;
    j->delay = delay;
    j->ttr = ttr ? ttr : 1;
    j->body_size = body_size;
    j->body = body;
    j->created_at = created_at;
    j->tube = t;
    tube_ref(t);
    if (jobtable_insert(&s->jobs, j) < 0) {
        queue_tube_unref(s, t);
        free(j);
        return NULL;
    }
    return j;
}

void
queue_detach(Server *s, Job *j, Session *holder)
{
    Tube *t = j->tube;
    switch (j->state) {
    case JOB_READY:
        heap_remove(&t->ready, j->heap_index);
        top_update(t);
        s->ready_ct--;
        if (j->pri < URGENT_THRESHOLD) {
            s->urgent_ct--;
            t->urgent_ct--;
        }
        break;
    case JOB_DELAYED:
        heap_remove(&t->delay, j->heap_index);
        s->delayed_ct--;
        timers_delay_update(s, t);
        break;
    case JOB_BURIED:
        heap_remove(&t->buried, j->heap_index);
        s->buried_ct--;
        t->buried_ct--;
        break;
    case JOB_RESERVED:
        heap_remove(&holder->reserved, j->heap_index);
        timers_lease_update(s, holder);
        s->reserved_ct--;
        t->reserved_ct--;
        break;
    }
    j->state = 0;
}

uint64_t
queue_job_reply_seq(const Server *s, const Job *j)
{
    /* Modular compare of the low 32 bits: at most 2^31 mutations are ever
     * in flight, so "not yet acked" is never mistaken for "acked", and the
     * distance back from applied_seq gives the full sequence; a very old
     * job may be mistaken for unacked, which only delays its reply (never
     * past applied_seq). */
    if ((int32_t)((uint32_t)s->acked_seq - j->seq) >= 0) return 0;
    return s->applied_seq - (uint32_t)((uint32_t)s->applied_seq - j->seq);
}

int
queue_holds(const Session *se, const Job *j)
{
    return j->state == JOB_RESERVED && j->heap_index < se->reserved.len &&
           se->reserved.data[j->heap_index] == j;
}

void
queue_touch(Server *s, Session *se, Job *j)
{
    j->deadline = mono_ns() + (int64_t)j->ttr * NS_PER_SEC;
    heap_fix(&se->reserved, j->heap_index);
    timers_lease_update(s, se);
}

/* Gives t's ready jobs to t's blocked reservers, best job first, reservers
 * in beanstalkd's round-robin order. */
static void
serve(Server *s, Tube *t)
{
    int64_t now = t->pause_ns ? mono_ns() : 0;
    while (t->ready.len && t->waiting.len && !queue_tube_paused(t, now)) {
        Job *j = heap_peek(&t->ready);
        Session *se = waitset_take(&t->waiting);
        queue_unwait(s, se);
        queue_detach(s, j, NULL);
        queue_reserve(s, se, j);
    }
}

void
queue_make_ready(Server *s, Job *j)
{
    Tube *t = j->tube;
    j->state = JOB_READY;
    must(heap_insert(&t->ready, j));
    if (s->cfg.http_addr) readyage_push(t, j); /* its only reader */
    top_update(t);
    if (t->nhrefs && heap_peek(&t->ready) == j) watch_tube_improved(t);
    s->ready_ct++;
    if (j->pri < URGENT_THRESHOLD) {
        s->urgent_ct++;
        t->urgent_ct++;
    }
    if (t->waiting.len) serve(s, t);
}

void
queue_requeue(Server *s, Job *j, int changed)
{
    if (changed || (j->flags & JOB_F_AT_REST_WAITING))
        queue_persist_update(s, j); /* before any reserver sees it */
    queue_make_ready(s, j);
}

void
queue_make_delayed(Server *s, Job *j, int64_t due)
{
    j->state = JOB_DELAYED;
    j->deadline = due;
    must(heap_insert(&j->tube->delay, j));
    s->delayed_ct++;
    timers_delay_update(s, j->tube);
}

void
queue_make_buried(Server *s, Job *j)
{
    j->state = JOB_BURIED;
    j->deadline = (int64_t)s->bury_seq++; /* buried heap: oldest first */
    must(heap_insert(&j->tube->buried, j));
    s->buried_ct++;
    j->tube->buried_ct++;
}

/* Makes a detached j reserved by se (its TTR starts now). */
static void
take(Server *s, Session *se, Job *j)
{
    j->state = JOB_RESERVED;
    j->reserves++;
    j->deadline = mono_ns() + (int64_t)j->ttr * NS_PER_SEC;
    must(heap_insert(&se->reserved, j));
    timers_lease_update(s, se);
    s->reserved_ct++;
    j->tube->reserved_ct++;
    j->tube->reserve_ct++;
    s->handed_ct++;
}

void
queue_reserve(Server *s, Session *se, Job *j)
{
    /* a body that came from disk hints that the next ones are there too */
    int cold = !j->body || (j->flags & JOB_F_STORED);
    take(s, se, j);
    s->events->reserved(s, se, j);
    if (cold) bodycache_read_ahead(&s->bodies, j->tube, s->iter);
}

Job *
queue_take_next(Server *s, Session *se)
{
    Tube *t = best_ready(s, se, mono_ns());
    if (!t) return NULL;
    Job *j = heap_peek(&t->ready);
    int cold = !j->body || (j->flags & JOB_F_STORED);
    queue_detach(s, j, NULL);
    take(s, se, j);
    if (cold) bodycache_read_ahead(&s->bodies, t, s->iter);
    return j;
}

size_t
queue_reserved_of(const Server *s, const Tube *t, Job **out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < s->lease_heap.len; i++) {
        const Session *se = s->lease_heap.data[i];
        for (size_t k = 0; k < se->reserved.len; k++) {
            Job *j = se->reserved.data[k];
            if (j->tube != t) continue;
            if (n < max) {
                out[n++] = j;
            } else { /* keep the max soonest: replace the latest */
                size_t w = 0;
                for (size_t m = 1; m < n; m++)
                    if (job_deadline_less(out[w], out[m])) w = m;
                if (job_deadline_less(j, out[w])) out[w] = j;
            }
        }
    }
    for (size_t i = 1; i < n; i++) /* insertion sort: soonest first */
        for (size_t m = i; m > 0 && job_deadline_less(out[m], out[m - 1]);
             m--) {
            Job *x = out[m];
            out[m] = out[m - 1];
            out[m - 1] = x;
        }
    return n;
}

void
queue_delete(Server *s, Job *j)
{
    s->deleted_ct++;
    DedupKey *k =
        (j->flags & JOB_F_UNIQUE) ? dedup_of_job(&s->dedup, j->id) : NULL;
    if (k && k->heap_pos != SIZE_MAX) {
        k->job_gone = 1; /* remembered until its window ends */
        queue_persist_gone(s, j, k->expire_ns); /* a record for its key */
    } else {
        if (k) dedup_remove(&s->dedup, k);
        queue_persist_delete(s, j);
    }
    queue_job_free(s, j);
}

Job *
queue_move(Server *s, Job *j, Tube *to, char *body)
{
    Job *n = queue_job_new(s, to, s->next_id, j->pri, 0, j->ttr, j->body_size,
                           body, state_wall_ns(s));
    if (!n) return NULL;
    s->next_id++;
    s->total_jobs++;
    to->total_jobs++;
    if (s->store) store_hold(s->store, 1);
    queue_persist_put(s, n);
    if (s->store) s->applied_seq--; /* the delete takes the same sequence */
    queue_detach(s, j, NULL);
    j->tube->delete_ct++;
    queue_delete(s, j);
    if (s->store) store_hold(s->store, 0);
    queue_make_ready(s, n);
    return n;
}

void
queue_dedup_forget(Server *s, DedupKey *k)
{
    if (s->store) /* its STORE_GONE record, a rewrite, goes too */
        store_add_delete(s->store, ++s->applied_seq, k->id,
                         STORE_DEL_REWRITTEN | STORE_DEL_NO_BODY);
    dedup_remove(&s->dedup, k);
}

void
queue_dedup_sweep(Server *s, int64_t now_ns, size_t max)
{
    DedupKey *k;
    for (size_t n = 0; n < max && (k = dedup_expired(&s->dedup, now_ns)); n++) {
        if (k->job_gone)
            queue_dedup_forget(s, k);
        else
            dedup_window_over(&s->dedup, k); /* goes with its job */
    }
}

void
queue_job_free(Server *s, Job *j)
{
    jobtable_remove(&s->jobs, j);
    queue_tube_unref(s, j->tube);
    bodycache_forget(&s->bodies, j);
    free(j->body);
    free(j);
}

void
queue_tube_unref(Server *s, Tube *t)
{
    if (t->refs == 1 && t->pause_pos != SIZE_MAX) {
        heap_remove(&s->pause_heap, t->pause_pos);
        t->pause_pos = SIZE_MAX;
    }
    tubes_unref(&s->tubes, t);
}

int
queue_tube_paused(const Tube *t, int64_t now)
{
    return t->pause_ns && t->unpause_at > now;
}

void
queue_pause(Server *s, Tube *t, uint32_t secs)
{
    t->pause_ns = secs ? (int64_t)secs * NS_PER_SEC : 1;
    t->unpause_at = mono_ns() + t->pause_ns;
    t->pause_ct++;
    if (t->pause_pos == SIZE_MAX)
        must(heap_insert(&s->pause_heap, t));
    else
        heap_fix(&s->pause_heap, t->pause_pos);
}

int
queue_deadline_soon(const Session *se, int64_t now)
{
    const Job *j = heap_peek(&se->reserved);
    return j && now >= j->deadline - DEADLINE_SOON_NS;
}
/* The watched tube of se, not paused at now, whose best ready job comes
 * first, or NULL if none has one: from se's tube heap if it has one and
 * no tube is paused (O(log W) amortised), else by looking at each. */
static Tube *
best_ready(const Server *s, Session *se, int64_t now)
{
    if (watch_has_heap(se) && s->pause_heap.len == 0) return watch_best(se);
    Tube *best = NULL;
    for (size_t i = 0; i < se->watch.len; i++) {
        Tube *t = se->watch.items[i];
        if (t->ready.len && !queue_tube_paused(t, now) &&
            (!best || tube_top_less(t, best)))
            best = t;
    }
    return best;
}

/* Reserves for se, not waiting yet, the best job of t, a tube with no
 * blocked reserver: what 1.12 does when se joins the waiting sets of its
 * watched tubes and is taken at once from t's (its round-robin cursor
 * left as that take leaves it, the other sets unchanged), without
 * joining and leaving W sets. */
static void
reserve_now(Server *s, Session *se, Tube *t)
{
    Job *j = heap_peek(&t->ready);
    t->waiting.last = 1; /* a take from a set of one: index 0, then 1 */
    queue_detach(s, j, NULL);
    queue_reserve(s, se, j);
}

/* Makes se a blocked reserver in every watched tube's waiting set. */
static void
join_waiting(Server *s, Session *se)
{
    size_t n = se->watch.len;
    if (n > se->wait_cap) {
        size_t *a = realloc(se->wait_at, n * sizeof *a);
        if (!a) abort(); /* out of memory, as heap growth */
        se->wait_at = a;
        se->wait_cap = n;
    }
    se->waiting = 1;
    s->waiting_ct++;
    for (size_t i = 0; i < n; i++)
        must(waitset_add(&((Tube *)se->watch.items[i])->waiting, se,
                         &se->wait_at[i]));
}

void
queue_wait(Server *s, Session *se, int32_t timeout)
{
    int64_t now = mono_ns();
    Tube *best = best_ready(s, se, now);

    se->timeout = timeout;
    if (best && best->waiting.len == 0) {
        reserve_now(s, se, best);
        return;
    }
    join_waiting(s, se);
    /* A tube whose pause has just ended (its tick not run yet) can have
     * older waiters, which serve() serves first; each round below either
     * serves se or empties that tube's ready jobs, so it ends. */
    while (se->waiting && (best = best_ready(s, se, now)))
        serve(s, best);
    if (se->waiting) timers_wait_set(s, se, now);
}

/* Takes se out of the waiting set of its i-th watched tube, if in it. */
static void
leave_waiting(Session *se, size_t i)
{
    size_t at = se->wait_at[i];
    if (at != SIZE_MAX)
        waitset_delete(&((Tube *)se->watch.items[i])->waiting, at);
}

void
queue_unwait(Server *s, Session *se)
{
    if (!se->waiting) return;
    se->waiting = 0;
    s->waiting_ct--;
    for (size_t i = 0; i < se->watch.len; i++)
        leave_waiting(se, i);
    if (se->wait_pos != SIZE_MAX) {
        heap_remove(&s->wait_heap, se->wait_pos);
        se->wait_pos = SIZE_MAX;
    }
    se->wake_at = 0;
    s->events->resume(s, se);
}

void
queue_unwatch(Server *s, Session *se, size_t i)
{
    Tube *t = se->watch.items[i];
    size_t last = se->watch.len - 1;
    if (se->waiting) {
        leave_waiting(se, i);
        se->wait_at[i] = se->wait_at[last]; /* moves as the watch list does */
        if (i != last && se->wait_at[i] != SIZE_MAX) {
            Tube *m = se->watch.items[last];
            m->waiting.items[se->wait_at[i]].at = &se->wait_at[i];
        }
    }
    watch_removing(se, i);
    ptrset_delete(&se->watch, i);
    t->watching_ct--;
    queue_tube_unref(s, t);
}

int
queue_watch(Server *s, Session *se, Tube *t)
{
    (void)s;
    if (ptrset_append(&se->watch, t) < 0) return -1;
    t->watching_ct++;
    watch_added(se);
    return 0;
}

static void
tick_delays(Server *s, int64_t now)
{
    Tube *t;
    while ((t = heap_peek(&s->delay_tubes))) {
        Job *j = heap_peek(&t->delay);
        if (j->deadline > now) break;
        queue_detach(s, j, NULL);
        queue_make_ready(s, j);
    }
}

static void
tick_pauses(Server *s, int64_t now)
{
    Tube *t;
    while ((t = heap_peek(&s->pause_heap)) && t->unpause_at <= now) {
        heap_remove(&s->pause_heap, 0);
        t->pause_pos = SIZE_MAX;
        t->pause_ns = 0;
        serve(s, t);
    }
}

static void
tick_leases(Server *s, int64_t now)
{
    Session *se;
    while ((se = heap_peek(&s->lease_heap))) {
        Job *j = heap_peek(&se->reserved);
        if (j->deadline > now) break;
        queue_detach(s, j, se);
        j->timeouts++;
        s->timeout_ct++;
        if (s->cfg.max_timeouts && j->timeouts >= s->cfg.max_timeouts) {
            j->buries++; /* a poison job: --max-timeouts */
            s->poison_ct++;
            queue_make_buried(s, j);
            queue_persist_update(s, j);
        } else {
            queue_requeue(s, j, 0);
        }
        if (se->waiting) timers_wait_set(s, se, now);
    }
}

static void
tick_waiters(Server *s, int64_t now)
{
    Session *se;
    while ((se = heap_peek(&s->wait_heap)) && se->wake_at <= now) {
        int soon = queue_deadline_soon(se, now);
        queue_unwait(s, se);
        s->events->wait_over(s, se, soon);
    }
}

void
queue_tick(Server *s, int64_t now)
{
    tick_delays(s, now);
    tick_pauses(s, now);
    tick_leases(s, now);
    tick_waiters(s, now);
}

void
queue_kick_job(Server *s, Job *j)
{
    queue_detach(s, j, NULL);
    j->kicks++;
    queue_persist_update(s, j);
    queue_make_ready(s, j);
}

void
queue_body_unreadable(Server *s, Session *se, Job *j)
{
    int held = se && queue_holds(se, j);
    log_msg(0, "cannot read the body of job %llu%s", (unsigned long long)j->id,
            held ? "; burying it" : "");
    j->flags &= (uint8_t)~JOB_F_UNREADABLE;
    if (!held) return;
    queue_detach(s, j, se);
    j->buries++;
    queue_make_buried(s, j);
    queue_persist_update(s, j);
}
