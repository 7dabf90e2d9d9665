/* store/sync.h - WAL syncs under the three sync modes (store.h
 * StoreSyncMode): which shards are dirty (written since their last sync),
 * the per-shard syncer threads that let the fsyncs of several shards
 * overlap, the interval syncs of STORE_SYNC_INTERVAL and the final sync at
 * stop.
 *
 * Threads: sync_start and sync_stop on the main thread; everything else on
 * the mutation thread, which owns the dirty flags; a syncer thread per
 * shard runs syncer_main (store/sync.c) and talks to the mutation thread
 * under its own mutex only. Calls: store_ack (fail-stop, counters),
 * store_shard (the RocksDB handles), store_util; syncs go through the
 * StoreIO seam (store.h).
 */
#ifndef ROCKSTALK_STORE_SYNC_H
#define ROCKSTALK_STORE_SYNC_H

#include <pthread.h>
#include <stdint.h>

#include "store/ack.h"
#include "store/shard.h"
#include "store/types.h"

struct StoreSync;

/* The two protocols a syncer thread can serve, one type each (a shard has
 * at most one of them running, chosen by the sync mode):
 *
 * SyncJoin, STORE_SYNC_ALWAYS with several shards: the mutation thread
 * posts a dirty shard's fsync, syncs another shard itself, then waits for
 * the result (sync_dirty), so the fsyncs of a group overlap (measured
 * 1.2-1.4x faster than serial for groups touching 2 shards). The result
 * goes back to the mutation thread, which accounts for it. Shard 0 never
 * needs one (the first dirty shard is synced by the mutation thread).
 *
 * SyncPost, STORE_SYNC_INTERVAL without the commit journal: the mutation
 * thread posts a shard's periodic fsync and goes on writing and
 * acknowledging (sync_interval); with the journal (either mode), the
 * fsyncs that let a journal file be reused (sync_cover_post);
 * nobody waits, so the syncer counts the fsync and records a failure
 * itself (store_ack). busy: posted or running; a busy shard stays dirty. */
/* What both have: a thread for one shard that waits for req or stop. */
typedef struct SyncThread {
    struct StoreSync *y;
    int index; /* shard */
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int started;   /* main thread */
    int req, stop; /* under mu */
} SyncThread;

/* A SyncJoin helper: the result of the posted fsync goes back. */
typedef struct SyncJoin {
    SyncThread t;
    int done;     /* under t.mu: the result is in */
    int rc;       /* under t.mu: the result, once done */
    char *errmsg; /* under t.mu: malloc'd, taken by the waiter */
    uint64_t ns;  /* under t.mu: the fsync's duration */
} SyncJoin;

/* A SyncPost helper: the syncer keeps the result. */
typedef struct SyncPost {
    SyncThread t;
    int busy; /* under t.mu: posted or running */
} SyncPost;

/* STORE_SYNC_INTERVAL with the commit journal: the syncer of the journal's
 * files, which the interval syncs instead of the shards' WALs. */
typedef struct SyncJournal {
    SyncThread t;     /* index -1 */
    int busy;         /* under t.mu: posted or running */
    unsigned posted;  /* under t.mu: bit i: file i is to be synced */
    unsigned written; /* mutation thread: bit i: file i written since its
                         last post */
    const int *fd;    /* the journal's descriptors, borrowed */
    int nfd;
} SyncJournal;

/* The sync state of every shard; lives in the Store. */
typedef struct StoreSync {
    StoreSyncMode mode;
    int interval_ms; /* STORE_SYNC_INTERVAL */
    int journal;     /* with the commit journal: SyncPost helpers for
                        sync_cover (no SyncJoin ones); in
                        STORE_SYNC_INTERVAL also the journal's syncer */
    int nshards;
    StoreShard *shard; /* the store's, [nshards] */
    const StoreIO *io;
    StoreAck *ack;
    /* mutation thread */
    int dirty[STORE_SHARDS_MAX];     /* written since the last sync */
    int64_t last_sync_mono;          /* ns, CLOCK_MONOTONIC */
    uint64_t last_sync_dur;          /* ns the latest synced group took */
    SyncJoin join[STORE_SHARDS_MAX]; /* STORE_SYNC_ALWAYS, shards 1.. */
    SyncPost post[STORE_SHARDS_MAX]; /* STORE_SYNC_INTERVAL, every shard */
    SyncJournal jsync;               /* STORE_SYNC_INTERVAL with the journal */
} StoreSync;

/* Initialises y (zeroed) for the given mode (interval_ms:
 * STORE_SYNC_INTERVAL only), with no shards yet; borrows ack for y's life.
 * Free with sync_destroy. */
void sync_init(StoreSync *y, StoreSyncMode mode, int interval_ms,
               StoreAck *ack);

/* Gives y the open shards shard[0..nshards) and the StoreIO their syncs go
 * through, both borrowed for y's life. Before sync_start. */
void sync_attach(StoreSync *y, StoreShard *shard, int nshards,
                 const StoreIO *io);

/* The groups go to the commit journal (store/journal.h), whose files are
 * fd[0..nfd) (borrowed; nfd <= 8); it needs the SyncPost helpers
 * (sync_cover). In STORE_SYNC_ALWAYS each group's record is synced as it
 * is written; in STORE_SYNC_INTERVAL the records are written unsynced and
 * the interval syncs the journal's written files (sync_journal_written) on
 * a syncer thread of their own instead of the shards' WALs: what is older
 * than the interval is then durable in the journal, which recovery
 * replays. Before sync_start. */
void sync_use_journal(StoreSync *y, const int *fd, int nfd);

/* Mutation thread, STORE_SYNC_INTERVAL with the journal: journal file i
 * (an index into sync_use_journal's fd) was written. */
void sync_journal_written(StoreSync *y, int i);

/* Starts the syncer threads the mode needs (SyncJoin or SyncPost). Returns 0,
 * or -1 (message in err; call sync_stop). */
int sync_start(StoreSync *y, char *err, size_t errcap);

/* Stops and joins the syncer threads that run. */
void sync_stop(StoreSync *y);

/* Frees y's mutexes and condition variables (after sync_stop). */
void sync_destroy(StoreSync *y);

/* Mutation thread: a write with sync=1 (a write and an fsync in one call)
 * took ns nanoseconds; counts it as a sync. */
void sync_note_synced_write(StoreSync *y, uint64_t ns);

/* Mutation thread: shard i is dirty (written since its last sync) or not. */
void sync_mark(StoreSync *y, int i, int dirty);

/* Mutation thread: fsyncs the WAL of every dirty shard, overlapping them on
 * the SyncJoin helpers if they run, and counts each fsync once. Returns 0,
 * or -1 after recording the failure (store_ack). */
int sync_dirty(StoreSync *y);

/* Mutation thread: nonzero if what the interval syncs is dirty: a shard
 * (or, with the journal in STORE_SYNC_INTERVAL, a journal file) was
 * written since its last sync. */
int sync_any_dirty(const StoreSync *y);

/* Mutation thread, STORE_SYNC_INTERVAL: when the interval has passed since
 * the last sync, posts every dirty shard to its syncer (with the journal:
 * the journal's written files to theirs), fire and forget. */
void sync_interval(StoreSync *y);

/* Mutation thread, commit journal: posts an fsync of every shard's WAL
 * (after the previous ones are done), which makes durable everything
 * written before this call once sync_cover_wait returns 0. Without syncer
 * threads it syncs here. Returns 0, or -1 if a failure is recorded. */
int sync_cover_post(StoreSync *y);

/* Mutation thread, commit journal: waits until the posted fsyncs are
 * done; returns 0, or -1 if a failure is recorded (a posted fsync failed:
 * nothing it covered may be relied on). */
int sync_cover_wait(StoreSync *y);

/* Mutation thread, at stop: waits for the posted fsyncs (SyncPost), then one
 * fsync of every shard whatever the mode, each counted once; then the
 * written sequence becomes durable (unless failed). */
void sync_final(StoreSync *y);

#endif
