/* nodeops.h - the cluster's operator commands on the serving leader
 * (protocol/PROTOCOL.md 15.8 to 15.10): rockstalk-cluster-status, what the
 * leader knows of the members (raftnode_view), rockstalk-cluster-transfer,
 * the hand-over of its leadership to a voter chosen by id, and the
 * membership changes rockstalk-cluster-add and rockstalk-cluster-remove
 * (raftnode_change), whose replies wait for the change's commit. A node
 * that does not serve relays them to the leader, as every command; a
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

/* Seconds a membership change may take by default (an added node catches
 * up within it, or the reply is TIMED_OUT and it stays a standby);
 * ROCKSTALKD_CLUSTER_CHANGE_MS sets another, in milliseconds, for tests. */
#define NODEOPS_CHANGE_S 60

/* rockstalk-cluster-add <id> <HOST:PORT[/CLIENTPORT]> (addr[0..len), HOST
 * an IPv4 literal): BAD_FORMAT for an address that is not one, DUPLICATE_ID or
 * DUPLICATE_ADDRESS for a member's, CLUSTER_FULL at CLUSTER_MAX_VOTERS
 * members, CHANGE_IN_PROGRESS while another change runs; else c waits
 * (its input paused) for the change: "ADDED <id>" once the node is a
 * voter and that is committed, TIMED_OUT past the deadline (it stays a
 * standby), CHANGE_FAILED if libraft refused it or the leadership was
 * lost. */
void nodeops_add(Conn *c, uint64_t id, const char *addr, size_t len);

/* rockstalk-cluster-remove <id>: NOT_FOUND unless id is a member;
 * for this node (the leader) "TRANSFERRING <to>": it hands its leadership
 * to the most up-to-date other voter first (send the command again, to
 * the new leader); CHANGE_IN_PROGRESS while another change runs; else
 * c waits for "REMOVED <id>" (committed), TIMED_OUT or CHANGE_FAILED. */
void nodeops_remove(Conn *c, uint64_t id);

/* Loop thread, each iteration (after node_step): answers the client waiting for
 * a membership change once its outcome is known or its wait is over. */
void nodeops_step(Server *s);

/* Loop thread: c is closing; a membership change it waits for goes on
 * without it. */
void nodeops_closed(Conn *c);

#endif
