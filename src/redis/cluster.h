/*
 * Redis Cluster, the client's side: which hash slot a key lives in (CRC16
 * of its hash tag, as Redis computes it), and what a redirection says
 * ("MOVED slot host:port", "ASK slot host:port") or whether an error reply
 * asks to try again (TRYAGAIN during a slot migration, CLUSTERDOWN while
 * the cluster fails over). Pure: no I/O, no state.
 *
 * How the owners use it (conn.c for the limiter, queue_conn.c for the
 * queue): every command goes to the node that served the key's slot last
 * (the URL's node at first); MOVED updates that and the command is sent
 * again there; ASK sends ASKING and the command once to the node named,
 * without updating; TRYAGAIN and CLUSTERDOWN wait a little and send again.
 * At most STG__CLUSTER_MAX_HOPS redirections per command, so a cluster that
 * points in circles is an error, not a hang.
 */
#ifndef STG_REDIS_CLUSTER_H
#define STG_REDIS_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>

#include <hiredis/hiredis.h>

#define STG__CLUSTER_SLOTS 16384
#define STG__CLUSTER_MAX_HOPS 8
/* The wait before sending again after TRYAGAIN or CLUSTERDOWN (us), and
 * how many such waits a command gets (2 s: a slot's keys being migrated,
 * a failover being voted) before it fails as "unreachable". These do not
 * count as redirections. */
#define STG__CLUSTER_RETRY_US 50000
#define STG__CLUSTER_MAX_RETRIES 40

/* The hash slot of key[0..len): CRC16-XMODEM of the part between the first
 * '{' and the next '}' when that part is not empty, else of the whole key,
 * modulo 16384. */
int stg__cluster_slot(const char *key, size_t len);

typedef enum stg__redirect {
    STG__REDIRECT_NONE = 0,
    STG__REDIRECT_MOVED = 1,
    STG__REDIRECT_ASK = 2,
    STG__REDIRECT_RETRY = 3 /* TRYAGAIN, CLUSTERDOWN */
} stg__redirect;

/* What the reply r asks for. For MOVED and ASK, *slot, host (NUL-ended,
 * brackets of an IPv6 address removed; "" when the server left it out:
 * the host the command went to) and *port are set; a malformed
 * redirection is NONE (the caller reports the error reply). */
stg__redirect stg__cluster_redirect(const redisReply *r, int *slot, char *host, size_t hlen,
                                    int *port);

#endif
