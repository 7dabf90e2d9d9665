/* Unit tests for server/bsbinlog.c, the reader of beanstalkd's binlog
 * (version 7): records built here byte for byte as beanstalkd writes them
 * on x86-64 (a good log of two files with deletes, updates, a reserved job,
 * an orphan short record and the zeroed tail), a torn last record (skipped)
 * and the same cut before the last file (refused), a wrong version, a
 * header cut short, and absurd lengths, states and bodies (refused, never
 * read past). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "server/bsbinlog.h"

enum { INVALID, READY, RESERVED, BURIED, DELAYED };

/* A file being built. */
typedef struct Buf {
    unsigned char b[8192];
    size_t n;
} Buf;

static char dir[64];
static char err[512];

static void
put(Buf *f, const void *p, size_t n)
{
    assert_true(f->n + n <= sizeof f->b);
    memcpy(f->b + f->n, p, n);
    f->n += n;
}

static void
put32(Buf *f, uint32_t v)
{
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8),
                          (unsigned char)(v >> 16), (unsigned char)(v >> 24)};
    put(f, b, 4);
}

static void
put64(Buf *f, uint64_t v)
{
    put32(f, (uint32_t)v);
    put32(f, (uint32_t)(v >> 32));
}

/* A Jobrec (80 bytes, x86-64 layout: padding after pri and body_size). */
static void
jobrec(Buf *f, uint64_t id, uint32_t pri, int64_t delay_s, int64_t ttr_s,
       int32_t body_size, uint8_t state)
{
    put64(f, id);
    put32(f, pri);
    put32(f, 0xdeadbeef); /* padding: any bytes */
    put64(f, (uint64_t)(delay_s * 1000000000));
    put64(f, (uint64_t)(ttr_s * 1000000000));
    put32(f, (uint32_t)body_size);
    put32(f, 0);
    put64(f, 1700000000000000000ULL); /* created_at */
    put64(f, 1700000000000000000ULL + (uint64_t)delay_s * 1000000000);
    for (uint32_t i = 1; i <= 5; i++)
        put32(f, i); /* reserve_ct .. kick_ct */
    unsigned char tail[4] = {state, 0, 0, 0};
    put(f, tail, 4);
}

static void
full(Buf *f, const char *tube, uint64_t id, uint32_t pri, int64_t delay_s,
     uint8_t state, const char *body)
{
    put32(f, (uint32_t)strlen(tube));
    put(f, tube, strlen(tube));
    jobrec(f, id, pri, delay_s, 60, (int32_t)strlen(body) + 2, state);
    put(f, body, strlen(body));
    put(f, "\r\n", 2);
}

static void
brief(Buf *f, uint64_t id, uint8_t state, int32_t body_size)
{
    put32(f, 0);
    jobrec(f, id, 5, 0, 60, body_size, state);
}

static void
header(Buf *f, uint32_t version)
{
    f->n = 0;
    put32(f, version);
}

static void
write_file(int n, const Buf *f, size_t len)
{
    char path[128];
    snprintf(path, sizeof path, "%s/binlog.%d", dir, n);
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(f->b, 1, len, fp), len);
    fclose(fp);
}

static int
setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/bsbinlog-XXXXXX");
    assert_non_null(mkdtemp(dir));
    return 0;
}

static int
teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    return 0;
}

static int
read_log(BsLog *log)
{
    err[0] = '\0';
    return bslog_read(dir, 65535, log, err, sizeof err);
}

/* Expects bslog_read to refuse, naming what. */
static void
refused(const char *what)
{
    BsLog log;
    assert_int_equal(read_log(&log), -1);
    if (!strstr(err, what)) fail_msg("error \"%s\" lacks \"%s\"", err, what);
    assert_null(log.jobs);
}

static void
test_good_log(void **state)
{
    (void)state;
    Buf f;
    header(&f, 7);
    full(&f, "a", 1, 10, 0, READY, "one");
    full(&f, "b", 2, 20, 30, DELAYED, "two");
    full(&f, "a", 3, 30, 0, RESERVED, "three");
    brief(&f, 1, INVALID, 5); /* job 1 deleted */
    write_file(1, &f, f.n);
    header(&f, 7);
    brief(&f, 2, BURIED, 5); /* job 2 buried */
    brief(&f, 99, READY, 5); /* orphan: its full record is gone */
    full(&f, "c(x)", 4, 40, 0, READY, "");
    size_t n = f.n;
    memset(f.b + n, 0, 300); /* the zeroed preallocated tail */
    write_file(2, &f, n + 300);

    BsLog log;
    assert_int_equal(read_log(&log), 0);
    assert_int_equal(log.nfiles, 2);
    assert_int_equal(log.njobs, 3);
    assert_int_equal(log.max_id, 99);
    assert_int_equal(log.records, 7);
    assert_int_equal(log.torn, 0);
    assert_int_equal(log.ntubes, 3); /* a, b, c(x): job 1's "a" counted */
    const BsJob *j = log.jobs;
    assert_int_equal(j[0].id, 2);
    assert_string_equal(log.tubes[j[0].tube], "b");
    assert_int_equal(j[0].state, BS_BURIED);
    assert_int_equal(j[0].pri, 5); /* the short record's */
    assert_int_equal(j[0].body_size, 3);
    assert_int_equal(j[0].reserves, 1);
    assert_int_equal(j[0].kicks, 5);
    assert_int_equal(j[1].id, 3);
    assert_int_equal(j[1].state, BS_READY);
    assert_int_equal(j[1].reserved, 1);
    assert_int_equal(j[1].ttr_ns, 60 * 1000000000LL);
    assert_string_equal(log.tubes[j[1].tube], "a");
    assert_int_equal(j[2].id, 4);
    assert_int_equal(j[2].body_size, 0);
    assert_string_equal(log.tubes[j[2].tube], "c(x)");
    char body[16];
    assert_int_equal(bslog_body(&log, &j[1], body, err, sizeof err), 0);
    assert_memory_equal(body, "three", 5);
    assert_int_equal(bslog_body(&log, &j[0], body, err, sizeof err), 0);
    assert_memory_equal(body, "two", 3);
    bslog_free(&log);
}

/* Two full records, the second cut at every byte: skipped in the last
 * file, refused before it (unless what remains is zeros). */
static void
test_torn_tail(void **state)
{
    (void)state;
    Buf f, g;
    header(&f, 7);
    full(&f, "t", 1, 1, 0, READY, "kept");
    size_t whole = f.n;
    full(&f, "t", 2, 1, 0, READY, "torn");
    for (size_t cut = whole + 1; cut < f.n; cut++) {
        write_file(1, &f, cut);
        BsLog log;
        assert_int_equal(read_log(&log), 0);
        assert_int_equal(log.njobs, 1);
        assert_int_equal(log.jobs[0].id, 1);
        assert_int_equal(log.torn, 1);
        assert_int_equal(log.torn_off, whole);
        bslog_free(&log);
    }
    header(&g, 7);
    full(&g, "t", 3, 1, 0, READY, "later");
    write_file(2, &g, g.n);
    write_file(1, &f, f.n - 3);
    refused("not the last file");
    /* a short record torn in the last file: its change is skipped */
    brief(&g, 3, BURIED, 7);
    write_file(1, &f, f.n);
    write_file(2, &g, g.n - 10);
    BsLog log;
    assert_int_equal(read_log(&log), 0);
    assert_int_equal(log.njobs, 3);
    assert_int_equal(log.jobs[2].state, BS_READY);
    assert_int_equal(log.torn, 1);
    bslog_free(&log);
    /* a last file made but never written (all zeros) */
    memset(g.b, 0, 64);
    write_file(2, &g, 64);
    assert_int_equal(read_log(&log), 0);
    assert_int_equal(log.njobs, 2);
    bslog_free(&log);
}

static void
test_bad_version_and_header(void **state)
{
    (void)state;
    Buf f;
    header(&f, 5);
    full(&f, "t", 1, 1, 0, READY, "x");
    write_file(1, &f, f.n);
    refused("version 5");
    header(&f, 8);
    write_file(1, &f, f.n);
    refused("version 8");
    header(&f, 7);
    write_file(1, &f, 2);
    refused("header cut short");
    write_file(1, &f, 0); /* empty, then a good file: refused */
    write_file(2, &f, 4);
    refused("empty file");
    char path[128];
    snprintf(path, sizeof path, "%s/binlog.2", dir);
    assert_int_equal(unlink(path), 0);
    snprintf(path, sizeof path, "%s/binlog.1", dir);
    assert_int_equal(unlink(path), 0);
    refused("no binlog");
}

/* One record of a file whose namelen, body size, state or body is absurd. */
static void
test_absurd(void **state)
{
    (void)state;
    Buf f;
    header(&f, 7);
    put32(&f, 1000000000); /* namelen */
    put(&f, "xxxxxxxxxxxxxxxx", 16);
    write_file(1, &f, f.n);
    refused("tube name length 1000000000");
    header(&f, 7);
    put32(&f, 0xffffffff); /* -1 */
    write_file(1, &f, f.n);
    refused("tube name length -1");
    header(&f, 7);
    put32(&f, 201);
    write_file(1, &f, f.n);
    refused("tube name length 201");

    int32_t sizes[] = {INT32_MAX, -5, 0, 1, 65538};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        header(&f, 7);
        put32(&f, 1);
        put(&f, "t", 1);
        jobrec(&f, 1, 1, 0, 60, sizes[i], READY);
        put(&f, "ab\r\n", 4);
        write_file(1, &f, f.n);
        refused("body of");
    }

    header(&f, 7);
    full(&f, "t", 1, 1, 0, 9, "x");
    write_file(1, &f, f.n);
    refused("unknown state 9");
    header(&f, 7);
    full(&f, "t", 1, 1, 0, INVALID, "x");
    write_file(1, &f, f.n);
    refused("full record with state 0");
    header(&f, 7);
    full(&f, "-bad", 1, 1, 0, READY, "x");
    write_file(1, &f, f.n);
    refused("bad tube name");
    header(&f, 7);
    full(&f, "t", 1, 1, 0, READY, "x");
    f.b[f.n - 1] = 'X'; /* no CRLF */
    write_file(1, &f, f.n);
    refused("CRLF");
    header(&f, 7);
    full(&f, "t", 1, 1, 0, READY, "x");
    brief(&f, 1, BURIED, 9); /* a different size */
    write_file(1, &f, f.n);
    refused("size changed");
    header(&f, 7);
    full(&f, "t", 1, 1, 0, READY, "x");
    brief(&f, 1, DELAYED, 3);
    memcpy(f.b + f.n - 80 + 16, "\xff\xff\xff\xff\xff\xff\xff\xff", 8);
    write_file(1, &f, f.n);
    refused("out of range");
    header(&f, 7);
    full(&f, "t", 1, 1, 0, READY, "x");
    size_t n = f.n;
    memset(f.b + n, 0, 200);
    f.b[n + 150] = 1; /* data after the zeroed end */
    write_file(1, &f, n + 200);
    refused("zeroed end");
}

/* Bodies are bounded by max_body (without the CRLF). */
static void
test_max_body(void **state)
{
    (void)state;
    Buf f;
    header(&f, 7);
    full(&f, "t", 1, 1, 0, READY, "0123456789");
    write_file(1, &f, f.n);
    BsLog log;
    assert_int_equal(bslog_read(dir, 10, &log, err, sizeof err), 0);
    bslog_free(&log);
    assert_int_equal(bslog_read(dir, 9, &log, err, sizeof err), -1);
    assert_non_null(strstr(err, "body of 12 bytes"));
}

/* A good two-file log with bytes flipped and files cut at random (a fixed
 * seed): every read ends in 0 or -1 (never a crash; ASan and UBSan check
 * the reads), and what it returns is within the files' bounds. */
static void
test_mutations(void **state)
{
    (void)state;
    Buf a, b;
    header(&a, 7);
    full(&a, "a", 1, 10, 0, READY, "one");
    full(&a, "bb", 2, 20, 30, DELAYED, "two two");
    brief(&a, 1, BURIED, 5);
    header(&b, 7);
    full(&b, "a", 3, 30, 0, RESERVED, "three");
    brief(&b, 2, INVALID, 9);
    full(&b, "c", 4, 40, 0, READY, "");
    unsigned seed = 28;
    int ok = 0;
    for (int round = 0; round < 3000; round++) {
        Buf x = a, y = b;
        for (int k = rand_r(&seed) % 4; k >= 0; k--) {
            Buf *t = rand_r(&seed) % 2 ? &x : &y;
            t->b[(size_t)rand_r(&seed) % t->n] ^=
                (unsigned char)(1 + rand_r(&seed) % 255);
        }
        write_file(1, &x,
                   rand_r(&seed) % 4 ? x.n : (size_t)rand_r(&seed) % x.n);
        write_file(2, &y,
                   rand_r(&seed) % 4 ? y.n : (size_t)rand_r(&seed) % y.n);
        BsLog log;
        int rc = bslog_read(dir, 65535, &log, err, sizeof err);
        assert_true(rc == 0 || rc == -1);
        if (rc < 0) continue;
        ok++;
        for (size_t i = 0; i < log.njobs; i++) {
            char body[65536];
            assert_true(log.jobs[i].tube < log.ntubes);
            assert_int_equal(
                bslog_body(&log, &log.jobs[i], body, err, sizeof err), 0);
        }
        bslog_free(&log);
    }
    assert_true(ok > 100); /* some survive: the torn and unharmed cases */
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_good_log, setup, teardown),
        cmocka_unit_test_setup_teardown(test_torn_tail, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_version_and_header, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_absurd, setup, teardown),
        cmocka_unit_test_setup_teardown(test_max_body, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mutations, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
