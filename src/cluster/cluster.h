/* cluster.h - cluster identity (issue 15): the --cluster and --node-id flags
 * parsed into a ClusterConfig, and the CLUSTER file that binds a data
 * directory to one node of one cluster:
 *
 *   <dir>/CLUSTER   "rockstalk-cluster 1\nnode N\nvoter ID HOST:PORT\n..."
 *                   (voters sorted by id), written once, atomically (temp
 *                   file, fsync, rename, fsync of dir), on the first start
 *                   in cluster mode; checked on every later one.
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

/* Voters in a cluster: 3 or 5 (a majority survives one or two losses; an
 * even count adds no tolerance). */
#define CLUSTER_MAX_VOTERS 5
/* Node ids are 1..CLUSTER_MAX_ID, so a later on-disk or wire format can
 * carry one in 16 bits. */
#define CLUSTER_MAX_ID 65535
/* "255.255.255.255:65535" and its NUL. */
#define CLUSTER_ADDR_MAX 22
/* The identity file and the Raft log's subdirectory, in the data dir. */
#define CLUSTER_FILE "CLUSTER"
#define CLUSTER_RAFT_SUBDIR "raft"
/* Room for cluster_format's text (a header, a node line, five voters). */
#define CLUSTER_TEXT_MAX 256

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

/* This node and the static voter set, voters sorted by id. */
typedef struct ClusterConfig {
    uint64_t self_id; /* one of voters[].id */
    int n;            /* 3 or 5 */
    ClusterPeer voters[CLUSTER_MAX_VOTERS];
} ClusterConfig;

/* Formats a message into err (errcap bytes, NUL-terminated; nothing if err
 * is NULL or errcap is 0) and returns -1: the 0 / -1 error convention of
 * this module and of raftnode. */
int cluster_errf(char *err, size_t errcap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Parses --cluster ("ID@HOST:PORT,ID@HOST:PORT,...", each item optionally
 * followed by "/CLIENTPORT") and --node-id (a decimal id) into *c. Refuses: a
 * voter count other than 3 or 5, an id out of 1..CLUSTER_MAX_ID or given twice,
 * an address whose HOST is neither an IPv4 literal nor a name that resolves
 * to an IPv4 address (getaddrinfo, now: a name is kept as the address it
 * resolved to), whose port is not in 1..65535, or that is given
 * twice, a node id that is not among the voters, and any stray character.
 * Returns 0, or -1 with a message naming the offending part in err; *c is
 * undefined then. */
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

/* Results of cluster_identity_check. */
enum { CLUSTER_ID_MATCH = 0, CLUSTER_ID_WRITTEN = 1 };

/* Binds data directory dir to c: if dir/CLUSTER exists, checks that it
 * names the same node and the same voters (CLUSTER_ID_MATCH); if it does
 * not, writes it (CLUSTER_ID_WRITTEN), creating dir if missing. Refuses,
 * touching nothing: a different node id or voter set (the message gives
 * both), an unreadable or malformed file, and a dir/raft log without a
 * CLUSTER file. Returns CLUSTER_ID_MATCH or CLUSTER_ID_WRITTEN, or -1 with
 * a message in err. Takes no lock: the caller holds the directory's lock
 * (store/dir.h) or knows no other process uses dir. */
int cluster_identity_check(const char *dir, const ClusterConfig *c, char *err,
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
