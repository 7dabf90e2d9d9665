/* cluster.c - cluster identity: flags and the CLUSTER file (see cluster.h).
 */
#include "cluster/cluster.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* The CLUSTER file's versions: 1, the voters; 2, also a state line and
 * voters' client ports (written only when needed, so a directory a
 * release without membership changes made stays readable by it); a newer
 * one is refused. */
#define CLUSTER_FILE_VERSION 2
/* Largest CLUSTER file read: the longest valid text is far shorter. */
#define CLUSTER_FILE_MAX 4096
/* Largest --cluster value: five voters of
 * "65535@255.255.255.255:65535/65535". */
#define CLUSTER_SPEC_MAX 192
/* Largest --cluster argument: five voters named by host names of up to
 * 253 bytes (RFC 1035), as given before they are resolved. */
#define CLUSTER_ARG_MAX 1400
/* Longest host name (RFC 1035), plus its NUL. */
#define CLUSTER_HOST_MAX 254

/* Parses s[0..len) as a decimal number in 1..max: digits only. Returns the
 * number, or 0 if s is not one. */
static uint64_t
parse_num(const char *s, size_t len, uint64_t max)
{
    uint64_t v = 0;

    if (len == 0 || len > 20) return 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        v = v * 10 + (uint64_t)(s[i] - '0');
        if (v > max) return 0;
    }
    return v;
}

/* host's IPv4 address: host itself if it is an IPv4 literal, else the
 * first IPv4 address the resolver (getaddrinfo(3), /etc/hosts and DNS)
 * gives for the name. Returns 0, or -1 if there is none. */
static int
resolve_ipv4(const char *host, struct in_addr *a)
{
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;

    if (inet_pton(AF_INET, host, a) == 1) return 0;
    if (host[0] == '[' || getaddrinfo(host, NULL, &hints, &res) != 0 || !res)
        return -1;
    *a = ((const struct sockaddr_in *)res->ai_addr)->sin_addr;
    freeaddrinfo(res);
    return 0;
}

/* Parses "HOST:PORT" (s[0..len)), HOST an IPv4 literal or a name resolved
 * to one now, into its canonical spelling "A.B.C.D:PORT" in out
 * (CLUSTER_ADDR_MAX bytes). Returns 0, or -1 with the reason in *why. */
static int
parse_addr(const char *s, size_t len, char *out, const char **why)
{
    const char *colon = memrchr(s, ':', len);
    char host[CLUSTER_HOST_MAX];
    struct in_addr a;

    if (!colon) {
        *why = "no :PORT";
        return -1;
    }
    size_t hlen = (size_t)(colon - s);
    if (hlen == 0 || hlen >= sizeof host) {
        *why = "HOST is not an IPv4 address or a host name";
        return -1;
    }
    memcpy(host, s, hlen);
    host[hlen] = '\0';
    if (resolve_ipv4(host, &a) < 0) {
        *why = "HOST is not an IPv4 address (A.B.C.D) or a name that resolves "
               "to one";
        return -1;
    }
    uint64_t port = parse_num(colon + 1, len - hlen - 1, 65535);
    if (port == 0) {
        *why = "PORT is not a number in 1..65535";
        return -1;
    }
    char ip[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &a, ip, sizeof ip);
    snprintf(out, CLUSTER_ADDR_MAX, "%s:%u", ip, (unsigned)port);
    return 0;
}

void
cluster_sort(ClusterConfig *c)
{
    for (int i = 1; i < c->n; i++) {
        ClusterPeer p = c->voters[i];
        int j = i - 1;
        while (j >= 0 && c->voters[j].id > p.id) {
            c->voters[j + 1] = c->voters[j];
            j--;
        }
        c->voters[j + 1] = p;
    }
}

/* Parses one "ID@HOST:PORT" item (s[0..len)) as voter number k (1-based,
 * for messages) into c->voters[c->n]. Returns 0 or -1 (err set). */
static int
parse_voter(ClusterConfig *c, const char *s, size_t len, int k, char *err,
            size_t errcap)
{
    const char *at = memchr(s, '@', len);
    const char *why;
    ClusterPeer *p = &c->voters[c->n];
    int shown = len > 40 ? 40 : (int)len;

    if (c->n == CLUSTER_MAX_VOTERS)
        return errfmt(err, errcap, "--cluster: more than %d voters",
                      CLUSTER_MAX_VOTERS);
    if (!at)
        return errfmt(err, errcap,
                      "--cluster: voter %d \"%.*s\": not ID@HOST:PORT", k,
                      shown, s);
    const char *slash = memchr(at, '/', len - (size_t)(at - s));
    size_t alen = slash ? (size_t)(slash - at) - 1 : len - (size_t)(at - s) - 1;
    p->client_port = 0;
    if (slash && !(p->client_port = (unsigned)parse_num(
                       slash + 1, len - (size_t)(slash - s) - 1, 65535)))
        return errfmt(
            err, errcap,
            "--cluster: voter %d \"%.*s\": CLIENTPORT is not a number in "
            "1..65535",
            k, shown, s);
    p->id = parse_num(s, (size_t)(at - s), CLUSTER_MAX_ID);
    if (p->id == 0)
        return errfmt(
            err, errcap,
            "--cluster: voter %d \"%.*s\": ID is not a number in 1..%d", k,
            shown, s, CLUSTER_MAX_ID);
    if (parse_addr(at + 1, alen, p->addr, &why) < 0)
        return errfmt(err, errcap, "--cluster: voter %d \"%.*s\": %s", k, shown,
                      s, why);
    for (int i = 0; i < c->n; i++) {
        if (c->voters[i].id == p->id)
            return errfmt(err, errcap, "--cluster: node id %llu given twice",
                          (unsigned long long)p->id);
        if (strcmp(c->voters[i].addr, p->addr) == 0)
            return errfmt(err, errcap, "--cluster: address %s given twice",
                          p->addr);
    }
    c->n++;
    return 0;
}

int
cluster_parse(const char *cluster, const char *node_id, ClusterConfig *c,
              char *err, size_t errcap)
{
    size_t len = strlen(cluster);

    memset(c, 0, sizeof *c);
    if (len == 0) return errfmt(err, errcap, "--cluster: empty");
    if (len > CLUSTER_ARG_MAX)
        return errfmt(err, errcap, "--cluster: longer than %d bytes",
                      CLUSTER_ARG_MAX);
    for (const char *s = cluster, *end;; s = end + 1) {
        end = strchr(s, ',');
        if (!end) end = cluster + len;
        if (end == s)
            return errfmt(err, errcap, "--cluster: empty voter %d", c->n + 1);
        if (parse_voter(c, s, (size_t)(end - s), c->n + 1, err, errcap) < 0)
            return -1;
        if (*end == '\0') break;
    }
    c->self_id = parse_num(node_id, strlen(node_id), CLUSTER_MAX_ID);
    if (c->self_id == 0)
        return errfmt(err, errcap,
                      "--node-id: \"%.20s\" is not a number in 1..%d", node_id,
                      CLUSTER_MAX_ID);
    cluster_sort(c);
    if (cluster_find(c, c->self_id) < 0)
        return errfmt(err, errcap,
                      "--node-id %llu is not one of --cluster's ids",
                      (unsigned long long)c->self_id);
    return 0;
}

int
cluster_find(const ClusterConfig *c, uint64_t id)
{
    for (int i = 0; i < c->n; i++)
        if (c->voters[i].id == id) return i;
    return -1;
}

void
cluster_spec(const ClusterConfig *c, char *buf, size_t cap)
{
    size_t off = 0;

    if (cap == 0) return;
    buf[0] = '\0';
    for (int i = 0; i < c->n && off < cap; i++) {
        int w =
            snprintf(buf + off, cap - off, "%s%llu@%s", i ? "," : "",
                     (unsigned long long)c->voters[i].id, c->voters[i].addr);
        if (w < 0) return;
        off += (size_t)w;
    }
}

/* Whether c needs version 2 of the file: a state other than member (the
 * file never holds client ports: they are not part of the identity). */
static int
needs_v2(const ClusterConfig *c)
{
    return c->state != CLUSTER_MEMBER;
}

static const char *const state_names[] = {"member", "joining", "removed",
                                          "seeding"};

size_t
cluster_format(const ClusterConfig *c, char *buf, size_t cap)
{
    size_t off = 0;
    int v2 = needs_v2(c);
    int w = snprintf(buf, cap, "rockstalk-cluster %d\nnode %llu\n", v2 ? 2 : 1,
                     (unsigned long long)c->self_id);

    if (w > 0) off = (size_t)w;
    if (v2 && off < cap) {
        w = snprintf(buf + off, cap - off, "state %s\n", state_names[c->state]);
        if (w > 0) off += (size_t)w;
    }
    for (int i = 0; i < c->n && off < cap; i++) {
        const ClusterPeer *p = &c->voters[i];
        w = snprintf(buf + off, cap - off, "voter %llu %s\n",
                     (unsigned long long)p->id, p->addr);
        if (w > 0) off += (size_t)w;
    }
    return off < cap ? off : cap - 1;
}

/* Copies the next line of t (up to '\n', which is consumed) into line
 * (cap bytes). Returns 0, or -1 if there is no whole line or it is too
 * long. */
static int
next_line(const char **t, const char *end, char *line, size_t cap)
{
    const char *nl = memchr(*t, '\n', (size_t)(end - *t));

    if (!nl || (size_t)(nl - *t) >= cap) return -1;
    memcpy(line, *t, (size_t)(nl - *t));
    line[nl - *t] = '\0';
    *t = nl + 1;
    return 0;
}

/* Parses an optional "state NAME" line at *t into *state (version 2). */
static int
parse_state(const char **t, const char *end, int *state)
{
    char line[64], name[16];
    int used;
    const char *save = *t;

    *state = CLUSTER_MEMBER;
    if (next_line(t, end, line, sizeof line) < 0 ||
        strncmp(line, "state ", 6) != 0) {
        *t = save;
        return 0;
    }
    if (sscanf(line, "state %15s%n", name, &used) != 1 || line[used] != '\0')
        return -1;
    for (int i = 0; i < 4; i++)
        if (strcmp(name, state_names[i]) == 0) {
            *state = i;
            return 0;
        }
    return -1;
}

int
cluster_identity_parse(const char *text, size_t len, ClusterConfig *c,
                       char *err, size_t errcap)
{
    const char *t = text, *end = text + len;
    char line[64], node[24], spec[CLUSTER_SPEC_MAX + 1] = "", sub[96];
    unsigned version;
    int n = 0, used, state = CLUSTER_MEMBER;

    if (next_line(&t, end, line, sizeof line) < 0 ||
        sscanf(line, "rockstalk-cluster %u%n", &version, &used) != 1 ||
        line[used] != '\0')
        return errfmt(err, errcap, "CLUSTER: not a rockstalk cluster file");
    if (version < 1 || version > CLUSTER_FILE_VERSION)
        return errfmt(
            err, errcap,
            "CLUSTER: version %u; this rockstalkd knows versions 1 to %d",
            version, CLUSTER_FILE_VERSION);
    if (next_line(&t, end, line, sizeof line) < 0 ||
        sscanf(line, "node %20s%n", node, &used) != 1 || line[used] != '\0')
        return errfmt(err, errcap, "CLUSTER: no node line");
    if (version >= 2 && parse_state(&t, end, &state) < 0)
        return errfmt(err, errcap, "CLUSTER: bad state line");
    while (t < end) {
        char id[8], addr[CLUSTER_ADDR_MAX + 8];
        if (next_line(&t, end, line, sizeof line) < 0 ||
            sscanf(line, "voter %7s %29s%n", id, addr, &used) != 2 ||
            line[used] != '\0' || ++n > CLUSTER_MAX_VOTERS ||
            (version < 2 && strchr(addr, '/')))
            return errfmt(err, errcap, "CLUSTER: bad voter line %d", n + 1);
        size_t off = strlen(spec);
        snprintf(spec + off, sizeof spec - off, "%s%s@%s", n > 1 ? "," : "", id,
                 addr);
    }
    if (n == 0) return errfmt(err, errcap, "CLUSTER: no voters");
    if (cluster_parse(spec, node, c, sub, sizeof sub) < 0)
        return errfmt(err, errcap, "CLUSTER: %s", sub);
    c->state = state;
    return 0;
}

/* Whether a and b name the same voters (ids and addresses; both sorted). */
static int
same_voters(const ClusterConfig *a, const ClusterConfig *b)
{
    if (a->n != b->n) return 0;
    for (int i = 0; i < a->n; i++)
        if (a->voters[i].id != b->voters[i].id ||
            strcmp(a->voters[i].addr, b->voters[i].addr) != 0)
            return 0;
    return 1;
}

/* Reads path (at most cap bytes) into buf. Returns its length, -1 with
 * errno ENOENT if it does not exist, or -1 with err set. */
static ssize_t
read_small(const char *path, char *buf, size_t cap, char *err, size_t errcap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    size_t len = 0;

    if (fd < 0) {
        int e = errno;
        if (e != ENOENT) errfmt(err, errcap, "open %s: %s", path, strerror(e));
        errno = e;
        return -1;
    }
    for (;;) {
        ssize_t r = read(fd, buf + len, cap - len);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            errno = EIO;
            return errfmt(err, errcap, "read %s: %s", path, strerror(e));
        }
        if (r == 0) break;
        len += (size_t)r;
        if (len == cap) {
            close(fd);
            errno = EFBIG;
            return errfmt(err, errcap, "%s: larger than %zu bytes", path, cap);
        }
    }
    close(fd);
    return (ssize_t)len;
}

/* fsyncs path, opened with flags. Returns 0 or -1 (err set). */
static int
fsync_path(const char *path, int flags, char *err, size_t errcap)
{
    int fd = open(path, flags | O_CLOEXEC);

    if (fd < 0)
        return errfmt(err, errcap, "open %s: %s", path, strerror(errno));
    if (fsync(fd) < 0) {
        int e = errno;
        close(fd);
        return errfmt(err, errcap, "fsync %s: %s", path, strerror(e));
    }
    close(fd);
    return 0;
}

/* Writes text (len bytes) to path atomically, through tmp: write, fsync,
 * rename, fsync of dir. Returns 0 or -1 (err set). */
static int
write_atomic(const char *dir, const char *tmp, const char *path,
             const char *text, size_t len, char *err, size_t errcap)
{
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

    if (fd < 0) return errfmt(err, errcap, "open %s: %s", tmp, strerror(errno));
    if (write(fd, text, len) != (ssize_t)len || fsync(fd) < 0) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return errfmt(err, errcap, "write %s: %s", tmp, strerror(e));
    }
    close(fd);
    if (rename(tmp, path) < 0) {
        int e = errno;
        unlink(tmp);
        return errfmt(err, errcap, "rename %s: %s", tmp, strerror(e));
    }
    return fsync_path(dir, O_RDONLY | O_DIRECTORY, err, errcap);
}

/* Compares the identity in the file (have) with the flags' (want). */
static int
check_match(const char *dir, const ClusterConfig *have,
            const ClusterConfig *want, char *err, size_t errcap)
{
    char a[CLUSTER_SPEC_MAX + 1], b[CLUSTER_SPEC_MAX + 1];

    if (have->state == CLUSTER_REMOVED)
        return errfmt(
            err, errcap,
            "node %llu was removed from the cluster (recorded in %s/%s): "
            "this data directory cannot serve as a member again; to bring "
            "the machine back, start it with an empty data directory and "
            "--join, then add it (rockstalk cluster add)",
            (unsigned long long)have->self_id, dir, CLUSTER_FILE);
    if (!same_voters(have, want)) {
        cluster_spec(have, a, sizeof a);
        cluster_spec(want, b, sizeof b);
        return errfmt(
            err, errcap,
            "data directory %s belongs to cluster %s (its committed "
            "configuration, as this node last recorded it); --cluster %s "
            "given (nothing changed)",
            dir, a, b);
    }
    if (have->self_id != want->self_id)
        return errfmt(err, errcap,
                      "data directory %s belongs to node %llu; --node-id %llu "
                      "given (nothing changed)",
                      dir, (unsigned long long)have->self_id,
                      (unsigned long long)want->self_id);
    return CLUSTER_ID_MATCH;
}

/* The paths of dir's CLUSTER file, its temporary and its Raft log. */
static int
identity_paths(const char *dir, char *path, char *tmp, char *raft, size_t cap)
{
    return (size_t)snprintf(path, cap, "%s/%s", dir, CLUSTER_FILE) >= cap ||
                   (size_t)snprintf(tmp, cap, "%s/%s.tmp", dir, CLUSTER_FILE) >=
                       cap ||
                   (size_t)snprintf(raft, cap, "%s/%s", dir,
                                    CLUSTER_RAFT_SUBDIR) >= cap
               ? -1
               : 0;
}

int
cluster_identity_write(const char *dir, const ClusterConfig *c, char *err,
                       size_t errcap)
{
    char path[4096], tmp[4096], raft[4096], buf[CLUSTER_FILE_MAX];

    if (identity_paths(dir, path, tmp, raft, sizeof path) < 0)
        return errfmt(err, errcap, "data directory path too long");
    size_t n = cluster_format(c, buf, sizeof buf);
    return write_atomic(dir, tmp, path, buf, n, err, errcap);
}

/* A fresh directory: refuses a voter set no new cluster may start with. */
static int
check_fresh(const ClusterConfig *c, char *err, size_t errcap)
{
    if (c->state == CLUSTER_SEEDING) {
        if (c->n != 1)
            return errfmt(err, errcap,
                          "--seed: --cluster names this node alone "
                          "(the others join later)");
        return 0;
    }
    if (c->state == CLUSTER_JOINING) {
        if (c->n < 2)
            return errfmt(err, errcap,
                          "--join: --cluster must name the current "
                          "members and this node");
        return 0;
    }
    if (c->n != 3 && c->n != 5)
        return errfmt(err, errcap,
                      "--cluster: %d voters; a new cluster has 3 or 5 "
                      "(change it later with rockstalk cluster add and "
                      "remove)",
                      c->n);
    return 0;
}

int
cluster_identity_check(const char *dir, ClusterConfig *c, char *err,
                       size_t errcap)
{
    char path[4096], tmp[4096], raft[4096], buf[CLUSTER_FILE_MAX];
    char sub[200];
    ClusterConfig have;
    struct stat st;

    if (identity_paths(dir, path, tmp, raft, sizeof path) < 0)
        return errfmt(err, errcap, "data directory path too long");
    ssize_t len = read_small(path, buf, sizeof buf, err, errcap);
    if (len >= 0) {
        if (cluster_identity_parse(buf, (size_t)len, &have, sub, sizeof sub) <
            0)
            return errfmt(err, errcap, "%s: %s", path, sub);
        if (check_match(dir, &have, c, err, errcap) < 0) return -1;
        c->state = have.state;
        return CLUSTER_ID_MATCH;
    }
    if (errno != ENOENT) return -1;
    if (stat(raft, &st) == 0)
        return errfmt(err, errcap,
                      "%s holds a Raft log but no %s file: refusing to guess "
                      "which node it belongs to",
                      dir, CLUSTER_FILE);
    if (check_fresh(c, err, errcap) < 0) return -1;
    if (mkdir(dir, 0755) < 0 && errno != EEXIST)
        return errfmt(err, errcap, "mkdir %s: %s", dir, strerror(errno));
    size_t n = cluster_format(c, buf, sizeof buf);
    if (write_atomic(dir, tmp, path, buf, n, err, errcap) < 0) return -1;
    return CLUSTER_ID_WRITTEN;
}

int
cluster_parse_peer(uint64_t id, const char *addr, size_t len, ClusterPeer *out)
{
    char buf[CLUSTER_ARG_MAX + 32];
    ClusterConfig c = {.n = 0};

    if (len > CLUSTER_ARG_MAX || id == 0 || id > CLUSTER_MAX_ID) return -1;
    int w = snprintf(buf, sizeof buf, "%llu@%.*s", (unsigned long long)id,
                     (int)len, addr);
    if (w < 0 || parse_voter(&c, buf, (size_t)w, 1, NULL, 0) < 0) return -1;
    *out = c.voters[0];
    return 0;
}

int
cluster_addr_eq(const char *addr, const char *raft_addr)
{
    size_t len = strcspn(raft_addr, "/");

    return strlen(addr) == len && memcmp(addr, raft_addr, len) == 0;
}

void
cluster_raft_addr(const ClusterPeer *p, char *buf, size_t cap)
{
    if (p->client_port)
        snprintf(buf, cap, "%s/%u", p->addr, p->client_port);
    else
        snprintf(buf, cap, "%s", p->addr);
}

int
cluster_identity_adopt(const char *dir, ClusterConfig *c, char *err,
                       size_t errcap)
{
    char path[4096], tmp[4096], raft[4096], buf[CLUSTER_FILE_MAX], sub[200];
    ClusterConfig have;

    if (identity_paths(dir, path, tmp, raft, sizeof path) < 0)
        return errfmt(err, errcap, "data directory path too long");
    ssize_t len = read_small(path, buf, sizeof buf, err, errcap);
    if (len < 0) {
        if (errno == ENOENT)
            errfmt(err, errcap, "%s: missing after a restart", path);
        return -1;
    }
    if (cluster_identity_parse(buf, (size_t)len, &have, sub, sizeof sub) < 0)
        return errfmt(err, errcap, "%s: %s", path, sub);
    if (have.state == CLUSTER_REMOVED || have.self_id != c->self_id)
        return check_match(dir, &have, c, err, errcap);
    for (int i = 0; i < have.n; i++) {
        int k = cluster_find(c, have.voters[i].id);
        if (!have.voters[i].client_port && k >= 0)
            have.voters[i].client_port = c->voters[k].client_port;
    }
    *c = have;
    return CLUSTER_ID_MATCH;
}

void
cluster_client_addr(const ClusterConfig *c, int k, int port,
                    struct sockaddr_in *out)
{
    char host[CLUSTER_ADDR_MAX];
    const ClusterPeer *p = &c->voters[k];

    snprintf(host, sizeof host, "%s", p->addr);
    *strrchr(host, ':') = '\0';
    memset(out, 0, sizeof *out);
    out->sin_family = AF_INET;
    inet_pton(AF_INET, host, &out->sin_addr);
    out->sin_port =
        htons((uint16_t)(p->client_port ? p->client_port : (unsigned)port));
}

/* Whether a is an address of this host: one a socket can be bound to. */
static int
is_local_ipv4(struct in_addr a)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr = a};
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    int local = fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0;

    if (fd >= 0) close(fd);
    return local;
}

/* Whether the listening socket fd takes connections made to a: the same
 * port, and a's address or a wildcard one while a is local (IPv6's covers
 * IPv4 unless it is IPv6-only). A unix socket takes none. */
static int
listens_on(int fd, const struct sockaddr_in *a)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    int v6only = 0;

    if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0) return 0;
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *l = (const struct sockaddr_in *)&ss;
        if (l->sin_port != a->sin_port) return 0;
        if (l->sin_addr.s_addr == a->sin_addr.s_addr) return 1;
        return l->sin_addr.s_addr == htonl(INADDR_ANY) &&
               is_local_ipv4(a->sin_addr);
    }
    if (ss.ss_family != AF_INET6) return 0;
    const struct sockaddr_in6 *l6 = (const struct sockaddr_in6 *)&ss;
    if (l6->sin6_port != a->sin_port) return 0;
    if (IN6_IS_ADDR_V4MAPPED(&l6->sin6_addr))
        return memcmp(&l6->sin6_addr.s6_addr[12], &a->sin_addr, 4) == 0;
    len = sizeof v6only;
    getsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, &len);
    return IN6_IS_ADDR_UNSPECIFIED(&l6->sin6_addr) && !v6only &&
           is_local_ipv4(a->sin_addr);
}

int
cluster_check_relay(const ClusterConfig *c, int listen_fd, int port, char *err,
                    size_t errcap)
{
    char ip[INET_ADDRSTRLEN];
    struct sockaddr_in a;

    for (int k = 0; k < c->n; k++) {
        if (c->voters[k].id == c->self_id) continue;
        cluster_client_addr(c, k, port, &a);
        if (!listens_on(listen_fd, &a)) continue;
        inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip);
        return errfmt(
            err, errcap,
            "voter %llu's client address, %s:%u, is this node's own "
            "listening socket: clients relayed to it would come back here "
            "without end; give each voter its client port with /CLIENTPORT "
            "in --cluster (%llu@%s/P, P that node's -p)",
            (unsigned long long)c->voters[k].id, ip,
            (unsigned)ntohs(a.sin_port), (unsigned long long)c->voters[k].id,
            c->voters[k].addr);
    }
    return 0;
}
