/*
 * rsbench - load generator for servers that speak the beanstalkd protocol.
 *
 * One thread, one epoll loop, N non-blocking TCP_NODELAY connections, each
 * keeping up to P commands in flight. Every reply is parsed and checked; a
 * wrong, missing or unexpected reply ends the run with exit status 1.
 *
 * Modes (an "op" is what ops/s counts):
 *   put      every connection puts jobs                    op = INSERTED
 *   drain    every connection reserves and deletes jobs    op = DELETED
 *            until the tube is empty (use -L to preload)
 *   cycle    half the connections put, half reserve and    op = DELETED
 *            delete; puts not yet reserved are bounded (-B)
 *   latency  one connection, one command at a time:        op = any reply
 *            put, reserve-with-timeout 0, delete, ...
 *   conn     one client, one connection at a time: connect  op = connection
 *            (and with -T the TLS handshake), one put, its
 *            INSERTED, close
 *   bigsmall c small producers (-s bodies) beside g large    op = a small
 *            ones (-g, -G bodies), all putting; the large     INSERTED
 *            puts are counted apart (large_* keys), and -n
 *            bounds them: the phase ends at the N-th one's
 *            INSERTED. -c 0 or -g 0 measures one side alone.
 *
 * With -T every connection speaks TLS (OpenSSL 3; the server's certificate
 * is checked only with -A CAFILE).
 *
 * With -U N the load is spread over N tubes, TUBE-0 .. TUBE-(N-1): the
 * connections form groups (cycle: connections 2g and 2g+1, a producer and
 * a worker; other modes: each connection alone), G of them, and tube i
 * belongs to group i mod G (if N < G, group g has the one tube g mod N). A
 * producer puts into its group's tubes in turn, sending "use" before each
 * put when it has more than one; a worker watches all of them (and ignores
 * default). So every tube has a producer and a worker, and in cycle the
 * backlog (-B) spreads evenly over all N tubes.
 *
 * With RSBENCH_SLOW_US=N in the environment, each small put (any put not
 * of a bigsmall large producer) acknowledged N us or more after it was sent
 * is printed on stderr as "slow SENT LAT": SENT in Unix microseconds (to
 * line up with the server's logs, e.g. RocksDB's event times), LAT in us.
 *
 * With -R every body is incompressible: instead of the repeating alphabet
 * (which Snappy, RocksDB's default, shrinks some 20 times), bytes of a
 * fixed-seed splitmix64 stream, any byte value (bodies are length-prefixed;
 * rsbench reads a reserved body by its length, never scanning it). One
 * buffer, filled once, of the largest body plus RAND_SPAN bytes holds them:
 * a put's body is its time stamp followed by the buffer's bytes from an
 * offset hashed from that stamp (a reserve finds the offset the same way
 * and checks the body), so a small body and a large one are each random,
 * and the small bodies a store packs together in one block (RocksDB
 * compresses per block, ~4 KiB) do not repeat one another either. Large
 * bodies overlap their neighbours' bytes, but 256 KiB of them spans a
 * block (and Snappy's 64 KiB window) of its own: no copy to find.
 *
 * The last line printed is machine-readable: "RESULT key=value ...".
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

enum mode { M_PUT, M_DRAIN, M_CYCLE, M_LATENCY, M_CONN, M_BIGSMALL, NMODE };
enum kind { K_USE, K_WATCH, K_IGNORE, K_PUT, K_RESERVE, K_DELETE, NKIND };
enum role { R_PROD, R_CONS, R_LAT };

static const char *const mode_names[] = {"put",     "drain", "cycle",
                                         "latency", "conn",  "bigsmall"};
static const char *const kind_names[] = {"use", "watch",   "ignore",
                                         "put", "reserve", "delete"};

#define PRI 1024
#define TTR 120
#define STAMP_LEN 16            /* hex send time at the start of each body */
#define MAX_LINE 512            /* longest reply line accepted */
#define READ_CHUNK 65536        /* bytes asked of each read() */
#define PRELOAD_DEPTH 64        /* commands in flight per connection for -L */
#define STALL_NS 10000000000ULL /* no reply for this long is an error */
#define HSUB 64                 /* histogram sub-buckets per power of two */
#define HSLOTS (59 * HSUB)
#define MAX_SRV 8            /* server pids -S takes (a cluster's nodes) */
#define BIG_CONNS 8          /* bigsmall: default large producers (-g) */
#define BIG_SIZE (256 << 10) /* bigsmall: default large body bytes (-G) */
#define RAND_SPAN (1 << 20)  /* -R: body start offsets, below this */
#define RAND_SEED 0x5eed5eed5eed5eedULL /* -R: the byte stream's seed */

struct hist {
    uint64_t n, max;
    uint64_t slot[HSLOTS];
};

struct pend {
    uint64_t t0;
    int kind;
};

struct conn {
    int fd, role, empty, epout, next;
    int big;  /* bigsmall: a large producer */
    SSL *ssl; /* with -T, else NULL */
    char *rb, *wb;
    size_t rlen, rcap, wlen, woff, wcap;
    struct pend *ring;
    unsigned head, count, size;
    int tfirst, tstep, tn, tcur; /* -U: tubes tfirst + k*tstep, k < tn */
    uint64_t inserted;           /* this connection's INSERTED replies */
};

struct cfg {
    const char *host, *tube, *cafile;
    SSL_CTX *tls; /* -T: the client context, else NULL */
    int port, mode, conns, depth, nocheck;
    int randbody; /* -R: incompressible bodies */
    int ntubes;   /* -U: tubes the load spreads over, 0: just -t */
    int tlsmax;   /* -V: the highest TLS version offered, 0: OpenSSL's */
    int srvpid[MAX_SRV], nsrv; /* -S: summed CPU and peak RSS */
    int bigconns; /* bigsmall: large producers (-g); -1: not given */
    size_t size, maxread;
    size_t bigsize; /* bigsmall: large body bytes (-G); 0: not given */
    double secs;
    uint64_t count, preload, backlog;
    /* RSBENCH_SLOW_US: set (slow), the slow small put's bound (ns), and
     * the CLOCK_REALTIME - CLOCK_MONOTONIC offset its lines are printed
     * with */
    int slow;
    uint64_t slow_ns, real_off;
};

/* One phase (preload or measured) of a run. */
struct run {
    const struct cfg *cfg;
    int mode, depth, ep, nconn, stopping, prod_blocked, record;
    int wake_next; /* cycle: the producer wake_producers tries first */
    uint64_t count;
    struct conn *conn;
    char *body;
    uint64_t start, deadline, last_op;
    uint64_t puts, inserted, got, res_out, deleted, timeouts, inflight;
    uint64_t ops_in, ops_late;
    uint64_t big_puts, big_in, big_late; /* bigsmall: the large puts */
    struct hist lat[NKIND], e2e;
    struct hist big; /* bigsmall: the large puts' latency */
};

/* ---- errors and small helpers ------------------------------------------ */

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
die(const char *fmt, ...)
{
    va_list ap;
    fputs("rsbench: error: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

static void *
xrealloc(void *p, size_t n)
{
    p = realloc(p, n);
    if (!p) die("out of memory");
    return p;
}

static uint64_t
now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* splitmix64 (Steele, Lea, Flood 2014): the next value of the stream whose
 * state is *s. */
static uint64_t
splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* -R: where in the body buffer a body stamped t takes its bytes from (0
 * without -R, and for bodies too small for a stamp, t = 0). */
static size_t
body_off(const struct cfg *cfg, uint64_t t)
{
    return cfg->randbody ? (size_t)(splitmix64(&t) % RAND_SPAN) : 0;
}

static void
bad_reply(int kind, const char *line, size_t n)
{
    if (n > 80) n = 80;
    die("unexpected reply to %s: \"%.*s\"", kind_names[kind], (int)n, line);
}

/* Is line[0..n) exactly s? */
static int
line_is(const char *line, size_t n, const char *s)
{
    return strlen(s) == n && memcmp(line, s, n) == 0;
}

/* Parses a decimal number filling line[0..n) exactly. */
static int
parse_num(const char *s, size_t n, uint64_t *out)
{
    uint64_t v = 0;
    if (n == 0 || n > 19) return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = v;
    return 0;
}

/* Parses "PREFIX<number>" filling line[0..n). */
static int
parse_word_num(const char *line, size_t n, const char *prefix, uint64_t *v)
{
    size_t pl = strlen(prefix);
    if (n <= pl || memcmp(line, prefix, pl) != 0) return -1;
    return parse_num(line + pl, n - pl, v);
}

/* ---- latency histogram (log-linear, about 1.6% resolution) ------------- */

static unsigned
hist_slot(uint64_t v)
{
    if (v < 2 * HSUB) return (unsigned)v;
    int msb = 63 - __builtin_clzll(v);
    return (unsigned)(msb - 5) * HSUB + (unsigned)((v >> (msb - 6)) - HSUB);
}

static uint64_t
hist_value(unsigned i)
{
    if (i < 2 * HSUB) return i;
    int shift = (int)(i / HSUB) - 1;
    uint64_t lo = (uint64_t)(i % HSUB + HSUB) << shift;
    return lo + ((1ULL << shift) >> 1);
}

static void
hist_add(struct hist *h, uint64_t v)
{
    h->slot[hist_slot(v)]++;
    h->n++;
    if (v > h->max) h->max = v;
}

static void
hist_merge(struct hist *to, const struct hist *from)
{
    for (unsigned i = 0; i < HSLOTS; i++)
        to->slot[i] += from->slot[i];
    to->n += from->n;
    if (from->max > to->max) to->max = from->max;
}

/* Quantile q (0..1) in microseconds. */
static double
hist_us(const struct hist *h, double q)
{
    if (h->n == 0) return 0;
    double want = q * (double)h->n;
    uint64_t rank = (uint64_t)want;
    if ((double)rank < want || rank == 0) rank++;
    uint64_t acc = 0;
    for (unsigned i = 0; i < HSLOTS; i++) {
        acc += h->slot[i];
        if (acc >= rank) {
            uint64_t v = hist_value(i);
            return (double)(v < h->max ? v : h->max) / 1000.0;
        }
    }
    return (double)h->max / 1000.0;
}

/* ---- sockets ------------------------------------------------------------ */

/* Dies with OpenSSL's error queue after "what". */
static void
die_ssl(const char *what)
{
    unsigned long e = ERR_get_error();
    char buf[256] = "no OpenSSL error";
    if (e) ERR_error_string_n(e, buf, sizeof buf);
    die("%s: %s%s%s", what, buf, errno && !e ? ": " : "",
        errno && !e ? strerror(errno) : "");
}

/* The -T client context: TLS 1.2 or 1.3 (at most tlsmax unless 0), the
 * server checked against -A. */
static SSL_CTX *
tls_ctx(const char *cafile, int tlsmax)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx) die_ssl("SSL_CTX_new");
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    if (tlsmax) SSL_CTX_set_max_proto_version(ctx, tlsmax);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
                              SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_read_ahead(ctx, 1); /* whole socket reads; SSL_has_pending */
    if (cafile) {
        if (SSL_CTX_load_verify_locations(ctx, cafile, NULL) != 1)
            die_ssl(cafile);
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    } else {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    }
    return ctx;
}

/* Runs the TLS handshake on the blocking socket fd; returns the session. */
static SSL *
tls_handshake(const struct cfg *cfg, int fd)
{
    SSL *ssl = SSL_new(cfg->tls);
    if (!ssl || SSL_set_fd(ssl, fd) != 1) die_ssl("SSL_new");
    errno = 0;
    if (SSL_connect(ssl) != 1) die_ssl("TLS handshake");
    return ssl;
}

static int
dial_tcp(const struct cfg *cfg)
{
    struct addrinfo hints, *res, *ai;
    char port[16];
    int fd = -1, one = 1;

    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    snprintf(port, sizeof port, "%d", cfg->port);
    int rc = getaddrinfo(cfg->host, port, &hints, &res);
    if (rc != 0) die("%s: %s", cfg->host, gai_strerror(rc));
    for (ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
        if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) break;
        if (fd >= 0) close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0)
        die("cannot connect to %s:%d: %s", cfg->host, cfg->port,
            strerror(errno));
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* Connects (blocking) and, with -T, runs the handshake; *ssl gets the
 * session or NULL. */
static int
dial(const struct cfg *cfg, SSL **ssl)
{
    int fd = dial_tcp(cfg);
    if (cfg->tls || cfg->mode == M_CONN) {
        /* blocking I/O follows: bound each wait */
        struct timeval tv = {STALL_NS / 1000000000ULL, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    }
    *ssl = cfg->tls ? tls_handshake(cfg, fd) : NULL;
    return fd;
}

/* Writes up to n bytes without blocking: the count written, 0 if the
 * socket (or the TLS session) cannot take any now; dies on errors. */
static size_t
send_some(struct conn *c, const char *b, size_t n)
{
    for (;;) {
        if (c->ssl) {
            size_t done = 0;
            if (SSL_write_ex(c->ssl, b, n, &done) == 1) return done;
            int e = SSL_get_error(c->ssl, 0);
            if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) return 0;
            die_ssl("SSL_write");
        }
        ssize_t got = send(c->fd, b, n, MSG_NOSIGNAL);
        if (got >= 0) return (size_t)got;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
        if (errno != EINTR) die("send: %s", strerror(errno));
    }
}

/* Reads up to n bytes without blocking: the count read, 0 if none is there
 * now; dies on errors and when the server closed the connection. */
static size_t
recv_some(struct conn *c, char *b, size_t n)
{
    for (;;) {
        if (c->ssl) {
            size_t done = 0;
            if (SSL_read_ex(c->ssl, b, n, &done) == 1) return done;
            int e = SSL_get_error(c->ssl, 0);
            if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return 0;
            if (e == SSL_ERROR_ZERO_RETURN ||
                (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0))
                die("server closed a connection (%u command(s) unanswered)",
                    c->count);
            die_ssl("SSL_read");
        }
        ssize_t got = recv(c->fd, b, n, 0);
        if (got > 0) return (size_t)got;
        if (got == 0)
            die("server closed a connection (%u command(s) unanswered)",
                c->count);
        if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
        if (errno != EINTR) die("recv: %s", strerror(errno));
    }
}

static void
arm(struct run *r, struct conn *c, int want_out)
{
    struct epoll_event ev;
    if (want_out == c->epout) return;
    memset(&ev, 0, sizeof ev);
    ev.events = EPOLLIN | (want_out ? EPOLLOUT : 0);
    ev.data.ptr = c;
    if (epoll_ctl(r->ep, EPOLL_CTL_MOD, c->fd, &ev) < 0)
        die("epoll_ctl: %s", strerror(errno));
    c->epout = want_out;
}

static void
flush(struct run *r, struct conn *c)
{
    while (c->woff < c->wlen) {
        size_t n = send_some(c, c->wb + c->woff, c->wlen - c->woff);
        if (n == 0) break;
        c->woff += n;
    }
    if (c->woff == c->wlen) c->woff = c->wlen = 0;
    arm(r, c, c->wlen > 0);
}

/* Makes room for n more bytes in the output buffer and returns them. */
static char *
wb_room(struct conn *c, size_t n)
{
    if (c->woff > 0 && c->woff == c->wlen) c->woff = c->wlen = 0;
    if (c->wlen + n > c->wcap) {
        c->wcap = (c->wlen + n) * 2;
        c->wb = xrealloc(c->wb, c->wcap);
    }
    return c->wb + c->wlen;
}

static void
wb_add(struct conn *c, const char *s, size_t n)
{
    memcpy(wb_room(c, n), s, n);
    c->wlen += n;
}

/* ---- commands ----------------------------------------------------------- */

static void
push(struct run *r, struct conn *c, int kind, uint64_t now)
{
    if (c->count == c->size) die("internal: too many commands in flight");
    struct pend *p = &c->ring[(c->head + c->count) % c->size];
    p->kind = kind;
    p->t0 = now;
    c->count++;
    r->inflight++;
}

static struct pend
pop(struct run *r, struct conn *c)
{
    struct pend p = c->ring[c->head];
    c->head = (c->head + 1) % c->size;
    c->count--;
    r->inflight--;
    return p;
}

static void send_cmd(struct run *r, struct conn *c, int kind, const char *fmt,
                     ...) __attribute__((format(printf, 4, 5)));

static void
send_cmd(struct run *r, struct conn *c, int kind, const char *fmt, ...)
{
    char buf[MAX_LINE];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof buf) die("internal: command too long");
    wb_add(c, buf, (size_t)n);
    push(r, c, kind, now_ns());
}

/* -U: the name of tube i (TUBE-i) in buf. */
static void
tube_name(const struct cfg *cfg, int i, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s-%d", cfg->tube, i);
}

/* -U: a producer with several tubes moves on to the next one ("use"). */
static void
send_next_use(struct run *r, struct conn *c, uint64_t now)
{
    char name[256], line[300];
    if (c->tn < 2) return;
    tube_name(r->cfg, c->tfirst + c->tcur * c->tstep, name, sizeof name);
    c->tcur = (c->tcur + 1) % c->tn;
    int n = snprintf(line, sizeof line, "use %s\r\n", name);
    wb_add(c, line, (size_t)n);
    push(r, c, K_USE, now);
}

static void
send_put(struct run *r, struct conn *c, uint64_t now)
{
    size_t size = c->big ? r->cfg->bigsize : r->cfg->size;
    send_next_use(r, c, now);
    char hdr[64], stamp[STAMP_LEN + 1];
    int n = snprintf(hdr, sizeof hdr, "put %d 0 %d %zu\r\n", PRI, TTR, size);
    wb_add(c, hdr, (size_t)n);
    char *body = wb_room(c, size + 2);
    uint64_t t = size >= STAMP_LEN ? now : 0;
    memcpy(body, r->body + body_off(r->cfg, t), size);
    if (size >= STAMP_LEN) {
        snprintf(stamp, sizeof stamp, "%016" PRIx64, t);
        memcpy(body, stamp, STAMP_LEN);
    }
    memcpy(body + size, "\r\n", 2);
    c->wlen += size + 2;
    push(r, c, K_PUT, now);
    r->puts++;
    if (c->big) r->big_puts++;
}

static void
send_reserve(struct run *r, struct conn *c, uint64_t now)
{
    /* cycle blocks up to 1 s for a job; drain and latency never wait */
    const char *cmd = r->mode == M_CYCLE ? "reserve-with-timeout 1\r\n"
                                         : "reserve-with-timeout 0\r\n";
    wb_add(c, cmd, strlen(cmd));
    push(r, c, K_RESERVE, now);
    r->res_out++;
}

static void
send_delete(struct run *r, struct conn *c, uint64_t id, uint64_t now)
{
    char buf[48];
    int n = snprintf(buf, sizeof buf, "delete %" PRIu64 "\r\n", id);
    wb_add(c, buf, (size_t)n);
    push(r, c, K_DELETE, now);
}

/* -U: a connection's setup: a producer with one tube uses it; a worker
 * watches every tube of its group and ignores default. */
static void
send_setup_tubes(struct run *r, struct conn *c)
{
    char name[256];
    if (c->role != R_CONS && c->tn == 1) {
        tube_name(r->cfg, c->tfirst, name, sizeof name);
        send_cmd(r, c, K_USE, "use %s\r\n", name);
    }
    if (c->role == R_PROD) return;
    for (int k = 0; k < c->tn; k++) {
        tube_name(r->cfg, c->tfirst + k * c->tstep, name, sizeof name);
        send_cmd(r, c, K_WATCH, "watch %s\r\n", name);
    }
    send_cmd(r, c, K_IGNORE, "ignore default\r\n");
}

static void
send_setup(struct run *r, struct conn *c)
{
    const char *tube = r->cfg->tube;
    if (r->cfg->ntubes) {
        send_setup_tubes(r, c);
        return;
    }
    if (strcmp(tube, "default") == 0) return;
    if (c->role != R_CONS) send_cmd(r, c, K_USE, "use %s\r\n", tube);
    if (c->role != R_PROD) {
        send_cmd(r, c, K_WATCH, "watch %s\r\n", tube);
        send_cmd(r, c, K_IGNORE, "ignore default\r\n");
    }
}

/* ---- deciding what to send next ---------------------------------------- */

static int
may_put(struct run *r, const struct conn *c)
{
    if (r->stopping) return 0;
    if (r->mode == M_BIGSMALL) /* -n bounds the large puts only */
        return !c->big || !r->count || r->big_puts < r->count;
    if (r->count && r->puts >= r->count) return 0;
    if (r->mode == M_CYCLE && r->puts - r->got >= r->cfg->backlog) {
        r->prod_blocked = 1;
        return 0;
    }
    return 1;
}

static int
may_reserve(struct run *r, struct conn *c)
{
    if (r->stopping || c->empty) return 0;
    return !r->count || r->got + r->res_out < r->count;
}

static void
fill_latency(struct run *r, struct conn *c, uint64_t now)
{
    if (c->count > 0) return;
    if (c->next == K_RESERVE)
        send_reserve(r, c, now);
    else if (may_put(r, c))
        send_put(r, c, now);
}

static void
fill(struct run *r, struct conn *c, uint64_t now)
{
    if (c->role == R_LAT) {
        fill_latency(r, c, now);
        return;
    }
    while (c->count < (unsigned)r->depth) {
        if (c->role == R_PROD && may_put(r, c))
            send_put(r, c, now);
        else if (c->role == R_CONS && may_reserve(r, c))
            send_reserve(r, c, now);
        else
            break;
    }
}

/* cycle: a reserve made room under the backlog bound; wake the producers,
 * round-robin from the one after the latest producer woken that put: in
 * index order from 0 the first producers took nearly every slot the
 * reserves freed, so with -U the backlog gathered in their tubes while
 * the last pairs' workers waited for jobs (45 of 50 waiting after 5 s). */
static void
wake_producers(struct run *r, uint64_t now)
{
    if (!r->prod_blocked) return;
    r->prod_blocked = 0;
    for (int k = 0; k < r->nconn; k++) {
        int i = (r->wake_next + k) % r->nconn;
        struct conn *c = &r->conn[i];
        if (c->role == R_PROD && c->count < (unsigned)r->depth) {
            uint64_t puts = r->puts;
            fill(r, c, now);
            flush(r, c);
            if (r->puts != puts) r->wake_next = (i + 1) % r->nconn;
        }
    }
}

/* ---- replies ------------------------------------------------------------ */

static void
op_done(struct run *r, uint64_t now)
{
    if (r->deadline && now > r->deadline) {
        r->ops_late++;
        return;
    }
    r->ops_in++;
    r->last_op = now;
}

/* bigsmall: a large put's INSERTED; the N-th one (-n) ends the phase. */
static void
big_done(struct run *r, uint64_t now)
{
    if (r->deadline && now > r->deadline) {
        r->big_late++;
        return;
    }
    r->big_in++;
    if (r->count && r->big_in >= r->count) {
        r->deadline = now; /* what arrives later is late */
        r->stopping = 1;
    }
}

/* RSBENCH_SLOW_US (see the top of this file): prints the put sent at t0
 * (CLOCK_MONOTONIC ns) and acknowledged v ns later if v is over the bound. */
static void
slow_ack(const struct cfg *cfg, uint64_t t0, uint64_t v)
{
    if (!cfg->slow || v < cfg->slow_ns) return;
    fprintf(stderr, "slow %llu %llu\n",
            (unsigned long long)((t0 + cfg->real_off) / 1000),
            (unsigned long long)(v / 1000));
}

static void
record(struct run *r, const struct conn *c, const struct pend *p, uint64_t now)
{
    uint64_t v = now > p->t0 ? now - p->t0 : 0;
    if (!r->record) return;
    if (c->big && p->kind == K_PUT)
        hist_add(&r->big, v);
    else
        hist_add(&r->lat[p->kind], v);
    if (!c->big && p->kind == K_PUT) slow_ack(r->cfg, p->t0, v);
}

/* Checks the reply to use, watch or ignore; c is the connection (its
 * tubes with -U), NULL for conn mode. */
static void
on_setup(struct run *r, const struct conn *c, int kind, const char *line,
         size_t n)
{
    uint64_t v;
    uint64_t watched = c && r->cfg->ntubes ? (uint64_t)c->tn : 1;
    if (kind == K_USE) {
        size_t tl = strlen(r->cfg->tube);
        int dash = r->cfg->ntubes != 0; /* USING TUBE-i */
        if (n < 6 + tl + (size_t)dash || memcmp(line, "USING ", 6) != 0 ||
            memcmp(line + 6, r->cfg->tube, tl) != 0 ||
            (dash ? line[6 + tl] != '-' : n != 6 + tl))
            bad_reply(kind, line, n);
    } else if (parse_word_num(line, n, "WATCHING ", &v) < 0 ||
               (kind == K_IGNORE && v != watched)) {
        bad_reply(kind, line, n);
    }
}

static void
on_put(struct run *r, struct conn *c, const char *line, size_t n, uint64_t now)
{
    uint64_t id;
    if (parse_word_num(line, n, "INSERTED ", &id) < 0)
        bad_reply(K_PUT, line, n);
    r->inserted++;
    c->inserted++;
    if (c->big)
        big_done(r, now);
    else if (r->mode != M_DRAIN && r->mode != M_CYCLE)
        op_done(r, now);
    c->next = K_RESERVE;
}

static void
on_delete(struct run *r, struct conn *c, const char *line, size_t n,
          uint64_t now)
{
    if (!line_is(line, n, "DELETED")) bad_reply(K_DELETE, line, n);
    r->deleted++;
    if (r->mode != M_PUT) op_done(r, now);
    c->next = K_PUT;
}

/* Parses "RESERVED <id> <bytes>". */
static int
parse_reserved(const char *line, size_t n, uint64_t *id, uint64_t *bytes)
{
    const char *sp;
    if (n < 9 || memcmp(line, "RESERVED ", 9) != 0) return -1;
    line += 9;
    n -= 9;
    sp = memchr(line, ' ', n);
    if (!sp || parse_num(line, (size_t)(sp - line), id) < 0) return -1;
    return parse_num(sp + 1, n - (size_t)(sp - line) - 1, bytes);
}

/* Checks a reserved body against the pattern put and reads its stamp. */
static void
check_body(struct run *r, const char *b, size_t n, uint64_t now)
{
    size_t from = n >= STAMP_LEN ? STAMP_LEN : 0;
    uint64_t t = 0;
    for (size_t i = 0; i < from; i++) {
        char ch = b[i];
        int d = ch >= '0' && ch <= '9'   ? ch - '0'
                : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                                         : -1;
        if (d < 0) die("a reserved job's body has no time stamp");
        t = t << 4 | (uint64_t)d;
    }
    const char *want = r->body + body_off(r->cfg, t);
    if (memcmp(b + from, want + from, n - from) != 0)
        die("a reserved job's body differs from every body put");
    /* only jobs put in this phase: older ones did not wait for us */
    if (from && r->mode == M_CYCLE && r->record && t >= r->start && now > t)
        hist_add(&r->e2e, now - t);
}

static void
on_timed_out(struct run *r, struct conn *c)
{
    r->timeouts++;
    if (r->mode == M_DRAIN)
        c->empty = 1; /* the tube has no ready job left */
    else if (r->mode == M_LATENCY)
        die("reserve timed out right after a put; is the tube shared?");
}

/* Returns the bytes the reply takes, 0 while it is incomplete. */
static size_t
on_reserve(struct run *r, struct conn *c, const struct pend *p, const char *b,
           size_t len, size_t eol, uint64_t now)
{
    uint64_t id, bytes;
    if (line_is(b, eol, "TIMED_OUT")) {
        r->res_out--;
        on_timed_out(r, c);
        return eol + 2;
    }
    if (parse_reserved(b, eol, &id, &bytes) < 0) bad_reply(K_RESERVE, b, eol);
    if (bytes != r->cfg->size)
        die("reserved a job of %" PRIu64 " bytes, expected %zu", bytes,
            r->cfg->size);
    size_t need = eol + 2 + bytes + 2;
    if (len < need) return 0;
    if (memcmp(b + need - 2, "\r\n", 2) != 0)
        die("reserved job %" PRIu64 ": body not followed by CRLF", id);
    check_body(r, b + eol + 2, bytes, now);
    r->res_out--;
    r->got++;
    record(r, c, p, now);
    if (r->mode == M_LATENCY) op_done(r, now);
    send_delete(r, c, id, now);
    if (r->mode == M_CYCLE) wake_producers(r, now);
    return need;
}

static size_t
dispatch(struct run *r, struct conn *c, const char *b, size_t len, size_t eol,
         uint64_t now)
{
    struct pend p = c->ring[c->head];
    size_t used = eol + 2;
    if (p.kind == K_RESERVE)
        used = on_reserve(r, c, &p, b, len, eol, now);
    else if (p.kind == K_PUT)
        on_put(r, c, b, eol, now);
    else if (p.kind == K_DELETE)
        on_delete(r, c, b, eol, now);
    else
        on_setup(r, c, p.kind, b, eol);
    if (used == 0) return 0;
    pop(r, c);
    if (p.kind != K_RESERVE) record(r, c, &p, now);
    return used;
}

/* Handles every complete reply in the read buffer. */
static void
parse(struct run *r, struct conn *c, uint64_t now)
{
    size_t off = 0;
    while (off < c->rlen) {
        const char *b = c->rb + off;
        size_t len = c->rlen - off;
        const char *e = memmem(b, len, "\r\n", 2);
        if (!e && len > MAX_LINE)
            die("reply line longer than %d bytes", MAX_LINE);
        if (!e) break;
        if (c->count == 0)
            die("unsolicited reply: \"%.*s\"", (int)(e - b < 80 ? e - b : 80),
                b);
        size_t used = dispatch(r, c, b, len, (size_t)(e - b), now);
        if (used == 0) break;
        off += used;
    }
    memmove(c->rb, c->rb + off, c->rlen - off);
    c->rlen -= off;
}

static void
conn_read(struct run *r, struct conn *c)
{
    size_t want = READ_CHUNK, got = 0, n;
    if (r->cfg->maxread && want > r->cfg->maxread) want = r->cfg->maxread;
    /* epoll does not see what the TLS session already holds: take it all */
    do {
        if (c->rcap - c->rlen < READ_CHUNK) {
            c->rcap = c->rlen + 2 * READ_CHUNK;
            c->rb = xrealloc(c->rb, c->rcap);
        }
        n = recv_some(c, c->rb + c->rlen, want);
        c->rlen += n;
        got += n;
    } while (n > 0 && c->ssl && SSL_has_pending(c->ssl));
    if (got == 0) return;
    uint64_t now = now_ns();
    parse(r, c, now);
    fill(r, c, now);
    flush(r, c);
}

/* ---- event loop and phases ---------------------------------------------- */

static int
wait_ms(const struct run *r, uint64_t now)
{
    if (!r->deadline || r->stopping || now >= r->deadline) return 1000;
    uint64_t ms = (r->deadline - now) / 1000000 + 1;
    return ms < 1000 ? (int)ms : 1000;
}

static void
loop(struct run *r)
{
    struct epoll_event ev[128];
    uint64_t last = now_ns();
    while (r->inflight > 0) {
        int n = epoll_wait(r->ep, ev, 128, wait_ms(r, now_ns()));
        if (n < 0 && errno != EINTR) die("epoll_wait: %s", strerror(errno));
        uint64_t now = now_ns();
        if (n > 0)
            last = now;
        else if (now - last > STALL_NS)
            die("no reply for %llu s with %" PRIu64 " command(s) unanswered",
                STALL_NS / 1000000000ULL, r->inflight);
        if (r->deadline && now >= r->deadline) r->stopping = 1;
        for (int i = 0; i < n; i++) {
            struct conn *c = ev[i].data.ptr;
            if (ev[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) conn_read(r, c);
            if (ev[i].events & EPOLLOUT) flush(r, c);
        }
    }
}

static int
role_of(int mode, int i)
{
    if (mode == M_LATENCY) return R_LAT;
    if (mode == M_CYCLE) return i % 2 ? R_CONS : R_PROD;
    return mode == M_DRAIN ? R_CONS : R_PROD;
}

/* -U: gives connection i its tubes (see the top of this file). */
static void
assign_tubes(const struct run *r, struct conn *c, int i)
{
    int n = r->cfg->ntubes;
    int ng = r->mode == M_CYCLE ? r->nconn / 2 : r->nconn;
    int g = r->mode == M_CYCLE ? (i / 2) % ng : i; /* odd c: 2 producers */
    c->tcur = 0;
    if (n < ng) {
        c->tfirst = g % n;
        c->tstep = 1;
        c->tn = 1;
    } else {
        c->tfirst = g;
        c->tstep = ng;
        c->tn = (n - g + ng - 1) / ng;
    }
}

static void
open_conns(struct run *r)
{
    r->ep = epoll_create1(0);
    if (r->ep < 0) die("epoll_create1: %s", strerror(errno));
    r->conn = calloc((size_t)r->nconn, sizeof *r->conn);
    if (!r->conn) die("out of memory");
    for (int i = 0; i < r->nconn; i++) {
        struct conn *c = &r->conn[i];
        struct epoll_event ev;
        c->fd = dial(r->cfg, &c->ssl);
        fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
        c->role = role_of(r->mode, i);
        c->big = r->mode == M_BIGSMALL && i >= r->cfg->conns;
        if (r->cfg->ntubes) assign_tubes(r, c, i);
        c->size = (unsigned)r->depth + 8 + (unsigned)c->tn; /* + watches */
        c->ring = xrealloc(NULL, c->size * sizeof *c->ring);
        memset(&ev, 0, sizeof ev);
        ev.events = EPOLLIN;
        ev.data.ptr = c;
        if (epoll_ctl(r->ep, EPOLL_CTL_ADD, c->fd, &ev) < 0)
            die("epoll_ctl: %s", strerror(errno));
        send_setup(r, c);
    }
}

static void
close_conns(struct run *r)
{
    for (int i = 0; i < r->nconn; i++) {
        SSL_free(r->conn[i].ssl);
        close(r->conn[i].fd);
        free(r->conn[i].rb);
        free(r->conn[i].wb);
        free(r->conn[i].ring);
    }
    free(r->conn);
    close(r->ep);
}

/* Runs one phase to its end and returns its measured length in seconds. */
static double
run_phase(struct run *r, double secs)
{
    open_conns(r);
    r->start = now_ns();
    r->deadline = secs > 0 ? r->start + (uint64_t)(secs * 1e9) : 0;
    for (int i = 0; i < r->nconn; i++) {
        fill(r, &r->conn[i], r->start);
        flush(r, &r->conn[i]);
    }
    loop(r);
    close_conns(r);
    uint64_t end = r->stopping  ? r->deadline
                   : r->last_op ? r->last_op
                                : now_ns();
    return (double)(end - r->start) / 1e9;
}

/* conn: one connection's request ("use TUBE" unless default, one put) in
 * b; returns its length. */
static size_t
conn_request(const struct run *r, char *b, size_t cap)
{
    const char *tube = r->cfg->tube;
    size_t size = r->cfg->size;
    int n = strcmp(tube, "default") == 0
                ? snprintf(b, cap, "put %d 0 %d %zu\r\n", PRI, TTR, size)
                : snprintf(b, cap, "use %s\r\nput %d 0 %d %zu\r\n", tube, PRI,
                           TTR, size);
    if (n < 0 || (size_t)n + size + 2 > cap) die("internal: request too long");
    memcpy(b + n, r->body, size);
    memcpy(b + (size_t)n + size, "\r\n", 2);
    return (size_t)n + size + 2;
}

/* conn: reads the replies to the request (USING, INSERTED) and checks them;
 * blocking, each wait bounded by the socket's timeout. */
static void
conn_replies(struct run *r, struct conn *c)
{
    char buf[MAX_LINE];
    size_t len = 0;
    int lines = strcmp(r->cfg->tube, "default") == 0 ? 1 : 2;
    while (lines > 0) {
        char *e = memmem(buf, len, "\r\n", 2);
        if (!e) {
            if (len == sizeof buf)
                die("reply line longer than %d bytes", MAX_LINE);
            size_t got = recv_some(c, buf + len, sizeof buf - len);
            if (got == 0) die("no reply for %llu s", STALL_NS / 1000000000ULL);
            len += got;
            continue;
        }
        size_t eol = (size_t)(e - buf);
        if (lines-- == 2)
            on_setup(r, NULL, K_USE, buf, eol);
        else
            on_put(r, c, buf, eol, now_ns());
        memmove(buf, buf + eol + 2, len - eol - 2);
        len -= eol + 2;
    }
    if (len)
        die("unsolicited reply: \"%.*s\"", (int)(len < 80 ? len : 80), buf);
}

/* conn: one connection after another until the time or count bound;
 * returns the measured length in seconds. */
static double
run_conns(struct run *r, double secs)
{
    size_t cap = r->cfg->size + MAX_LINE;
    char *req = xrealloc(NULL, cap);
    size_t n = conn_request(r, req, cap);
    r->start = now_ns();
    r->deadline = secs > 0 ? r->start + (uint64_t)(secs * 1e9) : 0;
    while (!r->stopping && (!r->count || r->inserted < r->count)) {
        struct conn c;
        uint64_t t0 = now_ns();
        memset(&c, 0, sizeof c);
        c.fd = dial(r->cfg, &c.ssl);
        for (size_t off = 0; off < n;) {
            size_t sent = send_some(&c, req + off, n - off);
            if (sent == 0) die("send timed out");
            off += sent;
        }
        r->puts++;
        conn_replies(r, &c);
        uint64_t now = now_ns();
        if (r->record) hist_add(&r->lat[K_PUT], now - t0);
        if (c.ssl) {
            SSL_shutdown(c.ssl); /* our close_notify; no wait for theirs */
            SSL_free(c.ssl);
        }
        close(c.fd);
        if (r->deadline && now >= r->deadline) r->stopping = 1;
    }
    free(req);
    uint64_t end = r->stopping ? r->deadline : r->last_op;
    return (double)(end - r->start) / 1e9;
}

static struct run *
new_run(const struct cfg *cfg, char *body, int mode)
{
    struct run *r = calloc(1, sizeof *r);
    if (!r) die("out of memory");
    r->cfg = cfg;
    r->body = body;
    r->mode = mode;
    r->nconn = cfg->conns + (mode == M_BIGSMALL ? cfg->bigconns : 0);
    r->depth = cfg->depth;
    r->count = cfg->count;
    return r;
}

/* Puts cfg->preload jobs, pipelined deeper than the measured phase. */
static double
preload(const struct cfg *cfg, char *body)
{
    struct run *r = new_run(cfg, body, M_PUT);
    r->count = cfg->preload;
    r->depth = cfg->depth > PRELOAD_DEPTH ? cfg->depth : PRELOAD_DEPTH;
    double secs = run_phase(r, 0);
    if (r->inserted != cfg->preload)
        die("preload inserted %" PRIu64 " jobs, wanted %" PRIu64, r->inserted,
            cfg->preload);
    free(r);
    return secs;
}

/* ---- server-side checks and costs --------------------------------------- */

static int64_t
yaml_num(const char *yaml, const char *key)
{
    const char *p = strstr(yaml, key);
    if (!p) die("stats-tube reply has no \"%s\"", key);
    return strtoll(p + strlen(key), NULL, 10);
}

/* Reads one stats-tube reply; returns 0 while it is incomplete. */
static int
tube_reply(char *buf, size_t len, int64_t *total)
{
    char *e = strstr(buf, "\r\n");
    uint64_t bytes;
    if (!e) return 0;
    if (line_is(buf, (size_t)(e - buf), "NOT_FOUND")) {
        *total = 0; /* the server dropped the tube: it holds no job */
        return 1;
    }
    if (parse_word_num(buf, (size_t)(e - buf), "OK ", &bytes) < 0)
        die("unexpected reply to stats-tube: \"%.*s\"", (int)(e - buf), buf);
    if (len < (size_t)(e - buf) + 4 + bytes) return 0;
    *total = yaml_num(e, "current-jobs-ready: ") +
             yaml_num(e, "current-jobs-reserved: ") +
             yaml_num(e, "current-jobs-delayed: ") +
             yaml_num(e, "current-jobs-buried: ");
    return 1;
}

/* Jobs of any state in tube name, from stats-tube on c (blocking). */
static int64_t
tube_jobs1(struct conn *c, const char *name)
{
    char buf[16384], cmd[256];
    size_t len = 0;
    int64_t total = -1;
    int n = snprintf(cmd, sizeof cmd, "stats-tube %s\r\n", name);
    for (size_t off = 0; off < (size_t)n;) {
        size_t sent = send_some(c, cmd + off, (size_t)n - off);
        if (sent == 0) die("stats-tube: send timed out");
        off += sent;
    }
    do {
        if (len == sizeof buf - 1) die("stats-tube: reply too long");
        size_t got = recv_some(c, buf + len, sizeof buf - 1 - len);
        if (got == 0) die("stats-tube: no complete reply");
        len += got;
        buf[len] = '\0';
    } while (!tube_reply(buf, len, &total));
    return total;
}

/* Jobs of any state in the tube (with -U: in all N tubes), from
 * stats-tube. */
static int64_t
tube_jobs(const struct cfg *cfg)
{
    char name[256];
    int64_t total = 0;
    struct timeval tv = {10, 0};
    struct conn c;
    memset(&c, 0, sizeof c);
    c.fd = dial(cfg, &c.ssl);
    setsockopt(c.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(c.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (!cfg->ntubes) total = tube_jobs1(&c, cfg->tube);
    for (int i = 0; i < cfg->ntubes; i++) {
        tube_name(cfg, i, name, sizeof name);
        total += tube_jobs1(&c, name);
    }
    SSL_free(c.ssl);
    close(c.fd);
    return total;
}

/* A server's user + system CPU seconds, -1 if unknown. */
static double
srv_cpu1(int pid)
{
    char path[64], buf[2048];
    unsigned long long ut, st;
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (!p || sscanf(p + 2,
                     "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
                     "%llu %llu",
                     &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* A server's peak resident set (VmHWM) in KiB, -1 if unknown. */
static long
srv_hwm_kb1(int pid)
{
    char path[64], line[256];
    long kb = -1;
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kb) == 1) break;
    fclose(f);
    return kb;
}

/* The -S servers' CPU seconds, summed; -1 if none given or one unknown. */
static double
srv_cpu(const struct cfg *cfg)
{
    double sum = 0;
    for (int i = 0; i < cfg->nsrv; i++) {
        double s = srv_cpu1(cfg->srvpid[i]);
        if (s < 0) return -1;
        sum += s;
    }
    return cfg->nsrv ? sum : -1;
}

/* The -S servers' peak resident sets in KiB, summed; -1 as srv_cpu. */
static long
srv_hwm_kb(const struct cfg *cfg)
{
    long sum = 0;
    for (int i = 0; i < cfg->nsrv; i++) {
        long kb = srv_hwm_kb1(cfg->srvpid[i]);
        if (kb < 0) return -1;
        sum += kb;
    }
    return cfg->nsrv ? sum : -1;
}

/* ---- report ------------------------------------------------------------- */

struct result {
    double secs, preload_secs, cpu_secs;
    int64_t before, after;
    long hwm_kb;
};

/* Replies counted for CPU per op: every op and, in bigsmall, every large
 * put, in the phase or late. */
/* The connections the summary names: in bigsmall the small producers. */
static int
conns_shown(const struct cfg *cfg, const struct run *r)
{
    return cfg->mode == M_BIGSMALL ? cfg->conns : r->nconn;
}

static uint64_t
all_ops(const struct run *r)
{
    return r->ops_in + r->ops_late + r->big_in + r->big_late;
}

static void
print_quantiles(const char *prefix, const struct hist *h)
{
    printf(" %sp50_us=%.1f %sp99_us=%.1f %sp999_us=%.1f %smax_us=%.1f", prefix,
           hist_us(h, 0.5), prefix, hist_us(h, 0.99), prefix, hist_us(h, 0.999),
           prefix, (double)h->max / 1000.0);
}

/* bigsmall: the large producers' lines of the summary. */
static void
print_human_big(const struct cfg *cfg, const struct run *r,
                const struct result *res)
{
    double ops_s = res->secs > 0 ? (double)r->big_in / res->secs : 0;
    printf("large: c=%d s=%zu: %" PRIu64 " puts = %.0f puts/s = %.1f MiB/s\n",
           cfg->bigconns, cfg->bigsize, r->big_in, ops_s,
           ops_s * (double)cfg->bigsize / 1048576.0);
    printf("large put latency us: p50 %.1f  p99 %.1f  p99.9 %.1f  max %.1f\n",
           hist_us(&r->big, 0.5), hist_us(&r->big, 0.99),
           hist_us(&r->big, 0.999), (double)r->big.max / 1000.0);
}

/* bigsmall: the RESULT keys of each side that ran (small_*: the small
 * producers, as ops_s and the quantiles; large_*: the large ones). */
static void
print_result_big(const struct cfg *cfg, const struct run *r,
                 const struct result *res)
{
    double secs = res->secs > 0 ? res->secs : 1;
    if (cfg->conns > 0) {
        printf(" small_ops=%" PRIu64 " small_ops_s=%.1f", r->ops_in,
               (double)r->ops_in / secs);
        print_quantiles("small_", &r->lat[K_PUT]);
    }
    if (cfg->bigconns > 0) {
        printf(" large_conns=%d large_size=%zu large_ops=%" PRIu64
               " large_ops_s=%.1f large_mib_s=%.1f large_late=%" PRIu64,
               cfg->bigconns, cfg->bigsize, r->big_in, (double)r->big_in / secs,
               (double)r->big_in / secs * (double)cfg->bigsize / 1048576.0,
               r->big_late);
        print_quantiles("large_", &r->big);
    }
}

/* cycle: the fewest and most jobs one producer had inserted (how evenly
 * the backlog bound shared the puts out: with -U each producer feeds its
 * own pair's tubes). */
static void
put_spread(const struct run *r, uint64_t *lo, uint64_t *hi)
{
    *lo = UINT64_MAX;
    *hi = 0;
    for (int i = 0; i < r->nconn; i++) {
        const struct conn *c = &r->conn[i];
        if (c->role != R_PROD) continue;
        if (c->inserted < *lo) *lo = c->inserted;
        if (c->inserted > *hi) *hi = c->inserted;
    }
    if (*lo == UINT64_MAX) *lo = 0;
}

static void
print_human(const struct cfg *cfg, const struct run *r,
            const struct result *res, const struct hist *all)
{
    double ops_s = res->secs > 0 ? (double)r->ops_in / res->secs : 0;
    printf("%s c=%d P=%d s=%zu tube=%s%s: %" PRIu64 " ops in %.3f s = %.0f "
           "ops/s\n",
           mode_names[cfg->mode], conns_shown(cfg, r), r->depth, cfg->size,
           cfg->tube, cfg->ntubes ? "-0.." : "", r->ops_in, res->secs, ops_s);
    printf("latency us: p50 %.1f  p99 %.1f  p99.9 %.1f  max %.1f  (%" PRIu64
           " replies)\n",
           hist_us(all, 0.5), hist_us(all, 0.99), hist_us(all, 0.999),
           (double)all->max / 1000.0, all->n);
    if (r->e2e.n)
        printf("put-to-reserve us: p50 %.1f  p99 %.1f  p99.9 %.1f  max %.1f\n",
               hist_us(&r->e2e, 0.5), hist_us(&r->e2e, 0.99),
               hist_us(&r->e2e, 0.999), (double)r->e2e.max / 1000.0);
    if (cfg->mode == M_CYCLE) {
        uint64_t lo, hi;
        put_spread(r, &lo, &hi);
        printf("jobs inserted per producer: min %" PRIu64 "  max %" PRIu64 "\n",
               lo, hi);
    }
    if (cfg->preload)
        printf("preloaded %" PRIu64 " jobs in %.3f s\n", cfg->preload,
               res->preload_secs);
    if (cfg->mode == M_BIGSMALL && cfg->bigconns > 0)
        print_human_big(cfg, r, res);
    if (res->cpu_secs >= 0 && all_ops(r) > 0)
        printf("server pid%s %d%s: %.2f us CPU/op, peak RSS %.1f MiB\n",
               cfg->nsrv > 1 ? "s" : "", cfg->srvpid[0],
               cfg->nsrv > 1 ? ",... (summed)" : "",
               res->cpu_secs * 1e6 / (double)all_ops(r),
               (double)res->hwm_kb / 1024.0);
}

static void
print_result(const struct cfg *cfg, const struct run *r,
             const struct result *res, const struct hist *all)
{
    double ops_s = res->secs > 0 ? (double)r->ops_in / res->secs : 0;
    printf("RESULT status=ok mode=%s conns=%d depth=%d size=%zu tubes=%d "
           "secs=%.3f ops=%" PRIu64 " ops_s=%.1f",
           mode_names[cfg->mode], conns_shown(cfg, r), r->depth, cfg->size,
           cfg->ntubes ? cfg->ntubes : 1, res->secs, r->ops_in, ops_s);
    print_quantiles("", all);
    printf(" late=%" PRIu64 " puts=%" PRIu64 " reserves=%" PRIu64
           " deletes=%" PRIu64 " timeouts=%" PRIu64,
           r->ops_late, r->inserted, r->got, r->deleted, r->timeouts);
    printf(" preloaded=%" PRIu64 " preload_s=%.3f jobs_before=%" PRId64
           " jobs_after=%" PRId64,
           cfg->preload, res->preload_secs, res->before, res->after);
    if (r->e2e.n) print_quantiles("e2e_", &r->e2e);
    if (cfg->mode == M_CYCLE) {
        uint64_t lo, hi;
        put_spread(r, &lo, &hi);
        printf(" prod_puts_min=%" PRIu64 " prod_puts_max=%" PRIu64, lo, hi);
    }
    for (int k = K_PUT; cfg->mode == M_LATENCY && k < NKIND; k++) {
        char prefix[16];
        snprintf(prefix, sizeof prefix, "%s_", kind_names[k]);
        print_quantiles(prefix, &r->lat[k]);
    }
    if (cfg->mode == M_BIGSMALL) print_result_big(cfg, r, res);
    if (res->cpu_secs >= 0 && all_ops(r) > 0)
        printf(" srv_cpu_s=%.3f srv_cpu_us_op=%.3f srv_hwm_kb=%ld",
               res->cpu_secs, res->cpu_secs * 1e6 / (double)all_ops(r),
               res->hwm_kb);
    printf("\n");
}

/* ---- options and main --------------------------------------------------- */

static void
usage(FILE *f)
{
    fputs(
        "usage: rsbench [options]\n"
        "  -m MODE   put | drain | cycle | latency | conn | bigsmall (default\n"
        "            put)\n"
        "  -H HOST   server address (default 127.0.0.1)\n"
        "  -p PORT   server port (default 11300)\n"
        "  -c N      connections (default 1; cycle: even ones put, odd ones\n"
        "            reserve; latency, conn: always 1; bigsmall: the small\n"
        "            producers, 0 allowed)\n"
        "  -P N      commands in flight per connection (default 1)\n"
        "  -s BYTES  job body size (default 64)\n"
        "  -R        incompressible bodies: seeded pseudo-random bytes (after\n"
        "            the time stamp) from an offset that varies per put,\n"
        "            instead of a repeating alphabet\n"
        "  -d SECS   time bound of the measured phase (default 5; 0: none)\n"
        "  -n N      count bound: jobs put (put, conn), jobs deleted (drain,\n"
        "            cycle), put rounds (latency), large jobs put (bigsmall:\n"
        "            the phase ends at the N-th one's INSERTED); default 0:\n"
        "            none\n"
        "  -L N      preload N jobs before the measured phase (for drain)\n"
        "  -B N      cycle: most jobs put but not yet reserved "
        "(default 10000)\n"
        "  -t TUBE   tube to use (default rsbench); use a tube no one else "
        "uses\n"
        "  -U N      spread the load over N tubes TUBE-0..TUBE-(N-1): tube i\n"
        "            belongs to group i mod G (cycle: G = c/2 producer and\n"
        "            worker pairs; else G = c); producers put into their\n"
        "            group's tubes in turn (a use before each put), workers\n"
        "            watch all of them\n"
        "  -g N      bigsmall: large producers beside the -c small ones\n"
        "            (default 8; 0: the small ones alone)\n"
        "  -G BYTES  bigsmall: the large producers' body size (default\n"
        "            262144; the server's max job size must allow it)\n"
        "  -S PID[,PID...]  report the server's CPU time per op and peak\n"
        "            RSS (several pids, e.g. a cluster's nodes: summed)\n"
        "  -r BYTES  cap each read() at BYTES (tests split replies)\n"
        "  -x        skip the job count check (stats-tube) after the run\n"
        "  -T        speak TLS on every connection (no certificate check)\n"
        "  -A FILE   with -T: verify the server's certificate chain against\n"
        "            the CA certificates in FILE (not its name)\n"
        "  -V 1.2|1.3  with -T: offer TLS up to this version (default 1.3)\n"
        "  -h        show this help\n"
        "Prints a summary and a last line \"RESULT key=value ...\"; exits 1 "
        "on any\nwrong or missing reply.\n",
        f);
}

static uint64_t
opt_num(const char *s, int opt, uint64_t lo, uint64_t hi)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || *s == '-' || v < lo || v > hi)
        die("-%c: expected a number from %" PRIu64 " to %" PRIu64 ", got "
            "\"%s\"",
            opt, lo, hi, s);
    return v;
}

static int
opt_mode(const char *s)
{
    for (int m = 0; m < NMODE; m++)
        if (strcmp(s, mode_names[m]) == 0) return m;
    die("-m: unknown mode \"%s\"", s);
    return 0;
}

/* -S PID[,PID...]: up to MAX_SRV server pids. */
static void
opt_pids(struct cfg *cfg, const char *a)
{
    char buf[256], *save = NULL;
    if (strlen(a) >= sizeof buf) die("-S: list too long");
    strcpy(buf, a);
    cfg->nsrv = 0;
    for (char *t = strtok_r(buf, ",", &save); t;
         t = strtok_r(NULL, ",", &save)) {
        if (cfg->nsrv == MAX_SRV) die("-S: at most %d pids", MAX_SRV);
        cfg->srvpid[cfg->nsrv++] = (int)opt_num(t, 'S', 1, 1 << 30);
    }
    if (!cfg->nsrv) die("-S: expected PID[,PID...], got \"%s\"", a);
}

/* Numeric options; returns 0 if o is not one. */
static int
opt_numeric(struct cfg *cfg, int o, const char *a)
{
    const uint64_t big = UINT64_MAX >> 1;
    switch (o) {
    case 'p':
        cfg->port = (int)opt_num(a, o, 1, 65535);
        return 1;
    case 'c':
        cfg->conns = (int)opt_num(a, o, 0, 10000); /* 0: bigsmall only */
        return 1;
    case 'g':
        cfg->bigconns = (int)opt_num(a, o, 0, 10000);
        return 1;
    case 'G':
        cfg->bigsize = opt_num(a, o, 1, 1 << 30);
        return 1;
    case 'P':
        cfg->depth = (int)opt_num(a, o, 1, 4096);
        return 1;
    case 's':
        cfg->size = opt_num(a, o, 0, 1 << 24);
        return 1;
    case 'n':
        cfg->count = opt_num(a, o, 0, big);
        return 1;
    case 'L':
        cfg->preload = opt_num(a, o, 0, big);
        return 1;
    case 'B':
        cfg->backlog = opt_num(a, o, 1, big);
        return 1;
    case 'S':
        opt_pids(cfg, a);
        return 1;
    case 'r':
        cfg->maxread = opt_num(a, o, 1, READ_CHUNK);
        return 1;
    case 'U':
        cfg->ntubes = (int)opt_num(a, o, 1, 100000);
        return 1;
    }
    return 0;
}

static void
opt_one(struct cfg *cfg, int o, const char *a)
{
    char *end;
    if (opt_numeric(cfg, o, a)) return;
    if (o == 'm') {
        cfg->mode = opt_mode(a);
    } else if (o == 'H') {
        cfg->host = a;
    } else if (o == 't') {
        cfg->tube = a;
    } else if (o == 'x') {
        cfg->nocheck = 1;
    } else if (o == 'R') {
        cfg->randbody = 1;
    } else if (o == 'T') {
        cfg->tls = (SSL_CTX *)1; /* made in main, once -A is known */
    } else if (o == 'A') {
        cfg->cafile = a;
    } else if (o == 'V') {
        if (strcmp(a, "1.2") != 0 && strcmp(a, "1.3") != 0)
            die("-V: expected 1.2 or 1.3, got \"%s\"", a);
        cfg->tlsmax = a[2] == '2' ? TLS1_2_VERSION : TLS1_3_VERSION;
    } else if (o == 'd') {
        cfg->secs = strtod(a, &end);
        if (*end || end == a || !(cfg->secs >= 0))
            die("-d: expected seconds, got \"%s\"", a);
    } else if (o == 'h') {
        usage(stdout);
        exit(0);
    } else {
        usage(stderr);
        exit(2);
    }
}

/* The options bigsmall takes, and those only it takes; fills in the
 * defaults of -g and -G. */
static void
check_bigsmall(struct cfg *cfg)
{
    if (cfg->mode != M_BIGSMALL) {
        if (cfg->bigconns >= 0 || cfg->bigsize)
            die("-g and -G: for bigsmall only");
        if (cfg->conns < 1) die("-c: at least 1 connection");
        return;
    }
    if (cfg->bigconns < 0) cfg->bigconns = BIG_CONNS;
    if (!cfg->bigsize) cfg->bigsize = BIG_SIZE;
    if (cfg->conns + cfg->bigconns < 1)
        die("bigsmall needs a producer (-c or -g)");
    if (cfg->ntubes || cfg->preload) die("bigsmall takes neither -U nor -L");
    if (cfg->secs == 0 && (cfg->count == 0 || cfg->bigconns == 0))
        die("bigsmall: give a time bound (-d) or large producers and -n");
}

static void
parse_args(struct cfg *cfg, int argc, char **argv)
{
    int o;
    memset(cfg, 0, sizeof *cfg);
    cfg->host = "127.0.0.1";
    cfg->tube = "rsbench";
    cfg->port = 11300;
    cfg->conns = cfg->depth = 1;
    cfg->size = 64;
    cfg->secs = 5;
    cfg->backlog = 10000;
    cfg->bigconns = -1;
    while ((o = getopt(argc, argv,
                       "m:H:p:c:P:s:d:n:L:B:t:S:r:U:g:G:xRTA:V:h")) != -1)
        opt_one(cfg, o, optarg);
    if (optind < argc) die("unexpected argument \"%s\" (see -h)", argv[optind]);
    const char *slow = getenv("RSBENCH_SLOW_US");
    if (slow && *slow) {
        struct timespec ts;
        char *end;
        errno = 0;
        unsigned long long us = strtoull(slow, &end, 10);
        if (errno || *end || *slow == '-' || us > UINT64_MAX / 1000)
            die("RSBENCH_SLOW_US: expected microseconds, got \"%s\"", slow);
        cfg->slow = 1;
        cfg->slow_ns = (uint64_t)us * 1000;
        clock_gettime(CLOCK_REALTIME, &ts);
        cfg->real_off = (uint64_t)ts.tv_sec * 1000000000ULL +
                        (uint64_t)ts.tv_nsec - now_ns();
    }
    if (!*cfg->tube || strlen(cfg->tube) > 200 || strpbrk(cfg->tube, " \r\n"))
        die("-t: bad tube name");
    if (cfg->mode == M_LATENCY || cfg->mode == M_CONN)
        cfg->conns = cfg->depth = 1;
    if (cfg->ntubes && (cfg->mode == M_LATENCY || cfg->mode == M_CONN))
        die("-U: for put, drain and cycle only");
    if (cfg->mode == M_CYCLE && cfg->conns < 2)
        die("cycle needs at least 2 connections");
    check_bigsmall(cfg);
    if (cfg->mode != M_DRAIN && cfg->secs == 0 && cfg->count == 0)
        die("give a time bound (-d) or a count bound (-n)");
    if (cfg->cafile && !cfg->tls) die("-A needs -T");
    if (cfg->tlsmax && !cfg->tls) die("-V needs -T");
    if (cfg->tls) cfg->tls = tls_ctx(cfg->cafile, cfg->tlsmax);
}

/* Is the server's job count what our replies say it must be? */
static void
check_counts(const struct cfg *cfg, const struct run *r,
             const struct result *res)
{
    int64_t want = res->before + (int64_t)r->inserted - (int64_t)r->deleted;
    int drained = cfg->mode == M_DRAIN && !r->stopping &&
                  (!r->count || r->deleted < r->count);
    if (res->after != want)
        die("server holds %" PRId64 " jobs in tube %s; %" PRId64
            " before + %" PRIu64 " put - %" PRIu64 " deleted = %" PRId64,
            res->after, cfg->ntubes ? "(all -U)" : cfg->tube, res->before,
            r->inserted, r->deleted, want);
    if (drained && res->after != 0)
        die("tube %s still holds %" PRId64 " jobs after the drain", cfg->tube,
            res->after);
}

/* The body buffer: size bytes of the repeating alphabet or, with -R,
 * size + RAND_SPAN bytes of splitmix64's stream (body_off). */
static char *
make_body(const struct cfg *cfg, size_t size)
{
    if (!cfg->randbody) {
        char *body = xrealloc(NULL, size + 1);
        for (size_t i = 0; i < size; i++)
            body[i] = (char)('a' + i % 26);
        return body;
    }
    size_t n = size + RAND_SPAN;
    char *body = xrealloc(NULL, n + sizeof(uint64_t));
    uint64_t s = RAND_SEED;
    for (size_t i = 0; i < n; i += sizeof(uint64_t)) {
        uint64_t x = splitmix64(&s);
        memcpy(body + i, &x, sizeof x);
    }
    return body;
}

int
main(int argc, char **argv)
{
    struct cfg cfg;
    struct result res = {0, 0, -1, -1, -1, -1};
    struct hist all;

    parse_args(&cfg, argc, argv);
    char *body =
        make_body(&cfg, cfg.size > cfg.bigsize ? cfg.size : cfg.bigsize);
    if (cfg.preload) res.preload_secs = preload(&cfg, body);
    if (!cfg.nocheck) res.before = tube_jobs(&cfg);
    struct run *r = new_run(&cfg, body, cfg.mode);
    r->record = 1;
    double cpu0 = srv_cpu(&cfg);
    res.secs =
        cfg.mode == M_CONN ? run_conns(r, cfg.secs) : run_phase(r, cfg.secs);
    double cpu1 = srv_cpu(&cfg);
    if (cpu0 >= 0 && cpu1 >= 0) res.cpu_secs = cpu1 - cpu0;
    res.hwm_kb = srv_hwm_kb(&cfg);
    if (!cfg.nocheck) {
        res.after = tube_jobs(&cfg);
        check_counts(&cfg, r, &res);
    }
    memset(&all, 0, sizeof all);
    for (int k = K_PUT; k < NKIND; k++) /* use/watch/ignore not counted */
        hist_merge(&all, &r->lat[k]);
    print_human(&cfg, r, &res, &all);
    print_result(&cfg, r, &res, &all);
    free(r);
    free(body);
    SSL_CTX_free(cfg.tls);
    return 0;
}
