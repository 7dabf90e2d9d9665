/* muxframe.c - see muxframe.h. */
#include "cluster/muxframe.h"

#include <string.h>

void
mux_frame_head(unsigned char *buf, unsigned type, uint32_t id, uint32_t len)
{
    buf[0] = (unsigned char)type;
    for (int i = 0; i < 4; i++)
        buf[1 + i] = (unsigned char)(id >> (8 * i));
    for (int i = 0; i < 3; i++)
        buf[5 + i] = (unsigned char)(len >> (8 * i));
}

static uint32_t
le32(const unsigned char *p, int k)
{
    uint32_t v = 0;
    for (int i = k - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* The payload's rules per type: 0 well formed, -1 not. */
static int
payload_check(MuxFrame *f)
{
    switch (f->type) {
    case MUX_OPEN:
        if (f->len < 2 || f->data[0] > MUX_KIND_UNIX) return -1;
        f->kind = f->data[0];
        f->cn_len = f->data[1];
        f->cn = (const char *)f->data + 2;
        if (f->cn_len > MUX_CN_MAX || f->len != 2 + f->cn_len ||
            memchr(f->cn, '\0', f->cn_len))
            return -1;
        return 0;
    case MUX_DATA:
        return f->len ? 0 : -1;
    case MUX_EOF:
    case MUX_CLOSE:
        return f->len ? -1 : 0;
    case MUX_WINDOW_T:
        if (f->len != 4) return -1;
        f->credit = le32(f->data, 4);
        return f->credit && f->credit <= MUX_WINDOW ? 0 : -1;
    }
    return -1;
}

long
mux_frame_parse(const unsigned char *buf, size_t n, MuxFrame *f)
{
    if (n < MUX_HDR) return 0;
    memset(f, 0, sizeof *f);
    f->type = buf[0];
    f->id = le32(buf + 1, 4);
    f->len = le32(buf + 5, 3);
    if (f->type < MUX_OPEN || f->type > MUX_WINDOW_T || f->id == 0 ||
        f->len > MUX_FRAME_MAX)
        return -1;
    if (n < MUX_HDR + (size_t)f->len) {
        /* the rest may come; but a bad fixed-size header is known now */
        if (f->type != MUX_DATA && f->type != MUX_OPEN && f->len != 4)
            return -1;
        return 0;
    }
    f->data = buf + MUX_HDR;
    if (payload_check(f) < 0) return -1;
    return (long)(MUX_HDR + f->len);
}
