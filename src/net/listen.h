/* listen.h - where a listener listens, before any socket exists: a
 * --listen URL (tcp://HOST:PORT, tls://HOST:PORT, unix:PATH) or the -l/-p
 * pair parsed into a ListenAddr, printed back in one canonical form, and
 * whether it stays on this host (listen_is_loopback, for the start-up
 * warning and the access checks). Pure: no socket, no state, any thread.
 * Errors: -1 with a message naming the URL in err; nothing here prints. */
#ifndef ROCKSTALK_LISTEN_H
#define ROCKSTALK_LISTEN_H

#include <stddef.h>
#include <sys/socket.h>

/* What a listener's connections speak (Conn.via follows it). */
typedef enum ListenKind {
    LISTEN_TCP = 0, /* plaintext TCP: -l/-p, tcp://, an inherited socket */
    LISTEN_TLS,     /* TLS over TCP: tls:// */
    LISTEN_UNIX,    /* a Unix-domain stream socket: unix:PATH, -l unix: */
} ListenKind;

/* A host: a DNS name (at most 253 characters) or an IP literal. */
#define LISTEN_HOST_MAX 255
/* A unix socket's path: sockaddr_un.sun_path holds 108 bytes with the
 * terminating NUL (Linux), and a longer path cannot be bound. */
#define LISTEN_PATH_MAX 107
/* The longest URL listen_parse reads (longer ones are refused) and the
 * room listen_format needs for any ListenAddr with its NUL. */
#define LISTEN_URL_MAX 280

/* One listener's address. */
typedef struct ListenAddr {
    ListenKind kind;
    int port;                       /* tcp, tls: 1-65535 (0 from -p 0) */
    char host[LISTEN_HOST_MAX + 1]; /* tcp, tls: name or IP, no brackets */
    char path[LISTEN_PATH_MAX + 1]; /* unix: non-empty */
} ListenAddr;

/* Parses a --listen URL: "tcp://HOST:PORT", "tls://HOST:PORT" (HOST a
 * name, an IPv4 literal or an IPv6 literal in brackets, "[::1]"; PORT
 * 1-65535) or "unix:PATH" (a non-empty path of at most LISTEN_PATH_MAX
 * bytes). Refuses an unknown scheme, a missing host or port, port 0 or
 * beyond 65535, an unterminated bracket, an IPv6 address without brackets
 * and anything after the port. Returns 0, or -1 with a message in err. */
int listen_parse(const char *url, ListenAddr *out, char *err, size_t errcap);

/* The -l ADDR / -p PORT pair as a ListenAddr: ADDR NULL is "0.0.0.0",
 * "unix:PATH" a unix listener (port unused), anything else a TCP host (an
 * IPv6 literal with or without brackets, as beanstalkd's -l takes it);
 * port 0-65535 (0: any free port). Returns 0, or -1 with a message. */
int listen_from_flags(const char *addr, int port, ListenAddr *out, char *err,
                      size_t errcap);

/* A bound socket's address (getsockname's) as a ListenAddr of the given
 * kind (LISTEN_UNIX needs an AF_UNIX address, the others AF_INET or
 * AF_INET6; the host is printed numeric; a Linux abstract unix address
 * becomes the path "@NAME", unprintable bytes '?'). Returns 0, or -1 for
 * another family or an unnamed unix socket. */
int listen_from_sockaddr(const struct sockaddr *sa, socklen_t len,
                         ListenKind kind, ListenAddr *out);

/* Writes a's canonical URL into buf (cap bytes, LISTEN_URL_MAX suffice):
 * "tcp://127.0.0.1:11300", "tls://[::1]:11300", "unix:/run/x.sock". */
void listen_format(const ListenAddr *a, char *buf, size_t cap);

/* 1 if only this host can reach a: a unix socket, or a host that is an
 * IPv4 literal in 127.0.0.0/8, "::1" or an IPv4-mapped 127.0.0.0/8; 0 for
 * anything else, a wildcard (0.0.0.0, ::) and every name included
 * ("localhost" too: its resolution is not ours to trust). Judge the
 * address a socket was bound to (listen_from_sockaddr) for an exact
 * answer. */
int listen_is_loopback(const ListenAddr *a);

/* 1 if a and b name the same listener (kind aside: tcp://X and tls://X
 * are one port). */
int listen_same(const ListenAddr *a, const ListenAddr *b);

/* Inherited sockets (systemd's LISTEN_FDS, net_inherited) are plaintext
 * TCP or unix listeners by their address family, or TLS ones when their
 * LISTEN_FDNAMES entry (FileDescriptorName=) is this. */
#define LISTEN_FDNAME_TLS "tls"

/* A cluster node that steps down execs itself with every listener handed
 * over as systemd would (net_hand_over), each named by this function:
 * "rockstalkd-" and the kind ("tcp", "tls", "unix", or "unix-own" for a
 * unix socket file the process removes at exit). Static strings. */
const char *listen_handover_name(ListenKind kind, int owned);

/* 1 with *kind and *owned set if name is one listen_handover_name makes,
 * else 0 (a name of systemd's, or none). */
int listen_handover_parse(const char *name, ListenKind *kind, int *owned);

#endif
