/* view.c - see view.h. */
#include "view.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "yaml.h"

/* stats-tube requests sent before their replies are read: enough to hide
 * round trips, few enough that neither side's socket buffer fills. */
#define VIEW_PIPELINE 64

static const struct {
    const char *title;
    const char *key; /* stats-tube key, NULL for name and rates */
    int width;
} cols[VIEW_COL_COUNT] = {
    {"TUBE", NULL, 0},
    {"READY", "current-jobs-ready", 8},
    {"URGENT", "current-jobs-urgent", 7},
    {"RESERVED", "current-jobs-reserved", 9},
    {"DELAYED", "current-jobs-delayed", 8},
    {"BURIED", "current-jobs-buried", 7},
    {"WAITING", "current-waiting", 8},
    {"WATCHING", "current-watching", 9},
    {"PUTS/S", NULL, 9},
    {"DELS/S", NULL, 9},
};

static void
server_totals(Snapshot *snap, const char *y)
{
    uint64_t a = 0, b = 0;
    yaml_u64(y, "current-jobs-ready", &snap->ready);
    yaml_u64(y, "current-jobs-urgent", &snap->urgent);
    yaml_u64(y, "current-jobs-reserved", &snap->reserved);
    yaml_u64(y, "current-jobs-delayed", &snap->delayed);
    yaml_u64(y, "current-jobs-buried", &snap->buried);
    yaml_u64(y, "total-jobs", &snap->total_jobs);
    yaml_u64(y, "current-connections", &snap->conns);
    yaml_u64(y, "current-producers", &snap->producers);
    yaml_u64(y, "current-workers", &snap->workers);
    yaml_u64(y, "current-waiting", &snap->waiting);
    yaml_u64(y, "current-tubes", &snap->ntubes_server);
    yaml_u64(y, "uptime", &snap->uptime);
    yaml_u64(y, "cmd-put", &snap->puts);
    yaml_u64(y, "cmd-delete", &snap->deletes);
    yaml_u64(y, "cmd-reserve", &a);
    yaml_u64(y, "cmd-reserve-with-timeout", &b);
    snap->reserves = a + b;
    snap->has_syncs = yaml_u64(y, "rockstalk-syncs", &snap->syncs) == 0;
    if (yaml_double(y, "rockstalk-sync-latency-us", &snap->sync_us) < 0)
        snap->sync_us = -1;
    if (yaml_get(y, "rockstalk-durability", snap->durability,
                 sizeof snap->durability) < 0)
        snap->durability[0] = '\0';
    char v[sizeof snap->version] = "";
    yaml_get(y, "version", v, sizeof v);
    snprintf(snap->version, sizeof snap->version, "%.*s",
             (int)strcspn(v + (v[0] == '"'), "\""), v + (v[0] == '"'));
}

/* Asks for stats or list-tubes; the reply must be OK with a body. */
static int
ask_yaml(Session *s, const char *line, Reply *r, char *err, size_t errcap)
{
    if (session_ask(s, line, r, err, errcap) < 0) return -1;
    if (reply_is(r, "OK") && r->body) return 0;
    snprintf(err, errcap, "%s: unexpected reply %.60s", line, r->line);
    reply_free(r);
    return -1;
}

static void
tube_row(TubeRow *t, const char *name, const char *y)
{
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    for (int c = VIEW_COL_READY; c < VIEW_COL_PUTS; c++)
        yaml_u64(y, cols[c].key, &t->n[c]);
    yaml_u64(y, "total-jobs", &t->total_jobs);
    yaml_u64(y, "cmd-delete", &t->deletes);
    t->rate[0] = t->rate[1] = -1;
}

/* stats-tube for names[from..to), pipelined; vanished tubes are skipped. */
static int
fetch_tubes(Session *s, Snapshot *snap, char **names, size_t from, size_t to,
            char *err, size_t errcap)
{
    char line[TUBE_NAME_MAX + 16];
    for (size_t i = from; i < to; i++) {
        int n = snprintf(line, sizeof line, "stats-tube %s\r\n", names[i]);
        if (client_send(&s->conn, line, (size_t)n, err, errcap) < 0) return -1;
    }
    for (size_t i = from; i < to; i++) {
        Reply r;
        if (client_read_reply(&s->conn, &r, err, errcap) < 0) return -1;
        if (reply_is(&r, "OK") && r.body)
            tube_row(&snap->tubes[snap->ntubes++], names[i], r.body);
        reply_free(&r);
    }
    return 0;
}

int
view_fetch(Session *s, Snapshot *snap, char *err, size_t errcap)
{
    Reply r;
    char **names = NULL;
    size_t n = 0;
    memset(snap, 0, sizeof *snap);
    snap->puts_s = snap->reserves_s = snap->deletes_s = snap->syncs_s = -1;
    if (ask_yaml(s, "stats", &r, err, errcap) < 0) return -1;
    snap->at_ns = mono_ns();
    server_totals(snap, r.body);
    reply_free(&r);
    if (ask_yaml(s, "list-tubes", &r, err, errcap) < 0) return -1;
    int rc = yaml_list(r.body, &names, &n);
    reply_free(&r);
    if (rc == 0 && n > 0 && !(snap->tubes = calloc(n, sizeof *snap->tubes)))
        rc = -1;
    if (rc < 0) snprintf(err, errcap, "out of memory");
    for (size_t i = 0; rc == 0 && i < n; i += VIEW_PIPELINE)
        rc = fetch_tubes(s, snap, names, i,
                         i + VIEW_PIPELINE < n ? i + VIEW_PIPELINE : n, err,
                         errcap);
    yaml_list_free(names, n);
    return rc;
}

void
view_free(Snapshot *snap)
{
    free(snap->tubes);
    snap->tubes = NULL;
    snap->ntubes = 0;
}

/* Per-second rate of a counter that went from a to b in secs; a counter
 * that went backwards (server restarted) gives no rate. */
static double
rate(uint64_t a, uint64_t b, double secs)
{
    return (b < a || secs <= 0) ? -1 : (double)(b - a) / secs;
}

void
view_rates(Snapshot *cur, const Snapshot *prev)
{
    double secs = (double)(cur->at_ns - prev->at_ns) / 1e9;
    cur->puts_s = rate(prev->puts, cur->puts, secs);
    cur->reserves_s = rate(prev->reserves, cur->reserves, secs);
    cur->deletes_s = rate(prev->deletes, cur->deletes, secs);
    if (cur->has_syncs && prev->has_syncs)
        cur->syncs_s = rate(prev->syncs, cur->syncs, secs);
    for (size_t i = 0; i < cur->ntubes; i++) {
        TubeRow *t = &cur->tubes[i];
        for (size_t j = 0; j < prev->ntubes; j++) {
            const TubeRow *p = &prev->tubes[j];
            if (strcmp(p->name, t->name) != 0) continue;
            t->rate[0] = rate(p->total_jobs, t->total_jobs, secs);
            t->rate[1] = rate(p->deletes, t->deletes, secs);
            break;
        }
    }
}

typedef struct SortKey {
    ViewCol col;
    int reverse;
} SortKey;

static double
col_value(const TubeRow *t, ViewCol c)
{
    return c >= VIEW_COL_PUTS ? t->rate[c - VIEW_COL_PUTS] : (double)t->n[c];
}

static int
compare_rows(const void *a, const void *b, void *arg)
{
    const TubeRow *x = a, *y = b;
    const SortKey *k = arg;
    int byname = strcmp(x->name, y->name), c = byname;
    if (k->col != VIEW_COL_NAME) {
        double vx = col_value(x, k->col), vy = col_value(y, k->col);
        c = vx > vy ? -1 : vx < vy ? 1 : 0;
    }
    if (k->reverse) c = -c;
    return c ? c : byname;
}

void
view_sort(Snapshot *snap, ViewCol col, int reverse)
{
    SortKey k = {col, reverse};
    if (snap->ntubes > 1)
        qsort_r(snap->tubes, snap->ntubes, sizeof *snap->tubes, compare_rows,
                &k);
}

int
view_name_width(const Snapshot *snap)
{
    size_t w = 4;
    for (size_t i = 0; i < snap->ntubes; i++)
        if (strlen(snap->tubes[i].name) > w) w = strlen(snap->tubes[i].name);
    return (int)w;
}

static int
ncols(int rates)
{
    return rates ? VIEW_COL_COUNT : VIEW_COL_PUTS;
}

void
view_header(char *buf, size_t cap, int name_w, int rates)
{
    int off = snprintf(buf, cap, "%-*s", name_w, cols[0].title);
    for (int c = 1; c < ncols(rates) && off >= 0 && (size_t)off < cap; c++)
        off += snprintf(buf + off, cap - (size_t)off, " %*s", cols[c].width,
                        cols[c].title);
}

/* A rate as shown: "-" when unknown, one decimal below 100. */
static void
fmt_rate(char *out, size_t cap, double r)
{
    if (r < 0)
        snprintf(out, cap, "-");
    else if (r < 100)
        snprintf(out, cap, "%.1f", r);
    else
        snprintf(out, cap, "%.0f", r);
}

void
view_row(const TubeRow *t, char *buf, size_t cap, int name_w, int rates)
{
    int len = (int)strlen(t->name), off;
    if (len > name_w)
        off = snprintf(buf, cap, "%.*s~", name_w - 1, t->name);
    else
        off = snprintf(buf, cap, "%-*s", name_w, t->name);
    for (int c = 1; c < ncols(rates) && off >= 0 && (size_t)off < cap; c++) {
        char v[32];
        if (c >= VIEW_COL_PUTS)
            fmt_rate(v, sizeof v, t->rate[c - VIEW_COL_PUTS]);
        else
            snprintf(v, sizeof v, "%" PRIu64, t->n[c]);
        off += snprintf(buf + off, cap - (size_t)off, " %*s", cols[c].width, v);
    }
}

int
view_summary(const Snapshot *snap, char lines[][VIEW_LINE], int max)
{
    char p[16], r[16], d[16], sy[16], lat[32] = "";
    fmt_rate(p, sizeof p, snap->puts_s);
    fmt_rate(r, sizeof r, snap->reserves_s);
    fmt_rate(d, sizeof d, snap->deletes_s);
    fmt_rate(sy, sizeof sy, snap->has_syncs ? snap->syncs_s : -1);
    if (snap->sync_us >= 0)
        snprintf(lat, sizeof lat, " (%.0f us each)", snap->sync_us);
    char all[4][VIEW_LINE];
    snprintf(all[0], VIEW_LINE,
             "server %s  up %" PRIu64 " s  durability %s  tubes %" PRIu64,
             snap->version[0] ? snap->version : "?", snap->uptime,
             snap->durability[0] ? snap->durability : "- (not rockstalkd)",
             snap->ntubes_server);
    snprintf(all[1], VIEW_LINE,
             "jobs: %" PRIu64 " ready (%" PRIu64 " urgent), %" PRIu64
             " reserved, %" PRIu64 " delayed, %" PRIu64 " buried; %" PRIu64
             " total",
             snap->ready, snap->urgent, snap->reserved, snap->delayed,
             snap->buried, snap->total_jobs);
    snprintf(all[2], VIEW_LINE,
             "connections: %" PRIu64 " (%" PRIu64 " producers, %" PRIu64
             " workers, %" PRIu64 " waiting)",
             snap->conns, snap->producers, snap->workers, snap->waiting);
    snprintf(all[3], VIEW_LINE,
             "per second: %s puts, %s reserves, %s deletes, %s syncs%s", p, r,
             d, sy, lat);
    int n = max < 4 ? max : 4;
    for (int i = 0; i < n; i++)
        memcpy(lines[i], all[i], VIEW_LINE);
    return n;
}
