/* server.c - see server.h. Owns start-up (store recovery, then listen), the
 * per-iteration work (ev_prepare), the single timer, accept and signals. */
#include "server/server.h"

#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/log.h"
#include "cluster/node.h"
#include "cluster/nodestep.h"
#include "cluster/nodeops.h"
#include "conn/conn.h"
#include "queue/queue.h"
#include "queue/recover.h"
#include "queue/timers.h"
#include "server/clienttls.h"
#include "server/access.h"
#include "server/backup.h"
#include "server/cmd.h"
#include "server/ext.h"
#include "server/httpapi.h"
#include "server/httpdocs.h"
#include "server/place.h"
#include "server/jobreply.h"
#include "server/import.h"
#include "server/listeners.h"
#include "server/stats.h"
#include "store/prefetch.h"

/* Backpressure: stop reading from producers while this many bytes of
 * mutations wait for the mutation thread; resume below the low mark. */
#define BACKLOG_HIGH (64u << 20)
#define BACKLOG_LOW (16u << 20)

/* The window over which connections that sent input are counted (s). */
#define ACTIVE_WINDOW_S 0.001
/* A window that read at least this many bytes of input is a busy one,
 * whatever the number of connections: large bodies in transit (64 MB/s
 * and more), whose reading takes the loop and whose writes take the store
 * far longer than a spin should wait. Neither spin runs beside it (the
 * small put beside 8 producers of 256 KiB bodies, BENCHMARKS.md). */
#define ACTIVE_HEAVY_BYTES (64u << 10)

/* Once a window has passed, tells the store how many connections sent
 * input in it (UINT_MAX for a busy one) and starts the next. */
static void
roll_active(Server *s)
{
    ev_tstamp now = ev_now(s->loop);

    if (now - s->active_since < ACTIVE_WINDOW_S) return;
    if (s->store)
        store_note_active(s->store, s->active_bytes_now >= ACTIVE_HEAVY_BYTES
                                        ? UINT_MAX
                                        : s->active_now);
    s->active_last = s->active_now;
    s->active_now = 0;
    s->active_bytes_last = s->active_bytes_now;
    s->active_bytes_now = 0;
    s->active_window++;
    s->active_since = now;
}

static void
store_notify(void *arg)
{
    Server *s = arg;
    ev_async_send(s->loop, &s->store_w); /* thread-safe (ev(3) ev_async) */
}

static void
store_cb(struct ev_loop *loop, ev_async *w, int revents)
{
    (void)loop, (void)w, (void)revents; /* the prepare watcher does the work */
}

/* Ack spin (issue 14, item 3): while a change of one of few clients (at
 * most ACK_SPIN_MAX_ACTIVE connections sent input lately, less than
 * ACTIVE_HEAVY_BYTES of it) waits for the store,
 * the loop polls its sockets with a zero timeout (an active ev_idle, ev(3)
 * "ev_idle") instead of sleeping until the store's ev_async wakes it: that
 * wake-up of an idle core costs each reply tens of microseconds in a VM,
 * on top of the fdatasync the reply waits for. The loop still serves every
 * socket while it spins. A spin lasts at most ACK_SPIN_MAX_NS from the
 * first iteration that found the store behind, then the loop sleeps until
 * the store has caught up with everything handed to it. With more clients
 * (or more than ACK_SPIN_MAX_INFLIGHT changes in flight) the loop and they
 * need both cores and groups are larger, so it never spins. Each round
 * yields the core (sched_yield) to a thread that shares it: the mutation
 * thread finishing its sync, or the client. Put c=1, default mode, 3 s
 * cells on the 2-core VM: 4.9-5.3k/s before, 5.2-7.5k/s after. The spread
 * is where the scheduler puts the threads: with the client on the loop's
 * core and the mutation thread on the other, 6.7-8.0k/s, else 4.2-5.2k/s;
 * beanstalkd -f0 makes 4.4-7.5k/s by the same rule (BENCHMARKS.md).
 * The limits were 1 client and 2 changes in flight until issue 30 measured
 * 2 to 24 clients (3 s cells alternated, 3 each, default mode): with 16
 * (and the mutation thread's input spin allowed as far) put c=2 went from
 * 7.5k to 11.1k/s, c=4 12.3k to 19.2k, c=8 19.9k to 30.6k, c=16 36.2k to
 * 43.0k; cycle c=2 3.1k to 4.1k, c=8 8.9k to 12.4k; c=24 and c=50 (no
 * spin) as before. A cluster's acknowledgement is a Raft commit, a
 * millisecond or more, and the benches' three nodes share two cores: there
 * the old limits stay (ACK_SPIN_CLUSTER_*). */
#define ACK_SPIN_MAX_NS 400000
/* And once the store caught up with a lone client's change (its reply
 * leaves in this round), the loop polls on for REPLY_SPIN_NS: that
 * client's next command then finds the loop awake instead of waking an
 * idle core. */
#define REPLY_SPIN_NS 150000
#define ACK_SPIN_MAX_ACTIVE 16
#define ACK_SPIN_MAX_INFLIGHT 16
#define ACK_SPIN_CLUSTER_ACTIVE 1
#define ACK_SPIN_CLUSTER_INFLIGHT 2
static void
ack_spin_cb(struct ev_loop *loop, ev_idle *w, int revents)
{
    (void)loop, (void)w, (void)revents;
    sched_yield(); /* a thread on this core (the store's, a client) first */
}

static void
ack_spin(Server *s)
{
    int behind = s->store && s->acked_seq < s->applied_seq;
    uint32_t most = s->node ? ACK_SPIN_CLUSTER_ACTIVE : ACK_SPIN_MAX_ACTIVE;
    uint64_t flight =
        s->node ? ACK_SPIN_CLUSTER_INFLIGHT : ACK_SPIN_MAX_INFLIGHT;
    int lone = s->active_now <= most && s->active_last <= most &&
               s->active_bytes_now < ACTIVE_HEAVY_BYTES &&
               s->active_bytes_last < ACTIVE_HEAVY_BYTES &&
               s->applied_seq - s->acked_seq <= flight;
    int spin = 0;

    if (!behind) {
        if (s->ack_spin_since && lone)
            s->reply_spin_end = mono_ns() + REPLY_SPIN_NS;
        s->ack_spin_since = 0;
        spin = s->reply_spin_end && lone && mono_ns() < s->reply_spin_end;
        if (!spin) s->reply_spin_end = 0;
    } else if (lone) {
        int64_t now = mono_ns();
        if (!s->ack_spin_since) s->ack_spin_since = now;
        spin = now - s->ack_spin_since < ACK_SPIN_MAX_NS;
    }
    if (spin && !ev_is_active(&s->ack_spin_w))
        ev_idle_start(s->loop, &s->ack_spin_w);
    else if (!spin && ev_is_active(&s->ack_spin_w))
        ev_idle_stop(s->loop, &s->ack_spin_w);
}

static void
set_throttle(Server *s, int on)
{
    s->throttled = on;
    for (Conn *c = s->conns; c; c = c->next)
        if (c->producer) conn_update_read(c);
    log_msg(1, "backpressure %s", on ? "on" : "off");
}

/* Arms the one timer at the earliest deadline of every heap; leaves it
 * alone when that deadline has not moved (most loop iterations). */
static void
arm_tick(Server *s)
{
    int64_t at = timers_next_deadline(s);
    if (at == s->tick_at && ev_is_active(&s->tick_w)) return;
    ev_timer_stop(s->loop, &s->tick_w);
    s->tick_at = at;
    if (at == INT64_MAX) return;
    double d = (double)(at - mono_ns()) / 1e9 + 0.0002;
    ev_timer_set(&s->tick_w, d > 0 ? d : 0, 0.);
    ev_timer_start(s->loop, &s->tick_w);
}

static void
fail_stop(Server *s)
{
    char msg[512];
    if (store_failed(s->store, msg, sizeof msg)) {
        log_msg(0, "storage failure, exiting without acknowledging: %s", msg);
        _exit(2); /* fail-stop: nothing after the failure is acknowledged */
    }
}

/* Commands run since start (every counted command). */
static uint64_t
ops_total(const Server *s)
{
    uint64_t n = 0;
    for (int i = 0; i < OP_COUNT; i++)
        n += s->op_ct[i];
    return n;
}

/* Bytes written to the store, or memtable bytes it flushed at rest,
 * since the last trim that make an idle second trim too (maybe_trim). */
#define TRIM_WRITTEN ((uint64_t)64 << 20)
#define TRIM_FLUSHED ((uint64_t)16 << 20)

/* Gives memory back once it is free: glibc returns the top of its heap by
 * itself, but not free holes inside it, so ask it to (malloc_trim)
 *  - once the job count is below a quarter of its peak (and the peak was
 *    large): the holes a partial drain leaves;
 *  - once TRIM_WRITTEN bytes were written to the store, or its rest rounds
 *    flushed TRIM_FLUSHED bytes of memtables, and the store is at rest
 *    (StoreStats.at_rest: its rest round after the writes is done, the
 *    memtables' blocks freed, store/idle.h): RocksDB's memtable blocks
 *    (MiBs each, freed at each flush) and the hand-off's chunks
 *    (store/handoff.c, which also keeps up to 16 MiB of spare ones, freed
 *    here first) are reused through the heap while writes go on, without
 *    a page fault each time, but stayed resident when they stopped: 60 MiB
 *    after a load of 1M 1 KiB jobs (BENCHMARKS.md, "Memory row,
 *    2026-11-28"), and up to 2 x 32 + 16 MiB more in the memtables until
 *    the rest rounds flushed them. A pinned mmap threshold gave them back
 *    at once but cost up to a third more CPU per put of 4 KiB bodies.
 * malloc_trim walks every free chunk with the heap locked: 180 ms at 2M
 * jobs after a drain here, so it runs only after a second in which no
 * command ran (TRIM_QUIET quarters) and no change waits for the store, when
 * it delays no reply in flight. Every quarter second (second_cb), so that
 * a rest round that ends just after a tick is not left for a second. */
#define TRIM_QUIET 4
static void
maybe_trim(Server *s)
{
    StoreStats st = {.at_rest = 1};
    if (s->store) store_stats(s->store, &st);
    uint64_t ops = ops_total(s), written = st.bytes - s->trim_written;
    uint64_t flushed = st.idle_flushed - s->trim_flushed;
    s->trim_quiet = ops == s->trim_ops ? s->trim_quiet + 1 : 0;
    int idle = s->trim_quiet >= TRIM_QUIET && s->acked_seq >= s->applied_seq;
    s->trim_ops = ops;
    if (s->jobs.len > s->jobs_peak) s->jobs_peak = s->jobs.len;
    if (idle && ((s->jobs_peak >= 100000 && s->jobs.len < s->jobs_peak / 4) ||
                 (st.at_rest &&
                  (written >= TRIM_WRITTEN || flushed >= TRIM_FLUSHED)))) {
        int64_t t0 = mono_ns();
        if (s->store) store_release_spares(s->store);
        malloc_trim(0);
        log_msg(1,
                "malloc_trim after %zu -> %zu jobs, %" PRIu64
                " MiB written, %" PRIu64 " MiB of memtables flushed at rest: "
                "%.1f ms",
                s->jobs_peak, s->jobs.len, written >> 20, flushed >> 20,
                (double)(mono_ns() - t0) / 1e6);
        s->jobs_peak = s->jobs.len;
        s->trim_written += written;
        s->trim_flushed += flushed;
    }
}

/* Each quarter second: gives memory back if idle (maybe_trim); each
 * second: closes TLS connections stuck in their handshake and trims quiet
 * ones, and forgets the put-unique keys whose window has ended (a bounded
 * number per second; the rest the next second). */
static void
second_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    Server *s = w->data;
    (void)loop, (void)revents;
    maybe_trim(s);
    if (++s->quarters % 4) return;
    conn_sweep_tls(s, mono_ns() - CONN_HANDSHAKE_S * NS_PER_SEC);
    if (node_serves(w->data)) /* the leader's sweep is replicated */
        queue_dedup_sweep(w->data, state_wall_ns(s), 100000);
}

static void
track_peak(Server *s)
{
    if (s->jobs.len > s->jobs_peak) s->jobs_peak = s->jobs.len;
}

/* A stopping server first waits until the store has acknowledged
 * everything applied and every connection has written all its replies;
 * then it sends FIN on every connection and lingers (discarding input)
 * until the peers have closed, so no reset destroys a reply in flight. */
static void
stop_step(Server *s)
{
    if (s->pending || s->fetching.len || s->ringwait.len || s->clearing.len ||
        (s->store && s->acked_seq < s->applied_seq))
        return;
    if (!s->conns) {
        ev_break(s->loop, EVBREAK_ALL);
        return;
    }
    if (s->stopping > 1) return;
    s->stopping = 2;
    for (Conn *c = s->conns; c; c = c->next)
        conn_linger(c);
    ev_timer_stop(s->loop, &s->stop_w);
    ev_timer_set(&s->stop_w, SHUTDOWN_LINGER_S, 0.);
    ev_timer_start(s->loop, &s->stop_w);
}

/* Once per loop iteration, just before it blocks: run scheduled input, hand
 * the iteration's mutations to the store as one unit, write what the store
 * has acknowledged, apply backpressure, arm the timer.
 *
 * Invariants the loop below rests on:
 *   - Every connection with input to run is on Server.runq: the only ways
 *     onto it are conn_schedule (through conn_resume, or when output that
 *     parked the input drains) and the read watcher, which runs the input
 *     itself. So when runq is empty, no input is left to run before the
 *     next event.
 *   - No mutation is left unhanded when the loop blocks: writing output
 *     can close a connection (a failed write), and closing returns its
 *     jobs to ready, which may store a change; the loop goes round again
 *     until writing made no new mutation. */
static void
prepare_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
    Server *s = w->data;
    (void)loop, (void)revents;
    if (s->store) {
        fail_stop(s);
        s->acked_seq = store_acked_seq(s->store);
    }
    bodycache_drop_acked(&s->bodies, &s->jobs, s->acked_seq);
    s->iter++;
    roll_active(s);
    bodycache_take(&s->bodies, &s->jobs);
    cmd_ring_done(s);
    jobreply_done(s);
    httpapi_step(s);
    ext_clear_step(s);
    nodeops_step(s); /* a membership change's reply, if its outcome came */
    uint64_t handed;
    do {
        conn_run_all(s);
        if (s->store) store_flush(s->store);
        handed = s->applied_seq;
        conn_flush_all(s);
    } while (s->runq || s->applied_seq != handed);
    if (s->store) {
        size_t backlog = store_backlog_bytes(s->store) + node_backlog_bytes(s);
        if (!s->throttled && backlog > BACKLOG_HIGH)
            set_throttle(s, 1);
        else if (s->throttled && backlog < BACKLOG_LOW)
            set_throttle(s, 0);
    }
    arm_tick(s);
    ack_spin(s);
    node_step(s);
    conn_reap(s);
    track_peak(s);
    if (s->stopping) stop_step(s);
}

static void
tick_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop, (void)revents;
    queue_tick(w->data, mono_ns());
}

/* The kind of connection a listener's accepts make (Conn.via). */
static uint8_t
via_of(ListenKind kind)
{
    return kind == LISTEN_TLS    ? CONN_VIA_TLS
           : kind == LISTEN_UNIX ? CONN_VIA_UNIX
                                 : CONN_VIA_TCP;
}

static void
start_accepting(Server *s)
{
    for (int i = 0; i < s->nlisteners; i++)
        ev_io_start(s->loop, &s->listeners[i].w);
}

static void
stop_accepting(Server *s)
{
    for (int i = 0; i < s->nlisteners; i++)
        ev_io_stop(s->loop, &s->listeners[i].w);
}

/* A new connection fd from listener l: to the relay (a follower's), or a
 * client of ours. */
static void
accepted(Server *s, const Listener *l, int fd)
{
    uint8_t via = via_of(l->addr.kind);
    /* TCP_NODELAY and dead-peer detection come from the listener
     * (listeners.c, tune_listeners): a client gone with its host or link
     * must not keep its reserves (or, relayed by a cut-off follower, take
     * jobs) */
    TlsSock *x = NULL;
    if (via == CONN_VIA_TLS && !(x = clienttls_session(s))) {
        close(fd); /* no memory for a session */
        return;
    }
    if (node_accept(s, fd, via, x)) return;
    conn_new_via(s, fd, via, x, NULL, 0);
}

static void
accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    Server *s = w->data;
    const Listener *l =
        (const Listener *)((const char *)w - offsetof(Listener, w));
    (void)revents;
    for (;;) {
        int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
                errno == ENOMEM) {
                /* out of descriptors: pause accepting (on every listener:
                 * they share the limit) instead of spinning */
                log_msg(0, "accept: %s; pausing accepts", strerror(errno));
                stop_accepting(s);
                ev_timer_set(&s->accept_pause_w, 0.1, 0.);
                ev_timer_start(loop, &s->accept_pause_w);
            }
            return;
        }
        if (s->cfg.max_conns &&
            s->cur_conns + node_relayed(s) >= s->cfg.max_conns) {
            close(fd); /* at the limit: refuse politely, at once */
            if (s->rejected_conns++ % 1000 == 0)
                log_msg(0, "connection limit %u reached; refusing",
                        s->cfg.max_conns);
            continue;
        }
        accepted(s, l, fd);
    }
}

static void
accept_resume_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    Server *s = w->data;
    (void)loop, (void)revents;
    if (!s->stopping) start_accepting(s);
}

static void
signal_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
    Server *s = w->data;
    (void)revents;
    if (w->signum == SIGUSR1) {
        s->draining = 1;
        log_msg(0, "SIGUSR1: drain mode, new jobs are refused");
        return;
    }
    if (w->signum == SIGHUP) {
        if (s->access) access_reload(s);
        if (s->node) node_reload_tls(s);
        if (s->tls) clienttls_reload(s);
        if (!s->node && !s->tls && !s->access)
            log_msg(0, "SIGHUP: nothing to re-read");
        return;
    }
    if (s->stopping) {
        log_msg(0, "signal %d again: stopping now", w->signum);
        ev_break(loop, EVBREAK_ALL);
        return;
    }
    log_msg(0, "signal %d: shutting down", w->signum);
    s->stopping = 1;
    httpdocs_ready(s); /* /readyz: 503 from now on */
    stop_accepting(s);
    ev_timer_stop(loop, &s->accept_pause_w);
    for (Conn *c = s->conns; c; c = c->next)
        conn_update_read(c); /* stopping: nothing more is read */
    ev_timer_start(loop, &s->stop_w);
}

static void
stop_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    Server *s = w->data;
    (void)revents;
    if (s->stopping == 1)
        log_msg(0, "shutdown: replies still unwritten after %.0f s; closing",
                SHUTDOWN_GRACE_S);
    ev_break(loop, EVBREAK_ALL);
}

/* Whether dir holds a store (its FORMAT file). */
static int
formatted(const char *dir)
{
    char path[4096];

    snprintf(path, sizeof path, "%s/FORMAT", dir);
    return access(path, F_OK) == 0;
}

/* 1 if the data directory holds a backup to restore (store.h
 * STORE_RESTORE_FILE; sc then takes its shard count), 0 if not, -1 with a
 * message in err (cluster mode, another -S, an unreadable file). */
static int
restore_pending(const Server *s, StoreConfig *sc, char *err, size_t errcap)
{
    int n = 0;
    int rc = store_restore_pending(s->cfg.dir, &n, err, errcap);

    if (rc == 0 && node_seed_first(s) && !formatted(s->cfg.dir)) {
        snprintf(err, errcap,
                 "--seed: %s holds no backup (%s): write one there with "
                 "rockstalk backup",
                 s->cfg.dir, STORE_RESTORE_FILE);
        return -1;
    }
    if (rc <= 0) return rc;
    if (s->cfg.cluster && !node_seed_first(s)) {
        snprintf(err, errcap,
                 "%s holds a backup (%s): restore it standalone, without "
                 "--cluster, or seed a new cluster with it (--seed)",
                 s->cfg.dir, STORE_RESTORE_FILE);
        return -1;
    }
    if (sc->nshards && sc->nshards != n) {
        snprintf(err, errcap, "the backup in %s has %d shards, not -S %d",
                 s->cfg.dir, n, sc->nshards);
        return -1;
    }
    sc->nshards = n;
    return 1;
}

static int
open_store(Server *s, Placement *pl, char *err, size_t errcap)
{
    StoreConfig sc = {
        .dir = s->cfg.dir,
        .nshards = s->cfg.nshards,
        .sync_mode = s->cfg.sync_mode,
        .sync_interval_ms = s->cfg.sync_ms,
        .journal_bytes = s->cfg.journal_bytes,
        .ring_min = s->cfg.ring_min,
        .ring_file_bytes = s->cfg.ring_file_bytes,
        .notify = store_notify,
        .notify_arg = s,
    };
    uint64_t next_id = 1;
    int64_t t0 = mono_ns();
    if (s->cfg.cluster) { /* the Raft log is the durable copy (store.h) */
        if (node_prepare(s, s->cfg.cluster, s->cfg.argv, err, errcap) < 0)
            return -1;
        sc.sync_mode = STORE_SYNC_NEVER;
        sc.journal_bytes = 0;
        sc.raft_log = 1;
    } else if ((s->cfg.import_dir && import_binlog(&s->cfg, err, errcap) < 0) ||
               node_standalone_dir(s->cfg.dir, err, errcap) < 0) {
        return -1;
    }
    int restore = restore_pending(s, &sc, err, errcap);
    if (restore < 0) return -1;
    if (store_open(&sc, &s->store, err, errcap) < 0) return -1;
    if (restore && store_restore(s->store, err, errcap) < 0) return -1;
    if (node_seed_first(s) && store_raft_applied(s->store) != 0) {
        /* its entries' indexes are another log's: the new one's would be
         * skipped as applied */
        snprintf(err, errcap,
                 "--seed: the backup in %s comes from a cluster node (it "
                 "holds Raft entry %llu); seed from a standalone server's",
                 s->cfg.dir, (unsigned long long)store_raft_applied(s->store));
        return -1;
    }
    if (restore)
        log_msg(0, "restored the backup in %s in %.3f s", s->cfg.dir,
                (double)(mono_ns() - t0) / 1e9);
    /* the store's threads (and the Raft thread) inherit its CPUs */
    if (place_store_begin(pl, err, errcap) < 0) return -1;
    if (s->cfg.cluster) {
        if (node_start(s, err, errcap) < 0) return -1;
        return prefetch_start(s->store, store_notify, s, &s->bodies.reader, err,
                              errcap);
    }
    if (store_recover(s->store, queue_recover_job, s, &next_id, err, errcap) <
        0)
        return -1;
    s->next_id = next_id;
    log_msg(0, "recovered %zu jobs from %s in %.3f s (next id %llu)",
            s->jobs.len, s->cfg.dir, (double)(mono_ns() - t0) / 1e9,
            (unsigned long long)next_id);
    StoreStats st;
    store_stats(s->store, &st);
    if (st.replayed)
        log_msg(0, "the commit journal gave %llu groups RocksDB lacked",
                (unsigned long long)st.replayed);
    if (place_store_begin(pl, err, errcap) < 0 ||
        store_start(s->store, err, errcap) < 0)
        return -1;
    return prefetch_start(s->store, store_notify, s, &s->bodies.reader, err,
                          errcap);
}

static void
init_watchers(Server *s)
{
    ev_timer_init(&s->accept_pause_w, accept_resume_cb, 0.1, 0.);
    ev_prepare_init(&s->prepare_w, prepare_cb);
    ev_timer_init(&s->tick_w, tick_cb, 0., 0.);
    s->tick_at = INT64_MAX;
    ev_async_init(&s->store_w, store_cb);
    ev_idle_init(&s->ack_spin_w, ack_spin_cb);
    ev_signal_init(&s->sigterm_w, signal_cb, SIGTERM);
    ev_signal_init(&s->sigint_w, signal_cb, SIGINT);
    ev_signal_init(&s->sigusr1_w, signal_cb, SIGUSR1);
    ev_signal_init(&s->sighup_w, signal_cb, SIGHUP);
    ev_timer_init(&s->stop_w, stop_cb, SHUTDOWN_GRACE_S, 0.);
    ev_timer_init(&s->second_w, second_cb, .25, .25);
    s->accept_pause_w.data = s->prepare_w.data = s;
    s->tick_w.data = s->store_w.data = s->stop_w.data = s->second_w.data = s;
    s->sigterm_w.data = s->sigint_w.data = s->sigusr1_w.data = s;
    s->sighup_w.data = s;
    ev_prepare_start(s->loop, &s->prepare_w);
    ev_timer_start(s->loop, &s->second_w);
    ev_async_start(s->loop, &s->store_w);
    ev_signal_start(s->loop, &s->sigterm_w);
    ev_signal_start(s->loop, &s->sigint_w);
    ev_signal_start(s->loop, &s->sigusr1_w);
    ev_signal_start(s->loop, &s->sighup_w);
}

int
server_init(Server *s, const ServerConfig *cfg, char *err, size_t errcap)
{
    unsigned char rnd[8];
    Placement pl;
    memset(s, 0, sizeof *s);
    s->cfg = *cfg;
    s->bodies.max = cfg->cache_max;
    s->next_id = 1;
    /* tests only: a clock set this many ms wrong (the chaos harness's
     * skewed nodes; state_wall_ns) */
    const char *skew = getenv("ROCKSTALKD_FAULT_CLOCK_SKEW_MS");
    if (skew) s->clock_skew_ns = strtoll(skew, NULL, 10) * 1000000LL;
    s->active_window = 1; /* a new connection's 0 counts in the first */
    s->started_at = mono_ns();
    if (getrandom(rnd, sizeof rnd, 0) != sizeof rnd) memset(rnd, 0, sizeof rnd);
    for (int i = 0; i < 8; i++)
        snprintf(s->instance_id + 2 * i, 3, "%02x", rnd[i]);
    s->loop = ev_default_loop(EVFLAG_SIGNALFD);
    if (!s->loop || tubes_init(&s->tubes) < 0 ||
        !(s->default_tube = tubes_get(&s->tubes, "default", 7))) {
        snprintf(err, errcap, "cannot initialise the event loop");
        return -1;
    }
    timers_init(s);
    s->handler = &cmd_handler;
    s->events = &cmd_events;
    ext_init(s);
    dedup_init(&s->dedup);
    init_watchers(s);
    place_plan(cfg, &pl);
    if (clienttls_open(s, err, errcap) < 0) return -1;
    /* Listen before the (possibly long) recovery, so a taken port is
     * reported at once; connections wait in the backlog until accepted. */
    /* The HTTP server before recovery too: /readyz says "recovering". */
    if (listeners_open(s, cfg, err, errcap) < 0 ||
        access_init(s, err, errcap) < 0 || /* before recovery */
        httpdocs_open(s, err, errcap) < 0 ||
        (!cfg->memory_only && open_store(s, &pl, err, errcap) < 0) ||
        place_loop(&pl, err, errcap) < 0) {
        httpdocs_close(s);
        listeners_close(s); /* and the unix socket files made */
        return -1;
    }
    for (int i = 0; i < s->nlisteners; i++) {
        ev_io_init(&s->listeners[i].w, accept_cb, s->listeners[i].fd, EV_READ);
        s->listeners[i].w.data = s;
    }
    start_accepting(s);
    return 0;
}

int
server_run(Server *s)
{
    ev_run(s->loop, 0);
    return s->exit_code;
}

static void
free_job(Job *j, void *arg)
{
    (void)arg;
    free(j->body);
    free(j);
}

void
server_free(Server *s)
{
    char err[512];
    httpdocs_close(s);
    prefetch_stop(s->bodies.reader); /* it reads from the store */
    s->bodies.reader = NULL;
    node_close(s);  /* the raft thread writes to the store */
    backup_stop(s); /* the senders read it */
    if (s->store) {
        store_flush(s->store);
        if (store_close(s->store, err, sizeof err) < 0) {
            log_msg(0, "closing the store: %s", err);
            s->exit_code = 2;
        }
        s->store = NULL;
    }
    for (Conn *c = s->conns; c; c = s->conns)
        conn_close(c);
    conn_reap(s);
    access_free(s);
    jobtable_each(&s->jobs, free_job, NULL);
    jobtable_free(&s->jobs);
    tubes_free(&s->tubes);
    heap_free(&s->lease_heap);
    heap_free(&s->delay_tubes);
    heap_free(&s->pause_heap);
    heap_free(&s->wait_heap);
    node_free(s);
    backup_free(s);
    ptrset_free(&s->fetching);
    ptrset_free(&s->ringwait);
    ptrset_free(&s->clearing);
    dedup_free(&s->dedup);
    bodycache_free(&s->bodies);
    clienttls_close(s);
    listeners_close(s);
    ev_loop_destroy(s->loop);
}
