/* Tests of raftfsm.c's state machine (fsm_apply, fsm_snapshot, fsm_restore)
 * driven by libraft 0.15's raft_fixture: three in-memory servers on one
 * simulated clock, no sockets, no disk, no threads, so every run takes the
 * same steps (the fixture's elections are fixed: no randomness here).
 *
 * Each server's state machine is a RaftNode (zeroed; rn_fsm_init; the
 * callbacks below; its RaftTune attached to the fixture's raft as
 * raftnode.c attaches it to its own) whose callbacks record into a model:
 * the (index, value) sequence applied, and a "state" (count, running hash,
 * last index) that the snapshot callback saves in an out-of-band store (the
 * harness) and the restore callback copies back, standing in for the
 * RocksDB checkpoint a real follower fetches.
 *
 * The seam: raftfsm.c reads libraft's state through &n->raft (the struct
 * raft embedded in RaftNode: raft_last_applied for the entry's index in
 * fsm_apply and the snapshot's in fsm_snapshot; raft_state and current_term
 * in rn_check_inflight, only with proposals in flight, which these tests
 * never have), while the fixture owns its servers' struct raft. So libraft
 * calls a shim fsm here that copies those three fields from the fixture's
 * raft into n->raft and then calls the RaftNode's own fsm (n->fsm, as
 * rn_fsm_init filled it). Proposals go through raft_apply on the fixture's
 * leader, not rn_submit; entries carry a 16-byte payload (a magic, a tag,
 * a value), a multiple of 8 bytes as raftnode_propose pads them: fsm_apply
 * hands the bytes to cb.apply as they are.
 *
 * Scenarios: commit on all in order; a cut-off leader's uncommitted
 * entries are never applied; a follower revived behind the leader's
 * snapshot installs it through fsm_restore; a snapshot without the
 * rockstalk manifest header (or of another version) is refused and fails
 * the node; a follower's append fault (the fixture's io_fault, and a write
 * completing with an error as uv reports one) is never counted by the
 * leader and nothing is applied twice. Each prints what libraft did. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <raft.h>
#include <raft/fixture.h>

#include "base/bytes.h"
#include "cluster/raftnode_impl.h"

#define NSERV 3
#define MAXLOG 256   /* applied entries recorded per server */
#define MAXSAVED 64  /* snapshots in the out-of-band store */
#define MAXVAL 4096  /* proposal values (their apply results by value) */
#define ENTRY_LEN 16 /* magic u32, tag u32, value u64 (LE each) */
#define ENTRY_MAGIC 0x58464b52u /* "RKFX" */
#define MAN_MAGIC 0x4d464b52u   /* "RKFM": this test's manifest */
#define MAN_LEN 16              /* magic u32, slot u32, index u64 */
/* raftfsm.c's snapshot header, as it must appear in libraft's snapshot */
#define SNAP_MAGIC 0x4e534b52u /* "RKSN" */
#define SNAP_VERSION 1u
#define SNAP_HDR 16
#define BIG_THRESHOLD 1024 /* no snapshot in the scenarios without one */

/* A server's replicated state, as the model keeps it. */
typedef struct State {
    uint64_t count, hash, last;
} State;

typedef struct Harness Harness;

/* One fixture server: its RaftNode, the shim fsm libraft calls, the model. */
typedef struct Server {
    Harness *h;
    unsigned i;
    RaftNode *n;
    struct raft *r; /* the fixture's */
    struct raft_fsm shim;
    State st;
    uint64_t idx[MAXLOG], val[MAXLOG]; /* applied, in call order */
    size_t nlog;
    size_t log_at_restore; /* nlog when the last restore happened */
    unsigned snapshots, restores, restore_calls, apply_calls, notified, bad;
    uint64_t restore_index;    /* the last restore's */
    uint64_t restored_applied; /* n->applied right after it */
    int restore_hdr_ok;        /* libraft's buffer began with our header */
    int corrupt_snapshot;      /* 1: the snapshot's version byte is spoiled */
    int fault_next_append;     /* 1: the next io append fails (io_fault) */
    int fail_next_write;       /* 1: the next append reports RAFT_IOERR */
    int (*append)(struct raft_io *io, struct raft_io_append *req,
                  const struct raft_entry entries[], unsigned k,
                  raft_io_append_cb cb); /* the fixture's */
} Server;

/* libraft 0.15 leaks the one-element bufs array of an installed snapshot
 * whose restore failed: installSnapshotCb's discard path (replication.c)
 * frees bufs[0].base and the configuration, not bufs (freed there in later
 * versions). With note_refused, shim_restore notes each refused buffer
 * (element 0 of that array), a heap of the test's (raft_heap_set) forgets
 * those libraft frees, and h_free frees the rest, so that ASan's leak
 * check stays exact for what the test and rockstalk allocate. */
typedef struct Orphans {
    int on;
    void *p[64];
    unsigned n;
} Orphans;

/* A snapshot the harness keeps out of band, by manifest slot. */
typedef struct Saved {
    unsigned server;
    uint64_t index;
    State st;
} Saved;

struct Harness {
    struct raft_fixture f;
    unsigned n;
    Server s[NSERV];
    Saved saved[MAXSAVED];
    unsigned nsaved;
    Orphans orphans;
    struct raft_heap heap;
    int done[MAXVAL];   /* raft_apply callbacks seen, by value */
    int status[MAXVAL]; /* ... and the last status */
};

/* One raft_apply, freed by its callback. */
typedef struct Req {
    struct raft_apply req;
    Harness *h;
    uint64_t value;
} Req;

static uint64_t
fnv(uint64_t h, const void *p, size_t len)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < len; i++)
        h = (h ^ s[i]) * 1099511628211ull;
    return h;
}

/* ---- the model: RaftNodeCallbacks ---- */

static int
cb_apply(void *arg, uint64_t index, const void *data, size_t len, uint64_t seq)
{
    Server *s = arg;
    const unsigned char *p = data;

    if (len != ENTRY_LEN || le_get32(p) != ENTRY_MAGIC || seq != 0 ||
        index <= s->st.last || s->nlog == MAXLOG) {
        s->bad++;
        return -1;
    }
    unsigned char ib[8];
    le_put64(ib, index);
    s->st.hash = fnv(
        fnv(s->st.hash ? s->st.hash : 14695981039346656037ull, ib, 8), p, len);
    s->st.count++;
    s->st.last = index;
    s->idx[s->nlog] = index;
    s->val[s->nlog++] = le_get64(p + 8);
    return 0;
}

static int
cb_snapshot(void *arg, uint64_t index, void **buf, size_t *len)
{
    Server *s = arg;
    Harness *h = s->h;

    if (h->nsaved == MAXSAVED || index < s->st.last) return -1;
    unsigned char *m = malloc(MAN_LEN);
    if (!m) return -1;
    h->saved[h->nsaved] = (Saved){s->i, index, s->st};
    le_put32(m, MAN_MAGIC);
    le_put32(m + 4, h->nsaved++);
    le_put64(m + 8, index);
    s->snapshots++;
    *buf = m;
    *len = MAN_LEN;
    return 0;
}

static int
cb_restore(void *arg, uint64_t index, const void *buf, size_t len)
{
    Server *s = arg;
    const unsigned char *m = buf;

    if (len != MAN_LEN || le_get32(m) != MAN_MAGIC ||
        le_get64(m + 8) != index || le_get32(m + 4) >= s->h->nsaved ||
        s->h->saved[le_get32(m + 4)].index != index) {
        s->bad++;
        return -1;
    }
    s->st = s->h->saved[le_get32(m + 4)].st;
    s->restores++;
    s->restore_index = index;
    s->log_at_restore = s->nlog;
    return 0;
}

static void
cb_notify(void *arg)
{
    ((Server *)arg)->notified++;
}

/* ---- the shim libraft calls: n->raft mirrors the fixture's raft ---- */

static void
mirror(Server *s)
{
    s->n->raft.last_applied = s->r->last_applied;
    s->n->raft.state = s->r->state;
    s->n->raft.current_term = s->r->current_term;
}

static int
shim_apply(struct raft_fsm *fsm, const struct raft_buffer *buf, void **res)
{
    Server *s = fsm->data;
    s->apply_calls++;
    mirror(s);
    return s->n->fsm.apply(&s->n->fsm, buf, res);
}

static int
shim_snapshot(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *nbufs)
{
    Server *s = fsm->data;
    mirror(s);
    int rv = s->n->fsm.snapshot(&s->n->fsm, bufs, nbufs);
    if (rv == 0 && s->corrupt_snapshot)
        ((unsigned char *)(*bufs)[0].base)[4] = SNAP_VERSION + 1;
    return rv;
}

static int
shim_restore(struct raft_fsm *fsm, struct raft_buffer *buf)
{
    Server *s = fsm->data;
    const unsigned char *p = buf->base;

    s->restore_calls++;
    s->restore_hdr_ok = buf->len >= SNAP_HDR && le_get32(p) == SNAP_MAGIC &&
                        le_get32(p + 4) == SNAP_VERSION;
    mirror(s);
    int rv = s->n->fsm.restore(&s->n->fsm, buf);
    if (rv == 0) s->restored_applied = atomic_load(&s->n->applied);
    Orphans *o = &s->h->orphans;
    if (rv != 0 && o->on && o->n < sizeof o->p / sizeof o->p[0])
        o->p[o->n++] = buf;
    return rv;
}

static void *
heap_malloc(void *data, size_t size)
{
    (void)data;
    return malloc(size);
}

static void *
heap_calloc(void *data, size_t nmemb, size_t size)
{
    (void)data;
    return calloc(nmemb, size);
}

static void *
heap_aligned(void *data, size_t alignment, size_t size)
{
    (void)data;
    return aligned_alloc(alignment, size);
}

/* libraft is about to free (or move) p: it is no orphan. */
static void
forget(Orphans *o, const void *p)
{
    for (unsigned k = 0; p && k < o->n; k++)
        if (o->p[k] == p) o->p[k] = NULL;
}

static void
heap_free(void *data, void *p)
{
    forget(data, p);
    free(p);
}

static void *
heap_realloc(void *data, void *p, size_t size)
{
    forget(data, p);
    return realloc(p, size);
}

static void
heap_aligned_free(void *data, size_t alignment, void *p)
{
    (void)alignment;
    heap_free(data, p);
}

static unsigned
orphans_left(const Orphans *o)
{
    unsigned n = 0;
    for (unsigned k = 0; k < o->n; k++)
        n += o->p[k] != NULL;
    return n;
}

/* From now on libraft allocates through a heap that tracks the orphans. */
static void
note_refused(Harness *h)
{
    h->orphans.on = 1;
    h->heap = (struct raft_heap){.data = &h->orphans,
                                 .malloc = heap_malloc,
                                 .free = heap_free,
                                 .calloc = heap_calloc,
                                 .realloc = heap_realloc,
                                 .aligned_alloc = heap_aligned,
                                 .aligned_free = heap_aligned_free};
    raft_heap_set(&h->heap);
}

/* An append whose completion io_append reports as failed. */
typedef struct FailedWrite {
    struct raft_io_append req; /* the fixture's (first: container) */
    struct raft_io_append *orig;
    raft_io_append_cb cb;
} FailedWrite;

static void
on_failed_write(struct raft_io_append *req, int status)
{
    FailedWrite *w = (FailedWrite *)req;
    struct raft_io_append *orig = w->orig;
    raft_io_append_cb cb = w->cb;

    free(w);
    cb(orig, status == 0 ? RAFT_IOERR : status);
}

/* The fixture server's io append: arms the fixture's own fault injection
 * (raft_fixture_io_fault, due at once, once) for exactly this call. */
static int
io_append(struct raft_io *io, struct raft_io_append *req,
          const struct raft_entry entries[], unsigned k, raft_io_append_cb cb)
{
    struct raft *r = io->data;
    unsigned i = (unsigned)r->id - 1;
    Harness *h = (Harness *)((char *)io - offsetof(Harness, f.servers) -
                             i * sizeof(struct raft_fixture_server) -
                             offsetof(struct raft_fixture_server, io));
    Server *s = &h->s[i];

    if (s->fault_next_append) {
        s->fault_next_append = 0;
        raft_fixture_io_fault(&h->f, i, 0, 1);
    }
    if (s->fail_next_write) { /* as a write the disk refused (uv's EIO) */
        FailedWrite *w = malloc(sizeof *w);
        if (!w) return RAFT_NOMEM;
        s->fail_next_write = 0;
        w->req.data = req->data;
        w->orig = req;
        w->cb = cb;
        int rv = s->append(io, &w->req, entries, k, on_failed_write);
        if (rv != 0) free(w);
        return rv;
    }
    return s->append(io, req, entries, k, cb);
}

/* ---- harness ---- */

/* A fixture of n servers (not started), each with its RaftNode and
 * snapshot threshold/trailing (entries) set through rafttune_attach. */
static Harness *
h_new(unsigned n, unsigned threshold, unsigned trailing)
{
    Harness *h = calloc(1, sizeof *h);
    assert_non_null(h);
    h->n = n;
    assert_int_equal(raft_fixture_initialize(&h->f), 0);
    for (unsigned i = 0; i < n; i++) {
        Server *s = &h->s[i];
        s->h = h;
        s->i = i;
        s->n = calloc(1, sizeof *s->n);
        assert_non_null(s->n);
        rn_fsm_init(s->n);
        s->n->cb = (RaftNodeCallbacks){.arg = s,
                                       .apply = cb_apply,
                                       .snapshot = cb_snapshot,
                                       .restore = cb_restore,
                                       .notify = cb_notify};
        s->shim = (struct raft_fsm){.version = 1,
                                    .data = s,
                                    .apply = shim_apply,
                                    .snapshot = shim_snapshot,
                                    .restore = shim_restore};
        assert_int_equal(raft_fixture_grow(&h->f, &s->shim), 0);
        s->r = raft_fixture_get(&h->f, i);
        rafttune_attach(&s->n->tune, s->r, threshold, trailing,
                        RAFTNODE_LOG_BYTES);
        struct raft_io *io = &h->f.servers[i].io;
        s->append = io->append;
        io->append = io_append;
    }
    return h;
}

/* Bootstraps every server with all n as voters and starts them. */
static void
h_start(Harness *h)
{
    struct raft_configuration conf;
    assert_int_equal(raft_fixture_configuration(&h->f, h->n, &conf), 0);
    assert_int_equal(raft_fixture_bootstrap(&h->f, &conf), 0);
    raft_configuration_close(&conf);
    assert_int_equal(raft_fixture_start(&h->f), 0);
}

static void
h_free(Harness *h)
{
    raft_fixture_close(&h->f);
    for (unsigned i = 0; i < h->n; i++)
        free(h->s[i].n);
    if (h->orphans.on) {
        for (unsigned k = 0; k < h->orphans.n; k++)
            free(h->orphans.p[k]);
        raft_heap_set_default();
    }
    free(h);
}

static void
on_applied(struct raft_apply *req, int status, void *result)
{
    Req *q = (Req *)req;
    (void)result;
    q->h->done[q->value]++;
    q->h->status[q->value] = status;
    free(q);
}

/* Proposes value (tagged) on server i, which must lead; returns its index. */
static uint64_t
propose(Harness *h, unsigned i, uint32_t tag, uint64_t value)
{
    Req *q = malloc(sizeof *q);
    struct raft_buffer buf = {raft_malloc(ENTRY_LEN), ENTRY_LEN};
    assert_non_null(q);
    assert_non_null(buf.base);
    assert_true(value < MAXVAL);
    le_put32(buf.base, ENTRY_MAGIC);
    le_put32((unsigned char *)buf.base + 4, tag);
    le_put64((unsigned char *)buf.base + 8, value);
    q->h = h;
    q->value = value;
    assert_int_equal(raft_apply(h->s[i].r, &q->req, &buf, 1, on_applied), 0);
    return q->req.index;
}

/* Values [from, to) proposed on leader i; returns the last one's index. */
static uint64_t
propose_range(Harness *h, unsigned i, uint32_t tag, uint64_t from, uint64_t to)
{
    uint64_t index = 0;
    for (uint64_t v = from; v < to; v++)
        index = propose(h, i, tag, v);
    return index;
}

static void
applied_on(Harness *h, unsigned i, uint64_t index)
{
    assert_true(raft_fixture_step_until_applied(&h->f, i, index, 10000));
}

/* Every server healthy: not failed, its published applied index libraft's,
 * its model's indices strictly increasing (cb_apply counts violations). */
static void
check_healthy(Harness *h, unsigned i)
{
    Server *s = &h->s[i];
    assert_int_equal(atomic_load(&s->n->failed), 0);
    assert_int_equal(s->bad, 0);
    assert_int_equal(atomic_load(&s->n->applied), s->r->last_applied);
    for (size_t k = 1; k < s->nlog; k++)
        if (k != s->log_at_restore || !s->restores)
            assert_true(s->idx[k] > s->idx[k - 1]);
}

/* Server a applied what b did, entry for entry, from log position from. */
static void
same_log(const Server *a, const Server *b)
{
    assert_int_equal(a->nlog, b->nlog);
    for (size_t k = 0; k < a->nlog; k++) {
        assert_int_equal(a->idx[k], b->idx[k]);
        assert_int_equal(a->val[k], b->val[k]);
    }
    assert_memory_equal(&a->st, &b->st, sizeof a->st);
}

static int
has_value(const Server *s, uint64_t v)
{
    int n = 0;
    for (size_t k = 0; k < s->nlog; k++)
        n += s->val[k] == v;
    return n;
}

static bool
other_leads(struct raft_fixture *f, void *arg)
{
    unsigned old = *(unsigned *)arg;
    for (unsigned i = 0; i < f->n; i++)
        if (i != old && raft_state(raft_fixture_get(f, i)) == RAFT_LEADER)
            return true;
    return false;
}

static unsigned
leader_other_than(Harness *h, unsigned old)
{
    assert_true(raft_fixture_step_until(&h->f, other_leads, &old, 10000));
    for (unsigned i = 0; i < h->n; i++)
        if (i != old && raft_state(h->s[i].r) == RAFT_LEADER) return i;
    fail();
    return 0;
}

static const char *
state_name(int st)
{
    switch (st) {
    case RAFT_FOLLOWER:
        return "follower";
    case RAFT_CANDIDATE:
        return "candidate";
    case RAFT_LEADER:
        return "leader";
    case RAFT_UNAVAILABLE:
        return "unavailable";
    }
    return "?";
}

static void
cut(Harness *h, unsigned i, unsigned j)
{
    raft_fixture_disconnect(&h->f, i, j);
    raft_fixture_disconnect(&h->f, j, i);
}

static void
heal(Harness *h, unsigned i, unsigned j)
{
    raft_fixture_reconnect(&h->f, i, j);
    raft_fixture_reconnect(&h->f, j, i);
}

/* ---- scenarios ---- */

/* 1. Entries applied through the leader reach every server's cb.apply in
 * index order, each once, with seq 0 (raft_apply, not rn_submit); the
 * published applied index is libraft's. */
static void
test_commit_in_order(void **state)
{
    (void)state;
    Harness *h = h_new(NSERV, BIG_THRESHOLD, 128);
    h_start(h);
    raft_fixture_elect(&h->f, 0);
    uint64_t last = propose_range(h, 0, 1, 0, 50);
    applied_on(h, NSERV, last); /* NSERV: every server */
    for (unsigned i = 0; i < NSERV; i++) {
        Server *s = &h->s[i];
        check_healthy(h, i);
        assert_int_equal(s->nlog, 50);
        for (size_t k = 0; k < s->nlog; k++)
            assert_int_equal(s->val[k], k);
        assert_int_equal(s->st.last, last);
        assert_int_equal(atomic_load(&s->n->applied), last);
        assert_int_equal(s->notified, 0);
        same_log(s, &h->s[0]);
    }
    for (unsigned v = 0; v < 50; v++) {
        assert_int_equal(h->done[v], 1);
        assert_int_equal(h->status[v], 0);
    }
    h_free(h);
}

/* 2. A leader cut off both ways while it holds uncommitted entries: the
 * others elect a leader and commit more; once the old leader is back, its
 * uncommitted entries are applied nowhere, and all three converge. */
static void
test_cut_off_leader(void **state)
{
    (void)state;
    Harness *h = h_new(NSERV, BIG_THRESHOLD, 128);
    h_start(h);
    raft_fixture_elect(&h->f, 0);
    applied_on(h, NSERV, propose_range(h, 0, 1, 0, 5));

    cut(h, 0, 1);
    cut(h, 0, 2);
    uint64_t before = raft_last_index(h->s[0].r);
    assert_int_equal(propose_range(h, 0, 2, 1000, 1003), before + 3);
    unsigned l = leader_other_than(h, 0);
    uint64_t last = propose_range(h, l, 3, 100, 104);
    applied_on(h, l, last);
    applied_on(h, 3 - l, last);
    assert_int_equal(h->s[0].nlog, 5);

    heal(h, 0, 1);
    heal(h, 0, 2);
    applied_on(h, 0, last);
    raft_fixture_step_until_elapsed(&h->f, 2000);
    for (unsigned i = 0; i < NSERV; i++) {
        check_healthy(h, i);
        for (uint64_t v = 1000; v < 1003; v++)
            assert_int_equal(has_value(&h->s[i], v), 0);
        assert_int_equal(h->s[i].nlog, 9);
        same_log(&h->s[i], &h->s[l]);
    }
    /* libraft 0.15 ends the orphans' requests when the old leader steps
     * down (it cannot reach a majority for an election timeout). */
    for (uint64_t v = 1000; v < 1003; v++) {
        assert_int_equal(h->done[v], 1);
        assert_int_equal(h->status[v], RAFT_LEADERSHIPLOST);
    }
    h_free(h);
}

/* Snapshot scenario's common part: follower 2 is killed after 5 entries,
 * 60 more commit on 0 and 1 in rounds of 10 (threshold 8: a snapshot
 * most rounds; the leader's log then starts past what 2 holds), 2 is revived.
 * Returns the last entry's index. */
static uint64_t
behind_snapshot(Harness *h)
{
    h_start(h);
    raft_fixture_elect(&h->f, 0);
    applied_on(h, NSERV, propose_range(h, 0, 1, 0, 5));
    raft_fixture_kill(&h->f, 2);
    uint64_t last = 0;
    for (uint64_t v = 5; v < 65; v += 10) { /* 6 rounds of 10 */
        last = propose_range(h, 0, 1, v, v + 10);
        applied_on(h, 0, last);
        applied_on(h, 1, last);
    }
    assert_true(h->s[0].snapshots >= 2);
    assert_true(h->s[0].r->log.offset > h->s[2].r->last_applied + 1);
    assert_int_equal(h->s[2].nlog, 5);
    raft_fixture_revive(&h->f, 2);
    return last;
}

/* 3. The revived follower installs the leader's snapshot through
 * fsm_restore (the rockstalk header checked and stripped: cb.restore gets
 * the bare manifest), then applies the rest (5 more entries are proposed
 * once it caught up): its state equals the others'. */
static void
test_snapshot_install(void **state)
{
    (void)state;
    Harness *h = h_new(NSERV, 8, 2);
    uint64_t snap_last = behind_snapshot(h);
    applied_on(h, 2, snap_last);
    uint64_t last = propose_range(h, 0, 1, 65, 70);
    applied_on(h, NSERV, last);
    raft_fixture_step_until_elapsed(&h->f, 500);

    Server *f = &h->s[2], *l = &h->s[0];
    assert_int_equal(f->restores, 1);
    assert_int_equal(f->restore_calls, 1);
    assert_true(f->restore_hdr_ok);
    assert_true(f->restore_index > 5 && f->restore_index <= snap_last);
    assert_true(f->nlog - f->log_at_restore >= 5);
    assert_int_equal(f->restored_applied, f->restore_index);
    /* the state restored is the one a snapshot of the leader's recorded */
    int found = 0;
    for (unsigned k = 0; k < h->nsaved; k++)
        found |=
            h->saved[k].server == 0 && h->saved[k].index == f->restore_index;
    assert_true(found);
    /* then exactly the leader's entries after the snapshot's index */
    size_t k = 0;
    while (k < l->nlog && l->idx[k] <= f->restore_index)
        k++;
    assert_int_equal(f->nlog - f->log_at_restore, l->nlog - k);
    for (size_t j = f->log_at_restore; j < f->nlog; j++, k++) {
        assert_int_equal(f->idx[j], l->idx[k]);
        assert_int_equal(f->val[j], l->val[k]);
    }
    for (unsigned i = 0; i < NSERV; i++) {
        check_healthy(h, i);
        assert_memory_equal(&h->s[i].st, &l->st, sizeof l->st);
        assert_int_equal(atomic_load(&h->s[i].n->applied), last);
    }
    h_free(h);
}

/* A bare RaftNode with this file's callbacks (no fixture). */
static Server *
bare_server(void)
{
    Server *s = calloc(1, sizeof *s);
    assert_non_null(s);
    s->n = calloc(1, sizeof *s->n);
    assert_non_null(s->n);
    rn_fsm_init(s->n);
    s->n->cb = (RaftNodeCallbacks){.arg = s,
                                   .apply = cb_apply,
                                   .restore = cb_restore,
                                   .notify = cb_notify};
    return s;
}

/* 4a. fsm_restore refuses a buffer that is too short, has another magic
 * or another version: RAFT_MALFORMED, cb.restore not called, the node
 * failed (rn_fail: message, notify) and applies nothing after. */
static void
test_restore_refuses_direct(void **state)
{
    (void)state;
    static const struct {
        size_t len;
        uint32_t magic, version;
    } bad[] = {{8, SNAP_MAGIC, SNAP_VERSION},
               {SNAP_HDR + MAN_LEN, SNAP_MAGIC ^ 1, SNAP_VERSION},
               {SNAP_HDR + MAN_LEN, SNAP_MAGIC, SNAP_VERSION + 1},
               {SNAP_HDR, SNAP_MAGIC, 0}};
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
        Server *s = bare_server();
        unsigned char *p = raft_calloc(1, SNAP_HDR + MAN_LEN);
        assert_non_null(p);
        le_put32(p, bad[b].magic);
        le_put32(p + 4, bad[b].version);
        le_put64(p + 8, 7);
        struct raft_buffer buf = {p, bad[b].len};
        assert_int_equal(s->n->fsm.restore(&s->n->fsm, &buf), RAFT_MALFORMED);
        raft_free(p); /* libraft's on failure */
        assert_int_equal(atomic_load(&s->n->failed), 1);
        assert_non_null(strstr(s->n->fail_msg, "manifest header"));
        assert_int_equal(s->notified, 1);
        assert_int_equal(s->restores + s->bad, 0);
        assert_int_equal(atomic_load(&s->n->applied), 0);

        unsigned char e[ENTRY_LEN] = {0};
        le_put32(e, ENTRY_MAGIC);
        struct raft_buffer eb = {e, sizeof e};
        void *res;
        assert_int_equal(s->n->fsm.apply(&s->n->fsm, &eb, &res), RAFT_IOERR);
        assert_int_equal(s->nlog, 0);
        assert_int_equal(s->notified, 1); /* the first failure wins */
        free(s->n);
        free(s);
    }
}

/* 4b. A server whose stored snapshot lacks the header does not start:
 * libraft's raft_start restores it through fsm_restore, which refuses. */
static void
test_restore_refuses_at_start(void **state)
{
    (void)state;
    Harness *h = h_new(1, BIG_THRESHOLD, 128);
    struct raft_snapshot *snap = raft_calloc(1, sizeof *snap);
    assert_non_null(snap);
    snap->index = 8;
    snap->term = 1;
    raft_configuration_init(&snap->configuration);
    assert_int_equal(
        raft_configuration_add(&snap->configuration, 1, "1", RAFT_VOTER), 0);
    snap->configuration_index = 1;
    snap->bufs = raft_malloc(sizeof *snap->bufs);
    assert_non_null(snap->bufs);
    snap->bufs[0].len = MAN_LEN; /* a manifest with no header */
    snap->bufs[0].base = raft_calloc(1, MAN_LEN);
    assert_non_null(snap->bufs[0].base);
    le_put32(snap->bufs[0].base, MAN_MAGIC);
    snap->n_bufs = 1;
    raft_fixture_set_snapshot(&h->f, 0, snap); /* the fixture's now */

    assert_int_equal(raft_fixture_start(&h->f), RAFT_MALFORMED);
    Server *s = &h->s[0];
    assert_int_equal(s->restore_calls, 1);
    assert_false(s->restore_hdr_ok);
    assert_int_equal(s->restores + s->nlog, 0);
    assert_int_equal(atomic_load(&s->n->failed), 1);
    assert_non_null(strstr(s->n->fail_msg, "manifest header"));
    assert_int_equal(atomic_load(&s->n->applied), 0);
    h_free(h);
}

/* 4c. The same refusal for a snapshot a leader sends: its snapshots carry
 * another version (as from another rockstalk), so the revived follower
 * refuses every one, fails, and applies nothing past what it had. */
static void
test_restore_refuses_installed(void **state)
{
    (void)state;
    Harness *h = h_new(NSERV, 8, 2);
    note_refused(h);
    h->s[0].corrupt_snapshot = h->s[1].corrupt_snapshot = 1;
    uint64_t last = behind_snapshot(h);
    raft_fixture_step_until_elapsed(&h->f, 3000);

    Server *f = &h->s[2];
    assert_true(f->restore_calls >= 1);
    assert_false(f->restore_hdr_ok);
    assert_int_equal(f->restores, 0);
    assert_int_equal(f->nlog, 5);
    assert_int_equal(atomic_load(&f->n->failed), 1);
    assert_non_null(strstr(f->n->fail_msg, "manifest header"));
    assert_int_equal(f->notified, 1);
    assert_true(atomic_load(&f->n->applied) < last);
    assert_int_equal(f->bad, 0);
    check_healthy(h, 0);
    check_healthy(h, 1);
    printf("# a refused snapshot: the follower was sent it %u time(s) in 3 "
           "s, its libraft state %s, fsm apply called %u time(s) after; "
           "%u of its bufs arrays left to free\n",
           f->restore_calls, state_name(raft_state(f->r)), f->apply_calls - 5,
           orphans_left(&h->orphans));
    h_free(h);
}

/* 5. A follower's log append fails (the fixture's io_fault, armed for
 * exactly that append) while the other follower is cut off: the leader
 * must not count it, so nothing commits; once the other follower is back,
 * everything committed is applied once on each server that applies. */
static void
test_append_fault(void **state)
{
    (void)state;
    Harness *h = h_new(NSERV, BIG_THRESHOLD, 128);
    h_start(h);
    raft_fixture_elect(&h->f, 0);
    uint64_t first = propose_range(h, 0, 1, 0, 3);
    applied_on(h, NSERV, first);
    uint64_t commit = h->s[0].r->commit_index;

    cut(h, 0, 2);
    h->s[1].fault_next_append = 1;
    propose(h, 0, 2, 500);
    raft_fixture_step_until_elapsed(&h->f, 3000);
    assert_int_equal(h->s[1].fault_next_append, 0); /* the fault was hit */
    for (unsigned i = 0; i < NSERV; i++) {
        assert_int_equal(has_value(&h->s[i], 500), 0);
        assert_true(h->s[i].r->commit_index <= commit);
    }
    /* libraft 0.15 turns a server whose append call fails off for good
     * (recv.c: an error handling a message -> convertToUnavailable), which
     * raftnode.c's check_unavailable turns into rn_fail; the leader, with
     * no majority left, steps down and ends the request. */
    assert_int_equal(raft_state(h->s[1].r), RAFT_UNAVAILABLE);
    assert_int_equal(h->done[500], 1);
    assert_int_equal(h->status[500], RAFT_LEADERSHIPLOST);
    printf("# after its append failed: follower %s; leader %s; value 500's "
           "request ended %d times, status %d\n",
           state_name(raft_state(h->s[1].r)), state_name(raft_state(h->s[0].r)),
           h->done[500], h->status[500]);

    heal(h, 0, 2);
    unsigned l = leader_other_than(h, 1); /* 0 or 2 */
    uint64_t last = propose(h, l, 3, 501);
    applied_on(h, 0, last);
    applied_on(h, 2, last);
    raft_fixture_step_until_elapsed(&h->f, 1000);
    for (unsigned i = 0; i < NSERV; i += 2) {
        check_healthy(h, i);
        assert_int_equal(has_value(&h->s[i], 501), 1);
        assert_true(has_value(&h->s[i], 500) <= 1);
        same_log(&h->s[i], &h->s[l]);
    }
    printf("# healed: leader %u; value 500 applied %d time(s)\n", l,
           has_value(&h->s[l], 500));
    assert_int_equal(h->s[1].bad, 0);
    for (size_t k = 0; k < h->s[1].nlog; k++)
        assert_true(h->s[1].val[k] < 500);
    h_free(h);
}

/* A log prefix: a applied what b did, in order, up to a's length. */
static void
prefix_of(const Server *a, const Server *b)
{
    assert_true(a->nlog <= b->nlog);
    for (size_t k = 0; k < a->nlog; k++) {
        assert_int_equal(a->idx[k], b->idx[k]);
        assert_int_equal(a->val[k], b->val[k]);
    }
}

/* 5b. A follower's write fails the way uv reports a disk error: the append
 * completes with an error status (the entries are in its memory, and in
 * the fixture's stub "disk" too). libraft 0.15's follower answers
 * "rejected" and stays a follower: the leader must not count it, so
 * nothing commits while the other follower is cut off, not even after a
 * later entry the same follower writes fine; once the other follower is
 * back, everything commits, and nothing is applied twice anywhere. */
static void
test_write_fault(void **state)
{
    (void)state;
    Harness *h = h_new(NSERV, BIG_THRESHOLD, 128);
    h_start(h);
    raft_fixture_elect(&h->f, 0);
    applied_on(h, NSERV, propose_range(h, 0, 1, 0, 3));
    uint64_t commit = h->s[0].r->commit_index;

    cut(h, 0, 2);
    h->s[1].fail_next_write = 1;
    uint64_t i600 = propose(h, 0, 2, 600);
    raft_fixture_step_until_elapsed(&h->f, 1000);
    assert_int_equal(h->s[1].fail_next_write, 0); /* the fault was hit */
    assert_int_equal(raft_state(h->s[1].r), RAFT_FOLLOWER);
    assert_int_equal(raft_last_index(h->s[1].r), i600);
    assert_int_equal(h->s[1].r->last_stored, i600 - 1);
    uint64_t last = propose(h, 0, 2, 601);
    raft_fixture_step_until_elapsed(&h->f, 2000);
    assert_int_equal(raft_state(h->s[0].r), RAFT_LEADER);
    for (unsigned i = 0; i < NSERV; i++) {
        assert_int_equal(h->s[i].r->commit_index, commit);
        assert_int_equal(has_value(&h->s[i], 600) + has_value(&h->s[i], 601),
                         0);
    }
    printf("# a failed write on follower 1: it stays a %s; its log ends at "
           "%llu, it counts %llu stored; the leader commits nothing\n",
           state_name(raft_state(h->s[1].r)),
           (unsigned long long)raft_last_index(h->s[1].r),
           (unsigned long long)h->s[1].r->last_stored);

    heal(h, 0, 2);
    applied_on(h, 0, last);
    applied_on(h, 2, last);
    raft_fixture_step_until_elapsed(&h->f, 1000);
    for (unsigned i = 0; i < NSERV; i++) {
        check_healthy(h, i);
        assert_true(has_value(&h->s[i], 600) <= 1);
        assert_true(has_value(&h->s[i], 601) <= 1);
        prefix_of(&h->s[i], &h->s[0]);
    }
    same_log(&h->s[2], &h->s[0]);
    /* each request ended once: applied, or (the leader stepped down when
     * the cut-off follower came back with a higher term) fate unknown */
    for (unsigned v = 600; v <= 601; v++) {
        assert_int_equal(h->done[v], 1);
        assert_true(h->status[v] == 0 || h->status[v] == RAFT_LEADERSHIPLOST);
    }
    printf("# healed: 600 and 601 applied on 0 and 2 (requests ended %d, "
           "%d); follower 1 applied up to %llu of %llu\n",
           h->status[600], h->status[601],
           (unsigned long long)h->s[1].r->last_applied,
           (unsigned long long)last);
    h_free(h);
}

int
main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_commit_in_order),
        cmocka_unit_test(test_cut_off_leader),
        cmocka_unit_test(test_snapshot_install),
        cmocka_unit_test(test_restore_refuses_direct),
        cmocka_unit_test(test_restore_refuses_at_start),
        cmocka_unit_test(test_restore_refuses_installed),
        cmocka_unit_test(test_append_fault),
        cmocka_unit_test(test_write_fault),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
