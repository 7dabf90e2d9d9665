/* net.h - the listening socket: TCP on an address and port, or a Unix-domain
 * socket ("unix:PATH"), or one inherited from systemd socket activation. */
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

#endif
