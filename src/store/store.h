/* store.h - durable job storage: N RocksDB shards (a job's shard is id % N)
 * written only by one serialising mutation thread, with grouped WAL commits.
 *
 * Threads: store_open, store_recover, store_start and store_close run on the
 * main thread outside the event loop. store_add_*, store_flush,
 * store_acked_seq, store_backlog_bytes, store_failed and store_stats run on
 * the loop thread; store_get_body and store_get_bodies on any thread (the
 * loop, the body reader of prefetch.h). Everything else runs on the mutation
 * thread (store/mut.h), the only writer of RocksDB, and on its syncer
 * threads (store/sync.h). The loop thread's only contact with them is the
 * hand-off queue (store/handoff.h: mutex + condvar), the published
 * sequences and failure (store/ack.h) and the notify callback. This is the
 * only store header the loop side includes; the other store/ headers are
 * the store's own modules (store.c lists their layers).
 *
 * The durability contract built on this is protocol/PROTOCOL.md, section 11
 * (Durability); RocksDB calls follow rocksdb/c.h and rocksdb/db.h.
 *
 * Errors: functions that can fail return 0 on success and -1 on failure,
 * with a human-readable message written into err (errcap bytes, always
 * NUL-terminated). Nothing here prints.
 */
#ifndef ROCKSTALK_STORE_H
#define ROCKSTALK_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "store/types.h"

typedef struct Store Store;

/* Opens (creating if missing) the data directory: takes the directory lock
 * (fails if another server holds it), checks the recorded format version and
 * shard count (fails without touching anything on a newer format or a
 * different nonzero cfg->nshards), and opens every shard. Returns the store
 * in *out, owned by the caller until store_close. */
int store_open(const StoreConfig *cfg, Store **out, char *err, size_t errcap);

/* Refuses (-1) a shard holding an unfinished restore ("restoring",
 * store_restore). Then scans every shard's job metadata once (bodies are
 * not read) and calls
 * cb(ctx, job) for each stored job, in id order within a shard. cb returns 0
 * to go on or -1 to abort (store_recover then fails). *next_id is set to one
 * more than the highest id ever allocated (stored high-water mark or largest
 * id seen), so ids are never reused. Main thread, before store_start. */
int store_recover(Store *s, int (*cb)(void *ctx, const StoreJob *job),
                  void *ctx, uint64_t *next_id, char *err, size_t errcap);

/* Starts the mutation thread. */
int store_start(Store *s, char *err, size_t errcap);

/* Loop thread: appends mutation records to the group being built. seq is the
 * loop's applied sequence of the change and must not decrease between calls.
 * The body (body_size bytes) is copied; nothing is borrowed.
 *   store_add_put:    a new job (meta and body), written exactly once: one
 *                     RocksDB entry when the caller set STORE_F_INLINE in
 *                     its flags (a body of at most STORE_INLINE_MAX bytes),
 *                     else a meta and a body entry. The caller keeps
 *                     STORE_F_INLINE in the job's later updates (each then
 *                     a Merge that keeps the body) and says
 *                     STORE_DEL_NO_BODY in its delete.
 *   store_add_update: a changed meta record (bury, kick, release with delay or
 *                     new priority); the caller sets STORE_F_REWRITTEN in the
 *                     record it passes and remembers it for the delete. With
 *                     state STORE_GONE the job's body is deleted and its meta
 *                     stays as the record of its put-unique key.
 *   store_add_delete: the job (or a STORE_GONE record) is gone; flags are
 *                     STORE_DEL_*: REWRITTEN if its meta was ever rewritten
 *                     (chooses Delete or SingleDelete), NO_BODY for a
 *                     STORE_GONE record, SMALL for a body below
 *                     STORE_RING_MIN_LOW bytes (no body ring reference).
 * They cannot fail (memory exhaustion aborts). */
void store_add_put(Store *s, uint64_t seq, const StoreJob *job,
                   const void *body);
void store_add_update(Store *s, uint64_t seq, const StoreJob *job);

/* Loop thread: store_add_put for a body the body ring holds at ref (from
 * store_ring_take): the record and the commit journal carry ref instead
 * of the body (PROTOCOL.md 11.5), so body is not read (nor copied); the
 * mutation or applier thread reads it back from the ring when it writes
 * it to RocksDB, as store_add_put's. ref NULL: store_add_put. */
void store_add_put_ring(Store *s, uint64_t seq, const StoreJob *job,
                        const void *body, const StoreRingRef *ref);

/* ---- the body ring (store/bodyring.h; PROTOCOL.md 11.5) ----
 * A large put body is written and synced by the body writer thread before
 * the put is applied, so that the commit of small records never waits for
 * it. Loop thread. */

/* The smallest body the ring takes, bytes; 0: no ring (no journal, or
 * StoreConfig.ring_min 0, or the store is not started). */
size_t store_ring_min(const Store *s);

/* Hands body (malloc'd, len bytes; owned by the store until
 * store_ring_take hands it back, whatever happens to the caller) to the
 * body writer. Returns its ticket (> 0), or 0 if the ring does not take it
 * (the caller keeps body). */
uint64_t store_ring_submit(Store *s, char *body, size_t len);

/* Takes every finished ring write, in the order written; *out points at
 * them until the next call; the caller owns their bodies. The caller
 * then applies each (store_add_put_ring) or drops it, and says
 * store_ring_resolved. Cheap when none (no lock). */
size_t store_ring_take(Store *s, StoreRingDone **out);

/* Every body taken so far is in a record of sequence seq or below, or was
 * dropped: the ring may reuse its place once RocksDB holds seq. */
void store_ring_resolved(Store *s, uint64_t seq);
void store_add_delete(Store *s, uint64_t seq, uint64_t id, int flags);

/* Loop thread: on, the records added until it is turned off are one unit,
 * committed in one group (and, in cluster mode, one Raft entry): the
 * caller gives them one sequence (a move's put and delete, the HTTP API).
 * Off may hand them over at once. */
void store_hold(Store *s, int on);

/* Loop thread, once per loop iteration (ev_prepare): hands the records added
 * since the last call to the mutation thread as one unit (in cluster mode:
 * proposes them). Cheap if none. */
void store_flush(Store *s);

/* Loop thread: n client connections sent input in the latest window of
 * about a millisecond (server.c). The mutation thread spins briefly for
 * the next input only when few did (store/handoff.h). */
void store_note_active(Store *s, unsigned n);

/* Loop thread: the highest seq whose change is acknowledged under the sync
 * mode (durable for STORE_SYNC_ALWAYS, written otherwise). Acquire load. */
uint64_t store_acked_seq(const Store *s);

/* Loop thread: bytes handed over or being built that are not yet written;
 * the loop throttles producers above a high-water mark (backpressure). */
size_t store_backlog_bytes(const Store *s);

/* Any thread: nonzero once a write or sync failed; the message is copied
 * into msg. After a failure nothing more is acknowledged (fail-stop). */
int store_failed(Store *s, char *msg, size_t cap);

/* Loop thread: counters for stats. */
void store_stats(const Store *s, StoreStats *out);

/* Any thread: bytes of every shard's RocksDB memtables now (store/idle.h
 * idle_memtable_bytes). Takes each shard's mutex briefly: for stats. */
uint64_t store_memtable_bytes(const Store *s);

/* Loop thread, when idle: frees buffers kept only to speed up the next
 * burst of writes (the hand-off's spare chunks), before a malloc_trim. */
void store_release_spares(Store *s);

/* Reads job id's body. On success *body is malloc'd (caller frees) and
 * *len is its size in bytes; returns 1 if found, 0 if not, -1 on error. Safe
 * on the loop thread while the mutation thread writes. */
int store_get_body(Store *s, uint64_t id, char **body, size_t *len, char *err,
                   size_t errcap);

/* Reads the bodies of n jobs, ids[] ascending, with one iterator per shard
 * that steps from one id to the next (Next, not a fresh lookup, when they
 * are at most a few keys apart, as in a FIFO backlog): far cheaper than n
 * store_get_body calls. For each i, bodies[i] is set to a malloc'd copy
 * (caller frees) and lens[i] to its size, or bodies[i] to NULL if job ids[i]
 * has no body. Returns 0, or -1 on a read error (message in err; bodies
 * already read are kept). Safe on any thread next to the mutation thread's
 * writes. */
int store_get_bodies(Store *s, const uint64_t *ids, size_t n, char **bodies,
                     size_t *lens, char *err, size_t errcap);

/* ---- cluster mode (store/raft.h; PROTOCOL.md 15) ----
 * The store of a Raft node: store_flush proposes what the loop added since
 * the last flush as Raft entries through propose (on the loop thread)
 * instead of handing it to the mutation thread; the raft thread
 * writes every committed entry with store_raft_apply, which acknowledges
 * this node's own (store_acked_seq then means committed on a majority and
 * written here). Open the store with STORE_SYNC_NEVER and no journal: the
 * Raft log is the durable copy. */

/* Main thread, before store_start: switches s to cluster mode; node_id is
 * written into every entry as its origin. */
void store_cluster_mode(Store *s, uint16_t node_id, StoreProposeFn propose,
                        void *arg);

/* Main thread, before the raft thread starts: fn is told of every record
 * a committed entry that this node did not propose writes (StoreReplayFn),
 * so a node that does not serve can keep its in-memory queue current. */
void store_raft_replay(Store *s, StoreReplayFn fn, void *arg);

/* Any thread: joins entry b[0..blen), as proposed, to entry a[0..*alen)
 * (room for blen more bytes) so that applying a is applying both in order
 * (raftnode's join; sraft_entry_join). Returns 0, or -1 if either is not
 * an entry of this node (a unchanged). */
int store_raft_join(void *a, size_t *alen, const void *b, size_t blen);

/* Raft thread: applies committed entry index (raftnode's apply); ours:
 * proposed by this node in this run. Returns 0, or -1 (the store failed:
 * the node must stop). */
int store_raft_apply(Store *s, uint64_t index, const void *data, size_t len,
                     int ours);

/* Raft thread: every shard holds (synced) every entry up to index, as a
 * snapshot at index needs; *manifest (malloc'd, the caller frees; *len
 * bytes) describes it (store/raft.h: index, shard count, this node).
 * Returns 0, or -1 (failed, or out of memory). */
int store_raft_snapshot(Store *s, uint64_t index, void **manifest, size_t *len);

/* Raft thread, restoring a snapshot: 1 if manifest[0..len) is one of
 * store_raft_snapshot's for a store with this shard count, else 0. */
int store_raft_manifest_ok(const Store *s, const void *manifest, size_t len);

/* Raft thread (or before it starts): every entry up to this index is in
 * every shard (the lowest raft_applied). */
uint64_t store_raft_applied(const Store *s);

/* Any thread: writes every shard's state to fd (a blocking socket) as the
 * snapshot stream of store/ship.h (PROTOCOL.md 11.6), each shard read
 * through one RocksDB snapshot, in bounded memory. Returns 0, or -1 with a
 * message in err. */
int store_ship_send(Store *s, int fd, char *err, size_t errcap);

/* Raft thread (restore; nothing else writes the shards then): replaces
 * every shard's state with the stream read from fd (store/ship.h).
 * Returns 0, or -1 with a message in err (a shard cut short keeps its
 * "restoring" mark: store_raft_applied then says 0). */
int store_ship_recv(Store *s, int fd, char *err, size_t errcap);

/* ---- backup and restore (PROTOCOL.md 11.7) ---- */

/* The file a backup leaves in a new data directory: the snapshot stream
 * of store/ship.h, which the first store_restore loads into the shards. */
#define STORE_RESTORE_FILE "RESTORE"

/* What store_backup_send sent. */
typedef struct StoreBackupInfo {
    uint64_t seq;    /* the store's sequence the copy shows */
    uint64_t jobs;   /* jobs in it */
    uint64_t bytes;  /* bytes of the stream */
    uint64_t frames; /* key-value pairs in it */
} StoreBackupInfo;

/* Any thread, a started store: writes the state of one moment through
 * write(warg, ...) (a socket's writer with its own timeout, plain or TLS)
 * as the snapshot stream of store/ship.h. Standalone, the mutation thread
 * takes every shard's RocksDB snapshot between two of its groups, its
 * write-behind window written first, so the stream holds every change
 * published before the call and is the state after one sequence
 * (info->seq) on every shard; in cluster mode they are taken between two
 * applied Raft entries (store/raft.h sraft_snapshots; info->seq is the
 * entry). Memory: one SHIP_IO_BUF buffer. Returns 0 (info filled), or -1
 * with a message in err (a failed or stopping store, a read or send
 * error). */
int store_backup_send(Store *s, StoreWriteFn write, void *warg,
                      StoreBackupInfo *info, char *err, size_t errcap);

/* Main thread, before store_open: 1 if the data directory dir holds
 * STORE_RESTORE_FILE (then *nshards is its stream's shard count), 0 if
 * not, -1 with a message in err (unreadable, not a snapshot stream, or
 * STORE_RESTORE_FILE ".part" is there: a backup that did not finish must
 * not start as an empty store). */
int store_restore_pending(const char *dir, int *nshards, char *err,
                          size_t errcap);

/* Main thread, after store_open and before store_recover: loads
 * STORE_RESTORE_FILE into the shards (store/ship.h ship_recv: each shard
 * marked "restoring" until its end frame's count and CRC matched, then
 * synced), checks nothing follows the stream, then removes the file
 * (and syncs the directory). A failure leaves the file: the next start
 * loads it again. The commit journal's groups are numbered from above
 * the restored shards' from then on. Returns 0, or -1 with a message in
 * err. */
int store_restore(Store *s, char *err, size_t errcap);

/* Stops the mutation thread after it has written (and synced, in any mode)
 * everything handed over, closes the shards and releases the directory
 * lock. Frees s. Returns -1 if a final write or sync failed. */
int store_close(Store *s, char *err, size_t errcap);

#endif
