/* queue/persist.h - the mutation records the in-memory queue hands the
 * store (store.h's store_add_put, _update, _delete): each persistent
 * change of a job becomes one record, stamped with the next applied
 * sequence (Server.applied_seq, which a reply waits for: src/README, "How
 * a reply is gated"); after a put or an update the job keeps its low 32
 * bits (Job.seq, for queue_job_reply_seq) and whether its stored state is
 * other than ready (JOB_F_AT_REST_WAITING, for queue_requeue). A record
 * carries the job's fields, its tube's name, a delayed job's due time in
 * wall-clock ns (state_wall_ns) and its put-unique key; a put hands the
 * store the job's body, which stays the job's (the store copies it).
 * Every call is a no-op without a store (s->store NULL: nothing is
 * stored, the sequence does not move); none fails (the store aborts out
 * of memory). Loop thread only. */
#ifndef ROCKSTALK_QUEUE_PERSIST_H
#define ROCKSTALK_QUEUE_PERSIST_H

#include <stdint.h>

#include "queue/job.h"
#include "queue/state.h"

/* Mutation records for the store (no-ops without one): a new job, a
 * rewritten job (bury, kick, release with delay or new priority) and a
 * deleted job. Each advances the applied sequence. */
void queue_persist_put(Server *s, Job *j);
void queue_persist_update(Server *s, Job *j);
void queue_persist_delete(Server *s, Job *j);

/* queue_persist_put for a body the store's body ring holds at ref (from
 * store_ring_take; NULL: queue_persist_put). */
void queue_persist_put_ring(Server *s, Job *j, const StoreRingRef *ref);

/* A mutation record that changes no job: the delete of QUEUE_BARRIER_ID,
 * an id no job is given (ids count up from 1; a plain Delete of a key
 * never written, store/batch.c; next_id is not touched, so ids stay
 * beanstalkd's 1, 2, 3...). A reply appended after it waits for its group
 * (in cluster mode, for its Raft entry's commit): the read barrier of a
 * leader that holds no job (server/jobreply.h). No-op without a store. */
#define QUEUE_BARRIER_ID UINT64_MAX
void queue_persist_barrier(Server *s);

/* The record of a put-unique job j that is deleted while its key's
 * window runs (until_ns, wall-clock ns): j's record is rewritten as
 * STORE_GONE, due at until_ns (the store drops its body), so that a
 * restart remembers the key but not the job; queue_dedup_forget deletes
 * the record once the window ends. */
void queue_persist_gone(Server *s, Job *j, int64_t until_ns);

#endif
