/* fuzz_proto.c - libFuzzer target for proto_parse (src/proto/proto.c).
 *
 * Feeds every input, as one command line without its CRLF, to proto_parse
 * from an exactly-sized heap copy (AddressSanitizer then catches any read
 * past the line) and checks the parser's contract:
 *   - the status is one of the three ParseStatus values;
 *   - UNKNOWN_COMMAND implies op == OP_UNKNOWN, and then nothing is set;
 *     op == OP_UNKNOWN otherwise only for a line refused for a NUL byte;
 *   - counted implies op != OP_UNKNOWN; PARSE_OK implies counted;
 *   - a line holding a NUL byte is BAD_FORMAT;
 *   - a name points inside the line, is a valid tube name (1..200 bytes),
 *     and is set exactly for the ops that take one when the parse is OK;
 *   - put_garbage only for put, only for a line longer than its numbers;
 *   - an OK command, written back in canonical form, parses to the same
 *     command (same op and the same numbers and name).
 * Build and run: `make fuzz` (see the Makefile's fuzzing block). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "proto/proto.h"

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz_proto: check failed at line %d: %s\n",       \
                    __LINE__, #cond);                                          \
            abort();                                                           \
        }                                                                      \
    } while (0)

static int
takes_name(Op op)
{
    return op == OP_USE || op == OP_WATCH || op == OP_IGNORE ||
           op == OP_STATS_TUBE || op == OP_PAUSE_TUBE || op == OP_LIST_JOBS ||
           op == OP_CLEAR_TUBE || op == OP_PUT_UNIQUE;
}

static const char *const list_states[] = {"", "ready", "delayed", "buried",
                                          "reserved"};

/* Writes cmd back as the canonical line for its op; returns its length. */
static size_t
canonical(const Cmd *c, char *buf, size_t cap)
{
    const char *verb = proto_op_name(c->op);
    int n;
    unsigned long long id = (unsigned long long)c->id;
    int nl = (int)c->name_len;
    switch (c->op) {
    case OP_PUT:
        n = snprintf(buf, cap, "put %u %u %u %u", c->pri, c->delay, c->ttr,
                     c->body_size);
        break;
    case OP_PUT_UNIQUE:
        n = snprintf(buf, cap, "put-unique %.*s %u %u %u %u", nl, c->name,
                     c->pri, c->delay, c->ttr, c->body_size);
        break;
    case OP_RESERVE_TIMEOUT:
        n = snprintf(buf, cap, "reserve-with-timeout %d", (int)c->timeout);
        break;
    case OP_KICK:
        n = snprintf(buf, cap, "kick %u", c->count);
        break;
    case OP_USE:
    case OP_WATCH:
    case OP_IGNORE:
    case OP_STATS_TUBE:
    case OP_CLEAR_TUBE:
        n = snprintf(buf, cap, "%s %.*s", verb, nl, c->name);
        break;
    case OP_RESERVE_BATCH:
        n = snprintf(buf, cap, "reserve-batch %u %d", c->count, c->timeout);
        break;
    case OP_LIST_JOBS:
        n = snprintf(buf, cap, "list-jobs %.*s %s %u", nl, c->name,
                     list_states[c->state], c->count);
        break;
    case OP_PAUSE_TUBE:
        n = snprintf(buf, cap, "pause-tube %.*s %u", nl, c->name, c->delay);
        break;
    case OP_RELEASE:
        n = snprintf(buf, cap, "release %llu %u %u", id, c->pri, c->delay);
        break;
    case OP_BURY:
        n = snprintf(buf, cap, "bury %llu %u", id, c->pri);
        break;
    case OP_PEEK:
    case OP_RESERVE_JOB:
    case OP_DELETE:
    case OP_KICK_JOB:
    case OP_TOUCH:
    case OP_STATS_JOB:
    case OP_CLUSTER_TRANSFER:
    case OP_CLUSTER_REMOVE:
        n = snprintf(buf, cap, "%s %llu", verb, id);
        break;
    case OP_CLUSTER_ADD:
        n = snprintf(buf, cap, "%s %llu %.*s", verb, id, (int)c->addr_len,
                     c->addr);
        break;
    default:
        n = snprintf(buf, cap, "%s", verb);
        break;
    }
    CHECK(n > 0 && (size_t)n < cap);
    return (size_t)n;
}

static void
check_cmd(const char *line, size_t len, ParseStatus st, const Cmd *c)
{
    CHECK(st == PARSE_OK || st == PARSE_BAD_FORMAT ||
          st == PARSE_UNKNOWN_COMMAND);
    CHECK(c->op >= OP_UNKNOWN && c->op < OP_COUNT);
    if (st == PARSE_UNKNOWN_COMMAND) CHECK(c->op == OP_UNKNOWN);
    /* no verb: unknown, or refused before the verb for a NUL byte */
    if (c->op == OP_UNKNOWN)
        CHECK(st == PARSE_UNKNOWN_COMMAND ||
              (st == PARSE_BAD_FORMAT && memchr(line, '\0', len)));
    if (c->counted) CHECK(c->op != OP_UNKNOWN);
    if (st == PARSE_OK) CHECK(c->counted);
    if (st == PARSE_UNKNOWN_COMMAND)
        CHECK(!c->counted && !c->name && !c->name_len && !c->put_garbage);
    if (len && memchr(line, '\0', len)) CHECK(st == PARSE_BAD_FORMAT);
    if (c->name) {
        CHECK(takes_name(c->op));
        CHECK(c->name >= line && c->name_len <= len &&
              c->name + c->name_len <= line + len);
        CHECK(c->name_len >= 1 && c->name_len <= TUBE_NAME_MAX);
        CHECK(proto_name_valid(c->name, c->name_len));
    } else {
        CHECK(c->name_len == 0);
    }
    if (st == PARSE_OK) CHECK(takes_name(c->op) == (c->name != NULL));
    if (c->addr) {
        CHECK(c->op == OP_CLUSTER_ADD && st == PARSE_OK);
        CHECK(c->addr > line && c->addr + c->addr_len == line + len);
        CHECK(c->addr_len >= 1 && c->addr_len <= PROTO_ADDR_MAX);
    } else {
        CHECK(c->addr_len == 0);
    }
    if (st == PARSE_OK && c->op == OP_CLUSTER_ADD) CHECK(c->addr != NULL);
    int put = c->op == OP_PUT || c->op == OP_PUT_UNIQUE;
    if (c->put_garbage) CHECK(put && st == PARSE_OK);
    if (!put) CHECK(!c->body_size && !c->ttr);
    if (c->op != OP_RESERVE_TIMEOUT && c->op != OP_RESERVE_BATCH)
        CHECK(c->timeout == 0);
    if (c->op != OP_KICK && c->op != OP_RESERVE_BATCH && c->op != OP_LIST_JOBS)
        CHECK(c->count == 0);
    if (st == PARSE_OK && (c->op == OP_RESERVE_BATCH || c->op == OP_LIST_JOBS))
        CHECK(c->count >= 1 && c->count <= PROTO_BATCH_MAX);
    if (c->op != OP_LIST_JOBS) CHECK(c->state == 0);
    if (st == PARSE_OK && c->op == OP_LIST_JOBS)
        CHECK(c->state >= LIST_READY && c->state <= LIST_RESERVED);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* exactly-sized copy: a read past the line is a heap overflow */
    char *line = malloc(size ? size : 1);
    if (!line) return 0;
    if (size) memcpy(line, data, size);
    Cmd c;
    ParseStatus st = proto_parse(line, size, &c);
    check_cmd(line, size, st, &c);

    if (st == PARSE_OK) {
        char buf[512];
        size_t n = canonical(&c, buf, sizeof buf);
        char *again = malloc(n);
        if (!again) abort();
        memcpy(again, buf, n);
        Cmd d;
        ParseStatus st2 = proto_parse(again, n, &d);
        check_cmd(again, n, st2, &d);
        CHECK(st2 == PARSE_OK);
        CHECK(d.op == c.op && d.counted == c.counted && !d.put_garbage);
        CHECK(d.pri == c.pri && d.delay == c.delay && d.ttr == c.ttr);
        CHECK(d.body_size == c.body_size && d.id == c.id);
        CHECK(d.timeout == c.timeout && d.count == c.count);
        CHECK(d.state == c.state);
        CHECK(d.name_len == c.name_len);
        if (c.name) CHECK(memcmp(d.name, c.name, c.name_len) == 0);
        free(again);
    }
    free(line);
    return 0;
}
