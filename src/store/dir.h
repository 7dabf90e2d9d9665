/* store/dir.h - the data directory: its lock and its FORMAT file.
 *
 *   <dir>/lock       flock(LOCK_EX|LOCK_NB) held for the store's life; holds
 *                    the owner's pid (informational, for the error message)
 *   <dir>/FORMAT     "rockstalk-format V\nshards N\n", written once,
 *                    atomically (temp file, fsync, rename, fsync of dir)
 *   <dir>/shard-NN/  one RocksDB instance per shard (store/shard.h)
 *
 * Threads: the main thread (store_open, store_close). Calls: store_util.
 */
#ifndef ROCKSTALK_STORE_DIR_H
#define ROCKSTALK_STORE_DIR_H

#include <stddef.h>

/* An open data directory (dir_open); owned by the store. */
typedef struct StoreDir {
    char *path;  /* owned */
    int lock_fd; /* -1: not locked */
    int nshards; /* as recorded in FORMAT, once dir_open succeeded */
} StoreDir;

/* Opens the data directory path (creating it if missing): takes the lock
 * (fails if another server holds it) and checks FORMAT, or writes it for a
 * new directory with want shards (0: STORE_DEFAULT_SHARDS). Refuses a newer
 * format, or a want other than the recorded count, before anything in the
 * directory is touched. Returns 0, or -1 with a message in err; call
 * dir_close either way. */
int dir_open(StoreDir *d, const char *path, int want, char *err, size_t errcap);

/* Writes "<dir>/<name>" into buf (cap bytes). Returns 0, or -1 (path too
 * long, message in err). */
int dir_path(const StoreDir *d, const char *name, char *buf, size_t cap,
             char *err, size_t errcap);

/* Releases the lock (closing its descriptor) and frees the path. */
void dir_close(StoreDir *d);

#endif
