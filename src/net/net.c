/* net.c - see net.h. */
#include "net/net.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

/* A socket file at path: is a server listening on it? 1 yes (connect
 * succeeds, or EAGAIN: its backlog is full), 0 stale (ECONNREFUSED), -1
 * cannot tell (message in err). */
static int
unix_live(const struct sockaddr_un *sa, char *err, size_t errcap)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errcap, "socket: %s", strerror(errno));
        return -1;
    }
    int r = connect(fd, (const struct sockaddr *)sa, sizeof *sa);
    int e = errno;
    close(fd);
    if (r == 0 || e == EAGAIN) return 1;
    if (e == ECONNREFUSED) return 0;
    snprintf(err, errcap,
             "unix:%s: cannot tell whether a server uses the socket file "
             "there: %s",
             sa->sun_path, strerror(e));
    return -1;
}

/* Clears the way for a new socket file at sa's path (see net_listen_addr):
 * 0 if the path is free now, -1 with a message. */
static int
unix_clear(const struct sockaddr_un *sa, char *err, size_t errcap)
{
    const char *path = sa->sun_path;
    struct stat st;

    if (lstat(path, &st) < 0) {
        if (errno == ENOENT) return 0;
        snprintf(err, errcap, "unix:%s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISSOCK(st.st_mode)) {
        snprintf(err, errcap,
                 "unix:%s: the path exists and is not a socket; not "
                 "touching it",
                 path);
        return -1;
    }
    int live = unix_live(sa, err, errcap);
    if (live < 0) return -1;
    if (live) {
        snprintf(err, errcap,
                 "unix:%s: a server is listening on that socket already", path);
        return -1;
    }
    if (unlink(path) < 0 && errno != ENOENT) {
        snprintf(err, errcap, "unix:%s: cannot remove the stale socket: %s",
                 path, strerror(errno));
        return -1;
    }
    return 0;
}

static int
listen_unix(const char *path, NetFileId *made, char *err, size_t errcap)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path) {
        snprintf(err, errcap, "unix socket path too long: %s", path);
        return -1;
    }
    strcpy(sa.sun_path, path);
    if (unix_clear(&sa, err, errcap) < 0) return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errcap, "unix:%s: socket: %s", path, strerror(errno));
        return -1;
    }
    /* bind makes the file with 0777 & ~umask: NET_UNIX_MODE from the
     * start, no window in which others may connect */
    mode_t old = umask(0777 & ~NET_UNIX_MODE);
    int r = bind(fd, (struct sockaddr *)&sa, sizeof sa);
    int e = errno;
    umask(old);
    if (r == 0 && listen(fd, 1024) < 0) {
        e = errno;
        unlink(path);
        r = -1;
    }
    if (r < 0) {
        snprintf(err, errcap, "cannot listen on unix:%s: %s", path,
                 strerror(e));
        close(fd);
        return -1;
    }
    if (made && net_socket_file(path, made) < 0) memset(made, 0, sizeof *made);
    return fd;
}

static int
listen_ai(const struct addrinfo *ai)
{
    int one = 1;
    int fd =
        socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
               ai->ai_protocol);
    if (fd < 0) return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 1024) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static int
listen_tcp(const ListenAddr *a, char *err, size_t errcap)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE};
    struct addrinfo *res, *ai;
    char portstr[16], url[LISTEN_URL_MAX];
    snprintf(portstr, sizeof portstr, "%d", a->port);
    listen_format(a, url, sizeof url);
    int r = getaddrinfo(a->host, portstr, &hints, &res);
    if (r != 0) {
        snprintf(err, errcap, "cannot resolve %s: %s", url, gai_strerror(r));
        return -1;
    }
    int fd = -1, e = 0;
    for (ai = res; ai && fd < 0; ai = ai->ai_next)
        if ((fd = listen_ai(ai)) < 0) e = errno;
    freeaddrinfo(res);
    if (fd < 0)
        snprintf(err, errcap, "cannot listen on %s: %s", url, strerror(e));
    return fd;
}

int
net_listen_addr(const ListenAddr *a, NetFileId *made, char *err, size_t errcap)
{
    if (made) memset(made, 0, sizeof *made);
    if (a->kind == LISTEN_UNIX) return listen_unix(a->path, made, err, errcap);
    return listen_tcp(a, err, errcap);
}

int
net_listen(const char *addr, int port, char *err, size_t errcap)
{
    ListenAddr a;
    if (listen_from_flags(addr, port, &a, err, errcap) < 0) return -1;
    return net_listen_addr(&a, NULL, err, errcap);
}

int
net_socket_file(const char *path, NetFileId *id)
{
    struct statx st;
    if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW,
              STATX_TYPE | STATX_INO | STATX_BTIME, &st) < 0)
        return -1;
    if (!S_ISSOCK(st.stx_mode)) {
        errno = EINVAL;
        return -1;
    }
    memset(id, 0, sizeof *id);
    id->dev = makedev(st.stx_dev_major, st.stx_dev_minor);
    id->ino = st.stx_ino;
    if (st.stx_mask & STATX_BTIME) {
        id->btime_s = st.stx_btime.tv_sec;
        id->btime_ns = st.stx_btime.tv_nsec;
    }
    return 0;
}

int
net_unlink_socket(const char *path, const NetFileId *id)
{
    NetFileId now;
    if (net_socket_file(path, &now) < 0) return -1;
    if (now.dev != id->dev || now.ino != id->ino ||
        now.btime_s != id->btime_s || now.btime_ns != id->btime_ns) {
        errno = ESTALE;
        return -1;
    }
    return unlink(path);
}

/* Copies the i-th name of LISTEN_FDNAMES (colon-separated) into out, ""
 * when absent or too long. */
static void
fd_name(const char *names, int i, char *out)
{
    out[0] = '\0';
    for (; names && i > 0; i--)
        if ((names = strchr(names, ':'))) names++;
    if (!names) return;
    size_t n = strcspn(names, ":");
    if (n <= NET_FDNAME_MAX) {
        memcpy(out, names, n);
        out[n] = '\0';
    }
}

/* fd: a listening stream socket? */
static int
is_listener(int fd)
{
    int type = 0, acc = 0;
    socklen_t l1 = sizeof type, l2 = sizeof acc;
    return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l1) == 0 &&
           type == SOCK_STREAM &&
           getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &l2) == 0 && acc;
}

int
net_inherited(NetInherited *out, int max, char *err, size_t errcap)
{
    const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
    const char *names = getenv("LISTEN_FDNAMES");
    if (!pid || !fds || atol(pid) != (long)getpid()) return 0;
    long n = atol(fds);
    if (n > max) {
        snprintf(err, errcap,
                 "LISTEN_FDS=%ld: at most %d inherited sockets are taken", n,
                 max);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        int fd = 3 + i; /* SD_LISTEN_FDS_START */
        if (!is_listener(fd)) {
            snprintf(err, errcap,
                     "inherited fd %d (LISTEN_FDS) is not a listening "
                     "stream socket",
                     fd);
            return -1;
        }
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        fcntl(fd, F_SETFD, FD_CLOEXEC);
        out[i].fd = fd;
        fd_name(names, i, out[i].name);
    }
    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_FDNAMES");
    return n > 0 ? (int)n : 0;
}

int
net_hand_over(const int *fds, const char *const *names, int n)
{
    char buf[32], list[1024];
    int tmp[64];
    size_t len = 0;

    if (n < 0 || n > 64) {
        errno = EINVAL;
        return -1;
    }
    /* first out of 3..3+n-1, so no move overwrites a socket yet to move */
    for (int i = 0; i < n; i++)
        if ((tmp[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 3 + n)) < 0) return -1;
    for (int i = 0; i < n; i++) {
        if (dup2(tmp[i], 3 + i) < 0) return -1; /* the copy is inherited */
        close(tmp[i]);
        int w = snprintf(list + len, sizeof list - len, "%s%s", i ? ":" : "",
                         names[i]);
        if (w < 0 || (size_t)w >= sizeof list - len) {
            errno = ENAMETOOLONG;
            return -1;
        }
        len += (size_t)w;
    }
    snprintf(buf, sizeof buf, "%ld", (long)getpid());
    if (setenv("LISTEN_PID", buf, 1) < 0) return -1;
    snprintf(buf, sizeof buf, "%d", n);
    if (setenv("LISTEN_FDS", buf, 1) < 0) return -1;
    return setenv("LISTEN_FDNAMES", list, 1);
}

int
net_keepalive(int fd)
{
    static const struct {
        int level, name, value;
    } opts[] = {
        {SOL_SOCKET, SO_KEEPALIVE, 1},
        {IPPROTO_TCP, TCP_KEEPIDLE, NET_KEEPIDLE_S},
        {IPPROTO_TCP, TCP_KEEPINTVL, NET_KEEPINTVL_S},
        {IPPROTO_TCP, TCP_KEEPCNT, NET_KEEPCNT},
        {IPPROTO_TCP, TCP_USER_TIMEOUT, NET_USER_TIMEOUT_MS},
    };
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
        if (setsockopt(fd, opts[i].level, opts[i].name, &opts[i].value,
                       sizeof opts[i].value) < 0)
            return -1;
    return 0;
}
