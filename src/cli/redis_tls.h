/*
 * The TLS options of the connections to Redis (rediss:// in --limiter and
 * --queue): --redis-cacert, --redis-capath, --redis-cert, --redis-key,
 * --redis-insecure. They mirror the HTTPS options (--cacert, --capath,
 * --cert, --key, -k) but are their own: the API and Redis are different
 * servers with different CAs and different client certificates, and a
 * client certificate meant for one must not be shown to the other.
 *
 * Invariants: the files named are checked readable before anything
 * connects (a typo is a usage error, not an "unreachable" after retries);
 * --redis-insecure always says on stderr that verification is off; the
 * options without a rediss:// URL are a usage error (they would do
 * nothing, silently).
 */
#ifndef STAGGER_CLI_REDIS_TLS_H
#define STAGGER_CLI_REDIS_TLS_H

#include <stdbool.h>

#include "cli/opt.h"

#ifdef STG_HAVE_REDIS
#include <stagger/redis.h>
#endif

typedef struct cli_redis_tls {
    const char *cacert, *capath, *cert, *key; /* argv strings */
    const char *sentinels, *sentinel_master;  /* --redis-sentinel, --redis-sentinel-master */
    bool insecure;
    bool checked; /* cli_redis_tls_config ran (it warns once) */
    bool had_url; /* it was once called with a URL */
#ifdef STG_HAVE_REDIS
    stg_redis_tls cfg; /* built by cli_redis_tls_config */
#endif
} cli_redis_tls;

/* The seven options: an option-table group whose field is a cli_redis_tls. */
extern const cli_opt cli_redis_tls_opts[];

/* Check t's options against url (NULL: no Redis URL given) and build
 * t->cfg. Warns on stderr for --redis-insecure (once per t). Returns 0, or
 * CLI_EXIT_USAGE after one line (a file that cannot be read, --redis-key
 * without --redis-cert, an option given while neither this url nor one
 * checked before with t is rediss://). */
int cli_redis_tls_config(cli_redis_tls *t, const char *cmd, const char *url);

#endif
