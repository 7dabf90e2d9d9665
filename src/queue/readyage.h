/* readyage.h - the oldest ready job of a tube, for the HTTP API's
 * oldest-ready-age (protocol/PROTOCOL.md 18.5), without a pass over the
 * tube's ready jobs. Ids are given in put order (Server.next_id, and a
 * restart continues above the highest), so the oldest ready job is the
 * one with the least id. Each tube keeps a min-heap of the ids of jobs
 * that entered its ready heap (Tube.age); entries of jobs that left are
 * dropped lazily when they reach the top, and the heap is rebuilt from
 * the ready jobs once it holds more than twice as many entries (plus 64):
 * O(log n) amortized per ready insert and per query, at most 2n + 64
 * entries of 8 bytes. Only a server with an HTTP API (--http, the only
 * reader) keeps these heaps: queue_make_ready pushes only then, which
 * saves 8 bytes per ready job (8 MiB at 1M) everywhere else. Loop thread
 * only. */
#ifndef ROCKSTALK_READYAGE_H
#define ROCKSTALK_READYAGE_H

#include "queue/job.h"
#include "queue/state.h"
#include "queue/tube.h"

/* j has just entered its tube's ready heap (called only with --http).
 * Aborts out of memory. */
void readyage_push(Tube *t, const Job *j);

/* The ready job of t with the least id, or NULL when none is ready.
 * Needs every push since the start (a server with --http). */
const Job *readyage_oldest(const Server *s, Tube *t);

#endif
