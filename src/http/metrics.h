/* metrics.h - the optional Prometheus endpoint (--metrics ADDR:PORT),
 * served by GNU libmicrohttpd on its own thread. The loop thread renders
 * the text (stats_prometheus) and publishes a copy here once a second; the
 * HTTP thread serves the latest copy and never touches queue state. */
#ifndef ROCKSTALK_METRICS_H
#define ROCKSTALK_METRICS_H

#include <stddef.h>

typedef struct Metrics Metrics;

/* Starts the HTTP thread listening on addr_port ("HOST:PORT" or ":PORT",
 * IPv4). GET /metrics answers the published text (text/plain; version
 * 0.0.4); anything else 404. Returns 0 and *out, or -1 with err. */
int metrics_start(const char *addr_port, Metrics **out, char *err,
                  size_t errcap);

/* Loop thread: replaces the published text with a copy of text (len
 * bytes). On allocation failure the previous text stays. */
void metrics_publish(Metrics *m, const char *text, size_t len);

/* Stops the HTTP thread and frees m. */
void metrics_stop(Metrics *m);

#endif
