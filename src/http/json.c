/* json.c - see json.h. */
#include "http/json.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Makes room for n more bytes and the NUL; 0, or -1 (failed set). */
static int
grow(Json *j, size_t n)
{
    if (j->failed) return -1;
    if (j->len + n + 1 <= j->cap) return 0;
    size_t cap = j->cap ? j->cap : 256;
    while (cap < j->len + n + 1)
        cap *= 2;
    char *b = realloc(j->buf, cap);
    if (!b) {
        j->failed = 1;
        return -1;
    }
    j->buf = b;
    j->cap = cap;
    return 0;
}

static void
put(Json *j, const char *s, size_t n)
{
    if (grow(j, n) < 0) return;
    memcpy(j->buf + j->len, s, n);
    j->len += n;
    j->buf[j->len] = '\0';
}

/* Before a value or a key: the comma between items of a container. */
static void
sep(Json *j)
{
    if (j->after_key) {
        j->after_key = 0;
        return;
    }
    if (!j->depth) return;
    uint32_t bit = 1u << (j->depth - 1);
    if (j->has_item & bit) put(j, ",", 1);
    j->has_item |= bit;
}

static void
open_(Json *j, char c)
{
    sep(j);
    if (j->depth == JSON_DEPTH_MAX) {
        j->failed = 1;
        return;
    }
    put(j, &c, 1);
    j->depth++;
    j->has_item &= ~(1u << (j->depth - 1));
}

static void
close_(Json *j, char c)
{
    if (!j->depth) {
        j->failed = 1;
        return;
    }
    j->depth--;
    put(j, &c, 1);
}

void
json_obj(Json *j)
{
    open_(j, '{');
}

void
json_obj_end(Json *j)
{
    close_(j, '}');
}

void
json_arr(Json *j)
{
    open_(j, '[');
}

void
json_arr_end(Json *j)
{
    close_(j, ']');
}

/* Length of the valid UTF-8 sequence at s (n bytes left), or 0. Refuses
 * overlong forms, surrogates and code points past U+10FFFF (RFC 3629). */
static size_t
utf8_len(const unsigned char *s, size_t n)
{
    size_t k;
    uint32_t cp, min;
    if (s[0] < 0xC2) return 0; /* continuation byte or overlong lead */
    if (s[0] < 0xE0)
        k = 2, cp = s[0] & 0x1F, min = 0x80;
    else if (s[0] < 0xF0)
        k = 3, cp = s[0] & 0x0F, min = 0x800;
    else if (s[0] < 0xF5)
        k = 4, cp = s[0] & 0x07, min = 0x10000;
    else
        return 0;
    if (k > n) return 0;
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return k;
}

/* Writes s (n bytes) escaped, without the quotes. */
static void
escape(Json *j, const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        size_t run = i; /* bytes that go out as they are */
        while (run < n && s[run] >= 0x20 && s[run] < 0x80 && s[run] != '"' &&
               s[run] != '\\' && s[run] != '<' && s[run] != '>' &&
               s[run] != '&')
            run++;
        put(j, (const char *)s + i, run - i);
        if ((i = run) == n) break;
        char esc[8];
        unsigned char c = s[i];
        if (c >= 0x80) {
            size_t k = utf8_len(s + i, n - i);
            if (k)
                put(j, (const char *)s + i, k);
            else
                put(j, "\\ufffd", 6);
            i += k ? k : 1;
            continue;
        }
        const char *short_ = c == '"'    ? "\\\""
                             : c == '\\' ? "\\\\"
                             : c == '\n' ? "\\n"
                             : c == '\r' ? "\\r"
                             : c == '\t' ? "\\t"
                                         : NULL;
        if (short_) {
            put(j, short_, 2);
        } else {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            put(j, esc, 6);
        }
        i++;
    }
}

void
json_str(Json *j, const char *s, size_t len)
{
    sep(j);
    put(j, "\"", 1);
    escape(j, (const unsigned char *)s, len);
    put(j, "\"", 1);
}

void
json_cstr(Json *j, const char *s)
{
    json_str(j, s, strlen(s));
}

void
json_key(Json *j, const char *key)
{
    json_cstr(j, key);
    put(j, ":", 1);
    j->after_key = 1;
}

void
json_num(Json *j, const char *text)
{
    sep(j);
    put(j, text, strlen(text));
}

void
json_u64(Json *j, uint64_t v)
{
    char b[24];
    snprintf(b, sizeof b, "%" PRIu64, v);
    json_num(j, b);
}

void
json_i64(Json *j, int64_t v)
{
    char b[24];
    snprintf(b, sizeof b, "%" PRId64, v);
    json_num(j, b);
}

void
json_dbl(Json *j, double v, int prec)
{
    char b[64];
    if (!isfinite(v) || fabs(v) >= 1e18) v = 0;
    snprintf(b, sizeof b, "%.*f", prec < 0 ? 0 : prec > 9 ? 9 : prec, v);
    json_num(j, b);
}

void
json_bool(Json *j, int v)
{
    json_num(j, v ? "true" : "false");
}

void
json_null(Json *j)
{
    json_num(j, "null");
}

void
json_free(Json *j)
{
    free(j->buf);
    memset(j, 0, sizeof *j);
}
