/* access.c - see access.h. */
#include "server/access.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/common.h"
#include "base/log.h"
#include "queue/queue.h"
#include "server/listeners.h"

static Access *
acc(const Conn *c)
{
    return c->srv->access;
}

static void
list_remove(Access *a, Conn *c)
{
    if (c->aprev)
        c->aprev->anext = c->anext;
    else
        a->head = c->anext;
    if (c->anext)
        c->anext->aprev = c->aprev;
    else
        a->tail = c->aprev;
    c->aprev = c->anext = NULL;
    a->unauth--;
}

/* c's classes on tube t (every class when trusted). */
static unsigned
bits_on(const Conn *c, const Tube *t)
{
    if (c->auth_state == ACCESS_TRUSTED) return AUTH_ALL;
    if (c->auth_state != ACCESS_USER || !t) return 0;
    return auth_bits(c->user, t->name);
}

/* The same for a name from a command line (not NUL-terminated). */
static unsigned
bits_on_name(const Conn *c, const char *name, size_t len)
{
    char buf[TUBE_NAME_MAX + 1];
    if (c->auth_state == ACCESS_TRUSTED) return AUTH_ALL;
    if (c->auth_state != ACCESS_USER || len > TUBE_NAME_MAX) return 0;
    memcpy(buf, name, len);
    buf[len] = '\0';
    return auth_bits(c->user, buf);
}

void
access_used(Conn *c)
{
    c->use_bits = (uint8_t)bits_on(c, c->se.use);
}

/* Drops from c's watch list every tube it may not consume: a reserve then
 * considers only tubes it may take from (the list may end up empty). */
static void
prune_watch(Conn *c)
{
    Session *se = &c->se;
    for (size_t i = 0; i < se->watch.len;) {
        Tube *t = se->watch.items[i];
        if (bits_on(c, t) & AUTH_CONSUME) {
            i++;
            continue;
        }
        queue_unwatch(c->srv, se, i);
    }
}

/* Gives c its rights: user (NULL: trusted by its transport). */
static void
become(Conn *c, AuthUser *u)
{
    Access *a = acc(c);
    if (c->auth_state == ACCESS_PRE) list_remove(a, c);
    if (c->auth_state == ACCESS_USER) c->user->conns--;
    if (c->auth_state == ACCESS_TRUSTED) a->trusted--;
    c->auth_state = u ? ACCESS_USER : ACCESS_TRUSTED;
    c->user = u;
    if (u)
        u->conns++;
    else
        a->trusted++;
    access_used(c);
    prune_watch(c);
}

/* An unauthenticated c that needs no token: a unix socket without
 * --auth-unix (its own, or a follower's that trusts its own: the follower
 * proved it is a node), or a verified certificate naming a cert identity.
 * Returns 1 once settled. */
static int
settle(Conn *c)
{
    Server *s = c->srv;
    if ((c->via == CONN_VIA_UNIX || c->via == CONN_VIA_RELAY_UNIX) &&
        !s->cfg.auth_unix) {
        become(c, NULL);
        return 1;
    }
    AuthUser *u = auth_by_cert(&s->access->table, conn_peer_cn(c));
    if (!u) return 0;
    become(c, u);
    log_msg(1, "connection authenticated by certificate as %s", u->name);
    return 1;
}

static void
refuse(Conn *c)
{
    acc(c)->failures++;
    conn_reply_lit(c, "UNAUTHORIZED\r\n");
    conn_close_after_replies(c);
}

void
access_opened(Conn *c)
{
    Access *a = acc(c);
    c->auth_state = ACCESS_PRE;
    c->opened_ns = mono_ns();
    c->aprev = a->tail;
    c->anext = NULL;
    if (a->tail)
        a->tail->anext = c;
    else
        a->head = c;
    a->tail = c;
    a->unauth++;
    while (a->unauth > c->srv->cfg.max_unauth && a->head != c) {
        Conn *old = a->head;
        if (settle(old)) continue;
        a->evicted++;
        conn_close(old); /* leaves the list (access_closed) */
    }
}

void
access_closed(Conn *c)
{
    Access *a = acc(c);
    if (c->auth_state == ACCESS_PRE) list_remove(a, c);
    if (c->auth_state == ACCESS_USER) c->user->conns--;
    if (c->auth_state == ACCESS_TRUSTED) a->trusted--;
    c->auth_state = ACCESS_PRE;
    c->user = NULL;
}

int
access_line(Conn *c, const char *line, size_t len)
{
    if (len >= 5 && memcmp(line, "auth ", 5) == 0) {
        AuthUser *u = auth_by_token(&acc(c)->table, line + 5, len - 5);
        if (!u) {
            refuse(c);
            return 1;
        }
        become(c, u);
        log_msg(1, "connection authenticated as %s", u->name);
        conn_reply_lit(c, "AUTHENTICATED\r\n");
        return 1;
    }
    if (c->auth_state != ACCESS_PRE || settle(c)) return 0;
    if (len == 4 && memcmp(line, "quit", 4) == 0) {
        conn_close_after_replies(c);
        return 1;
    }
    refuse(c);
    return 1;
}

int
access_bad_line(Conn *c)
{
    if (c->auth_state != ACCESS_PRE || settle(c)) return 0;
    refuse(c);
    return 1;
}

/* The classes a command on job id needs, given the job: 0 when the job is
 * missing (the command says NOT_FOUND itself). */
static int
job_denied(Conn *c, uint64_t id, unsigned need_held, unsigned need_other)
{
    Job *j = jobtable_find(&c->srv->jobs, id);
    if (!j) return 0;
    unsigned need = queue_holds(&c->se, j) ? need_held : need_other;
    return !(bits_on(c, j->tube) & need);
}

static int
name_denied(Conn *c, const Cmd *cmd, unsigned need)
{
    return !(bits_on_name(c, cmd->name, cmd->name_len) & need);
}

int
access_denied(Conn *c, const Cmd *cmd)
{
    if (c->auth_state == ACCESS_TRUSTED) return 0;
    unsigned any = c->auth_state == ACCESS_USER ? c->user->any : 0;
    switch (cmd->op) {
    case OP_PUT:
    case OP_PUT_UNIQUE:
        return !(c->use_bits & AUTH_PRODUCE);
    case OP_PEEK_READY:
    case OP_PEEK_DELAYED:
    case OP_PEEK_BURIED:
        return !(c->use_bits & AUTH_INSPECT);
    case OP_KICK:
        return !(c->use_bits & AUTH_ADMIN);
    case OP_PEEK:
    case OP_STATS_JOB:
        return job_denied(c, cmd->id, AUTH_INSPECT, AUTH_INSPECT);
    case OP_RESERVE_JOB:
    case OP_RELEASE:
    case OP_BURY:
    case OP_TOUCH:
        return job_denied(c, cmd->id, AUTH_CONSUME, AUTH_CONSUME);
    case OP_DELETE:
        return job_denied(c, cmd->id, AUTH_CONSUME, AUTH_ADMIN);
    case OP_KICK_JOB:
        return job_denied(c, cmd->id, AUTH_ADMIN, AUTH_ADMIN);
    case OP_USE:
        return name_denied(c, cmd, AUTH_PRODUCE | AUTH_INSPECT | AUTH_ADMIN);
    case OP_WATCH:
        return name_denied(c, cmd, AUTH_CONSUME);
    case OP_IGNORE:
        if (cmd->name_len == 7 && memcmp(cmd->name, "default", 7) == 0)
            return 0;
        return name_denied(c, cmd, AUTH_CONSUME);
    case OP_RESERVE:
    case OP_RESERVE_TIMEOUT:
    case OP_RESERVE_BATCH:
        return c->se.watch.len == 0;
    case OP_STATS:
    case OP_LIST_TUBES:
    case OP_CLUSTER_STATUS: /* inspect on some tube, as stats */
        return !(any & AUTH_INSPECT);
    case OP_STATS_TUBE:
    case OP_LIST_JOBS:
        return name_denied(c, cmd, AUTH_INSPECT);
    case OP_PAUSE_TUBE:
    case OP_CLEAR_TUBE:
        return name_denied(c, cmd, AUTH_ADMIN);
    case OP_SNAPSHOT:
    case OP_BACKUP:           /* the whole state: bare admin */
    case OP_CLUSTER_TRANSFER: /* the whole cluster: bare admin */
    case OP_CLUSTER_ADD:
    case OP_CLUSTER_REMOVE:
        return !c->user || !c->user->superuser;
    case OP_LIST_TUBE_USED:
    case OP_LIST_TUBES_WATCHED:
    case OP_QUIT:
        return 0; /* the connection's own state */
    default:
        return 1; /* a command nobody classified: fail closed */
    }
}

int
access_may_list(const Conn *c, const Tube *t)
{
    return (bits_on(c, t) & AUTH_INSPECT) != 0;
}

int
access_sees_all(const Conn *c)
{
    return c->auth_state == ACCESS_TRUSTED ||
           (c->auth_state == ACCESS_USER && c->user->superuser);
}

/* Each ACCESS_SWEEP_S: closes the connections unauthenticated for
 * ACCESS_TIMEOUT_S (oldest first; the list is in order of arrival). */
static void
sweep_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    Server *s = w->data;
    Access *a = s->access;
    int64_t cut = mono_ns() - (int64_t)ACCESS_TIMEOUT_S * NS_PER_SEC;
    (void)loop, (void)revents;
    while (a->head && a->head->opened_ns <= cut) {
        Conn *c = a->head;
        if (settle(c)) continue;
        a->timeouts++;
        conn_close(c);
    }
}

/* Every listener against the plaintext policy (auth_listener_check). */
static int
check_listener(Server *s, char *err, size_t errcap)
{
    char msg[512];

    for (int i = 0; i < s->nlisteners; i++) {
        const Listener *l = &s->listeners[i];
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        if (getsockname(l->fd, (struct sockaddr *)&ss, &len) < 0) continue;
        int via = l->addr.kind == LISTEN_TLS    ? CONN_VIA_TLS
                  : l->addr.kind == LISTEN_UNIX ? CONN_VIA_UNIX
                                                : CONN_VIA_TCP;
        int rc = auth_listener_check(
            s->cfg.auth_file != NULL, s->cfg.allow_plaintext_auth,
            (struct sockaddr *)&ss, len, via, msg, sizeof msg);
        char url[LISTEN_URL_MAX];
        listen_format(&l->bound, url, sizeof url);
        if (rc > 0) log_msg(0, "warning: %s %s", url, msg);
        if (rc < 0) {
            snprintf(err, errcap, "%s %s", url, msg);
            return -1;
        }
    }
    return 0;
}

int
access_init(Server *s, char *err, size_t errcap)
{
    if (check_listener(s, err, errcap) < 0) return -1;
    if (!s->cfg.auth_file) return 0;
    Access *a = calloc(1, sizeof *a);
    if (!a) {
        snprintf(err, errcap, "out of memory");
        return -1;
    }
    if (auth_load(s->cfg.auth_file, &a->table, err, errcap) < 0) {
        free(a);
        return -1;
    }
    s->access = a;
    ev_timer_init(&a->sweep_w, sweep_cb, ACCESS_SWEEP_S, ACCESS_SWEEP_S);
    a->sweep_w.data = s;
    ev_timer_start(s->loop, &a->sweep_w);
    log_msg(0, "--auth-file %s: %zu identities", s->cfg.auth_file, a->table.n);
    return 0;
}

void
access_free(Server *s)
{
    Access *a = s->access;
    if (!a) return;
    ev_timer_stop(s->loop, &a->sweep_w);
    auth_free(&a->table);
    free(a);
    s->access = NULL;
}

void
access_reload(Server *s)
{
    Access *a = s->access;
    AuthTable next = {0}, old;
    char err[1024];
    if (auth_load(s->cfg.auth_file, &next, err, sizeof err) < 0) {
        log_msg(0, "SIGHUP: keeping the previous auth file: %s", err);
        return;
    }
    old = a->table;
    a->table = next;
    for (Conn *c = s->conns, *nx; c; c = nx) {
        nx = c->next;
        if (c->auth_state != ACCESS_USER) continue;
        AuthUser *u = auth_by_name(&a->table, c->user->name);
        if (!u) {
            log_msg(0, "SIGHUP: identity %s is gone; closing its connection",
                    c->user->name);
            c->auth_state = ACCESS_GONE; /* its old user is freed below */
            c->user = NULL;
            conn_close(c);
            continue;
        }
        c->user = u;
        u->conns++;
        access_used(c);
        prune_watch(c);
    }
    auth_free(&old);
    a->reloads++;
    log_msg(0, "SIGHUP: --auth-file %s reloaded: %zu identities",
            s->cfg.auth_file, a->table.n);
}
