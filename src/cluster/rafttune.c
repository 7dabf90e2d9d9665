/* rafttune.c - libraft 0.15 workarounds (see rafttune.h). */
#include "cluster/rafttune.h"

static void
nodelay_one(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (h->type == UV_TCP && !uv_is_closing(h))
        uv_tcp_nodelay((uv_tcp_t *)h, 1);
}

static void
on_nodelay(uv_timer_t *timer)
{
    uv_walk(timer->loop, nodelay_one, NULL);
}

void
rafttune_start(RaftTune *t, uv_loop_t *loop)
{
    uv_timer_init(loop, &t->nodelay);
    uv_timer_start(&t->nodelay, on_nodelay, 0, RAFTTUNE_NODELAY_MS);
}

void
rafttune_attach(RaftTune *t, struct raft *raft, unsigned threshold,
                unsigned trailing, uint64_t max_bytes)
{
    t->max_bytes = max_bytes;
    t->raft = raft;
    t->threshold = threshold;
    t->trailing = trailing;
    t->log_bytes = t->log_count = 0;
    raft_set_snapshot_threshold(raft, threshold);
    raft_set_snapshot_trailing(raft, trailing);
}

void
rafttune_seed(RaftTune *t)
{
    t->seed = 1;
    raft_set_snapshot_threshold(t->raft, 1);
}

void
rafttune_close(RaftTune *t)
{
    uv_close((uv_handle_t *)&t->nodelay, NULL);
}

void
rafttune_applied(RaftTune *t, size_t len)
{
    t->log_bytes += len;
    t->log_count++;
    if (t->log_bytes >= t->max_bytes)
        raft_set_snapshot_threshold(t->raft, (unsigned)t->log_count);
}

void
rafttune_snapshot_taken(RaftTune *t)
{
    uint64_t mean = t->log_count ? t->log_bytes / t->log_count : 0;
    uint64_t trail = mean ? t->max_bytes / mean : t->trailing;

    if (trail > t->trailing) trail = t->trailing;
    raft_set_snapshot_trailing(
        t->raft, t->seed ? 0 : (unsigned)(trail < 16 ? 16 : trail));
    t->seed = 0;
    raft_set_snapshot_threshold(t->raft, t->threshold);
    t->log_bytes = t->log_count = 0;
}
