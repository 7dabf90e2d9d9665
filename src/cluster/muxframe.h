/* muxframe.h - the framing of a multiplexed relay link (PEER_CHANNEL_MUX,
 * peerauth.h): a follower carries many relayed clients ("streams") over
 * one mutual-TLS link to the leader, so that one TLS record carries many
 * clients' bytes. Pure functions: no state, no I/O; any thread.
 *
 * A frame: an 8-byte header (type u8, stream id u32 little-endian, payload
 * length u24 little-endian) and its payload:
 *   MUX_OPEN   follower -> leader: a new stream; payload: the relay kind
 *              (MUX_KIND_*), the length n of the client's verified TLS CN
 *              (0..PEER_CN_MAX), the CN (n bytes, no NUL)
 *   MUX_DATA   either way: 1..MUX_FRAME_MAX bytes of the stream
 *   MUX_EOF    follower -> leader: the client sent FIN (half-close)
 *   MUX_CLOSE  either way: the stream is over; the sender forgot its id
 *   MUX_WINDOW either way: payload u32 LE, 1..MUX_WINDOW bytes of credit
 * Stream ids are chosen by the follower, never 0, never reused on a link.
 * Each side may send a stream at most MUX_WINDOW bytes of DATA beyond what
 * the other granted back (WINDOW): a stream whose reader does not read
 * stops only itself. Anything else is malformed and ends the whole link.
 */
#ifndef ROCKSTALK_MUXFRAME_H
#define ROCKSTALK_MUXFRAME_H

#include <stddef.h>
#include <stdint.h>

#define MUX_HDR 8                 /* header bytes */
#define MUX_FRAME_MAX (64 * 1024) /* payload bytes of a frame, at most */
#define MUX_WINDOW (256 * 1024)   /* credit per stream and direction */
#define MUX_GRANT (64 * 1024)     /* bytes drained before a WINDOW goes */
#define MUX_STREAMS_MAX 4096      /* open streams per link */
#define MUX_CN_MAX 64             /* = PEER_CN_MAX */

enum { MUX_OPEN = 1, MUX_DATA, MUX_EOF, MUX_CLOSE, MUX_WINDOW_T };
enum { MUX_KIND_TCP = 0, MUX_KIND_UNIX = 1 }; /* CONN_VIA_RELAY(_UNIX) */

/* One parsed frame; data points into the caller's buffer. */
typedef struct MuxFrame {
    unsigned type;
    uint32_t id;
    uint32_t len;
    const unsigned char *data; /* len bytes */
    /* MUX_OPEN: */
    unsigned kind;
    const char *cn; /* cn_len bytes inside data, not NUL-terminated */
    size_t cn_len;
    /* MUX_WINDOW: */
    uint32_t credit;
} MuxFrame;

/* Writes a header (MUX_HDR bytes) into buf. */
void mux_frame_head(unsigned char *buf, unsigned type, uint32_t id,
                    uint32_t len);

/* Parses the frame at the head of buf (n bytes): its whole size (header
 * and payload) with *f filled, 0 when more bytes are needed, -1 when it is
 * malformed (an unknown type, id 0, a length over MUX_FRAME_MAX or wrong
 * for the type, a bad OPEN or WINDOW payload). */
long mux_frame_parse(const unsigned char *buf, size_t n, MuxFrame *f);

#endif
