/*
 * ceiling - the cheapest server that can pass rsbench's put load (and with
 * -q, below, its cycle load): one thread, one epoll loop. It reads each "put
 * <pri> <delay> <ttr> <bytes>" line and skips its body, then answers "INSERTED
 * 1"; "use TUBE" gets "USING TUBE", anything else "UNKNOWN_COMMAND". It stores
 * nothing, so its put rate is about the most one event-loop thread can answer
 * on this machine, and the benchmark compares real servers with it.
 *
 * With -b DIR it is the sync ceiling: the cheapest server that acknowledges
 * after fdatasync, with group commit. Every byte a client sends is appended
 * to DIR/ceiling.log; once per epoll batch the loop hands what it read to a
 * syncer thread, which writes and fdatasyncs everything handed over since its
 * previous sync, back to back, and wakes the loop (eventfd). A reply leaves
 * only once the bytes read before it are synced. No parsing beyond the
 * above, no index, no storage engine: what a durable server can reach at
 * best with this disk and these cores. -n N runs N syncer threads, each
 * with its own log file (DIR/ceiling.K.log), so up to N syncs overlap; a
 * generation counts as synced once it and every earlier one are.
 *
 * -o (with -b): the overwrite sync ceiling. Each log file is preallocated
 * and zero-filled at start (OVER_SIZE bytes, synced), then written in place
 * as a ring (pwrite, wrapping to 0), one fdatasync per generation: the file
 * size never changes and every block was written before, so a sync writes
 * only the data. What a commit journal of reused, zero-filled files can
 * reach; the plain sync ceiling measures an appending log.
 *
 * -w (with -b): the write ceiling. The syncer writes each generation and
 * does not fdatasync it: a reply leaves once a second thread wrote what it
 * answers to the page cache, the promise of rockstalkd -f MS (and of
 * beanstalkd -b): what a server that acknowledges after a hand-off and a
 * write(2), but before the disk, can reach at best.
 *
 * -k (with -w): the RocksDB write ceiling. As -w, and once the loop is
 * woken, the syncer also keeps every job of the generation in RocksDB as
 * rockstalkd's shards do: one shard (DIR/shard-00, opened with
 * rockstalkd's own options and column families, src/store/shard.c), the
 * job's metadata (63 bytes, the size of rockstalkd's for tube "rsbench")
 * and its body under its 8-byte id: one value of the meta CF, the metadata
 * followed by the body, for a body of at most STORE_INLINE_MAX bytes, else
 * the metadata into the meta CF and the body into the body CF; the
 * generation's number into the default CF, one WriteBatch per generation,
 * the WAL written and not synced. What a server that acknowledges after a
 * write(2) and keeps every job in RocksDB (rockstalkd -f MS's promise and
 * store) can reach at best; it parses nothing more than the put lines.
 *
 * -k without -w (with -b, and -o to write the log in place): the RocksDB
 * sync ceiling. The syncer writes and fdatasyncs each generation as the
 * sync ceiling does, wakes the loop, and then keeps its jobs in RocksDB as
 * -k does: what a server that acknowledges after one fdatasync of its own
 * log and keeps every job in RocksDB (rockstalkd's default mode with the
 * commit journal, at put c=50, where every job outlives its write-behind
 * window) can reach at best.
 *
 * -R ID -r CLUSTER (with -b): the Raft ceiling, node ID of the cluster
 * CLUSTER ("1@IP:PORT,2@IP:PORT,3@IP:PORT", Raft addresses). The syncer is
 * a libraft node (Debian's libraft 0.15, its uv log and TCP transport, the
 * settings src/cluster/raftnode.c uses) on its own thread and uv loop: it
 * proposes each generation handed to it as one entry, and a generation counts
 * as synced once libraft applied its entry, that is once it is committed on a
 * majority. The FSM does nothing. What a durable, replicated server built
 * on libraft can reach at best with this disk and these cores, beside the
 * cluster rows; the leader creates DIR/LEADER, and only it may be given
 * clients (elsewhere a generation is never synced).
 *
 * -R ... -k: the Raft ceiling with the cluster's storage work. Every node's
 * FSM keeps the jobs of each applied entry in its shard as -k does (one
 * batch per entry, here without the WAL: the shard is opened as rockstalkd
 * opens a cluster node's, the Raft log being the durable copy), and a
 * snapshot flushes the shard first, as rockstalkd's does (store/raft.c).
 * No queue, no replay into one: what rockstalkd's cluster mode, which keeps
 * every job in RocksDB on every node, can reach at best here. As -k, it
 * needs each entry to hold whole put commands (small bodies).
 *
 * -B IP:PORT (with -R): the address this node's Raft listens on, where
 * not its address in -r (raft_uv_tcp_set_bind_address, raft/uv.h): the
 * Raft ceiling over mutual TLS (run.sh's ceiling-raftt) puts a TLS
 * proxy between -r's addresses and the bound ones.
 *
 * -u (with -b -o): the in-loop async sync ceiling. No syncer thread: the
 * loop itself writes each generation into the preallocated log through
 * io_uring (liburing, io_uring_prep_write(3)), the file opened with
 * O_DIRECT | O_DSYNC, so the write completes only once it is on stable
 * storage and no fdatasync follows; the loop never blocks on the disk,
 * and the completion wakes it through an eventfd registered with the ring
 * (io_uring_register_eventfd(3)) in its own epoll set. O_DIRECT writes
 * whole 4 KiB blocks: a generation is written from the start of the block
 * holding the write position, the block's earlier bytes rewritten as they
 * were. One write is in flight at a time; what arrives meanwhile forms the
 * next generation. What a server whose loop owns its commit journal, with
 * no hand-off to a second thread and back, can reach at best (issue 30's
 * put c=1 row: beanstalkd -f0 syncs in its loop, blocking it).
 *
 * -d (with -b -o, not -u): the overwrite sync ceiling with -u's I/O. The
 * syncer thread stays, as with -o alone, but writes each generation to
 * the preallocated log opened O_DIRECT | O_DSYNC, in whole 4 KiB blocks
 * from an aligned buffer (the block at the write position rewritten as -u
 * does), one pwrite that returns once the blocks are on stable storage,
 * and no fdatasync. Beside -o and -u it tells which of their two
 * differences costs what: the hand-off to a thread and back, or the I/O
 * (buffered pwrite and fdatasync against one direct, synchronous write).
 *
 * -s (with -b -o, not -u or -d): as -d, but the log is not opened
 * O_DIRECT: each generation is one pwritev2(2) with RWF_DSYNC on the
 * buffered file, which syncs what it wrote before it returns, and no
 * fdatasync follows: -o's I/O in one system call instead of two.
 *
 * -g (with -b, not -u or -R): the syncer fills each generation first, as
 * rockstalkd's mutation thread does under -f 0 (PROTOCOL.md 11.2): it
 * waits until as many mutations (puts; -q: puts and deletes) are handed
 * over as the previous generation carried, but no longer than half the
 * previous write and sync took and never more than 0.5 ms. Back to back
 * (without -g), a crowd's syncs come as fast as the disk allows, each
 * carrying what arrived during the one before; filled, fewer syncs carry
 * more, which on these 2 cores can leave more CPU to the loop and the
 * clients.
 *
 * -q: the queue ceiling, for the cycle rows (cycle c=50, and c=100 over
 * one tube and over 1,000): the least work a server must do to pass
 * rsbench's cycle load, and no more. It keeps each job (its body in
 * memory) in its tube, found by name in a hash table; a tube's ready jobs
 * are a FIFO (rsbench puts with one priority, so oldest first is the
 * order a beanstalkd server owes); each connection has a tube it uses
 * and a watch list. It answers use, watch, ignore, put ("INSERTED id"),
 * reserve and reserve-with-timeout (the oldest ready job of all the
 * tubes watched, a look at the head of each, as beanstalkd does; none:
 * the reserve blocks on every tube watched, first come first served,
 * until a put makes a job ready or its deadline passes, and the
 * connection's later commands wait for its reply), and delete (of a
 * ready job, or of one reserved by the same connection; jobs by id in a
 * second hash table); anything else gets UNKNOWN_COMMAND, a bad tube name
 * BAD_FORMAT. A closed connection's reserved jobs are ready again. No
 * priorities, delays, TTR, bury, kick, stats or pause: rsbench's cycle
 * load uses none of them (run.sh runs rsbench with -x against the
 * ceilings: no stats-tube).
 * With -b (and -o, -u, -n, -w, -R) the queue ceiling is durable as a
 * durable server must be: only the bytes of mutations (each put's line,
 * body and CRLF, each delete's line) go to the log, through the same
 * generations, group commit and syncs as above; INSERTED, DELETED and
 * delete's NOT_FOUND leave once their generation is synced, and a put's
 * job becomes ready (reservable) only then, so no reserve reveals a job
 * whose put could still be lost. Other replies (USING, WATCHING,
 * RESERVED, TIMED_OUT) need no sync: they leave at once, in order behind
 * any reply still waiting (a use's reply waits for the put after it in
 * the same input: one send for both). Not with -k.
 *
 * -L BYTES (with -b, not -q, -u, -k, -R or -n): the split sync ceiling,
 * for issue 30's big-beside-small row. The body of a put of at least
 * BYTES bytes (and its CRLF) does not go to the log: the loop hands it to
 * a second syncer thread, the body syncer, which writes each generation
 * of bodies it takes to DIR/ceiling.body and fdatasyncs it, back to back,
 * as the syncer does with the log. Every body is kept (the bigsmall load
 * deletes nothing), so the body file only grows: it is made 64 MiB longer
 * (ftruncate, sparse, as rockstalkd makes its body ring's files) whenever
 * a write would pass its end, and its blocks are allocated as they are
 * first written. A large put's reply leaves once its line's generation
 * of the log and its body's generation of the body file are both synced;
 * a small put's waits for the log alone, never for someone else's large
 * body. What a server that keeps large bodies apart from the small
 * records' commit (rockstalkd's body ring, PROTOCOL.md 11.5) can reach at
 * best on this disk and these cores: each body read by the loop, copied
 * once to the hand-off and written once, no index, no storage engine.
 *
 * -K (with -L): the body syncer writes each generation in pieces of 128
 * KiB and, after each, starts the device's write-back of it
 * (sync_file_range(2), SYNC_FILE_RANGE_WRITE) and waits for what lies more
 * than 256 KiB behind, as rockstalkd's body ring does: a write-back window
 * that keeps little of the body file queued at the device ahead of the
 * log's fdatasync. The fdatasync after the generation stays.
 *
 * Without -q a put's reply is queued once its whole body is read (with
 * -b, so its generation covers the body).
 *
 * usage: ceiling [-l ADDR] [-p PORT] [-q]
 *                [-b DIR [-n SYNCERS] [-o [-u|-d|-s]] [-w] [-k] [-g]
 *                 [-L BYTES [-K]] [-R ID -r CL [-B ADDR]]]
 *        (default 127.0.0.1 11300, 1 syncer)
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <liburing.h>
#include <raft.h>
#include <raft/uv.h>
#include <uv.h>

/* src/: the Raft node's own libraft workarounds, and rockstalkd's shard with
 * its options (-k) */
#include "cluster/rafttune.h"
#include "store/shard.h"

#define READ_CHUNK 65536
#define OVER_SIZE ((off_t)64 << 20) /* -o: bytes of each log file */
#define MAX_LINE 1024
#define MARKS 8
#define SYNCERS_MAX 16

/* Where a client's held output ends once generation gen is synced. */
struct mark {
    uint64_t gen, bgen; /* bgen: -L's body generation, 0: none */
    size_t end;
};

/* -q: a list of jobs, through their prev/next. */
struct jlist {
    struct job *first, *last;
};

/* -q: a job, in one list at a time: the loop's batch (its put not yet
 * handed over), the pending list (handed over, not yet synced), its tube's
 * ready list or its reserver's list. */
enum { J_BATCH, J_PENDING, J_READY, J_RESERVED };
struct job {
    uint64_t id, gen;                /* gen: the generation holding its put */
    struct job *prev, *next, *hnext; /* hnext: the id table's chain */
    struct tube *tube;
    struct cli *owner; /* J_RESERVED */
    int state;
    size_t size, got; /* body bytes; bytes of body and CRLF read so far */
    char body[];      /* size + 2: the body and its CRLF */
};

/* -q: connection c watches tube t; linked into t's waiters while c blocks
 * in reserve. */
struct watch {
    struct tube *t;
    struct cli *c;
    struct watch *prev, *next;
    int linked;
};

/* -q: a tube: its ready jobs in id order (FIFO: rsbench puts one
 * priority) and the watches of the connections blocked on it. Never
 * freed. */
struct tube {
    struct jlist ready;
    struct watch *wfirst, *wlast;
    struct tube *hnext, *wnext; /* the name table's chain; the work list */
    int work;                   /* on the work list */
    uint64_t hash;              /* of the name */
    size_t len;
    char name[];
};

struct cli {
    int fd, epout, dead, held; /* held: on the held list */
    char *rb, *wb;
    size_t rlen, rcap, wlen, woff, wcap, skip;
    size_t rel; /* output up to here may leave */
    struct mark marks[MARKS];
    int nmarks;
    int need_mark;      /* output that waits for a sync is not marked yet */
    int need_bmark;     /* -L: and it answers a large put read since */
    int big, put_reply; /* the body skipped goes to -L's body log; its
                           put's reply is owed once it is read */
    /* -q: the tube used, the watch list, the jobs reserved, the put whose
     * body is being read, and a blocked reserve (waiting; its deadline's
     * place in the timer heap, NO_HEAP: none) */
    struct tube *use;
    struct watch **w;
    int nw, nwcap, waiting;
    struct jlist reserved;
    struct job *job;
    size_t hidx;
    uint64_t deadline; /* CLOCK_MONOTONIC ns */
};

/* The log of the sync ceiling. buf/len/gen/done under mu. */
struct log {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char *buf;
    size_t len, cap;
    uint64_t gen;             /* generation that the next hand-off joins */
    size_t recs;              /* -g: mutations in buf */
    _Atomic uint64_t durable; /* every generation up to this one is synced */
    unsigned char done[SYNCERS_MAX * 2]; /* synced, by gen % size */
    int efd;
};

static int ep;
static int durable_mode;
static struct log lg;

/* -L: the body log, written and synced by the body syncer. buf/len/gen
 * under mu; fd, off and size are the body syncer's. */
#define BODY_STEP ((off_t)64 << 20)  /* -L: the body file grows by this */
static size_t split_min;             /* -L: the least body that goes there */
static int wb_kick;                  /* -K: -L's write-back in pieces */
#define WB_PIECE ((off_t)128 << 10)  /* -K: rockstalkd's RING_WB_PIECE */
#define WB_WINDOW ((off_t)256 << 10) /* -K: and its RING_WB_WINDOW */
static struct blog {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char *buf;
    size_t len, cap;
    uint64_t gen;             /* generation that the next hand-off joins */
    _Atomic uint64_t durable; /* every generation up to this one is synced */
    int fd;
    off_t off, size, wb_done; /* wb_done: -K's write-back waited for */
} bl;
static char *bpend; /* loop: body bytes read since the last hand-off */
static size_t bplen, bpcap;

static char *pend; /* loop: bytes read since the last hand-off */
static size_t plen, pcap;
static size_t precs;      /* loop: mutations (puts, deletes) in pend */
static struct cli **held; /* loop: clients with marks or unmarked output */
static size_t nheld, capheld;

static void
die(const char *what)
{
    fprintf(stderr, "ceiling: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* -u, -d: a generation as O_DIRECT writes it, in whole BLK blocks from a
 * BLK-aligned buffer. */
#define BLK 4096
struct dimage {
    char *buf;      /* BLK-aligned: the tail block's head, a generation */
    size_t cap;     /* buf's bytes */
    char tail[BLK]; /* the bytes of off's block before off */
    off_t off;      /* where the next generation's bytes go */
};

/* One syncer's log file; off: -o's write position in the ring; d: -d's. */
static struct logfile {
    int fd;
    off_t off;
    struct dimage d;
} files[SYNCERS_MAX];
static int overwrite;         /* -o */
static int direct_sync;       /* -d */
static int rwf_dsync;         /* -s */
static int write_only;        /* -w */
static int keep_rocks;        /* -k */
static ShardOpts kopts;       /* -k: rockstalkd's shard options */
static StoreShard kshard;     /* -k: the shard */
static int in_loop;           /* -u */
static int group_fill;        /* -g */
static int raft_id_opt;       /* -R: this node's id; 0: no Raft */
static const char *raft_spec; /* -r: the cluster */
static const char *raft_bind; /* -B: the Raft address to bind, if not -r's */

/* -R: the Raft node that stands in for the syncers (raft thread). */
static struct rnode {
    uv_loop_t loop;
    uv_async_t wake;
    uv_check_t check;
    struct raft_uv_transport transport;
    struct raft_io io;
    struct raft_fsm fsm;
    struct raft raft;
    RaftTune tune;
    rocksdb_writebatch_t *wb; /* -k: the FSM's batch */
    char dir[4096];
    int leader_marked;
} rn;

/* Writes k bytes at p to f at off: pwrite, or (-s) pwritev2 with
 * RWF_DSYNC, which returns once they are on stable storage. */
static ssize_t
log_pwrite(struct logfile *f, const char *p, size_t k)
{
    if (!rwf_dsync) return pwrite(f->fd, p, k, f->off);
    struct iovec iov = {.iov_base = (void *)p, .iov_len = k};
    return pwritev2(f->fd, &iov, 1, f->off, RWF_DSYNC);
}

/* Writes n bytes at p to f: appended, or (-o) in place, wrapping. */
static void
log_write(struct logfile *f, const char *p, size_t n)
{
    while (n) {
        size_t room = overwrite ? (size_t)(OVER_SIZE - f->off) : n;
        size_t k = n < room ? n : room;
        ssize_t w = overwrite ? log_pwrite(f, p, k) : write(f->fd, p, k);
        if (w < 0 && errno != EINTR) die("write log");
        if (w <= 0) continue;
        p += w;
        n -= (size_t)w;
        if (overwrite) f->off = (f->off + w) % OVER_SIZE;
    }
}

/* -o: fills the log file with zeros and syncs it, before any client. */
static void
log_zero_fill(int fd)
{
    static char zeros[1 << 20];
    for (off_t off = 0; off < OVER_SIZE; off += (off_t)sizeof zeros)
        if (pwrite(fd, zeros, sizeof zeros, off) != (ssize_t)sizeof zeros)
            die("zero-fill log");
    if (fsync(fd) < 0) die("fsync");
}

/* -u, -d: lays the n bytes at p out in d->buf as written at d->off, in
 * whole blocks: from the start of the block holding d->off (its earlier
 * bytes rewritten as they were) to the end of the block holding the last
 * byte (zeros after it, as the zero-filled log holds). A generation that
 * would pass the end of the log starts it over at 0. Returns the bytes to
 * write; *at: where; d->off and d->tail move past the generation. */
static size_t
dimage_fill(struct dimage *d, const char *p, size_t n, off_t *at)
{
    if (n > (size_t)OVER_SIZE) errno = EFBIG, die("a generation");
    if (d->off + (off_t)n > OVER_SIZE) d->off = 0;
    size_t head = (size_t)(d->off % BLK), end = head + n;
    size_t total = (end + BLK - 1) / BLK * BLK;
    if (total > d->cap) {
        free(d->buf);
        d->cap = total * 2;
        if (posix_memalign((void **)&d->buf, BLK, d->cap)) die("memalign");
    }
    memcpy(d->buf, d->tail, head);
    memcpy(d->buf + head, p, n);
    memset(d->buf + end, 0, total - end);
    memcpy(d->tail, d->buf + end / BLK * BLK, end % BLK);
    *at = d->off - (off_t)head;
    d->off += (off_t)n;
    return total;
}

/* -d: writes n bytes at p to f's log, opened O_DIRECT | O_DSYNC: one
 * pwrite of whole blocks that returns once they are on stable storage. */
static void
direct_write(struct logfile *f, const char *p, size_t n)
{
    off_t at;
    size_t total = dimage_fill(&f->d, p, n, &at);
    ssize_t w;
    do
        w = pwrite(f->fd, f->d.buf, total, at);
    while (w < 0 && errno == EINTR);
    if (w < 0) die("-d: write log");
    if ((size_t)w != total) errno = EIO, die("-d: short write");
}

static void *
xrealloc(void *p, size_t n)
{
    p = realloc(p, n);
    if (!p) die("realloc");
    return p;
}

static uint64_t
now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* -q: the queue (loop thread only). */
#define NO_HEAP SIZE_MAX
#define TUBE_NAME_MAX 200
#define WAIT_MAX_S 1000000 /* reserve-with-timeout's bound, seconds */
static struct queue {
    int on;               /* -q */
    struct tube **tb;     /* tubes by name: tmask + 1 chains */
    size_t tmask, ntubes; /* ... and how many there are */
    struct job **jb;      /* jobs by id: jmask + 1 chains */
    size_t jmask, njobs;  /* ... and how many there are */
    uint64_t next_id;     /* the next put's id */
    struct jlist batch;   /* -b: puts read since the last hand-off */
    struct jlist pending; /* -b: puts handed over, by generation */
    struct tube *work;    /* tubes with a new ready job and waiters */
    struct cli **heap;    /* blocked reserves with a deadline */
    size_t nheap, cheap;  /* ... in a binary heap by deadline */
} q;

/* Appends n bytes at s to c's output. Without -b it may leave at once.
 * With -b, a reply to a mutation (sync: put, delete) leaves once the
 * generation holding the bytes read before it is synced (handoff()
 * marks it); any other reply as soon as every reply before it may. */
static void
reply(struct cli *c, const char *s, size_t n, int sync)
{
    if (c->wlen + n > c->wcap) {
        c->wcap = (c->wlen + n) * 2;
        c->wb = xrealloc(c->wb, c->wcap);
    }
    memcpy(c->wb + c->wlen, s, n);
    c->wlen += n;
    if (!durable_mode || (!sync && !c->nmarks && !c->need_mark)) {
        c->rel = c->wlen;
        return;
    }
    if (sync) c->need_mark = 1;
    if (!c->held) {
        if (nheld == capheld) {
            capheld = capheld ? capheld * 2 : 64;
            held = xrealloc(held, capheld * sizeof *held);
        }
        held[nheld++] = c;
        c->held = 1;
    }
}

/* Without -q every reply waits for the sync, as every byte read is
 * logged. */
static void
out(struct cli *c, const char *s, size_t n)
{
    reply(c, s, n, 1);
}

/* Writes v in decimal at b; returns the digits written. */
static size_t
utoa(char *b, uint64_t v)
{
    char t[20];
    size_t n = 0;
    do
        t[n++] = (char)('0' + v % 10);
    while (v /= 10);
    for (size_t i = 0; i < n; i++)
        b[i] = t[n - 1 - i];
    return n;
}

/* Replies word, then v in decimal, then CRLF. */
static void
reply_num(struct cli *c, const char *word, uint64_t v, int sync)
{
    char b[64];
    size_t n = strlen(word);
    memcpy(b, word, n);
    n += utoa(b + n, v);
    memcpy(b + n, "\r\n", 2);
    reply(c, b, n + 2, sync);
}

/* Appends n bytes at p to the buffer *b (*len bytes of *cap). */
static void
buf_add(char **b, size_t *len, size_t *cap, const char *p, size_t n)
{
    if (*len + n > *cap) {
        *cap = (*len + n) * 2;
        *b = xrealloc(*b, *cap);
    }
    memcpy(*b + *len, p, n);
    *len += n;
}

/* With -b: n bytes at p join the next hand-off. */
static void
log_cmd(const char *p, size_t n)
{
    if (durable_mode && n) buf_add(&pend, &plen, &pcap, p, n);
}

/* -q: unlinks j from list l. */
static void
jl_unlink(struct jlist *l, struct job *j)
{
    *(j->prev ? &j->prev->next : &l->first) = j->next;
    *(j->next ? &j->next->prev : &l->last) = j->prev;
    j->prev = j->next = NULL;
}

/* -q: links j into l after the last job of a smaller id (for a new put,
 * whose id is the largest, at the end: O(1)). */
static void
jl_insert(struct jlist *l, struct job *j)
{
    struct job *a = l->last;
    while (a && a->id > j->id)
        a = a->prev;
    j->prev = a;
    j->next = a ? a->next : l->first;
    *(j->next ? &j->next->prev : &l->last) = j;
    *(a ? &a->next : &l->first) = j;
}

/* -q: the list j is on, by its state. */
static struct jlist *
jlist_of(struct job *j)
{
    switch (j->state) {
    case J_BATCH:
        return &q.batch;
    case J_PENDING:
        return &q.pending;
    case J_READY:
        return &j->tube->ready;
    default:
        return &j->owner->reserved;
    }
}

/* -q: where job id is, or would go, in its chain of the id table. */
static struct job **
job_slot(uint64_t id)
{
    struct job **p = &q.jb[id & q.jmask];
    while (*p && (*p)->id != id)
        p = &(*p)->hnext;
    return p;
}

/* -q: adds j to the id table, doubling it when it holds a job per chain. */
static void
job_index(struct job *j)
{
    if (q.njobs > q.jmask) {
        size_t n = (q.jmask + 1) * 2;
        struct job **nb = calloc(n, sizeof *nb), *x, *nx;
        if (!nb) die("calloc");
        for (size_t i = 0; i <= q.jmask; i++)
            for (x = q.jb[i]; x; x = nx) {
                nx = x->hnext;
                x->hnext = nb[x->id & (n - 1)];
                nb[x->id & (n - 1)] = x;
            }
        free(q.jb);
        q.jb = nb;
        q.jmask = n - 1;
    }
    struct job **b = &q.jb[j->id & q.jmask];
    j->hnext = *b;
    *b = j;
    q.njobs++;
}

/* -q: FNV-1a of a tube name. */
static uint64_t
name_hash(const char *s, size_t n)
{
    uint64_t h = 14695981039346656037u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211u;
    return h;
}

/* -q: the tube named s[0..n), made if missing and create, else NULL. */
static struct tube *
tube_find(const char *s, size_t n, int create)
{
    uint64_t h = name_hash(s, n);
    struct tube *t;
    for (t = q.tb[h & q.tmask]; t; t = t->hnext)
        if (t->len == n && memcmp(t->name, s, n) == 0) return t;
    if (!create) return NULL;
    if (q.ntubes > q.tmask) { /* a tube per chain: double the table */
        size_t m = (q.tmask + 1) * 2;
        struct tube **nb = calloc(m, sizeof *nb), *x, *nx;
        if (!nb) die("calloc");
        for (size_t i = 0; i <= q.tmask; i++)
            for (x = q.tb[i]; x; x = nx) {
                nx = x->hnext;
                x->hnext = nb[x->hash & (m - 1)];
                nb[x->hash & (m - 1)] = x;
            }
        free(q.tb);
        q.tb = nb;
        q.tmask = m - 1;
    }
    t = calloc(1, sizeof *t + n + 1);
    if (!t) die("calloc");
    memcpy(t->name, s, n);
    t->len = n;
    t->hash = h;
    t->hnext = q.tb[h & q.tmask];
    q.tb[h & q.tmask] = t;
    q.ntubes++;
    return t;
}

/* -q: heap entry i becomes c. */
static void
heap_set(size_t i, struct cli *c)
{
    q.heap[i] = c;
    c->hidx = i;
}

static void
heap_up(size_t i)
{
    struct cli *c = q.heap[i];
    while (i && q.heap[(i - 1) / 2]->deadline > c->deadline) {
        heap_set(i, q.heap[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    heap_set(i, c);
}

static void
heap_down(size_t i)
{
    struct cli *c = q.heap[i];
    for (;;) {
        size_t m = 2 * i + 1;
        if (m >= q.nheap) break;
        if (m + 1 < q.nheap && q.heap[m + 1]->deadline < q.heap[m]->deadline)
            m++;
        if (q.heap[m]->deadline >= c->deadline) break;
        heap_set(i, q.heap[m]);
        i = m;
    }
    heap_set(i, c);
}

static void
heap_remove(struct cli *c)
{
    size_t i = c->hidx;
    struct cli *last = q.heap[--q.nheap];
    c->hidx = NO_HEAP;
    if (i == q.nheap) return;
    heap_set(i, last);
    heap_up(i);
    heap_down(last->hidx);
}

/* -q: job j becomes ready in its tube; a reserve blocked on the tube gets
 * it at the end of the loop's batch (q_serve). */
static void
q_ready(struct job *j)
{
    struct tube *t = j->tube;
    j->state = J_READY;
    j->owner = NULL;
    jl_insert(&t->ready, j);
    if (t->wfirst && !t->work) {
        t->work = 1;
        t->wnext = q.work;
        q.work = t;
    }
}

/* -q: c's reserve blocks on every tube it watches (secs > 0: until then,
 * < 0: for ever). */
static void
q_block(struct cli *c, long secs)
{
    for (int i = 0; i < c->nw; i++) {
        struct watch *w = c->w[i];
        struct tube *t = w->t;
        w->prev = t->wlast;
        w->next = NULL;
        *(t->wlast ? &t->wlast->next : &t->wfirst) = w;
        t->wlast = w;
        w->linked = 1;
    }
    c->waiting = 1;
    if (secs > 0) {
        c->deadline = now_ns() + (uint64_t)secs * 1000000000u;
        if (q.nheap == q.cheap) {
            q.cheap = q.cheap ? q.cheap * 2 : 64;
            q.heap = xrealloc(q.heap, q.cheap * sizeof *q.heap);
        }
        heap_set(q.nheap, c);
        heap_up(q.nheap++);
    }
}

/* -q: c's reserve no longer blocks. */
static void
q_unwait(struct cli *c)
{
    for (int i = 0; i < c->nw; i++) {
        struct watch *w = c->w[i];
        struct tube *t = w->t;
        if (!w->linked) continue;
        *(w->prev ? &w->prev->next : &t->wfirst) = w->next;
        *(w->next ? &w->next->prev : &t->wlast) = w->prev;
        w->prev = w->next = NULL;
        w->linked = 0;
    }
    if (c->hidx != NO_HEAP) heap_remove(c);
    c->waiting = 0;
}

/* -q: the oldest ready job of the tubes c watches (one priority: the
 * smallest id), or NULL; a look at the first job of each. */
static struct job *
q_best(const struct cli *c)
{
    struct job *best = NULL;
    for (int i = 0; i < c->nw; i++) {
        struct job *j = c->w[i]->t->ready.first;
        if (j && (!best || j->id < best->id)) best = j;
    }
    return best;
}

/* -q: c reserves ready job j. */
static void
q_give(struct cli *c, struct job *j)
{
    char b[64];
    size_t n = sizeof "RESERVED " - 1;
    jl_unlink(&j->tube->ready, j);
    j->state = J_RESERVED;
    j->owner = c;
    jl_insert(&c->reserved, j);
    memcpy(b, "RESERVED ", n);
    n += utoa(b + n, j->id);
    b[n++] = ' ';
    n += utoa(b + n, j->size);
    memcpy(b + n, "\r\n", 2);
    reply(c, b, n + 2, 0);
    reply(c, j->body, j->size + 2, 0);
}

/* -q: a closed connection's blocked reserve ends, the jobs it reserved
 * are ready again, a put it had not finished is forgotten. */
static void
q_forget(struct cli *c)
{
    if (c->waiting) q_unwait(c);
    while (c->reserved.first) {
        struct job *j = c->reserved.first;
        jl_unlink(&c->reserved, j);
        q_ready(j);
    }
    free(c->job);
    c->job = NULL;
}

/* -q: c watches t (if it does not yet). */
static void
watch_add(struct cli *c, struct tube *t)
{
    for (int i = 0; i < c->nw; i++)
        if (c->w[i]->t == t) return;
    if (c->nw == c->nwcap) {
        c->nwcap = c->nwcap ? c->nwcap * 2 : 4;
        c->w = xrealloc(c->w, (size_t)c->nwcap * sizeof *c->w);
    }
    struct watch *w = calloc(1, sizeof *w);
    if (!w) die("calloc");
    w->t = t;
    w->c = c;
    c->w[c->nw++] = w;
}

static void
cli_free(struct cli *c)
{
    for (int i = 0; i < c->nw; i++)
        free(c->w[i]);
    free(c->w);
    free(c->rb);
    free(c->wb);
    free(c);
}

/* A client on the held list is freed when the list lets it go. */
static void
drop(struct cli *c)
{
    close(c->fd);
    c->dead = 1;
    if (q.on) q_forget(c);
    if (!c->held) cli_free(c);
}

/* The body size at the end of a put line, or -1. */
static long
put_bytes(const char *line, size_t n)
{
    size_t i = n;
    long v = 0, mul = 1;
    while (i > 4 && line[i - 1] >= '0' && line[i - 1] <= '9') {
        v += (line[i - 1] - '0') * mul;
        mul *= 10;
        i--;
    }
    return i < n && line[i - 1] == ' ' && mul <= 100000000 ? v : -1;
}

/* The decimal number s[0..n) (1-19 digits) in *v; -1 if it is not one. */
static int
parse_u64(const char *s, size_t n, uint64_t *v)
{
    if (n < 1 || n > 19) return -1;
    *v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        *v = *v * 10 + (uint64_t)(s[i] - '0');
    }
    return 0;
}

/* -q: a put's body (and CRLF) is read next: bytes + 2 bytes. */
static void
q_put_start(struct cli *c, size_t bytes)
{
    struct job *j = malloc(sizeof *j + bytes + 2);
    if (!j) die("malloc");
    memset(j, 0, sizeof *j);
    j->tube = c->use;
    j->size = bytes;
    c->job = j;
    c->skip = bytes + 2;
}

/* -q: the put is read: it gets its id and its INSERTED; it is ready at
 * once without -b, else once its generation is synced (release()). */
static void
q_put_done(struct cli *c)
{
    struct job *j = c->job;
    c->job = NULL;
    memcpy(j->body + j->size, "\r\n", 2); /* the CRLF is not checked */
    j->id = q.next_id++;
    job_index(j);
    reply_num(c, "INSERTED ", j->id, 1);
    if (!durable_mode) {
        q_ready(j);
        return;
    }
    j->state = J_BATCH;
    jl_insert(&q.batch, j);
}

/* -q: k more bytes of the put's body (and CRLF), logged with -b. */
static void
q_body(struct cli *c, const char *p, size_t k)
{
    struct job *j = c->job;
    memcpy(j->body + j->got, p, k);
    j->got += k;
    log_cmd(p, k);
    if (j->got == j->size + 2) q_put_done(c);
}

/* -q: delete: a job in any state but reserved by another connection. */
static void
q_delete(struct cli *c, uint64_t id)
{
    static const char del[] = "DELETED\r\n", nf[] = "NOT_FOUND\r\n";
    struct job **p = job_slot(id), *j = *p;
    if (!j || (j->state == J_RESERVED && j->owner != c)) {
        reply(c, nf, sizeof nf - 1, 1);
        return;
    }
    *p = j->hnext;
    q.njobs--;
    jl_unlink(jlist_of(j), j);
    free(j);
    reply(c, del, sizeof del - 1, 1);
}

/* -q: reserve (secs < 0) or reserve-with-timeout secs. */
static void
q_reserve(struct cli *c, long secs)
{
    static const char to[] = "TIMED_OUT\r\n";
    struct job *j = q_best(c);
    if (j)
        q_give(c, j);
    else if (secs == 0)
        reply(c, to, sizeof to - 1, 0);
    else
        q_block(c, secs);
}

/* -q: use, watch, ignore: the tube named s[0..n). */
static void
q_tube_cmd(struct cli *c, char cmd, const char *s, size_t n)
{
    static const char bad[] = "BAD_FORMAT\r\n", ni[] = "NOT_IGNORED\r\n";
    if (n < 1 || n > TUBE_NAME_MAX || memchr(s, ' ', n)) {
        reply(c, bad, sizeof bad - 1, 0);
    } else if (cmd == 'u') {
        c->use = tube_find(s, n, 1);
        reply(c, "USING ", 6, 0);
        reply(c, s, n, 0);
        reply(c, "\r\n", 2, 0);
    } else if (cmd == 'w') {
        watch_add(c, tube_find(s, n, 1));
        reply_num(c, "WATCHING ", (uint64_t)c->nw, 0);
    } else {
        struct tube *t = tube_find(s, n, 0);
        int i = 0;
        while (t && i < c->nw && c->w[i]->t != t)
            i++;
        if (t && i < c->nw && c->nw == 1) {
            reply(c, ni, sizeof ni - 1, 0);
            return;
        }
        if (t && i < c->nw) {
            free(c->w[i]);
            c->w[i] = c->w[--c->nw];
        }
        reply_num(c, "WATCHING ", (uint64_t)c->nw, 0);
    }
}

/* -q: one command of the cycle rows: put, delete, reserve(-with-timeout),
 * use, watch, ignore; anything else gets UNKNOWN_COMMAND. */
static void
q_line(struct cli *c, const char *line, size_t n)
{
    static const char unk[] = "UNKNOWN_COMMAND\r\n";
    static const char rwt[] = "reserve-with-timeout ";
    const size_t nrwt = sizeof rwt - 1;
    long bytes;
    uint64_t v;
    if (n > 4 && memcmp(line, "put ", 4) == 0 &&
        (bytes = put_bytes(line, n)) >= 0) {
        log_cmd(line, n + 2);
        precs++;
        q_put_start(c, (size_t)bytes);
    } else if (n > 7 && memcmp(line, "delete ", 7) == 0 &&
               parse_u64(line + 7, n - 7, &v) == 0) {
        log_cmd(line, n + 2);
        precs++;
        q_delete(c, v);
    } else if (n == 7 && memcmp(line, "reserve", 7) == 0) {
        q_reserve(c, -1);
    } else if (n > nrwt && memcmp(line, rwt, nrwt) == 0 &&
               parse_u64(line + nrwt, n - nrwt, &v) == 0) {
        q_reserve(c, v > WAIT_MAX_S ? WAIT_MAX_S : (long)v);
    } else if (n > 4 && memcmp(line, "use ", 4) == 0) {
        q_tube_cmd(c, 'u', line + 4, n - 4);
    } else if (n > 6 && memcmp(line, "watch ", 6) == 0) {
        q_tube_cmd(c, 'w', line + 6, n - 6);
    } else if (n > 7 && memcmp(line, "ignore ", 7) == 0) {
        q_tube_cmd(c, 'i', line + 7, n - 7);
    } else {
        reply(c, unk, sizeof unk - 1, 0);
    }
}

static void
on_line(struct cli *c, const char *line, size_t n)
{
    static const char unk[] = "UNKNOWN_COMMAND\r\n";
    if (q.on) {
        q_line(c, line, n);
    } else if (n > 4 && memcmp(line, "put ", 4) == 0 &&
               put_bytes(line, n) >= 0) {
        c->skip = (size_t)put_bytes(line, n) + 2;
        c->big = split_min && c->skip - 2 >= split_min;
        c->put_reply = 1; /* once the body is read (on_input) */
        precs++;
    } else if (n > 4 && memcmp(line, "use ", 4) == 0) {
        out(c, "USING ", 6);
        out(c, line + 4, n - 4);
        out(c, "\r\n", 2);
    } else {
        out(c, unk, sizeof unk - 1);
    }
}

/* Answers every complete command, up to a reserve that blocks (-q);
 * returns -1 to drop the client. A reply that needs no sync waits, with
 * -b, for one that does and that answers a later command of the same
 * input (a use before a put): they leave together, in one send. */
static int
on_input(struct cli *c)
{
    static const char ins[] = "INSERTED 1\r\n";
    size_t off = 0, rel = c->rel, lstart = 0; /* logged up to lstart */
    while (off < c->rlen && !c->waiting) {
        if (c->skip) {
            size_t k = c->rlen - off < c->skip ? c->rlen - off : c->skip;
            if (c->job) q_body(c, c->rb + off, k);
            if (c->big) { /* -L: the log skips it, the body log takes it */
                log_cmd(c->rb + lstart, off - lstart);
                buf_add(&bpend, &bplen, &bpcap, c->rb + off, k);
                lstart = off + k;
            }
            off += k;
            c->skip -= k;
            if (!c->skip && c->put_reply) {
                c->need_bmark |= c->big;
                c->put_reply = c->big = 0;
                out(c, ins, sizeof ins - 1);
            }
            continue;
        }
        char *b = c->rb + off, *e = memmem(b, c->rlen - off, "\r\n", 2);
        if (!e && c->rlen - off > MAX_LINE) return -1;
        if (!e) break;
        on_line(c, b, (size_t)(e - b));
        off += (size_t)(e - b) + 2;
    }
    if (!q.on) log_cmd(c->rb + lstart, off - lstart); /* as it came */
    if (c->need_mark) c->rel = rel; /* nothing left since (no flush) */
    memmove(c->rb, c->rb + off, c->rlen - off);
    c->rlen -= off;
    return 0;
}

static int
flush(struct cli *c)
{
    while (c->woff < c->rel) {
        ssize_t n =
            send(c->fd, c->wb + c->woff, c->rel - c->woff, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (n < 0) return -1;
        c->woff += (size_t)n;
    }
    if (c->woff == c->wlen && !c->nmarks) c->woff = c->wlen = c->rel = 0;
    int want = c->rel > c->woff;
    if (want != c->epout) {
        struct epoll_event ev = {.events = EPOLLIN | (want ? EPOLLOUT : 0),
                                 .data.ptr = c};
        epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
        c->epout = want;
    }
    return 0;
}

/* -q: after a blocked reserve got its reply, c's further commands. */
static void
q_resume(struct cli *c)
{
    if ((c->rlen && on_input(c) < 0) || flush(c) < 0) drop(c);
}

/* -q: at the end of each batch of events, before the hand-off: every
 * blocked reserve past its deadline times out, and each tube given a
 * ready job hands its ready jobs to the reserves blocked on it, first
 * come first served (each takes the oldest job of all it watches). */
static void
q_serve(void)
{
    static const char to[] = "TIMED_OUT\r\n";
    uint64_t now = q.nheap ? now_ns() : 0;
    while (q.nheap && q.heap[0]->deadline <= now) {
        struct cli *c = q.heap[0];
        q_unwait(c);
        reply(c, to, sizeof to - 1, 0);
        q_resume(c);
    }
    while (q.work) {
        struct tube *t = q.work;
        q.work = t->wnext;
        t->work = 0;
        while (t->ready.first && t->wfirst) {
            struct cli *c = t->wfirst->c;
            q_unwait(c);
            q_give(c, q_best(c));
            q_resume(c);
        }
    }
}

/* -q: empty tables, ids from 1. */
static void
q_start(void)
{
    q.tmask = q.jmask = 1023;
    q.tb = calloc(q.tmask + 1, sizeof *q.tb);
    q.jb = calloc(q.jmask + 1, sizeof *q.jb);
    if (!q.tb || !q.jb) die("calloc");
    q.next_id = 1;
}

/* -q: how long the loop may sleep: until the first deadline (ms). */
static int
q_sleep_ms(void)
{
    if (!q.nheap) return -1;
    uint64_t now = now_ns(), d = q.heap[0]->deadline;
    return d <= now ? 0 : (int)((d - now + 999999) / 1000000);
}

/* Marks generation g synced and publishes how far all are (mu held). */
static void
gen_done(uint64_t g)
{
    uint64_t d = atomic_load(&lg.durable);
    lg.done[g % sizeof lg.done] = 1;
    while (lg.done[(d + 1) % sizeof lg.done]) {
        lg.done[(d + 1) % sizeof lg.done] = 0;
        d++;
    }
    atomic_store(&lg.durable, d);
}

/* -k: the job's 8-byte big-endian key, as rockstalkd's (store/enc.c). */
static void
key_put(char *k, uint64_t id)
{
    for (int i = 0; i < 8; i++)
        k[i] = (char)(id >> (56 - 8 * i));
}

/* -k: puts every job of the client bytes p[0..n) (complete commands, as
 * the loop handed them over) into the shard: meta and body under the next
 * id, and generation g's mark, in one batch written without sync. */
static void
keep_generation(rocksdb_writebatch_t *wb, const char *p, size_t n, uint64_t g)
{
    static uint64_t next_id = 1;
    static const char meta[63];
    char key[8], gv[8];
    char *e = NULL;

    for (size_t off = 0; off < n;) {
        const char *l = p + off, *eol = memmem(l, n - off, "\r\n", 2);
        if (!eol) die("-k: a partial command");
        long bytes =
            memcmp(l, "put ", 4) == 0 ? put_bytes(l, (size_t)(eol - l)) : -1;
        off += (size_t)(eol - l) + 2;
        if (bytes < 0) continue;
        key_put(key, next_id++);
        if (bytes <= STORE_INLINE_MAX) { /* one entry: meta, then body */
            const char *kl[1] = {key}, *vl[2] = {meta, p + off};
            size_t ks[1] = {8}, vs[2] = {sizeof meta, (size_t)bytes};
            rocksdb_writebatch_putv_cf(wb, kshard.cf[SHARD_CF_META], 1, kl, ks,
                                       2, vl, vs);
        } else {
            rocksdb_writebatch_put_cf(wb, kshard.cf[SHARD_CF_META], key, 8,
                                      meta, sizeof meta);
            rocksdb_writebatch_put_cf(wb, kshard.cf[SHARD_CF_BODY], key, 8,
                                      p + off, (size_t)bytes);
        }
        off += (size_t)bytes + 2;
    }
    memcpy(gv, &g, 8);
    rocksdb_writebatch_put_cf(wb, kshard.cf[SHARD_CF_DEFAULT], "jgroup", 6, gv,
                              8);
    /* the Raft ceiling's (-R -k) as rockstalkd's cluster mode: no WAL */
    rocksdb_write(kshard.db, kopts.raft_log ? kopts.wo_nowal : kopts.wo_nosync,
                  wb, &e);
    if (e) {
        fprintf(stderr, "ceiling: rocksdb_write: %s\n", e);
        exit(1);
    }
    rocksdb_writebatch_clear(wb);
}

/* -g (mu held): waits until as many mutations are handed over as the
 * previous generation carried (recs), but no longer than half the
 * duration of its write and sync (ns) and never more than GROUP_WAIT_NS:
 * rockstalkd's group fill under -f 0 (PROTOCOL.md 11.2), so that a crowd
 * fills each generation and a lone client does not wait. */
#define GROUP_WAIT_NS 500000u
static void
group_wait(size_t recs, uint64_t ns)
{
    uint64_t wait = ns / 2 < GROUP_WAIT_NS ? ns / 2 : GROUP_WAIT_NS;
    uint64_t end = now_ns() + wait;
    struct timespec ts = {.tv_sec = (time_t)(end / 1000000000u),
                          .tv_nsec = (long)(end % 1000000000u)};
    while (lg.recs < recs && now_ns() < end)
        pthread_cond_timedwait(&lg.cv, &lg.mu, &ts);
}

/* Sync ceiling: writes and fdatasyncs each generation it takes to its own
 * log file (arg: the descriptor), back to back (-g: each filled first). */
static void *
syncer_main(void *arg)
{
    char *mine = NULL;
    size_t mcap = 0;
    struct logfile *f = arg;
    rocksdb_writebatch_t *wb = keep_rocks ? rocksdb_writebatch_create() : NULL;
    size_t last_recs = 0;   /* -g: mutations of the previous generation */
    uint64_t last_sync = 0; /* -g: how long its write and sync took, ns */
    for (;;) {
        pthread_mutex_lock(&lg.mu);
        while (!lg.len)
            pthread_cond_wait(&lg.cv, &lg.mu);
        if (group_fill) group_wait(last_recs, last_sync);
        char *b = lg.buf;
        size_t n = lg.len, bcap = lg.cap;
        uint64_t g = lg.gen++, t0 = group_fill ? now_ns() : 0;
        last_recs = lg.recs;
        lg.buf = mine;
        lg.cap = mcap;
        lg.len = 0;
        lg.recs = 0;
        pthread_mutex_unlock(&lg.mu);
        mine = b;
        mcap = bcap;
        if (direct_sync)
            direct_write(f, mine, n);
        else
            log_write(f, mine, n);
        if (!write_only && !direct_sync && !rwf_dsync && fdatasync(f->fd) < 0)
            die("fdatasync");
        if (group_fill) last_sync = now_ns() - t0;
        pthread_mutex_lock(&lg.mu);
        gen_done(g);
        pthread_mutex_unlock(&lg.mu);
        uint64_t one = 1;
        if (write(lg.efd, &one, sizeof one) < 0) die("eventfd");
        if (keep_rocks) keep_generation(wb, mine, n, g);
    }
    return NULL;
}

/* -K: starts the device's write-back of the k bytes just written at off,
 * and waits for what lies more than WB_WINDOW behind their end, as
 * rockstalkd's body ring does (src/store/bodyring.c), so that little of the
 * body file is queued at the device ahead of the log's sync. */
static void
body_kick(off_t off, off_t k)
{
    (void)sync_file_range(bl.fd, off, k, SYNC_FILE_RANGE_WRITE);
    if (off + k - bl.wb_done <= WB_WINDOW) return;
    off_t upto = off + k - WB_WINDOW;
    (void)sync_file_range(bl.fd, bl.wb_done, upto - bl.wb_done,
                          SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                              SYNC_FILE_RANGE_WAIT_AFTER);
    bl.wb_done = upto;
}

/* -L: writes n body bytes at p at the end of the body file, making it
 * BODY_STEP longer first where they would pass its end. */
static void
body_write(const char *p, size_t n)
{
    while (bl.off + (off_t)n > bl.size) {
        bl.size += BODY_STEP;
        if (ftruncate(bl.fd, bl.size) < 0) die("ftruncate body file");
    }
    while (n) {
        size_t k = wb_kick && n > (size_t)WB_PIECE ? (size_t)WB_PIECE : n;
        ssize_t w = pwrite(bl.fd, p, k, bl.off);
        if (w < 0 && errno != EINTR) die("write body file");
        if (w <= 0) continue;
        if (wb_kick) body_kick(bl.off, w);
        p += w;
        n -= (size_t)w;
        bl.off += w;
    }
}

/* -L: the body syncer: writes and fdatasyncs (not with -w) each generation
 * of bodies it takes, back to back, and wakes the loop. */
static void *
body_syncer_main(void *arg)
{
    char *mine = NULL;
    size_t mcap = 0;
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&bl.mu);
        while (!bl.len)
            pthread_cond_wait(&bl.cv, &bl.mu);
        char *b = bl.buf;
        size_t n = bl.len, bcap = bl.cap;
        uint64_t g = bl.gen++;
        bl.buf = mine;
        bl.cap = mcap;
        bl.len = 0;
        pthread_mutex_unlock(&bl.mu);
        mine = b;
        mcap = bcap;
        body_write(mine, n);
        if (!write_only && fdatasync(bl.fd) < 0) die("fdatasync body file");
        atomic_store(&bl.durable, g); /* one syncer: in order */
        uint64_t one = 1;
        if (write(lg.efd, &one, sizeof one) < 0) die("eventfd");
    }
    return NULL;
}

/* -L: the body file, empty, and its syncer. */
static void
body_start(const char *dir)
{
    char path[4096];
    pthread_t th;
    snprintf(path, sizeof path, "%s/ceiling.body", dir);
    bl.fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (bl.fd < 0) die(path);
    pthread_mutex_init(&bl.mu, NULL);
    pthread_cond_init(&bl.cv, NULL);
    bl.gen = 1;
    if (pthread_create(&th, NULL, body_syncer_main, NULL)) die("thread");
}

/* -u: the loop's ring, and the generation it has in flight. */
static struct uring {
    struct io_uring ring;
    int fd;          /* the log, O_DIRECT | O_DSYNC */
    struct dimage d; /* the generation in flight, laid out in blocks */
    size_t want;     /* the bytes the write in flight covers */
    uint64_t gen;    /* the generation in flight; 0: none */
} ur;

/* -u: writes the bytes handed over since the last write as the next
 * generation, unless a write is in flight; a generation that would pass
 * the end of the log starts it over at 0. */
static void
uring_submit(void)
{
    if (ur.gen || !lg.len) return;
    off_t at;
    size_t total = dimage_fill(&ur.d, lg.buf, lg.len, &at);
    struct io_uring_sqe *sqe = io_uring_get_sqe(&ur.ring);
    if (!sqe) die("io_uring_get_sqe");
    io_uring_prep_write(sqe, ur.fd, ur.d.buf, (unsigned)total, (uint64_t)at);
    int rv = io_uring_submit(&ur.ring);
    if (rv < 0) errno = -rv, die("io_uring_submit");
    ur.want = total;
    ur.gen = lg.gen++;
    lg.len = 0;
}

/* -u: a completed write makes its generation durable; the next one goes. */
static void
uring_reap(void)
{
    struct io_uring_cqe *cqe;
    while (io_uring_peek_cqe(&ur.ring, &cqe) == 0) {
        int res = cqe->res;
        io_uring_cqe_seen(&ur.ring, cqe);
        if (res < 0) errno = -res, die("io_uring write");
        if ((size_t)res != ur.want) errno = EIO, die("io_uring short write");
        gen_done(ur.gen);
        ur.gen = 0;
    }
    uring_submit();
}

/* -u: the log zero-filled as -o's, then opened for direct, synchronous
 * writes; the ring wakes the loop through lg.efd. */
static void
uring_start(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) die(path);
    log_zero_fill(fd);
    close(fd);
    ur.fd = open(path, O_WRONLY | O_DIRECT | O_DSYNC | O_CLOEXEC);
    if (ur.fd < 0) die(path);
    int rv = io_uring_queue_init(8, &ur.ring, 0);
    if (rv < 0) errno = -rv, die("io_uring_queue_init");
    rv = io_uring_register_eventfd(&ur.ring, lg.efd);
    if (rv < 0) errno = -rv, die("io_uring_register_eventfd");
}

/* Every held client's output not yet marked waits for generation g of the
 * log and (-L: if it answers a large put) bg of the body log; a full mark
 * ring moves its last mark on: that reply waits a little longer, never
 * less. */
static void
mark_held(uint64_t g, uint64_t bg)
{
    for (size_t i = 0; i < nheld; i++) {
        struct cli *c = held[i];
        if (!c->need_mark) continue;
        uint64_t b = c->need_bmark ? bg : 0;
        if (c->nmarks == MARKS) {
            c->nmarks--;
            if (c->marks[c->nmarks].bgen > b) b = c->marks[c->nmarks].bgen;
        }
        c->marks[c->nmarks++] = (struct mark){g, b, c->wlen};
        c->need_mark = c->need_bmark = 0;
    }
}

/* -L: the body bytes read join the body log's next generation; returns
 * the generation that holds every body read so far (0: none yet). */
static uint64_t
body_handoff(void)
{
    pthread_mutex_lock(&bl.mu);
    if (bplen) {
        buf_add(&bl.buf, &bl.len, &bl.cap, bpend, bplen);
        bplen = 0;
        pthread_cond_signal(&bl.cv);
    }
    uint64_t g = bl.len ? bl.gen : bl.gen - 1;
    pthread_mutex_unlock(&bl.mu);
    return g;
}

/* Once per epoll batch: the bytes read join the next generation, and every
 * held client's new output waits for it (a full mark ring moves its last
 * mark on: that reply waits a little longer, never less); so do the puts
 * read (-q: they become ready once it is synced). */
static void
handoff(void)
{
    uint64_t bg = split_min ? body_handoff() : 0;
    if (!durable_mode || (!plen && !bg)) return;
    if (!plen) { /* -L: bodies only; their lines went before */
        pthread_mutex_lock(&lg.mu);
        uint64_t g = lg.len ? lg.gen : lg.gen - 1;
        pthread_mutex_unlock(&lg.mu);
        mark_held(g, bg);
        return;
    }
    pthread_mutex_lock(&lg.mu);
    if (lg.len + plen > lg.cap) {
        lg.cap = (lg.len + plen) * 2;
        lg.buf = realloc(lg.buf, lg.cap);
        if (!lg.buf) die("realloc");
    }
    memcpy(lg.buf + lg.len, pend, plen);
    lg.len += plen;
    lg.recs += precs;
    precs = 0;
    uint64_t g = lg.gen;
    pthread_cond_signal(&lg.cv);
    pthread_mutex_unlock(&lg.mu);
    if (raft_id_opt) uv_async_send(&rn.wake);
    if (in_loop) uring_submit();
    plen = 0;
    mark_held(g, bg);
    /* -q: the puts read join generation g */
    for (struct job *j = q.batch.first; j; j = j->next) {
        j->gen = g;
        j->state = J_PENDING;
    }
    if (!q.batch.first) return;
    q.batch.first->prev = q.pending.last;
    *(q.pending.last ? &q.pending.last->next : &q.pending.first) =
        q.batch.first;
    q.pending.last = q.batch.last;
    q.batch.first = q.batch.last = NULL;
}

/* The syncer finished a generation: release what it covers, replies and
 * (-q) puts. */
static void
release(void)
{
    uint64_t v, d;
    size_t k = 0;
    /* Consume the wake-up before loading durable: a sync that ends after
     * the load wakes the loop again. */
    if (read(lg.efd, &v, sizeof v) < 0 && errno != EAGAIN) die("eventfd");
    if (in_loop) uring_reap();
    d = atomic_load(&lg.durable);
    uint64_t bd = atomic_load(&bl.durable);
    for (size_t i = 0; i < nheld; i++) {
        struct cli *c = held[i];
        int m = 0, was_dead = c->dead;
        while (m < c->nmarks && c->marks[m].gen <= d && c->marks[m].bgen <= bd)
            c->rel = c->marks[m++].end;
        c->nmarks -= m;
        memmove(c->marks, c->marks + m, (size_t)c->nmarks * sizeof *c->marks);
        /* -q: replies after the last mark that need no sync leave too */
        if (!c->nmarks && !c->need_mark) c->rel = c->wlen;
        if (!c->dead && m && flush(c) < 0)
            drop(c); /* held: freed next time, as this batch may name it */
        if (was_dead) {
            cli_free(c);
        } else if (!c->dead && !c->nmarks && c->rel == c->wlen) {
            c->held = 0;
        } else {
            held[k++] = c;
        }
    }
    nheld = k;
    while (q.pending.first && q.pending.first->gen <= d) {
        struct job *j = q.pending.first;
        jl_unlink(&q.pending, j);
        q_ready(j);
    }
}

static void
on_readable(struct cli *c)
{
    if (c->rcap - c->rlen < READ_CHUNK) {
        c->rcap = c->rlen + 2 * READ_CHUNK;
        c->rb = realloc(c->rb, c->rcap);
        if (!c->rb) die("realloc");
    }
    ssize_t n = recv(c->fd, c->rb + c->rlen, READ_CHUNK, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n <= 0) {
        drop(c);
        return;
    }
    c->rlen += (size_t)n;
    if (on_input(c) < 0 || flush(c) < 0) drop(c);
}

static void
on_accept(int lfd)
{
    int one = 1, fd;
    while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
        struct cli *c = calloc(1, sizeof *c);
        if (!c) die("calloc");
        c->fd = fd;
        c->hidx = NO_HEAP;
        if (q.on) { /* a new connection uses and watches default */
            c->use = tube_find("default", 7, 1);
            watch_add(c, c->use);
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) die("epoll_ctl");
    }
}

static int
listen_on(const char *addr, const char *port)
{
    struct addrinfo hints, *ai;
    int one = 1;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    int rc = getaddrinfo(addr, port, &hints, &ai);
    if (rc != 0) {
        fprintf(stderr, "ceiling: %s: %s\n", addr, gai_strerror(rc));
        exit(1);
    }
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK, 0);
    if (fd < 0) die("socket");
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 1024) < 0)
        die("bind/listen");
    freeaddrinfo(ai);
    return fd;
}

/* One proposed generation. */
struct rapply {
    struct raft_apply req;
    uint64_t gen;
};

static void
raft_die(const char *what, int rv)
{
    fprintf(stderr, "ceiling: %s: %s\n", what, raft_strerror(rv));
    exit(1);
}

static int
fsm_apply(struct raft_fsm *fsm, const struct raft_buffer *buf, void **result)
{
    (void)fsm;
    *result = NULL;
    if (keep_rocks) { /* -R -k: every node keeps the entry's jobs */
        size_t n = buf->len;
        const char *p = buf->base;
        while (n && !p[n - 1]) /* on_wake's padding (commands end "\n") */
            n--;
        keep_generation(rn.wb, p, n, raft_last_applied(&rn.raft) + 1);
    }
    rafttune_applied(&rn.tune, buf->len);
    return 0;
}

static int
fsm_snapshot(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *n)
{
    (void)fsm;
    struct raft_buffer *b = raft_malloc(sizeof *b);
    if (!b || !(b->base = raft_malloc(8))) return RAFT_NOMEM;
    memset(b->base, 0, 8);
    b->len = 8;
    *bufs = b;
    *n = 1;
    char *e = NULL; /* -R -k: the shard's tables hold the snapshot, as
                     * rockstalkd's (store/raft.c, sraft_mark) */
    if (keep_rocks && shard_flush(&kshard, &e) < 0) {
        fprintf(stderr, "ceiling: shard flush: %s\n", e);
        exit(1);
    }
    rafttune_snapshot_taken(&rn.tune);
    return 0;
}

static int
fsm_restore(struct raft_fsm *fsm, struct raft_buffer *buf)
{
    (void)fsm;
    raft_free(buf->base);
    return 0;
}

/* The generation's entry is applied: committed on a majority. */
static void
on_applied(struct raft_apply *req, int status, void *result)
{
    struct rapply *a = (struct rapply *)req;
    uint64_t one = 1;
    (void)result;
    if (status != 0) raft_die("entry not committed", status);
    pthread_mutex_lock(&lg.mu);
    gen_done(a->gen);
    pthread_mutex_unlock(&lg.mu);
    free(a);
    if (write(lg.efd, &one, sizeof one) < 0) die("eventfd");
}

/* Raft thread: proposes what was handed over as one entry, padded to
 * libraft's 8-byte units (raftnode_propose does the same). */
static void
on_wake(uv_async_t *h)
{
    (void)h;
    pthread_mutex_lock(&lg.mu);
    size_t n = lg.len;
    uint64_t g = lg.gen;
    char *p = n ? raft_malloc((n + 7) & ~(size_t)7) : NULL;
    if (n && p) {
        memcpy(p, lg.buf, n);
        memset(p + n, 0, ((n + 7) & ~(size_t)7) - n);
        lg.len = 0;
        lg.gen++;
    }
    pthread_mutex_unlock(&lg.mu);
    if (!n) return;
    struct rapply *a = calloc(1, sizeof *a);
    if (!p || !a) die("raft_malloc");
    struct raft_buffer b = {.base = p, .len = (n + 7) & ~(size_t)7};
    a->gen = g;
    int rv = raft_apply(&rn.raft, &a->req, &b, 1, on_applied);
    if (rv != 0) raft_die("raft_apply", rv);
}

/* Raft thread: marks the leader for the harness (DIR/LEADER), once. */
static void
on_check(uv_check_t *h)
{
    char path[4200];
    (void)h;
    if (rn.leader_marked || raft_state(&rn.raft) != RAFT_LEADER) return;
    snprintf(path, sizeof path, "%s/LEADER", rn.dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) die(path);
    close(fd);
    rn.leader_marked = 1;
}

/* Adds every "ID@ADDR" of spec to conf; returns how many. */
static int
parse_cluster(const char *spec, struct raft_configuration *conf, int self,
              char *self_addr, size_t cap)
{
    char *copy = strdup(spec), *save = NULL, *tok;
    int n = 0;
    if (!copy) die("strdup");
    for (tok = strtok_r(copy, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        char *at = strchr(tok, '@');
        if (!at || atoi(tok) <= 0) {
            fprintf(stderr, "ceiling: bad cluster member '%s'\n", tok);
            exit(2);
        }
        if (atoi(tok) == self) snprintf(self_addr, cap, "%s", at + 1);
        int rv = raft_configuration_add(conf, (raft_id)atoi(tok), at + 1,
                                        RAFT_VOTER);
        if (rv != 0) raft_die("raft_configuration_add", rv);
        n++;
    }
    free(copy);
    return n;
}

static void *
raft_main(void *arg)
{
    (void)arg;
    uv_run(&rn.loop, UV_RUN_DEFAULT);
    return NULL;
}

/* -R ID -r SPEC: starts node ID's libraft on its thread, log in DIR/raft. */
static void
rnode_start(const char *dir, int id, const char *spec)
{
    struct raft_configuration conf;
    char rdir[4200], self_addr[256] = "";
    pthread_t th;
    int rv;

    snprintf(rn.dir, sizeof rn.dir, "%s", dir);
    snprintf(rdir, sizeof rdir, "%s/raft", dir);
    if (mkdir(rdir, 0755) < 0 && errno != EEXIST) die(rdir);
    uv_loop_init(&rn.loop);
    uv_async_init(&rn.loop, &rn.wake, on_wake);
    uv_check_init(&rn.loop, &rn.check);
    uv_check_start(&rn.check, on_check);
    rafttune_start(&rn.tune, &rn.loop);
    raft_configuration_init(&conf);
    if (parse_cluster(spec, &conf, id, self_addr, sizeof self_addr) < 1 ||
        !*self_addr) {
        fprintf(stderr, "ceiling: node %d is not in -r %s\n", id, spec);
        exit(2);
    }
    if ((rv = raft_uv_tcp_init(&rn.transport, &rn.loop)) != 0)
        raft_die("raft_uv_tcp_init", rv);
    if (raft_bind &&
        (rv = raft_uv_tcp_set_bind_address(&rn.transport, raft_bind)) != 0)
        raft_die("raft_uv_tcp_set_bind_address", rv);
    if ((rv = raft_uv_init(&rn.io, &rn.loop, rdir, &rn.transport)) != 0)
        raft_die("raft_uv_init", rv);
    rn.fsm = (struct raft_fsm){.version = 1,
                               .apply = fsm_apply,
                               .snapshot = fsm_snapshot,
                               .restore = fsm_restore};
    if ((rv = raft_init(&rn.raft, &rn.io, &rn.fsm, (raft_id)id, self_addr)))
        raft_die("raft_init", rv);
    raft_set_election_timeout(&rn.raft, 1000);
    raft_set_heartbeat_timeout(&rn.raft, 100);
    raft_set_pre_vote(&rn.raft, true);
    rafttune_attach(&rn.tune, &rn.raft, 8192, 2048, (uint64_t)64 << 20);
    rv = raft_bootstrap(&rn.raft, &conf);
    if (rv != 0 && rv != RAFT_CANTBOOTSTRAP) raft_die("raft_bootstrap", rv);
    raft_configuration_close(&conf);
    if ((rv = raft_start(&rn.raft)) != 0) raft_die("raft_start", rv);
    if (pthread_create(&th, NULL, raft_main, NULL)) die("thread");
}

/* -b DIR: opens the eventfd, the log files and the syncer threads. */
static void
durable_start(const char *dir, int nsync, struct cli *wake)
{
    char path[4096];
    pthread_t th;
    lg.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = wake};
    if (lg.efd < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, lg.efd, &ev) < 0)
        die("eventfd");
    pthread_condattr_t ca; /* -g waits on CLOCK_MONOTONIC deadlines */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&lg.mu, NULL);
    pthread_cond_init(&lg.cv, &ca);
    lg.gen = 1;
    durable_mode = 1;
    if (keep_rocks) {
        char err[512];
        shard_opts_create(&kopts, raft_id_opt != 0);
        if (shard_open(&kshard, &kopts, dir, 0, 1, err, sizeof err) < 0) {
            fprintf(stderr, "ceiling: %s\n", err);
            exit(1);
        }
    }
    if (raft_id_opt) {
        if (keep_rocks) rn.wb = rocksdb_writebatch_create();
        rnode_start(dir, raft_id_opt, raft_spec);
        return;
    }
    if (in_loop) {
        snprintf(path, sizeof path, "%s/ceiling.log", dir);
        uring_start(path);
        return;
    }
    if (split_min) body_start(dir);
    for (int i = 0; i < nsync; i++) {
        if (nsync == 1)
            snprintf(path, sizeof path, "%s/ceiling.log", dir);
        else
            snprintf(path, sizeof path, "%s/ceiling.%d.log", dir, i);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) die(path);
        if (overwrite) log_zero_fill(fd);
        if (direct_sync) { /* -d: reopened for direct, synchronous writes */
            close(fd);
            fd = open(path, O_WRONLY | O_DIRECT | O_DSYNC | O_CLOEXEC);
            if (fd < 0) die(path);
        }
        files[i] = (struct logfile){.fd = fd, .off = 0};
        if (pthread_create(&th, NULL, syncer_main, &files[i])) die("thread");
    }
}

int
main(int argc, char **argv)
{
    const char *addr = "127.0.0.1", *port = "11300", *dir = NULL;
    struct epoll_event evs[128], lev = {.events = EPOLLIN};
    static struct cli wake; /* marks the eventfd's events */
    int o, nsync = 1;
    while ((o = getopt(argc, argv, "l:p:b:n:odswukqgL:KR:r:B:")) != -1) {
        if (o == 'l')
            addr = optarg;
        else if (o == 'p')
            port = optarg;
        else if (o == 'b')
            dir = optarg;
        else if (o == 'n' && atoi(optarg) >= 1 && atoi(optarg) <= SYNCERS_MAX)
            nsync = atoi(optarg);
        else if (o == 'o')
            overwrite = 1;
        else if (o == 'd')
            direct_sync = 1;
        else if (o == 's')
            rwf_dsync = 1;
        else if (o == 'w')
            write_only = 1;
        else if (o == 'u')
            in_loop = 1;
        else if (o == 'k')
            keep_rocks = 1;
        else if (o == 'q')
            q.on = 1;
        else if (o == 'g')
            group_fill = 1;
        else if (o == 'L' && atol(optarg) > 0)
            split_min = (size_t)atol(optarg);
        else if (o == 'K')
            wb_kick = 1;
        else if (o == 'R' && atoi(optarg) > 0)
            raft_id_opt = atoi(optarg);
        else if (o == 'r')
            raft_spec = optarg;
        else if (o == 'B')
            raft_bind = optarg;
        else
            return fprintf(stderr,
                           "usage: ceiling [-l ADDR] [-p PORT] [-q] "
                           "[-b DIR [-n 1-16] [-o [-u|-d|-s]] [-w] [-k] [-g] "
                           "[-L BYTES [-K]] [-R ID -r CL [-B ADDR]]]\n"),
                   2;
    }
    if (raft_id_opt && (!raft_spec || !dir))
        return fprintf(stderr, "ceiling: -R needs -r and -b\n"), 2;
    /* -k's ids and batch belong to one thread (the syncer, or -R's) */
    if (keep_rocks && (!dir || nsync != 1))
        return fprintf(stderr, "ceiling: -k needs -b, not -n\n"), 2;
    /* -g fills the syncer threads' generations */
    if (group_fill && (!dir || in_loop || raft_id_opt))
        return fprintf(stderr, "ceiling: -g needs -b, not -u or -R\n"), 2;
    /* -k parses the log as put lines and bodies only */
    if (keep_rocks && q.on)
        return fprintf(stderr, "ceiling: -k and -q exclude each other\n"), 2;
    /* -u: one loop, one log written in place, synced by each write */
    if (in_loop && (!dir || !overwrite || write_only || keep_rocks ||
                    raft_id_opt || nsync != 1))
        return fprintf(stderr, "ceiling: -u needs -b and -o, nothing else\n"),
               2;
    /* -d, -s: a syncer thread's log written in place, synced by each
     * write */
    if ((direct_sync || rwf_dsync) &&
        (!dir || !overwrite || in_loop || write_only || raft_id_opt ||
         direct_sync + rwf_dsync > 1))
        return fprintf(stderr, "ceiling: -d or -s needs -b and -o, not -u, "
                               "-w or -R\n"),
               2;
    /* -L: one syncer beside the body syncer, fed by the put parser */
    if (split_min &&
        (!dir || q.on || in_loop || keep_rocks || raft_id_opt || nsync != 1))
        return fprintf(stderr, "ceiling: -L needs -b, not -q, -u, -k, -R "
                               "or -n\n"),
               2;
    if (wb_kick && !split_min)
        return fprintf(stderr, "ceiling: -K needs -L\n"), 2;
    int lfd = listen_on(addr, port);
    ep = epoll_create1(0);
    lev.data.ptr = NULL;
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &lev) < 0) die("epoll");
    if (dir) durable_start(dir, nsync, &wake);
    if (q.on) q_start();
    for (;;) {
        int n = epoll_wait(ep, evs, 128, q_sleep_ms());
        if (n < 0 && errno != EINTR) die("epoll_wait");
        for (int i = 0; i < n; i++) {
            struct cli *c = evs[i].data.ptr;
            if (!c)
                on_accept(lfd);
            else if (c == &wake)
                release();
            else if (c->dead)
                continue;
            else if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
                on_readable(c);
            else if (flush(c) < 0)
                drop(c);
        }
        if (q.on) q_serve();
        handoff();
    }
}
