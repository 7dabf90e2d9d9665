/* store/mut.h - the mutation thread: the only writer of RocksDB (with the
 * commit journal, it and its applier thread, one at a time). It takes
 * each group from the hand-off queue, applies its records to one
 * WriteBatch per shard, writes the batches of the shards the group touched
 * (group commit), has them synced as the sync mode says and publishes the
 * group's last sequence. With the commit journal (STORE_SYNC_ALWAYS, and
 * STORE_SYNC_INTERVAL without the sync), a
 * group is first written to the journal and synced, published, and then,
 * after a short wait in the write-behind window that cancels jobs put and
 * deleted within it (store/pend.h), written to RocksDB with the WAL
 * unsynced (store/journal.h): by this thread itself, after the replies
 * it published, while the window holds little; by the applier thread once
 * it holds more than APPLIER_BYTES (large bodies, store/bodyring.h), so
 * that a journal commit never waits behind a long RocksDB write. In cluster
 * mode the loop thread proposes each chunk it flushes as Raft entries itself
 * (mut_propose_direct, the hand-off's direct hook: no thread wake-up on a
 * reply's path; the entries are cut in store/propose.h), and the raft
 * thread writes the shards (store/raft.h); this thread then has nothing
 * to do.
 *
 * Threads: mut_init, mut_start, mut_join and mut_destroy on the main
 * thread; mut_run is the mutation thread's body (or runs on the main thread
 * for a store that was never started: no applier then); the applier
 * thread is mut.c's own (started by mut_start with a journal, stopped by
 * mut_run before its final drain); mut_propose_direct on the loop
 * thread. Calls: store_bodyring (replay's check of ring entries), store_handoff
 * (input), store_sync (syncs), store_ack (publication, fail-stop, counters),
 * store_shard (RocksDB handles), store_journal, store_pend, store_enc
 * (records), store_propose (cluster mode's entries), store_snapreq (a
 * backup's moment), store_idle (the rest round: memtables flushed once the
 * shards took no write for a while), store_util.
 */
#ifndef ROCKSTALK_STORE_MUT_H
#define ROCKSTALK_STORE_MUT_H

#include <pthread.h>
#include <stdint.h>

#include <rocksdb/c.h>

#include "store/ack.h"
#include "store/batch.h"
#include "store/bodyring.h"
#include "store/handoff.h"
#include "store/idle.h"
#include "store/journal.h"
#include "store/pend.h"
#include "store/propose.h"
#include "store/shard.h"
#include "store/snapreq.h"
#include "store/sync.h"
#include "store/types.h"

/* The mutation thread's state; lives in the Store. */
typedef struct StoreMut {
    StoreSyncMode mode;
    int nshards;
    StoreShard *shard; /* borrowed: the store's, [nshards] */
    const StoreIO *io; /* borrowed */
    Handoff *ho;       /* borrowed */
    StoreSync *sync;   /* borrowed */
    StoreAck *ack;     /* borrowed */
    /* mutation thread */
    ShardBatches sb;       /* the groups' batches */
    uint64_t prev_records; /* records in the previous group */
    uint64_t prev_puts;    /* ...of which puts */
    Journal *journal;      /* borrowed; NULL: no commit journal */
    uint64_t group;        /* number of the latest group (store/journal.h) */
    Pend pend;             /* the journal's write-behind window */
    uint64_t appended;     /* the latest group in the journal */
    uint64_t drained;      /* the latest group written to the shards */
    uint64_t cover_need;   /* the last group of the journal file to be
                              reused next (0: none needs covering) */
    uint64_t cover_posted; /* WAL syncs were posted once the shards held
                              every group up to this */
    struct iovec *iov;     /* journal_append's pieces: [0] header, chunks */
    int iov_cap;
    /* the applier thread (commit journal): writes the window's groups to
     * the shards. pmu guards pend (the mutation thread adds, the applier
     * takes); wmu guards the shards' writes and what they publish: sb,
     * drained, cover_need, cover_posted, ack_applied (either thread) */
    pthread_mutex_t pmu, wmu;
    pthread_cond_t acv; /* under pmu: a group fell due, or stop */
    pthread_t applier;
    int applier_on, applier_stop;
    BodyRing *ring;      /* borrowed: the body ring whose entries replay
                            checks */
    unsigned char *rbuf; /* replay: a ring body read back to be checked */
    size_t rcap;
    /* cluster mode (store/propose.h): each chunk is proposed as Raft
     * entries by the loop thread instead of written; prop.fn NULL:
     * standalone. Only the loop thread touches it then. */
    Proposer prop;
    /* a backup's request for one moment (store/snapreq.h): served between
     * two groups, the write-behind window written first */
    SnapReq snapreq;
    /* the rest round (store/idle.h): standalone, once started */
    IdleFlush idle;
    int idle_on;
    pthread_t thread;
    int started;
} StoreMut;

/* Initialises m (zeroed) over the store's parts, borrowed for m's life, and
 * creates a WriteBatch per shard. */
void mut_init(StoreMut *m, StoreSyncMode mode, StoreShard *shard, int nshards,
              const StoreIO *io, Handoff *ho, StoreSync *sync, StoreAck *ack);

/* Writes the batch of every shard the records added since the last write
 * touched, marked as holding every group up to group, and syncs them if
 * sync (the mutation or applier thread under wmu, or the main thread's
 * replay, store/mutreplay.h). Returns 0, or -1 after recording the
 * failure (store_ack). */
int mut_write_group(StoreMut *m, int sync, uint64_t group);

/* Loop thread, cluster mode (handoff_direct's fn; arg is m): proposes
 * chunk c's records (c->next NULL) as entries of at most
 * STORE_RAFT_ENTRY_MAX bytes, cut only between two sequences, each
 * publishing the last sequence it holds whole (seq: the chunk's last).
 * After a store failure records are dropped. */
void mut_propose_direct(void *arg, Chunk *c, uint64_t seq);

/* Starts the mutation thread (mut_run). Returns 0, or -1 with a message in
 * err. */
int mut_start(StoreMut *m, char *err, size_t errcap);

/* Commits groups until handoff_stop and an empty queue, then makes
 * everything durable (sync_final). The thread's body; also called on the
 * main thread to drain a store that was never started. */
void mut_run(StoreMut *m);

/* After handoff_stop: waits for the mutation thread, if started, or runs
 * mut_run here. */
void mut_join(StoreMut *m);

/* Any thread but the mutation thread, standalone: a RocksDB snapshot of
 * every shard taken by the mutation thread between two groups, its
 * write-behind window written first: snaps[0..nshards) then show the
 * state after sequence *seq exactly, every change published up to the
 * request included (store/snapreq.h; the caller releases them). Returns
 * 0, or -1 with a message in err. */
int mut_snapshots(StoreMut *m, const rocksdb_snapshot_t **snaps, uint64_t *seq,
                  char *err, size_t errcap);

/* Frees the WriteBatches and the journal's iovec (the thread must be
 * gone). */
void mut_destroy(StoreMut *m);

#endif
