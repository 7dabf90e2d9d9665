/* metrics.c - see metrics.h. */
#include "http/metrics.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct Metrics {
    struct MHD_Daemon *daemon;
    pthread_mutex_t mu; /* guards text and len */
    char *text;
    size_t len;
};

static enum MHD_Result
handle(void *cls, struct MHD_Connection *conn, const char *url,
       const char *method, const char *version, const char *upload_data,
       size_t *upload_data_size, void **req_cls)
{
    Metrics *m = cls;
    (void)version, (void)upload_data, (void)upload_data_size, (void)req_cls;
    int found = strcmp(url, "/metrics") == 0 &&
                (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0);
    pthread_mutex_lock(&m->mu);
    struct MHD_Response *r = MHD_create_response_from_buffer(
        found ? m->len : 10, found ? m->text : "not found\n",
        MHD_RESPMEM_MUST_COPY);
    pthread_mutex_unlock(&m->mu);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type",
                            "text/plain; version=0.0.4; charset=utf-8");
    enum MHD_Result ret =
        MHD_queue_response(conn, found ? MHD_HTTP_OK : MHD_HTTP_NOT_FOUND, r);
    MHD_destroy_response(r);
    return ret;
}

static int
parse_addr(const char *addr_port, struct sockaddr_in *sa)
{
    const char *colon = strrchr(addr_port, ':');
    char host[64];
    if (!colon || (size_t)(colon - addr_port) >= sizeof host) return -1;
    memcpy(host, addr_port, (size_t)(colon - addr_port));
    host[colon - addr_port] = '\0';
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || end == colon + 1 || port < 0 || port > 65535) return -1;
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)port);
    if (!host[0])
        sa->sin_addr.s_addr = htonl(INADDR_ANY);
    else if (inet_pton(AF_INET, host, &sa->sin_addr) != 1)
        return -1;
    return 0;
}

int
metrics_start(const char *addr_port, Metrics **out, char *err, size_t errcap)
{
    struct sockaddr_in sa;
    if (parse_addr(addr_port, &sa) < 0) {
        snprintf(err, errcap, "bad --metrics address %s (want HOST:PORT)",
                 addr_port);
        return -1;
    }
    Metrics *m = calloc(1, sizeof *m);
    if (!m || !(m->text = strdup(""))) {
        free(m);
        snprintf(err, errcap, "out of memory");
        return -1;
    }
    pthread_mutex_init(&m->mu, NULL);
    m->daemon = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL, ntohs(sa.sin_port),
        NULL, NULL, handle, m, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
        MHD_OPTION_CONNECTION_LIMIT, 64U, MHD_OPTION_CONNECTION_TIMEOUT, 10U,
        MHD_OPTION_END);
    if (!m->daemon) {
        snprintf(err, errcap, "cannot serve metrics on %s", addr_port);
        free(m->text);
        free(m);
        return -1;
    }
    *out = m;
    return 0;
}

void
metrics_publish(Metrics *m, const char *text, size_t len)
{
    char *copy = malloc(len + 1);
    if (!copy) return;
    memcpy(copy, text, len);
    copy[len] = '\0';
    pthread_mutex_lock(&m->mu);
    char *old = m->text;
    m->text = copy;
    m->len = len;
    pthread_mutex_unlock(&m->mu);
    free(old);
}

void
metrics_stop(Metrics *m)
{
    MHD_stop_daemon(m->daemon);
    pthread_mutex_destroy(&m->mu);
    free(m->text);
    free(m);
}
