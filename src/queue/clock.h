/* queue/clock.h - cluster time on a follower (PROTOCOL.md 15.2): the
 * leader's clock learnt from the jobs put there, and the delayed jobs'
 * due times kept in step with it. Loop thread only. */
#ifndef ROCKSTALK_QUEUE_CLOCK_H
#define ROCKSTALK_QUEUE_CLOCK_H

#include <stdint.h>

#include "queue/state.h"

/* Following, this node learns the leader's clock from the creation time
 * of each job put there (leader_ns, the leader's cluster time,
 * state_wall_ns) against this node's wall clock when the put was applied
 * (local_ns, wall_ns(); the loop may take the record later):
 * clock_offset_ns becomes the highest leader_ns less local_ns seen in the
 * last one or two windows of
 * QUEUE_CLOCK_WINDOW_NS (a job is applied after it was made, so each
 * sample is at most the true offset; the highest is the closest, within
 * the fastest replication's delay). A change of QUEUE_CLOCK_STEP_NS or more
 * moves the due times of the delayed jobs replayed so far with it. */
#define QUEUE_CLOCK_WINDOW_NS (30 * NS_PER_SEC)
#define QUEUE_CLOCK_STEP_NS (10 * 1000000LL)
void queue_clock_sample(Server *s, int64_t leader_ns, int64_t local_ns);

/* Opens a new window of samples once the current one is
 * QUEUE_CLOCK_WINDOW_NS old (now_ns: mono_ns()); the one before is kept,
 * the one before that dropped. The replay calls it once per batch of
 * records, before their samples (node_drain_replay), so that no clock is
 * read per record. */
void queue_clock_window(Server *s, int64_t now_ns);

#endif
