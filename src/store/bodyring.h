/* store/bodyring.h - the body ring: large put bodies written and synced by
 * a thread of their own (the body writer), so that a small record's commit
 * never waits for someone else's large body to reach the disk (issue 30,
 * "big beside small"; the format is protocol/PROTOCOL.md, section 11.5).
 *
 * STORE_RING_FILES files of one size under <dir>/bodies/ (ring-0 ...),
 * sized once (sparse) and then overwritten in place, lap after lap, like
 * the commit journal's. The loop hands a body to the writer
 * (bodyring_submit), which appends it to the current file as one entry,
 * fdatasyncs (one sync for every body queued meanwhile) and hands it back
 * with its reference (bodyring_take). Only then does the loop apply the
 * put: its mutation record carries the reference (ENC_PUT_RING), the
 * journal writes the reference instead of the body, and RocksDB takes the
 * reference with its WAL (ring CF, store/batch.h) and not the body: the
 * ring is the body's home (store/bodyheld.h), so a large body reaches the
 * device once. So every journal record's and every ring CF entry's
 * references point at synced entries.
 *
 * The writer starts each entry's write-back as soon as it is written and
 * keeps little of it queued at the device (sync_file_range; bodyring.c,
 * RING_WB_WINDOW), so that a commit journal's write and sync, which the
 * device serves in turn with the ring's, waits behind little of it.
 *
 * An entry (little-endian), at an offset that is a multiple of RING_ALIGN:
 *     0  u32 magic  RING_MAGIC
 *     4  u32 len    body bytes
 *     8  u64 gen    the file's generation (+1 whenever a file is started;
 *                   the file of generation g is ring-(g % STORE_RING_FILES))
 *    16  u32 crc    zlib crc32 of the body
 *    20  u32 hcrc   zlib crc32 of bytes 0..20
 *    24  the body
 *
 * Reuse rule: before ring file i takes generation g + STORE_RING_FILES,
 * every journal record that may refer to generation g is in RocksDB: the
 * loop says up to which sequence the bodies it took are in records
 * (bodyring_resolved), the writer waits until the mutation thread has
 * applied that sequence (asking it to drain its write-behind window).
 * Until then the writer waits: the large producers are held back, nobody else.
 * Then held_cover (store/bodyheld.h) counts the references, syncs every shard's
 * WAL and keeps generation g as a held file if a live job still refers to it;
 * else the file is overwritten in place.
 *
 * Readers of a ring body (bodyring_read: the journal's replay, the
 * store's body reads, a backup, a copy-out) find its file by generation:
 * the ring file that holds it now, or a held file.
 *
 * Threads: open, restore, reset, start and stop on the main thread, read
 * on any; submit, take and resolved on the loop thread; the writer thread
 * does the rest, but for the deletion of dead held files (the reaper's
 * thread, store/bodyreap.h). Shared state is under mu, the files under
 * flk. Calls: store_ack, store_handoff (a drain's kick), store_shard (the
 * WAL syncs, the ring CF), store_bodyheld, store_bodyreap, store_enc,
 * store_util, zlib; writes and syncs go through the StoreIO seam's jwrite
 * and jsync (the write-back hints, sync_file_range, go to the file
 * directly: they change no byte).
 */
#ifndef ROCKSTALK_STORE_BODYRING_H
#define ROCKSTALK_STORE_BODYRING_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "store/ack.h"
#include "store/bodyreap.h"
#include "store/handoff.h"
#include "store/shard.h"
#include "store/types.h"

#define RING_HDR 24
#define RING_MAGIC 0x31425352u /* "RSB1" */
#define RING_ALIGN 4096
#define RING_SAMPLES 64
/* Most spare files kept (store/bodyheld.h): held files emptied by their
 * copy-out, renamed <dir>/spare-<gen>, waiting for a cover to reuse them
 * as ring files. */
#define RING_SPARE_MAX 2

/* One body on its way (private to bodyring.c). */
typedef struct RingReq RingReq;

/* A held file (store/bodyheld.h): a generation retired from its ring file
 * with live bodies in it, renamed <dir>/held-<gen>. */
typedef struct HeldFile {
    uint64_t gen;  /* the generation it holds */
    uint64_t size; /* bytes */
    int fd;        /* open for reads */
    int sparse;    /* the last cover found it less than a quarter live
                      (the writer thread's alone) */
    int copying;   /* its copy-out is queued or done (the writer's alone) */
} HeldFile;

/* The ring; lives in the Store. */
typedef struct BodyRing {
    char *dir;                        /* <data dir>/bodies, owned */
    const StoreIO *io;                /* borrowed; jwrite and jsync set */
    int fd[STORE_RING_FILES];         /* -1: not open */
    uint64_t fsize[STORE_RING_FILES]; /* bytes, as found or sized */
    uint64_t size;                    /* bytes each file has once reset */
    uint32_t min;                     /* smallest body taken; 0: no ring */
    uint64_t top_gen;                 /* highest generation found */
    uint64_t start_gen; /* this run's first generation (older ones were
                           replayed before reset) */
    /* Files (store/bodyheld.h): readers take flk shared, the writer takes
     * it exclusive to change fd, fsize, slot_gen, held, spare and pins. */
    pthread_rwlock_t flk;
    uint64_t slot_gen[STORE_RING_FILES]; /* the generation file i holds
                                            (0: none) */
    HeldFile *held; /* retired generations, ascending gen, owned */
    size_t nheld, heldcap;
    uint64_t spare[RING_SPARE_MAX]; /* the spare files' generations */
    size_t nspare;
    int pins;             /* backups reading the ring (bodyring_pin) */
    BodyReap reap;        /* deletes the dead held files (dead-<gen>), paced */
    pthread_mutex_t *wmu; /* borrowed: StoreMut.wmu, taken by a copy-out
                             (store/bodyheld.h) */
    /* before ring file i takes a new generation (store/bodyheld.h
     * held_cover, set by the store before bodyring_start): 0, or -1 after
     * ack_fail */
    int (*cover_hook)(struct BodyRing *r, int i);
    StoreShard *shard; /* borrowed, [nshards], for the WAL syncs */
    int nshards;
    StoreAck *ack; /* borrowed */
    Handoff *ho;   /* borrowed: kicks the mutation thread to drain */

    pthread_t thread;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* under mu */
    RingReq *q, **qtail;       /* submitted, not yet taken by the writer */
    RingReq *done, **dtail;    /* written (or failed), not yet taken */
    int stop;                  /* bodyring_stop asked */
    uint64_t res_pos, res_seq; /* bodyring_resolved's */
    _Atomic int has_done;      /* done is not empty (read without mu) */

    /* writer thread */
    uint64_t gen, off; /* where the next entry goes */
    uint64_t wb_done;  /* offset in the current file below which the
                          write-back was waited for (or synced) */
    uint64_t end_pos[STORE_RING_FILES]; /* linear end (gen * size + off)
                                           of each file's last entry */
    uint64_t covered;                   /* linear position every entry
                                           before which may be reused */
    uint64_t samples[RING_SAMPLES][2];  /* (res_pos, res_seq) seen after
                                           recent trips, oldest first */
    int nsamples;

    /* loop thread */
    uint64_t next_ticket;
    uint64_t taken_pos; /* linear end of the latest entry taken */
    StoreRingDone *out; /* bodyring_take's array */
    size_t out_len, out_cap;

    void (*notify)(void *arg); /* StoreConfig.notify */
    void *notify_arg;
    _Atomic uint64_t st_bodies, st_bytes, st_waits; /* written; cover waits */
    _Atomic uint64_t st_flushes; /* covers done (a file made ready for a
                                    new generation) */
    _Atomic uint64_t st_copied;  /* bodies copied out of held files */
    _Atomic uint64_t st_held_files, st_held_bytes; /* held files now */
    _Atomic uint64_t st_spare_files;               /* spare files now */
    uint64_t restored; /* live ring bodies bodyring_restore found */
} BodyRing;

/* Opens the ring files of datadir that exist (none is created here), for
 * bodyring_read. size: bytes per file from bodyring_reset on; min: the
 * smallest body bodyring_submit takes (0: no ring this run). Returns 0, or
 * -1 with a message in err; call bodyring_close either way. */
int bodyring_open(BodyRing *r, const char *datadir, uint64_t size, uint32_t min,
                  const StoreIO *io, char *err, size_t errcap);

/* Any thread (BodyRing.flk taken shared; pread shares no offset): reads
 * the body ref points at, in its ring file or held file, into buf
 * (ref->len bytes) and checks it (magic, generation, lengths, both crcs);
 * with buf NULL, only the entry's header (the body's crc as recorded).
 * Returns 0, 1 if it does not verify (a reference past its file, a file
 * missing, a torn or overwritten entry), or -1 on a read error (message
 * in err). */
int bodyring_read(BodyRing *r, const StoreRingRef *ref, void *buf, char *err,
                  size_t errcap);

/* After the replay and a sync of every shard: if the ring is on, sizes
 * each file to r->size (creating the directory and the missing files) and
 * sets the next entry to the start of a generation above every one found;
 * if it is off, removes the files and the directory. Returns 0, or -1
 * with a message in err. */
int bodyring_reset(BodyRing *r, char *err, size_t errcap);

/* Main thread: starts the writer (if the ring is on) over the store's
 * shards, ack and hand-off; notify(arg) is called from the writer when
 * finished bodies wait to be taken and none did before. */
int bodyring_start(BodyRing *r, StoreShard *shard, int nshards, StoreAck *ack,
                   Handoff *ho, void (*notify)(void *), void *arg, char *err,
                   size_t errcap);

/* Loop thread: hands body (malloc'd, len bytes; the ring owns it until
 * bodyring_take hands it back) to the writer. Returns its ticket (> 0),
 * or 0 if the ring does not take it (off, stopping, len below r->min or
 * too large for a file): the caller keeps body. */
uint64_t bodyring_submit(BodyRing *r, char *body, size_t len);

/* Loop thread: takes every finished write at once, in the order written;
 * *out points at them until the next call (the caller owns their bodies).
 * Cheap when there are none (no lock). */
size_t bodyring_take(BodyRing *r, StoreRingDone **out);

/* Loop thread: every body taken so far is in a record of sequence seq or
 * below, or was dropped (the reuse rule). */
void bodyring_resolved(BodyRing *r, uint64_t seq);

/* Main thread: stops the writer after the bodies queued are written (or
 * failed, if it had to wait for room) and joins it. Before the mutation
 * thread stops: the writer may wait for it. */
void bodyring_stop(BodyRing *r);

/* The path of held file gen (<dir>/held-<gen>) into buf. Returns 0, or
 * -1 if it does not fit in cap bytes. */
int bodyring_held_path(const BodyRing *r, uint64_t gen, char *buf, size_t cap);

/* The path a dead held file gen is renamed to before the reaper deletes
 * it (<dir>/dead-<gen>) into buf. Returns 0, or -1 if cap is too small. */
int bodyring_dead_path(const BodyRing *r, uint64_t gen, char *buf, size_t cap);

/* The path of spare file gen (<dir>/spare-<gen>) into buf. Returns 0, or
 * -1 if cap is too small. */
int bodyring_spare_path(const BodyRing *r, uint64_t gen, char *buf, size_t cap);

/* The index of generation gen in r->held (ascending gen), or -1. flk held
 * (either way) or the writer thread. */
long bodyring_held_index(const BodyRing *r, uint64_t gen);

/* Adds h to r->held at its place (ascending gen), counted in the stats;
 * flk exclusive, or the main thread before the writer starts. */
void bodyring_held_add(BodyRing *r, HeldFile h);

/* Frees every body not taken, closes the files, frees the path. */
void bodyring_close(BodyRing *r);

#endif
