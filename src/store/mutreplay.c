/* store/mutreplay.c - the commit journal's replay into the shards (see
 * store/mutreplay.h). */
#include "store/mutreplay.h"

#include <stdlib.h>
#include <string.h>

#include "store/batch.h"
#include "store/enc.h"
#include "store/sync.h"
#include "store/util.h"

/* Replay: room for need more bytes after the first have in m->rbuf. */
static unsigned char *
mut_rbuf(StoreMut *m, size_t have, size_t need)
{
    if (have + need > m->rcap) {
        m->rcap = 2 * (have + need);
        m->rbuf = util_xrealloc(m->rbuf, m->rcap);
    }
    return m->rbuf + have;
}

/* Replay: whether the ring entry the ring put at q (its reference) of
 * record r refers to is intact: 0 yes, 1 not (the record is a torn tail),
 * -1 on a read error (failure recorded). */
static int
mut_replay_ring_ok(StoreMut *m, const unsigned char *q, const EncRec *r)
{
    StoreRingRef ref = enc_ring_ref_get(q);
    char err[256];

    if (ref.len != r->body_len) return 1;
    int rc = bodyring_read(m->ring, &ref, mut_rbuf(m, 0, r->body_len), err,
                           sizeof err);
    if (rc < 0) ack_fail(m->ack, "commit journal", -1, strdup(err));
    return rc;
}

int
mut_replay(void *arg, uint64_t group, const unsigned char *p, size_t len,
           uint32_t nrec)
{
    StoreMut *m = arg;
    uint64_t seq;
    int n = 0;
    (void)nrec;

    /* every ring entry first: a record whose entry is not intact is a torn
     * tail, and so is its whole group */
    for (size_t off = 0; off < len;) {
        EncRec r;
        enc_rec_get(p + off, &r);
        if (group > m->shard[store_shard_of(r.id, m->nshards)].jgroup &&
            r.ref) {
            int rc =
                mut_replay_ring_ok(m, p + off + ENC_REC_HDR + r.meta_len, &r);
            if (rc) return rc;
        }
        off += enc_rec_jlen(&r);
    }
    for (size_t off = 0; off < len;) {
        EncRec r;
        enc_rec_get(p + off, &r);
        if (group > m->shard[store_shard_of(r.id, m->nshards)].jgroup) {
            sbatch_add(&m->sb, p + off, &seq);
            n++;
        }
        off += enc_rec_jlen(&r);
    }
    if (!n) return 0;
    m->group = group;
    atomic_fetch_add_explicit(&m->ack->st_replayed, 1, memory_order_relaxed);
    return mut_write_group(m, 0, group);
}

int
mut_replay_end(StoreMut *m, Journal *j, uint64_t top_group)
{
    int rc = sync_dirty(m->sync);

    if (top_group > m->group) m->group = top_group;
    for (int i = 0; i < m->nshards; i++)
        if (m->shard[i].jgroup > m->group) m->group = m->shard[i].jgroup;
    m->journal = j;
    return rc;
}
