/*
 * Per-client fail-first counters (see clients.h).
 *
 * Invariants: the value slot of a client holds its count as a uintptr_t,
 * written only under the key's shard lock.
 */
#include <stdint.h>
#include <string.h>

#include "server/clients.h"

int srv_clients_init(srv_clients *c, int64_t k)
{
    c->k = k;
    return srv_map_init(&c->map, NULL);
}

void srv_clients_destroy(srv_clients *c)
{
    srv_map_destroy(&c->map);
}

bool srv_clients_fail_first(srv_clients *c, const char *id, int64_t *nth)
{
    if (c->k <= 0)
        return false;
    srv_map_ref ref;
    if (!srv_map_acquire(&c->map, id, strlen(id), &ref))
        return false; /* out of memory: let the request through */
    uintptr_t n = (uintptr_t)*ref.value;
    if (n <= (uintptr_t)c->k)
        n++;
    *ref.value = (void *)n;
    srv_map_release(&ref);
    *nth = (int64_t)n;
    return n <= (uintptr_t)c->k;
}
