/* store/fault.h - the store's fault-injection seam: wraps the StoreIO of
 * RocksDB (store.h) in injected write and sync failures, a sync hold and
 * failed body reads, as the ROCKSTALKD_FAULT_* variables ask (see
 * store/fault.c for the list).
 *
 * Threads: fault_setup on the main thread (store_open); the wrapped write
 * and sync on the mutation and syncer threads (counters are atomic);
 * fault_read_fails on any thread. Calls: store_util and RocksDB's
 * WriteBatch (a held-back batch's copy).
 */
#ifndef ROCKSTALK_STORE_FAULT_H
#define ROCKSTALK_STORE_FAULT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "store/types.h"

/* The fault-injection settings and counters; lives in the Store, whose
 * StoreIO may point at wrap. */
typedef struct StoreFault {
    StoreIO inner;                            /* what the wrapper calls */
    StoreIO wrap;                             /* the wrapper, ctx = this */
    long write_fail_after, sync_fail_after;   /* -1: never */
    long jwrite_fail_after, jsync_fail_after; /* -1: never */
    char *hold_path;                          /* NULL: no hold; owned */
    int read_fail;                            /* fail every body read */
    _Atomic long writes, syncs, jwrites, jsyncs;
    /* ROCKSTALKD_FAULT_DEFER_UNSYNCED: the batches written with sync=0 to
     * each db, held back until its next sync (under mu) */
    int defer;
    int mu_init; /* mu is initialised */
    pthread_mutex_t mu;
    struct FaultDeferred *deferred;
} StoreFault;

/* Reads the ROCKSTALKD_FAULT_* variables into f (zeroed) and chooses the
 * StoreIO the store uses, into *io: cfg_io if not NULL (a test's own seam),
 * else inner (RocksDB) wrapped when a write or sync fault or a hold is asked
 * for. f must stay at its address while *io is in use. Returns 0, or -1 on a
 * malformed variable (message in err). Free with fault_free. */
int fault_setup(StoreFault *f, const StoreIO *inner, const StoreIO *cfg_io,
                const StoreIO **io, char *err, size_t errcap);

/* Nonzero when ROCKSTALKD_FAULT_READ_FAIL asks that body reads fail. */
int fault_read_fails(const StoreFault *f);

/* The message of an injected read failure (static). */
#define FAULT_READ_MSG "IO error: Input/output error (injected read failure)"

/* Frees what fault_setup allocated (not f itself). */
void fault_free(StoreFault *f);

#endif
