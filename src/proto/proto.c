/* proto.c - see proto.h. */
#include "proto/proto.h"

#include <string.h>

#include "base/common.h"

/* A-Z a-z 0-9 - + / ; . $ _ ( ): by ranges and a switch, not a strchr
 * per byte (every use and watch checks a name). */
int
proto_name_char(char ch)
{
    unsigned char c = (unsigned char)ch;
    unsigned char lower = c | 0x20; /* A-Z onto a-z, and nothing else */
    if ((lower >= 'a' && lower <= 'z') || (c >= '0' && c <= '9')) return 1;
    switch (c) {
    case '-':
    case '+':
    case '/':
    case ';':
    case '.':
    case '$':
    case '_':
    case '(':
    case ')':
        return 1;
    default:
        return 0;
    }
}

int
proto_name_valid(const char *name, size_t len)
{
    if (len == 0 || len > TUBE_NAME_MAX || name[0] == '-') return 0;
    for (size_t i = 0; i < len; i++)
        if (!proto_name_char(name[i])) return 0;
    return 1;
}

typedef struct Verb {
    const char *word; /* matched as a prefix, trailing space included */
    size_t len;
    Op op;
} Verb;

#define V(w, o)                                                                \
    {                                                                          \
        w, sizeof(w) - 1, o                                                    \
    }

/* beanstalkd 1.12's match order: a line is the first verb it starts with.
 * Verbs of different first bytes never match the same line, so the table
 * is kept by first byte (each group in 1.12's order) and a line is only
 * tried against its own byte's group (verbs_for): about 90 instructions
 * per command fewer than trying the whole table in order. */
static const Verb verbs_b[] = {V("bury ", OP_BURY)};
static const Verb verbs_c[] = {V("clear-tube ", OP_CLEAR_TUBE)}; /* ext. */
static const Verb verbs_d[] = {V("delete ", OP_DELETE)};
static const Verb verbs_i[] = {V("ignore ", OP_IGNORE)};
static const Verb verbs_k[] = {V("kick ", OP_KICK),
                               V("kick-job ", OP_KICK_JOB)};
static const Verb verbs_l[] = {
    V("list-tubes-watched", OP_LIST_TUBES_WATCHED),
    V("list-tube-used", OP_LIST_TUBE_USED), V("list-tubes", OP_LIST_TUBES),
    V("list-jobs ", OP_LIST_JOBS), /* extension */
};
static const Verb verbs_p[] = {
    V("put ", OP_PUT),
    V("peek ", OP_PEEK),
    V("peek-ready", OP_PEEK_READY),
    V("peek-delayed", OP_PEEK_DELAYED),
    V("peek-buried", OP_PEEK_BURIED),
    V("pause-tube", OP_PAUSE_TUBE),
    V("put-unique ", OP_PUT_UNIQUE), /* extension */
};
static const Verb verbs_q[] = {V("quit", OP_QUIT)};
static const Verb verbs_r[] = {
    V("reserve-with-timeout ", OP_RESERVE_TIMEOUT),
    V("reserve-job ", OP_RESERVE_JOB),
    V("reserve-batch ", OP_RESERVE_BATCH), /* extension */
    V("reserve", OP_RESERVE),
    V("release ", OP_RELEASE),
    V("rockstalk-snapshot", OP_SNAPSHOT),                  /* cluster mode */
    V("rockstalk-backup", OP_BACKUP),                      /* standalone */
    V("rockstalk-cluster-status", OP_CLUSTER_STATUS),      /* cluster mode */
    V("rockstalk-cluster-transfer ", OP_CLUSTER_TRANSFER), /* cluster mode */
    V("rockstalk-cluster-add ", OP_CLUSTER_ADD),           /* cluster mode */
    V("rockstalk-cluster-remove ", OP_CLUSTER_REMOVE),     /* cluster mode */
};
static const Verb verbs_s[] = {
    V("stats-job ", OP_STATS_JOB),
    V("stats-tube ", OP_STATS_TUBE),
    V("stats", OP_STATS),
};
static const Verb verbs_t[] = {V("touch ", OP_TOUCH)};
static const Verb verbs_u[] = {V("use ", OP_USE)};
static const Verb verbs_w[] = {V("watch ", OP_WATCH)};

#define VERBS(a)                                                               \
    do {                                                                       \
        *n = sizeof(a) / sizeof(a)[0];                                         \
        return (a);                                                            \
    } while (0)

/* The verbs starting with byte c, in match order (*n of them). */
static const Verb *
verbs_for(char c, size_t *n)
{
    switch (c) {
    case 'b':
        VERBS(verbs_b);
    case 'c':
        VERBS(verbs_c);
    case 'd':
        VERBS(verbs_d);
    case 'i':
        VERBS(verbs_i);
    case 'k':
        VERBS(verbs_k);
    case 'l':
        VERBS(verbs_l);
    case 'p':
        VERBS(verbs_p);
    case 'q':
        VERBS(verbs_q);
    case 'r':
        VERBS(verbs_r);
    case 's':
        VERBS(verbs_s);
    case 't':
        VERBS(verbs_t);
    case 'u':
        VERBS(verbs_u);
    case 'w':
        VERBS(verbs_w);
    default:
        *n = 0;
        return NULL;
    }
}

static const char *const op_names[OP_COUNT] = {
    [OP_UNKNOWN] = "unknown",
    [OP_PUT] = "put",
    [OP_PEEK] = "peek",
    [OP_PEEK_READY] = "peek-ready",
    [OP_PEEK_DELAYED] = "peek-delayed",
    [OP_PEEK_BURIED] = "peek-buried",
    [OP_RESERVE] = "reserve",
    [OP_RESERVE_TIMEOUT] = "reserve-with-timeout",
    [OP_RESERVE_JOB] = "reserve-job",
    [OP_DELETE] = "delete",
    [OP_RELEASE] = "release",
    [OP_USE] = "use",
    [OP_WATCH] = "watch",
    [OP_IGNORE] = "ignore",
    [OP_BURY] = "bury",
    [OP_KICK] = "kick",
    [OP_KICK_JOB] = "kick-job",
    [OP_TOUCH] = "touch",
    [OP_STATS] = "stats",
    [OP_STATS_JOB] = "stats-job",
    [OP_STATS_TUBE] = "stats-tube",
    [OP_LIST_TUBES] = "list-tubes",
    [OP_LIST_TUBE_USED] = "list-tube-used",
    [OP_LIST_TUBES_WATCHED] = "list-tubes-watched",
    [OP_PAUSE_TUBE] = "pause-tube",
    [OP_QUIT] = "quit",
    [OP_RESERVE_BATCH] = "reserve-batch",
    [OP_LIST_JOBS] = "list-jobs",
    [OP_CLEAR_TUBE] = "clear-tube",
    [OP_PUT_UNIQUE] = "put-unique",
    [OP_SNAPSHOT] = "rockstalk-snapshot",
    [OP_BACKUP] = "rockstalk-backup",
    [OP_CLUSTER_STATUS] = "rockstalk-cluster-status",
    [OP_CLUSTER_TRANSFER] = "rockstalk-cluster-transfer",
    [OP_CLUSTER_ADD] = "rockstalk-cluster-add",
    [OP_CLUSTER_REMOVE] = "rockstalk-cluster-remove",
};

const char *
proto_op_name(Op op)
{
    return (op > OP_UNKNOWN && op < OP_COUNT) ? op_names[op] : "unknown";
}

/* A cursor over [p, end). */
typedef struct Cur {
    const char *p, *end;
} Cur;

/* Reads an unsigned decimal no larger than max: spaces may precede it, the
 * first non-space must be a digit, overflow fails. If whole, nothing may
 * follow it. Returns 0 or -1. (beanstalkd's read_u32/read_u64.) The first
 * 19 digits cannot overflow 64 bits (10^19 - 1 < 2^64) and are taken
 * without a check; only a longer number's further digits are checked. */
static int
read_uint(Cur *c, uint64_t max, int whole, uint64_t *out)
{
    const char *p = c->p, *end = c->end;
    while (p < end && *p == ' ')
        p++;
    const char *fast_end = end - p > 19 ? p + 19 : end;
    const char *d0 = p;
    uint64_t v = 0;
    for (; p < fast_end && (unsigned)(*p - '0') < 10; p++)
        v = v * 10 + (unsigned)(*p - '0');
    if (p == d0) return -1;
    for (; p < end && (unsigned)(*p - '0') < 10; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10) return -1;
        v = v * 10 + d;
    }
    if (v > max || (whole && p != end)) return -1;
    c->p = p;
    *out = v;
    return 0;
}

static int
read_u32(Cur *c, int whole, uint32_t *out)
{
    uint64_t v;
    if (read_uint(c, UINT32_MAX, whole, &v) < 0) return -1;
    *out = (uint32_t)v;
    return 0;
}

static int
read_u64(Cur *c, int whole, uint64_t *out)
{
    return read_uint(c, UINT64_MAX, whole, out);
}

/* strtol/strtoul-style number: optional whitespace and sign, digits; sets
 * *overflow on range error, *digits to whether any digit was read. The
 * value wraps like a C cast of strtoul's/strtol's result. */
static uint64_t
read_c_long(Cur c, int is_signed, int *digits, int *overflow)
{
    const char *p = c.p;
    while (p < c.end && (*p == ' ' || (*p >= '\t' && *p <= '\r')))
        p++;
    int neg = 0;
    if (p < c.end && (*p == '+' || *p == '-')) neg = (*p++ == '-');
    uint64_t v = 0, lim = is_signed ? (neg ? (uint64_t)INT64_MAX + 1
                                           : (uint64_t)INT64_MAX)
                                    : UINT64_MAX;
    *digits = *overflow = 0;
    for (; p < c.end && *p >= '0' && *p <= '9'; p++) {
        unsigned d = (unsigned)(*p - '0');
        *digits = 1;
        if (v > (lim - d) / 10)
            *overflow = 1;
        else
            v = v * 10 + d;
    }
    return neg ? (uint64_t)0 - v : v;
}

static ParseStatus
ok(Cmd *cmd)
{
    cmd->counted = 1;
    return PARSE_OK;
}

/* put <pri> <delay> <ttr> <bytes> */
static ParseStatus
parse_put(Cmd *cmd, Cur c)
{
    if (read_u32(&c, 0, &cmd->pri) < 0 || read_u32(&c, 0, &cmd->delay) < 0 ||
        read_u32(&c, 0, &cmd->ttr) < 0 || read_u32(&c, 0, &cmd->body_size) < 0)
        return PARSE_BAD_FORMAT;
    cmd->put_garbage = c.p != c.end;
    return ok(cmd);
}

/* reserve-with-timeout <seconds>: parsed like C strtol and truncated to a
 * 32-bit int, as 1.12 does: empty or junk is 0, -1 waits forever. */
static ParseStatus
parse_timeout(Cmd *cmd, Cur c)
{
    int digits, overflow;
    uint64_t v = read_c_long(c, 1, &digits, &overflow);
    if (overflow) return PARSE_BAD_FORMAT;
    cmd->timeout = (int32_t)(uint32_t)v;
    return ok(cmd);
}

/* kick <bound>: parsed like C strtoul, truncated to 32 bits (-1 is all). */
static ParseStatus
parse_kick(Cmd *cmd, Cur c)
{
    int digits, overflow;
    uint64_t v = read_c_long(c, 0, &digits, &overflow);
    if (!digits || overflow) return PARSE_BAD_FORMAT;
    cmd->count = (uint32_t)v;
    return ok(cmd);
}

/* A whole-rest tube name: use, watch, ignore, stats-tube. */
static ParseStatus
parse_name(Cmd *cmd, Cur c)
{
    size_t n = (size_t)(c.end - c.p);
    if (!proto_name_valid(c.p, n)) return PARSE_BAD_FORMAT;
    cmd->name = c.p;
    cmd->name_len = n;
    return ok(cmd);
}

/* pause-tube <name> <delay>: the name may follow the verb without a space
 * and is counted before its validity is checked, as in 1.12. */
static ParseStatus
parse_pause(Cmd *cmd, Cur c)
{
    while (c.p < c.end && *c.p == ' ')
        c.p++;
    const char *name = c.p;
    while (c.p < c.end && proto_name_char(*c.p))
        c.p++;
    size_t n = (size_t)(c.p - name);
    if (n == 0 || read_u32(&c, 1, &cmd->delay) < 0) return PARSE_BAD_FORMAT;
    cmd->counted = 1;
    if (!proto_name_valid(name, n)) return PARSE_BAD_FORMAT;
    cmd->name = name;
    cmd->name_len = n;
    return PARSE_OK;
}

static ParseStatus
parse_id(Cmd *cmd, Cur c)
{
    return read_u64(&c, 1, &cmd->id) < 0 ? PARSE_BAD_FORMAT : ok(cmd);
}

static ParseStatus
parse_release(Cmd *cmd, Cur c)
{
    if (read_u64(&c, 0, &cmd->id) < 0 || read_u32(&c, 0, &cmd->pri) < 0 ||
        read_u32(&c, 1, &cmd->delay) < 0)
        return PARSE_BAD_FORMAT;
    return ok(cmd);
}

static ParseStatus
parse_bury(Cmd *cmd, Cur c)
{
    if (read_u64(&c, 0, &cmd->id) < 0 || read_u32(&c, 1, &cmd->pri) < 0)
        return PARSE_BAD_FORMAT;
    return ok(cmd);
}

/* reserve-batch <count> <timeout>: count 1..1000; the timeout as in
 * reserve-with-timeout. */
static ParseStatus
parse_batch(Cmd *cmd, Cur c)
{
    if (read_u32(&c, 0, &cmd->count) < 0 || cmd->count < 1 ||
        cmd->count > PROTO_BATCH_MAX || c.p == c.end || *c.p != ' ')
        return PARSE_BAD_FORMAT;
    return parse_timeout(cmd, c);
}

/* A tube name ending at the next space (list-jobs). */
static int
read_name(Cur *c, Cmd *cmd)
{
    const char *name = c->p, *p = c->p;
    while (p < c->end && *p != ' ')
        p++;
    if (!proto_name_valid(name, (size_t)(p - name))) return -1;
    cmd->name = name;
    cmd->name_len = (size_t)(p - name);
    c->p = p;
    return 0;
}

/* list-jobs <tube> <state> <count> */
static ParseStatus
parse_list(Cmd *cmd, Cur c)
{
    static const char *const states[] = {"ready ", "delayed ", "buried ",
                                         "reserved "};
    if (read_name(&c, cmd) < 0 || c.p == c.end) return PARSE_BAD_FORMAT;
    c.p++;
    for (int i = 0; i < 4 && !cmd->state; i++) {
        size_t n = strlen(states[i]);
        if ((size_t)(c.end - c.p) >= n && memcmp(c.p, states[i], n) == 0) {
            cmd->state = LIST_READY + i;
            c.p += n;
        }
    }
    if (!cmd->state || read_u32(&c, 1, &cmd->count) < 0 || cmd->count < 1 ||
        cmd->count > PROTO_BATCH_MAX)
        return PARSE_BAD_FORMAT;
    return ok(cmd);
}

/* put-unique <key> <pri> <delay> <ttr> <bytes>: the key follows the rules
 * of a tube name (1..200 bytes, its characters, no leading '-'); the rest
 * as put. */
static ParseStatus
parse_put_unique(Cmd *cmd, Cur c)
{
    if (read_name(&c, cmd) < 0) return PARSE_BAD_FORMAT;
    return parse_put(cmd, c);
}

/* rockstalk-cluster-add <id> <HOST:PORT[/CLIENTPORT]>: the address is
 * the rest of the line, one space after the id, of host name characters,
 * ':' and '/' (cluster_parse_peer checks it further). */
static ParseStatus
parse_cluster_add(Cmd *cmd, Cur c)
{
    if (read_u64(&c, 0, &cmd->id) < 0 || c.p == c.end || *c.p != ' ')
        return PARSE_BAD_FORMAT;
    c.p++;
    size_t n = (size_t)(c.end - c.p);
    if (n == 0 || n > PROTO_ADDR_MAX) return PARSE_BAD_FORMAT;
    for (size_t i = 0; i < n; i++) {
        char ch = c.p[i];
        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') ||
              (ch >= 'A' && ch <= 'Z') || ch == '.' || ch == '-' || ch == ':' ||
              ch == '/'))
            return PARSE_BAD_FORMAT;
    }
    cmd->addr = c.p;
    cmd->addr_len = n;
    return ok(cmd);
}

/* bare: the line is exactly the verb. */
static ParseStatus
parse_args(Cmd *cmd, Cur c, int bare)
{
    switch (cmd->op) {
    case OP_PUT:
        return parse_put(cmd, c);
    case OP_PUT_UNIQUE:
        return parse_put_unique(cmd, c);
    case OP_RESERVE_TIMEOUT:
        return parse_timeout(cmd, c);
    case OP_KICK:
        return parse_kick(cmd, c);
    case OP_USE:
    case OP_WATCH:
    case OP_IGNORE:
    case OP_STATS_TUBE:
    case OP_CLEAR_TUBE:
        return parse_name(cmd, c);
    case OP_RESERVE_BATCH:
        return parse_batch(cmd, c);
    case OP_LIST_JOBS:
        return parse_list(cmd, c);
    case OP_PAUSE_TUBE:
        return parse_pause(cmd, c);
    case OP_RELEASE:
        return parse_release(cmd, c);
    case OP_BURY:
        return parse_bury(cmd, c);
    case OP_PEEK:
    case OP_RESERVE_JOB:
    case OP_DELETE:
    case OP_KICK_JOB:
    case OP_TOUCH:
    case OP_STATS_JOB:
    case OP_CLUSTER_TRANSFER:
    case OP_CLUSTER_REMOVE:
        return parse_id(cmd, c);
    case OP_CLUSTER_ADD:
        return parse_cluster_add(cmd, c);
    case OP_QUIT:
        return ok(cmd);
    default: /* peeks of a state, reserve, stats, list-*: nothing after */
        return bare ? ok(cmd) : PARSE_BAD_FORMAT;
    }
}

ParseStatus
proto_parse(const char *line, size_t len, Cmd *cmd)
{
    memset(cmd, 0, sizeof *cmd);
    if (memchr(line, '\0', len))
        return PARSE_BAD_FORMAT; /* beanstalkd: "possible maliciousness" */
    size_t n = 0;
    const Verb *vs = len ? verbs_for(line[0], &n) : NULL;
    for (size_t i = 0; i < n; i++) {
        const Verb *v = &vs[i];
        if (len >= v->len && memcmp(line, v->word, v->len) == 0) {
            Cur c = {line + v->len, line + len};
            cmd->op = v->op;
            return parse_args(cmd, c, len == v->len);
        }
    }
    return PARSE_UNKNOWN_COMMAND;
}
