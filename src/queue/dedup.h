/* dedup.h - the deduplication keys of put-unique (protocol/PROTOCOL.md,
 * section 14.1): which (tube, key) pairs have created a job, and until
 * when each is remembered. A key is remembered for the window after its
 * put, and while its job exists, whichever is longer. Two hash tables
 * (by tube and key, and by job id) and an expiry heap; memory follows the
 * number of keys remembered, nothing else. Knows no server and no store:
 * the caller stores what it must. Loop thread only. */
#ifndef ROCKSTALK_DEDUP_H
#define ROCKSTALK_DEDUP_H

#include <stddef.h>
#include <stdint.h>

#include "base/heap.h"

/* Longest key, bytes (the characters of a tube name). */
#define DEDUP_KEY_MAX 200

typedef struct DedupKey {
    struct DedupKey *next_name, *next_id; /* hash chains */
    uint64_t id;                          /* the job the key created */
    int64_t expire_ns;                    /* wall clock: end of the window */
    size_t heap_pos;                      /* in Dedup.expiry */
    uint8_t job_gone; /* the job was deleted before the window ended */
    uint8_t tube_len, key_len;
    char name[]; /* tube, then key (not NUL-terminated) */
} DedupKey;

typedef struct Dedup {
    DedupKey **by_name, **by_id; /* nbuckets chains each */
    size_t nbuckets, len;
    Heap expiry; /* DedupKey* by expire_ns */
} Dedup;

/* Sets up an empty index; allocates nothing yet. */
void dedup_init(Dedup *d);

/* Frees every key and the tables. */
void dedup_free(Dedup *d);

/* The key of tube (tlen bytes) and key (klen bytes), or NULL. */
DedupKey *dedup_find(const Dedup *d, const char *tube, size_t tlen,
                     const char *key, size_t klen);

/* The key that created job id, or NULL (most jobs have none). */
DedupKey *dedup_of_job(const Dedup *d, uint64_t id);

/* Remembers (tube, key) -> id until expire_ns (wall clock ns). The pair
 * must not be present. Returns the key, or NULL out of memory. */
DedupKey *dedup_add(Dedup *d, const char *tube, size_t tlen, const char *key,
                    size_t klen, uint64_t id, int64_t expire_ns);

/* Forgets k (frees it). */
void dedup_remove(Dedup *d, DedupKey *k);

/* The key whose window ends first, if it ended at or before now_ns (wall
 * clock), else NULL. */
DedupKey *dedup_expired(const Dedup *d, int64_t now_ns);

/* k's window is over but its job still exists: takes k out of the expiry
 * heap (heap_pos becomes SIZE_MAX); it goes when its job does. */
void dedup_window_over(Dedup *d, DedupKey *k);

#endif
