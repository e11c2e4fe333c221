/*
 * Adaptive rate (AWS "adaptive" retry mode: CUBIC on a measured send rate),
 * pacing through an embedded lock-free stg_bucket. The model, and where and
 * why it departs from the AWS code, are in include/stagger/adaptive.h.
 *
 * Why the split between atomics and the mutex: acquire runs before every
 * send, possibly from many threads, so it touches only `enabled`,
 * `hold_until_us`, `admitted` and the bucket, all lock-free. Responses
 * update several values that must change together (W_max, K, the throttle
 * time, the measurement, the recovery point), which is what the mutex is
 * for; it is held for a few arithmetic operations and never around a call
 * that could block.
 *
 * Invariants (under the lock):
 *  - enabled implies the bucket's rate is fill_rate, and only this file's
 *    apply() changes either.
 *  - STG_ADAPTIVE_RATE_MIN <= fill_rate <= STG_BUCKET_RATE_MAX, and the
 *    burst was checked at init, so stg_bucket_set_rate cannot fail.
 *  - hold_until_us only increases.
 *  - A hold never changes the fill rate: it pauses the curve's clock and
 *    the measurement instead (on_hold), and answers that land inside it
 *    are counted but move nothing.
 *  - A throttle cuts unless responses <= recover_seq and it comes within
 *    recovery_us of the last cut.
 */
#include <math.h>
#include <stdatomic.h>

#include <stagger/adaptive.h>

#include "util/assert.h"
#include "core/state.h"

typedef struct stg__adaptive_state state;

#define US_PER_S 1e6

/* floor(a / b) for b > 0, also for negative a (times before 0 are valid). */
static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

/* a + b for b >= 0, saturating at INT64_MAX. */
static int64_t add_sat(int64_t a, int64_t b)
{
    return a > INT64_MAX - b ? INT64_MAX : a + b;
}

/* a - b for a > b, saturating at INT64_MAX. */
static int64_t diff_sat(int64_t a, int64_t b)
{
    uint64_t d = (uint64_t)a - (uint64_t)b;
    return d > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)d;
}

static bool finite_nonneg(double x)
{
    return isfinite(x) && x >= 0.0;
}

/* A duration of the config: 0 is its default d, a negative one none (0). */
static int64_t duration_or(int64_t us, int64_t d)
{
    return us == 0 ? d : us < 0 ? 0 : us;
}

static int resolve(const stg_adaptive_config *in, stg_adaptive_config *out)
{
    stg_adaptive_config c = {0};
    if (in)
        c = *in;
    if (!finite_nonneg(c.beta) || !finite_nonneg(c.scale) || !finite_nonneg(c.min_rate) ||
        !finite_nonneg(c.max_rate) || !finite_nonneg(c.measure_cap) || isnan(c.hold_spread))
        return STG_EINVAL;
    if (c.beta == 0.0)
        c.beta = STG_ADAPTIVE_DEFAULT_BETA;
    if (c.scale == 0.0)
        c.scale = STG_ADAPTIVE_DEFAULT_SCALE;
    if (c.min_rate == 0.0)
        c.min_rate = STG_ADAPTIVE_DEFAULT_MIN_RATE;
    if (c.measure_cap == 0.0)
        c.measure_cap = STG_ADAPTIVE_DEFAULT_MEASURE_CAP;
    if (c.burst == 0)
        c.burst = STG_ADAPTIVE_DEFAULT_BURST;
    if (c.hold_spread == 0.0)
        c.hold_spread = STG_ADAPTIVE_DEFAULT_HOLD_SPREAD;
    else if (c.hold_spread < 0.0)
        c.hold_spread = 0.0;
    c.recovery_us = duration_or(c.recovery_us, STG_ADAPTIVE_DEFAULT_RECOVERY_US);
    c.startup_doubling_us =
        duration_or(c.startup_doubling_us, STG_ADAPTIVE_DEFAULT_STARTUP_DOUBLING_US);
    c.hold_spread_min_us =
        duration_or(c.hold_spread_min_us, STG_ADAPTIVE_DEFAULT_HOLD_SPREAD_MIN_US);
    if (!(c.beta < 1.0) || c.min_rate < STG_ADAPTIVE_RATE_MIN ||
        c.min_rate > STG_BUCKET_RATE_MAX || (c.max_rate != 0.0 && c.max_rate < c.min_rate) ||
        c.measure_cap < 1.0 || c.burst < 1 || c.burst > STG_ADAPTIVE_BURST_MAX ||
        !isfinite(c.hold_spread))
        return STG_EINVAL;
    *out = c;
    return STG_OK;
}

int stg_adaptive_resolve(const stg_adaptive_config *cfg, stg_adaptive_config *out)
{
    if (!out)
        return STG_EINVAL;
    return resolve(cfg, out);
}

int stg_adaptive_init(stg_adaptive *pub, const stg_adaptive_config *cfg, int64_t now_us)
{
    state *a = stg__adaptive_state(pub);
    if (!a)
        return STG_EINVAL;
    stg_adaptive_config c;
    int rc = resolve(cfg, &c);
    if (rc != STG_OK)
        return rc;
    /* The bucket's rate is a placeholder until the limiter is enabled. */
    stg_bucket_config bc = {.rate = c.min_rate, .burst = c.burst};
    rc = stg_bucket_init(&a->bucket, &bc, now_us);
    if (rc != STG_OK)
        return rc;
    if (pthread_mutex_init(&a->lock, NULL) != 0)
        return STG_ENOMEM;
    atomic_init(&a->enabled, false);
    atomic_init(&a->hold_until_us, INT64_MIN);
    a->cfg = c;
    a->fill_rate = c.min_rate;
    a->measured_rate = 0.0;
    /* As AWS: the curve starts from the floor at init; it only matters once
     * a throttle or a hint has replaced it. */
    a->w_max = c.min_rate;
    a->k = cbrt(a->w_max * (1.0 - c.beta) / c.scale);
    a->hint_rate = 0.0;
    a->last_throttle_us = now_us;
    a->last_cut_us = INT64_MIN;
    a->recover_seq = 0;
    a->responses = 0;
    atomic_init(&a->admitted, 0);
    a->origin_us = now_us;
    a->measure_slot = 0;
    a->measure_count = 0;
    a->measured_any = false;
    a->probing = false;
    a->probe_base = 0.0;
    return STG_OK;
}

void stg_adaptive_destroy(stg_adaptive *pub)
{
    state *a = stg__adaptive_state(pub);
    if (a)
        pthread_mutex_destroy(&a->lock);
}

/* The smoothed measurement, or the stand-in before the first bucket
 * closes (see measure). Under the lock. */
static double sending_rate(const state *a)
{
    if (a->measured_any)
        return a->measured_rate;
    /* Before the first bucket closes, responses lag sends: when the first
     * answer is a throttle, one response would read as 2/s and the cut
     * would land on the floor, which then takes seconds of cubic growth to
     * leave. The sends admitted so far say what we really offered. */
    int64_t sent = atomic_load_explicit(&a->admitted, memory_order_relaxed);
    int64_t n = sent > a->measure_count ? sent : a->measure_count;
    return (double)n / ((double)STG_ADAPTIVE_MEASURE_BUCKET_US / US_PER_S);
}

/* now_us as microseconds since init, saturating. */
static int64_t since_init(const state *a, int64_t now_us)
{
    return now_us >= a->origin_us ? diff_sat(now_us, a->origin_us)
                                  : -diff_sat(a->origin_us, now_us);
}

/* Count one response and return the sending rate. A response that opens a
 * new bucket first closes the previous one (spread over every bucket that
 * passed, so an idle gap lowers the rate), then counts in the new one. A
 * stale now (older than the current bucket) counts in the current one.
 * Buckets are aligned on the init instant, so the first is a whole one.
 * Until the first bucket closes there is no smoothed value yet; what was
 * sent so far per bucket length stands in for it (the average over the
 * first bucket, so never more than what was offered in it), so that a
 * throttle in the first half-second does not read as 0/s. */
static double measure(state *a, int64_t now_us)
{
    int64_t slot = floor_div(since_init(a, now_us), STG_ADAPTIVE_MEASURE_BUCKET_US);
    if (slot > a->measure_slot) {
        double secs = (double)(slot - a->measure_slot) *
                      ((double)STG_ADAPTIVE_MEASURE_BUCKET_US / US_PER_S);
        double current = (double)a->measure_count / secs;
        a->measured_rate = STG_ADAPTIVE_MEASURE_SMOOTHING * current +
                           (1.0 - STG_ADAPTIVE_MEASURE_SMOOTHING) * a->measured_rate;
        a->measure_count = 0;
        a->measure_slot = slot;
        a->measured_any = true;
    }
    a->measure_count++;
    return sending_rate(a);
}

/* Seconds from a throttle at rate w back to w on the cubic curve. */
static double zero_point(const state *a, double w)
{
    return cbrt(w * (1.0 - a->cfg.beta) / a->cfg.scale);
}

/* Clamp a proposed fill rate: floor, then the explicit ceilings (a limit
 * the server stated beats our floor), then what the bucket can represent. */
static double clamp_rate(const state *a, double r)
{
    if (!(r >= a->cfg.min_rate)) /* also NaN */
        r = a->cfg.min_rate;
    if (a->cfg.max_rate > 0.0 && r > a->cfg.max_rate)
        r = a->cfg.max_rate;
    if (a->hint_rate > 0.0 && r > a->hint_rate)
        r = a->hint_rate;
    if (r < STG_ADAPTIVE_RATE_MIN)
        r = STG_ADAPTIVE_RATE_MIN;
    if (r > STG_BUCKET_RATE_MAX)
        r = STG_BUCKET_RATE_MAX;
    return r;
}

/* Store a new fill rate and, if the limiter is (or becomes) on, pace at it. */
static void apply(state *a, double rate, bool enable, int64_t now_us)
{
    a->fill_rate = clamp_rate(a, rate);
    STG_ASSERT(a->fill_rate >= STG_ADAPTIVE_RATE_MIN && a->fill_rate <= STG_BUCKET_RATE_MAX);
    bool on = enable || atomic_load_explicit(&a->enabled, memory_order_relaxed);
    if (on) {
        /* Cannot fail: clamp_rate keeps the rate inside what init checked. */
        int rc = stg_bucket_set_rate(&a->bucket, a->fill_rate, now_us);
        STG_ASSERT(rc == STG_OK);
        (void)rc;
        if (enable)
            atomic_store_explicit(&a->enabled, true, memory_order_release);
    }
}

int stg_adaptive_on_response(stg_adaptive *pub, bool throttled, int64_t now_us)
{
    state *a = stg__adaptive_state(pub);
    if (!a)
        return STG_EINVAL;
    pthread_mutex_lock(&a->lock);
    double measured = measure(a, now_us);
    bool enabled = atomic_load_explicit(&a->enabled, memory_order_relaxed);
    double rate;
    a->responses++;
    if (!throttled && now_us < atomic_load_explicit(&a->hold_until_us, memory_order_relaxed)) {
        /* Answers that land during a hold were sent before it: the curve
         * is paused (stg_adaptive_on_hold), so they leave the rate alone. */
        pthread_mutex_unlock(&a->lock);
        return STG_OK;
    }
    if (throttled && a->last_cut_us != INT64_MIN && a->responses <= a->recover_seq &&
        now_us < add_sat(a->last_cut_us, a->cfg.recovery_us)) {
        /* Same congestion event as the last cut: these requests were sent
         * (or reserved) before the cut took effect. Keep the rate. */
        pthread_mutex_unlock(&a->lock);
        return STG_OK;
    }
    if (throttled) {
        /* The rate we were sending at; once on, never above the fill rate
         * (AWS: min(measured, fill)). */
        double current = measured;
        if (enabled && a->fill_rate < current)
            current = a->fill_rate;
        bool first = a->last_cut_us == INT64_MIN;
        a->w_max = current;
        a->k = zero_point(a, current);
        a->last_throttle_us = now_us;
        a->last_cut_us = now_us;
        /* Every send admitted so far was paced at the old rate; their
         * answers are still to come. */
        a->recover_seq = atomic_load_explicit(&a->admitted, memory_order_relaxed);
        /* A cut before any measurement is a guess: slow start (header),
         * and the first such one starts from the guess, not beta of it. */
        a->probing = !a->measured_any && a->cfg.startup_doubling_us > 0;
        rate = a->probing && first ? current : current * a->cfg.beta;
        a->probe_base = rate;
    } else {
        double secs = ((double)now_us - (double)a->last_throttle_us) / US_PER_S;
        double t = secs - a->k;
        rate = a->cfg.scale * t * t * t + a->w_max;
        if (a->probing) {
            double doublings = secs * US_PER_S / (double)a->cfg.startup_doubling_us;
            double slow = a->probe_base * pow(2.0, doublings < 60.0 ? doublings : 60.0);
            if (slow > rate)
                rate = slow;
        }
    }
    double cap = a->cfg.measure_cap * measured;
    if (rate > cap)
        rate = cap;
    apply(a, rate, throttled, now_us);
    pthread_mutex_unlock(&a->lock);
    return STG_OK;
}

/* Draw the spread added to a hold of `wait` microseconds. */
static int64_t hold_spread(const state *a, int64_t wait, stg_rng *rng)
{
    if (!rng)
        return 0;
    double frac = a->cfg.hold_spread * (double)wait;
    int64_t max = a->cfg.hold_spread_min_us;
    if (frac > (double)max)
        max = frac < (double)INT64_MAX / 2 ? (int64_t)frac : INT64_MAX / 2;
    return max > 0 ? stg_rng_range(rng, 0, max) : 0;
}

/* Hold the key until now + wait + spread, and pause the model for the part
 * of the hold not already held: the curve's clock (last throttle, last
 * cut) and the measurement buckets move forward by it, so that after the
 * hold the limiter resumes at the rate it had, instead of reading the
 * silence as an idle client (a measured rate near 0, which the
 * measure_cap rule would turn into a cut) or as seconds of cubic growth. */
int stg_adaptive_on_hold(stg_adaptive *pub, int64_t wait_us, int64_t now_us, stg_rng *rng)
{
    state *a = stg__adaptive_state(pub);
    if (!a || wait_us < 0)
        return STG_EINVAL;
    pthread_mutex_lock(&a->lock);
    (void)measure(a, now_us);
    a->responses++;
    int64_t end = add_sat(now_us, wait_us);
    int64_t hold = atomic_load_explicit(&a->hold_until_us, memory_order_relaxed);
    if (end > hold) {
        int64_t until = add_sat(end, hold_spread(a, wait_us, rng));
        int64_t from = hold > now_us ? hold : now_us;
        int64_t pause = diff_sat(until, from);
        a->last_throttle_us = add_sat(a->last_throttle_us, pause);
        if (a->last_cut_us != INT64_MIN)
            a->last_cut_us = add_sat(a->last_cut_us, pause);
        a->origin_us = add_sat(a->origin_us, pause);
        STG_ASSERT(until > hold); /* hold_until_us only increases */
        atomic_store_explicit(&a->hold_until_us, until, memory_order_relaxed);
    }
    pthread_mutex_unlock(&a->lock);
    return STG_OK;
}

int stg_adaptive_on_hints(stg_adaptive *pub, const stg_hints *h, int64_t now_us, stg_rng *rng)
{
    state *a = stg__adaptive_state(pub);
    if (!a || !h)
        return STG_EINVAL;
    /* Hold the key only when the server says the quota itself is spent.
     * Retry-After answers one request: stg_decide already makes that
     * request wait, and the throttle already cut the rate. Holding every
     * send to the host on it too would stall the whole host for the
     * server's rounding (a 10 ms wait is sent as "Retry-After: 1") on
     * every 429: the batch bench ran at 1.33x ideal that way. */
    int64_t wait = -1;
    if (h->remaining == 0 && h->reset_us >= 0)
        wait = h->reset_us;
    bool pace = h->limit >= 1 && h->window_us > 0;
    if (wait < 0 && !pace)
        return STG_OK;

    pthread_mutex_lock(&a->lock);
    if (wait >= 0) {
        int64_t end = add_sat(now_us, wait);
        int64_t hold = atomic_load_explicit(&a->hold_until_us, memory_order_relaxed);
        /* Ignore a hint the current hold already covers: re-drawing the
         * spread for every response of the same window would only ratchet
         * the hold later. */
        if (end > hold) {
            int64_t until = add_sat(end, hold_spread(a, wait, rng));
            STG_ASSERT(until > hold); /* hold_until_us only increases */
            atomic_store_explicit(&a->hold_until_us, until, memory_order_relaxed);
        }
    }
    if (pace) {
        double r = (double)h->limit / ((double)h->window_us / US_PER_S);
        a->hint_rate = r > STG_ADAPTIVE_RATE_MIN ? r : STG_ADAPTIVE_RATE_MIN;
        if (atomic_load_explicit(&a->enabled, memory_order_relaxed)) {
            /* Only ever lowers the rate now; a raised limit is reached by
             * the cubic growth on later successes. */
            apply(a, a->fill_rate, false, now_us);
        } else {
            /* Turn on at the stated rate, with the curve placed so that it
             * sits at that rate now (t = K) instead of cutting to beta. */
            a->w_max = clamp_rate(a, a->hint_rate);
            a->k = zero_point(a, a->w_max);
            a->last_throttle_us = now_us - (int64_t)(a->k * US_PER_S);
            apply(a, a->w_max, true, now_us);
        }
    }
    pthread_mutex_unlock(&a->lock);
    return STG_OK;
}

int stg_adaptive_acquire(stg_adaptive *pub, int64_t now_us, int64_t timeout_us, int64_t *wait_us)
{
    state *a = stg__adaptive_state(pub);
    if (!a)
        return STG_EINVAL;
    int64_t timeout = timeout_us > 0 ? timeout_us : 0;
    int64_t hold = atomic_load_explicit(&a->hold_until_us, memory_order_relaxed);
    int64_t hold_wait = hold > now_us ? diff_sat(hold, now_us) : 0;
    int64_t wait = hold_wait;
    int rc = STG_OK;
    if (hold_wait > timeout) {
        rc = STG_ETIMEDOUT;
    } else if (atomic_load_explicit(&a->enabled, memory_order_acquire)) {
        /* Ask the bucket as of the end of the hold, with what is left of
         * the timeout. */
        int64_t w = 0;
        rc = stg_bucket_acquire(&a->bucket, 1, add_sat(now_us, hold_wait), timeout - hold_wait,
                                &w);
        wait = add_sat(hold_wait, w);
    }
    if (rc == STG_OK)
        atomic_fetch_add_explicit(&a->admitted, 1, memory_order_relaxed);
    if (wait_us)
        *wait_us = wait;
    return rc;
}

double stg_adaptive_rate(stg_adaptive *pub)
{
    state *a = stg__adaptive_state(pub);
    pthread_mutex_lock(&a->lock);
    double r = atomic_load_explicit(&a->enabled, memory_order_relaxed) ? a->fill_rate : 0.0;
    pthread_mutex_unlock(&a->lock);
    return r;
}

double stg_adaptive_measured_rate(stg_adaptive *pub)
{
    state *a = stg__adaptive_state(pub);
    pthread_mutex_lock(&a->lock);
    double r = sending_rate(a);
    pthread_mutex_unlock(&a->lock);
    return r;
}

int64_t stg_adaptive_hold_until(stg_adaptive *pub)
{
    state *a = stg__adaptive_state(pub);
    return atomic_load_explicit(&a->hold_until_us, memory_order_relaxed);
}
