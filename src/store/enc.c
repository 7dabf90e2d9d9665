/* store/enc.c - the store's byte encodings (see store/enc.h): integers,
 * keys and JobMeta v1.
 *
 * JobMeta v1, the value of a job's key in the meta column family, all
 * integers little-endian: u8 version (1), u8 state, u8 tube length, u8
 * flags, u32 pri, ttr, delay, body_size, reserves, timeouts, releases,
 * buries, kicks, u64 created_at_ns, ready_at_ns (56 fixed bytes), then the
 * tube name. JobMeta v2 (a put-unique job): the same with version 2, then
 * u8 key length (1..200) and the key; its state may also be 4 (STORE_GONE:
 * the job is deleted, its key remembered until ready_at_ns). Either may be
 * followed by the job's body when its flags byte has STORE_F_INLINE
 * (format 3).
 */
#include "store/enc.h"

#include <string.h>

#include "store/types.h"

#define META_VERSION 1
#define META_VERSION_KEY 2
#define META_FIXED 56
_Static_assert(STORE_META_MAX ==
                   META_FIXED + STORE_TUBE_MAX + 1 + STORE_TUBE_MAX,
               "JobMeta size");

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

    buf[0] = job->key_len ? META_VERSION_KEY : META_VERSION;
    buf[1] = job->state;
    buf[2] = (unsigned char)tl;
    buf[3] = job->flags;
    le_put32(buf + 4, job->pri);
    le_put32(buf + 8, job->ttr);
    le_put32(buf + 12, job->delay);
    le_put32(buf + 16, job->body_size);
    le_put32(buf + 20, job->reserves);
    le_put32(buf + 24, job->timeouts);
    le_put32(buf + 28, job->releases);
    le_put32(buf + 32, job->buries);
    le_put32(buf + 36, job->kicks);
    le_put64(buf + 40, (uint64_t)job->created_at_ns);
    le_put64(buf + 48, (uint64_t)job->ready_at_ns);
    memcpy(buf + META_FIXED, job->tube, tl);
    if (!job->key_len) return META_FIXED + tl;
    size_t kl = job->key_len > STORE_TUBE_MAX ? STORE_TUBE_MAX : job->key_len;
    buf[META_FIXED + tl] = (unsigned char)kl;
    memcpy(buf + META_FIXED + tl + 1, job->key, kl);
    return META_FIXED + tl + 1 + kl;
}

size_t
store_meta_len(const unsigned char *buf, size_t len)
{
    if (len < META_FIXED ||
        (buf[0] != META_VERSION && buf[0] != META_VERSION_KEY))
        return 0;
    size_t at = (size_t)META_FIXED + buf[2];
    if (buf[0] == META_VERSION) return at <= len ? at : 0;
    if (at >= len || at + 1 + buf[at] > len) return 0;
    return at + 1 + buf[at];
}

int
store_meta_inline(const unsigned char *buf, size_t len, size_t *ml)
{
    *ml = buf ? store_meta_len(buf, len) : 0;
    return *ml && (buf[3] & STORE_F_INLINE) && len - *ml == le_get32(buf + 16);
}

/* The key of a v2 value after its tube at p (kl bytes with its length
 * byte); -1 if bad. */
static int
decode_key(const unsigned char *p, size_t kl, StoreJob *job)
{
    if (kl < 2 || p[0] < 1 || p[0] > STORE_TUBE_MAX || kl != (size_t)1 + p[0])
        return -1;
    job->key_len = p[0];
    memcpy(job->key, p + 1, job->key_len);
    job->key[job->key_len] = '\0';
    return 0;
}

int
store_meta_decode(uint64_t id, const unsigned char *buf, size_t len,
                  StoreJob *job)
{
    size_t ml = store_meta_len(buf, len);
    if (!ml) return -1;
    int v2 = buf[0] == META_VERSION_KEY;
    if (buf[1] < STORE_READY || buf[1] > (v2 ? STORE_GONE : STORE_BURIED))
        return -1;
    /* whole: the meta alone, or an inline body after it (not for GONE) */
    size_t at_body;
    if (buf[2] < 1 || buf[2] > STORE_TUBE_MAX ||
        (len != ml &&
         (buf[1] == STORE_GONE || !store_meta_inline(buf, len, &at_body))))
        return -1;
    memset(job, 0, sizeof *job);
    size_t at = (size_t)META_FIXED + buf[2];
    if (v2 && decode_key(buf + at, ml - at, job) < 0) return -1;
    job->id = id;
    job->state = buf[1];
    job->tube_len = buf[2];
    job->flags = buf[3];
    job->pri = le_get32(buf + 4);
    job->ttr = le_get32(buf + 8);
    job->delay = le_get32(buf + 12);
    job->body_size = le_get32(buf + 16);
    job->reserves = le_get32(buf + 20);
    job->timeouts = le_get32(buf + 24);
    job->releases = le_get32(buf + 28);
    job->buries = le_get32(buf + 32);
    job->kicks = le_get32(buf + 36);
    job->created_at_ns = (int64_t)le_get64(buf + 40);
    job->ready_at_ns = (int64_t)le_get64(buf + 48);
    memcpy(job->tube, buf + META_FIXED, job->tube_len);
    job->tube[job->tube_len] = '\0';
    return 0;
}
