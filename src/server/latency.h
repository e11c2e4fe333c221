/*
 * --latency: every answer of the server takes at least this long after its
 * request arrived (a slow backend, for benchmarks: a client bound by latency
 * needs concurrency, not a faster rate). The connection is parked (park.c)
 * instead of a worker thread sleeping, so many requests wait at once.
 *
 * Invariant: a request is held once, before anything about it is decided
 * (limit, faults, route), so the server's limit judges it when it is
 * answered and its log line carries that instant.
 */
#ifndef STAGGER_SERVER_LATENCY_H
#define STAGGER_SERVER_LATENCY_H

#include <stdbool.h>

#include <microhttpd.h>

#include "server/internal.h"

/* true: c was parked for the configured latency (the handler returns
 * MHD_YES and is called again when it is resumed); *done is then set, so
 * the next call goes on. false: no latency, already held, or shutting down. */
bool srv_latency_hold(stg_srv *s, struct MHD_Connection *c, bool *done);

#endif
