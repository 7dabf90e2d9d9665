/* store/mut.c - the mutation thread and group commit (see store/mut.h). */
#include "store/mut.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "store/enc.h"
#include "store/raft.h"
#include "store/util.h"

/* How much nicer (nice(2)) the applier runs than the thread that started
 * it, capped at 19: see applier_nice. */
#define APPLIER_NICE 10

/* The window's bytes above which the applier thread writes it
 * (mut_window_added), and how long after a group fell due the applier
 * writes it when the mutation thread did not (it waits for input). */
#define APPLIER_BYTES ((size_t)4 << 20)
#define APPLIER_GRACE_NS 50000000

void
mut_init(StoreMut *m, StoreSyncMode mode, StoreShard *shard, int nshards,
         const StoreIO *io, Handoff *ho, StoreSync *sync, StoreAck *ack)
{
    m->mode = mode;
    m->shard = shard;
    m->nshards = nshards;
    m->io = io;
    m->ho = ho;
    m->sync = sync;
    m->ack = ack;
    pend_init(&m->pend);
    sbatch_init(&m->sb, shard, nshards);
    pthread_mutex_init(&m->pmu, NULL);
    pthread_mutex_init(&m->wmu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* pend's clock */
    pthread_cond_init(&m->acv, &ca);
    pthread_condattr_destroy(&ca);
    snapreq_init(&m->snapreq);
    idle_init(&m->idle);
}

void
mut_destroy(StoreMut *m)
{
    sbatch_destroy(&m->sb);
    propose_free(&m->prop);
    free(m->iov);
    m->iov = NULL;
    free(m->rbuf);
    m->rbuf = NULL;
    pend_destroy(&m->pend, m->ho);
    snapreq_destroy(&m->snapreq);
    idle_destroy(&m->idle);
    pthread_mutex_destroy(&m->pmu);
    pthread_mutex_destroy(&m->wmu);
    pthread_cond_destroy(&m->acv);
}

/* Adds the marks of shard i's batch: group, the number of the latest group
 * it holds (jgroup), and the
 * next_id high-water mark if the group's puts raised it. In the same batch
 * as the group, so a durable id is always covered by next_id and a shard
 * holds a group exactly when its jgroup is at least that group's. */
static void
mut_put_marks(StoreMut *m, int i, uint64_t group)
{
    sbatch_put_u64(&m->sb, i, "jgroup", group);
    m->shard[i].jgroup = group;
    sbatch_put_hwm(&m->sb, i);
}

/* Writes one shard's batch. sync=1 is a write and an fsync in one call. */
static int
mut_write_one(StoreMut *m, int i, int sync)
{
    size_t size = 0;
    char *msg = NULL;
    int64_t t0 = util_now_ns();

    rocksdb_writebatch_data(m->sb.batch[i], &size);
    int rc =
        m->io->write(m->io->ctx, m->shard[i].db, m->sb.batch[i], sync, &msg);
    if (sync) sync_note_synced_write(m->sync, (uint64_t)(util_now_ns() - t0));
    if (rc < 0) {
        ack_fail(m->ack, "write to", i, msg);
        return -1;
    }
    atomic_fetch_add_explicit(&m->ack->st_bytes, size, memory_order_relaxed);
    sync_mark(m->sync, i, !sync);
    return 0;
}

/* (mut.h) A group touching one shard is written with sync=1, measured as
 * fast as or faster than write + flush_wal; a group touching several is
 * written with sync=0 and then synced in parallel, sync_dirty. */
int
mut_write_group(StoreMut *m, int sync, uint64_t group)
{
    int n = 0, rc = 0, one;

    for (int i = 0; i < m->nshards; i++) {
        if (m->sb.touched[i]) {
            mut_put_marks(m, i, group);
            n++;
        }
    }
    one = sync && n == 1;
    for (int i = 0; i < m->nshards; i++) {
        if (!m->sb.touched[i]) continue;
        if (rc == 0) rc = mut_write_one(m, i, one);
        rocksdb_writebatch_clear(m->sb.batch[i]); /* after a failure: drop */
        m->sb.touched[i] = 0;
    }
    if (rc == 0 && sync && !one) rc = sync_dirty(m->sync);
    return rc;
}

/* Appends p[0..len) to the journal record's pieces (m->iov[*n]). */
static void
mut_iov_add(StoreMut *m, int *n, const unsigned char *p, size_t len)
{
    if (!len) return;
    if (*n >= m->iov_cap) {
        m->iov_cap = m->iov_cap ? 2 * m->iov_cap : 16;
        m->iov = util_xrealloc(m->iov, (size_t)m->iov_cap * sizeof *m->iov);
    }
    m->iov[(*n)++] = (struct iovec){(void *)p, len};
}

/* The journal record's pieces: m->iov[1..] the chunks' bytes ([0] is the
 * header's, journal_append), which hold puts with a ring reference
 * without their bodies already, as the journal does (store/enc.h,
 * store/journal.h); *skipped: the bytes of those bodies. Returns the
 * count with [0]. */
static int
mut_iov(StoreMut *m, const Chunk *chunks, size_t *skipped)
{
    int n = 1;
    EncRec r;

    *skipped = 0;
    for (const Chunk *c = chunks; c; c = c->next) {
        for (size_t off = c->start; c->nring && off < c->len;) {
            off += enc_rec_get(c->p + off, &r);
            if (r.ref) *skipped += r.body_len;
        }
        mut_iov_add(m, &n, c->p + c->start, c->len - c->start);
    }
    return n;
}

/* Adds the records of chunks whose op is not 0 (cancelled, store/pend.h)
 * to their shards' batches. */
static void
mut_apply_chunks(StoreMut *m, const Chunk *chunks)
{
    uint64_t seq;

    for (const Chunk *c = chunks; c; c = c->next) {
        for (size_t off = c->start; off < c->len;) {
            const unsigned char *p = c->p + off;
            if (!p[ENC_REC_OP]) /* cancelled: its id still raises next_id */
                off += sbatch_note_id(&m->sb, p);
            else
                off += sbatch_add(&m->sb, p, &seq);
        }
    }
}

/* Commit journal: writes the groups of the write-behind window that are
 * due (all with force; at least those up to group upto) to the shards,
 * one batch per shard for all of them, marked with the last one's number.
 * Once they reach past the last group of the journal file to be reused
 * next (cover_need), posts the WAL syncs that will let it be overwritten.
 * After a failure they are only dropped. wmu held (the applier thread or
 * the mutation thread); each group is taken from the window under pmu.
 * Returns 0, or -1 after a failure. */
static int
drain_locked(StoreMut *m, int force, uint64_t upto)
{
    int64_t now = util_now_ns();
    uint64_t seq = 0, group = 0;
    PendGroup *g;

    for (;;) {
        pthread_mutex_lock(&m->pmu);
        g = pend_take(&m->pend, now, force, upto, group != 0);
        pthread_mutex_unlock(&m->pmu);
        if (!g) break;
        if (!ack_is_failed(m->ack)) mut_apply_chunks(m, g->chunks);
        seq = g->seq;
        group = g->group;
        handoff_recycle(m->ho, g->chunks);
        free(g);
    }
    if (!group) return 0;
    if (ack_is_failed(m->ack) || mut_write_group(m, 0, group) < 0) {
        sbatch_clear(&m->sb); /* drop the batches */
        return -1;
    }
    ack_applied(m->ack, seq);
    m->drained = group;
    if (m->cover_posted < m->cover_need && group >= m->cover_need) {
        if (sync_cover_post(m->sync) < 0) return -1;
        m->cover_posted = group;
    }
    return 0;
}

/* drain_locked, taking wmu. */
static int
mut_drain_pend(StoreMut *m, int force, uint64_t upto)
{
    pthread_mutex_lock(&m->wmu);
    int rc = drain_locked(m, force, upto);
    pthread_mutex_unlock(&m->wmu);
    return rc;
}

/* Mutation thread, after a group joined the window (or when a group fell
 * due while it waited for input): while the window
 * holds at most APPLIER_BYTES, this thread writes what is due itself, in
 * the shadow of the replies it just published (at put c=1 the next put
 * comes a round trip later); above, the applier thread does (woken if
 * anything is due), so that a commit never waits behind the write of a
 * window full of large bodies. */
static void
mut_window_added(StoreMut *m)
{
    int big = 0;

    if (m->applier_on) {
        pthread_mutex_lock(&m->pmu);
        big = m->pend.bytes > APPLIER_BYTES;
        if (big && pend_due(&m->pend, util_now_ns()))
            pthread_cond_signal(&m->acv);
        pthread_mutex_unlock(&m->pmu);
    }
    if (big) return;
    if (!m->applier_on) {
        mut_drain_pend(m, 0, 0);
    } else if (pthread_mutex_trylock(&m->wmu) == 0) { /* else it writes */
        drain_locked(m, 0, 0);
        pthread_mutex_unlock(&m->wmu);
    }
}

/* Commit journal, before the next file is started: what it holds (groups
 * up to cover_need) must be in the shards and synced. Usually the window
 * drained past it long ago and the syncs posted then are done; else this
 * drains and syncs now. Then the file being left is the next to cover.
 * Returns 0, or -1 after a failure. */
static int
mut_cover(StoreMut *m)
{
    int rc = 0;

    pthread_mutex_lock(&m->wmu);
    if (m->cover_need && m->cover_posted < m->cover_need)
        rc = drain_locked(m, 0, m->cover_need);
    if (rc == 0 && m->cover_posted < m->cover_need) { /* nothing was due */
        rc = sync_cover_post(m->sync);
        m->cover_posted = m->drained;
    }
    if (rc == 0) rc = sync_cover_wait(m->sync);
    m->cover_need = m->appended;
    pthread_mutex_unlock(&m->wmu);
    return rc;
}

/* Commit journal, a group larger than a journal file: the window is
 * emptied, then the group is written and synced in the shards. */
static void
mut_commit_big(StoreMut *m, Chunk *chunks, size_t bytes, uint64_t seq)
{
    pthread_mutex_lock(&m->wmu);
    int rc = drain_locked(m, 1, 0);

    if (rc == 0) {
        mut_apply_chunks(m, chunks);
        rc = mut_write_group(m, 1, m->group);
    }
    if (rc < 0) sbatch_clear(&m->sb); /* drop the batches */
    handoff_done(m->ho, bytes);
    if (rc == 0) {
        m->drained = m->group;
        ack_applied(m->ack, seq);
        ack_publish(m->ack, seq, 1);
    }
    pthread_mutex_unlock(&m->wmu);
}

/* Commit journal: the group goes to the journal and, in STORE_SYNC_ALWAYS,
 * is synced (starting the next file first if it does not fit in this one:
 * the window emptied, then mut_cover), is published (as durable in
 * STORE_SYNC_ALWAYS; under -f MS the interval syncs the journal), and
 * then waits in the write-behind window (store/pend.h). Returns 1 if the
 * window took the chunks, 0 if the caller recycles them. */
static int
mut_commit_journal(StoreMut *m, Chunk *chunks, uint64_t nrec, size_t bytes,
                   uint64_t seq)
{
    Journal *j = m->journal;
    char *msg = NULL;
    uint64_t ns;

    size_t skipped; /* ring bodies: the journal holds their references */
    int n = mut_iov(m, chunks, &skipped);
    size_t jbytes = bytes - skipped;

    if (!journal_fits(j, jbytes) || nrec > UINT32_MAX) {
        mut_commit_big(m, chunks, bytes, seq);
        return 0;
    }
    if (journal_full(j, jbytes)) {
        if (mut_cover(m) < 0) goto fail;
        journal_roll(j);
    }
    int always = m->mode == STORE_SYNC_ALWAYS;
    if (journal_append(j, m->group, (uint32_t)nrec,
                       skipped ? JOURNAL_F_RING : 0, m->iov, n, jbytes, always,
                       &ns, &msg) < 0) {
        ack_fail(m->ack, "commit journal", -1, msg);
        goto fail;
    }
    if (always)
        sync_note_synced_write(m->sync, ns);
    else
        sync_journal_written(m->sync, j->cur);
    m->appended = m->group;
    handoff_done(m->ho, bytes);
    ack_publish(m->ack, seq, always);
    pthread_mutex_lock(&m->pmu);
    pend_add(&m->pend, chunks, m->group, seq, bytes, util_now_ns());
    pthread_mutex_unlock(&m->pmu);
    mut_window_added(m);
    return 1;
fail:
    handoff_done(m->ho, bytes);
    return 0;
}

/* The number, puts, puts with a ring reference and last seq of the
 * records in chunks; their bytes, a ring put's body included
 * (enc_rec_weight: the hand-off backlog and the window count it). */
static uint64_t
mut_scan(const Chunk *chunks, uint64_t *puts, uint64_t *ring, uint64_t *seq,
         size_t *bytes)
{
    uint64_t n = 0;
    EncRec r;

    for (const Chunk *c = chunks; c; c = c->next) {
        for (size_t off = c->start; off < c->len; n++) {
            off += enc_rec_get(c->p + off, &r);
            *puts += r.op == ENC_OP_PUT;
            *ring += r.ref != 0;
            *seq = r.seq;
            *bytes += enc_rec_weight(&r);
        }
    }
    return n;
}

void
mut_propose_direct(void *arg, Chunk *c, uint64_t seq)
{
    StoreMut *m = arg;

    if (!ack_is_failed(m->ack)) propose_chunks(&m->prop, m->ack, c, seq);
}

/* Commits one group (all chunks taken at once) and publishes its last seq.
 * After a failure input is only dropped. Returns 1 if the chunks were
 * kept (the commit journal's window), 0 if the caller recycles them. */
static int
mut_group(StoreMut *m, Chunk *chunks)
{
    uint64_t seq = 0, puts = 0;
    size_t bytes = 0;
    uint64_t ring = 0;
    uint64_t records = mut_scan(chunks, &puts, &ring, &seq, &bytes);
    int rc = -1;

    if (ack_is_failed(m->ack)) records = 0;
    /* the next group's gathering waits for as many records as this one
     * had (store/handoff.h), but puts whose bodies went through the body
     * ring come when the ring's sync ends, not a round trip after this
     * group's replies: they are not counted */
    m->prev_records = records - (records ? ring : 0);
    m->prev_puts = puts - (records ? ring : 0);
    if (records) {
        m->group++;
        atomic_fetch_add_explicit(&m->ack->st_records, records,
                                  memory_order_relaxed);
        atomic_fetch_add_explicit(&m->ack->st_groups, 1, memory_order_relaxed);
    }
    if (records && m->journal)
        return mut_commit_journal(m, chunks, records, bytes, seq);
    if (records) {
        mut_apply_chunks(m, chunks);
        rc = mut_write_group(m, m->mode == STORE_SYNC_ALWAYS, m->group);
    }
    if (rc == 0) ack_applied(m->ack, seq);
    /* Written: no longer backlog. Before the publication, so whoever sees
     * the sequence acknowledged also sees the backlog without it. */
    handoff_done(m->ho, bytes);
    if (rc == 0) ack_publish(m->ack, seq, m->mode == STORE_SYNC_ALWAYS);
    return 0;
}

/* What handoff_wait needs to know from this thread. */
static HandoffWait
mut_wait_args(StoreMut *m)
{
    const StoreSync *y = m->sync;

    pthread_mutex_lock(&m->pmu); /* the applier takes from it */
    int64_t pend = pend_deadline(&m->pend);
    pthread_mutex_unlock(&m->pmu);
    int interval = m->mode == STORE_SYNC_INTERVAL && sync_any_dirty(y);
    int64_t due = y->last_sync_mono + (int64_t)y->interval_ms * 1000000;
    int64_t at = interval && due < pend ? due : pend;
    int64_t idle = m->idle_on ? idle_deadline(&m->idle) : INT64_MAX;

    if (idle < at) at = idle;
    return (HandoffWait){
        .timed = at != INT64_MAX,
        .deadline_ns = at,
        .prev_records = m->prev_records,
        .prev_puts = m->prev_puts,
        .last_sync_dur = y->last_sync_dur,
    };
}

/* A backup's moment: with the commit journal the whole write-behind
 * window is written first (a put and its delete cancelled inside it are
 * both before the moment), so the shards hold every group published so
 * far and nothing more; then one snapshot per shard. */
static void
mut_backup_point(StoreMut *m)
{
    pthread_mutex_lock(&m->wmu);
    if (m->journal) drain_locked(m, 1, 0);
    snapreq_serve(&m->snapreq, m->shard, m->nshards,
                  atomic_load(&m->ack->applied_seq), ack_is_failed(m->ack));
    pthread_mutex_unlock(&m->wmu);
}

static void
kick_handoff(void *arg)
{
    handoff_kick(arg);
}

int
mut_snapshots(StoreMut *m, const rocksdb_snapshot_t **snaps, uint64_t *seq,
              char *err, size_t errcap)
{
    if (m->prop.fn || !m->started)
        return util_fail(err, errcap,
                         "no mutation thread writes this store's shards");
    return snapreq_take(&m->snapreq, kick_handoff, m->ho, snaps, m->nshards,
                        seq, err, errcap);
}

/* Lowers the calling thread's priority to APPLIER_NICE above the nice
 * value it inherited (so a daemon started under `nice -n 15` runs its
 * applier at 19, never above the rest of the process); a failure only
 * leaves the priority as it was. */
static void
applier_nice(void)
{
    errno = 0;
    int base = getpriority(PRIO_PROCESS, (id_t)gettid());
    if (base == -1 && errno != 0) return;
    int want = base + APPLIER_NICE;
    setpriority(PRIO_PROCESS, (id_t)gettid(), want > 19 ? 19 : want);
}

/* The applier thread (commit journal): writes the write-behind window's
 * groups to the shards as they fall due, so that the mutation thread's
 * journal commits never wait behind a RocksDB write (a group of large
 * bodies takes milliseconds of copying and checksums). */
static void *
applier_main(void *arg)
{
    StoreMut *m = arg;

    rocksdb_set_perf_level(rocksdb_disable);
    /* below the loop and the mutation thread: what it writes is published
     * already, so it may wait for a core (the window holds it meanwhile) */
    applier_nice();
    pthread_mutex_lock(&m->pmu);
    while (!m->applier_stop) {
        int64_t now = util_now_ns();
        int64_t at = pend_deadline(&m->pend);
        if (at != INT64_MAX) at += APPLIER_GRACE_NS;
        if (!(m->pend.bytes > APPLIER_BYTES && pend_due(&m->pend, now)) &&
            now < at) {
            if (at == INT64_MAX) {
                pthread_cond_wait(&m->acv, &m->pmu);
            } else {
                struct timespec ts = {at / 1000000000, at % 1000000000};
                pthread_cond_timedwait(&m->acv, &m->pmu, &ts);
            }
            continue;
        }
        pthread_mutex_unlock(&m->pmu);
        mut_drain_pend(m, 0, 0);
        pthread_mutex_lock(&m->pmu);
    }
    pthread_mutex_unlock(&m->pmu);
    return NULL;
}

/* Stops and joins the applier thread, if it runs. */
static void
applier_stop(StoreMut *m)
{
    if (!m->applier_on) return;
    pthread_mutex_lock(&m->pmu);
    m->applier_stop = 1;
    pthread_cond_signal(&m->acv);
    pthread_mutex_unlock(&m->pmu);
    pthread_join(m->applier, NULL);
    m->applier_on = 0;
}

/* The rest round's step (store/idle.h): the shards' written bytes, and
 * whether writes are still to come: a group was just taken (grouped), or
 * the write-behind window still holds groups (looked at under pmu only
 * when neither that nor new bytes re-arm the round anyway). */
static void
mut_idle(StoreMut *m, int grouped)
{
    uint64_t written =
        atomic_load_explicit(&m->ack->st_bytes, memory_order_relaxed);
    int busy = grouped;

    if (!busy && m->journal && written == m->idle.seen) {
        pthread_mutex_lock(&m->pmu);
        busy = pend_deadline(&m->pend) != INT64_MAX;
        pthread_mutex_unlock(&m->pmu);
    }
    idle_step(&m->idle, m->shard, m->nshards, written, busy, util_now_ns());
}

void
mut_run(StoreMut *m)
{
    int stop = 0;

    for (;;) {
        HandoffWait w = mut_wait_args(m);
        Chunk *group = handoff_wait(m->ho, &w, &stop);
        if (group && !mut_group(m, group)) handoff_recycle(m->ho, group);
        /* a reader waits for bodies still in the window: write it all */
        int asked = atomic_exchange(&m->ack->drain_asked, 0);
        if (m->journal && asked)
            mut_drain_pend(m, 1, 0);
        else if (m->journal)
            mut_window_added(m); /* what fell due meanwhile */
        if (m->mode == STORE_SYNC_INTERVAL) sync_interval(m->sync);
        if (snapreq_pending(&m->snapreq)) mut_backup_point(m);
        if (stop && !group) break;
        if (m->idle_on) mut_idle(m, group != NULL);
    }
    snapreq_stop(&m->snapreq);
    applier_stop(m);
    mut_drain_pend(m, 1, 0);
    sync_final(m->sync);
}

static void *
mut_main(void *arg)
{
    /* RocksDB's per-thread perf context counts by default; its thread-local
     * accesses (__tls_get_addr in a shared library) took 6% of this
     * thread's samples on the cycle (perf). Nothing reads the counts. */
    rocksdb_set_perf_level(rocksdb_disable);
    mut_run(arg);
    return NULL;
}

int
mut_start(StoreMut *m, char *err, size_t errcap)
{
    int e;

    if (m->journal && !m->prop.fn) {
        if ((e = pthread_create(&m->applier, NULL, applier_main, m)))
            return util_fail(err, errcap, "pthread_create: %s", strerror(e));
        pthread_setname_np(m->applier, "rs-applier");
        m->applier_on = 1;
    }
    /* a round after start too: the journal's replay filled memtables */
    m->idle_on = !m->prop.fn;
    m->idle.armed = 1;
    m->idle.quiet_from = util_now_ns();
    e = pthread_create(&m->thread, NULL, mut_main, m);

    if (e) {
        m->idle_on = 0;
        return util_fail(err, errcap, "pthread_create: %s", strerror(e));
    }
    pthread_setname_np(m->thread, "rs-mutation"); /* top -H, perf */
    m->started = 1;
    return 0;
}

void
mut_join(StoreMut *m)
{
    if (m->started)
        pthread_join(m->thread, NULL);
    else
        mut_run(m); /* never started: drain and sync on this thread */
    m->started = 0;
}
