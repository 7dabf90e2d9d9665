/* session.h - runs protocol commands over one connection and prints their
 * replies: raw for the one-shot mode (bodies to stdout, status lines to
 * stderr), readable for the REPL. Tracks the tube in use. Single-threaded;
 * failures come back as an exit status and a message in err. */
#ifndef ROCKSTALK_CLI_SESSION_H
#define ROCKSTALK_CLI_SESSION_H

#include <stddef.h>

#include "base/common.h"
#include "client.h"
#include "commands.h"

/* Exit statuses (rockstalk(1), EXIT STATUS). */
#define RC_OK 0    /* the server gave the success reply */
#define RC_REPLY 1 /* the server gave an error reply (NOT_FOUND, ...) */
#define RC_FAIL 2  /* usage, connection or unsupported-extension error */

typedef struct Session {
    Client conn;
    int verbose;     /* one-shot: status lines go to stdout, not stderr */
    int interactive; /* REPL: everything to stdout, bodies made readable */
    int yes;         /* clear without asking */
    char used[TUBE_NAME_MAX + 1]; /* tube in use, from the last USING */
    /* How to connect again (cluster transfer polls on new connections):
     * main's options, borrowed; unix_path, token and tls may be NULL. */
    const char *host, *port, *unix_path, *token;
    const ClientTls *tls;
} Session;

/* A job body already in memory (the REPL reads it from the next line). */
typedef struct Body {
    const char *data;
    size_t len;
} Body;

/* Sends line (without CRLF; the function adds it) and reads the reply into
 * *r (caller frees with reply_free()). Updates s->used on USING. Returns 0,
 * or -1 with a message in err. */
int session_ask(Session *s, const char *line, Reply *r, char *err,
                size_t errcap);

/* Runs the protocol command argv[0] with its arguments, printing the reply.
 * body: the job body for put-like commands, or NULL to take it from the
 * FILE argument or stdin. Returns RC_*; on RC_FAIL err holds the reason. */
int session_command(Session *s, int argc, char **argv, const Body *body,
                    char *err, size_t errcap);

/* Prints r as the reply to spec and returns its RC_*: RC_OK when the
 * status word is spec->ok; RC_FAIL with a message when spec is an
 * extension the server does not know; RC_REPLY otherwise. */
int session_finish(Session *s, const CmdSpec *spec, const Reply *r, char *err,
                   size_t errcap);

/* use TUBE, watch TUBE and (unless TUBE is default) ignore default, for
 * -t. Returns RC_*; an error reply is printed. */
int session_tube(Session *s, const char *tube, char *err, size_t errcap);

/* Longest token auth may carry (bytes): the server's 224-byte command
 * line less "auth " and CRLF. */
#define SESSION_TOKEN_MAX 217

/* Sends "auth TOKEN" first (--token, ROCKSTALK_TOKEN). Returns RC_OK once
 * AUTHENTICATED; also RC_OK, with a warning in err, when the server has no
 * --auth-file (it answers UNKNOWN_COMMAND); RC_FAIL with the reason in err
 * when it refuses the token or the token is malformed. Never prints the
 * token. */
int session_auth(Session *s, const char *token, char *err, size_t errcap);

/* Prints a status line the way replies are printed (stderr for one-shot
 * unless verbose, stdout in the REPL). */
void session_status(const Session *s, const char *line);

#endif
