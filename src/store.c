/* store.c - durable job storage on N RocksDB shards, written by one
 * serialising mutation thread with grouped WAL commits (see store.h and the
 * architecture notes, sections 3 and 5).
 *
 * Data directory layout:
 *   <dir>/lock       flock(LOCK_EX|LOCK_NB) held for the Store's life; holds
 *                    the owner's pid (informational, for the error message)
 *   <dir>/FORMAT     "rockstalk-format V\nshards N\n", written once,
 *                    atomically (temp file, fsync, rename, fsync of dir)
 *   <dir>/shard-NN/  one RocksDB instance per shard, column families
 *                    default ("format" u32, "shard" u32 index + u32 count,
 *                    "next_id" u64 highest id ever put in this shard),
 *                    meta (8-byte big-endian id -> JobMeta v1) and
 *                    body (8-byte big-endian id -> raw body bytes).
 *   All integers in values are little-endian.
 *
 * Fault injection, read once by store_open when cfg->io is NULL (unset or
 * empty variables disable it):
 *   ROCKSTALKD_FAULT_WRITE_FAIL_AFTER=N  the first N writes of the mutation
 *       thread succeed; the N+1-th and every later one fail with an injected
 *       "Input/output error".
 *   ROCKSTALKD_FAULT_SYNC_FAIL_AFTER=N   likewise for WAL syncs. A write with
 *       sync=1 (STORE_SYNC_ALWAYS with one dirty shard) counts as a write and
 *       as a sync, and a failing sync=1 write writes nothing.
 *   ROCKSTALKD_FAULT_SYNC_HOLD=PATH      before each sync (including a sync=1
 *       write) wait while the file PATH exists, checking every 1 ms, so a
 *       test can hold a sync back and see that the acknowledgement waits.
 *   ROCKSTALKD_FAULT_ENOSPC=1            injected failures read "No space
 *       left on device" (a full disk) instead of "Input/output error".
 *   ROCKSTALKD_FAULT_READ_FAIL=1         every body read (store_get_body,
 *       store_get_bodies) fails with an injected "Input/output error", so a
 *       test can see what a client gets when a body on disk cannot be read.
 */
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <rocksdb/c.h>

#include "store_enc.h"
#include "store_util.h"

enum { CF_DEFAULT, CF_META, CF_BODY, CF_COUNT };
static const char *const cf_names[CF_COUNT] = {"default", "meta", "body"};

/* Emptied hand-off chunks are recycled, up to CHUNK_SPARE_MAX of them, unless
 * a burst grew them beyond CHUNK_KEEP_MAX (then they are freed, so one burst
 * does not pin memory for ever). */
#define CHUNK_MIN 4096
#define CHUNK_KEEP_MAX ((size_t)4 << 20)
#define CHUNK_SPARE_MAX 8

/* RocksDB sizing (architecture 5.5). One LRU block cache is shared by every
 * shard. The meta CF holds small, often rewritten and deleted records; the
 * body CF large write-once ones; the default CF only three keys, so a small
 * memtable lets it flush often instead of pinning old WAL files.
 * max_total_wal_size forces a flush of whichever CF pins the oldest WAL once
 * all WAL files of a shard exceed it; it is set above the meta + body
 * memtables (2 x (16 + 32) MiB) so it does not flush them early. The sizes
 * are small on purpose: they are resident whatever the queue depth, and at
 * 1 million queued 1 KiB jobs halving them took RSS from 330 to 285 MiB at
 * the same load rate (bodies are read back from the memtable or the page
 * cache, so a large block cache buys little). */
#define BLOCK_CACHE_BYTES ((size_t)16 << 20)
#define META_WRITE_BUFFER ((size_t)16 << 20)
#define BODY_WRITE_BUFFER ((size_t)32 << 20)
#define DEFAULT_WRITE_BUFFER ((size_t)4 << 20)
#define MAX_TOTAL_WAL ((uint64_t)256 << 20)
/* Compact-on-deletion collector: an SST whose any window of 16384 entries
 * holds 8192 deletes is queued for compaction, so tombstones left by long
 * lived jobs do not slow the recovery scan for ever. */
#define DEL_WINDOW 16384
#define DEL_TRIGGER 8192
/* Recovery scan readahead (architecture 3.4, 5.7). */
#define RECOVER_READAHEAD ((size_t)2 << 20)

typedef struct Chunk {
    struct Chunk *next;
    unsigned char *p;
    size_t len, cap;
    size_t nrec; /* records in it */
} Chunk;

/* Per-shard fsync helper (nshards > 1, sync modes that sync): lets the
 * fsyncs of several dirty shards overlap (measured 1.2-1.4x faster than
 * serial for groups touching 2 shards). Fields under mu. */
typedef struct Syncer {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int started;
    int req, done, stop;
    int async; /* STORE_SYNC_INTERVAL: results are handled by the syncer */
    int busy;  /* async: a sync is posted or running */
    int rc;
    char *errmsg;
    uint64_t ns;
} Syncer;

typedef struct Shard {
    struct Store *s;
    int index;
    rocksdb_t *db;
    rocksdb_column_family_handle_t *cf[CF_COUNT];
    rocksdb_writebatch_t *batch; /* mutation thread */
    uint64_t hwm;    /* highest id put here (open/recover, then mutation) */
    int hwm_changed; /* mutation: this group raised hwm */
    int in_group;    /* mutation: batch holds this group's records */
    int dirty;       /* mutation: written since the last sync */
    Syncer syncer;
} Shard;

typedef struct FaultIO {
    StoreIO inner;
    long write_fail_after, sync_fail_after; /* -1: never */
    char *hold_path;                        /* NULL: no hold */
    int read_fail;                          /* fail every body read */
    _Atomic long writes, syncs;
} FaultIO;

struct Store {
    /* set by store_open, read-only afterwards */
    StoreConfig cfg;
    char *dir;
    int nshards;
    int lock_fd;
    const StoreIO *io;
    StoreIO fault_io;
    FaultIO fault;
    rocksdb_cache_t *cache;
    rocksdb_block_based_table_options_t *bbto;
    rocksdb_options_t *dbopt, *cfopt[CF_COUNT];
    rocksdb_writeoptions_t *wo_sync, *wo_nosync;
    rocksdb_readoptions_t *ro;
    Shard shard[STORE_SHARDS_MAX];

    /* loop thread: the chunk being built */
    Chunk *cur;
    uint64_t added_seq; /* seq of the latest record added */

    /* hand-off: loop and mutation thread, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    Chunk *queue, **queue_tail;
    uint64_t queued_nrec;   /* records in queue */
    int sleeping;           /* the mutation thread waits for input */
    uint64_t wake_at_nrec;  /* ...and wants waking once queued_nrec reaches
                               this (1: any input) */
    uint64_t inflight_peak; /* most records not yet durable at a hand-off
                               since split_update last looked */
    Chunk *spare;
    int nspare;
    int stop;

    /* mutation thread */
    pthread_t thread;
    int started;
    int64_t last_sync_mono; /* ns, CLOCK_MONOTONIC */
    uint64_t last_sync_dur; /* ns the latest synced group took */
    uint64_t prev_records;  /* records in the previous group */
    uint64_t prev_puts;     /* ...of which puts */
    uint64_t crowd;         /* estimated records per round (split_update) */

    /* written by the mutation thread, read by any thread */
    _Atomic uint64_t written_seq, durable_seq;
    _Atomic int failed;
    _Atomic int failing; /* claimed by the first failure (any thread) */
    char failmsg[512];   /* written once, before failed is set (release) */
    _Atomic uint64_t st_records, st_groups, st_syncs, st_sync_ns,
        st_last_sync_ns, st_bytes;
    _Atomic uint64_t st_sync_hist[STORE_SYNC_BUCKETS];

    /* group splitting (STORE_SYNC_ALWAYS): records per group, read by the
     * loop (UINT64_MAX: no splitting) */
    _Atomic uint64_t split_nrec;

    /* loop thread adds, mutation thread subtracts */
    _Atomic size_t backlog;
};

/* ---- small helpers ---- */

/* Moves a RocksDB error (malloc'd by RocksDB) into *errmsg (freed by the
 * store with free()). Returns 0 if there was none, else -1. */
static int
take_rocks_err(char *e, char **errmsg)
{
    if (!e) return 0;
    *errmsg = strdup(e);
    rocksdb_free(e);
    if (!*errmsg) abort();
    return -1;
}

/* ---- IO: RocksDB itself, and the fault-injection wrapper ---- */

static int
rocks_write(void *ctx, void *db, void *batch, int sync, char **errmsg)
{
    Store *s = ctx;
    char *e = NULL;

    rocksdb_write(db, sync ? s->wo_sync : s->wo_nosync, batch, &e);
    return take_rocks_err(e, errmsg);
}

static int
rocks_sync(void *ctx, void *db, char **errmsg)
{
    char *e = NULL;

    (void)ctx;
    rocksdb_flush_wal(db, 1, &e); /* DB::FlushWAL(sync=true) = SyncWAL */
    return take_rocks_err(e, errmsg);
}

static int
fault_inject(char **errmsg, const char *what)
{
    char buf[96];
    const char *e = getenv("ROCKSTALKD_FAULT_ENOSPC");
    const char *why =
        e && *e && *e != '0' ? "No space left on device" : "Input/output error";

    snprintf(buf, sizeof buf, "IO error: %s (injected %s)", why, what);
    *errmsg = strdup(buf);
    if (!*errmsg) abort();
    return -1;
}

/* Hold while the hold file exists, then count the sync. */
static int
fault_sync_gate(FaultIO *f, char **errmsg)
{
    const struct timespec ms = {0, 1000000};

    while (f->hold_path && access(f->hold_path, F_OK) == 0)
        nanosleep(&ms, NULL);
    long n = atomic_fetch_add(&f->syncs, 1);
    if (f->sync_fail_after >= 0 && n >= f->sync_fail_after)
        return fault_inject(errmsg, "sync failure");
    return 0;
}

static int
fault_write(void *ctx, void *db, void *batch, int sync, char **errmsg)
{
    FaultIO *f = ctx;

    if (sync && fault_sync_gate(f, errmsg) < 0) return -1;
    long n = atomic_fetch_add(&f->writes, 1);
    if (f->write_fail_after >= 0 && n >= f->write_fail_after)
        return fault_inject(errmsg, "write failure");
    return f->inner.write(f->inner.ctx, db, batch, sync, errmsg);
}

static int
fault_sync(void *ctx, void *db, char **errmsg)
{
    FaultIO *f = ctx;

    if (fault_sync_gate(f, errmsg) < 0) return -1;
    return f->inner.sync(f->inner.ctx, db, errmsg);
}

/* Reads a non-negative count from the environment into *out (-1 if unset). */
static int
env_count(const char *name, long *out, char *err, size_t errcap)
{
    const char *v = getenv(name);
    char *end;

    *out = -1;
    if (!v || !*v) return 0;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || *end || n < 0)
        return util_fail(err, errcap, "%s=%s: not a non-negative integer", name,
                         v);
    *out = n;
    return 0;
}

/* Chooses cfg->io, or RocksDB wrapped by the fault injection the
 * environment asks for. */
static int
io_setup(Store *s, char *err, size_t errcap)
{
    FaultIO *f = &s->fault;
    const char *hold = getenv("ROCKSTALKD_FAULT_SYNC_HOLD");
    const char *rf = getenv("ROCKSTALKD_FAULT_READ_FAIL");

    f->read_fail = rf && *rf && *rf != '0';
    f->inner = (StoreIO){rocks_write, rocks_sync, s};
    if (s->cfg.io) {
        s->io = s->cfg.io;
        return 0;
    }
    if (env_count("ROCKSTALKD_FAULT_WRITE_FAIL_AFTER", &f->write_fail_after,
                  err, errcap) < 0 ||
        env_count("ROCKSTALKD_FAULT_SYNC_FAIL_AFTER", &f->sync_fail_after, err,
                  errcap) < 0)
        return -1;
    if (hold && *hold && !(f->hold_path = strdup(hold)))
        return util_fail(err, errcap, "out of memory");
    if (f->write_fail_after < 0 && f->sync_fail_after < 0 && !f->hold_path) {
        s->io = &f->inner;
        return 0;
    }
    s->fault_io = (StoreIO){fault_write, fault_sync, f};
    s->io = &s->fault_io;
    return 0;
}

/* ---- data directory: lock and FORMAT ---- */

static int
path_of(const Store *s, const char *name, char *buf, size_t cap, char *err,
        size_t errcap)
{
    int n = snprintf(buf, cap, "%s/%s", s->dir, name);

    if (n < 0 || (size_t)n >= cap)
        return util_fail(err, errcap, "path too long: %s/%s", s->dir, name);
    return 0;
}

static int
dir_prepare(Store *s, char *err, size_t errcap)
{
    struct stat st;

    if (mkdir(s->dir, 0755) < 0 && errno != EEXIST)
        return util_fail(err, errcap, "mkdir %s: %s", s->dir, strerror(errno));
    if (stat(s->dir, &st) < 0)
        return util_fail(err, errcap, "stat %s: %s", s->dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return util_fail(err, errcap, "%s is not a directory", s->dir);
    return 0;
}

/* Takes <dir>/lock for the Store's life and writes our pid into it. */
static int
lock_take(Store *s, char *err, size_t errcap)
{
    char path[4096], pid[32];

    if (path_of(s, "lock", path, sizeof path, err, errcap) < 0) return -1;
    s->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (s->lock_fd < 0)
        return util_fail(err, errcap, "open %s: %s", path, strerror(errno));
    if (flock(s->lock_fd, LOCK_EX | LOCK_NB) < 0) {
        if (errno != EWOULDBLOCK)
            return util_fail(err, errcap, "flock %s: %s", path,
                             strerror(errno));
        ssize_t n = pread(s->lock_fd, pid, sizeof pid - 1, 0);
        n = n < 0 ? 0 : n;
        while (n > 0 && (pid[n - 1] == '\n' || pid[n - 1] == ' '))
            n--;
        pid[n] = '\0';
        return util_fail(err, errcap,
                         "data directory %s is locked by another rockstalkd "
                         "(pid %s)",
                         s->dir, n ? pid : "unknown");
    }
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(s->lock_fd, 0) < 0 || pwrite(s->lock_fd, pid, n, 0) != n)
        return util_fail(err, errcap, "write %s: %s", path, strerror(errno));
    return 0;
}

static int
fsync_path(const char *path, int flags, char *err, size_t errcap)
{
    int fd = open(path, flags | O_CLOEXEC);

    if (fd < 0)
        return util_fail(err, errcap, "open %s: %s", path, strerror(errno));
    if (fsync(fd) < 0) {
        int e = errno;
        close(fd);
        return util_fail(err, errcap, "fsync %s: %s", path, strerror(e));
    }
    close(fd);
    return 0;
}

/* Writes <dir>/FORMAT atomically: temp file, fsync, rename, fsync dir. */
static int
format_write(Store *s, char *err, size_t errcap)
{
    char tmp[4096], path[4096], text[64];
    int n = snprintf(text, sizeof text, "rockstalk-format %d\nshards %d\n",
                     STORE_FORMAT_VERSION, s->nshards);

    if (path_of(s, "FORMAT.tmp", tmp, sizeof tmp, err, errcap) < 0 ||
        path_of(s, "FORMAT", path, sizeof path, err, errcap) < 0)
        return -1;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return util_fail(err, errcap, "open %s: %s", tmp, strerror(errno));
    if (write(fd, text, n) != n || fsync(fd) < 0) {
        int e = errno;
        close(fd);
        return util_fail(err, errcap, "write %s: %s", tmp, strerror(e));
    }
    close(fd);
    if (rename(tmp, path) < 0)
        return util_fail(err, errcap, "rename %s: %s", tmp, strerror(errno));
    return fsync_path(s->dir, O_RDONLY | O_DIRECTORY, err, errcap);
}

/* Parses FORMAT into *version and *nshards. Returns 1 if read, 0 if the
 * file does not exist, -1 on error. */
static int
format_read(Store *s, unsigned *version, int *nshards, char *err, size_t errcap)
{
    char path[4096], text[128];

    if (path_of(s, "FORMAT", path, sizeof path, err, errcap) < 0) return -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) return 0;
    if (fd < 0)
        return util_fail(err, errcap, "open %s: %s", path, strerror(errno));
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n < 0)
        return util_fail(err, errcap, "read %s: %s", path, strerror(errno));
    text[n] = '\0';
    if (sscanf(text, "rockstalk-format %u shards %d", version, nshards) != 2)
        return util_fail(err, errcap, "%s: malformed", path);
    return 1;
}

/* Checks (or, for a new directory, writes) FORMAT and sets s->nshards.
 * Refuses a newer format or a different requested shard count before
 * anything in the directory is touched. */
static int
format_check(Store *s, int want, char *err, size_t errcap)
{
    unsigned version;
    int have;
    struct stat st;
    char path[4096];

    int r = format_read(s, &version, &have, err, errcap);
    if (r < 0) return -1;
    if (r == 0) {
        if (path_of(s, "shard-00", path, sizeof path, err, errcap) < 0)
            return -1;
        if (stat(path, &st) == 0)
            return util_fail(err, errcap,
                             "data directory %s has shards but no "
                             "FORMAT file",
                             s->dir);
        s->nshards = want ? want : STORE_DEFAULT_SHARDS;
        return format_write(s, err, errcap);
    }
    if (version > STORE_FORMAT_VERSION || version == 0)
        return util_fail(err, errcap,
                         "data directory %s has format version %u; this "
                         "rockstalkd reads version %d",
                         s->dir, version, STORE_FORMAT_VERSION);
    if (have < 1 || have > STORE_SHARDS_MAX)
        return util_fail(err, errcap, "data directory %s: bad shard count %d",
                         s->dir, have);
    if (want && want != have)
        return util_fail(
            err, errcap,
            "data directory %s has %d shards but -S %d asks for %d; "
            "the shard count cannot change (omit -S or use -S %d)",
            s->dir, have, want, want, have);
    s->nshards = have;
    return 0;
}

/* ---- RocksDB options and shards ---- */

static void
options_create(Store *s)
{
    static const size_t wbuf[CF_COUNT] = {DEFAULT_WRITE_BUFFER,
                                          META_WRITE_BUFFER, BODY_WRITE_BUFFER};

    s->cache = rocksdb_cache_create_lru(BLOCK_CACHE_BYTES);
    s->bbto = rocksdb_block_based_options_create();
    rocksdb_block_based_options_set_block_cache(s->bbto, s->cache);

    s->dbopt = rocksdb_options_create();
    rocksdb_options_set_create_if_missing(s->dbopt, 1);
    rocksdb_options_set_create_missing_column_families(s->dbopt, 1);
    /* Replay the WAL up to the first corrupt record: a consistent prefix. */
    rocksdb_options_set_wal_recovery_mode(s->dbopt,
                                          rocksdb_point_in_time_recovery);
    rocksdb_options_set_max_background_jobs(s->dbopt, 2);
    /* Keep every SST open: no table-cache misses, and range tombstones
     * stay cheap to read (architecture 3.4). */
    rocksdb_options_set_max_open_files(s->dbopt, -1);
    rocksdb_options_set_max_total_wal_size(s->dbopt, MAX_TOTAL_WAL);
    rocksdb_options_set_keep_log_file_num(s->dbopt, 4); /* info LOG files */

    for (int i = 0; i < CF_COUNT; i++) {
        s->cfopt[i] = rocksdb_options_create();
        rocksdb_options_set_block_based_table_factory(s->cfopt[i], s->bbto);
        rocksdb_options_set_write_buffer_size(s->cfopt[i], wbuf[i]);
    }
    rocksdb_options_add_compact_on_deletion_collector_factory(
        s->cfopt[CF_META], DEL_WINDOW, DEL_TRIGGER);

    s->wo_sync = rocksdb_writeoptions_create();
    rocksdb_writeoptions_set_sync(s->wo_sync, 1);
    s->wo_nosync = rocksdb_writeoptions_create();
    s->ro = rocksdb_readoptions_create();
}

/* Reads key from sh's default CF into buf (exactly len bytes). Returns 1 if
 * found, 0 if absent, -1 on error or a wrong length. */
static int
header_get(Shard *sh, const char *key, unsigned char *buf, size_t len,
           char *err, size_t errcap)
{
    size_t vlen = 0;
    char *e = NULL;
    char *v = rocksdb_get_cf(sh->db, sh->s->ro, sh->cf[CF_DEFAULT], key,
                             strlen(key), &vlen, &e);

    if (e) {
        util_fail(err, errcap, "shard-%02d: read %s: %s", sh->index, key, e);
        rocksdb_free(e);
        return -1;
    }
    if (!v) return 0;
    if (vlen != len) {
        rocksdb_free(v);
        return util_fail(err, errcap, "shard-%02d: %s has %zu bytes, want %zu",
                         sh->index, key, vlen, len);
    }
    memcpy(buf, v, len);
    rocksdb_free(v);
    return 1;
}

/* Writes a new shard's header (format and shard keys), synced. */
static int
header_create(Shard *sh, char *err, size_t errcap)
{
    unsigned char fmt[4], idx[8];
    char *e = NULL;
    rocksdb_writebatch_t *b = rocksdb_writebatch_create();

    enc_put_u32le(fmt, STORE_FORMAT_VERSION);
    enc_put_u32le(idx, (uint32_t)sh->index);
    enc_put_u32le(idx + 4, (uint32_t)sh->s->nshards);
    rocksdb_writebatch_put_cf(b, sh->cf[CF_DEFAULT], "format", 6,
                              (const char *)fmt, 4);
    rocksdb_writebatch_put_cf(b, sh->cf[CF_DEFAULT], "shard", 5,
                              (const char *)idx, 8);
    rocksdb_write(sh->db, sh->s->wo_sync, b, &e);
    rocksdb_writebatch_destroy(b);
    if (e) {
        util_fail(err, errcap, "shard-%02d: write header: %s", sh->index, e);
        rocksdb_free(e);
        return -1;
    }
    return 0;
}

/* Checks an existing shard's header (or creates it) and loads next_id. */
static int
header_check(Shard *sh, char *err, size_t errcap)
{
    unsigned char fmt[4], idx[8], nid[8];
    int r = header_get(sh, "format", fmt, 4, err, errcap);

    if (r < 0) return -1;
    if (r == 0) return header_create(sh, err, errcap);
    uint32_t v = enc_get_u32le(fmt);
    if (v == 0 || v > STORE_FORMAT_VERSION)
        return util_fail(err, errcap,
                         "shard-%02d has format version %" PRIu32
                         "; this rockstalkd reads version %d",
                         sh->index, v, STORE_FORMAT_VERSION);
    if ((r = header_get(sh, "shard", idx, 8, err, errcap)) <= 0)
        return r < 0 ? -1
                     : util_fail(err, errcap, "shard-%02d: no shard key",
                                 sh->index);
    if (enc_get_u32le(idx) != (uint32_t)sh->index ||
        enc_get_u32le(idx + 4) != (uint32_t)sh->s->nshards)
        return util_fail(err, errcap,
                         "shard-%02d of %s says it is shard %" PRIu32
                         " of %" PRIu32 ", expected %d of %d",
                         sh->index, sh->s->dir, enc_get_u32le(idx),
                         enc_get_u32le(idx + 4), sh->index, sh->s->nshards);
    if ((r = header_get(sh, "next_id", nid, 8, err, errcap)) < 0) return -1;
    sh->hwm = r ? enc_get_u64le(nid) : 0;
    return 0;
}

static int
shard_open(Store *s, int i, char *err, size_t errcap)
{
    Shard *sh = &s->shard[i];
    char name[24], path[4096];
    char *e = NULL;

    sh->s = s;
    sh->index = i;
    snprintf(name, sizeof name, "shard-%02d", i);
    if (path_of(s, name, path, sizeof path, err, errcap) < 0) return -1;
    sh->db = rocksdb_open_column_families(
        s->dbopt, path, CF_COUNT, (const char *const *)cf_names,
        (const rocksdb_options_t *const *)s->cfopt, sh->cf, &e);
    if (e) {
        sh->db = NULL;
        util_fail(err, errcap, "open %s: %s", path, e);
        rocksdb_free(e);
        return -1;
    }
    sh->batch = rocksdb_writebatch_create();
    return header_check(sh, err, errcap);
}

/* ---- loop side: records and hand-off ---- */

/* Returns room for need more bytes at the end of the chunk being built. */
static unsigned char *
rec_reserve(Store *s, size_t need)
{
    Chunk *c = s->cur;

    if (!c) {
        c = s->cur = util_xrealloc(NULL, sizeof *c);
        *c = (Chunk){0};
    }
    if (c->cap - c->len < need) {
        size_t cap = c->cap ? c->cap : CHUNK_MIN;
        while (cap - c->len < need)
            cap *= 2;
        c->p = util_xrealloc(c->p, cap);
        c->cap = cap;
    }
    return c->p + c->len;
}

static void
rec_commit(Store *s, unsigned char *p, uint64_t seq, int op, uint64_t id,
           int flag, size_t meta_len, uint32_t body_len)
{
    uint16_t ml = (uint16_t)meta_len;
    unsigned char o = (unsigned char)op, f = (unsigned char)flag;
    size_t n = ENC_REC_HDR + meta_len + body_len;

    memcpy(p + ENC_REC_SEQ, &seq, 8);
    memcpy(p + ENC_REC_ID, &id, 8);
    memcpy(p + ENC_REC_BODY_LEN, &body_len, 4);
    memcpy(p + ENC_REC_META_LEN, &ml, 2);
    p[ENC_REC_OP] = o;
    p[ENC_REC_FLAG] = f;
    s->cur->len += n;
    s->cur->nrec++;
    s->added_seq = seq;
    atomic_fetch_add_explicit(&s->backlog, n, memory_order_relaxed);
    /* Splitting: hand over each half-crowd as soon as it is complete, so
     * the mutation thread can commit it while the loop reads the rest. */
    if (s->cur->nrec >=
        atomic_load_explicit(&s->split_nrec, memory_order_relaxed))
        store_flush(s);
}

void
store_add_put(Store *s, uint64_t seq, const StoreJob *job, const void *body)
{
    unsigned char *p =
        rec_reserve(s, ENC_REC_HDR + STORE_META_MAX + (size_t)job->body_size);
    size_t ml = store_meta_encode(job, p + ENC_REC_HDR);

    if (job->body_size) memcpy(p + ENC_REC_HDR + ml, body, job->body_size);
    rec_commit(s, p, seq, ENC_OP_PUT, job->id, 0, ml, job->body_size);
}

void
store_add_update(Store *s, uint64_t seq, const StoreJob *job)
{
    unsigned char *p = rec_reserve(s, ENC_REC_HDR + STORE_META_MAX);
    size_t ml = store_meta_encode(job, p + ENC_REC_HDR);

    rec_commit(s, p, seq, ENC_OP_UPDATE, job->id, 0, ml, 0);
}

void
store_add_delete(Store *s, uint64_t seq, uint64_t id, int meta_rewritten)
{
    unsigned char *p = rec_reserve(s, ENC_REC_HDR);

    rec_commit(s, p, seq, ENC_OP_DELETE, id, meta_rewritten != 0, 0, 0);
}

/* O(1): links the chunk being built onto the queue and takes a spare one
 * (or none: the next add allocates). */
void
store_flush(Store *s)
{
    Chunk *c = s->cur;

    if (!c || !c->len) return;
    c->next = NULL;
    pthread_mutex_lock(&s->mu);
    if (s->cfg.sync_mode == STORE_SYNC_ALWAYS) { /* for split_update */
        uint64_t inflight =
            s->added_seq -
            atomic_load_explicit(&s->durable_seq, memory_order_relaxed);
        if (inflight > s->inflight_peak) s->inflight_peak = inflight;
    }
    *s->queue_tail = c;
    s->queue_tail = &c->next;
    s->queued_nrec += c->nrec;
    s->cur = s->spare;
    if (s->spare) {
        s->spare = s->spare->next;
        s->nspare--;
    }
    /* Wake the thread only when it sleeps and has what it waits for: a
     * futex wake per loop iteration while it gathers a group would cost
     * more than the group saves. */
    if (s->sleeping && s->queued_nrec >= s->wake_at_nrec)
        pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

uint64_t
store_acked_seq(const Store *s)
{
    if (s->cfg.sync_mode == STORE_SYNC_ALWAYS)
        return atomic_load_explicit(&s->durable_seq, memory_order_acquire);
    return atomic_load_explicit(&s->written_seq, memory_order_acquire);
}

size_t
store_backlog_bytes(const Store *s)
{
    return atomic_load_explicit(&s->backlog, memory_order_relaxed);
}

int
store_failed(Store *s, char *msg, size_t cap)
{
    if (!atomic_load_explicit(&s->failed, memory_order_acquire)) {
        if (msg && cap) msg[0] = '\0';
        return 0;
    }
    if (msg && cap) snprintf(msg, cap, "%s", s->failmsg);
    return 1;
}

void
store_stats(const Store *s, StoreStats *out)
{
    memory_order r = memory_order_relaxed;

    out->records = atomic_load_explicit(&s->st_records, r);
    out->groups = atomic_load_explicit(&s->st_groups, r);
    out->syncs = atomic_load_explicit(&s->st_syncs, r);
    out->sync_ns = atomic_load_explicit(&s->st_sync_ns, r);
    out->last_sync_ns = atomic_load_explicit(&s->st_last_sync_ns, r);
    out->bytes = atomic_load_explicit(&s->st_bytes, r);
    out->nshards = s->nshards;
    for (int i = 0; i < STORE_SYNC_BUCKETS; i++)
        out->sync_hist[i] = atomic_load_explicit(&s->st_sync_hist[i], r);
}

/* Reads go straight to RocksDB, which is safe next to the mutation thread's
 * writes; a job whose put is not written yet is simply not found. */
int
store_get_body(Store *s, uint64_t id, char **body, size_t *len, char *err,
               size_t errcap)
{
    Shard *sh = &s->shard[store_shard_of(id, s->nshards)];
    char key[8], *e = NULL;
    size_t vlen = 0;

    if (s->fault.read_fail)
        return util_fail(
            err, errcap, "read body of job %" PRIu64 ": %s", id,
            "IO error: Input/output error (injected read failure)");
    enc_key_put(key, id);
    rocksdb_pinnableslice_t *ps =
        rocksdb_get_pinned_cf(sh->db, s->ro, sh->cf[CF_BODY], key, 8, &e);
    if (e) {
        util_fail(err, errcap, "read body of job %" PRIu64 ": %s", id, e);
        rocksdb_free(e);
        return -1;
    }
    if (!ps) return 0;
    const char *v = rocksdb_pinnableslice_value(ps, &vlen);
    *body = malloc(vlen ? vlen : 1);
    if (!*body) {
        rocksdb_pinnableslice_destroy(ps);
        return util_fail(err, errcap, "out of memory reading job %" PRIu64, id);
    }
    memcpy(*body, v, vlen);
    *len = vlen;
    rocksdb_pinnableslice_destroy(ps);
    return 1;
}

_Static_assert(STORE_SHARDS_MAX <= 64, "store_get_bodies: 64-bit shard mask");

/* Steps within one iterator before a Seek is cheaper (store_get_bodies). */
#define STEP_MAX 16
/* Up to this many bodies of one shard, store_get_bodies uses lookups. */
#define FEW_GETS 2

/* Positions it at the first key >= id: from where it is, stepping at
 * most STEP_MAX keys (ids ascending between calls), else by a Seek; fresh:
 * Seek at once. Returns 1 if it is then at exactly id. */
static int
iter_goto(rocksdb_iterator_t *it, uint64_t id, int fresh)
{
    char want[8];
    size_t klen;
    int steps = 0;

    enc_key_put(want, id);
    while (!fresh && rocksdb_iter_valid(it) && steps < STEP_MAX) {
        const char *k = rocksdb_iter_key(it, &klen);
        if (klen != 8 || memcmp(k, want, 8) >= 0) break;
        rocksdb_iter_next(it);
        steps++;
    }
    if (fresh || steps == STEP_MAX) rocksdb_iter_seek(it, want, 8);
    if (!rocksdb_iter_valid(it)) return 0;
    const char *k = rocksdb_iter_key(it, &klen);
    return klen == 8 && memcmp(k, want, 8) == 0;
}

/* Reads the bodies of shard sh among ids[0..n) (ascending): one lookup
 * each when they are few (an iterator costs more to set up than a Get),
 * else by stepping one iterator. */
static int
get_bodies_shard(Store *s, Shard *sh, const uint64_t *ids, size_t n,
                 char **bodies, size_t *lens, char *err, size_t errcap)
{
    size_t mine = 0;
    for (size_t i = 0; i < n; i++)
        mine += &s->shard[store_shard_of(ids[i], s->nshards)] == sh;
    for (size_t i = 0; mine <= FEW_GETS && i < n; i++) {
        if (&s->shard[store_shard_of(ids[i], s->nshards)] != sh) continue;
        if (store_get_body(s, ids[i], &bodies[i], &lens[i], err, errcap) < 0)
            return -1;
    }
    if (mine <= FEW_GETS) return 0;
    rocksdb_iterator_t *it =
        rocksdb_create_iterator_cf(sh->db, s->ro, sh->cf[CF_BODY]);
    char *e = NULL;
    int fresh = 1;

    for (size_t i = 0; i < n; i++) {
        if (&s->shard[store_shard_of(ids[i], s->nshards)] != sh) continue;
        if (!iter_goto(it, ids[i], fresh)) {
            fresh = !rocksdb_iter_valid(it);
            continue;
        }
        fresh = 0;
        size_t vlen;
        const char *v = rocksdb_iter_value(it, &vlen);
        if ((bodies[i] = malloc(vlen ? vlen : 1)) == NULL) break;
        memcpy(bodies[i], v, vlen);
        lens[i] = vlen;
    }
    rocksdb_iter_get_error(it, &e);
    rocksdb_iter_destroy(it);
    if (e) {
        util_fail(err, errcap, "read bodies of shard %d: %s", sh->index, e);
        rocksdb_free(e);
        return -1;
    }
    return 0;
}

int
store_get_bodies(Store *s, const uint64_t *ids, size_t n, char **bodies,
                 size_t *lens, char *err, size_t errcap)
{
    int rc = 0;

    uint64_t todo = 0; /* bit k: shard k has ids (STORE_SHARDS_MAX 64) */

    for (size_t i = 0; i < n; i++) {
        bodies[i] = NULL;
        todo |= (uint64_t)1 << store_shard_of(ids[i], s->nshards);
    }
    if (s->fault.read_fail)
        return util_fail(
            err, errcap, "read bodies: %s",
            "IO error: Input/output error (injected read failure)");
    for (int k = 0; k < s->nshards; k++)
        if (((todo >> k) & 1) &&
            get_bodies_shard(s, &s->shard[k], ids, n, bodies, lens, err,
                             errcap) < 0)
            rc = -1;
    return rc;
}

/* ---- mutation thread ---- */

/* Fail-stop: records the first failure, then nothing more is published. */
static void
mut_fail(Store *s, const char *what, int shard, char *msg)
{
    int expected = 0;
    /* Syncer threads can fail concurrently with the mutation thread: the
     * first to claim the flag writes the message. */
    if (atomic_compare_exchange_strong(&s->failing, &expected, 1)) {
        snprintf(s->failmsg, sizeof s->failmsg, "%s shard-%02d: %s", what,
                 shard, msg ? msg : "unknown error");
        atomic_store_explicit(&s->failed, 1, memory_order_release);
    }
    free(msg);
    if (s->cfg.notify) s->cfg.notify(s->cfg.notify_arg);
}

static int
mut_is_failed(const Store *s)
{
    return atomic_load_explicit(&s->failed, memory_order_relaxed);
}

static void
mut_publish(Store *s, uint64_t seq, int durable)
{
    if (mut_is_failed(s)) return;
    atomic_store_explicit(&s->written_seq, seq, memory_order_release);
    if (durable)
        atomic_store_explicit(&s->durable_seq, seq, memory_order_release);
    if (s->cfg.notify) s->cfg.notify(s->cfg.notify_arg);
}

static void
stat_sync(Store *s, uint64_t ns)
{
    int b = 0;
    while (b < STORE_SYNC_BUCKETS - 1 &&
           ns > (uint64_t)store_sync_bucket_us[b] * 1000)
        b++;
    atomic_fetch_add_explicit(&s->st_syncs, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->st_sync_ns, ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->st_sync_hist[b], 1, memory_order_relaxed);
}

static void *
syncer_main(void *arg)
{
    Shard *sh = arg;
    Syncer *y = &sh->syncer;
    const StoreIO *io = sh->s->io;

    pthread_mutex_lock(&y->mu);
    for (;;) {
        while (!y->req && !y->stop)
            pthread_cond_wait(&y->cv, &y->mu);
        if (y->stop) break;
        y->req = 0;
        pthread_mutex_unlock(&y->mu);
        char *msg = NULL;
        int64_t t0 = util_now_ns();
        int rc = io->sync(io->ctx, sh->db, &msg);
        uint64_t ns = (uint64_t)(util_now_ns() - t0);
        if (y->async) { /* nobody waits: account and fail-stop here */
            stat_sync(sh->s, ns);
            if (rc < 0)
                mut_fail(sh->s, "WAL sync of", sh->index, msg);
            else
                free(msg);
            msg = NULL;
        }
        pthread_mutex_lock(&y->mu);
        y->rc = rc;
        y->errmsg = msg;
        y->ns = ns;
        y->done = 1;
        y->busy = 0;
        pthread_cond_broadcast(&y->cv);
    }
    pthread_mutex_unlock(&y->mu);
    return NULL;
}

static void
syncer_post(Shard *sh)
{
    Syncer *y = &sh->syncer;

    pthread_mutex_lock(&y->mu);
    y->done = 0;
    y->req = 1;
    pthread_cond_broadcast(&y->cv);
    pthread_mutex_unlock(&y->mu);
}

/* Waits for a posted sync; returns its result (message in *msg). */
static int
syncer_wait(Shard *sh, char **msg, uint64_t *ns)
{
    Syncer *y = &sh->syncer;

    pthread_mutex_lock(&y->mu);
    while (!y->done)
        pthread_cond_wait(&y->cv, &y->mu);
    int rc = y->rc;
    *msg = y->errmsg;
    *ns = y->ns;
    y->errmsg = NULL;
    pthread_mutex_unlock(&y->mu);
    return rc;
}

/* Syncs sh on the calling thread. */
static int
sync_here(Store *s, Shard *sh, char **msg, uint64_t *ns)
{
    int64_t t0 = util_now_ns();
    int rc = s->io->sync(s->io->ctx, sh->db, msg);

    *ns = (uint64_t)(util_now_ns() - t0);
    return rc;
}

/* Fsyncs the WAL of every dirty shard: the first on this thread, the others
 * at the same time on their helpers (if started; else serially here). */
static int
sync_dirty(Store *s)
{
    int first = -1, rc = 0;
    int64_t t0 = util_now_ns();
    char *msg = NULL;
    uint64_t ns;

    for (int i = 0; i < s->nshards; i++) {
        if (!s->shard[i].dirty) continue;
        if (first < 0)
            first = i;
        else if (s->shard[i].syncer.started)
            syncer_post(&s->shard[i]);
    }
    if (first < 0) return 0;
    for (int i = first; i < s->nshards; i++) {
        Shard *sh = &s->shard[i];
        if (!sh->dirty) continue;
        int r = i > first && sh->syncer.started ? syncer_wait(sh, &msg, &ns)
                                                : sync_here(s, sh, &msg, &ns);
        stat_sync(s, ns);
        if (r < 0 && rc == 0)
            mut_fail(s, "WAL sync of", i, msg);
        else
            free(msg);
        msg = NULL;
        rc |= r;
        sh->dirty = 0;
    }
    s->last_sync_mono = util_now_ns();
    atomic_store_explicit(&s->st_last_sync_ns,
                          (uint64_t)(s->last_sync_mono - t0),
                          memory_order_relaxed);
    return rc < 0 ? -1 : 0;
}

static int
syncers_start(Store *s, char *err, size_t errcap)
{
    /* Only shards after the first dirty one are handed to helpers, so shard 0
     * never needs one. Without syncs until close, no helpers at all. */
    int async = s->cfg.sync_mode == STORE_SYNC_INTERVAL;
    if ((!async && s->nshards < 2) || s->cfg.sync_mode == STORE_SYNC_NEVER)
        return 0;
    for (int i = async ? 0 : 1; i < s->nshards; i++) {
        Syncer *y = &s->shard[i].syncer;
        y->async = async;
        int e = pthread_create(&y->th, NULL, syncer_main, &s->shard[i]);
        if (e) return util_fail(err, errcap, "pthread_create: %s", strerror(e));
        y->started = 1;
    }
    return 0;
}

static void
syncers_stop(Store *s)
{
    for (int i = 0; i < s->nshards; i++) {
        Syncer *y = &s->shard[i].syncer;
        if (!y->started) continue;
        pthread_mutex_lock(&y->mu);
        y->stop = 1;
        pthread_cond_broadcast(&y->cv);
        pthread_mutex_unlock(&y->mu);
        pthread_join(y->th, NULL);
        y->started = 0;
    }
}

/* Adds one record to its shard's batch; returns the record's length. */
static size_t
mut_apply(Store *s, const unsigned char *p, uint64_t *seq)
{
    uint64_t id;
    uint32_t body_len;
    uint16_t meta_len;
    char key[8];

    memcpy(seq, p + ENC_REC_SEQ, 8);
    memcpy(&id, p + ENC_REC_ID, 8);
    memcpy(&body_len, p + ENC_REC_BODY_LEN, 4);
    memcpy(&meta_len, p + ENC_REC_META_LEN, 2);
    Shard *sh = &s->shard[store_shard_of(id, s->nshards)];
    rocksdb_writebatch_t *b = sh->batch;
    rocksdb_column_family_handle_t *meta = sh->cf[CF_META];
    const char *m = (const char *)p + ENC_REC_HDR;
    enc_key_put(key, id);
    switch (p[ENC_REC_OP]) {
    case ENC_OP_PUT:
        rocksdb_writebatch_put_cf(b, meta, key, 8, m, meta_len);
        rocksdb_writebatch_put_cf(b, sh->cf[CF_BODY], key, 8, m + meta_len,
                                  body_len);
        if (id > sh->hwm) {
            sh->hwm = id;
            sh->hwm_changed = 1;
        }
        break;
    case ENC_OP_UPDATE:
        rocksdb_writebatch_put_cf(b, meta, key, 8, m, meta_len);
        break;
    case ENC_OP_DELETE:
        /* SingleDelete is valid on the body because it is Put exactly once,
         * and on the meta only if it was never rewritten (store.h). */
        rocksdb_writebatch_singledelete_cf(b, sh->cf[CF_BODY], key, 8);
        if (p[ENC_REC_FLAG])
            rocksdb_writebatch_delete_cf(b, meta, key, 8);
        else
            rocksdb_writebatch_singledelete_cf(b, meta, key, 8);
        break;
    }
    sh->in_group = 1;
    return ENC_REC_HDR + meta_len + body_len;
}

/* Adds the next_id high-water mark to a batch whose puts raised it. In the
 * same batch as the puts, so a durable id is always covered by it. */
static void
mut_put_hwm(Shard *sh)
{
    unsigned char v[8];

    if (!sh->hwm_changed) return;
    enc_put_u64le(v, sh->hwm);
    rocksdb_writebatch_put_cf(sh->batch, sh->cf[CF_DEFAULT], "next_id", 7,
                              (const char *)v, 8);
    sh->hwm_changed = 0;
}

/* Writes one shard's batch. sync=1 is a write and an fsync in one call. */
static int
mut_write_one(Store *s, Shard *sh, int sync)
{
    size_t size = 0;
    char *msg = NULL;
    int64_t t0 = util_now_ns();

    rocksdb_writebatch_data(sh->batch, &size);
    int rc = s->io->write(s->io->ctx, sh->db, sh->batch, sync, &msg);
    if (sync) {
        uint64_t ns = (uint64_t)(util_now_ns() - t0);
        stat_sync(s, ns);
        atomic_store_explicit(&s->st_last_sync_ns, ns, memory_order_relaxed);
        s->last_sync_mono = util_now_ns();
        s->last_sync_dur = ns;
    }
    if (rc < 0) {
        mut_fail(s, "write to", sh->index, msg);
        return -1;
    }
    atomic_fetch_add_explicit(&s->st_bytes, size, memory_order_relaxed);
    sh->dirty = !sync;
    return 0;
}

/* Writes the batch of every shard this group touched. STORE_SYNC_ALWAYS:
 * a group touching one shard is written with sync=1 (measured as fast as or
 * faster than write + flush_wal); a group touching several is written with
 * sync=0 and then synced in parallel (sync_dirty). */
static int
mut_write_group(Store *s)
{
    int n = 0, rc = 0, one = s->cfg.sync_mode == STORE_SYNC_ALWAYS;

    for (int i = 0; i < s->nshards; i++) {
        if (s->shard[i].in_group) {
            mut_put_hwm(&s->shard[i]);
            n++;
        }
    }
    one = one && n == 1;
    for (int i = 0; i < s->nshards; i++) {
        Shard *sh = &s->shard[i];
        if (!sh->in_group) continue;
        if (rc == 0) rc = mut_write_one(s, sh, one);
        rocksdb_writebatch_clear(sh->batch); /* after a failure: drop */
        sh->in_group = 0;
    }
    if (rc == 0 && s->cfg.sync_mode == STORE_SYNC_ALWAYS && !one)
        rc = sync_dirty(s);
    return rc;
}

/* Commits one group (all chunks taken at once) and publishes its last seq.
 * After a failure input is only dropped. */
static void
mut_group(Store *s, Chunk *chunks)
{
    uint64_t seq = 0, records = 0, puts = 0;
    size_t bytes = 0;

    for (Chunk *c = chunks; c; c = c->next) {
        if (!mut_is_failed(s)) {
            for (size_t off = 0; off < c->len; records++) {
                puts += c->p[off + ENC_REC_OP] == ENC_OP_PUT;
                off += mut_apply(s, c->p + off, &seq);
            }
        }
        bytes += c->len;
    }
    if (records) {
        int rc = mut_write_group(s);
        atomic_fetch_add_explicit(&s->st_records, records,
                                  memory_order_relaxed);
        atomic_fetch_add_explicit(&s->st_groups, 1, memory_order_relaxed);
        if (rc == 0) mut_publish(s, seq, s->cfg.sync_mode == STORE_SYNC_ALWAYS);
    }
    s->prev_records = records;
    s->prev_puts = puts;
    atomic_fetch_sub_explicit(&s->backlog, bytes, memory_order_relaxed);
}

static void
chunk_free(Chunk *c)
{
    free(c->p);
    free(c);
}

static void
chunk_list_free(Chunk *c)
{
    for (Chunk *next; c; c = next) {
        next = c->next;
        chunk_free(c);
    }
}

/* Returns emptied chunks to the spare list (or frees them). */
static void
chunks_recycle(Store *s, Chunk *chunks)
{
    Chunk *drop = NULL, *next;

    pthread_mutex_lock(&s->mu);
    for (Chunk *c = chunks; c; c = next) {
        next = c->next;
        c->len = 0;
        c->nrec = 0;
        if (s->nspare < CHUNK_SPARE_MAX && c->cap <= CHUNK_KEEP_MAX) {
            c->next = s->spare;
            s->spare = c;
            s->nspare++;
        } else {
            c->next = drop;
            drop = c;
        }
    }
    pthread_mutex_unlock(&s->mu);
    chunk_list_free(drop);
}

static int
any_dirty(const Store *s)
{
    for (int i = 0; i < s->nshards; i++)
        if (s->shard[i].dirty) return 1;
    return 0;
}

/* Group commit gathering (STORE_SYNC_ALWAYS, mu held, something queued).
 * Clients whose replies the previous sync released answer with their next
 * commands a round trip later; starting the next sync before they arrive
 * would leave them for the sync after, halving what each sync carries. So
 * wait until as many records are queued as the previous group had (or, when
 * splitting, as a half-crowd has, if fewer), but at most half the latest
 * sync time (capped at GATHER_MAX_NS): a lone client never waits (its group
 * had one record), a crowd fills each group. */
#define GATHER_MAX_NS 500000
static void
mut_gather(Store *s)
{
    uint64_t target = s->prev_records;
    uint64_t split = atomic_load_explicit(&s->split_nrec, memory_order_relaxed);
    if (split < target) target = split;
    uint64_t wait = s->last_sync_dur / 2;
    if (wait > GATHER_MAX_NS) wait = GATHER_MAX_NS;
    int64_t deadline = util_now_ns() + (int64_t)wait;
    struct timespec ts = {deadline / 1000000000, deadline % 1000000000};

    s->wake_at_nrec = target;
    s->sleeping = 1;
    while (!s->stop && s->queued_nrec < target) {
        if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) == ETIMEDOUT) break;
    }
    s->sleeping = 0;
}

/* Group splitting (STORE_SYNC_ALWAYS). Clients that each wait for their
 * reply come back as a crowd: in one group, the loop's work for the crowd
 * (replies out, next commands in) and the fsync take turns, and each waits
 * for the other. Split into two halves, one half is committed while the
 * loop serves the other, at the price of two fsyncs per round. Measured on
 * 2 cores (put, 100-byte jobs, clients waiting for each reply): a net gain
 * from about 10 clients on (up to 1.5x at 20), a loss at 2-4 clients, so
 * crowds under SPLIT_MIN records are not split. Consumers are not split
 * either: a delete comes after a reserve, so the loop does about twice the
 * work per record, the loop's half then outlasts the fsync, and the second
 * fsync's CPU (~130 us of kernel time per sync in this VM) is missed on 2
 * cores: splitting lost 9% on drain (reserve + delete) and 6% on cycle
 * (half puts). So only groups of at least SPLIT_PUT_PCT percent puts (the
 * previous group's share) are split. The crowd is the most records found
 * in flight at a hand-off since the previous group; the estimate follows a
 * rise at once and a fall slowly. */
#define SPLIT_MIN 12
#define SPLIT_PUT_PCT 75
static void
split_update(Store *s) /* mu held */
{
    uint64_t seen = s->inflight_peak;

    s->inflight_peak = 0;
    s->crowd = seen > s->crowd ? seen : s->crowd - s->crowd / 64;
    int split = s->crowd >= SPLIT_MIN &&
                s->prev_puts * 100 >= s->prev_records * SPLIT_PUT_PCT;
    atomic_store_explicit(&s->split_nrec,
                          split ? (s->crowd + 1) / 2 : UINT64_MAX,
                          memory_order_relaxed);
}

/* Cuts c after its first n records (0 < n < c->nrec): the rest moves to a
 * new chunk linked after c. */
static void
chunk_split(Chunk *c, size_t n)
{
    size_t off = 0;
    for (size_t i = 0; i < n; i++)
        off += enc_rec_len(c->p + off);
    Chunk *t = util_xrealloc(NULL, sizeof *t);
    *t = (Chunk){.next = c->next, .len = c->len - off, .nrec = c->nrec - n};
    t->cap = t->len;
    t->p = util_xrealloc(NULL, t->cap);
    memcpy(t->p, c->p + off, t->len);
    c->len = off;
    c->nrec = n;
    c->next = t;
}

/* Unlinks and returns the queue's first max records or fewer (mu held). */
static Chunk *
queue_take(Store *s, uint64_t max)
{
    Chunk *head = s->queue, **tail = &s->queue;
    uint64_t took = 0;

    while (*tail && took < max) {
        Chunk *c = *tail;
        if (took + c->nrec > max) {
            chunk_split(c, (size_t)(max - took));
            if (s->queue_tail == &c->next) s->queue_tail = &c->next->next;
        }
        took += c->nrec;
        tail = &c->next;
    }
    s->queue = *tail;
    *tail = NULL;
    if (!s->queue) s->queue_tail = &s->queue;
    s->queued_nrec -= took;
    return head;
}

/* Waits for queued chunks, a stop request, or (STORE_SYNC_INTERVAL with
 * unsynced writes) the next sync deadline. Returns the queue, or its first
 * split_nrec records when splitting. *stop: stop asked and nothing left. */
static Chunk *
mut_wait(Store *s, int *stop)
{
    int timed = s->cfg.sync_mode == STORE_SYNC_INTERVAL && any_dirty(s);
    int64_t deadline =
        s->last_sync_mono + (int64_t)s->cfg.sync_interval_ms * 1000000;
    struct timespec ts = {deadline / 1000000000, deadline % 1000000000};

    pthread_mutex_lock(&s->mu);
    if (s->cfg.sync_mode == STORE_SYNC_ALWAYS) split_update(s);
    s->wake_at_nrec = 1;
    s->sleeping = 1;
    while (!s->queue && !s->stop) {
        if (!timed) {
            pthread_cond_wait(&s->cv, &s->mu);
        } else if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) == ETIMEDOUT) {
            break;
        }
    }
    s->sleeping = 0;
    if (s->queue && s->cfg.sync_mode == STORE_SYNC_ALWAYS) mut_gather(s);
    Chunk *c = queue_take(
        s, atomic_load_explicit(&s->split_nrec, memory_order_relaxed));
    *stop = s->stop && !s->queue;
    pthread_mutex_unlock(&s->mu);
    return c;
}

/* STORE_SYNC_INTERVAL: fsyncs the dirty shards once the interval has passed
 * since the last sync. */
static void
mut_interval_sync(Store *s)
{
    int64_t due =
        s->last_sync_mono + (int64_t)s->cfg.sync_interval_ms * 1000000;

    if (mut_is_failed(s) || !any_dirty(s) || util_now_ns() < due) return;
    /* Each shard's syncer thread fsyncs its WAL while this thread goes on
     * writing and acknowledging: a slow fsync never stalls replies. A shard
     * whose previous sync still runs stays dirty for the next round. */
    for (int i = 0; i < s->nshards; i++) {
        Shard *sh = &s->shard[i];
        Syncer *y = &sh->syncer;
        if (!sh->dirty) continue;
        pthread_mutex_lock(&y->mu);
        if (!y->busy) {
            y->busy = 1;
            y->done = 0;
            y->req = 1;
            pthread_cond_broadcast(&y->cv);
            sh->dirty = 0;
        }
        pthread_mutex_unlock(&y->mu);
    }
    s->last_sync_mono = util_now_ns();
}

/* Waits until no asynchronous (interval) sync is running. */
static void
async_syncs_wait(Store *s)
{
    for (int i = 0; i < s->nshards; i++) {
        Syncer *y = &s->shard[i].syncer;
        if (!y->started || !y->async) continue;
        pthread_mutex_lock(&y->mu);
        while (y->busy)
            pthread_cond_wait(&y->cv, &y->mu);
        pthread_mutex_unlock(&y->mu);
    }
}

/* On stop: one fsync of every shard, whatever the mode. */
static void
mut_final_sync(Store *s)
{
    async_syncs_wait(s);
    if (mut_is_failed(s)) return;
    uint64_t w = atomic_load_explicit(&s->written_seq, memory_order_relaxed);
    int rc = 0;
    for (int i = 0; i < s->nshards; i++) {
        char *msg = NULL;
        uint64_t ns;
        Shard *sh = &s->shard[i];
        if (sh->syncer.async) { /* its syncer only does async work: here */
            if (sync_here(s, sh, &msg, &ns) < 0) {
                mut_fail(s, "WAL sync of", i, msg);
                rc = -1;
            } else {
                free(msg);
            }
            stat_sync(s, ns);
        } else {
            sh->dirty = 1;
        }
    }
    if (rc == 0 && sync_dirty(s) == 0)
        atomic_store_explicit(&s->durable_seq, w, memory_order_release);
}

static void *
mut_main(void *arg)
{
    Store *s = arg;
    int stop = 0;

    for (;;) {
        Chunk *group = mut_wait(s, &stop);
        if (group) {
            mut_group(s, group);
            chunks_recycle(s, group);
        }
        if (s->cfg.sync_mode == STORE_SYNC_INTERVAL) mut_interval_sync(s);
        if (stop && !group) break;
    }
    mut_final_sync(s);
    return NULL;
}

/* ---- lifecycle ---- */

static Store *
store_alloc(const StoreConfig *cfg)
{
    Store *s = calloc(1, sizeof *s);
    pthread_condattr_t ca;

    if (!s || !(s->dir = strdup(cfg->dir))) {
        free(s);
        return NULL;
    }
    s->cfg = *cfg;
    atomic_init(&s->split_nrec, UINT64_MAX);
    s->cfg.dir = s->dir;
    s->lock_fd = -1;
    s->queue_tail = &s->queue;
    pthread_mutex_init(&s->mu, NULL);
    /* Interval deadlines are on the monotonic clock. */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cv, &ca);
    pthread_condattr_destroy(&ca);
    for (int i = 0; i < STORE_SHARDS_MAX; i++) {
        pthread_mutex_init(&s->shard[i].syncer.mu, NULL);
        pthread_cond_init(&s->shard[i].syncer.cv, NULL);
    }
    s->last_sync_mono = util_now_ns();
    return s;
}

static void
shard_close(Shard *sh)
{
    for (int i = 0; i < CF_COUNT; i++) {
        if (sh->cf[i]) rocksdb_column_family_handle_destroy(sh->cf[i]);
    }
    if (sh->db) rocksdb_close(sh->db);
    if (sh->batch) rocksdb_writebatch_destroy(sh->batch);
}

static void
options_destroy(Store *s)
{
    for (int i = 0; i < CF_COUNT; i++) {
        if (s->cfopt[i]) rocksdb_options_destroy(s->cfopt[i]);
    }
    if (s->dbopt) rocksdb_options_destroy(s->dbopt);
    if (s->bbto) rocksdb_block_based_options_destroy(s->bbto);
    if (s->cache) rocksdb_cache_destroy(s->cache);
    if (s->wo_sync) rocksdb_writeoptions_destroy(s->wo_sync);
    if (s->wo_nosync) rocksdb_writeoptions_destroy(s->wo_nosync);
    if (s->ro) rocksdb_readoptions_destroy(s->ro);
}

/* Frees everything of s that exists; the mutation thread must be gone. */
static void
store_free(Store *s)
{
    syncers_stop(s);
    for (int i = 0; i < STORE_SHARDS_MAX; i++) {
        shard_close(&s->shard[i]);
        pthread_mutex_destroy(&s->shard[i].syncer.mu);
        pthread_cond_destroy(&s->shard[i].syncer.cv);
    }
    options_destroy(s);
    if (s->cur) chunk_free(s->cur);
    chunk_list_free(s->queue);
    chunk_list_free(s->spare);
    free(s->fault.hold_path);
    if (s->lock_fd >= 0) close(s->lock_fd); /* releases the flock */
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s->dir);
    free(s);
}

static int
config_check(const StoreConfig *cfg, char *err, size_t errcap)
{
    if (!cfg->dir || !*cfg->dir)
        return util_fail(err, errcap, "no data directory");
    if (cfg->nshards < 0 || cfg->nshards > STORE_SHARDS_MAX)
        return util_fail(err, errcap, "shard count %d out of range 1..%d",
                         cfg->nshards, STORE_SHARDS_MAX);
    if (cfg->sync_mode != STORE_SYNC_ALWAYS &&
        cfg->sync_mode != STORE_SYNC_INTERVAL &&
        cfg->sync_mode != STORE_SYNC_NEVER)
        return util_fail(err, errcap, "bad sync mode %d", (int)cfg->sync_mode);
    if (cfg->sync_mode == STORE_SYNC_INTERVAL && cfg->sync_interval_ms <= 0)
        return util_fail(err, errcap, "sync interval must be > 0 ms");
    return 0;
}

int
store_open(const StoreConfig *cfg, Store **out, char *err, size_t errcap)
{
    Store *s;

    *out = NULL;
    if (config_check(cfg, err, errcap) < 0) return -1;
    if (!(s = store_alloc(cfg))) return util_fail(err, errcap, "out of memory");
    if (io_setup(s, err, errcap) < 0 || dir_prepare(s, err, errcap) < 0 ||
        lock_take(s, err, errcap) < 0 ||
        format_check(s, cfg->nshards, err, errcap) < 0)
        goto bad;
    options_create(s);
    for (int i = 0; i < s->nshards; i++) {
        if (shard_open(s, i, err, errcap) < 0) goto bad;
    }
    *out = s;
    return 0;
bad:
    store_free(s);
    return -1;
}

/* Calls cb for each job of one shard, front to back; tracks the top id. */
static int
recover_iter(Shard *sh, rocksdb_iterator_t *it,
             int (*cb)(void *ctx, const StoreJob *job), void *ctx,
             uint64_t *max_id, char *err, size_t errcap)
{
    StoreJob job;
    size_t klen, vlen;

    for (rocksdb_iter_seek_to_first(it); rocksdb_iter_valid(it);
         rocksdb_iter_next(it)) {
        const char *k = rocksdb_iter_key(it, &klen);
        const char *v = rocksdb_iter_value(it, &vlen);
        if (klen != 8)
            return util_fail(err, errcap, "shard-%02d: meta key of %zu bytes",
                             sh->index, klen);
        uint64_t id = enc_key_get(k);
        if (store_shard_of(id, sh->s->nshards) != sh->index)
            return util_fail(err, errcap,
                             "shard-%02d holds job %" PRIu64
                             " of another shard",
                             sh->index, id);
        if (store_meta_decode(id, (const unsigned char *)v, vlen, &job) < 0)
            return util_fail(err, errcap,
                             "shard-%02d: job %" PRIu64
                             ": malformed metadata (%zu bytes)",
                             sh->index, id, vlen);
        if (cb(ctx, &job) < 0)
            return util_fail(err, errcap, "recovery stopped at job %" PRIu64,
                             id);
        if (id > *max_id) *max_id = id;
    }
    char *e = NULL;
    rocksdb_iter_get_error(it, &e);
    if (e) {
        util_fail(err, errcap, "shard-%02d: scan: %s", sh->index, e);
        rocksdb_free(e);
        return -1;
    }
    return 0;
}

static int
recover_shard(Shard *sh, int (*cb)(void *ctx, const StoreJob *job), void *ctx,
              uint64_t *max_id, char *err, size_t errcap)
{
    /* Above every 8-byte key; the bound stops Next() at the end of the
     * meta keys without a trip through what lies beyond. */
    static const char upper[9] = {'\xff', '\xff', '\xff', '\xff', '\xff',
                                  '\xff', '\xff', '\xff', '\0'};
    rocksdb_readoptions_t *ro = rocksdb_readoptions_create();

    rocksdb_readoptions_set_fill_cache(ro, 0); /* one pass: do not evict */
    rocksdb_readoptions_set_readahead_size(ro, RECOVER_READAHEAD);
    rocksdb_readoptions_set_iterate_upper_bound(ro, upper, sizeof upper);
    rocksdb_iterator_t *it =
        rocksdb_create_iterator_cf(sh->db, ro, sh->cf[CF_META]);
    int rc = recover_iter(sh, it, cb, ctx, max_id, err, errcap);
    rocksdb_iter_destroy(it);
    rocksdb_readoptions_destroy(ro);
    return rc;
}

int
store_recover(Store *s, int (*cb)(void *ctx, const StoreJob *job), void *ctx,
              uint64_t *next_id, char *err, size_t errcap)
{
    uint64_t top = 0;

    for (int i = 0; i < s->nshards; i++) {
        if (recover_shard(&s->shard[i], cb, ctx, &top, err, errcap) < 0)
            return -1;
        if (s->shard[i].hwm > top) top = s->shard[i].hwm;
    }
    *next_id = top + 1;
    return 0;
}

int
store_start(Store *s, char *err, size_t errcap)
{
    if (s->started) return util_fail(err, errcap, "store already started");
    s->last_sync_mono = util_now_ns();
    if (syncers_start(s, err, errcap) < 0) {
        syncers_stop(s);
        return -1;
    }
    int e = pthread_create(&s->thread, NULL, mut_main, s);
    if (e) {
        syncers_stop(s);
        return util_fail(err, errcap, "pthread_create: %s", strerror(e));
    }
    s->started = 1;
    return 0;
}

int
store_close(Store *s, char *err, size_t errcap)
{
    int rc = 0;

    store_flush(s);
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (s->started)
        pthread_join(s->thread, NULL);
    else
        mut_main(s); /* never started: drain and sync on this thread */
    if (store_failed(s, NULL, 0)) rc = util_fail(err, errcap, "%s", s->failmsg);
    store_free(s);
    return rc;
}
