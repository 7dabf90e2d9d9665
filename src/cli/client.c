/* client.c - see client.h. */
#include "client.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int
open_unix(Client *c, const char *path, char *err, size_t errcap)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path) {
        snprintf(err, errcap, "cannot connect to %s: path too long", c->where);
        return -1;
    }
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        snprintf(err, errcap, "cannot connect to %s: %s", c->where,
                 strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    c->fd = fd;
    return 0;
}

static int
open_tcp(Client *c, const char *host, const char *port, char *err,
         size_t errcap)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res, *ai;
    int rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0) {
        snprintf(err, errcap, "cannot connect to %s: %s", c->where,
                 gai_strerror(rc));
        return -1;
    }
    int fd = -1, saved = 0;
    for (ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
                    ai->ai_protocol);
        if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
            saved = errno;
            close(fd);
            fd = -1;
        } else if (fd < 0) {
            saved = errno;
        }
    }
    freeaddrinfo(res);
    if (fd < 0) {
        snprintf(err, errcap, "cannot connect to %s: %s", c->where,
                 strerror(saved));
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->fd = fd;
    return 0;
}

int
client_open(Client *c, const char *host, const char *port,
            const char *unix_path, const ClientTls *tls, char *err,
            size_t errcap)
{
    char why[CLIENT_ERR_LEN];
    int rc;
    memset(c, 0, sizeof *c);
    c->fd = -1;
    if (unix_path) {
        snprintf(c->where, sizeof c->where, "unix:%s", unix_path);
        rc = open_unix(c, unix_path, err, errcap);
    } else {
        snprintf(c->where, sizeof c->where, "%s:%s", host, port);
        rc = open_tcp(c, host, port, err, errcap);
    }
    if (rc < 0 || !tls) return rc;
    if (!(c->tls = clitls_open(c->fd, unix_path ? "localhost" : host, tls, why,
                               sizeof why))) {
        snprintf(err, errcap, "cannot connect to %s: %s", c->where, why);
        client_close(c);
        return -1;
    }
    return 0;
}

void
client_close(Client *c)
{
    clitls_free(c->tls);
    c->tls = NULL;
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    free(c->buf);
    c->buf = NULL;
    c->off = c->len = c->cap = 0;
}

int
client_send(Client *c, const void *data, size_t len, char *err, size_t errcap)
{
    const char *p = data;
    while (len > 0) {
        char why[CLIENT_ERR_LEN] = "";
        ssize_t n = c->tls ? clitls_send(c->tls, p, len, why, sizeof why)
                           : send(c->fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && !c->tls && errno == EINTR) continue;
        if (n < 0 && c->tls) {
            c->broken = 1;
            snprintf(err, errcap, "cannot send to %s: %s", c->where, why);
            return -1;
        }
        if (n < 0) {
            c->broken = 1;
            snprintf(err, errcap, "cannot send to %s: %s", c->where,
                     strerror(errno));
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Reads more bytes into the buffer, growing it so that at least want
 * unconsumed bytes fit. Returns 0, or -1 with a message (closed, error). */
static int
fill(Client *c, size_t want, char *err, size_t errcap)
{
    if (c->off > 0) {
        memmove(c->buf, c->buf + c->off, c->len - c->off);
        c->len -= c->off;
        c->off = 0;
    }
    size_t need = want > 4096 ? want : 4096;
    if (c->cap < need + 1) {
        char *nb = realloc(c->buf, need + 1);
        if (!nb) {
            snprintf(err, errcap, "out of memory");
            return -1;
        }
        c->buf = nb;
        c->cap = need + 1;
    }
    for (;;) {
        char why[CLIENT_ERR_LEN] = "";
        char *dst = c->buf + c->len;
        size_t room = c->cap - 1 - c->len;
        ssize_t n = c->tls ? clitls_recv(c->tls, dst, room, why, sizeof why)
                           : recv(c->fd, dst, room, 0);
        if (n > 0) {
            c->len += (size_t)n;
            return 0;
        }
        if (n < 0 && !c->tls && errno == EINTR) continue;
        c->broken = 1;
        if (n < 0 && c->tls) {
            snprintf(err, errcap, "cannot read from %s: %s", c->where, why);
            return -1;
        }
        if (n == 0)
            snprintf(err, errcap, "connection closed by %s", c->where);
        else
            snprintf(err, errcap, "cannot read from %s: %s", c->where,
                     strerror(errno));
        return -1;
    }
}

long
client_recv(Client *c, void *buf, size_t n, char *err, size_t errcap)
{
    size_t avail = c->len - c->off;
    if (avail > 0) {
        size_t take = avail < n ? avail : n;
        memcpy(buf, c->buf + c->off, take);
        c->off += take;
        return (long)take;
    }
    for (;;) {
        char why[CLIENT_ERR_LEN] = "";
        ssize_t r = c->tls ? clitls_recv(c->tls, buf, n, why, sizeof why)
                           : recv(c->fd, buf, n, 0);
        if (r < 0 && !c->tls && errno == EINTR) continue;
        if (r > 0) return (long)r;
        if (r == 0) return 0;
        c->broken = 1;
        snprintf(err, errcap, "cannot read from %s: %s", c->where,
                 c->tls ? why : strerror(errno));
        return -1;
    }
}

/* Reads one CRLF-terminated line into out (NUL-ended, CRLF removed). */
static int
read_line(Client *c, char *out, char *err, size_t errcap)
{
    for (;;) {
        char *start = c->buf ? c->buf + c->off : NULL;
        size_t avail = c->len - c->off;
        char *nl = start ? memchr(start, '\n', avail) : NULL;
        if (nl) {
            size_t n = (size_t)(nl - start);
            if (n > 0 && start[n - 1] == '\r') n--;
            if (n > CLIENT_LINE_MAX) break;
            memcpy(out, start, n);
            out[n] = '\0';
            c->off += (size_t)(nl - start) + 1;
            return 0;
        }
        if (avail > CLIENT_LINE_MAX + 1) break;
        if (fill(c, avail + 1, err, errcap) < 0) return -1;
    }
    snprintf(err, errcap, "reply line from %s is too long", c->where);
    return -1;
}

/* Reads a body of len bytes and its CRLF into a fresh allocation. */
static int
read_body(Client *c, size_t len, char **out, char *err, size_t errcap)
{
    while (c->len - c->off < len + 2)
        if (fill(c, len + 2, err, errcap) < 0) return -1;
    const char *p = c->buf + c->off;
    if (p[len] != '\r' || p[len + 1] != '\n') {
        snprintf(err, errcap, "reply body from %s lacks its CRLF", c->where);
        return -1;
    }
    if (!(*out = malloc(len + 1))) {
        snprintf(err, errcap, "out of memory");
        return -1;
    }
    memcpy(*out, p, len);
    (*out)[len] = '\0';
    c->off += len + 2;
    return 0;
}

/* The n-th space-separated word of line: its start and length, or NULL. */
static const char *
word(const char *line, int n, size_t *len)
{
    const char *p = line;
    for (;;) {
        while (*p == ' ')
            p++;
        if (!*p) return NULL;
        size_t l = strcspn(p, " ");
        if (n-- == 0) {
            *len = l;
            return p;
        }
        p += l;
    }
}

int
reply_is(const Reply *r, const char *w)
{
    size_t len;
    const char *p = word(r->line, 0, &len);
    return p == r->line && len == strlen(w) && memcmp(p, w, len) == 0;
}

int
reply_num(const Reply *r, int n, uint64_t *out)
{
    size_t len;
    const char *p = word(r->line, n, &len);
    if (!p || len == 0 || len > 20) return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (p[i] < '0' || p[i] > '9') return -1;
        unsigned d = (unsigned)(p[i] - '0');
        if (v > (UINT64_MAX - d) / 10) return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

void
reply_free(Reply *r)
{
    free(r->body);
    for (size_t i = 0; i < r->njobs; i++)
        free(r->jobs[i].body);
    free(r->jobs);
    r->body = NULL;
    r->jobs = NULL;
    r->body_len = r->njobs = 0;
}

/* Which word of the status line holds a body's byte count, or -1. */
static int
body_word(const Reply *r)
{
    if (reply_is(r, "RESERVED") || reply_is(r, "FOUND")) return 2;
    if (reply_is(r, "OK")) return 1;
    return -1;
}

static int
malformed(const Reply *r, const char *where, char *err, size_t errcap)
{
    snprintf(err, errcap, "malformed reply from %s: %.60s", where, r->line);
    return -1;
}

/* Reads the body announced by r's status line, if it announces one. */
static int
read_reply_body(Client *c, Reply *r, char *err, size_t errcap)
{
    int w = body_word(r);
    uint64_t n;
    if (w < 0) return 0;
    if (reply_num(r, w, &n) < 0 || n > CLIENT_BODY_MAX)
        return malformed(r, c->where, err, errcap);
    r->body_len = (size_t)n;
    return read_body(c, r->body_len, &r->body, err, errcap);
}

/* RESERVED_BATCH <n>: n blocks "RESERVED <id> <bytes>\r\n<data>\r\n". */
static int
read_batch(Client *c, Reply *r, char *err, size_t errcap)
{
    uint64_t n;
    if (reply_num(r, 1, &n) < 0 || n > CLIENT_BATCH_MAX)
        return malformed(r, c->where, err, errcap);
    if (n > 0 && !(r->jobs = calloc((size_t)n, sizeof *r->jobs))) {
        snprintf(err, errcap, "out of memory");
        return -1;
    }
    for (uint64_t i = 0; i < n; i++) {
        Reply one = {0};
        if (read_line(c, one.line, err, errcap) < 0) return -1;
        if (!reply_is(&one, "RESERVED") || reply_num(&one, 1, &r->jobs[i].id))
            return malformed(&one, c->where, err, errcap);
        if (read_reply_body(c, &one, err, errcap) < 0) return -1;
        r->jobs[i].body = one.body;
        r->jobs[i].body_len = one.body_len;
        r->njobs++;
    }
    return 0;
}

int
client_read_reply(Client *c, Reply *r, char *err, size_t errcap)
{
    memset(r, 0, sizeof *r);
    int rc = read_line(c, r->line, err, errcap);
    if (rc == 0) {
        if (reply_is(r, "RESERVED_BATCH"))
            rc = read_batch(c, r, err, errcap);
        else
            rc = read_reply_body(c, r, err, errcap);
    }
    if (rc < 0) reply_free(r);
    return rc;
}
