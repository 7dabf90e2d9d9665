/* tube.h - tubes: per-tube ready, delay and buried heaps, waiting
 * reservers, pause state and counters; and the registry that finds tubes by
 * name and keeps them in beanstalkd's list-tubes order. A tube lives while
 * anything refers to it (a connection using or watching it, or a job in it);
 * the default tube always. Loop thread only. */
#ifndef ROCKSTALK_TUBE_H
#define ROCKSTALK_TUBE_H

#include <stddef.h>
#include <stdint.h>

#include "base/common.h"
#include "base/heap.h"
#include "base/ptrset.h"
#include "queue/job.h"

/* Per-second samples a tube keeps of its cumulative put, reserve and
 * delete counts (total_jobs, reserve_ct, delete_ct), for the HTTP API's
 * rates: server/httpdocs.c takes one of every tube each second, at the
 * server's sample tick (Server.rate_tick), into slot tick %
 * TUBE_RATE_SAMPLES. */
#define TUBE_RATE_SAMPLES 6
typedef struct TubeRates {
    uint64_t n[TUBE_RATE_SAMPLES][3]; /* puts, reserves, deletes */
    uint32_t since; /* the tick of its first sample; 0: none yet */
} TubeRates;

struct Session;
struct WatchRef;

/* One blocked reserver in a tube's waiting set: the session, and where
 * the session keeps this entry's index in the set (*at, updated whenever
 * the entry moves; SIZE_MAX once it has left the set). */
typedef struct WaitRef {
    struct Session *se;
    size_t *at;
} WaitRef;

/* A tube's blocked reservers, with base/ptrset.h's ordering rules (append
 * at the end, delete by moving the last entry into the hole, round-robin
 * take), so that they are served in beanstalkd 1.12's order; but each
 * entry knows its index, so a delete is O(1), and the array keeps its
 * capacity when it empties (no allocation per blocked reserve). */
typedef struct WaitSet {
    WaitRef *items; /* owned */
    size_t len, cap;
    size_t last; /* round-robin cursor of waitset_take */
} WaitSet;

/* Appends se to w; *at gets its index. Returns 0, or -1 out of memory. */
int waitset_add(WaitSet *w, struct Session *se, size_t *at);

/* Removes the entry at index i (< len): the last entry takes its place
 * (its *at updated); the removed entry's *at becomes SIZE_MAX. O(1). */
void waitset_delete(WaitSet *w, size_t i);

/* Removes and returns the next reserver in round-robin order (as
 * ptrset_take), or NULL if w is empty. */
struct Session *waitset_take(WaitSet *w);

/* Frees w's array. */
void waitset_free(WaitSet *w);

/* A tube. Its first 64 bytes hold what a reserve reads of each watched
 * tube (the ready count, the best ready job's key, the pause), so that
 * choosing among W watched tubes touches one cache line of each; the
 * second line the counters a job's moves change; the third what a use
 * touches (the name, the reference and using counts) and the waiting set
 * a put looks at, so that a use of a cold tube with a name of up to 23
 * bytes touches one line of it, and a job's round trip through a tube
 * three, whatever the number of tubes. Tubes are allocated 64-byte
 * aligned. */
typedef struct Tube {
    uint64_t top_id;    /* the best ready job's id (ready.len > 0 only) */
    uint32_t top_pri;   /* ... and its priority; queue.c keeps both */
    uint32_t hash;      /* of the name (the registry's slots hold it too) */
    int64_t pause_ns;   /* pause-tube duration, 0 if not paused */
    int64_t unpause_at; /* monotonic ns */
    Heap ready;         /* Job*, by (pri, id) */
    uint32_t watching_ct;
    uint64_t urgent_ct, reserved_ct, total_jobs, delete_ct;
    uint64_t reserve_ct; /* jobs of this tube reserved, since it was made */
    /* the entries of the sessions with a tube heap watching it
     * (watch.h): hrefs[0..nhrefs); the array is owned, the entries are the
     * sessions' */
    size_t nhrefs;
    WaitSet waiting; /* sessions blocked in reserve watching it */
    uint32_t refs;
    uint32_t using_ct;
    uint8_t name_len;
    char name[TUBE_NAME_MAX + 1]; /* its first 23 bytes in the third line */
    struct WatchRef **hrefs;
    size_t caphrefs;
    Heap delay;       /* Job*, by (deadline, id) */
    Heap buried;      /* Job*, by bury order: kick takes the oldest */
    size_t pause_pos; /* index in the server's pause heap, or SIZE_MAX */
    size_t delay_pos; /* index in the server's delayed-tube heap, or
                         SIZE_MAX */
    uint64_t buried_ct, pause_ct;
    TubeRates rates;
    uint32_t prefetch_iter; /* loop iteration of its latest read-ahead scan */
    uint64_t *age;          /* ids that entered ready: a min-heap, stale
                               entries dropped lazily (queue/readyage.h) */
    size_t age_len, age_cap;
    size_t list_pos; /* its index in TubeRegistry.list */
} Tube;

/* A registry slot: a tube and its name's hash (t NULL: empty), so that a
 * lookup compares hashes without touching the tubes they are not. */
typedef struct TubeSlot {
    uint32_t hash;
    Tube *t;
} TubeSlot;

/* The tubes by name: open addressing with linear probing over nslots
 * slots (a power of two, at most half of them used), deletion by backward
 * shift (no tombstones). */
typedef struct TubeRegistry {
    TubeSlot *slots; /* owned */
    size_t nslots;
    PtrSet list; /* every live tube, in list-tubes order */
} TubeRegistry;

/* Initialises an empty registry. Returns 0 or -1 out of memory. */
int tubes_init(TubeRegistry *r);

/* Finds the tube called name (len bytes), or NULL. */
Tube *tubes_find(const TubeRegistry *r, const char *name, size_t len);

/* Finds or creates the tube and takes a reference on it. Returns NULL only
 * when memory ran out. */
Tube *tubes_get(TubeRegistry *r, const char *name, size_t len);

/* Nonzero if a's best ready job comes before b's: by priority, then id
 * (job_pri_less on the two tubes' heap tops). Both must have ready jobs. */
static inline int
tube_top_less(const Tube *a, const Tube *b)
{
    return a->top_pri != b->top_pri ? a->top_pri < b->top_pri
                                    : a->top_id < b->top_id;
}

/* Takes a reference on t. */
static inline void
tube_ref(Tube *t)
{
    t->refs++;
}

/* Drops a reference; at zero the tube is removed from the registry (O(1):
 * the last tube of the list takes its place, as beanstalkd's list-tubes
 * order has it) and freed (it holds no jobs, conns or waiters by then). */
void tubes_unref(TubeRegistry *r, Tube *t);

/* Frees every tube and the registry itself. */
void tubes_free(TubeRegistry *r);

#endif
