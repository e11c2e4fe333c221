/*
 * The shared-limiter flags of fetch and batch: --limiter URL,
 * --limiter-fallback local:SHARE|none and --share-breaker. They put one rate
 * limit (and optionally one circuit breaker) for many processes or machines
 * in Redis, plugged into libstagger-curl through stg_shared_limiter; and
 * the servers' announced quotas held there together (stg_shared_quota).
 */
#ifndef STAGGER_CLI_LIMITER_H
#define STAGGER_CLI_LIMITER_H

#ifdef STG_HAVE_CURL
#include <stagger/curl.h>

#include "cli/opt.h"
#include "cli/redis_tls.h"

typedef struct cli_limiter {
    const char *cmd;
    const char *url;       /* --limiter; NULL: none */
    double fallback_share; /* --limiter-fallback local:SHARE; 0: none */
    int64_t lease_us;      /* --limiter-lease; 0: one round trip per request */
    bool share_breaker;    /* --share-breaker */
    bool url_has_key;      /* the URL names the key: every host shares it */
    double max_rate;       /* shared adaptive rate: ceiling (0: none) */
    void *backend;         /* stg_redis_limiter * */
    stg_shared_limiter ops;
    void *quotas;          /* stg_redis_quota *: the servers' quotas shared */
    stg_shared_quota qops;
    cli_redis_tls tls;     /* --redis-cacert ... (group cli_redis_tls_opts) */
} cli_limiter;

/* --limiter and --limiter-fallback, an option-table group whose field is
 * the cli_limiter. (--share-breaker, a batch flag, sets share_breaker.) */
extern const cli_opt cli_limiter_opts[];

/* How far ahead a shared adaptive rate reserves sends (as the engine's
 * own adaptive rate: a cut must slow what comes next at once). */
#define CLI_LIMITER_HORIZON_US STG_MS(50)

/* Connect to the backend when --limiter was given. rate and burst are the
 * shared limit; rate 0 (none given) shares an adaptive rate, capped at
 * l->max_rate; failures and open_us configure a shared breaker. *out is &l->ops, or NULL without
 * --limiter. Returns 0, or an exit status after a one-line message (CLI_EXIT_USAGE, or
 * CLI_EXIT_LIMITER: unreachable without a fallback). */
int cli_limiter_open(cli_limiter *l, double rate, int64_t burst, int failures, int64_t open_us,
                     const stg_shared_limiter **out);

/* With --limiter open: hold the servers' announced quotas (every quota,
 * unit and server key the answers name) and the costs reserved in flight
 * in the same Redis, for every process on it (stagger/redis/quota.h).
 * *out is &l->qops, or NULL without --limiter. Returns 0, or an exit
 * status after a one-line message. */
int cli_limiter_share_quotas(cli_limiter *l, const stg_shared_quota **out);

/* Disconnect; accepts an unopened one. */
void cli_limiter_close(cli_limiter *l);
#endif

/* help --defaults (opt.h): the rows of --limiter-fallback and
 * --limiter-lease from l as the command holds it. */
void cli_limiter_defaults_rows(const cli_command *c, const cli_limiter *l);

#endif
