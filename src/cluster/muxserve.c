/* muxserve.c - see muxserve.h. */
#include "cluster/muxserve.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn/conn.h"

#define BUCKETS 256

typedef struct MuxServe MuxServe;

/* One stream: its connection and the input waiting for it. */
typedef struct MStream {
    MuxServe *m;
    struct MStream *hnext; /* m->tab's chain */
    uint32_t id;
    Conn *c;
    char *in; /* MUX_WINDOW bytes once needed; [ibeg, iend) wait */
    size_t ibeg, iend;
    size_t credit; /* output bytes the follower takes now */
    size_t grant;  /* input bytes taken, not yet granted back */
    int eof;       /* EOF came: fed once in is empty */
    int gone;      /* the follower forgot it (CLOSE, link dead) */
    int dead;      /* closed while busy: freed by its frame's handler */
    int pipe_fd;   /* detached (a backup's sender): our end, or -1 */
    ev_io pipe_w;  /* ... read into DATA while credit lasts, once the
                    * connection has closed */
} MStream;

struct MuxServe {
    MuxServeSet *set;
    MuxServe *prev, *next;
    MuxLink *l;
    MStream *tab[BUCKETS];
    size_t count;
    MStream *busy; /* the stream a frame is being handled for */
};

static MStream **
slot(MuxServe *m, uint32_t id)
{
    MStream **p = &m->tab[id % BUCKETS];
    while (*p && (*p)->id != id)
        p = &(*p)->hnext;
    return p;
}

static void
stream_free(MStream *st)
{
    MuxServe *m = st->m;
    if (st->pipe_fd >= 0) {
        ev_io_stop(m->set->srv->loop, &st->pipe_w);
        close(st->pipe_fd);
    }
    MStream **p = slot(m, st->id);
    if (*p == st) *p = st->hnext;
    m->count--;
    m->set->streams--;
    free(st->in);
    free(st);
}

/* A detached stream's pipe: its bytes as DATA, within the credit; its
 * end (or an error) ends the stream. */
static void
on_pipe(struct ev_loop *loop, ev_io *w, int revents)
{
    MStream *st = w->data;
    (void)revents;
    if (!st->credit) {
        ev_io_stop(loop, w);
        return;
    }
    size_t max = st->credit < MUX_FRAME_MAX ? st->credit : MUX_FRAME_MAX;
    unsigned char *p = mux_link_data_begin(st->m->l, max);
    ssize_t n = read(st->pipe_fd, p, max);
    mux_link_data_end(st->m->l, st->id, n > 0 ? (size_t)n : 0);
    if (n > 0) {
        st->credit -= (size_t)n;
        if (!st->credit) ev_io_stop(loop, w);
    } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        if (!st->gone) mux_link_send(st->m->l, MUX_CLOSE, st->id, NULL, 0);
        stream_free(st);
    }
}

/* ConnSink: a socketpair whose far end carries the rest of the output. */
static int
sink_detach(void *arg)
{
    MStream *st = arg;
    int sp[2];
    if (st->pipe_fd >= 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sp) <
            0)
        return -1;
    st->pipe_fd = sp[0];
    ev_io_init(&st->pipe_w, on_pipe, sp[0], EV_READ);
    st->pipe_w.data = st;
    return sp[1];
}

/* ConnSink: the connection closed. */
static void
sink_closed(void *arg)
{
    MStream *st = arg;
    if (st->pipe_fd >= 0 && !st->gone) { /* detached: the pipe goes on */
        st->c = NULL;
        ev_io_start(st->m->set->srv->loop, &st->pipe_w);
        return;
    }
    if (!st->gone) mux_link_send(st->m->l, MUX_CLOSE, st->id, NULL, 0);
    st->gone = 1;
    st->c = NULL;
    if (st->m->busy == st)
        st->dead = 1;
    else
        stream_free(st);
}

/* ConnSink: output, as far as the follower's credit goes. */
static size_t
sink_write(void *arg, const char *p, size_t n)
{
    MStream *st = arg;
    size_t k = n < st->credit ? n : st->credit, at = 0;
    while (at < k) {
        size_t f = k - at < MUX_FRAME_MAX ? k - at : MUX_FRAME_MAX;
        mux_link_send(st->m->l, MUX_DATA, st->id, p + at, f);
        at += f;
    }
    st->credit -= k;
    return k;
}

/* Gives what waits to the connection while it takes it; grants credit
 * back; passes the EOF on once all is taken. st may be dead on return
 * (when busy) or freed (when not: only from sink_pull). */
static void
feed(MStream *st)
{
    while (st->c && st->ibeg < st->iend) {
        size_t k = conn_feed(st->c, st->in + st->ibeg, st->iend - st->ibeg);
        st->ibeg += k;
        st->grant += k;
        if (!k) break;
    }
    if (st->ibeg == st->iend) st->ibeg = st->iend = 0;
    if (st->c && st->grant >= MUX_GRANT) {
        unsigned char w[4];
        for (int i = 0; i < 4; i++)
            w[i] = (unsigned char)(st->grant >> (8 * i));
        mux_link_send(st->m->l, MUX_WINDOW_T, st->id, w, 4);
        st->grant = 0;
    }
    if (st->c && st->eof == 1 && st->iend == 0) {
        st->eof = 2;
        conn_feed_eof(st->c);
    }
}

static void
sink_pull(void *arg)
{
    MStream *st = arg;
    MuxServe *m = st->m;
    m->busy = st;
    feed(st);
    m->busy = NULL;
    if (st->dead) stream_free(st);
}

static const ConnSink SINK = {sink_write, sink_pull, sink_closed, sink_detach};

/* OPEN: a new connection, or CLOSE back when over a bound. */
static int
on_open(MuxServe *m, const MuxFrame *f)
{
    Server *s = m->set->srv;
    MStream **p = slot(m, f->id), *st;
    if (*p) return -1; /* an id reused: malformed */
    if (m->count >= MUX_STREAMS_MAX || s->stopping ||
        (s->cfg.max_conns &&
         s->cur_conns + (m->set->others ? m->set->others(s) : 0) >=
             s->cfg.max_conns) ||
        !(st = calloc(1, sizeof *st))) {
        mux_link_send(m->l, MUX_CLOSE, f->id, NULL, 0);
        return 0;
    }
    st->m = m;
    st->id = f->id;
    st->credit = MUX_WINDOW;
    st->pipe_fd = -1;
    *p = st;
    m->count++;
    m->set->streams++;
    uint8_t via =
        f->kind == MUX_KIND_UNIX ? CONN_VIA_RELAY_UNIX : CONN_VIA_RELAY;
    st->c = conn_new_sink(s, via, &SINK, st);
    if (!st->c) {
        mux_link_send(m->l, MUX_CLOSE, f->id, NULL, 0);
        stream_free(st);
        return 0;
    }
    if (f->cn_len) st->c->peer_cn = strndup(f->cn, f->cn_len);
    return 0;
}

/* DATA: input for st, within its window. */
static int
on_data(MStream *st, const MuxFrame *f)
{
    size_t n = f->len, k = 0;
    if (st->eof || st->iend - st->ibeg + st->grant + n > MUX_WINDOW) return -1;
    if (st->ibeg == st->iend && st->c) {
        k = conn_feed(st->c, (const char *)f->data, n);
        st->grant += k;
    }
    if (k < n && st->c) {
        if (!st->in && !(st->in = malloc(MUX_WINDOW))) return -1;
        if (st->iend + n - k > MUX_WINDOW) {
            memmove(st->in, st->in + st->ibeg, st->iend - st->ibeg);
            st->iend -= st->ibeg;
            st->ibeg = 0;
        }
        memcpy(st->in + st->iend, f->data + k, n - k);
        st->iend += n - k;
    }
    feed(st);
    return 0;
}

static int
on_frame(void *arg, MuxLink *l, const MuxFrame *f)
{
    MuxServe *m = arg;
    (void)l;
    if (f->type == MUX_OPEN) return on_open(m, f);
    MStream *st = *slot(m, f->id);
    if (!st) return 0; /* closed here, the follower not told yet */
    int rc = 0;
    m->busy = st;
    switch (f->type) {
    case MUX_DATA:
        rc = on_data(st, f);
        break;
    case MUX_EOF:
        if (st->eof) rc = -1;
        st->eof = 1;
        feed(st);
        break;
    case MUX_CLOSE:
        st->gone = 1;
        if (st->c)
            conn_close(st->c);
        else
            st->dead = 1; /* detached: the sender sees its socket close */
        break;
    case MUX_WINDOW_T:
        if (st->credit + f->credit > MUX_WINDOW) {
            rc = -1;
            break;
        }
        st->credit += f->credit;
        if (st->c) conn_sink_writable(st->c);
        if (!st->c && st->pipe_fd >= 0) /* detached */
            ev_io_start(m->set->srv->loop, &st->pipe_w);
        break;
    }
    m->busy = NULL;
    if (st->dead) stream_free(st);
    return rc;
}

/* Closes every connection of m (the follower is not told) and frees m;
 * l is closed too unless the link is dying on its own (dying). */
static void
serve_free(MuxServe *m, int dying)
{
    for (int b = 0; b < BUCKETS; b++)
        while (m->tab[b]) {
            MStream *st = m->tab[b];
            st->gone = 1;
            if (st->c)
                conn_close(st->c); /* frees st */
            else
                stream_free(st);
        }
    if (m->prev)
        m->prev->next = m->next;
    else
        m->set->head = m->next;
    if (m->next) m->next->prev = m->prev;
    m->set->links--;
    if (!dying) mux_link_close(m->l);
    free(m);
}

static void
on_dead(void *arg, MuxLink *l)
{
    (void)l;
    serve_free(arg, 1);
}

static const MuxLinkOps OPS = {on_frame, on_dead};

void
mux_serve_init(MuxServeSet *set, Server *srv,
               size_t (*others)(const Server *srv))
{
    memset(set, 0, sizeof *set);
    set->srv = srv;
    set->others = others;
}

int
mux_serve_accept(MuxServeSet *set, int fd, TlsSock *x, const void *head,
                 size_t n)
{
    MuxServe *m = calloc(1, sizeof *m);
    if (!m) {
        tls_sock_free(x);
        close(fd);
        return -1;
    }
    m->set = set;
    if (!(m->l = mux_link_accept(set->srv->loop, fd, x, head, n, &OPS, m))) {
        free(m);
        return -1;
    }
    m->next = set->head;
    if (set->head) set->head->prev = m;
    set->head = m;
    set->links++;
    return 0;
}

void
mux_serve_close_all(MuxServeSet *set)
{
    while (set->head)
        serve_free(set->head, 0);
}
