/* job.c - the job table (its chunks; the overflow is jobhash.c) and the
 * job orderings. */
#include "queue/job.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* jobhash.c reads a job's id as its first member */
_Static_assert(offsetof(Job, id) == 0, "a Job's id must come first");

static JobChunk **
entry(const JobTable *t, uint64_t no)
{
    return &t->ring[no & (t->nring - 1)];
}

static JobChunk *
chunk_at(const JobTable *t, uint64_t no)
{
    JobChunk *c = t->ring ? *entry(t, no) : NULL;
    return c && c->no == no ? c : NULL;
}

static size_t
slot_in(uint64_t id)
{
    return (size_t)(id & (JOBTABLE_CHUNK - 1));
}

/* Gives chunk c's jobs to the overflow and frees it. */
static void
chunk_drop(JobTable *t, JobChunk *c)
{
    for (size_t i = 0; c->live && i < JOBTABLE_CHUNK; i++) {
        if (!c->slot[i]) continue;
        if (jobhash_insert(&t->over, c->slot[i]) < 0) abort(); /* OOM */
        c->live--;
    }
    *entry(t, c->no) = NULL;
    t->nchunks--;
    free(c);
}

/* Doubles the ring: chunks whose numbers differ in one ring do in the
 * larger one too. Returns 0, or -1 out of memory (nothing changed). */
static int
ring_grow(JobTable *t)
{
    size_t n = t->nring ? t->nring * 2 : JOBTABLE_RING_MIN;
    JobChunk **r = calloc(n, sizeof *r);
    if (!r) return -1;
    for (size_t i = 0; i < t->nring; i++)
        if (t->ring[i]) r[t->ring[i]->no & (n - 1)] = t->ring[i];
    free(t->ring);
    t->ring = r;
    t->nring = n;
    return 0;
}

/* Moves the head to no (above it): the old head's chunk goes if it holds
 * too few jobs. */
static void
head_move(JobTable *t, uint64_t no)
{
    JobChunk *old = chunk_at(t, t->head);
    if (old && old->live < JOBTABLE_CHUNK_MIN) chunk_drop(t, old);
    t->head = no;
    t->head_ins = 0;
}

/* Makes chunk no, the new head (head_move); a chunk in no's entry makes
 * the ring grow, or goes (job.h). Returns it, or NULL out of memory
 * (nothing changed, but the ring may have grown). */
static JobChunk *
chunk_new(JobTable *t, uint64_t no)
{
    if (!t->ring && ring_grow(t) < 0) return NULL;
    JobChunk *c = calloc(1, sizeof *c), *old;
    if (!c) return NULL;
    c->no = no;
    head_move(t, no);
    while ((old = *entry(t, no)) != NULL)
        if (t->nring >= JOBTABLE_RING_PER_CHUNK * (t->nchunks + 1) ||
            ring_grow(t) < 0)
            chunk_drop(t, old);
    *entry(t, no) = c;
    t->nchunks++;
    return c;
}

Job *
jobtable_find(const JobTable *t, uint64_t id)
{
    JobChunk *c = chunk_at(t, id >> JOBTABLE_CHUNK_BITS);
    return c ? c->slot[slot_in(id)] : jobhash_find(&t->over, id);
}

int
jobtable_insert(JobTable *t, Job *j)
{
    uint64_t no = j->id >> JOBTABLE_CHUNK_BITS;
    JobChunk *c = chunk_at(t, no);

    if (!c && (!t->ring || no > t->head)) {
        if (!t->ring || t->head_ins >= JOBTABLE_CHUNK_MIN) {
            if (!(c = chunk_new(t, no))) return -1;
        } else { /* sparse ids: the overflow, and no chunk for no ever */
            if (jobhash_insert(&t->over, j) < 0) return -1;
            head_move(t, no);
            t->head_ins = 1;
            t->len++;
            return 0;
        }
    }
    t->head_ins += no == t->head;
    if (c) {
        c->slot[slot_in(j->id)] = j;
        c->live++;
    } else if (jobhash_insert(&t->over, j) < 0) {
        return -1;
    }
    t->len++;
    return 0;
}

void
jobtable_remove(JobTable *t, Job *j)
{
    JobChunk *c = chunk_at(t, j->id >> JOBTABLE_CHUNK_BITS);

    if (!c) {
        t->len -= (size_t)jobhash_remove(&t->over, j);
        return;
    }
    if (c->slot[slot_in(j->id)] != j) return;
    c->slot[slot_in(j->id)] = NULL;
    c->live--;
    t->len--;
    if (c->no != t->head && c->live < JOBTABLE_CHUNK_MIN) chunk_drop(t, c);
}

void
jobtable_each(const JobTable *t, void (*fn)(Job *j, void *arg), void *arg)
{
    for (size_t r = 0; r < t->nring; r++) {
        JobChunk *c = t->ring[r];
        for (size_t i = 0; c && i < JOBTABLE_CHUNK; i++)
            if (c->slot[i]) fn(c->slot[i], arg);
    }
    jobhash_each(&t->over, fn, arg);
}

void
jobtable_free(JobTable *t)
{
    for (size_t r = 0; r < t->nring; r++)
        free(t->ring[r]);
    free(t->ring);
    jobhash_free(&t->over);
    *t = (JobTable){0};
}

int
job_pri_less(const void *a, const void *b)
{
    const Job *x = a, *y = b;
    if (x->pri != y->pri) return x->pri < y->pri;
    return x->id < y->id;
}

int
job_deadline_less(const void *a, const void *b)
{
    const Job *x = a, *y = b;
    if (x->deadline != y->deadline) return x->deadline < y->deadline;
    return x->id < y->id;
}

void
job_setpos(void *x, size_t i)
{
    ((Job *)x)->heap_index = (uint32_t)i;
}

const char *
job_state_name(const Job *j)
{
    switch (j->state) {
    case JOB_READY:
        return "ready";
    case JOB_DELAYED:
        return "delayed";
    case JOB_BURIED:
        return "buried";
    case JOB_RESERVED:
        return "reserved";
    }
    return "invalid";
}
