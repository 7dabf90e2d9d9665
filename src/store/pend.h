/* store/pend.h - the write-behind window of the commit journal (issue 14,
 * item 5): groups that the journal made durable and that were published,
 * but that are not yet written to the shards. A group stays in the window
 * for PEND_WINDOW_NS (or until the window holds PEND_MAX_BYTES, or the
 * journal file holding it is about to be reused, or a reader needs a body
 * it holds, or the server stops), so that a job put and deleted within
 * the window never reaches RocksDB at all: its put, its updates and its
 * delete are cancelled in place (op set to 0) and skipped when the group
 * is written. A worker that deletes what it reserved a moment ago, the
 * common queue pattern, then costs the shards nothing.
 *
 * Why it is safe (PROTOCOL.md 11.5): a cancelled put and its delete are
 * both in the journal, and the delete is cancelled only after its own
 * group's journal sync. Until the window's groups are written, recovery
 * replays them from the journal (each shard's jgroup says what it holds);
 * a journal file is reused only once its groups left the window and were
 * synced in the shards (store/mut.c, mut_cover), and at stop the window
 * is emptied.
 *
 * While a group waits here its records keep their place in their chunks
 * (which are recycled only when the group leaves), and the header's seq
 * field, no longer needed once the group is published, links each pending
 * record of a job to the job's previous pending record.
 *
 * Threads: the mutation thread only. Calls: store_handoff (Chunk),
 * store_enc, store_util.
 */
#ifndef ROCKSTALK_STORE_PEND_H
#define ROCKSTALK_STORE_PEND_H

#include <stddef.h>
#include <stdint.h>

#include "store/handoff.h"

/* How long a published group waits before it is written (ns), and the
 * most bytes of records the window holds. Measured on the 2-core VM
 * (issue 14): a 3 ms window left the cycle benchmark's jobs (which wait
 * behind 10,000 others, about 0.5 s) to the shards, 1 s cancelled nearly
 * all of them (cycle 0.84x -> 0.90-0.92x of beanstalkd -b). */
#define PEND_WINDOW_NS 1000000000
#define PEND_MAX_BYTES ((size_t)8 << 20)

/* A drain, once the oldest group fell due, also takes the groups that
 * would fall due within PEND_BATCH_NS, and goes on while the window holds
 * more than PEND_MAX_BYTES - PEND_BATCH_BYTES: the shards get one write
 * per batch instead of one per group. At put c=1 each group is one put,
 * and writing them one by one put a RocksDB write (13% of the mutation
 * thread's samples, perf) between many a put and its journal sync. */
#define PEND_BATCH_NS 20000000
#define PEND_BATCH_BYTES ((size_t)256 << 10)

/* One published group waiting in the window. */
typedef struct PendGroup {
    struct PendGroup *next;
    Chunk *chunks;  /* the group's records; owned until recycled */
    uint64_t group; /* its number (store/journal.h) */
    uint64_t seq;   /* its last sequence */
    int64_t at_ns;  /* CLOCK_MONOTONIC when it was published */
    size_t bytes;   /* of records */
} PendGroup;

/* A job with a pending put: its id and its latest pending record. */
typedef struct PendSlot {
    uint64_t id; /* 0: empty (job ids start at 1) */
    unsigned char *rec;
} PendSlot;

/* The window; lives in StoreMut. */
typedef struct Pend {
    PendGroup *head, **tail;
    size_t bytes;  /* records in the window */
    PendSlot *tab; /* open addressing, linear probing; cap a power of 2 */
    size_t cap, len;
    uint64_t cancelled; /* records never written, since start */
} Pend;

/* Initialises p (zeroed): an empty window. */
void pend_init(Pend *p);

/* Frees the table and every group, giving their chunks to h. */
void pend_destroy(Pend *p, Handoff *h);

/* Adds a published group (chunks, whose records are not yet in any
 * batch) at now_ns: registers its puts and the updates of pending jobs,
 * and cancels every pending job its deletes delete (the put, its updates
 * and the delete itself). Takes ownership of chunks. */
void pend_add(Pend *p, Chunk *chunks, uint64_t group, uint64_t seq,
              size_t bytes, int64_t now_ns);

/* Unlinks and returns the oldest group if it is due at now_ns (waited
 * PEND_WINDOW_NS, or the window holds more than PEND_MAX_BYTES, or its
 * number is not above upto, or force), forgetting its jobs (no later delete
 * cancels them any more); NULL if none is. more: this drain already took a
 * group, so the oldest is due PEND_BATCH_NS sooner, and while the window
 * holds more than PEND_MAX_BYTES - PEND_BATCH_BYTES. The caller writes its
 * records whose op is not 0, then recycles its chunks and frees it. */
PendGroup *pend_take(Pend *p, int64_t now_ns, int force, uint64_t upto,
                     int more);

/* When the oldest group falls due (CLOCK_MONOTONIC ns), or INT64_MAX. */
int64_t pend_deadline(const Pend *p);

/* Nonzero if pend_take(p, now_ns, 0, 0, 0) would take a group: the oldest
 * is due by time, or the window holds more than PEND_MAX_BYTES. */
int pend_due(const Pend *p, int64_t now_ns);

#endif
