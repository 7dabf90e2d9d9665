/* store/idle.c - the rest round (see store/idle.h). */
#include "store/idle.h"

#include <stdlib.h>

void
idle_init(IdleFlush *f)
{
    f->fo = rocksdb_flushoptions_create();
    rocksdb_flushoptions_set_wait(f->fo, 0);
    atomic_store(&f->rest_bytes, UINT64_MAX);
}

void
idle_destroy(IdleFlush *f)
{
    if (f->fo) rocksdb_flushoptions_destroy(f->fo);
    f->fo = NULL;
}

int64_t
idle_deadline(const IdleFlush *f)
{
    if (f->waiting) return f->next_poll;
    if (f->armed) return f->quiet_from + IDLE_QUIET_NS;
    return INT64_MAX;
}

/* RocksDB's integer property name of column family cf of sh, or 0 if it
 * cannot be read. */
static uint64_t
prop(const StoreShard *sh, int cf, const char *name)
{
    uint64_t v = 0;

    if (rocksdb_property_int_cf(sh->db, sh->cf[cf], name, &v) != 0) return 0;
    return v;
}

/* Starts a flush of every memtable above IDLE_FLUSH_MIN; returns the
 * bytes they hold (0: none started). */
static uint64_t
start_flushes(IdleFlush *f, StoreShard *sh, int nshards)
{
    uint64_t bytes = 0;

    for (int i = 0; i < nshards; i++) {
        for (int cf = 0; cf < SHARD_CF_COUNT; cf++) {
            uint64_t n = prop(&sh[i], cf, "rocksdb.cur-size-all-mem-tables");
            if (n <= IDLE_FLUSH_MIN) continue;
            char *e = NULL;
            rocksdb_flush_cf(sh[i].db, f->fo, sh[i].cf[cf], &e);
            if (e) {
                rocksdb_free(e); /* not started: the memtable stays */
                continue;
            }
            bytes += n;
        }
    }
    return bytes;
}

/* Whether every flush of the shards is done: no immutable memtable left. */
static int
flushes_done(const StoreShard *sh, int nshards)
{
    for (int i = 0; i < nshards; i++) {
        for (int cf = 0; cf < SHARD_CF_COUNT; cf++) {
            if (prop(&sh[i], cf, "rocksdb.num-immutable-mem-table")) return 0;
        }
    }
    return 1;
}

/* The round ends: counted if it flushed, the bytes it rests at
 * published. */
static void
round_end(IdleFlush *f)
{
    if (f->pending) {
        atomic_fetch_add(&f->st_flushed, f->pending);
        atomic_fetch_add(&f->st_rounds, 1);
    }
    f->pending = 0;
    f->waiting = 0;
    atomic_store(&f->rest_bytes, f->seen);
}

void
idle_step(IdleFlush *f, StoreShard *sh, int nshards, uint64_t written, int busy,
          int64_t now)
{
    if (written != f->seen || busy) {
        f->seen = written;
        f->quiet_from = now;
        f->armed = 1;
    }
    if (f->waiting && now >= f->next_poll) {
        if (flushes_done(sh, nshards))
            round_end(f);
        else
            f->next_poll = now + IDLE_POLL_NS;
    }
    if (!f->armed || f->waiting || now < f->quiet_from + IDLE_QUIET_NS) return;
    f->armed = 0;
    f->pending = start_flushes(f, sh, nshards);
    if (!f->pending) {
        round_end(f);
        return;
    }
    f->waiting = 1;
    f->next_poll = now + IDLE_POLL_NS;
}

int
idle_at_rest(const IdleFlush *f, uint64_t written)
{
    return atomic_load(&f->rest_bytes) == written;
}

uint64_t
idle_memtable_bytes(const StoreShard *sh, int nshards)
{
    uint64_t n = 0;

    for (int i = 0; i < nshards; i++) {
        for (int cf = 0; cf < SHARD_CF_COUNT; cf++)
            n += prop(&sh[i], cf, "rocksdb.size-all-mem-tables");
    }
    return n;
}
