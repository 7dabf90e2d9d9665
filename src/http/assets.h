/* assets.h - the web console's files (console/ and uPlot), compiled into
 * the daemon by scripts/gen-assets.py (the build's gen/assets_data.c) and
 * served by the HTTP thread from memory: GET / is console/index.html,
 * GET /console/NAME any other file NAME (protocol/PROTOCOL.md section 18.20).
 * Assets are public (no token, even with --auth-file: they hold no data);
 * each answer carries its Content-Type, an ETag (a conditional GET with a
 * matching If-None-Match is answered 304 without the body), Cache-Control:
 * no-cache (kept, but revalidated before each use) and the security
 * headers of every answer (httpd_security_headers: a strict
 * Content-Security-Policy, no inline code, no framing). */
#ifndef ROCKSTALK_ASSETS_H
#define ROCKSTALK_ASSETS_H

#include <microhttpd.h>
#include <stddef.h>

/* One file: its path as served ("/console/app.js"; console/index.html is
 * "/", and only that: its links are relative), Content-Type, bytes
 * (len of them; static), and ETag (a quoted string). */
typedef struct Asset {
    const char *path;
    const char *type;
    const unsigned char *data;
    size_t len;
    const char *etag;
} Asset;

/* The generated table, in ascending strcmp order of path. */
extern const Asset assets_table[];
extern const size_t assets_count;

/* The asset a request path names, or NULL. */
const Asset *assets_find(const char *url);

/* Whether etag matches an If-None-Match header's value (a list of
 * entity tags, weak ones compared weakly, or "*"); none (NULL): 0. */
int assets_etag_match(const char *if_none_match, const char *etag);

/* Answers a request for an asset (GET or HEAD: 200 or 304; another
 * method: 405 with Allow: GET, HEAD) into *ret and returns 1; returns 0
 * without answering when url names no asset. headers adds the security
 * headers every answer carries (httpd_security_headers, passed in: httpd
 * calls this module, not the other way round); it is called with api 0.
 * HTTP thread. */
int assets_serve(struct MHD_Connection *conn, const char *url,
                 const char *method,
                 void (*headers)(struct MHD_Response *r, int api),
                 enum MHD_Result *ret);

#endif
