/* store/idle.h - the rest round: once the shards have taken no write for
 * IDLE_QUIET_NS, the mutation thread flushes (without waiting) the
 * memtables of every column family that hold more than IDLE_FLUSH_MIN
 * bytes, then watches until those flushes are done: their arena blocks
 * (MiBs each, from the glibc heap) are then free, and the loop's next idle
 * second gives their pages back (server.c maybe_trim, which waits for the
 * round: store.h StoreStats.at_rest). Without it, whatever the memtables
 * held when a load ended (0 to 2 x 32 MiB of bodies, 16 MiB of meta)
 * stayed resident at rest.
 *
 * Only the standalone store's mutation thread runs rounds: no write is
 * slowed (a round starts after IDLE_QUIET_NS without one, and its flushes
 * run on RocksDB's background threads; rocksdb_flush_cf with wait=0 only
 * switches the memtable). A flush is an ordinary one: a body the body
 * ring's reuse rule waits for (store/bodyring.h) is only made durable
 * sooner; snapshots and iterators (a backup, store/snapreq.h) read on
 * across it; at stop no round starts (mut_run). Cluster mode's shards
 * (atomic_flush, no WAL: store/shard.h) are written by the raft thread
 * and never flushed here.
 *
 * Threads: idle_init and idle_destroy on the main thread; idle_deadline
 * and idle_step on the mutation thread; idle_at_rest and the counters on
 * any thread. Calls: store_shard (the handles), RocksDB's C API.
 */
#ifndef ROCKSTALK_STORE_IDLE_H
#define ROCKSTALK_STORE_IDLE_H

#include <stdatomic.h>
#include <stdint.h>

#include <rocksdb/c.h>

#include "store/shard.h"

/* How long the shards must have taken no write before a round, ns: short
 * enough that the loop's next idle second (maybe_trim, at most about 2 s
 * after the last command) finds the round done. */
#define IDLE_QUIET_NS 500000000
/* A memtable (active and immutable ones of a column family) holding more
 * bytes than this is flushed by a round. */
#define IDLE_FLUSH_MIN ((uint64_t)2 << 20)
/* How often a round looks whether its flushes are done, ns. */
#define IDLE_POLL_NS 50000000

/* A round's state; lives in the StoreMut. */
typedef struct IdleFlush {
    rocksdb_flushoptions_t *fo; /* wait=0 */
    /* mutation thread */
    uint64_t seen;      /* the store's written bytes at the last look */
    int64_t quiet_from; /* when they last changed, CLOCK_MONOTONIC ns */
    int armed;          /* written since the last round: one is due */
    int waiting;        /* the round's flushes were started, not all done */
    int64_t next_poll;  /* when to look at them again */
    uint64_t pending;   /* bytes of the memtables the round flushes */
    /* written by the mutation thread, read by any */
    _Atomic uint64_t rest_bytes; /* written bytes when the latest round
                                    ended (UINT64_MAX: none yet) */
    _Atomic uint64_t st_rounds;  /* rounds that flushed a memtable */
    _Atomic uint64_t st_flushed; /* bytes of the memtables they flushed */
} IdleFlush;

/* Initialises f (zeroed). */
void idle_init(IdleFlush *f);
void idle_destroy(IdleFlush *f);

/* Mutation thread: when idle_step next has something to do
 * (CLOCK_MONOTONIC ns), or INT64_MAX: wait for input only. */
int64_t idle_deadline(const IdleFlush *f);

/* Mutation thread, after each wake-up: written is the store's bytes
 * written to the shards so far (StoreAck.st_bytes), busy nonzero while
 * writes are still to come (the write-behind window holds groups), now
 * CLOCK_MONOTONIC ns. Starts a round once written stayed the same for
 * IDLE_QUIET_NS, and ends it when its flushes are done. A flush that
 * RocksDB refuses to start is skipped (the memtable stays, as without a
 * round; a failed background flush fails the next write, store_ack). */
void idle_step(IdleFlush *f, StoreShard *sh, int nshards, uint64_t written,
               int busy, int64_t now);

/* Any thread: 1 if the latest round ended with the store's written bytes
 * at written (nothing was written since), else 0. */
int idle_at_rest(const IdleFlush *f, uint64_t written);

/* Any thread: bytes of every shard's memtables now (RocksDB's
 * "rocksdb.size-all-mem-tables": active, immutable, and flushed ones still
 * pinned by a reader). */
uint64_t idle_memtable_bytes(const StoreShard *sh, int nshards);

#endif
