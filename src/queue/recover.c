/* recover.c - see recover.h. */
#include "queue/recover.h"

#include "base/common.h"
#include "queue/clock.h"
#include "queue/queue.h"

/* A recovered put-unique key: of a live job (remembered for the window
 * after its put, and while it exists) or of a STORE_GONE record. */
static int
recover_key(Server *s, const StoreJob *sj)
{
    int gone = sj->state == STORE_GONE;
    int64_t until =
        gone ? sj->ready_at_ns
             : sj->created_at_ns + (int64_t)s->cfg.dedup_window * NS_PER_SEC;
    DedupKey *k = dedup_add(&s->dedup, sj->tube, sj->tube_len, sj->key,
                            sj->key_len, sj->id, until);
    if (!k) return -1;
    k->job_gone = (uint8_t)gone;
    return 0;
}

int
queue_recover_job(void *ctx, const StoreJob *sj)
{
    Server *s = ctx;
    if (sj->key_len && recover_key(s, sj) < 0) return -1;
    if (sj->state == STORE_GONE) return 0; /* a key, not a job */
    Tube *t = tubes_get(&s->tubes, sj->tube, sj->tube_len);
    if (!t) return -1;
    Job *j = queue_job_new(s, t, sj->id, sj->pri, sj->delay, sj->ttr,
                           sj->body_size, NULL, sj->created_at_ns);
    queue_tube_unref(s, t); /* the job holds its own reference */
    if (!j) return -1;
    j->reserves = sj->reserves;
    j->timeouts = sj->timeouts;
    j->releases = sj->releases;
    j->buries = sj->buries;
    j->kicks = sj->kicks;
    if (sj->flags & STORE_F_REWRITTEN) j->flags |= JOB_F_REWRITTEN;
    if (sj->flags & STORE_F_INLINE) j->flags |= JOB_F_INLINE;
    if (sj->key_len) j->flags |= JOB_F_UNIQUE;
    if (sj->state != STORE_READY) j->flags |= JOB_F_AT_REST_WAITING;
    if (sj->state == STORE_BURIED) {
        queue_make_buried(s, j);
        return 0;
    }
    /* the clocks only for a delayed job: a scan or a replay reads none per
     * ready one */
    int64_t wait =
        sj->state == STORE_DELAYED ? sj->ready_at_ns - state_wall_ns(s) : 0;
    if (wait > 0)
        queue_make_delayed(s, j, mono_ns() + wait);
    else
        queue_make_ready(s, j);
    return 0;
}

int
queue_replay(Server *s, int op, uint64_t id, const StoreJob *sj,
             int64_t applied_ns)
{
    if (op == STORE_REPLAY_PUT)
        queue_clock_sample(s, sj->created_at_ns, applied_ns);
    /* a put of an id at or above next_id is of no job or key held yet
     * (recover.h): the two lookups, cache misses in large tables, go */
    if (op == STORE_REPLAY_PUT && id >= s->next_id)
        return queue_recover_job(s, sj);
    Job *j = jobtable_find(&s->jobs, id);
    DedupKey *k = dedup_of_job(&s->dedup, id);

    if (j) { /* an update is the job made again from its new record */
        queue_detach(s, j, NULL);
        queue_job_free(s, j);
    }
    if (k) dedup_remove(&s->dedup, k);
    if (op == STORE_REPLAY_DELETE) return 0;
    return queue_recover_job(s, sj);
}
