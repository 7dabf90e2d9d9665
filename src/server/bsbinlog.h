/* bsbinlog.h - a reader of beanstalkd's binlog (write-ahead log) files,
 * format version 7 (beanstalkd 1.10 to 1.13), for --import-binlog. Pure:
 * it reads files and returns the live jobs; it knows nothing of the store
 * or the queue (server/import.h writes them).
 *
 * The format, as beanstalkd writes it on x86-64 Linux (its file.c, walg.c,
 * dat.h): files DIR/binlog.N read in increasing N; each starts with a
 * native int, the version (7); then records, each a native int namelen,
 * namelen bytes of tube name, the 80-byte Jobrec (id u64, pri u32, delay
 * i64 ns, ttr i64 ns, body_size i32, created_at i64 ns, deadline_at i64 ns,
 * five u32 counters, state u8, padding) and, when namelen > 0 (a "full"
 * record), body_size bytes of body ending in CRLF. A later record of an id
 * replaces the earlier one's fields; state 0 deletes the job; a short
 * record (namelen 0) of an id never seen is ignored (its full record was in
 * a file beanstalkd already removed). A zero id ends a file (the zeroed
 * preallocated tail).
 *
 * Hostile input: every length and count is bounded (tube names by 200,
 * bodies by the caller's maximum and the file's size), memory grows only
 * with records actually present, and anything malformed is an error with
 * the file and offset, never a crash. A record cut short at the end of the
 * last file (beanstalkd stopped mid-write) is skipped, as beanstalkd skips
 * it; cut short anywhere else, it is an error. Thread: any (one caller). */
#ifndef ROCKSTALK_SERVER_BSBINLOG_H
#define ROCKSTALK_SERVER_BSBINLOG_H

#include <stddef.h>
#include <stdint.h>

/* The binlog format version read (beanstalkd's Walver). */
#define BS_WALVER 7
/* Longest tube name in a record, bytes (beanstalkd MAX_TUBE_NAME_LEN - 1). */
#define BS_TUBE_MAX 200
/* Most binlog.N files read from one directory. */
#define BS_FILES_MAX 100000

/* A live job's state after the import (a reserved job comes back ready). */
enum { BS_READY = 1, BS_DELAYED = 2, BS_BURIED = 3 };

/* One live job. Times are beanstalkd's: wall-clock nanoseconds since the
 * Unix epoch; durations are nanoseconds. */
typedef struct BsJob {
    uint64_t id;
    uint32_t pri;
    uint8_t state;    /* BS_READY, BS_DELAYED, BS_BURIED */
    uint8_t reserved; /* it was reserved when beanstalkd stopped */
    uint8_t live;     /* internal: 0 once deleted */
    uint32_t tube;    /* index into BsLog.tubes */
    int64_t delay_ns, ttr_ns;
    int64_t created_at_ns;
    int64_t deadline_ns; /* when a delayed job becomes ready */
    uint32_t reserves, timeouts, releases, buries, kicks;
    uint32_t body_size; /* bytes, without beanstalkd's trailing CRLF */
    uint32_t file;      /* index into BsLog.files of its full record */
    uint64_t body_off;  /* offset of the body in that file */
} BsJob;

/* What a directory held. Owned by the caller; bslog_free releases it. */
typedef struct BsLog {
    char **files; /* paths read, in order */
    size_t nfiles;
    char **tubes; /* NUL-terminated tube names, each once */
    size_t ntubes;
    BsJob *jobs; /* the live jobs, ascending id, after bslog_read */
    size_t njobs;
    uint64_t max_id;   /* highest id in any record (0: none) */
    uint64_t records;  /* records read */
    int torn;          /* the last file ended in a record cut short */
    uint64_t torn_off; /* ...at this offset */
    /* internal during the read: the id and tube indexes */
    size_t cap, *slot, nslot, *tslot, ntslot;
} BsLog;

/* Reads every binlog.N file of dir into *log (zeroed first). max_body: the
 * largest body accepted, bytes (without CRLF). Returns 0, or -1 with a
 * message naming the file and offset in err (log is then freed). Refuses a
 * dir without binlog files, a version other than BS_WALVER, a header cut
 * short, a negative or too long name or length, an unknown state, a body
 * without its CRLF or beyond max_body, a record cut short before the last
 * file's end, data after a file's end mark. */
int bslog_read(const char *dir, uint32_t max_body, BsLog *log, char *err,
               size_t errcap);

/* Reads job j's body (j->body_size bytes, without CRLF) into buf. Returns
 * 0, or -1 with a message in err. */
int bslog_body(const BsLog *log, const BsJob *j, char *buf, char *err,
               size_t errcap);

/* Frees what bslog_read allocated; log may then be read again. */
void bslog_free(BsLog *log);

#endif
