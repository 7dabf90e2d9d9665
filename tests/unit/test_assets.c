/* Unit tests for http/assets.c: the generated table (sorted, every entry
 * with a type and a quoted ETag, index.html and uPlot present, uPlot with
 * its licence), lookups ("/" is index.html, and only "/"; unknown paths
 * and prefixes are not found) and If-None-Match matching (lists, weak tags,
 * "*", no prefix matches). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "http/assets.h"

static void
test_table(void **state)
{
    (void)state;
    assert_true(assets_count >= 4);
    for (size_t i = 0; i < assets_count; i++) {
        const Asset *a = &assets_table[i];
        if (i) assert_true(strcmp(assets_table[i - 1].path, a->path) < 0);
        assert_true(strncmp(a->path, "/console/", 9) == 0 ||
                    (i == 0 && strcmp(a->path, "/") == 0));
        assert_non_null(strstr(a->type, "/"));
        assert_int_equal(strlen(a->etag), 18);
        assert_true(a->etag[0] == '"' && a->etag[17] == '"');
        assert_ptr_equal(assets_find(a->path), a);
    }
    const Asset *u = assets_find("/console/uPlot.iife.min.js");
    assert_non_null(u);
    assert_true(u->len > 1000);
    assert_memory_equal(u->data, "/*! uPlot, ", 11);
    assert_non_null(assets_find("/console/uPlot.min.css"));
    assert_non_null(assets_find("/console/uPlot.LICENSE.txt"));
}

static void
test_find(void **state)
{
    (void)state;
    const Asset *idx = assets_find("/");
    assert_non_null(idx);
    assert_ptr_equal(idx, &assets_table[0]);
    assert_string_equal(idx->type, "text/html; charset=utf-8");
    assert_string_equal(assets_find("/console/app.js")->type,
                        "text/javascript; charset=utf-8");
    assert_null(assets_find(""));
    assert_null(assets_find("/console/"));
    assert_null(assets_find("/console"));
    assert_null(assets_find("/console/app.j"));
    assert_null(assets_find("/console/app.js/"));
    assert_null(assets_find("/index.html"));
    assert_null(assets_find("/console/index.html")); /* only as / */
    assert_null(assets_find("/api/v1/stats"));
}

static void
test_etag_match(void **state)
{
    const char *t = "\"0123456789abcdef\"";
    (void)state;
    assert_false(assets_etag_match(NULL, t));
    assert_false(assets_etag_match("", t));
    assert_true(assets_etag_match(t, t));
    assert_true(assets_etag_match("W/\"0123456789abcdef\"", t));
    assert_true(assets_etag_match("\"x\", \"0123456789abcdef\"", t));
    assert_true(assets_etag_match("\"x\",W/\"0123456789abcdef\" ,\"y\"", t));
    assert_true(assets_etag_match("*", t));
    assert_false(assets_etag_match("\"0123456789abcde\"", t));
    assert_false(assets_etag_match("\"0123456789abcdef0\"", t));
    assert_false(assets_etag_match("\"x\", \"y\"", t));
    assert_false(assets_etag_match("0123456789abcdef", t));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_find),
        cmocka_unit_test(test_etag_match),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
