/* persist.c - see persist.h. */
#include "queue/persist.h"

#include <stddef.h>
#include <string.h>

#include "base/common.h"

/* Records in j whether the state just stored for it is ready. */
static void
note_stored(Job *j, const StoreJob *o)
{
    if (o->state == STORE_READY)
        j->flags &= (uint8_t)~JOB_F_AT_REST_WAITING;
    else
        j->flags |= JOB_F_AT_REST_WAITING;
}

static void
to_store(const Server *s, const Job *j, StoreJob *o)
{
    memset(o, 0, offsetof(StoreJob, tube));
    o->id = j->id;
    o->state = j->state == JOB_DELAYED  ? STORE_DELAYED
               : j->state == JOB_BURIED ? STORE_BURIED
                                        : STORE_READY;
    o->flags =
        (uint8_t)(((j->flags & JOB_F_REWRITTEN) ? STORE_F_REWRITTEN : 0) |
                  ((j->flags & JOB_F_INLINE) ? STORE_F_INLINE : 0));
    o->pri = j->pri;
    o->ttr = j->ttr;
    o->delay = j->delay;
    o->body_size = j->body_size;
    o->reserves = j->reserves;
    o->timeouts = j->timeouts;
    o->releases = j->releases;
    o->buries = j->buries;
    o->kicks = j->kicks;
    o->created_at_ns = j->created_at;
    if (j->state == JOB_DELAYED)
        o->ready_at_ns = state_wall_ns(s) + (j->deadline - mono_ns());
    o->tube_len = j->tube->name_len;
    memcpy(o->tube, j->tube->name, j->tube->name_len);
    o->tube[o->tube_len] = '\0';
}

/* Adds j's put-unique key, if it has one, to its stored record o. */
static void
key_to_store(const Server *s, const Job *j, StoreJob *o)
{
    const DedupKey *k =
        (j->flags & JOB_F_UNIQUE) ? dedup_of_job(&s->dedup, j->id) : NULL;
    o->key_len = k ? k->key_len : 0;
    if (k) memcpy(o->key, k->name + k->tube_len, k->key_len);
}

void
queue_persist_put(Server *s, Job *j)
{
    queue_persist_put_ring(s, j, NULL);
}

void
queue_persist_put_ring(Server *s, Job *j, const StoreRingRef *ref)
{
    if (!s->store) return;
    StoreJob o;
    if (j->body_size <= STORE_INLINE_MAX) j->flags |= JOB_F_INLINE;
    to_store(s, j, &o);
    key_to_store(s, j, &o);
    store_add_put_ring(s->store, ++s->applied_seq, &o, j->body, ref);
    j->seq = (uint32_t)s->applied_seq;
    note_stored(j, &o);
}

void
queue_persist_update(Server *s, Job *j)
{
    if (!s->store) return;
    StoreJob o;
    j->flags |= JOB_F_REWRITTEN;
    to_store(s, j, &o);
    key_to_store(s, j, &o);
    store_add_update(s->store, ++s->applied_seq, &o);
    j->seq = (uint32_t)s->applied_seq;
    note_stored(j, &o);
}

void
queue_persist_delete(Server *s, Job *j)
{
    if (!s->store) return;
    store_add_delete(
        s->store, ++s->applied_seq, j->id,
        ((j->flags & JOB_F_REWRITTEN) ? STORE_DEL_REWRITTEN : 0) |
            ((j->flags & JOB_F_INLINE) ? STORE_DEL_NO_BODY : 0) |
            (j->body_size < STORE_RING_MIN_LOW ? STORE_DEL_SMALL : 0));
}

void
queue_persist_gone(Server *s, Job *j, int64_t until_ns)
{
    if (!s->store) return;
    StoreJob o;
    to_store(s, j, &o);
    key_to_store(s, j, &o);
    o.state = STORE_GONE;
    o.ready_at_ns = until_ns;
    store_add_update(s->store, ++s->applied_seq, &o);
}

void
queue_persist_barrier(Server *s)
{
    if (!s->store) return;
    store_add_delete(s->store, ++s->applied_seq, QUEUE_BARRIER_ID,
                     STORE_DEL_REWRITTEN | STORE_DEL_NO_BODY);
}
