/* store/propose.c - cluster mode's Raft entries (see store/propose.h). */
#include "store/propose.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/enc.h"
#include "store/raft.h"
#include "store/util.h"

/* Cluster mode (loop thread): proposes the entry built in ebuf, with
 * publish seq pseq. While the Raft node's queue is full it waits (the
 * loop throttles its input well before: server.c counts the queue in its
 * backlog), up to 10 s, then stops the store: the loop's state holds the
 * change, so dropping it would be a lie. A refused entry is dropped: its
 * changes are never acknowledged (the loop leaves a leadership it lost,
 * node.h). */
static void
emit(Proposer *p, StoreAck *ack, uint64_t pseq)
{
    int rc;

    if (!p->enrec) return;
    if (p->refused) { /* past a gap: dropped, as the refused one */
        p->elen = SRAFT_HDR;
        p->enrec = 0;
        return;
    }
    sraft_entry_header(p->ebuf, p->elen, p->node_id, p->enrec, pseq);
    for (int tries = 0;
         (rc = p->fn(p->arg, p->ebuf, p->elen)) == 1 && tries < 10000; tries++)
        usleep(1000);
    if (rc == 1)
        ack_fail(ack, "raft", -1,
                 strdup("the Raft node took no proposal for 10 s"));
    if (rc == -1) p->refused = 1; /* the node restarts (cluster/node.c) */
    p->elen = SRAFT_HDR;
    p->enrec = 0;
}

/* The entry in ebuf is full and the next record continues the sequence
 * last, whose records start at sstart (> SRAFT_HDR; snrec of them):
 * proposes what comes before them (publishing the sequence before it)
 * and starts the next entry with them, so that no sequence is cut (a
 * move's put and delete, PROTOCOL.md 18.15). */
static void
emit_before(Proposer *p, StoreAck *ack, size_t sstart, uint32_t snrec,
            uint64_t last)
{
    size_t tail = p->elen - sstart;
    p->elen = sstart;
    p->enrec -= snrec;
    emit(p, ack, last - 1);
    memmove(p->ebuf + SRAFT_HDR, p->ebuf + sstart, tail);
    p->elen = SRAFT_HDR + tail;
    p->enrec = snrec;
}

/* Makes room for a record of rl bytes of sequence seq in the entry being
 * built: proposes it first when full, carrying the records of a sequence
 * the record continues to the next entry (one larger than an entry is
 * cut, its sequence published by the entry that ends it). *sstart and
 * *snrec: where the current sequence's records begin, and how many. */
static void
room(Proposer *p, StoreAck *ack, size_t rl, uint64_t seq, uint64_t last,
     size_t *sstart, uint32_t *snrec)
{
    if (p->elen + rl <= p->ecap) return;
    if (seq == last && *sstart > SRAFT_HDR) {
        emit_before(p, ack, *sstart, *snrec, last);
        *sstart = SRAFT_HDR;
        if (p->elen + rl <= p->ecap) return;
    }
    emit(p, ack, seq == last ? last - 1 : last);
    *sstart = SRAFT_HDR;
    *snrec = 0;
}

/* Cluster mode: the group's records become entries of at most
 * STORE_RAFT_ENTRY_MAX bytes, cut only between two sequences (an entry
 * publishes the last sequence it holds whole), each proposed. A record
 * that fits in no entry stops the store (the loop caps job sizes so that
 * none is). */
void
propose_chunks(Proposer *p, StoreAck *ack, const Chunk *chunks, uint64_t seq)
{
    uint64_t last = 0;
    size_t sstart = SRAFT_HDR; /* where the records of last begin */
    uint32_t snrec = 0;        /* ...how many */
    EncRec r;

    if (!p->ebuf) {
        p->ecap = STORE_RAFT_ENTRY_MAX;
        p->ebuf = util_xrealloc(NULL, p->ecap);
    }
    p->elen = SRAFT_HDR;
    p->enrec = 0;
    for (const Chunk *c = chunks; c; c = c->next) {
        for (size_t off = c->start; off < c->len;) {
            size_t rl = enc_rec_get(c->p + off, &r);
            if (rl > p->ecap - SRAFT_HDR) {
                ack_fail(ack, "raft entry", -1,
                         strdup("a record larger than a Raft entry"));
                return;
            }
            if (r.seq != last) sstart = p->elen, snrec = 0;
            room(p, ack, rl, r.seq, last, &sstart, &snrec);
            memcpy(p->ebuf + p->elen, c->p + off, rl);
            p->elen += rl;
            p->enrec++;
            snrec++;
            last = r.seq;
            off += rl;
        }
    }
    emit(p, ack, seq);
}

void
propose_free(Proposer *p)
{
    free(p->ebuf);
    p->ebuf = NULL;
    p->elen = p->ecap = 0;
}
