/* store/bodyheld.c - held files (see store/bodyheld.h). */
#include "store/bodyheld.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/ack.h"
#include "store/enc.h"
#include "store/util.h"

/* A held file is copied out once its live bodies fill less than
 * 1/HELD_SPARSE of it. */
#define HELD_SPARSE 4

/* Live references to one generation: jobs, and bytes of their entries. */
typedef struct Live {
    uint64_t n, bytes;
} Live;

void
bodyring_pin(BodyRing *r)
{
    pthread_rwlock_wrlock(&r->flk);
    r->pins++;
    pthread_rwlock_unlock(&r->flk);
}

void
bodyring_unpin(BodyRing *r)
{
    pthread_rwlock_wrlock(&r->flk);
    r->pins--;
    pthread_rwlock_unlock(&r->flk);
}

/* ---- the writer's cover ---- */

/* The index of gen in gens[0..n) (ascending), or -1. */
static long
gen_index(const uint64_t *gens, size_t n, uint64_t gen)
{
    size_t lo = 0, hi = n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (gens[mid] < gen)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && gens[lo] == gen ? (long)lo : -1;
}

/* Counts the live references of every shard's ring CF: live[k] those to
 * generation gens[k] (the held files when the cover began, ascending; the
 * reaper's copy-outs may take some out of r->held meanwhile), live[n]
 * those to slot (the generation a ring file is to give up). Returns 0, or
 * -1 after ack_fail. */
static int
count_live(BodyRing *r, uint64_t slot, const uint64_t *gens, size_t n,
           Live *live)
{
    for (int s = 0; s < r->nshards; s++) {
        const StoreShard *sh = &r->shard[s];
        rocksdb_iterator_t *it = rocksdb_create_iterator_cf(
            sh->db, sh->opt->ro, sh->cf[SHARD_CF_RING]);
        char *e = NULL;
        size_t vlen;
        for (rocksdb_iter_seek_to_first(it); rocksdb_iter_valid(it);
             rocksdb_iter_next(it)) {
            const char *v = rocksdb_iter_value(it, &vlen);
            if (vlen != ENC_RING_REF) continue;
            StoreRingRef ref = enc_ring_ref_get((const unsigned char *)v);
            long k = ref.gen == slot ? (long)n : gen_index(gens, n, ref.gen);
            if (k < 0) continue;
            live[k].n++;
            live[k].bytes += RING_HDR + (uint64_t)ref.len;
        }
        rocksdb_iter_get_error(it, &e);
        rocksdb_iter_destroy(it);
        if (e) {
            ack_fail(r->ack, "body ring: scan of the references of", s, e);
            return -1;
        }
    }
    return 0;
}

/* Syncs every shard's WAL. Returns 0, or -1 after ack_fail. */
static int
sync_wals(BodyRing *r)
{
    char *msg = NULL;

    for (int s = 0; s < r->nshards; s++) {
        if (r->io->sync(r->io->ctx, r->shard[s].db, &msg) < 0) {
            ack_fail(r->ack, "body ring: WAL sync of", s, msg);
            return -1;
        }
    }
    return 0;
}

/* Takes held file k out of r->held (flk held exclusive); returns it. */
static HeldFile
held_remove(BodyRing *r, long k)
{
    HeldFile h = r->held[k];

    memmove(r->held + k, r->held + k + 1,
            (r->nheld - (size_t)k - 1) * sizeof *r->held);
    r->nheld--;
    atomic_fetch_sub(&r->st_held_files, 1);
    atomic_fetch_sub(&r->st_held_bytes, h.size);
    return h;
}

/* Zeroes the first RING_ALIGN bytes of the file at path, synced: the
 * entry at offset 0 of a held file about to be reused, so that its stale
 * entries, which may repeat bodies a copy-out moved into RocksDB, never
 * read as the start of the new generation's (a ring file's entries from
 * offset 0 are its current generation's, up to the write position).
 * Returns 0, or -1 (errno set). */
static int
wipe_head(const char *path)
{
    static const unsigned char zero[RING_ALIGN];
    int fd = open(path, O_WRONLY | O_CLOEXEC);

    if (fd < 0) return -1;
    int rc = pwrite(fd, zero, sizeof zero, 0) == (ssize_t)sizeof zero &&
                     fdatasync(fd) == 0
                 ? 0
                 : -1;
    close(fd);
    return rc;
}

/* A file a cover may put in a retired ring file's place: held file gen
 * (none of whose jobs is alive) or, with spare set, spare file gen; gen 0
 * for none. */
typedef struct Reuse {
    uint64_t gen;
    int spare;
} Reuse;

/* Opens the file ring file i starts from at path: file u, its head wiped
 * (wipe_head) if it is a held file (a spare's was), renamed there, or,
 * with none or if that fails, a new one; either way r->size bytes (sparse
 * where new). *reused says which. Returns the fd, or -1 with a message in
 * err. */
static int
fresh_file(BodyRing *r, const char *path, Reuse u, int *reused, char *err,
           size_t errcap)
{
    char old[4096];
    int named =
        u.gen && (u.spare ? bodyring_spare_path(r, u.gen, old, sizeof old)
                          : bodyring_held_path(r, u.gen, old, sizeof old)) == 0;

    *reused =
        named && (u.spare || wipe_head(old) == 0) && rename(old, path) == 0;
    int fd = *reused ? open(path, O_RDWR | O_CLOEXEC)
                     : open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return util_fail(err, errcap, "open %s: %s", path, strerror(errno));
    if (ftruncate(fd, (off_t)r->size) < 0) {
        close(fd);
        return util_fail(err, errcap, "size %s: %s", path, strerror(errno));
    }
    return fd;
}

/* Takes spare file gen out of r->spare (flk held exclusive). */
static void
spare_remove(BodyRing *r, uint64_t gen)
{
    for (size_t k = 0; k < r->nspare; k++)
        if (r->spare[k] == gen) {
            r->spare[k] = r->spare[--r->nspare];
            atomic_fetch_sub(&r->st_spare_files, 1);
            return;
        }
}

/* Renames ring file i to held-<its generation> and puts in its place file
 * u (a held file none of whose jobs is alive, or a spare file: its blocks
 * written again rather than freed and allocated anew; its head is zeroes
 * and its stale entries carry another generation, which no reference to
 * this file's can match), or with none a new, empty file; the directory
 * synced (also between the renames, so that no crash finds the held
 * file's name lost and another file at from's). Returns 0, or -1 with a
 * message in err. */
static int
retire(BodyRing *r, int i, Reuse u, char *err, size_t errcap)
{
    char from[4096], to[4096];
    uint64_t gen = r->slot_gen[i];
    int reused;

    if (snprintf(from, sizeof from, "%s/ring-%d", r->dir, i) >=
            (int)sizeof from ||
        bodyring_held_path(r, gen, to, sizeof to) < 0)
        return util_fail(err, errcap, "path too long: %s", r->dir);
    if (rename(from, to) < 0)
        return util_fail(err, errcap, "rename %s: %s", from, strerror(errno));
    /* the held file's name durable before another file takes from's */
    if (u.gen && util_sync_dir(r->dir, err, errcap) < 0) return -1;
    int fd = fresh_file(r, from, u, &reused, err, errcap);
    if (fd < 0) return -1;
    if (util_sync_dir(r->dir, err, errcap) < 0) {
        close(fd);
        return -1;
    }
    pthread_rwlock_wrlock(&r->flk);
    long k = reused && !u.spare ? bodyring_held_index(r, u.gen) : -1;
    HeldFile gone = k >= 0 ? held_remove(r, k) : (HeldFile){.fd = -1};
    if (reused && u.spare) spare_remove(r, u.gen);
    bodyring_held_add(
        r, (HeldFile){.gen = gen, .size = r->fsize[i], .fd = r->fd[i]});
    r->fd[i] = fd;
    r->fsize[i] = r->size;
    r->slot_gen[i] = 0;
    pthread_rwlock_unlock(&r->flk);
    if (gone.fd >= 0) close(gone.fd);
    if (gen > r->top_gen) r->top_gen = gen; /* bodyring_reset starts above */
    return 0;
}

/* Renames the file at path (generation gen, size bytes), which no job
 * refers to, dead-<gen> and leaves it to the reaper (store/bodyreap.h),
 * which frees it a few MiB at a time off the writer's path; unlinks it
 * if the rename fails. */
static void
bury(BodyRing *r, uint64_t gen, const char *path, uint64_t size)
{
    char dead[4096];

    if (bodyring_dead_path(r, gen, dead, sizeof dead) == 0 &&
        rename(path, dead) == 0)
        bodyreap_add(&r->reap, dead, size);
    else
        (void)unlink(path);
}

/* Deletes held file gen unless the files are pinned (a backup, a
 * copy-out): renamed dead-<gen> and left to the reaper (store/bodyreap.h),
 * which frees it a few MiB at a time off the writer's path; deleted here
 * if the rename fails. Writer thread (a cover) or reaper thread (after a
 * copy-out); a second call for the same file finds it gone. */
static void
drop(BodyRing *r, uint64_t gen)
{
    char path[4096];

    pthread_rwlock_wrlock(&r->flk);
    long k = r->pins ? -1 : bodyring_held_index(r, gen);
    HeldFile h = k >= 0 ? held_remove(r, k) : (HeldFile){0};
    pthread_rwlock_unlock(&r->flk);
    if (k < 0) return;
    close(h.fd);
    /* a file left by a crash here is deleted at the next start */
    if (bodyring_held_path(r, gen, path, sizeof path) == 0)
        bury(r, gen, path, h.size);
}

/* After held file gen's copy-out (reaper thread): takes the file, which no
 * job refers to any more, out of the held files and keeps it as a spare
 * file, its head wiped (wipe_head) and renamed spare-<gen>, for the next
 * cover to reuse as the ring file it retires; past RING_SPARE_MAX spares,
 * or if the wipe or the rename fails, it goes to the reaper as drop's do.
 * While the files are pinned (a backup) it stays held, and a later cover
 * reuses or deletes it. */
static void
keep_spare(BodyRing *r, uint64_t gen)
{
    char path[4096], spare[4096];

    pthread_rwlock_wrlock(&r->flk);
    long k = r->pins ? -1 : bodyring_held_index(r, gen);
    HeldFile h = k >= 0 ? held_remove(r, k) : (HeldFile){0};
    int room = r->nspare < RING_SPARE_MAX; /* only this thread adds */
    pthread_rwlock_unlock(&r->flk);
    if (k < 0) return;
    close(h.fd);
    if (bodyring_held_path(r, gen, path, sizeof path) < 0) return;
    if (room && bodyring_spare_path(r, gen, spare, sizeof spare) == 0 &&
        wipe_head(path) == 0 && rename(path, spare) == 0) {
        pthread_rwlock_wrlock(&r->flk);
        r->spare[r->nspare++] = gen;
        atomic_fetch_add(&r->st_spare_files, 1);
        pthread_rwlock_unlock(&r->flk);
        return;
    }
    bury(r, gen, path, h.size);
}

/* Copies one live body (key k of shard sh, reference v) into the body CF,
 * removing its reference, if the job still has that reference: under wmu,
 * so that a delete of the job is either before (no reference: nothing
 * written) or after (it removes the body copied). */
static int
copy_one(BodyRing *r, const StoreShard *sh, const char *k, const char *v,
         char **buf)
{
    StoreRingRef ref = enc_ring_ref_get((const unsigned char *)v);
    char err[256], *e = NULL;
    size_t vlen;

    *buf = util_xrealloc(*buf, ref.len ? ref.len : 1);
    int rc = bodyring_read(r, &ref, *buf, err, sizeof err);
    if (rc > 0)
        snprintf(err, sizeof err,
                 "held body of job %" PRIu64 " (generation %" PRIu64
                 ", offset %" PRIu64 ") does not verify",
                 enc_key_get(k), ref.gen, ref.off);
    if (rc != 0) {
        ack_fail(r->ack, "body ring", -1, strdup(err));
        return -1;
    }
    pthread_mutex_lock(r->wmu);
    char *now = rocksdb_get_cf(sh->db, sh->opt->ro, sh->cf[SHARD_CF_RING], k,
                               ENC_KEY_LEN, &vlen, &e);
    if (!e && now && vlen == ENC_RING_REF && !memcmp(now, v, vlen)) {
        rocksdb_writebatch_t *b = rocksdb_writebatch_create();
        rocksdb_writebatch_put_cf(b, sh->cf[SHARD_CF_BODY], k, ENC_KEY_LEN,
                                  *buf, ref.len);
        rocksdb_writebatch_delete_cf(b, sh->cf[SHARD_CF_RING], k, ENC_KEY_LEN);
        rocksdb_write(sh->db, sh->opt->wo_nosync, b, &e);
        rocksdb_writebatch_destroy(b);
        if (!e) atomic_fetch_add(&r->st_copied, 1);
    }
    pthread_mutex_unlock(r->wmu);
    rocksdb_free(now);
    if (!e) return 0;
    ack_fail(r->ack, "body ring: copy-out to", sh->index, e);
    return -1;
}

/* Copies every live body of held generation gen into the body CF (ending
 * early once the reaper is asked to stop) and syncs every shard's WAL.
 * Returns 0, or -1 after ack_fail. */
static int
copy_out(BodyRing *r, uint64_t gen)
{
    char *buf = NULL;
    int rc = 0;

    for (int s = 0; rc == 0 && s < r->nshards; s++) {
        const StoreShard *sh = &r->shard[s];
        rocksdb_iterator_t *it = rocksdb_create_iterator_cf(
            sh->db, sh->opt->ro, sh->cf[SHARD_CF_RING]);
        size_t klen, vlen;
        for (rocksdb_iter_seek_to_first(it);
             rc == 0 && rocksdb_iter_valid(it) && !bodyreap_stopping(&r->reap);
             rocksdb_iter_next(it)) {
            const char *k = rocksdb_iter_key(it, &klen);
            const char *v = rocksdb_iter_value(it, &vlen);
            if (klen == ENC_KEY_LEN && vlen == ENC_RING_REF &&
                enc_ring_ref_get((const unsigned char *)v).gen == gen)
                rc = copy_one(r, sh, k, v, &buf);
        }
        rocksdb_iter_destroy(it);
    }
    free(buf);
    return rc == 0 ? sync_wals(r) : rc;
}

int
held_copy(void *ctx, uint64_t gen)
{
    BodyRing *r = ctx;

    bodyring_pin(r); /* no file goes while its bodies are read */
    int rc = copy_out(r, gen);
    bodyring_unpin(r);
    /* no live reference is left (no new one ever points into a held file)
     * and their removals are synced: the file becomes a spare, for a
     * cover to reuse (its blocks written again, not freed and allocated
     * anew), or goes */
    if (rc == 0 && !bodyreap_stopping(&r->reap)) keep_spare(r, gen);
    return rc;
}

/* Queues the copy-out of held file gen on the reaper's thread, unless it
 * was queued at an earlier cover. (Writer thread: HeldFile.copying is its
 * own, written under flk shared as no other thread writes it; the reaper's
 * drop moves the list under flk exclusive.) */
static void
copy_later(BodyRing *r, uint64_t gen)
{
    pthread_rwlock_rdlock(&r->flk);
    long k = bodyring_held_index(r, gen);
    int queue = k >= 0 && !r->held[k].copying;
    if (queue) r->held[k].copying = 1;
    pthread_rwlock_unlock(&r->flk);
    if (queue) bodyreap_copy(&r->reap, gen);
}

/* Records whether held file gen is sparse (less than a quarter live) at
 * this cover; returns 1 if it was at the previous one too. A file is
 * copied out only then: jobs that go in order empty a sparse file within
 * about a lap, and copying bodies that die a moment later would cost the
 * disk for nothing. (Writer thread: HeldFile.sparse is its own, written
 * under flk shared, as copying is.) */
static int
sparse_again(BodyRing *r, uint64_t gen, int sparse)
{
    pthread_rwlock_rdlock(&r->flk);
    long k = bodyring_held_index(r, gen);
    int again = k >= 0 && sparse && r->held[k].sparse;
    if (k >= 0) r->held[k].sparse = sparse;
    pthread_rwlock_unlock(&r->flk);
    return again;
}

/* A spare file to reuse, or none (flk taken shared: the reaper adds). */
static Reuse
any_spare(BodyRing *r)
{
    pthread_rwlock_rdlock(&r->flk);
    Reuse u = {.gen = r->nspare ? r->spare[0] : 0, .spare = 1};
    pthread_rwlock_unlock(&r->flk);
    return u;
}

int
held_cover(BodyRing *r, int i)
{
    /* the held files as the cover begins (only this thread adds any, and
     * the reaper's drops only take some out) */
    pthread_rwlock_rdlock(&r->flk);
    size_t n = r->nheld;
    Live *live = calloc(n + 1, sizeof *live);
    uint64_t *gens = malloc((n + 1) * sizeof *gens);
    uint64_t *sizes = malloc((n + 1) * sizeof *sizes);
    int rc = 0;

    for (size_t k = 0; live && gens && sizes && k < n; k++) {
        gens[k] = r->held[k].gen;
        sizes[k] = r->held[k].size;
    }
    pthread_rwlock_unlock(&r->flk);
    if (!live || !gens || !sizes) {
        ack_fail(r->ack, "body ring", -1, strdup("out of memory"));
        rc = -1;
    }
    /* a sync first: the StoreIO seam may hold unsynced writes back,
     * unreadable (store/fault.c), and the count must see every reference
     * applied */
    if (rc == 0) rc = sync_wals(r);
    if (rc == 0) rc = count_live(r, r->slot_gen[i], gens, n, live);
    /* and after: what the count saw is durable before any file is
     * overwritten or deleted (with -f MS a delete applied may not be in a
     * synced journal yet, and a crash must not bring back a job whose body
     * is gone) */
    if (rc == 0) rc = sync_wals(r);
    if (rc == 0 && r->slot_gen[i]) {
        pthread_rwlock_rdlock(&r->flk);
        int pinned = r->pins > 0, keep = live[n].n > 0 || pinned;
        pthread_rwlock_unlock(&r->flk);
        Reuse u = {0}; /* the oldest held file no job refers to, or a
                          spare */
        for (size_t k = 0; !pinned && !u.gen && k < n; k++)
            if (!live[k].n) u.gen = gens[k];
        if (!pinned && !u.gen) u = any_spare(r);
        char err[512];
        if (keep && (rc = retire(r, i, u, err, sizeof err)) < 0)
            ack_fail(r->ack, "body ring", -1, strdup(err));
    }
    /* (drop keeps the file while a backup or a copy-out pins the files; a
     * later cover deletes it then) */
    for (size_t k = 0; rc == 0 && k < n; k++) {
        int sparse = live[k].n && live[k].bytes * HELD_SPARSE < sizes[k];
        if (live[k].n && !sparse_again(r, gens[k], sparse)) continue;
        if (live[k].n)
            copy_later(r, gens[k]); /* the reaper deletes it after */
        else
            drop(r, gens[k]);
    }
    free(live);
    free(gens);
    free(sizes);
    return rc;
}

/* ---- start-up ---- */

/* Start-up with the ring on: the files live references point into. */
typedef struct Seen {
    int slot[STORE_RING_FILES]; /* ring file i's generation */
    unsigned char *held;        /* [nheld]: held file k's */
} Seen;

/* Marks the file of the verified reference ref live in seen. */
static void
seen_mark(const BodyRing *r, Seen *seen, const StoreRingRef *ref)
{
    int i = (int)(ref->gen % STORE_RING_FILES);
    long k;

    if (r->slot_gen[i] == ref->gen)
        seen->slot[i] = 1;
    else if ((k = bodyring_held_index(r, ref->gen)) >= 0)
        seen->held[k] = 1;
}

/* The live reference v (vlen bytes) of the job of key k in shard sh. A
 * reference whose body the body CF holds (an older server copied every
 * ring body there) is removed (into b). Else, with seen (the ring on),
 * its entry's header must verify and its file is marked live in seen;
 * without (no ring this run), its body is read back, verified, and put
 * into the body CF with the reference's removal (into b). */
static int
restore_one(BodyRing *r, const StoreShard *sh, const char *k, const char *v,
            size_t vlen, rocksdb_writebatch_t *b, Seen *seen, char **buf,
            char *err, size_t errcap)
{
    uint64_t id = enc_key_get(k);

    if (vlen != ENC_RING_REF)
        return util_fail(err, errcap,
                         "shard-%02d: job %" PRIu64
                         "'s ring reference has %zu bytes",
                         sh->index, id, vlen);
    StoreRingRef ref = enc_ring_ref_get((const unsigned char *)v);
    int has = shard_has_body(sh, k);
    if (has < 0)
        return util_fail(err, errcap,
                         "shard-%02d: read of job %" PRIu64 "'s body",
                         sh->index, id);
    if (has || !seen)
        rocksdb_writebatch_delete_cf(b, sh->cf[SHARD_CF_RING], k, ENC_KEY_LEN);
    if (has) return 0;
    if (!seen) *buf = util_xrealloc(*buf, ref.len ? ref.len : 1);
    int rc = bodyring_read(r, &ref, seen ? NULL : *buf, err, errcap);
    if (rc < 0) return -1;
    if (rc > 0)
        return util_fail(err, errcap,
                         "body ring: job %" PRIu64
                         "'s body is not in shard-%02d and its "
                         "ring entry (generation %" PRIu64 ", offset %" PRIu64
                         ", %u bytes) does not verify",
                         id, sh->index, ref.gen, ref.off, ref.len);
    if (seen)
        seen_mark(r, seen, &ref);
    else
        rocksdb_writebatch_put_cf(b, sh->cf[SHARD_CF_BODY], k, ENC_KEY_LEN,
                                  *buf, ref.len);
    r->restored++;
    return 0;
}

/* Writes b (synced) and clears it; -1 with a message on error. */
static int
restore_write(const StoreShard *sh, rocksdb_writebatch_t *b, char *err,
              size_t errcap)
{
    char *e = NULL;

    rocksdb_write(sh->db, sh->opt->wo_sync, b, &e);
    rocksdb_writebatch_clear(b);
    if (!e) return 0;
    util_fail(err, errcap, "shard-%02d: restoring ring bodies: %s", sh->index,
              e);
    rocksdb_free(e);
    return -1;
}

/* bodyring_restore of one shard. */
static int
restore_shard(BodyRing *r, const StoreShard *sh, Seen *seen, char **buf,
              char *err, size_t errcap)
{
    rocksdb_iterator_t *it =
        rocksdb_create_iterator_cf(sh->db, sh->opt->ro, sh->cf[SHARD_CF_RING]);
    rocksdb_writebatch_t *b = rocksdb_writebatch_create();
    char *e = NULL;
    size_t klen, vlen;
    int rc = 0;

    for (rocksdb_iter_seek_to_first(it); rc == 0 && rocksdb_iter_valid(it);
         rocksdb_iter_next(it)) {
        const char *k = rocksdb_iter_key(it, &klen);
        const char *v = rocksdb_iter_value(it, &vlen);
        if (klen == ENC_KEY_LEN)
            rc = restore_one(r, sh, k, v, vlen, b, seen, buf, err, errcap);
        if (rc == 0 && rocksdb_writebatch_data(b, &klen) &&
            klen > ((size_t)16 << 20))
            rc = restore_write(sh, b, err, errcap);
    }
    rocksdb_iter_get_error(it, &e);
    rocksdb_iter_destroy(it);
    if (e && rc == 0)
        rc = util_fail(err, errcap, "shard-%02d: scan of ring references: %s",
                       sh->index, e);
    rocksdb_free(e);
    if (rc == 0 && rocksdb_writebatch_count(b))
        rc = restore_write(sh, b, err, errcap);
    rocksdb_writebatch_destroy(b);
    return rc;
}

/* Start-up, the ring on: keeps as held files the ring files live jobs
 * refer to (so that the ring may start over), each replaced by a held file
 * none refers to while there is one, and deletes the other such files. */
static int
restore_files(BodyRing *r, const Seen *seen, char *err, size_t errcap)
{
    size_t n = r->nheld;
    uint64_t *dead = malloc((n ? n : 1) * sizeof *dead);
    size_t ndead = 0;

    if (!dead) return util_fail(err, errcap, "out of memory");
    for (size_t k = 0; k < n; k++)
        if (!seen->held[k]) dead[ndead++] = r->held[k].gen;
    int rc = 0;
    size_t reuse = 0; /* dead held files, then spares, take the retired
                         files' places */
    for (int i = 0; rc == 0 && i < STORE_RING_FILES; i++) {
        if (!seen->slot[i] || r->fd[i] < 0 || !r->slot_gen[i]) continue;
        Reuse u = reuse < ndead ? (Reuse){.gen = dead[reuse++]} : any_spare(r);
        rc = retire(r, i, u, err, errcap);
    }
    for (size_t k = 0; rc == 0 && k < ndead; k++)
        drop(r, dead[k]);
    free(dead);
    return rc;
}

/* Start-up, no ring this run: every held file goes (its bodies are in the
 * body CF now), and every spare file. */
static int
remove_held(BodyRing *r, char *err, size_t errcap)
{
    char path[4096];

    for (size_t k = 0; k < r->nheld; k++) {
        close(r->held[k].fd);
        r->held[k].fd = -1;
        if (bodyring_held_path(r, r->held[k].gen, path, sizeof path) == 0 &&
            unlink(path) < 0 && errno != ENOENT)
            return util_fail(err, errcap, "unlink %s: %s", path,
                             strerror(errno));
    }
    r->nheld = 0;
    atomic_store(&r->st_held_files, 0);
    atomic_store(&r->st_held_bytes, 0);
    for (size_t k = 0; k < r->nspare; k++)
        if (bodyring_spare_path(r, r->spare[k], path, sizeof path) == 0 &&
            unlink(path) < 0 && errno != ENOENT)
            return util_fail(err, errcap, "unlink %s: %s", path,
                             strerror(errno));
    r->nspare = 0;
    atomic_store(&r->st_spare_files, 0);
    return 0;
}

int
bodyring_restore(BodyRing *r, const StoreShard *shard, int nshards, char *err,
                 size_t errcap)
{
    Seen seen = {.held = calloc(r->nheld ? r->nheld : 1, 1)};
    Seen *sp = r->min ? &seen : NULL;
    char *buf = NULL;
    int rc = seen.held ? 0 : util_fail(err, errcap, "out of memory");

    for (int i = 0; rc == 0 && i < nshards; i++)
        rc = restore_shard(r, &shard[i], sp, &buf, err, errcap);
    free(buf);
    if (rc == 0)
        rc = sp ? restore_files(r, sp, err, errcap)
                : remove_held(r, err, errcap);
    free(seen.held);
    return rc;
}
