/* bodycache.h - which job bodies are in memory. A body lives in its Job
 * (Job.body, body_size + 2 bytes with the CRLF); this module keeps the
 * resident bytes within the -m budget and brings bodies back from disk
 * through the reader thread (prefetch.h): read-ahead of what a tube will
 * hand out next, and reads a reply waits for. It never reads the disk
 * itself. A put's body must stay in memory until the store has it (the
 * store cannot serve it before), so past the budget it is dropped once its
 * put is acknowledged. Loop thread only; acts on jobs, knows no server. */
#ifndef ROCKSTALK_BODYCACHE_H
#define ROCKSTALK_BODYCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "queue/job.h"
#include "queue/tube.h"
#include "store/prefetch.h"

typedef struct BodyCache {
    size_t max;   /* -m: budget, bytes (CRLF included) */
    size_t bytes; /* resident body bytes, CRLF included */
    struct BodyDrop {
        uint64_t seq, id;
    } * drops; /* ring: bodies to drop once seq is acked */
    size_t dhead, dlen, dcap;
    Prefetch *reader;    /* the reader thread; NULL: no store */
    size_t asked;        /* bytes asked of the reader, not yet taken */
    uint64_t misses;     /* replies that waited for a body from disk */
    uint64_t prefetched; /* bodies read ahead and kept */
} BodyCache;

/* A put's body (j->body) is now resident. Past the budget, and with a
 * store (keep set), it is dropped once sequence seq is acknowledged. */
void bodycache_added(BodyCache *bc, Job *j, uint64_t seq, int keep);

/* j's body was copied into a reply: past the budget, a body the store
 * already has is dropped at once. */
void bodycache_used(BodyCache *bc, Job *j);

/* j is being freed: its resident body leaves the account (not freed). */
void bodycache_forget(BodyCache *bc, const Job *j);

/* Drops the scheduled bodies whose puts are acknowledged (seq <= acked),
 * of the jobs that still exist in jobs. Once per loop iteration. */
void bodycache_drop_acked(BodyCache *bc, const JobTable *jobs, uint64_t acked);

/* Takes what the reader has read: keeps each body whose job still exists
 * without one; marks JOB_F_UNREADABLE a job a reply waits for whose body
 * could not be read. Once per loop iteration. */
void bodycache_take(BodyCache *bc, const JobTable *jobs);

/* A reply needs j's body now (it is not resident): asks the reader for it
 * unless a read is in flight, marking j JOB_F_NEEDED (not a prefetch) and
 * clearing JOB_F_UNREADABLE. first says this is the reply's first ask (a
 * cache miss). Returns 0, or -1 if the reader takes no more requests now
 * (ask again in a later iteration). */
int bodycache_fetch(BodyCache *bc, Job *j, int first);

/* Reads ahead the bodies on disk of the jobs tube t hands out next (up to
 * 128), within the budget plus a slack of max/8 (at least 1 MiB); at most
 * once per loop iteration (iter) and tube. */
void bodycache_read_ahead(BodyCache *bc, Tube *t, uint32_t iter);

/* Frees the drop ring (not the bodies, which the jobs own). */
void bodycache_free(BodyCache *bc);

#endif
