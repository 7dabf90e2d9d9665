/* raftchange.c - membership changes on the raft thread (raftnode.h,
 * raftnode_change): libraft 0.15 makes one configuration change at a time,
 * each committed before the next may start (RAFT_CANTCHANGE otherwise). An
 * added node goes spare (raft_add), then standby (raft_assign: it gets the
 * log, or a snapshot, without voting), then, once its match index is near
 * the leader's last index, voter (raft_assign: libraft catches it up the
 * rest of the way in rounds before it appends the promotion). A voter that
 * is removed goes standby first (start_remove), then raft_remove. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/common.h"
#include "cluster/raftnode_impl.h"

/* What the change under way waits for. */
enum {
    PH_ADD = 1, /* raft_add's commit */
    PH_STANDBY, /* raft_assign(STANDBY)'s commit */
    PH_CATCHUP, /* the standby's match index (rn_change_check) */
    PH_VOTER,   /* raft_assign(VOTER)'s catch-up rounds and commit */
    PH_DEMOTE,  /* raft_assign(STANDBY) of a voter being removed */
    PH_DEMOTED, /* the demoted node's copy of it (rn_change_check) */
    PH_REMOVE   /* raft_remove's commit */
};

/* Publishes the outcome (once), and ends the change unless libraft still
 * holds its request (then on_change ends it). */
static void __attribute__((format(printf, 3, 4)))
finish(RaftNode *n, int result, const char *fmt, ...)
{
    pthread_mutex_lock(&n->mu);
    if (!n->ch.answered) {
        n->ch_result = result;
        n->ch_msg[0] = '\0';
        if (fmt) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(n->ch_msg, sizeof n->ch_msg, fmt, ap);
            va_end(ap);
        }
        n->ch.answered = 1;
    }
    if (!n->ch.pending) {
        n->ch_busy = 0;
        n->ch.op = 0;
    }
    pthread_mutex_unlock(&n->mu);
    if (n->cb.notify) n->cb.notify(n->cb.arg); /* the loop answers */
}

static void on_change(struct raft_change *req, int status);

/* A libraft request's synchronous result: 0, it is ours until on_change;
 * else the change ends here. */
static void
submitted(RaftNode *n, int rv, int phase)
{
    if (rv == 0) {
        n->ch.pending = 1;
        n->ch.phase = phase;
        return;
    }
    finish(
        n, rv == RAFT_CANTCHANGE ? RAFTNODE_CH_BUSY : RAFTNODE_CH_FAILED, "%s",
        raft_errmsg(&n->raft)[0] ? raft_errmsg(&n->raft) : raft_strerror(rv));
}

/* Promotes the standby to voter. */
static void
promote(RaftNode *n)
{
    int rv =
        raft_assign(&n->raft, &n->ch.req, n->ch.peer.id, RAFT_VOTER, on_change);
    submitted(n, rv, PH_VOTER);
}

static void
on_change(struct raft_change *req, int status)
{
    RaftNode *n = req->data;

    n->ch.pending = 0;
    if (n->closing || status != 0 || n->ch.answered) {
        /* (answered: it timed out, and ends now) */
        finish(n, RAFTNODE_CH_FAILED, "%s",
               n->closing ? "stopping" : raft_strerror(status));
        return;
    }
    switch (n->ch.phase) {
    case PH_ADD:
        submitted(n,
                  raft_assign(&n->raft, &n->ch.req, n->ch.peer.id, RAFT_STANDBY,
                              on_change),
                  PH_STANDBY);
        return;
    case PH_STANDBY:
        n->ch.phase = PH_CATCHUP; /* rn_change_check */
        return;
    case PH_DEMOTE:
        n->ch.phase = PH_DEMOTED; /* rn_change_check */
        n->ch.demoted_until =
            mono_ns() + (int64_t)RAFTNODE_DEMOTE_WAIT_MS * 1000000;
        return;
    default: /* PH_VOTER, PH_REMOVE */
        if (n->ch.demote_late)
            finish(n, RAFTNODE_CH_OK,
                   "node %llu had not stored its demotion after %d ms (down, "
                   "or restarting): if it runs and does not stop by itself, "
                   "stop it",
                   (unsigned long long)n->ch.peer.id, RAFTNODE_DEMOTE_WAIT_MS);
        else
            finish(n, RAFTNODE_CH_OK, NULL);
    }
}

/* A voter is demoted to standby first: it still gets the log, so it sees
 * the configuration that demotes it (node.c takes that for its removal);
 * after raft_remove the leader sends it nothing more. A standby or spare
 * is removed at once. */
static void
start_remove(RaftNode *n)
{
    const struct raft_configuration *conf = &n->raft.configuration;
    int voter = 0;

    for (unsigned i = 0; i < conf->n; i++)
        voter |= conf->servers[i].id == n->ch.peer.id &&
                 conf->servers[i].role == RAFT_VOTER;
    if (!voter || raft_state(&n->raft) != RAFT_LEADER) {
        submitted(n,
                  raft_remove(&n->raft, &n->ch.req, n->ch.peer.id, on_change),
                  PH_REMOVE);
        return;
    }
    submitted(n,
              raft_assign(&n->raft, &n->ch.req, n->ch.peer.id, RAFT_STANDBY,
                          on_change),
              PH_DEMOTE);
    n->ch.demote_index = raft_last_index(&n->raft); /* its entry */
}

void
rn_change_take(RaftNode *n)
{
    pthread_mutex_lock(&n->mu);
    int asked = n->ch_asked;
    n->ch_asked = 0;
    if (asked) n->ch = n->ch_in;
    pthread_mutex_unlock(&n->mu);
    if (!asked) return;
    n->ch.req.data = n;
    if (n->ch.op == RAFTNODE_CHANGE_REMOVE) {
        start_remove(n);
        return;
    }
    submitted(
        n, raft_add(&n->raft, &n->ch.req, n->ch.peer.id, n->ch.addr, on_change),
        PH_ADD);
}

/* Leading: the highest index the member of the change has stored, as the
 * leader knows it (libraft 0.15's progress; later versions keep it
 * private: then the last index, and libraft's own catch-up rounds do all
 * of the adding). 0 if it is not in the configuration. */
static uint64_t
match_of(RaftNode *n)
{
#ifndef RAFT_VERSION_NUMBER
    const struct raft_configuration *conf = &n->raft.configuration;

    for (unsigned i = 0; i < conf->n; i++)
        if (conf->servers[i].id == n->ch.peer.id)
            return n->raft.leader_state.progress[i].match_index;
    return 0;
#else
    return raft_last_index(&n->raft);
#endif
}

/* Leading: whether the standby has stored anything (a node that never
 * answered has a match index of 0) and its log is within
 * RAFTNODE_CATCHUP_SLACK of the last index. */
static int
caught_up(RaftNode *n)
{
    uint64_t match = match_of(n);
    return match > 0 &&
           match + RAFTNODE_CATCHUP_SLACK >= raft_last_index(&n->raft);
}

/* Leading, a voter being removed was demoted: once it stored the
 * demotion (it then stops itself, node.c), or RAFTNODE_DEMOTE_WAIT_MS
 * later (it may be down), raft_remove. */
static void
check_demoted(RaftNode *n)
{
    if (raft_state(&n->raft) != RAFT_LEADER) {
        finish(n, RAFTNODE_CH_FAILED, "leadership lost");
        return;
    }
    if (match_of(n) < n->ch.demote_index) {
        if (mono_ns() < n->ch.demoted_until) return;
        n->ch.demote_late = 1;
    }
    submitted(n, raft_remove(&n->raft, &n->ch.req, n->ch.peer.id, on_change),
              PH_REMOVE);
}

void
rn_change_check(RaftNode *n)
{
    if (!n->ch.op) return;
    int leading = raft_state(&n->raft) == RAFT_LEADER;
    int late = mono_ns() > n->ch.deadline;

    if (n->ch.phase == PH_DEMOTED && !n->ch.pending) {
        check_demoted(n);
        return;
    }
    if (n->ch.phase == PH_CATCHUP && !n->ch.pending) {
        if (!leading)
            finish(n, RAFTNODE_CH_FAILED, "leadership lost");
        else if (caught_up(n))
            promote(n);
        else if (late)
            finish(n, RAFTNODE_CH_TIMEOUT,
                   "node %llu did not catch up in time: it stays a standby "
                   "(remove it, or add it again)",
                   (unsigned long long)n->ch.peer.id);
        return;
    }
    if (late && !n->ch.answered)
        finish(n, RAFTNODE_CH_TIMEOUT,
               "the change did not commit in time (libraft is still at it)");
}

int
raftnode_change(RaftNode *n, int op, const ClusterPeer *p, unsigned timeout_ms)
{
    int rc = RAFTNODE_CH_RUNNING;

    pthread_mutex_lock(&n->mu);
    if (n->stopping || !n->wake_open) {
        rc = RAFTNODE_CH_FAILED;
    } else if (n->ch_busy) {
        rc = RAFTNODE_CH_BUSY;
    } else {
        memset(&n->ch_in, 0, sizeof n->ch_in);
        n->ch_in.op = op;
        n->ch_in.peer = *p;
        cluster_raft_addr(p, n->ch_in.addr, sizeof n->ch_in.addr);
        n->ch_in.deadline = mono_ns() + (int64_t)timeout_ms * 1000000;
        n->ch_asked = n->ch_busy = 1;
        n->ch_result = RAFTNODE_CH_RUNNING;
        n->ch_msg[0] = '\0';
        uv_async_send(&n->wake);
    }
    pthread_mutex_unlock(&n->mu);
    return rc;
}

int
raftnode_change_poll(RaftNode *n, char *msg, size_t cap)
{
    pthread_mutex_lock(&n->mu);
    int rc = n->ch_result;
    if (cap) snprintf(msg, cap, "%s", n->ch_msg);
    pthread_mutex_unlock(&n->mu);
    return rc;
}

int
raftnode_change_busy(RaftNode *n)
{
    pthread_mutex_lock(&n->mu);
    int busy = n->ch_busy;
    pthread_mutex_unlock(&n->mu);
    return busy;
}
