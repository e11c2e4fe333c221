/*
 * The local fallback: while Redis is unreachable, each process answers from
 * its own stg_bucket (at share * rate, burst max(1, floor(share * burst)))
 * and its own stg_breaker, one of each per key name. An adaptive limiter
 * has no rate to share: each process learns its own with a local
 * stg_adaptive, capped at share * the rate Redis last gave the key.
 *
 * Why share * rate: N processes that each take 1/N of the rate keep the
 * total within the limit without talking to each other; the operator picks
 * the share because only they know how many processes run.
 *
 * The stand-ins are made on first use (a full bucket, a closed breaker),
 * kept for the life of the limiter (so a Redis that flaps does not hand
 * each process a fresh burst every time), and live in a singly linked list:
 * a batch talks to a handful of hosts. All access is under the limiter's
 * mutex.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Counts trips of a local breaker (the stg_breaker API has no counter).
 * Runs inside stg_breaker_* calls, which run under the limiter's mutex,
 * as every access to the counter does. */
static void count_trips(void *data, stg_breaker_state from, stg_breaker_state to, int64_t now_us)
{
    (void)from;
    (void)now_us;
    if (to == STG_BREAKER_OPEN)
        ((stg__local *)data)->trips++;
}

/* The local breaker's configuration from the shared one. */
static void local_breaker_config(const stg_redis_limiter *l, stg_breaker_config *out)
{
    memset(out, 0, sizeof *out);
    out->consecutive_failures = l->bcfg.consecutive_failures;
    out->open_us = l->bcfg.open_us;
    out->max_multiplier = l->bcfg.max_multiplier;
    out->half_open_probes = l->bcfg.half_open_probes;
    out->probe_timeout_us = l->bcfg.probe_timeout_us;
}

stg__local *stg__local_get(stg_redis_limiter *l, const char *name)
{
    for (stg__local *p = l->locals; p; p = p->next)
        if (strcmp(p->name, name) == 0)
            return p;
    size_t n = strlen(name);
    stg__local *p = calloc(1, sizeof *p + n + 1);
    if (!p)
        return NULL;
    memcpy(p->name, name, n + 1);
    stg_bucket_config bc = {.rate = l->share > 0 ? l->share * l->rate : l->rate,
                            .burst = l->share > 0 ? l->local_burst : l->burst};
    stg_breaker_config brc;
    local_breaker_config(l, &brc);
    brc.on_change = count_trips;
    brc.data = p;
    /* Both configs were checked when the limiter was made or its rate
     * changed, so these cannot fail for bad values; the breaker can for
     * want of a mutex. An adaptive limiter has no bucket. */
    if ((!l->adaptive && stg_bucket_init(&p->bucket, &bc, stg__redis_now(l)) != STG_OK) ||
        stg_breaker_init(&p->breaker, &brc) != STG_OK) {
        free(p);
        return NULL;
    }
    p->next = l->locals;
    l->locals = p;
    return p;
}

stg_adaptive *stg__local_adaptive(stg_redis_limiter *l, stg__local *loc)
{
    if (loc->has_adaptive)
        return &loc->adaptive;
    stg_adaptive_config c = l->acfg;
    if (loc->learned_rate > 0) {
        double cap = l->share * loc->learned_rate;
        if (cap < c.min_rate)
            cap = c.min_rate;
        if (c.max_rate == 0.0 || cap < c.max_rate)
            c.max_rate = cap;
    }
    if (stg_adaptive_init(&loc->adaptive, &c, stg__redis_now(l)) != STG_OK)
        return NULL;
    loc->has_adaptive = true;
    return &loc->adaptive;
}

void stg__local_set_rate(stg_redis_limiter *l, double rate)
{
    if (!(l->share > 0) || l->adaptive)
        return;
    int64_t now = stg__redis_now(l);
    for (stg__local *p = l->locals; p; p = p->next)
        stg_bucket_set_rate(&p->bucket, l->share * rate, now);
}

void stg__local_free_all(stg_redis_limiter *l)
{
    stg__local *p = l->locals;
    while (p) {
        stg__local *next = p->next;
        stg_breaker_destroy(&p->breaker);
        if (p->has_adaptive)
            stg_adaptive_destroy(&p->adaptive);
        free(p);
        p = next;
    }
    l->locals = NULL;
}
