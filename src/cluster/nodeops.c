/* nodeops.c - see nodeops.h. */
#include "cluster/nodeops.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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
    put(t, "  role: %s\n", vv->id == leader ? "leader" : "follower");
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
        found |= v.voters[i].id == id;
    if (!found || id == n->cfg.self_id) {
        conn_reply_lit(c, "NOT_FOUND\r\n");
        return;
    }
    n->transfer_to = id;
    char line[48];
    int len = snprintf(line, sizeof line, "TRANSFERRING %" PRIu64 "\r\n", id);
    conn_reply_at(c, line, (size_t)len, NULL, 0, 0); /* depends on no change */
}
