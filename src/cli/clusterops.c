/* clusterops.c - see clusterops.h. */
#include "clusterops.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    snprintf(err, errcap, "usage: cluster status | cluster transfer ID");
    return RC_FAIL;
}
