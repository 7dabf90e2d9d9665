/* rafttune.h - two workarounds for what libraft 0.15 does by itself, for
 * the Raft node (raftnode.c), each measured in make bench:
 *
 *   nodelay   its uv TCP transport leaves Nagle's algorithm on, so a small
 *             AppendEntries or its reply waits for the peer's delayed ACK
 *             (up to 40 ms; the cluster's p99 was 44 ms). It offers no
 *             hook: every RAFTTUNE_NODELAY_MS a timer sets TCP_NODELAY on
 *             every TCP handle of the loop (uv_walk). Its connections are
 *             long-lived; a new one runs with Nagle for at most that long.
 *   log bound it keeps the log since its last snapshot, and
 *             snapshot_trailing entries before it, in memory, counted in
 *             entries of up to 4 MiB. Once max_bytes were applied
 *             since the last snapshot, the threshold drops to what was
 *             applied, so libraft snapshots right after that apply; at a
 *             snapshot the entries kept behind it become what
 *             max_bytes holds at their mean size (16 to the
 *             option's), and the threshold the option's again.
 *
 * Threads: the raft thread only (every call on the thread running the
 * loop, as libraft's own). Calls: libraft, libuv (a leaf of the project).
 */
#ifndef ROCKSTALK_RAFTTUNE_H
#define ROCKSTALK_RAFTTUNE_H

#include <stddef.h>
#include <stdint.h>

#include <raft.h>
#include <uv.h>

#define RAFTTUNE_NODELAY_MS 100

typedef struct RaftTune {
    struct raft *raft;  /* borrowed */
    unsigned threshold; /* the options' snapshot threshold, entries */
    unsigned trailing;  /* ... and trailing entries */
    uint64_t max_bytes; /* bytes of log that trigger a snapshot early */
    uv_timer_t nodelay; /* the TCP_NODELAY walk */
    uint64_t log_bytes; /* bytes applied since the last snapshot */
    uint64_t log_count; /* entries applied since the last snapshot */
    int seed;           /* the next snapshot keeps no entries behind it */
} RaftTune;

/* Starts the nodelay timer on loop (with the loop's other handles, before
 * libraft is set up: rafttune_close is then always right). */
void rafttune_start(RaftTune *t, uv_loop_t *loop);

/* Once raft_init succeeded: sets libraft's snapshot threshold and
 * trailing to the options' (entries) and bounds the log to max_bytes
 * from then on. */
void rafttune_attach(RaftTune *t, struct raft *raft, unsigned threshold,
                     unsigned trailing, uint64_t max_bytes);

/* Once attached, for a node that seeds a new cluster: its next snapshot
 * comes after the first applied entry and keeps no entries behind it, so
 * a node that joins gets the snapshot, not the log from its start. */
void rafttune_seed(RaftTune *t);

/* Closes the timer (uv_close; the loop ends once it is closed). */
void rafttune_close(RaftTune *t);

/* After each applied entry of len bytes. */
void rafttune_applied(RaftTune *t, size_t len);

/* In the FSM's snapshot, before it returns (libraft truncates after). */
void rafttune_snapshot_taken(RaftTune *t);

#endif
