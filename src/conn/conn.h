/* conn.h - one client connection as transport: its socket and watchers,
 * the input framing (command lines with beanstalkd's 224-byte line rules,
 * put bodies, discarded bodies), and the output buffer whose replies leave
 * in command order, each only once the store has acknowledged the sequence
 * it waits for. What the input means belongs to the handler (ConnHandler in
 * Server.handler, implemented by cmd.c); the connection embeds the client's
 * protocol state (session.h) but never acts on it. Loop thread only. */
#ifndef ROCKSTALK_CONN_H
#define ROCKSTALK_CONN_H

#include <ev.h>
#include <stddef.h>
#include <stdint.h>

#include "base/common.h"
#include "net/tlssock.h"
#include "proto/proto.h"
#include "queue/session.h"
#include "queue/state.h"

/* Input states. */
enum {
    IN_CMD = 0, /* expecting a command line */
    IN_ENDLINE, /* discarding an over-long line up to its CRLF */
    IN_BODY,    /* reading a put body into in_body */
    IN_SKIP,    /* discarding skip_left bytes, then replying skip_reply
                   (JOB_TOO_BIG, or OUT_OF_MEMORY when a body had no room) */
    IN_PAUSED,  /* the handler paused input (a blocked reserve, a reply
                   waiting for a body): input stays buffered */
};

/* The kind of listener a connection arrived on (Conn.via). */
enum {
    CONN_VIA_TCP = 0,    /* plaintext TCP (-l/-p, tcp://, inherited sockets) */
    CONN_VIA_TLS,        /* a tls:// listener */
    CONN_VIA_UNIX,       /* a unix: listener (AF_UNIX) */
    CONN_VIA_RELAY,      /* relayed by a cluster peer over its mTLS link */
    CONN_VIA_RELAY_UNIX, /* ... a client of the peer's unix socket, which
                            the peer trusts (PEER_CHANNEL_CLIENT_UNIX) */
};

/* A reply waiting for the store: bytes of obuf up to end may leave once
 * the acknowledged sequence reaches need. */
typedef struct OutMark {
    uint64_t need;
    uint64_t end;
} OutMark;

/* Where a connection without a socket of its own (a stream of a
 * multiplexed relay link, cluster/muxserve.h) sends its output and learns
 * it may take input. arg is ConnSink's user's. */
typedef struct ConnSink {
    /* Takes up to n bytes of output; returns how many (fewer: the rest
     * waits for conn_sink_writable). */
    size_t (*write)(void *arg, const char *p, size_t n);
    /* The connection reads again: conn_feed what is waiting. */
    void (*pull)(void *arg);
    /* The connection closed (conn_close): the sink forgets it, unless it
     * was detached (it goes on for the descriptor detach gave). */
    void (*closed)(void *arg);
    /* A descriptor (non-blocking, close-on-exec, owned by the caller)
     * whose written bytes reach the peer after the connection's output
     * and whose close ends the stream; for a backup's sender thread,
     * which takes a socket over (server/backup.c). -1 on failure. */
    int (*detach)(void *arg);
} ConnSink;

typedef struct Conn {
    Server *srv;
    int fd;               /* -1 with a sink */
    const ConnSink *sink; /* a virtual connection's, else NULL */
    void *sink_arg;
    ev_io read_w, write_w;
    struct Conn *prev, *next; /* Server.conns */
    struct Conn *pnext;       /* Server.pending */
    struct Conn *rnext;       /* Server.runq */
    struct Conn *dnext;       /* Server.dead: closed, freed at a safe point */
    uint8_t in_pending, in_runq, writing, reading, closed;
    uint8_t eof;              /* the peer sent FIN */
    uint8_t closing;          /* close once output is written */
    uint8_t producer, worker; /* for current-producers/-workers */
    uint8_t in_state;
    uint8_t lingering;          /* shutting down: FIN sent, input discarded */
    uint32_t active_window;     /* Server.active_window when it last read */
    uint8_t via;                /* CONN_VIA_*: set by whoever accepted it */
    TlsSock *tls;               /* the socket's TLS, or NULL (plaintext) */
    char *peer_cn;              /* conn_peer_cn's answer once known, or NULL */
    uint8_t secured;            /* tls: the handshake has completed */
    uint8_t in_hs;              /* on Server.hs_head's list */
    struct Conn *hprev, *hnext; /* ... its neighbours */

    /* access control (server/access.h), used only with --auth-file */
    uint8_t auth_state;         /* ACCESS_PRE, _USER or _TRUSTED */
    uint8_t use_bits;           /* the identity's classes on se.use */
    struct AuthUser *user;      /* ACCESS_USER: its identity */
    struct Conn *aprev, *anext; /* ACCESS_PRE: Access.head, oldest first */
    int64_t opened_ns;          /* monotonic, for the pre-auth and TLS
                                   handshake timeouts */
    uint64_t id;                /* its number, from 1 (total-connections
                                   when it opened) */
    double last_cmd;            /* ev_now of its latest command line */

    /* input */
    char *ibuf;
    size_t ibeg, iend, icap;
    Cmd put; /* the put whose body is being read */
    uint64_t put_id;
    char *in_body; /* body_size + 2 bytes */
    size_t in_read;
    uint64_t skip_left;
    const char *skip_reply; /* static string, CRLF included */
    uint64_t ring_ticket;   /* the put whose body the store's body writer
                               has (cmd.c; input paused), or 0 */
    uint8_t put_key_len;    /* put-unique: its key (0: a plain put) */
    char put_key[TUBE_NAME_MAX];

    /* output */
    /* Output positions count bytes since the connection opened: obuf[0]
     * holds byte obase; [osent, orel) may be written, [orel, oend) waits
     * for the store (marks). */
    char *obuf;
    size_t ocap;
    uint64_t obase, osent, orel, oend;
    OutMark *marks;
    size_t mhead, mlen, mcap;

    Session se; /* protocol state: the handler's and the queue's */
} Conn;

/* What a connection's input means (implemented by cmd.c). None may free
 * the connection (conn_close marks it for conn_reap). */
typedef struct ConnHandler {
    int (*opened)(Conn *c); /* new connection: set up c->se; 0, or -1 to
                               refuse it (out of memory) */
    void (*line)(Conn *c, const char *line, size_t len); /* a command line,
                                                            CRLF excluded */
    void (*bad_line)(Conn *c); /* an over-long line has ended */
    void (*body)(Conn *c);     /* c->in_body (put.body_size + 2) is read */
    void (*hangup)(Conn *c);   /* the peer sent FIN while input is paused */
    void (*closed)(Conn *c);   /* closing: release c->se's state */
} ConnHandler;

/* The connection whose Session is se. */
static inline Conn *
conn_of(Session *se)
{
    return (Conn *)(void *)((char *)se - offsetof(Conn, se));
}

/* Accepts fd (non-blocking, owned from now on) as a new plaintext TCP
 * connection and calls the handler's opened. Returns the conn, or NULL
 * (fd closed). */
Conn *conn_new(Server *s, int fd);

/* The same for a connection that arrived by via (CONN_VIA_*) and speaks
 * TLS through tls (owned from now on, NULL for plaintext; its handshake
 * done already, or run by the first reads). head (n bytes, copied, at
 * most 65536) is input that came before: it is run as if read first.
 * NULL (fd and tls freed) when memory lacks or the handler refuses. */
Conn *conn_new_via(Server *s, int fd, uint8_t via, TlsSock *tls,
                   const void *head, size_t n);

/* A virtual connection (no socket: fd -1) of kind via whose output goes
 * to sink (borrowed, with arg: both outlive it, until sink->closed) and
 * whose input comes from conn_feed. Counted, limited and shown like any
 * other. NULL when memory lacks or the handler refuses. */
Conn *conn_new_sink(Server *s, uint8_t via, const ConnSink *sink, void *arg);

/* A virtual connection's input: takes what fits of p (n bytes) while it
 * reads, runs the commands, and returns the bytes taken (0..n). c may be
 * closed on return (conn_close: sink->closed ran). */
size_t conn_feed(Conn *c, const char *p, size_t n);

/* A virtual connection's peer sent FIN (after the bytes fed so far). */
void conn_feed_eof(Conn *c);

/* A virtual connection's sink takes output again. */
void conn_sink_writable(Conn *c);

/* Closes the connection now (the handler's closed releases its protocol
 * state first); conn_reap frees it. */
void conn_close(Conn *c);

/* Appends a reply made of head (hn bytes) then body (bn bytes, may be 0);
 * it leaves after every earlier reply, once the store has acknowledged
 * sequence need (0: nothing to wait for). */
void conn_reply_at(Conn *c, const char *head, size_t hn, const char *body,
                   size_t bn, uint64_t need);

/* Pauses c's input (IN_PAUSED): buffered commands wait until conn_resume,
 * which also schedules c to run them. */
void conn_pause(Conn *c);
void conn_resume(Conn *c);

/* Appends a reply (n bytes); it leaves after every earlier reply, once the
 * store has acknowledged the current sequence. */
void conn_reply(Conn *c, const char *msg, size_t n);

/* Appends a reply given as a string literal (its length is known). */
#define conn_reply_lit(c, lit) conn_reply((c), lit, sizeof(lit) - 1)

/* Appends a printf-formatted reply line. */
void conn_replyf(Conn *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Appends "OK <len-2>\r\n" and body (len bytes, ending in CRLF). */
void conn_reply_ok(Conn *c, const char *body, size_t len);

/* Stops reading commands from c and closes it once every reply before
 * this point has been written (quit). */
void conn_close_after_replies(Conn *c);

/* Queues c to process its buffered input at the end of this iteration
 * (after a blocked reserve ended, or its output drained). */
void conn_schedule(Conn *c);

/* Once per loop iteration (ev_prepare): conn_run_all processes the input of
 * every scheduled connection; conn_flush_all writes every connection's
 * acknowledged output; conn_reap frees closed connections. */
void conn_run_all(Server *s);
void conn_flush_all(Server *s);
void conn_reap(Server *s);

/* Clean shutdown, once c's replies are all written: sends FIN
 * (shutdown(2) SHUT_WR) and from then on reads and discards c's input until
 * the peer closes, then closes c. Closing with unread input would send a
 * reset, which can destroy replies the peer has not read yet. */
void conn_linger(Conn *c);

/* The subject CN of the client certificate c's TLS session verified
 * (issue 32: an auth-file identity "cert" matches it), or NULL when c is
 * not TLS or sent no certificate. Owned by c; valid while c is open. */
const char *conn_peer_cn(const Conn *c);

/* How long a connection's TLS handshake may take (seconds) before
 * conn_sweep_tls closes it: a peer that connects to a tls:// listener and
 * never finishes its handshake holds no session for long. */
#define CONN_HANDSHAKE_S 10

/* TLS handshakes under way at most: one more closes the oldest of them
 * (a session costs tens of KiB before its handshake ends; evicting the
 * oldest, not refusing the newest, keeps a slow-handshake flood from
 * locking real clients out). */
#define CONN_HANDSHAKES_MAX 256

/* Over every TLS connection (tls:// clients, relayed links): closes those
 * opened at or before cut (monotonic ns) whose handshake has not
 * completed (oldest first, from Server.hs_head), and gives back the buffers of
 * one that read nothing in the current activity window and has no output
 * waiting (tls_sock_trim: an idle TLS connection then holds about 27 KiB, not
 * 50). O(connections); the server calls it each second. */
void conn_sweep_tls(Server *s, int64_t cut);

/* Re-evaluates whether c's socket is read (backpressure, buffer space). */
void conn_update_read(Conn *c);

#endif
