/* httpcluster.c - see httpcluster.h. */
#include "server/httpcluster.h"

#include <string.h>

#include "base/log.h"
#include "cluster/nodestep.h"
#include "cluster/raftnode.h"

/* A member's role as the view shows it: "standby", "spare", "leader"
 * (leader: the leader's id) or "follower" (as rockstalk-cluster-status). */
static const char *
member_role(const RaftNodeVoterView *vv, uint64_t leader)
{
    return vv->role == RAFTNODE_STANDBY ? "standby"
           : vv->role == RAFTNODE_SPARE ? "spare"
           : vv->id == leader           ? "leader"
                                        : "follower";
}

/* key: v, or null when not known. */
static void
u64_or_null(Json *j, const char *key, int known, uint64_t v)
{
    json_key(j, key);
    if (known)
        json_u64(j, v);
    else
        json_null(j);
}

/* One member of v: progress when this node led with it known, else null. */
static void
member_json(const RaftNodeView *v, const RaftNodeVoterView *vv, uint64_t leader,
            Json *j)
{
    int known = v->leader && v->progress;
    uint64_t m = vv->match_index;
    json_obj(j);
    json_key(j, "id"), json_u64(j, vv->id);
    json_key(j, "raft"), json_cstr(j, vv->addr);
    json_key(j, "role"), json_cstr(j, member_role(vv, leader));
    u64_or_null(j, "match-index", known, m);
    u64_or_null(j, "lag", known, v->last_index > m ? v->last_index - m : 0);
    u64_or_null(j, "contact-ms", known && vv->contact_ms >= 0,
                (uint64_t)vv->contact_ms);
    json_obj_end(j);
}

/* The members before the Raft node runs: the configured voters, nothing
 * known of them. */
static void
configured_json(const ClusterConfig *cc, Json *j)
{
    for (int i = 0; i < cc->n; i++) {
        json_obj(j);
        json_key(j, "id"), json_u64(j, cc->voters[i].id);
        json_key(j, "raft"), json_cstr(j, cc->voters[i].addr);
        json_key(j, "role"), json_null(j);
        u64_or_null(j, "match-index", 0, 0);
        u64_or_null(j, "lag", 0, 0);
        u64_or_null(j, "contact-ms", 0, 0);
        json_obj_end(j);
    }
}

/* applied-index, last-index and the members, from v (NULL: not known). */
static void
view_json(const ClusterConfig *cc, const RaftNodeView *v, uint64_t leader,
          Json *j)
{
    u64_or_null(j, "applied-index", v != NULL, v ? v->applied : 0);
    u64_or_null(j, "last-index", v != NULL, v ? v->last_index : 0);
    json_key(j, "voters");
    json_arr(j);
    for (int i = 0; v && i < v->n; i++)
        member_json(v, &v->voters[i], leader, j);
    if (!v) configured_json(cc, j);
    json_arr_end(j);
}

void
httpcluster_json(const Server *s, Json *j)
{
    const ClusterConfig *cc = s->cfg.cluster;
    RaftNode *rn = node_raft(s);
    RaftNodeView v;
    NodeStats ns;
    json_obj(j);
    json_key(j, "mode");
    if (!cc) {
        json_cstr(j, "standalone");
        json_obj_end(j);
        return;
    }
    node_stats(s, &ns);
    if (rn) raftnode_view(rn, &v);
    json_cstr(j, "cluster");
    json_key(j, "node-id"), json_u64(j, cc->self_id);
    json_key(j, "role"), json_cstr(j, ns.role);
    json_key(j, "serving"), json_bool(j, node_serves(s));
    json_key(j, "leader"), json_u64(j, ns.leader);
    json_key(j, "term"), json_u64(j, ns.term);
    json_key(j, "commit-index"), json_u64(j, ns.commit_index);
    json_key(j, "security"), json_cstr(j, ns.security ? ns.security : "none");
    json_key(j, "peer-refused"), json_u64(j, ns.peer_refused);
    view_json(cc, rn && v.n ? &v : NULL, ns.leader, j);
    json_obj_end(j);
}

/* ---- POST cluster/transfer ---- */

/* The most up-to-date voter of v other than self (by match index; the
 * first when progress is unknown), 0 if none: whom to=0 picks, as
 * rockstalk-cluster-remove of the leader does. */
static uint64_t
successor(const RaftNodeView *v, uint64_t self)
{
    uint64_t best = 0, match = 0;
    for (int i = 0; i < v->n; i++) {
        const RaftNodeVoterView *vv = &v->voters[i];
        if (vv->id == self || vv->role != RAFTNODE_VOTER) continue;
        if (!best || vv->match_index > match)
            best = vv->id, match = vv->match_index;
    }
    return best;
}

/* Whether this node is the serving leader; answers 409 if not. */
static int
leads(const Server *s, HttpAns *a)
{
    NodeStats ns;
    if (!s->cfg.cluster) {
        httpans_error(a, 409, "not a cluster node");
        return 0;
    }
    if (node_serves(s) && node_raft(s)) return 1;
    node_stats(s, &ns);
    a->status = 409;
    json_obj(&a->j);
    json_key(&a->j, "error");
    json_cstr(&a->j, strcmp(ns.role, "leader") == 0
                         ? "this node leads but does not serve yet"
                         : "this node does not lead");
    json_key(&a->j, "leader"), json_u64(&a->j, ns.leader);
    json_obj_end(&a->j);
    return 0;
}

/* The voter to hand over to, from want (0: this leader's choice): its id,
 * or 0 (answered 404 or 409). */
static uint64_t
target(Server *s, uint64_t want, HttpAns *a)
{
    uint64_t self = s->cfg.cluster->self_id;
    RaftNodeView v;
    raftnode_view(node_raft(s), &v);
    if (!want) {
        uint64_t to = successor(&v, self);
        if (!to) httpans_error(a, 409, "no other voter to lead");
        return to;
    }
    if (want == self) {
        httpans_error(a, 404, "that voter leads already");
        return 0;
    }
    for (int i = 0; i < v.n; i++)
        if (v.voters[i].id == want && v.voters[i].role == RAFTNODE_VOTER)
            return want;
    httpans_error(a, 404, "no such voter");
    return 0;
}

void
httpcluster_transfer(Server *s, const HttpdReq *r, const AuthUser *u,
                     HttpAns *a)
{
    uint64_t want;
    if (r->method != HTTPD_POST)
        return httpans_error(a, 405, "method not allowed");
    if (u && !u->superuser)
        return httpans_error(a, 403,
                             "a leadership transfer needs a bare admin "
                             "identity");
    if (httpans_arg_u64(r, HTTPD_ARG_TO, 0, UINT64_MAX, &want, a,
                        "to: a voter's id (0 or none: the leader chooses)") <
            0 ||
        !leads(s, a))
        return;
    uint64_t to = target(s, want, a);
    if (!to) return;
    log_msg(0, "http: %s asked node %llu to lead (leadership transfer)",
            httpact_who(u), (unsigned long long)to);
    httpans_done(a, "to", to);
    a->sent_tag = to; /* httpcluster_sent, once the answer has left */
}

void
httpcluster_sent(Server *s, uint64_t to)
{
    RaftNode *rn = node_raft(s);
    if (!rn || !node_serves(s) || s->stopping) return;
    log_msg(0,
            "cluster: handing the leadership to node %llu (asked over "
            "HTTP)",
            (unsigned long long)to);
    raftnode_transfer(rn, to);
}
