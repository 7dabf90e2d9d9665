/*
 * ceiling - the cheapest server that can pass rsbench's put load: one thread,
 * one epoll loop. It reads each "put <pri> <delay> <ttr> <bytes>" line and
 * skips its body, then answers "INSERTED 1"; "use TUBE" gets "USING TUBE",
 * anything else "UNKNOWN_COMMAND". It stores nothing, so its put rate is
 * about the most one event-loop thread can answer on this machine, and the
 * benchmark compares real servers with it.
 *
 * usage: ceiling [-l ADDR] [-p PORT]     (default 127.0.0.1 11300)
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define READ_CHUNK 65536
#define MAX_LINE 1024

struct cli {
    int fd, epout;
    char *rb, *wb;
    size_t rlen, rcap, wlen, woff, wcap, skip;
};

static int ep;

static void
die(const char *what)
{
    fprintf(stderr, "ceiling: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void
out(struct cli *c, const char *s, size_t n)
{
    if (c->wlen + n > c->wcap) {
        c->wcap = (c->wlen + n) * 2;
        c->wb = realloc(c->wb, c->wcap);
        if (!c->wb) die("realloc");
    }
    memcpy(c->wb + c->wlen, s, n);
    c->wlen += n;
}

static void
drop(struct cli *c)
{
    close(c->fd);
    free(c->rb);
    free(c->wb);
    free(c);
}

/* The body size at the end of a put line, or -1. */
static long
put_bytes(const char *line, size_t n)
{
    size_t i = n;
    long v = 0, mul = 1;
    while (i > 4 && line[i - 1] >= '0' && line[i - 1] <= '9') {
        v += (line[i - 1] - '0') * mul;
        mul *= 10;
        i--;
    }
    return i < n && line[i - 1] == ' ' && mul <= 100000000 ? v : -1;
}

static void
on_line(struct cli *c, const char *line, size_t n)
{
    static const char ins[] = "INSERTED 1\r\n", unk[] = "UNKNOWN_COMMAND\r\n";
    if (n > 4 && memcmp(line, "put ", 4) == 0 && put_bytes(line, n) >= 0) {
        c->skip = (size_t)put_bytes(line, n) + 2;
        out(c, ins, sizeof ins - 1);
    } else if (n > 4 && memcmp(line, "use ", 4) == 0) {
        out(c, "USING ", 6);
        out(c, line + 4, n - 4);
        out(c, "\r\n", 2);
    } else {
        out(c, unk, sizeof unk - 1);
    }
}

/* Answers every complete command; returns -1 to drop the client. */
static int
on_input(struct cli *c)
{
    size_t off = 0;
    while (off < c->rlen) {
        if (c->skip) {
            size_t k = c->rlen - off < c->skip ? c->rlen - off : c->skip;
            off += k;
            c->skip -= k;
            continue;
        }
        char *b = c->rb + off, *e = memmem(b, c->rlen - off, "\r\n", 2);
        if (!e && c->rlen - off > MAX_LINE) return -1;
        if (!e) break;
        on_line(c, b, (size_t)(e - b));
        off += (size_t)(e - b) + 2;
    }
    memmove(c->rb, c->rb + off, c->rlen - off);
    c->rlen -= off;
    return 0;
}

static int
flush(struct cli *c)
{
    while (c->woff < c->wlen) {
        ssize_t n =
            send(c->fd, c->wb + c->woff, c->wlen - c->woff, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (n < 0) return -1;
        c->woff += (size_t)n;
    }
    if (c->woff == c->wlen) c->woff = c->wlen = 0;
    int want = c->wlen > 0;
    if (want != c->epout) {
        struct epoll_event ev = {.events = EPOLLIN | (want ? EPOLLOUT : 0),
                                 .data.ptr = c};
        epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
        c->epout = want;
    }
    return 0;
}

static void
on_readable(struct cli *c)
{
    if (c->rcap - c->rlen < READ_CHUNK) {
        c->rcap = c->rlen + 2 * READ_CHUNK;
        c->rb = realloc(c->rb, c->rcap);
        if (!c->rb) die("realloc");
    }
    ssize_t n = recv(c->fd, c->rb + c->rlen, READ_CHUNK, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n <= 0) {
        drop(c);
        return;
    }
    c->rlen += (size_t)n;
    if (on_input(c) < 0 || flush(c) < 0) drop(c);
}

static void
on_accept(int lfd)
{
    int one = 1, fd;
    while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
        struct cli *c = calloc(1, sizeof *c);
        if (!c) die("calloc");
        c->fd = fd;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) die("epoll_ctl");
    }
}

static int
listen_on(const char *addr, const char *port)
{
    struct addrinfo hints, *ai;
    int one = 1;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    int rc = getaddrinfo(addr, port, &hints, &ai);
    if (rc != 0) {
        fprintf(stderr, "ceiling: %s: %s\n", addr, gai_strerror(rc));
        exit(1);
    }
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK, 0);
    if (fd < 0) die("socket");
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 1024) < 0)
        die("bind/listen");
    freeaddrinfo(ai);
    return fd;
}

int
main(int argc, char **argv)
{
    const char *addr = "127.0.0.1", *port = "11300";
    struct epoll_event evs[128], lev = {.events = EPOLLIN};
    int o;
    while ((o = getopt(argc, argv, "l:p:")) != -1) {
        if (o == 'l')
            addr = optarg;
        else if (o == 'p')
            port = optarg;
        else
            return fprintf(stderr, "usage: ceiling [-l ADDR] [-p PORT]\n"), 2;
    }
    int lfd = listen_on(addr, port);
    ep = epoll_create1(0);
    lev.data.ptr = NULL;
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &lev) < 0) die("epoll");
    for (;;) {
        int n = epoll_wait(ep, evs, 128, -1);
        if (n < 0 && errno != EINTR) die("epoll_wait");
        for (int i = 0; i < n; i++) {
            struct cli *c = evs[i].data.ptr;
            if (!c)
                on_accept(lfd);
            else if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
                on_readable(c);
            else if (flush(c) < 0)
                drop(c);
        }
    }
}
