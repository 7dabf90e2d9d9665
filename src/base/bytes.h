/* bytes.h - little-endian integers in byte buffers, for the on-disk and
 * on-wire formats (store/enc.h's records, the Raft snapshot manifest, the
 * peer preamble), and hex digits (auth file digests, the HTTP login form's
 * percent escapes). Inline, no state, any thread. p must hold 4 (32) or 8
 * (64) bytes. */
#ifndef ROCKSTALK_BYTES_H
#define ROCKSTALK_BYTES_H

#include <stdint.h>

/* The value (0-15) of the hex digit c, either case; -1 if c is not one. */
static inline int
hex_value(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static inline void
le_put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static inline void
le_put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static inline uint32_t
le_get32(const unsigned char *p)
{
    uint32_t v = 0;

    for (int i = 3; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static inline uint64_t
le_get64(const unsigned char *p)
{
    uint64_t v = 0;

    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

#endif
