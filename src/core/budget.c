/*
 * Retry budget after gRPC A6 (see budget.h for the model and why).
 *
 * One atomic word of milli-tokens. Every update is a compare-and-swap loop
 * that clamps to [0, max_milli] before publishing, so no thread ever sees a
 * value outside that range, and concurrent updates are never lost (a plain
 * fetch_add could overshoot the cap and a later clamp would race).
 * Comparisons are done in integers: "tokens > max / 2" is
 * 2 * milli > max_milli, exact for odd max_milli too.
 */
#include <math.h>
#include <stdatomic.h>

#include <stagger/budget.h>

#include "util/assert.h"
#include "core/state.h"

typedef struct stg__budget_state state;

#define MILLI 1000.0

/* value in (0, limit] rounded to milli-tokens, or -1 when invalid. */
static int64_t to_milli(double value, double dflt, double limit)
{
    if (value == 0.0)
        value = dflt;
    if (!isfinite(value) || value < 0.0 || value > limit)
        return -1;
    int64_t m = (int64_t)llround(value * MILLI);
    return m > 0 ? m : -1;
}

int stg_budget_init(stg_budget *pub, const stg_budget_config *cfg)
{
    state *b = stg__budget_state(pub);
    static const stg_budget_config zero;
    if (!b)
        return STG_EINVAL;
    if (!cfg)
        cfg = &zero;
    int64_t max = to_milli(cfg->max_tokens, STG_BUDGET_DEFAULT_MAX_TOKENS,
                           STG_BUDGET_MAX_MAX_TOKENS);
    int64_t ratio = to_milli(cfg->token_ratio, STG_BUDGET_DEFAULT_TOKEN_RATIO,
                             STG_BUDGET_MAX_MAX_TOKENS);
    /* Free below 0; by default half a token, but never above the budget. */
    int64_t throttle = cfg->throttle_cost < 0.0 && isfinite(cfg->throttle_cost)
                           ? 0
                           : to_milli(cfg->throttle_cost, STG_BUDGET_DEFAULT_THROTTLE_COST,
                                      STG_BUDGET_MAX_MAX_TOKENS);
    if (cfg->throttle_cost == 0.0 && max > 0 && throttle > max)
        throttle = max;
    if (max < 0 || ratio < 0 || ratio > max || throttle < 0 || throttle > max)
        return STG_EINVAL;
    STG_ASSERT(ratio > 0 && ratio <= max);
    b->max_milli = max;
    b->ratio_milli = ratio;
    b->throttle_milli = throttle;
    atomic_init(&b->milli, max);
    return STG_OK;
}

/* Add delta (either sign) and clamp to [0, max]. */
static void add_clamped(state *b, int64_t delta)
{
    int64_t cur = atomic_load_explicit(&b->milli, memory_order_relaxed);
    int64_t next;
    do {
        next = cur + delta;
        if (next > b->max_milli)
            next = b->max_milli;
        if (next < 0)
            next = 0;
        STG_ASSERT(next >= 0 && next <= b->max_milli);
        if (next == cur)
            return; /* already at the bound: nothing to publish */
    } while (!atomic_compare_exchange_weak_explicit(&b->milli, &cur, next,
                                                    memory_order_relaxed,
                                                    memory_order_relaxed));
}

void stg_budget_on_success(stg_budget *b)
{
    state *s = stg__budget_state(b);
    add_clamped(s, s->ratio_milli);
}

void stg_budget_on_failure(stg_budget *b)
{
    add_clamped(stg__budget_state(b), -(int64_t)MILLI);
}

void stg_budget_on_throttle(stg_budget *b)
{
    state *s = stg__budget_state(b);
    add_clamped(s, -s->throttle_milli);
}

bool stg_budget_allow_retry(const stg_budget *pub)
{
    const state *b = stg__budget_cstate(pub);
    /* atomic_load on a const-qualified atomic is valid C11 but some older
     * libcs declare it without const; the cast keeps both happy. */
    int64_t cur = atomic_load_explicit((_Atomic int64_t *)&b->milli, memory_order_relaxed);
    return 2 * cur > b->max_milli;
}

double stg_budget_tokens(const stg_budget *pub)
{
    const state *b = stg__budget_cstate(pub);
    int64_t cur = atomic_load_explicit((_Atomic int64_t *)&b->milli, memory_order_relaxed);
    return (double)cur / MILLI;
}
