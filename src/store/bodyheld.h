/* store/bodyheld.h - held files: the body ring's generations that still
 * hold live bodies when their ring file is wanted again (issue 30, "big
 * beside small"; protocol/PROTOCOL.md, section 11.5).
 *
 * A ring body is never copied into RocksDB while it runs: the job's ring
 * reference (ring CF, written with the WAL) is its body's home, and
 * readers (store_get_body, store_get_bodies, a backup's stream) read it
 * from the ring. Before the writer starts a new generation in ring file i
 * (a cover, store/bodyring.c), held_cover counts the live references of
 * every shard's ring CF and syncs the WALs: if any points at the generation
 * file i holds (or a backup pins the files), the file is renamed
 * <dir>/held-<gen> and a new, empty ring file takes its place; else it is
 * overwritten in place. In the same cover a held file none of whose jobs is
 * alive is deleted (renamed dead-<gen> and left to the reaper,
 * store/bodyreap.h, which frees it a few MiB at a time off the writer's
 * path), and a held file whose live bodies fill less than a quarter of it
 * at this cover and the one before is queued for its copy-out on the
 * reaper's thread (held_copy): each live body put into the body CF and its
 * reference removed, in one batch with the WAL, under StoreMut.wmu so that
 * no delete of the job slips between the check and the write, then the
 * WALs synced; the files pinned meanwhile, so that no cover deletes or
 * reuses a file whose bodies are being read. The emptied file then
 * becomes a spare file: its first RING_ALIGN bytes zeroed (synced),
 * renamed <dir>/spare-<gen> (RING_SPARE_MAX at most; past that the
 * reaper deletes it, and if a backup pins the files it stays held for a
 * later cover). A cover that must keep a ring file's generation puts in
 * its place a held file none of whose jobs is alive, else a spare, else
 * a new file: a reused file's blocks are written again rather than freed
 * and allocated anew (with a steady flow of large jobs of which some are
 * kept, the large producers made 1.5 times as many puts). A held file
 * reused so has its head zeroed first, as a spare's was: a ring file's
 * entries from offset 0 are its current generation's, and the stale ones
 * after them, which may repeat bodies a copy-out moved into RocksDB,
 * carry another generation, which no reference matches. So the large
 * producers, who wait for every cover, never wait for a copy-out, and the
 * disk held is at most four times the live bodies', plus the ring, plus
 * the sparse held files waiting their second cover (jobs that go in order
 * empty those meanwhile) or their copy-out, plus RING_SPARE_MAX spare
 * files, plus the dead files the reaper has not freed yet
 * (store/bodyreap.h).
 *
 * At start-up (bodyring_restore, after the journal's replay) the header
 * of every live ring body's entry is checked, the ring files live jobs
 * refer to become held files, put in their places the held files none
 * refers to (the others deleted), then spare files, so a run starts with
 * every ring file free and copies nothing; a run without the ring copies
 * every live ring body into RocksDB instead and deletes the spare files
 * too.
 *
 * Threads: bodyring_restore on the main thread; held_cover on the writer
 * thread (BodyRing.cover_hook); held_copy on the reaper's; bodyring_pin
 * and bodyring_unpin on any thread (a backup's, a copy-out's). Readers of
 * the files take BodyRing.flk shared (bodyring_read); whoever changes them
 * takes it exclusive.
 */
#ifndef ROCKSTALK_STORE_BODYHELD_H
#define ROCKSTALK_STORE_BODYHELD_H

#include <stddef.h>
#include <stdint.h>

#include "store/bodyring.h"
#include "store/shard.h"

/* BodyRing.cover_hook (the store sets it): writer thread, before ring
 * file i takes a new generation, every record that may refer to the one
 * it holds applied. Counts the live references, syncs every shard's WAL
 * (so that every delete the count saw is durable before a file goes),
 * keeps that generation as a held file if a live job still refers to it
 * or a backup pins the files (a held file without live jobs, else a
 * spare, else a new file taking its place), deletes the other held files
 * without live jobs and queues the copy-out of the sparse ones (above).
 * Returns 0, or -1 after ack_fail. */
int held_cover(BodyRing *r, int i);

/* BodyCopyFn (store/bodyreap.h; the store sets it, ctx the BodyRing):
 * reaper thread. Copies every live body of held generation gen into its
 * shard's body CF, removing its reference, then syncs every shard's WAL;
 * the files pinned meanwhile; then the file becomes a spare (above).
 * Ends early once the reaper is asked to stop (the file stays held for
 * the next start). Returns 0, or -1 after ack_fail. */
int held_copy(void *ctx, uint64_t gen);

/* Main thread, after the journal's replay, before bodyring_reset. A ring
 * reference whose body the body CF holds (an older server's copy) is
 * removed. With the ring on (r->min), every other live reference's entry
 * header must verify (bodyring_read without a body); the ring files such
 * references point into are renamed held files and the held files none
 * points into deleted. With the ring off, every live ring body is read
 * back, verified and put into its shard's body CF with its reference's
 * removal (synced writes), and every held file is deleted. A reference
 * whose entry does not verify is a hard error, never a wrong body. Counts
 * the live ring bodies in r->restored. Returns 0, or -1 with a message in
 * err (naming the job). */
int bodyring_restore(BodyRing *r, const StoreShard *shard, int nshards,
                     char *err, size_t errcap);

/* Any thread: while pinned (a count), no file is overwritten or deleted
 * (a cover keeps the generation as a held file instead), so that the
 * references of a snapshot taken after bodyring_pin stay readable. */
void bodyring_pin(BodyRing *r);
void bodyring_unpin(BodyRing *r);

#endif
