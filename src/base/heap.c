/* heap.c - binary min-heap with index tracking. */
#include "base/heap.h"

#include <stdlib.h>

void
heap_init(Heap *h, int (*less)(const void *, const void *),
          void (*setpos)(void *, size_t))
{
    h->data = NULL;
    h->len = h->cap = 0;
    h->less = less;
    h->setpos = setpos;
}

static void
set(Heap *h, size_t i, void *x)
{
    h->data[i] = x;
    h->setpos(x, i);
}

static size_t
sift_up(Heap *h, size_t i)
{
    void *x = h->data[i];
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!h->less(x, h->data[p])) break;
        set(h, i, h->data[p]);
        i = p;
    }
    set(h, i, x);
    return i;
}

static void
sift_down(Heap *h, size_t i)
{
    void *x = h->data[i];
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        void *best = x;
        if (l < h->len && h->less(h->data[l], best)) m = l, best = h->data[l];
        if (l + 1 < h->len && h->less(h->data[l + 1], best)) m = l + 1;
        if (m == i) break;
        set(h, i, h->data[m]);
        i = m;
    }
    set(h, i, x);
}

int
heap_insert(Heap *h, void *x)
{
    if (h->len == h->cap) {
        size_t ncap = h->cap ? h->cap * 2 : 16;
        void **nd = realloc(h->data, ncap * sizeof *nd);
        if (!nd) return -1;
        h->data = nd;
        h->cap = ncap;
    }
    h->data[h->len] = x;
    sift_up(h, h->len++);
    return 0;
}

void *
heap_remove(Heap *h, size_t i)
{
    void *x = h->data[i];
    h->len--;
    if (i < h->len) {
        set(h, i, h->data[h->len]);
        heap_fix(h, i);
    }
    if (h->cap > 64 && h->len < h->cap / 4) {
        void **nd = realloc(h->data, (h->cap / 2) * sizeof *nd);
        if (nd) {
            h->data = nd;
            h->cap /= 2;
        }
    }
    return x;
}

void
heap_fix(Heap *h, size_t i)
{
    if (sift_up(h, i) == i) sift_down(h, i);
}

/* heap_first's frontier: a min-heap of indices into h, by h's order. */
typedef struct Frontier {
    const Heap *h;
    size_t n;
    size_t ix[HEAP_FIRST_MAX + 1];
} Frontier;

static int
front_less(const Frontier *f, size_t a, size_t b)
{
    return f->h->less(f->h->data[f->ix[a]], f->h->data[f->ix[b]]);
}

static void
front_swap(Frontier *f, size_t a, size_t b)
{
    size_t t = f->ix[a];
    f->ix[a] = f->ix[b];
    f->ix[b] = t;
}

static void
front_push(Frontier *f, size_t i)
{
    if (i >= f->h->len) return;
    size_t c = f->n++;
    f->ix[c] = i;
    for (; c > 0 && front_less(f, c, (c - 1) / 2); c = (c - 1) / 2)
        front_swap(f, c, (c - 1) / 2);
}

static size_t
front_pop(Frontier *f)
{
    size_t top = f->ix[0], c = 0;
    f->ix[0] = f->ix[--f->n];
    for (;;) {
        size_t l = 2 * c + 1, m = c;
        if (l < f->n && front_less(f, l, m)) m = l;
        if (l + 1 < f->n && front_less(f, l + 1, m)) m = l + 1;
        if (m == c) return top;
        front_swap(f, c, m);
        c = m;
    }
}

size_t
heap_first(const Heap *h, void **out, size_t k)
{
    Frontier f = {.h = h};
    size_t got = 0;

    if (k > HEAP_FIRST_MAX) k = HEAP_FIRST_MAX;
    front_push(&f, 0);
    /* each pop adds at most one net entry, so n <= k + 1 */
    while (got < k && f.n) {
        size_t i = front_pop(&f);
        out[got++] = h->data[i];
        front_push(&f, 2 * i + 1);
        front_push(&f, 2 * i + 2);
    }
    return got;
}

void
heap_free(Heap *h)
{
    free(h->data);
    h->data = NULL;
    h->len = h->cap = 0;
}
