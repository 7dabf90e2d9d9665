/* dedup.c - see dedup.h. */
#include "queue/dedup.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int
expire_less(const void *a, const void *b)
{
    return ((const DedupKey *)a)->expire_ns < ((const DedupKey *)b)->expire_ns;
}

static void
expire_setpos(void *x, size_t i)
{
    ((DedupKey *)x)->heap_pos = i;
}

void
dedup_init(Dedup *d)
{
    memset(d, 0, sizeof *d);
    heap_init(&d->expiry, expire_less, expire_setpos);
}

/* FNV-1a over tube, a separator, then key. */
static size_t
name_hash(const char *tube, size_t tlen, const char *key, size_t klen)
{
    uint64_t h = 1469598103934665603u;
    for (size_t i = 0; i < tlen; i++)
        h = (h ^ (unsigned char)tube[i]) * 1099511628211u;
    h = (h ^ 0xff) * 1099511628211u;
    for (size_t i = 0; i < klen; i++)
        h = (h ^ (unsigned char)key[i]) * 1099511628211u;
    return (size_t)h;
}

static size_t
id_hash(uint64_t id)
{
    return (size_t)(id * 0x9e3779b97f4a7c15u >> 7);
}

static size_t
name_slot(const Dedup *d, const DedupKey *k)
{
    return name_hash(k->name, k->tube_len, k->name + k->tube_len, k->key_len) &
           (d->nbuckets - 1);
}

/* Doubles the tables (rehashing every key) when they are full; a failed
 * allocation leaves them as they are (longer chains, still correct). */
static void
grow(Dedup *d)
{
    size_t n = d->nbuckets ? d->nbuckets * 2 : 64;
    DedupKey **bn = calloc(n, sizeof *bn), **bi = calloc(n, sizeof *bi);
    if (!bn || !bi) {
        free(bn);
        free(bi);
        return;
    }
    for (size_t i = 0; i < d->nbuckets; i++)
        for (DedupKey *k = d->by_name[i], *next; k; k = next) {
            next = k->next_name;
            size_t a = name_hash(k->name, k->tube_len, k->name + k->tube_len,
                                 k->key_len) &
                       (n - 1);
            size_t b = id_hash(k->id) & (n - 1);
            k->next_name = bn[a];
            bn[a] = k;
            k->next_id = bi[b];
            bi[b] = k;
        }
    free(d->by_name);
    free(d->by_id);
    d->by_name = bn;
    d->by_id = bi;
    d->nbuckets = n;
}

DedupKey *
dedup_find(const Dedup *d, const char *tube, size_t tlen, const char *key,
           size_t klen)
{
    if (!d->nbuckets) return NULL;
    size_t i = name_hash(tube, tlen, key, klen) & (d->nbuckets - 1);
    for (DedupKey *k = d->by_name[i]; k; k = k->next_name)
        if (k->tube_len == tlen && k->key_len == klen &&
            memcmp(k->name, tube, tlen) == 0 &&
            memcmp(k->name + tlen, key, klen) == 0)
            return k;
    return NULL;
}

DedupKey *
dedup_of_job(const Dedup *d, uint64_t id)
{
    if (!d->nbuckets) return NULL;
    for (DedupKey *k = d->by_id[id_hash(id) & (d->nbuckets - 1)]; k;
         k = k->next_id)
        if (k->id == id) return k;
    return NULL;
}

DedupKey *
dedup_add(Dedup *d, const char *tube, size_t tlen, const char *key, size_t klen,
          uint64_t id, int64_t expire_ns)
{
    if (d->len >= d->nbuckets) grow(d);
    if (!d->nbuckets) return NULL;
    DedupKey *k = calloc(1, sizeof *k + tlen + klen);
    if (!k) return NULL;
    k->id = id;
    k->expire_ns = expire_ns;
    k->tube_len = (uint8_t)tlen;
    k->key_len = (uint8_t)klen;
    memcpy(k->name, tube, tlen);
    memcpy(k->name + tlen, key, klen);
    if (heap_insert(&d->expiry, k) < 0) {
        free(k);
        return NULL;
    }
    size_t a = name_slot(d, k), b = id_hash(id) & (d->nbuckets - 1);
    k->next_name = d->by_name[a];
    d->by_name[a] = k;
    k->next_id = d->by_id[b];
    d->by_id[b] = k;
    d->len++;
    return k;
}

void
dedup_remove(Dedup *d, DedupKey *k)
{
    DedupKey **p = &d->by_name[name_slot(d, k)];
    while (*p != k)
        p = &(*p)->next_name;
    *p = k->next_name;
    p = &d->by_id[id_hash(k->id) & (d->nbuckets - 1)];
    while (*p != k)
        p = &(*p)->next_id;
    *p = k->next_id;
    if (k->heap_pos != SIZE_MAX) heap_remove(&d->expiry, k->heap_pos);
    d->len--;
    free(k);
}

DedupKey *
dedup_expired(const Dedup *d, int64_t now_ns)
{
    DedupKey *k = heap_peek(&d->expiry);
    return k && k->expire_ns <= now_ns ? k : NULL;
}

void
dedup_window_over(Dedup *d, DedupKey *k)
{
    if (k->heap_pos == SIZE_MAX) return;
    heap_remove(&d->expiry, k->heap_pos);
    k->heap_pos = SIZE_MAX;
}

void
dedup_free(Dedup *d)
{
    for (size_t i = 0; i < d->nbuckets; i++)
        for (DedupKey *k = d->by_name[i], *next; k; k = next) {
            next = k->next_name;
            free(k);
        }
    free(d->by_name);
    free(d->by_id);
    heap_free(&d->expiry);
    memset(d, 0, sizeof *d);
}
