/* test_ship.c - unit tests of the snapshot stream (src/store/ship.c): a
 * source's shards are shipped over a socketpair into a destination's, whose
 * own keys must go; streams cut short, corrupted or malformed must fail and
 * leave the shard being received marked "restoring". Each test works in a
 * fresh mkdtemp directory (src/ and dst/, 2 shards each) that it removes.
 *
 * A stream is captured whole from ship_send (a thread writes, the test
 * reads), then delivered, as it is or altered, to ship_recv by another
 * thread; the test holds at most a few MiB of stream. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rocksdb/c.h>

#include "store/enc.h"
#include "store/ship.h"

#define NSHARDS 2
#define NJOBS 3000

typedef struct Fixture {
    char dir[64], src_dir[80], dst_dir[80];
    ShardOpts opt;
    StoreShard src[NSHARDS], dst[NSHARDS];
} Fixture;

/* A captured stream. */
typedef struct Stream {
    unsigned char *data;
    size_t len;
} Stream;

/* ---- fixture ---- */

static void
open_shards(Fixture *f, StoreShard *sh, const char *dir)
{
    char err[256] = "";

    for (int i = 0; i < NSHARDS; i++) {
        memset(&sh[i], 0, sizeof sh[i]);
        if (shard_open(&sh[i], &f->opt, dir, i, NSHARDS, err, sizeof err) < 0)
            fail_msg("shard_open %s %d: %s", dir, i, err);
    }
}

static int
setup(void **state)
{
    Fixture *f = calloc(1, sizeof *f);

    assert_non_null(f);
    strcpy(f->dir, "/tmp/test_ship.XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->src_dir, sizeof f->src_dir, "%s/src", f->dir);
    snprintf(f->dst_dir, sizeof f->dst_dir, "%s/dst", f->dir);
    assert_int_equal(mkdir(f->src_dir, 0700), 0);
    assert_int_equal(mkdir(f->dst_dir, 0700), 0);
    shard_opts_create(&f->opt, 0);
    open_shards(f, f->src, f->src_dir);
    open_shards(f, f->dst, f->dst_dir);
    *state = f;
    return 0;
}

static int
rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int
teardown(void **state)
{
    Fixture *f = *state;

    for (int i = 0; i < NSHARDS; i++) {
        shard_close(&f->src[i]);
        shard_close(&f->dst[i]);
    }
    shard_opts_destroy(&f->opt);
    nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(f);
    return 0;
}

/* ---- shard contents ---- */

static void
put_raw(StoreShard *sh, int cf, const char *k, size_t klen, const void *v,
        size_t vlen)
{
    char *e = NULL;

    rocksdb_put_cf(sh->db, sh->opt->wo_sync, sh->cf[cf], k, klen, v, vlen, &e);
    if (e) fail_msg("put: %s", e);
}

static void
put_u64(StoreShard *sh, const char *name, uint64_t v)
{
    unsigned char b[8];

    le_put64(b, v);
    put_raw(sh, SHARD_CF_DEFAULT, name, strlen(name), b, 8);
}

/* Reads a default-CF key; returns 1 and its u64 if present (8 bytes). */
static int
get_u64(StoreShard *sh, const char *name, uint64_t *v)
{
    size_t vlen = 0;
    char *e = NULL;
    char *p = rocksdb_get_cf(sh->db, sh->opt->ro, sh->cf[SHARD_CF_DEFAULT],
                             name, strlen(name), &vlen, &e);

    if (e) fail_msg("get %s: %s", name, e);
    if (!p) return 0;
    assert_int_equal(vlen, 8);
    *v = le_get64((const unsigned char *)p);
    rocksdb_free(p);
    return 1;
}

/* Adds job id (meta and a body of body_len bytes, starting "MARK<id>." when
 * it fits) to b[its shard]. */
static void
put_job(StoreShard *sh, rocksdb_writebatch_t **b, uint64_t id, size_t body_len)
{
    StoreJob j = {.id = id,
                  .state = STORE_READY,
                  .pri = (uint32_t)id,
                  .ttr = 60,
                  .body_size = (uint32_t)body_len,
                  .created_at_ns = 1700000000000000000 + (int64_t)id,
                  .tube_len = 7};
    unsigned char meta[STORE_META_MAX];
    char key[ENC_KEY_LEN], mark[32];
    char *body = malloc(body_len + 1);
    int m = snprintf(mark, sizeof mark, "MARK%06d.", (int)id);
    int s = store_shard_of(id, NSHARDS);

    assert_non_null(body);
    memcpy(j.tube, "default", 8);
    for (size_t i = 0; i < body_len; i++)
        body[i] = (char)('a' + (id + i) % 26);
    if ((size_t)m <= body_len) memcpy(body, mark, (size_t)m);
    enc_key_put(key, id);
    size_t n = store_meta_encode(&j, meta);
    rocksdb_writebatch_put_cf(b[s], sh[s].cf[SHARD_CF_META], key, 8,
                              (const char *)meta, n);
    rocksdb_writebatch_put_cf(b[s], sh[s].cf[SHARD_CF_BODY], key, 8, body,
                              body_len);
    free(body);
}

/* Writes each shard's batch (synced) and empties it. */
static void
write_batches(StoreShard *sh, rocksdb_writebatch_t **b)
{
    for (int i = 0; i < NSHARDS; i++) {
        char *e = NULL;
        rocksdb_write(sh[i].db, sh[i].opt->wo_sync, b[i], &e);
        if (e) fail_msg("write: %s", e);
        rocksdb_writebatch_clear(b[i]);
    }
}

/* Puts jobs lo..hi with bodies of body_len(id) bytes. */
static void
put_jobs(StoreShard *sh, uint64_t lo, uint64_t hi, size_t (*body_len)(uint64_t))
{
    rocksdb_writebatch_t *b[NSHARDS];

    for (int i = 0; i < NSHARDS; i++)
        b[i] = rocksdb_writebatch_create();
    for (uint64_t id = lo; id <= hi; id++) {
        put_job(sh, b, id, body_len(id));
        if (id % 500 == 0) write_batches(sh, b);
    }
    write_batches(sh, b);
    for (int i = 0; i < NSHARDS; i++)
        rocksdb_writebatch_destroy(b[i]);
}

/* Small bodies: id % 200 bytes (job 1's empty, job 200's too). */
static size_t
small_body(uint64_t id)
{
    return (size_t)(id % 200);
}

/* Jobs 1..njobs with small bodies and the header values next_id (the
 * shard's top id), jgroup 500 + shard and raft_applied 9000 + shard; the
 * source's "format" is 1, so that the destination's own shows it is not
 * copied. */
static void
fill_source(StoreShard *src, int njobs)
{
    put_jobs(src, 1, (uint64_t)njobs, small_body);
    for (int i = 0; i < NSHARDS; i++) {
        unsigned char fmt[4];
        le_put32(fmt, 1);
        put_raw(&src[i], SHARD_CF_DEFAULT, "format", 6, fmt, 4);
        put_u64(&src[i], "next_id", (uint64_t)(njobs - (njobs + i) % 2));
        put_u64(&src[i], "jgroup", 500 + (uint64_t)i);
        put_u64(&src[i], "raft_applied", 9000 + (uint64_t)i);
    }
}

static size_t
tiny_body(uint64_t id)
{
    return (size_t)(id % 7) + 1;
}

/* What the destination holds before a restore, all of which must go:
 * other jobs, a 12-byte meta key of 0xff (above every job key), header
 * values and unknown default keys below and above the kept ones. */
static void
fill_dest(StoreShard *dst)
{
    static const char high[12] = {'\xff', '\xff', '\xff', '\xff',
                                  '\xff', '\xff', '\xff', '\xff',
                                  '\xff', '\xff', '\xff', '\xff'};

    put_jobs(dst, 100001, 100400, tiny_body);
    for (int i = 0; i < NSHARDS; i++) {
        put_raw(&dst[i], SHARD_CF_META, high, sizeof high, "x", 1);
        put_raw(&dst[i], SHARD_CF_BODY, high, sizeof high, "y", 1);
        put_u64(&dst[i], "next_id", 7);
        put_u64(&dst[i], "jgroup", 8);
        put_u64(&dst[i], "raft_applied", 9);
        put_u64(&dst[i], "aaa", 1);
        put_u64(&dst[i], "obsolete", 2);
        put_u64(&dst[i], "zz", 3);
    }
}

/* ---- streams ---- */

typedef struct Sender {
    StoreShard *sh;
    int nshards, fd, rc;
    char err[256];
} Sender;

static void *
sender_main(void *arg)
{
    Sender *s = arg;

    s->rc = ship_send(s->sh, s->nshards, s->fd, s->err, sizeof s->err);
    close(s->fd);
    return NULL;
}

/* Runs ship_send(sh, nshards) on a thread and reads its whole stream into
 * *out; returns ship_send's result (message in err). */
static int
capture(StoreShard *sh, int nshards, Stream *out, char *err, size_t errcap)
{
    int sv[2];
    pthread_t t;
    Sender s = {.sh = sh, .nshards = nshards};
    size_t cap = 1 << 16;

    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    s.fd = sv[0];
    out->data = malloc(cap);
    out->len = 0;
    assert_int_equal(pthread_create(&t, NULL, sender_main, &s), 0);
    for (;;) {
        if (out->len == cap) out->data = realloc(out->data, cap *= 2);
        assert_non_null(out->data);
        ssize_t r = read(sv[1], out->data + out->len, cap - out->len);
        if (r < 0 && errno == EINTR) continue;
        assert_true(r >= 0);
        if (r == 0) break;
        out->len += (size_t)r;
    }
    pthread_join(t, NULL);
    close(sv[1]);
    snprintf(err, errcap, "%s", s.err);
    return s.rc;
}

typedef struct Writer {
    const unsigned char *p;
    size_t n;
    int fd;
} Writer;

static void *
writer_main(void *arg)
{
    Writer *w = arg;

    while (w->n > 0) {
        ssize_t r = send(w->fd, w->p, w->n, MSG_NOSIGNAL);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) break; /* the receiver gave up and closed */
        w->p += r;
        w->n -= (size_t)r;
    }
    close(w->fd);
    return NULL;
}

/* Feeds data[0..n) to ship_recv(dst) from a thread; returns its result. */
static int
deliver(StoreShard *dst, const unsigned char *data, size_t n, char *err,
        size_t errcap)
{
    int sv[2];
    pthread_t t;

    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    Writer w = {.p = data, .n = n, .fd = sv[0]};
    assert_int_equal(pthread_create(&t, NULL, writer_main, &w), 0);
    int rc = ship_recv(dst, NSHARDS, sv[1], err, errcap);
    close(sv[1]);
    pthread_join(t, NULL);
    return rc;
}

/* Offset of the first byte of "MARK<id>." in s (it must be there). */
static size_t
mark_at(const Stream *s, int id)
{
    char mark[32];
    int m = snprintf(mark, sizeof mark, "MARK%06d.", id);
    const unsigned char *p = memmem(s->data, s->len, mark, (size_t)m);

    assert_non_null(p);
    return (size_t)(p - s->data);
}

/* ---- checks ---- */

/* Asserts that column family cf holds the same pairs in a and b; returns
 * how many. */
static size_t
assert_cf_equal(StoreShard *a, StoreShard *b, int cf)
{
    rocksdb_iterator_t *ia =
        rocksdb_create_iterator_cf(a->db, a->opt->ro, a->cf[cf]);
    rocksdb_iterator_t *ib =
        rocksdb_create_iterator_cf(b->db, b->opt->ro, b->cf[cf]);
    size_t n = 0, ka, kb, va, vb;

    rocksdb_iter_seek_to_first(ia);
    rocksdb_iter_seek_to_first(ib);
    for (; rocksdb_iter_valid(ia); rocksdb_iter_next(ia)) {
        assert_true(rocksdb_iter_valid(ib));
        const char *pka = rocksdb_iter_key(ia, &ka);
        const char *pkb = rocksdb_iter_key(ib, &kb);
        const char *pva = rocksdb_iter_value(ia, &va);
        const char *pvb = rocksdb_iter_value(ib, &vb);
        assert_int_equal(ka, kb);
        assert_memory_equal(pka, pkb, ka);
        assert_int_equal(va, vb);
        if (va) assert_memory_equal(pva, pvb, va);
        rocksdb_iter_next(ib);
        n++;
    }
    assert_false(rocksdb_iter_valid(ib));
    rocksdb_iter_destroy(ia);
    rocksdb_iter_destroy(ib);
    return n;
}

/* Asserts that dst's default CF holds exactly its own format (3) and shard
 * keys and the source's next_id, jgroup and raft_applied. */
static void
assert_header(StoreShard *src, StoreShard *dst)
{
    static const char *const want[] = {"format", "jgroup", "next_id",
                                       "raft_applied", "shard"};
    rocksdb_iterator_t *it = rocksdb_create_iterator_cf(
        dst->db, dst->opt->ro, dst->cf[SHARD_CF_DEFAULT]);
    size_t n = 0, klen, vlen;
    uint64_t a, b;

    for (rocksdb_iter_seek_to_first(it); rocksdb_iter_valid(it);
         rocksdb_iter_next(it), n++) {
        const char *k = rocksdb_iter_key(it, &klen);
        const char *v = rocksdb_iter_value(it, &vlen);
        assert_true(n < 5);
        assert_int_equal(klen, strlen(want[n]));
        assert_memory_equal(k, want[n], klen);
        if (n == 0) {
            assert_int_equal(vlen, 4);
            assert_int_equal(le_get32((const unsigned char *)v),
                             STORE_FORMAT_VERSION);
        }
    }
    assert_int_equal(n, 5);
    rocksdb_iter_destroy(it);
    for (int i = 1; i <= 3; i++) {
        assert_true(get_u64(src, want[i], &a) && get_u64(dst, want[i], &b));
        assert_int_equal(a, b);
    }
}

/* Asserts that dst[i] equals src[i], in its keys and in its fields, also
 * once reopened. */
static void
assert_shard_equal(Fixture *f, int i)
{
    char err[256] = "";
    StoreShard *d = &f->dst[i];
    uint64_t v;

    assert_int_equal(assert_cf_equal(&f->src[i], d, SHARD_CF_META),
                     assert_cf_equal(&f->src[i], d, SHARD_CF_BODY));
    assert_header(&f->src[i], d);
    assert_true(get_u64(&f->src[i], "next_id", &v));
    assert_int_equal(d->hwm, v);
    assert_int_equal(d->jgroup, 500 + (uint64_t)i);
    assert_int_equal(d->raft_applied, 9000 + (uint64_t)i);
    assert_false(get_u64(d, "restoring", &v));
    shard_close(d);
    if (shard_open(d, &f->opt, f->dst_dir, i, NSHARDS, err, sizeof err) < 0)
        fail_msg("reopen: %s", err);
    assert_int_equal(d->hwm, v);
    assert_int_equal(d->jgroup, 500 + (uint64_t)i);
    assert_int_equal(d->raft_applied, 9000 + (uint64_t)i);
}

/* Asserts that dst[i] is marked restoring, also once reopened. */
static void
assert_restoring(Fixture *f, int i)
{
    char err[256] = "";
    StoreShard *d = &f->dst[i];
    uint64_t v;

    assert_int_equal(d->raft_applied, 0);
    assert_true(get_u64(d, "restoring", &v));
    shard_close(d);
    if (shard_open(d, &f->opt, f->dst_dir, i, NSHARDS, err, sizeof err) < 0)
        fail_msg("reopen: %s", err);
    assert_int_equal(d->raft_applied, 0);
}

static void
ship_all(Fixture *f, Stream *s)
{
    char err[256] = "";

    if (capture(f->src, NSHARDS, s, err, sizeof err) < 0)
        fail_msg("ship_send: %s", err);
}

/* ---- tests ---- */

static void
test_ship_roundtrip(void **state)
{
    Fixture *f = *state;
    Stream s;
    char err[256] = "";

    fill_source(f->src, NJOBS);
    fill_dest(f->dst);
    ship_all(f, &s);
    if (deliver(f->dst, s.data, s.len, err, sizeof err) < 0)
        fail_msg("ship_recv: %s", err);
    for (int i = 0; i < NSHARDS; i++)
        assert_shard_equal(f, i);
    assert_int_equal(assert_cf_equal(&f->src[0], &f->dst[0], SHARD_CF_META),
                     NJOBS / 2);
    free(s.data);
}

/* Bodies of 1 MiB and 3 MiB (above the 256 KiB socket buffers and the
 * 1 MiB batch) among small ones. */
static size_t
large_body(uint64_t id)
{
    return id == 5 ? (size_t)1 << 20 : id == 8 ? (size_t)3 << 20 : id * 100;
}

static void
test_ship_large_bodies(void **state)
{
    Fixture *f = *state;
    Stream s;
    char err[256] = "";

    put_jobs(f->src, 1, 20, large_body);
    for (int i = 0; i < NSHARDS; i++) {
        put_u64(&f->src[i], "next_id", 20 - (uint64_t)i);
        put_u64(&f->src[i], "jgroup", 500 + (uint64_t)i);
        put_u64(&f->src[i], "raft_applied", 9000 + (uint64_t)i);
    }
    fill_dest(f->dst);
    ship_all(f, &s);
    assert_true(s.len > ((size_t)4 << 20));
    if (deliver(f->dst, s.data, s.len, err, sizeof err) < 0)
        fail_msg("ship_recv: %s", err);
    for (int i = 0; i < NSHARDS; i++)
        assert_shard_equal(f, i);
    free(s.data);
}

/* Asserts that dst[i] still holds what fill_dest put there (untouched). */
static void
assert_untouched(Fixture *f, int i)
{
    uint64_t v;

    assert_true(get_u64(&f->dst[i], "raft_applied", &v));
    assert_int_equal(v, 9);
    assert_false(get_u64(&f->dst[i], "restoring", &v));
    assert_true(get_u64(&f->dst[i], "obsolete", &v));
}

/* Delivers the first n bytes of s; asserts that ship_recv fails with a
 * message holding want. */
static void
assert_recv_fails(Fixture *f, const unsigned char *data, size_t n,
                  const char *want)
{
    char err[256] = "";

    assert_int_equal(deliver(f->dst, data, n, err, sizeof err), -1);
    if (!strstr(err, want)) fail_msg("error \"%s\", want \"%s\"", err, want);
}

/* A stream cut in shard 1 leaves shard 0 complete and shard 1 restoring;
 * cut in shard 0, shard 1 is untouched; a whole stream then repairs both. */
static void
test_ship_cut_short(void **state)
{
    Fixture *f = *state;
    Stream s;
    char err[256] = "";

    fill_source(f->src, NJOBS);
    fill_dest(f->dst);
    ship_all(f, &s);
    assert_recv_fails(f, s.data, mark_at(&s, 2050), "ended early");
    assert_restoring(f, 0);
    assert_untouched(f, 1);
    assert_recv_fails(f, s.data, mark_at(&s, 2051), "ended early");
    assert_shard_equal(f, 0);
    assert_restoring(f, 1);
    assert_recv_fails(f, s.data, s.len - 1, "ended early");
    assert_restoring(f, 1);
    if (deliver(f->dst, s.data, s.len, err, sizeof err) < 0)
        fail_msg("ship_recv: %s", err);
    for (int i = 0; i < NSHARDS; i++)
        assert_shard_equal(f, i);
    free(s.data);
}

/* One flipped bit in a body fails the shard's CRC check. */
static void
test_ship_corrupt(void **state)
{
    Fixture *f = *state;
    Stream s;

    fill_source(f->src, NJOBS);
    fill_dest(f->dst);
    ship_all(f, &s);
    s.data[mark_at(&s, 2050) + 5] ^= 0x10;
    assert_recv_fails(f, s.data, s.len, "crc");
    assert_restoring(f, 0);
    assert_untouched(f, 1);
    free(s.data);
}

/* Patches n bytes at off in a copy of s and asserts the delivery fails. */
static void
assert_patch_fails(Fixture *f, const Stream *s, size_t off, const void *p,
                   size_t n, const char *want)
{
    unsigned char *c = malloc(s->len);

    assert_non_null(c);
    memcpy(c, s->data, s->len);
    memcpy(c + off, p, n);
    assert_recv_fails(f, c, s->len, want);
    free(c);
}

/* Offsets in a stream: the stream header's version and shard count, shard
 * 0's index, its first frame's cf, klen and vlen. */
enum {
    AT_VERSION = 8,
    AT_NSHARDS = 12,
    AT_INDEX = 16,
    AT_CF = 20,
    AT_KLEN = 21,
    AT_VLEN = 25
};

/* Bad stream headers and shard indexes fail before anything is written;
 * bad frames fail in the shard they are in. */
static void
test_ship_malformed(void **state)
{
    Fixture *f = *state;
    Stream s, one;
    unsigned char v[4];
    char err[256] = "";

    fill_source(f->src, 200);
    fill_dest(f->dst);
    ship_all(f, &s);
    assert_patch_fails(f, &s, 0, "X", 1, "not a snapshot stream");
    le_put32(v, 2);
    assert_patch_fails(f, &s, AT_VERSION, v, 4, "version 2");
    assert_patch_fails(f, &s, AT_NSHARDS, v + 1, 1, "0 shards");
    le_put32(v, 1);
    assert_patch_fails(f, &s, AT_INDEX, v, 4, "next shard is 1");
    assert_int_equal(capture(f->src, 1, &one, err, sizeof err), 0);
    assert_recv_fails(f, one.data, one.len, "has 1 shards");
    free(one.data);
    assert_recv_fails(f, s.data, 10, "ended early");
    for (int i = 0; i < NSHARDS; i++)
        assert_untouched(f, i);

    assert_patch_fails(f, &s, AT_CF, "\x07", 1, "column family 7");
    assert_restoring(f, 0);
    le_put32(v, SHIP_KEY_MAX + 1);
    assert_patch_fails(f, &s, AT_KLEN, v, 4, "1025-byte key");
    le_put32(v, (uint32_t)SHIP_VALUE_MAX + 1);
    assert_patch_fails(f, &s, AT_VLEN, v, 4, "67108865-byte value");
    assert_restoring(f, 0);
    assert_untouched(f, 1);
    free(s.data);
}

/* A shard that is being restored is no snapshot to send. */
static void
test_ship_sender_refuses_restoring(void **state)
{
    Fixture *f = *state;
    Stream s;
    char err[256] = "";

    fill_source(f->src, 100);
    put_u64(&f->src[1], "restoring", 1);
    assert_int_equal(capture(f->src, NSHARDS, &s, err, sizeof err), -1);
    assert_non_null(strstr(err, "shard-01 is being restored"));
    free(s.data);
}

/* The range deletes' end key is above every key a shard holds. */
static void
test_ship_key_end(void **state)
{
    static const char *const names[] = {"format", "shard",        "next_id",
                                        "jgroup", "raft_applied", "restoring"};
    char key[ENC_KEY_LEN];

    (void)state;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        assert_true(memcmp(names[i], SHIP_KEY_END, strlen(names[i])) < 0);
    enc_key_put(key, UINT64_MAX);
    assert_true(memcmp(key, SHIP_KEY_END, ENC_KEY_LEN) <= 0);
}

int
main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ship_key_end),
        T(test_ship_roundtrip),
        T(test_ship_large_bodies),
        T(test_ship_cut_short),
        T(test_ship_corrupt),
        T(test_ship_malformed),
        T(test_ship_sender_refuses_restoring),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
