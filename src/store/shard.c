/* store/shard.c - a shard's RocksDB instance, options and reads (see
 * store/shard.h). */
#include "store/shard.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/enc.h"
#include "store/merge.h"
#include "store/util.h"

static const char *const cf_names[SHARD_CF_COUNT] = {"default", "meta", "body",
                                                     "ring"};

/* RocksDB sizing (option meanings: rocksdb/options.h). One LRU block cache is
 * shared by every shard. The meta CF holds small, often rewritten and deleted
 * records; the body CF large write-once ones; the default CF only three keys,
 * so a small memtable lets it flush often instead of pinning old WAL files.
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
#define RING_WRITE_BUFFER ((size_t)4 << 20)
#define MAX_TOTAL_WAL ((uint64_t)256 << 20)
/* Raft log mode: the MANIFEST is rolled over (rewritten whole) once it
 * passes this size, so that shard_flush's checkpoint copies little. */
#define RAFT_MANIFEST_MAX ((uint64_t)4 << 20)
/* Compact-on-deletion collector: an SST whose any window of 16384 entries
 * holds 8192 deletes is queued for compaction, so tombstones left by long
 * lived jobs do not slow the recovery scan for ever. */
#define DEL_WINDOW 16384
#define DEL_TRIGGER 8192
/* Moves a RocksDB error (malloc'd by RocksDB) into *errmsg (freed by the
 * store with free()). Returns 0 if there was none, else -1. */
int
shard_take_err(char *e, char **errmsg)
{
    if (!e) return 0;
    *errmsg = strdup(e);
    rocksdb_free(e);
    if (!*errmsg) abort();
    return -1;
}

static int
rocks_write(void *ctx, void *db, void *batch, int sync, char **errmsg)
{
    ShardOpts *o = ctx;
    char *e = NULL;

    rocksdb_write(db,
                  sync          ? o->wo_sync
                  : o->raft_log ? o->wo_nowal
                                : o->wo_nosync,
                  batch, &e);
    return shard_take_err(e, errmsg);
}

static int
rocks_sync(void *ctx, void *db, char **errmsg)
{
    char *e = NULL;

    (void)ctx;
    rocksdb_flush_wal(db, 1, &e); /* DB::FlushWAL(sync=true) = SyncWAL */
    return shard_take_err(e, errmsg);
}

/* Runs RocksDB's flush and compaction threads (the process-wide pools of
 * the default Env, shared by every shard) at the lowest CPU priority, nice
 * 19 (rocksdb/env.h, Env::LowerThreadPoolCPUPriority; a thread applies it at
 * its next job). A memtable flush of the body CF (32 MiB of bodies: block
 * copies and Snappy) keeps a core busy for ~15 ms; at the mutation thread's
 * and the loop's priority it takes their core on a 2-core machine: beside
 * 8 x 256 KiB producers (bench row bigsmall) 90-96% of the small puts
 * acknowledged 3 ms or later fell inside a flush, which covered 27-37% of
 * the time (measured before ring bodies stopped going to the body CF,
 * store/bodyheld.h). What waits on a flush: the applier's writes (a write
 * stall; off the acknowledgement path).
 * bigsmall, 3 s cells, 10 alternated pairs, 2 CPUs, server at nice -10: the
 * small put's p99 median 2.09 ms (1.66-2.51; 4.75 in one cell run beside
 * another session's load) against 2.67 (2.01-4.88), lower in 9 of 10 pairs; the
 * large producers 557 MiB/s beside it against 530 (alone 2596 puts/s against
 * 2281, so their "kept" ratio fell, 0.86x against 0.98x median).
 * bytes_per_sync, wal_bytes_per_sync (1 MiB) and a 50 MiB/s rate limiter made
 * no difference: the flush writes ~1.6 MiB (Snappy) and the device was no
 * busier when acks were slow. */
static void
lower_pool_priority(void)
{
    rocksdb_env_t *env = rocksdb_create_default_env(); /* Env::Default */
    rocksdb_env_lower_high_priority_thread_pool_cpu_priority(env); /* flush */
    rocksdb_env_lower_thread_pool_cpu_priority(env); /* compaction */
    rocksdb_env_destroy(env); /* frees the handle, not Env::Default */
}

void
shard_opts_create(ShardOpts *o, int raft_log)
{
    static const size_t wbuf[SHARD_CF_COUNT] = {
        DEFAULT_WRITE_BUFFER, META_WRITE_BUFFER, BODY_WRITE_BUFFER,
        RING_WRITE_BUFFER};

    o->cache = rocksdb_cache_create_lru(BLOCK_CACHE_BYTES);
    o->bbto = rocksdb_block_based_options_create();
    rocksdb_block_based_options_set_block_cache(o->bbto, o->cache);

    o->dbopt = rocksdb_options_create();
    rocksdb_options_set_create_if_missing(o->dbopt, 1);
    rocksdb_options_set_create_missing_column_families(o->dbopt, 1);
    /* Replay the WAL up to the first corrupt record: a consistent prefix. */
    rocksdb_options_set_wal_recovery_mode(o->dbopt,
                                          rocksdb_point_in_time_recovery);
    rocksdb_options_set_max_background_jobs(o->dbopt, 2);
    /* Keep every SST open: no table-cache misses, and range tombstones
     * stay cheap to read (rocksdb/options.h, max_open_files). */
    rocksdb_options_set_max_open_files(o->dbopt, -1);
    rocksdb_options_set_max_total_wal_size(o->dbopt, MAX_TOTAL_WAL);
    rocksdb_options_set_keep_log_file_num(o->dbopt, 4); /* info LOG files */
    /* Raft log mode writes without the WAL: a flush of one column family
     * is then a flush of all of them, recorded in the MANIFEST all or
     * nothing, so that the table files always hold one prefix of the
     * writes, each batch whole (rocksdb/options.h, atomic_flush). */
    o->raft_log = raft_log;
    if (raft_log) {
        rocksdb_options_set_atomic_flush(o->dbopt, 1);
        rocksdb_options_set_max_manifest_file_size(o->dbopt, RAFT_MANIFEST_MAX);
    }

    lower_pool_priority();
    for (int i = 0; i < SHARD_CF_COUNT; i++) {
        o->cfopt[i] = rocksdb_options_create();
        rocksdb_options_set_block_based_table_factory(o->cfopt[i], o->bbto);
        rocksdb_options_set_write_buffer_size(o->cfopt[i], wbuf[i]);
    }
    rocksdb_options_add_compact_on_deletion_collector_factory(
        o->cfopt[SHARD_CF_META], DEL_WINDOW, DEL_TRIGGER);
    /* Updates of inline bodies are Merges; the options own the operator. */
    rocksdb_options_set_merge_operator(o->cfopt[SHARD_CF_META],
                                       store_merge_create());

    o->wo_sync = rocksdb_writeoptions_create();
    rocksdb_writeoptions_set_sync(o->wo_sync, 1);
    o->wo_nosync = rocksdb_writeoptions_create();
    o->wo_nowal = rocksdb_writeoptions_create();
    rocksdb_writeoptions_disable_WAL(o->wo_nowal, 1);
    o->fo = rocksdb_flushoptions_create();
    rocksdb_flushoptions_set_wait(o->fo, 1);
    o->ro = rocksdb_readoptions_create();
}

/* Reads key from sh's default CF into buf (exactly len bytes). Returns 1 if
 * found, 0 if absent, -1 on error or a wrong length. */
static int
header_get(StoreShard *sh, const char *key, unsigned char *buf, size_t len,
           char *err, size_t errcap)
{
    size_t vlen = 0;
    char *e = NULL;
    char *v = rocksdb_get_cf(sh->db, sh->opt->ro, sh->cf[SHARD_CF_DEFAULT], key,
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
header_create(StoreShard *sh, char *err, size_t errcap)
{
    unsigned char fmt[4], idx[8];
    char *e = NULL;
    rocksdb_writebatch_t *b = rocksdb_writebatch_create();

    le_put32(fmt, STORE_FORMAT_VERSION);
    le_put32(idx, (uint32_t)sh->index);
    le_put32(idx + 4, (uint32_t)sh->nshards);
    rocksdb_writebatch_put_cf(b, sh->cf[SHARD_CF_DEFAULT], "format", 6,
                              (const char *)fmt, 4);
    rocksdb_writebatch_put_cf(b, sh->cf[SHARD_CF_DEFAULT], "shard", 5,
                              (const char *)idx, 8);
    rocksdb_write(sh->db, sh->opt->wo_sync, b, &e);
    rocksdb_writebatch_destroy(b);
    if (e) {
        util_fail(err, errcap, "shard-%02d: write header: %s", sh->index, e);
        rocksdb_free(e);
        return -1;
    }
    return 0;
}

/* Checks an existing shard's header (or creates it) and loads next_id,
 * jgroup and raft_applied. */
static int
header_check(StoreShard *sh, const char *dir, char *err, size_t errcap)
{
    unsigned char fmt[4], idx[8], nid[8];
    int r = header_get(sh, "format", fmt, 4, err, errcap);

    if (r < 0) return -1;
    if (r == 0) return header_create(sh, err, errcap);
    uint32_t v = le_get32(fmt);
    if (v == 0 || v > STORE_FORMAT_VERSION)
        return util_fail(err, errcap,
                         "shard-%02d has format version %" PRIu32
                         "; this rockstalkd reads version %d",
                         sh->index, v, STORE_FORMAT_VERSION);
    if ((r = header_get(sh, "shard", idx, 8, err, errcap)) <= 0)
        return r < 0 ? -1
                     : util_fail(err, errcap, "shard-%02d: no shard key",
                                 sh->index);
    if (le_get32(idx) != (uint32_t)sh->index ||
        le_get32(idx + 4) != (uint32_t)sh->nshards)
        return util_fail(err, errcap,
                         "shard-%02d of %s says it is shard %" PRIu32
                         " of %" PRIu32 ", expected %d of %d",
                         sh->index, dir, le_get32(idx), le_get32(idx + 4),
                         sh->index, sh->nshards);
    if ((r = header_get(sh, "next_id", nid, 8, err, errcap)) < 0) return -1;
    sh->hwm = r ? le_get64(nid) : 0;
    if ((r = header_get(sh, "jgroup", nid, 8, err, errcap)) < 0) return -1;
    sh->jgroup = r ? le_get64(nid) : 0;
    if ((r = header_get(sh, "raft_applied", nid, 8, err, errcap)) < 0)
        return -1;
    sh->raft_applied = r ? le_get64(nid) : 0;
    if ((r = header_get(sh, "restoring", nid, 8, err, errcap)) < 0) return -1;
    if (r) sh->raft_applied = 0; /* a snapshot was being received: again */
    sh->restoring = r;
    return 0;
}

int
shard_open(StoreShard *sh, const ShardOpts *o, const char *dir, int index,
           int nshards, char *err, size_t errcap)
{
    char path[4096];
    char *e = NULL;
    int n = snprintf(path, sizeof path, "%s/shard-%02d", dir, index);

    sh->opt = o;
    sh->index = index;
    sh->nshards = nshards;
    if (n < 0 || (size_t)n >= sizeof path)
        return util_fail(err, errcap, "path too long: %s/shard-%02d", dir,
                         index);
    if (!(sh->path = strdup(path))) abort();
    sh->db = rocksdb_open_column_families(
        o->dbopt, path, SHARD_CF_COUNT, (const char *const *)cf_names,
        (const rocksdb_options_t *const *)o->cfopt, sh->cf, &e);
    if (e) {
        sh->db = NULL;
        util_fail(err, errcap, "open %s: %s", path, e);
        rocksdb_free(e);
        return -1;
    }
    return header_check(sh, dir, err, errcap);
}

StoreIO
shard_rocks_io(ShardOpts *o)
{
    return (StoreIO){.write = rocks_write, .sync = rocks_sync, .ctx = o};
}

/* The body held by value v (vlen bytes) of column family cf: the whole
 * value in the body CF, the bytes after the meta of an inline body
 * (STORE_F_INLINE) in the meta CF. Returns 0 if the value holds none. */
static int
value_body(int cf, const char *v, size_t vlen, const char **body, size_t *len)
{
    if (cf == SHARD_CF_BODY) {
        *body = v;
        *len = vlen;
        return 1;
    }
    size_t ml;
    if (!store_meta_inline((const unsigned char *)v, vlen, &ml)) return 0;
    *body = v + ml;
    *len = vlen - ml;
    return 1;
}

/* A malloc'd copy of len bytes at v into *out; -1 if out of memory. */
static int
copy_body(const char *v, size_t len, char **out)
{
    if (!(*out = malloc(len ? len : 1))) return -1;
    memcpy(*out, v, len);
    return 0;
}

/* shard_get_body in column family cf. */
static int
get_body_cf(const StoreShard *sh, int cf, uint64_t id, char **body, size_t *len,
            char *err, size_t errcap)
{
    char key[8], *e = NULL;
    const char *b;
    size_t vlen = 0;

    enc_key_put(key, id);
    rocksdb_pinnableslice_t *ps =
        rocksdb_get_pinned_cf(sh->db, sh->opt->ro, sh->cf[cf], key, 8, &e);
    if (e) {
        util_fail(err, errcap, "read body of job %" PRIu64 ": %s", id, e);
        rocksdb_free(e);
        return -1;
    }
    if (!ps) return 0;
    const char *v = rocksdb_pinnableslice_value(ps, &vlen);
    int found = value_body(cf, v, vlen, &b, len);
    int rc = found && copy_body(b, *len, body) < 0 ? -1 : found;
    rocksdb_pinnableslice_destroy(ps);
    if (rc < 0)
        return util_fail(err, errcap, "out of memory reading job %" PRIu64, id);
    return rc;
}

/* Reads go straight to RocksDB, which is safe next to the mutation thread's
 * writes; a job whose put is not written yet is simply not found. A body is
 * in the body column family, or inline in the meta column family. */
int
shard_get_body(const StoreShard *sh, uint64_t id, char **body, size_t *len,
               char *err, size_t errcap)
{
    int rc = get_body_cf(sh, SHARD_CF_BODY, id, body, len, err, errcap);

    if (rc) return rc;
    return get_body_cf(sh, SHARD_CF_META, id, body, len, err, errcap);
}

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

/* Whether ids[i] is this shard's and its body is still to be read. */
static int
wanted(const StoreShard *sh, const uint64_t *ids, char **bodies, size_t i)
{
    return !bodies[i] && store_shard_of(ids[i], sh->nshards) == sh->index;
}

/* The bodies still wanted among ids[0..n) in column family cf, by stepping
 * one iterator. */
static int
iter_bodies(const StoreShard *sh, int cf, const uint64_t *ids, size_t n,
            char **bodies, size_t *lens, char *err, size_t errcap)
{
    rocksdb_iterator_t *it =
        rocksdb_create_iterator_cf(sh->db, sh->opt->ro, sh->cf[cf]);
    char *e = NULL;
    int fresh = 1;

    for (size_t i = 0; i < n; i++) {
        if (!wanted(sh, ids, bodies, i)) continue;
        if (!iter_goto(it, ids[i], fresh)) {
            fresh = !rocksdb_iter_valid(it);
            continue;
        }
        fresh = 0;
        size_t vlen;
        const char *v = rocksdb_iter_value(it, &vlen), *b;
        if (value_body(cf, v, vlen, &b, &lens[i]) &&
            copy_body(b, lens[i], &bodies[i]) < 0)
            break;
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

/* Reads the bodies of shard sh among ids[0..n) (ascending), first from the
 * body column family, then what was not there from the meta column
 * family's inline bodies: one lookup each when they are few (an iterator
 * costs more to set up than a Get), else by stepping one iterator. */
int
shard_get_bodies(const StoreShard *sh, const uint64_t *ids, size_t n,
                 char **bodies, size_t *lens, char *err, size_t errcap)
{
    static const int cfs[2] = {SHARD_CF_BODY, SHARD_CF_META};

    for (int c = 0; c < 2; c++) {
        size_t want = 0;
        for (size_t i = 0; i < n; i++)
            want += wanted(sh, ids, bodies, i);
        for (size_t i = 0; want <= FEW_GETS && i < n; i++) {
            if (wanted(sh, ids, bodies, i) &&
                get_body_cf(sh, cfs[c], ids[i], &bodies[i], &lens[i], err,
                            errcap) < 0)
                return -1;
        }
        if (want > FEW_GETS &&
            iter_bodies(sh, cfs[c], ids, n, bodies, lens, err, errcap) < 0)
            return -1;
    }
    return 0;
}

int
shard_get_ring_ref(const StoreShard *sh, uint64_t id, StoreRingRef *ref,
                   char *err, size_t errcap)
{
    char key[ENC_KEY_LEN], *e = NULL;
    size_t vlen = 0;

    enc_key_put(key, id);
    rocksdb_pinnableslice_t *ps = rocksdb_get_pinned_cf(
        sh->db, sh->opt->ro, sh->cf[SHARD_CF_RING], key, ENC_KEY_LEN, &e);
    if (e) {
        util_fail(err, errcap, "read ring reference of job %" PRIu64 ": %s", id,
                  e);
        rocksdb_free(e);
        return -1;
    }
    if (!ps) return 0;
    const char *v = rocksdb_pinnableslice_value(ps, &vlen);
    if (vlen == ENC_RING_REF) *ref = enc_ring_ref_get((const unsigned char *)v);
    rocksdb_pinnableslice_destroy(ps);
    if (vlen != ENC_RING_REF)
        return util_fail(err, errcap,
                         "job %" PRIu64 "'s ring reference has %zu bytes", id,
                         vlen);
    return 1;
}

int
shard_has_body(const StoreShard *sh, const char *key)
{
    char *e = NULL;
    rocksdb_pinnableslice_t *ps = rocksdb_get_pinned_cf(
        sh->db, sh->opt->ro, sh->cf[SHARD_CF_BODY], key, ENC_KEY_LEN, &e);

    if (e) {
        rocksdb_free(e);
        return -1;
    }
    if (!ps) return 0;
    rocksdb_pinnableslice_destroy(ps);
    return 1;
}

/* Moves "what path: strerror(errno)" into *errmsg (malloc'd). Returns
 * -1. */
static int
errno_msg(const char *what, const char *path, char **errmsg)
{
    char m[4200];

    snprintf(m, sizeof m, "%s %s: %s", what, path, strerror(errno));
    if (!(*errmsg = strdup(m))) abort();
    return -1;
}

/* Removes directory path and the files in it (a checkpoint has no
 * subdirectories); a missing one is no error. Returns 0, or -1 with
 * *errmsg (malloc'd). */
static int
remove_flat(const char *path, char **errmsg)
{
    DIR *d = opendir(path);
    const struct dirent *de;
    char f[4200];

    if (!d) return errno == ENOENT ? 0 : errno_msg("opendir", path, errmsg);
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        snprintf(f, sizeof f, "%s/%s", path, de->d_name);
        if (unlink(f) < 0 && errno != ENOENT) {
            closedir(d);
            return errno_msg("unlink", f, errmsg);
        }
    }
    closedir(d);
    if (rmdir(path) < 0 && errno != ENOENT)
        return errno_msg("rmdir", path, errmsg);
    return 0;
}

/* RocksDB 7.8's C API flushes one column family at a time (rocksdb_flush_cf;
 * with atomic_flush, that one alone). The one call that flushes them all
 * at once is the checkpoint's (Checkpoint::CreateCheckpoint with
 * log_size_for_flush 0: GetLiveFilesStorageInfo flushes every column
 * family, atomically under atomic_flush, and waits), so shard_flush takes
 * a checkpoint beside the shard (hard links of its table files, a copy of
 * its MANIFEST) and removes it. */
int
shard_flush(const StoreShard *sh, char **errmsg)
{
    char dir[4200], tmp[4200];
    char *e = NULL;

    snprintf(dir, sizeof dir, "%s.flush", sh->path);
    snprintf(tmp, sizeof tmp, "%s.flush.tmp", sh->path); /* RocksDB's own */
    if (remove_flat(dir, errmsg) < 0 || remove_flat(tmp, errmsg) < 0) return -1;
    rocksdb_checkpoint_t *ck = rocksdb_checkpoint_object_create(sh->db, &e);
    if (!e) rocksdb_checkpoint_create(ck, dir, 0, &e);
    if (ck) rocksdb_checkpoint_object_destroy(ck);
    if (shard_take_err(e, errmsg) < 0) return -1;
    return remove_flat(dir, errmsg);
}

void
shard_close(StoreShard *sh)
{
    for (int i = 0; i < SHARD_CF_COUNT; i++) {
        if (sh->cf[i]) rocksdb_column_family_handle_destroy(sh->cf[i]);
        sh->cf[i] = NULL;
    }
    if (sh->db) rocksdb_close(sh->db);
    sh->db = NULL;
    free(sh->path);
    sh->path = NULL;
}

void
shard_opts_destroy(ShardOpts *o)
{
    for (int i = 0; i < SHARD_CF_COUNT; i++) {
        if (o->cfopt[i]) rocksdb_options_destroy(o->cfopt[i]);
    }
    if (o->dbopt) rocksdb_options_destroy(o->dbopt);
    if (o->bbto) rocksdb_block_based_options_destroy(o->bbto);
    if (o->cache) rocksdb_cache_destroy(o->cache);
    if (o->wo_sync) rocksdb_writeoptions_destroy(o->wo_sync);
    if (o->wo_nosync) rocksdb_writeoptions_destroy(o->wo_nosync);
    if (o->wo_nowal) rocksdb_writeoptions_destroy(o->wo_nowal);
    if (o->fo) rocksdb_flushoptions_destroy(o->fo);
    if (o->ro) rocksdb_readoptions_destroy(o->ro);
}
