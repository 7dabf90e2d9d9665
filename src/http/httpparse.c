/* httpparse.c - see httpparse.h. */
#include "http/httpparse.h"

#include <string.h>
#include <strings.h>

#include "base/bytes.h"

static int
json_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* The JSON body [p, end): the string after "token" and ':'. */
static int
login_json(const char *p, const char *end, char *out, size_t cap)
{
    size_t n = 0;
    const char *k = memmem(p, (size_t)(end - p), "\"token\"", 7);
    if (!k) return -1;
    for (k += 7; k < end && json_ws(*k); k++)
        ;
    if (k == end || *k++ != ':') return -1;
    for (; k < end && json_ws(*k); k++)
        ;
    if (k == end || *k++ != '"') return -1;
    for (; k < end && *k != '"'; k++) {
        if (*k == '\\' || (unsigned char)*k < 0x20 || n + 1 >= cap) return -1;
        out[n++] = *k;
    }
    if (k == end || n == 0) return -1;
    out[n] = '\0';
    return 0;
}

/* The form value [f, end) up to '&', decoded into out. */
static int
form_value(const char *f, const char *end, char *out, size_t cap)
{
    size_t n = 0;
    for (; f < end && *f != '&'; f++) {
        unsigned c = (unsigned char)*f;
        if (c == '+') c = ' ';
        if (c == '%') {
            int hi = end - f > 2 ? hex_value(f[1]) : -1;
            int lo = hi >= 0 ? hex_value(f[2]) : -1;
            if (lo < 0) return -1; /* strict: %HH only */
            c = (unsigned)(hi * 16 + lo);
            f += 2;
        }
        if (c == 0 || n + 1 >= cap) return -1;
        out[n++] = (char)c;
    }
    if (n == 0) return -1;
    out[n] = '\0';
    return 0;
}

int
httpparse_login(const char *p, size_t len, char *out, size_t cap)
{
    const char *end = p + len;
    if (cap == 0) return -1;
    out[0] = '\0';
    if (len && *p == '{') return login_json(p, end, out, cap);
    for (const char *f = p; f < end;) {
        if (end - f >= 6 && memcmp(f, "token=", 6) == 0)
            return form_value(f + 6, end, out, cap);
        const char *amp = memchr(f, '&', (size_t)(end - f));
        if (!amp) break;
        f = amp + 1;
    }
    return -1;
}

void
httpparse_bearer(const char *v, char *out, size_t cap)
{
    if (cap) out[0] = '\0';
    if (strncasecmp(v, "Bearer ", 7) != 0) return;
    for (v += 7; *v == ' '; v++)
        ;
    size_t n = strlen(v);
    if (n < cap) memcpy(out, v, n + 1);
}

int
httpparse_is_sid(const char *v)
{
    size_t n = 0;
    for (; v[n]; n++)
        if (!((v[n] >= '0' && v[n] <= '9') || (v[n] >= 'a' && v[n] <= 'f')))
            return 0;
    return n == HTTPPARSE_SID_HEX;
}

int
httpparse_same_origin(const char *origin, const char *host, int tls)
{
    const char *scheme = tls ? "https://" : "http://";
    size_t k = strlen(scheme);
    return host[0] && strncmp(origin, scheme, k) == 0 &&
           strcmp(origin + k, host) == 0;
}

int
httpparse_u64n(const char *p, size_t len, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;
    if (len == 0) return -1;
    for (size_t i = 0; i < len; i++) {
        unsigned d = (unsigned)(unsigned char)p[i] - '0';
        if (d > 9 || v > max / 10) return -1;
        v *= 10;
        if (d > max - v) return -1;
        v += d;
    }
    *out = v;
    return 0;
}

int
httpparse_u64(const char *p, uint64_t max, uint64_t *out)
{
    return httpparse_u64n(p, strlen(p), max, out);
}

/* Which of names the n bytes at p are: its index, or -1. */
static int
name_of(const char *p, size_t len, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n && i < 32; i++)
        if (strlen(names[i]) == len && memcmp(p, names[i], len) == 0)
            return (int)i;
    return -1;
}

int
httpparse_name_index(const char *p, const char *const *names, size_t n)
{
    return name_of(p, strlen(p), names, n);
}

int
httpparse_name_list(const char *p, const char *const *names, size_t n,
                    unsigned *mask)
{
    unsigned m = 0;
    for (;;) {
        size_t len = strcspn(p, ",");
        int i = name_of(p, len, names, n);
        if (i < 0) return -1;
        m |= 1u << i;
        if (!p[len]) break;
        p += len + 1;
    }
    *mask = m;
    return 0;
}

int
httpparse_tube_path(const char *rest, size_t *name_len, const char **sub)
{
    const char *slash = strrchr(rest, '/');
    if (!slash) return -1;
    *name_len = (size_t)(slash - rest);
    *sub = slash + 1;
    return 0;
}

int
httpparse_job_path(const char *rest, uint64_t *id, const char **act)
{
    const char *slash = strchr(rest, '/');
    size_t n = slash ? (size_t)(slash - rest) : strlen(rest);
    *act = slash ? slash + 1 : NULL;
    if (n > HTTPPARSE_ID_MAX || httpparse_u64n(rest, n, UINT64_MAX, id) < 0 ||
        *id == 0)
        return -1;
    return 0;
}
