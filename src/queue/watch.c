/* watch.c - see watch.h. */
#include "queue/watch.h"

#include <stdlib.h>

static void
must(int ok)
{
    if (!ok) abort(); /* out of memory, as the queue's heaps */
}

static int
ref_less(const void *a, const void *b)
{
    const WatchRef *x = a, *y = b;
    return x->pri != y->pri ? x->pri < y->pri : x->id < y->id;
}

static void
ref_setpos(void *x, size_t i)
{
    ((WatchRef *)x)->hpos = i;
}

void
watch_init(Session *se)
{
    heap_init(&se->tops, ref_less, ref_setpos);
    se->wrefs = NULL;
    se->wrefs_cap = 0;
}

/* t's real key into r: its best ready job's, or +infinity. */
static void
real_key(const Tube *t, uint64_t *pri, uint64_t *id)
{
    *pri = t->ready.len ? t->top_pri : UINT64_MAX;
    *id = t->ready.len ? t->top_id : 0;
}

/* Makes the entry of se's i-th watched tube. */
static void
ref_add(Session *se, size_t i)
{
    Tube *t = se->watch.items[i];
    WatchRef *r = malloc(sizeof *r);
    must(r != NULL);
    r->se = se;
    r->t = t;
    real_key(t, &r->pri, &r->id);
    if (t->nhrefs == t->caphrefs) {
        size_t n = t->caphrefs ? t->caphrefs * 2 : 4;
        WatchRef **a = realloc(t->hrefs, n * sizeof *a);
        must(a != NULL);
        t->hrefs = a;
        t->caphrefs = n;
    }
    r->tpos = t->nhrefs;
    t->hrefs[t->nhrefs++] = r;
    must(heap_insert(&se->tops, r) == 0);
    se->wrefs[i] = r;
}

/* Takes r out of its tube's list and its session's heap, and frees it. */
static void
ref_drop(WatchRef *r)
{
    Tube *t = r->t;
    t->hrefs[r->tpos] = t->hrefs[--t->nhrefs];
    if (r->tpos < t->nhrefs) t->hrefs[r->tpos]->tpos = r->tpos;
    heap_remove(&r->se->tops, r->hpos);
    free(r);
}

/* Makes wrefs hold at least n entries. */
static void
wrefs_reserve(Session *se, size_t n)
{
    if (n <= se->wrefs_cap) return;
    size_t cap = n * 2;
    WatchRef **a = realloc(se->wrefs, cap * sizeof *a);
    must(a != NULL);
    se->wrefs = a;
    se->wrefs_cap = cap;
}

void
watch_added(Session *se)
{
    size_t n = se->watch.len;
    if (!se->wrefs && n < WATCH_HEAP_MIN) return;
    if (se->wrefs) {
        wrefs_reserve(se, n);
        ref_add(se, n - 1);
        return;
    }
    wrefs_reserve(se, n);
    for (size_t i = 0; i < n; i++)
        ref_add(se, i);
}

void
watch_removing(Session *se, size_t i)
{
    if (!se->wrefs) return;
    size_t last = se->watch.len - 1;
    ref_drop(se->wrefs[i]);
    se->wrefs[i] = se->wrefs[last]; /* as the watch list moves */
}

void
watch_free(Session *se)
{
    for (size_t i = 0; se->wrefs && i < se->watch.len; i++)
        ref_drop(se->wrefs[i]);
    free(se->wrefs);
    heap_free(&se->tops);
    se->wrefs = NULL;
    se->wrefs_cap = 0;
}

void
watch_tube_improved(Tube *t)
{
    uint64_t pri, id;
    real_key(t, &pri, &id);
    for (size_t k = 0; k < t->nhrefs; k++) {
        WatchRef *r = t->hrefs[k];
        if (pri < r->pri || (pri == r->pri && id < r->id)) {
            r->pri = pri;
            r->id = id;
            heap_fix(&r->se->tops, r->hpos);
        }
    }
}

Tube *
watch_best(Session *se)
{
    WatchRef *r;
    uint64_t pri, id;
    while ((r = heap_peek(&se->tops))) {
        real_key(r->t, &pri, &id);
        if (pri == r->pri && id == r->id) /* right, so the best */
            return r->t->ready.len ? r->t : NULL;
        r->pri = pri; /* stale: it only ever rises here */
        r->id = id;
        heap_fix(&se->tops, 0);
    }
    return NULL;
}
