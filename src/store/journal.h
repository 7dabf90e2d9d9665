/* store/journal.h - the commit journal of the default sync mode
 * (STORE_SYNC_ALWAYS): what makes a group durable at the cost of one data
 * write and one fdatasync (issue 14; the format is protocol/PROTOCOL.md,
 * section 11.5). Under -f MS (STORE_SYNC_INTERVAL) the same journal makes
 * a group safe from a crash of the process at the cost of one write(2):
 * records are appended unsynced, and a syncer fdatasyncs the files every
 * MS ms (store/sync.h, sync_use_journal).
 *
 * JOURNAL_FILES files of one size under <dir>/journal/ (journal-0,
 * journal-1), zero-filled once when created and then overwritten in place,
 * lap after lap: a write never changes a file's size or extents, so the
 * fdatasync after it commits data blocks only (measured 119-124 us against
 * 165-187 us for an appending or fallocate'd log, issue 14). The mutation
 * thread writes each group as one record, syncs it and only then publishes
 * the group as durable; RocksDB takes the same batch with its WAL written
 * but not synced. Before a file is written again, a WAL sync of every
 * shard covers what it held (store/mut.c posts one each time a file is
 * started), and recovery replays the records newer than what each shard
 * holds (its "jgroup" mark, store/shard.h).
 *
 * A record (little-endian; JOURNAL_HDR bytes of header, then the payload):
 *     0  u32 magic    JOURNAL_MAGIC
 *     4  u16 version  JOURNAL_VERSION
 *     6  u16 flags    JOURNAL_F_RING or 0
 *     8  u32 len      payload bytes
 *    12  u32 nrec     mutation records in the payload
 *    16  u64 gen      the file's generation (+1 whenever a file is started)
 *    24  u64 group    the group's number (increasing per data directory)
 *    32  u32 crc      zlib crc32 of the header (this field 0), then payload
 *    36  u32          0
 * The payload is the group's mutation records (store/enc.h), exactly as the
 * loop encoded them, but for a put whose body is in the body ring
 * (ENC_PUT_RING; store/bodyring.h): its ring reference takes its body's
 * place (header, meta, reference), and the record's flags have
 * JOURNAL_F_RING. Replay reads such a body back from the ring; a
 * reference that does not verify makes its record the journal's end if
 * no valid record follows it (a torn tail), else replay fails (the group
 * was acknowledged). A file's records start at offset 0, each right after
 * the previous; the valid ones are those up to the first that has a bad
 * magic, version, length or crc, another gen than the file's first record,
 * a group number not above the previous one, or records that do not parse
 * to exactly len bytes and nrec records: a torn tail, garbage, zeros or a
 * record of an earlier lap all end the file there.
 *
 * Threads: open, replay, reset and close on the main thread; append and
 * roll on the mutation thread. Calls: store_enc, store_util, zlib; writes
 * and syncs go through the StoreIO seam (store/types.h).
 */
#ifndef ROCKSTALK_STORE_JOURNAL_H
#define ROCKSTALK_STORE_JOURNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "store/types.h"

#define JOURNAL_FILES 2
#define JOURNAL_HDR 40
#define JOURNAL_MAGIC 0x314a5352u /* "RSJ1" */
#define JOURNAL_VERSION 1
#define JOURNAL_F_RING 0x01 /* puts with ring references inside */

/* The journal; lives in the Store. */
typedef struct Journal {
    char *dir;                     /* <data dir>/journal, owned */
    const StoreIO *io;             /* borrowed; jwrite and jsync are set */
    int fd[JOURNAL_FILES];         /* -1: not open */
    uint64_t fsize[JOURNAL_FILES]; /* bytes, as found or created */
    uint64_t size;                 /* bytes each file has once reset */
    /* mutation thread, after journal_reset */
    int cur;            /* the file being written */
    uint64_t off;       /* where the next record goes in it */
    uint64_t gen;       /* its generation */
    uint64_t top_gen;   /* highest generation seen by replay */
    uint64_t top_group; /* highest group number seen by replay */
    uint64_t unusable;  /* replay: the group whose fn said 1 (0: none) */
} Journal;

/* Called by journal_replay for each valid record, in the order written:
 * group's number and its payload p[0..len) of nrec mutation records as
 * the journal holds them (enc_rec_jlen; already checked to parse).
 * Returns 0, -1 to stop the replay (it fails), or 1: the record cannot be
 * replayed (a ring body does not verify) and nothing of it was applied;
 * it is then the end of the journal if no valid record follows it, and
 * the replay fails if one does. */
typedef int (*JournalReplayFn)(void *ctx, uint64_t group,
                               const unsigned char *p, size_t len,
                               uint32_t nrec);

/* Opens the journal files of datadir that exist (none is created here).
 * size: bytes per file from journal_reset on (0: no journal; the files
 * found are still replayed, then removed by journal_reset). io: the seam
 * for appends (borrowed). Returns 0, or -1 with a message in err; call
 * journal_close either way. */
int journal_open(Journal *j, const char *datadir, uint64_t size,
                 const StoreIO *io, char *err, size_t errcap);

/* Calls fn for every valid record of every file, files in generation
 * order. Reads each file once, one record at a time (memory: the largest
 * record). Returns 0, or -1 (an I/O error or fn's -1; message in err). */
int journal_replay(Journal *j, JournalReplayFn fn, void *ctx, char *err,
                   size_t errcap);

/* After the replay and a sync of every shard (so nothing in the files is
 * needed any more): (re)creates each file zero-filled at j->size bytes
 * unless it already has that size, and sets the next record to offset 0
 * of file 0 with a generation above every one seen. With size 0 removes
 * the files instead. Returns 0, or -1 with a message in err. */
int journal_reset(Journal *j, char *err, size_t errcap);

/* Nonzero if a record of len payload bytes fits in one (empty) file. */
int journal_fits(const Journal *j, size_t len);

/* Nonzero if a record of len payload bytes does not fit in what is left
 * of the current file (journal_roll first). */
int journal_full(const Journal *j, size_t len);

/* Mutation thread: the next record goes to offset 0 of the next file,
 * under a new generation. The caller has made what that file holds
 * durable elsewhere (a WAL sync of every shard). */
void journal_roll(Journal *j);

/* Mutation thread: writes one record (group, nrec records, flags
 * JOURNAL_F_*, the payload in iov[1..iovcnt), len bytes; iov[0] is set
 * here to the header) at the
 * current offset of file j->cur and, if sync, syncs the file, both through
 * the StoreIO seam; *sync_ns: nanoseconds the sync took (0 without).
 * journal_fits and !journal_full must hold. Returns 0, or -1 with a
 * malloc'd message in *errmsg (then nothing may be acknowledged). */
int journal_append(Journal *j, uint64_t group, uint32_t nrec, unsigned flags,
                   struct iovec *iov, int iovcnt, size_t len, int sync,
                   uint64_t *sync_ns, char **errmsg);

/* Closes the files and frees the path. */
void journal_close(Journal *j);

/* The StoreIO journal functions of the plain file system: pwritev(2) of the
 * whole iov at off (retrying short writes) and fdatasync(2). Each returns 0,
 * or -1 with a malloc'd message in *errmsg. ctx is unused. */
int journal_io_write(void *ctx, int fd, const struct iovec *iov, int iovcnt,
                     uint64_t off, char **errmsg);
int journal_io_sync(void *ctx, int fd, char **errmsg);

#endif
