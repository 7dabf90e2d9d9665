/* heap.h - binary min-heap of pointers whose elements know their own index,
 * so any element can be removed in O(log n) (ready, delay, TTR, pause and
 * wait heaps). Loop thread only. */
#ifndef ROCKSTALK_HEAP_H
#define ROCKSTALK_HEAP_H

#include <stddef.h>

/* less(a, b): nonzero if a must come out before b. setpos(x, i): stores
 * x's current index i (so heap_remove can find it). */
typedef struct Heap {
    void **data;
    size_t len, cap;
    int (*less)(const void *a, const void *b);
    void (*setpos)(void *x, size_t i);
} Heap;

/* Initialises an empty heap; allocates nothing. */
void heap_init(Heap *h, int (*less)(const void *, const void *),
               void (*setpos)(void *, size_t));

/* Inserts x. Returns 0, or -1 if memory ran out (x is not inserted). */
int heap_insert(Heap *h, void *x);

/* The least element, or NULL if empty. */
static inline void *
heap_peek(const Heap *h)
{
    return h->len ? h->data[0] : NULL;
}

/* Removes and returns the element at index i (i < len). */
void *heap_remove(Heap *h, size_t i);

/* Restores order after the key of the element at index i changed. */
void heap_fix(Heap *h, size_t i);

/* Most elements heap_first returns at once. */
#define HEAP_FIRST_MAX 1024

/* Writes the min(k, len, HEAP_FIRST_MAX) least elements into out, least
 * first, without changing the heap (best-first walk from the root, O(k log
 * k)); returns how many. The next k heap_remove(h, 0) calls would return
 * exactly these, as long as nothing is inserted or changed meanwhile. */
size_t heap_first(const Heap *h, void **out, size_t k);

/* Frees the array (not the elements). */
void heap_free(Heap *h);

#endif
