/* store/snapreq.h - a backup's request for one consistent moment: a
 * thread that is about to stream the shards (store.h store_backup_send)
 * asks the mutation thread, the only writer, for a RocksDB snapshot of
 * every shard taken between two of its groups, with its write-behind
 * window written first, so that the shards show the state after one
 * acknowledged sequence and nothing else (PROTOCOL.md 11.7).
 *
 * Threads: snapreq_take on any thread but the mutation thread;
 * snapreq_pending, snapreq_serve and snapreq_stop on the mutation thread;
 * init and destroy on the main thread. One request is served at a time
 * (the others wait their turn). Calls: RocksDB, pthreads.
 */
#ifndef ROCKSTALK_STORE_SNAPREQ_H
#define ROCKSTALK_STORE_SNAPREQ_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <rocksdb/c.h>

#include "store/shard.h"
#include "store/types.h"

/* How long a requester waits for the mutation thread, milliseconds. */
#define SNAPREQ_WAIT_MS 10000

/* The request slot; lives in the StoreMut. */
typedef struct SnapReq {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    _Atomic int asked; /* a request waits for the mutation thread */
    int busy;          /* a requester owns the slot (under mu) */
    int done;          /* answered: rc, seq and snap[] are set (under mu) */
    int stopped;       /* the mutation thread is gone: refuse (under mu) */
    int rc;            /* 0, or -1: the store had failed */
    uint64_t seq;      /* the sequence the snapshots show */
    const rocksdb_snapshot_t *snap[STORE_SHARDS_MAX];
} SnapReq;

/* Initialises r (zeroed). */
void snapreq_init(SnapReq *r);

/* Frees r's lock and condition (no request may be in flight). */
void snapreq_destroy(SnapReq *r);

/* Any thread but the mutation thread: asks for the moment, calling
 * kick(kick_arg) to wake the mutation thread, and waits (up to
 * SNAPREQ_WAIT_MS). On success snaps[0..nshards) hold one snapshot per
 * shard (the caller releases each with rocksdb_release_snapshot on its
 * shard's db) and *seq the last sequence they hold. Returns 0, or -1 with
 * a message in err (the store failed, stopped or did not answer). */
int snapreq_take(SnapReq *r, void (*kick)(void *), void *kick_arg,
                 const rocksdb_snapshot_t **snaps, int nshards, uint64_t *seq,
                 char *err, size_t errcap);

/* Mutation thread: nonzero when a request waits (one atomic load). */
int snapreq_pending(SnapReq *r);

/* Mutation thread, between two groups with nothing unwritten: answers the
 * waiting request with a snapshot of every shard and seq, or with a
 * refusal if failed. */
void snapreq_serve(SnapReq *r, StoreShard *shards, int nshards, uint64_t seq,
                   int failed);

/* Mutation thread, as it ends: refuses the waiting and every later
 * request. */
void snapreq_stop(SnapReq *r);

#endif
