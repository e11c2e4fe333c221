/*
 * Early retries: requests that arrive before the instant the server's own
 * last answer to the same request told that client to wait for (a
 * Retry-After, a reset with 0 remaining, a Discord global pause, GitHub's
 * minute after a secondary limit...). A polite client has none.
 *
 * Who is a client: the X-Client-Id request header when present (a test
 * that runs several clients from one address names them), else the peer's
 * IP address without the port (one program on many connections is one
 * client). "The same request" is the same client, method and URL: a retry
 * repeats its request, and only a retry can be early without doubt. (A new
 * URL sent during a pause may have left before the client read the answer
 * that announced it, when it runs several connections; counting those would
 * blame a client for the speed of light on loopback.)
 *
 * Invariants: each answer replaces the told instant of its request (an
 * answer without a wait clears it), so a request is compared with its own
 * last answer only; the instants are wall-clock (CLOCK_REALTIME)
 * microseconds, because an epoch reset is one; counts are exact under any
 * concurrency (the map's shard lock for the instants, one mutex for the
 * per-client totals).
 */
#ifndef STAGGER_SERVER_EARLY_H
#define STAGGER_SERVER_EARLY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "server/map.h"

typedef struct srv_early {
    srv_map told;      /* client \x1f method \x1f url -> told instant (int64 box) */
    pthread_mutex_t mu; /* guards per_client */
    json_t *per_client; /* client -> early count */
    _Atomic uint64_t total;
    _Atomic uint64_t tracked; /* requests that arrived with a told instant pending */
} srv_early;

int srv_early_init(srv_early *e);
void srv_early_destroy(srv_early *e);

/* A request arrived at wall_us: counts it when it is early. Returns true
 * when it was. Thread-safe. */
bool srv_early_arrive(srv_early *e, const char *client, const char *method, const char *url,
                      int64_t wall_us);

/* The answer to it told the client to wait until told_wall_us (0: no
 * wait). Thread-safe. */
void srv_early_answer(srv_early *e, const char *client, const char *method, const char *url,
                      int64_t told_wall_us);

/* {"total":N,"by_client":{...},"pending_checked":M}; new reference. */
json_t *srv_early_json(srv_early *e);

/* One line for stderr at exit: "early retries: N (client: n, ...)". */
void srv_early_print(srv_early *e, FILE *f);

#endif
