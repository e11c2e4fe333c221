/*
 * Retry budget: retries are allowed only while failures stay a small share
 * of traffic, so a downstream that is fully down receives almost no retries.
 *
 * The model is gRPC's retry throttling (gRPC proposal A6). The budget holds
 * tokens, starting full at max_tokens. Every failed attempt (an answer the
 * policy would retry: 5xx, timeout, reset, ...) costs 1 token, every success
 * gives back token_ratio tokens, and the count stays within [0, max_tokens].
 * A retry is allowed while tokens > max_tokens / 2.
 *
 * Consequences (defaults: max_tokens 10, token_ratio 0.1):
 *  - Steady state: tokens hold while failures are at most
 *    token_ratio / (1 + token_ratio) of attempts (1/11 = 9.09% by default);
 *    above that they drain to the threshold and retries stop.
 *  - Dead downstream: starting full, it takes max_tokens / 2 failures to
 *    reach the threshold, so a client retrying one request after another
 *    sends 4 retries (tokens 9, 8, 7, 6 allow one each; 5 does not) and then
 *    none until successes return. Concurrent callers that checked before a
 *    failure landed can add a few more; that is the "a little" of A6.
 *  - Recovery: each success adds token_ratio, so from empty it takes
 *    max_tokens / 2 / token_ratio + 1 successes (51 by default) to allow
 *    retries again; from exactly the threshold, one.
 *
 * Why gRPC's model and not the AWS SDK retry quota (500 tokens, a retry
 * costs 5, 10 after a timeout, a successful retry refunds its cost): the
 * AWS quota is absolute. 500 tokens are 100 retries whatever the traffic:
 * a client sending 10 000 requests a second burns it in milliseconds during
 * a blip, while a client sending one request a minute still hammers a dead
 * host with 100 retries. The gRPC budget is relative: it refills in
 * proportion to successful traffic, so the retries it allows track a share
 * of the load (at most ~token_ratio extra), and it is charged by failures,
 * not by retries, so a dead host shuts the retries off within max/2 failed
 * attempts, whatever the rate.
 *
 * The budget is count-based and needs no clock, so, unlike the other
 * primitives, its functions take no now_us: a failure costs the same
 * whenever it happens. (A budget that refilled with time would hand a dead
 * host a steady trickle of retries, which is what the breaker is for.)
 *
 * Tokens are kept in fixed point (milli-tokens, the same 3-decimal precision
 * gRPC uses) in one C11 atomic updated by compare-and-swap, so one budget
 * (one per host, in the engine) may be shared by any number of threads
 * without a mutex.
 *
 * Throttles cost less (the AWS SDKs' 2026 split, policy.h): a throttle
 * answer (429, 529, a 503 with a hint; stg_fault_classify) is the server
 * working as designed and saying "slower", which the limiter and the hint
 * already act on, so it costs throttle_cost (0.5 by default) instead of a
 * whole token. A host that refuses everything with 429s still shuts the
 * retries off (after 10 throttles instead of 5 faults), but a limit that
 * refuses up to token_ratio / (throttle_cost + token_ratio) of the calls
 * (1 in 6 by default, against 1 in 11 for faults) never does. The
 * engine of libstagger-curl charges a throttle nothing on a host paced by
 * its adaptive rate, which cuts the rate on it and makes every retry wait
 * its turn at that rate (curl.h, stg_engine_config.budget).
 *
 * Invariant: 0 <= tokens <= max_tokens at every instant, also under
 * concurrent use.
 */
#ifndef STAGGER_BUDGET_H
#define STAGGER_BUDGET_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Defaults applied to zero fields: gRPC A6's own example values. */
#define STG_BUDGET_DEFAULT_MAX_TOKENS 10.0
#define STG_BUDGET_DEFAULT_TOKEN_RATIO 0.1
#define STG_BUDGET_DEFAULT_THROTTLE_COST 0.5
/* Largest accepted max_tokens (gRPC accepts up to 1000; we allow more for
 * clients that share one budget across very high request rates). */
#define STG_BUDGET_MAX_MAX_TOKENS 1000000.0

/* Configuration. A zeroed struct means max_tokens 10, token_ratio 0.1.
 * Both values are rounded to the nearest 0.001. */
typedef struct stg_budget_config {
    double max_tokens;  /* capacity and starting count, in (0, 1e6]; 0: 10 */
    double token_ratio; /* tokens returned by a success, in [0.001, max];
                           0: 0.1 */
    double throttle_cost; /* tokens a throttle costs (stg_budget_on_throttle),
                             in [0.001, max]; 0: 0.5 (at most max_tokens);
                             < 0: nothing */
    uint64_t stg__reserved[5]; /* room to grow (docs/ABI.md); leave zero */
} stg_budget_config;

/* Plain struct owned by the caller; its contents are private: storage for
 * the atomic state (C++ cannot name C11 atomics), laid out in
 * src/core/state.h, with a spare word. */
typedef struct stg_budget {
    STG__ALIGNAS(8) int64_t stg__private[4];
} stg_budget;

/* Set up a full budget (tokens = max_tokens). cfg may be NULL (defaults).
 * Returns STG_OK, or STG_EINVAL (b NULL; a value negative, NaN, infinite,
 * above its limit, or rounding to 0; token_ratio above max_tokens); then *b
 * is untouched. (throttle_cost follows the same rules, but < 0 means free.) Not thread-safe against concurrent use of the same budget. */
STG_API int stg_budget_init(stg_budget *b, const stg_budget_config *cfg);

/* Record a successful attempt: tokens += token_ratio, capped at max_tokens.
 * Thread-safe, lock-free. */
STG_API void stg_budget_on_success(stg_budget *b);

/* Record a failed attempt (a failure the retry policy would retry, whether
 * or not a retry follows): tokens -= 1, floored at 0. Thread-safe,
 * lock-free. */
STG_API void stg_budget_on_failure(stg_budget *b);

/* Record a throttle answer (stg_fault_classify() == STG_FAULT_THROTTLE,
 * whether or not a retry follows): tokens -= throttle_cost, floored at 0.
 * Thread-safe, lock-free. */
STG_API void stg_budget_on_throttle(stg_budget *b);

/* Whether a retry may be sent now: tokens > max_tokens / 2. Takes nothing;
 * the cost is paid by the retry's failure, if it fails. Thread-safe. */
STG_API bool stg_budget_allow_retry(const stg_budget *b);

/* Current tokens (0..max_tokens), exact to 0.001, for display and tests.
 * Thread-safe. */
STG_API double stg_budget_tokens(const stg_budget *b);

#ifdef __cplusplus
}
#endif
#endif
