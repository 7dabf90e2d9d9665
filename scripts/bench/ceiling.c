/*
 * ceiling - the cheapest server that can pass rsbench's put load: one thread,
 * one epoll loop. It reads each "put <pri> <delay> <ttr> <bytes>" line and
 * skips its body, then answers "INSERTED 1"; "use TUBE" gets "USING TUBE",
 * anything else "UNKNOWN_COMMAND". It stores nothing, so its put rate is
 * about the most one event-loop thread can answer on this machine, and the
 * benchmark compares real servers with it.
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
 * usage: ceiling [-l ADDR] [-p PORT]
 *                [-b DIR [-n SYNCERS] [-o [-u]] [-w] [-k]
 *                 [-R ID -r CL [-B ADDR]]]
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
    uint64_t gen;
    size_t end;
};

struct cli {
    int fd, epout, dead, held; /* held: on the held list */
    char *rb, *wb;
    size_t rlen, rcap, wlen, woff, wcap, skip;
    size_t rel; /* output up to here may leave */
    struct mark marks[MARKS];
    int nmarks;
};

/* The log of the sync ceiling. buf/len/gen/done under mu. */
struct log {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char *buf;
    size_t len, cap;
    uint64_t gen;             /* generation that the next hand-off joins */
    _Atomic uint64_t durable; /* every generation up to this one is synced */
    unsigned char done[SYNCERS_MAX * 2]; /* synced, by gen % size */
    int efd;
};

static int ep;
static int durable_mode;
static struct log lg;

static char *pend; /* loop: bytes read since the last hand-off */
static size_t plen, pcap;
static struct cli **held; /* loop: clients with marks or unmarked output */
static size_t nheld, capheld;

static void
die(const char *what)
{
    fprintf(stderr, "ceiling: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* One syncer's log file; off: -o's write position in the ring. */
static struct logfile {
    int fd;
    off_t off;
} files[SYNCERS_MAX];
static int overwrite;         /* -o */
static int write_only;        /* -w */
static int keep_rocks;        /* -k */
static ShardOpts kopts;       /* -k: rockstalkd's shard options */
static StoreShard kshard;     /* -k: the shard */
static int in_loop;           /* -u */
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
    char dir[4096];
    int leader_marked;
} rn;

/* Writes n bytes at p to f: appended, or (-o) in place, wrapping. */
static void
log_write(struct logfile *f, const char *p, size_t n)
{
    while (n) {
        size_t room = overwrite ? (size_t)(OVER_SIZE - f->off) : n;
        size_t k = n < room ? n : room;
        ssize_t w =
            overwrite ? pwrite(f->fd, p, k, f->off) : write(f->fd, p, k);
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

static void
out(struct cli *c, const char *s, size_t n)
{
    if (c->wlen + n > c->wcap) {
        c->wcap = (c->wlen + n) * 2;
        c->wb = realloc(c->wb, c->wcap);
        if (!c->wb) die("realloc");
    }
    memcpy(c->wb + c->wlen, s, n);
    c->wlen += n;
    if (!durable_mode) {
        c->rel = c->wlen;
    } else if (!c->held) {
        if (nheld == capheld) {
            capheld = capheld ? capheld * 2 : 64;
            held = realloc(held, capheld * sizeof *held);
            if (!held) die("realloc");
        }
        held[nheld++] = c;
        c->held = 1;
    }
}

static void
cli_free(struct cli *c)
{
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

static void
on_line(struct cli *c, const char *line, size_t n)
{
    static const char ins[] = "INSERTED 1\r\n", unk[] = "UNKNOWN_COMMAND\r\n";
    if (n > 4 && memcmp(line, "put ", 4) == 0 && put_bytes(line, n) >= 0) {
        c->skip = (size_t)put_bytes(line, n) + 2;
        out(c, ins, sizeof ins - 1);
    } else if (n > 4 && memcmp(line, "use ", 4) == 0) {
        out(c, "USING ", 6);
        out(c, line + 4, n - 4);
        out(c, "\r\n", 2);
    } else {
        out(c, unk, sizeof unk - 1);
    }
}

/* Answers every complete command; returns -1 to drop the client. */
static int
on_input(struct cli *c)
{
    size_t off = 0;
    while (off < c->rlen) {
        if (c->skip) {
            size_t k = c->rlen - off < c->skip ? c->rlen - off : c->skip;
            off += k;
            c->skip -= k;
            continue;
        }
        char *b = c->rb + off, *e = memmem(b, c->rlen - off, "\r\n", 2);
        if (!e && c->rlen - off > MAX_LINE) return -1;
        if (!e) break;
        on_line(c, b, (size_t)(e - b));
        off += (size_t)(e - b) + 2;
    }
    if (durable_mode && off) {
        if (plen + off > pcap) {
            pcap = (plen + off) * 2;
            pend = realloc(pend, pcap);
            if (!pend) die("realloc");
        }
        memcpy(pend + plen, c->rb, off);
        plen += off;
    }
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
    rocksdb_write(kshard.db, kopts.wo_nosync, wb, &e);
    if (e) {
        fprintf(stderr, "ceiling: rocksdb_write: %s\n", e);
        exit(1);
    }
    rocksdb_writebatch_clear(wb);
}

/* Sync ceiling: writes and fdatasyncs each generation it takes to its own
 * log file (arg: the descriptor), back to back. */
static void *
syncer_main(void *arg)
{
    char *mine = NULL;
    size_t mcap = 0;
    struct logfile *f = arg;
    rocksdb_writebatch_t *wb = keep_rocks ? rocksdb_writebatch_create() : NULL;
    for (;;) {
        pthread_mutex_lock(&lg.mu);
        while (!lg.len)
            pthread_cond_wait(&lg.cv, &lg.mu);
        char *b = lg.buf;
        size_t n = lg.len, bcap = lg.cap;
        uint64_t g = lg.gen++;
        lg.buf = mine;
        lg.cap = mcap;
        lg.len = 0;
        pthread_mutex_unlock(&lg.mu);
        mine = b;
        mcap = bcap;
        log_write(f, mine, n);
        if (!write_only && fdatasync(f->fd) < 0) die("fdatasync");
        pthread_mutex_lock(&lg.mu);
        gen_done(g);
        pthread_mutex_unlock(&lg.mu);
        uint64_t one = 1;
        if (write(lg.efd, &one, sizeof one) < 0) die("eventfd");
        if (keep_rocks) keep_generation(wb, mine, n, g);
    }
    return NULL;
}

/* -u: the loop's ring, and the generation it has in flight. */
#define BLK 4096
static struct uring {
    struct io_uring ring;
    int fd;           /* the log, O_DIRECT | O_DSYNC */
    char *buf;        /* BLK-aligned: the tail block's head, a generation */
    size_t cap, want; /* want: the bytes the write in flight covers */
    char tail[BLK];   /* the bytes of off's block before off */
    off_t off;        /* where the next generation's bytes go */
    uint64_t gen;     /* the generation in flight; 0: none */
} ur;

/* -u: writes the bytes handed over since the last write as the next
 * generation, unless a write is in flight; a generation that would pass
 * the end of the log starts it over at 0. */
static void
uring_submit(void)
{
    if (ur.gen || !lg.len) return;
    if (lg.len > (size_t)OVER_SIZE) die("-u: a generation larger than the log");
    if (ur.off + (off_t)lg.len > OVER_SIZE) ur.off = 0;
    size_t head = (size_t)(ur.off % BLK), end = head + lg.len;
    size_t total = (end + BLK - 1) / BLK * BLK;
    if (total > ur.cap) {
        free(ur.buf);
        ur.cap = total * 2;
        if (posix_memalign((void **)&ur.buf, BLK, ur.cap)) die("memalign");
    }
    memcpy(ur.buf, ur.tail, head);
    memcpy(ur.buf + head, lg.buf, lg.len);
    memset(ur.buf + end, 0, total - end);
    struct io_uring_sqe *sqe = io_uring_get_sqe(&ur.ring);
    if (!sqe) die("io_uring_get_sqe");
    io_uring_prep_write(sqe, ur.fd, ur.buf, (unsigned)total,
                        (uint64_t)(ur.off - (off_t)head));
    int rv = io_uring_submit(&ur.ring);
    if (rv < 0) errno = -rv, die("io_uring_submit");
    memcpy(ur.tail, ur.buf + end / BLK * BLK, end % BLK);
    ur.off += (off_t)lg.len;
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

/* Once per epoll batch: the bytes read join the next generation, and every
 * held client's new output waits for it (a full mark ring moves its last
 * mark on: that reply waits a little longer, never less). */
static void
handoff(void)
{
    if (!durable_mode || !plen) return;
    pthread_mutex_lock(&lg.mu);
    if (lg.len + plen > lg.cap) {
        lg.cap = (lg.len + plen) * 2;
        lg.buf = realloc(lg.buf, lg.cap);
        if (!lg.buf) die("realloc");
    }
    memcpy(lg.buf + lg.len, pend, plen);
    lg.len += plen;
    uint64_t g = lg.gen;
    pthread_cond_signal(&lg.cv);
    pthread_mutex_unlock(&lg.mu);
    if (raft_id_opt) uv_async_send(&rn.wake);
    if (in_loop) uring_submit();
    plen = 0;
    for (size_t i = 0; i < nheld; i++) {
        struct cli *c = held[i];
        size_t marked = c->nmarks ? c->marks[c->nmarks - 1].end : c->rel;
        if (marked == c->wlen) continue;
        if (c->nmarks == MARKS) c->nmarks--;
        c->marks[c->nmarks++] = (struct mark){g, c->wlen};
    }
}

/* The syncer finished a generation: release what it covers. */
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
    for (size_t i = 0; i < nheld; i++) {
        struct cli *c = held[i];
        int m = 0, was_dead = c->dead;
        while (m < c->nmarks && c->marks[m].gen <= d)
            c->rel = c->marks[m++].end;
        c->nmarks -= m;
        memmove(c->marks, c->marks + m, (size_t)c->nmarks * sizeof *c->marks);
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
    pthread_mutex_init(&lg.mu, NULL);
    pthread_cond_init(&lg.cv, NULL);
    lg.gen = 1;
    durable_mode = 1;
    if (raft_id_opt) {
        rnode_start(dir, raft_id_opt, raft_spec);
        return;
    }
    if (keep_rocks) {
        char err[512];
        shard_opts_create(&kopts, 0);
        if (shard_open(&kshard, &kopts, dir, 0, 1, err, sizeof err) < 0) {
            fprintf(stderr, "ceiling: %s\n", err);
            exit(1);
        }
    }
    if (in_loop) {
        snprintf(path, sizeof path, "%s/ceiling.log", dir);
        uring_start(path);
        return;
    }
    for (int i = 0; i < nsync; i++) {
        if (nsync == 1)
            snprintf(path, sizeof path, "%s/ceiling.log", dir);
        else
            snprintf(path, sizeof path, "%s/ceiling.%d.log", dir, i);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) die(path);
        if (overwrite) log_zero_fill(fd);
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
    while ((o = getopt(argc, argv, "l:p:b:n:owukR:r:B:")) != -1) {
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
        else if (o == 'w')
            write_only = 1;
        else if (o == 'u')
            in_loop = 1;
        else if (o == 'k')
            keep_rocks = 1;
        else if (o == 'R' && atoi(optarg) > 0)
            raft_id_opt = atoi(optarg);
        else if (o == 'r')
            raft_spec = optarg;
        else if (o == 'B')
            raft_bind = optarg;
        else
            return fprintf(stderr, "usage: ceiling [-l ADDR] [-p PORT] "
                                   "[-b DIR [-n 1-16] [-o [-u]] [-w] [-k] [-R "
                                   "ID -r CL [-B ADDR]]]\n"),
                   2;
    }
    if (raft_id_opt && (!raft_spec || !dir))
        return fprintf(stderr, "ceiling: -R needs -r and -b\n"), 2;
    /* -k's ids and batch belong to one syncer thread */
    if (keep_rocks && (!dir || raft_id_opt || nsync != 1))
        return fprintf(stderr, "ceiling: -k needs -b, not -R or -n\n"), 2;
    /* -u: one loop, one log written in place, synced by each write */
    if (in_loop && (!dir || !overwrite || write_only || keep_rocks ||
                    raft_id_opt || nsync != 1))
        return fprintf(stderr, "ceiling: -u needs -b and -o, nothing else\n"),
               2;
    int lfd = listen_on(addr, port);
    ep = epoll_create1(0);
    lev.data.ptr = NULL;
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &lev) < 0) die("epoll");
    if (dir) durable_start(dir, nsync, &wake);
    for (;;) {
        int n = epoll_wait(ep, evs, 128, -1);
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
        handoff();
    }
}
