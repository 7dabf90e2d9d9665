/* bodycache.c - see bodycache.h. */
#include "queue/bodycache.h"

#include <stdlib.h>
#include <string.h>

/* How many of the jobs a tube hands out next have their bodies read
 * ahead: a few loop iterations' worth of reserves of 50 workers. */
#define READ_AHEAD 128

static void
body_drop(BodyCache *bc, Job *j)
{
    bc->bytes -= (size_t)j->body_size + 2;
    free(j->body);
    j->body = NULL;
}

void
bodycache_added(BodyCache *bc, Job *j, uint64_t seq, int keep)
{
    bc->bytes += (size_t)j->body_size + 2;
    if (!keep || bc->bytes <= bc->max) return;
    if (bc->dlen == bc->dcap) {
        size_t ncap = bc->dcap ? bc->dcap * 2 : 1024;
        struct BodyDrop *d = malloc(ncap * sizeof *d);
        if (!d) return; /* keep the body: over budget, never wrong */
        for (size_t i = 0; i < bc->dlen; i++)
            d[i] = bc->drops[(bc->dhead + i) % bc->dcap];
        free(bc->drops);
        bc->drops = d;
        bc->dcap = ncap;
        bc->dhead = 0;
    }
    bc->drops[(bc->dhead + bc->dlen++) % bc->dcap] =
        (struct BodyDrop){.seq = seq, .id = j->id};
}

void
bodycache_used(BodyCache *bc, Job *j)
{
    if (j->body && (j->flags & JOB_F_STORED) && bc->bytes > bc->max)
        body_drop(bc, j);
}

void
bodycache_forget(BodyCache *bc, const Job *j)
{
    if (j->body) bc->bytes -= (size_t)j->body_size + 2;
}

void
bodycache_drop_acked(BodyCache *bc, const JobTable *jobs, uint64_t acked)
{
    while (bc->dlen && bc->drops[bc->dhead].seq <= acked) {
        Job *j = jobtable_find(jobs, bc->drops[bc->dhead].id);
        if (j && j->body) body_drop(bc, j);
        bc->dhead = (bc->dhead + 1) % bc->dcap;
        bc->dlen--;
    }
    if (bc->dlen == 0 && bc->dcap > 1024) {
        free(bc->drops);
        bc->drops = NULL;
        bc->dcap = bc->dhead = 0;
    }
}

/* Keeps one body the reader read for j; 0 if it was not kept. */
static int
keep(BodyCache *bc, Job *j, PrefetchResult *r)
{
    char *b = NULL;
    if (j && !j->body && r->body && r->len == j->body_size)
        b = realloc(r->body, r->len + 2);
    if (!b) {
        free(r->body);
        return 0;
    }
    memcpy(b + r->len, "\r\n", 2);
    j->body = b;
    j->flags |= JOB_F_STORED;
    bc->bytes += r->len + 2;
    return 1;
}

void
bodycache_take(BodyCache *bc, const JobTable *jobs)
{
    PrefetchResult *r;
    size_t n = bc->reader ? prefetch_take(bc->reader, &r) : 0;

    for (size_t i = 0; i < n; i++) {
        Job *j = jobtable_find(jobs, r[i].id);
        bc->asked -= r[i].cost;
        int needed = j && (j->flags & JOB_F_NEEDED);
        if (j) j->flags &= (uint8_t) ~(JOB_F_FETCHING | JOB_F_NEEDED);
        if (keep(bc, j, &r[i]))
            bc->prefetched += !needed;
        else if (j && !j->body && needed)
            j->flags |= JOB_F_UNREADABLE;
    }
}

int
bodycache_fetch(BodyCache *bc, Job *j, int first)
{
    uint64_t id = j->id;
    size_t cost = (size_t)j->body_size + 2;
    bc->misses += first != 0;
    j->flags = (uint8_t)((j->flags | JOB_F_NEEDED) & ~JOB_F_UNREADABLE);
    if (j->flags & JOB_F_FETCHING) return 0;
    if (!bc->reader || prefetch_request(bc->reader, &id, &cost, 1) != 1)
        return -1;
    j->flags |= JOB_F_FETCHING;
    bc->asked += cost;
    return 0;
}

void
bodycache_read_ahead(BodyCache *bc, Tube *t, uint32_t iter)
{
    void *next[READ_AHEAD]; /* then, from 0: the ones to ask for */
    uint64_t ids[READ_AHEAD];
    size_t costs[READ_AHEAD], m = 0;
    size_t slack = bc->max / 8 > ((size_t)1 << 20) ? bc->max / 8 : 1 << 20;
    size_t room = bc->max + slack, bytes = bc->bytes + bc->asked;

    if (!bc->reader || t->prefetch_iter == iter) return;
    t->prefetch_iter = iter;
    size_t n = heap_first(&t->ready, next, READ_AHEAD);
    for (size_t i = 0; i < n; i++) {
        Job *j = next[i];
        if (j->body || (j->flags & JOB_F_FETCHING)) continue;
        size_t cost = (size_t)j->body_size + 2;
        if (bytes + cost > room) break;
        bytes += cost;
        next[m] = j;
        ids[m] = j->id;
        costs[m++] = cost;
    }
    m = prefetch_request(bc->reader, ids, costs, m);
    for (size_t i = 0; i < m; i++) {
        ((Job *)next[i])->flags |= JOB_F_FETCHING;
        bc->asked += costs[i];
    }
}

void
bodycache_free(BodyCache *bc)
{
    free(bc->drops);
    bc->drops = NULL;
    bc->dcap = bc->dlen = bc->dhead = 0;
}
