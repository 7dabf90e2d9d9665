/* Unit tests for the command parser: beanstalkd 1.12's matching and number
 * rules, one line at a time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "proto/proto.h"

static ParseStatus
parse(const char *line, Cmd *c)
{
    return proto_parse(line, strlen(line), c);
}

static void
test_put(void **state)
{
    (void)state;
    Cmd c;
    assert_int_equal(parse("put 1 2 3 4", &c), PARSE_OK);
    assert_int_equal(c.op, OP_PUT);
    assert_int_equal(c.pri, 1);
    assert_int_equal(c.delay, 2);
    assert_int_equal(c.ttr, 3);
    assert_int_equal(c.body_size, 4);
    assert_false(c.put_garbage);
    assert_int_equal(parse("put 4294967295 0 0 0", &c), PARSE_OK);
    assert_int_equal(c.pri, 4294967295u);
    assert_int_equal(parse("put 4294967296 0 0 0", &c), PARSE_BAD_FORMAT);
    assert_false(c.counted);
    assert_int_equal(parse("put  1   2 3 4", &c), PARSE_OK); /* spaces */
    assert_int_equal(parse("put 1 2 3 4x", &c), PARSE_OK);
    assert_true(c.put_garbage); /* BAD_FORMAT after the JOB_TOO_BIG check */
    assert_true(c.counted);
    assert_int_equal(parse("put -1 2 3 4", &c), PARSE_BAD_FORMAT);
    assert_int_equal(parse("put 1 2 3", &c), PARSE_BAD_FORMAT);
    assert_int_equal(parse("put", &c), PARSE_UNKNOWN_COMMAND);
}

static void
test_matching(void **state)
{
    (void)state;
    Cmd c;
    assert_int_equal(parse("delete", &c), PARSE_UNKNOWN_COMMAND);
    assert_int_equal(parse("use", &c), PARSE_UNKNOWN_COMMAND);
    assert_int_equal(parse("STATS", &c), PARSE_UNKNOWN_COMMAND);
    assert_int_equal(parse("", &c), PARSE_UNKNOWN_COMMAND);
    assert_int_equal(parse("stats ", &c), PARSE_BAD_FORMAT);
    assert_int_equal(parse("stats-job", &c), PARSE_BAD_FORMAT);
    assert_int_equal(parse("reservex", &c), PARSE_BAD_FORMAT);
    assert_int_equal(parse("reserve-job", &c), PARSE_BAD_FORMAT);
    assert_int_equal(parse("reserve", &c), PARSE_OK);
    assert_int_equal(c.op, OP_RESERVE);
    assert_int_equal(parse("quitter", &c), PARSE_OK);
    assert_int_equal(c.op, OP_QUIT);
    assert_int_equal(parse("list-tubes-watched", &c), PARSE_OK);
    assert_int_equal(c.op, OP_LIST_TUBES_WATCHED);
    assert_int_equal(parse("list-tube-used", &c), PARSE_OK);
    assert_int_equal(c.op, OP_LIST_TUBE_USED);
    assert_int_equal(parse("kick-job 5", &c), PARSE_OK);
    assert_int_equal(c.op, OP_KICK_JOB);
    assert_int_equal(proto_parse("stats\0x", 7, &c), PARSE_BAD_FORMAT);
}

static void
test_ids(void **state)
{
    (void)state;
    Cmd c;
    assert_int_equal(parse("delete 18446744073709551615", &c), PARSE_OK);
    assert_true(c.id == UINT64_MAX);
    assert_int_equal(parse("delete 18446744073709551616", &c),
                     PARSE_BAD_FORMAT);
    assert_int_equal(parse("peek -1", &c), PARSE_BAD_FORMAT);
    assert_int_equal(parse("delete 5 ", &c), PARSE_BAD_FORMAT);
    assert_int_equal(parse("delete  5", &c), PARSE_OK);
    assert_int_equal(parse("release 1 2 3", &c), PARSE_OK);
    assert_int_equal(c.pri, 2);
    assert_int_equal(c.delay, 3);
    assert_int_equal(parse("bury 1", &c), PARSE_BAD_FORMAT);
}

static void
test_loose_numbers(void **state)
{
    (void)state;
    Cmd c;
    assert_int_equal(parse("reserve-with-timeout -1", &c), PARSE_OK);
    assert_int_equal(c.timeout, -1);
    assert_int_equal(parse("reserve-with-timeout ", &c), PARSE_OK);
    assert_int_equal(c.timeout, 0);
    assert_int_equal(parse("reserve-with-timeout +3abc", &c), PARSE_OK);
    assert_int_equal(c.timeout, 3);
    assert_int_equal(parse("reserve-with-timeout 4294967296", &c), PARSE_OK);
    assert_int_equal(c.timeout, 0);
    assert_int_equal(parse("reserve-with-timeout 99999999999999999999", &c),
                     PARSE_BAD_FORMAT);
    assert_int_equal(parse("kick -1", &c), PARSE_OK);
    assert_int_equal(c.count, UINT32_MAX);
    assert_int_equal(parse("kick 1abc", &c), PARSE_OK);
    assert_int_equal(c.count, 1);
    assert_int_equal(parse("kick 4294967296", &c), PARSE_OK);
    assert_int_equal(c.count, 0);
    assert_int_equal(parse("kick x", &c), PARSE_BAD_FORMAT);
}

static void
test_names(void **state)
{
    (void)state;
    Cmd c;
    char line[256] = "use ";
    memset(line + 4, 'n', 200);
    line[204] = 0;
    assert_int_equal(parse(line, &c), PARSE_OK);
    assert_int_equal(c.name_len, 200);
    line[204] = 'n';
    line[205] = 0;
    assert_int_equal(parse(line, &c), PARSE_BAD_FORMAT);
    assert_int_equal(parse("use  foo", &c), PARSE_BAD_FORMAT);
    assert_int_equal(parse("use -foo", &c), PARSE_BAD_FORMAT);
    assert_int_equal(parse("watch a_b", &c), PARSE_OK);
    assert_int_equal(parse("pause-tube foo 10", &c), PARSE_OK);
    assert_int_equal(c.delay, 10);
    assert_int_equal(c.name_len, 3);
    assert_int_equal(parse("pause-tubedefault 1", &c), PARSE_OK);
    assert_memory_equal(c.name, "default", 7);
    assert_int_equal(parse("pause-tube -x 1", &c), PARSE_BAD_FORMAT);
    assert_true(c.counted); /* 1.12 counts it before checking the name */
    assert_int_equal(parse("pause-tube x", &c), PARSE_BAD_FORMAT);
    assert_false(c.counted);
}

/* proto_name_char (ranges and a switch) accepts exactly protocol.txt's
 * name characters, checked against that list for every byte value. */
static void
test_name_chars(void **state)
{
    (void)state;
    static const char allowed[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
        "abcdefghijklmnopqrstuvwxyz0123456789-+/;.$_()";
    int n = 0;
    for (int b = 0; b < 256; b++) {
        char ch = (char)b;
        int want = ch != '\0' && strchr(allowed, ch) != NULL;
        assert_int_equal(proto_name_char(ch) != 0, want);
        n += want;
    }
    assert_int_equal(n, 71);
    Cmd c;
    assert_int_equal(parse("use a@b", &c), PARSE_BAD_FORMAT);
    assert_int_equal(parse("use a[b", &c), PARSE_BAD_FORMAT);
    assert_int_equal(parse("use a`b", &c), PARSE_BAD_FORMAT);
    assert_int_equal(parse("use a{b", &c), PARSE_BAD_FORMAT);
    assert_int_equal(parse("use A-Z_a.z+0;9$(/)", &c), PARSE_OK);
}

/* The cluster's operator commands (PROTOCOL.md 15.8). */
static void
test_cluster_ops(void **state)
{
    (void)state;
    Cmd c;
    assert_int_equal(parse("rockstalk-cluster-status", &c), PARSE_OK);
    assert_int_equal(c.op, OP_CLUSTER_STATUS);
    assert_true(c.counted);
    assert_int_equal(parse("rockstalk-cluster-status 1", &c), PARSE_BAD_FORMAT);
    assert_int_equal(parse("rockstalk-cluster-transfer 3", &c), PARSE_OK);
    assert_int_equal(c.op, OP_CLUSTER_TRANSFER);
    assert_int_equal(c.id, 3);
    assert_int_equal(parse("rockstalk-cluster-transfer 0", &c), PARSE_OK);
    assert_int_equal(c.id, 0);
    assert_int_equal(parse("rockstalk-cluster-transfer x", &c),
                     PARSE_BAD_FORMAT);
    assert_int_equal(parse("rockstalk-cluster-transfer 3 4", &c),
                     PARSE_BAD_FORMAT);
    assert_int_equal(
        parse("rockstalk-cluster-transfer 18446744073709551616", &c),
        PARSE_BAD_FORMAT);
    assert_int_equal(parse("rockstalk-cluster-transfer", &c),
                     PARSE_UNKNOWN_COMMAND);
    assert_string_equal(proto_op_name(OP_CLUSTER_TRANSFER),
                        "rockstalk-cluster-transfer");
}

/* Membership changes (PROTOCOL.md 15.9, 15.10). */
static void
test_cluster_membership(void **state)
{
    (void)state;
    Cmd c;
    assert_int_equal(parse("rockstalk-cluster-add 4 127.0.0.1:7004/11304", &c),
                     PARSE_OK);
    assert_int_equal(c.op, OP_CLUSTER_ADD);
    assert_int_equal(c.id, 4);
    assert_int_equal(c.addr_len, 20);
    assert_memory_equal(c.addr, "127.0.0.1:7004/11304", 20);
    assert_null(c.name);
    assert_int_equal(parse("rockstalk-cluster-add 4 node-4.example:7004", &c),
                     PARSE_OK);
    assert_int_equal(parse("rockstalk-cluster-add 4", &c), PARSE_BAD_FORMAT);
    assert_int_equal(parse("rockstalk-cluster-add 4 ", &c), PARSE_BAD_FORMAT);
    assert_int_equal(parse("rockstalk-cluster-add 4  127.0.0.1:7004", &c),
                     PARSE_BAD_FORMAT);
    assert_int_equal(parse("rockstalk-cluster-add 4 127.0.0.1:7004 x", &c),
                     PARSE_BAD_FORMAT);
    assert_int_equal(parse("rockstalk-cluster-add x 127.0.0.1:7004", &c),
                     PARSE_BAD_FORMAT);
    assert_int_equal(parse("rockstalk-cluster-remove 2", &c), PARSE_OK);
    assert_int_equal(c.op, OP_CLUSTER_REMOVE);
    assert_int_equal(c.id, 2);
    assert_int_equal(parse("rockstalk-cluster-remove 2 3", &c),
                     PARSE_BAD_FORMAT);
    assert_int_equal(parse("rockstalk-cluster-remove", &c),
                     PARSE_UNKNOWN_COMMAND);
    assert_string_equal(proto_op_name(OP_CLUSTER_ADD), "rockstalk-cluster-add");
    assert_string_equal(proto_op_name(OP_CLUSTER_REMOVE),
                        "rockstalk-cluster-remove");
}

/* Every verb is found by its own name (the parser tries a line only
 * against the verbs of its first byte, proto.c verbs_for), with arguments
 * it accepts; and a verb's first byte alone matches nothing. */
static void
test_every_verb(void **state)
{
    (void)state;
    static const struct {
        Op op;
        const char *args;
    } ok[] = {
        {OP_PUT, " 1 2 3 4"},
        {OP_PEEK, " 1"},
        {OP_PEEK_READY, ""},
        {OP_PEEK_DELAYED, ""},
        {OP_PEEK_BURIED, ""},
        {OP_RESERVE, ""},
        {OP_RESERVE_TIMEOUT, " 5"},
        {OP_RESERVE_JOB, " 1"},
        {OP_DELETE, " 1"},
        {OP_RELEASE, " 1 2 3"},
        {OP_USE, " t"},
        {OP_WATCH, " t"},
        {OP_IGNORE, " t"},
        {OP_BURY, " 1 2"},
        {OP_KICK, " 1"},
        {OP_KICK_JOB, " 1"},
        {OP_TOUCH, " 1"},
        {OP_STATS, ""},
        {OP_STATS_JOB, " 1"},
        {OP_STATS_TUBE, " t"},
        {OP_LIST_TUBES, ""},
        {OP_LIST_TUBE_USED, ""},
        {OP_LIST_TUBES_WATCHED, ""},
        {OP_PAUSE_TUBE, " t 1"},
        {OP_QUIT, ""},
        {OP_RESERVE_BATCH, " 2 0"},
        {OP_LIST_JOBS, " t ready 1"},
        {OP_CLEAR_TUBE, " t"},
        {OP_PUT_UNIQUE, " k 1 2 3 4"},
        {OP_SNAPSHOT, ""},
        {OP_BACKUP, ""},
        {OP_CLUSTER_STATUS, ""},
        {OP_CLUSTER_TRANSFER, " 2"},
        {OP_CLUSTER_ADD, " 4 127.0.0.1:7004"},
        {OP_CLUSTER_REMOVE, " 2"},
    };
    char line[128], first[2] = {0};
    Cmd c;
    assert_int_equal(sizeof ok / sizeof ok[0], OP_COUNT - 1);
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        snprintf(line, sizeof line, "%s%s", proto_op_name(ok[i].op),
                 ok[i].args);
        assert_int_equal(parse(line, &c), PARSE_OK);
        assert_int_equal(c.op, ok[i].op);
        first[0] = line[0];
        assert_int_equal(parse(first, &c), PARSE_UNKNOWN_COMMAND);
    }
    assert_int_equal(parse("x", &c), PARSE_UNKNOWN_COMMAND);
    assert_int_equal(parse("\xff", &c), PARSE_UNKNOWN_COMMAND);
}

/* Numbers of 19 digits and more: the parser takes 19 digits unchecked
 * (they cannot overflow) and checks each further one. */
static void
test_long_numbers(void **state)
{
    (void)state;
    Cmd c;
    assert_int_equal(parse("delete 9999999999999999999", &c), PARSE_OK);
    assert_true(c.id == 9999999999999999999u);
    assert_int_equal(parse("delete 0000000000000000000000000042", &c),
                     PARSE_OK);
    assert_true(c.id == 42);
    assert_int_equal(parse("delete 99999999999999999999", &c),
                     PARSE_BAD_FORMAT);
    assert_int_equal(parse("delete 18446744073709551619", &c),
                     PARSE_BAD_FORMAT);
    assert_int_equal(parse("delete 184467440737095516150", &c),
                     PARSE_BAD_FORMAT);
    assert_int_equal(parse("put 0000000000000000000004294967295 0 0 0", &c),
                     PARSE_OK);
    assert_int_equal(c.pri, 4294967295u);
    assert_int_equal(parse("put 00000000000000000004294967296 0 0 0", &c),
                     PARSE_BAD_FORMAT);
    assert_int_equal(parse("delete 1234567890123456789x", &c),
                     PARSE_BAD_FORMAT);
    assert_int_equal(parse("delete 12345678901234567890", &c), PARSE_OK);
    assert_true(c.id == 12345678901234567890u);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put),
        cmocka_unit_test(test_matching),
        cmocka_unit_test(test_ids),
        cmocka_unit_test(test_loose_numbers),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_name_chars),
        cmocka_unit_test(test_cluster_ops),
        cmocka_unit_test(test_cluster_membership),
        cmocka_unit_test(test_every_verb),
        cmocka_unit_test(test_long_numbers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
