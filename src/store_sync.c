/* store_sync.c - WAL syncs and syncer threads (see store_sync.h). */
#include "store_sync.h"

#include <stdlib.h>
#include <string.h>

#include "store_util.h"

void
sync_init(StoreSync *y, StoreSyncMode mode, int interval_ms, StoreAck *ack)
{
    y->mode = mode;
    y->interval_ms = interval_ms;
    y->ack = ack;
    y->last_sync_mono = util_now_ns();
    for (int i = 0; i < STORE_SHARDS_MAX; i++) {
        y->syncer[i].y = y;
        y->syncer[i].index = i;
        pthread_mutex_init(&y->syncer[i].mu, NULL);
        pthread_cond_init(&y->syncer[i].cv, NULL);
    }
}

void
sync_attach(StoreSync *y, StoreShard *shard, int nshards, const StoreIO *io)
{
    y->shard = shard;
    y->nshards = nshards;
    y->io = io;
}

void
sync_destroy(StoreSync *y)
{
    for (int i = 0; i < STORE_SHARDS_MAX; i++) {
        pthread_mutex_destroy(&y->syncer[i].mu);
        pthread_cond_destroy(&y->syncer[i].cv);
    }
}

/* Syncs shard i on the calling thread. */
static int
sync_here(StoreSync *y, int i, char **msg, uint64_t *ns)
{
    int64_t t0 = util_now_ns();
    int rc = y->io->sync(y->io->ctx, y->shard[i].db, msg);

    *ns = (uint64_t)(util_now_ns() - t0);
    return rc;
}

static void *
syncer_main(void *arg)
{
    Syncer *r = arg;
    StoreSync *y = r->y;

    pthread_mutex_lock(&r->mu);
    for (;;) {
        while (!r->req && !r->stop)
            pthread_cond_wait(&r->cv, &r->mu);
        if (r->stop) break;
        r->req = 0;
        pthread_mutex_unlock(&r->mu);
        char *msg = NULL;
        uint64_t ns;
        int rc = sync_here(y, r->index, &msg, &ns);
        if (r->async) { /* nobody waits: account and fail-stop here */
            ack_stat_sync(y->ack, ns);
            if (rc < 0)
                ack_fail(y->ack, "WAL sync of", r->index, msg);
            else
                free(msg);
            msg = NULL;
        }
        pthread_mutex_lock(&r->mu);
        r->rc = rc;
        r->errmsg = msg;
        r->ns = ns;
        r->done = 1;
        r->busy = 0;
        pthread_cond_broadcast(&r->cv);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

static void
syncer_post(Syncer *r)
{
    pthread_mutex_lock(&r->mu);
    r->done = 0;
    r->req = 1;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

/* Waits for a posted sync; returns its result (message in *msg). */
static int
syncer_wait(Syncer *r, char **msg, uint64_t *ns)
{
    pthread_mutex_lock(&r->mu);
    while (!r->done)
        pthread_cond_wait(&r->cv, &r->mu);
    int rc = r->rc;
    *msg = r->errmsg;
    *ns = r->ns;
    r->errmsg = NULL;
    pthread_mutex_unlock(&r->mu);
    return rc;
}

/* Fsyncs the WAL of every dirty shard: the first on this thread, the others
 * at the same time on their helpers (if started; else serially here). */
int
sync_dirty(StoreSync *y)
{
    int first = -1, rc = 0;
    int64_t t0 = util_now_ns();
    char *msg = NULL;
    uint64_t ns;

    for (int i = 0; i < y->nshards; i++) {
        if (!y->dirty[i]) continue;
        if (first < 0)
            first = i;
        else if (y->syncer[i].started)
            syncer_post(&y->syncer[i]);
    }
    if (first < 0) return 0;
    for (int i = first; i < y->nshards; i++) {
        if (!y->dirty[i]) continue;
        int r = i > first && y->syncer[i].started
                    ? syncer_wait(&y->syncer[i], &msg, &ns)
                    : sync_here(y, i, &msg, &ns);
        ack_stat_sync(y->ack, ns);
        if (r < 0 && rc == 0)
            ack_fail(y->ack, "WAL sync of", i, msg);
        else
            free(msg);
        msg = NULL;
        rc |= r;
        y->dirty[i] = 0;
    }
    y->last_sync_mono = util_now_ns();
    atomic_store_explicit(&y->ack->st_last_sync_ns,
                          (uint64_t)(y->last_sync_mono - t0),
                          memory_order_relaxed);
    return rc < 0 ? -1 : 0;
}

void
sync_note_synced_write(StoreSync *y, uint64_t ns)
{
    ack_stat_sync(y->ack, ns);
    atomic_store_explicit(&y->ack->st_last_sync_ns, ns, memory_order_relaxed);
    y->last_sync_mono = util_now_ns();
    y->last_sync_dur = ns;
}

void
sync_mark(StoreSync *y, int i, int dirty)
{
    y->dirty[i] = dirty;
}

int
sync_start(StoreSync *y, char *err, size_t errcap)
{
    /* Only shards after the first dirty one are handed to helpers, so shard 0
     * never needs one. Without syncs until close, no helpers at all. */
    int async = y->mode == STORE_SYNC_INTERVAL;

    y->last_sync_mono = util_now_ns();
    if ((!async && y->nshards < 2) || y->mode == STORE_SYNC_NEVER) return 0;
    for (int i = async ? 0 : 1; i < y->nshards; i++) {
        Syncer *r = &y->syncer[i];
        r->async = async;
        int e = pthread_create(&r->th, NULL, syncer_main, r);
        if (e) return util_fail(err, errcap, "pthread_create: %s", strerror(e));
        r->started = 1;
    }
    return 0;
}

void
sync_stop(StoreSync *y)
{
    for (int i = 0; i < y->nshards; i++) {
        Syncer *r = &y->syncer[i];
        if (!r->started) continue;
        pthread_mutex_lock(&r->mu);
        r->stop = 1;
        pthread_cond_broadcast(&r->cv);
        pthread_mutex_unlock(&r->mu);
        pthread_join(r->th, NULL);
        r->started = 0;
    }
}

int
sync_any_dirty(const StoreSync *y)
{
    for (int i = 0; i < y->nshards; i++)
        if (y->dirty[i]) return 1;
    return 0;
}

/* STORE_SYNC_INTERVAL: fsyncs the dirty shards once the interval has passed
 * since the last sync. */
void
sync_interval(StoreSync *y)
{
    int64_t due = y->last_sync_mono + (int64_t)y->interval_ms * 1000000;

    if (ack_is_failed(y->ack) || !sync_any_dirty(y) || util_now_ns() < due)
        return;
    /* Each shard's syncer thread fsyncs its WAL while this thread goes on
     * writing and acknowledging: a slow fsync never stalls replies. A shard
     * whose previous sync still runs stays dirty for the next round. */
    for (int i = 0; i < y->nshards; i++) {
        Syncer *r = &y->syncer[i];
        if (!y->dirty[i]) continue;
        pthread_mutex_lock(&r->mu);
        if (!r->busy) {
            r->busy = 1;
            r->done = 0;
            r->req = 1;
            pthread_cond_broadcast(&r->cv);
            y->dirty[i] = 0;
        }
        pthread_mutex_unlock(&r->mu);
    }
    y->last_sync_mono = util_now_ns();
}

/* Waits until no asynchronous (interval) sync is running. */
static void
async_syncs_wait(StoreSync *y)
{
    for (int i = 0; i < y->nshards; i++) {
        Syncer *r = &y->syncer[i];
        if (!r->started || !r->async) continue;
        pthread_mutex_lock(&r->mu);
        while (r->busy)
            pthread_cond_wait(&r->cv, &r->mu);
        pthread_mutex_unlock(&r->mu);
    }
}

void
sync_final(StoreSync *y)
{
    async_syncs_wait(y);
    if (ack_is_failed(y->ack)) return;
    int rc = 0;
    for (int i = 0; i < y->nshards; i++) {
        char *msg = NULL;
        uint64_t ns;
        if (y->syncer[i].async) { /* its syncer only does async work: here */
            if (sync_here(y, i, &msg, &ns) < 0) {
                ack_fail(y->ack, "WAL sync of", i, msg);
                rc = -1;
            } else {
                free(msg);
            }
            ack_stat_sync(y->ack, ns);
        } else {
            y->dirty[i] = 1;
        }
    }
    if (rc == 0 && sync_dirty(y) == 0) ack_final_durable(y->ack);
}
