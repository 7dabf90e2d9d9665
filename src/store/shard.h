/* store/shard.h - one shard: a RocksDB instance in <dir>/shard-NN with the
 * column families default (header: "format" u32, "shard" u32 index + u32
 * count, "next_id" u64 highest id ever put here, "jgroup" u64 the latest
 * group written here; in cluster mode "raft_applied" u64 the latest Raft
 * entry written here and "restoring" while a snapshot is received into
 * it, store/ship.h), meta (job key ->
 * JobMeta v1), body (job key -> raw body bytes) and ring (job key -> the
 * 24-byte body ring reference of a body that came through the body ring,
 * store/bodyring.h: such a body is written to the body CF without the WAL,
 * the reference with it); the RocksDB options
 * every shard shares; the StoreIO of RocksDB itself; body reads.
 *
 * Threads: open and close on the main thread; body reads on any thread
 * (RocksDB Get and iterators are safe next to the mutation thread's writes,
 * rocksdb/db.h); the StoreIO on the mutation and syncer threads. Calls:
 * store_enc, store_util, RocksDB's C API (rocksdb/c.h).
 */
#ifndef ROCKSTALK_STORE_SHARD_H
#define ROCKSTALK_STORE_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include <rocksdb/c.h>

#include "store/types.h"

enum {
    SHARD_CF_DEFAULT,
    SHARD_CF_META,
    SHARD_CF_BODY,
    SHARD_CF_RING,
    SHARD_CF_COUNT
};
/* The column families a snapshot stream carries (store/ship.h): not the
 * ring's references, whose bodies a snapshot holds in the body CF. */
#define SHARD_CF_SHIPPED SHARD_CF_RING

/* RocksDB options shared by every shard (one block cache for all). */
typedef struct ShardOpts {
    rocksdb_cache_t *cache;
    rocksdb_block_based_table_options_t *bbto;
    rocksdb_options_t *dbopt, *cfopt[SHARD_CF_COUNT];
    rocksdb_writeoptions_t *wo_sync, *wo_nosync;
    rocksdb_writeoptions_t *wo_nowal; /* disableWAL: ring bodies; in raft
                                         log mode, rocks_write's sync=0 */
    rocksdb_flushoptions_t *fo;       /* wait=1 */
    rocksdb_readoptions_t *ro;
    int raft_log; /* StoreConfig.raft_log (shard_opts_create) */
} ShardOpts;

/* One open shard; lives in the Store (index of nshards). */
typedef struct StoreShard {
    const ShardOpts *opt;
    int index, nshards;
    char *path;    /* <dir>/shard-NN, malloc'd by shard_open */
    rocksdb_t *db; /* NULL: not open */
    rocksdb_column_family_handle_t *cf[SHARD_CF_COUNT];
    uint64_t hwm;    /* highest id put here: set by shard_open, then raised
                        only by the mutation thread */
    uint64_t jgroup; /* number of the latest group written here ("jgroup",
                        in the same batch as the group): set by shard_open,
                        then by the mutation thread; a journal record of a
                        group not above it is already here */
    uint64_t raft_applied; /* cluster mode: the Raft index of the latest
                              entry written here ("raft_applied", in the
                              same batch as the entry); 0 while a snapshot
                              is being received ("restoring" present):
                              set by shard_open, then by the raft thread */
    int restoring;         /* "restoring" is present (set by shard_open and by
                              store/ship.c's receiver): the shard's content is
                              incomplete */
} StoreShard;

/* Creates the shared options into o (sizes in store/shard.c). With
 * raft_log (StoreConfig.raft_log: cluster mode, where the Raft log is the
 * durable copy), an unsynced write through shard_rocks_io skips the WAL
 * (disableWAL), and the shards flush atomically (atomic_flush: the
 * memtables of every column family reach table files together, so the
 * files hold one prefix of the writes, each batch whole): a kill -9 loses
 * what was written since the last flush, which only the Raft log's replay
 * may make good, and shard_flush makes it durable. Aborts only if RocksDB
 * does. Free with shard_opts_destroy. */
void shard_opts_create(ShardOpts *o, int raft_log);
void shard_opts_destroy(ShardOpts *o);

/* The StoreIO of RocksDB itself: write is rocksdb_write with o's write
 * options (sync=1: WriteOptions.sync; sync=0 with o->raft_log:
 * disableWAL), sync is rocksdb_flush_wal(sync=1), i.e. DB::FlushWAL(true)
 * = SyncWAL (rocksdb/db.h), which makes durable only what went through the
 * WAL (in raft log mode, shard_flush does the rest). o must outlive it. */
StoreIO shard_rocks_io(ShardOpts *o);

/* Opens <dir>/shard-NN (index of nshards), creating it and its header if
 * missing, else checking the header's format and shard numbers, and loads
 * next_id into sh->hwm, jgroup into sh->jgroup and raft_applied into
 * sh->raft_applied (0 if "restoring" is present). Returns 0, or -1 with a
 * message in err; call shard_close either way. */
int shard_open(StoreShard *sh, const ShardOpts *o, const char *dir, int index,
               int nshards, char *err, size_t errcap);

/* Closes the RocksDB instance if open. */
void shard_close(StoreShard *sh);

/* Reads job id's body (id must be in this shard). On success *body is
 * malloc'd (caller frees) and *len its size; returns 1 if found, 0 if not,
 * -1 on error (message in err). */
int shard_get_body(const StoreShard *sh, uint64_t id, char **body, size_t *len,
                   char *err, size_t errcap);

/* Reads the bodies of this shard's jobs among ids[0..n) (ascending; ids of
 * other shards are skipped) into bodies[i] (malloc'd, caller frees) and
 * lens[i], as store_get_bodies (store.h) does; bodies[i] stays as it is
 * (NULL) when absent. Returns 0, or -1 on a read error. */
int shard_get_bodies(const StoreShard *sh, const uint64_t *ids, size_t n,
                     char **bodies, size_t *lens, char *err, size_t errcap);

/* The body ring reference of job id (its ring CF value; the body's home,
 * store/bodyheld.h) into *ref: 1, 0 if it has none, or -1 with a message
 * in err on a read error or a value of another size. */
int shard_get_ring_ref(const StoreShard *sh, uint64_t id, StoreRingRef *ref,
                       char *err, size_t errcap);

/* Whether sh's body column family holds key (ENC_KEY_LEN bytes): 1, 0,
 * or -1 on a read error. */
int shard_has_body(const StoreShard *sh, const char *key);

/* Flushes the memtables of every column family of sh to table files, all
 * at once (atomically when its options have raft_log), and waits: every
 * write made before, with or without the WAL, is then durable. Uses
 * <path>.flush (and RocksDB's <path>.flush.tmp) beside the shard, which
 * it removes (a crash may leave them; the next call removes them first).
 * Returns 0, or -1 with *errmsg (malloc'd). Any thread. */
int shard_flush(const StoreShard *sh, char **errmsg);

/* Moves a RocksDB error e (malloc'd by RocksDB, may be NULL) into *errmsg
 * (malloc'd, freed by the store with free()). Returns 0 if e is NULL, else
 * -1. */
int shard_take_err(char *e, char **errmsg);

#endif
