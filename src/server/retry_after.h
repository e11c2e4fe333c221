/*
 * Writing Retry-After (RFC 9110 section 10.2.3) on a response, in the form
 * chosen by --retry-after: delta-seconds, an HTTP-date (IMF-fixdate, via
 * libstagger's stg_http_date_format) or not at all.
 *
 * Invariants: the value never asks for less than the wait: seconds are
 * rounded up, and a date is now + wait rounded up to the next second, so a
 * client that honours it exactly is not refused again for the same reason.
 */
#ifndef STAGGER_SERVER_RETRY_AFTER_H
#define STAGGER_SERVER_RETRY_AFTER_H

#include <stdint.h>

#include <microhttpd.h>

#include "server/server.h"

/* Whole seconds in us, rounded up. */
int64_t srv_ceil_seconds(int64_t us);

/* Add Retry-After for a wait of max(wait_us, min_s seconds) from now.
 * Reads the wall clock only for the date form. Returns the value written
 * in seconds (what a client will wait), or -1 for mode NONE. */
int64_t srv_retry_after_add(struct MHD_Response *r, stg_srv_retry_after mode, int64_t wait_us,
                            int64_t min_s);

#endif
