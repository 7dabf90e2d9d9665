/* tube.c - see tube.h. */
#include "queue/tube.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* tube.h's layout: what a reserve reads of each watched tube in the first
 * line, the counters of a job's moves in the second, what a use touches
 * (and the waiting set) in the third. */
_Static_assert(offsetof(Tube, ready.len) + sizeof(size_t) <= 64,
               "Tube: the reserve's fields leave the first line");
_Static_assert(offsetof(Tube, watching_ct) >= 64 &&
                   offsetof(Tube, nhrefs) + sizeof(size_t) <= 128,
               "Tube: the counters leave the second line");
_Static_assert(offsetof(Tube, waiting) >= 128 &&
                   offsetof(Tube, name) + 23 <= 192,
               "Tube: a use's fields leave the third line");

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
    r->nslots = 64;
    r->slots = calloc(r->nslots, sizeof *r->slots);
    return r->slots ? 0 : -1;
}

Tube *
tubes_find(const TubeRegistry *r, const char *name, size_t len)
{
    uint32_t h = name_hash(name, len);
    size_t mask = r->nslots - 1;
    for (size_t i = h & mask; r->slots[i].t; i = (i + 1) & mask) {
        const Tube *t = r->slots[i].t;
        if (r->slots[i].hash == h && t->name_len == len &&
            memcmp(t->name, name, len) == 0)
            return r->slots[i].t;
    }
    return NULL;
}

/* Puts t into the first free slot of its probe sequence (one is free). */
static void
slot_put(TubeSlot *slots, size_t nslots, Tube *t)
{
    size_t i = t->hash & (nslots - 1);
    while (slots[i].t)
        i = (i + 1) & (nslots - 1);
    slots[i] = (TubeSlot){.hash = t->hash, .t = t};
}

/* Doubles the slots, every tube put again from the list. Returns 0, or -1
 * out of memory (the slots unchanged). */
static int
grow(TubeRegistry *r)
{
    size_t n = r->nslots * 2;
    TubeSlot *ns = calloc(n, sizeof *ns);
    if (!ns) return -1;
    for (size_t i = 0; i < r->list.len; i++)
        slot_put(ns, n, r->list.items[i]);
    free(r->slots);
    r->slots = ns;
    r->nslots = n;
    return 0;
}

/* Empties t's slot, moving back the entries after it that its slot would
 * cut off from their home slots (linear probing's backward shift). */
static void
slot_delete(TubeRegistry *r, const Tube *t)
{
    size_t mask = r->nslots - 1, i = t->hash & mask;
    while (r->slots[i].t != t)
        i = (i + 1) & mask;
    for (size_t j = (i + 1) & mask; r->slots[j].t; j = (j + 1) & mask) {
        size_t home = r->slots[j].hash & mask;
        /* j's entry stays if its home lies cyclically in (i, j] */
        if (i <= j ? (i < home && home <= j) : (i < home || home <= j))
            continue;
        r->slots[i] = r->slots[j];
        i = j;
    }
    r->slots[i] = (TubeSlot){0};
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
    /* at most half the slots used, and always one free (a failed
     * growth leaves longer probes, still correct, until the last) */
    if ((r->list.len + 1) * 2 > r->nslots && grow(r) < 0 &&
        r->list.len + 1 >= r->nslots)
        return NULL;
    t = tube_new(name, len);
    if (!t || ptrset_append(&r->list, t) < 0) {
        free(t);
        return NULL;
    }
    t->list_pos = r->list.len - 1;
    slot_put(r->slots, r->nslots, t);
    t->refs = 1;
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
    slot_delete(r, t);
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
    free(r->slots);
    r->slots = NULL;
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
