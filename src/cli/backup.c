/* backup.c - rockstalk backup DIR (see backup.h). */
#include "backup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <zlib.h>

/* The snapshot stream's framing (src/store/ship.h, PROTOCOL.md 11.6). */
#define SHIP_MAGIC "RSSHIP01"
#define SHIP_VERSION 1
#define SHIP_END 0xFF
#define SHIP_CF_META 1
#define SHIP_SHARDS_MAX 64
#define SHIP_KEY_MAX 1024u
#define SHIP_VALUE_MAX ((uint32_t)64 << 20)

/* What the parser waits for next. */
enum { P_HDR, P_IDX, P_CF, P_LENS, P_DATA, P_END, P_DONE };

/* The stream parser: checks the framing as the bytes pass. */
typedef struct Parse {
    int state;
    unsigned char small[16]; /* a header being gathered */
    size_t have, need;
    uint64_t skip; /* P_DATA: key and value bytes still to pass */
    uint32_t nshards, shard;
    uint64_t frames, all_frames, bytes;
    uLong crc;
} Parse;

static uint32_t
get32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static uint64_t
get64(const unsigned char *p)
{
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static void
expect(Parse *ps, int state, size_t need)
{
    ps->state = state;
    ps->have = 0;
    ps->need = need;
}

/* A gathered header is complete: checks it and moves on. */
static int
parse_header(Parse *ps, char *err, size_t errcap)
{
    const unsigned char *h = ps->small;

    switch (ps->state) {
    case P_HDR:
        ps->nshards = get32(h + 12);
        if (memcmp(h, SHIP_MAGIC, 8) || get32(h + 8) != SHIP_VERSION ||
            ps->nshards < 1 || ps->nshards > SHIP_SHARDS_MAX) {
            snprintf(err, errcap, "the server sent no snapshot stream");
            return -1;
        }
        expect(ps, P_IDX, 4);
        return 0;
    case P_IDX:
        if (get32(h) != ps->shard) {
            snprintf(err, errcap, "stream: shard %u where %u was due", get32(h),
                     ps->shard);
            return -1;
        }
        ps->frames = 0;
        ps->crc = crc32_z(0, NULL, 0);
        expect(ps, P_CF, 1);
        return 0;
    case P_CF:
        if (h[0] == SHIP_END) {
            expect(ps, P_END, 12);
            return 0;
        }
        ps->crc = crc32_z(ps->crc, h, 1);
        expect(ps, P_LENS, 8);
        return 0;
    case P_LENS:
        ps->crc = crc32_z(ps->crc, h, 8);
        if (get32(h) > SHIP_KEY_MAX || get32(h + 4) > SHIP_VALUE_MAX) {
            snprintf(err, errcap, "stream: a frame out of bounds");
            return -1;
        }
        ps->frames++;
        ps->skip = (uint64_t)get32(h) + get32(h + 4);
        expect(ps, ps->skip ? P_DATA : P_CF, ps->skip ? 0 : 1);
        return 0;
    default: /* P_END */
        if (get64(h) != ps->frames || get32(h + 8) != (uint32_t)ps->crc) {
            snprintf(err, errcap,
                     "stream: shard %u's end frame does not match what "
                     "came (frames or CRC)",
                     ps->shard);
            return -1;
        }
        ps->all_frames += ps->frames;
        ps->shard++;
        if (ps->shard == ps->nshards)
            ps->state = P_DONE;
        else
            expect(ps, P_IDX, 4);
        return 0;
    }
}

/* Passes p[0..n) through the parser; *used: how many bytes belong to the
 * stream (the rest follows its end). Returns 0, or -1 with a message. */
static int
parse_feed(Parse *ps, const unsigned char *p, size_t n, size_t *used, char *err,
           size_t errcap)
{
    size_t i = 0;

    while (i < n && ps->state != P_DONE) {
        if (ps->state == P_DATA) {
            size_t take = n - i < ps->skip ? n - i : (size_t)ps->skip;
            ps->crc = crc32_z(ps->crc, p + i, take);
            i += take;
            ps->skip -= take;
            if (!ps->skip) expect(ps, P_CF, 1);
            continue;
        }
        size_t take = ps->need - ps->have;
        if (take > n - i) take = n - i;
        memcpy(ps->small + ps->have, p + i, take);
        ps->have += take;
        i += take;
        if (ps->have == ps->need && parse_header(ps, err, errcap) < 0)
            return -1;
    }
    ps->bytes += i;
    *used = i;
    return 0;
}

/* 0 if dir is missing (made now, *made set) or an empty directory;
 * else -1 with a message. */
static int
prepare_dir(const char *dir, int *made, char *err, size_t errcap)
{
    DIR *d;
    struct dirent *e;

    *made = 0;
    if (mkdir(dir, 0755) == 0) {
        *made = 1;
        return 0;
    }
    if (errno != EEXIST || !(d = opendir(dir))) {
        snprintf(err, errcap, "%s: %s", dir, strerror(errno));
        return -1;
    }
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            closedir(d);
            snprintf(err, errcap,
                     "%s is not empty: a backup goes into a new "
                     "directory",
                     dir);
            return -1;
        }
    }
    closedir(d);
    return 0;
}

/* Writes p[0..n) to fd whole. */
static int
write_all(int fd, const unsigned char *p, size_t n, char *err, size_t errcap)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) {
            snprintf(err, errcap, "write: %s", strerror(errno));
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Reads the line after the stream (its first bytes already in line[0..*len))
 * and checks it is "BACKUP_DONE <jobs> <bytes>" with the bytes received. */
static int
read_done(Session *s, char *line, size_t cap, size_t len, const Parse *ps,
          BackupResult *res, char *err, size_t errcap)
{
    unsigned long long jobs, bytes;

    while (!memchr(line, '\n', len)) {
        if (len >= cap - 1) break;
        long r = client_recv(&s->conn, line + len, cap - 1 - len, err, errcap);
        if (r <= 0) {
            if (r == 0)
                snprintf(err, errcap, "the stream ended without BACKUP_DONE");
            return -1;
        }
        len += (size_t)r;
    }
    line[len] = '\0';
    if (sscanf(line, "BACKUP_DONE %llu %llu\r\n", &jobs, &bytes) != 2 ||
        bytes != ps->bytes) {
        snprintf(err, errcap, "the stream ended without BACKUP_DONE");
        return -1;
    }
    res->jobs = jobs;
    return 0;
}

/* Receives the stream into fd, then its BACKUP_DONE line. */
static int
receive(Session *s, int fd, Parse *ps, BackupResult *res, char *err,
        size_t errcap)
{
    unsigned char *buf = malloc(BACKUP_CHUNK);
    char line[128];
    size_t used = 0, rest = 0;
    long r = 0;
    int rc = -1;

    if (!buf) {
        snprintf(err, errcap, "out of memory");
        return -1;
    }
    expect(ps, P_HDR, 16);
    while (ps->state != P_DONE) {
        r = client_recv(&s->conn, buf, BACKUP_CHUNK, err, errcap);
        if (r == 0) snprintf(err, errcap, "the stream was cut short");
        if (r <= 0) goto out;
        if (parse_feed(ps, buf, (size_t)r, &used, err, errcap) < 0 ||
            write_all(fd, buf, used, err, errcap) < 0)
            goto out;
    }
    rest = (size_t)r - used; /* the start of the line after the stream */
    if (rest >= sizeof line) rest = sizeof line - 1;
    memcpy(line, buf + used, rest);
    rc = read_done(s, line, sizeof line, rest, ps, res, err, errcap);
out:
    free(buf);
    return rc;
}

/* Makes the received file durable under its final name. */
static int
finish(int fd, const char *part, const char *final, const char *dir, char *err,
       size_t errcap)
{
    int dfd;

    if (fsync(fd) < 0 || rename(part, final) < 0) {
        snprintf(err, errcap, "%s: %s", final, strerror(errno));
        return -1;
    }
    if ((dfd = open(dir, O_RDONLY | O_DIRECTORY)) < 0 || fsync(dfd) < 0) {
        snprintf(err, errcap, "fsync %s: %s", dir, strerror(errno));
        if (dfd >= 0) close(dfd);
        return -1;
    }
    close(dfd);
    return 0;
}

/* Asks for the backup; RC_OK once the server answered BACKUP. */
static int
ask(Session *s, char *err, size_t errcap)
{
    Reply r;
    static const char cmd[] = "rockstalk-backup\r\n";

    if (client_send(&s->conn, cmd, sizeof cmd - 1, err, errcap) < 0 ||
        client_read_reply(&s->conn, &r, err, errcap) < 0)
        return RC_FAIL;
    int ok = reply_is(&r, "BACKUP");
    if (!ok)
        snprintf(err, errcap, "the server refused the backup: %s%s", r.line,
                 reply_is(&r, "UNKNOWN_COMMAND")
                     ? " (a rockstalkd without rockstalk-backup, or a "
                       "cluster node)"
                     : "");
    reply_free(&r);
    return ok ? RC_OK : RC_REPLY;
}

static double
now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int
backup_run(Session *s, const char *dir, BackupResult *res, char *err,
           size_t errcap)
{
    char part[4096], final[4096];
    Parse ps = {0};
    double t0 = now_s();
    int made, fd = -1, rc;

    memset(res, 0, sizeof *res);
    if ((size_t)snprintf(part, sizeof part, "%s/%s", dir, BACKUP_PART) >=
            sizeof part ||
        (size_t)snprintf(final, sizeof final, "%s/%s", dir, BACKUP_FILE) >=
            sizeof final) {
        snprintf(err, errcap, "%s: path too long", dir);
        return RC_FAIL;
    }
    if (prepare_dir(dir, &made, err, errcap) < 0) return RC_FAIL;
    if ((fd = open(part, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)) < 0) {
        snprintf(err, errcap, "%s: %s", part, strerror(errno));
        rc = RC_FAIL;
    } else if ((rc = ask(s, err, errcap)) == RC_OK &&
               (receive(s, fd, &ps, res, err, errcap) < 0 ||
                finish(fd, part, final, dir, err, errcap) < 0)) {
        rc = RC_FAIL;
    }
    if (fd >= 0) close(fd);
    if (rc != RC_OK) { /* no half copy: the part goes, and what this made */
        unlink(part);
        if (made) rmdir(dir);
        return rc;
    }
    res->bytes = ps.bytes;
    res->frames = ps.all_frames;
    res->shards = ps.nshards;
    res->seconds = now_s() - t0;
    return RC_OK;
}
