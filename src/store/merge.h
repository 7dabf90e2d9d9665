/* store/merge.h - the meta column family's merge operator (RocksDB
 * MergeOperator, rocksdb/merge_operator.h; the C API's
 * rocksdb_mergeoperator_create). A job whose body is inline (STORE_F_INLINE,
 * store/types.h) has one value, its meta followed by its body; an update
 * rewrites only the meta, as a Merge whose operand is the new JobMeta. The
 * merge keeps the body: the result is the latest operand followed by the
 * body of the existing value, or the latest operand alone when the
 * existing value has no inline body, there is none, or the operand is a
 * STORE_GONE record (whose body goes; its STORE_F_INLINE bit is cleared).
 * Partial merges keep the latest operand.
 *
 * A Merge makes the key "rewritten": its delete must be a Delete, never a
 * SingleDelete (rocksdb/db.h), which STORE_DEL_REWRITTEN already says.
 *
 * Threads: RocksDB calls it from any of its threads; no state. Calls:
 * store_enc.
 */
#ifndef ROCKSTALK_STORE_MERGE_H
#define ROCKSTALK_STORE_MERGE_H

#include <rocksdb/c.h>

/* The operator's name, recorded by RocksDB in each SST file that holds
 * merge operands; a data directory must always be opened with it. */
#define STORE_MERGE_NAME "rockstalk.meta.v1"

/* A new merge operator. Set it on the meta column family's options
 * (rocksdb_options_set_merge_operator), which then own it. */
rocksdb_mergeoperator_t *store_merge_create(void);

#endif
