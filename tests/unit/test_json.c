/* Unit tests for http/json.c: commas and nesting, numbers, string
 * escaping (quotes, backslashes, control characters, '<' '>' '&'), UTF-8
 * passed through when valid and replaced (U+FFFD) when not, and the
 * failure flag (too deep, a close without an open). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "http/json.h"

/* The document j holds is want; frees j. */
static void
is(Json *j, const char *want)
{
    assert_false(j->failed);
    assert_int_equal(j->depth, 0);
    assert_string_equal(j->buf, want);
    assert_int_equal(j->len, strlen(want));
    json_free(j);
}

static void
test_nesting_and_commas(void **state)
{
    Json j = {0};
    (void)state;
    json_obj(&j);
    json_key(&j, "a"), json_u64(&j, 18446744073709551615ULL);
    json_key(&j, "b"), json_i64(&j, -5);
    json_key(&j, "c");
    json_arr(&j);
    json_bool(&j, 1), json_bool(&j, 0), json_null(&j);
    json_obj(&j), json_obj_end(&j);
    json_arr(&j), json_arr_end(&j);
    json_arr_end(&j);
    json_key(&j, "d"), json_dbl(&j, 2.5, 2);
    json_key(&j, "e"), json_num(&j, "1.000001");
    json_key(&j, "f"), json_dbl(&j, 1.0 / 0.0, 1);
    json_obj_end(&j);
    is(&j, "{\"a\":18446744073709551615,\"b\":-5,\"c\":[true,false,null,{},"
           "[]],\"d\":2.50,\"e\":1.000001,\"f\":0.0}");
}

static void
test_escapes(void **state)
{
    Json j = {0};
    (void)state;
    json_str(&j, "q\"b\\n\n\r\t\x01\x1f<a>&\x7f", 15);
    is(&j, "\"q\\\"b\\\\n\\n\\r\\t\\u0001\\u001f\\u003ca\\u003e\\u0026\x7f\"");
    json_str(&j, "nul\0x", 5); /* length-delimited: the NUL is escaped */
    is(&j, "\"nul\\u0000x\"");
    json_cstr(&j, "");
    is(&j, "\"\"");
}

static void
test_utf8(void **state)
{
    Json j = {0};
    (void)state;
    /* valid: 2, 3 and 4 bytes pass as they are */
    json_cstr(&j, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
    is(&j, "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"");
    /* a lone continuation, an overlong '/', a surrogate, past U+10FFFF,
     * a truncated sequence at the end */
    json_cstr(&j, "a\x80"
                  "b\xc0\xaf"
                  "c\xed\xa0\x80"
                  "d\xf4\x90\x80\x80"
                  "e\xe2\x82");
    is(&j, "\"a\\ufffdb\\ufffd\\ufffdc\\ufffd\\ufffd\\ufffdd\\ufffd\\ufffd"
           "\\ufffd\\ufffde\\ufffd\\ufffd\"");
}

static void
test_failures(void **state)
{
    Json j = {0};
    (void)state;
    for (int i = 0; i < JSON_DEPTH_MAX; i++)
        json_arr(&j);
    assert_false(j.failed);
    json_arr(&j); /* one too deep */
    assert_true(j.failed);
    json_free(&j);
    json_obj_end(&j); /* nothing open */
    assert_true(j.failed);
    json_u64(&j, 1); /* nothing more is written */
    assert_null(j.buf);
    json_free(&j);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nesting_and_commas),
        cmocka_unit_test(test_escapes),
        cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
