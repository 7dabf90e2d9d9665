/* store.h - durable job storage: N RocksDB shards (a job's shard is id % N)
 * written only by one serialising mutation thread, with grouped WAL commits.
 *
 * Threads: store_open, store_recover, store_start and store_close run on the
 * main thread outside the event loop. store_add_*, store_flush,
 * store_acked_seq, store_backlog_bytes, store_failed and store_stats run on
 * the loop thread; store_get_body and store_get_bodies on any thread (the
 * loop, the body reader of prefetch.h). Everything else runs on the mutation
 * thread (store_mut.h), the only writer of RocksDB, and on its syncer
 * threads (store_sync.h). The loop thread's only contact with them is the
 * hand-off queue (store_handoff.h: mutex + condvar), the published
 * sequences and failure (store_ack.h) and the notify callback. This is the
 * only store header the loop side includes; store_*.h are the store's own
 * modules (store.c lists their layers).
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

/* On-disk format version written to the data directory and each shard. A
 * directory with a newer version is refused (store_open fails). */
#define STORE_FORMAT_VERSION 1

/* Longest tube name, bytes (protocol: 200). */
#define STORE_TUBE_MAX 200

/* Most shards a data directory may have. */
#define STORE_SHARDS_MAX 64

/* How the mutation thread makes a group durable (beanstalkd's -f/-F flags;
 * what a client may rely on in each: protocol/PROTOCOL.md, section 11.2). */
typedef enum StoreSyncMode {
    STORE_SYNC_ALWAYS = 0, /* -f 0 (default): acked after the WAL is fsynced */
    STORE_SYNC_INTERVAL = 1, /* -f MS: acked after write(2); fsync every MS ms,
                                also when writes stop */
    STORE_SYNC_NEVER = 2,    /* -F: acked after write(2); never fsync */
} StoreSyncMode;

/* Persisted job states. A reserved job is stored as ready (reservations are
 * not persisted, as in beanstalkd). */
enum { STORE_READY = 1, STORE_DELAYED = 2, STORE_BURIED = 3 };

/* StoreJob.flags bit: the meta record of this job has been Put more than
 * once, so its delete must use Delete, not SingleDelete (RocksDB forbids
 * SingleDelete on an overwritten key; see db.h SingleDelete). */
#define STORE_F_REWRITTEN 0x01

/* The persisted metadata of one job (JobMeta v1 on disk, encoded explicitly
 * little-endian by store_enc.c, never dumped raw). Times are wall-clock
 * nanoseconds since the Unix epoch; durations are seconds. */
typedef struct StoreJob {
    uint64_t id;
    uint8_t state; /* STORE_READY, STORE_DELAYED or STORE_BURIED */
    uint8_t flags; /* STORE_F_* */
    uint32_t pri;
    uint32_t ttr;       /* seconds, >= 1 */
    uint32_t delay;     /* seconds, as last given by put or release */
    uint32_t body_size; /* bytes, without the trailing CRLF */
    uint32_t reserves, timeouts, releases, buries, kicks;
    int64_t created_at_ns; /* wall clock */
    int64_t ready_at_ns;   /* wall clock; meaningful when state is delayed */
    uint8_t tube_len;      /* 1..STORE_TUBE_MAX */
    char tube[STORE_TUBE_MAX + 1];
} StoreJob;

/* Fault-injection seam: every RocksDB write and WAL sync of the mutation
 * thread goes through these. db is a rocksdb_t*, batch a
 * rocksdb_writebatch_t*; each returns 0 or -1 with a malloc'd message in
 * *errmsg (freed by the store with free()). */
typedef struct StoreIO {
    int (*write)(void *ctx, void *db, void *batch, int sync, char **errmsg);
    int (*sync)(void *ctx, void *db, char **errmsg);
    void *ctx;
} StoreIO;

typedef struct StoreConfig {
    const char *dir; /* data directory; created if missing */
    int nshards;     /* 1..STORE_SHARDS_MAX, or 0: the count recorded in
                        dir, or STORE_DEFAULT_SHARDS for a new dir */
    StoreSyncMode sync_mode;
    int sync_interval_ms;      /* STORE_SYNC_INTERVAL only: > 0 */
    const StoreIO *io;         /* NULL: RocksDB itself, possibly wrapped by the
                                  fault injection the ROCKSTALKD_FAULT_*
                                  variables ask for (see
                                  store_fault.c) */
    void (*notify)(void *arg); /* called on the mutation thread after the acked
                                  sequence advanced or a fatal error (on a
                                  syncer thread for a failed -f MS fsync);
                                  the loop passes a function that does
                                  ev_async_send (thread-safe, ev(3)) */
    void *notify_arg;
} StoreConfig;

#define STORE_DEFAULT_SHARDS 1

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
    uint64_t sync_hist[STORE_SYNC_BUCKETS]; /* fsyncs per latency bucket */
    int nshards;
} StoreStats;

typedef struct Store Store;

/* Opens (creating if missing) the data directory: takes the directory lock
 * (fails if another server holds it), checks the recorded format version and
 * shard count (fails without touching anything on a newer format or a
 * different nonzero cfg->nshards), and opens every shard. Returns the store
 * in *out, owned by the caller until store_close. */
int store_open(const StoreConfig *cfg, Store **out, char *err, size_t errcap);

/* Scans every shard's job metadata once (bodies are not read) and calls
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
 *   store_add_put:    a new job (meta and body), written exactly once.
 *   store_add_update: a changed meta record (bury, kick, release with delay or
 *                     new priority); the caller sets STORE_F_REWRITTEN in the
 *                     record it passes and remembers it for the delete.
 *   store_add_delete: the job is gone; meta_rewritten says whether its meta was
 *                     ever rewritten (chooses Delete or SingleDelete).
 * They cannot fail (memory exhaustion aborts). */
void store_add_put(Store *s, uint64_t seq, const StoreJob *job,
                   const void *body);
void store_add_update(Store *s, uint64_t seq, const StoreJob *job);
void store_add_delete(Store *s, uint64_t seq, uint64_t id, int meta_rewritten);

/* Loop thread, once per loop iteration (ev_prepare): hands the records added
 * since the last call to the mutation thread as one unit. Cheap if none. */
void store_flush(Store *s);

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

/* Stops the mutation thread after it has written (and synced, in any mode)
 * everything handed over, closes the shards and releases the directory
 * lock. Frees s. Returns -1 if a final write or sync failed. */
int store_close(Store *s, char *err, size_t errcap);

/* Encodes/decodes a StoreJob to/from the JobMeta v1 value bytes. encode
 * returns the length written (buf must hold STORE_META_MAX bytes); decode
 * returns 0, or -1 on a truncated, unknown-version or malformed value.
 * The job id is the key, not part of the value; decode sets job->id to id. */
#define STORE_META_MAX (56 + STORE_TUBE_MAX)
size_t store_meta_encode(const StoreJob *job, unsigned char *buf);
int store_meta_decode(uint64_t id, const unsigned char *buf, size_t len,
                      StoreJob *job);

/* Which shard job id lives in, for nshards shards. */
static inline int
store_shard_of(uint64_t id, int nshards)
{
    return (int)(id % (uint64_t)nshards);
}

#endif
