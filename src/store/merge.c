/* store/merge.c - the meta column family's merge operator (see
 * store/merge.h). */
#include "store/merge.h"

#include <stdlib.h>
#include <string.h>

#include "store/enc.h"
#include "store/types.h"

/* The merged value: operand op (a JobMeta) with the body of existing
 * (elen bytes, may be NULL) appended when op keeps it. malloc'd. */
static char *
merge_value(const unsigned char *existing, size_t elen, const unsigned char *op,
            size_t oplen, size_t *outlen)
{
    size_t eml, oml = store_meta_len(op, oplen);
    int keep = store_meta_inline(existing, elen, &eml) && oml == oplen &&
               (op[3] & STORE_F_INLINE) && op[1] != STORE_GONE;
    size_t body = keep ? elen - eml : 0, n = oplen + body;
    unsigned char *out = malloc(n ? n : 1);

    if (!out) return NULL;
    memcpy(out, op, oplen);
    if (keep)
        memcpy(out + oplen, existing + eml, body); /* may be empty */
    else if (oml && oml == oplen)
        out[3] &= (unsigned char)~STORE_F_INLINE; /* no body follows */
    *outlen = n;
    return (char *)out;
}

static char *
full_merge(void *state, const char *key, size_t klen, const char *existing,
           size_t elen, const char *const *ops, const size_t *oplens, int nops,
           unsigned char *success, size_t *outlen)
{
    (void)state;
    (void)key;
    (void)klen;
    char *out = merge_value((const unsigned char *)existing, elen,
                            (const unsigned char *)ops[nops - 1],
                            oplens[nops - 1], outlen);
    *success = out != NULL;
    return out;
}

/* Operands only: the latest one stands for them all. Its STORE_F_INLINE
 * stays set, so the full merge with the base still keeps the body. */
static char *
partial_merge(void *state, const char *key, size_t klen, const char *const *ops,
              const size_t *oplens, int nops, unsigned char *success,
              size_t *outlen)
{
    (void)state;
    (void)key;
    (void)klen;
    size_t n = oplens[nops - 1];
    char *out = malloc(n ? n : 1);

    if (out) memcpy(out, ops[nops - 1], n);
    *outlen = n;
    *success = out != NULL;
    return out;
}

static void
delete_value(void *state, const char *v, size_t len)
{
    (void)state;
    (void)len;
    free((void *)v);
}

static void
no_state(void *state)
{
    (void)state;
}

static const char *
merge_name(void *state)
{
    (void)state;
    return STORE_MERGE_NAME;
}

rocksdb_mergeoperator_t *
store_merge_create(void)
{
    return rocksdb_mergeoperator_create(
        NULL, no_state, full_merge, partial_merge, delete_value, merge_name);
}
