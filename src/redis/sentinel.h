/*
 * Redis Sentinel, the client's side: ask the sentinels, in order, where
 * the primary named NAME is now (SENTINEL get-master-addr-by-name), so that
 * a reconnection after a failover goes to the promoted replica. The first
 * sentinel that answers with an address wins; one that is down or does not
 * know NAME is skipped. The caller then checks the node's ROLE (a sentinel
 * may be behind).
 */
#ifndef STG_REDIS_SENTINEL_H
#define STG_REDIS_SENTINEL_H

#include <stdbool.h>
#include <stdint.h>

#include <stagger/redis.h>

#define STG__SENTINEL_WHY 400

/* list: "HOST:PORT[,HOST:PORT...]" (IPv6 in brackets; PORT default 26379).
 * On success STG_OK with host (NUL-ended) and *port; else STG_EUNAVAIL
 * (none answered with an address) or STG_EINVAL (list malformed), why says
 * what. tls and t as for stg__rconn_open (sentinels speak TLS when the
 * primary does). */
int stg__sentinel_master(const char *list, const char *name, bool tls, const stg_redis_tls *t,
                         int64_t connect_us, int64_t command_us, char *host, size_t hlen,
                         int *port, char *why, size_t why_len);

#endif
