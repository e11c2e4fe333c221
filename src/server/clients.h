/*
 * Per-client request counters for --fail-first K: the first K requests of
 * each client are refused with 429. A client is identified by its
 * X-Client-Id header, or else by the request path.
 *
 * Invariants: a client's count saturates at K + 1 (no overflow, and the
 * table stays one word per client); counting is atomic per client (the
 * sharded map's lock), so K refusals per client exactly, under any
 * concurrency.
 */
#ifndef STAGGER_SERVER_CLIENTS_H
#define STAGGER_SERVER_CLIENTS_H

#include <stdint.h>

#include "server/map.h"

typedef struct srv_clients {
    srv_map map; /* id -> count, stored in the value pointer */
    int64_t k;
} srv_clients;

int srv_clients_init(srv_clients *c, int64_t k);
void srv_clients_destroy(srv_clients *c);

/* Count one request from id. Returns true when it is one of the client's
 * first K (to be refused), with *nth its 1-based number. Thread-safe. */
bool srv_clients_fail_first(srv_clients *c, const char *id, int64_t *nth);

#endif
