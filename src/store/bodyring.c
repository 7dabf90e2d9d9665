/* store/bodyring.c - the body ring and its writer (see store/bodyring.h). */
#include "store/bodyring.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <isa-l/crc.h>
#include <zlib.h>

#include "base/bytes.h"
#include "store/enc.h"
#include "store/util.h"

struct RingReq {
    struct RingReq *next;
    StoreRingDone d;
};

/* How long a cover waits for the write-behind window to write what it
 * needs before it asks for a drain (microseconds): a drain of the whole
 * window stalls the small records' commit behind it. */
#define RING_DRAIN_WAIT_US 1500000

/* Bodies one trip of the writer writes before its sync, at most. */
#define TRIP_BYTES ((size_t)16 << 20)

/* Write-back window (bytes): the writer starts the write-back of each
 * entry, RING_WB_PIECE bytes at a time, as soon as it is written, and
 * waits for what lies more than RING_WB_WINDOW bytes behind, so that at
 * most about that much of the ring is queued at the device ahead of a
 * commit journal's write and sync: the device serves them in turn. With a
 * trip's whole 2 MiB queued by its fdatasync, the journal's fdatasync
 * beside 8 producers of 256 KiB bodies took over 2 ms in 1 of 15 groups
 * (up to 22 ms) and the small put's p99 was 4-5 ms (issue 30). */
#define RING_WB_WINDOW ((uint64_t)256 << 10)
#define RING_WB_PIECE ((uint64_t)128 << 10)

static size_t
entry_bytes(size_t len)
{
    return (RING_HDR + len + RING_ALIGN - 1) / RING_ALIGN * RING_ALIGN;
}

static int
file_path(const BodyRing *r, int i, char *buf, size_t cap, char *err,
          size_t errcap)
{
    int n = snprintf(buf, cap, "%s/ring-%d", r->dir, i);

    if (n < 0 || (size_t)n >= cap)
        return util_fail(err, errcap, "path too long: %s", r->dir);
    return 0;
}

/* ---- held files (store/bodyheld.h) ---- */

/* <dir>/<kind>-<gen> into buf: 0, or -1 if it does not fit in cap. */
static int
gen_path(const BodyRing *r, const char *kind, uint64_t gen, char *buf,
         size_t cap)
{
    int n = snprintf(buf, cap, "%s/%s-%" PRIu64, r->dir, kind, gen);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

/* Whether directory entry name is exactly the name gen_path gives kind
 * and some generation (no leading zero, no sign, nothing after): then the
 * generation into *gen, the path into buf[0..cap), and 1; else 0. */
static int
gen_name(const BodyRing *r, const char *name, const char *kind, uint64_t *gen,
         char *buf, size_t cap)
{
    size_t k = strlen(kind);
    unsigned long long g;
    char tail;

    if (strncmp(name, kind, k) != 0 || name[k] != '-' ||
        sscanf(name + k + 1, "%llu%c", &g, &tail) != 1 || !g ||
        gen_path(r, kind, g, buf, cap) < 0 ||
        strcmp(strrchr(buf, '/') + 1, name) != 0)
        return 0;
    *gen = g;
    return 1;
}

int
bodyring_held_path(const BodyRing *r, uint64_t gen, char *buf, size_t cap)
{
    return gen_path(r, "held", gen, buf, cap);
}

int
bodyring_dead_path(const BodyRing *r, uint64_t gen, char *buf, size_t cap)
{
    return gen_path(r, "dead", gen, buf, cap);
}

int
bodyring_spare_path(const BodyRing *r, uint64_t gen, char *buf, size_t cap)
{
    return gen_path(r, "spare", gen, buf, cap);
}

long
bodyring_held_index(const BodyRing *r, uint64_t gen)
{
    size_t lo = 0, hi = r->nheld;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->held[mid].gen < gen)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < r->nheld && r->held[lo].gen == gen ? (long)lo : -1;
}

void
bodyring_held_add(BodyRing *r, HeldFile h)
{
    size_t at = r->nheld;

    if (r->nheld == r->heldcap) {
        r->heldcap = r->heldcap ? 2 * r->heldcap : 8;
        r->held = util_xrealloc(r->held, r->heldcap * sizeof *r->held);
    }
    while (at > 0 && r->held[at - 1].gen > h.gen) {
        r->held[at] = r->held[at - 1];
        at--;
    }
    r->held[at] = h;
    r->nheld++;
    atomic_fetch_add(&r->st_held_files, 1);
    atomic_fetch_add(&r->st_held_bytes, h.size);
}

/* The file that holds generation gen: its fd and size (bytes). flk held
 * (either way) or the writer thread. Returns 1, or 0 if none does. */
static int
held_find(const BodyRing *r, uint64_t gen, int *fd, uint64_t *size)
{
    int i = (int)(gen % STORE_RING_FILES);

    if (gen && r->fd[i] >= 0 && r->slot_gen[i] == gen) {
        *fd = r->fd[i];
        *size = r->fsize[i];
        return 1;
    }
    long k = bodyring_held_index(r, gen);
    if (k < 0) return 0;
    *fd = r->held[k].fd;
    *size = r->held[k].size;
    return 1;
}

/* Queues the file at path, at its size now, for the reaper. */
static void
reap_file(BodyRing *r, const char *path)
{
    struct stat st;

    bodyreap_add(&r->reap, path,
                 stat(path, &st) == 0 ? (uint64_t)st.st_size : 0);
}

/* If name is a dead held file's (dead-<gen>: a run stopped or crashed
 * before its reaper deleted it), queues it for the reaper and returns 1;
 * else 0. Main thread, from held_open. */
static int
dead_found(BodyRing *r, const char *name)
{
    uint64_t g;
    char path[4096];

    if (!gen_name(r, name, "dead", &g, path, sizeof path)) return 0;
    reap_file(r, path);
    if (g > r->top_gen) r->top_gen = g; /* no generation is given twice */
    return 1;
}

/* If name is a spare file's (spare-<gen>, left by an earlier run), keeps
 * it as one (past RING_SPARE_MAX, queues it for the reaper) and returns 1;
 * else 0. Main thread, from held_open. */
static int
spare_found(BodyRing *r, const char *name)
{
    uint64_t g;
    char path[4096];

    if (!gen_name(r, name, "spare", &g, path, sizeof path)) return 0;
    if (r->nspare < RING_SPARE_MAX) {
        r->spare[r->nspare++] = g;
        atomic_fetch_add(&r->st_spare_files, 1);
    } else {
        reap_file(r, path);
    }
    if (g > r->top_gen) r->top_gen = g;
    return 1;
}

/* Opens every held-<gen> file of r->dir, keeps the spare-<gen> ones and
 * queues every dead-<gen> one for the reaper (main thread, from
 * bodyring_open). Returns 0, or -1 with
 * a message in err. */
static int
held_open(BodyRing *r, char *err, size_t errcap)
{
    DIR *d = opendir(r->dir);
    struct dirent *e;
    char path[4096];
    int rc = 0;

    if (!d && errno == ENOENT) return 0;
    if (!d)
        return util_fail(err, errcap, "opendir %s: %s", r->dir,
                         strerror(errno));
    while (rc == 0 && (e = readdir(d)) != NULL) {
        uint64_t g;
        struct stat st;
        if (dead_found(r, e->d_name) || spare_found(r, e->d_name)) continue;
        if (!gen_name(r, e->d_name, "held", &g, path, sizeof path))
            continue; /* not a name this server gives */
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0) {
            rc = util_fail(err, errcap, "open %s: %s", path, strerror(errno));
            if (fd >= 0) close(fd);
            break;
        }
        bodyring_held_add(
            r, (HeldFile){.gen = g, .size = (uint64_t)st.st_size, .fd = fd});
        if (g > r->top_gen) r->top_gen = g;
    }
    closedir(d);
    return rc;
}

/* Closes and forgets the held files (the files stay). */
static void
held_close(BodyRing *r)
{
    for (size_t k = 0; k < r->nheld; k++)
        if (r->held[k].fd >= 0) close(r->held[k].fd);
    free(r->held);
    r->held = NULL;
    r->nheld = r->heldcap = 0;
}

/* ---- entries ---- */

/* Reads exactly n bytes at off: 0, 1 at a short read, -1 on error. */
static int
read_at(int fd, void *buf, size_t n, uint64_t off)
{
    size_t got = 0;

    while (got < n) {
        ssize_t k = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return -1;
        if (k == 0) return 1;
        got += (size_t)k;
    }
    return 0;
}

/* The generation of file i's first entry (0: none readable). */
static uint64_t
first_gen(const BodyRing *r, int i)
{
    unsigned char h[RING_HDR];

    if (r->fd[i] < 0 || read_at(r->fd[i], h, RING_HDR, 0) != 0 ||
        le_get32(h) != RING_MAGIC ||
        le_get32(h + 20) != (uint32_t)crc32(0L, h, 20))
        return 0;
    return le_get64(h + 8);
}

int
bodyring_open(BodyRing *r, const char *datadir, uint64_t size, uint32_t min,
              const StoreIO *io, char *err, size_t errcap)
{
    char path[4096];
    struct stat st;

    *r = (BodyRing){.io = io, .size = size, .min = min, .next_ticket = 1};
    r->qtail = &r->q;
    r->dtail = &r->done;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    pthread_rwlock_init(&r->flk, NULL);
    bodyreap_init(&r->reap);
    for (int i = 0; i < STORE_RING_FILES; i++)
        r->fd[i] = -1;
    if (asprintf(&r->dir, "%s/bodies", datadir) < 0) {
        r->dir = NULL;
        return util_fail(err, errcap, "out of memory");
    }
    for (int i = 0; i < STORE_RING_FILES; i++) {
        if (file_path(r, i, path, sizeof path, err, errcap) < 0) return -1;
        r->fd[i] = open(path, O_RDWR | O_CLOEXEC);
        if (r->fd[i] < 0 && errno == ENOENT) continue;
        if (r->fd[i] < 0 || fstat(r->fd[i], &st) < 0)
            return util_fail(err, errcap, "open %s: %s", path, strerror(errno));
        r->fsize[i] = (uint64_t)st.st_size;
        r->slot_gen[i] = first_gen(r, i);
    }
    return held_open(r, err, errcap);
}

/* ---- entries ---- */

/* The CRC-32 of a body, zlib's value (crc32(0, p, len)) by Intel ISA-L's
 * crc32_gzip_refl (isa-l/crc.h: the reflected gzip CRC-32; init 0), which
 * folds with carry-less multiplication: 256 KiB in ~6 us here against
 * zlib's ~75 us, and a large body is summed twice (written, read back). */
static uint32_t
body_crc(const void *p, size_t len)
{
    return crc32_gzip_refl(0, (const unsigned char *)p, (uint64_t)len);
}

static void
hdr_put(unsigned char *h, uint32_t len, uint64_t gen, uint32_t crc)
{
    le_put32(h, RING_MAGIC);
    le_put32(h + 4, len);
    le_put64(h + 8, gen);
    le_put32(h + 16, crc);
    le_put32(h + 20, (uint32_t)crc32(0L, h, 20));
}

int
bodyring_read(BodyRing *r, const StoreRingRef *ref, void *buf, char *err,
              size_t errcap)
{
    unsigned char h[RING_HDR];
    uint64_t fsize = 0;
    int fd = -1, rc = 1;

    pthread_rwlock_rdlock(&r->flk);
    if (held_find(r, ref->gen, &fd, &fsize) && ref->off % RING_ALIGN == 0 &&
        ref->off <= fsize &&
        fsize - ref->off >= RING_HDR + (uint64_t)ref->len &&
        (rc = read_at(fd, h, RING_HDR, ref->off)) == 0 && buf)
        rc = read_at(fd, buf, ref->len, ref->off + RING_HDR);
    pthread_rwlock_unlock(&r->flk);
    if (rc < 0)
        return util_fail(err, errcap, "body ring read: %s", strerror(errno));
    if (rc > 0 || le_get32(h) != RING_MAGIC || le_get32(h + 4) != ref->len ||
        le_get64(h + 8) != ref->gen || le_get32(h + 16) != ref->crc ||
        le_get32(h + 20) != (uint32_t)crc32(0L, h, 20))
        return 1;
    return !buf || body_crc(buf, ref->len) == ref->crc ? 0 : 1;
}

/* ---- reset ---- */

/* No ring this run: removes the files an earlier run left (replayed
 * already; its dead held files too) and the directory. */
static int
remove_files(BodyRing *r, char *err, size_t errcap)
{
    char path[4096];

    bodyreap_stop(&r->reap);
    for (int i = 0; i < STORE_RING_FILES; i++) {
        if (file_path(r, i, path, sizeof path, err, errcap) < 0) return -1;
        if (r->fd[i] >= 0) close(r->fd[i]);
        r->fd[i] = -1;
        if (unlink(path) < 0 && errno != ENOENT)
            return util_fail(err, errcap, "unlink %s: %s", path,
                             strerror(errno));
    }
    if (rmdir(r->dir) < 0 && errno != ENOENT)
        return util_fail(err, errcap, "rmdir %s: %s", r->dir, strerror(errno));
    return 0;
}

int
bodyring_reset(BodyRing *r, char *err, size_t errcap)
{
    char path[4096];
    int made = 0;

    for (int i = 0; i < STORE_RING_FILES; i++) {
        uint64_t g = first_gen(r, i);
        if (g > r->top_gen) r->top_gen = g;
    }
    if (!r->min) return remove_files(r, err, errcap);
    if (mkdir(r->dir, 0755) < 0 && errno != EEXIST)
        return util_fail(err, errcap, "mkdir %s: %s", r->dir, strerror(errno));
    for (int i = 0; i < STORE_RING_FILES; i++) {
        if (file_path(r, i, path, sizeof path, err, errcap) < 0) return -1;
        if (r->fd[i] < 0) {
            r->fd[i] = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
            made = 1;
        }
        if (r->fd[i] < 0 ||
            (r->fsize[i] != r->size && ftruncate(r->fd[i], (off_t)r->size)))
            return util_fail(err, errcap, "size %s: %s", path, strerror(errno));
        r->fsize[i] = r->size;
    }
    if (made && util_sync_dir(r->dir, err, errcap) < 0) return -1;
    /* the first generation of this run goes to file 0 (any file would do) */
    r->gen = (r->top_gen / STORE_RING_FILES + 1) * STORE_RING_FILES;
    r->start_gen = r->gen;
    r->off = 0;
    pthread_rwlock_wrlock(&r->flk); /* bodyring_restore freed every file */
    for (int i = 0; i < STORE_RING_FILES; i++)
        r->slot_gen[i] = 0;
    r->slot_gen[r->gen % STORE_RING_FILES] = r->gen;
    pthread_rwlock_unlock(&r->flk);
    return 0;
}

/* ---- the writer thread ---- */

static int
stopping(BodyRing *r)
{
    pthread_mutex_lock(&r->mu);
    int stop = r->stop;
    pthread_mutex_unlock(&r->mu);
    return stop || ack_is_failed(r->ack);
}

/* The writer's samples of the loop's (res_pos, res_seq), one per trip,
 * oldest first: a cover uses the oldest that resolves what it needs, whose
 * sequence the write-behind window has most likely written already. */
static void
sample(BodyRing *r)
{
    pthread_mutex_lock(&r->mu);
    uint64_t pos = r->res_pos, seq = r->res_seq;
    pthread_mutex_unlock(&r->mu);
    if (r->nsamples && r->samples[r->nsamples - 1][0] == pos) return;
    if (r->nsamples == RING_SAMPLES) {
        memmove(r->samples[0], r->samples[1],
                (RING_SAMPLES - 1) * sizeof r->samples[0]);
        r->nsamples--;
    }
    r->samples[r->nsamples][0] = pos;
    r->samples[r->nsamples++][1] = seq;
}

/* The oldest sample whose position reaches need (1), or 0. */
static int
sample_for(BodyRing *r, uint64_t need, uint64_t *pos, uint64_t *seq)
{
    for (int i = 0; i < r->nsamples; i++) {
        if (r->samples[i][0] >= need) {
            *pos = r->samples[i][0];
            *seq = r->samples[i][1];
            return 1;
        }
    }
    return 0;
}

/* Makes ring file i, every entry of which lies below linear position
 * need, ready for a new generation (the reuse rule, store/bodyring.h):
 * waits until the loop has resolved those entries, then until the
 * mutation thread has applied the sequence it named (the write-behind
 * window writes it within PEND_WINDOW_NS, store/pend.h; after
 * RING_DRAIN_WAIT_US the writer asks for a drain instead), then lets
 * cover_hook (store/bodyheld.h) count the references, sync the WALs and
 * keep the generation the file holds if a job still refers to it.
 * Returns 0, or -1 if the store stops or failed first. */
static int
cover(BodyRing *r, uint64_t need, int i)
{
    uint64_t pos, seq;

    if (r->covered < need) {
        atomic_fetch_add_explicit(&r->st_waits, 1, memory_order_relaxed);
        while (!sample_for(r, need, &pos, &seq)) {
            if (stopping(r)) return -1;
            usleep(200); /* the loop takes what was written at its next turn */
            sample(r);
        }
        for (int us = 0; atomic_load(&r->ack->applied_seq) < seq; us += 100) {
            if (stopping(r)) return -1;
            if (us >= RING_DRAIN_WAIT_US) {
                atomic_store(&r->ack->drain_asked, 1);
                handoff_kick(r->ho);
            }
            usleep(100);
        }
        r->covered = pos;
    }
    if (r->cover_hook(r, i) < 0) return -1;
    atomic_fetch_add_explicit(&r->st_flushes, 1, memory_order_relaxed);
    return 0;
}

/* Syncs file i; on failure the store fails. */
static int
sync_file(BodyRing *r, int i)
{
    char *msg = NULL;

    if (r->io->jsync(r->io->ctx, r->fd[i], &msg) == 0) return 0;
    ack_fail(r->ack, "body ring", -1, msg);
    return -1;
}

/* Starts the device's write-back of the entry just written at [at, r->off)
 * of file i and waits for the part more than RING_WB_WINDOW behind it
 * (sync_file_range(2) only says when pages go: the trip's sync still makes
 * them durable, so a failure here is ignored). */
static void
wb_kick(BodyRing *r, int i, uint64_t at)
{
    while (at < r->off) {
        uint64_t k = r->off - at < RING_WB_PIECE ? r->off - at : RING_WB_PIECE;
        (void)sync_file_range(r->fd[i], (off_t)at, (off_t)k,
                              SYNC_FILE_RANGE_WRITE);
        at += k;
        if (at - r->wb_done <= RING_WB_WINDOW) continue;
        uint64_t upto = at - RING_WB_WINDOW;
        (void)sync_file_range(
            r->fd[i], (off_t)r->wb_done, (off_t)(upto - r->wb_done),
            SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                SYNC_FILE_RANGE_WAIT_AFTER);
        r->wb_done = upto;
    }
}

/* Starts the next generation's file, once what it holds may go. */
static int
roll(BodyRing *r)
{
    r->gen++;
    r->off = 0;
    r->wb_done = 0;
    int i = (int)(r->gen % STORE_RING_FILES);
    if (r->gen >= r->start_gen + STORE_RING_FILES && cover(r, r->end_pos[i], i))
        return -1;
    r->end_pos[i] = 0;
    pthread_rwlock_wrlock(&r->flk);
    r->slot_gen[i] = r->gen;
    pthread_rwlock_unlock(&r->flk);
    return 0;
}

/* Writes one body as an entry at the current place (rolling first if it
 * does not fit); *dirty: the file written (sync pending), or -1. */
static int
write_one(BodyRing *r, StoreRingDone *d, int *dirty)
{
    size_t need = entry_bytes(d->len);
    unsigned char h[RING_HDR];
    char *msg = NULL;

    if (r->off + need > r->size) {
        if (*dirty >= 0 && sync_file(r, *dirty) < 0) return -1;
        *dirty = -1;
        if (roll(r) < 0) return -1;
    }
    int i = (int)(r->gen % STORE_RING_FILES);
    uint32_t crc = body_crc(d->body, d->len);
    hdr_put(h, (uint32_t)d->len, r->gen, crc);
    struct iovec iov[2] = {{h, RING_HDR}, {d->body, d->len}};
    if (r->io->jwrite(r->io->ctx, r->fd[i], iov, 2, r->off, &msg) < 0) {
        ack_fail(r->ack, "body ring", -1, msg);
        return -1;
    }
    d->ref = (StoreRingRef){
        .gen = r->gen, .off = r->off, .len = (uint32_t)d->len, .crc = crc};
    r->off += need;
    wb_kick(r, i, d->ref.off);
    r->end_pos[i] = r->gen * r->size + r->off;
    *dirty = i;
    atomic_fetch_add_explicit(&r->st_bodies, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->st_bytes, d->len, memory_order_relaxed);
    return 0;
}

/* Writes the bodies of list (as many as fit in TRIP_BYTES and in the
 * current file, after a roll for the first one if need be; the rest is
 * returned in *rest), syncs, and marks each ok or not. */
static void
write_trip(BodyRing *r, RingReq *list, RingReq **rest)
{
    int dirty = -1, rc = ack_is_failed(r->ack) ? -1 : 0;
    size_t bytes = 0;
    RingReq *x = list, *last = NULL;

    for (; x && (bytes < TRIP_BYTES || x == list); last = x, x = x->next) {
        /* a trip never rolls after its first body: the roll may wait for
         * the loop to take bodies, this trip's among them */
        if (x != list && r->off + entry_bytes(x->d.len) > r->size) break;
        if (rc == 0) rc = write_one(r, &x->d, &dirty);
        bytes += x->d.len;
        x->d.ok = rc == 0;
    }
    *rest = x;
    if (last) last->next = NULL;
    if (rc == 0 && dirty >= 0 && sync_file(r, dirty) < 0) rc = -1;
    if (rc == 0 && dirty >= 0) r->wb_done = r->off;
    if (rc < 0)
        for (RingReq *y = list; y; y = y->next)
            y->d.ok = 0;
}

static void *
ring_main(void *arg)
{
    BodyRing *r = arg;
    RingReq *list = NULL, *rest;

    for (;;) {
        pthread_mutex_lock(&r->mu);
        while (!list && !r->q && !r->stop)
            pthread_cond_wait(&r->cv, &r->mu);
        if (!list) {
            list = r->q;
            r->q = NULL;
            r->qtail = &r->q;
        }
        pthread_mutex_unlock(&r->mu);
        if (!list) break; /* stopping, nothing queued */
        write_trip(r, list, &rest);
        sample(r);
        pthread_mutex_lock(&r->mu);
        int was_empty = !r->done;
        *r->dtail = list;
        while (*r->dtail)
            r->dtail = &(*r->dtail)->next;
        atomic_store(&r->has_done, 1);
        pthread_mutex_unlock(&r->mu);
        if (was_empty && r->notify) r->notify(r->notify_arg);
        list = rest;
    }
    return NULL;
}

int
bodyring_start(BodyRing *r, StoreShard *shard, int nshards, StoreAck *ack,
               Handoff *ho, void (*notify)(void *), void *arg, char *err,
               size_t errcap)
{
    r->shard = shard;
    r->nshards = nshards;
    r->ack = ack;
    r->ho = ho;
    r->notify = notify;
    r->notify_arg = arg;
    if (!r->min) return 0;
    if (!r->cover_hook) return util_fail(err, errcap, "body ring: no cover");
    if (bodyreap_start(&r->reap, err, errcap) < 0) return -1;
    int e = pthread_create(&r->thread, NULL, ring_main, r);
    if (e) return util_fail(err, errcap, "pthread_create: %s", strerror(e));
    pthread_setname_np(r->thread, "rs-bodyring");
    r->started = 1;
    return 0;
}

/* ---- loop side ---- */

uint64_t
bodyring_submit(BodyRing *r, char *body, size_t len)
{
    if (!r->started || len < r->min || entry_bytes(len) > r->size ||
        len > UINT32_MAX)
        return 0;
    RingReq *x = util_xrealloc(NULL, sizeof *x);
    *x = (RingReq){.d = {.ticket = r->next_ticket++, .body = body, .len = len}};
    pthread_mutex_lock(&r->mu);
    if (r->stop) {
        pthread_mutex_unlock(&r->mu);
        free(x);
        return 0;
    }
    *r->qtail = x;
    r->qtail = &x->next;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    return x->d.ticket;
}

size_t
bodyring_take(BodyRing *r, StoreRingDone **out)
{
    RingReq *list, *next;
    size_t n = 0;

    if (!atomic_load_explicit(&r->has_done, memory_order_acquire)) return 0;
    pthread_mutex_lock(&r->mu);
    list = r->done;
    r->done = NULL;
    r->dtail = &r->done;
    atomic_store(&r->has_done, 0);
    pthread_mutex_unlock(&r->mu);
    for (; list; list = next, n++) {
        next = list->next;
        if (n == r->out_cap) {
            r->out_cap = r->out_cap ? 2 * r->out_cap : 16;
            r->out = util_xrealloc(r->out, r->out_cap * sizeof *r->out);
        }
        r->out[n] = list->d;
        if (list->d.ok) {
            uint64_t end = list->d.ref.gen * r->size + list->d.ref.off +
                           entry_bytes(list->d.len);
            if (end > r->taken_pos) r->taken_pos = end;
        }
        free(list);
    }
    r->out_len = n;
    *out = r->out;
    return n;
}

void
bodyring_resolved(BodyRing *r, uint64_t seq)
{
    pthread_mutex_lock(&r->mu);
    r->res_pos = r->taken_pos;
    r->res_seq = seq;
    pthread_mutex_unlock(&r->mu);
}

/* ---- stop, close ---- */

void
bodyring_stop(BodyRing *r)
{
    if (r->started) {
        pthread_mutex_lock(&r->mu);
        r->stop = 1;
        pthread_cond_signal(&r->cv);
        pthread_mutex_unlock(&r->mu);
        pthread_join(r->thread, NULL);
        r->started = 0;
    }
    bodyreap_stop(&r->reap); /* after the writer: its covers queue files */
}

static void
free_list(RingReq *x)
{
    for (RingReq *next; x; x = next) {
        next = x->next;
        free(x->d.body);
        free(x);
    }
}

void
bodyring_close(BodyRing *r)
{
    if (!r->qtail) return; /* never opened */
    bodyring_stop(r);
    free_list(r->q);
    free_list(r->done);
    r->q = r->done = NULL;
    free(r->out);
    r->out = NULL;
    for (int i = 0; i < STORE_RING_FILES; i++) {
        if (r->fd[i] >= 0) close(r->fd[i]);
        r->fd[i] = -1;
    }
    held_close(r);
    bodyreap_free(&r->reap);
    free(r->dir);
    r->dir = NULL;
    pthread_rwlock_destroy(&r->flk);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    r->qtail = NULL;
}
