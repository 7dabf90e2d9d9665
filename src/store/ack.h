/* store/ack.h - what the store publishes to other threads: the written and
 * durable sequences the loop acknowledges by, the fail-stop flag with its
 * message, the stats counters, and the notify callback.
 *
 * Threads: published by the mutation thread (sequences, counters) and by
 * any thread that fails (the mutation thread, a syncer); read by the loop
 * thread (store_acked_seq, store_failed, store_stats). Calls: nothing of
 * the store (libc atomics only).
 */
#ifndef ROCKSTALK_STORE_ACK_H
#define ROCKSTALK_STORE_ACK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "store/types.h"

/* Ordering (issue 12, item 8): a failure and a publication are each made
 * under mu, and a publication checks failed under it, so the two are
 * totally ordered: a sequence published is one published before the first
 * failure was recorded, and none is published after it. Under -f MS a
 * syncer's failed fsync thus stops every later acknowledgement, whichever
 * thread gets to mu first; readers need no lock (acquire loads). */
typedef struct StoreAck {
    void (*notify)(void *arg); /* StoreConfig.notify, may be NULL */
    void *notify_arg;
    pthread_mutex_t mu; /* orders ack_fail against ack_publish */
    /* written under mu (sequences by the mutation thread, failed by any
     * thread), read by any thread */
    _Atomic uint64_t written_seq, durable_seq;
    /* by the mutation thread only: the latest sequence in RocksDB (the
     * commit journal publishes a group before RocksDB takes it) */
    _Atomic uint64_t applied_seq;
    /* set by a reader that waits for applied_seq, taken by the mutation
     * thread, which then writes its whole write-behind window */
    _Atomic int drain_asked;
    _Atomic int failed;
    char failmsg[512]; /* written once, under mu, before failed (release) */
    _Atomic uint64_t st_records, st_groups, st_syncs, st_sync_ns,
        st_last_sync_ns, st_bytes, st_replayed;
    _Atomic uint64_t st_sync_hist[STORE_SYNC_BUCKETS];
} StoreAck;

/* Initialises a (zeroed) with the notify callback and its argument. */
void ack_init(StoreAck *a, void (*notify)(void *arg), void *notify_arg);

/* Releases what ack_init set up. */
void ack_destroy(StoreAck *a);

/* Fail-stop: records the first failure ("<what> shard-NN: <msg>", or
 * "<what>: <msg>" for a shard < 0, the commit journal), then
 * nothing more is published; calls notify. Takes ownership of msg
 * (malloc'd, may be NULL). Any thread. */
void ack_fail(StoreAck *a, const char *what, int shard, char *msg);

/* Mutation thread: RocksDB holds every record up to seq (written with its
 * WAL, synced or not). */
void ack_applied(StoreAck *a, uint64_t seq);

/* Any thread but the mutation thread: waits until RocksDB holds every
 * record published so far (the written sequence when called), or a
 * failure is recorded, so a read finds what the loop was told is stored.
 * If it has to wait, asks the mutation thread to write its write-behind
 * window (drain_asked) and calls kick(kick_arg) to wake it; then polls
 * every 10 us. */
void ack_wait_applied(StoreAck *a, void (*kick)(void *), void *kick_arg);

/* Nonzero once a failure is recorded. Any thread. */
int ack_is_failed(const StoreAck *a);

/* Mutation thread: publishes seq as written (and durable if durable) and
 * calls notify, unless a failure is recorded (then nothing). */
void ack_publish(StoreAck *a, uint64_t seq, int durable);

/* Mutation thread, at stop: the written sequence becomes durable after the
 * final sync (no notify: nobody waits any more). */
void ack_final_durable(StoreAck *a);

/* The acknowledged sequence: durable if durable, else written. Acquire. */
uint64_t ack_seq(const StoreAck *a, int durable);

/* As store_failed (store.h). */
int ack_failed(const StoreAck *a, char *msg, size_t cap);

/* Counts one WAL fsync of ns nanoseconds (count, total and histogram). */
void ack_stat_sync(StoreAck *a, uint64_t ns);

/* Fills out's counters (not nshards). Relaxed loads. */
void ack_stats(const StoreAck *a, StoreStats *out);

#endif
