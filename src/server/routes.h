/*
 * What the server answers once a request is admitted (every gate passed):
 *   /status/CODE  that status (100..599, else 400), small JSON body
 *                 {"status":CODE,"reason":"..."}; ?retry_after=N adds
 *                 Retry-After N seconds (see srv_route_req.retry_after_s)
 *   /echo         the request as JSON: method, path, query, headers, body
 *                 (or body_base64 when it is not UTF-8), body_length
 *   anything else 200 {"path":"/the/path","ok":true}
 * Refusals share the {"error":...} body built by srv_json_error.
 *
 * Invariants: every body is valid JSON and malloc'd (owned by the answer);
 * 1xx, 204 and 304 answers have empty bodies, as HTTP requires.
 */
#ifndef STAGGER_SERVER_ROUTES_H
#define STAGGER_SERVER_ROUTES_H

#include <stddef.h>
#include <stdint.h>

#include <microhttpd.h>

#include "server/idem.h"

typedef struct srv_route_req {
    struct MHD_Connection *conn;
    const char *method, *url;
    const char *body;
    size_t len;
    int64_t retry_after_s; /* out: from /status/CODE?retry_after=N; -1 if absent */
} srv_route_req;

/* Fill out (status and body) for an admitted request. */
void srv_route(srv_route_req *rq, srv_answer *out);

/* {"error":"<error>"} or {"error":"<error>","<key>":<val>} (key may be NULL). */
char *srv_json_error(const char *error, const char *key, int64_t val, size_t *len);

#endif
