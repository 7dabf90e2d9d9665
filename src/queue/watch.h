/* watch.h - the tube heap of a session that watches many tubes
 * (WATCH_HEAP_MIN or more): its watched tubes in a heap by the key
 * (priority, id) of each tube's best ready job, so that a reserve finds
 * the best of W tubes in O(log W) amortised instead of looking at all W.
 * The heap is lazy: each entry holds a key never above its tube's real
 * one (an empty tube's is +infinity); a reserve raises the stale keys it
 * finds on top until the top's is right, and that top is then the best.
 * A tube's real key falls only when a job becomes its best ready job
 * (watch_tube_improved), which lowers the keys of that tube's entries.
 * Pauses are not in the keys: with any tube paused the caller looks at
 * every tube instead. Loop thread only. */
#ifndef ROCKSTALK_WATCH_H
#define ROCKSTALK_WATCH_H

#include <stdint.h>

#include "queue/session.h"
#include "queue/tube.h"

/* Sessions watching at least this many tubes get a tube heap. */
#define WATCH_HEAP_MIN 8

/* One entry of a session's tube heap: session se watches tube t. Owned by
 * the session (Session.wrefs); the tube lists it too (Tube.hrefs). */
typedef struct WatchRef {
    Session *se;
    Tube *t;
    uint64_t pri, id; /* the key: never above t's real one; UINT64_MAX, 0
                         for +infinity */
    size_t hpos;      /* index in se->tops */
    size_t tpos;      /* index in t->hrefs */
} WatchRef;

/* Initialises se's (empty) tube heap; allocates nothing. */
void watch_init(Session *se);

/* se has just appended a tube to its watch list: gives it an entry if se
 * has a tube heap, or makes the heap once the list reaches
 * WATCH_HEAP_MIN tubes. Aborts if memory runs out (as the queue's heaps). */
void watch_added(Session *se);

/* se is about to delete the i-th tube of its watch list (ptrset_delete:
 * the last one moves into slot i): drops its entry. O(log W). */
void watch_removing(Session *se, size_t i);

/* Frees se's tube heap and entries (before its watch list goes). */
void watch_free(Session *se);

/* A job has just become t's best ready job: lowers the keys of t's
 * entries to its real key. O(E log W) for E sessions with a tube heap
 * watching t. */
void watch_tube_improved(Tube *t);

/* Nonzero if se has a tube heap. */
static inline int
watch_has_heap(const Session *se)
{
    return se->wrefs != NULL;
}

/* The watched tube of se (which has a tube heap) whose best ready job
 * comes first, pauses not considered, or NULL if none has a ready job. */
Tube *watch_best(Session *se);

#endif
