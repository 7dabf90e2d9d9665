/* place.c - the threads' CPUs at start-up (place.h). */
#include "server/place.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "base/cpus.h"
#include "base/log.h"

/* The device of dir, or of its nearest existing ancestor (a new data
 * directory is made later). Returns 0, or -1 with why in msg. */
static int
dir_device(const char *dir, dev_t *dev, char *msg, size_t msgcap)
{
    char path[PATH_MAX];
    struct stat st;

    snprintf(path, sizeof path, "%s", dir);
    while (stat(path, &st) < 0) {
        char *slash = strrchr(path, '/');
        if (errno != ENOENT || strcmp(path, ".") == 0) {
            snprintf(msg, msgcap, "cannot stat %s: %s", dir, strerror(errno));
            return -1;
        }
        if (!slash)
            snprintf(path, sizeof path, ".");
        else if (slash == path)
            slash[1] = '\0';
        else
            *slash = '\0';
    }
    *dev = st.st_dev;
    return 0;
}

/* --cpus auto: fills what p lacks. Returns 0, or -1 with why in msg. */
static int
plan_auto(const ServerConfig *cfg, Placement *p, char *msg, size_t msgcap)
{
    const char *root = getenv("ROCKSTALKD_TEST_SYSROOT");
    cpu_set_t allowed, irq, loop, store;
    char what[512];
    dev_t dev;

    if (cfg->memory_only)
        return snprintf(msg, msgcap, "no data directory (--memory)"), -1;
    if (dir_device(cfg->dir, &dev, msg, msgcap) < 0 ||
        cpus_get_self(&allowed, msg, msgcap) < 0 ||
        cpus_dev_irqs(root ? root : "", major(dev), minor(dev), &irq, what,
                      sizeof what) < 0 ||
        cpus_split(&allowed, &irq, &loop, &store, msg, msgcap) < 0) {
        if (msg[0] == '\0') snprintf(msg, msgcap, "%s", what);
        return -1;
    }
    if (!p->loop_on) p->loop = loop;
    if (!p->store_on) p->store = store;
    p->loop_on = p->store_on = 1;
    snprintf(msg, msgcap, "%s", what);
    return 0;
}

void
place_plan(const ServerConfig *cfg, Placement *p)
{
    char msg[1024] = "", a[128], b[128];

    memset(p, 0, sizeof *p);
    p->loop = cfg->cpus.loop;
    p->store = cfg->cpus.store;
    p->loop_on = cfg->cpus.has_loop;
    p->store_on = cfg->cpus.has_store && !cfg->memory_only;
    if (cfg->cpus.automatic && !(p->loop_on && p->store_on)) {
        if (plan_auto(cfg, p, msg, sizeof msg) < 0) {
            log_msg(0, "--cpus auto: placing no thread: %s", msg);
            p->loop_on = p->store_on = 0; /* all or nothing */
            return;
        }
        log_msg(0,
                "--cpus auto: the store's threads on CPU %s, the loop on "
                "%s (interrupts of %s)",
                cpus_format(&p->store, a, sizeof a),
                cpus_format(&p->loop, b, sizeof b), msg);
        return;
    }
    if (p->loop_on || p->store_on)
        log_msg(0, "the loop thread on CPU %s, the store's threads on %s",
                p->loop_on ? cpus_format(&p->loop, a, sizeof a) : "any",
                p->store_on ? cpus_format(&p->store, b, sizeof b) : "any");
}

int
place_store_begin(Placement *p, char *err, size_t errcap)
{
    if (!p->store_on) return 0;
    if (cpus_get_self(&p->saved, err, errcap) < 0) return -1;
    p->saved_on = 1;
    return cpus_bind_self(&p->store, err, errcap);
}

int
place_loop(Placement *p, char *err, size_t errcap)
{
    if (p->loop_on) return cpus_bind_self(&p->loop, err, errcap);
    if (p->saved_on) return cpus_bind_self(&p->saved, err, errcap);
    return 0;
}
