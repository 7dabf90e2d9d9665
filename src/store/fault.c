/* store/fault.c - fault injection for the store (see store/fault.h).
 *
 * Read once by store_open when cfg->io is NULL (unset or empty variables
 * disable it):
 *   ROCKSTALKD_FAULT_WRITE_FAIL_AFTER=N  the first N writes of the mutation
 *       thread succeed; the N+1-th and every later one fail with an injected
 *       "Input/output error".
 *   ROCKSTALKD_FAULT_SYNC_FAIL_AFTER=N   likewise for WAL syncs. A write with
 *       sync=1 (STORE_SYNC_ALWAYS with one dirty shard) counts as a write and
 *       as a sync, and a failing sync=1 write writes nothing.
 *   ROCKSTALKD_FAULT_SYNC_HOLD=PATH      before each sync (including a sync=1
 *       write) wait while the file PATH exists, checking every 1 ms, so a
 *       test can hold a sync back and see that the acknowledgement waits.
 *   ROCKSTALKD_FAULT_JOURNAL_WRITE_FAIL_AFTER=N, ..._JOURNAL_SYNC_FAIL_AFTER=N
 *       likewise, counting only the commit journal's writes or syncs
 *       (store/journal.h); the two above count them too, and
 *       ROCKSTALKD_FAULT_SYNC_HOLD holds them.
 *   ROCKSTALKD_FAULT_DEFER_UNSYNCED=1     RocksDB writes without sync are
 *       held in memory until the next sync of their shard, and only then
 *       written: a SIGKILL loses them as a power cut loses a WAL written but
 *       not synced, so a test can see the commit journal bring them back.
 *       (Bodies held back are not readable until then.)
 *   ROCKSTALKD_FAULT_ENOSPC=1            injected failures read "No space
 *       left on device" (a full disk) instead of "Input/output error".
 *   ROCKSTALKD_FAULT_READ_FAIL=1         every body read (store_get_body,
 *       store_get_bodies) fails with an injected "Input/output error", so a
 *       test can see what a client gets when a body on disk cannot be read.
 *       Read even when cfg->io is set.
 */
#include "store/fault.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rocksdb/c.h>

#include "store/util.h"

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
fault_sync_gate(StoreFault *f, char **errmsg)
{
    const struct timespec ms = {0, 1000000};

    while (f->hold_path && access(f->hold_path, F_OK) == 0)
        nanosleep(&ms, NULL);
    long n = atomic_fetch_add(&f->syncs, 1);
    if (f->sync_fail_after >= 0 && n >= f->sync_fail_after)
        return fault_inject(errmsg, "sync failure");
    return 0;
}

/* A batch held back by ROCKSTALKD_FAULT_DEFER_UNSYNCED. */
typedef struct FaultDeferred {
    struct FaultDeferred *next;
    void *db;
    rocksdb_writebatch_t *batch;
} FaultDeferred;

/* Holds a copy of batch back until db's next sync. */
static void
defer_add(StoreFault *f, void *db, void *batch)
{
    size_t n;
    const char *data = rocksdb_writebatch_data(batch, &n);
    FaultDeferred *d = malloc(sizeof *d), **tail;

    if (!d) abort();
    *d = (FaultDeferred){.db = db,
                         .batch = rocksdb_writebatch_create_from(data, n)};
    pthread_mutex_lock(&f->mu);
    for (tail = &f->deferred; *tail; tail = &(*tail)->next)
        ;
    *tail = d;
    pthread_mutex_unlock(&f->mu);
}

/* Writes db's held-back batches, in order, before its sync. */
static int
defer_flush(StoreFault *f, void *db, char **errmsg)
{
    int rc = 0;

    pthread_mutex_lock(&f->mu);
    for (FaultDeferred **p = &f->deferred; *p;) {
        FaultDeferred *d = *p;
        if (d->db != db) {
            p = &d->next;
            continue;
        }
        *p = d->next;
        if (rc == 0) rc = f->inner.write(f->inner.ctx, db, d->batch, 0, errmsg);
        rocksdb_writebatch_destroy(d->batch);
        free(d);
    }
    pthread_mutex_unlock(&f->mu);
    return rc;
}

static int
fault_write(void *ctx, void *db, void *batch, int sync, char **errmsg)
{
    StoreFault *f = ctx;

    if (sync && fault_sync_gate(f, errmsg) < 0) return -1;
    if (f->defer && !sync) {
        atomic_fetch_add(&f->writes, 1);
        defer_add(f, db, batch);
        return 0;
    }
    if (f->defer && defer_flush(f, db, errmsg) < 0) return -1;
    long n = atomic_fetch_add(&f->writes, 1);
    if (f->write_fail_after >= 0 && n >= f->write_fail_after)
        return fault_inject(errmsg, "write failure");
    return f->inner.write(f->inner.ctx, db, batch, sync, errmsg);
}

static int
fault_sync(void *ctx, void *db, char **errmsg)
{
    StoreFault *f = ctx;

    if (fault_sync_gate(f, errmsg) < 0) return -1;
    if (f->defer && defer_flush(f, db, errmsg) < 0) return -1;
    return f->inner.sync(f->inner.ctx, db, errmsg);
}

/* A journal write counts as a write, its sync as a sync; the JOURNAL
 * counters count only these. */
static int
fault_jwrite(void *ctx, int fd, const struct iovec *iov, int iovcnt,
             uint64_t off, char **errmsg)
{
    StoreFault *f = ctx;
    long n = atomic_fetch_add(&f->writes, 1);
    long k = atomic_fetch_add(&f->jwrites, 1);

    if ((f->write_fail_after >= 0 && n >= f->write_fail_after) ||
        (f->jwrite_fail_after >= 0 && k >= f->jwrite_fail_after))
        return fault_inject(errmsg, "journal write failure");
    return f->inner.jwrite(f->inner.ctx, fd, iov, iovcnt, off, errmsg);
}

static int
fault_jsync(void *ctx, int fd, char **errmsg)
{
    StoreFault *f = ctx;

    if (fault_sync_gate(f, errmsg) < 0) return -1;
    long k = atomic_fetch_add(&f->jsyncs, 1);
    if (f->jsync_fail_after >= 0 && k >= f->jsync_fail_after)
        return fault_inject(errmsg, "journal sync failure");
    return f->inner.jsync(f->inner.ctx, fd, errmsg);
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

int
fault_setup(StoreFault *f, const StoreIO *inner, const StoreIO *cfg_io,
            const StoreIO **io, char *err, size_t errcap)
{
    const char *hold = getenv("ROCKSTALKD_FAULT_SYNC_HOLD");
    const char *rf = getenv("ROCKSTALKD_FAULT_READ_FAIL");
    const char *du = getenv("ROCKSTALKD_FAULT_DEFER_UNSYNCED");

    f->read_fail = rf && *rf && *rf != '0';
    f->defer = du && *du && *du != '0';
    pthread_mutex_init(&f->mu, NULL);
    f->mu_init = 1;
    f->inner = *inner;
    if (cfg_io) {
        *io = cfg_io;
        return 0;
    }
    if (env_count("ROCKSTALKD_FAULT_WRITE_FAIL_AFTER", &f->write_fail_after,
                  err, errcap) < 0 ||
        env_count("ROCKSTALKD_FAULT_SYNC_FAIL_AFTER", &f->sync_fail_after, err,
                  errcap) < 0 ||
        env_count("ROCKSTALKD_FAULT_JOURNAL_WRITE_FAIL_AFTER",
                  &f->jwrite_fail_after, err, errcap) < 0 ||
        env_count("ROCKSTALKD_FAULT_JOURNAL_SYNC_FAIL_AFTER",
                  &f->jsync_fail_after, err, errcap) < 0)
        return -1;
    if (hold && *hold && !(f->hold_path = strdup(hold)))
        return util_fail(err, errcap, "out of memory");
    if (f->write_fail_after < 0 && f->sync_fail_after < 0 &&
        f->jwrite_fail_after < 0 && f->jsync_fail_after < 0 && !f->hold_path &&
        !f->defer) {
        *io = &f->inner;
        return 0;
    }
    f->wrap = (StoreIO){.write = fault_write,
                        .sync = fault_sync,
                        .jwrite = fault_jwrite,
                        .jsync = fault_jsync,
                        .ctx = f};
    *io = &f->wrap;
    return 0;
}

int
fault_read_fails(const StoreFault *f)
{
    return f->read_fail;
}

void
fault_free(StoreFault *f)
{
    free(f->hold_path);
    f->hold_path = NULL;
    for (FaultDeferred *d = f->deferred, *next; d; d = next) {
        next = d->next;
        rocksdb_writebatch_destroy(d->batch);
        free(d);
    }
    f->deferred = NULL;
    if (f->mu_init) pthread_mutex_destroy(&f->mu);
    f->mu_init = 0;
}
