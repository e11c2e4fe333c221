/*
 * Circuit breaker (see breaker.h for the state machine and its reasons).
 *
 * Everything after init runs under br->mu. State changes go through one
 * function, change(), which also fires on_change, so the callback fires
 * exactly once per transition and in order. OPEN -> HALF_OPEN is applied
 * lazily by settle() at the top of every public call, so no timer exists
 * and an idle breaker costs nothing.
 *
 * Arithmetic: instants saturate at INT64_MAX instead of overflowing (a
 * caller may pass a huge now_us); the ratio test is done in integers
 * (failures * 1e6 >= ratio_ppm * calls), so 10 failures of 20 calls trip a
 * 0.5 ratio exactly, with no floating-point doubt at the boundary.
 */
#include <math.h>
#include <string.h>

#include <stagger/breaker.h>

#include "util/assert.h"
#define PPM INT64_C(1000000)

static int64_t sat_add(int64_t a, int64_t b)
{
    /* b >= 0 everywhere it is used. */
    return a > INT64_MAX - b ? INT64_MAX : a + b;
}

/* floor(a / b) for b > 0, also for negative a (monotonic clocks may be
 * negative relative to an arbitrary origin). */
static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

static int resolve(const stg_breaker_config *in, stg_breaker_config *out)
{
    *out = *in;
    if (out->consecutive_failures == 0)
        out->consecutive_failures = STG_BREAKER_DEFAULT_CONSECUTIVE;
    if (out->open_us == 0)
        out->open_us = STG_BREAKER_DEFAULT_OPEN_US;
    if (out->max_multiplier == 0)
        out->max_multiplier = STG_BREAKER_DEFAULT_MAX_MULTIPLIER;
    if (out->half_open_probes == 0)
        out->half_open_probes = STG_BREAKER_DEFAULT_PROBES;
    if (out->probe_timeout_us == 0)
        out->probe_timeout_us = STG_BREAKER_DEFAULT_PROBE_TIMEOUT_US;
    if (out->failure_ratio == 0.0)
        out->failure_ratio = STG_BREAKER_DEFAULT_FAILURE_RATIO;
    if (out->window_us == 0)
        out->window_us = STG_BREAKER_DEFAULT_WINDOW_US;
    if (out->window_buckets == 0)
        out->window_buckets = STG_BREAKER_DEFAULT_WINDOW_BUCKETS;
    if (stg_status_set_empty(&out->failure_statuses))
        for (int s = 500; s <= 599; s++)
            stg_status_set_add(&out->failure_statuses, s);
    if (out->failure_errors == 0)
        out->failure_errors = STG_NET_DEFAULT_RETRY;

    if (out->open_us < 0 || out->max_multiplier < 1 || out->half_open_probes < 1 ||
        out->probe_timeout_us < 0 || out->min_calls < 0 || out->window_us < 0 ||
        out->window_buckets < 1 || out->window_buckets > STG_BREAKER_MAX_BUCKETS)
        return STG_EINVAL;
    if (!(out->failure_ratio > 0.0 && out->failure_ratio <= 1.0)) /* NaN fails too */
        return STG_EINVAL;
    if (out->window_us < out->window_buckets)
        return STG_EINVAL;
    if (out->open_us > INT64_MAX / out->max_multiplier)
        return STG_EINVAL;
    return STG_OK;
}

int stg_breaker_init(stg_breaker *br, const stg_breaker_config *cfg)
{
    static const stg_breaker_config zero;
    stg_breaker_config rc;
    if (!br)
        return STG_EINVAL;
    int rv = resolve(cfg ? cfg : &zero, &rc);
    if (rv != STG_OK)
        return rv;
    memset(br, 0, sizeof *br);
    if (pthread_mutex_init(&br->mu, NULL) != 0)
        return STG_ENOMEM;
    br->cfg = rc;
    br->bucket_us = rc.window_us / rc.window_buckets;
    br->ratio_ppm = (int64_t)llround(rc.failure_ratio * (double)PPM);
    if (br->ratio_ppm < 1)
        br->ratio_ppm = 1;
    br->state = STG_BREAKER_CLOSED;
    br->multiplier = 1;
    return STG_OK;
}

void stg_breaker_destroy(stg_breaker *br)
{
    if (br)
        pthread_mutex_destroy(&br->mu);
}

/* ---- state changes (all under br->mu) --------------------------------- */

static void change(stg_breaker *br, stg_breaker_state to, int64_t now_us)
{
    stg_breaker_state from = br->state;
    /* The state machine of breaker.h: a change is a real transition, and
     * there is no CLOSED -> HALF_OPEN nor OPEN -> CLOSED. */
    STG_ASSERT(from != to);
    STG_ASSERT(!(from == STG_BREAKER_CLOSED && to == STG_BREAKER_HALF_OPEN));
    STG_ASSERT(!(from == STG_BREAKER_OPEN && to == STG_BREAKER_CLOSED));
    br->state = to;
    if (br->cfg.on_change)
        br->cfg.on_change(br->cfg.data, from, to, now_us);
}

static void reset_counts(stg_breaker *br)
{
    br->consecutive = 0;
    br->probes_out = 0;
    br->probe_successes = 0;
    memset(br->ring, 0, sizeof br->ring);
}

/* Enter OPEN with the current multiplier. */
static void open_now(stg_breaker *br, int64_t now_us)
{
    reset_counts(br);
    /* resolve() checked open_us * max_multiplier fits. */
    STG_ASSERT(br->multiplier >= 1 && br->multiplier <= br->cfg.max_multiplier);
    br->open_until_us = sat_add(now_us, br->cfg.open_us * br->multiplier);
    change(br, STG_BREAKER_OPEN, now_us);
}

/* Apply what time alone changes: OPEN -> HALF_OPEN, lapsed probe slots. */
static void settle(stg_breaker *br, int64_t now_us)
{
    if (br->state == STG_BREAKER_OPEN && now_us >= br->open_until_us) {
        br->probes_out = 0;
        br->probe_successes = 0;
        change(br, STG_BREAKER_HALF_OPEN, now_us);
    }
    if (br->state == STG_BREAKER_HALF_OPEN && br->probes_out > 0 &&
        now_us >= br->probe_lapse_us)
        br->probes_out = 0;
}

/* ---- sliding window ---------------------------------------------------- */

static void window_add(stg_breaker *br, int64_t now_us, bool failed)
{
    int64_t epoch = floor_div(now_us, br->bucket_us);
    int64_t n = br->cfg.window_buckets;
    int64_t idx = epoch % n;
    if (idx < 0)
        idx += n;
    stg_breaker_bucket *b = &br->ring[idx];
    if (b->epoch != epoch || b->calls == 0) {
        b->epoch = epoch;
        b->calls = 0;
        b->failures = 0;
    }
    if (b->calls < UINT32_MAX) {
        b->calls++;
        if (failed)
            b->failures++;
    }
}

/* Ratio mode fires: >= min_calls outcomes in the window, and failures at
 * least failure_ratio of them. */
static bool window_trips(const stg_breaker *br, int64_t now_us)
{
    if (br->cfg.min_calls <= 0)
        return false;
    int64_t epoch = floor_div(now_us, br->bucket_us);
    int64_t n = br->cfg.window_buckets;
    int64_t calls = 0, failures = 0;
    for (int64_t i = 0; i < n; i++) {
        const stg_breaker_bucket *b = &br->ring[i];
        /* Buckets with calls hold epochs near now, so the difference
         * cannot overflow; empty ones are skipped before it is taken. */
        if (b->calls == 0 || b->epoch > epoch || epoch - b->epoch >= n)
            continue;
        calls += b->calls;
        failures += b->failures;
    }
    return calls >= br->cfg.min_calls && failures * PPM >= br->ratio_ppm * calls;
}

/* ---- outcomes ---------------------------------------------------------- */

static void success_locked(stg_breaker *br, int64_t now_us)
{
    switch (br->state) {
    case STG_BREAKER_CLOSED:
        br->consecutive = 0;
        if (br->cfg.min_calls > 0)
            window_add(br, now_us, false);
        break;
    case STG_BREAKER_HALF_OPEN:
        if (br->probes_out > 0)
            br->probes_out--;
        if (++br->probe_successes >= br->cfg.half_open_probes) {
            reset_counts(br);
            br->multiplier = 1;
            change(br, STG_BREAKER_CLOSED, now_us);
        }
        break;
    case STG_BREAKER_OPEN:
        break; /* admitted before the trip: no news */
    }
}

static void failure_locked(stg_breaker *br, int64_t now_us)
{
    switch (br->state) {
    case STG_BREAKER_CLOSED: {
        bool trip = false;
        if (br->cfg.consecutive_failures > 0 && ++br->consecutive >= br->cfg.consecutive_failures)
            trip = true;
        if (br->cfg.min_calls > 0) {
            window_add(br, now_us, true);
            if (window_trips(br, now_us))
                trip = true;
        }
        if (trip) {
            br->multiplier = 1;
            open_now(br, now_us);
        }
        break;
    }
    case STG_BREAKER_HALF_OPEN:
        br->multiplier = br->multiplier > br->cfg.max_multiplier / 2 ? br->cfg.max_multiplier
                                                                      : br->multiplier * 2;
        open_now(br, now_us);
        break;
    case STG_BREAKER_OPEN:
        break; /* admitted before the trip: no news */
    }
}

static void neutral_locked(stg_breaker *br)
{
    if (br->state == STG_BREAKER_HALF_OPEN && br->probes_out > 0)
        br->probes_out--;
}

/* ---- public ------------------------------------------------------------ */

int stg_breaker_allow(stg_breaker *br, int64_t now_us, int64_t *retry_in_us)
{
    if (retry_in_us)
        *retry_in_us = 0;
    if (!br)
        return STG_EINVAL;
    int rv = STG_OK;
    int64_t wait = 0;
    pthread_mutex_lock(&br->mu);
    settle(br, now_us);
    switch (br->state) {
    case STG_BREAKER_CLOSED:
        break;
    case STG_BREAKER_OPEN:
        rv = STG_EBREAKER;
        wait = br->open_until_us - now_us;
        break;
    case STG_BREAKER_HALF_OPEN:
        if (br->probes_out + br->probe_successes < br->cfg.half_open_probes) {
            br->probes_out++;
            br->probe_lapse_us = sat_add(now_us, br->cfg.probe_timeout_us);
        } else {
            rv = STG_EBREAKER;
            /* All slots taken. If the successes alone fill them, the
             * closing success is being recorded concurrently; 0 is right. */
            wait = br->probes_out > 0 ? br->probe_lapse_us - now_us : 0;
        }
        break;
    }
    pthread_mutex_unlock(&br->mu);
    if (retry_in_us)
        *retry_in_us = wait;
    return rv;
}

/* Record one outcome: under the lock, settle the clock, apply it, and read
 * back the state it left (what on_success, on_failure, on_neutral and
 * record return). */
static stg_breaker_state record(stg_breaker *br, stg_breaker_verdict v, int64_t now_us)
{
    pthread_mutex_lock(&br->mu);
    settle(br, now_us);
    switch (v) {
    case STG_BREAKER_FAILURE: failure_locked(br, now_us); break;
    case STG_BREAKER_SUCCESS: success_locked(br, now_us); break;
    case STG_BREAKER_NEUTRAL:
    default: neutral_locked(br); break;
    }
    stg_breaker_state s = br->state;
    pthread_mutex_unlock(&br->mu);
    return s;
}

stg_breaker_state stg_breaker_on_success(stg_breaker *br, int64_t now_us)
{
    return record(br, STG_BREAKER_SUCCESS, now_us);
}

stg_breaker_state stg_breaker_on_failure(stg_breaker *br, int64_t now_us)
{
    return record(br, STG_BREAKER_FAILURE, now_us);
}

stg_breaker_state stg_breaker_on_neutral(stg_breaker *br, int64_t now_us)
{
    return record(br, STG_BREAKER_NEUTRAL, now_us);
}

stg_breaker_state stg_breaker_record(stg_breaker *br, int status, stg_net_error err,
                                     int64_t now_us)
{
    /* br->cfg is resolved and never written after init: no lock needed. */
    return record(br, stg_breaker_classify(&br->cfg, status, err), now_us);
}

stg_breaker_state stg_breaker_server_wait(stg_breaker *br, int64_t wait_us, int64_t now_us)
{
    pthread_mutex_lock(&br->mu);
    settle(br, now_us);
    if (br->state == STG_BREAKER_OPEN && wait_us >= 0) {
        /* The server's word beats our guess, within the breaker's bounds:
         * at least 1 ms (a probe, not a spin), at most the longest open
         * time the growth allows. */
        int64_t cap = br->cfg.open_us > INT64_MAX / br->cfg.max_multiplier
                          ? INT64_MAX
                          : br->cfg.open_us * br->cfg.max_multiplier;
        int64_t w = wait_us < 1000 ? 1000 : wait_us > cap ? cap : wait_us;
        br->open_until_us = sat_add(now_us, w);
    }
    stg_breaker_state s = br->state;
    pthread_mutex_unlock(&br->mu);
    return s;
}

stg_breaker_state stg_breaker_state_at(stg_breaker *br, int64_t now_us)
{
    pthread_mutex_lock(&br->mu);
    settle(br, now_us);
    stg_breaker_state s = br->state;
    pthread_mutex_unlock(&br->mu);
    return s;
}

stg_breaker_verdict stg_breaker_classify(const stg_breaker_config *cfg, int status,
                                         stg_net_error err)
{
    unsigned errors = cfg && cfg->failure_errors ? cfg->failure_errors : STG_NET_DEFAULT_RETRY;
    if (err != STG_NET_NONE) {
        if ((unsigned)err < 32 && (errors & STG_NET_BIT(err)))
            return STG_BREAKER_FAILURE;
        return STG_BREAKER_NEUTRAL;
    }
    if (status == 429 || status < 100)
        return STG_BREAKER_NEUTRAL;
    bool failed;
    if (cfg && !stg_status_set_empty(&cfg->failure_statuses))
        failed = stg_status_set_has(&cfg->failure_statuses, status);
    else
        failed = status >= 500 && status <= 599;
    return failed ? STG_BREAKER_FAILURE : STG_BREAKER_SUCCESS;
}

bool stg_breaker_is_failure(const stg_breaker_config *cfg, int status, stg_net_error err)
{
    return stg_breaker_classify(cfg, status, err) == STG_BREAKER_FAILURE;
}

const char *stg_breaker_state_name(stg_breaker_state s)
{
    switch (s) {
    case STG_BREAKER_CLOSED:
        return "closed";
    case STG_BREAKER_OPEN:
        return "open";
    case STG_BREAKER_HALF_OPEN:
        return "half_open";
    }
    return "unknown";
}
