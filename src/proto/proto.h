/* proto.h - the beanstalkd 1.12 command-line parser: one CRLF-terminated
 * line in, one parsed command (or the error reply it earns) out. Pure: no
 * state, no allocation, so it is unit-tested and fuzzed on its own. The
 * rules (verbs matched by prefix including their trailing space, number
 * syntax, name rules, which errors still count in stats) follow beanstalkd
 * 1.12 byte for byte; see protocol/PROTOCOL.md. */
#ifndef ROCKSTALK_PROTO_H
#define ROCKSTALK_PROTO_H

#include <stddef.h>
#include <stdint.h>

/* Commands, in stats order where they have a cmd-* counter. */
typedef enum Op {
    OP_UNKNOWN = 0,
    OP_PUT,
    OP_PEEK,
    OP_PEEK_READY,
    OP_PEEK_DELAYED,
    OP_PEEK_BURIED,
    OP_RESERVE,
    OP_RESERVE_TIMEOUT,
    OP_RESERVE_JOB,
    OP_DELETE,
    OP_RELEASE,
    OP_USE,
    OP_WATCH,
    OP_IGNORE,
    OP_BURY,
    OP_KICK,
    OP_KICK_JOB,
    OP_TOUCH,
    OP_STATS,
    OP_STATS_JOB,
    OP_STATS_TUBE,
    OP_LIST_TUBES,
    OP_LIST_TUBE_USED,
    OP_LIST_TUBES_WATCHED,
    OP_PAUSE_TUBE,
    OP_QUIT,
    /* rockstalk extensions (protocol/PROTOCOL.md, "Extensions") */
    OP_RESERVE_BATCH,
    OP_LIST_JOBS,
    OP_CLEAR_TUBE,
    OP_PUT_UNIQUE,
    OP_SNAPSHOT,         /* rockstalk-snapshot: cluster mode, node.h */
    OP_BACKUP,           /* rockstalk-backup: server/backup.h */
    OP_CLUSTER_STATUS,   /* rockstalk-cluster-status: cluster/nodeops.h */
    OP_CLUSTER_TRANSFER, /* rockstalk-cluster-transfer <id>: nodeops.h */
    OP_CLUSTER_ADD,      /* rockstalk-cluster-add <id> <addr>: nodeops.h */
    OP_CLUSTER_REMOVE,   /* rockstalk-cluster-remove <id>: nodeops.h */
    OP_COUNT
} Op;

/* Longest address rockstalk-cluster-add takes: a host name of up to 253
 * bytes, ":PORT" and "/CLIENTPORT". */
#define PROTO_ADDR_MAX 265

/* Largest count of reserve-batch and list-jobs. */
#define PROTO_BATCH_MAX 1000

/* list-jobs states (Cmd.state). */
enum { LIST_READY = 1, LIST_DELAYED, LIST_BURIED, LIST_RESERVED };

/* Parse outcome: the command is valid, or the error reply it gets. */
typedef enum ParseStatus {
    PARSE_OK = 0,
    PARSE_BAD_FORMAT,      /* reply BAD_FORMAT */
    PARSE_UNKNOWN_COMMAND, /* reply UNKNOWN_COMMAND */
} ParseStatus;

typedef struct Cmd {
    Op op;
    int counted;        /* nonzero: the command's cmd-* counter increments
                           (all valid commands, and a few BAD_FORMAT ones,
                           exactly as beanstalkd 1.12 counts them) */
    int put_garbage;    /* put: trailing bytes after the size (BAD_FORMAT,
                           but only after the JOB_TOO_BIG check) */
    uint32_t pri;       /* put, release, bury */
    uint32_t delay;     /* seconds: put, release, pause-tube */
    uint32_t ttr;       /* seconds as sent: put (0 is raised to 1 later) */
    uint32_t body_size; /* put: bytes, without CRLF */
    uint64_t id;        /* peek, reserve-job, delete, release, bury,
                           kick-job, touch, stats-job; the node id of
                           rockstalk-cluster-transfer, -add, -remove */
    int32_t timeout;    /* reserve-with-timeout: seconds; < 0 waits forever */
    uint32_t count;     /* kick; reserve-batch, list-jobs: 1..1000 */
    int state;          /* list-jobs: LIST_* */
    const char *name;   /* use, watch, ignore, stats-tube, pause-tube,
                           list-jobs, clear-tube; put-unique's key: points
                           into the line */
    size_t name_len;
    const char *addr; /* rockstalk-cluster-add's HOST:PORT[/CLIENTPORT]:
                         points into the line (1..PROTO_ADDR_MAX bytes) */
    size_t addr_len;
} Cmd;

/* Parses line (len bytes, CRLF excluded; need not be NUL-terminated).
 * Fills *cmd and returns the status. Never reads outside line[0..len). */
ParseStatus proto_parse(const char *line, size_t len, Cmd *cmd);

/* The verb as it appears in the protocol, for logs ("put", ...). */
const char *proto_op_name(Op op);

/* Nonzero if ch may appear in a name (protocol.txt, "Name format"). */
int proto_name_char(char ch);

/* Nonzero if name (len bytes) is a valid tube name (protocol.txt, "Name
 * format"): 1..TUBE_NAME_MAX (200) bytes from A-Z a-z 0-9 - + / ; . $ _ ( )
 * and not starting with '-'. The parser checks every name it takes, so the
 * queue never sees an invalid one. */
int proto_name_valid(const char *name, size_t len);

#endif
