/* listen.c - see listen.h. */
#include "net/listen.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/un.h>

/* A DNS name's longest text form (RFC 1035, without the final dot). */
#define NAME_MAX_LEN 253

/* Formats "FLAG 'URL': why" into err, the URL with anything unprintable
 * shown as '?' and cut to a readable length. Returns -1. */
static int
fail(char *err, size_t errcap, const char *flag, const char *url,
     const char *why)
{
    char shown[LISTEN_URL_MAX + 1];
    size_t n = 0;

    for (; url[n] && n < sizeof shown - 1; n++)
        shown[n] = isprint((unsigned char)url[n]) ? url[n] : '?';
    shown[n] = '\0';
    snprintf(err, errcap, "%s '%s%s': %s", flag, shown, url[n] ? "..." : "",
             why);
    return -1;
}

static int
parse_unix(const char *flag, const char *url, const char *path, ListenAddr *out,
           char *err, size_t errcap)
{
    if (!*path) return fail(err, errcap, flag, url, "empty path (unix:PATH)");
    if (strlen(path) > LISTEN_PATH_MAX)
        return fail(err, errcap, flag, url,
                    "path longer than 107 bytes (a unix socket's sun_path)");
    out->kind = LISTEN_UNIX;
    strcpy(out->path, path);
    return 0;
}

/* PORT after the host's ':' (p at the first digit): 1-65535 and nothing
 * after it. */
static int
parse_port(const char *flag, const char *url, const char *p, ListenAddr *out,
           char *err, size_t errcap)
{
    long v = 0;
    const char *q = p;

    if (!*p) return fail(err, errcap, flag, url, "no port (HOST:PORT)");
    for (; isdigit((unsigned char)*q); q++)
        if ((v = v * 10 + (*q - '0')) > 65535)
            return fail(err, errcap, flag, url, "port beyond 65535");
    if (q == p) return fail(err, errcap, flag, url, "the port is not a number");
    if (*q) return fail(err, errcap, flag, url, "junk after the port");
    if (v == 0)
        return fail(err, errcap, flag, url,
                    "port 0 (give a fixed port, 1-65535)");
    out->port = (int)v;
    return 0;
}

/* A name or IPv4 literal: letters, digits, '.', '-' and '_'. */
static int
host_chars_ok(const char *h, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)h[i]) && !strchr(".-_", h[i])) return 0;
    return 1;
}

/* HOST:PORT after "tcp://" or "tls://"; HOST "[v6]" or a name/IPv4. */
static int
parse_hostport(const char *flag, const char *url, const char *p,
               ListenAddr *out, char *err, size_t errcap)
{
    const char *hs = p, *he, *q;

    if (*p == '[') {
        if (!(he = strchr(p, ']')))
            return fail(err, errcap, flag, url, "unterminated '['");
        hs = p + 1;
        q = he + 1;
    } else {
        if (strchr(p, ':') != strrchr(p, ':'))
            return fail(err, errcap, flag, url,
                        "an IPv6 address goes in brackets: "
                        "tcp://[::1]:11300");
        if (!(he = strchr(p, ':'))) he = p + strlen(p);
        q = he;
        if (!host_chars_ok(hs, (size_t)(he - hs)))
            return fail(err, errcap, flag, url,
                        "the host is not a name or an IP address");
    }
    if (he == hs)
        return fail(err, errcap, flag, url,
                    "no host (0.0.0.0 or [::] listens on every address)");
    if (he - hs > NAME_MAX_LEN)
        return fail(err, errcap, flag, url, "host name too long");
    memcpy(out->host, hs, (size_t)(he - hs));
    out->host[he - hs] = '\0';
    struct in6_addr a6;
    if (*p == '[' && inet_pton(AF_INET6, out->host, &a6) != 1)
        return fail(err, errcap, flag, url,
                    "not an IPv6 address between the brackets");
    if (!*q) return fail(err, errcap, flag, url, "no port (HOST:PORT)");
    if (*q != ':') return fail(err, errcap, flag, url, "junk after the host");
    return parse_port(flag, url, q + 1, out, err, errcap);
}

int
listen_parse(const char *url, ListenAddr *out, char *err, size_t errcap)
{
    const char *flag = "--listen";

    memset(out, 0, sizeof *out);
    if (strlen(url) > LISTEN_URL_MAX)
        return fail(err, errcap, flag, url, "longer than 280 bytes");
    if (strncmp(url, "unix:", 5) == 0)
        return parse_unix(flag, url, url + 5, out, err, errcap);
    if (strncmp(url, "tcp://", 6) == 0)
        out->kind = LISTEN_TCP;
    else if (strncmp(url, "tls://", 6) == 0)
        out->kind = LISTEN_TLS;
    else
        return fail(err, errcap, flag, url,
                    "unknown scheme (tcp://HOST:PORT, tls://HOST:PORT or "
                    "unix:PATH)");
    return parse_hostport(flag, url, url + 6, out, err, errcap);
}

int
listen_from_flags(const char *addr, int port, ListenAddr *out, char *err,
                  size_t errcap)
{
    const char *flag = "-l", *h;
    size_t n;

    memset(out, 0, sizeof *out);
    if (!addr) addr = "0.0.0.0";
    if (strncmp(addr, "unix:", 5) == 0)
        return parse_unix(flag, addr, addr + 5, out, err, errcap);
    if (port < 0 || port > 65535)
        return fail(err, errcap, "-p", addr, "port beyond 0-65535");
    h = addr;
    n = strlen(h);
    if (n >= 2 && h[0] == '[' && h[n - 1] == ']') {
        h++;
        n -= 2;
    }
    if (n == 0) return fail(err, errcap, flag, addr, "empty address");
    if (n > NAME_MAX_LEN) return fail(err, errcap, flag, addr, "too long");
    out->kind = LISTEN_TCP;
    memcpy(out->host, h, n);
    out->host[n] = '\0';
    out->port = port;
    return 0;
}

int
listen_from_sockaddr(const struct sockaddr *sa, socklen_t len, ListenKind kind,
                     ListenAddr *out)
{
    memset(out, 0, sizeof *out);
    out->kind = kind;
    if (sa->sa_family == AF_UNIX) {
        const struct sockaddr_un *u = (const struct sockaddr_un *)sa;
        size_t off = offsetof(struct sockaddr_un, sun_path);
        if (kind != LISTEN_UNIX || len <= off || len > sizeof *u) return -1;
        size_t n = len - off;
        if (u->sun_path[0]) {
            size_t k = strnlen(u->sun_path, n);
            if (k > LISTEN_PATH_MAX) return -1;
            memcpy(out->path, u->sun_path, k);
            return 0;
        }
        /* abstract (Linux): shown as "@name", never a file */
        out->path[0] = '@';
        for (size_t i = 1; i < n && i <= LISTEN_PATH_MAX; i++)
            out->path[i] =
                isprint((unsigned char)u->sun_path[i]) ? u->sun_path[i] : '?';
        return 0;
    }
    if (kind == LISTEN_UNIX) return -1;
    if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &a->sin_addr, out->host, sizeof out->host);
        out->port = ntohs(a->sin_port);
        return 0;
    }
    if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &a->sin6_addr, out->host, sizeof out->host);
        out->port = ntohs(a->sin6_port);
        return 0;
    }
    return -1;
}

void
listen_format(const ListenAddr *a, char *buf, size_t cap)
{
    if (a->kind == LISTEN_UNIX) {
        snprintf(buf, cap, "unix:%s", a->path);
        return;
    }
    const char *scheme = a->kind == LISTEN_TLS ? "tls" : "tcp";
    if (strchr(a->host, ':'))
        snprintf(buf, cap, "%s://[%s]:%d", scheme, a->host, a->port);
    else
        snprintf(buf, cap, "%s://%s:%d", scheme, a->host, a->port);
}

int
listen_is_loopback(const ListenAddr *a)
{
    struct in_addr a4;
    struct in6_addr a6;

    if (a->kind == LISTEN_UNIX) return 1;
    if (inet_pton(AF_INET, a->host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, a->host, &a6) == 1)
        return IN6_IS_ADDR_LOOPBACK(&a6) ||
               (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127);
    return 0;
}

int
listen_same(const ListenAddr *a, const ListenAddr *b)
{
    if ((a->kind == LISTEN_UNIX) != (b->kind == LISTEN_UNIX)) return 0;
    if (a->kind == LISTEN_UNIX) return strcmp(a->path, b->path) == 0;
    return a->port == b->port && strcasecmp(a->host, b->host) == 0;
}

static const struct {
    const char *name;
    ListenKind kind;
    int owned;
} handover_names[] = {
    {"rockstalkd-tcp", LISTEN_TCP, 0},
    {"rockstalkd-tls", LISTEN_TLS, 0},
    {"rockstalkd-unix", LISTEN_UNIX, 0},
    {"rockstalkd-unix-own", LISTEN_UNIX, 1},
};
#define NHANDOVER (sizeof handover_names / sizeof handover_names[0])

const char *
listen_handover_name(ListenKind kind, int owned)
{
    for (size_t i = 0; i < NHANDOVER; i++)
        if (handover_names[i].kind == kind &&
            handover_names[i].owned == (kind == LISTEN_UNIX && owned))
            return handover_names[i].name;
    return handover_names[0].name; /* not reached: every kind is listed */
}

int
listen_handover_parse(const char *name, ListenKind *kind, int *owned)
{
    for (size_t i = 0; i < NHANDOVER; i++)
        if (strcmp(name, handover_names[i].name) == 0) {
            *kind = handover_names[i].kind;
            *owned = handover_names[i].owned;
            return 1;
        }
    return 0;
}
