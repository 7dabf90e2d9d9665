/* ptrset.h - small unordered array of pointers with beanstalkd's exact
 * ordering rules: append at the end, delete by moving the last item into the
 * hole, and a round-robin take. The watch list, the global tube list and each
 * tube's waiting reservers use it, so list-tubes, list-tubes-watched and the
 * order in which blocked reservers are served match beanstalkd 1.12. Loop
 * thread only. */
#ifndef ROCKSTALK_PTRSET_H
#define ROCKSTALK_PTRSET_H

#include <stddef.h>

typedef struct PtrSet {
    void **items;
    size_t len, cap;
    size_t last; /* round-robin cursor of ptrset_take */
} PtrSet;

/* Appends x. Returns 0, or -1 if memory ran out. */
int ptrset_append(PtrSet *s, void *x);

/* Index of x, or -1 if absent. O(len). */
long ptrset_find(const PtrSet *s, const void *x);

/* Removes the item at index i; the last item takes its place. */
void ptrset_delete(PtrSet *s, size_t i);

/* Removes x if present; returns 1 if it was, 0 if not. */
int ptrset_remove(PtrSet *s, const void *x);

/* Removes and returns the next item in round-robin order, or NULL. */
void *ptrset_take(PtrSet *s);

/* Frees the array. */
void ptrset_free(PtrSet *s);

#endif
