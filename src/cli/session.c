/* session.c - see session.h. */
#include "session.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Default priority, delay and TTR of put (pheanstalk's defaults). */
#define PUT_DEFAULT_PRI "1024"
#define PUT_DEFAULT_DELAY "0"
#define PUT_DEFAULT_TTR "60"

void
session_status(const Session *s, const char *line)
{
    FILE *f = (s->interactive || s->verbose) ? stdout : stderr;
    fprintf(f, "%s\n", line);
    fflush(f);
}

/* Writes a body: as is, or (REPL) with bytes outside printable ASCII shown
 * as \xNN and a final newline. */
static void
print_body(const Session *s, const char *p, size_t len)
{
    if (!s->interactive) {
        fwrite(p, 1, len, stdout);
        fflush(stdout);
        return;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)p[i];
        if ((ch >= ' ' && ch < 0x7f) || ch == '\n' || ch == '\t')
            putchar(ch);
        else
            printf("\\x%02x", ch);
    }
    if (len == 0 || p[len - 1] != '\n') putchar('\n');
    fflush(stdout);
}

static void
print_reply(const Session *s, const Reply *r)
{
    session_status(s, r->line);
    if (r->body) print_body(s, r->body, r->body_len);
    for (size_t i = 0; i < r->njobs; i++) {
        char line[64];
        snprintf(line, sizeof line, "RESERVED %llu %zu",
                 (unsigned long long)r->jobs[i].id, r->jobs[i].body_len);
        session_status(s, line);
        print_body(s, r->jobs[i].body, r->jobs[i].body_len);
    }
}

/* Reads the next reply, tracking USING. */
static int
read_reply(Session *s, Reply *r, char *err, size_t errcap)
{
    if (client_read_reply(&s->conn, r, err, errcap) < 0) return -1;
    if (reply_is(r, "USING") && strlen(r->line) > 6)
        snprintf(s->used, sizeof s->used, "%s", r->line + 6);
    return 0;
}

int
session_ask(Session *s, const char *line, Reply *r, char *err, size_t errcap)
{
    size_t n = strlen(line);
    char *buf = malloc(n + 2);
    if (!buf) {
        snprintf(err, errcap, "out of memory");
        return -1;
    }
    memcpy(buf, line, n);
    memcpy(buf + n, "\r\n", 2);
    int rc = client_send(&s->conn, buf, n + 2, err, errcap);
    free(buf);
    return rc < 0 ? -1 : read_reply(s, r, err, errcap);
}

/* A rockstalk extension answered as a plain beanstalkd does: an unknown
 * verb, or (reserve-batch, which 1.12 matches as "reserve" plus garbage)
 * BAD_FORMAT to a line the client has already checked. */
static int
unsupported(const CmdSpec *spec, const Reply *r)
{
    if (!(spec->flags & CMD_EXT)) return 0;
    return reply_is(r, "UNKNOWN_COMMAND") ||
           (strcmp(spec->name, "reserve-batch") == 0 &&
            reply_is(r, "BAD_FORMAT"));
}

int
session_finish(Session *s, const CmdSpec *spec, const Reply *r, char *err,
               size_t errcap)
{
    if (unsupported(spec, r)) {
        snprintf(err, errcap,
                 "this server does not support %s (a rockstalk extension)",
                 spec->name);
        return RC_FAIL;
    }
    print_reply(s, r);
    return reply_is(r, spec->ok) ? RC_OK : RC_REPLY;
}

/* Sends line, reads the reply and finishes it as spec. */
static int
run_line(Session *s, const CmdSpec *spec, const char *line, char *err,
         size_t errcap)
{
    Reply r;
    if (session_ask(s, line, &r, err, errcap) < 0) return RC_FAIL;
    int rc = session_finish(s, spec, &r, err, errcap);
    reply_free(&r);
    return rc;
}

int
session_tube(Session *s, const char *tube, char *err, size_t errcap)
{
    static const char *const verbs[] = {"use", "watch", "ignore"};
    char line[TUBE_NAME_MAX + 16];
    if (commands_check_arg('t', tube, err, errcap) < 0) return RC_FAIL;
    for (int i = 0; i < 3; i++) {
        if (i == 2 && strcmp(tube, "default") == 0) break;
        Reply r;
        snprintf(line, sizeof line, "%s %s", verbs[i],
                 i == 2 ? "default" : tube);
        if (session_ask(s, line, &r, err, errcap) < 0) return RC_FAIL;
        /* DENIED (--auth-file): the identity lacks that class on the
         * tube; the command itself gets DENIED if it needed it */
        int ok = reply_is(&r, i == 0 ? "USING" : "WATCHING") ||
                 reply_is(&r, "DENIED");
        if (!ok) print_reply(s, &r);
        reply_free(&r);
        if (!ok) return RC_REPLY;
    }
    return RC_OK;
}

/* Reads all of f into a malloc'd buffer (*out, *len). Returns 0 or -1
 * with errno set. */
static int
read_all(FILE *f, char **out, size_t *len)
{
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        char *nb = cap >= CLIENT_BODY_MAX ? NULL : realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            errno = EFBIG;
            return -1;
        }
        buf = nb;
        cap *= 2;
    }
    if (!buf) return -1;
    if (ferror(f)) {
        int e = errno ? errno : EIO;
        free(buf);
        errno = e;
        return -1;
    }
    *out = buf;
    *len = n;
    return 0;
}

/* The body of a one-shot put: from file, or stdin when file is NULL/"-". */
static int
load_body(const char *file, char **out, size_t *len, char *err, size_t errcap)
{
    int use_stdin = !file || strcmp(file, "-") == 0;
    errno = 0;
    FILE *f = use_stdin ? stdin : fopen(file, "rb");
    int rc = f ? read_all(f, out, len) : -1;
    if (rc < 0)
        snprintf(err, errcap, "cannot read %s: %s", use_stdin ? "stdin" : file,
                 strerror(errno));
    if (f && !use_stdin) fclose(f);
    return rc;
}

/* The optional part of put's arguments. */
typedef struct PutArgs {
    const char *pri, *delay, *ttr;
    const char *file;  /* one-shot: body file, NULL for stdin */
    const char *bytes; /* REPL: the byte count the user typed, or NULL */
} PutArgs;

static int
put_args(int n, char **a, int repl, PutArgs *p, char *err, size_t errcap)
{
    *p = (PutArgs){PUT_DEFAULT_PRI, PUT_DEFAULT_DELAY, PUT_DEFAULT_TTR, NULL,
                   NULL};
    if (n == 1 && !repl) {
        p->file = a[0];
        return 0;
    }
    if (n != 0 && n != 3 && n != 4) {
        snprintf(err, errcap, "put takes PRI DELAY TTR together, then %s",
                 repl ? "optionally BYTES" : "optionally FILE");
        return -1;
    }
    for (int i = 0; i < n && i < (repl ? 4 : 3); i++)
        if (commands_check_arg('n', a[i], err, errcap) < 0) return -1;
    if (n >= 3) {
        p->pri = a[0];
        p->delay = a[1];
        p->ttr = a[2];
    }
    if (n == 4) *(repl ? &p->bytes : &p->file) = a[3];
    return 0;
}

/* 1 if the server's stats name the extension command cmd (a rockstalkd
 * with it reports rockstalk-cmd-<cmd>), 0 if not, -1 on a connection
 * error (message in err). */
static int
has_extension(Session *s, const char *cmd, char *err, size_t errcap)
{
    Reply r;
    char key[64];
    if (session_ask(s, "stats", &r, err, errcap) < 0) return -1;
    snprintf(key, sizeof key, "\nrockstalk-cmd-%s:", cmd);
    int has = reply_is(&r, "OK") && r.body &&
              memmem(r.body, r.body_len, key, strlen(key)) != NULL;
    reply_free(&r);
    return has;
}

/* Sends a put-like command's line and body and finishes the reply. A
 * put-unique is sent only to a server that has it (has_extension): one
 * without would run the body's lines as commands. */
static int
send_put(Session *s, const CmdSpec *spec, const char *key, const PutArgs *p,
         const char *data, size_t len, char *err, size_t errcap)
{
    char line[TUBE_NAME_MAX + 128];
    if (spec->flags & CMD_EXT) {
        int has = has_extension(s, spec->name, err, errcap);
        if (has <= 0) {
            if (has == 0)
                snprintf(err, errcap,
                         "this server does not support %s (a rockstalk "
                         "extension)",
                         spec->name);
            return RC_FAIL;
        }
    }
    snprintf(line, sizeof line, "%s%s%s %s %s %s %zu\r\n", spec->name,
             key ? " " : "", key ? key : "", p->pri, p->delay, p->ttr, len);
    if (client_send(&s->conn, line, strlen(line), err, errcap) < 0 ||
        client_send(&s->conn, data, len, err, errcap) < 0 ||
        client_send(&s->conn, "\r\n", 2, err, errcap) < 0)
        return RC_FAIL;
    Reply r;
    if (read_reply(s, &r, err, errcap) < 0) return RC_FAIL;
    int rc = session_finish(s, spec, &r, err, errcap);
    reply_free(&r);
    return rc;
}

/* put [PRI DELAY TTR] [FILE] and put-unique KEY [...]. */
static int
run_put(Session *s, const CmdSpec *spec, int n, char **a, const Body *body,
        char *err, size_t errcap)
{
    int nkey = (int)strlen(spec->args);
    PutArgs p;
    if (put_args(n - nkey, a + nkey, body != NULL, &p, err, errcap) < 0)
        return RC_FAIL;
    char *data = NULL;
    size_t len;
    if (body) {
        len = body->len;
        if (p.bytes && strtoull(p.bytes, NULL, 10) != len) {
            snprintf(err, errcap, "the body is %zu bytes, not %s", len,
                     p.bytes);
            return RC_FAIL;
        }
    } else if (load_body(p.file, &data, &len, err, errcap) < 0) {
        return RC_FAIL;
    }
    int rc = send_put(s, spec, nkey ? a[0] : NULL, &p, body ? body->data : data,
                      len, err, errcap);
    free(data);
    return rc;
}

int
session_command(Session *s, int argc, char **argv, const Body *body, char *err,
                size_t errcap)
{
    const CmdSpec *spec = commands_find(argv[0]);
    if (!spec) {
        snprintf(err, errcap, "unknown command '%s'", argv[0]);
        return RC_FAIL;
    }
    if (commands_check(spec, argc - 1, argv + 1, err, errcap) < 0)
        return RC_FAIL;
    if (spec->flags & CMD_BODY)
        return run_put(s, spec, argc - 1, argv + 1, body, err, errcap);
    char line[CLIENT_LINE_MAX];
    size_t off = (size_t)snprintf(line, sizeof line, "%s", spec->name);
    for (int i = 1; i < argc && off < sizeof line; i++)
        off += (size_t)snprintf(line + off, sizeof line - off, " %s", argv[i]);
    if (off >= sizeof line) {
        snprintf(err, errcap, "command line too long");
        return RC_FAIL;
    }
    return run_line(s, spec, line, err, errcap);
}

int
session_auth(Session *s, const char *token, char *err, size_t errcap)
{
    char line[SESSION_TOKEN_MAX + 8];
    size_t n = strlen(token);
    Reply r;
    if (!n || n > SESSION_TOKEN_MAX || strpbrk(token, "\r\n")) {
        snprintf(err, errcap, "a token takes 1-%d bytes, no CR or LF",
                 SESSION_TOKEN_MAX);
        return RC_FAIL;
    }
    int len = snprintf(line, sizeof line, "auth %s\r\n", token);
    int rc = client_send(&s->conn, line, (size_t)len, err, errcap);
    memset(line, 0, sizeof line);
    if (rc < 0 || client_read_reply(&s->conn, &r, err, errcap) < 0)
        return RC_FAIL;
    rc = RC_OK;
    if (reply_is(&r, "UNKNOWN_COMMAND")) {
        snprintf(err, errcap,
                 "warning: %s takes no auth (no --auth-file); going on",
                 s->conn.where);
    } else if (!reply_is(&r, "AUTHENTICATED")) {
        snprintf(err, errcap, "%s refused the token (%s)", s->conn.where,
                 r.line);
        rc = RC_FAIL;
    }
    reply_free(&r);
    return rc;
}
