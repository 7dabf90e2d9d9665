/* httptubes.c - see httptubes.h. */
#include "server/httptubes.h"

#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "queue/readyage.h"

/* Takes this second's sample of every tube's counters (TubeRates). */
void
httptubes_sample(Server *s)
{
    uint32_t k = ++s->rate_tick;
    unsigned slot = k % TUBE_RATE_SAMPLES;
    s->rate_at[slot] = mono_ns();
    for (size_t i = 0; i < s->tubes.list.len; i++) {
        Tube *t = s->tubes.list.items[i];
        if (!t->rates.since) t->rates.since = k;
        t->rates.n[slot][0] = t->total_jobs;
        t->rates.n[slot][1] = t->reserve_ct;
        t->rates.n[slot][2] = t->delete_ct;
    }
}

/* Counter c of t per second, over the oldest sample it has within the
 * last TUBE_RATE_SAMPLES (0 with fewer than two). */
static double
rate(const Server *s, const Tube *t, int c)
{
    uint32_t k = s->rate_tick, o = t->rates.since;
    if (k >= TUBE_RATE_SAMPLES && k - (TUBE_RATE_SAMPLES - 1) > o)
        o = k - (TUBE_RATE_SAMPLES - 1);
    if (!o || o >= k) return 0;
    const uint64_t *now = t->rates.n[k % TUBE_RATE_SAMPLES];
    const uint64_t *then = t->rates.n[o % TUBE_RATE_SAMPLES];
    int64_t dt =
        s->rate_at[k % TUBE_RATE_SAMPLES] - s->rate_at[o % TUBE_RATE_SAMPLES];
    if (dt <= 0 || now[c] < then[c]) return 0;
    return (double)(now[c] - then[c]) * 1e9 / (double)dt;
}

/* Seconds since the oldest ready job of t was put; 0 when none. */
static int64_t
oldest_ready_age(const Server *s, Tube *t)
{
    const Job *o = readyage_oldest(s, t);
    if (!o) return 0;
    int64_t age = (state_wall_ns(s) - o->created_at) / NS_PER_SEC;
    return age > 0 ? age : 0;
}

static void
tube_json(const Server *s, Tube *t, Json *j)
{
    static const char *const names[] = {"puts", "reserves", "deletes"};
    int64_t left = 0;
    if (t->pause_ns) left = (t->unpause_at - mono_ns()) / NS_PER_SEC;
    json_key(j, "name"), json_str(j, t->name, t->name_len);
    json_key(j, "ready"), json_u64(j, t->ready.len);
    json_key(j, "urgent"), json_u64(j, t->urgent_ct);
    json_key(j, "reserved"), json_u64(j, t->reserved_ct);
    json_key(j, "delayed"), json_u64(j, t->delay.len);
    json_key(j, "buried"), json_u64(j, t->buried_ct);
    json_key(j, "total-jobs"), json_u64(j, t->total_jobs);
    json_key(j, "using"), json_u64(j, t->using_ct);
    json_key(j, "watching"), json_u64(j, t->watching_ct);
    json_key(j, "waiting"), json_u64(j, t->waiting.len);
    json_key(j, "cmd-delete"), json_u64(j, t->delete_ct);
    json_key(j, "cmd-pause-tube"), json_u64(j, t->pause_ct);
    json_key(j, "paused"), json_bool(j, t->pause_ns != 0);
    json_key(j, "pause"), json_i64(j, t->pause_ns / NS_PER_SEC);
    json_key(j, "pause-time-left"), json_i64(j, left > 0 ? left : 0);
    json_key(j, "oldest-ready-age"), json_i64(j, oldest_ready_age(s, t));
    json_key(j, "rates");
    json_obj(j);
    for (int c = 0; c < 3; c++)
        json_key(j, names[c]), json_dbl(j, rate(s, t, c), 2);
    json_obj_end(j);
}

static int
by_name(const void *a, const void *b)
{
    return strcmp((*(const Tube *const *)a)->name,
                  (*(const Tube *const *)b)->name);
}

/* The tubes u may inspect (NULL: all) into *out (malloc'd), sorted by
 * name; returns how many, or -1 out of memory. */
static long
tubes_for(const Server *s, const AuthUser *u, Tube ***out)
{
    size_t n = s->tubes.list.len, k = 0;
    Tube **v = malloc((n ? n : 1) * sizeof *v);
    if (!v) return -1;
    for (size_t i = 0; i < n; i++) {
        Tube *t = s->tubes.list.items[i];
        if (!u || (auth_bits(u, t->name) & AUTH_INSPECT)) v[k++] = t;
    }
    qsort(v, k, sizeof *v, by_name);
    *out = v;
    return (long)k;
}

void
httptubes_render(const Server *s, const AuthUser *u, Json *j, HttpdDocs *d)
{
    Tube **v;
    long got = tubes_for(s, u, &v);
    if (got < 0) {
        j->failed = 1;
        return;
    }
    size_t n = (size_t)got, shown = n;
    if (shown > HTTPTUBES_MAX) shown = HTTPTUBES_MAX;
    json_obj(j);
    json_key(j, "count"), json_u64(j, n);
    json_key(j, "listed"), json_u64(j, shown);
    json_key(j, "truncated"), json_bool(j, shown < n);
    json_key(j, "rate-window-s"), json_u64(j, TUBE_RATE_SAMPLES - 1);
    json_key(j, "tubes");
    json_arr(j);
    for (size_t i = 0; i < shown && !j->failed; i++) {
        json_obj(j);
        size_t off = j->len - 1; /* its '{' */
        tube_json(s, v[i], j);
        json_obj_end(j);
        if (d) httpd_docs_add_tube(d, v[i]->name, off, j->len - off);
    }
    json_arr_end(j);
    json_obj_end(j);
    free(v);
}
