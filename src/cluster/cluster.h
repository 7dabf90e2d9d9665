/* cluster.h - cluster identity (issue 15): the --cluster and --node-id flags
 * parsed into a ClusterConfig, and the CLUSTER file that binds a data
 * directory to one node of one cluster:
 *
 *   <dir>/CLUSTER   "rockstalk-cluster 1\nnode N\nvoter ID HOST:PORT\n..."
 *                   (voters sorted by id), written atomically (temp file,
 *                   fsync, rename, fsync of dir) on the first start in
 *                   cluster mode and again after each committed membership
 *                   change; checked on every later start. Version 2 (only
 *                   when needed) adds "state joining|removed" after the
 *                   node line.
 *   <dir>/raft/     the Raft log (raftnode.h), created after the check.
 *
 * The parsed form is canonical: voters sorted by id and addresses printed
 * back from their parsed numbers, so that every node bootstraps the same
 * Raft configuration byte for byte (raftnode_start) whatever order or
 * spelling its --cluster used.
 *
 * Threads: any; no state. cluster_parse, cluster_format and
 * cluster_identity_parse are pure; cluster_identity_check reads and writes
 * the directory; cluster_check_relay looks at a socket and binds a
 * throw-away one. Calls: libc only (a leaf). Errors: -1 with a message in
 * err (errcap bytes); nothing here prints.
 */
#ifndef ROCKSTALK_CLUSTER_H
#define ROCKSTALK_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include <netinet/in.h>

#include "base/common.h"

/* Members of a cluster at most: a new cluster starts with 3 or 5 voters
 * (a majority survives one or two losses; an even count adds no
 * tolerance); membership changes online (nodeops.h) pass through 1 to 5. */
#define CLUSTER_MAX_VOTERS 5
/* Node ids are 1..CLUSTER_MAX_ID, so a later on-disk or wire format can
 * carry one in 16 bits. */
#define CLUSTER_MAX_ID 65535
/* "255.255.255.255:65535" and its NUL. */
#define CLUSTER_ADDR_MAX 22
/* A Raft address as libraft holds it: CLUSTER_ADDR_MAX's, then for a
 * member added online "/CLIENTPORT" (libraft 0.15's TCP transport reads
 * the port with atoi, so the suffix does not disturb it). */
#define CLUSTER_RAFT_ADDR_MAX 28
/* The identity file and the Raft log's subdirectory, in the data dir. */
#define CLUSTER_FILE "CLUSTER"
#define CLUSTER_RAFT_SUBDIR "raft"
/* Room for cluster_format's text (a header, a node line, a state line,
 * five voters). */
#define CLUSTER_TEXT_MAX 384

/* One voter: its node id and its Raft address, "A.B.C.D:PORT" (an IPv4
 * literal: libraft 0.15's TCP transport resolves no names, so a host name
 * given in --cluster is resolved once, when the flag is parsed). */
typedef struct ClusterPeer {
    uint64_t id;
    char addr[CLUSTER_ADDR_MAX];
    /* Its client port (-p), from "ID@HOST:PORT/CLIENTPORT"; 0 when not
     * given: the same as this node's own -p. Not part of the identity (a
     * node may move its client port); followers forward clients there. */
    unsigned client_port;
} ClusterPeer;

/* What a data directory records of its node's membership (the CLUSTER
 * file's state line, ClusterConfig.state). */
enum {
    CLUSTER_MEMBER = 0, /* bootstrapped, or seen in a committed configuration */
    CLUSTER_JOINING = 1, /* started with --join, not yet seen in one: never
                            bootstraps */
    CLUSTER_REMOVED = 2, /* a configuration without it was committed: it
                            refuses to start as a member again */
    CLUSTER_SEEDING = 3  /* started with --seed on a backup: the single
                            voter of a new cluster until its first Raft
                            snapshot, which the nodes that join fetch */
};

/* This node and the members (libraft's configuration as last recorded, or
 * --cluster's), sorted by id. */
typedef struct ClusterConfig {
    uint64_t self_id; /* one of voters[].id */
    int n;            /* 1..CLUSTER_MAX_VOTERS */
    int state;        /* CLUSTER_MEMBER, _JOINING or _REMOVED */
    ClusterPeer voters[CLUSTER_MAX_VOTERS];
} ClusterConfig;

/* Parses --cluster ("ID@HOST:PORT,ID@HOST:PORT,...", each item optionally
 * followed by "/CLIENTPORT") and --node-id (a decimal id) into *c (state
 * CLUSTER_MEMBER). Refuses: more than CLUSTER_MAX_VOTERS voters (a new
 * cluster's 3 or 5 is cluster_identity_check's rule), an id out
 * of 1..CLUSTER_MAX_ID or given twice, an address whose HOST is neither an IPv4
 * literal nor a name that resolves to an IPv4 address (getaddrinfo, now: a name
 * is kept as the address it resolved to), whose port is not in 1..65535, or
 * that is given twice, a node id that is not among the voters, and any stray
 * character. Returns 0, or -1 with a message naming the offending part in err;
 * *c is undefined then. */
int cluster_parse(const char *cluster, const char *node_id, ClusterConfig *c,
                  char *err, size_t errcap);

/* Writes c's --cluster spelling ("1@A:P,2@A:P,3@A:P", sorted by id) into
 * buf (cap bytes, NUL-terminated, cut short if cap is too small). */
void cluster_spec(const ClusterConfig *c, char *buf, size_t cap);

/* Index in c->voters of node id, or -1 if it is not a voter. */
int cluster_find(const ClusterConfig *c, uint64_t id);

/* Writes c as the CLUSTER file's text into buf (cap bytes; at least
 * CLUSTER_TEXT_MAX is always enough). Returns the text's length. */
size_t cluster_format(const ClusterConfig *c, char *buf, size_t cap);

/* Parses a CLUSTER file's text (len bytes, need not be NUL-terminated)
 * into *c, with the same checks as cluster_parse. Returns 0, or -1 with a
 * message in err. */
int cluster_identity_parse(const char *text, size_t len, ClusterConfig *c,
                           char *err, size_t errcap);

/* Parses one member's "HOST:PORT[/CLIENTPORT]" (addr[0..len), as in
 * --cluster, or a Raft address from libraft's configuration) with id into
 * *out. Returns 0, or -1 if it is not one. */
int cluster_parse_peer(uint64_t id, const char *addr, size_t len,
                       ClusterPeer *out);

/* p's Raft address for libraft (CLUSTER_RAFT_ADDR_MAX): "A.B.C.D:PORT",
 * with "/CLIENTPORT" when p has one. */
void cluster_raft_addr(const ClusterPeer *p, char *buf, size_t cap);

/* Whether addr ("A.B.C.D:PORT", ClusterPeer.addr) is the address of
 * raft_addr (a Raft address as libraft holds it, maybe with
 * "/CLIENTPORT"). */
int cluster_addr_eq(const char *addr, const char *raft_addr);

/* Sorts c->voters by id (insertion sort: five at most). */
void cluster_sort(ClusterConfig *c);

/* Writes c as dir/CLUSTER, atomically (temp file, fsync, rename, fsync of
 * dir): the record of a committed configuration change (node.c). Returns 0
 * or -1 with a message in err. */
int cluster_identity_write(const char *dir, const ClusterConfig *c, char *err,
                           size_t errcap);

/* Results of cluster_identity_check. */
enum { CLUSTER_ID_MATCH = 0, CLUSTER_ID_WRITTEN = 1 };

/* Binds data directory dir to c (c->state: CLUSTER_JOINING with --join,
 * else CLUSTER_MEMBER): if dir/CLUSTER exists, checks that it names the
 * same node and the same members (ids and Raft addresses; client ports
 * may differ) and sets c->state to the recorded one (CLUSTER_ID_MATCH);
 * if it does not, writes it (CLUSTER_ID_WRITTEN), creating dir if
 * missing. The file follows the committed configuration
 * (cluster_identity_write), so after a membership change a node restarts
 * with the new member list. Refuses, touching nothing: a node recorded as
 * removed, a different node id or member set (the message gives both), an
 * unreadable or malformed file, a dir/raft log without a CLUSTER file,
 * and in a fresh directory a new cluster of other than 3 or 5 voters (or,
 * joining, a list without another member; seeding, c->state
 * CLUSTER_SEEDING, a list of more than this node). Returns CLUSTER_ID_MATCH or
 * CLUSTER_ID_WRITTEN, or -1 with a message in err. Takes no lock: the
 * caller holds the directory's lock (store/dir.h) or knows no other
 * process uses dir. */
int cluster_identity_check(const char *dir, ClusterConfig *c, char *err,
                           size_t errcap);

/* The same check for a node that restarts itself (node.h, stepping down:
 * the same arguments, whose --cluster may predate membership changes):
 * takes the members dir/CLUSTER records into *c (client ports from c's
 * for the ids it has), and its state. Refuses, as cluster_identity_check,
 * a node recorded as removed or another node id. Returns CLUSTER_ID_MATCH
 * or -1 with a message in err. */
int cluster_identity_adopt(const char *dir, ClusterConfig *c, char *err,
                           size_t errcap);

/* The client address of voter k (an index into c->voters): its IPv4
 * address with its /CLIENTPORT, or with port (this node's -p) when it has
 * none. Where a node that does not lead relays its clients. */
void cluster_client_addr(const ClusterConfig *c, int k, int port,
                         struct sockaddr_in *out);

/* Refuses a voter set in which another voter's client address
 * (cluster_client_addr with port) is this node's own listening socket
 * listen_fd (the same port, on the same address or on a wildcard one while
 * the voter's address is one of this host's): a client relayed there
 * would be relayed again, without end, until the descriptors run out. It
 * happens with voters on one host that share an address and have no
 * /CLIENTPORT. Returns 0 (also when listen_fd is a unix socket), or -1
 * with a message naming the voter in err. */
int cluster_check_relay(const ClusterConfig *c, int listen_fd, int port,
                        char *err, size_t errcap);

#endif
