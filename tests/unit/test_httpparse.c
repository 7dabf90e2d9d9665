/* Unit tests for http/httpparse.c: a login body's token (form with strict
 * percent-decoding, JSON), the bearer token, the session id form, the
 * Origin check, decimals and their bounds, state lists, and the tubes/
 * and jobs/ paths. The regressions found by tests/fuzz/fuzz_http.c's
 * checks are marked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http/httpparse.h"

/* httpparse_login on an exactly-sized copy of body (its strlen). */
static int
login(const char *body, char *out, size_t cap)
{
    size_t n = strlen(body);
    char *p = malloc(n ? n : 1);
    assert_non_null(p);
    memcpy(p, body, n);
    int rc = httpparse_login(p, n, out, cap);
    free(p);
    return rc;
}

static void
test_login_form(void **state)
{
    char out[64];
    (void)state;
    assert_int_equal(login("token=root%2Dtoken", out, sizeof out), 0);
    assert_string_equal(out, "root-token");
    assert_int_equal(login("token=a%2db+c", out, sizeof out), 0);
    assert_string_equal(out, "a-b c");
    assert_int_equal(login("a=1&token=x&token=y", out, sizeof out), 0);
    assert_string_equal(out, "x");
    assert_int_equal(login("xtoken=1&token=%25%26", out, sizeof out), 0);
    assert_string_equal(out, "%&");
    const char *bad[] = {"tok=x", "token=", "", "token=%00", "a&token",
                         /* regressions: sscanf's %1x%1x skipped spaces
                          * ("%4 1" was "A1") and a bad escape stayed '%' */
                         "token=%4 1", "token=% 41", "token=%zz", "token=ab%",
                         "token=ab%4", "token=%+41", "token=%4&1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(login(bad[i], out, sizeof out), -1);
    /* a raw NUL, and the cap (NUL included) */
    assert_int_equal(httpparse_login("token=a\0b", 9, out, sizeof out), -1);
    assert_int_equal(login("token=abc", out, 4), 0);
    assert_int_equal(login("token=abcd", out, 4), -1);
    assert_int_equal(login("token=%41%42%43", out, 4), 0);
    assert_string_equal(out, "ABC");
}

static void
test_login_json(void **state)
{
    char out[64];
    (void)state;
    assert_int_equal(login("{\"token\":\"root-token\"}", out, sizeof out), 0);
    assert_string_equal(out, "root-token");
    assert_int_equal(login("{\"a\":1, \"token\" :\n\t\"x y\" }", out, 64), 0);
    assert_string_equal(out, "x y");
    const char *bad[] = {"{\"token\":1}", "{\"token\":\"\"}", "{}",
                         "{\"token\":\"a\\\"b\"}", "{\"token\":\"abc",
                         "{\"tok\":\"x\"}",
                         /* regressions: no ':' or two were taken */
                         "{\"token\"\"x\"}", "{\"token\"::\"x\"}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(login(bad[i], out, sizeof out), -1);
    /* nothing past len: the closing quote is outside it */
    const char *j = "{\"token\":\"abc\"}";
    assert_int_equal(httpparse_login(j, strlen(j) - 2, out, 64), -1);
    assert_int_equal(login("{\"token\":\"abc\"}", out, 3), -1);
}

static void
test_bearer_and_sid(void **state)
{
    char out[8], sid[80];
    (void)state;
    httpparse_bearer("Bearer abc", out, sizeof out);
    assert_string_equal(out, "abc");
    httpparse_bearer("bEARER    abc", out, sizeof out);
    assert_string_equal(out, "abc");
    httpparse_bearer("Basic abc", out, sizeof out);
    assert_string_equal(out, "");
    httpparse_bearer("Bearer 12345678", out, sizeof out); /* too long */
    assert_string_equal(out, "");
    httpparse_bearer("Bearer 1234567", out, sizeof out);
    assert_string_equal(out, "1234567");
    memset(sid, 'a', 64), sid[64] = '\0';
    assert_true(httpparse_is_sid(sid));
    sid[3] = 'A';
    assert_false(httpparse_is_sid(sid));
    sid[3] = '9', sid[63] = '\0';
    assert_false(httpparse_is_sid(sid));
    assert_false(httpparse_is_sid(""));
}

static void
test_origin(void **state)
{
    char host[400], origin[420];
    (void)state;
    assert_true(httpparse_same_origin("http://h:1", "h:1", 0));
    assert_true(httpparse_same_origin("https://h:1", "h:1", 1));
    assert_false(httpparse_same_origin("https://h:1", "h:1", 0));
    assert_false(httpparse_same_origin("http://h:1", "h:1", 1));
    assert_false(httpparse_same_origin("http://", "", 0));
    assert_false(httpparse_same_origin("http://h:12", "h:1", 0));
    assert_false(httpparse_same_origin("null", "h", 0));
    /* any length: no bounded copy that a long Host could cut short */
    memset(host, 'h', sizeof host - 1), host[sizeof host - 1] = '\0';
    snprintf(origin, sizeof origin, "http://%s", host);
    assert_true(httpparse_same_origin(origin, host, 0));
    origin[300] = '\0';
    assert_false(httpparse_same_origin(origin, host, 0));
}

static void
test_u64(void **state)
{
    uint64_t v = 7;
    (void)state;
    assert_int_equal(httpparse_u64("0", UINT64_MAX, &v), 0);
    assert_true(v == 0);
    assert_int_equal(httpparse_u64("18446744073709551615", UINT64_MAX, &v), 0);
    assert_true(v == UINT64_MAX);
    assert_int_equal(httpparse_u64("0001", 1, &v), 0);
    assert_true(v == 1);
    assert_int_equal(httpparse_u64("10000", 10000, &v), 0);
    v = 7;
    const char *bad[] = {"18446744073709551616",
                         "99999999999999999999",
                         "-1",
                         "+1",
                         " 1",
                         "1 ",
                         "",
                         "1x",
                         "0x1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(httpparse_u64(bad[i], UINT64_MAX, &v), -1);
    assert_int_equal(httpparse_u64("10001", 10000, &v), -1);
    assert_int_equal(httpparse_u64("4294967296", UINT32_MAX, &v), -1);
    assert_int_equal(httpparse_u64("5", 0, &v), -1); /* a digit above max */
    assert_true(v == 7);                             /* untouched */
    assert_int_equal(httpparse_u64n("12", 1, 100, &v), 0);
    assert_true(v == 1);
}

static void
test_lists_and_paths(void **state)
{
    static const char *const names[] = {"ready", "delayed", "buried",
                                        "reserved"};
    unsigned m = 0;
    size_t nl = 0;
    const char *sub = NULL, *act = NULL;
    uint64_t id = 0;
    char path[64];
    (void)state;
    assert_int_equal(httpparse_name_list("ready,buried,ready", names, 3, &m),
                     0);
    assert_int_equal(m, 5);
    const char *bad[] = {"",         "ready,",        ",ready",       "READY",
                         "reserved", "ready, buried", "ready,,buried"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(httpparse_name_list(bad[i], names, 3, &m), -1);
    assert_int_equal(httpparse_name_index("reserved", names, 4), 3);
    assert_int_equal(httpparse_name_index("ready,", names, 4), -1);

    assert_int_equal(httpparse_tube_path("a/b$(x)/jobs", &nl, &sub), 0);
    assert_int_equal(nl, 7);
    assert_string_equal(sub, "jobs");
    assert_int_equal(httpparse_tube_path("/kick", &nl, &sub), 0);
    assert_int_equal(nl, 0);
    assert_int_equal(httpparse_tube_path("abc", &nl, &sub), -1);

    assert_int_equal(httpparse_job_path("12", &id, &act), 0);
    assert_true(id == 12 && act == NULL);
    assert_int_equal(httpparse_job_path("12/move/x", &id, &act), 0);
    assert_string_equal(act, "move/x");
    assert_int_equal(httpparse_job_path("0/kick", &id, &act), -1);
    assert_string_equal(act, "kick");
    assert_int_equal(httpparse_job_path("/kick", &id, &act), -1);
    assert_int_equal(httpparse_job_path("18446744073709551616", &id, &act), -1);
    memset(path, '0', 30), strcpy(path + 30, "1");
    assert_int_equal(httpparse_job_path(path, &id, &act), 0); /* 31 digits */
    assert_true(id == 1);
    memset(path, '0', 31), strcpy(path + 31, "1");
    assert_int_equal(httpparse_job_path(path, &id, &act), -1); /* 32 */
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_login_form),
        cmocka_unit_test(test_login_json),
        cmocka_unit_test(test_bearer_and_sid),
        cmocka_unit_test(test_origin),
        cmocka_unit_test(test_u64),
        cmocka_unit_test(test_lists_and_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
