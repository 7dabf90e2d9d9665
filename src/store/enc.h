/* store/enc.h - the store's byte encodings: little-endian integers of the
 * on-disk values, the big-endian 8-byte job keys, JobMeta v1 (whose codec,
 * store_meta_encode/decode, is declared in store.h) and the in-process
 * mutation record that carries a change from the loop to the mutation
 * thread.
 *
 * Threads: any; pure functions, no state. Calls: nothing of the store (the
 * bottom layer; libc only), so tests/fuzz/fuzz_meta.c links it alone.
 */
#ifndef ROCKSTALK_STORE_ENC_H
#define ROCKSTALK_STORE_ENC_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/bytes.h"
#include "store/types.h"

/* Job keys (meta and body column families) are the id in 8 big-endian
 * bytes, so RocksDB's bytewise order is id order. */
#define ENC_KEY_LEN 8
/* Writes id's key into k (ENC_KEY_LEN bytes); enc_key_get reads it back. */
void enc_key_put(char *k, uint64_t id);
uint64_t enc_key_get(const char *k);

/* A mutation record: an ENC_REC_HDR-byte header (native byte order; it never
 * leaves the process), then meta_len bytes of JobMeta, then body_len bytes
 * of body; except a put with ENC_PUT_RING, whose meta is followed by the
 * ENC_RING_REF bytes of its body's place in the body ring
 * (store/bodyring.h) and no body: the body is read back from the ring by
 * whoever writes it to a shard (store/mut.c; the ring keeps it until then,
 * bodyring.h's reuse rule), so the loop never copies a large body into a
 * record. The commit journal holds records in this same form. */
#define ENC_REC_HDR 24
enum { ENC_OP_PUT = 1, ENC_OP_UPDATE = 2, ENC_OP_DELETE = 3 };

/* A put's flag: its body is in the body ring, at the reference that
 * follows its meta, which the record carries instead of the body (and so
 * does the commit journal, PROTOCOL.md 11.5). A bit no other op's flag uses, so
 * a record's length does not depend on its op (the write-behind window cancels
 * a record by zeroing its op, store/pend.h). */
#define ENC_PUT_RING 0x80

/* A body ring reference (little-endian): u64 gen, u64 off (bytes into that
 * generation's file), u32 len (body bytes), u32 crc (zlib crc32 of the
 * body). */
#define ENC_RING_REF 24

/* Writes ref as its ENC_RING_REF bytes at q (the layout above). */
static inline void
enc_ring_ref_put(unsigned char *q, const StoreRingRef *ref)
{
    le_put64(q, ref->gen);
    le_put64(q + 8, ref->off);
    le_put32(q + 16, ref->len);
    le_put32(q + 20, ref->crc);
}

/* The reference in the ENC_RING_REF bytes at q. */
static inline StoreRingRef
enc_ring_ref_get(const unsigned char *q)
{
    return (StoreRingRef){.gen = le_get64(q),
                          .off = le_get64(q + 8),
                          .len = le_get32(q + 16),
                          .crc = le_get32(q + 20)};
}

/* A record header, decoded. flag: for a delete, STORE_DEL_* (the meta was
 * rewritten; no body); for an update, 1 when the job becomes a STORE_GONE
 * record (its body goes); for a put, ENC_PUT_RING or 0. ref: bytes of the
 * ring reference after the meta (ENC_RING_REF, and then the record holds
 * none of the body_len bytes of body, or 0). */
typedef struct EncRec {
    uint64_t seq, id;
    uint32_t body_len;
    uint16_t meta_len;
    uint8_t op, flag;
    uint8_t ref;
} EncRec;

/* The header's fields, by byte offset. */
enum {
    ENC_REC_SEQ = 0,       /* u64 */
    ENC_REC_ID = 8,        /* u64 */
    ENC_REC_BODY_LEN = 16, /* u32 */
    ENC_REC_META_LEN = 20, /* u16 */
    ENC_REC_OP = 22,       /* u8, ENC_OP_* */
    ENC_REC_FLAG = 23      /* u8 */
};

/* Writes r's header into p (ENC_REC_HDR bytes). Inline: once per record on
 * the loop thread. */
static inline void
enc_rec_put(unsigned char *p, const EncRec *r)
{
    memcpy(p + ENC_REC_SEQ, &r->seq, 8);
    memcpy(p + ENC_REC_ID, &r->id, 8);
    memcpy(p + ENC_REC_BODY_LEN, &r->body_len, 4);
    memcpy(p + ENC_REC_META_LEN, &r->meta_len, 2);
    p[ENC_REC_OP] = r->op;
    p[ENC_REC_FLAG] = r->flag;
}

/* Bytes of ring reference a record with this flag carries. */
static inline unsigned
enc_rec_ref(unsigned flag)
{
    return (flag & ENC_PUT_RING) ? ENC_RING_REF : 0;
}

/* The whole length in bytes (header, meta, then the reference or the
 * body) of the record at p. */
static inline size_t
enc_rec_len(const unsigned char *p)
{
    uint32_t body_len;
    uint16_t meta_len;
    unsigned ref = enc_rec_ref(p[ENC_REC_FLAG]);

    memcpy(&body_len, p + ENC_REC_BODY_LEN, 4);
    memcpy(&meta_len, p + ENC_REC_META_LEN, 2);
    return ENC_REC_HDR + (size_t)meta_len + (ref ? ref : body_len);
}

/* The op (ENC_OP_*) of the record at p. */
static inline int
enc_rec_op(const unsigned char *p)
{
    return p[ENC_REC_OP];
}

/* Reads the header at p into *r; returns the record's whole length. */
static inline size_t
enc_rec_get(const unsigned char *p, EncRec *r)
{
    memcpy(&r->seq, p + ENC_REC_SEQ, 8);
    memcpy(&r->id, p + ENC_REC_ID, 8);
    memcpy(&r->body_len, p + ENC_REC_BODY_LEN, 4);
    memcpy(&r->meta_len, p + ENC_REC_META_LEN, 2);
    r->op = p[ENC_REC_OP];
    r->flag = p[ENC_REC_FLAG];
    r->ref = (uint8_t)enc_rec_ref(r->flag);
    return ENC_REC_HDR + (size_t)r->meta_len +
           (r->ref ? (size_t)r->ref : r->body_len);
}

/* The length of r's record as the commit journal holds it: as in memory
 * (a put with a ring reference without its body, PROTOCOL.md 11.5). */
static inline size_t
enc_rec_jlen(const EncRec *r)
{
    return ENC_REC_HDR + (size_t)r->meta_len +
           (r->ref ? (size_t)r->ref : r->body_len);
}

/* The bytes r's record stands for in the hand-off backlog and the
 * write-behind window: its length plus, for a ring put, its body. The
 * body is not written to the shards (the ring is its home,
 * store/bodyheld.h), but counting it makes the window fall due once its
 * ring puts refer to PEND_MAX_BYTES of bodies (store/pend.h), so the body
 * writer, whose reuse of a ring file waits for the references to it to
 * be applied (store/bodyring.h), seldom waits: counted at their
 * reference's size, they waited out the whole window (1 s), and 8
 * producers of 256 KiB bodies made 655 puts/s instead of ~2300. */
static inline size_t
enc_rec_weight(const EncRec *r)
{
    return ENC_REC_HDR + (size_t)r->meta_len + r->ref + r->body_len;
}

#endif
