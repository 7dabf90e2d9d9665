/* server/backup.c - the rockstalk-backup command (see server/backup.h). */
#include "server/backup.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/log.h"
#include "cluster/nodestep.h"
#include "net/tlssock.h"
#include "base/common.h"
#include "store/store.h"

/* The senders of one server (Server.backups). */
typedef struct Backups {
    pthread_mutex_t mu;
    int fd[BACKUP_SENDERS_MAX]; /* a running sender's socket, or -1 */
    int stopping;               /* backup_stop ran: no new sender */
} Backups;

/* One sender's work. */
typedef struct Sender {
    Backups *b;
    Store *store;
    TlsSock *tls; /* the connection's TLS session, or NULL (owned) */
    int slot, fd, nshards;
    int cluster; /* the store is a Raft node's (for the log) */
} Sender;

/* s's senders, made at the first backup; NULL when memory lacks. */
static Backups *
backups_get(Server *s)
{
    if (s->backups) return s->backups;
    Backups *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    pthread_mutex_init(&b->mu, NULL);
    for (int i = 0; i < BACKUP_SENDERS_MAX; i++)
        b->fd[i] = -1;
    return s->backups = b;
}

/* Waits up to BACKUP_SEND_S for fd to take bytes. */
static int
wait_writable(int fd, char *err, size_t errcap)
{
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int r;

    while ((r = poll(&p, 1, BACKUP_SEND_S * 1000)) < 0 && errno == EINTR)
        ;
    if (r > 0) return 0;
    snprintf(err, errcap, "%s",
             r == 0 ? "the client took nothing for the send timeout"
                    : strerror(errno));
    return -1;
}

/* StoreWriteFn over the sender's non-blocking socket, plain or TLS (the
 * session's ciphertext flushed before it returns). */
static int
sender_write(void *arg, const void *buf, size_t n, char *err, size_t errcap)
{
    Sender *sd = arg;
    const char *p = buf;

    while (n > 0) {
        ssize_t w = sd->tls ? tls_sock_write(sd->tls, sd->fd, p, n)
                            : send(sd->fd, p, n, MSG_NOSIGNAL);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            snprintf(err, errcap, "send: %s", strerror(errno));
            return -1;
        }
        if (wait_writable(sd->fd, err, errcap) < 0) return -1;
    }
    int f;
    while (sd->tls && (f = tls_sock_flush(sd->tls, sd->fd)) != 0) {
        if (f < 0 && errno != EAGAIN && errno != EINTR) {
            snprintf(err, errcap, "send: %s", strerror(errno));
            return -1;
        }
        if (wait_writable(sd->fd, err, errcap) < 0) return -1;
    }
    return 0;
}

static void *
sender_main(void *arg)
{
    Sender *sd = arg;
    StoreBackupInfo info = {0};
    char line[96], err[256] = "";
    int64_t t0 = mono_ns();
    int len = snprintf(line, sizeof line, "BACKUP %d\r\n", sd->nshards);
    int rc = sender_write(sd, line, (size_t)len, err, sizeof err);

    if (rc == 0)
        rc = store_backup_send(sd->store, sender_write, sd, &info, err,
                               sizeof err);
    if (rc == 0) {
        len = snprintf(line, sizeof line, "BACKUP_DONE %llu %llu\r\n",
                       (unsigned long long)info.jobs,
                       (unsigned long long)info.bytes);
        rc = sender_write(sd, line, (size_t)len, err, sizeof err);
    }
    if (rc == 0)
        log_msg(1,
                "backup: sent %llu jobs (%llu bytes, the store at %s %llu) "
                "in %.3f s",
                (unsigned long long)info.jobs, (unsigned long long)info.bytes,
                sd->cluster ? "Raft entry" : "sequence",
                (unsigned long long)info.seq, (double)(mono_ns() - t0) / 1e9);
    else
        log_msg(0, "backup: %s%s%s", err, sd->tls ? ": " : "",
                sd->tls ? tls_conn_error(tls_sock_conn(sd->tls)) : "");
    if (sd->tls && rc == 0) { /* best effort: the client has its line */
        (void)tls_sock_close_notify(sd->tls, sd->fd);
        (void)tls_sock_flush(sd->tls, sd->fd);
    }
    tls_sock_free(sd->tls);
    pthread_mutex_lock(&sd->b->mu); /* backup_stop may shut it down */
    close(sd->fd);
    sd->b->fd[sd->slot] = -1;
    pthread_mutex_unlock(&sd->b->mu);
    free(sd);
    return NULL;
}

/* A free slot in b->fd taken with fd; -1 if all are busy or stopping. */
static int
take_slot(Backups *b, int fd)
{
    int slot = -1;

    pthread_mutex_lock(&b->mu);
    for (int i = 0; i < BACKUP_SENDERS_MAX && slot < 0 && !b->stopping; i++)
        if (b->fd[i] < 0) b->fd[slot = i] = fd;
    pthread_mutex_unlock(&b->mu);
    return slot;
}

static void
free_slot(Backups *b, int slot)
{
    pthread_mutex_lock(&b->mu);
    close(b->fd[slot]);
    b->fd[slot] = -1;
    pthread_mutex_unlock(&b->mu);
}

void
backup_serve(Conn *c)
{
    Server *s = c->srv;
    StoreStats st;
    Backups *b;
    Sender *sd;
    pthread_t t;
    int fd;

    NodeStats ns;
    node_stats(s, &ns);
    /* alone on the connection: earlier replies must have left (the stream
     * takes the socket over); in a cluster the leader sends it (a follower
     * relays the connection to it) */
    int serves = !strcmp(ns.role, "standalone") || !strcmp(ns.role, "leader");
    if (!s->store || !serves || c->osent != c->oend) {
        conn_reply_lit(c, "BACKUP_UNAVAILABLE\r\n");
        return;
    }
    if (s->stopping) {
        conn_reply_lit(c, "BACKUP_BUSY\r\n");
        return;
    }
    if (!(b = backups_get(s)) || !(sd = calloc(1, sizeof *sd))) {
        conn_reply_lit(c, "OUT_OF_MEMORY\r\n");
        return;
    }
    /* the socket itself, not a copy: a TLS session may be bound to its
     * descriptor (net/tlssock.h, direct); close-on-exec, so that nothing
     * the server runs keeps the stream open */
    /* a multiplexed relay's stream: a socket the relay pumps (detach) */
    fd = c->sink ? c->sink->detach(c->sink_arg) : c->fd;
    if (fd < 0 || (sd->slot = take_slot(b, fd)) < 0) {
        if (c->sink && fd >= 0) close(fd);
        free(sd);
        conn_reply_lit(c, "BACKUP_BUSY\r\n");
        return;
    }
    (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
    store_stats(s->store, &st);
    sd->b = b;
    sd->store = s->store;
    sd->fd = fd; /* non-blocking, as the connection's */
    sd->nshards = st.nshards;
    sd->cluster = s->node != NULL;
    sd->tls = c->tls; /* the sender's now: conn_close neither ends, frees */
    c->tls = NULL;    /* nor closes them */
    c->fd = -1;
    conn_close(c);
    if (pthread_create(&t, NULL, sender_main, sd) != 0) {
        tls_sock_free(sd->tls);
        free_slot(b, sd->slot);
        free(sd);
        return;
    }
    pthread_detach(t);
}

/* The number of senders running; with shut set, first shuts their sockets
 * down, so that a send blocked on a reader that takes nothing fails at
 * once. */
static int
running(Backups *b, int shut)
{
    int k = 0;

    pthread_mutex_lock(&b->mu);
    b->stopping = 1;
    for (int i = 0; i < BACKUP_SENDERS_MAX; i++) {
        if (b->fd[i] < 0) continue;
        if (shut) shutdown(b->fd[i], SHUT_RDWR);
        k++;
    }
    pthread_mutex_unlock(&b->mu);
    return k;
}

void
backup_stop(Server *s)
{
    Backups *b = s->backups;
    if (!b) return;
    int64_t end = mono_ns() + (int64_t)BACKUP_STOP_MS * 1000000;
    int k = running(b, 1);

    while (k > 0 && mono_ns() < end) {
        usleep(10000);
        k = running(b, 0);
    }
    if (k == 0) return;
    log_msg(0,
            "backup: %d senders still running %d ms after their sockets "
            "were shut down; exiting with the store open",
            k, BACKUP_STOP_MS);
    _exit(2);
}

void
backup_free(Server *s)
{
    Backups *b = s->backups;
    if (!b) return;
    pthread_mutex_destroy(&b->mu);
    free(b);
    s->backups = NULL;
}
