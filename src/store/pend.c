/* store/pend.c - the commit journal's write-behind window (see
 * store/pend.h). */
#include "store/pend.h"

#include <stdlib.h>
#include <string.h>

#include "store/enc.h"
#include "store/util.h"

void
pend_init(Pend *p)
{
    *p = (Pend){0};
    p->tail = &p->head;
}

void
pend_destroy(Pend *p, Handoff *h)
{
    for (PendGroup *g = p->head, *next; g; g = next) {
        next = g->next;
        handoff_recycle(h, g->chunks);
        free(g);
    }
    free(p->tab);
    pend_init(p);
}

/* ---- the id table ---- */

static size_t
slot_of(const Pend *p, uint64_t id)
{
    size_t i = (size_t)(id * 0x9e3779b97f4a7c15ull) & (p->cap - 1);

    while (p->tab[i].id && p->tab[i].id != id)
        i = (i + 1) & (p->cap - 1);
    return i;
}

static void
tab_grow(Pend *p)
{
    PendSlot *old = p->tab;
    size_t n = p->cap;

    p->cap = n ? 2 * n : 1024;
    p->tab = util_xrealloc(NULL, p->cap * sizeof *p->tab);
    memset(p->tab, 0, p->cap * sizeof *p->tab);
    for (size_t i = 0; i < n; i++)
        if (old[i].id) p->tab[slot_of(p, old[i].id)] = old[i];
    free(old);
}

/* Removes slot i, shifting later slots of its probe run back. */
static void
tab_remove(Pend *p, size_t i)
{
    size_t mask = p->cap - 1;

    p->tab[i].id = 0;
    p->len--;
    for (size_t j = (i + 1) & mask; p->tab[j].id; j = (j + 1) & mask) {
        size_t home = (size_t)(p->tab[j].id * 0x9e3779b97f4a7c15ull) & mask;
        /* move j to i if its home is not in (i, j] (cyclically) */
        if ((j > i && (home <= i || home > j)) ||
            (j < i && home <= i && home > j)) {
            p->tab[i] = p->tab[j];
            p->tab[j].id = 0;
            i = j;
        }
    }
}

/* ---- records ---- */

/* The header's seq field, once the group is published, holds the job's
 * previous pending record (NULL for its put). */
static unsigned char *
rec_prev(const unsigned char *r)
{
    unsigned char *prev;

    memcpy(&prev, r + ENC_REC_SEQ, sizeof prev);
    return prev;
}

static void
rec_set_prev(unsigned char *r, unsigned char *prev)
{
    memcpy(r + ENC_REC_SEQ, &prev, sizeof prev);
}

/* One record of a group being added. */
static void
add_rec(Pend *p, unsigned char *r)
{
    EncRec e;
    enc_rec_get(r, &e);
    if (e.op == ENC_OP_PUT) {
        if (2 * (p->len + 1) > p->cap) tab_grow(p);
        size_t i = slot_of(p, e.id);
        rec_set_prev(r, NULL);
        p->tab[i] = (PendSlot){e.id, r};
        p->len++;
        return;
    }
    if (!p->len) return;
    size_t i = slot_of(p, e.id);
    if (!p->tab[i].id) return; /* its put is written already */
    if (e.op == ENC_OP_UPDATE) {
        rec_set_prev(r, p->tab[i].rec);
        p->tab[i].rec = r;
        return;
    }
    /* a delete of a job whose whole life is in the window */
    for (unsigned char *x = p->tab[i].rec; x; x = rec_prev(x)) {
        x[ENC_REC_OP] = 0;
        p->cancelled++;
    }
    r[ENC_REC_OP] = 0;
    p->cancelled++;
    tab_remove(p, i);
}

void
pend_add(Pend *p, Chunk *chunks, uint64_t group, uint64_t seq, size_t bytes,
         int64_t now_ns)
{
    PendGroup *g = util_xrealloc(NULL, sizeof *g);

    for (Chunk *c = chunks; c; c = c->next)
        for (size_t off = c->start; off < c->len;
             off += enc_rec_len(c->p + off))
            add_rec(p, c->p + off);
    *g = (PendGroup){.chunks = chunks,
                     .group = group,
                     .seq = seq,
                     .at_ns = now_ns,
                     .bytes = bytes};
    *p->tail = g;
    p->tail = &g->next;
    p->bytes += bytes;
}

/* Forgets the jobs of g's live records: their lives began outside what
 * stays in the window, so no later delete may cancel them. */
static void
forget(Pend *p, const PendGroup *g)
{
    EncRec e;

    for (const Chunk *c = g->chunks; c && p->len; c = c->next) {
        for (size_t off = c->start; off < c->len;) {
            off += enc_rec_get(c->p + off, &e);
            if (e.op != ENC_OP_PUT && e.op != ENC_OP_UPDATE) continue;
            size_t i = slot_of(p, e.id);
            if (p->tab[i].id) tab_remove(p, i);
        }
    }
}

PendGroup *
pend_take(Pend *p, int64_t now_ns, int force, uint64_t upto, int more)
{
    PendGroup *g = p->head;
    int64_t window = PEND_WINDOW_NS - (more ? PEND_BATCH_NS : 0);
    size_t max = PEND_MAX_BYTES - (more ? PEND_BATCH_BYTES : 0);

    if (!g || (!force && p->bytes <= max && g->group > upto &&
               now_ns - g->at_ns < window))
        return NULL;
    p->head = g->next;
    if (!p->head) p->tail = &p->head;
    p->bytes -= g->bytes;
    g->next = NULL;
    forget(p, g);
    return g;
}

int
pend_due(const Pend *p, int64_t now_ns)
{
    return p->head && (p->bytes > PEND_MAX_BYTES ||
                       now_ns - p->head->at_ns >= PEND_WINDOW_NS);
}

int64_t
pend_deadline(const Pend *p)
{
    return p->head ? p->head->at_ns + PEND_WINDOW_NS : INT64_MAX;
}
