/* bsbinlog.c - beanstalkd's binlog files, version 7, read (bsbinlog.h). */
#include "server/bsbinlog.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/bytes.h"
#include "base/common.h"
#include "proto/proto.h"

/* beanstalkd's Jobrec states (dat.h). */
enum { ST_INVALID, ST_READY, ST_RESERVED, ST_BURIED, ST_DELAYED };

/* sizeof(Jobrec) on x86-64: the offsets of its fields (dat.h's struct with
 * the compiler's natural alignment). */
#define JR_SIZE 80
#define NS_MAX ((int64_t)UINT32_MAX * 1000000000)

/* One file being read. */
typedef struct Rd {
    FILE *f;
    const char *path;
    uint64_t size; /* bytes */
    int last;      /* the last file of the directory */
} Rd;

static uint64_t
hash64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

/* The job of id in log (live or not), or NULL. */
static BsJob *
find(BsLog *log, uint64_t id)
{
    if (!log->nslot) return NULL;
    for (size_t i = hash64(id) & (log->nslot - 1);;
         i = (i + 1) & (log->nslot - 1)) {
        if (log->slot[i] == SIZE_MAX) return NULL;
        if (log->jobs[log->slot[i]].id == id) return &log->jobs[log->slot[i]];
    }
}

/* Rebuilds the id index with n slots (a power of two). */
static int
reindex(BsLog *log, size_t n)
{
    size_t *slot = malloc(n * sizeof *slot);
    if (!slot) return -1;
    memset(slot, 0xff, n * sizeof *slot);
    for (size_t k = 0; k < log->njobs; k++) {
        size_t i = hash64(log->jobs[k].id) & (n - 1);
        while (slot[i] != SIZE_MAX)
            i = (i + 1) & (n - 1);
        slot[i] = k;
    }
    free(log->slot);
    log->slot = slot;
    log->nslot = n;
    return 0;
}

/* A new job of id in log (zeroed but for its id), or NULL (no memory). */
static BsJob *
add(BsLog *log, uint64_t id)
{
    if (log->njobs == log->cap) {
        size_t cap = log->cap ? 2 * log->cap : 1024;
        BsJob *jobs = realloc(log->jobs, cap * sizeof *jobs);
        if (!jobs) return NULL;
        log->jobs = jobs;
        log->cap = cap;
    }
    if (2 * (log->njobs + 1) > log->nslot &&
        reindex(log, log->nslot ? 2 * log->nslot : 2048) < 0)
        return NULL;
    BsJob *j = &log->jobs[log->njobs];
    memset(j, 0, sizeof *j);
    j->id = id;
    size_t i = hash64(id) & (log->nslot - 1);
    while (log->slot[i] != SIZE_MAX)
        i = (i + 1) & (log->nslot - 1);
    log->slot[i] = log->njobs++;
    return j;
}

static uint64_t
hash_name(const char *name)
{
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */
    for (; *name; name++)
        h = (h ^ (unsigned char)*name) * 0x100000001b3ULL;
    return h;
}

/* The slot of name in the tube index (its tube's, or the empty one where
 * it would go). */
static size_t
tube_slot(const BsLog *log, const char *name)
{
    size_t i = hash_name(name) & (log->ntslot - 1);
    while (log->tslot[i] != SIZE_MAX &&
           strcmp(log->tubes[log->tslot[i]], name) != 0)
        i = (i + 1) & (log->ntslot - 1);
    return i;
}

/* Makes room for one more tube: the array and the index (at most half
 * full). Returns 0, or -1 (no memory). */
static int
tube_room(BsLog *log)
{
    if ((log->ntubes & (log->ntubes - 1)) == 0) { /* 0, 1, 2, 4...: grow */
        char **t = realloc(log->tubes,
                           (log->ntubes ? 2 * log->ntubes : 1) * sizeof *t);
        if (!t) return -1;
        log->tubes = t;
    }
    if (2 * (log->ntubes + 1) <= log->ntslot) return 0;
    size_t n = log->ntslot ? 2 * log->ntslot : 64;
    size_t *old = log->tslot;
    if (!(log->tslot = malloc(n * sizeof *log->tslot))) {
        log->tslot = old;
        return -1;
    }
    memset(log->tslot, 0xff, n * sizeof *log->tslot);
    log->ntslot = n;
    for (size_t k = 0; k < log->ntubes; k++)
        log->tslot[tube_slot(log, log->tubes[k])] = k;
    free(old);
    return 0;
}

/* The index of tube name in log->tubes, added if new; -1: no memory. */
static long
tube_index(BsLog *log, const char *name)
{
    if (log->ntslot) {
        size_t i = tube_slot(log, name);
        if (log->tslot[i] != SIZE_MAX) return (long)log->tslot[i];
    }
    if (tube_room(log) < 0 || !(log->tubes[log->ntubes] = strdup(name)))
        return -1;
    log->tslot[tube_slot(log, name)] = log->ntubes;
    return (long)log->ntubes++;
}

/* Whether bytes [from, rd->size) of the file are all zero (beanstalkd
 * preallocates its files with zeros). Leaves the position undefined. */
static int
zero_from(Rd *rd, uint64_t from)
{
    unsigned char buf[4096];
    size_t n;
    if (fseeko(rd->f, (off_t)from, SEEK_SET) < 0) return 0;
    while ((n = fread(buf, 1, sizeof buf, rd->f)) > 0)
        for (size_t i = 0; i < n; i++)
            if (buf[i]) return 0;
    return !ferror(rd->f);
}

/* A record starting at off is cut short by the file's end: the zeroed
 * tail (1: done), a torn last record (1: done, noted), or an error. */
static int
cut_short(BsLog *log, Rd *rd, uint64_t off, char *err, size_t errcap)
{
    if (zero_from(rd, off)) return 1;
    if (!rd->last)
        return errfmt(err, errcap,
                      "%s: record at offset %llu cut short by the end of the "
                      "file (%llu bytes), and it is not the last file",
                      rd->path, (unsigned long long)off,
                      (unsigned long long)rd->size);
    log->torn = 1;
    log->torn_off = off;
    return 1;
}

/* The decoded Jobrec of a record. */
typedef struct Rec {
    uint64_t id;
    uint32_t pri, counts[5];
    int64_t delay, ttr, created, deadline;
    int32_t body_size;
    uint8_t state;
} Rec;

static void
decode(const unsigned char *b, Rec *r)
{
    r->id = le_get64(b);
    r->pri = le_get32(b + 8);
    r->delay = (int64_t)le_get64(b + 16);
    r->ttr = (int64_t)le_get64(b + 24);
    r->body_size = (int32_t)le_get32(b + 32);
    r->created = (int64_t)le_get64(b + 40);
    r->deadline = (int64_t)le_get64(b + 48);
    for (int i = 0; i < 5; i++)
        r->counts[i] = le_get32(b + 56 + 4 * i);
    r->state = b[76];
}

/* Copies a record's fields into j (its tube and body stay). */
static void
set_fields(BsJob *j, const Rec *r)
{
    j->pri = r->pri;
    j->reserved = r->state == ST_RESERVED;
    j->state = r->state == ST_BURIED    ? BS_BURIED
               : r->state == ST_DELAYED ? BS_DELAYED
                                        : BS_READY;
    j->delay_ns = r->delay;
    j->ttr_ns = r->ttr;
    j->created_at_ns = r->created;
    j->deadline_ns = r->deadline;
    j->reserves = r->counts[0];
    j->timeouts = r->counts[1];
    j->releases = r->counts[2];
    j->buries = r->counts[3];
    j->kicks = r->counts[4];
    j->live = 1;
}

/* A tube name beanstalkd could have accepted. */
static int
name_ok(const char *name, size_t len)
{
    if (len == 0 || name[0] == '-') return 0;
    for (size_t i = 0; i < len; i++)
        if (!proto_name_char(name[i])) return 0;
    return 1;
}

/* Checks a full record's body (at off, r->body_size bytes with CRLF) and
 * skips it. Returns 0, 1 (cut short: the file is done) or -1. */
static int
take_body(BsLog *log, Rd *rd, uint64_t rec, uint64_t off, const Rec *r,
          uint32_t max_body, char *err, size_t errcap)
{
    unsigned char crlf[2];
    if (r->body_size < 2 || (uint32_t)r->body_size - 2 > max_body)
        return errfmt(err, errcap,
                      "%s: offset %llu: job %llu has a body of %d bytes "
                      "(with CRLF; at most %llu accepted, see -z)",
                      rd->path, (unsigned long long)rec,
                      (unsigned long long)r->id, (int)r->body_size,
                      (unsigned long long)max_body + 2);
    if (off + (uint64_t)r->body_size > rd->size)
        return cut_short(log, rd, rec, err, errcap);
    if (fseeko(rd->f, (off_t)(off + (uint64_t)r->body_size - 2), SEEK_SET) <
            0 ||
        fread(crlf, 1, 2, rd->f) != 2)
        return errfmt(err, errcap, "%s: cannot read at offset %llu", rd->path,
                      (unsigned long long)off);
    if (crlf[0] != '\r' || crlf[1] != '\n')
        return errfmt(err, errcap,
                      "%s: offset %llu: job %llu's body does not end in CRLF",
                      rd->path, (unsigned long long)rec,
                      (unsigned long long)r->id);
    return 0;
}

/* Applies a live-state record (ready, reserved, buried, delayed). */
static int
apply_live(BsLog *log, Rd *rd, uint64_t rec, BsJob *j, const Rec *r,
           const char *name, uint32_t fi, uint64_t body_off, char *err,
           size_t errcap)
{
    if (r->delay < 0 || r->delay > NS_MAX || r->ttr < 0 || r->ttr > NS_MAX)
        return errfmt(err, errcap,
                      "%s: offset %llu: job %llu has a delay or TTR out of "
                      "range",
                      rd->path, (unsigned long long)rec,
                      (unsigned long long)r->id);
    uint32_t size = (uint32_t)r->body_size - 2;
    if (!name) { /* short record of a known job */
        if (r->body_size < 2 || size != j->body_size)
            return errfmt(
                err, errcap, "%s: offset %llu: job %llu's body size changed",
                rd->path, (unsigned long long)rec, (unsigned long long)r->id);
        set_fields(j, r);
        return 0;
    }
    if (!j || !j->live) { /* a new job takes the record's tube */
        if (!j && !(j = add(log, r->id)))
            return errfmt(err, errcap, "out of memory");
        long t = tube_index(log, name);
        if (t < 0) return errfmt(err, errcap, "out of memory");
        j->tube = (uint32_t)t;
    }
    set_fields(j, r);
    j->body_size = size;
    j->file = fi;
    j->body_off = body_off;
    return 0;
}

/* Reads one record at the current position. Returns 0 (go on), 1 (the
 * file is done) or -1. */
static int
read_record(BsLog *log, Rd *rd, uint32_t fi, uint32_t max_body, char *err,
            size_t errcap)
{
    unsigned char nl[4], jr[JR_SIZE];
    char name[BS_TUBE_MAX + 1];
    uint64_t rec = (uint64_t)ftello(rd->f);
    size_t n = fread(nl, 1, 4, rd->f);
    if (n == 0 && !ferror(rd->f)) return 1;
    if (n < 4) return cut_short(log, rd, rec, err, errcap);
    int32_t namelen = (int32_t)le_get32(nl);
    if (namelen < 0 || namelen > BS_TUBE_MAX)
        return errfmt(
            err, errcap, "%s: offset %llu: tube name length %d (at most %d)",
            rd->path, (unsigned long long)rec, (int)namelen, BS_TUBE_MAX);
    if (fread(name, 1, (size_t)namelen, rd->f) != (size_t)namelen ||
        fread(jr, 1, JR_SIZE, rd->f) != JR_SIZE)
        return cut_short(log, rd, rec, err, errcap);
    name[namelen] = '\0';
    Rec r;
    decode(jr, &r);
    if (r.id == 0) { /* the end mark: zeros to the end of the file */
        if (namelen || !zero_from(rd, rec))
            return errfmt(err, errcap,
                          "%s: offset %llu: a record of job 0, or data after "
                          "the zeroed end",
                          rd->path, (unsigned long long)rec);
        return 1;
    }
    log->records++;
    if (r.id > log->max_id) log->max_id = r.id;
    if (r.state > ST_DELAYED)
        return errfmt(err, errcap,
                      "%s: offset %llu: job %llu: unknown state %u", rd->path,
                      (unsigned long long)rec, (unsigned long long)r.id,
                      r.state);
    if (namelen && (r.state == ST_INVALID || !name_ok(name, (size_t)namelen)))
        return errfmt(err, errcap,
                      "%s: offset %llu: job %llu: a full record with state %u "
                      "or a bad tube name",
                      rd->path, (unsigned long long)rec,
                      (unsigned long long)r.id, r.state);
    uint64_t body_off = rec + 4 + (uint64_t)namelen + JR_SIZE;
    if (namelen) {
        int rc = take_body(log, rd, rec, body_off, &r, max_body, err, errcap);
        if (rc) return rc;
        if (fseeko(rd->f, (off_t)(body_off + (uint64_t)r.body_size), SEEK_SET) <
            0)
            return errfmt(err, errcap, "%s: seek: %s", rd->path,
                          strerror(errno));
    }
    BsJob *j = find(log, r.id);
    if (!namelen && (!j || !j->live)) return 0; /* its full record is gone */
    if (r.state == ST_INVALID) {
        j->live = 0;
        return 0;
    }
    return apply_live(log, rd, rec, j, &r, namelen ? name : NULL, fi, body_off,
                      err, errcap);
}

/* Reads file number fi of log->files. */
static int
read_file(BsLog *log, uint32_t fi, uint32_t max_body, char *err, size_t errcap)
{
    Rd rd = {.path = log->files[fi], .last = fi + 1 == log->nfiles};
    struct stat st;
    unsigned char v[4];
    int rc = 0;
    if (!(rd.f = fopen(rd.path, "rb")))
        return errfmt(err, errcap, "%s: %s", rd.path, strerror(errno));
    if (fstat(fileno(rd.f), &st) < 0) {
        rc = errfmt(err, errcap, "%s: %s", rd.path, strerror(errno));
    } else if ((rd.size = (uint64_t)st.st_size) == 0 ||
               (rd.last && zero_from(&rd, 0))) {
        if (!rd.last)
            rc = errfmt(err, errcap, "%s: an empty file before the last",
                        rd.path);
        else
            log->torn = 1, log->torn_off = 0; /* made, never written */
    } else if (fseeko(rd.f, 0, SEEK_SET) < 0 || fread(v, 1, 4, rd.f) != 4) {
        rc = errfmt(err, errcap, "%s: header cut short (%llu bytes)", rd.path,
                    (unsigned long long)rd.size);
    } else if (le_get32(v) != BS_WALVER) {
        rc = errfmt(err, errcap,
                    "%s: binlog format version %d; this reads version %d "
                    "(beanstalkd 1.10 to 1.13)",
                    rd.path, (int)le_get32(v), BS_WALVER);
    } else {
        while ((rc = read_record(log, &rd, fi, max_body, err, errcap)) == 0)
            ;
        rc = rc < 0 ? -1 : 0;
    }
    fclose(rd.f);
    return rc;
}

static int
cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int
cmp_job(const void *a, const void *b)
{
    return cmp_u64(&((const BsJob *)a)->id, &((const BsJob *)b)->id);
}

/* N of a name binlog.N (digits only, at most 9), or -1. */
static long
file_number(const char *name)
{
    if (strncmp(name, "binlog.", 7) != 0) return -1;
    const char *p = name + 7;
    size_t n = strlen(p);
    if (n == 0 || n > 9 || strspn(p, "0123456789") != n) return -1;
    return strtol(p, NULL, 10);
}

/* The binlog.N files of dir into log->files, ascending N. */
static int
list_files(const char *dir, BsLog *log, char *err, size_t errcap)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    uint64_t *nums = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    if (!d) return errfmt(err, errcap, "%s: %s", dir, strerror(errno));
    while (rc == 0 && (e = readdir(d))) {
        long k = file_number(e->d_name);
        if (k < 0) continue;
        if (n == BS_FILES_MAX) {
            rc = errfmt(err, errcap, "%s: more than %d binlog files", dir,
                        BS_FILES_MAX);
        } else if (n == cap) {
            uint64_t *t = realloc(nums, (cap = cap ? 2 * cap : 64) * 8);
            if (!t)
                rc = errfmt(err, errcap, "out of memory");
            else
                nums = t;
        }
        if (rc == 0) nums[n++] = (uint64_t)k;
    }
    closedir(d);
    if (rc == 0 && n == 0)
        rc = errfmt(err, errcap, "%s: no binlog.N files", dir);
    if (rc == 0 && !(log->files = calloc(n, sizeof *log->files)))
        rc = errfmt(err, errcap, "out of memory");
    if (rc == 0) qsort(nums, n, sizeof *nums, cmp_u64);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (asprintf(&log->files[i], "%s/binlog.%llu", dir,
                     (unsigned long long)nums[i]) < 0) {
            log->files[i] = NULL;
            rc = errfmt(err, errcap, "out of memory");
        }
        log->nfiles = i + 1;
    }
    free(nums);
    return rc;
}

int
bslog_read(const char *dir, uint32_t max_body, BsLog *log, char *err,
           size_t errcap)
{
    memset(log, 0, sizeof *log);
    int rc = list_files(dir, log, err, errcap);
    for (uint32_t i = 0; rc == 0 && i < log->nfiles; i++)
        rc = read_file(log, i, max_body, err, errcap);
    if (rc < 0) {
        bslog_free(log);
        return -1;
    }
    size_t k = 0;
    for (size_t i = 0; i < log->njobs; i++)
        if (log->jobs[i].live) log->jobs[k++] = log->jobs[i];
    log->njobs = k;
    if (k) qsort(log->jobs, k, sizeof *log->jobs, cmp_job);
    free(log->slot);
    free(log->tslot);
    log->slot = log->tslot = NULL;
    log->nslot = log->ntslot = 0;
    return 0;
}

int
bslog_body(const BsLog *log, const BsJob *j, char *buf, char *err,
           size_t errcap)
{
    if (j->file >= log->nfiles)
        return errfmt(err, errcap, "job %llu: no such file",
                      (unsigned long long)j->id);
    const char *path = log->files[j->file];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errfmt(err, errcap, "%s: %s", path, strerror(errno));
    size_t got = 0;
    while (got < j->body_size) {
        ssize_t n = pread(fd, buf + got, j->body_size - got,
                          (off_t)(j->body_off + got));
        if (n <= 0) {
            close(fd);
            return errfmt(err, errcap, "%s: reading job %llu's body: %s", path,
                          (unsigned long long)j->id,
                          n < 0 ? strerror(errno) : "end of file");
        }
        got += (size_t)n;
    }
    close(fd);
    return 0;
}

void
bslog_free(BsLog *log)
{
    for (size_t i = 0; i < log->nfiles; i++)
        free(log->files[i]);
    for (size_t i = 0; i < log->ntubes; i++)
        free(log->tubes[i]);
    free(log->files);
    free(log->tubes);
    free(log->jobs);
    free(log->slot);
    free(log->tslot);
    memset(log, 0, sizeof *log);
}
