/* store/batch.h - one RocksDB WriteBatch per shard and the rule that turns
 * a mutation record (store/enc.h) into RocksDB operations: a put writes
 * the meta and body keys (one key, the meta followed by the body, when the
 * meta has STORE_F_INLINE) and may raise the shard's next_id high-water
 * mark, an update rewrites the meta (a Merge for an inline body, which
 * keeps it, store/merge.h; and drops the body of a STORE_GONE record), a
 * delete removes both (SingleDelete where the key was Put once; the loop
 * says STORE_DEL_NO_BODY for an inline body).
 * A put with a body ring reference (ENC_PUT_RING) puts the meta and the
 * reference (ring CF): the body stays in the body ring, its home
 * (store/bodyring.h, store/bodyheld.h). A delete, or an update to
 * STORE_GONE, also deletes the ring reference.
 * The mutation thread commits groups through one ShardBatches, the raft
 * thread (cluster mode, store/raft.h) Raft entries through another.
 *
 * Threads: a ShardBatches belongs to one thread; it writes to the shards'
 * StoreShard.hwm, so only one thread's batches may add puts at a time (the
 * mutation thread standalone, the raft thread in cluster mode). Calls:
 * store_enc, store_shard, RocksDB's C API (rocksdb/c.h WriteBatch).
 */
#ifndef ROCKSTALK_STORE_BATCH_H
#define ROCKSTALK_STORE_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include <rocksdb/c.h>

#include "store/shard.h"
#include "store/types.h"

/* The batches of every shard and which of them hold records. */
typedef struct ShardBatches {
    StoreShard *shard; /* borrowed, [nshards] */
    int nshards;
    rocksdb_writebatch_t *batch[STORE_SHARDS_MAX];
    int touched[STORE_SHARDS_MAX];     /* batch holds records */
    int hwm_changed[STORE_SHARDS_MAX]; /* a put raised the shard's hwm */
} ShardBatches;

/* Creates a batch per shard of shard[0..nshards), borrowed for b's life. */
void sbatch_init(ShardBatches *b, StoreShard *shard, int nshards);

/* Frees the batches (NULL-safe on a zeroed b). */
void sbatch_destroy(ShardBatches *b);

/* Adds the record at p to its shard's batch and marks the shard touched;
 * *seq is the record's sequence (a ring put's record holds its reference,
 * not its body, store/enc.h). Returns the record's length in bytes. */
size_t sbatch_add(ShardBatches *b, const unsigned char *p, uint64_t *seq);

/* A record that is not written (cancelled in the write-behind window,
 * store/pend.h) still raises its shard's next_id high-water mark to its
 * job's id (and marks the shard touched, so the mark is written with the
 * group): an id once given is never given again, after a clean stop too.
 * Returns the record's length in bytes. */
size_t sbatch_note_id(ShardBatches *b, const unsigned char *p);

/* Adds key (a header key of the default column family) = v as 8 bytes
 * little-endian to shard i's batch. Does not mark it touched. */
void sbatch_put_u64(ShardBatches *b, int i, const char *key, uint64_t v);

/* Adds "next_id" = the shard's hwm to shard i's batch if a put raised it
 * since the last call (and clears that). */
void sbatch_put_hwm(ShardBatches *b, int i);

/* Empties every batch and clears the touched marks. */
void sbatch_clear(ShardBatches *b);

#endif
