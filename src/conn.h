/* conn.h - one client connection: its socket and watchers, the input state
 * machine (command lines with beanstalkd's 224-byte line rules, put bodies,
 * discarded bodies), the per-connection protocol state (used tube, watch
 * list, reserved jobs, blocked reserve) and the output buffer whose replies
 * leave in command order, each only once the store has acknowledged the
 * state it shows. Loop thread only. */
#ifndef ROCKSTALK_CONN_H
#define ROCKSTALK_CONN_H

#include <ev.h>
#include <stddef.h>
#include <stdint.h>

#include "heap.h"
#include "job.h"
#include "ptrset.h"
#include "server.h"
#include "tube.h"

/* Input states. */
enum {
    IN_CMD = 0, /* expecting a command line */
    IN_ENDLINE, /* discarding an over-long line up to its CRLF */
    IN_BODY,    /* reading a put body into in_body */
    IN_SKIP,    /* discarding skip_left bytes, then replying skip_reply
                   (JOB_TOO_BIG, or OUT_OF_MEMORY when a body had no room) */
    IN_WAIT,    /* blocked in reserve: input stays buffered */
    IN_FETCH,   /* a RESERVED/FOUND reply waits for its body from disk
                   (read by the reader thread): input stays buffered */
};

/* A reply waiting for the store: bytes of obuf up to end may leave once
 * the acknowledged sequence reaches need. */
typedef struct OutMark {
    uint64_t need;
    uint64_t end;
} OutMark;

typedef struct Conn {
    Server *srv;
    int fd;
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
    uint8_t lingering; /* shutting down: FIN sent, input discarded */

    /* input */
    char *ibuf;
    size_t ibeg, iend, icap;
    Cmd put; /* the put whose body is being read */
    uint64_t put_id;
    char *in_body; /* body_size + 2 bytes */
    size_t in_read;
    uint64_t skip_left;
    const char *skip_reply; /* static string, CRLF included */
    uint64_t fetch_id;      /* IN_FETCH: the job whose body is awaited */
    uint8_t fetch_reserve;  /* IN_FETCH: 1 for RESERVED, 0 for FOUND */

    /* output */
    /* Output positions count bytes since the connection opened: obuf[0]
     * holds byte obase; [osent, orel) may be written, [orel, oend) waits
     * for the store (marks). */
    char *obuf;
    size_t ocap;
    uint64_t obase, osent, orel, oend;
    OutMark *marks;
    size_t mhead, mlen, mcap;

    /* protocol state */
    Tube *use;
    PtrSet watch;     /* Tube*, holds a watching reference each */
    Heap reserved;    /* Job* this conn holds, by TTR deadline */
    size_t lease_pos; /* in Server.lease_heap, or SIZE_MAX */
    int waiting;      /* blocked in reserve, in its tubes' waiting sets */
    int32_t timeout;  /* of the blocked reserve; < 0: none */
    int64_t wake_at;  /* monotonic ns: timeout or DEADLINE_SOON, 0 = none */
    size_t wait_pos;  /* in Server.wait_heap, or SIZE_MAX */
} Conn;

/* Accepts fd (non-blocking, owned from now on) as a new connection using
 * and watching the default tube. Returns the conn, or NULL (fd closed). */
Conn *conn_new(Server *s, int fd);

/* Closes the connection now: releases its reserved jobs, stops its blocked
 * reserve, drops its tube references and frees it. */
void conn_close(Conn *c);

/* Appends a reply (n bytes); it leaves after every earlier reply, once the
 * store has acknowledged the current sequence. */
void conn_reply(Conn *c, const char *msg, size_t n);

/* Appends a printf-formatted reply line. */
void conn_replyf(Conn *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Appends "<word> <id> <bytes>\r\n" and the job's body with its CRLF.
 * reserve says the reply is RESERVED (else FOUND). A body only on disk is
 * never read here: c waits (IN_FETCH) for the reader thread to read it,
 * running no further command, and conn_fetch_done completes the reply. */
void conn_reply_job(Conn *c, int reserve, Job *j);

/* Loop thread, once per iteration after queue_take_prefetched: completes
 * the replies of connections waiting for a body (conn_reply_job) whose
 * body has arrived, whose job is gone (FOUND: NOT_FOUND), or whose body
 * could not be read (INTERNAL_ERROR; a job reserved by the waiter is
 * buried, see queue_body_unreadable), and asks the reader again for
 * bodies it could not take. */
void conn_fetch_done(Server *s);

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

/* Re-evaluates whether c's socket is read (backpressure, buffer space). */
void conn_update_read(Conn *c);

#endif
