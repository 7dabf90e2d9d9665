/* session.h - one client's protocol state as the job state machine
 * (queue.h) sees it: the tube it uses, its watch list, the jobs it holds
 * (its leases) and its blocked reserve. The connection (conn.h) embeds one;
 * the queue never sees the connection, and tells the layer above what
 * happened to a session through the events of queue.h. Data only. Loop
 * thread only. */
#ifndef ROCKSTALK_SESSION_H
#define ROCKSTALK_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "base/heap.h"
#include "base/ptrset.h"
#include "queue/tube.h"

typedef struct Session {
    Tube *use;        /* holds a using reference */
    PtrSet watch;     /* Tube*, holds a watching reference each */
    Heap reserved;    /* Job* it holds, by TTR deadline */
    size_t lease_pos; /* in Server.lease_heap, or SIZE_MAX */
    int waiting;      /* blocked in reserve, in its tubes' waiting sets */
    int32_t timeout;  /* of the blocked reserve, seconds; < 0: none */
    int64_t wake_at;  /* monotonic ns: timeout or DEADLINE_SOON, 0 = none */
    size_t wait_pos;  /* in Server.wait_heap, or SIZE_MAX */
    /* while waiting: wait_at[i] is se's index in the waiting set of
     * watch.items[i] (SIZE_MAX once out of it); owned, wait_cap entries */
    size_t *wait_at;
    size_t wait_cap;
    /* watching many tubes (watch.h): its tube heap of WatchRef*, and
     * wrefs[i] the entry of watch.items[i]; NULL: no heap. Owned. */
    Heap tops;
    struct WatchRef **wrefs;
    size_t wrefs_cap;
    /* a reply showing jobs that waits for bodies from disk (jobreply.h) */
    uint64_t *fetch_ids; /* its jobs (fetch_n), NULL = none */
    uint64_t fetch_one;  /* fetch_ids' storage for one job */
    uint32_t fetch_n;
    uint8_t fetch_kind;  /* JR_FOUND, JR_RESERVED or JR_BATCH */
    uint32_t batch;      /* a blocked reserve-batch: its count, else 0 */
    Tube *clearing;      /* a clear-tube under way (holds a reference) */
    uint64_t clear_left; /* most jobs it may still delete */
    uint64_t cleared;    /* jobs it deleted */
    uint64_t clear_seq;  /* applied sequence after its latest step */
} Session;

#endif
