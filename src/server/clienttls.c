/* clienttls.c - see clienttls.h. */
#include "server/clienttls.h"

#include <stdio.h>

#include "base/log.h"
#include "net/tls.h"

static void
warn_exposed(Server *s)
{
    TlsCreds *c = tls_source_get(s->tls);
    if (tls_creds_key_exposed(c))
        log_msg(0, "tls: WARNING: %s is readable by group or others",
                s->cfg.tls_key);
    tls_creds_unref(c);
}

int
clienttls_open(Server *s, char *err, size_t errcap)
{
    const ServerConfig *cfg = &s->cfg;

    if (!cfg->tls_cert && !cfg->tls_key && !cfg->tls_ca) return 0;
    if (!cfg->tls_cert || !cfg->tls_key) {
        snprintf(err, errcap, "--tls-cert and --tls-key go together%s",
                 cfg->tls_ca ? " (--tls-ca needs both)" : "");
        return -1;
    }
    if (tls_source_open_serve(cfg->tls_cert, cfg->tls_key, cfg->tls_ca, &s->tls,
                              err, errcap) < 0)
        return -1;
    warn_exposed(s);
    return 0;
}

void
clienttls_reload(Server *s)
{
    char err[512];

    if (!s->tls) return;
    if (tls_source_reload(s->tls, err, sizeof err) < 0) {
        log_msg(0, "SIGHUP: tls certificates kept: %s", err);
        return;
    }
    log_msg(0, "SIGHUP: tls certificates re-read; new connections use them");
    warn_exposed(s);
}

TlsSock *
clienttls_session(Server *s)
{
    if (!s->tls) return NULL;
    TlsCreds *c = tls_source_get(s->tls);
    TlsConn *t = tls_conn_new(c, 1);
    tls_creds_unref(c);
    return t ? tls_sock_new(t) : NULL;
}

int
clienttls_mutual(const Server *s)
{
    return s->cfg.tls_ca != NULL && s->tls != NULL;
}

void
clienttls_close(Server *s)
{
    tls_source_close(s->tls);
    s->tls = NULL;
}
