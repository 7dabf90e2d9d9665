/* store/batch.c - per-shard WriteBatches (see store/batch.h). */
#include "store/batch.h"

#include <string.h>

#include "store/enc.h"

void
sbatch_init(ShardBatches *b, StoreShard *shard, int nshards)
{
    b->shard = shard;
    b->nshards = nshards;
    for (int i = 0; i < nshards; i++)
        b->batch[i] = rocksdb_writebatch_create();
}

void
sbatch_destroy(ShardBatches *b)
{
    for (int i = 0; i < STORE_SHARDS_MAX; i++) {
        if (b->batch[i]) rocksdb_writebatch_destroy(b->batch[i]);
        b->batch[i] = NULL;
    }
}

/* Deletes the body of the job of key (SingleDelete: it was Put at most
 * once, by sbatch_add or, for a ring body, by a copy-out,
 * store/bodyheld.h) and (ring) its ring reference (Delete: a copy-out may
 * have deleted it already). */
static void
del_body(rocksdb_writebatch_t *wb, const StoreShard *sh, const char *key,
         int ring)
{
    rocksdb_writebatch_singledelete_cf(wb, sh->cf[SHARD_CF_BODY], key, 8);
    if (ring) rocksdb_writebatch_delete_cf(wb, sh->cf[SHARD_CF_RING], key, 8);
}

size_t
sbatch_add(ShardBatches *b, const unsigned char *p, uint64_t *seq)
{
    EncRec r;
    char key[ENC_KEY_LEN];
    size_t len = enc_rec_get(p, &r);
    int i = store_shard_of(r.id, b->nshards);
    StoreShard *sh = &b->shard[i];
    rocksdb_writebatch_t *wb = b->batch[i];
    rocksdb_column_family_handle_t *meta = sh->cf[SHARD_CF_META];
    const char *v = (const char *)p + ENC_REC_HDR;

    *seq = r.seq;
    enc_key_put(key, r.id);
    int inl = r.op != ENC_OP_DELETE &&
              store_meta_len(p + ENC_REC_HDR, r.meta_len) &&
              (p[ENC_REC_HDR + 3] & STORE_F_INLINE);
    switch (r.op) {
    case ENC_OP_PUT:
        if (inl) { /* one entry: the meta, then the body (store/enc.c) */
            rocksdb_writebatch_put_cf(wb, meta, key, 8, v,
                                      (size_t)r.meta_len + r.body_len);
        } else if (r.ref) { /* the reference; the body stays in the ring */
            rocksdb_writebatch_put_cf(wb, meta, key, 8, v, r.meta_len);
            rocksdb_writebatch_put_cf(wb, sh->cf[SHARD_CF_RING], key, 8,
                                      v + r.meta_len, r.ref);
        } else {
            rocksdb_writebatch_put_cf(wb, meta, key, 8, v, r.meta_len);
            rocksdb_writebatch_put_cf(wb, sh->cf[SHARD_CF_BODY], key, 8,
                                      v + r.meta_len, r.body_len);
        }
        if (r.id > sh->hwm) {
            sh->hwm = r.id;
            b->hwm_changed[i] = 1;
        }
        break;
    case ENC_OP_UPDATE:
        if (inl) { /* keeps the inline body, or drops it (store/merge.h) */
            rocksdb_writebatch_merge_cf(wb, meta, key, 8, v, r.meta_len);
            break;
        }
        rocksdb_writebatch_put_cf(wb, meta, key, 8, v, r.meta_len);
        if (r.flag) /* STORE_GONE: the job's body goes, its key stays */
            del_body(wb, sh, key, 1);
        break;
    case ENC_OP_DELETE:
        /* SingleDelete is valid on the body because it is Put exactly once
         * (a STORE_GONE record has none left), and on the meta only if it
         * was never rewritten (store.h). */
        if (!(r.flag & STORE_DEL_NO_BODY))
            del_body(wb, sh, key, !(r.flag & STORE_DEL_SMALL));
        if (r.flag & STORE_DEL_REWRITTEN)
            rocksdb_writebatch_delete_cf(wb, meta, key, 8);
        else
            rocksdb_writebatch_singledelete_cf(wb, meta, key, 8);
        break;
    }
    b->touched[i] = 1;
    return len;
}

size_t
sbatch_note_id(ShardBatches *b, const unsigned char *p)
{
    EncRec r;
    size_t len = enc_rec_get(p, &r);
    int i = store_shard_of(r.id, b->nshards);

    if (r.id > b->shard[i].hwm) {
        b->shard[i].hwm = r.id;
        b->hwm_changed[i] = 1;
        b->touched[i] = 1;
    }
    return len;
}

void
sbatch_put_u64(ShardBatches *b, int i, const char *key, uint64_t v)
{
    unsigned char buf[8];

    le_put64(buf, v);
    rocksdb_writebatch_put_cf(b->batch[i], b->shard[i].cf[SHARD_CF_DEFAULT],
                              key, strlen(key), (const char *)buf, 8);
}

void
sbatch_put_hwm(ShardBatches *b, int i)
{
    if (!b->hwm_changed[i]) return;
    sbatch_put_u64(b, i, "next_id", b->shard[i].hwm);
    b->hwm_changed[i] = 0;
}

void
sbatch_clear(ShardBatches *b)
{
    for (int i = 0; i < b->nshards; i++) {
        rocksdb_writebatch_clear(b->batch[i]);
        b->touched[i] = 0;
    }
}
