/* auth.h - the auth file (--auth-file, issue 32): identities, their
 * credentials (a token's SHA-256 or a client certificate's CN) and their
 * per-tube rules, parsed into an AuthTable; the rights an identity has on
 * a tube; the start-up policy for a listener's address. Pure: no Server,
 * no sockets, no logging (tests/unit/test_auth.c runs it alone). The
 * connection side (the handshake, the checks per command) is access.h.
 * Loop thread, and main at start. */
#ifndef ROCKSTALK_AUTH_H
#define ROCKSTALK_AUTH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Bounds of the file: an identity's name (bytes), rules per identity,
 * identities, the file's size (bytes). Every byte past them is an error,
 * not a truncation. */
#define AUTH_NAME_MAX 64
#define AUTH_RULES_MAX 64
#define AUTH_USERS_MAX 4096
#define AUTH_FILE_MAX (1 << 20)
/* Bytes of a SHA-256 digest. */
#define AUTH_DIGEST_LEN 32

/* Classes of commands (PROTOCOL.md, "Access control"), as bits. */
enum {
    AUTH_PRODUCE = 1, /* use, put, put-unique */
    AUTH_CONSUME = 2, /* watch, ignore, reserves; release/bury/touch/delete
                         of a job this connection reserved */
    AUTH_INSPECT = 4, /* peeks, stats, lists, list-jobs */
    AUTH_ADMIN = 8,   /* kick, kick-job, pause-tube, clear-tube, deleting
                         jobs the connection did not reserve */
    AUTH_ALL = 15,
};

/* One rule: classes on the tubes whose names match glob (fnmatch(3), no
 * flags: '*' also matches '/'). */
typedef struct AuthRule {
    uint8_t bits;
    char *glob; /* owned, NUL-terminated */
} AuthRule;

typedef struct AuthUser {
    char name[AUTH_NAME_MAX + 1];
    int cert;                              /* credential "cert": matches a
                                              verified client certificate
                                              whose subject CN is name */
    unsigned char digest[AUTH_DIGEST_LEN]; /* SHA-256 of the token (not
                                              cert) */
    int superuser;   /* bare "admin": every class on every tube, and the
                        server-wide commands (rockstalk-snapshot) */
    uint8_t any;     /* OR of its rules' classes (AUTH_ALL: superuser) */
    AuthRule *rules; /* owned */
    size_t nrules;
    uint32_t conns; /* its open connections (kept by access.c) */
} AuthUser;

typedef struct AuthTable {
    AuthUser *users; /* owned, in file order */
    size_t n;
} AuthTable;

/* Parses the text of an auth file (len bytes) into *t (emptied first).
 * Grammar (rockstalkd(1), SECURITY): one identity a line, "NAME CREDENTIAL
 * RULE...", fields separated by blanks; '#' starts a comment; blank lines
 * are skipped. NAME: 1..AUTH_NAME_MAX of [A-Za-z0-9._-], unique.
 * CREDENTIAL: "sha256:" and 64 hex digits (unique), or "cert". RULE:
 * CLASS:GLOB with CLASS produce, consume, inspect or admin, or a bare
 * "admin". At least one rule. Returns 0, or -1 with "line N: why" in err
 * and *t empty: one bad line refuses the whole file. */
int auth_parse(const char *text, size_t len, AuthTable *t, char *err,
               size_t errcap);

/* Reads and parses the file at path into *t. Refuses (-1, message in err)
 * a file that is not regular, is readable or writable by group or others,
 * is larger than AUTH_FILE_MAX, or does not parse. */
int auth_load(const char *path, AuthTable *t, char *err, size_t errcap);

/* Frees what *t holds and empties it. */
void auth_free(AuthTable *t);

/* SHA-256 of the token's len bytes into out. Returns 0, or -1 (OpenSSL
 * failed). */
int auth_digest(const void *token, size_t len,
                unsigned char out[AUTH_DIGEST_LEN]);

/* The token identity whose digest is the token's, or NULL. Compares the
 * digest with every token identity in constant time (CRYPTO_memcmp) and
 * does not stop at a match. */
AuthUser *auth_by_token(const AuthTable *t, const void *token, size_t len);

/* The identity named name with credential cert, or NULL (cn NULL: NULL). */
AuthUser *auth_by_cert(const AuthTable *t, const char *cn);

/* The identity named name, or NULL. */
AuthUser *auth_by_name(const AuthTable *t, const char *name);

/* The classes (AUTH_* bits) u has on the tube named name (NUL-terminated;
 * NULL: none). */
unsigned auth_bits(const AuthUser *u, const char *name);

/* Nonzero when sa (a listening socket's bound address) reaches only this
 * host: AF_UNIX, 127.0.0.0/8, ::1 or ::ffff:127.0.0.0/104. */
int auth_addr_local(const struct sockaddr *sa, socklen_t len);

/* The start-up policy for one listener: its bound address sa and its kind
 * via (CONN_VIA_TCP, _TLS or _UNIX, conn.h). With auth on, a plaintext TCP
 * listener beyond loopback would carry tokens in the clear: refused (-1)
 * unless allow_plaintext (then 1, a warning). Without auth, any listener
 * beyond loopback is open to whoever reaches it: 1, a warning naming the
 * flags. 0: nothing to say. The message (1 and -1) goes to msg, worded
 * to follow the listener's name ("tcp://0.0.0.0:11300 is ..."). */
int auth_listener_check(int auth_on, int allow_plaintext,
                        const struct sockaddr *sa, socklen_t len, int via,
                        char *msg, size_t msgcap);

#endif
