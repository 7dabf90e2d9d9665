/* fuzz_http.c - libFuzzer target for the HTTP API's own parsing
 * (src/http/httpparse.c; libmicrohttpd parses the HTTP itself).
 *
 * The input's first byte picks a parser (its value mod 7); the rest is
 * its input, given from an exactly-sized heap copy (AddressSanitizer then
 * catches a read past it), NUL-terminated where the server hands over a
 * C string (headers, query arguments, the path), and with outputs in
 * exactly-sized buffers. Each is checked against an independent
 * reference or a round trip:
 *   0 login body (POST /api/v1/session, PROTOCOL.md 18.18): a token is
 *     non-empty, NUL-free and fits; a small cap refuses exactly the
 *     tokens that do not fit in it; a form's value is what a reference
 *     strict percent-decoder gives (a '%' without two hex digits is
 *     refused), and the token percent-encoded back (mixed case, '+' for
 *     spaces, among other fields) gives it again; a JSON token holds no
 *     quote, backslash or control byte and {"token":"T"} gives it again;
 *   1 Authorization: the token is the text after "Bearer " and spaces
 *     when it fits, else empty;
 *   2 session id / CSRF form: exactly 64 lowercase hex digits;
 *   3 Origin check ("ORIGIN\nHOST", tls from the first byte): equal to
 *     scheme://HOST, HOST not empty;
 *   4 decimal query argument against several bounds: accepted exactly
 *     when all digits and not above the bound, and the value printed is
 *     the text without its leading zeros;
 *   5 state lists: each item one of the names, the mask rebuilt from the
 *     items, and the mask's names joined parse to the same mask;
 *   6 paths tubes/NAME/SUB (split at the last '/') and jobs/ID[/ACT]
 *     (split at the first; ID 1..2^64-1, at most 31 digits).
 * Build and run: `make fuzz` (see the Makefile's fuzzing block). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http/httpd.h"
#include "http/httpparse.h"

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz_http: check failed at line %d: %s\n",        \
                    __LINE__, #cond);                                          \
            abort();                                                           \
        }                                                                      \
    } while (0)

/* A malloc'd copy of n bytes, NUL-terminated when z (then cut at the
 * first NUL, as a C string the server is given). */
static char *
copy(const uint8_t *d, size_t n, int z)
{
    if (z) {
        const uint8_t *nul = memchr(d, 0, n);
        if (nul) n = (size_t)(nul - d);
    }
    char *p = malloc(n + (z ? 1 : 0) + (n || z ? 0 : 1));
    if (!p) abort();
    if (n) memcpy(p, d, n);
    if (z) p[n] = '\0';
    return p;
}

static int
hex(int c)
{
    static const char digits[] = "0123456789abcdef0123456789ABCDEF";
    const char *x = c ? strchr(digits, c) : NULL;
    return x ? (int)((x - digits) % 16) : -1;
}

/* Reference strict form decoder of the first token= field: 1 and out
 * (n bytes, NULs kept) when well-formed, 0 when a '%' lacks two hex
 * digits, -1 when there is no token field. */
static int
ref_form(const char *p, size_t len, char *out, size_t *n)
{
    size_t i = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && p[j] != '&')
            j++;
        if (j - i >= 6 && memcmp(p + i, "token=", 6) == 0) {
            *n = 0;
            for (size_t k = i + 6; k < j; k++) {
                int c = (unsigned char)p[k];
                if (c == '+') c = ' ';
                if (c == '%') {
                    if (k + 2 >= j || hex(p[k + 1]) < 0 || hex(p[k + 2]) < 0)
                        return 0;
                    c = hex(p[k + 1]) * 16 + hex(p[k + 2]);
                    k += 2;
                }
                out[(*n)++] = (char)c;
            }
            return 1;
        }
        i = j + 1;
    }
    return -1;
}

/* httpparse_login on an exactly-sized copy of the n bytes at s. */
static int
login(const char *s, size_t n, char *out, size_t cap)
{
    char *p = copy((const uint8_t *)s, n, 0);
    int rc = httpparse_login(p, n, out, cap);
    free(p);
    return rc;
}

static void
check_login(const char *p, size_t len)
{
    char out[HTTPD_TOKEN_MAX + 1], ref[HTTPD_FORM_MAX + 8];
    int rc = login(p, len, out, sizeof out);
    size_t n = rc == 0 ? strlen(out) : 0, rn = 0;
    CHECK(rc == 0 || rc == -1);
    if (rc == 0) CHECK(n >= 1 && n < sizeof out);

    /* a small cap, exactly sized: refuses what does not fit */
    size_t cap = 1 + len % 13;
    char *small = malloc(cap);
    if (!small) abort();
    int rs = login(p, len, small, cap);
    CHECK(rs == (rc == 0 && n < cap ? 0 : -1));
    if (rs == 0) CHECK(strcmp(small, out) == 0);
    free(small);

    if (len && p[0] == '{') { /* JSON */
        if (rc != 0) return;
        for (size_t i = 0; i < n; i++)
            CHECK(out[i] != '"' && out[i] != '\\' &&
                  (unsigned char)out[i] >= 0x20);
        char doc[HTTPD_TOKEN_MAX + 32], again[HTTPD_TOKEN_MAX + 1];
        int k = snprintf(doc, sizeof doc, "{\"token\" :\n\"%s\"}", out);
        CHECK(login(doc, (size_t)k, again, sizeof again) == 0);
        CHECK(strcmp(again, out) == 0);
        return;
    }
    if (len > HTTPD_FORM_MAX) return;
    int r = ref_form(p, len, ref, &rn);
    int want = r == 1 && rn >= 1 && rn < sizeof out && !memchr(ref, 0, rn);
    CHECK((rc == 0) == want);
    if (rc != 0) return;
    CHECK(rn == n && memcmp(ref, out, n) == 0);

    /* percent-encoded back, among other fields: the same token */
    char enc[3 * HTTPD_TOKEN_MAX + 32], again[HTTPD_TOKEN_MAX + 1];
    size_t e = (size_t)snprintf(enc, sizeof enc, "a=1&tok=x&token=");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)out[i];
        if (c == ' ')
            enc[e++] = '+';
        else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
            enc[e++] = (char)c;
        else
            e += (size_t)snprintf(enc + e, 4, i % 2 ? "%%%02X" : "%%%02x", c);
    }
    e += (size_t)snprintf(enc + e, sizeof enc - e, "&token=other");
    CHECK(login(enc, e, again, sizeof again) == 0);
    CHECK(strcmp(again, out) == 0);
}

static void
check_bearer(const char *v)
{
    char out[HTTPD_TOKEN_MAX + 1];
    memset(out, 'x', sizeof out);
    httpparse_bearer(v, out, sizeof out);
    size_t n = strlen(out);
    CHECK(n < sizeof out);
    if (strncasecmp(v, "bearer ", 7) != 0) {
        CHECK(n == 0);
        return;
    }
    const char *t = v + 7;
    while (*t == ' ')
        t++;
    CHECK(strcmp(out, strlen(t) < sizeof out ? t : "") == 0);
}

static void
check_sid(const char *v)
{
    size_t n = strlen(v), ok = n == 64;
    for (size_t i = 0; i < n; i++)
        if (!strchr("0123456789abcdef", v[i])) ok = 0;
    CHECK(httpparse_is_sid(v) == (int)ok);
}

static void
check_origin(const char *v, int tls)
{
    const char *nl = strchr(v, '\n');
    size_t ol = nl ? (size_t)(nl - v) : strlen(v);
    char *origin = copy((const uint8_t *)v, ol, 1);
    char *host =
        copy((const uint8_t *)(nl ? nl + 1 : ""), nl ? strlen(nl + 1) : 0, 1);
    size_t hl = strlen(host);
    char *want = malloc(hl + 9);
    if (!want) abort();
    sprintf(want, "%s://%s", tls ? "https" : "http", host);
    int same = hl && strcmp(origin, want) == 0;
    CHECK(httpparse_same_origin(origin, host, tls) == same);
    if (hl) CHECK(httpparse_same_origin(want, host, tls));
    CHECK(!httpparse_same_origin(want, host, !tls) || !hl);
    free(want);
    free(origin);
    free(host);
}

/* Compares decimal texts without leading zeros (a, b non-empty). */
static int
dec_cmp(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la != lb) return la < lb ? -1 : 1;
    return strcmp(a, b);
}

static void
check_u64(const uint8_t *d, size_t n)
{
    static const uint64_t maxes[] = {UINT64_MAX, UINT32_MAX, 10000, 1000, 9, 0};
    char *exact = copy(d, n, 0), *z = copy(d, n, 1);
    size_t zl = strlen(z), digits = zl > 0;
    for (size_t i = 0; i < zl; i++)
        if (z[i] < '0' || z[i] > '9') digits = 0;
    const char *canon = z;
    while (digits && canon[0] == '0' && canon[1])
        canon++;
    for (size_t m = 0; m < sizeof maxes / sizeof maxes[0]; m++) {
        char mx[24], got[24];
        uint64_t v = 7, w = 7;
        snprintf(mx, sizeof mx, "%llu", (unsigned long long)maxes[m]);
        int rc = httpparse_u64(z, maxes[m], &v);
        int want = digits && dec_cmp(canon, mx) <= 0;
        CHECK((rc == 0) == want);
        if (rc == 0) {
            snprintf(got, sizeof got, "%llu", (unsigned long long)v);
            CHECK(strcmp(got, canon) == 0 && v <= maxes[m]);
        } else {
            CHECK(rc == -1 && v == 7);
        }
        /* the counted form over the exact bytes: the same when no NUL */
        int rn = httpparse_u64n(exact, n, maxes[m], &w);
        if (zl == n)
            CHECK(rn == rc && (rc < 0 || w == v));
        else
            CHECK(rn == -1 && w == 7);
    }
    free(exact);
    free(z);
}

static void
check_names(const char *v)
{
    static const char *const names[] = {"ready", "delayed", "buried",
                                        "reserved"};
    for (size_t k = 3; k <= 4; k++) {
        unsigned mask = 99, ref = 0;
        int ok = 1;
        const char *p = v;
        for (;;) { /* reference: split at ',' */
            size_t len = strcspn(p, ","), i = 0;
            while (i < k &&
                   !(strlen(names[i]) == len && strncmp(p, names[i], len) == 0))
                i++;
            if (i == k) ok = 0;
            if (i < k) ref |= 1u << i;
            if (!p[len]) break;
            p += len + 1;
        }
        int rc = httpparse_name_list(v, names, k, &mask);
        CHECK((rc == 0) == ok);
        if (rc < 0) {
            CHECK(mask == 99);
            continue;
        }
        CHECK(mask == ref && mask != 0 && mask < (1u << k));
        char joined[64] = "";
        for (size_t i = 0; i < k; i++)
            if (mask & 1u << i) {
                if (joined[0]) strcat(joined, ",");
                strcat(joined, names[i]);
            }
        unsigned again = 0;
        CHECK(httpparse_name_list(joined, names, k, &again) == 0);
        CHECK(again == mask);
        int idx = httpparse_name_index(v, names, k);
        CHECK(idx == -1 || (idx >= 0 && (size_t)idx < k &&
                            strcmp(v, names[idx]) == 0 && mask == 1u << idx));
        if (mask && !(mask & (mask - 1)) && !strchr(v, ',')) CHECK(idx >= 0);
    }
}

static void
check_paths(const char *rest)
{
    size_t len = strlen(rest), nl = 99;
    const char *sub = NULL, *act = (const char *)1;
    int rc = httpparse_tube_path(rest, &nl, &sub);
    CHECK((rc == 0) == (strchr(rest, '/') != NULL));
    if (rc == 0) {
        CHECK(rest[nl] == '/' && sub == rest + nl + 1);
        CHECK(!strchr(sub, '/') && nl + 1 + strlen(sub) == len);
    }
    uint64_t id = 0;
    rc = httpparse_job_path(rest, &id, &act);
    const char *slash = strchr(rest, '/');
    CHECK(act == (slash ? slash + 1 : NULL));
    size_t n = slash ? (size_t)(slash - rest) : len, digits = n > 0;
    for (size_t i = 0; i < n; i++)
        if (rest[i] < '0' || rest[i] > '9') digits = 0;
    if (rc != 0) {
        CHECK(rc == -1);
        /* refused: not digits, too long, zero, or over 2^64-1 */
        if (digits && n <= HTTPPARSE_ID_MAX) {
            uint64_t v;
            char *t = copy((const uint8_t *)rest, n, 1);
            CHECK(httpparse_u64(t, UINT64_MAX, &v) < 0 ||
                  v == 0); /* over 2^64-1, or zero */
            free(t);
        }
        return;
    }
    CHECK(digits && n <= HTTPPARSE_ID_MAX && id != 0);
    char got[24];
    snprintf(got, sizeof got, "%llu", (unsigned long long)id);
    const char *canon = rest;
    while (canon[0] == '0')
        canon++;
    CHECK(strlen(got) == n - (size_t)(canon - rest));
    CHECK(strncmp(got, canon, strlen(got)) == 0);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    unsigned which = data[0] % 7;
    const uint8_t *d = data + 1;
    size_t n = size - 1;
    if (which == 0) {
        check_login((const char *)d, n);
        return 0;
    }
    if (which == 4) {
        check_u64(d, n);
        return 0;
    }
    char *z = copy(d, n, 1);
    switch (which) {
    case 1:
        check_bearer(z);
        break;
    case 2:
        check_sid(z);
        break;
    case 3:
        check_origin(z, data[0] >= 128);
        break;
    case 5:
        check_names(z);
        break;
    default:
        check_paths(z);
        break;
    }
    free(z);
    return 0;
}
