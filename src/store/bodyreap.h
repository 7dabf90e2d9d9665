/* store/bodyreap.h - the reaper: deletes the body ring's dead held files
 * (store/bodyheld.h) off the body writer's path, a few MiB at a time
 * (protocol/PROTOCOL.md, section 11.5).
 *
 * Freeing a large file costs the file system more than its unlink's own
 * time: on ext4 mounted with `discard` (as here) the blocks of a 64 MiB
 * file are freed and discarded in one journal commit, about 20 ms, and
 * every fsync that needs a commit meanwhile (the ring's, a shard's, the
 * commit journal's) waits for it. Unlinked in the writer's cover, a drain
 * after a burst of large jobs (20 dead held files at once) held every
 * large producer up for half a second; unlinked all at once on other
 * threads, the commits stalled every put instead. So the reaper takes one
 * file at a time and shrinks it by REAP_STEP bytes per ftruncate, each
 * step made durable (fdatasync, so that one commit carries at most one
 * step's discard), then waits twice as long as the step took (at least
 * REAP_GAP_MIN_NS) before the next, and unlinks the file once it is empty.
 *
 * The same thread copies out the sparse held files (store/bodyheld.h):
 * the writer's cover queues a generation (bodyreap_copy) and the reaper
 * calls the copy-out set with bodyreap_set_copy, before the next dead
 * file and between two steps of one, so that no large producer waits
 * for a copy-out. Copies queued when stop is asked are dropped: their
 * held files stay for the next start.
 *
 * A dead held file is first renamed <dir>/dead-<gen> by whoever found it
 * dead (bodyheld.c: the writer's cover, or the reaper after a copy-out):
 * no reference points into it, and no name a start-up would read as a
 * held file is ever left half truncated (each step's fdatasync also
 * commits the rename before it). A start-up queues every dead-<gen> file
 * it finds (bodyring.c, held_open).
 *
 * Threads: init, set_copy, start, stop and free on the main thread; add
 * and copy on any (the writer's cover, the main thread at start-up, the
 * reaper itself after a copy-out); the reaper thread does the rest, the
 * copy-outs included. Shared state under mu. Calls: libc, and the
 * copy-out set (store/bodyheld.c).
 */
#ifndef ROCKSTALK_STORE_BODYREAP_H
#define ROCKSTALK_STORE_BODYREAP_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes freed per step (one ftruncate and one fdatasync). */
#define REAP_STEP ((uint64_t)4 << 20)
/* The least pause between two steps, nanoseconds. */
#define REAP_GAP_MIN_NS 1000000

/* A file queued for deletion. */
typedef struct BodyDead {
    char *path;    /* owned */
    uint64_t size; /* bytes of it still counted in BodyReap.st_bytes */
} BodyDead;

/* A held file's copy-out (store/bodyheld.c held_copy): moves the live
 * bodies of generation gen into RocksDB. Returns 0, or -1 after
 * ack_fail. */
typedef int (*BodyCopyFn)(void *ctx, uint64_t gen);

/* The reaper; lives in the BodyRing. */
typedef struct BodyReap {
    pthread_t thread;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* under mu */
    BodyDead *dead;       /* queued, oldest first, owned */
    size_t n, cap;        /* dead's entries and room */
    uint64_t *copies;     /* generations to copy out, oldest first, owned */
    size_t ncopies, ccap; /* copies' entries and room */
    int stop;             /* bodyreap_stop asked: delete the rest at once */
    BodyCopyFn copy;      /* set before the start; NULL: no copy-outs */
    void *copy_ctx;
    /* bytes of the queued files not freed yet (a stat) */
    _Atomic uint64_t st_bytes;
    _Atomic uint64_t st_files;  /* files queued and not yet deleted */
    _Atomic uint64_t st_copies; /* copy-outs queued or under way */
} BodyReap;

/* Main thread: an empty, stopped reaper. */
void bodyreap_init(BodyReap *q);

/* Any thread: queues file path (copied) of size bytes for deletion (the
 * thread takes it once started). After bodyreap_stop the file is deleted
 * at once (unlink, no pacing). */
void bodyreap_add(BodyReap *q, const char *path, uint64_t size);

/* Main thread, before bodyreap_start: the copy-out bodyreap_copy's
 * generations are given to, with ctx. */
void bodyreap_set_copy(BodyReap *q, BodyCopyFn fn, void *ctx);

/* Any thread (the writer's cover): queues the copy-out of held generation
 * gen, run on the reaper thread once started. Ignored after
 * bodyreap_stop, or without a copy-out set. */
void bodyreap_copy(BodyReap *q, uint64_t gen);

/* Any thread (a copy-out, between two bodies): 1 once bodyreap_stop was
 * asked, so that a copy-out under way ends early. */
int bodyreap_stopping(BodyReap *q);

/* Main thread: starts the reaper thread. Returns 0, or -1 with a message
 * in err. */
int bodyreap_start(BodyReap *q, char *err, size_t errcap);

/* Main thread: deletes every file queued, without pauses (the server is
 * stopping, or runs without the ring), on the thread if it runs (then
 * joined, after any copy-out under way ends) or else here, and drops the
 * copy-outs queued; later bodyreap_add calls delete at once. */
void bodyreap_stop(BodyReap *q);

/* Main thread, after bodyreap_stop: frees the queues (files still queued
 * stay on disk: the next start-up finds them). */
void bodyreap_free(BodyReap *q);

#endif
