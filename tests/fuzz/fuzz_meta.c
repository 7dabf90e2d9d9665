/* fuzz_meta.c - libFuzzer target for the JobMeta v1 codec (src/store/enc.c).
 *
 * 1. store_meta_decode on the input as a stored value (from an exactly-sized
 *    heap copy, so a read past it is caught). When it succeeds the job must
 *    be sane (state 1..3, tube 1..200 bytes NUL-terminated, the id given),
 *    encoding it again must give back the very same bytes up to the meta's
 *    end (store_meta_len), what follows must be an inline body of exactly
 *    body_size bytes, and decoding the meta must give the same job.
 * 2. The input as the fields of a StoreJob (state and tube length forced
 *    into range): encode, decode, and the job must come back unchanged.
 * Build and run: `make fuzz` (see the Makefile's fuzzing block). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz_meta: check failed at line %d: %s\n",        \
                    __LINE__, #cond);                                          \
            abort();                                                           \
        }                                                                      \
    } while (0)

static void
same_job(const StoreJob *a, const StoreJob *b)
{
    CHECK(a->id == b->id && a->state == b->state && a->flags == b->flags);
    CHECK(a->pri == b->pri && a->ttr == b->ttr && a->delay == b->delay);
    CHECK(a->body_size == b->body_size && a->reserves == b->reserves);
    CHECK(a->timeouts == b->timeouts && a->releases == b->releases);
    CHECK(a->buries == b->buries && a->kicks == b->kicks);
    CHECK(a->created_at_ns == b->created_at_ns);
    CHECK(a->ready_at_ns == b->ready_at_ns);
    CHECK(a->tube_len == b->tube_len);
    CHECK(memcmp(a->tube, b->tube, a->tube_len) == 0);
    CHECK(a->key_len == b->key_len);
    CHECK(memcmp(a->key, b->key, a->key_len) == 0);
}

static void
sane(const StoreJob *j, uint64_t id)
{
    CHECK(j->id == id);
    CHECK(j->state >= STORE_READY &&
          j->state <= (j->key_len ? STORE_GONE : STORE_BURIED));
    CHECK(j->tube_len >= 1 && j->tube_len <= STORE_TUBE_MAX);
    CHECK(j->tube[j->tube_len] == '\0');
    CHECK(j->key_len <= STORE_TUBE_MAX && j->key[j->key_len] == '\0');
}

static uint64_t
get64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static uint32_t
get32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint64_t id = 0x0123456789abcdefULL ^ size;

    /* 1: arbitrary bytes as a stored value */
    unsigned char *val = malloc(size ? size : 1);
    if (!val) return 0;
    if (size) memcpy(val, data, size);
    StoreJob j, k;
    memset(&j, 0xa5, sizeof j);
    if (store_meta_decode(id, val, size, &j) == 0) {
        sane(&j, id);
        unsigned char buf[STORE_META_MAX];
        size_t n = store_meta_encode(&j, buf);
        CHECK(n == store_meta_len(val, size) && memcmp(buf, val, n) == 0);
        /* anything after the meta is an inline body of body_size bytes */
        CHECK(n == size || ((j.flags & STORE_F_INLINE) &&
                            j.state != STORE_GONE && size - n == j.body_size));
        memset(&k, 0x5a, sizeof k);
        CHECK(store_meta_decode(id, buf, n, &k) == 0);
        sane(&k, id);
        same_job(&j, &k);
    }
    free(val);

    /* 2: the input as a job's fields */
    if (size >= 8 + 2 + 9 * 4 + 16 + 1) {
        const uint8_t *p = data;
        StoreJob in;
        memset(&in, 0, sizeof in);
        in.id = get64(p), p += 8;
        in.state = (uint8_t)(STORE_READY + p[0] % 3), p++;
        in.flags = *p++;
        in.pri = get32(p), p += 4;
        in.ttr = get32(p), p += 4;
        in.delay = get32(p), p += 4;
        in.body_size = get32(p), p += 4;
        in.reserves = get32(p), p += 4;
        in.timeouts = get32(p), p += 4;
        in.releases = get32(p), p += 4;
        in.buries = get32(p), p += 4;
        in.kicks = get32(p), p += 4;
        in.created_at_ns = (int64_t)get64(p), p += 8;
        in.ready_at_ns = (int64_t)get64(p), p += 8;
        size_t rest = size - (size_t)(p - data);
        size_t tl = 1 + (rest - 1) % STORE_TUBE_MAX;
        if (tl > rest) tl = rest;
        in.tube_len = (uint8_t)tl;
        memcpy(in.tube, p, tl);
        unsigned char *buf = malloc(STORE_META_MAX);
        if (!buf) abort();
        size_t n = store_meta_encode(&in, buf);
        CHECK(n == 56 + tl);
        StoreJob out;
        memset(&out, 0x5a, sizeof out);
        CHECK(store_meta_decode(in.id, buf, n, &out) == 0);
        sane(&out, in.id);
        same_job(&in, &out);
        free(buf);
    }
    return 0;
}
