/* store/types.h - the values the store and its users share: sync modes,
 * the persisted job (StoreJob, JobMeta on disk), the fault-injection IO
 * seam, the store's configuration and counters, and the JobMeta codec
 * (implemented in store/enc.c). Header only, no state: store.h (the loop's
 * door to the store) and every store/ module include it, so that the
 * store's own modules never include store.h, which sits above them.
 * Threads: any. */
#ifndef ROCKSTALK_STORE_TYPES_H
#define ROCKSTALK_STORE_TYPES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* On-disk format version written to the data directory and each shard. A
 * directory with a newer version is refused (store_open fails). Version 3
 * keeps small bodies inline in the meta column family (STORE_F_INLINE),
 * whose values a version 2 server would refuse as malformed. */
#define STORE_FORMAT_VERSION 3

/* Longest tube name, bytes (protocol: 200). */
#define STORE_TUBE_MAX 200

/* Most shards a data directory may have. */
#define STORE_SHARDS_MAX 64

/* How the mutation thread makes a group durable (beanstalkd's -f/-F flags;
 * what a client may rely on in each: protocol/PROTOCOL.md, section 11.2). */
typedef enum StoreSyncMode {
    STORE_SYNC_ALWAYS = 0,   /* -f 0 (default): acked after the commit
                                journal (without one: the WAL) is fsynced */
    STORE_SYNC_INTERVAL = 1, /* -f MS: acked after the journal's (the WAL's)
                                write(2); fsync every MS ms, also when
                                writes stop */
    STORE_SYNC_NEVER = 2,    /* -F: acked after write(2); never fsync */
} StoreSyncMode;

/* Persisted job states. A reserved job is stored as ready (reservations are
 * not persisted, as in beanstalkd). STORE_GONE is not a job: a deleted
 * put-unique job whose key is remembered until ready_at_ns (JobMeta v2
 * only; its body is gone). */
enum { STORE_READY = 1, STORE_DELAYED = 2, STORE_BURIED = 3, STORE_GONE = 4 };

/* store_add_delete flags. */
#define STORE_DEL_REWRITTEN 0x01 /* the meta was Put more than once */
#define STORE_DEL_NO_BODY                                                      \
    0x02 /* no body key to delete: a STORE_GONE                                \
            record, or an inline body */
#define STORE_DEL_SMALL                                                        \
    0x04 /* the body has fewer than STORE_RING_MIN_LOW                         \
            bytes: it never went through the body ring, so                     \
            there is no ring reference to delete (without                      \
            it the delete removes one, in case) */

/* StoreJob.flags bit: the meta record of this job has been Put more than
 * once, so its delete must use Delete, not SingleDelete (RocksDB forbids
 * SingleDelete on an overwritten key; see db.h SingleDelete). */
#define STORE_F_REWRITTEN 0x01
/* StoreJob.flags bit: the job's body is kept inline, after its meta in the
 * same value of the meta column family, instead of in the body column
 * family: one RocksDB entry per put instead of two (issue 14). Set by the
 * loop for bodies of at most STORE_INLINE_MAX bytes; an update of such a
 * job is a Merge that keeps the body (store/merge.h), and a STORE_GONE
 * record drops it. */
#define STORE_F_INLINE 0x02
/* Largest body kept inline, bytes. Larger bodies stay in the body column
 * family, so that the recovery scan, which reads every meta value, does not
 * read them (RocksDB's BlobDB separates values above min_blob_size for the
 * same reason). */
#define STORE_INLINE_MAX 256

/* The persisted metadata of one job (JobMeta v1 on disk, or v2 for a job
 * with a put-unique key; encoded explicitly little-endian by store/enc.c,
 * never dumped raw). Times are wall-clock nanoseconds since the Unix
 * epoch; durations are seconds. */
typedef struct StoreJob {
    uint64_t id;
    uint8_t state; /* STORE_READY, STORE_DELAYED, STORE_BURIED, STORE_GONE */
    uint8_t flags; /* STORE_F_* */
    uint32_t pri;
    uint32_t ttr;       /* seconds, >= 1 */
    uint32_t delay;     /* seconds, as last given by put or release */
    uint32_t body_size; /* bytes, without the trailing CRLF */
    uint32_t reserves, timeouts, releases, buries, kicks;
    int64_t created_at_ns; /* wall clock */
    int64_t ready_at_ns;   /* wall clock; meaningful when state is delayed,
                              and for STORE_GONE the end of the key's window */
    uint8_t tube_len;      /* 1..STORE_TUBE_MAX */
    char tube[STORE_TUBE_MAX + 1];
    uint8_t key_len; /* put-unique key, 0..STORE_TUBE_MAX (0: none) */
    char key[STORE_TUBE_MAX + 1];
} StoreJob;

/* Fault-injection seam: every RocksDB write and WAL sync of the mutation
 * thread goes through write and sync, every commit journal write and sync
 * (store/journal.h) through jwrite and jsync. db is a rocksdb_t*, batch a
 * rocksdb_writebatch_t*, fd a journal file, off a byte offset in it; each
 * returns 0 or -1 with a malloc'd message in *errmsg (freed by the store
 * with free()). jwrite and jsync may be NULL in a StoreConfig.io: the
 * store then uses the plain file system's (journal_io_write, _sync). */
typedef struct StoreIO {
    int (*write)(void *ctx, void *db, void *batch, int sync, char **errmsg);
    int (*sync)(void *ctx, void *db, char **errmsg);
    int (*jwrite)(void *ctx, int fd, const struct iovec *iov, int iovcnt,
                  uint64_t off, char **errmsg);
    int (*jsync)(void *ctx, int fd, char **errmsg);
    void *ctx;
} StoreIO;

/* Cluster mode: hands one Raft entry (entry[0..len), borrowed for the call)
 * to the Raft node (raftnode_propose). Returns 0 if it was taken, 1 if the
 * node's queue is full (try again soon), -1 if it refused (this node does
 * not lead, or stopped: the entry is dropped and never acknowledged, and so
 * is every later one: no sequence past the gap is ever published; the
 * proposer is expected to restart the process). Called on the loop thread,
 * from store_flush. */
typedef int (*StoreProposeFn)(void *arg, const void *entry, size_t len);

/* Where a backup's stream goes (store.h store_backup_send): writes all n
 * bytes of p, blocking up to its own timeout; returns 0, or -1 with a
 * message in err (errcap bytes). Called on the sending thread. */
typedef int (*StoreWriteFn)(void *arg, const void *p, size_t n, char *err,
                            size_t errcap);

/* Cluster mode: told of each mutation record that a committed entry this
 * node did not propose writes to a shard, in log order (a record a shard
 * already held is not told again): op STORE_REPLAY_*, the job's id and,
 * for a put or an update, its new record (borrowed for the call; a
 * STORE_GONE record is a put-unique key whose job is gone). Called on the
 * raft thread. */
enum { STORE_REPLAY_PUT = 1, STORE_REPLAY_UPDATE, STORE_REPLAY_DELETE };
typedef void (*StoreReplayFn)(void *arg, int op, uint64_t id,
                              const StoreJob *job);

/* Largest Raft entry the store proposes, bytes: raftnode's
 * RAFTNODE_ENTRY_MAX (checked where the two meet). A job record must fit
 * in one: cluster mode caps the job size below it. */
#define STORE_RAFT_ENTRY_MAX (4u << 20)

typedef struct StoreConfig {
    const char *dir; /* data directory; created if missing */
    int nshards;     /* 1..STORE_SHARDS_MAX, or 0: the count recorded in
                        dir, or STORE_DEFAULT_SHARDS for a new dir */
    StoreSyncMode sync_mode;
    int sync_interval_ms;      /* STORE_SYNC_INTERVAL only: > 0 */
    uint64_t journal_bytes;    /* STORE_SYNC_ALWAYS and STORE_SYNC_INTERVAL:
                                  bytes of each commit journal file
                                  (store/journal.h), >=
                                  STORE_JOURNAL_SIZE_MIN; 0: no journal (each
                                  group is written, and synced as the mode
                                  says, in RocksDB's WAL).
                                  STORE_SYNC_NEVER keeps none. */
    const StoreIO *io;         /* NULL: RocksDB itself, possibly wrapped by the
                                  fault injection the ROCKSTALKD_FAULT_*
                                  variables ask for (see
                                  store/fault.c) */
    void (*notify)(void *arg); /* called on the mutation thread after the acked
                                  sequence advanced or a fatal error (on a
                                  syncer thread for a failed -f MS fsync);
                                  the loop passes a function that does
                                  ev_async_send (thread-safe, ev(3)) */
    void *notify_arg;
    uint32_t ring_min;        /* STORE_SYNC_ALWAYS and STORE_SYNC_INTERVAL
                                 with a journal: a put body of at least this
                                 many bytes may go through the body ring
                                 (store/bodyring.h, store_ring_submit); 0:
                                 no ring. At least STORE_RING_MIN_LOW. */
    uint64_t ring_file_bytes; /* bytes of each of the STORE_RING_FILES
                                 ring files (0: STORE_RING_FILE_DEFAULT) */
    int raft_log; /* cluster mode: the Raft log is the durable copy (with
                     STORE_SYNC_NEVER): the applier writes the shards
                     without their WAL, and the shards flush atomically
                     (shard_opts_create; store/raft.h) */
} StoreConfig;

#define STORE_DEFAULT_SHARDS 1

/* The body ring (store/bodyring.h): its files, the default and smallest
 * size of one, the default and lowest body size that goes through it
 * (above STORE_INLINE_MAX: a ring body is never inline). */
#define STORE_RING_FILES 4
#define STORE_RING_FILE_DEFAULT ((uint64_t)64 << 20)
#define STORE_RING_FILE_MIN ((uint64_t)1 << 20)
#define STORE_RING_MIN_DEFAULT 65536
#define STORE_RING_MIN_LOW 4096

/* Where a body went in the body ring (its ENC_RING_REF bytes, store/enc.h):
 * the file generation, the entry's offset in that file (bytes), the body's
 * length (bytes) and its zlib crc32. */
typedef struct StoreRingRef {
    uint64_t gen, off;
    uint32_t len, crc;
} StoreRingRef;

/* A finished body ring write (store_ring_take): the ticket store_ring_submit
 * gave, the body handed back (malloc'd, len bytes as submitted; the taker
 * owns it), ok (1: the body is synced at ref; 0: the write failed or the
 * store stops, ref unset). */
typedef struct StoreRingDone {
    uint64_t ticket;
    char *body;
    size_t len;
    StoreRingRef ref;
    int ok;
} StoreRingDone;

/* Smallest and default size of one commit journal file, bytes
 * (StoreConfig.journal_bytes, store/journal.h). */
#define STORE_JOURNAL_SIZE_MIN ((uint64_t)1 << 20)
#define STORE_JOURNAL_SIZE_DEFAULT ((uint64_t)16 << 20)

/* Upper bounds (microseconds) of the WAL fsync latency histogram buckets;
 * the last bucket counts everything slower. */
#define STORE_SYNC_BUCKETS 11
static const uint32_t store_sync_bucket_us[STORE_SYNC_BUCKETS - 1] = {
    100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000};

/* Counters for stats; read on the loop thread (relaxed atomics inside). */
typedef struct StoreStats {
    uint64_t records; /* mutation records written (put, update, delete) */
    uint64_t groups;  /* groups committed (one write per dirty shard each) */
    uint64_t syncs;   /* WAL fsyncs issued */
    uint64_t sync_ns; /* total nanoseconds spent in WAL fsyncs */
    uint64_t last_sync_ns; /* duration of the latest fsync */
    uint64_t bytes;        /* bytes of WriteBatch data written */
    uint64_t replayed;     /* commit journal records replayed at start-up
                              (RocksDB lacked them in a shard) */
    uint64_t sync_hist[STORE_SYNC_BUCKETS]; /* fsyncs per latency bucket */
    /* the body ring (store/bodyring.h): bodies written and synced there,
     * their bytes, and the times its writer waited before reusing a file
     * (for the shards to take what the file held) */
    uint64_t ring_bodies, ring_bytes, ring_waits;
    /* its covers (a file made ready for a new generation), and the bodies
     * copied from it into RocksDB at start-up (store/bodyheld.h) */
    uint64_t ring_flushes, ring_restored;
    uint64_t ring_held_files, ring_held_bytes; /* held files now (count,
                                                  bytes; store/bodyheld.h) */
    uint64_t ring_copied;      /* bodies copied out of held files (this run) */
    uint64_t ring_copy_queue;  /* held files whose copy-out is queued or
                                  under way (store/bodyreap.h) */
    uint64_t ring_spare_files; /* held files emptied by their copy-out,
                                  kept for a cover to reuse (spare-<gen>,
                                  store/bodyheld.h) */
    /* dead held files waiting for the reaper (count, bytes not yet freed;
     * store/bodyreap.h) */
    uint64_t ring_dead_files, ring_dead_bytes;
    /* the rest rounds that flushed memtables once the shards took no
     * write for a while, and the bytes those held (store/idle.h) */
    uint64_t idle_flushes, idle_flushed;
    /* 1 when nothing waits for a rest round: the latest one ended with
     * nothing written since, or the store runs none (cluster mode, a
     * store not started) */
    int at_rest;
    int nshards;
} StoreStats;

/* Encodes/decodes a StoreJob to/from the JobMeta value bytes: v1 for a job
 * without a key (byte for byte as before keys existed), v2 with one.
 * encode returns the length written (buf must hold STORE_META_MAX bytes);
 * decode returns 0, or -1 on a truncated, unknown-version or malformed
 * value. A value whose flags have STORE_F_INLINE may go on with the job's
 * body (exactly body_size bytes; decode ignores them).
 * The job id is the key, not part of the value; decode sets job->id to id. */
#define STORE_META_MAX (56 + STORE_TUBE_MAX + 1 + STORE_TUBE_MAX)
size_t store_meta_encode(const StoreJob *job, unsigned char *buf);
int store_meta_decode(uint64_t id, const unsigned char *buf, size_t len,
                      StoreJob *job);

/* The length in bytes of the JobMeta at the start of a value of len bytes
 * (what follows it is an inline body), or 0 if the value is too short or
 * of an unknown version. Checks nothing else (store_meta_decode does). */
size_t store_meta_len(const unsigned char *buf, size_t len);

/* Whether a value of len bytes is a JobMeta with STORE_F_INLINE followed by
 * its inline body (exactly its body size bytes, maybe none); *ml is then
 * the meta's length, so the body is buf[*ml..len). */
int store_meta_inline(const unsigned char *buf, size_t len, size_t *ml);

/* Which shard job id lives in, for nshards shards. */
static inline int
store_shard_of(uint64_t id, int nshards)
{
    return (int)(id % (uint64_t)nshards);
}

#endif
