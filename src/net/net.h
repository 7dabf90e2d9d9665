/* net.h - the listening socket: TCP on an address and port, or a Unix-domain
 * socket ("unix:PATH"), or one inherited from systemd socket activation;
 * and the dead-peer detection every client, relayed and peer TCP socket
 * gets (net_keepalive). */
#ifndef ROCKSTALK_NET_H
#define ROCKSTALK_NET_H

#include <stddef.h>

/* Opens a non-blocking listening socket. addr is an IPv4/IPv6 address or
 * host name ("0.0.0.0" when NULL), or "unix:PATH" (port then unused; an
 * existing socket file at PATH is replaced). Returns the fd, or -1 with a
 * message in err. */
int net_listen(const char *addr, int port, char *err, size_t errcap);

/* The listening socket handed over by systemd (LISTEN_PID/LISTEN_FDS, fd
 * 3), made non-blocking; -1 if there is none. Clears the variables. */
int net_inherited(void);

/* Dead-peer detection (net_keepalive): keepalive probes after
 * NET_KEEPIDLE_S seconds of silence, every NET_KEEPINTVL_S seconds, up to
 * NET_KEEPCNT of them; and a connection whose peer has acknowledged nothing
 * for NET_USER_TIMEOUT_MS milliseconds while data or probes wait (a host
 * gone, a link cut, or a peer that keeps its receive window shut) is
 * dropped by the kernel (TCP_USER_TIMEOUT, which also ends the probes). */
#define NET_KEEPIDLE_S 30
#define NET_KEEPINTVL_S 10
#define NET_KEEPCNT 3
#define NET_USER_TIMEOUT_MS 60000

/* Turns on dead-peer detection (the values above) on fd, a TCP socket,
 * connected or not: the next read or write on a dead connection then fails
 * (ETIMEDOUT) instead of waiting for TCP's retransmissions (about 15
 * minutes) or forever (an idle connection). Returns 0, or -1 with errno
 * from the first setsockopt that failed (EOPNOTSUPP on a Unix socket, which
 * needs none); the options set before it stay set. */
int net_keepalive(int fd);

#endif
