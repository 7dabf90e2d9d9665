/* client.h - one connection to a beanstalkd-protocol server (TCP or a unix
 * socket) and the framing of its replies: a status line, then for RESERVED,
 * FOUND and OK a counted body, and for rockstalk's RESERVED_BATCH a count of
 * RESERVED blocks. Single-threaded, no global state; errors are returned
 * with a message in the caller's err buffer, never printed. */
#ifndef ROCKSTALK_CLI_CLIENT_H
#define ROCKSTALK_CLI_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "clitls.h"

/* Size of the err buffers the functions below fill. */
#define CLIENT_ERR_LEN 256

/* Longest status line accepted from a server, CRLF excluded. Real replies
 * are under 64 bytes; a longer line means the peer does not speak the
 * protocol. */
#define CLIENT_LINE_MAX 1024

/* Largest body accepted in one reply (bytes): rockstalkd's job size limit
 * (1 GiB), which also bounds any YAML reply. */
#define CLIENT_BODY_MAX 1073741824u

/* Most jobs one RESERVED_BATCH reply may announce (reserve-batch's count is
 * at most 1000 by its grammar). */
#define CLIENT_BATCH_MAX 1000

typedef struct Client {
    int fd;      /* -1 when closed */
    CliTls *tls; /* the session over fd (--tls), or NULL */
    char *buf;   /* bytes received and not yet consumed: [off, len) */
    size_t off, len, cap;
    int broken;      /* nonzero after a send or receive failed or the
                        peer closed: the connection is no longer usable */
    char where[300]; /* "HOST:PORT" or "unix:PATH", for messages */
} Client;

/* One job inside a RESERVED_BATCH reply. */
typedef struct ReplyJob {
    uint64_t id;
    char *body; /* malloc'd, body_len bytes plus a NUL */
    size_t body_len;
} ReplyJob;

typedef struct Reply {
    char line[CLIENT_LINE_MAX + 1]; /* status line, CRLF removed, NUL-ended */
    char *body;                     /* malloc'd body plus a NUL, or NULL */
    size_t body_len;
    ReplyJob *jobs; /* RESERVED_BATCH only: njobs malloc'd entries */
    size_t njobs;
} Reply;

/* Connects to unix_path when it is not NULL, else to host:port (names are
 * resolved; every address is tried), then with tls (not NULL) runs TLS
 * over it (clitls.h). Returns 0, or -1 with "cannot connect to WHERE:
 * REASON" in err. The Client owns its socket, session and buffer until
 * client_close(). */
int client_open(Client *c, const char *host, const char *port,
                const char *unix_path, const ClientTls *tls, char *err,
                size_t errcap);

/* Closes the socket and frees the buffer; safe to call twice. */
void client_close(Client *c);

/* Writes all len bytes. Returns 0, or -1 with a message in err. */
int client_send(Client *c, const void *data, size_t len, char *err,
                size_t errcap);

/* Reads raw bytes (a stream after a status line, as rockstalk-backup's):
 * first what the buffer holds past the last reply, else one receive of at
 * most n bytes. Returns the count, 0 at the end of the server's stream, or
 * -1 with a message in err. */
long client_recv(Client *c, void *buf, size_t n, char *err, size_t errcap);

/* Reads one whole reply (status line, and any body or batch) into *r,
 * which the caller releases with reply_free(). Returns 0, or -1 with a
 * message in err when the connection fails, closes, or the reply is
 * malformed (then *r holds nothing to free). */
int client_read_reply(Client *c, Reply *r, char *err, size_t errcap);

/* Frees what *r holds and empties it. */
void reply_free(Reply *r);

/* Nonzero when the status line's first word is exactly word. */
int reply_is(const Reply *r, const char *word);

/* The status line's n-th word (0-based) parsed as an unsigned decimal into
 * *out. Returns 0, or -1 when there is no such word or it is not a number. */
int reply_num(const Reply *r, int n, uint64_t *out);

#endif
