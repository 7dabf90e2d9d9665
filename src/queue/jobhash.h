/* queue/jobhash.h - an id -> job hash table without stop-the-world
 * resizes: the overflow of the job table (job.h), for the jobs of ids its
 * chunks do not cover. Loop thread only. */
#ifndef ROCKSTALK_JOBHASH_H
#define ROCKSTALK_JOBHASH_H

#include <stddef.h>
#include <stdint.h>

/* The table holds pointers to jobs (job.h) and reads only each one's id,
 * the uint64_t that is a Job's first member (job.c asserts it), so that
 * this module needs nothing of job.h. */
struct Job;

/* An id -> job hash table: open addressing with linear probing (no per-job
 * link), kept at a load between 3/16 and 3/4 of its slots (8 bytes each).
 * A resize never stops the world: it allocates the new slot array and
 * then every insert and remove moves the next JOBHASH_STEP slots of the
 * old array (the one being migrated from) into the new one, so each call
 * does a bounded amount of work. Meanwhile both arrays hold jobs (each job
 * in exactly one) and lookups try both. The old array is walked backwards
 * from an empty slot, so what is left of it is always a run of whole probe
 * clusters and its lookups and backward-shift removals stay exact; its
 * emptied pages go back to the kernel as the walk passes them. A growth
 * from n to 2n slots holds 8n + 16n bytes at its start (as a one-step
 * resize did) and finishes within n / JOBHASH_STEP operations, long
 * before the next resize could be due. A zeroed JobHash is empty. JobTable
 * (job.h) keeps here the jobs its chunks do not hold. */
typedef struct JobHash {
    struct Job **slots; /* the array inserts go to (mmap'd), or NULL */
    size_t nslots;      /* power of two, or 0 */
    size_t len;         /* jobs in both arrays */
    struct Job **old;   /* the array being migrated from, or NULL */
    size_t nold;        /* its slots (power of two), 0 when old is NULL */
    size_t base;        /* the slot after an empty one of old where the walk
                           started: old slot (base + k) & (nold - 1) still holds
                           its jobs while k < left */
    size_t left;        /* old slots not yet migrated */
} JobHash;

/* Old slots migrated per insert and per remove. A migration of n old
 * slots takes n / JOBHASH_STEP calls and must end before the next resize
 * could be due: after a growth that is 3n/4 inserts or 3n/8 removes away,
 * after a shrink 3n/32 removes (so >= 11) or 3n/16 inserts. 32 slots hold
 * ~24 jobs at most: a cache miss on each job and one on the new array, at
 * worst a first touch of a page of it (a few us each); the step fetches
 * them all before it moves any, so that the misses overlap. */
#define JOBHASH_STEP 32

/* Finds job id, or NULL. */
struct Job *jobhash_find(const JobHash *t, uint64_t id);

/* Inserts j (its id must not be present); the table borrows j until it is
 * removed. Returns 0, or -1 out of memory (the table is unchanged). */
int jobhash_insert(JobHash *t, struct Job *j);

/* Removes j if present. Returns 1 if it was, else 0. */
int jobhash_remove(JobHash *t, struct Job *j);

/* Calls fn(j, arg) once for every job, in no particular order (the table
 * must not change meanwhile). */
void jobhash_each(const JobHash *t, void (*fn)(struct Job *j, void *arg),
                  void *arg);

/* Frees the slot arrays (not the jobs) and leaves t empty and reusable. */
void jobhash_free(JobHash *t);

#endif
