/* store_raft.h - the store in cluster mode (issue 15; PROTOCOL.md 15): the
 * Raft entry that carries a group of mutation records, and the raft
 * thread's applier, which writes every committed entry to the shards.
 *
 * In cluster mode the mutation thread writes nothing to RocksDB: it turns
 * each group into one entry or more (sraft_entry_*; at most
 * RAFTNODE_ENTRY_MAX bytes each) and proposes them. libraft fsyncs the log
 * on a majority before an entry commits, so the log is the durable copy;
 * the applier writes committed entries with the WAL unsynced, each shard
 * marked with "raft_applied" = the entry's index in the same batch, and
 * skips what a shard already holds (libraft replays the log after the last
 * snapshot at every start). Before a snapshot lets libraft drop the log
 * behind index, sraft_mark writes raft_applied = index to every shard and
 * syncs every WAL.
 *
 * Entry, little-endian: u32 magic "RSE1", u16 version (1), u16 origin node
 * id, u32 record count, u32 bytes of records (libraft's log may pad the
 * entry with up to 7 zero bytes), u64 publish seq (the proposer's loop
 * sequence that is acknowledged once the entry is applied: every record of
 * that sequence or below is in this or an earlier entry), then the records
 * in store_enc.h's format (its native byte order; cluster mode runs on
 * little-endian hosts only, where that is little-endian).
 *
 * The writer: once sraft_start ran, sraft_apply (raft thread) checks an
 * entry, replays and counts its records and publishes the proposer's
 * sequence, then queues a copy for the writer thread ("rs-raft-write"),
 * which writes the shards and marks the sequence applied. A RocksDB write
 * then no longer holds up the raft thread, which on a follower answers
 * the leader's next AppendEntries meanwhile (measured: +25% put rate on
 * this 2-core machine, BENCHMARKS.md). Before sraft_start (unit tests),
 * sraft_apply writes at once.
 *
 * Threads: sraft_entry_* on the loop thread; sraft_apply, sraft_mark,
 * sraft_quiesce and sraft_applied on the raft thread; sraft_wait_idle on
 * any; the writer thread is the only RocksDB writer in cluster mode. Calls:
 * store_batch, store_ack, store_shard, store_enc, store_util. Errors: -1 after
 * ack_fail (fail-stop), nothing printed.
 */
#ifndef ROCKSTALK_STORE_RAFT_H
#define ROCKSTALK_STORE_RAFT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "store_ack.h"
#include "store_batch.h"
#include "store_types.h"

#define SRAFT_MAGIC 0x31455352u /* "RSE1" little-endian */
#define SRAFT_VERSION 1
#define SRAFT_HDR 24 /* bytes of the entry header */

/* Bytes of entries queued for the writer before sraft_apply waits. */
#define SRAFT_QUEUE_MAX (64u << 20)

/* One committed entry queued for the writer (malloc'd with its data). */
typedef struct SraftItem {
    struct SraftItem *next;
    uint64_t index, seq; /* seq: the publish seq if ours, else 0 */
    size_t len;          /* bytes of data, without libraft's padding */
    unsigned char data[];
} SraftItem;

/* The raft thread's applier and its writer; lives in the Store. */
typedef struct StoreRaft {
    ShardBatches sb;      /* the writer's (the raft thread's while idle) */
    const StoreIO *io;    /* borrowed */
    StoreAck *ack;        /* borrowed */
    StoreReplayFn replay; /* NULL: none */
    void *replay_arg;
    /* raft thread: each shard's raft_applied when the writer was last
     * idle (what a replayed entry may already be in) */
    uint64_t base[STORE_SHARDS_MAX];

    /* the writer: queue, busy and stop under mu */
    pthread_t thread;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv;   /* to the writer: an item, or stop */
    pthread_cond_t idle; /* to the raft thread: room, or nothing left */
    SraftItem *head, **tail;
    size_t queued; /* bytes */
    int busy, stop;
} StoreRaft;

/* Initialises r over the store's shards and parts (borrowed). */
void sraft_init(StoreRaft *r, StoreShard *shard, int nshards, const StoreIO *io,
                StoreAck *ack);
void sraft_destroy(StoreRaft *r);

/* Main thread, cluster mode, once the shards are open: starts the writer.
 * Returns 0, or -1 with a message in err. */
int sraft_start(StoreRaft *r, char *err, size_t errcap);

/* Main thread, once the raft thread is gone: the writer writes what is
 * queued and ends. Fine if never started. */
void sraft_stop(StoreRaft *r);

/* Any thread: waits until the writer wrote everything queued so far (the
 * shards hold every entry sraft_apply took) and is idle. */
void sraft_wait_idle(StoreRaft *r);

/* Raft thread: sraft_wait_idle, then takes the shards' raft_applied as
 * what replayed entries may already be in (base); r->sb and raft_applied
 * may then be used on this thread until the next sraft_apply. */
void sraft_quiesce(StoreRaft *r);

/* Mutation thread: writes the header of the entry p[0..len) into its
 * first SRAFT_HDR bytes. */
void sraft_entry_header(unsigned char *p, size_t len, uint16_t origin,
                        uint32_t nrec, uint64_t publish_seq);

/* Raft thread: applies the committed entry index (data[0..len)): checks
 * its header and that its records fill it exactly (else -1: a corrupt or
 * foreign entry stops the node); then the writer (or, before sraft_start,
 * this call) writes the records of every shard whose raft_applied is below
 * index, marked with raft_applied = index (and next_id where a put raised
 * it), unsynced. ours: this node proposed it in this run (raftnode's
 * proposal number is nonzero); then its publish seq is acknowledged
 * (ack_publish) before the shards are written, since the entry is
 * committed, and marked applied (ack_applied) once written. Waits while
 * SRAFT_QUEUE_MAX bytes are queued. Returns 0, or -1 after ack_fail. */
int sraft_apply(StoreRaft *r, uint64_t index, const void *data, size_t len,
                int ours);
/* (sraft_apply also hands each record it writes of an entry that is not
 * ours to r->replay.) */

/* Raft thread, for a snapshot at index (every entry up to it applied):
 * writes raft_applied = index to every shard below it and syncs every
 * shard's WAL, so the shards hold everything the log may drop. Returns 0,
 * or -1 after ack_fail. */
int sraft_mark(StoreRaft *r, uint64_t index);

/* The manifest of a snapshot (all a Raft snapshot carries; the state moves
 * out of band, store_ship.h), little-endian: u32 magic "RSM1", u32 version
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
 * Raft thread (or before it starts); quiesces the writer first. */
uint64_t sraft_applied(StoreRaft *r);

#endif
