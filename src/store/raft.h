/* store/raft.h - the store in cluster mode (issue 15; PROTOCOL.md 15): the
 * Raft entry that carries a group of mutation records, and the raft
 * thread's applier, which writes every committed entry to the shards.
 *
 * In cluster mode the mutation thread writes nothing to RocksDB: it turns
 * each group into one entry or more (sraft_entry_*; at most
 * RAFTNODE_ENTRY_MAX bytes each) and proposes them. libraft fsyncs the log
 * on a majority before an entry commits, so the log is the durable copy;
 * the applier writes committed entries to the shards' memtables without
 * their WAL (StoreConfig.raft_log: disableWAL), each shard marked with
 * "raft_applied" = the entry's index in the same batch, and skips what a
 * shard already holds (libraft replays the log after the last snapshot at
 * every start). The shards flush atomically (every column family at once,
 * all or nothing: shard_opts_create), so a shard's table files always hold
 * a prefix of its batches, raft_applied with its data: after a kill -9 a
 * shard holds exactly the entries up to its raft_applied, and the replay
 * writes the others again, none twice (a job key is never Put twice
 * before its SingleDelete). Before a snapshot lets libraft drop the log
 * behind index, sraft_mark writes raft_applied = index to every shard and
 * flushes every shard (shard_flush, waited for), inside libraft's
 * snapshot callback, so before the snapshot is on disk and the log
 * truncated: the log never loses an entry the shards' table files lack.
 * A clean close flushes too (RocksDB does at close when writes skipped
 * the WAL). Writes that still go through the WAL (a received snapshot,
 * store/ship.c; a new shard's header) are synced by their writers.
 *
 * Entry, little-endian: u32 magic "RSE1", u16 version (1), u16 origin node
 * id, u32 record count, u32 bytes of records (libraft's log may pad the
 * entry with up to 7 zero bytes), u64 publish seq (the proposer's loop
 * sequence that is acknowledged once the entry is applied: every record of
 * that sequence or below is in this or an earlier entry), then the records
 * in store/enc.h's format (its native byte order; cluster mode runs on
 * little-endian hosts only, where that is little-endian).
 *
 * Threads: sraft_entry_* on the mutation thread; sraft_apply and
 * sraft_mark on the raft thread (the only RocksDB writer in cluster
 * mode). Calls: store_batch, store_ack, store_shard, store_enc,
 * store_util. Errors: -1 after ack_fail (fail-stop), nothing printed.
 */
#ifndef ROCKSTALK_STORE_RAFT_H
#define ROCKSTALK_STORE_RAFT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "store/ack.h"
#include "store/batch.h"
#include "store/types.h"

#define SRAFT_MAGIC 0x31455352u /* "RSE1" little-endian */
#define SRAFT_VERSION 1
#define SRAFT_HDR 24 /* bytes of the entry header */

/* The raft thread's applier; lives in the Store. */
typedef struct StoreRaft {
    ShardBatches sb;
    const StoreIO *io;    /* borrowed */
    StoreAck *ack;        /* borrowed */
    StoreReplayFn replay; /* NULL: none */
    void *replay_arg;
    /* held by sraft_apply for one entry (its publication and its writes)
     * and by sraft_snapshots: a backup's snapshots fall between entries */
    pthread_mutex_t apply_mu;
} StoreRaft;

/* Initialises r over the store's shards and parts (borrowed). */
void sraft_init(StoreRaft *r, StoreShard *shard, int nshards, const StoreIO *io,
                StoreAck *ack);
void sraft_destroy(StoreRaft *r);

/* Mutation thread: writes the header of the entry p[0..len) into its
 * first SRAFT_HDR bytes. */
void sraft_entry_header(unsigned char *p, size_t len, uint16_t origin,
                        uint32_t nrec, uint64_t publish_seq);

/* Any thread: appends entry b[0..blen) (as proposed: a header and its
 * records, no padding) to entry a[0..*alen), which has room for blen more
 * bytes: a's header then counts the records of both, and publishes the
 * later of their publish seqs, so that applying a is applying the two in
 * order. Both must be headers of the same origin whose record bytes fill
 * them; else -1 and a is unchanged. Returns 0 with *alen updated. */
int sraft_entry_join(unsigned char *a, size_t *alen, const unsigned char *b,
                     size_t blen);

/* Raft thread: applies the committed entry index (data[0..len)): checks
 * its header and that its records fill it exactly (else -1: a corrupt or
 * foreign entry stops the node), writes the records of every shard whose
 * raft_applied is below index, marked with raft_applied = index (and
 * next_id where a put raised it), unsynced. ours: this node proposed it in
 * this run (raftnode's proposal number is nonzero); then its publish seq
 * is acknowledged (ack_publish) before the shards are written, since the
 * entry is committed, and marked applied (ack_applied) after. Each record
 * it writes of an entry that is not ours goes to r->replay too. Returns 0,
 * or -1 after ack_fail. */
int sraft_apply(StoreRaft *r, uint64_t index, const void *data, size_t len,
                int ours);

/* Any thread: a RocksDB snapshot of every shard taken between two applied
 * entries (under apply_mu), into snaps[0..nshards) (the caller releases
 * them); *index: the last entry every shard holds. A backup's moment in
 * cluster mode: every entry whose replies have left is in it (they are
 * published inside the apply), and nothing uncommitted is. */
void sraft_snapshots(StoreRaft *r, const rocksdb_snapshot_t **snaps,
                     uint64_t *index);

/* Raft thread, for a snapshot at index (every entry up to it applied):
 * writes raft_applied = index to every shard below it and flushes every
 * shard (shard_flush, waited for; counted as a sync in the stats), so the
 * shards' table files hold everything the log may drop. Returns 0, or -1
 * after ack_fail. */
int sraft_mark(StoreRaft *r, uint64_t index);

/* The manifest of a snapshot (all a Raft snapshot carries; the state moves
 * out of band, store/ship.h), little-endian: u32 magic "RSM1", u32 version
 * 1, u64 the index, u32 the shard count, u32 the node that took it. */
#define SRAFT_MANIFEST_MAGIC 0x314d5352u
#define SRAFT_MANIFEST_LEN 24

/* Writes the manifest of a snapshot at index, taken by node origin, into
 * m (SRAFT_MANIFEST_LEN bytes). */
void sraft_manifest(const StoreRaft *r, uint64_t index, uint32_t origin,
                    unsigned char *m);

/* Whether m[0..len) is a manifest of a store with this shard count. */
int sraft_manifest_ok(const StoreRaft *r, const unsigned char *m, size_t len);

/* The lowest raft_applied of all shards: every entry up to it is here.
 * Raft thread (or before it starts). */
uint64_t sraft_applied(const StoreRaft *r);

#endif
