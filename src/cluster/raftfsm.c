/* raftfsm.c - the Raft node's entries (see raftnode_impl.h): the
 * proposals this leader has in flight, matched to the entries libraft
 * applies by their index and term, and the state machine libraft calls
 * back (apply, snapshot, restore) with its snapshot manifest. Raft thread
 * only; the libraft facts it relies on are listed in raftnode.c. */
#include <stdarg.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "cluster/raftnode_impl.h"

/* The manifest's header: magic, version (u32 LE each), index (u64 LE). */
#define SNAP_MAGIC 0x4e534b52u /* "RKSN" */
#define SNAP_VERSION 1u
#define SNAP_HDR 16

/* One raft_apply call; freed by its callback. */
typedef struct ApplyReq {
    struct raft_apply req;
    RaftNode *node;
} ApplyReq;

void
rn_list_init(PropList *l)
{
    l->head = NULL;
    l->tail = &l->head;
}

void
rn_list_push(PropList *l, Prop *p)
{
    p->next = NULL;
    *l->tail = p;
    l->tail = &p->next;
}

Prop *
rn_list_pop(PropList *l)
{
    Prop *p = l->head;
    if (p) {
        l->head = p->next;
        if (!l->head) l->tail = &l->head;
    }
    return p;
}

/* Raft thread: reports proposal p as lost (why) and frees it, with its
 * buffer if we still own it. */
static void
lose_one(RaftNode *n, Prop *p, int why)
{
    if (n->cb.lost) n->cb.lost(n->cb.arg, p->seq, why);
    raft_free(p->buf.base);
    free(p);
}

/* Raft thread: lose_one for every proposal of l, oldest first. */
void
rn_lose_all(RaftNode *n, PropList *l, int why)
{
    Prop *p;
    while ((p = rn_list_pop(l)))
        lose_one(n, p, why);
}

void
rn_fail(RaftNode *n, const char *fmt, ...)
{
    if (atomic_load(&n->failed)) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(n->fail_msg, sizeof n->fail_msg, fmt, ap);
    va_end(ap);
    atomic_store(&n->failed, 1);
    atomic_store(&n->role, RAFTNODE_NONE);
    atomic_store(&n->ready, 0);
    if (n->cb.notify) n->cb.notify(n->cb.arg);
}

/* Raft thread: in-flight proposals can only complete while this node leads
 * in the term it appended them; otherwise their fate is unknown here. */
void
rn_check_inflight(RaftNode *n)
{
    if (n->inflight.head && (raft_state(&n->raft) != RAFT_LEADER ||
                             n->raft.current_term != n->inflight_term))
        rn_lose_all(n, &n->inflight, RAFTNODE_LOST_UNKNOWN);
}

static int
fsm_apply(struct raft_fsm *fsm, const struct raft_buffer *buf, void **result)
{
    RaftNode *n = fsm->data;
    uint64_t index = raft_last_applied(&n->raft) + 1, seq = 0;

    *result = NULL;
    if (atomic_load(&n->failed)) return RAFT_IOERR;
    if (index <= n->last_index) {
        rn_fail(n, "raft: entry %llu applied after %llu",
                (unsigned long long)index, (unsigned long long)n->last_index);
        return RAFT_IOERR;
    }
    rn_check_inflight(n);
    while (n->inflight.head && n->inflight.head->index < index)
        lose_one(n, rn_list_pop(&n->inflight), RAFTNODE_LOST_UNKNOWN);
    if (n->inflight.head && n->inflight.head->index == index) {
        Prop *p = rn_list_pop(&n->inflight);
        seq = p->seq;
        free(p);
    }
    if (n->cb.apply(n->cb.arg, index, buf->base, buf->len, seq) != 0) {
        rn_fail(n, "raft: applying entry %llu failed",
                (unsigned long long)index);
        return RAFT_IOERR;
    }
    n->last_index = index;
    atomic_store(&n->applied, index);
    rafttune_applied(&n->tune, buf->len);
    return 0;
}

static int
fsm_snapshot(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *nbufs)
{
    RaftNode *n = fsm->data;
    uint64_t index = raft_last_applied(&n->raft);
    void *man = NULL;
    size_t len = 0;

    if (n->cb.snapshot && n->cb.snapshot(n->cb.arg, index, &man, &len) != 0)
        return RAFT_BUSY; /* libraft retries at the next threshold */
    rafttune_snapshot_taken(&n->tune);
    /* The state is as of index, the barriers and configuration entries up
     * to it included (libraft applies those without us): a peer fetching
     * the state for this snapshot asks for that much, which an idle leader
     * whose snapshot fell on its barrier must say it has (else the peer
     * retries until it fails: issue 27, PROTOCOL.md 15.5; a cluster
     * seeded from a backup has applied nothing else yet). */
    if (index > n->last_index) {
        n->last_index = index;
        atomic_store(&n->applied, index);
    }
    struct raft_buffer *b = raft_malloc(sizeof *b);
    unsigned char *p = raft_malloc(SNAP_HDR + len);
    if (!b || !p) {
        raft_free(b);
        raft_free(p);
        free(man);
        return RAFT_NOMEM;
    }
    le_put32(p, SNAP_MAGIC);
    le_put32(p + 4, SNAP_VERSION);
    le_put64(p + 8, index);
    if (len) memcpy(p + SNAP_HDR, man, len);
    free(man);
    b->base = p;
    b->len = SNAP_HDR + len;
    *bufs = b;
    *nbufs = 1;
    return 0;
}

static int
fsm_restore(struct raft_fsm *fsm, struct raft_buffer *buf)
{
    RaftNode *n = fsm->data;
    const unsigned char *p = buf->base;

    if (buf->len < SNAP_HDR || le_get32(p) != SNAP_MAGIC ||
        le_get32(p + 4) != SNAP_VERSION) {
        rn_fail(n, "raft: snapshot without a rockstalk manifest header");
        return RAFT_MALFORMED;
    }
    uint64_t index = le_get64(p + 8);
    size_t len = buf->len - SNAP_HDR;
    int rc = n->cb.restore ? n->cb.restore(n->cb.arg, index, p + SNAP_HDR, len)
                           : (len == 0 ? 0 : -1);
    if (rc != 0) {
        rn_fail(n, "raft: restoring the snapshot at %llu failed",
                (unsigned long long)index);
        return RAFT_IOERR;
    }
    rn_lose_all(n, &n->inflight, RAFTNODE_LOST_UNKNOWN);
    raft_free(buf->base); /* ours on success */
    n->last_index = index;
    atomic_store(&n->applied, index);
    return 0;
}

void
rn_check_status(RaftNode *n, int status, const char *what)
{
    if (status == 0 || status == RAFT_LEADERSHIPLOST ||
        status == RAFT_SHUTDOWN || n->closing)
        return;
    /* libraft 0.15 keeps leading after its own append failed: it truncates
     * the entry from its memory and gives its index to the next one, while
     * followers may hold the first. Stop here (exit 2), not lead on. */
    rn_fail(n,
            "raft: %s failed (%s, status %d): stopping rather than lead "
            "on a log that lost an entry",
            what, raft_strerror(status), status);
}

static void
on_applied(struct raft_apply *req, int status, void *result)
{
    ApplyReq *ar = (ApplyReq *)req;
    RaftNode *n = ar->node;

    (void)result;
    free(ar);
    rn_check_status(n, status, "appending an entry");
    if (status != 0) rn_lose_all(n, &n->inflight, RAFTNODE_LOST_UNKNOWN);
}

/* len rounded up to libraft's 8-byte units, at least one. */
static size_t
padded(size_t len)
{
    size_t p = (len + 7) & ~(size_t)7;
    return p ? p : 8;
}

/* Raft thread: joins p and the proposals after it at the head of l that
 * fit one entry (RAFTNODE_ENTRY_MAX) into p (cb.join), which then carries
 * the last one's seq; those joined are popped and freed. Out of memory or
 * a join refused: fewer are joined. Returns p. */
static Prop *
join_run(RaftNode *n, Prop *p, PropList *l)
{
    size_t total = p->len, len = p->len;
    unsigned k = 0;

    for (const Prop *q = l->head; q && total + q->len <= RAFTNODE_ENTRY_MAX;
         q = q->next, k++)
        total += q->len;
    char *buf = k ? raft_malloc(padded(total)) : NULL;
    if (!buf) return p;
    memcpy(buf, p->buf.base, len);
    for (; k; k--) {
        Prop *q = l->head;
        if (n->cb.join(n->cb.arg, buf, &len, q->buf.base, q->len) != 0) break;
        rn_list_pop(l);
        p->seq = q->seq;
        raft_free(q->buf.base);
        free(q);
    }
    memset(buf + len, 0, padded(len) - len);
    raft_free(p->buf.base);
    p->buf.base = buf;
    p->buf.len = padded(len);
    p->len = len;
    return p;
}

/* Raft thread: hands l's proposals to raft_apply, one entry per call (the
 * API subset of both libraft versions: 0.22.1's raft_apply takes bufs[0]
 * alone, its assert(n == 1) compiled out in Debian's build). Calls in one
 * loop iteration still share a disk write: libraft's uv layer merges the
 * appends that arrive while one is being written; with cb.join, the
 * proposals taken together become one entry (join_run). Those appended go
 * in flight; once one is refused, so are the rest. */
void
rn_submit(RaftNode *n, PropList *l)
{
    Prop *p;

    while ((p = rn_list_pop(l))) {
        if (n->cb.join) p = join_run(n, p, l);
        ApplyReq *ar = malloc(sizeof *ar);
        int rv = RAFT_NOMEM;
        n->submitted++;
        if (ar && n->submitted != n->opt.fault_refuse) {
            ar->node = n;
            rv = raft_apply(&n->raft, &ar->req, &p->buf, 1, on_applied);
        }
        if (rv != 0) {
            free(ar);
            if (rv != RAFT_NOTLEADER && rv != RAFT_NOMEM)
                /* libraft may have freed the buffer with an appended entry
                 * it discarded: leak rather than free it twice. */
                p->buf.base = NULL;
            lose_one(n, p, RAFTNODE_LOST_REFUSED);
            rn_lose_all(n, l, RAFTNODE_LOST_REFUSED);
            return;
        }
        rn_check_inflight(n);
        if (!n->inflight.head) n->inflight_term = n->raft.current_term;
        p->index = ar->req.index;
        p->buf.base = NULL; /* raft's now */
        rn_list_push(&n->inflight, p);
    }
}

/* One append in flight through rn_io_wrap's wrapper: libraft's request
 * and callback, given back when the uv layer calls ours. */
typedef struct AppendWrap {
    struct raft_io_append req; /* the uv layer's (first: container) */
    struct raft_io_append *orig;
    raft_io_append_cb cb;
    RaftNode *n;
} AppendWrap;

static void
on_io_appended(struct raft_io_append *req, int status)
{
    AppendWrap *w = (AppendWrap *)req;
    RaftNode *n = w->n;
    struct raft_io_append *orig = w->orig;
    raft_io_append_cb cb = w->cb;

    free(w);
    if (status != 0 && status != RAFT_CANCELED && !n->closing)
        rn_fail(n,
                "raft: writing the log failed (%s, status %d): stopping "
                "rather than take part with a log that stores nothing",
                raft_strerror(status), status);
    cb(orig, status);
}

static int
io_append(struct raft_io *io, struct raft_io_append *req,
          const struct raft_entry entries[], unsigned k, raft_io_append_cb cb)
{
    RaftNode *n = (RaftNode *)((char *)io - offsetof(RaftNode, io));
    AppendWrap *w = malloc(sizeof *w);
    int rv;

    if (!w) return RAFT_NOMEM;
    w->req.data = req->data;
    w->orig = req;
    w->cb = cb;
    w->n = n;
    if ((rv = n->io_append(io, &w->req, entries, k, on_io_appended)) != 0)
        free(w);
    return rv;
}

void
rn_io_wrap(RaftNode *n)
{
    n->io_append = n->io.append;
    n->io.append = io_append;
}

void
rn_fsm_init(RaftNode *n)
{
    n->fsm.version = 1;
    n->fsm.data = n;
    n->fsm.apply = fsm_apply;
    n->fsm.snapshot = fsm_snapshot;
    n->fsm.restore = fsm_restore;
}
