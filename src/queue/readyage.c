/* readyage.c - see readyage.h. */
#include "queue/readyage.h"

#include <stdlib.h>

static void
sift_down(uint64_t *v, size_t n, size_t c)
{
    for (;;) {
        size_t l = 2 * c + 1, m = c;
        if (l < n && v[l] < v[m]) m = l;
        if (l + 1 < n && v[l + 1] < v[m]) m = l + 1;
        if (m == c) return;
        uint64_t x = v[c];
        v[c] = v[m], v[m] = x;
        c = m;
    }
}

/* Makes t's heap the ids of its ready jobs (which j is among). */
static void
rebuild(Tube *t)
{
    size_t n = t->ready.len;
    for (size_t i = 0; i < n; i++)
        t->age[i] = ((const Job *)t->ready.data[i])->id;
    t->age_len = n;
    for (size_t i = n / 2; i-- > 0;)
        sift_down(t->age, n, i);
}

void
readyage_push(Tube *t, const Job *j)
{
    if (t->age_len + 1 > t->age_cap) {
        size_t cap = t->age_cap ? t->age_cap * 2 : 64;
        uint64_t *v = realloc(t->age, cap * sizeof *v);
        if (!v) abort(); /* out of memory */
        t->age = v, t->age_cap = cap;
    }
    if (t->age_len >= 2 * t->ready.len + 64) return rebuild(t);
    size_t c = t->age_len++;
    t->age[c] = j->id;
    while (c > 0 && t->age[(c - 1) / 2] > t->age[c]) {
        uint64_t x = t->age[c];
        t->age[c] = t->age[(c - 1) / 2], t->age[(c - 1) / 2] = x;
        c = (c - 1) / 2;
    }
}

const Job *
readyage_oldest(const Server *s, Tube *t)
{
    while (t->age_len) {
        const Job *j = jobtable_find(&s->jobs, t->age[0]);
        if (j && j->tube == t && j->state == JOB_READY) return j;
        t->age[0] = t->age[--t->age_len];
        sift_down(t->age, t->age_len, 0);
    }
    return NULL;
}
