/* Unit tests for muxframe.c, the multiplexed relay link's framing: every
 * frame type round-trips, and every malformed header or payload the peer
 * could send is refused (-1) rather than read past, at any cut. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cluster/muxframe.h"

static unsigned char buf[MUX_HDR + MUX_FRAME_MAX + 16];

/* A frame of type and id with payload p (n bytes) in buf; its size. */
static size_t
make(unsigned type, uint32_t id, const void *p, size_t n)
{
    mux_frame_head(buf, type, id, (uint32_t)n);
    if (n) memcpy(buf + MUX_HDR, p, n);
    return MUX_HDR + n;
}

static void
test_round_trip(void **state)
{
    MuxFrame f;
    (void)state;
    size_t n = make(MUX_DATA, 0x01020304, "hello", 5);
    assert_int_equal(mux_frame_parse(buf, n, &f), (long)n);
    assert_int_equal(f.type, MUX_DATA);
    assert_int_equal(f.id, 0x01020304);
    assert_int_equal(f.len, 5);
    assert_memory_equal(f.data, "hello", 5);
    for (size_t k = 0; k < n; k++) /* any cut: more is needed */
        assert_int_equal(mux_frame_parse(buf, k, &f), 0);

    n = make(MUX_OPEN, 7,
             "\x01\x03"
             "abc",
             5);
    assert_int_equal(mux_frame_parse(buf, n, &f), (long)n);
    assert_int_equal(f.kind, MUX_KIND_UNIX);
    assert_int_equal(f.cn_len, 3);
    assert_memory_equal(f.cn, "abc", 3);

    n = make(MUX_WINDOW_T, 7, "\x00\x00\x01\x00", 4);
    assert_int_equal(mux_frame_parse(buf, n, &f), (long)n);
    assert_int_equal(f.credit, 65536);

    n = make(MUX_EOF, 9, NULL, 0);
    assert_int_equal(mux_frame_parse(buf, n, &f), (long)n);
    n = make(MUX_CLOSE, 9, NULL, 0);
    assert_int_equal(mux_frame_parse(buf, n, &f), (long)n);

    static unsigned char big[MUX_FRAME_MAX];
    n = make(MUX_DATA, 1, big, sizeof big);
    assert_int_equal(mux_frame_parse(buf, n, &f), (long)n);
}

static void
test_malformed(void **state)
{
    MuxFrame f;
    (void)state;
    /* unknown types, id 0 */
    make(MUX_DATA, 1, "x", 1);
    buf[0] = 0;
    assert_int_equal(mux_frame_parse(buf, MUX_HDR + 1, &f), -1);
    buf[0] = MUX_WINDOW_T + 1;
    assert_int_equal(mux_frame_parse(buf, MUX_HDR + 1, &f), -1);
    make(MUX_DATA, 0, "x", 1);
    assert_int_equal(mux_frame_parse(buf, MUX_HDR + 1, &f), -1);
    /* over the frame bound: refused from the header alone */
    mux_frame_head(buf, MUX_DATA, 1, MUX_FRAME_MAX + 1);
    assert_int_equal(mux_frame_parse(buf, MUX_HDR, &f), -1);
    mux_frame_head(buf, MUX_DATA, 1, 0xffffff);
    assert_int_equal(mux_frame_parse(buf, MUX_HDR, &f), -1);
    /* empty DATA; EOF, CLOSE with a payload; WINDOW of another size */
    assert_int_equal(mux_frame_parse(buf, make(MUX_DATA, 1, NULL, 0), &f), -1);
    assert_int_equal(mux_frame_parse(buf, make(MUX_EOF, 1, "x", 1), &f), -1);
    assert_int_equal(mux_frame_parse(buf, make(MUX_CLOSE, 1, "xy", 2), &f), -1);
    assert_int_equal(mux_frame_parse(buf, make(MUX_WINDOW_T, 1, "x", 1), &f),
                     -1);
    mux_frame_head(buf, MUX_WINDOW_T, 1, 9);
    assert_int_equal(mux_frame_parse(buf, MUX_HDR, &f), -1);
    /* WINDOW of 0 or over the window */
    assert_int_equal(
        mux_frame_parse(buf, make(MUX_WINDOW_T, 1, "\0\0\0\0", 4), &f), -1);
    assert_int_equal(
        mux_frame_parse(buf, make(MUX_WINDOW_T, 1, "\x01\0\x04\0", 4), &f), -1);
    /* OPEN: a bad kind, a CN length that disagrees, over the bound, NUL */
    assert_int_equal(mux_frame_parse(buf, make(MUX_OPEN, 1, "\x02\0", 2), &f),
                     -1);
    assert_int_equal(mux_frame_parse(buf, make(MUX_OPEN, 1, "\0", 1), &f), -1);
    assert_int_equal(mux_frame_parse(buf,
                                     make(MUX_OPEN, 1,
                                          "\0\x04"
                                          "abc",
                                          5),
                                     &f),
                     -1);
    assert_int_equal(mux_frame_parse(buf,
                                     make(MUX_OPEN, 1,
                                          "\0\x02"
                                          "abc",
                                          5),
                                     &f),
                     -1);
    assert_int_equal(mux_frame_parse(buf,
                                     make(MUX_OPEN, 1,
                                          "\0\x03"
                                          "a\0c",
                                          5),
                                     &f),
                     -1);
    char cn[2 + MUX_CN_MAX + 1];
    memset(cn, 'a', sizeof cn);
    cn[0] = 0;
    cn[1] = MUX_CN_MAX + 1;
    assert_int_equal(mux_frame_parse(buf, make(MUX_OPEN, 1, cn, sizeof cn), &f),
                     -1);
}

/* Arbitrary bytes: never a read past n, never a frame bigger than n. */
static void
test_noise(void **state)
{
    MuxFrame f;
    uint32_t x = 12345;
    (void)state;
    for (int round = 0; round < 20000; round++) {
        size_t n = 1 + round % 40;
        for (size_t i = 0; i < n; i++) {
            x = x * 1103515245u + 12345u;
            buf[i] = (unsigned char)(x >> 16);
        }
        if (round % 3 == 0) buf[0] = (unsigned char)(1 + round % 5);
        if (round % 3 == 0)
            buf[5] = (unsigned char)(round % 7), buf[6] = 0, buf[7] = 0;
        long k = mux_frame_parse(buf, n, &f);
        assert_true(k >= -1 && k <= (long)n);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_noise),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
