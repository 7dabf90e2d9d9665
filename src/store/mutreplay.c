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

/* Replay: copies the records of the journal payload p[0..len) that a
 * shard lacks into m->rbuf, each ring reference's body read back and
 * appended after its record (for sbatch_add). Returns their bytes, or
 * (size_t)-1 if a ring body does not verify, -2 on a read error (failure
 * recorded). */
static size_t
mut_replay_expand(StoreMut *m, uint64_t group, const unsigned char *p,
                  size_t len)
{
    size_t have = 0;
    char err[256];

    for (size_t off = 0; off < len;) {
        EncRec r;
        enc_rec_get(p + off, &r);
        size_t jl = enc_rec_jlen(&r);
        if (group > m->shard[store_shard_of(r.id, m->nshards)].jgroup) {
            memcpy(mut_rbuf(m, have, jl), p + off, jl);
            have += jl;
            if (r.ref) {
                const unsigned char *q = p + off + ENC_REC_HDR + r.meta_len;
                StoreRingRef ref = enc_ring_ref_get(q);
                if (ref.len != r.body_len) return (size_t)-1;
                int rc =
                    bodyring_read(m->ring, &ref, mut_rbuf(m, have, r.body_len),
                                  err, sizeof err);
                if (rc < 0) {
                    ack_fail(m->ack, "commit journal", -1, strdup(err));
                    return (size_t)-2;
                }
                if (rc > 0) return (size_t)-1;
                have += r.body_len;
            }
        }
        off += jl;
    }
    return have;
}

int
mut_replay(void *arg, uint64_t group, const unsigned char *p, size_t len,
           uint32_t nrec)
{
    StoreMut *m = arg;
    uint64_t seq;
    (void)nrec;

    m->sb.replay = 1; /* until mut_replay_end */
    size_t n = mut_replay_expand(m, group, p, len);
    if (n == (size_t)-1) return 1;
    if (n == (size_t)-2) return -1;
    for (size_t off = 0; off < n;) { /* each ring body after its record */
        EncRec r;
        size_t rl = enc_rec_get(m->rbuf + off, &r);
        sbatch_add(&m->sb, m->rbuf + off, r.ref ? m->rbuf + off + rl : NULL,
                   &seq);
        off += rl + (r.ref ? r.body_len : 0);
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

    m->sb.replay = 0;
    if (top_group > m->group) m->group = top_group;
    for (int i = 0; i < m->nshards; i++)
        if (m->shard[i].jgroup > m->group) m->group = m->shard[i].jgroup;
    m->journal = j;
    return rc;
}
