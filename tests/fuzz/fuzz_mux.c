/* fuzz_mux.c - libFuzzer target for the multiplexed relay's framing
 * (src/cluster/muxframe.c), what a follower or leader parses from its
 * authenticated peer: the input, from an exactly-sized heap copy, is cut
 * into frames as muxlink.c does. Each result is checked: a frame never
 * claims more bytes than there are, its fields obey muxframe.h's bounds,
 * re-encoding its header gives the same bytes, and a prefix of a whole
 * frame asks for more or is refused, never accepted. Build and run: `make
 * fuzz` (see the Makefile's fuzzing block). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/muxframe.h"

#define CHECK(x)                                                               \
    do {                                                                       \
        if (!(x)) {                                                            \
            fprintf(stderr, "check failed: %s (line %d)\n", #x, __LINE__);     \
            abort();                                                           \
        }                                                                      \
    } while (0)

static void
check_frame(const unsigned char *p, size_t n, long k, const MuxFrame *f)
{
    unsigned char h[MUX_HDR];
    CHECK(k >= MUX_HDR && (size_t)k <= n);
    CHECK((size_t)k == MUX_HDR + f->len && f->len <= MUX_FRAME_MAX);
    CHECK(f->id != 0 && f->type >= MUX_OPEN && f->type <= MUX_WINDOW_T);
    mux_frame_head(h, f->type, f->id, f->len);
    CHECK(memcmp(h, p, MUX_HDR) == 0);
    if (f->type == MUX_OPEN) {
        CHECK(f->kind <= MUX_KIND_UNIX && f->cn_len <= MUX_CN_MAX);
        CHECK(f->len == 2 + f->cn_len && !memchr(f->cn, 0, f->cn_len));
    }
    if (f->type == MUX_WINDOW_T)
        CHECK(f->credit >= 1 && f->credit <= MUX_WINDOW);
    if (f->type == MUX_DATA) CHECK(f->len >= 1);
    if (f->type == MUX_EOF || f->type == MUX_CLOSE) CHECK(f->len == 0);
    for (size_t cut = 0; cut < (size_t)k; cut += 1 + cut / 4) {
        MuxFrame g;
        CHECK(mux_frame_parse(p, cut, &g) <= 0);
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned char *buf = malloc(size ? size : 1);
    size_t at = 0;
    MuxFrame f;
    long k;

    if (!buf) return 0;
    memcpy(buf, data, size);
    while ((k = mux_frame_parse(buf + at, size - at, &f)) > 0) {
        check_frame(buf + at, size - at, k, &f);
        at += (size_t)k;
    }
    CHECK(k == 0 || k == -1);
    free(buf);
    return 0;
}
