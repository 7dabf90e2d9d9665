/* peerdial.c - see peerdial.h. */
#include "cluster/peerdial.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/common.h"
#include "cluster/peerauth.h"

#define CHUNK 65536

/* One tunnel's pump: its TCP socket, its end of the socketpair, TLS. */
typedef struct Dial {
    int tcp, sp;
    TlsConn *tls;
    char buf[CHUNK], out[CHUNK];
} Dial;

/* Monotonic milliseconds (base/common.h's clock). */
static int64_t
now_ms(void)
{
    return mono_ns() / 1000000;
}

/* Writes all of buf[0..n) to fd (blocking, the socket's send timeout). */
static int
write_all(int fd, const char *buf, size_t n)
{
    while (n) {
        ssize_t w = send(fd, buf, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        buf += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Sends what TLS has produced. */
static int
flush(Dial *d)
{
    size_t n;

    while ((n = tls_conn_take_out(d->tls, d->out, sizeof d->out)))
        if (write_all(d->tcp, d->out, n) != 0) return -1;
    return 0;
}

/* Reads ciphertext from the network into TLS (at most what it takes);
 * waits up to ms. 1 read, 0 nothing yet, -1 closed or failed. */
static int
feed(Dial *d, int ms)
{
    struct pollfd p = {.fd = d->tcp, .events = POLLIN};
    size_t room = tls_conn_feed_room(d->tls);

    if (poll(&p, 1, ms) <= 0) return 0;
    ssize_t r = recv(d->tcp, d->buf, room < CHUNK ? room : CHUNK, 0);
    if (r <= 0 || tls_conn_feed(d->tls, d->buf, (size_t)r) != 0) return -1;
    return 1;
}

/* The handshake, the server's node id, the preamble: 0 or -1 (err). */
static int
authenticate(Dial *d, const ClusterConfig *cfg, uint64_t id, unsigned channel,
             int64_t end, char *err, size_t errcap)
{
    uint64_t got;
    unsigned char pre[PEER_PREAMBLE_LEN];
    int rc;

    while ((rc = tls_conn_handshake(d->tls)) == 0) {
        int left = (int)(end - now_ms());
        if (flush(d) != 0 || left <= 0 || feed(d, left) < 0)
            return errfmt(err, errcap,
                          "TLS handshake with node %llu "
                          "failed or timed out",
                          (unsigned long long)id);
    }
    if (rc < 0 || flush(d) != 0)
        return errfmt(err, errcap, "TLS handshake with node %llu: %s",
                      (unsigned long long)id, tls_conn_error(d->tls));
    if (tls_peer_node_id(tls_conn_ssl(d->tls), &got) != 0 || got != id)
        return errfmt(err, errcap,
                      "the server at node %llu's address is not it",
                      (unsigned long long)id);
    peer_preamble_put(pre, cfg->self_id, channel);
    if (tls_conn_write(d->tls, pre, sizeof pre) != (ssize_t)sizeof pre ||
        flush(d) != 0)
        return errfmt(err, errcap, "node %llu: send failed",
                      (unsigned long long)id);
    return 0;
}

/* One round of the pump: the network's plaintext to the socketpair, the
 * socketpair's bytes to the network. 0 to go on, -1 to end. */
static int
pump_once(Dial *d, struct pollfd *p)
{
    if (p[0].revents) {
        if (feed(d, 0) < 0) return -1;
        ssize_t n;
        while ((n = tls_conn_read(d->tls, d->buf, sizeof d->buf)) > 0)
            if (write_all(d->sp, d->buf, (size_t)n) != 0) return -1;
        if (n < 0 || flush(d) != 0) return -1;
    }
    if (p[1].revents) {
        ssize_t r = recv(d->sp, d->buf, sizeof d->buf, 0);
        if (r <= 0) {
            tls_conn_close_notify(d->tls);
            flush(d);
            return -1;
        }
        for (ssize_t off = 0; off < r;) {
            ssize_t k = tls_conn_write(d->tls, d->buf + off, (size_t)(r - off));
            if (k <= 0 || flush(d) != 0) return -1;
            off += k;
        }
    }
    return 0;
}

static void
dial_free(Dial *d)
{
    if (d->tcp >= 0) close(d->tcp);
    if (d->sp >= 0) close(d->sp);
    tls_conn_free(d->tls);
    free(d);
}

static void *
pump_main(void *arg)
{
    Dial *d = arg;
    struct pollfd p[2] = {{.fd = d->tcp, .events = POLLIN},
                          {.fd = d->sp, .events = POLLIN}};

    for (;;) {
        int r = poll(p, 2, PEERDIAL_IDLE_MS);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0 || pump_once(d, p) != 0) break;
    }
    dial_free(d);
    return NULL;
}

/* The socket to voter id, connected within timeout_ms, with send and
 * receive timeouts of as much; -1 with err. */
static int
connect_to(const ClusterConfig *cfg, uint64_t id, int timeout_ms, char *err,
           size_t errcap)
{
    const ClusterPeer *v = peer_voter(cfg, id);
    struct sockaddr_in sa;
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};

    if (!v || id == cfg->self_id || peer_parse_addr(v->addr, &sa) != 0)
        return errfmt(err, errcap, "node %llu is not another voter",
                      (unsigned long long)id);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return errfmt(err, errcap, "socket: %s", strerror(errno));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    peer_tune_fd(fd);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        errfmt(err, errcap, "connect to node %llu (%s): %s",
               (unsigned long long)id, v->addr, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

int
peer_dial(TlsSource *tls, const ClusterConfig *cfg, uint64_t id,
          unsigned channel, int timeout_ms, char *err, size_t errcap)
{
    int64_t end = now_ms() + timeout_ms;
    int fd[2] = {-1, -1};
    Dial *d = calloc(1, sizeof *d);
    TlsCreds *c = tls_source_get(tls);

    if (!d || !c || !(d->tls = tls_conn_new(c, 0))) {
        if (c) tls_creds_unref(c);
        free(d);
        return errfmt(err, errcap, "peer_dial: out of memory");
    }
    tls_creds_unref(c);
    d->sp = -1;
    if ((d->tcp = connect_to(cfg, id, timeout_ms, err, errcap)) < 0 ||
        authenticate(d, cfg, id, channel, end, err, errcap) != 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fd) != 0) {
        dial_free(d);
        return -1;
    }
    d->sp = fd[1];
    struct timeval idle = {PEERDIAL_IDLE_MS / 1000, 0};
    setsockopt(d->sp, SOL_SOCKET, SO_SNDTIMEO, &idle, sizeof idle);
    /* the pump blocks every signal, as the raft thread does */
    pthread_t t;
    pthread_attr_t a;
    sigset_t all, old;
    sigfillset(&all);
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&t, &a, pump_main, d);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&a);
    if (rc != 0) {
        close(fd[0]);
        dial_free(d);
        return errfmt(err, errcap, "peer_dial: no thread");
    }
    return fd[0];
}
