/* Unit tests for the loop-side data structures: heap, ptrset (beanstalkd's
 * ordering rules), job table, tube registry and names, the oldest-ready
 * heap. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <malloc.h>

#include <cmocka.h>

#include "base/bytes.h"
#include "base/heap.h"
#include "base/ptrset.h"
#include "conn/conn.h"
#include "queue/job.h"
#include "queue/queue.h"
#include "queue/readyage.h"
#include "queue/timers.h"
#include "queue/tube.h"

static void
test_heap_order_and_remove(void **state)
{
    (void)state;
    enum { N = 1000 };
    static Job jobs[N];
    Heap h;
    heap_init(&h, job_pri_less, job_setpos);
    srand(7);
    for (int i = 0; i < N; i++) {
        jobs[i].id = (uint64_t)i + 1;
        jobs[i].pri = (uint32_t)(rand() % 10);
        assert_int_equal(heap_insert(&h, &jobs[i]), 0);
    }
    /* remove every third job by its index: the rest must stay ordered */
    for (int i = 0; i < N; i += 3)
        assert_ptr_equal(heap_remove(&h, jobs[i].heap_index), &jobs[i]);
    Job *prev = NULL;
    size_t n = 0;
    while (h.len) {
        Job *j = heap_remove(&h, 0);
        if (prev)
            assert_true(prev->pri < j->pri ||
                        (prev->pri == j->pri && prev->id < j->id));
        assert_true((j->id - 1) % 3 != 0);
        prev = j;
        n++;
    }
    assert_int_equal(n, N - (N + 2) / 3);
    heap_free(&h);
}

/* heap_first lists exactly what the next removals of the top return,
 * also after removals left the array far from sorted. */
static void
test_heap_first(void **state)
{
    (void)state;
    enum { N = 5000 };
    static Job jobs[N];
    static void *first[HEAP_FIRST_MAX];
    Heap h;
    heap_init(&h, job_pri_less, job_setpos);
    srand(11);
    assert_int_equal(heap_first(&h, first, 10), 0);
    for (int i = 0; i < N; i++) {
        jobs[i].id = (uint64_t)i + 1;
        jobs[i].pri = (uint32_t)(rand() % 3);
        assert_int_equal(heap_insert(&h, &jobs[i]), 0);
    }
    for (int round = 0; round < 20; round++) {
        size_t k = round % 2 ? 300 : (size_t)(round * 7 + 1);
        size_t n = heap_first(&h, first, k);
        assert_int_equal(n, k > HEAP_FIRST_MAX ? HEAP_FIRST_MAX : k);
        for (size_t i = 0; i < n; i++)
            assert_ptr_equal(heap_remove(&h, 0), first[i]);
    }
    heap_free(&h);
}

static void
test_heap_fix(void **state)
{
    (void)state;
    Job a = {.id = 1, .deadline = 10}, b = {.id = 2, .deadline = 20};
    Heap h;
    heap_init(&h, job_deadline_less, job_setpos);
    heap_insert(&h, &a);
    heap_insert(&h, &b);
    assert_ptr_equal(heap_peek(&h), &a);
    a.deadline = 30; /* touch moved a's deadline */
    heap_fix(&h, a.heap_index);
    assert_ptr_equal(heap_peek(&h), &b);
    heap_free(&h);
}

/* dec_u64 (the INSERTED and RESERVED lines' numbers) writes what
 * printf's %llu does: 0, every power of ten and its neighbours, the max. */
static void
test_dec_u64(void **state)
{
    (void)state;
    char got[DEC_U64_MAX + 1], want[32];
    uint64_t p = 1;
    uint64_t vals[64] = {0, UINT64_MAX, UINT64_MAX - 1, 4294967295u};
    size_t nv = 4;
    for (int i = 0; i < 19; i++, p *= 10) {
        vals[nv++] = p;
        vals[nv++] = p - 1;
        vals[nv++] = p + 7;
    }
    for (size_t i = 0; i < nv; i++) {
        memset(got, 'x', sizeof got);
        size_t n = dec_u64(got, vals[i]);
        int w =
            snprintf(want, sizeof want, "%llu", (unsigned long long)vals[i]);
        assert_int_equal(n, (size_t)w);
        assert_memory_equal(got, want, n);
        assert_int_equal(got[n], 'x'); /* nothing past it */
    }
}

/* A tube's waiting set serves in ptrset's (beanstalkd's) order, keeps
 * every entry's index in its *at as entries move, marks a removed entry
 * SIZE_MAX, and keeps its array when it empties. */
static void
test_waitset_order_and_positions(void **state)
{
    (void)state;
    WaitSet w = {0};
    struct Session *se[4];
    size_t at[4];
    for (int i = 0; i < 4; i++) {
        se[i] = (struct Session *)&at[i]; /* any distinct pointers */
        assert_int_equal(waitset_add(&w, se[i], &at[i]), 0);
        assert_int_equal(at[i], (size_t)i);
    }
    assert_ptr_equal(waitset_take(&w), se[0]); /* [3 1 2], cursor 1 */
    assert_int_equal(at[0], SIZE_MAX);
    assert_int_equal(at[3], 0);
    waitset_delete(&w, at[1]); /* [3 2]: 2 moves into 1's slot */
    assert_int_equal(at[1], SIZE_MAX);
    assert_int_equal(at[2], 1);
    assert_ptr_equal(w.items[at[2]].se, se[2]);
    assert_ptr_equal(waitset_take(&w), se[2]); /* cursor 1 % 2 = 1 */
    waitset_delete(&w, at[3]);                 /* the last one: nothing moves */
    assert_int_equal(w.len, 0);
    assert_non_null(w.items);
    assert_null(waitset_take(&w));
    for (int i = 0; i < 4; i++) /* the cursor (2) survives, as in 1.12 */
        waitset_add(&w, se[i], &at[i]);
    assert_ptr_equal(waitset_take(&w), se[2]);
    assert_ptr_equal(waitset_take(&w), se[0]); /* [0 1 3], cursor 3 % 3 */
    waitset_free(&w);
    assert_null(w.items);
}

/* beanstalkd serves four reservers waiting on one tube 1st, 2nd, 4th, 3rd
 * and reorders a watch list on removal: both follow from ptrset. */
static void
test_ptrset_beanstalkd_order(void **state)
{
    (void)state;
    PtrSet s = {0};
    char x[4];
    for (int i = 0; i < 4; i++)
        ptrset_append(&s, &x[i]);
    assert_ptr_equal(ptrset_take(&s), &x[0]);
    assert_ptr_equal(ptrset_take(&s), &x[1]);
    assert_ptr_equal(ptrset_take(&s), &x[3]);
    assert_ptr_equal(ptrset_take(&s), &x[2]);
    assert_null(ptrset_take(&s));
    for (int i = 0; i < 4; i++) /* default, a, b, c; ignore default */
        ptrset_append(&s, &x[i]);
    assert_int_equal(ptrset_remove(&s, &x[0]), 1);
    assert_ptr_equal(s.items[0], &x[3]);
    assert_ptr_equal(s.items[1], &x[1]);
    assert_ptr_equal(s.items[2], &x[2]);
    assert_int_equal(ptrset_remove(&s, &x[0]), 0);
    ptrset_free(&s);
}

static void
test_jobtable(void **state)
{
    (void)state;
    enum { N = 20000 };
    JobTable t = {0};
    Job *jobs = calloc(N, sizeof *jobs);
    for (int i = 0; i < N; i++) {
        jobs[i].id = (uint64_t)i * 7 + 1;
        assert_int_equal(jobtable_insert(&t, &jobs[i]), 0);
    }
    assert_int_equal(t.len, N);
    for (int i = 0; i < N; i++)
        assert_ptr_equal(jobtable_find(&t, (uint64_t)i * 7 + 1), &jobs[i]);
    assert_null(jobtable_find(&t, 2));
    for (int i = 0; i < N; i += 2)
        jobtable_remove(&t, &jobs[i]);
    for (int i = 0; i < N; i++)
        assert_true((jobtable_find(&t, jobs[i].id) != NULL) == (i % 2 == 1));
    for (int i = 1; i < N; i += 2)
        jobtable_remove(&t, &jobs[i]);
    assert_int_equal(t.len, 0);
    jobtable_free(&t);
    free(jobs);
}

/* ---- the job table's overflow hash against a reference
 * ----------------------------------- */

enum { REF_JOBS = 70000 }; /* job k has id 5k + 1; the table tops at 2^17 */

typedef struct Ref {
    JobHash t;
    Job *jobs;
    unsigned char *in;   /* in[k]: job k is in the table */
    unsigned char *seen; /* jobhash_each visits per job */
    size_t *order, *pos; /* order[0..len) are the jobs in, pos its inverse */
    size_t len;
    uint64_t rng;
    size_t migrations, removes_mid, finds_mid; /* coverage */
    size_t ops_in_migration; /* calls since the current one began */
} Ref;

static uint64_t
ref_rand(Ref *r)
{
    uint64_t z = (r->rng += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static void
count_visit(Job *j, void *arg)
{
    Ref *r = arg;
    r->seen[j - r->jobs]++;
}

/* Every job is found, every absent id is not, jobhash_each visits each job
 * of the table exactly once and nothing else, and len agrees. */
static void
ref_check_all(Ref *r)
{
    memset(r->seen, 0, REF_JOBS);
    jobhash_each(&r->t, count_visit, r);
    for (size_t k = 0; k < REF_JOBS; k++) {
        assert_int_equal(r->seen[k], r->in[k]);
        assert_ptr_equal(jobhash_find(&r->t, r->jobs[k].id),
                         r->in[k] ? &r->jobs[k] : NULL);
        assert_null(jobhash_find(&r->t, r->jobs[k].id + 2));
    }
    assert_int_equal(r->t.len, r->len);
}

/* Marks job k in (or out) in the reference, keeping order[0..len) the
 * jobs in. */
static void
ref_mark(Ref *r, size_t k, int in)
{
    size_t to = in ? r->len : r->len - 1, other = r->order[to];
    r->order[r->pos[k]] = other, r->pos[other] = r->pos[k];
    r->order[to] = k, r->pos[k] = to;
    r->in[k] = (unsigned char)in;
    r->len += in ? 1 : (size_t)-1;
}

/* One insert of a random absent job (if grow) or remove of a random
 * present one, at times a remove of an absent one (a no-op), then the cheap
 * checks; a full check whenever a migration starts or ends. */
static void
ref_step(Ref *r, int grow)
{
    uint64_t x = ref_rand(r);
    size_t k, out = REF_JOBS - r->len;
    int was = r->t.old != NULL, changed = 0;
    if (x % 16 == 0 && out) { /* absent: no change */
        k = r->order[r->len + x / 16 % out];
        jobhash_remove(&r->t, &r->jobs[k]);
    } else if (grow && out) {
        k = r->order[r->len + x % out];
        assert_int_equal(jobhash_insert(&r->t, &r->jobs[k]), 0);
        ref_mark(r, k, 1), changed = 1;
    } else if (!grow && r->len) {
        k = r->order[x % r->len];
        r->removes_mid += was;
        jobhash_remove(&r->t, &r->jobs[k]);
        ref_mark(r, k, 0), changed = 1;
    } else {
        return;
    }
    assert_int_equal(r->t.len, r->len);
    assert_ptr_equal(jobhash_find(&r->t, r->jobs[k].id),
                     r->in[k] ? &r->jobs[k] : NULL);
    x = ref_rand(r) % REF_JOBS;
    r->finds_mid += r->t.old != NULL;
    assert_ptr_equal(jobhash_find(&r->t, r->jobs[x].id),
                     r->in[x] ? &r->jobs[x] : NULL);
    if (!was && r->t.old) r->migrations++;
    /* bounded: a migration ends within nold / JOBHASH_STEP changes */
    if (!r->t.old) r->ops_in_migration = 0;
    r->ops_in_migration += changed && r->t.old;
    if (r->t.old) assert_true(r->ops_in_migration <= r->t.nold / JOBHASH_STEP);
    if (was != (r->t.old != NULL)) ref_check_all(r);
}

/* Random inserts and removes against a reference, swinging the job count
 * between targets so the table grows and shrinks through many migrations
 * (between 1024 and 131072 slots, with removes and lookups in mid-way). */
static void
test_jobhash_reference(void **state)
{
    (void)state;
    static const size_t targets[] = {60000, 300,   40000, 20000, 65000,
                                     1000,  30000, 5,     50000, 0};
    Ref r = {.rng = 42};
    r.jobs = calloc(REF_JOBS, sizeof *r.jobs);
    r.in = calloc(REF_JOBS, 1);
    r.seen = calloc(REF_JOBS, 1);
    r.order = calloc(REF_JOBS, sizeof *r.order);
    r.pos = calloc(REF_JOBS, sizeof *r.pos);
    for (size_t k = 0; k < REF_JOBS; k++) {
        r.jobs[k].id = (uint64_t)k * 5 + 1;
        r.order[k] = r.pos[k] = k;
    }
    for (size_t i = 0; i < sizeof targets / sizeof *targets; i++) {
        size_t goal = targets[i];
        while (r.len != goal) {
            int toward = ref_rand(&r) % 4 != 0; /* 3 of 4 steps toward it */
            ref_step(&r, (r.len < goal) == toward);
        }
        ref_check_all(&r);
    }
    assert_true(r.migrations >= 20);
    assert_true(r.removes_mid >= 1000 && r.finds_mid >= 10000);
    jobhash_free(&r.t);
    assert_null(jobhash_find(&r.t, 1));
    free(r.jobs), free(r.in), free(r.seen), free(r.order), free(r.pos);
}

/* Mid-migration, remove every job still in the old array (each removal
 * shifts its cluster back), then check the rest and finish. */
static void
test_jobhash_remove_old_mid_migration(void **state)
{
    (void)state;
    enum { N = 40000 };
    Ref r = {.rng = 7};
    r.jobs = calloc(REF_JOBS, sizeof *r.jobs);
    r.in = calloc(REF_JOBS, 1);
    r.seen = calloc(REF_JOBS, 1);
    size_t k = 0;
    for (; k < N; k++) {
        r.jobs[k].id = (uint64_t)k * 5 + 1;
        assert_int_equal(jobhash_insert(&r.t, &r.jobs[k]), 0);
        r.in[k] = 1, r.len++;
        if (r.t.old && r.t.nold >= 16384 && r.t.left < r.t.nold / 2) break;
    }
    assert_non_null(r.t.old); /* 16384 -> 32768 slots, half migrated */
    size_t removed = 0;
    for (size_t i = 0; i < r.t.nold; i++) {
        Job *j;
        while ((j = r.t.old ? r.t.old[i] : NULL) != NULL) {
            jobhash_remove(&r.t, j);
            r.in[j - r.jobs] = 0, r.len--, removed++;
        }
    }
    /* each remove also migrates: ~nold / 2 / JOBHASH_STEP of them */
    assert_true(removed > 100);
    ref_check_all(&r);
    for (k++; r.t.old && k < REF_JOBS; k++) {
        r.jobs[k].id = (uint64_t)k * 5 + 1;
        assert_int_equal(jobhash_insert(&r.t, &r.jobs[k]), 0);
        r.in[k] = 1, r.len++;
    }
    assert_null(r.t.old);
    ref_check_all(&r);
    jobhash_free(&r.t);
    free(r.jobs), free(r.in), free(r.seen);
}

/* ---- the job table: chunks and overflow ------------------------------- */

/* The table's own invariants: every chunk is at its ring entry, counts
 * its jobs and holds only its own ids; every chunk but the newest holds at
 * least JOBTABLE_CHUNK_MIN jobs; no chunk's id is in the overflow; len is
 * the sum. Returns the chunks. */
static size_t
chunks_check(const JobTable *t)
{
    size_t held = 0, chunks = 0;
    for (size_t r = 0; r < t->nring; r++) {
        const JobChunk *c = t->ring[r];
        if (!c) continue;
        chunks++;
        assert_int_equal(c->no % t->nring, r);
        assert_true(c->no <= t->head);
        size_t live = 0;
        for (size_t i = 0; i < JOBTABLE_CHUNK; i++) {
            if (!c->slot[i]) continue;
            live++;
            assert_int_equal(c->slot[i]->id, c->no * JOBTABLE_CHUNK + i);
            assert_null(jobhash_find(&t->over, c->slot[i]->id));
        }
        assert_int_equal(live, c->live);
        if (c->no != t->head) assert_true(live >= JOBTABLE_CHUNK_MIN);
        held += live;
    }
    assert_int_equal(held + t->over.len, t->len);
    assert_int_equal(chunks, t->nchunks);
    return chunks;
}

/* Ids in order go to chunks, one per JOBTABLE_CHUNK ids, no overflow; a
 * chunk thinned below the minimum goes to the overflow, and its jobs are
 * still found there; a far jump ahead retires the chunk whose ring entry
 * the new one takes; an id below the newest chunk whose chunk is gone goes
 * to the overflow. */
static void
test_jobtable_chunks(void **state)
{
    (void)state;
    enum { N = 4 * JOBTABLE_CHUNK };
    JobTable t = {0};
    Job *jobs = calloc(N + 2, sizeof *jobs);
    for (size_t i = 0; i < N; i++) {
        jobs[i].id = JOBTABLE_CHUNK + i; /* chunks 1..4, full */
        assert_int_equal(jobtable_insert(&t, &jobs[i]), 0);
    }
    assert_int_equal(chunks_check(&t), 4);
    assert_int_equal(t.over.len, 0);
    /* chunk 1 thinned to the minimum stays; one fewer and it goes */
    size_t i = 0;
    for (; i < JOBTABLE_CHUNK - JOBTABLE_CHUNK_MIN; i++)
        jobtable_remove(&t, &jobs[i]);
    assert_int_equal(chunks_check(&t), 4);
    jobtable_remove(&t, &jobs[i++]);
    assert_int_equal(chunks_check(&t), 3);
    assert_int_equal(t.over.len, JOBTABLE_CHUNK_MIN - 1);
    for (size_t k = 0; k < N; k++)
        assert_ptr_equal(jobtable_find(&t, jobs[k].id),
                         k < i ? NULL : &jobs[k]);
    /* a job of chunk 1 removed and put back: the overflow again */
    jobtable_remove(&t, &jobs[i]);
    assert_int_equal(jobtable_insert(&t, &jobs[i]), 0);
    assert_ptr_equal(jobhash_find(&t.over, jobs[i].id), &jobs[i]);
    /* chunk 2 + the ring's size takes chunk 2's entry, and the ring of 3
     * chunks is large enough: chunk 2's jobs go to the overflow */
    assert_int_equal(t.nring, JOBTABLE_RING_MIN);
    jobs[N].id = (2 + JOBTABLE_RING_MIN) * JOBTABLE_CHUNK + 5;
    assert_int_equal(jobtable_insert(&t, &jobs[N]), 0);
    assert_int_equal(chunks_check(&t), 3);
    assert_int_equal(t.over.len, JOBTABLE_CHUNK_MIN - 1 + JOBTABLE_CHUNK);
    /* below the head, chunkless: the overflow */
    jobs[N + 1].id = 7;
    assert_int_equal(jobtable_insert(&t, &jobs[N + 1]), 0);
    assert_ptr_equal(jobhash_find(&t.over, 7), &jobs[N + 1]);
    assert_int_equal(t.len, N - i + 2);
    for (size_t k = 0; k < N + 2; k++)
        assert_ptr_equal(jobtable_find(&t, jobs[k].id),
                         k < i ? NULL : &jobs[k]);
    assert_null(jobtable_find(&t, (3 + JOBTABLE_RING_MIN) * JOBTABLE_CHUNK));
    assert_int_equal(t.nring, JOBTABLE_RING_MIN);
    jobtable_free(&t);
    assert_null(jobtable_find(&t, jobs[N].id));
    free(jobs);
}

/* A deep queue of consecutive ids stays in chunks: the ring grows with
 * them (to at most JOBTABLE_RING_PER_CHUNK entries per chunk, twice that
 * just after a doubling), nothing goes to the overflow; drained oldest
 * first, only each chunk's last few jobs pass through the overflow. */
static void
test_jobtable_deep(void **state)
{
    (void)state;
    enum { N = 300 * JOBTABLE_CHUNK };
    JobTable t = {0};
    Job *jobs = calloc(N, sizeof *jobs);
    for (size_t i = 0; i < N; i++) {
        jobs[i].id = i + 1;
        assert_int_equal(jobtable_insert(&t, &jobs[i]), 0);
    }
    assert_int_equal(chunks_check(&t), 301);
    assert_int_equal(t.over.len, 0);
    assert_true(t.nring >= 301 &&
                t.nring <= 2 * JOBTABLE_RING_PER_CHUNK * (t.nchunks + 1));
    for (size_t i = 0; i < N; i++) {
        jobtable_remove(&t, &jobs[i]);
        assert_true(t.over.len < JOBTABLE_CHUNK_MIN);
        if (i % 4099 == 0) chunks_check(&t);
    }
    assert_int_equal(t.len, 0);
    assert_int_equal(chunks_check(&t), 1); /* the newest, empty */
    jobtable_free(&t);
    free(jobs);
}

/* Ids that come sparse (one per chunk number and more apart) make no
 * chunk: they go to the overflow; once ids come dense again, the first
 * chunk number's ids still go there and the next gets a chunk. */
static void
test_jobtable_sparse(void **state)
{
    (void)state;
    enum { SPARSE = 1000, DENSE = 3 * JOBTABLE_CHUNK };
    JobTable t = {0};
    Job *jobs = calloc(SPARSE + DENSE, sizeof *jobs);
    for (size_t i = 0; i < SPARSE; i++) {
        jobs[i].id = 1 + 600 * (uint64_t)i;
        assert_int_equal(jobtable_insert(&t, &jobs[i]), 0);
    }
    assert_int_equal(chunks_check(&t), 0); /* the first, thin, dropped */
    assert_int_equal(t.over.len, SPARSE);
    uint64_t base = (t.head + 1) * JOBTABLE_CHUNK;
    for (size_t i = 0; i < DENSE; i++) {
        jobs[SPARSE + i].id = base + i;
        assert_int_equal(jobtable_insert(&t, &jobs[SPARSE + i]), 0);
    }
    assert_int_equal(chunks_check(&t), 2);
    assert_int_equal(t.over.len, SPARSE + JOBTABLE_CHUNK);
    for (size_t i = 0; i < SPARSE + DENSE; i++)
        assert_ptr_equal(jobtable_find(&t, jobs[i].id), &jobs[i]);
    for (size_t i = 0; i < SPARSE + DENSE; i++)
        jobtable_remove(&t, &jobs[i]);
    assert_int_equal(t.len, 0);
    chunks_check(&t);
    jobtable_free(&t);
    free(jobs);
}

enum { CREF_JOBS = 200000 };

/* Mixed work against a reference: new ids in order (mostly consecutive,
 * at times a gap, now and then a jump past the ring), removes of random
 * jobs (thinning chunks into the overflow), removes put back at once (an
 * update's replay), removes of absent jobs; the invariants and every
 * job's lookup checked along the way. */
static void
test_jobtable_chunks_reference(void **state)
{
    (void)state;
    Ref r = {.rng = 99};
    JobTable t = {0};
    r.jobs = calloc(CREF_JOBS, sizeof *r.jobs);
    r.in = calloc(CREF_JOBS, 1);
    r.seen = calloc(CREF_JOBS, 1);
    size_t made = 0, max_over = 0, max_chunks = 0, max_held = 0;
    uint64_t next = 1;
    for (size_t step = 0; step < 1200000; step++) {
        uint64_t x = ref_rand(&r);
        int phase = (int)(step / 100000 % 3); /* fill, mixed, drain */
        if (made < CREF_JOBS && x % 8 < (phase == 0   ? 7u
                                         : phase == 1 ? 4u
                                                      : 1u)) {
            uint64_t g = x >> 8;
            next += g % 4096 == 0 ? 1 + g % 3000 : 1;      /* gaps */
            if (g % 20000 == 7) next += (uint64_t)1 << 22; /* 8192 chunks */
            r.jobs[made].id = next;
            assert_int_equal(jobtable_insert(&t, &r.jobs[made]), 0);
            r.in[made++] = 1, r.len++;
        } else if (made) {
            size_t k = (size_t)(x >> 8) % made;
            jobtable_remove(&t, &r.jobs[k]); /* absent: a no-op */
            if (r.in[k]) r.in[k] = 0, r.len--;
            if (x % 8 == 7) { /* put back */
                assert_int_equal(jobtable_insert(&t, &r.jobs[k]), 0);
                r.in[k] = 1, r.len++;
            }
            assert_ptr_equal(jobtable_find(&t, r.jobs[k].id),
                             r.in[k] ? &r.jobs[k] : NULL);
        }
        assert_int_equal(t.len, r.len);
        if (step % 50000 == 0) {
            size_t chunks = chunks_check(&t);
            if (chunks > max_chunks) max_chunks = chunks;
            for (size_t k = 0; k < made; k++)
                assert_ptr_equal(jobtable_find(&t, r.jobs[k].id),
                                 r.in[k] ? &r.jobs[k] : NULL);
            memset(r.seen, 0, CREF_JOBS);
            jobtable_each(&t, count_visit, &r);
            for (size_t k = 0; k < made; k++)
                assert_int_equal(r.seen[k], r.in[k]);
        }
        if (t.over.len > max_over) max_over = t.over.len;
        if (t.nchunks > max_held) max_held = t.nchunks;
    }
    /* both sides of the table were used */
    assert_true(max_over > 1000 && max_chunks > 50);
    assert_true(t.nring <= JOBTABLE_RING_MIN ||
                t.nring <= 2 * JOBTABLE_RING_PER_CHUNK * (max_held + 1));
    jobtable_free(&t);
    free(r.jobs), free(r.in), free(r.seen);
}

static void
test_tube_names(void **state)
{
    (void)state;
    char name[202];
    memset(name, 'a', sizeof name);
    assert_true(proto_name_valid("default", 7));
    assert_true(proto_name_valid("A-z0+/;.$_()", 12));
    assert_true(proto_name_valid(name, 200));
    assert_false(proto_name_valid(name, 201));
    assert_false(proto_name_valid("", 0));
    assert_false(proto_name_valid("-a", 2));
    assert_false(proto_name_valid("a b", 3));
    assert_false(proto_name_valid("a\0b", 3));
    assert_false(proto_name_valid("a*", 2));
}

static void
test_tube_registry(void **state)
{
    (void)state;
    TubeRegistry r;
    char name[16];
    assert_int_equal(tubes_init(&r), 0);
    Tube *d = tubes_get(&r, "default", 7);
    for (int i = 0; i < 500; i++) { /* forces the hash to grow */
        int n = snprintf(name, sizeof name, "t%d", i);
        assert_non_null(tubes_get(&r, name, (size_t)n));
    }
    assert_int_equal(r.list.len, 501);
    assert_ptr_equal(tubes_find(&r, "default", 7), d);
    Tube *t7 = tubes_find(&r, "t7", 2);
    assert_non_null(t7);
    tube_ref(t7);
    tubes_unref(&r, t7);
    assert_ptr_equal(tubes_find(&r, "t7", 2), t7);
    Tube *last = r.list.items[500];
    tubes_unref(&r, t7); /* last reference: gone */
    assert_null(tubes_find(&r, "t7", 2));
    assert_int_equal(r.list.len, 500);
    assert_ptr_equal(r.list.items[8], last); /* list-tubes order as 1.12 */
    for (size_t i = 0; i < r.list.len; i++)  /* every index kept right */
        assert_int_equal(((Tube *)r.list.items[i])->list_pos, i);
    Tube *t498 = r.list.items[499];
    tubes_unref(&r, last); /* in slot 8 now: t498 moves there */
    assert_int_equal(r.list.len, 499);
    assert_ptr_equal(r.list.items[8], t498);
    assert_int_equal(t498->list_pos, 8);
    assert_ptr_equal(tubes_find(&r, "t498", 4), t498);
    tubes_free(&r);
}

/* The registry's open addressing under churn: tubes made and dropped in a
 * pseudo-random order (linear probing's backward-shift deletion moves
 * entries back), every name checked after every step: found exactly
 * while it lives; the slots never more than half used after a growth. */
static void
test_tube_registry_churn(void **state)
{
    (void)state;
    enum { NAMES = 300, STEPS = 3000 };
    TubeRegistry r;
    Tube *live[NAMES] = {0};
    char name[16];
    uint32_t x = 12345;
    assert_int_equal(tubes_init(&r), 0);
    for (int step = 0; step < STEPS; step++) {
        x = x * 1103515245u + 12345u;
        int k = (int)((x >> 8) % NAMES);
        int n = snprintf(name, sizeof name, "c%d", k);
        if (live[k]) {
            tubes_unref(&r, live[k]);
            live[k] = NULL;
        } else {
            live[k] = tubes_get(&r, name, (size_t)n);
            assert_non_null(live[k]);
        }
        for (int i = 0; i < NAMES; i++) {
            n = snprintf(name, sizeof name, "c%d", i);
            assert_ptr_equal(tubes_find(&r, name, (size_t)n), live[i]);
        }
        assert_true(r.list.len * 2 <= r.nslots);
    }
    tubes_free(&r);
}

/* Tube.age, the oldest-ready heap (queue/readyage.h), is kept only by a
 * server with an HTTP API, its only reader: without --http a ready job
 * costs no entry (8 bytes each, 8 MiB at 1M jobs: BENCHMARKS.md, "Memory
 * row, 2026-11-28"); with it the oldest ready job is still found after
 * the oldest ones left. */
static void
test_readyage_only_with_http(void **state)
{
    (void)state;
    enum { N = 1000 };
    for (int http = 0; http < 2; http++) {
        Server *s = calloc(1, sizeof *s);
        assert_non_null(s);
        s->cfg.http_addr = http ? "127.0.0.1:0" : NULL;
        timers_init(s);
        assert_int_equal(tubes_init(&s->tubes), 0);
        Tube *t = tubes_get(&s->tubes, "t", 1);
        assert_non_null(t);
        Job *jobs[N];
        for (uint64_t id = 1; id <= N; id++) {
            jobs[id - 1] =
                queue_job_new(s, t, id, (uint32_t)(N - id), 0, 60, 0, NULL, 0);
            assert_non_null(jobs[id - 1]);
            queue_make_ready(s, jobs[id - 1]);
        }
        assert_int_equal(t->ready.len, N);
        if (!http) {
            assert_null(t->age);
            assert_int_equal(t->age_len + t->age_cap, 0);
        } else {
            assert_int_equal(t->age_len, N);
            assert_ptr_equal(readyage_oldest(s, t), jobs[0]);
            for (int i = 0; i < 10; i++) /* the ten oldest leave */
                queue_detach(s, jobs[i], NULL);
            assert_ptr_equal(readyage_oldest(s, t), jobs[10]);
            for (int i = 0; i < 10; i++)
                queue_make_ready(s, jobs[i]);
            assert_ptr_equal(readyage_oldest(s, t), jobs[0]);
        }
        for (int i = 0; i < N; i++) {
            queue_detach(s, jobs[i], NULL);
            queue_job_free(s, jobs[i]);
        }
        tubes_unref(&s->tubes, t);
        tubes_free(&s->tubes);
        jobtable_free(&s->jobs);
        free(s);
    }
}

/* Resident bytes per job (memcached-style "sizes"): printed by make test so
 * regressions show. A job is one malloc chunk, one 8-byte heap slot and its
 * share of the id table: in a chunk (JobChunk, 8-byte slots of consecutive
 * ids) 8 bytes when full, at most its size over JOBTABLE_CHUNK_MIN (22)
 * as the newest moves past it; in the overflow hash 8-byte slots at a load
 * between 3/8 and 3/4 while it grows (21 bytes at the low end). */
static void
test_sizes(void **state)
{
    (void)state;
    void *p = malloc(sizeof(Job));
    size_t chunk = malloc_usable_size(p) + sizeof(size_t); /* glibc header */
    free(p);
    size_t full = (sizeof(JobChunk) + JOBTABLE_CHUNK - 1) / JOBTABLE_CHUNK;
    size_t thin =
        (sizeof(JobChunk) + JOBTABLE_CHUNK_MIN - 1) / JOBTABLE_CHUNK_MIN;
    size_t typical = chunk + 8 + full,
           worst = chunk + 8 + (thin > 22 ? thin : 22);
    printf("sizes: Job %zu bytes (malloc chunk %zu), per job resident "
           "%zu typical, %zu at the table's lowest load; Tube %zu, Conn %zu\n",
           sizeof(Job), chunk, typical, worst, sizeof(Tube), sizeof(Conn));
    assert_true(worst <= 128);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_heap_order_and_remove),
        cmocka_unit_test(test_heap_first),
        cmocka_unit_test(test_heap_fix),
        cmocka_unit_test(test_dec_u64),
        cmocka_unit_test(test_ptrset_beanstalkd_order),
        cmocka_unit_test(test_waitset_order_and_positions),
        cmocka_unit_test(test_jobtable),
        cmocka_unit_test(test_jobhash_reference),
        cmocka_unit_test(test_jobhash_remove_old_mid_migration),
        cmocka_unit_test(test_jobtable_chunks),
        cmocka_unit_test(test_jobtable_deep),
        cmocka_unit_test(test_jobtable_sparse),
        cmocka_unit_test(test_jobtable_chunks_reference),
        cmocka_unit_test(test_tube_names),
        cmocka_unit_test(test_tube_registry),
        cmocka_unit_test(test_tube_registry_churn),
        cmocka_unit_test(test_readyage_only_with_http),
        cmocka_unit_test(test_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
