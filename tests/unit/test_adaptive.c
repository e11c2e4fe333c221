/*
 * Adaptive rate tests: exact values of the cut, the cubic growth, the cap
 * and the floor with a hand-moved clock; hint holds and pacing with a seeded
 * RNG; and convergence against a modelled server (a server-side stg_bucket)
 * in virtual time, event-driven on the waits the limiter hands back.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include <stagger/adaptive.h>

#include "state.h" /* the private layout, to check its counters */

#define EPS 1e-9

static void assert_close(double got, double want)
{
    if (fabs(got - want) > EPS * (fabs(want) > 1 ? fabs(want) : 1))
        fail_msg("got %.12f, want %.12f", got, want);
}

static int64_t acquire_wait(stg_adaptive *a, int64_t now, int64_t timeout)
{
    int64_t w = -1;
    assert_int_equal(stg_adaptive_acquire(a, now, timeout, &w), STG_OK);
    return w;
}

/* 100 successes spread over [start, start + 0.5 s): 200/s in one bucket. */
static void feed_200(stg_adaptive *a, int64_t start)
{
    for (int i = 0; i < 100; i++)
        assert_int_equal(stg_adaptive_on_response(a, false, start + i * STG_MS(5)), STG_OK);
}

static stg_hints no_hints(void)
{
    stg_hints h;
    stg_hints_init(&h);
    return h;
}

static void test_config_validation(void **state)
{
    (void)state;
    stg_adaptive a;
    stg_adaptive_config c = {.beta = 1.0};
    assert_int_equal(stg_adaptive_init(&a, &c, 0), STG_EINVAL);
    c = (stg_adaptive_config){.beta = -0.5};
    assert_int_equal(stg_adaptive_init(&a, &c, 0), STG_EINVAL);
    c = (stg_adaptive_config){.scale = NAN};
    assert_int_equal(stg_adaptive_init(&a, &c, 0), STG_EINVAL);
    c = (stg_adaptive_config){.min_rate = 1e-9};
    assert_int_equal(stg_adaptive_init(&a, &c, 0), STG_EINVAL);
    c = (stg_adaptive_config){.min_rate = 5, .max_rate = 2};
    assert_int_equal(stg_adaptive_init(&a, &c, 0), STG_EINVAL);
    c = (stg_adaptive_config){.measure_cap = 0.5};
    assert_int_equal(stg_adaptive_init(&a, &c, 0), STG_EINVAL);
    c = (stg_adaptive_config){.burst = -1};
    assert_int_equal(stg_adaptive_init(&a, &c, 0), STG_EINVAL);
    c = (stg_adaptive_config){.burst = STG_ADAPTIVE_BURST_MAX + 1};
    assert_int_equal(stg_adaptive_init(&a, &c, 0), STG_EINVAL);
    assert_int_equal(stg_adaptive_init(NULL, NULL, 0), STG_EINVAL);
    assert_int_equal(stg_adaptive_init(&a, NULL, 0), STG_OK);
    assert_int_equal(stg_adaptive_acquire(NULL, 0, 0, NULL), STG_EINVAL);
    assert_int_equal(stg_adaptive_on_response(NULL, true, 0), STG_EINVAL);
    stg_hints h = no_hints();
    assert_int_equal(stg_adaptive_on_hints(NULL, &h, 0, NULL), STG_EINVAL);
    assert_int_equal(stg_adaptive_on_hints(&a, NULL, 0, NULL), STG_EINVAL);
    stg_adaptive_destroy(&a);
    stg_adaptive_destroy(NULL);
}

/* stg_adaptive_resolve gives the values init would use (the Redis layer
 * runs the model from them) and refuses what init refuses. */
static void test_resolve(void **state)
{
    (void)state;
    stg_adaptive_config r;
    assert_int_equal(stg_adaptive_resolve(NULL, &r), STG_OK);
    assert_true(r.beta == STG_ADAPTIVE_DEFAULT_BETA && r.scale == STG_ADAPTIVE_DEFAULT_SCALE);
    assert_true(r.min_rate == STG_ADAPTIVE_DEFAULT_MIN_RATE && r.max_rate == 0.0);
    assert_true(r.measure_cap == STG_ADAPTIVE_DEFAULT_MEASURE_CAP);
    assert_int_equal(r.burst, STG_ADAPTIVE_DEFAULT_BURST);
    assert_int_equal(r.recovery_us, STG_ADAPTIVE_DEFAULT_RECOVERY_US);
    assert_int_equal(r.startup_doubling_us, STG_ADAPTIVE_DEFAULT_STARTUP_DOUBLING_US);
    stg_adaptive_config c = {.beta = 0.5, .burst = 7, .recovery_us = -1};
    assert_int_equal(stg_adaptive_resolve(&c, &r), STG_OK);
    assert_true(r.beta == 0.5 && r.burst == 7);
    assert_int_equal(r.recovery_us, 0); /* none reads 0 once resolved */
    c = (stg_adaptive_config){.beta = 1.0};
    assert_int_equal(stg_adaptive_resolve(&c, &r), STG_EINVAL);
    c = (stg_adaptive_config){.burst = STG_ADAPTIVE_BURST_MAX + 1};
    assert_int_equal(stg_adaptive_resolve(&c, &r), STG_EINVAL);
    assert_int_equal(stg_adaptive_resolve(&c, NULL), STG_EINVAL);
}

static void test_disabled_until_first_throttle(void **state)
{
    (void)state;
    stg_adaptive a;
    assert_int_equal(stg_adaptive_init(&a, NULL, 0), STG_OK);
    /* Everything goes at once, however fast, while the limiter is off. */
    for (int i = 0; i < 10000; i++) {
        assert_int_equal(acquire_wait(&a, i, 0), 0);
        assert_int_equal(stg_adaptive_on_response(&a, false, i), STG_OK);
    }
    assert_true(stg_adaptive_rate(&a) == 0.0);
    assert_int_equal(stg_adaptive_hold_until(&a), INT64_MIN);
    /* The rate is measured meanwhile: 10000 in the first 0.5 s bucket. */
    assert_int_equal(stg_adaptive_on_response(&a, false, STG_MS(500)), STG_OK);
    assert_close(stg_adaptive_measured_rate(&a), 0.8 * 20000.0);
    assert_true(stg_adaptive_rate(&a) == 0.0);
    assert_int_equal(acquire_wait(&a, STG_MS(500), 0), 0);
    /* The first throttle turns it on. */
    assert_int_equal(stg_adaptive_on_response(&a, true, STG_MS(600)), STG_OK);
    assert_true(stg_adaptive_rate(&a) > 0.0);
    stg_adaptive_destroy(&a);
}

/* The cut: W_max = measured rate, fill = 0.7 * W_max; then the recovery
 * rule: throttles answering requests admitted before the cut do not cut
 * again, for at most recovery_us (1 s). */
static void test_cut(void **state)
{
    (void)state;
    stg_adaptive a;
    assert_int_equal(stg_adaptive_init(&a, NULL, 0), STG_OK);
    /* 102 sends admitted while off (all at once, wait 0)... */
    for (int i = 0; i < 102; i++)
        assert_int_equal(acquire_wait(&a, 0, 0), 0);
    /* ...100 answered OK over the first half-second (200/s). */
    feed_200(&a, 0);
    /* The 101st, a throttle at 0.5 s, closes bucket 0 (100 in 0.5 s):
     * measured = 0.8 * 200 + 0.2 * 0 = 160; fill = 0.7 * 160 = 112. */
    assert_int_equal(stg_adaptive_on_response(&a, true, STG_MS(500)), STG_OK);
    assert_close(stg_adaptive_measured_rate(&a), 160.0);
    assert_close(stg_adaptive_rate(&a), 0.7 * 160.0);
    /* The pacing follows: burst 1 at 112/s, T = ceil(1e9 / 112) ns. */
    assert_int_equal(acquire_wait(&a, STG_MS(500), INT64_MAX), 0);
    assert_int_equal(acquire_wait(&a, STG_MS(500), INT64_MAX), 8929);
    assert_int_equal(acquire_wait(&a, STG_MS(500), INT64_MAX), 17858);
    /* A timed-out acquire reserves nothing. */
    int64_t w = 0;
    assert_int_equal(stg_adaptive_acquire(&a, STG_MS(500), 1000, &w), STG_ETIMEDOUT);
    assert_int_equal(w, 26786);
    assert_int_equal(acquire_wait(&a, STG_MS(500), 26786), 26786);

    /* Response 102 answers a request sent before the cut: same congestion
     * event, no second cut. */
    assert_int_equal(stg_adaptive_on_response(&a, true, STG_MS(999)), STG_OK);
    assert_close(stg_adaptive_rate(&a), 112.0);
    /* Response 103 answers one admitted after it (the recovery ends with
     * the 102 admitted before the cut): it cuts, from min(measured, fill):
     * bucket [0.5, 1.0) held 2 responses (4/s), measured = 0.8 * 4 +
     * 0.2 * 160 = 35.2 < 112. */
    assert_int_equal(stg_adaptive_on_response(&a, true, STG_MS(1000)), STG_OK);
    assert_close(stg_adaptive_measured_rate(&a), 35.2);
    assert_close(stg_adaptive_rate(&a), 0.7 * 35.2);
    /* Now 107 admitted, 103 answered: 104..107 are old. 104 at 1.5 s is
     * ignored; 105 at 2.0 s is too, but the recovery lasts at most 1 s. */
    assert_int_equal(stg_adaptive_on_response(&a, true, STG_MS(1500)), STG_OK);
    assert_close(stg_adaptive_rate(&a), 0.7 * 35.2);
    assert_int_equal(stg_adaptive_on_response(&a, true, STG_MS(2000)), STG_OK);
    /* measured: 0.8 * 2 + 0.2 * 35.2 = 8.64 at 1.5 s, then
     * 0.8 * 2 + 0.2 * 8.64 = 3.328 at 2.0 s. */
    assert_close(stg_adaptive_measured_rate(&a), 3.328);
    assert_close(stg_adaptive_rate(&a), 0.7 * 3.328);
    stg_adaptive_destroy(&a);
}

/* The first answer is a throttle, 3 ms after 50 sends went out together:
 * the stand-in measurement counts the sends (50 per 0.5 s = 100/s), not the
 * single response (2/s), so the cut lands at 70/s instead of the floor. */
static void test_first_answer_throttled(void **state)
{
    (void)state;
    stg_adaptive a;
    assert_int_equal(stg_adaptive_init(&a, NULL, 0), STG_OK);
    for (int i = 0; i < 50; i++)
        assert_int_equal(acquire_wait(&a, 0, 0), 0);
    /* 50 sends read as 100/s (per whole 0.5 s bucket): the first cut,
     * resting on no measurement, starts slow start at that guess, uncut. */
    assert_int_equal(stg_adaptive_on_response(&a, true, STG_MS(3)), STG_OK);
    assert_close(stg_adaptive_rate(&a), 100.0);
    assert_true(stg__adaptive_state(&a)->probing);
    /* A second throttle, still before any bucket closed, that answers a
     * request admitted after the first cut (the 50 before it answered):
     * a cut by beta from min(guess, fill), so a guess above a slow server
     * comes down. */
    assert_int_equal(acquire_wait(&a, STG_MS(3), INT64_MAX) >= 0, 1);
    for (int i = 0; i < 49; i++)
        assert_int_equal(stg_adaptive_on_response(&a, false, STG_MS(4)), STG_OK);
    double fill = stg_adaptive_rate(&a);
    assert_true(fill >= 100.0 && fill < 101.0); /* 100 * 2^(1 ms / 2 s) */
    assert_int_equal(stg_adaptive_on_response(&a, true, STG_MS(5)), STG_OK);
    assert_close(stg_adaptive_rate(&a), 0.7 * fill);
    stg_adaptive_destroy(&a);
}

/* Slow start: after a cut that rested on no measurement (first answer a
 * throttle, 3 ms in), the rate doubles every 2 s until the next throttle,
 * unless the cubic curve is higher; a cut from a real measurement does not
 * start it; and it can be turned off. */
static void test_slow_start(void **state)
{
    (void)state;
    stg_adaptive a;
    assert_int_equal(stg_adaptive_init(&a, NULL, 0), STG_OK);
    for (int i = 0; i < 50; i++)
        assert_int_equal(acquire_wait(&a, 0, 0), 0);
    assert_int_equal(stg_adaptive_on_response(&a, true, STG_MS(3)), STG_OK);
    assert_close(stg_adaptive_rate(&a), 100.0); /* the first cut: the guess itself */
    /* Answers every 10 ms (100/s measured) for 2 s: slow start reaches
     * 100 * 2 = 200 (the cubic is at 0.4 * (2 - cbrt(75))^3 + 100 = 95.6),
     * held to 2 x the measured rate (99.84 after four buckets). */
    for (int64_t t = STG_MS(10); t < STG_SEC(2); t += STG_MS(10)) {
        assert_int_equal(stg_adaptive_on_response(&a, false, t), STG_OK);
        if (t == STG_MS(1000))
            assert_close(stg_adaptive_rate(&a), 100.0 * pow(2.0, 0.997 / 2.0));
    }
    assert_int_equal(stg_adaptive_on_response(&a, false, STG_MS(2003)), STG_OK);
    assert_close(stg_adaptive_rate(&a), 2.0 * (0.8 * 100.0 + 0.2 * 99.2));
    /* The next throttle answers a request admitted after the cut: it cuts
     * from min(measured, fill) and ends slow start. */
    assert_int_equal(acquire_wait(&a, STG_MS(2003), INT64_MAX) >= 0, 1);
    assert_int_equal(stg_adaptive_on_response(&a, true, STG_MS(2100)), STG_OK);
    double after = stg_adaptive_rate(&a);
    assert_true(!stg__adaptive_state(&a)->probing);
    /* Growth is the cubic curve's again: 1 s later, far below doubling. */
    assert_int_equal(stg_adaptive_on_response(&a, false, STG_MS(3100)), STG_OK);
    assert_true(stg_adaptive_rate(&a) < after * 1.2);
    stg_adaptive_destroy(&a);

    /* Off: the pure AWS curve from the same start. */
    stg_adaptive_config c = {.startup_doubling_us = -1};
    assert_int_equal(stg_adaptive_init(&a, &c, 0), STG_OK);
    for (int i = 0; i < 50; i++)
        assert_int_equal(acquire_wait(&a, 0, 0), 0);
    assert_int_equal(stg_adaptive_on_response(&a, true, STG_MS(3)), STG_OK);
    for (int64_t t = STG_MS(10); t < STG_SEC(2); t += STG_MS(10))
        assert_int_equal(stg_adaptive_on_response(&a, false, t), STG_OK);
    assert_int_equal(stg_adaptive_on_response(&a, false, STG_MS(2003)), STG_OK);
    assert_true(stg_adaptive_rate(&a) < 100.0);
    stg_adaptive_destroy(&a);
}

/* Pure AWS behaviour (recovery_us < 0): every throttle cuts. */
static void test_cut_every_throttle_without_recovery(void **state)
{
    (void)state;
    stg_adaptive a;
    stg_adaptive_config c = {.recovery_us = -1};
    assert_int_equal(stg_adaptive_init(&a, &c, 0), STG_OK);
    feed_200(&a, 0);
    assert_int_equal(stg_adaptive_on_response(&a, true, STG_MS(500)), STG_OK);
    assert_close(stg_adaptive_rate(&a), 112.0);
    /* measured is still 160 (same bucket), fill 112: W_max = 112. */
    assert_int_equal(stg_adaptive_on_response(&a, true, STG_MS(501)), STG_OK);
    assert_close(stg_adaptive_rate(&a), 0.7 * 112.0);
    assert_int_equal(stg_adaptive_on_response(&a, true, STG_MS(502)), STG_OK);
    assert_close(stg_adaptive_rate(&a), 0.7 * 0.7 * 112.0);
    stg_adaptive_destroy(&a);
}

/* After the cut at 0.5 s with W_max = 160, successes follow
 * 0.4 * (t - K)^3 + 160, K = cbrt(160 * 0.3 / 0.4) = cbrt(120), while that
 * stays under 2 x measured; then the cap takes over. */
static void test_cubic_growth_and_cap(void **state)
{
    (void)state;
    stg_adaptive a;
    assert_int_equal(stg_adaptive_init(&a, NULL, 0), STG_OK);
    feed_200(&a, 0);
    assert_int_equal(stg_adaptive_on_response(&a, true, STG_MS(500)), STG_OK);
    const double k = cbrt(120.0);
    assert_close(k, 4.932424148660941);
    /* Keep responding at 200/s (one every 5 ms): measured stays >= 160, so
     * the cap (>= 320) does not bind before t - K = cbrt(400) (t ~ 12.3 s). */
    const int64_t checks[] = {STG_SEC(1), STG_SEC(2), STG_MS(4935), STG_SEC(5), STG_SEC(8),
                              STG_SEC(10)};
    size_t next = 0;
    for (int64_t now = STG_MS(505); now <= STG_MS(10500); now += STG_MS(5)) {
        assert_int_equal(stg_adaptive_on_response(&a, false, now), STG_OK);
        int64_t since = now - STG_MS(500);
        if (next < sizeof checks / sizeof checks[0] && since == checks[next]) {
            double t = (double)since / 1e6;
            double want = 0.4 * pow(t - k, 3) + 160.0;
            assert_close(stg_adaptive_rate(&a), want);
            next++;
        }
    }
    assert_int_equal(next, sizeof checks / sizeof checks[0]);
    /* Spot values, by hand: t = 1 s -> 135.6757..., t = 10 s -> 212.0548... */
    assert_true(fabs((0.4 * pow(1.0 - k, 3) + 160.0) - 135.6757) < 1e-3);
    assert_true(fabs((0.4 * pow(10.0 - k, 3) + 160.0) - 212.0548) < 1e-3);

    /* Later the curve outgrows 2 x measured (~200/s): capped exactly. */
    for (int64_t now = STG_MS(10505); now <= STG_SEC(20); now += STG_MS(5))
        assert_int_equal(stg_adaptive_on_response(&a, false, now), STG_OK);
    double m = stg_adaptive_measured_rate(&a);
    assert_true(m > 199.0 && m < 201.0);
    assert_close(stg_adaptive_rate(&a), 2.0 * m);

    /* A client that slows to one response per second: the cap follows the
     * measurement down (each response closes a 1 s gap: 1/s). */
    for (int64_t now = STG_SEC(21); now <= STG_SEC(40); now += STG_SEC(1)) {
        assert_int_equal(stg_adaptive_on_response(&a, false, now), STG_OK);
        m = stg_adaptive_measured_rate(&a);
        assert_close(stg_adaptive_rate(&a), 2.0 * m > 0.5 ? 2.0 * m : 0.5);
    }
    assert_true(fabs(m - 1.0) < 1e-6);
    assert_close(stg_adaptive_rate(&a), 2.0 * m);
    stg_adaptive_destroy(&a);
}

/* The floor: 0.5/s however low the measurement or the cuts go; it wins over
 * the 2 x measured cap. */
static void test_floor(void **state)
{
    (void)state;
    stg_adaptive a;
    assert_int_equal(stg_adaptive_init(&a, NULL, 0), STG_OK);
    /* A lone throttle: measured 0, but the half-second in progress holds
     * this one response: current = 1 / 0.5 s = 2/s, the first cut's guess,
     * kept uncut (slow start). */
    assert_int_equal(stg_adaptive_on_response(&a, true, 0), STG_OK);
    assert_close(stg_adaptive_rate(&a), 2.0);
    /* A throttle every 10 s: the measured rate sinks to ~0.1/s, each cut
     * reaches for 0.7 x that, the floor holds it at 0.5. */
    for (int i = 1; i <= 10; i++) {
        assert_int_equal(stg_adaptive_on_response(&a, true, STG_SEC(10) * i), STG_OK);
        assert_true(stg_adaptive_rate(&a) >= 0.5);
    }
    assert_true(stg_adaptive_measured_rate(&a) < 0.25);
    assert_true(stg_adaptive_rate(&a) == 0.5);
    /* Successes: the cubic would climb but 2 x measured < 0.5: floor. */
    assert_int_equal(stg_adaptive_on_response(&a, false, STG_SEC(200)), STG_OK);
    assert_true(stg_adaptive_measured_rate(&a) < 0.25);
    assert_true(stg_adaptive_rate(&a) == 0.5);
    /* Paced at one send per 2 s. */
    int64_t t = STG_SEC(300);
    assert_int_equal(acquire_wait(&a, t, INT64_MAX), 0);
    assert_int_equal(acquire_wait(&a, t, INT64_MAX), STG_SEC(2));
    assert_int_equal(acquire_wait(&a, t, INT64_MAX), STG_SEC(4));

    /* A configured floor and ceiling. */
    stg_adaptive b;
    stg_adaptive_config c = {.min_rate = 3, .max_rate = 50};
    assert_int_equal(stg_adaptive_init(&b, &c, 0), STG_OK);
    assert_int_equal(stg_adaptive_on_response(&b, true, 0), STG_OK);
    assert_true(stg_adaptive_rate(&b) == 3.0);
    feed_200(&b, STG_SEC(10));
    feed_200(&b, STG_MS(10500));
    for (int64_t now = STG_SEC(11); now <= STG_SEC(60); now += STG_MS(5))
        assert_int_equal(stg_adaptive_on_response(&b, false, now), STG_OK);
    assert_true(stg_adaptive_rate(&b) == 50.0);
    stg_adaptive_destroy(&b);
    stg_adaptive_destroy(&a);
}

static void test_hint_hold_until_reset(void **state)
{
    (void)state;
    stg_adaptive a;
    assert_int_equal(stg_adaptive_init(&a, NULL, 0), STG_OK);
    stg_rng rng, twin;
    stg_rng_seed(&rng, 7);
    stg_rng_seed(&twin, 7);

    /* remaining 0, reset in 5 s: hold until 5 s + uniform(0, 500 ms). */
    const int64_t t0 = STG_SEC(1);
    stg_hints h = no_hints();
    h.remaining = 0;
    h.reset_us = STG_SEC(5);
    assert_int_equal(stg_adaptive_on_hints(&a, &h, t0, &rng), STG_OK);
    int64_t spread = stg_rng_range(&twin, 0, STG_MS(500));
    int64_t until = t0 + STG_SEC(5) + spread;
    assert_int_equal(stg_adaptive_hold_until(&a), until);
    print_message("      hold until %lld us (spread %lld us)\n", (long long)until,
                  (long long)spread);
    /* Held even though the limiter is off. */
    assert_true(stg_adaptive_rate(&a) == 0.0);
    int64_t w = 0;
    assert_int_equal(stg_adaptive_acquire(&a, t0, STG_SEC(5), &w), STG_ETIMEDOUT);
    assert_int_equal(w, until - t0);
    assert_int_equal(acquire_wait(&a, t0, INT64_MAX), until - t0);
    assert_int_equal(acquire_wait(&a, t0 + STG_SEC(2), INT64_MAX), until - t0 - STG_SEC(2));
    /* Off: once the hold is over, everything goes again. */
    assert_int_equal(acquire_wait(&a, until, 0), 0);
    assert_int_equal(acquire_wait(&a, until, 0), 0);

    /* The same window reported again by later responses: no re-draw, the
     * hold does not creep later. */
    h.reset_us = STG_SEC(5) - STG_MS(10);
    assert_int_equal(stg_adaptive_on_hints(&a, &h, t0 + STG_MS(10), &rng), STG_OK);
    assert_int_equal(stg_adaptive_hold_until(&a), until);
    /* A later reset extends it. rng NULL: no spread. */
    h.reset_us = STG_SEC(10);
    assert_int_equal(stg_adaptive_on_hints(&a, &h, t0, NULL), STG_OK);
    assert_int_equal(stg_adaptive_hold_until(&a), t0 + STG_SEC(10));
    /* remaining > 0 or an unknown reset: no hold. */
    h.remaining = 3;
    h.reset_us = STG_SEC(100);
    assert_int_equal(stg_adaptive_on_hints(&a, &h, t0, &rng), STG_OK);
    h.remaining = 0;
    h.reset_us = STG_UNKNOWN;
    assert_int_equal(stg_adaptive_on_hints(&a, &h, t0, &rng), STG_OK);
    assert_int_equal(stg_adaptive_hold_until(&a), t0 + STG_SEC(10));

    /* Retry-After alone answers one request: no hold on the key. */
    h = no_hints();
    h.retry_after_us = STG_SEC(30);
    const int64_t t1 = STG_SEC(50);
    assert_int_equal(stg_adaptive_on_hints(&a, &h, t1, &rng), STG_OK);
    assert_int_equal(stg_adaptive_hold_until(&a), t0 + STG_SEC(10));
    assert_int_equal(acquire_wait(&a, t1, 0), 0);
    /* A short reset gets the 100 ms minimum spread. */
    h = no_hints();
    h.remaining = 0;
    h.reset_us = STG_MS(200);
    assert_int_equal(stg_adaptive_on_hints(&a, &h, t1, &rng), STG_OK);
    spread = stg_rng_range(&twin, 0, STG_MS(100));
    assert_int_equal(stg_adaptive_hold_until(&a), t1 + STG_MS(200) + spread);
    stg_adaptive_destroy(&a);
}

/* Many clients told the same reset come back spread over 10% of it. */
static void test_hint_spread_distribution(void **state)
{
    (void)state;
    stg_rng rng;
    stg_rng_seed(&rng, 99);
    stg_hints h = no_hints();
    h.remaining = 0;
    h.reset_us = STG_SEC(10);
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    int64_t in_first_10ms = 0;
    for (int i = 0; i < 1000; i++) {
        stg_adaptive a;
        assert_int_equal(stg_adaptive_init(&a, NULL, 0), STG_OK);
        assert_int_equal(stg_adaptive_on_hints(&a, &h, 0, &rng), STG_OK);
        int64_t u = stg_adaptive_hold_until(&a);
        lo = u < lo ? u : lo;
        hi = u > hi ? u : hi;
        in_first_10ms += u < STG_SEC(10) + STG_MS(10);
        stg_adaptive_destroy(&a);
    }
    assert_true(lo >= STG_SEC(10) && hi <= STG_SEC(11));
    assert_true(hi - lo > STG_MS(900));
    assert_true(in_first_10ms < 40); /* ~10 expected of 1000 */
}

static void test_hint_pacing(void **state)
{
    (void)state;
    stg_adaptive a;
    assert_int_equal(stg_adaptive_init(&a, NULL, 0), STG_OK);
    /* limit 100 per 60 s window: paced at 100/60 per second from now on. */
    stg_hints h = no_hints();
    h.limit = 100;
    h.remaining = 80;
    h.window_us = STG_SEC(60);
    assert_int_equal(stg_adaptive_on_hints(&a, &h, 0, NULL), STG_OK);
    assert_close(stg_adaptive_rate(&a), 100.0 / 60.0);
    assert_int_equal(stg_adaptive_hold_until(&a), INT64_MIN); /* no hold */
    assert_int_equal(acquire_wait(&a, 0, INT64_MAX), 0);
    assert_int_equal(acquire_wait(&a, 0, INT64_MAX), 600000);
    assert_int_equal(acquire_wait(&a, 0, INT64_MAX), 1200000);
    /* Successes do not push past the stated limit... */
    for (int64_t now = STG_SEC(2); now <= STG_SEC(120); now += STG_MS(600))
        assert_int_equal(stg_adaptive_on_response(&a, false, now), STG_OK);
    assert_close(stg_adaptive_rate(&a), 100.0 / 60.0);
    /* ...a throttle still cuts below it... */
    assert_int_equal(stg_adaptive_on_response(&a, true, STG_SEC(121)), STG_OK);
    assert_true(stg_adaptive_rate(&a) < 100.0 / 60.0);
    /* ...and a lower stated limit lowers the rate at once. */
    h.limit = 30;
    assert_int_equal(stg_adaptive_on_hints(&a, &h, STG_SEC(122), NULL), STG_OK);
    assert_close(stg_adaptive_rate(&a), 0.5);
    stg_adaptive_destroy(&a);

    /* Hold and pace together: the hold comes first, then the pace. */
    assert_int_equal(stg_adaptive_init(&a, NULL, 0), STG_OK);
    h = no_hints();
    h.limit = 10;
    h.window_us = STG_SEC(1);
    h.remaining = 0;
    h.reset_us = STG_MS(300);
    assert_int_equal(stg_adaptive_on_hints(&a, &h, 0, NULL), STG_OK);
    assert_int_equal(acquire_wait(&a, 0, INT64_MAX), STG_MS(300));
    assert_int_equal(acquire_wait(&a, 0, INT64_MAX), STG_MS(400));
    assert_int_equal(acquire_wait(&a, STG_MS(100), INT64_MAX), STG_MS(400));
    int64_t w;
    assert_int_equal(stg_adaptive_acquire(&a, 0, STG_MS(550), &w), STG_ETIMEDOUT);
    assert_int_equal(w, STG_MS(600));
    stg_adaptive_destroy(&a);
}

/* Several threads share one limiter and one server: acquire (lock-free),
 * report, read the rate, feed hints, all at once. Run under TSan to show
 * there is no data race; here it checks that the accounting adds up. */
#define TH_N 4
#define TH_ITERS 20000

typedef struct th_shared {
    stg_adaptive a;
    stg_bucket server;
    _Atomic int64_t clock_us;
    _Atomic int64_t sends;
} th_shared;

typedef struct th_arg {
    th_shared *sh;
    int id;
} th_arg;

static void *th_worker(void *p)
{
    th_arg *arg = p;
    th_shared *sh = arg->sh;
    stg_rng rng; /* one per thread: stg_rng is not thread-safe */
    stg_rng_seed(&rng, (uint64_t)arg->id);
    for (int i = 0; i < TH_ITERS; i++) {
        int64_t now = atomic_fetch_add(&sh->clock_us, 100) + 100;
        int64_t wait = -1;
        int rc = stg_adaptive_acquire(&sh->a, now, STG_MS(50), &wait);
        if (rc == STG_ETIMEDOUT)
            continue;
        if (rc != STG_OK || wait < 0)
            fail_msg("acquire: %d, wait %lld", rc, (long long)wait);
        int64_t at = now + wait;
        bool thr = stg_bucket_try(&sh->server, 1, at, NULL) != STG_OK;
        atomic_fetch_add(&sh->sends, 1);
        if (stg_adaptive_on_response(&sh->a, thr, at + STG_MS(1)) != STG_OK)
            fail_msg("on_response");
        if (i % 500 == 0) {
            stg_hints h;
            stg_hints_init(&h);
            h.remaining = 0;
            h.reset_us = STG_MS(2);
            if (stg_adaptive_on_hints(&sh->a, &h, now, &rng) != STG_OK)
                fail_msg("on_hints");
        }
        double r = stg_adaptive_rate(&sh->a);
        if (!(r >= 0.0 && r <= 1e9))
            fail_msg("rate %f", r);
        (void)stg_adaptive_measured_rate(&sh->a);
        (void)stg_adaptive_hold_until(&sh->a);
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    static th_shared sh;
    assert_int_equal(stg_adaptive_init(&sh.a, NULL, 0), STG_OK);
    stg_bucket_config sc = {.rate = 2000, .burst = 20};
    assert_int_equal(stg_bucket_init(&sh.server, &sc, 0), STG_OK);
    atomic_init(&sh.clock_us, 0);
    atomic_init(&sh.sends, 0);
    pthread_t th[TH_N];
    th_arg args[TH_N];
    for (int i = 0; i < TH_N; i++) {
        args[i] = (th_arg){&sh, i};
        assert_int_equal(pthread_create(&th[i], NULL, th_worker, &args[i]), 0);
    }
    for (int i = 0; i < TH_N; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    /* Every admitted acquire was reported once. */
    assert_int_equal(atomic_load(&stg__adaptive_state(&sh.a)->admitted), atomic_load(&sh.sends));
    assert_int_equal(stg__adaptive_state(&sh.a)->responses, atomic_load(&sh.sends));
    assert_true(stg_adaptive_rate(&sh.a) > 0.0);
    print_message("      %lld sends over %.1f s, final rate %.1f/s\n",
                  (long long)atomic_load(&sh.sends), (double)atomic_load(&sh.clock_us) / 1e6,
                  stg_adaptive_rate(&sh.a));
    stg_adaptive_destroy(&sh.a);
}

/* ---- Convergence against a modelled server, in virtual time. ---- */

typedef struct sim_result {
    double rate[18];   /* sends per second in each 10 s window */
    long sends[18];
    long throttled[18];
} sim_result;

/* n workers, each: acquire (no timeout) -> wait -> send -> the server's
 * bucket answers 200 or 429 -> the response arrives rtt later -> report
 * it -> acquire again. The greedy client has no other limit than the
 * workers and the round trip. Events are processed in time order. If
 * halve_at_us > 0 the server's limit drops to limit / 2 at that instant. */
static void simulate(int n, int64_t rtt_us, double limit, int64_t server_burst,
                     const stg_adaptive_config *cfg, int64_t halve_at_us, sim_result *out)
{
    enum { START, SEND, RESPONSE };
    struct { int kind; int64_t t; bool throttled; } w[64];
    assert_true(n >= 1 && n <= 64);
    stg_bucket server;
    stg_bucket_config sc = {.rate = limit, .burst = server_burst};
    assert_int_equal(stg_bucket_init(&server, &sc, 0), STG_OK);
    stg_adaptive a;
    assert_int_equal(stg_adaptive_init(&a, cfg, 0), STG_OK);
    for (int i = 0; i < n; i++) {
        w[i].kind = START;
        w[i].t = 0;
        w[i].throttled = false;
    }
    *out = (sim_result){{0}, {0}, {0}};
    const int64_t end = STG_SEC(180);
    for (;;) {
        int k = 0;
        for (int i = 1; i < n; i++)
            if (w[i].t < w[k].t)
                k = i;
        int64_t t = w[k].t;
        if (t >= end)
            break;
        if (halve_at_us > 0 && t >= halve_at_us) {
            assert_int_equal(stg_bucket_set_rate(&server, limit / 2, t), STG_OK);
            halve_at_us = 0;
        }
        if (w[k].kind == SEND) {
            w[k].throttled = stg_bucket_try(&server, 1, t, NULL) != STG_OK;
            int win = (int)(t / STG_SEC(10));
            out->sends[win]++;
            out->throttled[win] += w[k].throttled;
            w[k].kind = RESPONSE;
            w[k].t = t + rtt_us;
        } else {
            if (w[k].kind == RESPONSE)
                assert_int_equal(stg_adaptive_on_response(&a, w[k].throttled, t), STG_OK);
            int64_t wait = -1;
            assert_int_equal(stg_adaptive_acquire(&a, t, INT64_MAX, &wait), STG_OK);
            assert_true(wait >= 0);
            w[k].kind = SEND;
            w[k].t = t + wait;
        }
    }
    for (int i = 0; i < 18; i++)
        out->rate[i] = (double)out->sends[i] / 10.0;
    stg_adaptive_destroy(&a);
}

static void check_converged(const char *name, const sim_result *r, double limit, int from)
{
    long sends = 0, throttled = 0;
    print_message("      %s: per 10 s window (sends/s, throttled):\n       ", name);
    for (int i = 0; i < 18; i++) {
        print_message(" %.1f/%ld", r->rate[i], r->throttled[i]);
        if (i % 6 == 5)
            print_message("\n       ");
    }
    for (int i = from; i < 18; i++) {
        sends += r->sends[i];
        throttled += r->throttled[i];
        if (r->rate[i] < 0.85 * limit || r->rate[i] > 1.15 * limit)
            fail_msg("%s: window %d s: %.1f/s, outside %.0f +-15%%", name, i * 10, r->rate[i],
                     limit);
    }
    double frac = (double)throttled / (double)sends;
    print_message("from %d s: %ld sends, %ld throttled (%.2f%%)\n", from * 10, sends,
                  throttled, 100.0 * frac);
    if (!(frac < 0.05))
        fail_msg("%s: %.2f%% throttled from %d s", name, 100.0 * frac, from * 10);
}

/* The brief's scenario: L = 100/s, server burst L/5, one greedy client that
 * sends as soon as it is admitted (1 ms round trip). */
static void test_convergence_greedy(void **state)
{
    (void)state;
    sim_result r;
    simulate(1, STG_MS(1), 100.0, 20, NULL, 0, &r);
    check_converged("greedy, 1 worker, 1 ms", &r, 100.0, 6);
}

/* The same with the unmodified AWS rule (every throttle cuts). */
static void test_convergence_greedy_aws_pure(void **state)
{
    (void)state;
    sim_result r;
    stg_adaptive_config c = {.recovery_us = -1};
    simulate(1, STG_MS(1), 100.0, 20, &c, 0, &r);
    check_converged("greedy, AWS rule", &r, 100.0, 6);
}

/* Harder: 16 concurrent workers, 50 ms round trip, so about 15 requests
 * are in flight or reserved when the server starts refusing. With the AWS
 * rule every one of their throttles cuts again and the rate collapses
 * (~47/s here, and to ~1/s with 64 workers and 200 ms); the recovery rule
 * keeps it near L. */
static void test_convergence_concurrent(void **state)
{
    (void)state;
    sim_result r;
    simulate(16, STG_MS(50), 100.0, 20, NULL, 0, &r);
    check_converged("16 workers, 50 ms", &r, 100.0, 6);
    simulate(64, STG_MS(200), 100.0, 20, NULL, 0, &r);
    check_converged("64 workers, 200 ms", &r, 100.0, 6);
    /* A server with no burst to absorb an overshoot. */
    simulate(16, STG_MS(50), 100.0, 1, NULL, 0, &r);
    check_converged("16 workers, 50 ms, server burst 1", &r, 100.0, 6);
}

/* The server halves its limit at 90 s: the client follows within a window. */
static void test_convergence_limit_drop(void **state)
{
    (void)state;
    sim_result r;
    simulate(16, STG_MS(50), 100.0, 20, NULL, STG_SEC(90), &r);
    check_converged("16 workers, 100/s then 50/s from 90 s", &r, 50.0, 10);
    for (int i = 6; i < 9; i++)
        assert_true(r.rate[i] > 85.0 && r.rate[i] < 115.0);
}

/* ---- A 503 with a hint is a hold, not a cut (stg_adaptive_on_hold). ---- */

/* Exact: the hold keeps the fill rate, holds every send until the hint,
 * leaves the rate alone for answers that land inside it, and after it the
 * curve resumes where it stood (its clock paused); the same answer reported
 * as a throttle cuts to beta. */
static void test_hold_not_cut(void **state)
{
    (void)state;
    stg_adaptive a, b;
    assert_int_equal(stg_adaptive_init(&a, NULL, 0), STG_OK);
    assert_int_equal(stg_adaptive_init(&b, NULL, 0), STG_OK);
    feed_200(&a, 0);
    feed_200(&b, 0);
    const int64_t t0 = STG_MS(600);
    assert_int_equal(stg_adaptive_on_response(&a, true, t0), STG_OK);
    assert_int_equal(stg_adaptive_on_response(&b, true, t0), STG_OK);
    double before = stg_adaptive_rate(&a);
    assert_true(before > 0.0);
    assert_close(stg_adaptive_rate(&b), before);

    const int64_t t1 = STG_SEC(3);
    /* The twin: a rate at t1 on the curve, for comparison after the hold. */
    assert_int_equal(stg_adaptive_on_response(&b, false, t1), STG_OK);
    double on_curve = stg_adaptive_rate(&b);
    assert_int_equal(stg_adaptive_on_hold(&a, STG_SEC(5), t1, NULL), STG_OK);
    assert_close(stg_adaptive_rate(&a), before);
    assert_int_equal(stg_adaptive_hold_until(&a), t1 + STG_SEC(5));
    int64_t w = -1;
    assert_int_equal(stg_adaptive_acquire(&a, t1, STG_SEC(1), &w), STG_ETIMEDOUT);
    assert_true(w >= STG_SEC(5));
    /* Answers of sends from before the hold move nothing. */
    assert_int_equal(stg_adaptive_on_response(&a, false, t1 + STG_SEC(1)), STG_OK);
    assert_int_equal(stg_adaptive_on_hold(&a, STG_SEC(4), t1 + STG_SEC(1), NULL), STG_OK);
    assert_int_equal(stg_adaptive_hold_until(&a), t1 + STG_SEC(5));
    assert_close(stg_adaptive_rate(&a), before);
    /* After it: where the curve was at t1, not 5 s further up it, and not
     * capped down by 5 s of silence read as an idle client. */
    assert_int_equal(stg_adaptive_on_response(&a, false, t1 + STG_SEC(5)), STG_OK);
    assert_close(stg_adaptive_rate(&a), on_curve);
    /* A throttle still cuts, hold or not. */
    assert_int_equal(stg_adaptive_on_response(&b, true, t1), STG_OK);
    assert_true(stg_adaptive_rate(&b) < 0.75 * on_curve);
    assert_int_equal(stg_adaptive_on_hold(NULL, 0, 0, NULL), STG_EINVAL);
    assert_int_equal(stg_adaptive_on_hold(&a, -1, 0, NULL), STG_EINVAL);
    stg_adaptive_destroy(&a);
    stg_adaptive_destroy(&b);
}

/* jobs through n workers (rtt each) against a server allowing limit/s with
 * burst, that is down (503, Retry-After: the rest of the outage in whole
 * seconds, as `stagger serve --outage`) in [down_us, up_us). As in the
 * engine, a job waiting for its retry holds no worker: a 503'd job comes
 * back after its Retry-After (before new jobs), and the worker takes the
 * next job meanwhile; a 429 is retried at once (the limiter paces it). The
 * 503 is reported as a hold (hold) or, as AWS does, as a throttle.
 * Returns the instant of the last success. */
static int64_t simulate_outage(int n, int64_t rtt_us, double limit, int64_t burst, int jobs,
                               int64_t down_us, int64_t up_us, bool hold)
{
    enum { ACQ, SEND, RESPONSE, IDLE };
    struct { int kind; int64_t t; int status; int64_t ra; } w[64];
    assert_true(n >= 1 && n <= 64 && jobs <= 4096);
    static int64_t due[4096]; /* jobs waiting for their retry */
    int ndue = 0;
    stg_bucket server;
    stg_bucket_config sc = {.rate = limit, .burst = burst};
    assert_int_equal(stg_bucket_init(&server, &sc, 0), STG_OK);
    stg_adaptive a;
    assert_int_equal(stg_adaptive_init(&a, NULL, 0), STG_OK);
    stg_rng rng;
    stg_rng_seed(&rng, 3);
    int fresh = jobs, done = 0;
    int64_t last = 0;
    for (int i = 0; i < n; i++) {
        w[i].kind = fresh > 0 ? ACQ : IDLE;
        fresh -= fresh > 0;
        w[i].t = 0;
    }
    while (done < jobs) {
        int k = -1;
        for (int i = 0; i < n; i++)
            if (w[i].kind != IDLE && (k < 0 || w[i].t < w[k].t))
                k = i;
        int d = -1; /* the earliest retry, for an idle worker */
        for (int i = 0; i < ndue; i++)
            if (d < 0 || due[i] < due[d])
                d = i;
        if (d >= 0 && (k < 0 || due[d] < w[k].t)) {
            int idle = -1;
            for (int i = 0; i < n && idle < 0; i++)
                if (w[i].kind == IDLE)
                    idle = i;
            if (idle >= 0) {
                w[idle].kind = ACQ;
                w[idle].t = due[d];
                due[d] = due[--ndue];
                continue;
            }
        }
        assert_true(k >= 0);
        int64_t t = w[k].t;
        assert_true(t < STG_SEC(600));
        if (w[k].kind == ACQ) {
            int64_t wait = -1;
            assert_int_equal(stg_adaptive_acquire(&a, t, INT64_MAX, &wait), STG_OK);
            w[k].kind = SEND;
            w[k].t = t + wait;
        } else if (w[k].kind == SEND) {
            if (t >= down_us && t < up_us) {
                w[k].status = 503;
                w[k].ra = (up_us - t + STG_SEC(1) - 1) / STG_SEC(1) * STG_SEC(1);
            } else {
                w[k].status = stg_bucket_try(&server, 1, t, NULL) == STG_OK ? 200 : 429;
            }
            w[k].kind = RESPONSE;
            w[k].t = t + rtt_us;
        } else {
            if (w[k].status == 503 && hold)
                assert_int_equal(stg_adaptive_on_hold(&a, w[k].ra, t, &rng), STG_OK);
            else
                assert_int_equal(stg_adaptive_on_response(&a, w[k].status != 200, t), STG_OK);
            if (w[k].status == 200) {
                done++;
                last = t;
            } else if (w[k].status == 503) {
                due[ndue++] = t + w[k].ra; /* the job waits its Retry-After */
            }
            if (w[k].status == 429) {
                w[k].kind = ACQ; /* the same job, at once: acquire paces it */
                continue;
            }
            /* The next job: a retry that is due, else a fresh one. */
            int r = -1;
            for (int i = 0; i < ndue; i++)
                if (due[i] <= t && (r < 0 || due[i] < due[r]))
                    r = i;
            w[k].kind = ACQ;
            if (r >= 0)
                due[r] = due[--ndue];
            else if (fresh > 0)
                fresh--;
            else
                w[k].kind = IDLE;
        }
    }
    stg_adaptive_destroy(&a);
    return last;
}

/* The scenario (bench: the outage variant): 2000 jobs, 30 workers,
 * 100/s burst 20, down from 5 s to 10 s. Ideal: (jobs - burst) / rate +
 * the outage. Held, it finishes within 1.10x of that; cut (AWS), it needs
 * the seconds CUBIC takes to climb back (printed for comparison). */
static void test_outage_hold(void **state)
{
    (void)state;
    const double ideal = (2000.0 - 20.0) / 100.0 + 5.0;
    int64_t held = simulate_outage(30, STG_MS(5), 100.0, 20, 2000, STG_SEC(5), STG_SEC(10), true);
    int64_t cut = simulate_outage(30, STG_MS(5), 100.0, 20, 2000, STG_SEC(5), STG_SEC(10), false);
    print_message("      outage 5 s: held %.2fx ideal, cut %.2fx ideal\n",
                  (double)held / 1e6 / ideal, (double)cut / 1e6 / ideal);
    assert_true((double)held / 1e6 <= 1.10 * ideal);
    assert_true(held < cut);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_validation),
        cmocka_unit_test(test_resolve),
        cmocka_unit_test(test_disabled_until_first_throttle),
        cmocka_unit_test(test_cut),
        cmocka_unit_test(test_first_answer_throttled),
        cmocka_unit_test(test_slow_start),
        cmocka_unit_test(test_cut_every_throttle_without_recovery),
        cmocka_unit_test(test_cubic_growth_and_cap),
        cmocka_unit_test(test_floor),
        cmocka_unit_test(test_hint_hold_until_reset),
        cmocka_unit_test(test_hint_spread_distribution),
        cmocka_unit_test(test_hint_pacing),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_convergence_greedy),
        cmocka_unit_test(test_convergence_greedy_aws_pure),
        cmocka_unit_test(test_convergence_concurrent),
        cmocka_unit_test(test_convergence_limit_drop),
        cmocka_unit_test(test_hold_not_cut),
        cmocka_unit_test(test_outage_hold),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
