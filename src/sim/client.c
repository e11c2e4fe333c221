/*
 * Client model (see client.h). Nothing here decides on its own: each step
 * calls the library primitive that a real client would call.
 */
#include <string.h>

#include "client.h"

static stg_backoff_kind kind_of(sim_strategy s)
{
    switch (s) {
    case SIM_NONE:
    case SIM_FIXED: return STG_BACKOFF_FIXED;
    case SIM_EXPONENTIAL: return STG_BACKOFF_EXPONENTIAL;
    case SIM_FULL: return STG_BACKOFF_FULL;
    case SIM_EQUAL: return STG_BACKOFF_EQUAL;
    case SIM_DECORRELATED: return STG_BACKOFF_DECORRELATED;
    case SIM_PCT: return STG_BACKOFF_PROPORTIONAL;
    case SIM_ADDITIVE: return STG_BACKOFF_ADDITIVE;
    default: return STG_BACKOFF_DEFAULT;
    }
}

int sim_strategy_policy(const sim_opts *o, sim_strategy s, int mode, stg_policy *out)
{
    stg_policy p = o->policy;
    sim_strategy b = s;
    if (s == SIM_BUCKET || s == SIM_ADAPTIVE)
        b = o->paced_backoff;
    if (b == SIM_BUCKET || b == SIM_ADAPTIVE)
        return STG_EINVAL;
    p.backoff.kind = kind_of(b);
    if (b == SIM_NONE) {
        p.backoff.base_us = 1;
        if (p.backoff.cap_us < 1)
            p.backoff.cap_us = 1;
    }
    if (mode >= 0)
        p.retry_after_mode = (stg_retry_after_mode)mode;
    return stg_policy_resolve(&p, out);
}

const stg_hints *sim_retry_after_hints(stg_hints *h, int64_t ra_us)
{
    if (ra_us < 0)
        return NULL;
    stg_hints_init(h);
    h->retry_after_us = ra_us;
    h->seen = STG_HINT_RETRY_AFTER;
    return h;
}

void sim_decide(const stg_policy *p, stg_retry_state *st, stg_method m, int status, int64_t ra_us,
                int64_t now_us, stg_rng *rng, stg_decision *d)
{
    stg_hints h;
    stg_outcome oc = {.status = status, .error = STG_NET_NONE, .method = m,
                      .hints = sim_retry_after_hints(&h, ra_us)};
    if (stg_decide(p, st, &oc, now_us, rng, d) == STG_OK)
        stg_retry_state_note(st, d);
}

int sim_client_env_init(sim_client_env *e, const sim_opts *o, sim_strategy s, int mode,
                        uint64_t seed)
{
    memset(e, 0, sizeof *e);
    if (sim_strategy_policy(o, s, mode, &e->policy) != STG_OK)
        return STG_EINVAL;
    stg_rng_seed(&e->rng, seed);
    if (s == SIM_BUCKET) {
        stg_bucket_config bc = {.rate = o->client_share * o->limit_rps,
                                .burst = o->client_burst};
        if (stg_bucket_init(&e->bucket, &bc, 0) != STG_OK)
            return STG_EINVAL;
        e->has_bucket = true;
    }
    if (o->use_budget) {
        if (stg_budget_init(&e->budget, &o->budget) != STG_OK)
            return STG_EINVAL;
        e->has_budget = true;
    }
    if (o->use_breaker) {
        int rc = stg_breaker_init(&e->breaker, &o->breaker);
        if (rc != STG_OK)
            return rc;
        e->has_breaker = true;
    }
    if (s == SIM_ADAPTIVE) {
        int rc = stg_adaptive_init(&e->adaptive, NULL, 0);
        if (rc != STG_OK) {
            if (e->has_breaker)
                stg_breaker_destroy(&e->breaker);
            return rc;
        }
        e->has_adaptive = true;
    }
    return STG_OK;
}

void sim_client_env_destroy(sim_client_env *e)
{
    if (e->has_adaptive)
        stg_adaptive_destroy(&e->adaptive);
    if (e->has_breaker)
        stg_breaker_destroy(&e->breaker);
    e->has_adaptive = e->has_breaker = false;
}

bool sim_client_before(sim_client_env *e, int64_t now_us, int64_t *wait_us)
{
    *wait_us = 0;
    if (e->has_breaker && stg_breaker_allow(&e->breaker, now_us, NULL) != STG_OK)
        return false;
    int64_t w = 0;
    if (e->has_bucket && stg_bucket_acquire(&e->bucket, 1, now_us, INT64_MAX, &w) == STG_OK)
        *wait_us = w;
    if (e->has_adaptive && stg_adaptive_acquire(&e->adaptive, now_us, INT64_MAX, &w) == STG_OK)
        *wait_us = w;
    return true;
}

void sim_client_after(sim_client_env *e, stg_retry_state *st, int status, int64_t ra_us,
                      int64_t now_us, stg_decision *d)
{
    /* As the engine does (src/curl/engine_done.c): a throttle is a 429, or
     * a 503 that carries a Retry-After; the budget counts a throttle as
     * half a failure (a rate signal, not a fault), or as nothing with the
     * adaptive rate (which slows down on it), and never as a success. */
    stg_hints h;
    const stg_hints *hints = sim_retry_after_hints(&h, ra_us);
    if (e->has_adaptive) {
        stg_adaptive_on_response(&e->adaptive, status == 429 || (status == 503 && ra_us >= 0),
                                 now_us);
        if (hints)
            stg_adaptive_on_hints(&e->adaptive, hints, now_us, &e->rng);
    }
    if (e->has_breaker)
        stg_breaker_record(&e->breaker, status, STG_NET_NONE, now_us);
    if (e->has_budget) {
        bool throttle = status == 429 || (status == 503 && ra_us >= 0);
        bool failure = status >= 400 && stg_status_set_has(&e->policy.retry_statuses, status);
        if (!failure) {
            if (!throttle)
                stg_budget_on_success(&e->budget);
        } else if (throttle) {
            if (!e->has_adaptive)
                stg_budget_on_throttle(&e->budget);
        } else {
            stg_budget_on_failure(&e->budget);
        }
    }
    sim_decide(&e->policy, st, STG_METHOD_GET, status, ra_us, now_us, &e->rng, d);
    if (d->action == STG_ACTION_RETRY && e->has_budget && !stg_budget_allow_retry(&e->budget)) {
        d->action = STG_ACTION_GIVE_UP;
        d->reason = STG_REASON_BUDGET_EXHAUSTED;
        d->wait_us = 0;
    }
}
