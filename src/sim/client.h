/*
 * Client model: how a strategy becomes a stg_policy, and what a client does
 * around each attempt. Every decision is libstagger's:
 *   before an attempt  stg_breaker_allow (shared breaker), then
 *                      stg_bucket_acquire / stg_adaptive_acquire (pacing)
 *   after a response   stg_adaptive_on_response, stg_breaker_record,
 *                      stg_budget_on_success / _on_failure, then stg_decide,
 *                      and stg_budget_allow_retry before a retry.
 * The pacing, budget and breaker objects are shared by all clients of a
 * run, as they would be in one process talking to one host, and they are
 * fed as the engine (src/curl/engine.c) feeds them.
 */
#ifndef STAGGER_SIM_CLIENT_H
#define STAGGER_SIM_CLIENT_H

#include "sim.h"

/* The policy a strategy runs: o->policy with the strategy's backoff kind
 * (NONE: FIXED with a 1 us step; BUCKET/ADAPTIVE: o->paced_backoff) and, if
 * mode >= 0, that Retry-After mode; resolved. Returns STG_OK or
 * STG_EINVAL. */
int sim_strategy_policy(const sim_opts *o, sim_strategy s, int mode, stg_policy *out);

/* Hints carrying only a Retry-After of ra_us (< 0: no hints at all: the
 * returned pointer is NULL). h is the storage. */
const stg_hints *sim_retry_after_hints(stg_hints *h, int64_t ra_us);

/* One stg_decide call for an HTTP status on attempt st->attempts, with an
 * optional Retry-After; notes a RETRY in *st. */
void sim_decide(const stg_policy *p, stg_retry_state *st, stg_method m, int status, int64_t ra_us,
                int64_t now_us, stg_rng *rng, stg_decision *d);

typedef struct sim_client_env {
    stg_policy policy; /* resolved */
    stg_rng rng;       /* the clients' draws */
    bool has_bucket, has_adaptive, has_budget, has_breaker;
    stg_bucket bucket;
    stg_adaptive adaptive;
    stg_budget budget;
    stg_breaker breaker;
} sim_client_env;

/* Set up the policy and shared objects for a strategy/mode (mode < 0: the
 * template's). Returns STG_OK, STG_EINVAL or STG_ENOMEM; on error nothing
 * needs destroying. */
int sim_client_env_init(sim_client_env *e, const sim_opts *o, sim_strategy s, int mode,
                        uint64_t seed);
void sim_client_env_destroy(sim_client_env *e);

/* Before an attempt at now_us. Returns true and sets *wait_us (pacing
 * delay, >= 0) when the attempt may go; false when the breaker refuses. */
bool sim_client_before(sim_client_env *e, int64_t now_us, int64_t *wait_us);

/* After a response (status, Retry-After ra_us or < 0) at now_us: feed the
 * shared objects (adaptive: throttled = 429, or 503 with a Retry-After, and
 * the hint; budget: 429 is neutral) and decide. A RETRY refused by the
 * budget becomes GIVE_UP with reason BUDGET_EXHAUSTED. */
void sim_client_after(sim_client_env *e, stg_retry_state *st, int status, int64_t ra_us,
                      int64_t now_us, stg_decision *d);

#endif
