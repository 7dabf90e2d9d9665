/* common.h - small helpers shared by every module: time sources and the
 * protocol limits that size buffers. No state. */
#ifndef ROCKSTALK_COMMON_H
#define ROCKSTALK_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#define ROCKSTALK_VERSION "0.1.0"

/* Longest command line, CRLF included: "put" plus four numbers, or a command
 * with a 200-byte tube name ("pause-tube " + 200 + " " + 10 digits + CRLF)
 * fits; beanstalkd 1.12 uses the same 224-byte line buffer (its
 * LINE_BUF_SIZE), and its exact line-length behaviour depends on it. */
#define LINE_MAX_BYTES 224

/* Longest tube name in bytes (protocol: "at most 200 bytes"). */
#define TUBE_NAME_MAX 200

/* Default and hard maximum job body size in bytes (-z), as beanstalkd 1.12. */
#define JOB_SIZE_DEFAULT 65535
#define JOB_SIZE_LIMIT 1073741824

/* Priorities below this count as "urgent" in stats. */
#define URGENT_THRESHOLD 1024

/* A reserver blocked in reserve gets DEADLINE_SOON this long before one of
 * its reserved jobs' TTR runs out (nanoseconds). */
#define DEADLINE_SOON_NS ((int64_t)1000000000)

#define NS_PER_SEC ((int64_t)1000000000)

/* Formats a message into err (errcap bytes, NUL-terminated; nothing if
 * err is NULL or errcap is 0) and returns -1, so that `return errfmt(...)`
 * reports an error in the 0 / -1 convention of the modules below main. */
static inline int __attribute__((format(printf, 3, 4)))
errfmt(char *err, size_t errcap, const char *fmt, ...)
{
    if (err && errcap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errcap, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* Monotonic clock in nanoseconds (CLOCK_MONOTONIC): deadlines and timers. */
static inline int64_t
mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * NS_PER_SEC + ts.tv_nsec;
}

/* Wall clock in nanoseconds since the epoch (CLOCK_REALTIME): only for
 * persisted times (created_at, a delayed job's due time). */
static inline int64_t
wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * NS_PER_SEC + ts.tv_nsec;
}

#endif
