/* access.h - access control per connection with --auth-file (issue 32):
 * the handshake (auth <token>, or a client certificate naming a cert
 * identity), the pre-auth timeout and cap, the class check of every
 * command (PROTOCOL.md, "Access control"), the reload on SIGHUP and the
 * counters stats shows. The identities and rules are auth.h's. Without
 * --auth-file Server.access is NULL and none of this runs: cmd.c tests
 * that pointer once per command. Part of the command layer; loop thread
 * only. */
#ifndef ROCKSTALK_ACCESS_H
#define ROCKSTALK_ACCESS_H

#include <ev.h>
#include <stdint.h>

#include "conn/conn.h"
#include "proto/proto.h"
#include "queue/state.h"
#include "server/auth.h"

/* Conn.auth_state. */
enum {
    ACCESS_PRE = 0, /* not authenticated yet: on Access's list */
    ACCESS_USER,    /* authenticated as Conn.user */
    ACCESS_TRUSTED, /* trusted by its transport (a unix socket without
                       --auth-unix): every right, no identity */
    ACCESS_GONE,    /* its identity left the file (SIGHUP): closing */
};

/* How long a connection may stay unauthenticated (seconds); the sweep runs
 * each ACCESS_SWEEP_S, so it is closed within TIMEOUT + SWEEP. */
#define ACCESS_TIMEOUT_S 10
#define ACCESS_SWEEP_S 1.0
/* Default of --max-unauth. */
#define ACCESS_MAX_UNAUTH_DEFAULT 128

typedef struct Access {
    AuthTable table;
    Conn *head, *tail; /* unauthenticated connections, oldest first */
    uint32_t unauth;   /* how many */
    uint32_t trusted;  /* open ACCESS_TRUSTED connections */
    uint64_t failures; /* wrong tokens, commands before auth */
    uint64_t timeouts; /* closed by the pre-auth timeout */
    uint64_t evicted;  /* closed to stay within --max-unauth */
    uint64_t reloads;  /* successful SIGHUP reloads */
    ev_timer sweep_w;
} Access;

/* With cfg.auth_file: loads it (refusing a bad or exposed file), checks
 * the listening socket s->listen_fd against the plaintext policy
 * (auth_listener_check; without the file only that, for its warning) and
 * starts the sweep. Returns 0, or -1 with the reason in err. Warnings are
 * logged. */
int access_init(Server *s, char *err, size_t errcap);

/* Stops the sweep and frees the table (connections are closed first). */
void access_free(Server *s);

/* SIGHUP: re-reads the file. A bad file keeps the old table (logged). On
 * success every authenticated connection keeps its identity by name and
 * gets the new rules (its watch list loses the tubes it may no longer
 * consume); one whose identity is gone is closed. */
void access_reload(Server *s);

/* A new connection (the handler's opened): joins the unauthenticated list;
 * beyond --max-unauth the oldest unauthenticated one is closed. */
void access_opened(Conn *c);

/* The handler's closed: leaves the list, or its identity's count. */
void access_closed(Conn *c);

/* Takes a command line first: an auth command, or any line of an
 * unauthenticated connection (which settles by transport or certificate,
 * or gets UNAUTHORIZED and is closed; quit just closes). Returns 1 when
 * the line was taken, 0 when cmd.c runs it. */
int access_line(Conn *c, const char *line, size_t len);

/* An over-long line ended: 1 when c was unauthenticated (UNAUTHORIZED,
 * closing), else 0. */
int access_bad_line(Conn *c);

/* Nonzero when c's identity may not run cmd (reply DENIED). Job commands
 * look the job up; a missing job is allowed (the command says NOT_FOUND). */
int access_denied(Conn *c, const Cmd *cmd);

/* Nonzero when c may see tube t in list-tubes (inspect). */
int access_may_list(const Conn *c, const Tube *t);

/* c uses a new tube: caches c's classes on it. */
void access_used(Conn *c);

/* Nonzero when c's stats may name every identity (superuser or
 * trusted). */
int access_sees_all(const Conn *c);

#endif
