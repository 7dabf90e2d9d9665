/* store/propose.h - cluster mode's Raft entries (PROTOCOL.md 15): the
 * records the loop hands to the store are cut into entries of at most
 * STORE_RAFT_ENTRY_MAX bytes, only between two sequences (a move's put and
 * delete, PROTOCOL.md 18.15), each publishing the last sequence it holds
 * whole, and proposed through the Raft node's propose function.
 *
 * Threads: the loop thread only (handoff_direct's fn, store/mut.h
 * mut_propose_direct). Calls: store_raft (the entry header), store_enc
 * (records), store_ack (fail-stop), store_util.
 */
#ifndef ROCKSTALK_STORE_PROPOSE_H
#define ROCKSTALK_STORE_PROPOSE_H

#include <stddef.h>
#include <stdint.h>

#include "store/ack.h"
#include "store/handoff.h"
#include "store/types.h"

/* The proposing side of a cluster-mode store; lives in the StoreMut, set
 * by store_cluster_mode (fn, arg, node_id), zeroed in standalone mode. */
typedef struct Proposer {
    StoreProposeFn fn; /* NULL: standalone */
    void *arg;
    uint16_t node_id;    /* the entries' origin */
    unsigned char *ebuf; /* the entry being built (malloc'd, owned) */
    size_t elen, ecap;   /* its bytes, its capacity */
    uint32_t enrec;      /* its records */
    int refused;         /* fn refused an entry: nothing more is proposed
                            (a later entry would publish past the gap,
                            acknowledging the dropped one) */
} Proposer;

/* Proposes the records of chunks (a list) as entries (see above), the
 * last one publishing seq. While the Raft node's queue is full (fn returns
 * 1) it waits, up to 10 s, then fails the store through ack; an entry fn
 * refuses (-1) is dropped, and so is everything after it; a record larger
 * than an entry fails the store. */
void propose_chunks(Proposer *p, StoreAck *ack, const Chunk *chunks,
                    uint64_t seq);

/* Frees p's entry buffer (p stays usable). */
void propose_free(Proposer *p);

#endif
