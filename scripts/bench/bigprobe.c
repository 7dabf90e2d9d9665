/*
 * bigprobe - the ceiling of issue 30's big-beside-small row: can a small
 * synced write keep its rate and latency while large synced writes stream
 * to another file of the same file system? No server, no sockets: what the
 * disk and the kernel allow a design that keeps large bodies apart from the
 * small records' commit (a body file of its own, synced by its own thread).
 *
 * One thread writes SMALL bytes in place at offset 0 of DIR/small and
 * fdatasyncs it, in a loop, timing each round (a small put's commit). G
 * threads each write 256 KiB blocks (-b) into a ring of 64 MiB in
 * DIR/bigN, preallocated and synced first (so no write changes a file's
 * size), and fdatasync after each block (a large put's body). The small
 * thread runs once with G = 0 (alone) and once beside them.
 *
 *   bigprobe DIR [G [SECS [SMALL [BIG [MIBS]]]]]
 *            (default 8, 3, 128, 262144, 0)
 *
 * MIBS > 0 caps the large writers at MIBS MiB/s in all (each 1/G of it),
 * for the rate a server's large producers reach; 0 lets them run flat out.
 *
 * Prints per run: the small rounds per second, p50/p99/max in ms, and the
 * large blocks per second and MiB/s; then the small rate beside the large
 * writers over the rate alone.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RING (64u << 20)
#define MAX_LAT 4000000

struct big {
    pthread_t t;
    const char *dir;
    int id;
    size_t size;
    double rate; /* bytes per second, 0: no cap */
    volatile int *stop;
    long blocks; /* written and synced while the small thread ran */
    volatile int counting;
};

static double
now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int
open_ring(const char *path, size_t len, const char *fill, size_t flen)
{
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) return -1;
    for (size_t o = 0; o < len; o += flen)
        if (pwrite(fd, fill, flen, (off_t)o) != (ssize_t)flen) return -1;
    return fdatasync(fd) == 0 ? fd : -1;
}

static void *
big_run(void *arg)
{
    struct big *b = arg;
    char path[512];
    char *buf = malloc(b->size);
    if (!buf) return NULL;
    memset(buf, 'x', b->size);
    snprintf(path, sizeof path, "%s/big%d", b->dir, b->id);
    int fd = open_ring(path, RING, buf, b->size);
    size_t off = 0;
    double t0 = now(), sent = 0;
    while (fd >= 0 && !*b->stop) {
        if (pwrite(fd, buf, b->size, (off_t)off) != (ssize_t)b->size ||
            fdatasync(fd) != 0)
            break;
        off = (off + b->size) % RING;
        if (b->counting) b->blocks++;
        sent += (double)b->size;
        double ahead = b->rate > 0 ? sent / b->rate - (now() - t0) : 0;
        if (ahead > 0) usleep((useconds_t)(ahead * 1e6));
    }
    if (fd >= 0) close(fd);
    unlink(path);
    free(buf);
    return NULL;
}

static int
cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One run: the small thread for secs beside g large writers. Returns the
 * small rounds per second (0 on an I/O error). */
static double
run(const char *dir, int g, double secs, size_t small, size_t bigsz,
    double mibs, double *lat)
{
    char path[512], buf[4096];
    struct big bigs[64];
    volatile int stop = 0;
    memset(buf, 's', sizeof buf);
    snprintf(path, sizeof path, "%s/small", dir);
    int fd = open_ring(path, sizeof buf, buf, sizeof buf);
    if (fd < 0) return 0;
    for (int i = 0; i < g; i++) {
        bigs[i] = (struct big){.dir = dir,
                               .id = i,
                               .size = bigsz,
                               .rate = mibs * 1048576.0 / g,
                               .stop = &stop};
        pthread_create(&bigs[i].t, NULL, big_run, &bigs[i]);
    }
    usleep(g ? 1500000 : 0); /* the rings are made, the writers streaming */
    for (int i = 0; i < g; i++)
        bigs[i].counting = 1;
    long n = 0;
    double t0 = now(), end = t0 + secs;
    while (now() < end && n < MAX_LAT) {
        double s = now();
        if (pwrite(fd, buf, small, 0) != (ssize_t)small || fdatasync(fd)) break;
        lat[n++] = now() - s;
    }
    double el = now() - t0;
    long blocks = 0;
    for (int i = 0; i < g; i++)
        bigs[i].counting = 0;
    for (int i = 0; i < g; i++)
        blocks += bigs[i].blocks;
    stop = 1;
    for (int i = 0; i < g; i++)
        pthread_join(bigs[i].t, NULL);
    close(fd);
    unlink(path);
    if (!n) return 0;
    qsort(lat, (size_t)n, sizeof *lat, cmp);
    printf("large writers %d: small %.0f/s, p50 %.2f ms, p99 %.2f ms, "
           "max %.2f ms; large %.0f blocks/s, %.0f MiB/s\n",
           g, (double)n / el, lat[n / 2] * 1e3, lat[n * 99 / 100] * 1e3,
           lat[n - 1] * 1e3, (double)blocks / el,
           (double)blocks * (double)bigsz / 1048576.0 / el);
    return (double)n / el;
}

int
main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr,
                "usage: bigprobe DIR [G [SECS [SMALL [BIG [MIBS]]]]]\n");
        return 2;
    }
    int g = argc > 2 ? atoi(argv[2]) : 8;
    double secs = argc > 3 ? atof(argv[3]) : 3;
    size_t small = argc > 4 ? (size_t)atol(argv[4]) : 128;
    size_t bigsz = argc > 5 ? (size_t)atol(argv[5]) : 262144;
    double mibs = argc > 6 ? atof(argv[6]) : 0;
    if (g < 0 || g > 64 || secs <= 0 || !small || small > 4096 || !bigsz ||
        mibs < 0) {
        fprintf(stderr, "bigprobe: G 0-64, SECS > 0, SMALL 1-4096\n");
        return 2;
    }
    double *lat = malloc(MAX_LAT * sizeof *lat);
    if (!lat) return 1;
    double alone = run(argv[1], 0, secs, small, bigsz, 0, lat);
    double beside = run(argv[1], g, secs, small, bigsz, mibs, lat);
    free(lat);
    if (alone <= 0 || beside <= 0) {
        fprintf(stderr, "bigprobe: I/O error in %s\n", argv[1]);
        return 1;
    }
    printf("small beside the large writers / alone: %.2fx\n", beside / alone);
    return 0;
}
