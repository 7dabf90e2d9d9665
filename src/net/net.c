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
#include <sys/un.h>
#include <unistd.h>

static int
listen_unix(const char *path, char *err, size_t errcap)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    struct stat st;
    if (strlen(path) >= sizeof sa.sun_path) {
        snprintf(err, errcap, "unix socket path too long: %s", path);
        return -1;
    }
    strcpy(sa.sun_path, path);
    if (stat(path, &st) == 0 && S_ISSOCK(st.st_mode)) unlink(path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        listen(fd, 1024) < 0) {
        snprintf(err, errcap, "cannot listen on unix:%s: %s", path,
                 strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
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

int
net_listen(const char *addr, int port, char *err, size_t errcap)
{
    if (addr && strncmp(addr, "unix:", 5) == 0)
        return listen_unix(addr + 5, err, errcap);
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE};
    struct addrinfo *res, *ai;
    char portstr[16];
    snprintf(portstr, sizeof portstr, "%d", port);
    int r = getaddrinfo(addr ? addr : "0.0.0.0", portstr, &hints, &res);
    if (r != 0) {
        snprintf(err, errcap, "cannot resolve %s: %s", addr, gai_strerror(r));
        return -1;
    }
    int fd = -1, e = 0;
    for (ai = res; ai && fd < 0; ai = ai->ai_next)
        if ((fd = listen_ai(ai)) < 0) e = errno;
    freeaddrinfo(res);
    if (fd < 0)
        snprintf(err, errcap, "cannot listen on %s:%d: %s",
                 addr ? addr : "0.0.0.0", port, strerror(e));
    return fd;
}

int
net_inherited(void)
{
    const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
    if (!pid || !fds || atol(pid) != (long)getpid() || atoi(fds) < 1) return -1;
    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_FDNAMES");
    int fd = 3; /* SD_LISTEN_FDS_START */
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    return fd;
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
