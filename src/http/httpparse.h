/* httpparse.h - the HTTP API's own parsing of what a client sends, pure
 * functions over bytes (no libmicrohttpd, libev or OpenSSL), so that
 * tests/fuzz/fuzz_http.c can drive them alone: a login body's token
 * (POST /api/v1/session), the bearer token of an Authorization header,
 * the session cookie's and X-CSRF-Token's form, the Origin check, a
 * decimal query argument, a comma list of names (state=), and the two
 * paths the loop splits (tubes/NAME/SUB, jobs/ID[/ACT]). libmicrohttpd
 * parses the HTTP itself (request line, headers, cookies, the URL's
 * percent-decoding and query arguments); these take its NUL-terminated
 * strings, or a body as bytes and a length. protocol/PROTOCOL.md section
 * 18 says what is accepted. Any thread; no state. */
#ifndef ROCKSTALK_HTTPPARSE_H
#define ROCKSTALK_HTTPPARSE_H

#include <stddef.h>
#include <stdint.h>

/* Bytes of a job id's text in a path (jobs/ID), at most (longer: a bad
 * id, leading zeros or not). */
#define HTTPPARSE_ID_MAX 31

/* The token of a POST /api/v1/session body (len bytes at p, any bytes,
 * not NUL-terminated; PROTOCOL.md 18.18) into out (cap bytes, NUL
 * included; cap >= 1):
 *   - a body starting with '{' is JSON: the string after the first
 *     "token" key and one ':' (JSON whitespace around it), no escapes and
 *     no control characters in it;
 *   - otherwise a form (application/x-www-form-urlencoded): the value of
 *     the first field named token, '+' a space, %HH a byte; a '%' not
 *     followed by two hex digits refuses the body (strict).
 * Returns 0 with out a non-empty NUL-terminated token, or -1 (none, an
 * empty one, one holding a NUL byte, raw or escaped, a bad escape, or one
 * that does not fit in cap). Reads nothing past p + len. */
int httpparse_login(const char *p, size_t len, char *out, size_t cap);

/* The bearer token of an Authorization header value v (NUL-terminated):
 * "Bearer " (any case), then spaces, then the token, copied into out (cap
 * bytes) when it fits (strlen < cap), else out is "". A value not
 * starting with "Bearer " also gives "". (RFC 6750 section 2.1.) */
void httpparse_bearer(const char *v, char *out, size_t cap);

/* Whether v (NUL-terminated) is exactly HTTPPARSE_SID_HEX lowercase hex
 * digits: the form of an rs_session cookie and an X-CSRF-Token. */
#define HTTPPARSE_SID_HEX 64
int httpparse_is_sid(const char *v);

/* Whether the Origin header value origin is this server's origin:
 * "http://" (tls: "https://") followed by the Host header value host,
 * byte for byte, host not empty (PROTOCOL.md 18.18). Both NUL-terminated,
 * of any length. */
int httpparse_same_origin(const char *origin, const char *host, int tls);

/* A decimal in [0, max]: len bytes at p, all digits (at least one,
 * leading zeros allowed, no sign or space). 0 and *out, or -1 (*out
 * untouched). httpparse_u64 takes a NUL-terminated p. */
int httpparse_u64n(const char *p, size_t len, uint64_t max, uint64_t *out);
int httpparse_u64(const char *p, uint64_t max, uint64_t *out);

/* Which of names[0..n) (n <= 32) p (NUL-terminated) is: its index, or -1. */
int httpparse_name_index(const char *p, const char *const *names, size_t n);

/* A comma list of names[0..n) (n <= 32) in p (NUL-terminated; each item
 * one of them, repeats allowed, no empty item, no spaces): 0 and *mask
 * (bit i: names[i] is listed), or -1. */
int httpparse_name_list(const char *p, const char *const *names, size_t n,
                        unsigned *mask);

/* A tube's path after "tubes/" (rest, NUL-terminated, as decoded): NAME,
 * then '/', then SUB, split at the last '/' (a name may hold '/'). 0 with
 * *name_len (0 or more) and *sub (inside rest, after the slash; may be
 * empty), or -1 when rest has no '/'. */
int httpparse_tube_path(const char *rest, size_t *name_len, const char **sub);

/* A job's path after "jobs/" (rest, NUL-terminated): ID, then optionally
 * '/' and ACT (split at the first '/'). *act is set in every case (the
 * text after that slash, or NULL without one). Returns 0 with *id, or -1
 * when ID is not 1..UINT64_MAX in at most HTTPPARSE_ID_MAX digits. */
int httpparse_job_path(const char *rest, uint64_t *id, const char **act);

#endif
