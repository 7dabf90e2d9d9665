/* store_raft.c - Raft entries and their applier (see store_raft.h). */
#include "store_raft.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_enc.h"
#include "store_util.h"

void
sraft_init(StoreRaft *r, StoreShard *shard, int nshards, const StoreIO *io,
           StoreAck *ack)
{
    sbatch_init(&r->sb, shard, nshards);
    r->io = io;
    r->ack = ack;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    pthread_cond_init(&r->idle, NULL);
    r->head = NULL;
    r->tail = &r->head;
}

void
sraft_destroy(StoreRaft *r)
{
    sraft_stop(r);
    sbatch_destroy(&r->sb);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    pthread_cond_destroy(&r->idle);
}

void
sraft_entry_header(unsigned char *p, size_t len, uint16_t origin, uint32_t nrec,
                   uint64_t publish_seq)
{
    enc_put_u32le(p, SRAFT_MAGIC);
    p[4] = SRAFT_VERSION & 0xff;
    p[5] = SRAFT_VERSION >> 8;
    p[6] = origin & 0xff;
    p[7] = (unsigned char)(origin >> 8);
    enc_put_u32le(p + 8, nrec);
    enc_put_u32le(p + 12, (uint32_t)(len - SRAFT_HDR));
    enc_put_u64le(p + 16, publish_seq);
}

/* The entry's length without libraft's padding (its log pads an entry's
 * data to 8 bytes): its header's, or 0 if p[0..len) is not an entry
 * header and exactly nrec well-formed records. */
static size_t
entry_len(const unsigned char *p, size_t len)
{
    if (len < SRAFT_HDR || enc_get_u32le(p) != SRAFT_MAGIC ||
        (p[4] | p[5] << 8) != SRAFT_VERSION ||
        enc_get_u32le(p + 12) > len - SRAFT_HDR ||
        len - SRAFT_HDR - enc_get_u32le(p + 12) >= 8)
        return 0;
    len = SRAFT_HDR + enc_get_u32le(p + 12);
    uint32_t nrec = enc_get_u32le(p + 8), n = 0;
    size_t off = SRAFT_HDR;
    while (off < len) {
        EncRec rec;
        if (len - off < ENC_REC_HDR) return 0;
        size_t rl = enc_rec_get(p + off, &rec);
        if (rec.op < ENC_OP_PUT || rec.op > ENC_OP_DELETE || rec.id == 0 ||
            rl > len - off)
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

/* The writer's part of an entry (p[0..len) checked): the records of every
 * shard that does not hold index yet, marked, written unsynced; then the
 * proposer's seq (0: not ours) is applied. Returns 0, or -1 after
 * ack_fail. */
static int
write_entry(StoreRaft *r, uint64_t index, const unsigned char *p, size_t len,
            uint64_t seq)
{
    uint64_t s;

    for (size_t off = SRAFT_HDR; off < len;) {
        EncRec rec;
        size_t rl = enc_rec_get(p + off, &rec);
        int i = store_shard_of(rec.id, r->sb.nshards);
        if (index > r->sb.shard[i].raft_applied)
            sbatch_add(&r->sb, p + off, &s);
        off += rl;
    }
    if (write_touched(r, index) < 0) return -1;
    if (seq) ack_applied(r->ack, seq);
    return 0;
}

static void *
writer_main(void *arg)
{
    StoreRaft *r = arg;

    pthread_mutex_lock(&r->mu);
    for (;;) {
        while (!r->head && !r->stop)
            pthread_cond_wait(&r->cv, &r->mu);
        SraftItem *it = r->head;
        if (!it) break;
        if (!(r->head = it->next)) r->tail = &r->head;
        r->busy = 1;
        pthread_mutex_unlock(&r->mu);
        if (!ack_is_failed(r->ack))
            write_entry(r, it->index, it->data, it->len, it->seq);
        pthread_mutex_lock(&r->mu);
        r->queued -= it->len;
        r->busy = 0;
        free(it);
        pthread_cond_broadcast(&r->idle);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

int
sraft_start(StoreRaft *r, char *err, size_t errcap)
{
    for (int i = 0; i < r->sb.nshards; i++)
        r->base[i] = r->sb.shard[i].raft_applied;
    int e = pthread_create(&r->thread, NULL, writer_main, r);
    if (e) return util_fail(err, errcap, "pthread_create: %s", strerror(e));
    pthread_setname_np(r->thread, "rs-raft-write");
    r->started = 1;
    return 0;
}

void
sraft_stop(StoreRaft *r)
{
    if (!r->started) return;
    pthread_mutex_lock(&r->mu);
    r->stop = 1;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->thread, NULL);
    r->started = 0;
}

void
sraft_wait_idle(StoreRaft *r)
{
    pthread_mutex_lock(&r->mu);
    while (r->head || r->busy)
        pthread_cond_wait(&r->idle, &r->mu);
    pthread_mutex_unlock(&r->mu);
}

void
sraft_quiesce(StoreRaft *r)
{
    sraft_wait_idle(r);
    for (int i = 0; i < r->sb.nshards; i++)
        r->base[i] = r->sb.shard[i].raft_applied;
}

/* Queues a copy of the checked entry p[0..len) for the writer, waiting
 * while SRAFT_QUEUE_MAX bytes are queued. */
static int
queue_entry(StoreRaft *r, uint64_t index, const unsigned char *p, size_t len,
            uint64_t seq)
{
    SraftItem *it = malloc(sizeof *it + len);

    if (!it) {
        ack_fail(r->ack, "raft apply", -1, strdup("out of memory"));
        return -1;
    }
    it->next = NULL;
    it->index = index;
    it->seq = seq;
    it->len = len;
    memcpy(it->data, p, len);
    pthread_mutex_lock(&r->mu);
    while (r->queued && r->queued + len > SRAFT_QUEUE_MAX)
        pthread_cond_wait(&r->idle, &r->mu);
    *r->tail = it;
    r->tail = &it->next;
    r->queued += len;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    return 0;
}

int
sraft_apply(StoreRaft *r, uint64_t index, const void *data, size_t len,
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
    if (!r->started) sraft_quiesce(r); /* base: the shards, as written */
    for (size_t off = SRAFT_HDR; off < len; nrec++) {
        EncRec rec;
        size_t rl = enc_rec_get(p + off, &rec);
        int i = store_shard_of(rec.id, r->sb.nshards);
        if (index > r->base[i] && !ours && r->replay &&
            replay(r, p + off, &rec) < 0)
            return -1;
        off += rl;
    }
    /* Committed, so durable on a majority: the replies may leave before
     * the shards take it, as under the commit journal; a read that needs a
     * body waits for ack_applied (store_get_body) */
    seq = ours ? enc_get_u64le(p + 16) : 0;
    atomic_fetch_add_explicit(&r->ack->st_records, nrec, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->ack->st_groups, 1, memory_order_relaxed);
    if (ours) ack_publish(r->ack, seq, 1); /* counted first: stats agree */
    if (!r->started) return write_entry(r, index, p, len, seq);
    return queue_entry(r, index, p, len, seq);
}

int
sraft_mark(StoreRaft *r, uint64_t index)
{
    char *msg = NULL;

    sraft_quiesce(r);
    for (int i = 0; i < r->sb.nshards; i++) {
        if (r->sb.shard[i].raft_applied < index) r->sb.touched[i] = 1;
    }
    if (write_touched(r, index) < 0) return -1;
    for (int i = 0; i < r->sb.nshards; i++) {
        int64_t t0 = util_now_ns();
        if (r->io->sync(r->io->ctx, r->sb.shard[i].db, &msg) < 0) {
            ack_fail(r->ack, "raft snapshot sync of", i, msg);
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
    enc_put_u32le(m, SRAFT_MANIFEST_MAGIC);
    enc_put_u32le(m + 4, 1);
    enc_put_u64le(m + 8, index);
    enc_put_u32le(m + 16, (uint32_t)r->sb.nshards);
    enc_put_u32le(m + 20, origin);
}

int
sraft_manifest_ok(const StoreRaft *r, const unsigned char *m, size_t len)
{
    return len == SRAFT_MANIFEST_LEN &&
           enc_get_u32le(m) == SRAFT_MANIFEST_MAGIC &&
           enc_get_u32le(m + 4) == 1 &&
           enc_get_u32le(m + 16) == (uint32_t)r->sb.nshards;
}

uint64_t
sraft_applied(StoreRaft *r)
{
    uint64_t low = UINT64_MAX;

    sraft_quiesce(r);
    for (int i = 0; i < r->sb.nshards; i++)
        if (r->sb.shard[i].raft_applied < low)
            low = r->sb.shard[i].raft_applied;
    return low == UINT64_MAX ? 0 : low;
}
