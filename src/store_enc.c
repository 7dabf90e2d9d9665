/* store_enc.c - the store's byte encodings (see store_enc.h): integers,
 * keys and JobMeta v1.
 *
 * JobMeta v1, the value of a job's key in the meta column family, all
 * integers little-endian: u8 version (1), u8 state, u8 tube length, u8
 * flags, u32 pri, ttr, delay, body_size, reserves, timeouts, releases,
 * buries, kicks, u64 created_at_ns, ready_at_ns (56 fixed bytes), then the
 * tube name.
 */
#include "store_enc.h"

#include <string.h>

#include "store_types.h"

#define META_VERSION 1
#define META_FIXED 56
_Static_assert(STORE_META_MAX == META_FIXED + STORE_TUBE_MAX, "JobMeta size");

void
enc_put_u32le(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

void
enc_put_u64le(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

uint32_t
enc_get_u32le(const unsigned char *p)
{
    uint32_t v = 0;

    for (int i = 3; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

uint64_t
enc_get_u64le(const unsigned char *p)
{
    uint64_t v = 0;

    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

void
enc_key_put(char *k, uint64_t id)
{
    for (int i = 0; i < 8; i++)
        k[i] = (char)(id >> (56 - 8 * i));
}

uint64_t
enc_key_get(const char *k)
{
    uint64_t v = 0;

    for (int i = 0; i < 8; i++)
        v = v << 8 | (unsigned char)k[i];
    return v;
}

size_t
store_meta_encode(const StoreJob *job, unsigned char *buf)
{
    size_t tl = job->tube_len > STORE_TUBE_MAX ? STORE_TUBE_MAX : job->tube_len;

    buf[0] = META_VERSION;
    buf[1] = job->state;
    buf[2] = (unsigned char)tl;
    buf[3] = job->flags;
    enc_put_u32le(buf + 4, job->pri);
    enc_put_u32le(buf + 8, job->ttr);
    enc_put_u32le(buf + 12, job->delay);
    enc_put_u32le(buf + 16, job->body_size);
    enc_put_u32le(buf + 20, job->reserves);
    enc_put_u32le(buf + 24, job->timeouts);
    enc_put_u32le(buf + 28, job->releases);
    enc_put_u32le(buf + 32, job->buries);
    enc_put_u32le(buf + 36, job->kicks);
    enc_put_u64le(buf + 40, (uint64_t)job->created_at_ns);
    enc_put_u64le(buf + 48, (uint64_t)job->ready_at_ns);
    memcpy(buf + META_FIXED, job->tube, tl);
    return META_FIXED + tl;
}

int
store_meta_decode(uint64_t id, const unsigned char *buf, size_t len,
                  StoreJob *job)
{
    if (len < META_FIXED || buf[0] != META_VERSION) return -1;
    if (buf[1] < STORE_READY || buf[1] > STORE_BURIED) return -1;
    if (buf[2] < 1 || buf[2] > STORE_TUBE_MAX ||
        len != (size_t)META_FIXED + buf[2])
        return -1;
    memset(job, 0, sizeof *job);
    job->id = id;
    job->state = buf[1];
    job->tube_len = buf[2];
    job->flags = buf[3];
    job->pri = enc_get_u32le(buf + 4);
    job->ttr = enc_get_u32le(buf + 8);
    job->delay = enc_get_u32le(buf + 12);
    job->body_size = enc_get_u32le(buf + 16);
    job->reserves = enc_get_u32le(buf + 20);
    job->timeouts = enc_get_u32le(buf + 24);
    job->releases = enc_get_u32le(buf + 28);
    job->buries = enc_get_u32le(buf + 32);
    job->kicks = enc_get_u32le(buf + 36);
    job->created_at_ns = (int64_t)enc_get_u64le(buf + 40);
    job->ready_at_ns = (int64_t)enc_get_u64le(buf + 48);
    memcpy(job->tube, buf + META_FIXED, job->tube_len);
    job->tube[job->tube_len] = '\0';
    return 0;
}
