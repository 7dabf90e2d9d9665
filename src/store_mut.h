/* store_mut.h - the mutation thread: the only writer of RocksDB. It takes
 * each group from the hand-off queue, applies its records to one
 * WriteBatch per shard, writes the batches of the shards the group touched
 * (group commit), has them synced as the sync mode says and publishes the
 * group's last sequence.
 *
 * Threads: mut_init, mut_start, mut_join and mut_destroy on the main
 * thread; mut_run is the mutation thread's body (or runs on the main thread
 * for a store that was never started). Calls: store_handoff (input),
 * store_sync (syncs), store_ack (publication, fail-stop, counters),
 * store_shard (RocksDB handles), store_enc (records), store_util.
 */
#ifndef ROCKSTALK_STORE_MUT_H
#define ROCKSTALK_STORE_MUT_H

#include <pthread.h>
#include <stdint.h>

#include <rocksdb/c.h>

#include "store_types.h"
#include "store_ack.h"
#include "store_handoff.h"
#include "store_shard.h"
#include "store_sync.h"

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
    rocksdb_writebatch_t *batch[STORE_SHARDS_MAX];
    int in_group[STORE_SHARDS_MAX];    /* batch holds this group's records */
    int hwm_changed[STORE_SHARDS_MAX]; /* this group raised the shard's hwm */
    uint64_t prev_records;             /* records in the previous group */
    uint64_t prev_puts;                /* ...of which puts */
    pthread_t thread;
    int started;
} StoreMut;

/* Initialises m (zeroed) over the store's parts, borrowed for m's life, and
 * creates a WriteBatch per shard. */
void mut_init(StoreMut *m, StoreSyncMode mode, StoreShard *shard, int nshards,
              const StoreIO *io, Handoff *ho, StoreSync *sync, StoreAck *ack);

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

/* Frees the WriteBatches (the thread must be gone). */
void mut_destroy(StoreMut *m);

#endif
