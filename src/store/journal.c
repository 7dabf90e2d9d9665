/* store/journal.c - the commit journal (see store/journal.h). */
#include "store/journal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "store/enc.h"
#include "store/util.h"

/* The payload is the loop's mutation records, whose headers are in native
 * byte order (store/enc.h); on disk they are documented little-endian. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "the journal's payload format assumes a little-endian host");

/* Zero-filling writes this many bytes at a time. */
#define ZERO_BLOCK ((size_t)1 << 20)

static char *
io_msg(const char *what, int e)
{
    char buf[160];

    snprintf(buf, sizeof buf, "IO error: %s: %s", what, strerror(e));
    char *m = strdup(buf);
    if (!m) abort();
    return m;
}

int
journal_io_write(void *ctx, int fd, const struct iovec *iov, int iovcnt,
                 uint64_t off, char **errmsg)
{
    struct iovec v[64];
    (void)ctx;

    while (iovcnt > 0) {
        int n = iovcnt < 64 ? iovcnt : 64;
        memcpy(v, iov, (size_t)n * sizeof *v);
        int i = 0;
        while (i < n) { /* pwritev may write less than asked */
            ssize_t w = pwritev(fd, v + i, n - i, (off_t)off);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) {
                *errmsg = io_msg("journal write", w < 0 ? errno : EIO);
                return -1;
            }
            off += (uint64_t)w;
            while (i < n && (size_t)w >= v[i].iov_len)
                w -= (ssize_t)v[i++].iov_len;
            if (i < n) {
                v[i].iov_base = (char *)v[i].iov_base + w;
                v[i].iov_len -= (size_t)w;
            }
        }
        iov += n;
        iovcnt -= n;
    }
    return 0;
}

int
journal_io_sync(void *ctx, int fd, char **errmsg)
{
    (void)ctx;
    if (fdatasync(fd) == 0) return 0;
    *errmsg = io_msg("journal fdatasync", errno);
    return -1;
}

/* ---- record headers ---- */

typedef struct JHdr {
    uint32_t len, nrec, crc;
    uint64_t gen, group;
    uint16_t flags; /* JOURNAL_F_* */
} JHdr;

static void
hdr_put(unsigned char *p, const JHdr *h)
{
    memset(p, 0, JOURNAL_HDR);
    le_put32(p, JOURNAL_MAGIC);
    p[4] = JOURNAL_VERSION & 0xff;
    p[5] = JOURNAL_VERSION >> 8;
    p[6] = (unsigned char)(h->flags & 0xff);
    le_put32(p + 8, h->len);
    le_put32(p + 12, h->nrec);
    le_put64(p + 16, h->gen);
    le_put64(p + 24, h->group);
    le_put32(p + 32, h->crc);
}

/* Decodes a header; returns 0, or -1 if magic, version or flags are wrong
 * (the crc is checked with the payload). */
static int
hdr_get(const unsigned char *p, JHdr *h)
{
    if (le_get32(p) != JOURNAL_MAGIC || p[4] != JOURNAL_VERSION || p[5] ||
        (p[6] & ~JOURNAL_F_RING) || p[7] || le_get32(p + 36))
        return -1;
    h->flags = p[6];
    h->len = le_get32(p + 8);
    h->nrec = le_get32(p + 12);
    h->gen = le_get64(p + 16);
    h->group = le_get64(p + 24);
    h->crc = le_get32(p + 32);
    return 0;
}

/* crc32 of the header with its crc field zero, then of the payload. */
static uint32_t
hdr_crc(const unsigned char *hdr)
{
    unsigned char h[JOURNAL_HDR];

    memcpy(h, hdr, JOURNAL_HDR);
    memset(h + 32, 0, 4);
    return (uint32_t)crc32(0L, h, JOURNAL_HDR);
}

/* Nonzero if p[0..len) is exactly nrec well-formed mutation records, as
 * the journal holds them (a put with a ring reference without its body,
 * only in a record with JOURNAL_F_RING in its flags). */
static int
payload_parses(const unsigned char *p, size_t len, uint32_t nrec,
               unsigned flags)
{
    size_t off = 0;
    uint32_t n = 0;
    EncRec r;

    while (off + ENC_REC_HDR <= len) {
        enc_rec_get(p + off, &r);
        size_t rl = enc_rec_jlen(&r);
        if (r.op < ENC_OP_PUT || r.op > ENC_OP_DELETE || rl > len - off)
            return 0;
        if (r.ref && (!(flags & JOURNAL_F_RING) || r.op != ENC_OP_PUT))
            return 0;
        if (r.op == ENC_OP_DELETE && (r.meta_len || r.body_len)) return 0;
        if (r.op != ENC_OP_DELETE && r.meta_len == 0) return 0;
        off += rl;
        n++;
    }
    return off == len && n == nrec;
}

/* ---- open, close ---- */

static int
file_path(const Journal *j, int i, char *buf, size_t cap, char *err,
          size_t errcap)
{
    int n = snprintf(buf, cap, "%s/journal-%d", j->dir, i);

    if (n < 0 || (size_t)n >= cap)
        return util_fail(err, errcap, "path too long: %s", j->dir);
    return 0;
}

int
journal_open(Journal *j, const char *datadir, uint64_t size, const StoreIO *io,
             char *err, size_t errcap)
{
    char path[4096];
    struct stat st;

    *j = (Journal){.io = io, .size = size};
    for (int i = 0; i < JOURNAL_FILES; i++)
        j->fd[i] = -1;
    if (asprintf(&j->dir, "%s/journal", datadir) < 0) {
        j->dir = NULL;
        return util_fail(err, errcap, "out of memory");
    }
    for (int i = 0; i < JOURNAL_FILES; i++) {
        if (file_path(j, i, path, sizeof path, err, errcap) < 0) return -1;
        j->fd[i] = open(path, O_RDWR | O_CLOEXEC);
        if (j->fd[i] < 0 && errno == ENOENT) continue;
        if (j->fd[i] < 0 || fstat(j->fd[i], &st) < 0)
            return util_fail(err, errcap, "open %s: %s", path, strerror(errno));
        j->fsize[i] = (uint64_t)st.st_size;
    }
    return 0;
}

void
journal_close(Journal *j)
{
    for (int i = 0; i < JOURNAL_FILES; i++) {
        if (j->fd[i] >= 0) close(j->fd[i]);
        j->fd[i] = -1;
    }
    free(j->dir);
    j->dir = NULL;
}

/* ---- replay ---- */

/* Reads exactly n bytes at off; returns 1, 0 at a short read (end of
 * file), -1 on error (message in err). */
static int
read_at(int fd, void *buf, size_t n, uint64_t off, char *err, size_t errcap)
{
    size_t got = 0;

    while (got < n) {
        ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0)
            return util_fail(err, errcap, "journal read: %s", strerror(errno));
        if (r == 0) return 0;
        got += (size_t)r;
    }
    return 1;
}

/* The generation of file i's first record header (0: none readable). */
static uint64_t
first_gen(Journal *j, int i)
{
    unsigned char h[JOURNAL_HDR];
    JHdr jh;
    char err[8];

    if (j->fd[i] < 0 || read_at(j->fd[i], h, sizeof h, 0, err, 0) != 1 ||
        hdr_get(h, &jh) < 0)
        return 0;
    return jh.gen;
}

/* Replays file i's valid records (store/journal.h) through fn. */
static int
replay_file(Journal *j, int i, JournalReplayFn fn, void *ctx,
            unsigned char **buf, size_t *cap, char *err, size_t errcap)
{
    unsigned char h[JOURNAL_HDR];
    uint64_t off = 0, gen = 0, group = 0;
    JHdr jh;
    int r;

    while (off + JOURNAL_HDR <= j->fsize[i]) {
        if ((r = read_at(j->fd[i], h, sizeof h, off, err, errcap)) <= 0)
            return r;
        if (hdr_get(h, &jh) < 0) break;
        if (jh.gen > j->top_gen) j->top_gen = jh.gen;
        if ((gen && jh.gen != gen) || jh.group <= group ||
            jh.len > j->fsize[i] - off - JOURNAL_HDR)
            break;
        if (jh.len > *cap) {
            *buf = util_xrealloc(*buf, jh.len);
            *cap = jh.len;
        }
        if ((r = read_at(j->fd[i], *buf, jh.len, off + JOURNAL_HDR, err,
                         errcap)) <= 0)
            return r;
        uint32_t crc = (uint32_t)crc32(hdr_crc(h), *buf, jh.len);
        if (crc != jh.crc || !payload_parses(*buf, jh.len, jh.nrec, jh.flags))
            break;
        if (j->unusable)
            return util_fail(err, errcap,
                             "group %llu's ring bodies do not verify, and "
                             "group %llu follows it",
                             (unsigned long long)j->unusable,
                             (unsigned long long)jh.group);
        if (!j->unusable && (r = fn(ctx, jh.group, *buf, jh.len, jh.nrec)) < 0)
            return util_fail(err, errcap,
                             "journal replay stopped at group %llu",
                             (unsigned long long)jh.group);
        if (r == 1) j->unusable = jh.group; /* the end, if nothing follows */
        gen = jh.gen;
        group = jh.group;
        if (group > j->top_group) j->top_group = group;
        off += JOURNAL_HDR + (uint64_t)jh.len;
    }
    return 0;
}

int
journal_replay(Journal *j, JournalReplayFn fn, void *ctx, char *err,
               size_t errcap)
{
    int order[JOURNAL_FILES];
    uint64_t gen[JOURNAL_FILES];
    unsigned char *buf = NULL;
    size_t cap = 0;
    int rc = 0;

    for (int i = 0; i < JOURNAL_FILES; i++) { /* insertion sort by gen */
        int k = i;
        gen[i] = first_gen(j, i);
        while (k > 0 && gen[order[k - 1]] > gen[i]) {
            order[k] = order[k - 1];
            k--;
        }
        order[k] = i;
    }
    for (int k = 0; k < JOURNAL_FILES && rc == 0; k++) {
        if (gen[order[k]])
            rc = replay_file(j, order[k], fn, ctx, &buf, &cap, err, errcap);
    }
    free(buf);
    return rc < 0 ? -1 : 0;
}

/* ---- reset ---- */

/* Creates file i zero-filled at j->size bytes: a temporary file written
 * and synced, then renamed over the old one (the directory synced by the
 * caller). */
static int
create_file(Journal *j, int i, const unsigned char *zero, char *err,
            size_t errcap)
{
    char path[4096], tmp[4200];

    if (file_path(j, i, path, sizeof path, err, errcap) < 0) return -1;
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return util_fail(err, errcap, "open %s: %s", tmp, strerror(errno));
    for (uint64_t off = 0; off < j->size; off += ZERO_BLOCK) {
        size_t n = j->size - off < ZERO_BLOCK ? j->size - off : ZERO_BLOCK;
        if (pwrite(fd, zero, n, (off_t)off) != (ssize_t)n) {
            int e = errno ? errno : ENOSPC;
            close(fd);
            return util_fail(err, errcap, "write %s: %s", tmp, strerror(e));
        }
    }
    if (fdatasync(fd) < 0 || rename(tmp, path) < 0) {
        int e = errno;
        close(fd);
        return util_fail(err, errcap, "create %s: %s", path, strerror(e));
    }
    if (j->fd[i] >= 0) close(j->fd[i]);
    j->fd[i] = fd;
    j->fsize[i] = j->size;
    return 0;
}

/* Removes every journal file and the directory (no journal kept). */
static int
remove_files(Journal *j, char *err, size_t errcap)
{
    char path[4096];

    for (int i = 0; i < JOURNAL_FILES; i++) {
        if (file_path(j, i, path, sizeof path, err, errcap) < 0) return -1;
        if (j->fd[i] >= 0) close(j->fd[i]);
        j->fd[i] = -1;
        if (unlink(path) < 0 && errno != ENOENT)
            return util_fail(err, errcap, "unlink %s: %s", path,
                             strerror(errno));
    }
    if (rmdir(j->dir) < 0 && errno != ENOENT)
        return util_fail(err, errcap, "rmdir %s: %s", j->dir, strerror(errno));
    return 0;
}

int
journal_reset(Journal *j, char *err, size_t errcap)
{
    unsigned char *zero = NULL;
    int rc = 0, made = 0;

    if (!j->size) return remove_files(j, err, errcap);
    if (mkdir(j->dir, 0755) < 0 && errno != EEXIST)
        return util_fail(err, errcap, "mkdir %s: %s", j->dir, strerror(errno));
    for (int i = 0; i < JOURNAL_FILES && rc == 0; i++) {
        if (j->fd[i] >= 0 && j->fsize[i] == j->size) continue;
        if (!zero && !(zero = calloc(1, ZERO_BLOCK)))
            return util_fail(err, errcap, "out of memory");
        rc = create_file(j, i, zero, err, errcap);
        made = 1;
    }
    free(zero);
    if (rc == 0 && made) rc = util_sync_dir(j->dir, err, errcap);
    j->cur = 0;
    j->off = 0;
    j->gen = j->top_gen + 1;
    return rc;
}

/* ---- appends (mutation thread) ---- */

int
journal_fits(const Journal *j, size_t len)
{
    return (uint64_t)len + JOURNAL_HDR <= j->size && len <= UINT32_MAX;
}

int
journal_full(const Journal *j, size_t len)
{
    return j->off + JOURNAL_HDR + (uint64_t)len > j->size;
}

void
journal_roll(Journal *j)
{
    j->cur = (j->cur + 1) % JOURNAL_FILES;
    j->off = 0;
    j->gen++;
}

int
journal_append(Journal *j, uint64_t group, uint32_t nrec, unsigned flags,
               struct iovec *iov, int iovcnt, size_t len, int sync,
               uint64_t *sync_ns, char **errmsg)
{
    unsigned char h[JOURNAL_HDR];
    JHdr jh = {.len = (uint32_t)len,
               .nrec = nrec,
               .gen = j->gen,
               .group = group,
               .flags = (uint16_t)flags};
    int fd = j->fd[j->cur];

    hdr_put(h, &jh);
    uint32_t crc = hdr_crc(h);
    for (int i = 1; i < iovcnt; i++)
        crc = (uint32_t)crc32(crc, iov[i].iov_base, (uInt)iov[i].iov_len);
    jh.crc = crc;
    hdr_put(h, &jh);
    iov[0] = (struct iovec){h, JOURNAL_HDR};
    if (j->io->jwrite(j->io->ctx, fd, iov, iovcnt, j->off, errmsg) < 0)
        return -1;
    *sync_ns = 0;
    if (sync) { /* -f 0; under -f MS the interval syncs (store/sync.h) */
        int64_t t0 = util_now_ns();
        int rc = j->io->jsync(j->io->ctx, fd, errmsg);
        *sync_ns = (uint64_t)(util_now_ns() - t0);
        if (rc < 0) return -1;
    }
    j->off += JOURNAL_HDR + (uint64_t)len;
    return 0;
}
