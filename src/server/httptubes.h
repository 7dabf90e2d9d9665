/* httptubes.h - the tubes document of the HTTP API (/api/v1/tubes and
 * /api/v1/tubes/NAME, protocol/PROTOCOL.md 18.5): each tube's counts,
 * its rates from the once-a-second samples of its counters (TubeRates)
 * and the age of its oldest ready job (queue/readyage.h); for every tube
 * (the published document, server/httpdocs.h) or for the tubes one
 * identity may inspect (server/httpapi.h, rendered when asked). Loop
 * thread only. */
#ifndef ROCKSTALK_HTTPTUBES_H
#define ROCKSTALK_HTTPTUBES_H

#include "http/httpd.h"
#include "http/json.h"
#include "queue/state.h"
#include "server/auth.h"

/* Tubes the document lists at most (the first by name; "truncated" says
 * when there were more), and so /api/v1/tubes/NAME finds: the set stays
 * bounded (a tube's object is about 400 bytes). */
#define HTTPTUBES_MAX 1000

/* Takes this second's sample of every tube's counters (TubeRates). */
void httptubes_sample(Server *s);

/* The document of the tubes u may inspect (NULL: every tube) into j
 * (count and listed count those only); with d, each tube's object is also
 * added to d under its name (httpd_docs_add_tube). On allocation failure
 * j->failed is set. O(tubes) auth checks and a sort. */
void httptubes_render(const Server *s, const AuthUser *u, Json *j,
                      HttpdDocs *d);

#endif
