/* import.c - --import-binlog (import.h). */
#include "server/import.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/common.h"
#include "base/log.h"
#include "server/bsbinlog.h"
#include "store/store.h"

/* Jobs or body bytes handed to the store before waiting for it. */
#define IMPORT_BATCH_JOBS 4096
#define IMPORT_BATCH_BYTES (16u << 20)

/* Counts for the summary line. */
typedef struct Counts {
    size_t ready, reserved, delayed, due, buried;
} Counts;

/* 0 if dir is missing or empty, else -1 with a message. */
static int
dir_empty(const char *dir, char *err, size_t errcap)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    if (!d) {
        if (errno == ENOENT) return 0;
        snprintf(err, errcap, "%s: %s", dir, strerror(errno));
        return -1;
    }
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    if (!n) return 0;
    snprintf(err, errcap,
             "--import-binlog: the data directory %s is not empty; "
             "importing needs a new (missing or empty) one",
             dir);
    return -1;
}

/* -1 (message in err) while a process holds beanstalkd's lock file in dir
 * (its waldirlock: an fcntl write lock on DIR/lock). */
static int
beanstalkd_gone(const char *dir, char *err, size_t errcap)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/lock", dir);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return 0; /* no lock file (or unreadable): none holds it */
    struct flock lk = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    int held = fcntl(fd, F_GETLK, &lk) == 0 && lk.l_type != F_UNLCK;
    close(fd);
    if (!held) return 0;
    snprintf(err, errcap,
             "--import-binlog: process %ld (beanstalkd?) still holds %s: "
             "stop it first",
             (long)lk.l_pid, path);
    return -1;
}

static int
nothing_stored(void *ctx, const StoreJob *job)
{
    (void)ctx, (void)job;
    return -1; /* the directory was empty: a job here is a surprise */
}

/* The stored record of j. */
static void
to_store(const BsLog *log, const BsJob *j, StoreJob *o)
{
    memset(o, 0, sizeof *o);
    o->id = j->id;
    o->state = j->state == BS_BURIED    ? STORE_BURIED
               : j->state == BS_DELAYED ? STORE_DELAYED
                                        : STORE_READY;
    o->flags = j->body_size <= STORE_INLINE_MAX ? STORE_F_INLINE : 0;
    o->pri = j->pri;
    uint64_t ttr = (uint64_t)j->ttr_ns / NS_PER_SEC;
    o->ttr = ttr ? (uint32_t)ttr : 1; /* beanstalkd makes a TTR of 0 1 s */
    o->delay = (uint32_t)((uint64_t)j->delay_ns / NS_PER_SEC);
    o->body_size = j->body_size;
    o->reserves = j->reserves;
    o->timeouts = j->timeouts;
    o->releases = j->releases;
    o->buries = j->buries;
    o->kicks = j->kicks;
    o->created_at_ns = j->created_at_ns;
    if (j->state == BS_DELAYED) o->ready_at_ns = j->deadline_ns;
    const char *t = log->tubes[j->tube];
    o->tube_len = (uint8_t)strlen(t);
    memcpy(o->tube, t, o->tube_len);
}

/* Hands what was added to the store and waits until it is acknowledged
 * (written, and synced under -f 0). */
static int
drain(Store *st, uint64_t seq, char *err, size_t errcap)
{
    store_flush(st);
    while (store_acked_seq(st) < seq) {
        if (store_failed(st, err, errcap)) return -1;
        nanosleep(&(struct timespec){0, 200000}, NULL);
    }
    return 0;
}

/* Puts every job of log into st; *c counts them. */
static int
put_all(const BsLog *log, Store *st, Counts *c, char *err, size_t errcap)
{
    uint64_t seq = 0;
    size_t bytes = 0, since = 0;
    int64_t now = wall_ns();
    for (size_t i = 0; i < log->njobs; i++) {
        const BsJob *j = &log->jobs[i];
        StoreJob o;
        char *body = malloc(j->body_size ? j->body_size : 1);
        if (!body) return snprintf(err, errcap, "out of memory"), -1;
        if (bslog_body(log, j, body, err, errcap) < 0) return free(body), -1;
        to_store(log, j, &o);
        store_add_put(st, ++seq, &o, body); /* copies the body */
        free(body);
        c->ready += j->state == BS_READY;
        c->reserved += j->reserved;
        c->delayed += j->state == BS_DELAYED;
        c->due += j->state == BS_DELAYED && j->deadline_ns <= now;
        c->buried += j->state == BS_BURIED;
        bytes += j->body_size;
        if (++since == IMPORT_BATCH_JOBS || bytes >= IMPORT_BATCH_BYTES) {
            if (drain(st, seq, err, errcap) < 0) return -1;
            since = bytes = 0;
        }
    }
    uint64_t top = log->njobs ? log->jobs[log->njobs - 1].id : 0;
    if (log->max_id > top) {
        /* beanstalkd's highest id belongs to a deleted job: a put and a
         * delete of it leave the store's high-water mark there, so ids are
         * never reused, here or after a restart */
        StoreJob o = {.id = log->max_id,
                      .state = STORE_READY,
                      .flags = STORE_F_INLINE,
                      .ttr = 1,
                      .tube_len = 7};
        memcpy(o.tube, "default", 7);
        store_add_put(st, ++seq, &o, "");
        store_add_delete(st, ++seq, log->max_id, STORE_DEL_NO_BODY);
    }
    return drain(st, seq, err, errcap);
}

/* One line naming up to 10 tubes. */
static void
log_tubes(const BsLog *log)
{
    char line[1024];
    size_t n = 0;
    line[0] = '\0';
    for (size_t i = 0; i < log->ntubes && i < 10; i++)
        n += (size_t)snprintf(line + n, sizeof line - n, "%s%s", i ? " " : "",
                              log->tubes[i]);
    log_msg(0, "import: tubes: %s%s", line, log->ntubes > 10 ? " ..." : "");
}

static void
log_summary(const BsLog *log, const Counts *c)
{
    log_msg(0,
            "import: %zu jobs from %zu binlog files (%llu records): %zu ready "
            "(%zu of them were reserved), %zu delayed (%zu already due), "
            "%zu buried; %zu tubes; next id %llu",
            log->njobs, log->nfiles, (unsigned long long)log->records, c->ready,
            c->reserved, c->delayed, c->due, c->buried, log->ntubes,
            (unsigned long long)log->max_id + 1);
    if (log->ntubes) log_tubes(log);
    if (log->torn)
        log_msg(0,
                "import: %s: the last record, at offset %llu, was cut short "
                "(beanstalkd stopped while writing it): skipped, as "
                "beanstalkd skips it",
                log->files[log->nfiles - 1], (unsigned long long)log->torn_off);
}

int
import_binlog(const ServerConfig *cfg, char *err, size_t errcap)
{
    BsLog log;
    Store *st = NULL;
    Counts c = {0};
    uint64_t next_id = 1;
    char cerr[512];
    if (dir_empty(cfg->dir, err, errcap) < 0 ||
        beanstalkd_gone(cfg->import_dir, err, errcap) < 0)
        return -1;
    if (bslog_read(cfg->import_dir, cfg->max_job_size, &log, cerr,
                   sizeof cerr) < 0) {
        snprintf(err, errcap, "--import-binlog: %s", cerr);
        return -1;
    }
    /* No commit journal: its write-behind window would cancel the put and
     * delete of the high-water mark's job (store/pend.h) before they reach
     * RocksDB, and so the mark. The server's own start opens the journal. */
    StoreConfig sc = {.dir = cfg->dir,
                      .nshards = cfg->nshards,
                      .sync_mode = cfg->sync_mode,
                      .sync_interval_ms = cfg->sync_ms,
                      .journal_bytes = 0};
    int rc = store_open(&sc, &st, err, errcap);
    if (rc == 0)
        rc = store_recover(st, nothing_stored, NULL, &next_id, err, errcap);
    if (rc == 0) rc = store_start(st, err, errcap);
    if (rc == 0) rc = put_all(&log, st, &c, err, errcap);
    if (st && store_close(st, cerr, sizeof cerr) < 0 && rc == 0) {
        snprintf(err, errcap, "%s", cerr);
        rc = -1;
    }
    if (rc == 0) log_summary(&log, &c);
    bslog_free(&log);
    return rc;
}
