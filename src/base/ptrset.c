/* ptrset.c - see ptrset.h. */
#include "base/ptrset.h"

#include <stdlib.h>

int
ptrset_append(PtrSet *s, void *x)
{
    if (s->len == s->cap) {
        size_t ncap = s->cap ? s->cap * 2 : 4;
        void **n = realloc(s->items, ncap * sizeof *n);
        if (!n) return -1;
        s->items = n;
        s->cap = ncap;
    }
    s->items[s->len++] = x;
    return 0;
}

long
ptrset_find(const PtrSet *s, const void *x)
{
    for (size_t i = 0; i < s->len; i++)
        if (s->items[i] == x) return (long)i;
    return -1;
}

void
ptrset_delete(PtrSet *s, size_t i)
{
    s->items[i] = s->items[--s->len];
    if (s->len == 0) {
        free(s->items);
        s->items = NULL;
        s->cap = 0;
    }
}

int
ptrset_remove(PtrSet *s, const void *x)
{
    long i = ptrset_find(s, x);
    if (i < 0) return 0;
    ptrset_delete(s, (size_t)i);
    return 1;
}

void *
ptrset_take(PtrSet *s)
{
    if (s->len == 0) return NULL;
    size_t i = s->last % s->len;
    s->last = i + 1;
    void *x = s->items[i];
    ptrset_delete(s, i);
    return x;
}

void
ptrset_free(PtrSet *s)
{
    free(s->items);
    s->items = NULL;
    s->len = s->cap = s->last = 0;
}
