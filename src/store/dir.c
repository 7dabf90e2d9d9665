/* store/dir.c - the data directory: lock and FORMAT (see store/dir.h). */
#include "store/dir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/types.h"
#include "store/util.h"

int
dir_path(const StoreDir *d, const char *name, char *buf, size_t cap, char *err,
         size_t errcap)
{
    int n = snprintf(buf, cap, "%s/%s", d->path, name);

    if (n < 0 || (size_t)n >= cap)
        return util_fail(err, errcap, "path too long: %s/%s", d->path, name);
    return 0;
}

static int
dir_prepare(StoreDir *d, char *err, size_t errcap)
{
    struct stat st;

    if (mkdir(d->path, 0755) < 0 && errno != EEXIST)
        return util_fail(err, errcap, "mkdir %s: %s", d->path, strerror(errno));
    if (stat(d->path, &st) < 0)
        return util_fail(err, errcap, "stat %s: %s", d->path, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return util_fail(err, errcap, "%s is not a directory", d->path);
    return 0;
}

/* Takes <dir>/lock for the Store's life and writes our pid into it. */
static int
lock_take(StoreDir *d, char *err, size_t errcap)
{
    char path[4096], pid[32];

    if (dir_path(d, "lock", path, sizeof path, err, errcap) < 0) return -1;
    d->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (d->lock_fd < 0)
        return util_fail(err, errcap, "open %s: %s", path, strerror(errno));
    if (flock(d->lock_fd, LOCK_EX | LOCK_NB) < 0) {
        if (errno != EWOULDBLOCK)
            return util_fail(err, errcap, "flock %s: %s", path,
                             strerror(errno));
        ssize_t n = pread(d->lock_fd, pid, sizeof pid - 1, 0);
        n = n < 0 ? 0 : n;
        while (n > 0 && (pid[n - 1] == '\n' || pid[n - 1] == ' '))
            n--;
        pid[n] = '\0';
        return util_fail(err, errcap,
                         "data directory %s is locked by another rockstalkd "
                         "(pid %s)",
                         d->path, n ? pid : "unknown");
    }
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(d->lock_fd, 0) < 0 || pwrite(d->lock_fd, pid, n, 0) != n)
        return util_fail(err, errcap, "write %s: %s", path, strerror(errno));
    return 0;
}

/* Writes <dir>/FORMAT atomically: temp file, fsync, rename, fsync dir. */
static int
format_write(StoreDir *d, char *err, size_t errcap)
{
    char tmp[4096], path[4096], text[64];
    int n = snprintf(text, sizeof text, "rockstalk-format %d\nshards %d\n",
                     STORE_FORMAT_VERSION, d->nshards);

    if (dir_path(d, "FORMAT.tmp", tmp, sizeof tmp, err, errcap) < 0 ||
        dir_path(d, "FORMAT", path, sizeof path, err, errcap) < 0)
        return -1;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return util_fail(err, errcap, "open %s: %s", tmp, strerror(errno));
    if (write(fd, text, n) != n || fsync(fd) < 0) {
        int e = errno;
        close(fd);
        return util_fail(err, errcap, "write %s: %s", tmp, strerror(e));
    }
    close(fd);
    if (rename(tmp, path) < 0)
        return util_fail(err, errcap, "rename %s: %s", tmp, strerror(errno));
    return util_sync_dir(d->path, err, errcap);
}

/* Parses FORMAT into *version and *nshards. Returns 1 if read, 0 if the
 * file does not exist, -1 on error. */
static int
format_read(StoreDir *d, unsigned *version, int *nshards, char *err,
            size_t errcap)
{
    char path[4096], text[128];

    if (dir_path(d, "FORMAT", path, sizeof path, err, errcap) < 0) return -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) return 0;
    if (fd < 0)
        return util_fail(err, errcap, "open %s: %s", path, strerror(errno));
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n < 0)
        return util_fail(err, errcap, "read %s: %s", path, strerror(errno));
    text[n] = '\0';
    if (sscanf(text, "rockstalk-format %u shards %d", version, nshards) != 2)
        return util_fail(err, errcap, "%s: malformed", path);
    return 1;
}

/* Checks (or, for a new directory, writes) FORMAT and sets d->nshards.
 * Refuses a newer format or a different requested shard count before
 * anything in the directory is touched. */
static int
format_check(StoreDir *d, int want, char *err, size_t errcap)
{
    unsigned version;
    int have;
    struct stat st;
    char path[4096];

    int r = format_read(d, &version, &have, err, errcap);
    if (r < 0) return -1;
    if (r == 0) {
        if (dir_path(d, "shard-00", path, sizeof path, err, errcap) < 0)
            return -1;
        if (stat(path, &st) == 0)
            return util_fail(err, errcap,
                             "data directory %s has shards but no "
                             "FORMAT file",
                             d->path);
        d->nshards = want ? want : STORE_DEFAULT_SHARDS;
        return format_write(d, err, errcap);
    }
    if (version > STORE_FORMAT_VERSION || version == 0)
        return util_fail(err, errcap,
                         "data directory %s has format version %u; this "
                         "rockstalkd reads version %d",
                         d->path, version, STORE_FORMAT_VERSION);
    if (have < 1 || have > STORE_SHARDS_MAX)
        return util_fail(err, errcap, "data directory %s: bad shard count %d",
                         d->path, have);
    if (want && want != have)
        return util_fail(
            err, errcap,
            "data directory %s has %d shards but -S %d asks for %d; "
            "the shard count cannot change (omit -S or use -S %d)",
            d->path, have, want, want, have);
    d->nshards = have;
    /* An older format is upgraded once the checks passed: version 2 adds
     * the commit journal, which a version 1 server would not replay. */
    return version < STORE_FORMAT_VERSION ? format_write(d, err, errcap) : 0;
}

int
dir_open(StoreDir *d, const char *path, int want, char *err, size_t errcap)
{
    d->lock_fd = -1;
    if (!(d->path = strdup(path)))
        return util_fail(err, errcap, "out of memory");
    if (dir_prepare(d, err, errcap) < 0 || lock_take(d, err, errcap) < 0)
        return -1;
    return format_check(d, want, err, errcap);
}

void
dir_close(StoreDir *d)
{
    if (d->lock_fd >= 0) close(d->lock_fd); /* releases the flock */
    d->lock_fd = -1;
    free(d->path);
    d->path = NULL;
}
