/* store/mutreplay.h - the commit journal's replay (PROTOCOL.md 11.5): at
 * start-up, before the mutation thread starts, the records of each journal
 * group that a shard does not hold yet (StoreShard.jgroup) are written to
 * it through the mutation thread's batches (store/mut.h), a ring put's
 * body read back from the body ring (store/bodyring.h). Main thread only.
 */
#ifndef ROCKSTALK_STORE_MUTREPLAY_H
#define ROCKSTALK_STORE_MUTREPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "store/journal.h"
#include "store/mut.h"

/* Main thread, before mut_start: one journal record (journal_replay's
 * JournalReplayFn; ctx is m): its records whose shard does not hold the
 * group yet (StoreShard.jgroup) are written to RocksDB, unsynced, a ring
 * reference's body read back from m->ring. Returns 0, 1 (nothing
 * written) if such a body does not verify (store/bodyring.h), or -1
 * after recording the failure (store_ack). */
int mut_replay(void *m, uint64_t group, const unsigned char *p, size_t len,
               uint32_t nrec);

/* Main thread, after the replay: syncs every shard the replay wrote and
 * makes m number its groups from above every group seen (the shards'
 * jgroup and top_group, the journal's highest); j: the commit journal the
 * groups go to from now on (NULL: none). Returns 0, or -1 after recording
 * the failure. */
int mut_replay_end(StoreMut *m, Journal *j, uint64_t top_group);

#endif
