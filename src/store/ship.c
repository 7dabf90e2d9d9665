/* store/ship.c - the snapshot stream of cluster mode (see store/ship.h). */
#include "store/ship.h"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rocksdb/c.h>
#include <zlib.h>

#include "store/enc.h"
#include "store/util.h"

const char SHIP_KEY_END[SHIP_KEY_END_LEN] = {
    '\xff', '\xff', '\xff', '\xff', '\xff', '\xff', '\xff', '\xff',
    '\xff', '\xff', '\xff', '\xff', '\xff', '\xff', '\xff', '\xff'};

/* Bytes of a frame's header (u8 cf, u32 klen, u32 vlen), of the stream
 * header and of an end frame. */
#define FRAME_HDR 9
#define STREAM_HDR (SHIP_MAGIC_LEN + 8)
#define END_FRAME 13

/* Scan readahead of the sender (ReadOptions.readahead_size), as the
 * recovery scan (store/recover.c). */
#define SHIP_READAHEAD ((size_t)2 << 20)

/* The default CF's keys a receiver keeps through a restore, in key order
 * (its own identity and the restore mark); everything else goes. */
static const char *const kept_keys[] = {"format", "restoring", "shard"};
#define NKEPT (sizeof kept_keys / sizeof kept_keys[0])

/* 1 if the key sorts below SHIP_KEY_END, so that a later restore's range
 * deletes cover it. */
static int
key_below_end(const char *k, size_t klen)
{
    size_t n = klen < SHIP_KEY_END_LEN ? klen : SHIP_KEY_END_LEN;
    int c = memcmp(k, SHIP_KEY_END, n);

    return c < 0 || (c == 0 && klen < SHIP_KEY_END_LEN);
}

static int
key_is(const char *k, size_t klen, const char *name)
{
    return klen == strlen(name) && memcmp(k, name, klen) == 0;
}

/* ---- sender ---- */

/* The sender's state: one fixed buffer, the current shard's frame count and
 * CRC. */
typedef struct ShipOut {
    int fd;
    StoreWriteFn write; /* NULL: send to fd */
    void *warg;
    ShipRingFn ring; /* NULL: no ring reader */
    void *rarg;
    unsigned char *buf; /* SHIP_IO_BUF bytes, owned */
    size_t len;         /* bytes waiting in buf */
    uint64_t frames;
    uLong crc;
    ShipTotals tot; /* the whole stream's */
    char *err;
    size_t errcap;
} ShipOut;

/* Sends buf[0..n) whole, through EINTR and short writes. */
static int
fd_send_all(int fd, const unsigned char *p, size_t n, char *err, size_t errcap)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return util_fail(err, errcap,
                             "send: the reader took nothing for the "
                             "socket's send timeout");
        if (w < 0) return util_fail(err, errcap, "send: %s", strerror(errno));
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int
out_flush(ShipOut *o)
{
    int rc = o->write ? o->write(o->warg, o->buf, o->len, o->err, o->errcap)
                      : fd_send_all(o->fd, o->buf, o->len, o->err, o->errcap);

    o->tot.bytes += o->len;
    o->len = 0;
    return rc;
}

/* Appends p[0..n) to the stream (in pieces when larger than the buffer);
 * framed bytes also go into the shard's CRC. */
static int
out_put(ShipOut *o, const void *p, size_t n, int framed)
{
    const unsigned char *s = p;

    // crc32_z(c, NULL, 0) is 0, not c: an empty value's pointer may be NULL
    if (framed && n > 0) o->crc = crc32_z(o->crc, s, n);
    while (n > 0) {
        if (o->len == SHIP_IO_BUF && out_flush(o) < 0) return -1;
        size_t take = SHIP_IO_BUF - o->len;
        if (take > n) take = n;
        memcpy(o->buf + o->len, s, take);
        o->len += take;
        s += take;
        n -= take;
    }
    return 0;
}

static int
out_frame(ShipOut *o, int cf, const char *k, size_t klen, const char *v,
          size_t vlen)
{
    unsigned char h[FRAME_HDR];

    if (klen > SHIP_KEY_MAX || !key_below_end(k, klen))
        return util_fail(o->err, o->errcap,
                         "a key of %zu bytes in column family %d is out of "
                         "bounds",
                         klen, cf);
    if (vlen > SHIP_VALUE_MAX)
        return util_fail(o->err, o->errcap, "a value of %zu bytes is over %zu",
                         vlen, SHIP_VALUE_MAX);
    h[0] = (unsigned char)cf;
    le_put32(h + 1, (uint32_t)klen);
    le_put32(h + 5, (uint32_t)vlen);
    o->frames++;
    if (out_put(o, h, sizeof h, 1) < 0 || out_put(o, k, klen, 1) < 0) return -1;
    return out_put(o, v, vlen, 1);
}

/* 1 if a meta record is a job's (not a STORE_GONE record's). */
static int
is_job(const char *k, size_t klen, const char *v, size_t vlen)
{
    StoreJob job;

    return klen == 8 &&
           store_meta_decode(enc_key_get(k), (const unsigned char *)v, vlen,
                             &job) == 0 &&
           job.state != STORE_GONE;
}

/* Sends every pair of one column family, through it (over the snapshot). */
static int
send_cf(ShipOut *o, const StoreShard *sh, int cf, rocksdb_iterator_t *it)
{
    size_t klen, vlen;
    char *e = NULL;

    for (rocksdb_iter_seek_to_first(it); rocksdb_iter_valid(it);
         rocksdb_iter_next(it)) {
        const char *k = rocksdb_iter_key(it, &klen);
        const char *v = rocksdb_iter_value(it, &vlen);
        if (cf == SHARD_CF_DEFAULT && key_is(k, klen, "restoring"))
            return util_fail(o->err, o->errcap,
                             "shard-%02d is being restored itself", sh->index);
        if (cf == SHARD_CF_META) o->tot.jobs += is_job(k, klen, v, vlen);
        if (out_frame(o, cf, k, klen, v, vlen) < 0) return -1;
    }
    rocksdb_iter_get_error(it, &e);
    if (!e) return 0;
    util_fail(o->err, o->errcap, "shard-%02d: scan: %s", sh->index, e);
    rocksdb_free(e);
    return -1;
}

/* Sends the body of every job of the ring CF (through it, over the
 * snapshot) as a body CF pair, read by o->ring. */
static int
send_ring_bodies(ShipOut *o, const StoreShard *sh, rocksdb_iterator_t *it)
{
    size_t klen, vlen, blen;
    char *e = NULL, *body = NULL;
    int rc = 0;

    for (rocksdb_iter_seek_to_first(it); rc == 0 && rocksdb_iter_valid(it);
         rocksdb_iter_next(it)) {
        const char *k = rocksdb_iter_key(it, &klen);
        const char *v = rocksdb_iter_value(it, &vlen);
        if (vlen != ENC_RING_REF)
            return util_fail(o->err, o->errcap,
                             "shard-%02d: a ring reference of %zu bytes",
                             sh->index, vlen);
        if (!o->ring)
            return util_fail(o->err, o->errcap,
                             "shard-%02d: a ring reference and no ring to "
                             "read it from",
                             sh->index);
        rc = o->ring(o->rarg, (const unsigned char *)v, &body, &blen, o->err,
                     o->errcap);
        if (rc == 0) rc = out_frame(o, SHARD_CF_BODY, k, klen, body, blen);
        free(body);
        body = NULL;
    }
    rocksdb_iter_get_error(it, &e);
    if (!e) return rc;
    util_fail(o->err, o->errcap, "shard-%02d: scan: %s", sh->index, e);
    rocksdb_free(e);
    return -1;
}

/* Sends one shard: its header, its frames (each column family through the
 * same snapshot), its end frame. */
static int
send_shard(ShipOut *o, const StoreShard *sh, const rocksdb_snapshot_t *given)
{
    unsigned char idx[4], end[END_FRAME];
    const rocksdb_snapshot_t *snap =
        given ? given : rocksdb_create_snapshot(sh->db);
    rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
    int rc;

    rocksdb_readoptions_set_snapshot(ro, snap);
    rocksdb_readoptions_set_fill_cache(ro, 0); /* one pass: do not evict */
    rocksdb_readoptions_set_readahead_size(ro, SHIP_READAHEAD);
    le_put32(idx, (uint32_t)sh->index);
    o->frames = 0;
    o->crc = crc32_z(0, NULL, 0);
    rc = out_put(o, idx, 4, 0);
    for (int cf = 0; rc == 0 && cf < SHARD_CF_SHIPPED; cf++) {
        rocksdb_iterator_t *it =
            rocksdb_create_iterator_cf(sh->db, ro, sh->cf[cf]);
        rc = send_cf(o, sh, cf, it);
        rocksdb_iter_destroy(it);
    }
    if (rc == 0) {
        rocksdb_iterator_t *it =
            rocksdb_create_iterator_cf(sh->db, ro, sh->cf[SHARD_CF_RING]);
        rc = send_ring_bodies(o, sh, it);
        rocksdb_iter_destroy(it);
    }
    rocksdb_readoptions_destroy(ro);
    if (!given) rocksdb_release_snapshot(sh->db, snap);
    if (rc < 0) return -1;
    o->tot.frames += o->frames;
    end[0] = SHIP_END_FRAME;
    le_put64(end + 1, o->frames);
    le_put32(end + 9, (uint32_t)o->crc);
    return out_put(o, end, sizeof end, 0);
}

/* Sends the stream through o (its buffer allocated here). */
static int
ship_out(StoreShard *shards, int nshards,
         const rocksdb_snapshot_t *const *snaps, ShipOut *o, ShipTotals *tot)
{
    unsigned char hdr[STREAM_HDR];
    int rc = 0;

    if ((o->buf = malloc(SHIP_IO_BUF)) == NULL)
        return util_fail(o->err, o->errcap,
                         "out of memory for the send buffer");
    memcpy(hdr, SHIP_MAGIC, SHIP_MAGIC_LEN);
    le_put32(hdr + SHIP_MAGIC_LEN, SHIP_VERSION);
    le_put32(hdr + SHIP_MAGIC_LEN + 4, (uint32_t)nshards);
    rc = out_put(o, hdr, sizeof hdr, 0);
    for (int i = 0; rc == 0 && i < nshards; i++)
        rc = send_shard(o, &shards[i], snaps ? snaps[i] : NULL);
    if (rc == 0) rc = out_flush(o);
    free(o->buf);
    *tot = o->tot;
    return rc;
}

int
ship_send(StoreShard *shards, int nshards, int fd, char *err, size_t errcap)
{
    ShipTotals tot;

    return ship_out(shards, nshards, NULL,
                    &(ShipOut){.fd = fd, .err = err, .errcap = errcap}, &tot);
}

int
ship_send_at(StoreShard *shards, int nshards,
             const rocksdb_snapshot_t *const *snaps, StoreWriteFn write,
             void *warg, ShipRingFn ring, void *rarg, ShipTotals *tot,
             char *err, size_t errcap)
{
    ShipOut o = {.fd = -1,
                 .write = write,
                 .warg = warg,
                 .ring = ring,
                 .rarg = rarg,
                 .err = err,
                 .errcap = errcap};

    return ship_out(shards, nshards, snaps, &o, tot);
}

/* ---- receiver ---- */

/* The receiver's state: a fixed read buffer, a frame buffer that grows to
 * the largest frame (at most SHIP_KEY_MAX + SHIP_VALUE_MAX), the current
 * shard's count, CRC, pending batch and received header values. */
typedef struct ShipIn {
    int fd;
    unsigned char *buf; /* SHIP_IO_BUF bytes, owned */
    size_t pos, len;    /* unread bytes: buf[pos..len) */
    char *frame;        /* owned */
    size_t frame_cap;
    uint64_t frames;
    uLong crc;
    rocksdb_writebatch_t *batch; /* owned */
    size_t batch_bytes;
    uint64_t next_id, jgroup, raft_applied;
    char *err;
    size_t errcap;
} ShipIn;

/* Reads exactly n bytes into p: from the buffer, refilled by read(2)
 * through EINTR; large reads go straight to p. End of stream is an error.
 * framed bytes also go into the shard's CRC. */
static int
in_read(ShipIn *in, void *p, size_t n, int framed)
{
    unsigned char *d = p;
    size_t want = n;

    while (want > 0) {
        if (in->pos == in->len) {
            int direct = want >= SHIP_IO_BUF;
            ssize_t r =
                read(in->fd, direct ? d : in->buf, direct ? want : SHIP_IO_BUF);
            if (r < 0 && errno == EINTR) continue;
            if (r < 0)
                return util_fail(in->err, in->errcap, "read: %s",
                                 strerror(errno));
            if (r == 0)
                return util_fail(in->err, in->errcap, "the stream ended early");
            if (direct) {
                d += r;
                want -= (size_t)r;
                continue;
            }
            in->pos = 0;
            in->len = (size_t)r;
        }
        size_t take = in->len - in->pos;
        if (take > want) take = want;
        memcpy(d, in->buf + in->pos, take);
        in->pos += take;
        d += take;
        want -= take;
    }
    if (framed && n > 0) in->crc = crc32_z(in->crc, p, n); /* see out_put */
    return 0;
}

/* Writes b to sh with the given write options; errors name what. */
static int
in_write(ShipIn *in, const StoreShard *sh, rocksdb_writebatch_t *b,
         const rocksdb_writeoptions_t *wo, const char *what)
{
    char *e = NULL;

    rocksdb_write(sh->db, wo, b, &e);
    if (!e) return 0;
    util_fail(in->err, in->errcap, "shard-%02d: %s: %s", sh->index, what, e);
    rocksdb_free(e);
    return -1;
}

/* Marks sh as being restored ("restoring", synced) before anything of it
 * is removed. */
static int
mark_restoring(ShipIn *in, StoreShard *sh)
{
    unsigned char v[8];
    rocksdb_writebatch_t *b = rocksdb_writebatch_create();

    le_put64(v, 1);
    rocksdb_writebatch_put_cf(b, sh->cf[SHARD_CF_DEFAULT], "restoring", 9,
                              (const char *)v, sizeof v);
    int rc = in_write(in, sh, b, sh->opt->wo_sync, "mark restoring");
    rocksdb_writebatch_destroy(b);
    if (rc == 0) sh->raft_applied = 0;
    if (rc == 0) sh->restoring = 1;
    return rc;
}

/* Adds to b the removal of every key of sh but kept_keys: whole ranges in
 * meta and body, the gaps between the kept keys in default. Each gap
 * starts at the key just after a kept one (its name and a NUL byte). */
static void
clear_shard(const StoreShard *sh, rocksdb_writebatch_t *b)
{
    char from[16];
    size_t flen = 0;

    for (int cf = SHARD_CF_META; cf < SHARD_CF_COUNT; cf++)
        rocksdb_writebatch_delete_range_cf(b, sh->cf[cf], "", 0, SHIP_KEY_END,
                                           SHIP_KEY_END_LEN);
    for (size_t i = 0; i <= NKEPT; i++) {
        const char *to = i < NKEPT ? kept_keys[i] : SHIP_KEY_END;
        size_t tlen = i < NKEPT ? strlen(to) : SHIP_KEY_END_LEN;
        rocksdb_writebatch_delete_range_cf(b, sh->cf[SHARD_CF_DEFAULT], from,
                                           flen, to, tlen);
        if (i < NKEPT) {
            flen = tlen + 1; /* kept names are under 15 bytes */
            memcpy(from, to, tlen);
            from[tlen] = '\0';
        }
    }
}

/* Writes the pending batch (unsynced) and starts an empty one. */
static int
in_flush_batch(ShipIn *in, const StoreShard *sh)
{
    int rc = in_write(in, sh, in->batch, sh->opt->wo_nosync, "write batch");

    rocksdb_writebatch_clear(in->batch);
    in->batch_bytes = 0;
    return rc;
}

/* Notes a received header value (u64 LE) that the shard's fields take at
 * the end. */
static int
in_header_value(ShipIn *in, const StoreShard *sh, const char *k, size_t klen,
                const char *v, size_t vlen)
{
    uint64_t *field = key_is(k, klen, "next_id")        ? &in->next_id
                      : key_is(k, klen, "jgroup")       ? &in->jgroup
                      : key_is(k, klen, "raft_applied") ? &in->raft_applied
                                                        : NULL;

    if (key_is(k, klen, "restoring"))
        return util_fail(in->err, in->errcap,
                         "shard-%02d: the sender was being restored itself",
                         sh->index);
    if (!field) return 0;
    if (vlen != 8)
        return util_fail(in->err, in->errcap,
                         "shard-%02d: %.*s has %zu bytes, want 8", sh->index,
                         (int)klen, k, vlen);
    *field = le_get64((const unsigned char *)v);
    return 0;
}

/* Reads one frame's key and value (after its header) and adds it to the
 * batch, writing the batch first when it would pass SHIP_BATCH_BYTES. */
static int
in_frame(ShipIn *in, const StoreShard *sh, int cf, size_t klen, size_t vlen)
{
    if (klen + vlen > in->frame_cap) {
        in->frame = util_xrealloc(in->frame, klen + vlen);
        in->frame_cap = klen + vlen;
    }
    if (in_read(in, in->frame, klen + vlen, 1) < 0) return -1;
    const char *k = in->frame, *v = in->frame + klen;
    if (!key_below_end(k, klen))
        return util_fail(in->err, in->errcap,
                         "shard-%02d: a key sorts above the shard's range",
                         sh->index);
    if (cf == SHARD_CF_DEFAULT) {
        if (key_is(k, klen, "format") || key_is(k, klen, "shard")) return 0;
        if (in_header_value(in, sh, k, klen, v, vlen) < 0) return -1;
    }
    if (in->batch_bytes > 0 &&
        in->batch_bytes + klen + vlen > SHIP_BATCH_BYTES &&
        in_flush_batch(in, sh) < 0)
        return -1;
    rocksdb_writebatch_put_cf(in->batch, sh->cf[cf], k, klen, v, vlen);
    in->batch_bytes += klen + vlen;
    return 0;
}

/* Reads the rest of an end frame (its 0xFF read) and checks its count and
 * CRC against what was received. */
static int
in_end_frame(ShipIn *in, const StoreShard *sh)
{
    unsigned char end[END_FRAME - 1];

    if (in_read(in, end, sizeof end, 0) < 0) return -1;
    uint64_t frames = le_get64(end);
    uint32_t crc = le_get32(end + 8);
    if (frames != in->frames || crc != (uint32_t)in->crc)
        return util_fail(in->err, in->errcap,
                         "shard-%02d: end frame says %" PRIu64
                         " frames, crc %08" PRIx32 "; received %" PRIu64
                         ", crc %08" PRIx32,
                         sh->index, frames, crc, in->frames, (uint32_t)in->crc);
    return 0;
}

/* Reads frames up to the end frame and checks it. */
static int
in_frames(ShipIn *in, const StoreShard *sh)
{
    unsigned char h[FRAME_HDR];

    for (;;) {
        if (in_read(in, h, 1, 0) < 0) return -1;
        if (h[0] == SHIP_END_FRAME) return in_end_frame(in, sh);
        if (h[0] >= SHARD_CF_SHIPPED)
            return util_fail(in->err, in->errcap,
                             "shard-%02d: frame of column family %u", sh->index,
                             h[0]);
        in->crc = crc32_z(in->crc, h, 1);
        if (in_read(in, h + 1, FRAME_HDR - 1, 1) < 0) return -1;
        uint32_t klen = le_get32(h + 1), vlen = le_get32(h + 5);
        if (klen > SHIP_KEY_MAX || vlen > SHIP_VALUE_MAX)
            return util_fail(in->err, in->errcap,
                             "shard-%02d: frame with a %" PRIu32
                             "-byte key and a %" PRIu32 "-byte value",
                             sh->index, klen, vlen);
        in->frames++;
        if (in_frame(in, sh, h[0], klen, vlen) < 0) return -1;
    }
}

/* Receives one shard into sh (see ship_recv). */
static int
recv_shard(ShipIn *in, StoreShard *sh)
{
    unsigned char idx[4];
    char *e = NULL;

    if (in_read(in, idx, 4, 0) < 0) return -1;
    if (le_get32(idx) != (uint32_t)sh->index)
        return util_fail(in->err, in->errcap,
                         "the stream's next shard is %" PRIu32 ", expected %d",
                         le_get32(idx), sh->index);
    if (mark_restoring(in, sh) < 0) return -1;
    in->frames = 0;
    in->crc = crc32_z(0, NULL, 0);
    in->next_id = in->jgroup = in->raft_applied = 0;
    rocksdb_writebatch_clear(in->batch);
    clear_shard(sh, in->batch); /* written with the first pairs */
    in->batch_bytes = 0;
    if (in_frames(in, sh) < 0) return -1;
    rocksdb_writebatch_delete_cf(in->batch, sh->cf[SHARD_CF_DEFAULT],
                                 "restoring", 9);
    if (in_flush_batch(in, sh) < 0) return -1;
    rocksdb_flush_wal(sh->db, 1, &e); /* DB::FlushWAL(sync=true) = SyncWAL */
    if (e) {
        util_fail(in->err, in->errcap, "shard-%02d: sync: %s", sh->index, e);
        rocksdb_free(e);
        return -1;
    }
    sh->restoring = 0;
    sh->hwm = in->next_id;
    sh->jgroup = in->jgroup;
    sh->raft_applied = in->raft_applied;
    return 0;
}

/* Reads and checks the stream header against nshards. */
static int
in_stream_header(ShipIn *in, int nshards)
{
    unsigned char hdr[STREAM_HDR];

    if (in_read(in, hdr, sizeof hdr, 0) < 0) return -1;
    if (memcmp(hdr, SHIP_MAGIC, SHIP_MAGIC_LEN) != 0)
        return util_fail(in->err, in->errcap, "not a snapshot stream");
    uint32_t v = le_get32(hdr + SHIP_MAGIC_LEN);
    uint32_t n = le_get32(hdr + SHIP_MAGIC_LEN + 4);
    if (v != SHIP_VERSION)
        return util_fail(in->err, in->errcap,
                         "snapshot stream version %" PRIu32 ", expected %d", v,
                         SHIP_VERSION);
    if (n != (uint32_t)nshards)
        return util_fail(in->err, in->errcap,
                         "the sender has %" PRIu32 " shards, this node %d", n,
                         nshards);
    return 0;
}

int
ship_recv(StoreShard *shards, int nshards, int fd, char *err, size_t errcap)
{
    ShipIn in = {.fd = fd, .err = err, .errcap = errcap};
    int rc;

    if ((in.buf = malloc(SHIP_IO_BUF)) == NULL)
        return util_fail(err, errcap, "out of memory for the receive buffer");
    in.frame_cap = 4096; /* grows to the largest frame; never NULL */
    in.frame = util_xrealloc(NULL, in.frame_cap);
    in.batch = rocksdb_writebatch_create();
    rc = in_stream_header(&in, nshards);
    for (int i = 0; rc == 0 && i < nshards; i++)
        rc = recv_shard(&in, &shards[i]);
    rocksdb_writebatch_destroy(in.batch);
    free(in.frame);
    free(in.buf);
    return rc;
}
