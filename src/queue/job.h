/* job.h - the in-memory job record and the id -> job table. Loop thread
 * only: the mutation thread never sees a Job (it gets StoreJob copies). */
#ifndef ROCKSTALK_JOB_H
#define ROCKSTALK_JOB_H

#include <stddef.h>
#include <stdint.h>

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
 * job costs about 120 resident bytes (issue: at most 128), its body aside.
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

/* The id -> job table: open addressing with linear probing (no per-job
 * link), kept at a load between 3/16 and 3/4 of its slots (8 bytes each).
 * A resize never stops the world: it allocates the new slot array and
 * then every insert and remove moves the next JOBTABLE_STEP slots of the
 * old array (the one being migrated from) into the new one, so each call
 * does a bounded amount of work. Meanwhile both arrays hold jobs (each job
 * in exactly one) and lookups try both. The old array is walked backwards
 * from an empty slot, so what is left of it is always a run of whole probe
 * clusters and its lookups and backward-shift removals stay exact; its
 * emptied pages go back to the kernel as the walk passes them. A growth
 * from n to 2n slots holds 8n + 16n bytes at its start (as a one-step
 * resize did) and finishes within n / JOBTABLE_STEP operations, long
 * before the next resize could be due. A zeroed JobTable is empty. */
typedef struct JobTable {
    Job **slots;   /* the array inserts go to (mmap'd), or NULL */
    size_t nslots; /* power of two, or 0 */
    size_t len;    /* jobs in both arrays */
    Job **old;     /* the array being migrated from, or NULL */
    size_t nold;   /* its slots (power of two), 0 when old is NULL */
    size_t base;   /* the slot after an empty one of old where the walk
                      started: old slot (base + k) & (nold - 1) still holds
                      its jobs while k < left */
    size_t left;   /* old slots not yet migrated */
} JobTable;

/* Old slots migrated per insert and per remove. A migration of n old
 * slots takes n / JOBTABLE_STEP calls and must end before the next resize
 * could be due: after a growth that is 3n/4 inserts or 3n/8 removes away,
 * after a shrink 3n/32 removes (so >= 11) or 3n/16 inserts. 32 slots hold
 * ~24 jobs at most: a cache miss on each job and one on the new array, at
 * worst a first touch of a page of it (a few us each); the step fetches
 * them all before it moves any, so that the misses overlap. */
#define JOBTABLE_STEP 32

/* Finds job id, or NULL. */
Job *jobtable_find(const JobTable *t, uint64_t id);

/* Inserts j (its id must not be present); the table borrows j until it is
 * removed. Returns 0, or -1 out of memory (the table is unchanged). */
int jobtable_insert(JobTable *t, Job *j);

/* Removes j if present. */
void jobtable_remove(JobTable *t, Job *j);

/* Calls fn(j, arg) once for every job, in no particular order (the table
 * must not change meanwhile). */
void jobtable_each(const JobTable *t, void (*fn)(Job *j, void *arg), void *arg);

/* Frees the slot arrays (not the jobs) and leaves t empty and reusable. */
void jobtable_free(JobTable *t);

/* Heap orderings: ready heaps by (pri, id); delay and TTR heaps by
 * (deadline, id). setpos stores the heap index in the job. */
int job_pri_less(const void *a, const void *b);
int job_deadline_less(const void *a, const void *b);
void job_setpos(void *x, size_t i);

/* Protocol name of j's state ("ready", ...). */
const char *job_state_name(const Job *j);

#endif
