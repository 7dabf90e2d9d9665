/* store/bodyreap.c - see bodyreap.h. */
#include "store/bodyreap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store/util.h"

void
bodyreap_init(BodyReap *q)
{
    pthread_condattr_t ca;

    *q = (BodyReap){0};
    pthread_mutex_init(&q->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&q->cv, &ca);
    pthread_condattr_destroy(&ca);
}

/* Deletes d's file now, whatever is left of it, and uncounts it. */
static void
reap_now(BodyReap *q, BodyDead *d)
{
    (void)unlink(d->path); /* a failure leaves dead-<gen> to the next start */
    atomic_fetch_sub(&q->st_bytes, d->size);
    atomic_fetch_sub(&q->st_files, 1);
    free(d->path);
    d->path = NULL;
}

void
bodyreap_add(BodyReap *q, const char *path, uint64_t size)
{
    size_t len = strlen(path) + 1;
    BodyDead d = {.path = memcpy(util_xrealloc(NULL, len), path, len),
                  .size = size};

    atomic_fetch_add(&q->st_bytes, size);
    atomic_fetch_add(&q->st_files, 1);
    pthread_mutex_lock(&q->mu);
    int now = q->stop;
    if (!now) {
        if (q->n == q->cap) {
            q->cap = q->cap ? 2 * q->cap : 8;
            q->dead = util_xrealloc(q->dead, q->cap * sizeof *q->dead);
        }
        q->dead[q->n++] = d;
        pthread_cond_signal(&q->cv);
    }
    pthread_mutex_unlock(&q->mu);
    if (now) reap_now(q, &d);
}

void
bodyreap_set_copy(BodyReap *q, BodyCopyFn fn, void *ctx)
{
    q->copy = fn;
    q->copy_ctx = ctx;
}

void
bodyreap_copy(BodyReap *q, uint64_t gen)
{
    pthread_mutex_lock(&q->mu);
    if (!q->stop && q->copy) {
        if (q->ncopies == q->ccap) {
            q->ccap = q->ccap ? 2 * q->ccap : 8;
            q->copies = util_xrealloc(q->copies, q->ccap * sizeof *q->copies);
        }
        q->copies[q->ncopies++] = gen;
        atomic_fetch_add(&q->st_copies, 1);
        pthread_cond_signal(&q->cv);
    }
    pthread_mutex_unlock(&q->mu);
}

int
bodyreap_stopping(BodyReap *q)
{
    pthread_mutex_lock(&q->mu);
    int stop = q->stop;
    pthread_mutex_unlock(&q->mu);
    return stop;
}

/* Under mu (released meanwhile): runs every copy-out queued, oldest
 * first, until stop is asked. */
static void
run_copies_locked(BodyReap *q)
{
    while (q->ncopies && !q->stop) {
        uint64_t gen = q->copies[0];
        memmove(q->copies, q->copies + 1, (q->ncopies - 1) * sizeof *q->copies);
        q->ncopies--;
        pthread_mutex_unlock(&q->mu);
        (void)q->copy(q->copy_ctx, gen); /* a failure is ack_fail'ed */
        atomic_fetch_sub(&q->st_copies, 1);
        pthread_mutex_lock(&q->mu);
    }
}

/* Under mu: waits up to ns nanoseconds, less if stop is asked. Returns
 * q->stop. */
static int
pause_locked(BodyReap *q, int64_t ns)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t at = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec + ns;
    ts.tv_sec = at / 1000000000;
    ts.tv_nsec = at % 1000000000;
    while (!q->stop &&
           pthread_cond_timedwait(&q->cv, &q->mu, &ts) != ETIMEDOUT) {
    }
    return q->stop;
}

/* Reaper thread: shrinks d's file REAP_STEP bytes at a time, each step
 * synced and followed by a pause twice its length, then deletes it. Once
 * stop is asked the rest goes at once. */
static void
reap_paced(BodyReap *q, BodyDead *d)
{
    int fd = open(d->path, O_WRONLY | O_CLOEXEC);
    struct stat st;
    uint64_t size = fd >= 0 && fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0;
    int stop = 0;

    while (fd >= 0 && size > 0 && !stop) {
        uint64_t to = size > REAP_STEP ? size - REAP_STEP : 0;
        int64_t t0 = util_now_ns();
        if (ftruncate(fd, (off_t)to) < 0 || fdatasync(fd) < 0) break;
        int64_t took = util_now_ns() - t0;
        uint64_t freed = size - to < d->size ? size - to : d->size;
        atomic_fetch_sub(&q->st_bytes, freed);
        d->size -= freed;
        size = to;
        pthread_mutex_lock(&q->mu);
        run_copies_locked(q); /* a copy-out waits one step at most */
        stop = pause_locked(q, took * 2 > REAP_GAP_MIN_NS ? took * 2
                                                          : REAP_GAP_MIN_NS);
        pthread_mutex_unlock(&q->mu);
    }
    if (fd >= 0) close(fd);
    reap_now(q, d);
}

/* Takes the oldest queued file into *d; under mu. Returns 0 if none. */
static int
take_locked(BodyReap *q, BodyDead *d)
{
    if (!q->n) return 0;
    *d = q->dead[0];
    memmove(q->dead, q->dead + 1, (q->n - 1) * sizeof *q->dead);
    q->n--;
    return 1;
}

static void *
reap_main(void *arg)
{
    BodyReap *q = arg;
    BodyDead d;

    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (!q->n && !q->ncopies && !q->stop)
            pthread_cond_wait(&q->cv, &q->mu);
        run_copies_locked(q);
        if (!q->n && !q->stop) continue;
        if (!take_locked(q, &d)) break; /* stopped, and nothing left */
        int stop = q->stop;
        pthread_mutex_unlock(&q->mu);
        if (stop)
            reap_now(q, &d);
        else
            reap_paced(q, &d);
        pthread_mutex_lock(&q->mu);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

int
bodyreap_start(BodyReap *q, char *err, size_t errcap)
{
    int e = pthread_create(&q->thread, NULL, reap_main, q);

    if (e) return util_fail(err, errcap, "pthread_create: %s", strerror(e));
    pthread_setname_np(q->thread, "rs-bodyreap");
    q->started = 1;
    return 0;
}

void
bodyreap_stop(BodyReap *q)
{
    BodyDead d;

    pthread_mutex_lock(&q->mu);
    q->stop = 1;
    atomic_fetch_sub(&q->st_copies, q->ncopies);
    q->ncopies = 0; /* their held files stay for the next start */
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
    if (q->started) {
        pthread_join(q->thread, NULL);
        q->started = 0;
    }
    pthread_mutex_lock(&q->mu);
    while (take_locked(q, &d)) { /* never started */
        pthread_mutex_unlock(&q->mu);
        reap_now(q, &d);
        pthread_mutex_lock(&q->mu);
    }
    pthread_mutex_unlock(&q->mu);
}

void
bodyreap_free(BodyReap *q)
{
    BodyDead d;

    while (take_locked(q, &d))
        free(d.path);
    free(q->dead);
    q->dead = NULL;
    q->n = q->cap = 0;
    free(q->copies);
    q->copies = NULL;
    q->ncopies = q->ccap = 0;
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
}
