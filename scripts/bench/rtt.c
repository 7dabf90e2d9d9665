/* rtt.c - a light client: one connection sends one cheap command at a time
 * (default `stats-tube default`), pausing between round trips, until
 * SIGTERM or SIGINT (or -d seconds), then prints the round trips' p50, p99
 * and maximum. memory.sh runs it beside a large load to show loop stalls.
 *
 *   rtt -p PORT [-h HOST] [-c COMMAND] [-i PAUSE_US] [-d SECONDS]
 *       [-t SLOW_US]
 *
 * Output: "RESULT n=N p50_us=X p99_us=X max_us=X max_at_s=S max_jobs=J"
 * on stdout, where max_at_s is when the slowest round trip began, in
 * seconds since the first, and max_jobs the current-jobs-ready its reply
 * gave (stats-tube; "-" for other replies). With -t, each round trip of at
 * least SLOW_US also prints "SLOW at_s=S us=X jobs=J" as it happens. Exit
 * status 0, or 1 on a connection or protocol error (the figures so far are
 * printed all the same). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct Opts {
    const char *host, *cmd;
    int port;
    long pause_us;
    double secs;    /* 0: until a signal */
    double slow_us; /* 0: no SLOW lines */
} Opts;

typedef struct Samples {
    double *us; /* round trips, microseconds */
    size_t n, cap;
    double max_us, max_at_s;
    char max_jobs[24]; /* current-jobs-ready of the slowest reply */
} Samples;

static double
now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int
dial(const Opts *o)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)o->port)};
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    if (fd < 0 || inet_pton(AF_INET, o->host, &sa.sin_addr) != 1 ||
        connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        perror("rtt: connect");
        if (fd >= 0) close(fd);
        return -1;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* Reads one reply: a line, and for "OK n" / "FOUND id n" / "RESERVED id n"
 * the n-byte body and its CRLF, NUL-terminated. Returns 0, or -1 on EOF,
 * error or a reply of cap bytes or more (cheap commands have short ones). */
static int
read_reply(int fd, char *buf, size_t cap)
{
    size_t got = 0, need = 0;
    for (;;) {
        char *eol = need ? NULL : memmem(buf, got, "\r\n", 2);
        if (eol) {
            size_t line = (size_t)(eol - buf) + 2, body = 0;
            char *sp = memrchr(buf, ' ', line - 2);
            if (sp && (!strncmp(buf, "OK ", 3) || !strncmp(buf, "FOUND ", 6) ||
                       !strncmp(buf, "RESERVED ", 9)))
                body = strtoul(sp + 1, NULL, 10) + 2;
            need = line + body;
        }
        if (need && got >= need) return buf[got] = 0, 0;
        if (got == cap - 1) return -1;
        ssize_t r = read(fd, buf + got, cap - 1 - got);
        if (r <= 0) return -1;
        got += (size_t)r;
        buf[got] = 0;
    }
}

/* The current-jobs-ready value in reply buf, copied to out ("-" if none). */
static void
jobs_of(const char *buf, char *out, size_t cap)
{
    const char *p = strstr(buf, "current-jobs-ready: ");
    size_t n = p ? strspn(p += 20, "0123456789") : 0;
    if (!n || n >= cap) p = "-", n = 1;
    memcpy(out, p, n);
    out[n] = 0;
}

/* Records a round trip of us microseconds that began at_s into the run,
 * with its reply buf. */
static void
add(const Opts *o, Samples *s, double us, double at_s, const char *buf)
{
    if ((o->slow_us && us >= o->slow_us) || us > s->max_us) {
        char jobs[sizeof s->max_jobs];
        jobs_of(buf, jobs, sizeof jobs);
        if (o->slow_us && us >= o->slow_us)
            printf("SLOW at_s=%.2f us=%.0f jobs=%s\n", at_s, us, jobs);
        if (us > s->max_us) memcpy(s->max_jobs, jobs, sizeof jobs);
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 4096;
        double *p = realloc(s->us, cap * sizeof *p);
        if (!p) return;
        s->us = p;
        s->cap = cap;
    }
    s->us[s->n++] = us;
    if (us > s->max_us) s->max_us = us, s->max_at_s = at_s;
}

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void
report(Samples *s)
{
    double p50 = 0, p99 = 0;
    if (s->n) {
        qsort(s->us, s->n, sizeof *s->us, cmp_double);
        p50 = s->us[s->n / 2];
        p99 = s->us[(size_t)((double)(s->n - 1) * 0.99)];
    }
    printf("RESULT n=%zu p50_us=%.0f p99_us=%.0f max_us=%.0f max_at_s=%.1f "
           "max_jobs=%s\n",
           s->n, p50, p99, s->max_us, s->max_at_s, s->n ? s->max_jobs : "-");
}

/* The round-trip loop; the pause between round trips waits for the
 * (blocked) stop signals, so nothing needs a handler. */
static int
run(const Opts *o, int fd, Samples *s)
{
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    sigprocmask(SIG_BLOCK, &stop, NULL);
    char cmd[256], buf[65536];
    int len = snprintf(cmd, sizeof cmd, "%s\r\n", o->cmd);
    struct timespec pause = {o->pause_us / 1000000,
                             o->pause_us % 1000000 * 1000};
    double t0 = now_s();
    while (!o->secs || now_s() - t0 < o->secs) {
        double a = now_s();
        if (write(fd, cmd, (size_t)len) != len ||
            read_reply(fd, buf, sizeof buf))
            return fprintf(stderr, "rtt: connection lost\n"), 1;
        add(o, s, (now_s() - a) * 1e6, a - t0, buf);
        if (sigtimedwait(&stop, NULL, &pause) >= 0) break;
    }
    return 0;
}

int
main(int argc, char **argv)
{
    Opts o = {
        .host = "127.0.0.1", .cmd = "stats-tube default", .pause_us = 1000};
    int c;
    while ((c = getopt(argc, argv, "h:p:c:i:d:t:")) != -1) {
        switch (c) {
        case 'h':
            o.host = optarg;
            break;
        case 'p':
            o.port = atoi(optarg);
            break;
        case 'c':
            o.cmd = optarg;
            break;
        case 'i':
            o.pause_us = atol(optarg);
            break;
        case 'd':
            o.secs = atof(optarg);
            break;
        case 't':
            o.slow_us = atof(optarg);
            break;
        default:
            fputs("usage: rtt -p PORT [-h HOST] [-c COMMAND] [-i PAUSE_US] "
                  "[-d SECONDS] [-t SLOW_US]\n",
                  stderr);
            return 2;
        }
    }
    int fd = o.port > 0 ? dial(&o) : -1;
    if (fd < 0) return 1;
    Samples s = {0};
    int rc = run(&o, fd, &s);
    report(&s);
    free(s.us);
    close(fd);
    return rc;
}
