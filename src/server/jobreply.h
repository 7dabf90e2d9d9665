/* jobreply.h - the replies that show jobs: FOUND, RESERVED and an
 * extension's RESERVED_BATCH. A body that is only on disk is never read
 * here: the connection's input pauses while the reader thread reads it
 * (bodycache.h), and the reply is made once every body has arrived. Part
 * of the command layer (with cmd.c and ext.c). Loop thread only. */
#ifndef ROCKSTALK_JOBREPLY_H
#define ROCKSTALK_JOBREPLY_H

#include <stddef.h>

#include "conn/conn.h"
#include "queue/job.h"

/* Kinds of job reply. */
enum {
    JR_FOUND = 0,    /* FOUND <id> <bytes> (a peek): the job is not held */
    JR_RESERVED = 1, /* RESERVED <id> <bytes>: c holds the job */
    JR_BATCH = 2,    /* RESERVED_BATCH <n>, then n RESERVED blocks: c holds
                        every job (reserve-batch) */
};

/* Appends the reply showing jobs[0..n) (n >= 1; n == 1 unless JR_BATCH),
 * or pauses c until their bodies are in memory. A job reply leaves only
 * once the store has acknowledged the latest change of every job in it.
 * If meanwhile a held job's lease ended it is left out (a batch) or the
 * reply is INTERNAL_ERROR; a peeked job that is gone gives NOT_FOUND; a
 * body that cannot be read buries a held job (queue_body_unreadable) and
 * is left out or gives INTERNAL_ERROR. A held job's TTR restarts when its
 * reply is made. */
void jobreply_send(Conn *c, int kind, Job **jobs, size_t n);

/* In cluster mode, when this leader's leadership is not confirmed now
 * (node_lease_ok: its lease has run out, say after a pause or while cut
 * off), stores each of jobs[0..n) again as it is (a change that changes
 * nothing): a reply about them made after this leaves only once that
 * change has committed in this leader's term, a read barrier through Raft
 * that a deposed leader never passes. Standalone or with a lease: nothing.
 * Call it after the state the reply shows was read. */
void jobreply_confirm(Server *s, Job **jobs, size_t n);

/* The same for a reply about no job in particular (stats, stats-tube,
 * list-jobs, NOT_FOUND of a peek or stats-job): without a lease, rewrites one
 * job of any tube (ready, delayed or buried), or, holding none, persists a
 * barrier record (queue_persist_barrier), so that the reply appended next
 * waits for a commit (PROTOCOL.md 15.7). */
void jobreply_confirm_any(Server *s);

/* Loop thread, once per iteration after bodycache_take: completes the
 * replies whose bodies have arrived (or failed), asks the reader again
 * for bodies it could not take yet. */
void jobreply_done(Server *s);

/* c is closing: forgets its waiting reply, if any. */
void jobreply_cancel(Conn *c);

#endif
