/* yaml.c - see yaml.h. */
#include "yaml.h"

#include <stdlib.h>
#include <string.h>

/* The start of key's value in body (after "key: "), or NULL. */
static const char *
find_value(const char *body, const char *key, size_t *len)
{
    size_t klen = strlen(key);
    for (const char *p = body; p && *p;
         p = strchr(p, '\n'), p = p ? p + 1 : p) {
        if (strncmp(p, key, klen) != 0 || p[klen] != ':') continue;
        const char *v = p + klen + 1;
        while (*v == ' ')
            v++;
        *len = strcspn(v, "\r\n");
        return v;
    }
    return NULL;
}

int
yaml_get(const char *body, const char *key, char *out, size_t outcap)
{
    size_t len;
    const char *v = find_value(body, key, &len);
    if (!v || outcap == 0) return -1;
    if (len >= outcap) len = outcap - 1;
    memcpy(out, v, len);
    out[len] = '\0';
    return 0;
}

int
yaml_u64(const char *body, const char *key, uint64_t *out)
{
    char buf[32], *end;
    if (yaml_get(body, key, buf, sizeof buf) < 0) return -1;
    if (buf[0] < '0' || buf[0] > '9') return -1;
    unsigned long long v = strtoull(buf, &end, 10);
    if (*end) return -1;
    *out = v;
    return 0;
}

int
yaml_double(const char *body, const char *key, double *out)
{
    char buf[64], *end;
    if (yaml_get(body, key, buf, sizeof buf) < 0) return -1;
    double v = strtod(buf, &end);
    if (end == buf || *end) return -1;
    *out = v;
    return 0;
}

void
yaml_list_free(char **items, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(items[i]);
    free(items);
}

int
yaml_list(const char *body, char ***items, size_t *n)
{
    size_t cap = 0;
    *items = NULL;
    *n = 0;
    for (const char *p = body; p && *p;
         p = strchr(p, '\n'), p = p ? p + 1 : p) {
        if (p[0] != '-' || p[1] != ' ') continue;
        size_t len = strcspn(p + 2, "\r\n");
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            char **ni = realloc(*items, cap * sizeof *ni);
            if (!ni) goto oom;
            *items = ni;
        }
        if (!((*items)[*n] = strndup(p + 2, len))) goto oom;
        (*n)++;
    }
    return 0;
oom:
    yaml_list_free(*items, *n);
    *items = NULL;
    *n = 0;
    return -1;
}
