/* auth.c - see auth.h. */
#include "server/auth.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/bytes.h"
#include "conn/conn.h"
#include "proto/proto.h"
#include "queue/tube.h"

void
auth_free(AuthTable *t)
{
    for (size_t i = 0; i < t->n; i++) {
        for (size_t k = 0; k < t->users[i].nrules; k++)
            free(t->users[i].rules[k].glob);
        free(t->users[i].rules);
    }
    free(t->users);
    t->users = NULL;
    t->n = 0;
}

/* One field of a line: [*p, end) after blanks; NULL at the end or at a
 * comment. Advances *p past it. */
static const char *
field(const char **p, const char *end, size_t *n)
{
    const char *s = *p;
    while (s < end && (*s == ' ' || *s == '\t'))
        s++;
    if (s == end || *s == '#') {
        *p = end;
        return NULL;
    }
    const char *e = s;
    while (e < end && *e != ' ' && *e != '\t')
        e++;
    *p = e;
    *n = (size_t)(e - s);
    return s;
}

static int
name_ok(const char *s, size_t n)
{
    if (n < 1 || n > AUTH_NAME_MAX) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '.' || s[i] == '_' ||
              s[i] == '-'))
            return 0;
    return 1;
}

/* The credential field into u; 0, or -1 with the reason in err. */
static int
credential(const char *s, size_t n, AuthUser *u, char *err, size_t errcap)
{
    if (n == 4 && memcmp(s, "cert", 4) == 0) {
        u->cert = 1;
        return 0;
    }
    if (n != 7 + 2 * AUTH_DIGEST_LEN || memcmp(s, "sha256:", 7) != 0)
        return errfmt(err, errcap,
                      "the credential is sha256:<64 hex digits> or cert");
    for (size_t i = 0; i < AUTH_DIGEST_LEN; i++) {
        int hi = hex_value(s[7 + 2 * i]), lo = hex_value(s[8 + 2 * i]);
        if (hi < 0 || lo < 0)
            return errfmt(err, errcap, "sha256: takes 64 hex digits");
        u->digest[i] = (unsigned char)(hi << 4 | lo);
    }
    return 0;
}

static int
glob_ok(const char *s, size_t n)
{
    if (n < 1 || n > TUBE_NAME_MAX) return 0;
    for (size_t i = 0; i < n; i++)
        if (!proto_name_char(s[i]) && !strchr("*?[]!", s[i])) return 0;
    return 1;
}

/* One rule field into u; 0, or -1 with the reason in err. */
static int
rule(const char *s, size_t n, AuthUser *u, char *err, size_t errcap)
{
    static const struct {
        const char *name;
        uint8_t bits;
    } classes[] = {{"produce", AUTH_PRODUCE},
                   {"consume", AUTH_CONSUME},
                   {"inspect", AUTH_INSPECT},
                   {"admin", AUTH_ALL}};
    if (n == 5 && memcmp(s, "admin", 5) == 0) {
        u->superuser = 1;
        u->any = AUTH_ALL;
        return 0;
    }
    const char *colon = memchr(s, ':', n);
    size_t cn = colon ? (size_t)(colon - s) : n, k;
    for (k = 0; k < 4; k++)
        if (strlen(classes[k].name) == cn &&
            memcmp(s, classes[k].name, cn) == 0)
            break;
    if (k == 4 || !colon)
        return errfmt(err, errcap,
                      "rule '%.*s': expected produce:GLOB, consume:GLOB, "
                      "inspect:GLOB, admin:GLOB or admin",
                      (int)(n > 80 ? 80 : n), s);
    const char *g = colon + 1;
    size_t gn = n - cn - 1;
    if (!glob_ok(g, gn))
        return errfmt(err, errcap,
                      "rule '%.*s': the glob takes 1-200 of tube-name "
                      "characters and * ? [ ] !",
                      (int)(n > 80 ? 80 : n), s);
    if (u->nrules == AUTH_RULES_MAX)
        return errfmt(err, errcap, "more than %d rules", AUTH_RULES_MAX);
    AuthRule *r = &u->rules[u->nrules];
    if (!(r->glob = strndup(g, gn)))
        return errfmt(err, errcap, "out of memory");
    r->bits = classes[k].bits;
    u->nrules++;
    u->any |= r->bits;
    return 0;
}

/* Rejects a name or token digest an earlier identity of t has (u is t's
 * last). */
static int
unique(const AuthTable *t, const AuthUser *u, char *err, size_t errcap)
{
    for (size_t i = 0; i + 1 < t->n; i++) {
        if (strcmp(t->users[i].name, u->name) == 0)
            return errfmt(err, errcap, "identity %s is defined twice", u->name);
        if (!u->cert && !t->users[i].cert &&
            memcmp(t->users[i].digest, u->digest, AUTH_DIGEST_LEN) == 0)
            return errfmt(err, errcap, "%s has the same token as %s", u->name,
                          t->users[i].name);
    }
    return 0;
}

/* Parses one line [s, end) into a new identity of t; 0 (also for a blank
 * or comment line), or -1 with the reason (no line number) in err. */
static int
parse_line(const char *s, const char *end, AuthTable *t, char *err,
           size_t errcap)
{
    size_t n;
    const char *f = field(&s, end, &n);
    if (!f) return 0;
    if (!name_ok(f, n))
        return errfmt(err, errcap, "the name takes 1-%d of A-Z a-z 0-9 . _ -",
                      AUTH_NAME_MAX);
    if (t->n == AUTH_USERS_MAX)
        return errfmt(err, errcap, "more than %d identities", AUTH_USERS_MAX);
    AuthUser *u = &t->users[t->n];
    memset(u, 0, sizeof *u);
    memcpy(u->name, f, n);
    if (!(u->rules = calloc(AUTH_RULES_MAX, sizeof *u->rules)))
        return errfmt(err, errcap, "out of memory");
    t->n++; /* owns rules from here: auth_free releases them */
    if (!(f = field(&s, end, &n)))
        return errfmt(err, errcap, "%s has no credential", u->name);
    if (credential(f, n, u, err, errcap) < 0) return -1;
    while ((f = field(&s, end, &n)))
        if (rule(f, n, u, err, errcap) < 0) return -1;
    if (!u->nrules && !u->superuser)
        return errfmt(err, errcap, "%s has no rules", u->name);
    return unique(t, u, err, errcap);
}

int
auth_parse(const char *text, size_t len, AuthTable *t, char *err, size_t errcap)
{
    char why[256];
    const char *p = text, *end = text + len;
    size_t line = 0;
    auth_free(t);
    if (!(t->users = calloc(AUTH_USERS_MAX, sizeof *t->users)))
        return errfmt(err, errcap, "out of memory");
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *e = nl ? nl : end;
        line++;
        if (e > p && e[-1] == '\r') e--;
        if (memchr(p, '\0', (size_t)(e - p))) {
            auth_free(t);
            return errfmt(err, errcap, "line %zu: a NUL byte", line);
        }
        if (parse_line(p, e, t, why, sizeof why) < 0) {
            auth_free(t);
            return errfmt(err, errcap, "line %zu: %s", line, why);
        }
        p = nl ? nl + 1 : end;
    }
    if (!t->n) {
        auth_free(t);
        return errfmt(err, errcap, "no identities");
    }
    return 0;
}

int
auth_load(const char *path, AuthTable *t, char *err, size_t errcap)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errfmt(err, errcap, "%s: %s", path, strerror(errno));
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return errfmt(err, errcap, "%s: not a regular file", path);
    }
    if (st.st_mode & (S_IRWXG | S_IRWXO)) {
        close(fd);
        return errfmt(err, errcap,
                      "%s: group or others may read or write it (mode %03o): "
                      "chmod 600 it",
                      path, (unsigned)(st.st_mode & 0777));
    }
    if (st.st_size > AUTH_FILE_MAX) {
        close(fd);
        return errfmt(err, errcap, "%s: larger than %d bytes", path,
                      AUTH_FILE_MAX);
    }
    char *buf = malloc((size_t)st.st_size + 1);
    ssize_t n = buf ? read(fd, buf, (size_t)st.st_size + 1) : -1;
    close(fd);
    if (n < 0 || n > st.st_size) {
        free(buf);
        return errfmt(err, errcap, "%s: cannot read it", path);
    }
    char why[512];
    int rc = auth_parse(buf, (size_t)n, t, why, sizeof why);
    OPENSSL_cleanse(buf, (size_t)n);
    free(buf);
    if (rc < 0) return errfmt(err, errcap, "%s: %s", path, why);
    return 0;
}

int
auth_digest(const void *token, size_t len, unsigned char out[AUTH_DIGEST_LEN])
{
    unsigned int n = 0;
    if (!EVP_Digest(token, len, out, &n, EVP_sha256(), NULL) ||
        n != AUTH_DIGEST_LEN)
        return -1;
    return 0;
}

AuthUser *
auth_by_token(const AuthTable *t, const void *token, size_t len)
{
    unsigned char d[AUTH_DIGEST_LEN];
    AuthUser *found = NULL;
    if (auth_digest(token, len, d) < 0) return NULL;
    for (size_t i = 0; i < t->n; i++) {
        AuthUser *u = &t->users[i];
        int same = CRYPTO_memcmp(d, u->digest, AUTH_DIGEST_LEN) == 0;
        if (same && !u->cert) found = u;
    }
    OPENSSL_cleanse(d, sizeof d);
    return found;
}

AuthUser *
auth_by_name(const AuthTable *t, const char *name)
{
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->users[i].name, name) == 0) return &t->users[i];
    return NULL;
}

AuthUser *
auth_by_cert(const AuthTable *t, const char *cn)
{
    AuthUser *u = cn ? auth_by_name(t, cn) : NULL;
    return u && u->cert ? u : NULL;
}

unsigned
auth_bits(const AuthUser *u, const char *name)
{
    unsigned bits = 0;
    if (u->superuser) return AUTH_ALL;
    if (!name) return 0;
    for (size_t i = 0; i < u->nrules; i++)
        if ((bits | u->rules[i].bits) != bits &&
            fnmatch(u->rules[i].glob, name, 0) == 0)
            bits |= u->rules[i].bits;
    return bits;
}

int
auth_addr_local(const struct sockaddr *sa, socklen_t len)
{
    if (sa->sa_family == AF_UNIX) return 1;
    if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *a = (const void *)sa;
        return (ntohl(a->sin_addr.s_addr) >> 24) == 127;
    }
    if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        const struct in6_addr *a =
            &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_LOOPBACK(a)) return 1;
        return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
    }
    return 0;
}

int
auth_listener_check(int auth_on, int allow_plaintext, const struct sockaddr *sa,
                    socklen_t len, int via, char *msg, size_t msgcap)
{
    if (via == CONN_VIA_UNIX || auth_addr_local(sa, len)) return 0;
    if (!auth_on) {
        snprintf(msg, msgcap,
                 "is reachable from other hosts with no --auth-file: "
                 "whoever reaches it may peek, delete, kick or clear any "
                 "tube (see --auth-file, --tls-cert, -l 127.0.0.1)");
        return 1;
    }
    if (via == CONN_VIA_TLS) return 0;
    if (!allow_plaintext) {
        snprintf(msg, msgcap,
                 "is plaintext beyond loopback: with --auth-file it "
                 "would carry tokens in the clear: listen on TLS "
                 "(--tls-cert), on loopback or a unix socket, or pass "
                 "--allow-plaintext-auth");
        return -1;
    }
    snprintf(msg, msgcap,
             "is plaintext beyond loopback: with --allow-plaintext-auth, "
             "tokens cross the network in the clear there");
    return 1;
}
