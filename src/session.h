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

#include "heap.h"
#include "ptrset.h"
#include "tube.h"

typedef struct Session {
    Tube *use;        /* holds a using reference */
    PtrSet watch;     /* Tube*, holds a watching reference each */
    Heap reserved;    /* Job* it holds, by TTR deadline */
    size_t lease_pos; /* in Server.lease_heap, or SIZE_MAX */
    int waiting;      /* blocked in reserve, in its tubes' waiting sets */
    int32_t timeout;  /* of the blocked reserve, seconds; < 0: none */
    int64_t wake_at;  /* monotonic ns: timeout or DEADLINE_SOON, 0 = none */
    size_t wait_pos;  /* in Server.wait_heap, or SIZE_MAX */
    /* a RESERVED or FOUND reply waiting for a body from disk (cmd.c) */
    uint64_t fetch_id;     /* its job, 0 = none */
    uint8_t fetch_reserve; /* 1: RESERVED, 0: FOUND */
} Session;

#endif
