/* store/raft.c - Raft entries and their applier (see store/raft.h). */
#include "store/raft.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/enc.h"
#include "store/util.h"

void
sraft_init(StoreRaft *r, StoreShard *shard, int nshards, const StoreIO *io,
           StoreAck *ack)
{
    sbatch_init(&r->sb, shard, nshards);
    r->io = io;
    r->ack = ack;
    pthread_mutex_init(&r->apply_mu, NULL);
}

void
sraft_destroy(StoreRaft *r)
{
    sbatch_destroy(&r->sb);
    pthread_mutex_destroy(&r->apply_mu);
}

void
sraft_snapshots(StoreRaft *r, const rocksdb_snapshot_t **snaps, uint64_t *index)
{
    uint64_t low = UINT64_MAX;

    pthread_mutex_lock(&r->apply_mu);
    for (int i = 0; i < r->sb.nshards; i++) {
        snaps[i] = rocksdb_create_snapshot(r->sb.shard[i].db);
        if (r->sb.shard[i].raft_applied < low)
            low = r->sb.shard[i].raft_applied;
    }
    pthread_mutex_unlock(&r->apply_mu);
    *index = low;
}

void
sraft_entry_header(unsigned char *p, size_t len, uint16_t origin, uint32_t nrec,
                   uint64_t publish_seq)
{
    le_put32(p, SRAFT_MAGIC);
    p[4] = SRAFT_VERSION & 0xff;
    p[5] = SRAFT_VERSION >> 8;
    p[6] = origin & 0xff;
    p[7] = (unsigned char)(origin >> 8);
    le_put32(p + 8, nrec);
    le_put32(p + 12, (uint32_t)(len - SRAFT_HDR));
    le_put64(p + 16, publish_seq);
}

/* Whether p[0..len) starts with an entry header whose record bytes fill
 * it exactly (no padding). */
static int
header_fits(const unsigned char *p, size_t len)
{
    return len >= SRAFT_HDR && le_get32(p) == SRAFT_MAGIC &&
           (p[4] | p[5] << 8) == SRAFT_VERSION &&
           le_get32(p + 12) == len - SRAFT_HDR;
}

int
sraft_entry_join(unsigned char *a, size_t *alen, const unsigned char *b,
                 size_t blen)
{
    size_t len = *alen;

    if (!header_fits(a, len) || !header_fits(b, blen) || a[6] != b[6] ||
        a[7] != b[7] || len - SRAFT_HDR + (blen - SRAFT_HDR) > UINT32_MAX)
        return -1;
    uint64_t pa = le_get64(a + 16), pb = le_get64(b + 16);
    memcpy(a + len, b + SRAFT_HDR, blen - SRAFT_HDR);
    len += blen - SRAFT_HDR;
    le_put32(a + 8, le_get32(a + 8) + le_get32(b + 8));
    le_put32(a + 12, (uint32_t)(len - SRAFT_HDR));
    le_put64(a + 16, pb > pa ? pb : pa);
    *alen = len;
    return 0;
}

/* The entry's length without libraft's padding (its log pads an entry's
 * data to 8 bytes): its header's, or 0 if p[0..len) is not an entry
 * header and exactly nrec well-formed records. */
static size_t
entry_len(const unsigned char *p, size_t len)
{
    if (len < SRAFT_HDR || le_get32(p) != SRAFT_MAGIC ||
        (p[4] | p[5] << 8) != SRAFT_VERSION ||
        le_get32(p + 12) > len - SRAFT_HDR ||
        len - SRAFT_HDR - le_get32(p + 12) >= 8)
        return 0;
    len = SRAFT_HDR + le_get32(p + 12);
    uint32_t nrec = le_get32(p + 8), n = 0;
    size_t off = SRAFT_HDR;
    while (off < len) {
        EncRec rec;
        if (len - off < ENC_REC_HDR) return 0;
        size_t rl = enc_rec_get(p + off, &rec);
        if (rec.op < ENC_OP_PUT || rec.op > ENC_OP_DELETE || rec.id == 0 ||
            rec.ref || rl > len - off) /* no body ring in cluster mode */
            return 0;
        off += rl;
        n++;
    }
    return n == nrec ? len : 0;
}

/* Writes shard i's batch unsynced. Returns 0, or -1 after ack_fail. */
static int
write_shard(StoreRaft *r, int i)
{
    char *msg = NULL;
    size_t size = 0;

    rocksdb_writebatch_data(r->sb.batch[i], &size);
    if (r->io->write(r->io->ctx, r->sb.shard[i].db, r->sb.batch[i], 0, &msg) <
        0) {
        ack_fail(r->ack, "raft apply to", i, msg);
        return -1;
    }
    atomic_fetch_add_explicit(&r->ack->st_bytes, size, memory_order_relaxed);
    return 0;
}

/* Writes every touched batch with its marks; clears them all. */
static int
write_touched(StoreRaft *r, uint64_t index)
{
    int rc = 0;

    for (int i = 0; i < r->sb.nshards; i++) {
        if (!r->sb.touched[i]) continue;
        sbatch_put_u64(&r->sb, i, "raft_applied", index);
        sbatch_put_hwm(&r->sb, i);
        if (rc == 0 && (rc = write_shard(r, i)) == 0)
            r->sb.shard[i].raft_applied = index;
    }
    sbatch_clear(&r->sb);
    return rc;
}

/* Tells r->replay of the record at p (header rec). Returns 0, or -1 after
 * ack_fail if its meta does not decode. */
static int
replay(StoreRaft *r, const unsigned char *p, const EncRec *rec)
{
    StoreJob job;

    if (rec->op == ENC_OP_DELETE) {
        r->replay(r->replay_arg, STORE_REPLAY_DELETE, rec->id, NULL);
        return 0;
    }
    if (store_meta_decode(rec->id, p + ENC_REC_HDR, rec->meta_len, &job) < 0) {
        ack_fail(r->ack, "raft entry", -1,
                 strdup("a job record that does not decode"));
        return -1;
    }
    r->replay(r->replay_arg,
              rec->op == ENC_OP_PUT ? STORE_REPLAY_PUT : STORE_REPLAY_UPDATE,
              rec->id, &job);
    return 0;
}

/* sraft_apply's work, under apply_mu. */
static int
apply_locked(StoreRaft *r, uint64_t index, const void *data, size_t len,
             int ours)
{
    const unsigned char *p = data;
    uint64_t seq, nrec = 0;

    if (ack_is_failed(r->ack)) return -1;
    if (!(len = entry_len(p, len))) {
        char msg[64];
        snprintf(msg, sizeof msg, "entry %llu is not a rockstalk entry",
                 (unsigned long long)index);
        ack_fail(r->ack, "raft log", -1, strdup(msg));
        return -1;
    }
    for (size_t off = SRAFT_HDR; off < len; nrec++) {
        EncRec rec;
        size_t rl = enc_rec_get(p + off, &rec);
        int i = store_shard_of(rec.id, r->sb.nshards);
        if (index > r->sb.shard[i].raft_applied) {
            sbatch_add(&r->sb, p + off, &seq);
            if (!ours && r->replay && replay(r, p + off, &rec) < 0) {
                sbatch_clear(&r->sb);
                return -1;
            }
        }
        off += rl;
    }
    /* Committed, so durable on a majority: the replies may leave before
     * the shards take it, as under the commit journal; a read that needs a
     * body waits for ack_applied (store_get_body) */
    seq = le_get64(p + 16);
    atomic_fetch_add_explicit(&r->ack->st_records, nrec, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->ack->st_groups, 1, memory_order_relaxed);
    if (ours) ack_publish(r->ack, seq, 1); /* counted first: stats agree */
    if (write_touched(r, index) < 0) return -1;
    if (ours) ack_applied(r->ack, seq);
    return 0;
}

int
sraft_apply(StoreRaft *r, uint64_t index, const void *data, size_t len,
            int ours)
{
    /* RocksDB's per-thread perf context counts by default: thread-local
     * accesses in a shared library on every key comparison of the
     * memtable inserts, read by nobody (as on the mutation thread,
     * store/mut.c). The level is per thread: set on the applier's. */
    rocksdb_set_perf_level(rocksdb_disable);
    pthread_mutex_lock(&r->apply_mu); /* uncontended but for a backup */
    int rc = apply_locked(r, index, data, len, ours);
    pthread_mutex_unlock(&r->apply_mu);
    return rc;
}

int
sraft_mark(StoreRaft *r, uint64_t index)
{
    char *msg = NULL;

    for (int i = 0; i < r->sb.nshards; i++) {
        if (r->sb.shard[i].raft_applied < index) r->sb.touched[i] = 1;
    }
    if (write_touched(r, index) < 0) return -1;
    for (int i = 0; i < r->sb.nshards; i++) {
        int64_t t0 = util_now_ns();
        if (shard_flush(&r->sb.shard[i], &msg) < 0) {
            ack_fail(r->ack, "raft snapshot flush of", i, msg);
            return -1;
        }
        ack_stat_sync(r->ack, (uint64_t)(util_now_ns() - t0));
    }
    return 0;
}

void
sraft_manifest(const StoreRaft *r, uint64_t index, uint32_t origin,
               unsigned char *m)
{
    le_put32(m, SRAFT_MANIFEST_MAGIC);
    le_put32(m + 4, 1);
    le_put64(m + 8, index);
    le_put32(m + 16, (uint32_t)r->sb.nshards);
    le_put32(m + 20, origin);
}

int
sraft_manifest_ok(const StoreRaft *r, const unsigned char *m, size_t len)
{
    return len == SRAFT_MANIFEST_LEN && le_get32(m) == SRAFT_MANIFEST_MAGIC &&
           le_get32(m + 4) == 1 && le_get32(m + 16) == (uint32_t)r->sb.nshards;
}

uint64_t
sraft_applied(const StoreRaft *r)
{
    uint64_t low = UINT64_MAX;

    for (int i = 0; i < r->sb.nshards; i++)
        if (r->sb.shard[i].raft_applied < low)
            low = r->sb.shard[i].raft_applied;
    return low == UINT64_MAX ? 0 : low;
}
