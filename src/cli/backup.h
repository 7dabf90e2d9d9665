/* backup.h - rockstalk backup DIR: asks a standalone rockstalkd for
 * rockstalk-backup (PROTOCOL.md 11.7) and writes the snapshot stream it
 * sends, checked frame by frame (every shard's end frame: count and
 * CRC-32) and closed by BACKUP_DONE, into a new data directory as
 * DIR/RESTORE, which rockstalkd -b DIR loads at its first start. The
 * stream goes to DIR/RESTORE.part first and is renamed once complete and
 * synced; a failure removes it (and DIR if this made it). Memory: one
 * BACKUP_CHUNK buffer, whatever the store holds. Single-threaded; errors
 * come back in err, never printed. */
#ifndef ROCKSTALK_CLI_BACKUP_H
#define ROCKSTALK_CLI_BACKUP_H

#include <stddef.h>
#include <stdint.h>

#include "session.h"

/* Bytes read and written at a time. */
#define BACKUP_CHUNK ((size_t)64 << 10)

/* The names in DIR: the finished stream and the one being written. */
#define BACKUP_FILE "RESTORE"
#define BACKUP_PART "RESTORE.part"

/* What a backup copied. */
typedef struct BackupResult {
    uint64_t jobs, bytes, frames;
    uint32_t shards;
    double seconds;
} BackupResult;

/* Runs the backup over s (connected, authenticated) into dir, which must
 * be missing or empty. Returns RC_OK with *res filled; RC_REPLY when the
 * server refuses (its reply line in err); RC_FAIL with a message in err
 * (dir not empty or not writable, a stream cut short or damaged). */
int backup_run(Session *s, const char *dir, BackupResult *res, char *err,
               size_t errcap);

#endif
