/* net.h - listening sockets: TCP on an address and port, or a Unix-domain
 * socket (a ListenAddr, listen.h), or those inherited from systemd socket
 * activation (and handed over the same way by a cluster node's exec);
 * and the dead-peer detection every client, relayed and peer TCP socket
 * gets (net_keepalive). Start-up (loop thread) except net_keepalive (any
 * thread). Errors: -1 with a message in err or errno; nothing prints. */
#ifndef ROCKSTALK_NET_H
#define ROCKSTALK_NET_H

#include <stddef.h>
#include <sys/types.h>

#include "net/listen.h"

/* Unix socket files are made with this mode: the owner and its group may
 * connect, others not (rockstalkd(1), -u gives the file to that user). */
#define NET_UNIX_MODE 0660

/* A file's identity: its device and inode, and its birth time where the
 * file system keeps one (an inode number is reused once a file is gone,
 * the birth time is not; chmod and chown change neither). */
typedef struct NetFileId {
    dev_t dev;
    ino_t ino;
    long long btime_s; /* 0 with btime_ns: not known */
    long btime_ns;
} NetFileId;

/* Opens a non-blocking listening socket for a (listen.h). TCP and TLS:
 * the first address HOST resolves to that binds (SO_REUSEADDR). Unix: a
 * socket file at the path is probed first: one a server still listens on
 * (connect succeeds, or its backlog is full) is refused, a stale one
 * (connect refused) removed; anything else at the path (a regular file, a
 * directory) is refused, never removed. The new file gets mode
 * NET_UNIX_MODE whatever the umask, and its identity is written to *made
 * (NULL: not wanted) so that net_unlink_socket removes only it. Returns
 * the fd, or -1 with a message naming the listener in err. Start-up only:
 * it sets the process's umask for the bind, so no other thread may create
 * files meanwhile. */
int net_listen_addr(const ListenAddr *a, NetFileId *made, char *err,
                    size_t errcap);

/* net_listen_addr for -l/-p (listen_from_flags): addr an IPv4/IPv6
 * address or host name ("0.0.0.0" when NULL), or "unix:PATH". */
int net_listen(const char *addr, int port, char *err, size_t errcap);

/* Writes the identity of the socket file at path into *id. Returns 0, or
 * -1 when there is none (errno; EINVAL: not a socket). */
int net_socket_file(const char *path, NetFileId *id);

/* Removes the socket file at path if it still is *id (not one a later
 * server made there, nor another file). Returns 0 once removed, or -1
 * (errno; ESTALE: something else is at the path now). */
int net_unlink_socket(const char *path, const NetFileId *id);

/* An inherited listening socket (systemd socket activation): its fd and
 * its LISTEN_FDNAMES entry ("" if none, or longer than NET_FDNAME_MAX). */
#define NET_FDNAME_MAX 63
typedef struct NetInherited {
    int fd;
    char name[NET_FDNAME_MAX + 1];
} NetInherited;

/* The listening sockets handed over by systemd (LISTEN_PID this process,
 * LISTEN_FDS of them from fd 3 on, LISTEN_FDNAMES naming them), made
 * non-blocking and close-on-exec, into out (max entries); clears the
 * variables. Returns how many (0: none for this process), or -1 with a
 * message when there are more than max or one is not a listening stream
 * socket. */
int net_inherited(NetInherited *out, int max, char *err, size_t errcap);

/* For an exec that hands n listening sockets over as systemd does: moves
 * fds[i] to descriptor 3 + i (not close-on-exec), and sets LISTEN_PID (this
 * process: exec keeps it), LISTEN_FDS and LISTEN_FDNAMES (names, each
 * without ':'). The caller then closes or marks close-on-exec every
 * descriptor from 3 + n on and execs. Returns 0, or -1 with errno. */
int net_hand_over(const int *fds, const char *const *names, int n);

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
