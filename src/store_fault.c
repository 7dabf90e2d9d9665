/* store_fault.c - fault injection for the store (see store_fault.h).
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
 *   ROCKSTALKD_FAULT_ENOSPC=1            injected failures read "No space
 *       left on device" (a full disk) instead of "Input/output error".
 *   ROCKSTALKD_FAULT_READ_FAIL=1         every body read (store_get_body,
 *       store_get_bodies) fails with an injected "Input/output error", so a
 *       test can see what a client gets when a body on disk cannot be read.
 *       Read even when cfg->io is set.
 */
#include "store_fault.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store_util.h"

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

static int
fault_write(void *ctx, void *db, void *batch, int sync, char **errmsg)
{
    StoreFault *f = ctx;

    if (sync && fault_sync_gate(f, errmsg) < 0) return -1;
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

int
fault_setup(StoreFault *f, const StoreIO *inner, const StoreIO *cfg_io,
            const StoreIO **io, char *err, size_t errcap)
{
    const char *hold = getenv("ROCKSTALKD_FAULT_SYNC_HOLD");
    const char *rf = getenv("ROCKSTALKD_FAULT_READ_FAIL");

    f->read_fail = rf && *rf && *rf != '0';
    f->inner = *inner;
    if (cfg_io) {
        *io = cfg_io;
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
        *io = &f->inner;
        return 0;
    }
    f->wrap = (StoreIO){fault_write, fault_sync, f};
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
}
