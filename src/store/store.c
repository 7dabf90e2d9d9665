/* store.c - the store's facade: store.h's API over its modules. Layers,
 * each calling only those below it (no include cycles):
 *
 *   store.c                       this facade (store.h)
 *   store/mut.c                   the mutation thread, group commit
 *   store/mutreplay.c             the commit journal's replay at start-up
 *   store/sync.c  store/handoff.c  store/recover.c  store/ship.c
 *   store/journal.c  store/bodyring.c
 *                                 syncs and syncers; the loop's hand-off
 *                                 queue; the recovery scan; the snapshot
 *                                 stream of cluster mode; the commit
 *                                 journal; the body ring and its writer
 *   store/ack.c  store/shard.c  store/dir.c  store/fault.c
 *                                 publication and fail-stop; a RocksDB
 *                                 shard; the data directory; fault injection
 *   store/enc.c  store/util.c     encodings; helpers
 *
 * Each header says which thread runs its functions. The durability
 * contract the loop builds on is protocol/PROTOCOL.md, section 11.
 */
#include "store/store.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/ack.h"
#include "store/bodyheld.h"
#include "store/bodyring.h"
#include "store/dir.h"
#include "store/enc.h"
#include "store/fault.h"
#include "store/handoff.h"
#include "store/journal.h"
#include "store/mut.h"
#include "store/mutreplay.h"
#include "store/raft.h"
#include "store/recover.h"
#include "store/shard.h"
#include "store/ship.h"
#include "store/sync.h"
#include "store/util.h"

_Static_assert(STORE_SHARDS_MAX <= 64, "store_get_bodies: 64-bit shard mask");

struct Store {
    /* set by store_open, read-only afterwards */
    StoreConfig cfg;
    StoreDir dir;
    StoreFault fault;
    ShardOpts opts;
    const StoreIO *io; /* cfg.io (or io_cfg), fault.inner (RocksDB) or
                          fault.wrap */
    StoreIO io_cfg;    /* cfg.io with the plain journal IO where it has none */
    Journal journal;
    BodyRing ring; /* the body writer's (store/bodyring.h) */
    int nshards;
    StoreShard shard[STORE_SHARDS_MAX];
    int started;

    StoreAck ack;   /* any thread (store/ack.h) */
    Handoff ho;     /* loop and mutation thread (store/handoff.h) */
    StoreSync sync; /* mutation and syncer threads (store/sync.h) */
    StoreMut mut;   /* mutation thread (store/mut.h) */
    StoreRaft raft; /* raft thread, cluster mode (store/raft.h) */
};

/* ---- loop side ---- */

void
store_add_put(Store *s, uint64_t seq, const StoreJob *job, const void *body)
{
    store_add_put_ring(s, seq, job, body, NULL);
}

void
store_add_put_ring(Store *s, uint64_t seq, const StoreJob *job,
                   const void *body, const StoreRingRef *ref)
{
    /* a ring put's record carries the reference, not the body (enc.h) */
    unsigned char *p = handoff_reserve(
        &s->ho, ENC_REC_HDR + STORE_META_MAX +
                    (ref ? ENC_RING_REF : (size_t)job->body_size));
    size_t ml = store_meta_encode(job, p + ENC_REC_HDR);
    unsigned char *q = p + ENC_REC_HDR + ml;

    if (ref) {
        enc_ring_ref_put(q, ref);
    } else if (job->body_size)
        memcpy(q, body, job->body_size);
    handoff_commit(&s->ho, p,
                   &(EncRec){.seq = seq,
                             .id = job->id,
                             .body_len = job->body_size,
                             .meta_len = (uint16_t)ml,
                             .op = ENC_OP_PUT,
                             .flag = ref ? ENC_PUT_RING : 0});
}

size_t
store_ring_min(const Store *s)
{
    return s->ring.started ? s->ring.min : 0;
}

uint64_t
store_ring_submit(Store *s, char *body, size_t len)
{
    return bodyring_submit(&s->ring, body, len);
}

size_t
store_ring_take(Store *s, StoreRingDone **out)
{
    return bodyring_take(&s->ring, out);
}

void
store_ring_resolved(Store *s, uint64_t seq)
{
    bodyring_resolved(&s->ring, seq);
}

void
store_add_update(Store *s, uint64_t seq, const StoreJob *job)
{
    unsigned char *p = handoff_reserve(&s->ho, ENC_REC_HDR + STORE_META_MAX);
    size_t ml = store_meta_encode(job, p + ENC_REC_HDR);

    handoff_commit(&s->ho, p,
                   &(EncRec){.seq = seq,
                             .id = job->id,
                             .meta_len = (uint16_t)ml,
                             .op = ENC_OP_UPDATE,
                             .flag = job->state == STORE_GONE});
}

void
store_add_delete(Store *s, uint64_t seq, uint64_t id, int flags)
{
    unsigned char *p = handoff_reserve(&s->ho, ENC_REC_HDR);

    handoff_commit(&s->ho, p,
                   &(EncRec){.seq = seq,
                             .id = id,
                             .op = ENC_OP_DELETE,
                             .flag = (uint8_t)(flags & (STORE_DEL_REWRITTEN |
                                                        STORE_DEL_NO_BODY |
                                                        STORE_DEL_SMALL))});
}

void
store_hold(Store *s, int on)
{
    handoff_hold(&s->ho, on);
}

void
store_flush(Store *s)
{
    handoff_flush(&s->ho);
}

uint64_t
store_acked_seq(const Store *s)
{
    return ack_seq(&s->ack, s->cfg.sync_mode == STORE_SYNC_ALWAYS);
}

void
store_note_active(Store *s, unsigned n)
{
    handoff_note_active(&s->ho, n);
}

size_t
store_backlog_bytes(const Store *s)
{
    return handoff_backlog(&s->ho);
}

int
store_failed(Store *s, char *msg, size_t cap)
{
    return ack_failed(&s->ack, msg, cap);
}

void
store_stats(const Store *s, StoreStats *out)
{
    ack_stats(&s->ack, out);
    out->ring_bodies =
        atomic_load_explicit(&s->ring.st_bodies, memory_order_relaxed);
    out->ring_bytes =
        atomic_load_explicit(&s->ring.st_bytes, memory_order_relaxed);
    out->ring_waits =
        atomic_load_explicit(&s->ring.st_waits, memory_order_relaxed);
    out->ring_flushes =
        atomic_load_explicit(&s->ring.st_flushes, memory_order_relaxed);
    out->ring_restored = s->ring.restored;
    out->ring_held_files = atomic_load(&s->ring.st_held_files);
    out->ring_held_bytes = atomic_load(&s->ring.st_held_bytes);
    out->ring_copied = atomic_load(&s->ring.st_copied);
    out->ring_copy_queue = atomic_load(&s->ring.reap.st_copies);
    out->ring_spare_files = atomic_load(&s->ring.st_spare_files);
    out->ring_dead_files = atomic_load(&s->ring.reap.st_files);
    out->ring_dead_bytes = atomic_load(&s->ring.reap.st_bytes);
    out->idle_flushes = atomic_load(&s->mut.idle.st_rounds);
    out->idle_flushed = atomic_load(&s->mut.idle.st_flushed);
    out->at_rest = !s->mut.idle_on || idle_at_rest(&s->mut.idle, out->bytes);
    out->nshards = s->nshards;
}

uint64_t
store_memtable_bytes(const Store *s)
{
    return idle_memtable_bytes(s->shard, s->nshards);
}

void
store_release_spares(Store *s)
{
    handoff_drop_spares(&s->ho);
}

/* ---- reads (any thread) ---- */

/* Wakes the mutation thread for a reader that waits (ack_wait_applied). */
static void
store_kick(void *arg)
{
    handoff_kick(&((Store *)arg)->ho);
}

/* The body ref points at, read from the body ring into *body (malloc'd,
 * ref->len bytes; the caller frees): 0, 1 if its entry does not verify,
 * or -1 with a message in err. */
static int
store_ring_read(Store *s, const StoreRingRef *ref, char **body, char *err,
                size_t errcap)
{
    char *b = malloc(ref->len ? ref->len : 1);

    if (!b) return util_fail(err, errcap, "out of memory");
    int rc = bodyring_read(&s->ring, ref, b, err, errcap);
    if (rc == 0)
        *body = b;
    else
        free(b);
    return rc;
}

/* The body of job id read from the body ring, its home
 * (store/bodyheld.h): 1 with *body (malloc'd) and *len, 0 if the job has
 * none (deleted), -1 with a message in err on an error. Without a
 * reference, or with one whose entry no longer verifies, the body CF is
 * read once more: a copy-out may have moved the body there (with the
 * reference's removal, in one batch) since the caller looked. */
static int
store_ring_body(Store *s, uint64_t id, char **body, size_t *len, char *err,
                size_t errcap)
{
    const StoreShard *sh = &s->shard[store_shard_of(id, s->nshards)];
    StoreRingRef ref;
    int rc = shard_get_ring_ref(sh, id, &ref, err, errcap);

    if (rc > 0 && (rc = store_ring_read(s, &ref, body, err, errcap)) == 0) {
        *len = ref.len;
        return 1;
    }
    if (rc < 0) return -1;
    return shard_get_body(sh, id, body, len, err, errcap);
}

int
store_get_body(Store *s, uint64_t id, char **body, size_t *len, char *err,
               size_t errcap)
{
    if (fault_read_fails(&s->fault))
        return util_fail(err, errcap, "read body of job %" PRIu64 ": %s", id,
                         FAULT_READ_MSG);
    ack_wait_applied(&s->ack, store_kick, s);
    int rc = shard_get_body(&s->shard[store_shard_of(id, s->nshards)], id, body,
                            len, err, errcap);
    return rc ? rc : store_ring_body(s, id, body, len, err, errcap);
}

int
store_get_bodies(Store *s, const uint64_t *ids, size_t n, char **bodies,
                 size_t *lens, char *err, size_t errcap)
{
    int rc = 0;
    uint64_t todo = 0; /* bit k: shard k has ids (STORE_SHARDS_MAX 64) */

    for (size_t i = 0; i < n; i++) {
        bodies[i] = NULL;
        todo |= (uint64_t)1 << store_shard_of(ids[i], s->nshards);
    }
    if (fault_read_fails(&s->fault))
        return util_fail(err, errcap, "read bodies: %s", FAULT_READ_MSG);
    ack_wait_applied(&s->ack, store_kick, s);
    for (int k = 0; k < s->nshards; k++)
        if (((todo >> k) & 1) && shard_get_bodies(&s->shard[k], ids, n, bodies,
                                                  lens, err, errcap) < 0)
            rc = -1;
    for (size_t i = 0; i < n; i++) /* the rest: ring bodies, or none */
        if (!bodies[i] &&
            store_ring_body(s, ids[i], &bodies[i], &lens[i], err, errcap) < 0)
            rc = -1;
    return rc;
}

/* ---- lifecycle (main thread) ---- */

static int
config_check(const StoreConfig *cfg, char *err, size_t errcap)
{
    if (!cfg->dir || !*cfg->dir)
        return util_fail(err, errcap, "no data directory");
    if (cfg->nshards < 0 || cfg->nshards > STORE_SHARDS_MAX)
        return util_fail(err, errcap, "shard count %d out of range 1..%d",
                         cfg->nshards, STORE_SHARDS_MAX);
    if (cfg->sync_mode != STORE_SYNC_ALWAYS &&
        cfg->sync_mode != STORE_SYNC_INTERVAL &&
        cfg->sync_mode != STORE_SYNC_NEVER)
        return util_fail(err, errcap, "bad sync mode %d", (int)cfg->sync_mode);
    if (cfg->sync_mode == STORE_SYNC_INTERVAL && cfg->sync_interval_ms <= 0)
        return util_fail(err, errcap, "sync interval must be > 0 ms");
    if (cfg->journal_bytes && cfg->journal_bytes < STORE_JOURNAL_SIZE_MIN)
        return util_fail(err, errcap, "journal size %llu below %llu bytes",
                         (unsigned long long)cfg->journal_bytes,
                         (unsigned long long)STORE_JOURNAL_SIZE_MIN);
    if (cfg->ring_min && cfg->ring_min < STORE_RING_MIN_LOW)
        return util_fail(err, errcap, "body ring threshold %u below %u bytes",
                         cfg->ring_min, STORE_RING_MIN_LOW);
    if (cfg->ring_file_bytes && cfg->ring_file_bytes < STORE_RING_FILE_MIN)
        return util_fail(err, errcap, "body ring file size %llu below %llu",
                         (unsigned long long)cfg->ring_file_bytes,
                         (unsigned long long)STORE_RING_FILE_MIN);
    return 0;
}

/* Frees everything of s that exists; the mutation thread must be gone. */
static void
store_free(Store *s)
{
    sync_stop(&s->sync);
    for (int i = 0; i < STORE_SHARDS_MAX; i++)
        shard_close(&s->shard[i]);
    mut_destroy(&s->mut);
    sraft_destroy(&s->raft);
    journal_close(&s->journal);
    bodyring_close(&s->ring);
    sync_destroy(&s->sync);
    shard_opts_destroy(&s->opts);
    handoff_destroy(&s->ho);
    ack_destroy(&s->ack);
    fault_free(&s->fault);
    dir_close(&s->dir); /* releases the lock */
    free(s);
}

/* Creates the shared options and opens every shard. */
static int
store_open_shards(Store *s, char *err, size_t errcap)
{
    shard_opts_create(&s->opts, s->cfg.raft_log);
    for (int i = 0; i < s->nshards; i++) {
        if (shard_open(&s->shard[i], &s->opts, s->dir.path, i, s->nshards, err,
                       errcap) < 0)
            return -1;
    }
    return 0;
}

/* The StoreIO of cfg->io, with the plain journal IO where it has none. */
static const StoreIO *
io_complete(Store *s, const StoreIO *io)
{
    if (!io || (io->jwrite && io->jsync)) return io;
    s->io_cfg = *io;
    if (!s->io_cfg.jwrite) s->io_cfg.jwrite = journal_io_write;
    if (!s->io_cfg.jsync) s->io_cfg.jsync = journal_io_sync;
    return &s->io_cfg;
}

/* Opens the commit journal, replays what the shards lack, syncs them and
 * sets the journal up for this run's mode (store/journal.h): kept in
 * STORE_SYNC_ALWAYS and STORE_SYNC_INTERVAL with a journal size, else its
 * files are removed once replayed. */
static int
store_journal_open(Store *s, char *err, size_t errcap)
{
    uint64_t size =
        s->cfg.sync_mode != STORE_SYNC_NEVER ? s->cfg.journal_bytes : 0;
    uint64_t rsize = s->cfg.ring_file_bytes ? s->cfg.ring_file_bytes
                                            : STORE_RING_FILE_DEFAULT;
    char msg[sizeof s->ack.failmsg];

    if (bodyring_open(&s->ring, s->dir.path, rsize,
                      size && !s->cfg.raft_log ? s->cfg.ring_min : 0, s->io,
                      err, errcap) < 0)
        return -1;
    s->mut.ring = &s->ring;
    if (journal_open(&s->journal, s->dir.path, size, s->io, err, errcap) < 0 ||
        journal_replay(&s->journal, mut_replay, &s->mut, err, errcap) < 0)
        goto failed;
    if (mut_replay_end(&s->mut, size ? &s->journal : NULL,
                       s->journal.top_group) < 0)
        goto failed;
    /* the bodies the WAL did not carry, before the ring may be reused */
    if (bodyring_restore(&s->ring, s->shard, s->nshards, err, errcap) < 0)
        return -1;
    if (size) sync_use_journal(&s->sync, s->journal.fd, JOURNAL_FILES);
    if (journal_reset(&s->journal, err, errcap) < 0) return -1;
    return bodyring_reset(&s->ring, err, errcap);
failed:
    if (store_failed(s, msg, sizeof msg))
        util_fail(err, errcap, "journal replay: %s", msg);
    return -1;
}

int
store_open(const StoreConfig *cfg, Store **out, char *err, size_t errcap)
{
    Store *s;

    *out = NULL;
    if (config_check(cfg, err, errcap) < 0) return -1;
    if (!(s = calloc(1, sizeof *s)))
        return util_fail(err, errcap, "out of memory");
    s->cfg = *cfg;
    s->dir.lock_fd = -1;
    ack_init(&s->ack, cfg->notify, cfg->notify_arg);
    handoff_init(&s->ho, cfg->sync_mode == STORE_SYNC_ALWAYS,
                 &s->ack.durable_seq);
    sync_init(&s->sync, cfg->sync_mode, cfg->sync_interval_ms, &s->ack);
    StoreIO rocks = shard_rocks_io(&s->opts);
    rocks.jwrite = journal_io_write;
    rocks.jsync = journal_io_sync;
    if (fault_setup(&s->fault, &rocks, io_complete(s, cfg->io), &s->io, err,
                    errcap) < 0 ||
        dir_open(&s->dir, cfg->dir, cfg->nshards, err, errcap) < 0)
        goto bad;
    s->cfg.dir = s->dir.path;
    s->nshards = s->dir.nshards;
    if (store_open_shards(s, err, errcap) < 0) goto bad;
    sync_attach(&s->sync, s->shard, s->nshards, s->io);
    mut_init(&s->mut, cfg->sync_mode, s->shard, s->nshards, s->io, &s->ho,
             &s->sync, &s->ack);
    sraft_init(&s->raft, s->shard, s->nshards, s->io, &s->ack);
    if (store_journal_open(s, err, errcap) < 0) goto bad;
    *out = s;
    return 0;
bad:
    store_free(s);
    return -1;
}

int
store_recover(Store *s, int (*cb)(void *ctx, const StoreJob *job), void *ctx,
              uint64_t *next_id, char *err, size_t errcap)
{
    for (int i = 0; i < s->nshards; i++)
        if (s->shard[i].restoring)
            return util_fail(err, errcap,
                             "shard-%02d holds an unfinished restore: put "
                             "the backup's %s back into %s (or take the "
                             "backup again)",
                             i, STORE_RESTORE_FILE, s->cfg.dir);
    return recover_run(s->shard, s->nshards, cb, ctx, next_id, err, errcap);
}

/* ---- cluster mode ---- */

void
store_cluster_mode(Store *s, uint16_t node_id, StoreProposeFn propose,
                   void *arg)
{
    s->mut.prop.fn = propose;
    s->mut.prop.arg = arg;
    s->mut.prop.node_id = node_id;
    handoff_direct(&s->ho, mut_propose_direct, &s->mut);
}

void
store_raft_replay(Store *s, StoreReplayFn fn, void *arg)
{
    s->raft.replay = fn;
    s->raft.replay_arg = arg;
}

int
store_raft_apply(Store *s, uint64_t index, const void *data, size_t len,
                 int ours)
{
    return sraft_apply(&s->raft, index, data, len, ours);
}

int
store_raft_join(void *a, size_t *alen, const void *b, size_t blen)
{
    return sraft_entry_join(a, alen, b, blen);
}

int
store_raft_snapshot(Store *s, uint64_t index, void **manifest, size_t *len)
{
    unsigned char *m;

    if (sraft_mark(&s->raft, index) < 0 || !(m = malloc(SRAFT_MANIFEST_LEN)))
        return -1;
    sraft_manifest(&s->raft, index, s->mut.prop.node_id, m);
    *manifest = m;
    *len = SRAFT_MANIFEST_LEN;
    return 0;
}

int
store_raft_manifest_ok(const Store *s, const void *manifest, size_t len)
{
    return sraft_manifest_ok(&s->raft, manifest, len);
}

uint64_t
store_raft_applied(const Store *s)
{
    return sraft_applied(&s->raft);
}

int
store_ship_send(Store *s, int fd, char *err, size_t errcap)
{
    return ship_send(s->shard, s->nshards, fd, err, errcap);
}

int
store_ship_recv(Store *s, int fd, char *err, size_t errcap)
{
    return ship_recv(s->shard, s->nshards, fd, err, errcap);
}

/* ShipRingFn over the store's body ring (pinned by the caller). */
static int
store_ship_ring(void *arg, const unsigned char *q, char **body, size_t *len,
                char *err, size_t errcap)
{
    StoreRingRef ref = enc_ring_ref_get(q);
    int rc = store_ring_read(arg, &ref, body, err, errcap);

    if (rc > 0)
        return util_fail(err, errcap,
                         "body ring entry (generation %" PRIu64
                         ", offset %" PRIu64 ") does not verify",
                         ref.gen, ref.off);
    if (rc == 0) *len = ref.len;
    return rc;
}

int
store_backup_send(Store *s, StoreWriteFn write, void *warg,
                  StoreBackupInfo *info, char *err, size_t errcap)
{
    const rocksdb_snapshot_t *snap[STORE_SHARDS_MAX];
    ShipTotals tot;

    /* the ring's files stay while the snapshots' references may be read */
    bodyring_pin(&s->ring);
    if (s->mut.prop.fn) { /* cluster mode: between two applied entries */
        sraft_snapshots(&s->raft, snap, &info->seq);
    } else if (mut_snapshots(&s->mut, snap, &info->seq, err, errcap) < 0) {
        bodyring_unpin(&s->ring);
        return -1;
    }
    int rc = ship_send_at(s->shard, s->nshards, snap, write, warg,
                          store_ship_ring, s, &tot, err, errcap);
    for (int i = 0; i < s->nshards; i++)
        rocksdb_release_snapshot(s->shard[i].db, snap[i]);
    bodyring_unpin(&s->ring);
    info->jobs = tot.jobs;
    info->bytes = tot.bytes;
    info->frames = tot.frames;
    return rc;
}

int
store_restore_pending(const char *dir, int *nshards, char *err, size_t errcap)
{
    char path[4096];
    unsigned char hdr[SHIP_MAGIC_LEN + 8];

    if (snprintf(path, sizeof path, "%s/%s.part", dir, STORE_RESTORE_FILE) >=
        (int)sizeof path)
        return util_fail(err, errcap, "data directory path too long");
    if (access(path, F_OK) == 0)
        return util_fail(err, errcap,
                         "%s holds an unfinished backup (%s): remove the "
                         "directory and take the backup again",
                         dir, path);
    path[strlen(path) - 5] = '\0'; /* STORE_RESTORE_FILE */
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) return 0;
    if (fd < 0) return util_fail(err, errcap, "%s: %s", path, strerror(errno));
    ssize_t r = read(fd, hdr, sizeof hdr);
    close(fd);
    if (r != (ssize_t)sizeof hdr || memcmp(hdr, SHIP_MAGIC, SHIP_MAGIC_LEN))
        return util_fail(err, errcap, "%s is not a snapshot stream", path);
    uint32_t n = le_get32(hdr + SHIP_MAGIC_LEN + 4);
    if (n < 1 || n > STORE_SHARDS_MAX)
        return util_fail(err, errcap, "%s: %u shards", path, n);
    *nshards = (int)n;
    return 1;
}

int
store_restore(Store *s, char *err, size_t errcap)
{
    char path[4096], extra;

    if (dir_path(&s->dir, STORE_RESTORE_FILE, path, sizeof path, err, errcap) <
        0)
        return -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return util_fail(err, errcap, "%s: %s", path, strerror(errno));
    int rc = ship_recv(s->shard, s->nshards, fd, err, errcap);
    if (rc == 0 && read(fd, &extra, 1) != 0)
        rc = util_fail(err, errcap, "%s: bytes after the stream's end", path);
    close(fd);
    if (rc < 0) return -1;
    /* the journal's next group must be above every shard's (jgroup): a
     * replay skips the groups a shard says it holds */
    for (int i = 0; i < s->nshards; i++)
        if (s->shard[i].jgroup > s->mut.group)
            s->mut.group = s->shard[i].jgroup;
    if (unlink(path) < 0)
        return util_fail(err, errcap, "unlink %s: %s", path, strerror(errno));
    return util_sync_dir(s->cfg.dir, err, errcap);
}

int
store_start(Store *s, char *err, size_t errcap)
{
    if (s->started) return util_fail(err, errcap, "store already started");
    if (sync_start(&s->sync, err, errcap) < 0 ||
        mut_start(&s->mut, err, errcap) < 0) {
        sync_stop(&s->sync);
        return -1;
    }
    s->ring.wmu = &s->mut.wmu; /* copy-outs (store/bodyheld.h) */
    s->ring.cover_hook = held_cover;
    bodyreap_set_copy(&s->ring.reap, held_copy, &s->ring);
    if (bodyring_start(&s->ring, s->shard, s->nshards, &s->ack, &s->ho,
                       s->cfg.notify, s->cfg.notify_arg, err, errcap) < 0) {
        s->started = 1; /* store_close joins the mutation thread */
        return -1;
    }
    s->started = 1;
    return 0;
}

int
store_close(Store *s, char *err, size_t errcap)
{
    int rc = 0;
    char msg[sizeof s->ack.failmsg];

    store_flush(s);
    bodyring_stop(&s->ring); /* it may wait for the mutation thread */
    handoff_stop(&s->ho);
    mut_join(&s->mut);
    if (store_failed(s, msg, sizeof msg))
        rc = util_fail(err, errcap, "%s", msg);
    store_free(s);
    return rc;
}
