/* store/recover.h - the recovery scan: every shard's job metadata, once, at
 * start-up.
 *
 * Threads: the main thread, before the mutation thread starts (store_recover
 * in store.h). Calls: store_shard (its open RocksDB instances), store_enc,
 * store_util.
 */
#ifndef ROCKSTALK_STORE_RECOVER_H
#define ROCKSTALK_STORE_RECOVER_H

#include <stddef.h>
#include <stdint.h>

#include "store/shard.h"
#include "store/types.h"

/* Scans the meta column family of shards[0..nshards) (bodies are not read)
 * and calls cb(ctx, job) for each job, in id order within a shard; cb
 * returns 0 to go on or -1 to abort. Sets *next_id to one more than the
 * highest id ever allocated (a shard's next_id header or the largest id
 * seen). Returns 0, or -1 with a message in err (a malformed record, a key
 * in the wrong shard, a scan error or cb's abort). */
int recover_run(StoreShard *shards, int nshards,
                int (*cb)(void *ctx, const StoreJob *job), void *ctx,
                uint64_t *next_id, char *err, size_t errcap);

#endif
