/* peerauth.c - see peerauth.h. */
#include "cluster/peerauth.h"

#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/bytes.h"
#include "net/net.h"

#define PEER_MAGIC "RSPEER01"

void
peer_preamble_put(unsigned char *buf, uint64_t id, unsigned channel)
{
    memcpy(buf, PEER_MAGIC, 8);
    le_put64(buf + 8, id);
    le_put64(buf + 16, channel);
}

unsigned
peer_preamble_check(const unsigned char *buf, uint64_t id)
{
    uint64_t ch = le_get64(buf + 16);

    if (memcmp(buf, PEER_MAGIC, 8) != 0 || le_get64(buf + 8) != id || ch < 1 ||
        ch > PEER_CHANNEL_MAX)
        return 0;
    return (unsigned)ch;
}

int
peer_parse_addr(const char *addr, struct sockaddr_in *sa)
{
    char host[64];
    const char *colon = strrchr(addr, ':');
    size_t hl = colon ? (size_t)(colon - addr) : 0;

    if (!colon || hl == 0 || hl >= sizeof host) return -1;
    memcpy(host, addr, hl);
    host[hl] = '\0';
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port <= 0 || port > 65535) return -1;
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)port);
    return inet_pton(AF_INET, host, &sa->sin_addr) == 1 ? 0 : -1;
}

const ClusterPeer *
peer_voter(const ClusterConfig *cc, uint64_t id)
{
    int i = cluster_find(cc, id);
    return i < 0 ? NULL : &cc->voters[i];
}

void
peer_tune_fd(int fd)
{
    int one = 1;

    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    net_keepalive(fd);
}

static int
on_loopback(const char *addr)
{
    struct sockaddr_in sa;
    return peer_parse_addr(addr, &sa) == 0 &&
           (ntohl(sa.sin_addr.s_addr) >> 24) == 127;
}

int
peer_policy_check(const ClusterConfig *cc, const char *cert, const char *key,
                  const char *ca, int insecure, char *err, size_t errcap)
{
    int given = !!cert + !!key + !!ca;

    if (given && given < 3)
        return errfmt(err, errcap,
                      "--cluster-cert, --cluster-key and --cluster-ca "
                      "go together");
    if (given && insecure)
        return errfmt(err, errcap,
                      "--cluster-insecure contradicts --cluster-cert");
    if (given || insecure) return 0;
    for (int i = 0; i < cc->n; i++)
        if (!on_loopback(cc->voters[i].addr))
            return errfmt(err, errcap,
                          "voter %llu (%s) is off loopback: the nodes "
                          "need --cluster-cert, --cluster-key and "
                          "--cluster-ca (mutual TLS), or "
                          "--cluster-insecure to talk in plaintext",
                          (unsigned long long)cc->voters[i].id,
                          cc->voters[i].addr);
    return 0;
}

int
peer_open_creds(const ClusterConfig *cc, const char *cert, const char *key,
                const char *ca, TlsSource **out, int *key_exposed, char *err,
                size_t errcap)
{
    TlsSource *src;

    if (tls_source_open(cert, key, ca, &src, err, errcap) < 0) return -1;
    TlsCreds *c = tls_source_get(src);
    uint64_t id = c ? tls_creds_self_id(c) : 0;
    *key_exposed = c ? tls_creds_key_exposed(c) : 0;
    if (c) tls_creds_unref(c);
    if (id != cc->self_id) {
        tls_source_close(src);
        return errfmt(err, errcap,
                      "%s names node %llu (rockstalk-node-ID), not "
                      "this node, %llu",
                      cert, (unsigned long long)id,
                      (unsigned long long)cc->self_id);
    }
    *out = src;
    return 0;
}
