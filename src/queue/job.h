/* job.h - the in-memory job record and the id -> job table. Loop thread
 * only: the mutation thread never sees a Job (it gets StoreJob copies). */
#ifndef ROCKSTALK_JOB_H
#define ROCKSTALK_JOB_H

#include <stddef.h>
#include <stdint.h>

#include "queue/jobhash.h"

struct Tube;

/* Job states (protocol: "ready", "delayed", "reserved", "buried"). */
enum { JOB_READY = 1, JOB_DELAYED = 2, JOB_BURIED = 3, JOB_RESERVED = 4 };

/* Job.flags: the persisted meta record was rewritten (see store.h). */
#define JOB_F_REWRITTEN 0x01
/* Job.flags: the body was read back from the store, so dropping it from
 * memory is always safe. */
#define JOB_F_STORED 0x02
/* Job.flags: the body reader thread has been asked for the body
 * (prefetch.h); cleared when its result is taken. */
#define JOB_F_FETCHING 0x04
/* Job.flags: the job's stored state is delayed or buried, so making it
 * ready again (a release, a lease's end) must be stored. */
#define JOB_F_AT_REST_WAITING 0x08
/* Job.flags: a connection's reply waits for this body from the reader
 * thread (jobreply.h); its read is a cache miss, not a prefetch. */
#define JOB_F_NEEDED 0x10
/* Job.flags: the reader thread could not read the body (set when its
 * result comes back; cleared when a reply asks for the body again). */
#define JOB_F_UNREADABLE 0x20
/* Job.flags: put-unique made it: a deduplication key names it (dedup.h). */
#define JOB_F_UNIQUE 0x40
/* Job.flags: the store keeps the body inline with the meta
 * (STORE_F_INLINE, store/types.h): updates keep it by a Merge, and the
 * delete has no body key to delete. */
#define JOB_F_INLINE 0x80

/* 88 bytes on x86-64: with its heap slot and its share of the id table a
 * job costs about 113 resident bytes (issue: at most 128), its body aside.
 * Which heap holds it follows from its state: ready -> its tube's ready
 * heap, delayed -> its tube's delay heap, buried -> its tube's buried heap
 * (ordered by bury sequence, kept in deadline), reserved -> its reserver's
 * lease heap. */
typedef struct Job {
    uint64_t id;
    int64_t deadline;   /* monotonic ns: TTR end if reserved, due if
                           delayed; bury order if buried */
    int64_t created_at; /* wall-clock ns */
    char *body;         /* body_size + 2 bytes, trailing CRLF included; owned;
                           NULL when the body is only on disk */
    struct Tube *tube;  /* holds a tube reference */
    uint32_t pri;
    uint32_t ttr;       /* seconds, >= 1 */
    uint32_t delay;     /* seconds, as last given by put or release */
    uint32_t body_size; /* bytes, without the CRLF */
    uint32_t reserves, timeouts, releases, buries, kicks;
    uint32_t heap_index; /* position in whichever heap holds it */
    uint32_t seq; /* low 32 bits of the applied sequence of the job's latest
                     persisted mutation (0: recovered) */
    uint8_t state;
    uint8_t flags;
} Job;

/* The id -> job table. Ids are handed out in order and jobs mostly go in
 * roughly that order, so the ids of the jobs held crowd in a window below
 * the newest: there the table is an array of chunks, each the slots of
 * JOBTABLE_CHUNK consecutive ids (one 4 KiB page), found by its number
 * (id / JOBTABLE_CHUNK) in a ring (entry number mod its size). An insert or a
 * lookup in a chunk is an index, no hash and no probe, and consecutive ids
 * share cache lines and a page: no miss per put, no rehash ever. The jobs
 * of any other id live in a JobHash (jobhash.h), the overflow:
 *  - a chunk is made only for an id above the chunk number of every id
 *    inserted before (the head), so an id at or below the head whose chunk
 *    is gone (or never was) goes to the overflow, and no chunk's ids are
 *    ever in both; and only if the head's number had at least
 *    JOBTABLE_CHUNK_MIN inserts, so ids that come sparse (a recovery of a
 *    queue thinned by deletes) go to the overflow without a chunk made
 *    and dropped for each;
 *  - a chunk other than the head's that holds fewer than JOBTABLE_CHUNK_MIN
 *    jobs (when the head moves past it, or at a removal) gives them to
 *    the overflow and is freed, so a chunk costs at most 22 bytes per job
 *    held (8 when full; the hash 11-22 while it grows, at most 43), and
 *    sparse ids cost what they did;
 *  - a new chunk whose ring entry is taken doubles the ring (a pass over
 *    its entries; no two chunks meet in the larger one), unless the ring
 *    is already JOBTABLE_RING_PER_CHUNK times the chunks held: then the
 *    chunk in the entry gives its jobs to the overflow. So a queue of
 *    consecutive ids, however deep, stays in chunks, while a few chunks far
 *    apart (old ids kept among new) do not make the ring any larger.
 * A call moves at most JOBTABLE_CHUNK_MIN - 1 + JOBTABLE_CHUNK jobs to
 * the overflow (once per chunk at most; each insert there may step the
 * overflow's migration) or doubles the ring; nothing else but the
 * overflow's bounded steps. A zeroed JobTable is empty. */
#define JOBTABLE_CHUNK_BITS 9
#define JOBTABLE_CHUNK ((uint64_t)1 << JOBTABLE_CHUNK_BITS)
#define JOBTABLE_CHUNK_MIN (JOBTABLE_CHUNK * 3 / 8)
/* Ring entries at first (a power of two), and the most per chunk held
 * beyond that (8 bytes each, against a chunk's 4 KiB). */
#define JOBTABLE_RING_MIN 64
#define JOBTABLE_RING_PER_CHUNK 4

/* The slots of ids no * JOBTABLE_CHUNK .. (no + 1) * JOBTABLE_CHUNK - 1. */
typedef struct JobChunk {
    uint64_t no;
    size_t live; /* jobs held */
    Job *slot[JOBTABLE_CHUNK];
} JobChunk;

typedef struct JobTable {
    JobChunk **ring; /* nring entries, chunk no at no % nring; NULL before
                        the first insert */
    size_t nring;    /* a power of two */
    size_t nchunks;  /* chunks in the ring */
    uint64_t head;   /* the highest chunk number inserted into (with ring);
                        its chunk may not exist */
    size_t head_ins; /* inserts of ids in head since it became the head */
    size_t len;      /* jobs held, in chunks and in the overflow */
    JobHash over;    /* the jobs no chunk holds */
} JobTable;

/* Finds job id, or NULL. */
Job *jobtable_find(const JobTable *t, uint64_t id);

/* Inserts j (its id must not be present); the table borrows j until it is
 * removed. Returns 0, or -1 out of memory (the table is unchanged; a move
 * into the overflow that fails aborts, as a heap's growth does). */
int jobtable_insert(JobTable *t, Job *j);

/* Removes j if present. */
void jobtable_remove(JobTable *t, Job *j);

/* Calls fn(j, arg) once for every job, in no particular order (the table
 * must not change meanwhile). */
void jobtable_each(const JobTable *t, void (*fn)(Job *j, void *arg), void *arg);

/* Frees the chunks, the ring and the overflow (not the jobs) and leaves t
 * empty and reusable. */
void jobtable_free(JobTable *t);

/* Heap orderings: ready heaps by (pri, id); delay and TTR heaps by
 * (deadline, id). setpos stores the heap index in the job. */
int job_pri_less(const void *a, const void *b);
int job_deadline_less(const void *a, const void *b);
void job_setpos(void *x, size_t i);

/* Protocol name of j's state ("ready", ...). */
const char *job_state_name(const Job *j);

#endif
