/* store/ship.h - the snapshot stream of cluster mode: every key and value of
 * every shard, read through one RocksDB snapshot per shard, written to a
 * blocking socket; and its receiver, which replaces a node's shards with
 * the stream in bounded write batches (PROTOCOL.md 11.6).
 *
 * Threads: ship_send on any thread (RocksDB reads are safe next to another
 * thread's writes, rocksdb/db.h); ship_recv on the thread that owns the
 * shards' writes (in cluster mode the raft thread), with no other writer
 * meanwhile. Calls: store_shard, store_enc, store_util, RocksDB, zlib.
 *
 * Stream format, all integers little-endian:
 *
 *   stream header  "RSSHIP01" (8 bytes), u32 version (SHIP_VERSION),
 *                  u32 nshards
 *   per shard, in index order:
 *     shard header u32 index
 *     frames       u8 cf (0 default, 1 meta, 2 body), u32 klen, u32 vlen,
 *                  klen bytes of key, vlen bytes of value
 *     end frame    u8 0xFF, u64 number of frames, u32 CRC-32 (zlib's) of
 *                  every frame byte of this shard as sent (cf byte, lengths,
 *                  key and value), the end frame excluded
 *
 * Frames come column family by column family (default, meta, body), each
 * in key order; the sender's "format" and "shard" keys are among them but
 * the receiver keeps its own. A key is at most SHIP_KEY_MAX bytes and must
 * sort below SHIP_KEY_END (every job key and header name does); a value is
 * at most SHIP_VALUE_MAX bytes.
 */
#ifndef ROCKSTALK_STORE_SHIP_H
#define ROCKSTALK_STORE_SHIP_H

#include <stddef.h>
#include <stdint.h>

#include <rocksdb/c.h>

#include "store/shard.h"
#include "store/types.h"

#define SHIP_MAGIC "RSSHIP01"
#define SHIP_MAGIC_LEN 8
#define SHIP_VERSION 1
#define SHIP_END_FRAME 0xFF

/* Longest key, bytes: job keys are 8 bytes and header names (store/shard.h)
 * a dozen; 1 KiB refuses garbage lengths long before they cost memory. */
#define SHIP_KEY_MAX 1024
/* Longest value, bytes. In cluster mode a put reaches the shards in one
 * Raft entry of at most 4 MiB (raftnode.h), so no body is larger; 64 MiB
 * leaves room and bounds the receiver's frame buffer. */
#define SHIP_VALUE_MAX ((size_t)64 << 20)
/* Bytes of the sender's and the receiver's socket buffers: fixed, whatever
 * the shards hold (a larger value passes through in pieces). */
#define SHIP_IO_BUF ((size_t)256 << 10)
/* The receiver writes a batch once it holds this many bytes of keys and
 * values (one frame larger than that makes a batch of its own). */
#define SHIP_BATCH_BYTES ((size_t)1 << 20)
/* Every key of a shard sorts below this one (16 bytes of 0xff): job keys
 * have 8 bytes, header names are ASCII (first byte below 0x80). The
 * receiver clears a shard with range deletes that end here. */
#define SHIP_KEY_END_LEN 16
extern const char SHIP_KEY_END[SHIP_KEY_END_LEN];

/* Writes the stream of shards[0..nshards) (all open) to fd, a connected
 * blocking socket (send with MSG_NOSIGNAL: a closed peer is an error, not
 * SIGPIPE; a send timeout, SO_SNDTIMEO, that expires is one too), each
 * shard read through its own RocksDB snapshot with one
 * SHIP_IO_BUF buffer: memory does not grow with the data. Refuses a shard
 * whose snapshot holds "restoring" (its own state is incomplete). Does not
 * close fd. Returns 0, or -1 with a message in err (read error, a key or
 * value over the bounds above, a failed send). */
int ship_send(StoreShard *shards, int nshards, int fd, char *err,
              size_t errcap);

/* What ship_send_at sent: frames (every shard's), bytes of the whole
 * stream, and jobs (the meta records that are jobs, not a put-unique
 * key's STORE_GONE record). */
typedef struct ShipTotals {
    uint64_t frames, bytes, jobs;
} ShipTotals;

/* Reads the body a ring reference (ENC_RING_REF bytes at ref) points at
 * (store/bodyheld.h: the body ring is a ring body's home) into *body
 * (malloc'd, *len bytes; the caller frees). Returns 0, or -1 with a
 * message in err. */
typedef int (*ShipRingFn)(void *arg, const unsigned char *ref, char **body,
                          size_t *len, char *err, size_t errcap);

/* As ship_send, but shard i is read through snaps[i] (the caller's, still
 * held, of shards[i].db; released by the caller), so that all shards show
 * one moment (a backup, store.h store_backup_send), and every full buffer
 * goes to write(warg, ...) instead of a socket; counts into *tot. The
 * body of every job with a ring reference (ring CF, not shipped) is read
 * by ring(rarg, ...) and sent as a body CF pair, so the receiver holds
 * every body in RocksDB; with ring NULL such a reference is an error. */
int ship_send_at(StoreShard *shards, int nshards,
                 const rocksdb_snapshot_t *const *snaps, StoreWriteFn write,
                 void *warg, ShipRingFn ring, void *rarg, ShipTotals *tot,
                 char *err, size_t errcap);

/* Reads a stream from fd (blocking; not closed) into shards[0..nshards)
 * (open), replacing their content. A stream header with another magic,
 * version or shard count fails before anything is written. Then per shard:
 * a synced write of "restoring" (and sh->raft_applied = 0), the removal of
 * every key but "format", "shard" and "restoring" and the received pairs
 * (the sender's "format" and "shard" skipped) in unsynced batches of about
 * SHIP_BATCH_BYTES, then, once the end frame's count and CRC match, a last
 * batch that also removes "restoring", and a sync of the shard's WAL; then
 * sh->hwm, jgroup and raft_applied take the received "next_id", "jgroup"
 * and "raft_applied" (0 if absent). Returns 0, or -1 with a message in err
 * (short read, bad header or index, bounds, count or CRC mismatch, a
 * RocksDB error): the shard being received then keeps "restoring", so
 * shard_open reports its raft_applied as 0, and the shards before it are
 * complete. The caller fetches again. Memory: SHIP_IO_BUF, a frame buffer
 * as large as the largest frame and a batch of about SHIP_BATCH_BYTES plus
 * one frame. */
int ship_recv(StoreShard *shards, int nshards, int fd, char *err,
              size_t errcap);

#endif
