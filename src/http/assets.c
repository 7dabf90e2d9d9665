/* assets.c - see assets.h. */
#include "http/assets.h"

#include <string.h>

const Asset *
assets_find(const char *url)
{
    size_t lo = 0, hi = assets_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(assets_table[mid].path, url);
        if (c == 0) return &assets_table[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

int
assets_etag_match(const char *inm, const char *etag)
{
    size_t n = strlen(etag);
    if (!inm) return 0;
    for (const char *p = inm; *p;) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        if (*p == '*') return 1;
        if (strncmp(p, "W/", 2) == 0) p += 2;
        if (strncmp(p, etag, n) == 0 &&
            (p[n] == '\0' || p[n] == ',' || p[n] == ' ' || p[n] == '\t'))
            return 1;
        while (*p && *p != ',')
            p++;
    }
    return 0;
}

int
assets_serve(struct MHD_Connection *conn, const char *url, const char *method,
             void (*headers)(struct MHD_Response *r, int api),
             enum MHD_Result *ret)
{
    static const char not_allowed[] = "{\"error\":\"method not allowed\"}";
    const Asset *a = assets_find(url);
    if (!a) return 0;
    int get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    const char *inm =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "If-None-Match");
    int fresh = get && assets_etag_match(inm, a->etag);
    struct MHD_Response *r;
    unsigned status = MHD_HTTP_OK;
    if (!get) {
        r = MHD_create_response_from_buffer(sizeof not_allowed - 1,
                                            (void *)not_allowed,
                                            MHD_RESPMEM_PERSISTENT);
        status = MHD_HTTP_METHOD_NOT_ALLOWED;
    } else if (fresh) {
        r = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
        status = MHD_HTTP_NOT_MODIFIED;
    } else {
        r = MHD_create_response_from_buffer(a->len, (void *)a->data,
                                            MHD_RESPMEM_PERSISTENT);
    }
    if (!r) {
        *ret = MHD_NO;
        return 1;
    }
    if (!get) {
        MHD_add_response_header(r, "Content-Type", "application/json");
        MHD_add_response_header(r, "Allow", "GET, HEAD");
        MHD_add_response_header(r, "Cache-Control", "no-store");
    } else {
        if (!fresh) MHD_add_response_header(r, "Content-Type", a->type);
        MHD_add_response_header(r, "ETag", a->etag);
        MHD_add_response_header(r, "Cache-Control", "no-cache");
    }
    headers(r, 0);
    *ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return 1;
}
