/* view.h - what `rockstalk tubes` and `rockstalk top` show: a snapshot of
 * the server's stats and of every tube's stats-tube, rates per second
 * between two snapshots, sorting, and the table's text. No terminal code
 * and no global state; the caller owns each Snapshot. */
#ifndef ROCKSTALK_CLI_VIEW_H
#define ROCKSTALK_CLI_VIEW_H

#include <stddef.h>
#include <stdint.h>

#include "base/common.h"
#include "session.h"

/* Table columns, in display order; VIEW_COL_PUTS and later are rates. */
typedef enum ViewCol {
    VIEW_COL_NAME = 0,
    VIEW_COL_READY,
    VIEW_COL_URGENT,
    VIEW_COL_RESERVED,
    VIEW_COL_DELAYED,
    VIEW_COL_BURIED,
    VIEW_COL_WAITING,
    VIEW_COL_WATCHING,
    VIEW_COL_PUTS,
    VIEW_COL_DELETES,
    VIEW_COL_COUNT
} ViewCol;

typedef struct TubeRow {
    char name[TUBE_NAME_MAX + 1];
    uint64_t n[VIEW_COL_PUTS]; /* counts by ViewCol (n[0] unused) */
    uint64_t total_jobs;       /* counters behind the rates */
    uint64_t deletes;
    double rate[2]; /* puts/s and deletes/s; < 0 before a second snapshot */
} TubeRow;

/* Server totals. Rates are < 0 until a second snapshot; syncs and
 * durability come from rockstalk-* keys and are absent from beanstalkd. */
typedef struct Snapshot {
    int64_t at_ns; /* monotonic time of the fetch */
    uint64_t ready, urgent, reserved, delayed, buried, total_jobs;
    uint64_t conns, producers, workers, waiting, ntubes_server, uptime;
    uint64_t puts, reserves, deletes, syncs; /* counters behind rates */
    int has_syncs;
    double sync_us; /* rockstalk-sync-latency-us, or < 0 */
    double puts_s, reserves_s, deletes_s, syncs_s;
    char durability[32]; /* "" from a plain beanstalkd */
    char version[32];
    TubeRow *tubes; /* malloc'd, ntubes rows */
    size_t ntubes;
} Snapshot;

/* Fetches stats, list-tubes and each tube's stats-tube over s. Returns 0,
 * or -1 with a message in err (connection failures, unexpected replies).
 * *snap must be released with view_free() either way. */
int view_fetch(Session *s, Snapshot *snap, char *err, size_t errcap);

/* Fills cur's rates from the counters of prev, an earlier snapshot of the
 * same server (tubes matched by name; new tubes get no rate yet). */
void view_rates(Snapshot *cur, const Snapshot *prev);

/* Sorts the tubes by col: names ascending, numbers descending, the other
 * way round when reverse is nonzero; ties by name. */
void view_sort(Snapshot *snap, ViewCol col, int reverse);

/* Frees the tube rows and empties *snap. */
void view_free(Snapshot *snap);

/* The table's header (rates nonzero: with the rate columns) in buf, which
 * is always NUL-ended. name_w is the width of the name column. */
void view_header(char *buf, size_t cap, int name_w, int rates);

/* One tube's row, as view_header lays it out. Names longer than name_w are
 * cut and end in '~'. */
void view_row(const TubeRow *t, char *buf, size_t cap, int name_w, int rates);

/* The widest tube name, at least 4 ("TUBE"). */
int view_name_width(const Snapshot *snap);

/* Bytes of one summary line (view_summary). */
#define VIEW_LINE 160

/* The server totals as up to max lines (at most 4) into lines; returns how
 * many were written. */
int view_summary(const Snapshot *snap, char lines[][VIEW_LINE], int max);

#endif
