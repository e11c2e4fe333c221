/*
 * Adaptive client-side rate: find a server's limit without being told it.
 *
 * The model is the AWS SDKs' "adaptive" retry mode (ClientRateLimiter):
 *  - The sending rate is measured in 0.5 s buckets and smoothed
 *    (measured = 0.8 * last bucket + 0.2 * measured).
 *  - Until the first throttled response the limiter is off: everything is
 *    admitted at once.
 *  - On a throttled response (the caller decides: a 429; AWS also counts
 *    a 503 with Retry-After, see below): W_max = the current rate (the measured rate on the first
 *    throttle, min(measured, fill rate) after it), the throttle time is
 *    remembered, and the fill rate is cut to beta * W_max (beta = 0.7).
 *  - On any other response the fill rate follows the CUBIC curve
 *    C * (t - K)^3 + W_max, C = 0.4, K = cbrt(W_max * (1 - beta) / C),
 *    t = seconds since the last throttle: it climbs back to W_max in K
 *    seconds, lingers there, then probes beyond it.
 *  - The fill rate is capped at 2 x the measured rate (so an idle client
 *    does not bank a rate it never used), then floored at 0.5/s (the floor
 *    wins when the two conflict).
 * Admission is paced by an embedded stg_bucket whose rate is the fill rate.
 *
 * The constants are AWS's. What differs, and why:
 *  - Recovery (the one change that matters). AWS cuts again on every
 *    throttled response. When several requests are in flight or already
 *    reserved, the server refuses most of them for the same overshoot, and
 *    each refusal cuts by 0.7 again: with 16 workers and a 50 ms round trip
 *    against 100/s, the AWS rule settles near 47/s, with 64 workers and
 *    200 ms it falls to ~1/s (tests/unit/test_adaptive.c). As TCP reduces
 *    once per window of data in flight, a throttle here cuts only if it can
 *    answer a request admitted after the last cut: the limiter counts
 *    admissions (acquire) and responses, and the responses up to the count
 *    of admissions at the cut are "old". Responses are assumed to come back
 *    roughly in order; so that an unreported or abandoned request cannot
 *    stall the adaptation, recovery lasts at most recovery_us (1 s). With
 *    one request in flight this is exactly the AWS rule.
 *  - The first throttle can come before any 0.5 s bucket has closed, when
 *    AWS reads the rate as 0 (so W_max = 0 and the fill rate drops to the
 *    0.5/s floor, where concurrent callers then hold reservations seconds
 *    apart). Until the first bucket closes, the count so far per 0.5 s
 *    stands in for the measured rate. Buckets are aligned on the init
 *    instant (AWS: whole seconds), and the response that opens a bucket is
 *    counted in it (AWS counts it in the bucket it closes, one request per
 *    bucket too many).
 *  - The pacing bucket's burst is 1 by default (AWS: one second's worth of
 *    tokens). Sending a second's worth at once overruns a server whose own
 *    burst is smaller, and it is exactly the clumping this library avoids.
 *  - Server hints can pace the client before any throttle (see
 *    stg_adaptive_on_hints); AWS has no equivalent.
 *  - An outage is not congestion. A 503 that says when to come back
 *    (Retry-After, or a spent RateLimit) is reported with
 *    stg_adaptive_on_hold: the key is held until then and the rate is not
 *    cut; the model's clock stops for the hold, so afterwards sending
 *    resumes at the rate found before. AWS cuts on it like on a 429, and
 *    CUBIC then needs seconds to climb back: a batch around a 5 s outage
 *    took 1.29x the ideal time that way. A 429 keeps cutting, with or
 *    without Retry-After: it says "too fast", and a server that answers
 *    only with Retry-After (no RateLimit fields) gives nothing else to
 *    find the rate from; its Retry-After is the request's wait
 *    (stg_decide), not the host's.
 *  - Slow start. A first throttle that comes before any 0.5 s bucket has
 *    closed rests on a guess: 30 workers that start together are refused
 *    within milliseconds, when 30 sends are all there is to measure, and
 *    the cut lands far below the server's limit (42/s against 100/s). From
 *    there CUBIC needs ~7 s to climb back: a 2000-job batch took 1.28x the
 *    ideal time, almost all of it lost at the start. So, as TCP does before
 *    its first loss, while the last cut rested on no measurement the rate
 *    grows multiplicatively (doubling every startup_doubling_us, 2 s) or
 *    along the cubic curve, whichever is higher, until the next throttle,
 *    which then cuts from a real measurement: the batch now takes 1.04x.
 *    Why not faster: a rate that rises steeply reorders the pacing bucket's
 *    reservations (tokens, not times, survive a rate change), so two sends
 *    can land together; a server with no burst refuses one of them at a
 *    rate far below its limit, and the cut that follows starts CUBIC from
 *    there (doubling every 1 s kept 16 workers against a burst-1 server
 *    under 20/s for a minute; 2 s does not). The first cut of all, when it
 *    rests on no measurement, is no cut: slow start begins at the guess
 *    itself, not at beta times it. The guess is what was sent per whole
 *    0.5 s bucket, so a throttle 30 ms in reads 22 sends as 44/s, already
 *    far under what was offered; cutting that to 31/s as well cost four
 *    naive client processes behind `stagger proxy` (200 workers against
 *    100/s) about 1.6 s of a 20 s run, 1.04-1.11x the ideal; from the
 *    guess, 1.02-1.06x. A second throttle before any measurement cuts by
 *    beta as usual, so a guess above a slow server still comes down.
 *    startup_doubling_us < 0 turns slow start off (and with it this rule:
 *    the AWS curve, cut by beta).
 * Result, against a server allowing L = 100/s with burst 20, from the
 * second minute on: every 10 s window within +-2% of L and 0.2% to 1% of
 * calls throttled, for one greedy worker (1 ms round trip) as for 16
 * (50 ms) or 64 (200 ms); and it follows the server down to 50/s within
 * 10 s.
 *
 * Time is a parameter (now_us, monotonic microseconds); nothing here reads a
 * clock or keeps global state.
 *
 * Thread-safety: every function may be called concurrently on the same
 * limiter after stg_adaptive_init and before stg_adaptive_destroy.
 * stg_adaptive_acquire is lock-free (atomics and the lock-free bucket);
 * the response and hint updates and the getters take a mutex held for a few
 * arithmetic operations. An stg_rng passed in is not thread-safe: do not
 * share one between threads.
 */
#ifndef STAGGER_ADAPTIVE_H
#define STAGGER_ADAPTIVE_H

#include <pthread.h>

#include "common.h"
#include "bucket.h"
#include "hints.h"
#include "rng.h"

#ifdef __cplusplus
extern "C" {
#endif

#define STG_ADAPTIVE_DEFAULT_BETA 0.7
#define STG_ADAPTIVE_DEFAULT_SCALE 0.4
#define STG_ADAPTIVE_DEFAULT_MIN_RATE 0.5
#define STG_ADAPTIVE_DEFAULT_MEASURE_CAP 2.0
#define STG_ADAPTIVE_DEFAULT_BURST 1
#define STG_ADAPTIVE_DEFAULT_RECOVERY_US STG_SEC(1)
#define STG_ADAPTIVE_DEFAULT_STARTUP_DOUBLING_US STG_SEC(2)
#define STG_ADAPTIVE_DEFAULT_HOLD_SPREAD 0.1
#define STG_ADAPTIVE_DEFAULT_HOLD_SPREAD_MIN_US STG_MS(100)
/* Rates below this are raised to it, whatever asks for them (a hint of
 * "100 per day" is 0.00116/s, still above it): it keeps the pacing
 * bucket's burst * T within STG_BUCKET_SPAN_MAX_NS. */
#define STG_ADAPTIVE_RATE_MIN 1e-4
#define STG_ADAPTIVE_BURST_MAX INT64_C(100000)
/* Fixed, not configurable: the measurement bucket and its smoothing. */
#define STG_ADAPTIVE_MEASURE_BUCKET_US STG_MS(500)
#define STG_ADAPTIVE_MEASURE_SMOOTHING 0.8

/* Configuration. Zero in a field means its default, so
 * `stg_adaptive_config c = {0};` is the model described above (AWS
 * constants, with the recovery rule); .recovery_us = -1 gives AWS's rule. */
typedef struct stg_adaptive_config {
    double beta;         /* cut factor on a throttle, 0 < beta < 1; 0: 0.7 */
    double scale;        /* CUBIC C, > 0; 0: 0.4 */
    double min_rate;     /* floor of the fill rate, req/s, > 0; 0: 0.5 */
    double max_rate;     /* ceiling of the fill rate, req/s; 0: none */
    double measure_cap;  /* fill rate <= measure_cap * measured rate, >= 1;
                            0: 2.0 */
    int64_t burst;       /* burst of the pacing bucket,
                            1..STG_ADAPTIVE_BURST_MAX; 0: 1 */
    double hold_spread;  /* on a hold, spread = uniform(0, max(hold_spread *
                            wait, hold_spread_min_us)); 0: 0.1; < 0: none */
    int64_t hold_spread_min_us; /* 0: 100 ms; < 0: none */
    int64_t recovery_us; /* longest recovery after a cut (see above);
                            0: 1 s; < 0: none (every throttle cuts, as
                            AWS does) */
    int64_t startup_doubling_us; /* slow start (see above): while the last
                            cut rested on no measurement, the rate doubles
                            this often until the next throttle; 0: 2 s;
                            < 0: off (AWS) */
    uint64_t stg__reserved[8]; /* room to grow (docs/ABI.md); leave zero */
} stg_adaptive_config;

/* Plain struct owned by the caller; its contents are private. It holds a
 * mutex: call stg_adaptive_destroy when done, and do not copy it. The mutex
 * and the pacing bucket are shown with their types (their sizes depend on
 * the platform); the rest, which includes C11 atomics that C++ cannot name,
 * is storage laid out in src/core/state.h, with spare words so the state
 * can grow without changing the size (static asserts there check both). */
typedef struct stg_adaptive {
    pthread_mutex_t stg__lock;
    stg_bucket stg__bucket;
    STG__ALIGNAS(8) int64_t stg__private[48];
} stg_adaptive;

/* Copy cfg (NULL: all defaults) into *out with every zero field replaced
 * by its default, and check it as stg_adaptive_init does. Returns STG_OK
 * or STG_EINVAL (out NULL, or a field init would refuse). Pure; thread-safe.
 * In *out, "none" (a negative hold_spread, hold_spread_min_us, recovery_us
 * or startup_doubling_us) reads 0: *out lists the effective values and is
 * not meant to be passed back to init, where 0 means the default. (For a
 * layer that runs the model elsewhere, e.g. in Redis: the limiter's own
 * copy is private.) */
STG_API int stg_adaptive_resolve(const stg_adaptive_config *cfg, stg_adaptive_config *out);

/* Set up a limiter at now_us: off (admits everything) until the first
 * throttle or pacing hint. cfg may be NULL (all defaults) and is copied.
 * Returns STG_OK; STG_EINVAL for a NULL a or an out-of-range field (beta
 * not in (0, 1), scale <= 0, min_rate below STG_ADAPTIVE_RATE_MIN or above
 * STG_BUCKET_RATE_MAX, max_rate < 0 or below min_rate, measure_cap < 1,
 * burst < 0 or above STG_ADAPTIVE_BURST_MAX, NaNs);
 * STG_ENOMEM if the mutex cannot be created. Not thread-safe against other
 * use of the same limiter. */
STG_API int stg_adaptive_init(stg_adaptive *a, const stg_adaptive_config *cfg, int64_t now_us);

/* Release the mutex. The struct may be initialised again afterwards.
 * a may be NULL. Not thread-safe: no other call may be in progress. */
STG_API void stg_adaptive_destroy(stg_adaptive *a);

/* Reserve one send if it can go within timeout_us; same contract as
 * stg_bucket_acquire with weight 1.
 * STG_OK: reserved; *wait_us (if not NULL) is how long to wait before
 *   sending (0 while the limiter is off and no hold is active).
 * STG_ETIMEDOUT: not within timeout_us; nothing reserved; *wait_us is the
 *   wait that would have been needed.
 * STG_EINVAL: a NULL.
 * A hold set by stg_adaptive_on_hints applies even while the limiter is off.
 * timeout_us <= 0: only if the send may go now; INT64_MAX: no limit.
 * Every STG_OK counts as one send: report its outcome with
 * stg_adaptive_on_response. Thread-safe, lock-free. */
STG_API int stg_adaptive_acquire(stg_adaptive *a, int64_t now_us, int64_t timeout_us,
                                 int64_t *wait_us);

/* Report one finished attempt: exactly once for every send that
 * stg_adaptive_acquire admitted, when its answer (or its transport error)
 * arrives. throttled: the server said "too fast" (429); a 503 with a
 * hint goes to stg_adaptive_on_hold instead; anything else, errors
 * included, is not a throttle. These
 * reports are what the measured rate counts, and matching them with the
 * admissions is how the recovery rule tells old throttles from new ones;
 * a send admitted but never reported only delays the next cut, by at most
 * recovery_us. Returns STG_OK or STG_EINVAL (a NULL). Thread-safe. */
STG_API int stg_adaptive_on_response(stg_adaptive *a, bool throttled, int64_t now_us);

/* Pace from what a response said (h is borrowed; rng may be NULL for no
 * spread; it is drawn from at most once).
 *  - Hold: when a RateLimit/X-RateLimit field says 0 requests remain and
 *    the reset is known, no send is admitted until now + that wait +
 *    spread. (Retry-After alone does not hold the key here: on a 429 it
 *    answers one request, which stg_decide makes wait, and the throttle
 *    it came with already cut the rate; on a 503 the caller reports
 *    stg_adaptive_on_hold.) spread is uniform in
 *    [0, max(hold_spread * wait, hold_spread_min_us)] (by default up to
 *    10% of the wait, at least 100 ms): many clients told the same reset
 *    do not all come back in the same millisecond. A hold only ever
 *    extends: a hint whose wait ends before the current hold is ignored,
 *    so repeated hints do not push the hold later and later.
 *  - Pace: when limit and window are known (limit >= 1, window > 0), the
 *    fill rate is capped at limit / window from now on, and a limiter that
 *    was off is turned on at that rate. Later hints replace the cap.
 * Returns STG_OK, or STG_EINVAL (a or h NULL). Thread-safe (the rng is
 * the caller's to protect). */
STG_API int stg_adaptive_on_hints(stg_adaptive *a, const stg_hints *h, int64_t now_us,
                                  stg_rng *rng);

/* Report one finished attempt whose answer holds the host (a 503 with a
 * Retry-After or a spent RateLimit: wait_us, stg_hints_server_wait),
 * instead of stg_adaptive_on_response: it counts as the response, holds
 * every send until now + wait_us + spread (the same spread and the same
 * only-extends rule as a RateLimit hold, below), never cuts the rate, and
 * pauses the model for the new part of the hold (see the header). Answers
 * reported with stg_adaptive_on_response while a hold lasts are counted
 * but change no rate, unless throttled. rng may be NULL (no spread).
 * Returns STG_OK or STG_EINVAL (a NULL, wait_us < 0). Thread-safe. */
STG_API int stg_adaptive_on_hold(stg_adaptive *a, int64_t wait_us, int64_t now_us, stg_rng *rng);

/* The fill rate in requests per second, or 0 while the limiter is off.
 * Thread-safe. */
STG_API double stg_adaptive_rate(stg_adaptive *a);

/* The smoothed measured rate of responses, requests per second (tracked
 * also while the limiter is off; before the first 0.5 s bucket closes, the
 * count so far per 0.5 s). Thread-safe. */
STG_API double stg_adaptive_measured_rate(stg_adaptive *a);

/* The instant before which no send is admitted because of a hint, or
 * INT64_MIN when no hold was ever set. Thread-safe. */
STG_API int64_t stg_adaptive_hold_until(stg_adaptive *a);

#ifdef __cplusplus
}
#endif
#endif
