/*
 * Private to the work queue (queue_conn.c, queue.c, queue_report.c,
 * queue_lua.c): the handle, its one connection (rconn.c) and the scripts.
 * See <stagger/redis/queue.h> for the keys and the invariants.
 *
 * Invariant: ctx != NULL implies the scripts were loaded on it (their
 * SHA1s are in sha[]) and the consumer group exists if the stream does (a
 * load creates both); a NOSCRIPT later
 * (SCRIPT FLUSH, a Redis restarted from its AOF) reloads the script on the
 * same connection and runs the command again, once.
 */
#ifndef STG_REDIS_QUEUE_INTERNAL_H
#define STG_REDIS_QUEUE_INTERNAL_H

#include <hiredis/hiredis.h>

#include "redis/rconn.h"

#include <stagger/redis.h>
#include <stagger/redis/queue.h>

enum {
    STG__Q_LOAD = 0,
    STG__Q_CLAIM = 1,
    STG__Q_FINISH = 2,
    STG__Q_COUNTS = 3,
    STG__Q_HOLD = 4,
    STG__Q_HOLD_LEFT = 5,
    STG__Q_RENEW = 6,
    STG__Q_CLASSES = 7,
    STG__Q_NSCRIPTS = 8
};

extern const char *const stg__queue_lua[STG__Q_NSCRIPTS];

#define STG__Q_GROUP "workers"

struct stg_queue {
    stg_redis_url url;
    char where[STG_REDIS_HOST_MAX + 10]; /* "HOST:PORT" of the node, for messages */
    /* The node that serves the queue's slot: the URL's, until a Redis
     * Cluster says MOVED (cluster.h). Every key of a queue is in one slot
     * (the {NAME} hash tag), so one node at a time serves all of it. */
    char node_host[STG_REDIS_HOST_MAX + 1];
    int node_port;
    int64_t redirects;          /* MOVED and ASK followed */
    char base[64 + STG_REDIS_KEY_MAX + 8]; /* "<prefix>{NAME}:" */
    char worker[208];
    int64_t connect_timeout_us, command_timeout_us, reconnect_interval_us;
    int64_t claim_idle_us;
    int max_deliveries;
    stg_redis_tls tls;          /* rediss:// verification (strings borrowed) */
    char *sentinels, *sentinel_master; /* owned; NULL: no Sentinel */
    stg__rconn *ctx;
    char sha[STG__Q_NSCRIPTS][41];
    bool attempted;
    int64_t last_attempt_us;
    char err[512];
    stg_queue_stats stats;
};

/* Under a connection (reconnecting if the interval allows): run command
 * argv. NULL on an I/O failure or no connection (q->err says why; the
 * connection is dropped). An error reply is returned as a reply. */
redisReply *stg__queue_cmd(stg_queue *q, int argc, const char **argv, const size_t *lens);
/* Run script `which` with ARGV = argv (KEYS: the queue's fixed keys,
 * see queue_conn.c), reloading on NOSCRIPT; following Redis Cluster's
 * redirections as stg__queue_cmd does.
 * NULL as stg__queue_cmd; an error reply is turned into NULL too, with
 * *eio set (the script failed: not an outage). */
redisReply *stg__queue_eval(stg_queue *q, int which, int argc, const char **argv,
                            const size_t *lens, bool *eio);
/* Record a formatted error; returns err. */
int stg__queue_fail(stg_queue *q, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Integer of a reply (integer or numeric string); false otherwise. */
bool stg__queue_int(const redisReply *r, long long *out);
/* The queue's counts from the reply of the counts() Lua helper:
 * {total, pel, {field, value, ...}}. */
bool stg__queue_counts_from(const redisReply *r, stg_queue_counts *c);
/* Unix wall clock in ms, monotonic clock in us. */
int64_t stg__queue_wall_ms(void);
int64_t stg__queue_mono_us(void);

#endif
