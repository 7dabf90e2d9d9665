/* import.h - --import-binlog: moves beanstalkd's live jobs into a new data
 * directory before the server starts (rockstalkd(1), "Moving in from
 * beanstalkd"). The binlog is read by server/bsbinlog.h; every job goes in
 * through the store's own write path (store_add_put), and the store is
 * closed, so synced, before the usual recovery loads it. Main thread,
 * before the store is opened for serving. */
#ifndef ROCKSTALK_SERVER_IMPORT_H
#define ROCKSTALK_SERVER_IMPORT_H

#include <stddef.h>

#include "queue/state.h"

/* Imports cfg->import_dir's binlog into cfg->dir, which must be missing or
 * empty; refuses while a beanstalkd holds the binlog directory's lock. Logs
 * what it imported (jobs by state, tubes, files, the next id). The stored
 * high-water mark makes the next id one more than the highest id in any
 * record. Returns 0, or -1 with a message in err (nothing imported is then
 * left to serve: the data directory may hold a partial store, and a second
 * try refuses it as not empty). */
int import_binlog(const ServerConfig *cfg, char *err, size_t errcap);

#endif
