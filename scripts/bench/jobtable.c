/* jobtable.c - the job table alone: inserts N jobs (ids 1..N, as the
 * server assigns them), then removes them oldest first, timing every call.
 * Prints per phase the total time, the slowest single call (and the job
 * count it ran at) and how many calls took 1 ms or more, in wall time and
 * in the thread's CPU time (which leaves out time the thread was not
 * running, e.g. preempted on a busy machine; page faults count). Built and
 * run by jobtable.sh against any revision's src/queue/job.c; not part of make
 * test.
 *
 *   jobtable [N]     (default 12600000: just past the 2^24-slot growth)
 *
 * Exit status 0, or 1 if out of memory or the table lost a job. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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

int
main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 12600000;
    Job *jobs = calloc(n, sizeof *jobs);
    JobTable t = {0};
    Phase ins = {0}, del = {0};
    if (!jobs) return fputs("jobtable: out of memory\n", stderr), 1;
    for (size_t i = 0; i < n; i++) {
        double a[2];
        jobs[i].id = i + 1;
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
        jobtable_remove(&t, &jobs[i]);
        stop(&del, a, n - i);
    }
    if (t.len || jobtable_find(&t, 1))
        return fputs("jobtable: removes left jobs\n", stderr), 1;
    print_phase("insert", &ins, n);
    print_phase("remove", &del, n);
    jobtable_free(&t);
    free(jobs);
    return 0;
}
