/* httpsess.c - see httpsess.h. */
#include "server/httpsess.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <string.h>

#include "base/common.h"
#include "base/log.h"
#include "http/httpparse.h"
#include "server/access.h"

#define COOKIE "rs_session="
#define COOKIE_ATTRS "; Path=/; HttpOnly; SameSite=Strict"

/* 32 random bytes as 64 hex digits into out: 0, or -1. */
static int
random_hex(char *out)
{
    unsigned char b[HTTPD_SID_HEX / 2];
    if (RAND_bytes(b, sizeof b) != 1) return -1;
    for (size_t i = 0; i < sizeof b; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
    OPENSSL_cleanse(b, sizeof b);
    return 0;
}

int
httpsess_init(HttpSessions *ss)
{
    return random_hex(ss->open_csrf);
}

static void
drop(HttpSess *e)
{
    OPENSSL_cleanse(e, sizeof *e);
}

/* Whether e still stands at now: not expired, its identity still in the
 * file with the same token. */
static const AuthUser *
still_valid(Server *s, const HttpSess *e, int64_t now)
{
    if (now - e->made > (int64_t)HTTPSESS_LIFE_S * NS_PER_SEC ||
        now - e->used > (int64_t)HTTPSESS_IDLE_S * NS_PER_SEC)
        return NULL;
    const AuthUser *u = auth_by_name(&s->access->table, e->name);
    if (!u || u->cert ||
        CRYPTO_memcmp(u->digest, e->digest, AUTH_DIGEST_LEN) != 0)
        return NULL;
    return u;
}

const AuthUser *
httpsess_user(Server *s, HttpSessions *ss, const HttpdReq *r, HttpSess **out)
{
    HttpSess *hit = NULL;
    int64_t now = mono_ns();
    *out = NULL;
    if (!s->access || !r->sid[0]) return NULL;
    for (size_t i = 0; i < HTTPSESS_MAX; i++) /* every slot: no early out */
        if (ss->s[i].id[0] &&
            CRYPTO_memcmp(ss->s[i].id, r->sid, HTTPD_SID_HEX) == 0)
            hit = &ss->s[i];
    if (!hit) return NULL;
    const AuthUser *u = still_valid(s, hit, now);
    if (!u) {
        drop(hit);
        return NULL;
    }
    hit->used = now;
    *out = hit;
    return u;
}

int
httpsess_csrf_ok(const HttpdReq *r, const char *csrf)
{
    return r->has_csrf && r->csrf[0] &&
           CRYPTO_memcmp(r->csrf, csrf, HTTPD_SID_HEX) == 0;
}

/* An Origin header, if any, must be this server's scheme and Host:
 * 1, or 0 (answered 403). */
static int
origin_ok(const HttpdReq *r, HttpAns *a)
{
    if (!r->has_origin) return 1;
    if (httpparse_same_origin(r->origin, r->host, r->tls)) return 1;
    httpans_error(a, 403, "cross-origin request refused");
    return 0;
}

int
httpsess_open_check(HttpSessions *ss, const HttpdReq *r, HttpAns *a)
{
    if (!origin_ok(r, a)) return 0;
    if (r->has_csrf && !httpsess_csrf_ok(r, ss->open_csrf)) {
        httpans_error(a, 403, "csrf");
        return 0;
    }
    return 1;
}

/* A free slot, or the oldest session's (evicted). */
static HttpSess *
slot(HttpSessions *ss)
{
    HttpSess *old = &ss->s[0];
    for (size_t i = 0; i < HTTPSESS_MAX; i++) {
        if (!ss->s[i].id[0]) return &ss->s[i];
        if (ss->s[i].made < old->made) old = &ss->s[i];
    }
    drop(old);
    return old;
}

/* {"identity": NAME or null, "csrf": CSRF[, "auth": auth]} */
static void
sess_doc(HttpAns *a, const char *name, const char *csrf, int auth)
{
    json_obj(&a->j);
    json_key(&a->j, "identity");
    if (name)
        json_cstr(&a->j, name);
    else
        json_null(&a->j);
    json_key(&a->j, "csrf"), json_cstr(&a->j, csrf);
    if (auth >= 0) json_key(&a->j, "auth"), json_bool(&a->j, auth);
    json_obj_end(&a->j);
    a->status = 200;
}

/* POST session with --auth-file: the token of the body, then a new
 * session and its cookie. */
static void
login(Server *s, HttpSessions *ss, HttpdReq *r, HttpAns *a)
{
    const AuthUser *u = NULL;
    if (r->has_login)
        u = auth_by_token(&s->access->table, r->login, strlen(r->login));
    if (!u) return httpans_error(a, 401, "unauthorized");
    HttpSess *e = slot(ss);
    if (random_hex(e->id) < 0 || random_hex(e->csrf) < 0) {
        drop(e);
        return httpans_error(a, 500, "no random bytes");
    }
    snprintf(e->name, sizeof e->name, "%s", u->name);
    memcpy(e->digest, u->digest, AUTH_DIGEST_LEN);
    e->made = e->used = mono_ns();
    snprintf(r->set_cookie, sizeof r->set_cookie, COOKIE "%s" COOKIE_ATTRS "%s",
             e->id, r->tls ? "; Secure" : "");
    log_msg(0, "http: %s opened a console session", u->name);
    sess_doc(a, u->name, e->csrf, -1);
}

void
httpsess_route(Server *s, HttpSessions *ss, HttpdReq *r, HttpAns *a)
{
    HttpSess *e = NULL;
    const AuthUser *u = NULL;
    if (!s->access) { /* open: one CSRF token, no session */
        if (r->method != HTTPD_GET && !httpsess_open_check(ss, r, a)) return;
        if (r->method == HTTPD_DELETE) return httpans_done(a, NULL, 0);
        return sess_doc(a, NULL, ss->open_csrf, 0);
    }
    if (r->method == HTTPD_POST) {
        if (!origin_ok(r, a)) return;
        return login(s, ss, r, a);
    }
    u = httpsess_user(s, ss, r, &e);
    if (r->method == HTTPD_GET) {
        if (!u) return httpans_error(a, 401, "unauthorized");
        return sess_doc(a, u->name, e->csrf, 1);
    }
    if (e && !httpsess_csrf_ok(r, e->csrf))
        return httpans_error(a, 403, "csrf");
    if (e) drop(e);
    snprintf(r->set_cookie, sizeof r->set_cookie,
             COOKIE COOKIE_ATTRS "; Max-Age=0%s", r->tls ? "; Secure" : "");
    httpans_done(a, NULL, 0);
}
