/* conn.c - see conn.h. */
#include "conn/conn.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/common.h"

/* Input buffer: starts small (many idle connections stay cheap) and
 * doubles up to IBUF_MAX while a client pipelines. */
#define IBUF_MIN 4096
#define IBUF_MAX 65536

/* A connection stops having its commands run while this much output (bytes)
 * or this many unacknowledged replies are queued; it resumes as the client
 * reads. Bounds memory per connection whatever the client pipelines. */
#define OUT_CAP (256 * 1024)
#define MARKS_CAP 4096

static void read_cb(struct ev_loop *loop, ev_io *w, int revents);
static void write_cb(struct ev_loop *loop, ev_io *w, int revents);
static void hs_add(Conn *c);
static void hs_remove(Conn *c);

Conn *
conn_new(Server *s, int fd)
{
    return conn_new_via(s, fd, CONN_VIA_TCP, NULL, NULL, 0);
}

Conn *
conn_new_via(Server *s, int fd, uint8_t via, TlsSock *tls, const void *head,
             size_t n)
{
    size_t cap = IBUF_MIN;
    while (cap < n && cap < IBUF_MAX)
        cap *= 2;
    Conn *c = n <= IBUF_MAX ? calloc(1, sizeof *c) : NULL;
    if (!c || !(c->ibuf = malloc(cap))) {
        free(c);
        tls_sock_free(tls);
        close(fd);
        return NULL;
    }
    c->srv = s;
    c->fd = fd;
    c->via = via;
    c->tls = tls;
    c->opened_ns = mono_ns();
    c->icap = cap;
    if (n) memcpy(c->ibuf, head, n);
    c->iend = n;
    if (s->handler->opened(c) < 0) {
        free(c->ibuf);
        free(c);
        tls_sock_free(tls);
        close(fd);
        return NULL;
    }
    ev_io_init(&c->read_w, read_cb, fd, EV_READ);
    ev_io_init(&c->write_w, write_cb, fd, EV_WRITE);
    c->read_w.data = c->write_w.data = c;
    c->next = s->conns;
    if (s->conns) s->conns->prev = c;
    s->conns = c;
    s->cur_conns++;
    s->total_conns++;
    c->id = s->total_conns;
    c->last_cmd = ev_now(s->loop);
    if (n) conn_schedule(c);
    if (tls && !tls_sock_handshaken(tls)) hs_add(c); /* may close another */
    conn_update_read(c);
    /* a session handed over may hold records already read off the socket */
    if (tls && c->reading) ev_feed_event(s->loop, &c->read_w, EV_READ);
    return c;
}

Conn *
conn_new_sink(Server *s, uint8_t via, const ConnSink *sink, void *arg)
{
    Conn *c = conn_new_via(s, -1, via, NULL, NULL, 0);
    if (!c) return NULL;
    c->sink = sink; /* read_w was never started: fd -1 */
    c->sink_arg = arg;
    return c;
}

/* A closed connection no longer counts among those that sent input in the
 * current window or the one before it (state.h, active_now): the spins
 * that wait for a lone client's next command (server.c ack_spin, the
 * mutation thread's input spin) then still see one client that connects
 * for each put, as PHP producers do, as the one client it is. */
static void
uncount_active(Conn *c)
{
    Server *s = c->srv;

    if (c->active_window == s->active_window && s->active_now > 0)
        s->active_now--;
    else if (c->active_window + 1 == s->active_window && s->active_last > 0)
        s->active_last--;
}

void
conn_close(Conn *c)
{
    Server *s = c->srv;
    if (c->closed) return;
    c->closed = 1;
    ev_io_stop(s->loop, &c->read_w);
    ev_io_stop(s->loop, &c->write_w);
    hs_remove(c);
    if (c->tls) (void)tls_sock_close_notify(c->tls, c->fd); /* best effort */
    if (c->sink)
        c->sink->closed(c->sink_arg);
    else
        close(c->fd);
    s->handler->closed(c);
    if (c->producer) s->cur_producers--;
    if (c->worker) s->cur_workers--;
    s->cur_conns--;
    uncount_active(c);
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    c->dnext = s->dead;
    s->dead = c;
}

void
conn_reap(Server *s)
{
    while (s->dead) {
        Conn *c = s->dead;
        s->dead = c->dnext;
        free(c->ibuf);
        free(c->obuf);
        free(c->marks);
        free(c->in_body);
        tls_sock_free(c->tls);
        free(c->peer_cn);
        free(c);
    }
}

static int
out_parked(const Conn *c)
{
    return c->oend - c->osent > OUT_CAP || c->mlen >= MARKS_CAP;
}

/* Server.hs_head's list: TLS connections whose handshake goes on. */
static void
hs_remove(Conn *c)
{
    Server *s = c->srv;
    if (!c->in_hs) return;
    if (c->hprev)
        c->hprev->hnext = c->hnext;
    else
        s->hs_head = c->hnext;
    if (c->hnext)
        c->hnext->hprev = c->hprev;
    else
        s->hs_tail = c->hprev;
    c->hprev = c->hnext = NULL;
    c->in_hs = 0;
    s->hs_count--;
}

/* Appends c; beyond CONN_HANDSHAKES_MAX the oldest is closed. */
static void
hs_add(Conn *c)
{
    Server *s = c->srv;
    c->in_hs = 1;
    c->hprev = s->hs_tail;
    if (s->hs_tail)
        s->hs_tail->hnext = c;
    else
        s->hs_head = c;
    s->hs_tail = c;
    if (++s->hs_count > CONN_HANDSHAKES_MAX) conn_close(s->hs_head);
}

const char *
conn_peer_cn(const Conn *c)
{
    return c->peer_cn;
}

/* Once c's TLS handshake has completed: notes its client certificate's
 * CN, if it sent one that verified. */
static void
tls_secured(Conn *c)
{
    char cn[256];
    if (c->secured) return;
    c->secured = 1;
    hs_remove(c);
    if (c->via != CONN_VIA_RELAY && c->via != CONN_VIA_RELAY_UNIX &&
        /* a relay's certificate is a node's */
        tls_peer_cn(tls_conn_ssl(tls_sock_conn(c->tls)), cn, sizeof cn) == 0)
        c->peer_cn = strdup(cn);
}

void
conn_sweep_tls(Server *s, int64_t cut)
{
    while (s->hs_head && s->hs_head->opened_ns <= cut)
        conn_close(s->hs_head);
    for (Conn *c = s->conns; c; c = c->next)
        if (c->tls && tls_sock_handshaken(c->tls) &&
            c->active_window != s->active_window && !c->writing &&
            c->osent == c->oend)
            tls_sock_trim(c->tls); /* quiet: its buffers go back */
}

/* Watches c's socket for writability while TLS holds ciphertext for it
 * (a handshake flight or a record the socket did not take). */
static void
tls_want_write(Conn *c)
{
    if (c->tls && !c->writing && !c->closed && tls_sock_want_write(c->tls)) {
        c->writing = 1;
        ev_io_start(c->srv->loop, &c->write_w);
    }
}

void
conn_update_read(Conn *c)
{
    Server *s = c->srv;
    int want = c->lingering
                   ? !c->closed
                   : !c->closed && !c->eof && !s->stopping && !out_parked(c) &&
                         !(s->throttled && c->producer) &&
                         !(c->iend - c->ibeg >= IBUF_MAX);
    if (c->fd < 0) { /* virtual (or not yet a sink's): pulled, not read */
        int was = c->reading;
        c->reading = (uint8_t)want;
        if (want && !was && c->sink)
            ev_feed_event(s->loop, &c->read_w, EV_READ);
        return;
    }
    if (want && !c->reading)
        ev_io_start(s->loop, &c->read_w);
    else if (!want && c->reading)
        ev_io_stop(s->loop, &c->read_w);
    c->reading = (uint8_t)want;
    /* plaintext TLS decrypted past the buffer's end: the socket may stay
     * quiet, so the read is run without it */
    if (want && c->tls && tls_sock_more(c->tls))
        ev_feed_event(s->loop, &c->read_w, EV_READ);
}

static void
pending_add(Conn *c)
{
    if (c->in_pending || c->closed) return;
    c->in_pending = 1;
    c->pnext = c->srv->pending;
    c->srv->pending = c;
}

void
conn_close_after_replies(Conn *c)
{
    c->closing = 1;
    pending_add(c);
}

void
conn_schedule(Conn *c)
{
    if (c->in_runq || c->closed) return;
    c->in_runq = 1;
    c->rnext = c->srv->runq;
    c->srv->runq = c;
}

/* Makes room for n more output bytes. */
static void
out_room(Conn *c, size_t n)
{
    size_t used = (size_t)(c->oend - c->osent);
    if (c->oend - c->obase + n <= c->ocap) return;
    if (c->osent > c->obase) { /* drop what was sent */
        memmove(c->obuf, c->obuf + (c->osent - c->obase), used);
        c->obase = c->osent;
        if (used + n <= c->ocap) return;
    }
    size_t cap = c->ocap ? c->ocap * 2 : 4096;
    while (cap < used + n)
        cap *= 2;
    char *b = realloc(c->obuf, cap);
    if (!b) abort(); /* out of memory */
    c->obuf = b;
    c->ocap = cap;
}

static void
out_append(Conn *c, const void *p, size_t n)
{
    out_room(c, n);
    memcpy(c->obuf + (c->oend - c->obase), p, n);
    c->oend += n;
}

/* Ends a reply: it may leave once the store acknowledges sequence need
 * and every earlier reply of c has left (at once if both hold). */
static void
out_mark(Conn *c, uint64_t need)
{
    Server *s = c->srv;
    if (c->mlen == 0 && need <= s->acked_seq) {
        c->orel = c->oend;
    } else {
        if (c->mlen == c->mcap) {
            size_t ncap = c->mcap ? c->mcap * 2 : 16;
            OutMark *m = malloc(ncap * sizeof *m);
            if (!m) abort();
            for (size_t i = 0; i < c->mlen; i++)
                m[i] = c->marks[(c->mhead + i) % c->mcap];
            free(c->marks);
            c->marks = m;
            c->mcap = ncap;
            c->mhead = 0;
        }
        c->marks[(c->mhead + c->mlen++) % c->mcap] =
            (OutMark){.need = need, .end = c->oend};
    }
    pending_add(c);
}

void
conn_reply(Conn *c, const char *msg, size_t n)
{
    if (c->closed) return;
    out_append(c, msg, n);
    out_mark(c, state_reply_seq(c->srv));
}

void
conn_replyf(Conn *c, const char *fmt, ...)
{
    char buf[LINE_MAX_BYTES + 64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof buf)
        conn_reply_lit(c, "INTERNAL_ERROR\r\n");
    else
        conn_reply(c, buf, (size_t)n);
}

void
conn_reply_at(Conn *c, const char *head, size_t hn, const char *body, size_t bn,
              uint64_t need)
{
    if (c->closed) return;
    out_append(c, head, hn);
    if (bn) out_append(c, body, bn);
    out_mark(c, need);
}

void
conn_pause(Conn *c)
{
    c->in_state = IN_PAUSED;
}

void
conn_resume(Conn *c)
{
    if (c->in_state == IN_PAUSED) c->in_state = IN_CMD;
    conn_schedule(c);
}

void
conn_reply_ok(Conn *c, const char *body, size_t len)
{
    char head[32];
    int n = snprintf(head, sizeof head, "OK %zu\r\n", len - 2);
    if (c->closed) return;
    out_append(c, head, (size_t)n);
    out_append(c, body, len);
    out_mark(c, state_reply_seq(c->srv));
}

/* Moves acknowledged replies into the writable range. */
static void
out_release(Conn *c)
{
    uint64_t acked = c->srv->acked_seq;
    while (c->mlen && c->marks[c->mhead].need <= acked) {
        c->orel = c->marks[c->mhead].end;
        c->mhead = (c->mhead + 1) % c->mcap;
        c->mlen--;
    }
}

/* Writes what may leave. Returns -1 if the connection was closed. */
static int
out_write(Conn *c)
{
    if (c->tls && !c->writing && tls_sock_flush(c->tls, c->fd) < 0) {
        conn_close(c);
        return -1;
    }
    while (c->orel > c->osent && !c->writing) {
        const char *p = c->obuf + (c->osent - c->obase);
        size_t len = (size_t)(c->orel - c->osent);
        if (c->sink) {
            size_t k = c->sink->write(c->sink_arg, p, len);
            c->osent += k;
            if (k < len) c->writing = 1; /* until conn_sink_writable */
            continue;
        }
        ssize_t n = c->tls ? tls_sock_write(c->tls, c->fd, p, len)
                           : write(c->fd, p, len);
        if (n > 0) {
            c->osent += (uint64_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            c->writing = 1;
            ev_io_start(c->srv->loop, &c->write_w);
        } else {
            conn_close(c); /* peer gone: its reserved jobs go back */
            return -1;
        }
    }
    tls_want_write(c);
    if (c->osent == c->oend) {
        c->obase = c->osent;
        if (c->ocap > 65536) { /* give a burst's buffer back */
            free(c->obuf);
            c->obuf = NULL;
            c->ocap = 0;
        }
    }
    return 0;
}

/* Releases and writes c's output; closes a closing connection once
 * everything left; resumes a connection parked on output. */
static void
conn_flush(Conn *c)
{
    int parked = out_parked(c);
    out_release(c);
    if (out_write(c) < 0) return;
    if (c->osent != c->oend || c->mlen ||
        (c->tls && tls_sock_want_write(c->tls)))
        pending_add(c);
    else if (c->closing) {
        conn_close(c);
        return;
    }
    if (parked && !out_parked(c)) {
        conn_schedule(c);
        conn_update_read(c);
    }
}

/* Whether c has nothing to write until the store acknowledges more: all
 * its output waits behind a mark not yet acknowledged. conn_flush would
 * then only put it back on the pending list. Most connections are so at
 * c=100 while a group is synced: skipping them took conn_flush from 8.9
 * calls per cycle to 3.4 (cycle c=100 over 1,000 tubes, callgrind). TLS
 * connections are always flushed (their library may hold ciphertext to write).
 */
static int
out_waiting(const Conn *c)
{
    return !c->tls && c->osent == c->orel && c->mlen &&
           c->marks[c->mhead].need > c->srv->acked_seq;
}

void
conn_flush_all(Server *s)
{
    Conn *list = s->pending;
    s->pending = NULL;
    while (list) {
        Conn *c = list;
        list = c->pnext;
        c->pnext = NULL;
        c->in_pending = 0;
        if (!c->closed && !c->writing && !out_waiting(c))
            conn_flush(c);
        else if (!c->closed)
            pending_add(c); /* the write watcher, or the store, goes on */
    }
}

static void
write_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    Conn *c = w->data;
    (void)revents;
    ev_io_stop(loop, w);
    c->writing = 0;
    conn_flush(c);
}

/* Finds a complete command line at the head of the input, by beanstalkd's
 * rule: within the first LINE_MAX_BYTES bytes, the first CR must be
 * followed by LF. Returns the line length without CRLF, or -1. */
static long
line_end(const char *p, size_t avail)
{
    size_t win = avail < LINE_MAX_BYTES ? avail : LINE_MAX_BYTES;
    const char *cr = win >= 2 ? memchr(p, '\r', win - 1) : NULL;
    return cr && cr[1] == '\n' ? cr - p : -1;
}

/* One step of the input state machine. Returns 1 if it consumed input or
 * changed state, 0 if it needs more bytes. */
static int
in_step(Conn *c)
{
    char *p = c->ibuf + c->ibeg;
    size_t avail = c->iend - c->ibeg, n;
    long len;

    switch (c->in_state) {
    case IN_CMD:
    case IN_ENDLINE:
        if ((len = line_end(p, avail)) >= 0) {
            c->ibeg += (size_t)len + 2;
            if (c->in_state == IN_CMD) {
                c->last_cmd = ev_now(c->srv->loop);
                c->srv->handler->line(c, p, (size_t)len);
            } else {
                c->in_state = IN_CMD;
                c->srv->handler->bad_line(c);
            }
            return 1;
        }
        if (avail < LINE_MAX_BYTES) return 0;
        c->ibeg += LINE_MAX_BYTES; /* too long: drop it, as 1.12 does */
        c->in_state = IN_ENDLINE;
        return 1;
    case IN_BODY:
        n = c->put.body_size + 2 - c->in_read;
        if (n > avail) n = avail;
        memcpy(c->in_body + c->in_read, p, n);
        c->in_read += n;
        c->ibeg += n;
        if (c->in_read < (size_t)c->put.body_size + 2) return 0;
        c->in_state = IN_CMD;
        c->srv->handler->body(c);
        return 1;
    case IN_SKIP:
        n = avail < c->skip_left ? avail : (size_t)c->skip_left;
        c->ibeg += n;
        c->skip_left -= n;
        if (c->skip_left) return 0;
        c->in_state = IN_CMD;
        conn_reply(c, c->skip_reply, strlen(c->skip_reply));
        return 1;
    }
    return 0; /* IN_PAUSED */
}

/* Runs c's buffered input until it blocks, needs bytes or must wait for
 * its output to drain; then decides what the end of its input means. */
static void
conn_process(Conn *c)
{
    if (c->srv->stopping) return; /* shutting down: no new commands */
    for (;;) {
        while (!c->closed && !c->closing && !out_parked(c) && in_step(c))
            ;
        if (c->closed || c->closing || out_parked(c) || !c->eof) break;
        if (c->in_state != IN_PAUSED) {
            conn_close_after_replies(c); /* the client is done */
            break;
        }
        c->srv->handler->hangup(c); /* may resume the input */
        if (c->in_state == IN_PAUSED) break;
    }
    if (c->ibeg == c->iend) c->ibeg = c->iend = 0;
    if (!c->closed) conn_update_read(c);
}

void
conn_run_all(Server *s)
{
    while (s->runq) {
        Conn *c = s->runq;
        s->runq = c->rnext;
        c->rnext = NULL;
        c->in_runq = 0;
        if (!c->closed) conn_process(c);
    }
}

/* Where the next read goes: straight into a put body when nothing is
 * buffered, else the input buffer (compacted or grown). NULL if full. */
static char *
read_target(Conn *c, size_t *room)
{
    if (c->in_state == IN_BODY && c->ibeg == c->iend) {
        *room = c->put.body_size + 2 - c->in_read;
        return c->in_body + c->in_read;
    }
    if (c->ibeg > 0 && c->iend == c->icap) {
        memmove(c->ibuf, c->ibuf + c->ibeg, c->iend - c->ibeg);
        c->iend -= c->ibeg;
        c->ibeg = 0;
    }
    if (c->iend == c->icap && c->icap < IBUF_MAX) {
        char *b = realloc(c->ibuf, c->icap * 2);
        if (b) {
            c->ibuf = b;
            c->icap *= 2;
        }
    }
    *room = c->icap - c->iend;
    return *room ? c->ibuf + c->iend : NULL;
}

void
conn_linger(Conn *c)
{
    if (c->sink) { /* its replies are the sink's already */
        conn_close(c);
        return;
    }
    if (c->closed || c->lingering) return;
    c->lingering = 1;
    if (c->tls) (void)tls_sock_close_notify(c->tls, c->fd); /* best effort */
    shutdown(c->fd, SHUT_WR);
    conn_update_read(c);
}

/* Reads and discards a lingering connection's input (at most 1 MiB a
 * call, so a client that keeps sending cannot hold the loop past the
 * linger timer); closes it at EOF. */
static void
linger_read(Conn *c)
{
    char buf[16384];
    for (int k = 0; k < 64; k++) {
        ssize_t n = read(c->fd, buf, sizeof buf);
        if (n > 0) continue;
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        conn_close(c);
        return;
    }
}

/* Where the next bytes of input went (dst, n > 0 bytes): counts them. */
static void
in_took(Conn *c, const char *dst, size_t n)
{
    if (c->active_window != c->srv->active_window) {
        c->active_window = c->srv->active_window;
        c->srv->active_now++;
    }
    c->srv->active_bytes_now += n;
    if (dst == c->ibuf + c->iend)
        c->iend += n;
    else if ((c->in_read += n) == (size_t)c->put.body_size + 2) {
        c->in_state = IN_CMD;
        c->srv->handler->body(c);
    }
}

size_t
conn_feed(Conn *c, const char *p, size_t n)
{
    size_t took = 0, room;
    while (took < n && !c->closed && c->reading) {
        char *dst = read_target(c, &room);
        if (!dst) {
            conn_update_read(c);
            break;
        }
        size_t k = n - took < room ? n - took : room;
        memcpy(dst, p + took, k);
        took += k;
        in_took(c, dst, k);
        conn_process(c);
    }
    return took;
}

void
conn_feed_eof(Conn *c)
{
    if (c->closed) return;
    c->eof = 1;
    conn_process(c);
}

void
conn_sink_writable(Conn *c)
{
    if (c->closed || !c->writing) return;
    c->writing = 0;
    conn_flush(c);
}

static void
read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    Conn *c = w->data;
    size_t room;
    (void)loop;
    (void)revents;
    if (c->sink) {
        if (!c->closed && c->reading) c->sink->pull(c->sink_arg);
        return;
    }
    if (c->lingering) {
        linger_read(c);
        return;
    }
    char *dst = read_target(c, &room);
    if (!dst) {
        conn_update_read(c);
        return;
    }
    ssize_t n = c->tls ? tls_sock_read(c->tls, c->fd, dst, room)
                       : read(c->fd, dst, room);
    if (c->tls && tls_sock_handshaken(c->tls)) tls_secured(c);
    tls_want_write(c);
    if (n < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            conn_close(c);
        return;
    }
    if (n == 0)
        c->eof = 1;
    else
        in_took(c, dst, (size_t)n);
    conn_process(c);
}
