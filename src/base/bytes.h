/* bytes.h - little-endian integers in byte buffers, for the on-disk and
 * on-wire formats (store/enc.h's records, the Raft snapshot manifest, the
 * peer preamble), and hex digits (auth file digests, the HTTP login form's
 * percent escapes), and decimal numbers for the replies of every job
 * (INSERTED, RESERVED: no printf per op). Inline, no state, any thread. p
 * must hold 4 (32) or 8 (64) bytes. */
#ifndef ROCKSTALK_BYTES_H
#define ROCKSTALK_BYTES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Most bytes dec_u64 writes (18446744073709551615). */
#define DEC_U64_MAX 20

/* Writes v in decimal (as printf's %llu, no terminator) at out, which
 * must hold DEC_U64_MAX bytes; returns the bytes written. */
static inline size_t
dec_u64(char *out, uint64_t v)
{
    char tmp[DEC_U64_MAX];
    size_t n = 0;
    do {
        tmp[DEC_U64_MAX - 1 - n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    memcpy(out, tmp + DEC_U64_MAX - n, n);
    return n;
}

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
