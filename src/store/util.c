/* store/util.c - helpers of the store modules (see store/util.h). */
#include "store/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int
util_fail(char *err, size_t errcap, const char *fmt, ...)
{
    va_list ap;

    if (err && errcap) {
        va_start(ap, fmt);
        vsnprintf(err, errcap, fmt, ap);
        va_end(ap);
    }
    return -1;
}

int
util_sync_dir(const char *path, char *err, size_t errcap)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    if (fd < 0 || fsync(fd) < 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        return util_fail(err, errcap, "fsync %s: %s", path, strerror(e));
    }
    close(fd);
    return 0;
}

int64_t
util_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void *
util_xrealloc(void *p, size_t n)
{
    p = realloc(p, n);
    if (!p) abort(); /* store.h: memory exhaustion aborts */
    return p;
}
