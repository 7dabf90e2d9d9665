/* place.h - where the daemon's threads run (--loop-cpus, --store-cpus,
 * --cpus auto; rockstalkd(1), base/cpus.h): the plan made at start-up, the
 * store's threads started bound to the store's CPUs (they inherit the
 * starting thread's affinity), then the loop thread bound to its own.
 * Threads started earlier (RocksDB's pool, the HTTP server) or later by the
 * loop are not placed by it. Start-up, on the main thread only. */
#ifndef ROCKSTALK_PLACE_H
#define ROCKSTALK_PLACE_H

#include <sched.h>
#include <stddef.h>

#include "queue/state.h"

/* What place_plan decided. */
typedef struct Placement {
    cpu_set_t loop, store; /* the CPUs of the loop, of the store's threads */
    int loop_on, store_on; /* ...to be applied */
    cpu_set_t saved;       /* the main thread's CPUs before
                              place_store_begin */
    int saved_on;
} Placement;

/* Makes the plan from cfg->cpus: the lists given, and with --cpus auto the
 * CPUs of the data directory's disk interrupts for the store and the rest
 * for the loop (for the side not given). Logs one line saying what it
 * chose or, for auto, why it places nothing. The environment variable
 * ROCKSTALKD_TEST_SYSROOT (tests only) replaces / for sysfs and /proc. */
void place_plan(const ServerConfig *cfg, Placement *p);

/* Binds the calling (main) thread to the store's CPUs, if any, before it
 * starts the store's threads. Returns 0, or -1 with a message. */
int place_store_begin(Placement *p, char *err, size_t errcap);

/* After the store's threads started: binds the calling thread to the
 * loop's CPUs, or back to its CPUs before place_store_begin. Returns 0,
 * or -1 with a message. */
int place_loop(Placement *p, char *err, size_t errcap);

#endif
