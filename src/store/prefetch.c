/* prefetch.c - the body reader thread (see prefetch.h). */
#include "store/prefetch.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Reads per trip of the reader thread: requests are taken in batches so a
 * burst costs one wake-up, and results go back in batches for the same
 * reason. */
#define BATCH 64

struct Prefetch {
    Store *st;
    char *hold_path; /* ROCKSTALKD_FAULT_READ_HOLD, or NULL */
    void (*notify)(void *);
    void *arg;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* under mu */
    struct {
        uint64_t id;
        size_t cost;
    } req[PREFETCH_MAX]; /* ring of reads to do */
    size_t rhead, rlen;
    PrefetchResult *done; /* finished reads; cap PREFETCH_MAX */
    size_t dlen;
    size_t outstanding; /* requested and not yet taken */
    int stop;
    /* loop thread: the results it took last, swapped with done */
    PrefetchResult *taken;
    /* set with done non-empty (under mu), read by the loop without it */
    atomic_int has_done;
};

static int
by_id(const void *a, const void *b)
{
    uint64_t x = ((const PrefetchResult *)a)->id;
    uint64_t y = ((const PrefetchResult *)b)->id;
    return x < y ? -1 : x > y;
}

/* Reads the bodies of res[0..n) (ids and costs set) in id order, so that
 * a FIFO backlog is read by stepping an iterator; a failed read leaves
 * body NULL. */
static void
read_batch(Prefetch *p, PrefetchResult *res, size_t n)
{
    uint64_t ids[BATCH];
    char *bodies[BATCH];
    size_t lens[BATCH];
    char err[256];
    const struct timespec ms = {0, 1000000};

    while (p->hold_path && access(p->hold_path, F_OK) == 0)
        nanosleep(&ms, NULL); /* fault seam: a slow disk */

    qsort(res, n, sizeof *res, by_id);
    for (size_t i = 0; i < n; i++)
        ids[i] = res[i].id;
    store_get_bodies(p->st, ids, n, bodies, lens, err, sizeof err);
    for (size_t i = 0; i < n; i++) {
        res[i].body = bodies[i];
        res[i].len = bodies[i] ? lens[i] : 0;
    }
}

static void *
reader_main(void *arg)
{
    Prefetch *p = arg;
    PrefetchResult res[BATCH];

    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->rlen && !p->stop)
            pthread_cond_wait(&p->cv, &p->mu);
        if (p->stop) break;
        size_t n = 0;
        for (; n < BATCH && p->rlen; n++, p->rlen--) {
            res[n].id = p->req[p->rhead].id;
            res[n].cost = p->req[p->rhead].cost;
            p->rhead = (p->rhead + 1) % PREFETCH_MAX;
        }
        pthread_mutex_unlock(&p->mu);
        read_batch(p, res, n);
        pthread_mutex_lock(&p->mu);
        int was_empty = p->dlen == 0;
        /* outstanding bounds requests plus results, so this fits */
        memcpy(p->done + p->dlen, res, n * sizeof *res);
        p->dlen += n;
        atomic_store_explicit(&p->has_done, 1, memory_order_release);
        if (was_empty && p->notify) p->notify(p->arg);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int
prefetch_start(Store *st, void (*notify)(void *), void *arg, Prefetch **out,
               char *err, size_t errcap)
{
    Prefetch *p = calloc(1, sizeof *p);

    *out = NULL;
    if (!p || !(p->done = malloc(PREFETCH_MAX * sizeof *p->done)) ||
        !(p->taken = malloc(PREFETCH_MAX * sizeof *p->taken))) {
        if (p) free(p->done);
        free(p);
        snprintf(err, errcap, "out of memory");
        return -1;
    }
    p->st = st;
    const char *hold = getenv("ROCKSTALKD_FAULT_READ_HOLD");
    if (hold && *hold) p->hold_path = strdup(hold);
    p->notify = notify;
    p->arg = arg;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    int e = pthread_create(&p->thread, NULL, reader_main, p);
    if (e) {
        snprintf(err, errcap, "pthread_create: %s", strerror(e));
        pthread_cond_destroy(&p->cv);
        pthread_mutex_destroy(&p->mu);
        free(p->done);
        free(p->taken);
        free(p->hold_path);
        free(p);
        return -1;
    }
    pthread_setname_np(p->thread, "rs-reader"); /* top -H, perf */
    *out = p;
    return 0;
}

size_t
prefetch_request(Prefetch *p, const uint64_t *ids, const size_t *costs,
                 size_t n)
{
    size_t k = 0;

    if (!n) return 0;
    pthread_mutex_lock(&p->mu);
    int was_idle = p->rlen == 0;
    for (; k < n && p->outstanding < PREFETCH_MAX; k++, p->outstanding++) {
        size_t i = (p->rhead + p->rlen++) % PREFETCH_MAX;
        p->req[i].id = ids[k];
        p->req[i].cost = costs[k];
    }
    if (was_idle && k) pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return k;
}

size_t
prefetch_take(Prefetch *p, PrefetchResult **out)
{
    if (!atomic_load_explicit(&p->has_done, memory_order_acquire)) return 0;
    pthread_mutex_lock(&p->mu);
    PrefetchResult *t = p->done;
    size_t n = p->dlen;
    p->done = p->taken;
    p->taken = t;
    p->dlen = 0;
    p->outstanding -= n;
    atomic_store_explicit(&p->has_done, 0, memory_order_relaxed);
    pthread_mutex_unlock(&p->mu);
    *out = t;
    return n;
}

void
prefetch_stop(Prefetch *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    for (size_t i = 0; i < p->dlen; i++)
        free(p->done[i].body);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p->done);
    free(p->taken);
    free(p->hold_path);
    free(p);
}
