/* queue/timers.h - the Server's four timer heaps (state.h), which order
 * what must happen by itself: tubes by their soonest delayed job
 * (delay_tubes), sessions by their soonest TTR deadline (lease_heap),
 * paused tubes by the end of their pause (pause_heap) and blocked
 * reserves by when they end (wait_heap). The state machine (queue.c)
 * keeps each entry in step as jobs move (the pause heap's it keeps itself:
 * queue_pause, queue_tube_unref), queue_tick runs what is due, and the
 * loop's one timer is set to timers_next_deadline. Times are monotonic
 * ns (mono_ns). Each heap holds borrowed pointers (the Tube or Session
 * stays its owner's) and its entry's index in the pointee (delay_pos,
 * lease_pos, pause_pos, wait_pos; SIZE_MAX: in no heap). Growth out of
 * memory aborts (a timer must never be lost silently). Loop thread
 * only. */
#ifndef ROCKSTALK_QUEUE_TIMERS_H
#define ROCKSTALK_QUEUE_TIMERS_H

#include <stdint.h>

#include "queue/session.h"
#include "queue/state.h"
#include "queue/tube.h"

/* Sets up the server's timer heaps (empty; freed with the Server). */
void timers_init(Server *s);

/* Keeps t's place in the delayed-tube heap in step with its delay heap:
 * in it, at its soonest delayed job, while t has delayed jobs; out of it
 * once t has none. After every change of t->delay. */
void timers_delay_update(Server *s, Tube *t);

/* Keeps se's place in the lease heap in step with its reserved jobs: in
 * it, at its soonest TTR deadline, while se holds jobs; out of it once se
 * holds none. After every change of se->reserved. */
void timers_lease_update(Server *s, Session *se);

/* se is blocked in reserve (or still is, its reserved jobs changed):
 * (re)places it in the wait heap at the time its reserve must end by
 * itself (se->wake_at): its timeout (se->timeout seconds from now, the
 * monotonic time in ns) or the DEADLINE_SOON margin of its soonest
 * reserved job, whichever comes first; out of the heap (wake_at 0) if
 * neither applies. */
void timers_wait_set(Server *s, Session *se, int64_t now);

/* The earliest pending deadline of the four heaps (monotonic ns), or
 * INT64_MAX if they are empty. */
int64_t timers_next_deadline(const Server *s);

#endif
