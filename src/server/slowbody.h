/*
 * Slow bodies (--slow-body-prob / --slow-body-every, --slow-body-ms): a
 * response whose body is trickled out by a content-reader callback over a
 * set time, in up to 8 pieces: the first with the headers, the last when the
 * time is up. Between pieces the connection is parked (suspended), so no
 * worker thread sleeps and other connections are unaffected.
 *
 * Invariants: Content-Length is the full body, so a client can tell a
 * complete slow body from a cut one; the reader never blocks; at shutdown a
 * trickle that cannot park again ends with an error (connection closed).
 */
#ifndef STAGGER_SERVER_SLOWBODY_H
#define STAGGER_SERVER_SLOWBODY_H

#include <stddef.h>
#include <stdint.h>

#include <microhttpd.h>

#include "server/park.h"

/* A response trickling body[0..len) over duration_us from now_us. Takes
 * ownership of body (malloc'd) in every case. NULL when out of memory. */
struct MHD_Response *srv_slow_response(srv_park *park, struct MHD_Connection *c, char *body,
                                       size_t len, int64_t duration_us, int64_t now_us);

#endif
