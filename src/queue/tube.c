/* tube.c - see tube.h. */
#include "queue/tube.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* tube.h's layout: what a reserve reads of each watched tube in the first
 * line, what a job's round trip and a use touch in the next two. */
_Static_assert(offsetof(Tube, ready.len) + sizeof(size_t) <= 64,
               "Tube: the reserve's fields leave the first line");
_Static_assert(offsetof(Tube, nhrefs) + sizeof(size_t) <= 192 &&
                   offsetof(Tube, name) < 192,
               "Tube: the hot counters leave the first three lines");

static uint32_t
name_hash(const char *name, size_t len)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)name[i]) * 1099511628211ULL;
    return (uint32_t)(h ^ (h >> 32));
}

int
tubes_init(TubeRegistry *r)
{
    memset(r, 0, sizeof *r);
    r->nbuckets = 64;
    r->buckets = calloc(r->nbuckets, sizeof *r->buckets);
    return r->buckets ? 0 : -1;
}

Tube *
tubes_find(const TubeRegistry *r, const char *name, size_t len)
{
    uint32_t h = name_hash(name, len);
    Tube *t = r->buckets[h & (r->nbuckets - 1)];
    for (; t; t = t->hnext)
        if (t->hash == h && t->name_len == len &&
            memcmp(t->name, name, len) == 0)
            return t;
    return NULL;
}

static void
grow(TubeRegistry *r)
{
    size_t n = r->nbuckets * 2;
    Tube **nb = calloc(n, sizeof *nb);
    if (!nb) return; /* longer chains, still correct */
    for (size_t i = 0; i < r->list.len; i++) {
        Tube *t = r->list.items[i];
        size_t b = t->hash & (n - 1);
        t->hnext = nb[b];
        nb[b] = t;
    }
    free(r->buckets);
    r->buckets = nb;
    r->nbuckets = n;
}

static Tube *
tube_new(const char *name, size_t len)
{
    size_t size = (sizeof(Tube) + 63) / 64 * 64; /* aligned_alloc's rule */
    Tube *t = aligned_alloc(64, size); /* its hot lines are whole lines */
    if (!t) return NULL;
    memset(t, 0, sizeof *t);
    memcpy(t->name, name, len);
    t->name_len = (uint8_t)len;
    t->hash = name_hash(name, len);
    heap_init(&t->ready, job_pri_less, job_setpos);
    heap_init(&t->delay, job_deadline_less, job_setpos);
    heap_init(&t->buried, job_deadline_less, job_setpos);
    t->pause_pos = t->delay_pos = SIZE_MAX;
    return t;
}

Tube *
tubes_get(TubeRegistry *r, const char *name, size_t len)
{
    Tube *t = tubes_find(r, name, len);
    if (t) {
        t->refs++;
        return t;
    }
    t = tube_new(name, len);
    if (!t || ptrset_append(&r->list, t) < 0) {
        free(t);
        return NULL;
    }
    t->list_pos = r->list.len - 1;
    size_t b = t->hash & (r->nbuckets - 1);
    t->hnext = r->buckets[b];
    r->buckets[b] = t;
    t->refs = 1;
    if (r->list.len > r->nbuckets)
        grow(r); /* rebuilds every chain from the list, t included */
    return t;
}

static void
tube_destroy(Tube *t)
{
    heap_free(&t->ready);
    heap_free(&t->delay);
    heap_free(&t->buried);
    waitset_free(&t->waiting);
    free(t->age);
    free(t->hrefs);
    free(t);
}

void
tubes_unref(TubeRegistry *r, Tube *t)
{
    if (--t->refs > 0) return;
    Tube **p = &r->buckets[t->hash & (r->nbuckets - 1)];
    while (*p != t)
        p = &(*p)->hnext;
    *p = t->hnext;
    ptrset_delete(&r->list, t->list_pos);
    if (t->list_pos < r->list.len) /* the last one moved into its slot */
        ((Tube *)r->list.items[t->list_pos])->list_pos = t->list_pos;
    tube_destroy(t);
}

void
tubes_free(TubeRegistry *r)
{
    for (size_t i = 0; i < r->list.len; i++)
        tube_destroy(r->list.items[i]);
    ptrset_free(&r->list);
    free(r->buckets);
    r->buckets = NULL;
}

int
waitset_add(WaitSet *w, struct Session *se, size_t *at)
{
    if (w->len == w->cap) {
        size_t ncap = w->cap ? w->cap * 2 : 4;
        WaitRef *n = realloc(w->items, ncap * sizeof *n);
        if (!n) return -1;
        w->items = n;
        w->cap = ncap;
    }
    w->items[w->len].se = se;
    w->items[w->len].at = at;
    *at = w->len++;
    return 0;
}

void
waitset_delete(WaitSet *w, size_t i)
{
    *w->items[i].at = SIZE_MAX;
    w->items[i] = w->items[--w->len];
    if (i < w->len) *w->items[i].at = i;
}

struct Session *
waitset_take(WaitSet *w)
{
    if (w->len == 0) return NULL;
    size_t i = w->last % w->len;
    w->last = i + 1;
    struct Session *se = w->items[i].se;
    waitset_delete(w, i);
    return se;
}

void
waitset_free(WaitSet *w)
{
    free(w->items);
    w->items = NULL;
    w->len = w->cap = w->last = 0;
}
