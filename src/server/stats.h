/* stats.h - the YAML bodies of stats, stats-job, stats-tube, list-tubes and
 * list-tubes-watched, with beanstalkd 1.12's keys in its order (our own keys
 * after the last standard one). Loop thread only. */
#ifndef ROCKSTALK_STATS_H
#define ROCKSTALK_STATS_H

#include <stddef.h>

#include "base/ptrset.h"
#include "http/json.h"
#include "queue/job.h"
#include "queue/state.h"
#include "queue/tube.h"

/* A growable text buffer; the caller frees it with stats_buf_free. */
typedef struct StatsBuf {
    char *buf;
    size_t len, cap;
} StatsBuf;

/* Each appends a complete body ("---\n" ... "\r\n") to b; on allocation
 * failure the process aborts. stats_server names every --auth-file
 * identity with its connection count only when identities is nonzero (the
 * asker may see them all). */
void stats_server(Server *s, int identities, StatsBuf *b);
void stats_job(const Server *s, const Job *j, StatsBuf *b);
void stats_tube(const Tube *t, StatsBuf *b);
void stats_list(const PtrSet *tubes, StatsBuf *b);

/* Appends the Prometheus text exposition (format 0.0.4) of the same
 * counters, per-tube gauges and the commit path (group size, fsync latency
 * histogram) for the metrics endpoint. */
void stats_prometheus(Server *s, StatsBuf *b);

/* Writes stats_server's fields as one JSON object to j (the same keys in
 * the same order, numbers as numbers, draining as a boolean; no
 * identities): the HTTP API's /api/v1/stats. */
void stats_server_json(Server *s, Json *j);

void stats_buf_free(StatsBuf *b);

#endif
