/* store/util.h - small helpers shared by the store modules (src/store/):
 * error formatting, the monotonic clock, allocation that aborts.
 *
 * Threads: any; no state. Calls: libc only. Internal to the store: only
 * the store/ modules include it (the loop side includes store.h alone).
 */
#ifndef ROCKSTALK_STORE_UTIL_H
#define ROCKSTALK_STORE_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* Formats a message into err (errcap bytes, NUL-terminated; nothing if err
 * is NULL or errcap 0) and returns -1, so `return util_fail(...)` reports an
 * error in the store's 0 / -1 convention (store.h). */
int util_fail(char *err, size_t errcap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* fsyncs directory path, so that a rename, a creation or an unlink in it
 * is durable (fsync(2) on the directory, as ext4 and XFS require). Returns
 * 0, or -1 with a message in err naming the path. */
int util_sync_dir(const char *path, char *err, size_t errcap);

/* CLOCK_MONOTONIC now, nanoseconds. */
int64_t util_now_ns(void);

/* realloc(3) that aborts on exhaustion (store.h: memory exhaustion aborts).
 * Returns the block; the caller owns it. */
void *util_xrealloc(void *p, size_t n);

/* A spinning thread's hint to the CPU (x86 PAUSE; nothing elsewhere). */
static inline void
util_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

#endif
