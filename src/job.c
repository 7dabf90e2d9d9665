/* job.c - job table and job orderings. */
#include "job.h"

#include <stdlib.h>

static size_t
slot_of(uint64_t id, size_t nslots)
{
    /* ids are sequential: a multiplicative mix spreads neighbours. */
    return (size_t)((id * 0x9E3779B97F4A7C15ULL) >> 17) & (nslots - 1);
}

Job *
jobtable_find(const JobTable *t, uint64_t id)
{
    if (!t->nslots) return NULL;
    size_t mask = t->nslots - 1;
    for (size_t i = slot_of(id, t->nslots);; i = (i + 1) & mask) {
        Job *j = t->slots[i];
        if (!j || j->id == id) return j;
    }
}

static void
place(Job **slots, size_t nslots, Job *j)
{
    size_t i = slot_of(j->id, nslots);
    while (slots[i])
        i = (i + 1) & (nslots - 1);
    slots[i] = j;
}

static int
resize(JobTable *t, size_t n)
{
    Job **ns = calloc(n, sizeof *ns);
    if (!ns) return -1;
    for (size_t i = 0; i < t->nslots; i++)
        if (t->slots[i]) place(ns, n, t->slots[i]);
    free(t->slots);
    t->slots = ns;
    t->nslots = n;
    return 0;
}

int
jobtable_insert(JobTable *t, Job *j)
{
    if ((t->len + 1) * 4 > t->nslots * 3 &&
        resize(t, t->nslots ? t->nslots * 2 : 1024) < 0)
        return -1;
    place(t->slots, t->nslots, j);
    t->len++;
    return 0;
}

void
jobtable_remove(JobTable *t, Job *j)
{
    if (!t->nslots) return;
    size_t mask = t->nslots - 1, i = slot_of(j->id, t->nslots);
    while (t->slots[i] != j) {
        if (!t->slots[i]) return;
        i = (i + 1) & mask;
    }
    /* backward-shift deletion: no tombstones */
    for (size_t k = (i + 1) & mask; t->slots[k]; k = (k + 1) & mask) {
        size_t home = slot_of(t->slots[k]->id, t->nslots);
        if (((k - home) & mask) >= ((k - i) & mask)) {
            t->slots[i] = t->slots[k];
            i = k;
        }
    }
    t->slots[i] = NULL;
    t->len--;
    if (t->nslots > 1024 && t->len * 16 < t->nslots * 3)
        resize(t, t->nslots / 2); /* on failure keep the larger table */
}

void
jobtable_each(const JobTable *t, void (*fn)(Job *j, void *arg), void *arg)
{
    for (size_t i = 0; i < t->nslots; i++)
        if (t->slots[i]) fn(t->slots[i], arg);
}

void
jobtable_free(JobTable *t)
{
    free(t->slots);
    t->slots = NULL;
    t->nslots = t->len = 0;
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
