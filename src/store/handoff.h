/* store/handoff.h - the hand-off queue between the loop and the mutation
 * thread: the loop appends mutation records (store/enc.h) to a chunk and
 * links it onto the queue once per loop iteration; the mutation thread
 * takes queued chunks as one group (gathering a group first, and taking at
 * most a half-crowd when it splits groups, under STORE_SYNC_ALWAYS).
 *
 * Threads: handoff_reserve, handoff_commit and handoff_flush on the loop
 * thread; handoff_wait and handoff_recycle on the mutation thread;
 * handoff_backlog and handoff_drop_spares on any. Shared fields are under
 * mu or _Atomic (each field says). Calls: store_enc, store_util.
 */
#ifndef ROCKSTALK_STORE_HANDOFF_H
#define ROCKSTALK_STORE_HANDOFF_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "store/enc.h"

/* A run of mutation records: p[start..len). */
typedef struct Chunk {
    struct Chunk *next;
    unsigned char *p; /* owned, unless view */
    size_t start;     /* bytes of p already taken by views (chunk_cut) */
    size_t len, cap;  /* bytes */
    size_t nrec;      /* records in p[start..len) */
    size_t nring;     /* of which puts with a ring reference (ENC_PUT_RING;
                         a view says its chunk's: at least its own) */
    int view;         /* p points into a queued chunk's buffer (borrowed) */
} Chunk;

/* Whether group splitting pays, found by trying (STORE_SYNC_ALWAYS,
 * mutation thread; why in store/handoff.c, split_update): epochs of
 * SPLIT_EPOCH_NS ns with splitting on, off, off, on, then the faster way
 * (acknowledged records per second) for SPLIT_EXPLOIT epochs, then again.
 * A tie keeps splitting off. */
#define SPLIT_EPOCH_NS 100000000
#define SPLIT_EXPLOIT 16
typedef struct SplitTrial {
    int64_t epoch_at; /* CLOCK_MONOTONIC ns the current epoch began */
    uint64_t seq_at;  /* the durable sequence then */
    int phase;        /* 0-3: probing (split_probe[phase]); then exploiting */
    double rate[2];   /* records per second: [0] off, [1] on, summed */
    int on;           /* the faster way at the latest trial (starts 1) */
} SplitTrial;

/* The hand-off state; lives in the Store. Each field group names the
 * thread(s) that may touch it. */
typedef struct Handoff {
    int always; /* STORE_SYNC_ALWAYS: gather groups, split crowds */
    const _Atomic uint64_t *durable_seq; /* StoreAck's, for split_update */

    /* loop thread: the chunk being built */
    Chunk *cur;
    uint64_t added_seq; /* seq of the latest record added */
    int hold;           /* handoff_hold: no split hand-over now */

    /* loop and mutation thread, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv; /* on CLOCK_MONOTONIC */
    Chunk *queue, **queue_tail;
    uint64_t queued_nrec;   /* records in queue */
    int sleeping;           /* the mutation thread waits for input */
    uint64_t wake_at_nrec;  /* ...and wants waking once queued_nrec reaches
                               this (1: any input) */
    uint64_t inflight_peak; /* most records not yet durable at a hand-off
                               since split_update last looked */
    Chunk *spare;
    int nspare;
    size_t spare_bytes; /* capacity of the spare chunks */
    int stop;
    int kicked;     /* handoff_kick: the waiting mutation thread must look up */
    uint64_t crowd; /* mutation thread: estimated records per round */
    SplitTrial trial; /* mutation thread: whether splitting pays */

    /* group splitting: records per group, written by the mutation thread,
     * read by the loop (UINT64_MAX: no splitting) */
    _Atomic uint64_t split_nrec;

    /* loop thread adds, mutation thread subtracts */
    _Atomic size_t backlog;

    /* input spin (handoff_wait): queue is not empty (set under mu by the
     * loop, cleared under mu by the mutation thread, read by its spin
     * without mu) */
    _Atomic int has_input;
    int64_t gap_ns; /* mutation thread: moving average of how long input
                       took to come once it had none */
    _Atomic unsigned active; /* loop thread: connections that sent input
                                lately (handoff_note_active) */

    /* cluster mode (handoff_direct): the loop thread hands each flushed
     * chunk to direct instead of queueing it */
    void (*direct)(void *arg, Chunk *c, uint64_t seq);
    void *direct_arg;
} Handoff;

/* What the mutation thread knows when it waits for input (handoff_wait). */
typedef struct HandoffWait {
    int timed;              /* wake at deadline_ns even without input */
    int64_t deadline_ns;    /* CLOCK_MONOTONIC */
    uint64_t prev_records;  /* records in the previous group */
    uint64_t prev_puts;     /* ...of which puts */
    uint64_t last_sync_dur; /* ns the latest synced group took */
} HandoffWait;

/* Loop thread, before the first record (cluster mode): from now on
 * handoff_flush calls fn(arg, chunk, seq of its last record) on the loop
 * thread with the chunk being built (next NULL), then empties it for reuse
 * and takes its bytes off the backlog; nothing reaches the mutation
 * thread. */
void handoff_direct(Handoff *h, void (*fn)(void *arg, Chunk *c, uint64_t seq),
                    void *arg);

/* Loop thread: n connections sent input in the latest window of about a
 * millisecond. The mutation thread spins for input only when few did
 * (store/handoff.c, spin_for_input). */
void handoff_note_active(Handoff *h, unsigned n);

/* Mutation thread, at each group while splitting is considered: one step
 * of t's trial at now_ns (CLOCK_MONOTONIC) with the durable sequence seq
 * (records acknowledged so far). eligible: the crowd may be split at all
 * (else the trial starts over, as it does after an epoch over three times
 * SPLIT_EPOCH_NS long: the load paused). Returns 1 to split now, 0 not.
 * t starts zeroed with on = 1. */
int split_trial_step(SplitTrial *t, int eligible, int64_t now_ns, uint64_t seq);

/* Initialises h (zeroed). always: the sync mode is STORE_SYNC_ALWAYS.
 * durable_seq: the published durable sequence (read relaxed). */
void handoff_init(Handoff *h, int always, const _Atomic uint64_t *durable_seq);

/* Frees every chunk h holds; no thread may use h any more. */
void handoff_destroy(Handoff *h);

/* Loop thread: room for need more bytes at the end of the chunk being
 * built (valid until the next handoff_* call). Aborts on exhaustion. */
unsigned char *handoff_reserve(Handoff *h, size_t need);

/* Loop thread: the record whose header r describes was written at p (from
 * handoff_reserve, meta and body already in place); writes its header and
 * adds it to the chunk. Hands the chunk over at once when it holds a
 * half-crowd (splitting). */
void handoff_commit(Handoff *h, unsigned char *p, const EncRec *r);

/* Loop thread: on, the records committed from now on are not handed
 * over at a half-crowd until hold is turned off (then they may be): the
 * records of one unit (a move's put and delete, which share a sequence)
 * reach one group. queue_take never cuts between two records of one
 * sequence either. */
void handoff_hold(Handoff *h, int on);

/* Loop thread: links the chunk being built onto the queue (O(1)) and wakes
 * the mutation thread if it waits for that much input. */
void handoff_flush(Handoff *h);

/* Bytes added and not yet written (handoff_done). Any thread, relaxed. */
size_t handoff_backlog(const Handoff *h);

/* Mutation thread: waits for queued chunks, a stop request or, if w->timed,
 * w->deadline_ns; then returns the queue, or its first split_nrec records
 * when splitting (NULL: none). *stop: stop asked and nothing left. */
Chunk *handoff_wait(Handoff *h, const HandoffWait *w, int *stop);

/* Mutation thread: bytes of a group are written (or dropped). */
void handoff_done(Handoff *h, size_t bytes);

/* Mutation thread: returns emptied chunks to the spare list (or frees
 * them). */
void handoff_recycle(Handoff *h, Chunk *chunks);

/* Any thread: frees the spare chunks (up to 16 MiB kept for the next
 * burst), so that an idle server's malloc_trim can give their pages back;
 * the next chunks are allocated afresh. */
void handoff_drop_spares(Handoff *h);

/* Any thread: wakes the mutation thread if it waits for input, as if
 * input had come (it then finds none and goes on). */
void handoff_kick(Handoff *h);

/* Any thread: asks the mutation thread to stop once the queue is empty. */
void handoff_stop(Handoff *h);

#endif
