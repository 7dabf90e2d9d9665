/* test_bodyreap.c - unit tests of the reaper (src/store/bodyreap.c), which
 * deletes the body ring's dead held files a few MiB at a time: files
 * queued before the start wait for it; a started reaper deletes every
 * file queued, large ones in steps, and its counts return to zero; a
 * missing file is no error; a stop without a start deletes what is
 * queued, and a file queued after the stop goes at once. Its copy-outs
 * (the sparse held files', store/bodyheld.c): queued ones wait for the
 * start and then run in order, also between two steps of a dead file; a
 * stop drops those not run yet, a copy-out under way sees the stop, and
 * one queued after the stop, or without a copy-out set, is ignored; the
 * queue's count returns to zero. Each test works in a fresh mkdtemp
 * directory that it removes. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store/bodyreap.h"

typedef struct Fixture {
    char dir[64];
    BodyReap q;
} Fixture;

static int
setup(void **state)
{
    Fixture *f = calloc(1, sizeof *f);

    assert_non_null(f);
    snprintf(f->dir, sizeof f->dir, "/tmp/rs-reap-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    bodyreap_init(&f->q);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    Fixture *f = *state;

    bodyreap_stop(&f->q);
    bodyreap_free(&f->q);
    assert_int_equal(rmdir(f->dir), 0); /* every file gone */
    free(f);
    return 0;
}

/* Writes a file of n bytes (blocks allocated) named name in f->dir; its
 * path into path[0..cap). */
static void
make_file(Fixture *f, const char *name, size_t n, char *path, size_t cap)
{
    static char block[65536];
    FILE *fp;

    snprintf(path, cap, "%s/%s", f->dir, name);
    assert_non_null(fp = fopen(path, "wb"));
    for (size_t done = 0; done < n; done += sizeof block) {
        size_t k = n - done < sizeof block ? n - done : sizeof block;
        assert_int_equal(fwrite(block, 1, k, fp), k);
    }
    assert_int_equal(fclose(fp), 0);
}

static int
exists(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0;
}

/* Waits up to 10 s for the reaper's queue to empty; returns 1 if it did. */
static int
drained(BodyReap *q)
{
    for (int i = 0; i < 10000; i++) {
        if (atomic_load(&q->st_files) == 0) return 1;
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    return 0;
}

/* The copy-out the tests set: records each generation given and whether a
 * watched file still existed then; a generation of 99 waits for the stop
 * (and reports whether it saw it). */
typedef struct Copies {
    BodyReap *q;
    const char *watch; /* a path, or NULL */
    uint64_t gens[16];
    int watched[16];
    _Atomic int n;
    _Atomic int running; /* copy_fn entered */
    _Atomic int saw_stop;
} Copies;

static int
copy_fn(void *ctx, uint64_t gen)
{
    Copies *c = ctx;
    int i = atomic_load(&c->n);

    atomic_store(&c->running, 1);
    c->gens[i] = gen;
    c->watched[i] = c->watch && exists(c->watch);
    for (int k = 0; gen == 99 && k < 10000; k++) {
        if (bodyreap_stopping(c->q)) {
            atomic_store(&c->saw_stop, 1);
            break;
        }
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    atomic_store(&c->n, i + 1);
    return 0;
}

/* Waits up to 10 s for the copy-outs to number n and the queue to empty;
 * returns 1 if they did. */
static int
copied(Copies *c, int n)
{
    for (int i = 0; i < 10000; i++) {
        if (atomic_load(&c->n) == n && atomic_load(&c->q->st_copies) == 0)
            return 1;
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    return 0;
}

static void
test_copies_wait_then_run_in_order(void **state)
{
    Fixture *f = *state;
    Copies c = {.q = &f->q};
    char err[256];

    bodyreap_copy(&f->q, 5); /* no copy-out set yet: ignored */
    assert_int_equal(atomic_load(&f->q.st_copies), 0);
    bodyreap_set_copy(&f->q, copy_fn, &c);
    bodyreap_copy(&f->q, 7);
    bodyreap_copy(&f->q, 3);
    assert_int_equal(atomic_load(&f->q.st_copies), 2);
    nanosleep(&(struct timespec){0, 20000000}, NULL);
    assert_int_equal(atomic_load(&c.n), 0); /* no thread yet */
    assert_int_equal(bodyreap_start(&f->q, err, sizeof err), 0);
    assert_true(copied(&c, 2));
    assert_int_equal(c.gens[0], 7);
    assert_int_equal(c.gens[1], 3);
    assert_false(bodyreap_stopping(&f->q));
}

static void
test_copy_between_steps(void **state)
{
    Fixture *f = *state;
    char path[128], err[256];
    Copies c = {.q = &f->q, .watch = path};

    make_file(f, "dead-20", 8 * REAP_STEP, path, sizeof path);
    bodyreap_set_copy(&f->q, copy_fn, &c);
    assert_int_equal(bodyreap_start(&f->q, err, sizeof err), 0);
    bodyreap_add(&f->q, path, 8 * REAP_STEP);
    for (int i = 0; i < 10000 && atomic_load(&f->q.st_bytes) == 8 * REAP_STEP;
         i++) /* a step taken */
        nanosleep(&(struct timespec){0, 100000}, NULL);
    bodyreap_copy(&f->q, 11);
    assert_true(copied(&c, 1));
    assert_int_equal(c.gens[0], 11);
    assert_true(c.watched[0]); /* ran before the file was gone */
    assert_true(drained(&f->q));
}

static void
test_stop_drops_copies(void **state)
{
    Fixture *f = *state;
    Copies c = {.q = &f->q};
    char err[256];

    bodyreap_set_copy(&f->q, copy_fn, &c);
    assert_int_equal(bodyreap_start(&f->q, err, sizeof err), 0);
    bodyreap_copy(&f->q, 99); /* runs until the stop */
    for (int i = 0; i < 10000 && !atomic_load(&c.running); i++)
        nanosleep(&(struct timespec){0, 100000}, NULL);
    bodyreap_copy(&f->q, 1);
    bodyreap_copy(&f->q, 2);
    bodyreap_stop(&f->q);
    assert_true(atomic_load(&c.saw_stop));
    assert_int_equal(atomic_load(&c.n), 1); /* 1 and 2 were dropped */
    assert_int_equal(c.gens[0], 99);
    assert_int_equal(atomic_load(&f->q.st_copies), 0);
    assert_true(bodyreap_stopping(&f->q));
    bodyreap_copy(&f->q, 4); /* after the stop: ignored */
    assert_int_equal(atomic_load(&f->q.st_copies), 0);
    assert_int_equal(atomic_load(&c.n), 1);
}

static void
test_reap_waits_for_start(void **state)
{
    Fixture *f = *state;
    char a[128], b[128], err[256];
    uint64_t big = 3 * REAP_STEP + 12345;

    make_file(f, "dead-1", 100000, a, sizeof a);
    make_file(f, "dead-2", big, b, sizeof b);
    bodyreap_add(&f->q, a, 100000);
    bodyreap_add(&f->q, b, big);
    assert_int_equal(atomic_load(&f->q.st_files), 2);
    assert_int_equal(atomic_load(&f->q.st_bytes), 100000 + big);
    nanosleep(&(struct timespec){0, 20000000}, NULL);
    assert_true(exists(a) && exists(b)); /* no thread yet */
    assert_int_equal(bodyreap_start(&f->q, err, sizeof err), 0);
    assert_true(drained(&f->q));
    assert_int_equal(atomic_load(&f->q.st_bytes), 0);
    assert_false(exists(a));
    assert_false(exists(b));
}

static void
test_reap_missing_file(void **state)
{
    Fixture *f = *state;
    char path[128], err[256];

    snprintf(path, sizeof path, "%s/dead-9", f->dir);
    bodyreap_add(&f->q, path, 4096); /* never made */
    assert_int_equal(bodyreap_start(&f->q, err, sizeof err), 0);
    assert_true(drained(&f->q));
    assert_int_equal(atomic_load(&f->q.st_bytes), 0);
}

static void
test_reap_stop_without_start(void **state)
{
    Fixture *f = *state;
    char a[128], b[128];

    make_file(f, "dead-3", 2 * REAP_STEP, a, sizeof a);
    bodyreap_add(&f->q, a, 2 * REAP_STEP);
    bodyreap_stop(&f->q);
    assert_false(exists(a));
    assert_int_equal(atomic_load(&f->q.st_files), 0);
    assert_int_equal(atomic_load(&f->q.st_bytes), 0);
    make_file(f, "dead-4", 5000, b, sizeof b);
    bodyreap_add(&f->q, b, 5000); /* after the stop: at once */
    assert_false(exists(b));
    assert_int_equal(atomic_load(&f->q.st_files), 0);
}

static void
test_reap_stop_deletes_the_rest(void **state)
{
    Fixture *f = *state;
    char path[8][128], name[32], err[256];

    assert_int_equal(bodyreap_start(&f->q, err, sizeof err), 0);
    for (int i = 0; i < 8; i++) {
        snprintf(name, sizeof name, "dead-%d", 10 + i);
        make_file(f, name, 2 * REAP_STEP, path[i], sizeof path[i]);
        bodyreap_add(&f->q, path[i], 2 * REAP_STEP);
    }
    bodyreap_stop(&f->q); /* whatever is left goes without pauses */
    for (int i = 0; i < 8; i++)
        assert_false(exists(path[i]));
    assert_int_equal(atomic_load(&f->q.st_files), 0);
    assert_int_equal(atomic_load(&f->q.st_bytes), 0);
}

int
main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_reap_waits_for_start),
        T(test_reap_missing_file),
        T(test_reap_stop_without_start),
        T(test_reap_stop_deletes_the_rest),
        T(test_copies_wait_then_run_in_order),
        T(test_copy_between_steps),
        T(test_stop_drops_copies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
