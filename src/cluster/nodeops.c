/* nodeops.c - see nodeops.h. */
#include "cluster/nodeops.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "base/log.h"
#include "cluster/node_impl.h"

/* A bounded text buffer: what does not fit is cut (never, at the sizes
 * NODEOPS_STATUS_MAX allows for). */
typedef struct Text {
    char buf[NODEOPS_STATUS_MAX];
    size_t len;
} Text;

static void __attribute__((format(printf, 2, 3)))
put(Text *t, const char *fmt, ...)
{
    va_list ap;
    size_t room = sizeof t->buf - t->len;
    va_start(ap, fmt);
    int w = vsnprintf(t->buf + t->len, room, fmt, ap);
    va_end(ap);
    if (w > 0) t->len += (size_t)w < room ? (size_t)w : room - 1;
}

/* The serving node, or NULL (standalone, or not serving: then the reply
 * is UNKNOWN_COMMAND, as for a command this server does not have). */
static Node *
serving(Conn *c)
{
    Node *n = c->srv->node;
    if (!n || !n->serving || !n->raft) {
        conn_reply_lit(c, "UNKNOWN_COMMAND\r\n");
        return NULL;
    }
    return n;
}

/* One voter's lines of the status. */
static void
put_voter(Text *t, const Node *n, const RaftNodeView *v,
          const RaftNodeVoterView *vv, uint64_t leader)
{
    char ip[INET_ADDRSTRLEN] = "unknown";
    unsigned port = 0;
    int k = cluster_find(&n->cfg, vv->id);
    if (k >= 0) {
        struct sockaddr_in a;
        cluster_client_addr(&n->cfg, k, n->port, &a);
        inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip);
        port = ntohs(a.sin_port);
    }
    put(t, "- id: %" PRIu64 "\n  raft-address: %s\n", vv->id, vv->addr);
    put(t, "  client-address: %s:%u\n", ip, port);
    put(t, "  role: %s\n",
        vv->role == RAFTNODE_STANDBY ? "standby"
        : vv->role == RAFTNODE_SPARE ? "spare"
        : vv->id == leader           ? "leader"
                                     : "follower");
    if (!v->progress) return;
    put(t, "  match-index: %" PRIu64 "\n  lag: %" PRIu64 "\n", vv->match_index,
        v->last_index > vv->match_index ? v->last_index - vv->match_index : 0);
    if (vv->contact_ms >= 0)
        put(t, "  contact-ms: %" PRId64 "\n", vv->contact_ms);
}

void
nodeops_status(Conn *c)
{
    Node *n = serving(c);
    if (!n) return;
    RaftNodeView v;
    RaftNodeStatus st;
    Text t = {.len = 0};
    raftnode_view(n->raft, &v);
    raftnode_status(n->raft, &st);
    put(&t,
        "---\nnode-id: %" PRIu64 "\nleader: %" PRIu64 "\nterm: %" PRIu64
        "\ncommit-index: %" PRIu64 "\napplied-index: %" PRIu64
        "\nlast-index: %" PRIu64 "\nprogress: %s\nvoters:\n",
        n->cfg.self_id, st.leader_id, v.term, v.commit_index, v.applied,
        v.last_index, v.progress ? "known" : "unknown");
    for (int i = 0; i < v.n; i++)
        put_voter(&t, n, &v, &v.voters[i], st.leader_id);
    put(&t, "\r\n");
    conn_reply_ok(c, t.buf, t.len);
}

void
nodeops_transfer(Conn *c, uint64_t id)
{
    Node *n = serving(c);
    if (!n) return;
    RaftNodeView v;
    int found = 0;
    raftnode_view(n->raft, &v);
    for (int i = 0; i < v.n; i++)
        found |= v.voters[i].id == id && v.voters[i].role == RAFTNODE_VOTER;
    if (!found || id == n->cfg.self_id) {
        conn_reply_lit(c, "NOT_FOUND\r\n");
        return;
    }
    n->transfer_to = id;
    char line[48];
    int len = snprintf(line, sizeof line, "TRANSFERRING %" PRIu64 "\r\n", id);
    conn_reply_at(c, line, (size_t)len, NULL, 0, 0); /* depends on no change */
}

/* Milliseconds a membership change may take (NODEOPS_CHANGE_S, or
 * ROCKSTALKD_CLUSTER_CHANGE_MS). */
static unsigned
change_ms(void)
{
    const char *v = getenv("ROCKSTALKD_CLUSTER_CHANGE_MS");
    unsigned long ms = v ? strtoul(v, NULL, 10) : 0;
    return ms ? (unsigned)ms : NODEOPS_CHANGE_S * 1000u;
}

/* Starts change op of member p for c, whose reply then waits
 * (nodeops_step). */
static void
begin(Conn *c, Node *n, int op, const ClusterPeer *p)
{
    unsigned ms = change_ms();

    if (n->change_conn) {
        conn_reply_lit(c, "CHANGE_IN_PROGRESS\r\n");
        return;
    }
    int rc = raftnode_change(n->raft, op, p, ms);
    if (rc != RAFTNODE_CH_RUNNING) {
        if (rc == RAFTNODE_CH_BUSY)
            conn_reply_lit(c, "CHANGE_IN_PROGRESS\r\n");
        else
            conn_reply_lit(c, "CHANGE_FAILED\r\n");
        return;
    }
    n->change_conn = c;
    n->change_op = op;
    n->change_id = p->id;
    n->change_t0 = mono_ns();
    /* the raft thread answers by then; this is the backstop */
    n->change_end = n->change_t0 + ((int64_t)ms + 2000) * 1000000;
    log_msg(0, "cluster: %s node %" PRIu64 " (%s, asked by a client)",
            op == RAFTNODE_CHANGE_ADD ? "adding" : "removing", p->id, p->addr);
    conn_pause(c);
}

/* Whether addr[0..len)'s HOST is an IPv4 literal: the loop resolves no
 * names (a lookup could block it; rockstalk cluster add sends the address
 * it resolved). */
static int
ipv4_host(const char *addr, size_t len)
{
    char host[INET_ADDRSTRLEN];
    const char *colon = memchr(addr, ':', len);
    struct in_addr a;

    if (!colon || (size_t)(colon - addr) >= sizeof host) return 0;
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = '\0';
    return inet_pton(AF_INET, host, &a) == 1;
}

void
nodeops_add(Conn *c, uint64_t id, const char *addr, size_t len)
{
    Node *n = serving(c);
    if (!n) return;
    ClusterPeer p;
    RaftNodeView v;
    if (!ipv4_host(addr, len) || cluster_parse_peer(id, addr, len, &p) < 0) {
        conn_reply_lit(c, "BAD_FORMAT\r\n");
        return;
    }
    raftnode_view(n->raft, &v);
    for (int i = 0; i < v.n; i++) {
        if (v.voters[i].id == id) {
            conn_reply_lit(c, "DUPLICATE_ID\r\n");
            return;
        }
        if (cluster_addr_eq(p.addr, v.voters[i].addr)) {
            conn_reply_lit(c, "DUPLICATE_ADDRESS\r\n");
            return;
        }
    }
    if (v.n >= CLUSTER_MAX_VOTERS) {
        conn_reply_lit(c, "CLUSTER_FULL\r\n");
        return;
    }
    pthread_mutex_lock(&n->rec_mu);
    int seeding = n->rec.state == CLUSTER_SEEDING;
    pthread_mutex_unlock(&n->rec_mu);
    if (seeding) { /* a node added now would get the log, not the state */
        conn_reply_lit(c, "CHANGE_IN_PROGRESS\r\n");
        return;
    }
    begin(c, n, RAFTNODE_CHANGE_ADD, &p);
}

/* The most up-to-date voter other than this leader (by match index), 0
 * if there is none. */
static uint64_t
successor(const Node *n, const RaftNodeView *v)
{
    uint64_t best = 0, match = 0;

    for (int i = 0; i < v->n; i++) {
        const RaftNodeVoterView *vv = &v->voters[i];
        if (vv->id == n->cfg.self_id || vv->role != RAFTNODE_VOTER) continue;
        if (!best || vv->match_index > match) {
            best = vv->id;
            match = vv->match_index;
        }
    }
    return best;
}

void
nodeops_remove(Conn *c, uint64_t id)
{
    Node *n = serving(c);
    if (!n) return;
    RaftNodeView v;
    int k = -1;
    raftnode_view(n->raft, &v);
    for (int i = 0; i < v.n; i++)
        if (v.voters[i].id == id) k = i;
    if (k < 0) {
        conn_reply_lit(c, "NOT_FOUND\r\n");
        return;
    }
    if (n->change_conn || raftnode_change_busy(n->raft)) {
        conn_reply_lit(c, "CHANGE_IN_PROGRESS\r\n");
        return;
    }
    if (id == n->cfg.self_id) {
        uint64_t to = successor(n, &v);
        if (!to) {
            conn_reply_lit(c, "CHANGE_FAILED\r\n"); /* the last voter */
            return;
        }
        n->transfer_to = to; /* node_step, once the reply is written */
        char line[48];
        int w = snprintf(line, sizeof line, "TRANSFERRING %" PRIu64 "\r\n", to);
        conn_reply_at(c, line, (size_t)w, NULL, 0, 0);
        return;
    }
    ClusterPeer p = {.id = id};
    snprintf(p.addr, sizeof p.addr, "%.*s", (int)strcspn(v.voters[k].addr, "/"),
             v.voters[k].addr);
    begin(c, n, RAFTNODE_CHANGE_REMOVE, &p);
}

void
nodeops_step(Server *s)
{
    Node *n = s->node;
    char msg[256], line[64];

    if (!n || !n->raft || !n->change_conn) return;
    Conn *c = n->change_conn;
    int rc = raftnode_change_poll(n->raft, msg, sizeof msg);
    if (rc == RAFTNODE_CH_RUNNING && mono_ns() < n->change_end) return;
    double ms = (double)(mono_ns() - n->change_t0) / 1e6;
    const char *what =
        n->change_op == RAFTNODE_CHANGE_ADD ? "ADDED" : "REMOVED";
    int w;
    if (rc == RAFTNODE_CH_OK)
        w = snprintf(line, sizeof line, "%s %" PRIu64 "\r\n", what,
                     n->change_id);
    else
        w = snprintf(line, sizeof line, "%s\r\n",
                     rc == RAFTNODE_CH_FAILED ? "CHANGE_FAILED"
                     : rc == RAFTNODE_CH_BUSY ? "CHANGE_IN_PROGRESS"
                                              : "TIMED_OUT");
    log_msg(0, "cluster: %s node %" PRIu64 ": %.*s after %.0f ms%s%s",
            n->change_op == RAFTNODE_CHANGE_ADD ? "adding" : "removing",
            n->change_id, w - 2, line, ms, msg[0] ? ": " : "", msg);
    n->change_conn = NULL;
    conn_reply(c, line, (size_t)w);
    conn_resume(c);
}

void
nodeops_closed(Conn *c)
{
    Node *n = c->srv->node;

    if (n && n->change_conn == c) n->change_conn = NULL;
}
