/* store/recover.c - the recovery scan (see store/recover.h). */
#include "store/recover.h"

#include <inttypes.h>
#include <stdio.h>

#include <rocksdb/c.h>

#include "store/enc.h"
#include "store/util.h"

/* Recovery scan readahead: the scan reads the meta column family once,
 * front to back (ReadOptions.readahead_size, rocksdb/options.h). */
#define RECOVER_READAHEAD ((size_t)2 << 20)

/* Calls cb for each job of one shard, front to back; tracks the top id. */
static int
recover_iter(StoreShard *sh, rocksdb_iterator_t *it,
             int (*cb)(void *ctx, const StoreJob *job), void *ctx,
             uint64_t *max_id, char *err, size_t errcap)
{
    StoreJob job;
    size_t klen, vlen;

    for (rocksdb_iter_seek_to_first(it); rocksdb_iter_valid(it);
         rocksdb_iter_next(it)) {
        const char *k = rocksdb_iter_key(it, &klen);
        const char *v = rocksdb_iter_value(it, &vlen);
        if (klen != 8)
            return util_fail(err, errcap, "shard-%02d: meta key of %zu bytes",
                             sh->index, klen);
        uint64_t id = enc_key_get(k);
        if (store_shard_of(id, sh->nshards) != sh->index)
            return util_fail(err, errcap,
                             "shard-%02d holds job %" PRIu64
                             " of another shard",
                             sh->index, id);
        if (store_meta_decode(id, (const unsigned char *)v, vlen, &job) < 0)
            return util_fail(err, errcap,
                             "shard-%02d: job %" PRIu64
                             ": malformed metadata (%zu bytes)",
                             sh->index, id, vlen);
        if (cb(ctx, &job) < 0)
            return util_fail(err, errcap, "recovery stopped at job %" PRIu64,
                             id);
        if (id > *max_id) *max_id = id;
    }
    char *e = NULL;
    rocksdb_iter_get_error(it, &e);
    if (e) {
        util_fail(err, errcap, "shard-%02d: scan: %s", sh->index, e);
        rocksdb_free(e);
        return -1;
    }
    return 0;
}

static int
recover_shard(StoreShard *sh, int (*cb)(void *ctx, const StoreJob *job),
              void *ctx, uint64_t *max_id, char *err, size_t errcap)
{
    /* Above every 8-byte key; the bound stops Next() at the end of the
     * meta keys without a trip through what lies beyond. */
    static const char upper[9] = {'\xff', '\xff', '\xff', '\xff', '\xff',
                                  '\xff', '\xff', '\xff', '\0'};
    rocksdb_readoptions_t *ro = rocksdb_readoptions_create();

    rocksdb_readoptions_set_fill_cache(ro, 0); /* one pass: do not evict */
    rocksdb_readoptions_set_readahead_size(ro, RECOVER_READAHEAD);
    rocksdb_readoptions_set_iterate_upper_bound(ro, upper, sizeof upper);
    rocksdb_iterator_t *it =
        rocksdb_create_iterator_cf(sh->db, ro, sh->cf[SHARD_CF_META]);
    int rc = recover_iter(sh, it, cb, ctx, max_id, err, errcap);
    rocksdb_iter_destroy(it);
    rocksdb_readoptions_destroy(ro);
    return rc;
}

int
recover_run(StoreShard *shards, int nshards,
            int (*cb)(void *ctx, const StoreJob *job), void *ctx,
            uint64_t *next_id, char *err, size_t errcap)
{
    uint64_t top = 0;

    for (int i = 0; i < nshards; i++) {
        if (recover_shard(&shards[i], cb, ctx, &top, err, errcap) < 0)
            return -1;
        if (shards[i].hwm > top) top = shards[i].hwm;
    }
    *next_id = top + 1;
    return 0;
}
