/* queue.h - the job state machine: moving jobs between ready, delayed,
 * reserved and buried with every counter kept right, serving blocked
 * reservers, the timer-driven transitions (delay due, TTR lease expiry,
 * pause end, reserve timeout, DEADLINE_SOON; the heaps that order them are
 * timers.h's), and the mutation records each persistent change hands to
 * the store (persist.h; recover.h builds the queue back from them). It
 * acts on Sessions, never on connections, formats no reply, and reports
 * what a client must be told through QueueEvents. Loop thread only. */
#ifndef ROCKSTALK_QUEUE_H
#define ROCKSTALK_QUEUE_H

#include <stdint.h>

#include "queue/job.h"
#include "queue/session.h"
#include "queue/state.h"
#include "queue/tube.h"

/* What the state machine tells the layer above (cmd.c implements it; the
 * table is Server.events). Each is called synchronously from inside the
 * queue call that caused it, with the queue's state already consistent. */
typedef struct QueueEvents {
    /* se, blocked in reserve or reserving now, was given job j, which it
     * now holds: the caller owes it a RESERVED reply. */
    void (*reserved)(Server *s, Session *se, Job *j);
    /* se's blocked reserve was ended by its timer: a DEADLINE_SOON reply
     * if soon, else TIMED_OUT. */
    void (*wait_over)(Server *s, Session *se, int soon);
    /* se's blocked reserve ended (served, timed out, or cancelled): its
     * buffered commands may run again. */
    void (*resume)(Server *s, Session *se);
} QueueEvents;

/* A new client: se uses and watches the default tube. Returns 0, or -1 out
 * of memory (se then holds nothing). */
int queue_session_open(Server *s, Session *se);

/* A client is gone: ends its blocked reserve (no event for it), returns
 * the jobs it holds to ready (stored if they must be, see queue_requeue),
 * and drops its tube references. */
void queue_session_close(Server *s, Session *se);

/* Creates job id in tube t (takes a tube reference) with an owned body
 * (body_size + 2 bytes incl. CRLF, or NULL if it stays on disk), made at
 * created_at (cluster time, wall-clock ns: state_wall_ns(s) for a new job;
 * a recovered one's is its record's, so no clock is read per job of a
 * scan or a replay). The job is in no container yet. Returns NULL out of
 * memory. */
Job *queue_job_new(Server *s, Tube *t, uint64_t id, uint32_t pri,
                   uint32_t delay, uint32_t ttr, uint32_t body_size, char *body,
                   int64_t created_at);

/* Takes j out of whichever heap holds it, fixing counters; holder is the
 * connection holding j if it is reserved (else unused). */
void queue_detach(Server *s, Job *j, Session *holder);

/* The sequence a reply showing job j (RESERVED, FOUND) must wait for: 0
 * when the store has acknowledged j's latest change, else the sequence of
 * that change (rebuilt from j->seq's low 32 bits). Either way the reply
 * does not wait for other jobs' pending changes. */
uint64_t queue_job_reply_seq(const Server *s, const Job *j);

/* Nonzero if se holds j (reserved by se). O(1). */
int queue_holds(const Session *se, const Job *j);

/* Restarts the TTR of j, held by se (touch). */
void queue_touch(Server *s, Session *se, Job *j);

/* Puts a detached j in its tube's ready heap and serves blocked
 * reservers. */
void queue_make_ready(Server *s, Job *j);

/* Puts a detached j that was reserved back in its tube's ready heap (a
 * release without delay, a lease's end, its holder gone), storing the
 * change first if its stored state differs: changed says its priority
 * changed, or it is stored as delayed or buried. */
void queue_requeue(Server *s, Job *j, int changed);

/* Puts a detached j in its tube's delay heap, due at monotonic ns due. */
void queue_make_delayed(Server *s, Job *j, int64_t due);

/* Buries a detached j (after every job buried before it). */
void queue_make_buried(Server *s, Job *j);

/* Makes a detached j reserved by se and replies RESERVED to se. */
void queue_reserve(Server *s, Session *se, Job *j);

/* reserve-batch: reserves for se the job a reserve would get now (best
 * priority among its watched, unpaused tubes), without an event; returns
 * it, or NULL if none is ready. */
Job *queue_take_next(Server *s, Session *se);

/* list-jobs reserved: up to max jobs of tube t that are reserved, soonest
 * TTR deadline first, into out; returns how many. Walks every lease (the
 * reserved jobs of all clients), not the tube's other jobs. */
size_t queue_reserved_of(const Server *s, const Tube *t, Job **out, size_t max);

/* Deletes a detached j for good: stores the delete and frees it. A
 * put-unique job whose key's window is not over leaves its key behind
 * (stored, so a restart keeps it) until the window ends. */
void queue_delete(Server *s, Job *j);

/* Moves j (ready, delayed or buried) to tube to: a new job with the next
 * id, j's priority, TTR and body (body: an owned copy, body_size + 2
 * bytes incl. CRLF), ready; j is deleted. The new job's put and j's delete
 * are stored as one unit (one sequence, one group, one Raft entry:
 * store_hold), so a crash keeps both or neither. Returns the new job, or
 * NULL out of memory (nothing changed; body is the caller's again). */
Job *queue_move(Server *s, Job *j, Tube *to, char *body);

/* Forgets k, a key whose job is gone and whose window has ended, and its
 * stored record. */
void queue_dedup_forget(Server *s, DedupKey *k);

/* Forgets the put-unique keys whose window ended by wall-clock now_ns
 * (at most max of them): a key whose job is gone goes at once (its stored
 * record too); one whose job exists goes with its job. */
void queue_dedup_sweep(Server *s, int64_t now_ns, size_t max);

/* Frees a detached j: out of the job table, tube reference dropped. */
void queue_job_free(Server *s, Job *j);

/* Drops a tube reference held by a connection or job, unpausing a tube
 * that is about to vanish. */
void queue_tube_unref(Server *s, Tube *t);

/* Nonzero if t is paused now. */
int queue_tube_paused(const Tube *t, int64_t now);

/* Pauses t for secs seconds from now (0 means one nanosecond, as 1.12). */
void queue_pause(Server *s, Tube *t, uint32_t secs);

/* Blocks se in reserve on its watched tubes (timeout seconds, < 0 forever)
 * and serves it at once if a job is ready. Finding the best ready job is
 * O(log W) amortised for a session watching W >= WATCH_HEAP_MIN tubes
 * while no tube is paused (its tube heap, watch.h), else one look at each
 * tube; if it must wait, one O(1) entry in each tube's waiting set. A job
 * is given to it at once, without joining those sets, when the best tube
 * has no other blocked reserver. */
void queue_wait(Server *s, Session *se, int32_t timeout);

/* Ends se's blocked reserve without a reply. O(W): one O(1) removal from
 * each watched tube's waiting set. */
void queue_unwait(Server *s, Session *se);

/* Appends t, not watched by se yet, to se's watch list, taking over the
 * caller's reference on t and counting se among its watchers (a session
 * watching WATCH_HEAP_MIN tubes or more gets a tube heap, watch.h).
 * Returns 0, or -1 out of memory (nothing changed). Not while se waits. */
int queue_watch(Server *s, Session *se, Tube *t);

/* Drops the i-th tube of se's watch list (the last one takes its place,
 * as ptrset_delete), its watching count and reference; a blocked reserve
 * goes on waiting on the other tubes. O(1). */
void queue_unwatch(Server *s, Session *se, size_t i);

/* Nonzero if se holds a job whose TTR ends within the DEADLINE_SOON margin. */
int queue_deadline_soon(const Session *se, int64_t now);

/* Runs every timer transition due at monotonic time now. */
void queue_tick(Server *s, int64_t now);

/* Kicks j (buried or delayed) to ready: out of its heap, its kick count,
 * its record rewritten, then ready (kick, kick-job, the HTTP API). */
void queue_kick_job(Server *s, Job *j);

/* The reader thread could not read j's body for a reply to se: logs it and,
 * if se holds j (a reserve), buries j (stored), so that it neither stays
 * reserved by a client that never got it nor blocks its tube. The caller
 * replies INTERNAL_ERROR. */
void queue_body_unreadable(Server *s, Session *se, Job *j);

#endif
