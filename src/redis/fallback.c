/*
 * The local fallback: while Redis is unreachable, each process answers from
 * its own bucket (at share * rate, burst max(1, floor(share * burst)))
 * and its own stg_breaker, one of each per key name. An adaptive limiter
 * has no rate to share: each process learns its own with a local
 * stg_adaptive, capped at share * the rate Redis last gave the key.
 *
 * Why share * rate: N processes that each take 1/N of the rate keep the
 * total within the limit without talking to each other; the operator picks
 * the share because only they know how many processes run.
 *
 * The hand-overs keep the bound burst + rate * t across them, for what this
 * process sends (each process only knows its own sends; with N processes
 * and N * share <= 1 the carried debts add up to at least the union's):
 *  - While Redis answers, every decision reports the key's debt (TAT - now
 *    on Redis's clock) and the local bucket is set to it, scaled to local
 *    tokens (debt / T shared tokens, each T_L = T / share long). Falling
 *    back, the local bucket starts from there, not full: sends the shared
 *    bucket already let through are not let through again. Its debt drains
 *    at share * rate in shared tokens, never faster than Redis's would.
 *  - While local, admissions add to the local debt. After every
 *    reconnection, the first shared decision for each key first adds that
 *    debt, in shared time (debt_L * T / T_L), to the key's TAT in Redis: a
 *    Redis that restarted empty (or kept an old, drained TAT) would
 *    otherwise hand out a full burst on top of what the fallback just
 *    sent, or of what it let through before it died. When Redis kept the
 *    key, the mirrored part is counted twice: a short pause (at most
 *    burst / rate), erring on the side of sending less.
 * Why these are enough, for one process: the local GCRA's TAT bounds
 * t_k + n_k * T_L for every earlier admission k (n_k = admissions since),
 * and T_L >= T, so its debt, rescaled, bounds the shared GCRA's debt of
 * the same admissions; a debt carried or mirrored at least as large as the
 * real one keeps every later window within burst + rate * t.
 *
 * The stand-ins are made on first use (a closed breaker, a full bucket
 * unless a debt is mirrored into it), kept for the life of the limiter
 * (so a Redis that flaps does not hand each process a fresh burst every
 * time), and live in a singly linked list: a batch talks to a handful of
 * hosts. All access is under the limiter's mutex.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "util/assert.h"

/* Bound of a local debt (as stg_bucket's span): keeps every sum far from
 * int64 overflow. */
#define LOCAL_SPAN_MAX_NS (INT64_C(1) << 60)

static int64_t local_interval_ns(const stg_redis_limiter *l, double rate)
{
    double share = l->share > 0 ? l->share : 1.0;
    return (int64_t)ceil(1e9 / (share * rate));
}

static int64_t local_now_ns(const stg__local *loc, int64_t now_us)
{
    return (now_us - loc->origin_us) * 1000;
}

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
    int64_t now = stg__redis_now(l);
    p->origin_us = now;
    p->tat_ns = 0; /* full */
    p->interval_ns = l->adaptive ? 1 : local_interval_ns(l, l->rate);
    stg_breaker_config brc;
    local_breaker_config(l, &brc);
    brc.on_change = count_trips;
    brc.data = p;
    /* The config was checked when the limiter was made, so this cannot fail
     * for bad values, only for want of a mutex. */
    if (stg_breaker_init(&p->breaker, &brc) != STG_OK) {
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
    if (l->adaptive)
        return;
    int64_t now = stg__redis_now(l);
    int64_t t = local_interval_ns(l, rate);
    for (stg__local *p = l->locals; p; p = p->next) {
        int64_t now_ns = local_now_ns(p, now);
        if (p->tat_ns > now_ns) {
            double d = ceil((double)(p->tat_ns - now_ns) * ((double)t / (double)p->interval_ns));
            p->tat_ns = now_ns + (d > (double)LOCAL_SPAN_MAX_NS ? LOCAL_SPAN_MAX_NS : (int64_t)d);
        }
        p->interval_ns = t;
    }
}

int stg__local_take(stg_redis_limiter *l, stg__local *loc, int64_t weight, int64_t now_us,
                    int64_t timeout_us, int64_t *wait_us)
{
    if (weight > l->local_burst)
        return STG_ETOOBIG;
    int64_t now = local_now_ns(loc, now_us);
    int64_t limit = timeout_us <= 0 ? 0
                    : timeout_us >= LOCAL_SPAN_MAX_NS / 1000 ? LOCAL_SPAN_MAX_NS
                                                              : timeout_us * 1000;
    int64_t tat = loc->tat_ns > now ? loc->tat_ns : now;
    /* weight <= local_burst and local_burst * T was checked against 2^60 */
    int64_t new_tat = tat + weight * loc->interval_ns;
    int64_t wait = new_tat - l->local_burst * loc->interval_ns - now;
    if (wait > limit) {
        *wait_us = (wait + 999) / 1000;
        return timeout_us < 0 ? STG_EAGAIN : STG_ETIMEDOUT;
    }
    loc->tat_ns = new_tat;
    *wait_us = wait > 0 ? (wait + 999) / 1000 : 0;
    STG_ASSERT(loc->tat_ns - now <= l->local_burst * loc->interval_ns + limit);
    return STG_OK;
}

int64_t stg__local_carry_ns(const stg_redis_limiter *l, const stg__local *loc, int64_t now_us)
{
    int64_t debt = loc->tat_ns - local_now_ns(loc, now_us);
    if (debt <= 0)
        return 0;
    /* debt / T_L local tokens, each worth T of the shared bucket: rounded
     * up, and within what the script keeps exact. */
    double c = ceil((double)debt * ((double)l->interval_ns / (double)loc->interval_ns));
    return c > (double)STG_REDIS_SPAN_MAX_NS ? STG_REDIS_SPAN_MAX_NS : (int64_t)c;
}

void stg__local_mirror(const stg_redis_limiter *l, stg__local *loc, int64_t now_us,
                       int64_t shared_debt_ns)
{
    int64_t now = local_now_ns(loc, now_us);
    double d = shared_debt_ns <= 0 ? 0.0
               : ceil((double)shared_debt_ns * ((double)loc->interval_ns / (double)l->interval_ns));
    loc->tat_ns = now + (d > (double)LOCAL_SPAN_MAX_NS ? LOCAL_SPAN_MAX_NS : (int64_t)d);
    loc->carry = false;
}

void stg__local_mark_carry(stg_redis_limiter *l)
{
    for (stg__local *p = l->locals; p; p = p->next)
        p->carry = true;
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
