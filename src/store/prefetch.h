/* prefetch.h - a reader thread that reads job bodies from the store ahead of
 * the reserves that will need them, so that a cold backlog (bodies on disk,
 * issue 6) is not read on the event loop thread, where every read would
 * stall all clients for as long as the disk takes.
 *
 * The loop thread asks for bodies by job id (prefetch_request), the reader
 * thread reads them with store_get_body (RocksDB Get is safe next to the
 * mutation thread's writes) and hands them back; the loop takes them in its
 * prepare watcher (prefetch_take) and keeps those whose job still waits.
 * Nothing is shared but the two queues, under one mutex. A reply that
 * needs a body not yet in memory asks this thread for it too and waits
 * (jobreply.h): the loop thread never reads the disk.
 *
 * Fault seam (tests only): with ROCKSTALKD_FAULT_READ_HOLD=PATH, the thread
 * waits before each batch of reads while the file PATH exists (checked every
 * 1 ms), as a disk that does not answer would; read at prefetch_start.
 *
 * Errors: prefetch_start returns -1 with a message in err (errcap bytes).
 * A failed or empty read comes back as a result with body NULL. Nothing
 * here prints.
 */
#ifndef ROCKSTALK_PREFETCH_H
#define ROCKSTALK_PREFETCH_H

#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

/* Most requests waiting or in flight at once; prefetch_request refuses
 * more (the caller simply does not prefetch that body). */
#define PREFETCH_MAX 1024

/* One finished read: body is malloc'd (len bytes, no CRLF) and owned by
 * whoever takes it, or NULL if the job's body was not found or the read
 * failed. cost is the caller's own figure from prefetch_request, handed
 * back unchanged (the loop accounts the bytes it expects with it). */
typedef struct PrefetchResult {
    uint64_t id;
    char *body;
    size_t len;
    size_t cost;
} PrefetchResult;

typedef struct Prefetch Prefetch;

/* Starts the reader thread over st (which must outlive it). notify(arg) is
 * called from the reader thread when results are ready to take and none
 * were waiting before (e.g. ev_async_send). Returns 0 and the reader in
 * *out, or -1 if memory or the thread could not be had. */
int prefetch_start(Store *st, void (*notify)(void *), void *arg, Prefetch **out,
                   char *err, size_t errcap);

/* Loop thread: asks for the bodies of ids[0..n), in one hand-off; costs[i]
 * comes back in id[i]'s result. Returns how many were queued: the first
 * ones, as many as fit below PREFETCH_MAX outstanding requests. */
size_t prefetch_request(Prefetch *p, const uint64_t *ids, const size_t *costs,
                        size_t n);

/* Loop thread: takes every finished read at once and returns how many;
 * *out points at them (the caller owns their bodies) until the next call.
 * Cheap when there are none (no lock taken). */
size_t prefetch_take(Prefetch *p, PrefetchResult **out);

/* Stops and joins the reader thread and frees everything, bodies of
 * results nobody took included. NULL is fine. */
void prefetch_stop(Prefetch *p);

#endif
