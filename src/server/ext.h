/* ext.h - rockstalk's protocol extensions beyond beanstalkd 1.12 that are
 * more than a variant of a 1.12 command: list-jobs and clear-tube
 * (reserve-batch lives with reserve in cmd.c). Grammar and replies:
 * protocol/PROTOCOL.md, "Extensions". Part of the command layer. Loop
 * thread only. */
#ifndef ROCKSTALK_EXT_H
#define ROCKSTALK_EXT_H

#include "conn/conn.h"
#include "proto/proto.h"

/* Jobs clear-tube deletes per connection and loop pass: bounds the time
 * one pass spends, so other clients are served between passes. */
#define CLEAR_PER_PASS 512

/* Sets up the idle watcher that keeps the loop turning while a clear-tube
 * works. */
void ext_init(Server *s);

/* list-jobs <tube> <state> <count>: OK with a YAML list of up to count job
 * ids in the order the server would act on them; NOT_FOUND without the
 * tube. Costs O(count log count), or for reserved a walk over all leases. */
void ext_list_jobs(Conn *c, const Cmd *cmd);

/* clear-tube <tube>: pauses c and deletes the tube's ready, delayed and
 * buried jobs, at most CLEAR_PER_PASS a loop pass (ext_clear_step) and
 * each step only once the store has acknowledged the one before (every
 * reply waits for what was applied before it, so the store's backlog, and
 * with it every client's wait, stays one step long); at most as many as
 * the tube held when it began; then CLEARED <n>, once the store has
 * acknowledged every delete. NOT_FOUND without the tube. */
void ext_clear_tube(Conn *c, const Cmd *cmd);

/* Once per loop pass: one step of every clear-tube under way. */
void ext_clear_step(Server *s);

/* c is closing: ends its clear-tube, if any (what it deleted stays
 * deleted). */
void ext_clear_cancel(Conn *c);

#endif
