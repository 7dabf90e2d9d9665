/* store/sync.c - WAL syncs and syncer threads (see store/sync.h). */
#include "store/sync.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/util.h"

/* ---- SyncThread: what SyncJoin and SyncPost share ---- */

static void
thread_init(SyncThread *t, StoreSync *y, int index)
{
    *t = (SyncThread){.y = y, .index = index};
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
}

static void
thread_destroy(SyncThread *t)
{
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
}

/* mu held: waits for a request (returns 1, request taken) or stop (0). */
static int
thread_next(SyncThread *t)
{
    while (!t->req && !t->stop)
        pthread_cond_wait(&t->cv, &t->mu);
    if (t->stop) return 0;
    t->req = 0;
    return 1;
}

/* Stops the thread if it runs: stop set under its mutex, then join. */
static void
thread_stop(SyncThread *t)
{
    if (!t->started) return;
    pthread_mutex_lock(&t->mu);
    t->stop = 1;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    pthread_join(t->th, NULL);
    t->started = 0;
}

/* ---- the set ---- */

void
sync_init(StoreSync *y, StoreSyncMode mode, int interval_ms, StoreAck *ack)
{
    y->mode = mode;
    y->interval_ms = interval_ms;
    y->ack = ack;
    y->last_sync_mono = util_now_ns();
    for (int i = 0; i < STORE_SHARDS_MAX; i++) {
        thread_init(&y->join[i].t, y, i);
        thread_init(&y->post[i].t, y, i);
    }
    thread_init(&y->jsync.t, y, -1);
}

void
sync_use_journal(StoreSync *y, const int *fd, int nfd)
{
    y->journal = 1;
    y->jsync.fd = fd;
    y->jsync.nfd = nfd;
}

void
sync_journal_written(StoreSync *y, int i)
{
    y->jsync.written |= 1u << i;
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
        thread_destroy(&y->join[i].t);
        thread_destroy(&y->post[i].t);
    }
    thread_destroy(&y->jsync.t);
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

/* ---- SyncJoin: post, then wait for the result ---- */

static void *
join_main(void *arg)
{
    SyncJoin *r = arg;
    SyncThread *t = &r->t;

    pthread_mutex_lock(&t->mu);
    while (thread_next(t)) {
        pthread_mutex_unlock(&t->mu);
        char *msg = NULL;
        uint64_t ns;
        int rc = sync_here(t->y, t->index, &msg, &ns);
        pthread_mutex_lock(&t->mu);
        r->rc = rc;
        r->errmsg = msg;
        r->ns = ns;
        r->done = 1;
        pthread_cond_broadcast(&t->cv);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

static void
join_post(SyncJoin *r)
{
    pthread_mutex_lock(&r->t.mu);
    r->done = 0;
    r->t.req = 1;
    pthread_cond_broadcast(&r->t.cv);
    pthread_mutex_unlock(&r->t.mu);
}

/* Waits for a posted sync; returns its result (message in *msg). */
static int
join_wait(SyncJoin *r, char **msg, uint64_t *ns)
{
    pthread_mutex_lock(&r->t.mu);
    while (!r->done)
        pthread_cond_wait(&r->t.cv, &r->t.mu);
    int rc = r->rc;
    *msg = r->errmsg;
    *ns = r->ns;
    r->errmsg = NULL;
    pthread_mutex_unlock(&r->t.mu);
    return rc;
}

/* ---- SyncPost: fire and forget ---- */

static void *
post_main(void *arg)
{
    SyncPost *r = arg;
    SyncThread *t = &r->t;
    StoreAck *ack = t->y->ack;

    pthread_mutex_lock(&t->mu);
    while (thread_next(t)) {
        pthread_mutex_unlock(&t->mu);
        char *msg = NULL;
        uint64_t ns;
        int rc = sync_here(t->y, t->index, &msg, &ns);
        ack_stat_sync(ack, ns); /* nobody waits: account and fail-stop */
        if (rc < 0)
            ack_fail(ack, "WAL sync of", t->index, msg);
        else
            free(msg);
        pthread_mutex_lock(&t->mu);
        r->busy = 0;
        pthread_cond_broadcast(&t->cv);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

/* Posts shard r's fsync unless one is posted or running; returns 1 if
 * posted. */
static int
post_try(SyncPost *r)
{
    int posted = 0;

    pthread_mutex_lock(&r->t.mu);
    if (!r->busy) {
        r->busy = 1;
        r->t.req = 1;
        pthread_cond_broadcast(&r->t.cv);
        posted = 1;
    }
    pthread_mutex_unlock(&r->t.mu);
    return posted;
}

/* Waits until shard r's posted fsync, if any, has finished. */
static void
post_wait_idle(SyncPost *r)
{
    pthread_mutex_lock(&r->t.mu);
    while (r->busy)
        pthread_cond_wait(&r->t.cv, &r->t.mu);
    pthread_mutex_unlock(&r->t.mu);
}

/* ---- SyncJournal: the journal's files, fire and forget ---- */

/* The interval journal mode: the journal's syncer. */
static int
journal_interval(const StoreSync *y)
{
    return y->journal && y->mode == STORE_SYNC_INTERVAL;
}

/* Syncs the files in mask; counts each sync, records a failure. */
static void
jsync_files(StoreSync *y, unsigned mask)
{
    for (int i = 0; i < y->jsync.nfd; i++) {
        if (!(mask & (1u << i))) continue;
        char *msg = NULL;
        int64_t t0 = util_now_ns();
        int rc = y->io->jsync(y->io->ctx, y->jsync.fd[i], &msg);
        ack_stat_sync(y->ack, (uint64_t)(util_now_ns() - t0));
        if (rc < 0)
            ack_fail(y->ack, "commit journal", -1, msg);
        else
            free(msg);
    }
}

static void *
jsync_main(void *arg)
{
    SyncJournal *r = arg;
    SyncThread *t = &r->t;

    pthread_mutex_lock(&t->mu);
    while (thread_next(t)) {
        unsigned mask = r->posted;
        r->posted = 0;
        pthread_mutex_unlock(&t->mu);
        jsync_files(t->y, mask);
        pthread_mutex_lock(&t->mu);
        r->busy = 0;
        pthread_cond_broadcast(&t->cv);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

/* Posts the written journal files unless a sync of them is posted or
 * running (they then stay written for the next round). */
static void
jsync_post(SyncJournal *r)
{
    pthread_mutex_lock(&r->t.mu);
    if (!r->busy) {
        r->busy = 1;
        r->posted = r->written;
        r->written = 0;
        r->t.req = 1;
        pthread_cond_broadcast(&r->t.cv);
    }
    pthread_mutex_unlock(&r->t.mu);
}

/* ---- the mutation thread's side ---- */

/* Fsyncs the WAL of every dirty shard: the first on this thread, the others
 * at the same time on their SyncJoin helpers (if started; else serially
 * here). */
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
        else if (y->join[i].t.started)
            join_post(&y->join[i]);
    }
    if (first < 0) return 0;
    for (int i = first; i < y->nshards; i++) {
        if (!y->dirty[i]) continue;
        int r = i > first && y->join[i].t.started
                    ? join_wait(&y->join[i], &msg, &ns)
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
sync_any_dirty(const StoreSync *y)
{
    if (journal_interval(y)) return y->jsync.written != 0;
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
     * whose previous sync still runs stays dirty for the next round. With
     * the journal, its files are synced instead (sync_use_journal). */
    if (journal_interval(y)) {
        jsync_post(&y->jsync);
        y->last_sync_mono = util_now_ns();
        return;
    }
    for (int i = 0; i < y->nshards; i++) {
        if (y->dirty[i] && post_try(&y->post[i])) y->dirty[i] = 0;
    }
    y->last_sync_mono = util_now_ns();
}

int
sync_cover_wait(StoreSync *y)
{
    for (int i = 0; i < y->nshards; i++) {
        if (y->post[i].t.started) post_wait_idle(&y->post[i]);
    }
    return ack_is_failed(y->ack) ? -1 : 0;
}

int
sync_cover_post(StoreSync *y)
{
    if (!y->post[0].t.started) { /* no helpers: sync here */
        for (int i = 0; i < y->nshards; i++)
            y->dirty[i] = 1;
        return sync_dirty(y);
    }
    if (sync_cover_wait(y) < 0) return -1;
    for (int i = 0; i < y->nshards; i++) {
        if (y->post[i].t.started) post_try(&y->post[i]);
    }
    return 0;
}

/* Every shard once: after the posted fsyncs (each counted by its syncer)
 * are done, the shards are synced by sync_dirty alone, so a shard that
 * was still dirty is synced and counted once, not once more by its
 * syncer. */
void
sync_final(StoreSync *y)
{
    for (int i = 0; i < y->nshards; i++) {
        if (y->post[i].t.started) post_wait_idle(&y->post[i]);
    }
    if (ack_is_failed(y->ack)) return;
    for (int i = 0; i < y->nshards; i++)
        y->dirty[i] = 1;
    if (sync_dirty(y) == 0) ack_final_durable(y->ack);
}

/* ---- threads ---- */

/* Starts t's thread running body(arg). Returns 0, or -1 (message in err). */
static int
thread_start(SyncThread *t, void *(*body)(void *), void *arg, char *err,
             size_t errcap)
{
    int e = pthread_create(&t->th, NULL, body, arg);
    char name[16];

    if (e) return util_fail(err, errcap, "pthread_create: %s", strerror(e));
    if (t->index < 0)
        snprintf(name, sizeof name, "rs-sync-jnl");
    else
        snprintf(name, sizeof name, "rs-sync-%02u", (unsigned)t->index % 100u);
    pthread_setname_np(t->th, name); /* top -H, perf */
    t->started = 1;
    return 0;
}

int
sync_start(StoreSync *y, char *err, size_t errcap)
{
    y->last_sync_mono = util_now_ns();
    if (y->mode == STORE_SYNC_NEVER) return 0; /* no syncs until close */
    for (int i = 0; i < y->nshards; i++) {
        int rc = 0;
        if (y->mode == STORE_SYNC_INTERVAL || y->journal)
            rc = thread_start(&y->post[i].t, post_main, &y->post[i], err,
                              errcap);
        else if (i > 0) /* shard 0 is never posted (sync_dirty) */
            rc = thread_start(&y->join[i].t, join_main, &y->join[i], err,
                              errcap);
        if (rc < 0) return -1;
    }
    if (journal_interval(y))
        return thread_start(&y->jsync.t, jsync_main, &y->jsync, err, errcap);
    return 0;
}

void
sync_stop(StoreSync *y)
{
    for (int i = 0; i < y->nshards; i++) {
        thread_stop(&y->join[i].t);
        thread_stop(&y->post[i].t);
    }
    thread_stop(&y->jsync.t);
}
