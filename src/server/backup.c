/* server/backup.c - the rockstalk-backup command (see server/backup.h). */
#include "server/backup.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/log.h"
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
    int slot, fd, nshards;
} Sender;

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

/* Sends a short line whole (the socket blocks, its send timeout set). */
static int
send_line(int fd, const char *line, int len)
{
    return send(fd, line, (size_t)len, MSG_NOSIGNAL) == len ? 0 : -1;
}

static void *
sender_main(void *arg)
{
    Sender *sd = arg;
    StoreBackupInfo info = {0};
    char line[96], err[256];
    int64_t t0 = mono_ns();
    int len = snprintf(line, sizeof line, "BACKUP %d\r\n", sd->nshards);
    int rc = send_line(sd->fd, line, len);

    if (rc == 0)
        rc = store_backup_send(sd->store, sd->fd, &info, err, sizeof err);
    else
        snprintf(err, sizeof err, "the client is gone");
    if (rc == 0) {
        len = snprintf(line, sizeof line, "BACKUP_DONE %llu %llu\r\n",
                       (unsigned long long)info.jobs,
                       (unsigned long long)info.bytes);
        rc = send_line(sd->fd, line, len);
        if (rc < 0) snprintf(err, sizeof err, "the client is gone");
    }
    if (rc == 0)
        log_msg(1,
                "backup: sent %llu jobs (%llu bytes, the store at sequence "
                "%llu) in %.3f s",
                (unsigned long long)info.jobs, (unsigned long long)info.bytes,
                (unsigned long long)info.seq, (double)(mono_ns() - t0) / 1e9);
    else
        log_msg(0, "backup: %s", err);
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
    struct timeval tv = {BACKUP_SEND_S, 0};
    StoreStats st;
    Backups *b;
    Sender *sd;
    pthread_t t;
    int fd;

    if (s->node || !s->store ||
        (c->via != CONN_VIA_TCP && c->via != CONN_VIA_UNIX) || c->tls) {
        conn_reply_lit(c, "BACKUP_UNAVAILABLE\r\n");
        return;
    }
    if (!(b = backups_get(s)) || !(sd = calloc(1, sizeof *sd))) {
        conn_reply_lit(c, "OUT_OF_MEMORY\r\n");
        return;
    }
    /* close-on-exec: nothing the server runs keeps the stream open */
    if ((fd = fcntl(c->fd, F_DUPFD_CLOEXEC, 0)) < 0) {
        free(sd);
        conn_close(c);
        return;
    }
    if ((sd->slot = take_slot(b, fd)) < 0) {
        close(fd);
        free(sd);
        conn_reply_lit(c, "BACKUP_BUSY\r\n");
        return;
    }
    store_stats(s->store, &st);
    sd->b = b;
    sd->store = s->store;
    sd->fd = fd;
    sd->nshards = st.nshards;
    conn_close(c);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (pthread_create(&t, NULL, sender_main, sd) != 0) {
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
