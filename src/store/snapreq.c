/* store/snapreq.c - a backup's consistent moment (see store/snapreq.h). */
#include "store/snapreq.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "store/util.h"

void
snapreq_init(SnapReq *r)
{
    pthread_condattr_t ca;

    pthread_mutex_init(&r->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&r->cv, &ca);
    pthread_condattr_destroy(&ca);
}

void
snapreq_destroy(SnapReq *r)
{
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
}

/* Waits on r->cv until *flag says want or the deadline; under r->mu.
 * Returns 0, or -1 at the deadline. */
static int
wait_for(SnapReq *r, const int *flag, int want, const struct timespec *until)
{
    while (*flag != want && !r->stopped)
        if (pthread_cond_timedwait(&r->cv, &r->mu, until) == ETIMEDOUT)
            return *flag == want ? 0 : -1;
    return 0;
}

int
snapreq_take(SnapReq *r, void (*kick)(void *), void *kick_arg,
             const rocksdb_snapshot_t **snaps, int nshards, uint64_t *seq,
             char *err, size_t errcap)
{
    struct timespec until;
    int rc = -1;

    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += SNAPREQ_WAIT_MS / 1000;
    pthread_mutex_lock(&r->mu);
    if (wait_for(r, &r->busy, 0, &until) < 0 || r->stopped) {
        util_fail(err, errcap, "the store is %s",
                  r->stopped ? "stopping" : "busy with another backup");
        goto out;
    }
    r->busy = 1;
    r->done = 0;
    atomic_store(&r->asked, 1);
    kick(kick_arg);
    if (wait_for(r, &r->done, 1, &until) < 0 || !r->done) {
        /* a late answer is released by the mutation thread (done unset) */
        atomic_store(&r->asked, 0);
        util_fail(err, errcap, "the store %s",
                  r->stopped ? "is stopping" : "did not answer in time");
    } else if (r->rc < 0) {
        util_fail(err, errcap, "the store has failed");
    } else {
        memcpy(snaps, r->snap, (size_t)nshards * sizeof *snaps);
        *seq = r->seq;
        rc = 0;
    }
    r->busy = 0;
    r->done = 0;
    pthread_cond_broadcast(&r->cv);
out:
    pthread_mutex_unlock(&r->mu);
    return rc;
}

int
snapreq_pending(SnapReq *r)
{
    return atomic_load_explicit(&r->asked, memory_order_acquire);
}

void
snapreq_serve(SnapReq *r, StoreShard *shards, int nshards, uint64_t seq,
              int failed)
{
    pthread_mutex_lock(&r->mu);
    /* asked is cleared under mu: a requester that gave up cleared it too */
    if (atomic_exchange(&r->asked, 0) && r->busy) {
        r->rc = failed ? -1 : 0;
        r->seq = seq;
        for (int i = 0; i < nshards && !failed; i++)
            r->snap[i] = rocksdb_create_snapshot(shards[i].db);
        r->done = 1;
        pthread_cond_broadcast(&r->cv);
    }
    pthread_mutex_unlock(&r->mu);
}

void
snapreq_stop(SnapReq *r)
{
    pthread_mutex_lock(&r->mu);
    r->stopped = 1;
    atomic_store(&r->asked, 0);
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}
