/* store/handoff.c - the hand-off queue (see store/handoff.h). */
#include "store/handoff.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/util.h"

/* Emptied hand-off chunks are recycled, up to CHUNK_SPARE_MAX of them and
 * CHUNK_SPARE_BYTES in all, unless a burst grew them beyond CHUNK_KEEP_MAX
 * (then they are freed, so one burst does not pin memory for ever). The
 * commit journal's write-behind window (store/pend.h) gives chunks back
 * in bulk, up to its 8 MiB: keeping them saves the loop a malloc and fresh
 * pages per chunk. */
#define CHUNK_MIN 4096
#define CHUNK_KEEP_MAX ((size_t)4 << 20)
#define CHUNK_SPARE_MAX 4096
#define CHUNK_SPARE_BYTES ((size_t)16 << 20)

void
handoff_init(Handoff *h, int always, const _Atomic uint64_t *durable_seq)
{
    pthread_condattr_t ca;

    h->always = always;
    h->durable_seq = durable_seq;
    atomic_init(&h->split_nrec, UINT64_MAX);
    h->trial.on = 1;
    h->queue_tail = &h->queue;
    pthread_mutex_init(&h->mu, NULL);
    /* Interval deadlines are on the monotonic clock. */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&h->cv, &ca);
    pthread_condattr_destroy(&ca);
}

static void
chunk_free(Chunk *c)
{
    if (!c->view) free(c->p);
    free(c);
}

static void
chunk_list_free(Chunk *c)
{
    for (Chunk *next; c; c = next) {
        next = c->next;
        chunk_free(c);
    }
}

void
handoff_destroy(Handoff *h)
{
    if (h->cur) chunk_free(h->cur);
    chunk_list_free(h->queue);
    chunk_list_free(h->spare);
    h->cur = h->queue = h->spare = NULL;
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cv);
}

/* ---- loop side ---- */

unsigned char *
handoff_reserve(Handoff *h, size_t need)
{
    Chunk *c = h->cur;

    if (!c) {
        c = h->cur = util_xrealloc(NULL, sizeof *c);
        *c = (Chunk){0};
    }
    if (c->cap - c->len < need) {
        size_t cap = c->cap ? c->cap : CHUNK_MIN;
        while (cap - c->len < need)
            cap *= 2;
        c->p = util_xrealloc(c->p, cap);
        c->cap = cap;
    }
    return c->p + c->len;
}

void
handoff_commit(Handoff *h, unsigned char *p, const EncRec *r)
{
    unsigned ref = enc_rec_ref(r->flag);
    size_t n = ENC_REC_HDR + (size_t)r->meta_len + (ref ? ref : r->body_len);

    enc_rec_put(p, r);
    h->cur->len += n;
    h->cur->nrec++;
    h->cur->nring += ref != 0;
    h->added_seq = r->seq;
    /* a ring put's body counts (enc_rec_weight) */
    atomic_fetch_add_explicit(&h->backlog, n + (ref ? r->body_len : 0),
                              memory_order_relaxed);
    /* Splitting: hand over each half-crowd as soon as it is complete, so
     * the mutation thread can commit it while the loop reads the rest. */
    if (!h->hold && h->cur->nrec >= atomic_load_explicit(&h->split_nrec,
                                                         memory_order_relaxed))
        handoff_flush(h);
}

void
handoff_hold(Handoff *h, int on)
{
    h->hold = on;
    if (!on && h->cur &&
        h->cur->nrec >=
            atomic_load_explicit(&h->split_nrec, memory_order_relaxed))
        handoff_flush(h);
}

/* O(1): links the chunk being built onto the queue and takes a spare one
 * (or none: the next add allocates). */
void
handoff_flush(Handoff *h)
{
    Chunk *c = h->cur;

    if (!c || !c->len) return;
    c->next = NULL;
    if (h->direct) {
        size_t bytes = c->len - c->start;
        h->direct(h->direct_arg, c, h->added_seq);
        c->len = c->start = c->nrec = c->nring = 0;
        atomic_fetch_sub_explicit(&h->backlog, bytes, memory_order_relaxed);
        return;
    }
    pthread_mutex_lock(&h->mu);
    if (h->always) { /* for split_update */
        uint64_t inflight =
            h->added_seq -
            atomic_load_explicit(h->durable_seq, memory_order_relaxed);
        if (inflight > h->inflight_peak) h->inflight_peak = inflight;
    }
    *h->queue_tail = c;
    h->queue_tail = &c->next;
    h->queued_nrec += c->nrec;
    atomic_store_explicit(&h->has_input, 1, memory_order_release);
    h->cur = h->spare;
    if (h->spare) {
        h->spare_bytes -= h->spare->cap;
        h->spare = h->spare->next;
        h->nspare--;
    }
    /* Wake the thread only when it sleeps and has what it waits for: a
     * futex wake per loop iteration while it gathers a group would cost
     * more than the group saves. Signalled after the unlock, so the thread
     * does not wake only to block on mu (a second wake-up on the reply's
     * path, seen in strace at c=1). */
    int wake = h->sleeping && h->queued_nrec >= h->wake_at_nrec;
    pthread_mutex_unlock(&h->mu);
    if (wake) pthread_cond_signal(&h->cv);
}

void
handoff_note_active(Handoff *h, unsigned n)
{
    atomic_store_explicit(&h->active, n, memory_order_relaxed);
}

size_t
handoff_backlog(const Handoff *h)
{
    return atomic_load_explicit(&h->backlog, memory_order_relaxed);
}

/* ---- mutation side ---- */

/* Group commit gathering (STORE_SYNC_ALWAYS, mu held, something queued).
 * Clients whose replies the previous sync released answer with their next
 * commands a round trip later; starting the next sync before they arrive
 * would leave them for the sync after, halving what each sync carries. So
 * wait until as many records are queued as the previous group had (or, when
 * splitting, as a half-crowd has, if fewer), but at most half the latest
 * sync time (capped at GATHER_MAX_NS): a lone client never waits (its group
 * had one record), a crowd fills each group. */
#define GATHER_MAX_NS 500000
static void
gather(Handoff *h, const HandoffWait *w)
{
    uint64_t target = w->prev_records;
    uint64_t split = atomic_load_explicit(&h->split_nrec, memory_order_relaxed);
    if (split < target) target = split;
    uint64_t wait = w->last_sync_dur / 2;
    if (wait > GATHER_MAX_NS) wait = GATHER_MAX_NS;
    int64_t deadline = util_now_ns() + (int64_t)wait;
    struct timespec ts = {deadline / 1000000000, deadline % 1000000000};

    h->wake_at_nrec = target;
    h->sleeping = 1;
    while (!h->stop && h->queued_nrec < target) {
        if (pthread_cond_timedwait(&h->cv, &h->mu, &ts) == ETIMEDOUT) break;
    }
    h->sleeping = 0;
}

/* Whether to split a crowd that may be split (split_update), by trial
 * (store/handoff.h, SplitTrial). Splitting's gain depends on the machine
 * and the day: on this 2-core VM on 2026-11-25, always splitting made put
 * c=50 0.85x as fast as never splitting (once both cores are busy, a
 * second fsync's kernel CPU is missed), and at c=20 and c=30 the two were
 * within the noise, while an earlier day's faster cores gained at c=20 to
 * c=50. So the mutation thread measures: an epoch of SPLIT_EPOCH_NS with
 * splitting on, two with it off, one on (the order cancels a steady drift
 * of the load), then it keeps the faster way for SPLIT_EXPLOIT epochs; a
 * tie keeps it off (one fsync a round, less CPU). An epoch that ran over
 * three times as long as asked (the load paused), or a crowd that may not
 * be split, starts the trial over. Default mode, 5 x 3 s cells alternated,
 * means: put c=50 74.2k/s by trial, 63.9k/s always splitting, 75.3k/s
 * never; put c=30 54.8k, 53.9k, 55.4k; put c=20 45.5k, 48.8k, 44.9k (and
 * 47.8k always, 47.4k never in 6 x 4 s cells: a tie). BENCHMARKS.md. */
static const int split_probe[4] = {1, 0, 0, 1};
int
split_trial_step(SplitTrial *t, int eligible, int64_t now_ns, uint64_t seq)
{
    int64_t took = now_ns - t->epoch_at;

    if (!eligible || took > 3 * SPLIT_EPOCH_NS) {
        *t = (SplitTrial){.epoch_at = now_ns, .seq_at = seq, .on = t->on};
        return eligible && split_probe[0];
    }
    if (took < SPLIT_EPOCH_NS)
        return t->phase < 4 ? split_probe[t->phase] : t->on;
    if (t->phase < 4)
        t->rate[split_probe[t->phase]] +=
            (double)(seq - t->seq_at) * 1e9 / (double)took;
    if (++t->phase == 4) t->on = t->rate[1] > t->rate[0];
    if (t->phase >= 4 + SPLIT_EXPLOIT) {
        t->phase = 0;
        t->rate[0] = t->rate[1] = 0;
    }
    t->epoch_at = now_ns;
    t->seq_at = seq;
    return t->phase < 4 ? split_probe[t->phase] : t->on;
}

/* Group splitting (STORE_SYNC_ALWAYS). Clients that each wait for their
 * reply come back as a crowd: in one group, the loop's work for the crowd
 * (replies out, next commands in) and the fsync take turns, and each waits
 * for the other. Split into two halves, one half is committed while the
 * loop serves the other, at the price of two fsyncs per round. Measured on
 * 2 cores (put, 100-byte jobs, clients waiting for each reply): a net gain
 * from about 10 clients on (up to 1.5x at 20), a loss at 2-4 clients, so
 * crowds under SPLIT_MIN records are not split. Consumers are not split
 * either: a delete comes after a reserve, so the loop does about twice the
 * work per record, the loop's half then outlasts the fsync, and the second
 * fsync's CPU (~130 us of kernel time per sync in this VM) is missed on 2
 * cores: splitting lost 9% on drain (reserve + delete) and 6% on cycle
 * (half puts). So only groups of at least SPLIT_PUT_PCT percent puts (the
 * previous group's share) are split. The crowd is the most records found
 * in flight at a hand-off since the previous group; the estimate follows a
 * rise at once and a fall slowly. */
#define SPLIT_MIN 12
#define SPLIT_PUT_PCT 75
static void
split_update(Handoff *h, const HandoffWait *w) /* mu held */
{
    uint64_t seen = h->inflight_peak;

    h->inflight_peak = 0;
    h->crowd = seen > h->crowd ? seen : h->crowd - h->crowd / 64;
    int eligible = h->crowd >= SPLIT_MIN &&
                   w->prev_puts * 100 >= w->prev_records * SPLIT_PUT_PCT;
    uint64_t durable =
        atomic_load_explicit(h->durable_seq, memory_order_relaxed);
    int split = split_trial_step(&h->trial, eligible, util_now_ns(), durable);
    atomic_store_explicit(&h->split_nrec,
                          split ? (h->crowd + 1) / 2 : UINT64_MAX,
                          memory_order_relaxed);
}

/* Cuts the first n records (0 < n < c->nrec) off the queued chunk c as a
 * view: a new Chunk pointing into c's buffer, no byte copied; c keeps the
 * rest. Costs n header reads and one small allocation, so the time under mu
 * is bounded by the records taken, whatever c's size (issue 12, item 7:
 * copying the rest made taking a large chunk in half-crowds quadratic).
 * Safe because a queued chunk's buffer never moves (the loop only grows
 * h->cur) and the view is committed and dropped (handoff_recycle) before
 * the mutation thread takes c itself. */
static Chunk *
chunk_cut(Chunk *c, size_t n)
{
    size_t off = c->start;

    EncRec r = {0};
    for (size_t i = 0; i < n; i++)
        off += enc_rec_get(c->p + off, &r);
    uint64_t last = r.seq; /* the records of one sequence stay together */
    while (off < c->len && (enc_rec_get(c->p + off, &r), r.seq == last)) {
        off += enc_rec_len(c->p + off);
        n++;
    }
    Chunk *v = util_xrealloc(NULL, sizeof *v);
    *v = (Chunk){.p = c->p + c->start,
                 .len = off - c->start,
                 .cap = off - c->start,
                 .nrec = n,
                 .nring = c->nring,
                 .view = 1};
    c->start = off;
    c->nrec -= n;
    return v;
}

/* Unlinks and returns the queue's first max records or fewer (mu held):
 * whole chunks, then, if the next one holds more than what is left of max,
 * a view of its first records (chunk_cut). */
static Chunk *
queue_take(Handoff *h, uint64_t max)
{
    Chunk *head = NULL, **tail = &head;
    uint64_t took = 0;

    while (h->queue && took + h->queue->nrec <= max) {
        Chunk *c = h->queue;
        h->queue = c->next;
        c->next = NULL;
        *tail = c;
        tail = &c->next;
        took += c->nrec;
    }
    if (h->queue && took < max) {
        *tail = chunk_cut(h->queue, (size_t)(max - took));
        took += (*tail)->nrec;
    }
    if (!h->queue) {
        h->queue_tail = &h->queue;
        atomic_store_explicit(&h->has_input, 0, memory_order_relaxed);
    }
    h->queued_nrec -= took;
    return head;
}

/* Input spin (issue 14, item 3): with nothing queued, the mutation thread
 * polls has_input a little longer than input has lately taken to come
 * before it sleeps on cv, so that a lone client's next command finds it
 * awake: a futex wake-up of an idle core costs its reply tens of
 * microseconds in a VM. Gaps longer than SPIN_MAX_NS sleep at once. The
 * gap is measured from here to the input's arrival, sleep or not. Only at
 * low concurrency (the previous group had at most SPIN_MAX_RECORDS
 * records, and at most SPIN_MAX_ACTIVE connections sent input in the
 * loop's latest window of a millisecond): with many clients the loop and
 * the clients need both cores. A spin took a third of the mutation
 * thread's samples at put c=50 (perf) while throughput fell; on the cycle
 * at c=50, whose groups are as small as a lone client's once the commit
 * journal keeps them from RocksDB under -f 50, spinning took 17% of all
 * samples, and not spinning there went from 50k to 61k cycles/s. Each
 * round of the spin yields its core (sched_yield), so that a thread
 * sharing it (the client, the loop) runs first: with the loop and the
 * mutation thread pinned to one core, put c=1 made 1.5k/s while neither
 * this spin nor the loop's (server.c, ack_spin) yielded, 4.5k/s once both
 * did. The limits were 2 records and 2 connections until issue 30 raised
 * them with the loop's (server.c, ACK_SPIN_MAX_ACTIVE: 2 to 16 clients
 * gained 20-60%); a window that read large bodies counts as busy
 * (UINT_MAX connections, server.c ACTIVE_HEAVY_BYTES). */
#define SPIN_MAX_NS 300000
#define SPIN_MIN_NS 20000
#define SPIN_MAX_RECORDS 16
#define SPIN_MAX_ACTIVE 16
static void
spin_for_input(Handoff *h, const HandoffWait *w, int64_t t0)
{
    if (atomic_load_explicit(&h->has_input, memory_order_acquire) ||
        h->gap_ns > SPIN_MAX_NS || w->prev_records > SPIN_MAX_RECORDS ||
        atomic_load_explicit(&h->active, memory_order_relaxed) >
            SPIN_MAX_ACTIVE)
        return;
    int64_t end = t0 + h->gap_ns + h->gap_ns / 2 + SPIN_MIN_NS;
    while (!atomic_load_explicit(&h->has_input, memory_order_acquire) &&
           util_now_ns() < end) {
        for (int i = 0; i < 64; i++)
            util_cpu_relax();
        sched_yield(); /* a client on this core runs first */
    }
}

Chunk *
handoff_wait(Handoff *h, const HandoffWait *w, int *stop)
{
    int64_t deadline = w->deadline_ns;
    struct timespec ts = {deadline / 1000000000, deadline % 1000000000};
    int64_t t0 = util_now_ns();
    int had_input = atomic_load_explicit(&h->has_input, memory_order_acquire);

    spin_for_input(h, w, t0);
    pthread_mutex_lock(&h->mu);
    if (h->always) split_update(h, w);
    h->wake_at_nrec = 1;
    h->sleeping = 1;
    while (!h->queue && !h->stop && !h->kicked) {
        if (!w->timed) {
            pthread_cond_wait(&h->cv, &h->mu);
        } else if (pthread_cond_timedwait(&h->cv, &h->mu, &ts) == ETIMEDOUT) {
            break;
        }
    }
    h->sleeping = 0;
    h->kicked = 0;
    if (h->queue && !had_input)
        h->gap_ns += (util_now_ns() - t0 - h->gap_ns) / 8;
    if (h->queue && h->always) gather(h, w);
    Chunk *c = queue_take(
        h, atomic_load_explicit(&h->split_nrec, memory_order_relaxed));
    *stop = h->stop && !h->queue;
    pthread_mutex_unlock(&h->mu);
    return c;
}

void
handoff_direct(Handoff *h, void (*fn)(void *arg, Chunk *c, uint64_t seq),
               void *arg)
{
    h->direct = fn;
    h->direct_arg = arg;
}

void
handoff_done(Handoff *h, size_t bytes)
{
    atomic_fetch_sub_explicit(&h->backlog, bytes, memory_order_relaxed);
}

void
handoff_recycle(Handoff *h, Chunk *chunks)
{
    Chunk *drop = NULL, *next;

    pthread_mutex_lock(&h->mu);
    for (Chunk *c = chunks; c; c = next) {
        next = c->next;
        c->len = 0;
        c->nrec = 0;
        c->nring = 0;
        c->start = 0;
        if (!c->view && h->nspare < CHUNK_SPARE_MAX &&
            c->cap <= CHUNK_KEEP_MAX &&
            h->spare_bytes + c->cap <= CHUNK_SPARE_BYTES) {
            h->spare_bytes += c->cap;
            c->next = h->spare;
            h->spare = c;
            h->nspare++;
        } else {
            c->next = drop;
            drop = c;
        }
    }
    pthread_mutex_unlock(&h->mu);
    chunk_list_free(drop);
}

void
handoff_drop_spares(Handoff *h)
{
    pthread_mutex_lock(&h->mu);
    Chunk *drop = h->spare;
    h->spare = NULL;
    h->nspare = 0;
    h->spare_bytes = 0;
    pthread_mutex_unlock(&h->mu);
    chunk_list_free(drop);
}

void
handoff_kick(Handoff *h)
{
    pthread_mutex_lock(&h->mu);
    h->kicked = 1;
    pthread_cond_signal(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

void
handoff_stop(Handoff *h)
{
    pthread_mutex_lock(&h->mu);
    h->stop = 1;
    pthread_cond_signal(&h->cv);
    pthread_mutex_unlock(&h->mu);
}
