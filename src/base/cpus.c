/* cpus.c - CPU lists, the CPUs of a block device's interrupts, thread
 * binding (cpus.h). */
#include "base/cpus.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/common.h"

#define IRQS_MAX 256  /* interrupts of one device considered */
#define STACK_DEPTH 4 /* dm/md slaves followed */

/* Formats a path into out (PATH_MAX bytes). Returns 0, or -1 if it did not
 * fit (out then holds "", which names no file). */
__attribute__((format(printf, 2, 3))) static int
pathf(char *out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, PATH_MAX, fmt, ap);
    va_end(ap);
    if (n < 0 || n >= PATH_MAX) return out[0] = '\0', -1;
    return 0;
}

/* ---- lists ---- */

/* Reads a decimal at *p below CPUS_MAX, advancing *p. Returns 0, -1 if no
 * digit is there, -2 if the number is too large. */
static int
read_cpu(const char **p, int *out)
{
    const char *s = *p;
    long v = 0;

    if (*s < '0' || *s > '9') return -1;
    while (*s >= '0' && *s <= '9') {
        v = v * 10 + (*s++ - '0');
        if (v >= CPUS_MAX) return -2;
    }
    *p = s;
    *out = (int)v;
    return 0;
}

static int
item_fail(int rc, const char *s, const char *at, char *err, size_t errcap)
{
    if (rc == -2)
        return errfmt(err, errcap, "CPU list \"%s\": CPU numbers go up to %d",
                      s, CPUS_MAX - 1);
    if (!*at) return errfmt(err, errcap, "CPU list \"%s\": it ends early", s);
    return errfmt(err, errcap, "CPU list \"%s\": unexpected \"%c\" at %d", s,
                  *at, (int)(at - s) + 1);
}

int
cpus_parse(const char *s, cpu_set_t *out, char *err, size_t errcap)
{
    const char *p = s;
    size_t len = strnlen(s, CPUS_LIST_MAX + 1);

    CPU_ZERO(out);
    if (len == 0) return errfmt(err, errcap, "empty CPU list");
    if (len > CPUS_LIST_MAX)
        return errfmt(err, errcap, "CPU list longer than %d characters",
                      CPUS_LIST_MAX);
    for (;;) {
        int a, b, rc = read_cpu(&p, &a);
        if (rc < 0) return item_fail(rc, s, p, err, errcap);
        b = a;
        if (*p == '-') {
            p++;
            if ((rc = read_cpu(&p, &b)) < 0)
                return item_fail(rc, s, p, err, errcap);
            if (b < a)
                return errfmt(err, errcap,
                              "CPU list \"%s\": range %d-%d descends", s, a, b);
        }
        for (int i = a; i <= b; i++)
            CPU_SET(i, out);
        if (!*p) return 0;
        if (*p != ',') return item_fail(0, s, p, err, errcap);
        p++;
    }
}

char *
cpus_format(const cpu_set_t *set, char *buf, size_t cap)
{
    size_t n = 0;

    if (!cap) return buf;
    buf[0] = '\0';
    for (int i = 0; i < CPUS_MAX; i++) {
        if (!CPU_ISSET(i, set)) continue;
        int j = i;
        while (j + 1 < CPUS_MAX && CPU_ISSET(j + 1, set))
            j++;
        int w = j > i
                    ? snprintf(buf + n, cap - n, "%s%d-%d", n ? "," : "", i, j)
                    : snprintf(buf + n, cap - n, "%s%d", n ? "," : "", i);
        if (w < 0 || (size_t)w >= cap - n) { /* whole items only */
            buf[n] = '\0';
            break;
        }
        n += (size_t)w;
        i = j;
    }
    return buf;
}

/* ---- interrupts ---- */

/* Reads the first line of path into buf, without its newline. Returns
 * its length, or -1. */
static int
read_line(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char *ok = fgets(buf, (int)cap, f);
    fclose(f);
    if (!ok) return -1;
    buf[strcspn(buf, "\n")] = '\0';
    return (int)strlen(buf);
}

/* Adds the CPUs of each of irqs[0..n) to *out. Returns 0, or -1. */
static int
irq_cpus(const char *root, const int *irqs, int n, cpu_set_t *out, char *msg,
         size_t msgcap)
{
    char path[PATH_MAX], line[CPUS_LIST_MAX + 2], err[128];

    CPU_ZERO(out);
    for (int i = 0; i < n; i++) {
        cpu_set_t one;
        pathf(path, "%s/proc/irq/%d/effective_affinity_list", root, irqs[i]);
        if (read_line(path, line, sizeof line) <= 0) {
            pathf(path, "%s/proc/irq/%d/smp_affinity_list", root, irqs[i]);
            if (read_line(path, line, sizeof line) <= 0)
                return errfmt(msg, msgcap, "cannot read %s", path);
        }
        if (cpus_parse(line, &one, err, sizeof err) < 0)
            return errfmt(msg, msgcap, "IRQ %d: %s", irqs[i], err);
        CPU_OR(out, out, &one);
    }
    return 0;
}

/* 1 if the interrupt names in line (after "N:" and the counts) include one
 * starting with prefix. */
static int
names_match(char *line, const char *prefix)
{
    size_t plen = strlen(prefix);
    for (char *save, *t = strtok_r(line, " \t\n,", &save); t;
         t = strtok_r(NULL, " \t\n,", &save)) {
        if (strncmp(t, prefix, plen) == 0) return 1;
    }
    return 0;
}

/* The IRQs of virtio device number v: /proc/interrupts' lines naming
 * virtioV-req (virtio-blk's request queues). */
static int
virtio_irqs(const char *root, unsigned v, int *irqs, char *msg, size_t msgcap)
{
    char path[PATH_MAX], line[4096], prefix[32];
    int n = 0;

    snprintf(prefix, sizeof prefix, "virtio%u-req", v);
    pathf(path, "%s/proc/interrupts", root);
    FILE *f = fopen(path, "r");
    if (!f) return errfmt(msg, msgcap, "cannot read %s", path);
    while (n < IRQS_MAX && fgets(line, sizeof line, f)) {
        char *end;
        long irq = strtol(line, &end, 10);
        if (end == line || *end != ':' || irq < 0 || irq > INT_MAX) continue;
        if (names_match(end + 1, prefix)) irqs[n++] = (int)irq;
    }
    fclose(f);
    if (!n)
        return errfmt(msg, msgcap, "%s names no %s interrupt", path, prefix);
    return n;
}

/* The IRQs listed in dir/msi_irqs. Returns their count, or -1. */
static int
msi_irqs(const char *dir, int *irqs, char *msg, size_t msgcap)
{
    char path[PATH_MAX];
    int n = 0;

    pathf(path, "%s/msi_irqs", dir);
    DIR *d = opendir(path);
    if (!d) return errfmt(msg, msgcap, "cannot read %s", path);
    for (struct dirent *e; n < IRQS_MAX && (e = readdir(d));) {
        char *end;
        long irq = strtol(e->d_name, &end, 10);
        if (end != e->d_name && !*end && irq >= 0 && irq <= INT_MAX)
            irqs[n++] = (int)irq;
    }
    closedir(d);
    if (!n) return errfmt(msg, msgcap, "%s lists no interrupt", path);
    return n;
}

/* 1 if path is a directory. */
static int
is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The single entry of dir/slaves into name, or -1 (none, several). */
static int
only_slave(const char *dir, char *name, size_t cap)
{
    char path[PATH_MAX];
    int n = 0;

    pathf(path, "%s/slaves", dir);
    DIR *d = opendir(path);
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        if (n++ == 0) snprintf(name, cap, "%s", e->d_name);
    }
    closedir(d);
    return n == 1 ? 0 : -1;
}

/* The IRQs of the device at sysfs path link (a block device's entry),
 * walking up from it to sys/devices; top is real root + "/sys/devices". */
static int
device_irqs(const char *root, const char *top, const char *link, int depth,
            int *irqs, char *msg, size_t msgcap)
{
    char real[PATH_MAX], dir[PATH_MAX], name[256];

    if (!realpath(link, real)) return errfmt(msg, msgcap, "no %s", link);
    pathf(dir, "%s", real);
    size_t toplen = strlen(top);
    while (strlen(dir) > toplen && strncmp(dir, top, toplen) == 0) {
        char *base = strrchr(dir, '/') + 1;
        unsigned v;
        int k = 0;
        if (sscanf(base, "virtio%u%n", &v, &k) == 1 && k && !base[k]) {
            int n = virtio_irqs(root, v, irqs, msg, msgcap);
            if (n > 0) snprintf(msg, msgcap, "%s (virtio%u-req)", real, v);
            return n;
        }
        char msi[PATH_MAX];
        pathf(msi, "%s/msi_irqs", dir);
        if (is_dir(msi)) {
            int n = msi_irqs(dir, irqs, msg, msgcap);
            if (n > 0) snprintf(msg, msgcap, "%s (msi_irqs of %s)", real, dir);
            return n;
        }
        base[-1] = '\0';
    }
    if (depth < STACK_DEPTH && only_slave(real, name, sizeof name) == 0) {
        pathf(dir, "%s/sys/class/block/%s", root, name);
        return device_irqs(root, top, dir, depth + 1, irqs, msg, msgcap);
    }
    return errfmt(msg, msgcap, "%s: no device interrupts found", real);
}

int
cpus_dev_irqs(const char *root, unsigned maj, unsigned min, cpu_set_t *out,
              char *msg, size_t msgcap)
{
    char link[PATH_MAX], top[PATH_MAX], rroot[PATH_MAX] = "";
    int irqs[IRQS_MAX];

    if (*root && !realpath(root, rroot))
        return errfmt(msg, msgcap, "no %s", root);
    pathf(top, "%s/sys/devices", rroot);
    pathf(link, "%s/sys/dev/block/%u:%u", rroot, maj, min);
    if (access(link, F_OK) < 0)
        return errfmt(msg, msgcap, "device %u:%u is not a block device", maj,
                      min);
    int n = device_irqs(rroot, top, link, 0, irqs, msg, msgcap);
    if (n < 0) return -1;
    char what[512];
    snprintf(what, sizeof what, "%s", msg);
    if (irq_cpus(rroot, irqs, n, out, msg, msgcap) < 0) return -1;
    snprintf(msg, msgcap, "%s", what);
    return 0;
}

int
cpus_split(const cpu_set_t *allowed, const cpu_set_t *irq, cpu_set_t *loop,
           cpu_set_t *store, char *msg, size_t msgcap)
{
    char a[64], b[64];

    if (CPU_COUNT(allowed) < 2)
        return errfmt(msg, msgcap, "this process may use one CPU only (%s)",
                      cpus_format(allowed, a, sizeof a));
    CPU_AND(store, irq, allowed);
    CPU_XOR(loop, allowed, store); /* allowed minus store */
    if (!CPU_COUNT(store))
        return errfmt(msg, msgcap,
                      "the interrupts go to CPUs %s, none of this process's %s",
                      cpus_format(irq, a, sizeof a),
                      cpus_format(allowed, b, sizeof b));
    if (!CPU_COUNT(loop))
        return errfmt(
            msg, msgcap,
            "the interrupts go to every CPU this process may use (%s)",
            cpus_format(allowed, a, sizeof a));
    return 0;
}

/* ---- threads ---- */

int
cpus_bind_self(const cpu_set_t *set, char *err, size_t errcap)
{
    int e = pthread_setaffinity_np(pthread_self(), sizeof *set, set);
    if (e) return errfmt(err, errcap, "sched_setaffinity: %s", strerror(e));
    return 0;
}

int
cpus_get_self(cpu_set_t *out, char *err, size_t errcap)
{
    int e = pthread_getaffinity_np(pthread_self(), sizeof *out, out);
    if (e) return errfmt(err, errcap, "sched_getaffinity: %s", strerror(e));
    return 0;
}
