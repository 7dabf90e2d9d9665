/* state.h - the server's state: every piece of state the event-loop thread
 * owns (listening sockets, connections, jobs, tubes, timer heaps, counters,
 * the store's loop side), in one struct. Data only: the modules that act on
 * it (queue, bodycache, conn, cmd, stats, server) each include this header,
 * and none of them needs another's to see the state. One Server per
 * process; it is the only mutable state outside the store's own struct.
 * Loop thread only. */
#ifndef ROCKSTALK_STATE_H
#define ROCKSTALK_STATE_H

#include <ev.h>
#include <stddef.h>
#include <stdint.h>

#include "base/common.h"
#include "base/cpus.h"
#include "base/heap.h"
#include "base/ptrset.h"
#include "net/listen.h"
#include "net/net.h"
#include "proto/proto.h"
#include "queue/bodycache.h"
#include "queue/dedup.h"
#include "queue/job.h"
#include "queue/tube.h"
#include "store/store.h"

struct ClusterConfig; /* cluster/cluster.h: the queue knows only its name */
struct Access;        /* server/access.h */
struct Conn;
struct ConnHandler;
struct QueueEvents;

/* Listeners a server has at most: inherited, -l/-p and --listen together
 * (a start with more is refused). */
#define SERVER_LISTENERS_MAX 16

/* How the daemon was asked to run (command line, see rockstalkd.1). */
typedef struct ServerConfig {
    const char *listen_addr; /* "0.0.0.0", an IP, or "unix:PATH" */
    int port;                /* TCP port, default 11300 */
    int listen_flags;        /* -l or -p given */
    int nlisten;             /* --listen URLs given, in listen[] */
    ListenAddr listen[SERVER_LISTENERS_MAX]; /* ...parsed */
    const char *dir; /* data directory; NULL with memory_only */
    int memory_only; /* --memory: no store at all */
    StoreSyncMode sync_mode;
    int sync_ms;              /* -f MS, for STORE_SYNC_INTERVAL */
    int nshards;              /* -S, 0 = recorded or default */
    uint32_t max_job_size;    /* -z, bytes */
    size_t cache_max;         /* -m: bytes of bodies kept in memory (store) */
    long binlog_size;         /* -s, reported as binlog-max-size only */
    const char *user;         /* -u */
    const char *http_addr;    /* --http (or --metrics) HOST:PORT, NULL =
                                 off (http/httpd.h) */
    const char *http_opt;     /* ...the flag that gave it */
    int http_plain;           /* --http-plain: no HTTPS even with
                                 --tls-cert */
    uint32_t max_conns;       /* --max-connections, 0 = no limit */
    uint32_t max_timeouts;    /* --max-timeouts: bury a job whose TTR ran
                                 out this many times; 0 = never */
    uint32_t dedup_window;    /* --dedup-window: seconds a put-unique key is
                                 remembered after its put (default 300) */
    uint64_t journal_bytes;   /* --journal-size: bytes of each commit
                                 journal file, 0 = none (StoreConfig) */
    uint32_t ring_min;        /* --body-ring: bodies of at least this many
                                 bytes go through the body ring, 0 = none
                                 (StoreConfig.ring_min) */
    uint64_t ring_file_bytes; /* --body-ring-size: bytes of each body ring
                                 file (StoreConfig.ring_file_bytes) */
    int verbose;              /* -V count */
    CpusConfig cpus;          /* --loop-cpus, --store-cpus, --cpus auto
                                 (server.c places the threads) */
    const char *import_dir;   /* --import-binlog: beanstalkd's binlog
                                 directory to load first (server/import.h),
                                 or NULL */
    const char *cluster_arg;  /* --cluster as given */
    const char *node_id_arg;  /* --node-id as given */
    const char *peer_cert;    /* --cluster-cert: this node's PEM chain */
    const char *peer_key;     /* --cluster-key: its private key (PEM) */
    const char *peer_ca;      /* --cluster-ca: the cluster's CA (PEM) */
    int peer_insecure;        /* --cluster-insecure */
    int cluster_join;         /* --join: a new node waits to be added to a
                                 running cluster (cluster/node.h) */
    int cluster_seed;         /* --seed: a backup (RESTORE) becomes the
                                 single voter of a new cluster */
    const char *tls_cert;     /* --tls-cert: tls:// listeners' PEM chain */
    const char *tls_key;      /* --tls-key: its private key (PEM) */
    const char *tls_ca;       /* --tls-ca: CA of client certificates, or
                                 NULL (clients send none) */
    const char *auth_file;    /* --auth-file: identities and rules
                                 (server/auth.h); NULL: open */
    int auth_unix;            /* --auth-unix: unix sockets authenticate
                                 too */
    int allow_plaintext_auth; /* --allow-plaintext-auth */
    uint32_t max_unauth;      /* --max-unauth: unauthenticated
                                 connections kept (server/access.h) */
    const struct ClusterConfig *cluster; /* both parsed; NULL:
                                             standalone */
    char *const *argv; /* main's, for a cluster node that steps
                          down (node.h) */
} ServerConfig;

/* One listening socket (server.c opens them; node.c hands them over when
 * it execs). */
typedef struct Listener {
    ListenAddr addr;  /* as configured (inherited: as bound) */
    ListenAddr bound; /* as bound: numeric host, real port (for
                         listen_is_loopback) */
    int fd;
    int owned;      /* a unix socket file this process made: removed at
                       a clean exit if the path still is that file */
    NetFileId file; /* ...that file */
    ev_io w;        /* accepts; data: the Server */
} Listener;

typedef struct Server {
    struct ev_loop *loop;
    ServerConfig cfg;

    Listener listeners[SERVER_LISTENERS_MAX];
    int nlisteners;
    ev_timer accept_pause_w; /* resumes accepting after EMFILE */
    ev_prepare prepare_w;    /* hands mutations to the store, releases replies,
                                arms the tick */
    ev_timer tick_w;         /* the one timer, at the earliest deadline */
    int64_t tick_at;         /* monotonic ns tick_w is armed for, or
                                INT64_MAX when it is stopped */
    ev_async store_w;        /* the store's "acked sequence moved" wake-up */
    ev_idle ack_spin_w;      /* keeps the loop polling (not sleeping) while
                                a lone client's change is being committed
                                (server.c, ack_spin) */
    int64_t ack_spin_since;  /* monotonic ns the current spin began, 0: none
                                since the store last caught up */
    int64_t reply_spin_end;  /* monotonic ns until which the loop goes on
                                polling for a lone client's next command
                                after the store caught up, 0: none */
    ev_signal sigterm_w, sigint_w, sigusr1_w, sighup_w;
    ev_timer stop_w;         /* bounds the shutdown's wait for replies */
    int stopping;            /* 1: SIGTERM/SIGINT taken, no new commands;
                                2: every reply written, lingering until the
                                clients close (see server_run) */
    ev_timer http_w;         /* renders and publishes the HTTP documents
                                each second (server/httpdocs.h) */
    struct Httpd *http;      /* NULL unless --http (or --metrics) */
    struct HttpApi *httpapi; /* its requests (server/httpapi.h) */
    uint32_t rate_tick;      /* samples taken for the tubes' rates (the
                                latest one's number, TubeRates) */
    int64_t rate_at[TUBE_RATE_SAMPLES]; /* monotonic ns of each sample,
                                           by slot */
    struct Node *node;       /* cluster mode (node.h); NULL: standalone */
    struct Backups *backups; /* rockstalk-backup senders (server/backup.h);
                                NULL until the first */
    struct TlsSource *tls;   /* tls:// listeners' credentials, or NULL */
    struct Access *access;   /* --auth-file (access.h); NULL: open */

    /* cluster time (PROTOCOL.md 15.2, state_wall_ns): the wall clock plus
     * clock_skew_ns (tests only: ROCKSTALKD_FAULT_CLOCK_SKEW_MS, a clock
     * set wrong) plus clock_offset_ns, the leader's clock less this one's
     * as estimated while following (queue_clock_sample): a new leader goes
     * on with the old one's time, so delays and put-unique windows keep
     * their length across a failover between skewed clocks. */
    int64_t clock_skew_ns;
    int64_t clock_offset_ns;
    int64_t clock_max[2]; /* the highest sample of this window, and of the
                             one before it (queue_clock_sample) */
    int clock_has[2];     /* ...whether that window had one */
    int64_t clock_window; /* monotonic ns the current window began */

    /* queue state */
    JobTable jobs;
    TubeRegistry tubes;
    Tube *default_tube;
    uint64_t next_id;
    Heap lease_heap;   /* Conn* holding jobs, by their soonest TTR deadline */
    uint64_t bury_seq; /* orders buried jobs (kept in Job.deadline) */
    Heap delay_tubes;  /* Tube* with delayed jobs, by their earliest due time */
    Heap pause_heap;   /* paused Tube*, by unpause_at */
    Heap wait_heap;    /* Conn* blocked in reserve with a wake time */

    /* connections */
    struct Conn *conns;   /* every connection (doubly linked) */
    struct Conn *pending; /* connections with output not yet written */
    struct Conn *runq;    /* connections with buffered input to process */
    struct Conn *dead;    /* closed connections not yet freed */
    struct Conn *hs_head, *hs_tail;    /* TLS handshakes under way, oldest
                                          first (conn.c) */
    uint32_t hs_count;                 /* ... how many */
    const struct ConnHandler *handler; /* runs a connection's input (cmd.c) */
    const struct QueueEvents *events;  /* hears the queue's events (cmd.c) */
    PtrSet fetching; /* Conn* whose job reply waits for bodies */
    PtrSet ringwait; /* Conn* whose put waits for the body writer */
    int throttled;   /* backpressure: producers are not read */

    /* durability */
    Store *store;         /* NULL with --memory */
    uint64_t applied_seq; /* seq of the latest mutation handed to the store */
    uint64_t acked_seq;   /* latest acknowledged seq seen by the loop */

    BodyCache bodies; /* resident bodies, reader thread */
    uint32_t iter;    /* loop iterations (prepare callbacks) */
    /* How many connections sent input in the current window of about
     * ACTIVE_WINDOW_S (conn.c counts, server.c rolls the window and tells
     * the store, which spins for input only when few are active). */
    uint32_t active_window;   /* the window's number, from 1 */
    uint32_t active_now;      /* connections read in it so far, less those
                                 closed since (conn.c, uncount_active) */
    uint32_t active_last;     /* ...and in the window before it */
    size_t active_bytes_now;  /* bytes of input read in it */
    size_t active_bytes_last; /* ...and in the window before it */
    ev_tstamp active_since;   /* when it began (ev_now) */
    size_t jobs_peak;         /* job count high-water since the last trim */
    ev_timer second_w;        /* each quarter second: malloc_trim when idle;
                                 each second: expired put-unique keys
                                 (server.c) */
    uint32_t quarters;        /* second_w's ticks so far */
    uint32_t trim_quiet;      /* ...in a row in which no command ran */
    uint64_t trim_ops;        /* commands run, as of the last tick */
    uint64_t trim_written;    /* store bytes written, as of the last trim */
    uint64_t trim_flushed;    /* store memtable bytes flushed at rest (its
                                 rest rounds), as of the last trim */

    /* counters for stats */
    uint64_t op_ct[OP_COUNT];
    uint64_t ready_ct, urgent_ct, reserved_ct, delayed_ct, buried_ct;
    uint64_t total_jobs, timeout_ct, waiting_ct;
    uint32_t cur_conns, cur_producers, cur_workers, total_conns;
    uint64_t rejected_conns; /* closed at once: --max-connections */
    uint64_t poison_ct;      /* jobs buried by --max-timeouts */
    uint64_t cleared_ct;     /* jobs deleted by clear-tube */
    uint64_t handed_ct;      /* jobs handed out to workers (reserves) */
    uint64_t deleted_ct;     /* jobs deleted (any way; queue_delete) */
    struct HttpHist *hist;   /* the HTTP API's history (server/httpact.h) */
    uint64_t batch_jobs;     /* jobs handed out by reserve-batch */
    uint64_t dedup_hits;     /* put-unique answered with an earlier job */
    Dedup dedup;             /* put-unique keys */
    PtrSet clearing;         /* Conn* with a clear-tube under way */
    ev_idle clear_w;         /* keeps the loop turning while they work */
    int draining;
    int64_t started_at; /* monotonic ns */
    char instance_id[17];

    int exit_code;
} Server;

/* Cluster time, wall-clock ns since the epoch: what job records hold
 * (created_at, ready_at) and put-unique windows are measured in. The
 * node's own clock on a leader that never followed. */
static inline int64_t
state_wall_ns(const Server *s)
{
    return wall_ns() + s->clock_skew_ns + s->clock_offset_ns;
}

/* The loop's sequence stamp for a reply made now: replies leave only once
 * the store has acknowledged this sequence. */
static inline uint64_t
state_reply_seq(const Server *s)
{
    return s->store ? s->applied_seq : 0;
}

#endif
