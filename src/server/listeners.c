/* listeners.c - see listeners.h. */
#include "server/listeners.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/log.h"
#include "net/net.h"

/* A tls:// listener needs the credentials (server/clienttls.h), opened
 * before the listeners. */
static int
check_tls(const Server *s, const ListenAddr *a, char *err, size_t errcap)
{
    if (a->kind != LISTEN_TLS || s->tls) return 0;
    snprintf(err, errcap, "tls:// listeners need --tls-cert and --tls-key");
    return -1;
}

/* Fills l->bound from the socket (l->addr when it cannot be read). */
static void
set_bound(Listener *l)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;

    if (getsockname(l->fd, (struct sockaddr *)&ss, &len) < 0 ||
        listen_from_sockaddr((struct sockaddr *)&ss, len, l->addr.kind,
                             &l->bound) < 0)
        l->bound = l->addr;
}

/* An inherited socket's kind: a step-down's name says it (and whether its
 * unix socket file is ours), systemd's "tls" makes a TCP one TLS, else
 * the address family. Sets *handover when the name is a step-down's. */
static ListenKind
inherited_kind(const NetInherited *in, int family, int *owned, int *handover)
{
    ListenKind kind;

    *owned = 0;
    *handover = listen_handover_parse(in->name, &kind, owned);
    if (*handover) return kind;
    if (family == AF_UNIX) return LISTEN_UNIX;
    return strcmp(in->name, LISTEN_FDNAME_TLS) == 0 ? LISTEN_TLS : LISTEN_TCP;
}

/* Takes the inherited sockets into s->listeners. *all: a step-down handed
 * them over (every one named by listen_handover_name), so they are every
 * listener. Returns how many, or -1 with a message. */
static int
take_inherited(Server *s, int *all, char *err, size_t errcap)
{
    NetInherited in[SERVER_LISTENERS_MAX];
    int n = net_inherited(in, SERVER_LISTENERS_MAX, err, errcap);

    *all = n > 0;
    for (int i = 0; i < n; i++) {
        Listener *l = &s->listeners[s->nlisteners++];
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        int owned, handover;

        l->fd = in[i].fd;
        if (getsockname(l->fd, (struct sockaddr *)&ss, &len) < 0)
            ss.ss_family = AF_UNSPEC;
        ListenKind kind =
            inherited_kind(&in[i], ss.ss_family, &owned, &handover);
        *all &= handover;
        if (listen_from_sockaddr((struct sockaddr *)&ss, len, kind, &l->addr) <
            0) {
            snprintf(err, errcap,
                     "inherited fd %d: not a TCP or named unix socket%s", l->fd,
                     handover ? " (as its name says)" : "");
            return -1;
        }
        l->bound = l->addr;
        l->owned = owned && net_socket_file(l->addr.path, &l->file) == 0;
    }
    return n;
}

/* Refuses want[k] when it is given twice (among want[0..k-1], or an
 * inherited socket's address) or is tls:// without TLS. */
static int
check_wanted(const Server *s, const ListenAddr *want, int k, char *err,
             size_t errcap)
{
    const ListenAddr *a = &want[k];
    char url[LISTEN_URL_MAX];
    int twice = 0;

    for (int i = 0; i < s->nlisteners; i++)
        twice |= listen_same(&s->listeners[i].addr, a);
    for (int i = 0; i < k; i++)
        twice |= listen_same(&want[i], a);
    if (twice) {
        listen_format(a, url, sizeof url);
        snprintf(err, errcap, "listener %s is given twice", url);
        return -1;
    }
    return check_tls(s, a, err, errcap);
}

/* What -l/-p and --listen ask for (want, *n of them): -l/-p when nothing
 * was inherited and -l or -p was given or no --listen; then --listen. */
static int
wanted(const Server *s, const ServerConfig *cfg, ListenAddr *want, int *n,
       char *err, size_t errcap)
{
    *n = 0;
    if (s->nlisteners && cfg->listen_flags)
        log_msg(0, "the %d inherited socket(s) replace -l and -p",
                s->nlisteners);
    if (!s->nlisteners && (cfg->listen_flags || !cfg->nlisten) &&
        listen_from_flags(cfg->listen_addr, cfg->port, &want[(*n)++], err,
                          errcap) < 0)
        return -1;
    if (s->nlisteners + *n + cfg->nlisten > SERVER_LISTENERS_MAX) {
        snprintf(err, errcap, "more than %d listeners", SERVER_LISTENERS_MAX);
        return -1;
    }
    for (int i = 0; i < cfg->nlisten; i++)
        want[(*n)++] = cfg->listen[i];
    return 0;
}

static void
log_listeners(const Server *s)
{
    char url[LISTEN_URL_MAX], bound[LISTEN_URL_MAX];

    for (int i = 0; i < s->nlisteners; i++) {
        const Listener *l = &s->listeners[i];
        listen_format(&l->addr, url, sizeof url);
        listen_format(&l->bound, bound, sizeof bound);
        if (strcmp(url, bound) == 0)
            log_msg(0, "listening on %s", url);
        else
            log_msg(0, "listening on %s (%s)", url, bound);
    }
}

/* Sets on every TCP listener the options its connections need: TCP_NODELAY
 * (replies leave at once) and net_keepalive's dead-peer detection (a
 * client gone with its host must not keep its reserves). Linux copies them
 * from the listening socket to each socket accept(2) returns (the kernel
 * clones the listener's socket for each connection), so an accept costs no
 * setsockopt; tests/test_listen.py checks them on accepted connections.
 * Returns 0, or -1 with a message. */
static int
tune_listeners(Server *s, char *err, size_t errcap)
{
    int one = 1;

    for (int i = 0; i < s->nlisteners; i++) {
        const Listener *l = &s->listeners[i];
        if (l->addr.kind == LISTEN_UNIX) continue;
        if (setsockopt(l->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0 ||
            net_keepalive(l->fd) < 0) {
            snprintf(err, errcap, "listener fd %d: cannot set its options: %s",
                     l->fd, strerror(errno));
            return -1;
        }
    }
    return 0;
}

int
listeners_open(Server *s, const ServerConfig *cfg, char *err, size_t errcap)
{
    ListenAddr want[SERVER_LISTENERS_MAX + 1];
    int all, n = 0;

    if (take_inherited(s, &all, err, errcap) < 0) return -1;
    for (int i = 0; i < s->nlisteners; i++)
        if (check_tls(s, &s->listeners[i].addr, err, errcap) < 0) return -1;
    if (all)
        log_msg(1, "%d listener(s) handed over", s->nlisteners);
    else if (wanted(s, cfg, want, &n, err, errcap) < 0)
        return -1;
    for (int i = 0; i < n; i++) /* every check before a socket opens */
        if (check_wanted(s, want, i, err, errcap) < 0) return -1;
    for (int i = 0; i < n; i++) {
        Listener *l = &s->listeners[s->nlisteners];
        l->addr = want[i];
        l->fd = net_listen_addr(&want[i], &l->file, err, errcap);
        if (l->fd < 0) return -1;
        l->owned = want[i].kind == LISTEN_UNIX;
        s->nlisteners++;
        set_bound(l);
    }
    if (tune_listeners(s, err, errcap) < 0) return -1;
    log_listeners(s);
    return 0;
}

int
listeners_chown(Server *s, uid_t uid, gid_t gid, char *err, size_t errcap)
{
    for (int i = 0; i < s->nlisteners; i++) {
        const Listener *l = &s->listeners[i];
        if (l->owned && lchown(l->addr.path, uid, gid) < 0) {
            snprintf(err, errcap, "cannot give unix:%s to -u's user: %s",
                     l->addr.path, strerror(errno));
            return -1;
        }
    }
    return 0;
}

void
listeners_close(Server *s)
{
    for (int i = 0; i < s->nlisteners; i++) {
        Listener *l = &s->listeners[i];
        if (ev_is_active(&l->w)) ev_io_stop(s->loop, &l->w);
        if (l->owned && net_unlink_socket(l->addr.path, &l->file) < 0 &&
            errno != ENOENT)
            log_msg(0, "not removing unix:%s: %s", l->addr.path,
                    errno == ESTALE ? "another file is there now"
                                    : strerror(errno));
        close(l->fd);
    }
    s->nlisteners = 0;
}
