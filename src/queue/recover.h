/* queue/recover.h - the in-memory queue built back from the store's
 * records (store.h's StoreJob): at start-up from the recovery scan of
 * every shard, and in cluster mode, on a node that does not serve, from
 * the committed records the raft thread hands the loop (cluster/node.c).
 * A job comes back ready, delayed (its due time, wall-clock ns in the
 * record, made monotonic against state_wall_ns) or buried, never reserved;
 * a put-unique key comes back with its window. Nothing is stored. Loop
 * thread only. */
#ifndef ROCKSTALK_QUEUE_RECOVER_H
#define ROCKSTALK_QUEUE_RECOVER_H

#include <stdint.h>

#include "queue/state.h"
#include "store/store.h"

/* Recreates one job read back from the store at start-up (store_recover
 * callback; ctx is the Server). Returns 0 or -1 out of memory. */
int queue_recover_job(void *ctx, const StoreJob *sj);

/* Cluster mode, a node that does not serve (node.h): applies one committed
 * mutation record to the in-memory queue, so that it stays what the
 * recovery scan of the shards would build. op (store.h's StoreReplayFn):
 * STORE_REPLAY_PUT or _UPDATE with sj the job's new record (an update
 * replaces the job and its put-unique key with what sj says, as recovery
 * would read it), or STORE_REPLAY_DELETE (sj unused; the job or key record
 * goes). Nothing is stored. Such a node has no sessions, so no job is
 * reserved. applied_ns: this node's wall clock (wall_ns()) when the
 * record was applied, for a put (queue_clock_sample). The caller keeps
 * s->next_id above the id of every job and
 * put-unique key it holds (the scan's next id, raised past each put
 * replayed): a put at or above it is then taken as new, unlooked-up.
 * Returns 0 or -1 out of memory. */
int queue_replay(Server *s, int op, uint64_t id, const StoreJob *sj,
                 int64_t applied_ns);

#endif
