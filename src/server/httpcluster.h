/* httpcluster.h - the HTTP API's cluster (protocol/PROTOCOL.md 18.7 and
 * 18.21): the document GET /api/v1/cluster, rendered once a second by
 * server/httpdocs.h from what the raft thread publishes (raftnode_status
 * and raftnode_view, the copies rockstalk-cluster-status reads: no work
 * for the raft thread, however often it is asked), and POST
 * /api/v1/cluster/transfer, rockstalk-cluster-transfer's hand-over of the
 * leadership (15.8) asked over HTTP. Its answer leaves first: the
 * transfer starts once the HTTP thread has sent it (HttpdReq.sent_tag),
 * since the old leader then restarts. Loop thread only. */
#ifndef ROCKSTALK_HTTPCLUSTER_H
#define ROCKSTALK_HTTPCLUSTER_H

#include <stdint.h>

#include "http/httpd.h"
#include "http/json.h"
#include "queue/state.h"
#include "server/auth.h"
#include "server/httpact.h"

/* GET /api/v1/cluster into j: {"mode":"standalone"}, or this node's view
 * (its role, leader, term, commit, applied and last index, and each
 * member with its role and, on a leader that knows them, match index,
 * lag and contact age; null where not known). */
void httpcluster_json(const Server *s, Json *j);

/* POST /api/v1/cluster/transfer?to=ID on this node (u: the identity, NULL
 * for the open API; a bare admin is needed): answers a, 200
 * {"ok":true,"to":ID} with a->sent_tag set to ID, or 400, 403, 404, 405,
 * 409 (18.21). to absent or 0: the most up-to-date other voter. */
void httpcluster_transfer(Server *s, const HttpdReq *r, const AuthUser *u,
                          HttpAns *a);

/* The answer of a transfer to voter to has been sent
 * (httpd_take_sent): starts the hand-over if this node still serves. */
void httpcluster_sent(Server *s, uint64_t to);

#endif
