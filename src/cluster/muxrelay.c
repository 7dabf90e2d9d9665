/* muxrelay.c - see muxrelay.h. */
#include "cluster/muxrelay.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cluster/proxy.h"

#define BUCKETS 256

typedef struct MuxRelay MuxRelay;

/* One relayed client. */
typedef struct RStream {
    MuxRelay *r;
    struct RStream *hnext;       /* r->tab's chain, while the id is known */
    struct RStream *prev, *next; /* r->all */
    uint32_t id;
    int fd;
    ev_io rd, wr;
    char *out; /* MUX_WINDOW bytes once needed: [obeg, oend) for the client */
    size_t obeg, oend;
    size_t credit; /* bytes the leader takes now */
    size_t grant;  /* bytes the client took, not yet granted back */
    bool cl_eof;   /* the client sent FIN (EOF passed on) */
    bool up_done;  /* the leader closed it (its id forgotten) */
    bool shut;     /* FIN sent to the client */
} RStream;

struct MuxRelay {
    MuxRelaySet *set;
    MuxLink *l;
    RStream *tab[BUCKETS];
    RStream *all;
    size_t count;
    uint32_t next_id;
};

static bool
again(void)
{
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

static RStream **
slot(MuxRelay *r, uint32_t id)
{
    RStream **p = &r->tab[id % BUCKETS];
    while (*p && (*p)->id != id)
        p = &(*p)->hnext;
    return p;
}

/* Forgets st's id (the leader's frames for it are ignored from now). */
static void
unmap(RStream *st)
{
    RStream **p = slot(st->r, st->id);
    if (*p == st) *p = st->hnext;
    st->hnext = NULL;
}

/* Closes the client and frees st; tell: CLOSE goes to the leader. */
static void
stream_end(RStream *st, bool tell)
{
    MuxRelay *r = st->r;
    if (tell && !st->up_done) mux_link_send(r->l, MUX_CLOSE, st->id, NULL, 0);
    if (!st->up_done) unmap(st);
    ev_io_stop(r->set->loop, &st->rd);
    ev_io_stop(r->set->loop, &st->wr);
    close(st->fd);
    if (st->prev)
        st->prev->next = st->next;
    else
        r->all = st->next;
    if (st->next) st->next->prev = st->prev;
    r->count--;
    r->set->count--;
    free(st->out);
    free(st);
}

/* Grants back what the client took, once it is worth a frame. */
static void
grant(RStream *st)
{
    if (st->up_done || st->grant < MUX_GRANT) return;
    unsigned char w[4];
    for (int i = 0; i < 4; i++)
        w[i] = (unsigned char)(st->grant >> (8 * i));
    mux_link_send(st->r->l, MUX_WINDOW_T, st->id, w, 4);
    st->grant = 0;
}

/* After any change: the leader's end passed on, the watchers set. Returns
 * -1 when st was freed. */
static int
update(RStream *st)
{
    struct ev_loop *loop = st->r->set->loop;
    bool pending = st->oend > st->obeg;
    if (st->up_done && !pending && !st->shut) {
        shutdown(st->fd, SHUT_WR);
        st->shut = true;
    }
    if (st->shut && st->cl_eof) {
        stream_end(st, false);
        return -1;
    }
    proxy_io_set(loop, &st->rd, !st->cl_eof && (st->credit > 0 || st->up_done));
    proxy_io_set(loop, &st->wr, pending);
    return 0;
}

/* Writes what waits for the client: 0, or -1 (client gone: st ended). */
static int
out_write(RStream *st)
{
    while (st->obeg < st->oend) {
        ssize_t n =
            send(st->fd, st->out + st->obeg, st->oend - st->obeg, MSG_NOSIGNAL);
        if (n < 0) {
            if (again()) break;
            stream_end(st, true);
            return -1;
        }
        st->obeg += (size_t)n;
        st->grant += (size_t)n;
    }
    if (st->obeg == st->oend) st->obeg = st->oend = 0;
    grant(st);
    return 0;
}

static void
on_client_write(struct ev_loop *loop, ev_io *w, int revents)
{
    RStream *st = w->data;
    (void)loop, (void)revents;
    if (out_write(st) == 0) update(st);
}

static void
on_client_read(struct ev_loop *loop, ev_io *w, int revents)
{
    RStream *st = w->data;
    MuxLink *l = st->r->l;
    (void)loop, (void)revents;
    if (st->up_done) { /* the leader is done: read to the client's end */
        char junk[4096];
        ssize_t n = recv(st->fd, junk, sizeof junk, 0);
        if (n == 0 || (n < 0 && !again())) stream_end(st, false);
        return;
    }
    size_t max = st->credit < MUX_FRAME_MAX ? st->credit : MUX_FRAME_MAX;
    unsigned char *p = mux_link_data_begin(l, max);
    ssize_t n = recv(st->fd, p, max, 0);
    mux_link_data_end(l, st->id, n > 0 ? (size_t)n : 0);
    if (n > 0) {
        st->credit -= (size_t)n;
    } else if (n == 0) {
        st->cl_eof = true;
        mux_link_send(l, MUX_EOF, st->id, NULL, 0);
    } else if (!again()) {
        stream_end(st, true);
        return;
    }
    update(st);
}

/* DATA from the leader: to the client now, else kept (within the credit
 * the leader had: more is malformed). */
static int
on_data(RStream *st, const MuxFrame *f)
{
    size_t n = f->len, k = 0;
    if (st->oend - st->obeg + st->grant + n > MUX_WINDOW) return -1;
    if (st->obeg == st->oend) {
        ssize_t w = send(st->fd, f->data, n, MSG_NOSIGNAL);
        if (w < 0 && !again()) {
            stream_end(st, true);
            return 0;
        }
        k = w > 0 ? (size_t)w : 0;
        st->grant += k;
    }
    if (k < n) {
        if (!st->out && !(st->out = malloc(MUX_WINDOW))) return -1;
        if (st->oend + n - k > MUX_WINDOW) {
            memmove(st->out, st->out + st->obeg, st->oend - st->obeg);
            st->oend -= st->obeg;
            st->obeg = 0;
        }
        memcpy(st->out + st->oend, f->data + k, n - k);
        st->oend += n - k;
    }
    grant(st);
    update(st);
    return 0;
}

static int
on_frame(void *arg, MuxLink *l, const MuxFrame *f)
{
    MuxRelay *r = arg;
    (void)l;
    if (f->type == MUX_OPEN) return -1; /* the leader opens none */
    RStream *st = *slot(r, f->id);
    if (!st) return 0; /* closed here, the leader not told yet */
    switch (f->type) {
    case MUX_DATA:
        return on_data(st, f);
    case MUX_EOF: /* the leader never half-closes: as CLOSE */
    case MUX_CLOSE:
        st->up_done = true;
        unmap(st);
        update(st);
        return 0;
    case MUX_WINDOW_T:
        if (st->credit + f->credit > MUX_WINDOW) return -1;
        st->credit += f->credit;
        update(st);
        return 0;
    }
    return -1;
}

/* Closes every client of r and frees it (l closed unless dying). */
static void
relay_free(MuxRelay *r, bool dying)
{
    while (r->all) {
        r->all->up_done = true; /* nothing more goes on the link */
        stream_end(r->all, false);
    }
    if (r->set->cur == r) r->set->cur = NULL;
    if (!dying) mux_link_close(r->l);
    free(r);
}

static void
on_dead(void *arg, MuxLink *l)
{
    (void)l;
    relay_free(arg, true);
}

static const MuxLinkOps OPS = {on_frame, on_dead};

void
mux_relay_init(MuxRelaySet *set, struct ev_loop *loop)
{
    memset(set, 0, sizeof *set);
    set->loop = loop;
}

int
mux_relay_linked(const MuxRelaySet *set)
{
    return set->cur != NULL;
}

int
mux_relay_dial(MuxRelaySet *set, const struct sockaddr_in *up, TlsConn *t,
               uint64_t want_id, const unsigned char *pre, size_t pre_len,
               double timeout)
{
    MuxRelay *r = calloc(1, sizeof *r);
    if (!r) {
        tls_conn_free(t);
        return -1;
    }
    r->set = set;
    r->next_id = 1;
    r->l = mux_link_dial(set->loop, up, t, want_id, pre, pre_len, timeout, &OPS,
                         r);
    if (!r->l) {
        free(r);
        return -1;
    }
    mux_relay_close_all(set); /* one link at a time */
    set->cur = r;
    return 0;
}

int
mux_relay_add(MuxRelaySet *set, int client_fd, unsigned kind)
{
    MuxRelay *r = set->cur;
    int one = 1, flags = fcntl(client_fd, F_GETFL);
    RStream *st;
    if (!r || r->count >= MUX_STREAMS_MAX || r->next_id == 0 || flags < 0 ||
        fcntl(client_fd, F_SETFL, flags | O_NONBLOCK) < 0 ||
        !(st = calloc(1, sizeof *st)))
        return -1;
    setsockopt(client_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    st->r = r;
    st->id = r->next_id++; /* never reused on a link; 0 ends it */
    st->fd = client_fd;
    st->credit = MUX_WINDOW;
    ev_io_init(&st->rd, on_client_read, client_fd, EV_READ);
    ev_io_init(&st->wr, on_client_write, client_fd, EV_WRITE);
    st->rd.data = st->wr.data = st;
    RStream **p = slot(r, st->id);
    *p = st;
    st->next = r->all;
    if (r->all) r->all->prev = st;
    r->all = st;
    r->count++;
    set->count++;
    set->total++;
    unsigned char open[2] = {(unsigned char)kind, 0};
    mux_link_send(r->l, MUX_OPEN, st->id, open, sizeof open);
    update(st);
    return 0;
}

void
mux_relay_close_all(MuxRelaySet *set)
{
    if (set->cur) relay_free(set->cur, false);
}
