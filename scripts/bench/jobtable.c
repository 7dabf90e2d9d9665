/* jobtable.c - the job table alone: inserts N jobs (ids 1..N, as the
 * server assigns them), then removes them oldest first, timing every call.
 * Prints per phase the total time, the slowest single call (and the job
 * count it ran at) and how many calls took 1 ms or more, in wall time and
 * in the thread's CPU time (which leaves out time the thread was not
 * running, e.g. preempted on a busy machine; page faults count). Built and
 * run by jobtable.sh against any revision's src/queue/job.c; not part of make
 * test.
 *
 *   jobtable [N [STRIDE [ORDER]]]
 *
 * N jobs (default 12600000: just past the 2^24-slot growth); ids 1 +
 * k * STRIDE (default 1: as the server assigns them; a larger stride is
 * what a recovery of a queue thinned by deletes inserts); ORDER "fifo"
 * (default: oldest first) or "random" (a fixed shuffle: jobs consumed by
 * priority).
 *
 * Exit status 0, or 1 if out of memory or the table lost a job. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "queue/job.h"

/* Call times of one clock: sum, maximum (and the job count then), calls
 * of 1 ms or more. */
typedef struct Clock {
    double total_s, max_us;
    size_t max_at, slow;
} Clock;

typedef struct Phase {
    Clock wall, cpu;
} Phase;

static double
now_us(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void
record(Clock *c, double us, size_t at)
{
    c->total_s += us / 1e6;
    c->slow += us >= 1000;
    if (us > c->max_us) c->max_us = us, c->max_at = at;
}

/* Starts timing a call: fills t[2] (CPU, wall). The wall window is the
 * inner one, so it holds no CPU-clock system call. */
static void
start(double *t)
{
    t[0] = now_us(CLOCK_THREAD_CPUTIME_ID);
    t[1] = now_us(CLOCK_MONOTONIC);
}

static void
stop(Phase *p, const double *t, size_t at)
{
    double wall = now_us(CLOCK_MONOTONIC);
    record(&p->cpu, now_us(CLOCK_THREAD_CPUTIME_ID) - t[0], at);
    record(&p->wall, wall - t[1], at);
}

static void
print_phase(const char *name, const Phase *p, size_t n)
{
    const Clock *c[2] = {&p->wall, &p->cpu};
    for (int i = 0; i < 2; i++)
        printf("%s %zu jobs, %s: total %.3f s (%.0f ns/call), max %.0f us "
               "at %zu jobs, %zu calls >= 1 ms\n",
               name, n, i ? "cpu " : "wall", c[i]->total_s,
               c[i]->total_s * 1e9 / (double)n, c[i]->max_us, c[i]->max_at,
               c[i]->slow);
}

/* Every job is found; spot checks only (every 4099th). */
static int
check(const JobTable *t, const Job *jobs, size_t n)
{
    for (size_t i = 0; i < n; i += 4099)
        if (jobtable_find(t, jobs[i].id) != &jobs[i]) return -1;
    return t->len == n ? 0 : -1;
}

/* order[0..n): 0..n-1, shuffled with a fixed seed if random. */
static size_t *
removal_order(size_t n, int random)
{
    size_t *o = malloc((n ? n : 1) * sizeof *o);
    uint64_t x = 88172645463325252ULL;
    for (size_t i = 0; o && i < n; i++)
        o[i] = i;
    for (size_t i = n; o && random && i > 1; i--) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t k = (size_t)(x % i), tmp = o[i - 1];
        o[i - 1] = o[k], o[k] = tmp;
    }
    return o;
}

int
main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 12600000;
    uint64_t stride = argc > 2 ? strtoull(argv[2], NULL, 10) : 1;
    int random = argc > 3 && strcmp(argv[3], "random") == 0;
    Job *jobs = calloc(n, sizeof *jobs);
    size_t *order = removal_order(n, random);
    JobTable t = {0};
    Phase ins = {0}, del = {0};
    if (!jobs || !order || !stride)
        return fputs("jobtable: out of memory (or a zero stride)\n", stderr), 1;
    for (size_t i = 0; i < n; i++) {
        double a[2];
        jobs[i].id = 1 + i * stride;
        start(a);
        int rc = jobtable_insert(&t, &jobs[i]);
        stop(&ins, a, i);
        if (rc < 0) return fputs("jobtable: insert failed\n", stderr), 1;
    }
    if (check(&t, jobs, n) < 0)
        return fputs("jobtable: a job went missing\n", stderr), 1;
    for (size_t i = 0; i < n; i++) {
        double a[2];
        start(a);
        jobtable_remove(&t, &jobs[order[i]]);
        stop(&del, a, n - i);
    }
    if (t.len || jobtable_find(&t, 1))
        return fputs("jobtable: removes left jobs\n", stderr), 1;
    print_phase("insert", &ins, n);
    print_phase("remove", &del, n);
    jobtable_free(&t);
    free(jobs);
    free(order);
    return 0;
}
