/* clusterops.c - see clusterops.h. */
#include "clusterops.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <time.h>

#include "yaml.h"

/* One voter of a status reply. */
typedef struct Voter {
    char id[24], raft[32], client[32], role[16];
    char match[24], lag[24], contact[24]; /* "" when not reported */
} Voter;

/* A parsed rockstalk-cluster-status reply. */
typedef struct Status {
    uint64_t leader, term, commit, applied, last;
    int progress; /* per-voter progress reported */
    int n;
    Voter v[8];
} Status;

/* Copies the block of one "- " list item (its lines without their two
 * leading characters) from p into out; returns where the next one starts
 * (or NULL at the end). */
static const char *
item_block(const char *p, char *out, size_t cap)
{
    size_t o = 0;
    int first = 1;
    while (p && *p && (first || (p[0] == ' ' && p[1] == ' '))) {
        size_t len = strcspn(p, "\n");
        const char *line = len >= 2 ? p + 2 : p + len;
        size_t n = len >= 2 ? len - 2 : 0;
        if (o + n + 2 < cap) {
            memcpy(out + o, line, n);
            o += n;
            out[o++] = '\n';
        }
        p = p[len] ? p + len + 1 : NULL;
        first = 0;
    }
    out[o] = '\0';
    return p;
}

static void
get(const char *b, const char *key, char *out, size_t cap)
{
    if (yaml_get(b, key, out, cap) < 0) out[0] = '\0';
}

/* Parses the body of a status reply into *st. Returns 0, or -1 when it
 * lacks the leader or the voters. */
static int
parse_status(const char *body, Status *st)
{
    char word[16] = "", block[1024];
    memset(st, 0, sizeof *st);
    if (yaml_u64(body, "leader", &st->leader) < 0) return -1;
    yaml_u64(body, "term", &st->term);
    yaml_u64(body, "commit-index", &st->commit);
    yaml_u64(body, "applied-index", &st->applied);
    yaml_u64(body, "last-index", &st->last);
    get(body, "progress", word, sizeof word);
    st->progress = strcmp(word, "known") == 0;
    const char *p = strstr(body, "\nvoters:\n");
    if (!p) return -1;
    p += 9;
    while (p && p[0] == '-' && p[1] == ' ' && st->n < 8) {
        Voter *v = &st->v[st->n++];
        p = item_block(p, block, sizeof block);
        get(block, "id", v->id, sizeof v->id);
        get(block, "raft-address", v->raft, sizeof v->raft);
        get(block, "client-address", v->client, sizeof v->client);
        get(block, "role", v->role, sizeof v->role);
        get(block, "match-index", v->match, sizeof v->match);
        get(block, "lag", v->lag, sizeof v->lag);
        get(block, "contact-ms", v->contact, sizeof v->contact);
    }
    return st->n ? 0 : -1;
}

/* Asks s for the status. Returns RC_OK with *st; RC_REPLY when the server
 * refuses (its line in err); RC_FAIL on a connection or format error. */
static int
ask_status(Session *s, Status *st, char *err, size_t errcap)
{
    Reply r;
    if (session_ask(s, "rockstalk-cluster-status", &r, err, errcap) < 0)
        return RC_FAIL;
    int rc = RC_OK;
    if (reply_is(&r, "UNKNOWN_COMMAND")) {
        snprintf(err, errcap,
                 "UNKNOWN_COMMAND: not a cluster node (or a "
                 "server without rockstalk-cluster-status)");
        rc = RC_REPLY;
    } else if (!reply_is(&r, "OK") || !r.body) {
        snprintf(err, errcap, "%s", r.line);
        rc = RC_REPLY;
    } else if (parse_status(r.body, st) < 0) {
        snprintf(err, errcap,
                 "the server sent a status without a leader "
                 "or voters");
        rc = RC_FAIL;
    }
    reply_free(&r);
    return rc;
}

static const char *
or_dash(const char *v)
{
    return *v ? v : "-";
}

static void
print_status(const Status *st)
{
    printf("leader %llu, term %llu, commit %llu, applied %llu, last index "
           "%llu\n",
           (unsigned long long)st->leader, (unsigned long long)st->term,
           (unsigned long long)st->commit, (unsigned long long)st->applied,
           (unsigned long long)st->last);
    printf("%-5s %-9s %-21s %-21s %10s %8s %10s\n", "ID", "ROLE", "RAFT",
           "CLIENT", "MATCH", "LAG", "CONTACT-MS");
    for (int i = 0; i < st->n; i++) {
        const Voter *v = &st->v[i];
        printf("%-5s %-9s %-21s %-21s %10s %8s %10s\n", v->id, v->role, v->raft,
               v->client, or_dash(v->match), or_dash(v->lag),
               or_dash(v->contact));
    }
    if (!st->progress)
        printf("(match, lag and contact unknown: this libraft keeps the "
               "leader's progress private)\n");
    fflush(stdout);
}

static void
sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static double
now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A new connection for s (the old one closed), authenticated as the first
 * was, with reads bounded by CLUSTEROPS_READ_S. Returns 0 or -1. */
static int
reconnect(Session *s, char *err, size_t errcap)
{
    client_close(&s->conn);
    snprintf(s->used, sizeof s->used, "default");
    if (client_open(&s->conn, s->host, s->port, s->unix_path, s->tls, err,
                    errcap) < 0)
        return -1;
    struct timeval tv = {CLUSTEROPS_READ_S, 0};
    setsockopt(s->conn.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (s->token && session_auth(s, s->token, err, errcap) != RC_OK) return -1;
    return 0;
}

/* Polls the status on new connections until node id leads, up to
 * CLUSTEROPS_WAIT_S. */
static int
wait_leader(Session *s, uint64_t id, uint64_t old, char *err, size_t errcap)
{
    double t0 = now_s();
    uint64_t seen = old;
    char why[CLIENT_ERR_LEN] = "";
    while (now_s() - t0 < CLUSTEROPS_WAIT_S) {
        Status st;
        sleep_ms(CLUSTEROPS_POLL_MS);
        if (reconnect(s, why, sizeof why) < 0) continue;
        if (ask_status(s, &st, why, sizeof why) != RC_OK) continue;
        seen = st.leader;
        if (st.leader == id) {
            printf("node %llu leads now (term %llu), after %.2f s\n",
                   (unsigned long long)id, (unsigned long long)st.term,
                   now_s() - t0);
            fflush(stdout);
            return RC_OK;
        }
    }
    snprintf(err, errcap,
             "node %llu did not take the leadership within %d s (leader "
             "seen last: %llu%s%s)",
             (unsigned long long)id, CLUSTEROPS_WAIT_S,
             (unsigned long long)seen, why[0] ? "; " : "", why);
    return RC_REPLY;
}

static int
transfer(Session *s, const char *arg, char *err, size_t errcap)
{
    Status st;
    Reply r;
    char line[64];
    if (!commands_is_number(arg) || strlen(arg) > 19) {
        snprintf(err, errcap, "cluster transfer: ID is a node id, not '%s'",
                 arg);
        return RC_FAIL;
    }
    uint64_t id = strtoull(arg, NULL, 10);
    int rc = ask_status(s, &st, err, errcap);
    if (rc != RC_OK) return rc;
    if (st.leader == id) {
        printf("node %llu leads already\n", (unsigned long long)id);
        return RC_OK;
    }
    snprintf(line, sizeof line, "rockstalk-cluster-transfer %s", arg);
    if (session_ask(s, line, &r, err, errcap) < 0) {
        printf("the connection closed before a reply (%s); checking\n", err);
    } else if (reply_is(&r, "TRANSFERRING")) {
        printf("node %llu hands the leadership to node %llu\n",
               (unsigned long long)st.leader, (unsigned long long)id);
        reply_free(&r);
    } else {
        session_status(s, r.line);
        snprintf(err, errcap, "%s",
                 reply_is(&r, "NOT_FOUND")
                     ? "no such voter (or the leader itself)"
                     : "the server refused the transfer");
        reply_free(&r);
        return RC_REPLY;
    }
    fflush(stdout);
    return wait_leader(s, id, st.leader, err, errcap);
}

/* What a refusal of rockstalk-cluster-add or -remove means (PROTOCOL.md
 * 15.9, 15.10), or NULL for a reply this table does not know. */
static const char *
change_refusal(const Reply *r)
{
    static const struct {
        const char *word, *text;
    } t[] = {
        {"NOT_FOUND", "no member has that id"},
        {"DUPLICATE_ID", "a member has that id already"},
        {"DUPLICATE_ADDRESS", "a member has that Raft address already"},
        {"CLUSTER_FULL", "the cluster has its most members already"},
        {"CHANGE_IN_PROGRESS",
         "another membership change is under way; try again once it ends"},
        {"TIMED_OUT",
         "the change did not complete in time (an added node that did not "
         "catch up stays a non-voting standby: check that it runs with "
         "--join, then remove it or add it again)"},
        {"CHANGE_FAILED",
         "the leader could not make the change (it lost its leadership, or "
         "it is the last voter); see its log"},
        {"BAD_FORMAT", "not ID@HOST:PORT[/CLIENTPORT]"},
        {"UNKNOWN_COMMAND", "not a cluster node (or a server without "
                            "membership changes)"},
        {"DENIED", "only an admin identity may change the membership"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (reply_is(r, t[i].word)) return t[i].text;
    return NULL;
}

/* Sends line (a membership change) and waits up to CLUSTEROPS_CHANGE_S
 * for its reply. Returns RC_OK with the reply in *r, or RC_FAIL. */
static int
ask_change(Session *s, const char *line, Reply *r, char *err, size_t errcap)
{
    struct timeval tv = {CLUSTEROPS_CHANGE_S, 0};
    setsockopt(s->conn.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return session_ask(s, line, r, err, errcap) < 0 ? RC_FAIL : RC_OK;
}

/* The end of a change: ok (its reply's first word) or a refusal. */
static int
change_done(Session *s, Reply *r, const char *ok, double t0, char *err,
            size_t errcap)
{
    int rc = RC_OK;

    if (reply_is(r, ok)) {
        printf("%s (%.2f s)\n", r->line, now_s() - t0);
    } else {
        const char *why = change_refusal(r);
        session_status(s, r->line);
        snprintf(err, errcap, "%s", why ? why : "the server refused it");
        rc = RC_REPLY;
    }
    fflush(stdout);
    reply_free(r);
    return rc;
}

/* HOST:PORT[/CLIENTPORT] (addr) with HOST resolved to an IPv4 literal
 * (the server resolves no names), into out (cap bytes). Returns 0, or -1
 * if HOST has no IPv4 address. */
static int
resolve_addr(const char *addr, char *out, size_t cap)
{
    const char *colon = strrchr(addr, ':');
    char host[256], ip[INET_ADDRSTRLEN];
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;

    if (!colon || colon == addr || (size_t)(colon - addr) >= sizeof host)
        return -1;
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = '\0';
    if (getaddrinfo(host, NULL, &hints, &res) != 0 || !res) return -1;
    inet_ntop(AF_INET, &((struct sockaddr_in *)res->ai_addr)->sin_addr, ip,
              sizeof ip);
    freeaddrinfo(res);
    snprintf(out, cap, "%s%s", ip, colon);
    return 0;
}

static int
add(Session *s, const char *arg, char *err, size_t errcap)
{
    const char *at = strchr(arg, '@');
    char line[360], addr[300];
    Reply r;

    if (!at || at == arg || (size_t)(at - arg) > 5 || !at[1] ||
        strspn(arg, "0123456789") != (size_t)(at - arg) || strlen(at) > 270) {
        snprintf(err, errcap,
                 "cluster add: ID@HOST:PORT[/CLIENTPORT], not '%s'", arg);
        return RC_FAIL;
    }
    if (resolve_addr(at + 1, addr, sizeof addr) < 0) {
        snprintf(err, errcap, "cluster add: no IPv4 address for '%s'", at + 1);
        return RC_FAIL;
    }
    snprintf(line, sizeof line, "rockstalk-cluster-add %.*s %s",
             (int)(at - arg), arg, addr);
    double t0 = now_s();
    if (ask_change(s, line, &r, err, errcap) != RC_OK) return RC_FAIL;
    return change_done(s, &r, "ADDED", t0, err, errcap);
}

static int
remove_member(Session *s, const char *arg, char *err, size_t errcap)
{
    char line[64];
    Reply r;

    if (!commands_is_number(arg) || strlen(arg) > 19) {
        snprintf(err, errcap, "cluster remove: ID is a node id, not '%s'", arg);
        return RC_FAIL;
    }
    snprintf(line, sizeof line, "rockstalk-cluster-remove %s", arg);
    double t0 = now_s();
    for (int tries = 0;; tries++) {
        if (ask_change(s, line, &r, err, errcap) != RC_OK) return RC_FAIL;
        if (!reply_is(&r, "TRANSFERRING") || tries == 3) break;
        /* node ID leads: it hands over first, then the new leader removes
         * it */
        printf("node %s leads: %s first\n", arg, r.line);
        fflush(stdout);
        uint64_t to = strtoull(r.line + 13, NULL, 10);
        reply_free(&r);
        int rc = wait_leader(s, to, strtoull(arg, NULL, 10), err, errcap);
        if (rc != RC_OK) return rc;
    }
    return change_done(s, &r, "REMOVED", t0, err, errcap);
}

int
clusterops_run(Session *s, int argc, char **argv, char *err, size_t errcap)
{
    if (argc == 2 && strcmp(argv[1], "status") == 0) {
        Status st;
        int rc = ask_status(s, &st, err, errcap);
        if (rc == RC_OK) print_status(&st);
        return rc;
    }
    if (argc == 3 && strcmp(argv[1], "transfer") == 0)
        return transfer(s, argv[2], err, errcap);
    if (argc == 3 && strcmp(argv[1], "add") == 0)
        return add(s, argv[2], err, errcap);
    if (argc == 3 && strcmp(argv[1], "remove") == 0)
        return remove_member(s, argv[2], err, errcap);
    snprintf(err, errcap,
             "usage: cluster status | cluster transfer ID | cluster add "
             "ID@HOST:PORT[/CLIENTPORT] | cluster remove ID");
    return RC_FAIL;
}
