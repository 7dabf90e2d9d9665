/* jobhash.c - the id -> job hash table (see jobhash.h). */
#include "queue/jobhash.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

typedef struct Job Job;

/* A job's id: its first member (jobhash.h; job.c asserts it). */
static inline uint64_t
id_of(const Job *j)
{
    uint64_t id;
    memcpy(&id, (const void *)j, sizeof id);
    return id;
}

/* Slots of the smallest array: a table never shrinks below this. */
#define MIN_SLOTS 1024
/* Old slots per page-release: 64 KiB, 16 pages, about 6 us of madvise. */
#define RELEASE_SLOTS 8192

static size_t
slot_of(uint64_t id, size_t nslots)
{
    /* ids are sequential: a multiplicative mix spreads neighbours. */
    return (size_t)((id * 0x9E3779B97F4A7C15ULL) >> 17) & (nslots - 1);
}

/* Slot arrays come straight from mmap: zero pages arrive on first touch
 * (no calloc memset on the loop thread) and parts of an array can be given
 * back with madvise while the rest is still in use. */
static Job **
slots_alloc(size_t n)
{
    void *p = mmap(NULL, n * sizeof(Job *), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void
slots_free(Job **slots, size_t n)
{
    if (slots) munmap(slots, n * sizeof(Job *));
}

/* The slot of id in slots, or the empty slot where its probe ends. */
static size_t
probe(Job *const *slots, size_t nslots, uint64_t id)
{
    size_t i = slot_of(id, nslots);
    while (slots[i] && id_of(slots[i]) != id)
        i = (i + 1) & (nslots - 1);
    return i;
}

static void
place(Job **slots, size_t nslots, Job *j)
{
    size_t i = slot_of(id_of(j), nslots);
    while (slots[i])
        i = (i + 1) & (nslots - 1);
    slots[i] = j;
}

/* Removes j from slots by backward-shift deletion (no tombstones): the
 * jobs after it in its cluster move back only within that cluster. Returns
 * 1 if j was there, else 0. */
static int
unlink_job(Job **slots, size_t nslots, const Job *j)
{
    if (!nslots) return 0;
    size_t mask = nslots - 1, i = probe(slots, nslots, id_of(j));
    if (slots[i] != j) return 0;
    for (size_t k = (i + 1) & mask; slots[k]; k = (k + 1) & mask) {
        size_t home = slot_of(id_of(slots[k]), nslots);
        if (((k - home) & mask) >= ((k - i) & mask)) {
            slots[i] = slots[k];
            i = k;
        }
    }
    slots[i] = NULL;
    return 1;
}

/* Fetches the jobs of the next n old slots migrate() takes, and then their
 * home slots in the new array, so that their cache misses overlap instead
 * of following one another (each job is read for its id, each home slot
 * written). */
static void
migrate_prefetch(const JobHash *t, size_t n)
{
    size_t mask = t->nold - 1, left = t->left;
    if (n > left) n = left;
    for (size_t k = 1; k <= n; k++) {
        const Job *j = t->old[(t->base + left - k) & mask];
        if (j) __builtin_prefetch(j, 0);
    }
    for (size_t k = 1; k <= n; k++) {
        const Job *j = t->old[(t->base + left - k) & mask];
        if (j) __builtin_prefetch(&t->slots[slot_of(id_of(j), t->nslots)], 1);
    }
}

/* Moves up to budget old slots into t->slots, walking old backwards from
 * the slot before base: the one taken is always the last of its cluster, so
 * no job left in old loses a slot of its probe path. A fully migrated
 * RELEASE_SLOTS-aligned block goes back to the kernel (later lookups that
 * read it see zero pages, i.e. empty slots); the last step frees old. */
static void
migrate(JobHash *t, size_t budget)
{
    size_t mask = t->nold - 1;
    for (; t->left && budget; budget--) {
        size_t i = (t->base + --t->left) & mask;
        Job *j = t->old[i];
        if (j) {
            t->old[i] = NULL;
            place(t->slots, t->nslots, j);
        }
        /* the block of base is done only at the end (i == base) */
        if (!(i & (RELEASE_SLOTS - 1)) && t->nold >= RELEASE_SLOTS &&
            !(t->base > i && t->base < i + RELEASE_SLOTS))
            madvise(t->old + i, RELEASE_SLOTS * sizeof(Job *), MADV_DONTNEED);
    }
    if (t->old && !t->left) {
        slots_free(t->old, t->nold);
        t->old = NULL;
        t->nold = 0;
    }
}

/* Starts moving the jobs to a new array of n slots. A migration still
 * under way is finished first (unreachable with JOBHASH_STEP >= 11, see
 * jobhash.h). Returns 0, or -1 if the array cannot be had (t is unchanged). */
static int
resize(JobHash *t, size_t n)
{
    Job **ns = slots_alloc(n);
    if (!ns) return -1;
    migrate(t, SIZE_MAX);
    t->old = t->slots;
    t->nold = t->nslots;
    t->slots = ns;
    t->nslots = n;
    if (!t->old) return 0;
    size_t e = 0; /* an empty slot: the load is at most 3/4 */
    while (t->old[e])
        e++;
    t->base = (e + 1) & (t->nold - 1);
    t->left = t->nold - 1; /* the last slot of the walk, e, is empty */
    return 0;
}

Job *
jobhash_find(const JobHash *t, uint64_t id)
{
    if (!t->nslots) return NULL;
    Job *j = t->slots[probe(t->slots, t->nslots, id)];
    if (!j && t->old) j = t->old[probe(t->old, t->nold, id)];
    return j;
}

/* After an insert or a remove of id: fetches the slot of id + 1 (ids come,
 * and mostly go, in order: the next one's slot arrives while the loop does
 * the rest of this command's work), then moves the next JOBHASH_STEP old
 * slots of a migration under way. */
static void
step(JobHash *t, uint64_t id)
{
    __builtin_prefetch(&t->slots[slot_of(id + 1, t->nslots)], 1);
    if (t->left) migrate_prefetch(t, JOBHASH_STEP);
    migrate(t, JOBHASH_STEP);
}

int
jobhash_insert(JobHash *t, Job *j)
{
    if ((t->len + 1) * 4 > t->nslots * 3 &&
        resize(t, t->nslots ? t->nslots * 2 : MIN_SLOTS) < 0)
        return -1;
    place(t->slots, t->nslots, j);
    t->len++;
    step(t, id_of(j));
    return 0;
}

int
jobhash_remove(JobHash *t, Job *j)
{
    if (!unlink_job(t->slots, t->nslots, j) &&
        !(t->old && unlink_job(t->old, t->nold, j)))
        return 0;
    t->len--;
    if (t->nslots > MIN_SLOTS && t->len * 16 < t->nslots * 3)
        resize(t, t->nslots / 2); /* on failure keep the larger table */
    step(t, id_of(j));
    return 1;
}

void
jobhash_each(const JobHash *t, void (*fn)(Job *j, void *arg), void *arg)
{
    for (size_t i = 0; i < t->nslots; i++)
        if (t->slots[i]) fn(t->slots[i], arg);
    for (size_t i = 0; i < t->nold; i++)
        if (t->old[i]) fn(t->old[i], arg);
}

void
jobhash_free(JobHash *t)
{
    slots_free(t->slots, t->nslots);
    slots_free(t->old, t->nold);
    *t = (JobHash){0};
}
