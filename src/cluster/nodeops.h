/* nodeops.h - the cluster's operator commands on the serving leader
 * (protocol/PROTOCOL.md 15.8): rockstalk-cluster-status, what the leader
 * knows of the voters (raftnode_view), and rockstalk-cluster-transfer,
 * the hand-over of its leadership to a voter chosen by id. A node that
 * does not serve relays both to the leader, as every command; a
 * standalone server answers UNKNOWN_COMMAND. Access (--auth-file) is
 * checked before, by server/access.c. Loop thread only. */
#ifndef ROCKSTALK_NODEOPS_H
#define ROCKSTALK_NODEOPS_H

#include <stdint.h>

#include "conn/conn.h"

/* Bytes a status reply may take at most (a header and CLUSTER_MAX_VOTERS
 * voters of about 200 bytes each): the reply is built in a fixed buffer. */
#define NODEOPS_STATUS_MAX 2048

/* rockstalk-cluster-status: "OK <bytes>\r\n" and a YAML map (the leader,
 * its term, commit, applied and last log index, whether the per-voter
 * progress is known, and the list of voters with their Raft and client
 * addresses, role, match index, lag and contact age), at most
 * NODEOPS_STATUS_MAX bytes. */
void nodeops_status(Conn *c);

/* rockstalk-cluster-transfer <id>: NOT_FOUND unless id is another voter;
 * else "TRANSFERRING <id>" (waiting for no commit) and the node starts the
 * hand-over once the reply is written (node_step). The old leader then
 * restarts as a follower, which closes this connection. */
void nodeops_transfer(Conn *c, uint64_t id);

#endif
