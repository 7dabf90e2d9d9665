/* job.c - job table and job orderings. */
#include "job.h"

#include <stdlib.h>

static size_t
bucket_of(uint64_t id, size_t nbuckets)
{
    /* ids are sequential: a multiplicative mix spreads neighbours. */
    return (size_t)((id * 0x9E3779B97F4A7C15ULL) >> 17) & (nbuckets - 1);
}

Job *
jobtable_find(const JobTable *t, uint64_t id)
{
    if (!t->nbuckets) return NULL;
    for (Job *j = t->buckets[bucket_of(id, t->nbuckets)]; j; j = j->hnext)
        if (j->id == id) return j;
    return NULL;
}

static int
rehash(JobTable *t, size_t n)
{
    Job **nb = calloc(n, sizeof *nb);
    if (!nb) return -1;
    for (size_t i = 0; i < t->nbuckets; i++) {
        Job *j = t->buckets[i];
        while (j) {
            Job *next = j->hnext;
            size_t b = bucket_of(j->id, n);
            j->hnext = nb[b];
            nb[b] = j;
            j = next;
        }
    }
    free(t->buckets);
    t->buckets = nb;
    t->nbuckets = n;
    return 0;
}

int
jobtable_insert(JobTable *t, Job *j)
{
    if (t->len >= t->nbuckets) {
        if (rehash(t, t->nbuckets ? t->nbuckets * 2 : 1024) < 0 && !t->nbuckets)
            return -1;
    }
    size_t b = bucket_of(j->id, t->nbuckets);
    j->hnext = t->buckets[b];
    t->buckets[b] = j;
    t->len++;
    return 0;
}

void
jobtable_remove(JobTable *t, Job *j)
{
    if (!t->nbuckets) return;
    Job **p = &t->buckets[bucket_of(j->id, t->nbuckets)];
    for (; *p; p = &(*p)->hnext) {
        if (*p == j) {
            *p = j->hnext;
            j->hnext = NULL;
            t->len--;
            break;
        }
    }
    if (t->nbuckets > 1024 && t->len < t->nbuckets / 8)
        rehash(t, t->nbuckets / 2); /* on failure keep the larger table */
}

void
jobtable_free(JobTable *t)
{
    free(t->buckets);
    t->buckets = NULL;
    t->nbuckets = t->len = 0;
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
