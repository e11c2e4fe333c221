/*
 * Shared limiter flags (see limiter.h). The Redis backend (stagger/redis.h)
 * answers each acquire with Redis's own clock, so many workers on many
 * machines share one limit; when Redis is unreachable the backend either
 * fails (a clear error, the default) or falls back to a local bucket at
 * SHARE of the rate, and says so through the log callback below.
 */
#ifdef STG_HAVE_CURL
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/limiter.h"

#ifdef STG_HAVE_REDIS
#include <stagger/redis.h>
#include <stagger/redis/quota.h>
#endif

static int opt_limiter(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    cli_limiter *l = field;
    l->cmd = cli_cmd_name(p);
#ifdef STG_HAVE_REDIS
    stg_redis_url u;
    const char *why = NULL;
    if (stg_redis_url_parse(val, &u, &why) != STG_OK)
        return cli_usage_error(l->cmd,
                               "bad value for --limiter: %s (expected "
                               "redis://HOST:PORT/KEY)",
                               why ? why : "malformed URL");
    l->url = val;
    l->url_has_key = u.key[0] != '\0';
    return 0;
#else
    (void)val;
    return cli_usage_error(l->cmd, "--limiter needs Redis support (libhiredis-dev at build "
                                   "time)");
#endif
}

static int opt_fallback(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    cli_limiter *l = field;
    l->cmd = cli_cmd_name(p);
    if (!strcmp(val, "none")) { /* the default, with or without Redis */
        l->fallback_share = 0;
        return 0;
    }
#ifdef STG_HAVE_REDIS
    const char *why = NULL;
    if (stg_redis_fallback_parse(val, &l->fallback_share, &why) != STG_OK)
        return cli_usage_error(l->cmd, "bad value '%s' for --limiter-fallback: %s", val,
                               why ? why : "expected local:SHARE or none");
    return 0;
#else
    (void)val;
    return cli_usage_error(l->cmd, "--limiter-fallback needs Redis support");
#endif
}

static int opt_lease(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    cli_limiter *l = field;
    l->cmd = cli_cmd_name(p);
    int64_t d;
    if (!cli_parse_duration(val, &d) || d > STG_SEC(10))
        return cli_usage_error(l->cmd, "bad value '%s' for --limiter-lease: expected a duration "
                                       "such as 40ms (at most 10s; 0: no leases)",
                               val);
    l->lease_us = d;
    return 0;
}

const cli_opt cli_limiter_opts[] = {
    {CLI_FN, "limiter", 0, "redis[s]://[:PASSWORD@]HOST[:PORT][/[DB/]KEY]",
     "keep the rate limit (--rate, --burst) in Redis,\n"
     "judged by Redis's clock; without --rate, the adaptive\n"
     "rate is learned there, one for all processes; KEY\n"
     "shares one limit across hosts (default: one per host);\n"
     "batch and proxy also hold there the quotas the\n"
     "servers announce (every unit, per server key) and\n"
     "the costs reserved in flight, one for all processes",
     0, opt_limiter, NULL, 0, NULL},
    {CLI_FN, "limiter-fallback", 0, "local:SHARE|none",
     "while Redis is unreachable, use a local bucket at\n"
     "SHARE (0..1] of the rate (adaptive: a local adaptive\n"
     "rate capped at SHARE of the rate last learned);\n"
     "none: a clear error",
     0, opt_fallback, NULL, 0, NULL, "none"},
    {CLI_FN, "limiter-lease", 0, "DURATION",
     "with --rate: take the shared limit in leases of\n"
     "tokens lasting about DURATION (40ms) at this\n"
     "process's own rate: one Redis round trip per many\n"
     "requests, the limit still held; 0: one round trip\n"
     "per request",
     0, opt_lease, NULL, 0, NULL, "0"},
    CLI_OPT_END,
};

void cli_limiter_defaults_rows(const cli_command *c, const cli_limiter *l)
{
    char fb[64] = "none";
    if (l->fallback_share > 0)
        snprintf(fb, sizeof fb, "local:%g", l->fallback_share);
    cli_defaults_row(c, "limiter-fallback", CLI_VAL_STRING, fb);
    cli_defaults_row(c, "limiter-lease", CLI_VAL_DURATION, (int64_t)l->lease_us);
}

#ifdef STG_HAVE_REDIS
static void on_log(void *data, stg_redis_event ev, const char *msg)
{
    const cli_limiter *l = data;
    (void)ev;
    fprintf(stderr, "stagger %s: %s\n", l->cmd, msg);
}

static int acquire(void *ctx, const char *key, int64_t timeout_us, int64_t *wait_us,
                   int64_t *ticket)
{
    cli_limiter *l = ctx;
    (void)ticket;
    return stg_redis_limiter_acquire(l->backend, l->url_has_key ? NULL : key, 1, timeout_us,
                                     wait_us);
}

/* A request of a class (and tenant): stg_redis_limiter_acquire_class. A
 * batch is never given a token ahead: it is refused with the wait until
 * asking again may succeed, and the engine asks again then (a class's
 * refusal is not asked half a horizon early as a reservation is:
 * engine_admit.c). */
static int acquire_class(void *ctx, const char *key, const stg_class *cls, int64_t timeout_us,
                         int64_t *wait_us, int64_t *ticket)
{
    cli_limiter *l = ctx;
    (void)ticket;
    int rc = stg_redis_limiter_acquire_class(l->backend, l->url_has_key ? NULL : key, cls,
                                             timeout_us, wait_us);
    return rc;
}

static int acquire_adaptive(void *ctx, const char *key, int64_t timeout_us, int64_t *wait_us,
                            int64_t *ticket)
{
    cli_limiter *l = ctx;
    return stg_redis_adaptive_acquire(l->backend, l->url_has_key ? NULL : key, timeout_us, wait_us,
                                      ticket);
}

/* A request of a class on a learned rate: ordered by class once the key
 * paces (stg_redis_adaptive_acquire_class), with its ticket for
 * on_response. */
static int acquire_class_adaptive(void *ctx, const char *key, const stg_class *cls,
                                  int64_t timeout_us, int64_t *wait_us, int64_t *ticket)
{
    cli_limiter *l = ctx;
    return stg_redis_adaptive_acquire_class(l->backend, l->url_has_key ? NULL : key, cls,
                                            timeout_us, wait_us, ticket);
}

static void on_response(void *ctx, const char *key, int64_t ticket, bool throttled, int64_t hold_us)
{
    cli_limiter *l = ctx;
    (void)stg_redis_adaptive_response(l->backend, l->url_has_key ? NULL : key, ticket, throttled,
                                      hold_us);
}

static int breaker_allow(void *ctx, const char *key, int64_t *retry_in_us)
{
    cli_limiter *l = ctx;
    return stg_redis_breaker_allow(l->backend, l->url_has_key ? NULL : key, retry_in_us);
}

static void breaker_record(void *ctx, const char *key, stg_breaker_verdict v)
{
    cli_limiter *l = ctx;
    (void)stg_redis_breaker_record(l->backend, l->url_has_key ? NULL : key, v, NULL);
}
#endif

int cli_limiter_open(cli_limiter *l, double rate, int64_t burst, int failures, int64_t open_us,
                     const stg_shared_limiter **out)
{
    *out = NULL;
    int trc = cli_redis_tls_config(&l->tls, l->cmd ? l->cmd : "fetch", l->url);
    if (trc)
        return trc;
    if (!l->url) {
        if (l->fallback_share > 0 || l->share_breaker)
            return cli_usage_error(l->cmd, "--limiter-fallback and --share-breaker need "
                                           "--limiter");
        return 0;
    }
#ifdef STG_HAVE_REDIS
    bool adaptive = !(rate > 0);
    stg_redis_limiter_config c;
    memset(&c, 0, sizeof c);
    c.url = l->url;
    if (adaptive) {
        c.adaptive = true;
        c.adaptive_config.max_rate = l->max_rate;
    } else {
        c.rate = rate;
        c.burst = burst;
    }
    c.fallback_share = l->fallback_share;
    c.lease_us = adaptive ? 0 : l->lease_us;
    c.breaker.consecutive_failures = failures > 0 ? failures : 0;
    c.breaker.open_us = open_us;
    c.log = on_log;
    c.log_data = l;
    c.tls = &l->tls.cfg;
    c.sentinels = l->tls.sentinels;
    c.sentinel_master = l->tls.sentinel_master;
    int err = 0;
    char why[256] = "";
    l->backend = stg_redis_limiter_new(&c, &err, why, sizeof why);
    if (!l->backend) {
        fprintf(stderr, "stagger %s: shared limiter: %s\n", l->cmd,
                why[0] ? why : stg_strerror(err));
        return err == STG_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_LIMITER;
    }
    l->ops.ctx = l;
    l->ops.acquire = adaptive ? acquire_adaptive : acquire;
    if (adaptive) {
        l->ops.on_response = on_response;
        l->ops.horizon_us = CLI_LIMITER_HORIZON_US;
        l->ops.acquire_class = acquire_class_adaptive;
    } else {
        /* By class. No horizon: a request reserves as far ahead as its
         * deadline, one round trip (or a lease's token) each, until the
         * engine has classes in play or the limiter refuses one by class;
         * then the engine paces the key and asks again (engine_admit.c). */
        l->ops.acquire_class = acquire_class;
    }
    if (l->share_breaker) {
        l->ops.breaker_allow = breaker_allow;
        l->ops.breaker_record = breaker_record;
    }
    *out = &l->ops;
    return 0;
#else
    (void)rate, (void)burst, (void)failures, (void)open_us;
    return cli_usage_error(l->cmd, "--limiter needs Redis support");
#endif
}

#ifdef STG_HAVE_REDIS
static int q_acquire(void *ctx, const char *key, const char *route, const stg_quota_cost *costs,
                     size_t n, int64_t demand, void **ticket, int64_t *wait_us)
{
    cli_limiter *l = ctx;
    stg_redis_quota_ticket *t = NULL;
    int rc = stg_redis_quota_acquire(l->quotas, key, route, costs, n, demand, &t, wait_us);
    *ticket = t;
    return rc;
}

static int q_acquire_class(void *ctx, const char *key, const char *route, const stg_class *cls,
                           const stg_quota_cost *costs, size_t n, int64_t demand, void **ticket,
                           int64_t *wait_us)
{
    cli_limiter *l = ctx;
    stg_redis_quota_ticket *t = NULL;
    int rc = stg_redis_quota_acquire_class(l->quotas, key, route, cls, costs, n, demand, &t,
                                           wait_us);
    *ticket = t;
    return rc;
}

static void q_settle(void *ctx, void *ticket, int how, const stg_quota_set *qs,
                     const stg_quota_cost *used, size_t n_used, int64_t demand)
{
    cli_limiter *l = ctx;
    (void)stg_redis_quota_settle(l->quotas, ticket, (stg_redis_quota_end)how, qs, used, n_used,
                                 demand);
}

static void q_tick(void *ctx)
{
    cli_limiter *l = ctx;
    stg_redis_quota_tick(l->quotas);
}
#endif

int cli_limiter_share_quotas(cli_limiter *l, const stg_shared_quota **out)
{
    *out = NULL;
#ifdef STG_HAVE_REDIS
    if (!l->backend)
        return 0;
    int err = 0;
    l->quotas = stg_redis_quota_new(l->backend, NULL, &err);
    if (!l->quotas) {
        fprintf(stderr, "stagger %s: shared quotas: %s\n", l->cmd, stg_strerror(err));
        return CLI_EXIT_LIMITER;
    }
    l->qops.ctx = l;
    l->qops.acquire = q_acquire;
    l->qops.acquire_class = q_acquire_class;
    l->qops.settle = q_settle;
    l->qops.tick = q_tick;
    *out = &l->qops;
#else
    (void)l;
#endif
    return 0;
}

void cli_limiter_close(cli_limiter *l)
{
#ifdef STG_HAVE_REDIS
    if (l && l->quotas) {
        stg_redis_quota_free(l->quotas); /* its leases back, before the connection goes */
        l->quotas = NULL;
    }
    if (l && l->backend) {
        stg_redis_limiter_free(l->backend);
        l->backend = NULL;
    }
#else
    (void)l;
#endif
}
#else
/* ISO C forbids an empty translation unit. */
typedef int stg_cli_limiter_unused;
#endif
