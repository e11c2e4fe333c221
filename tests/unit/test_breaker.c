/*
 * Unit tests of the circuit breaker. A fake clock (plain int64_t now) moves
 * by hand; every transition, retry_in and callback is an exact expectation.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <stagger/breaker.h>

#define T0 STG_SEC(1000) /* an arbitrary start: no instant is special */

/* ---- callback recorder -------------------------------------------------- */

#define MAX_EVENTS 64

typedef struct event {
    stg_breaker_state from, to;
    int64_t now_us;
} event;

typedef struct recorder {
    int n;
    event ev[MAX_EVENTS];
} recorder;

static void on_change(void *data, stg_breaker_state from, stg_breaker_state to, int64_t now_us)
{
    recorder *r = data;
    assert_true(r->n < MAX_EVENTS);
    r->ev[r->n++] = (event){from, to, now_us};
}

static void expect_event(const recorder *r, int i, stg_breaker_state from, stg_breaker_state to,
                         int64_t now_us)
{
    assert_true(i < r->n);
    assert_int_equal(r->ev[i].from, from);
    assert_int_equal(r->ev[i].to, to);
    assert_int_equal(r->ev[i].now_us, now_us);
}

static void init_with(stg_breaker *br, stg_breaker_config cfg, recorder *r)
{
    if (r) {
        memset(r, 0, sizeof *r);
        cfg.on_change = on_change;
        cfg.data = r;
    }
    assert_int_equal(stg_breaker_init(br, &cfg), STG_OK);
}

static void fail_n(stg_breaker *br, int n, int64_t now)
{
    for (int i = 0; i < n; i++)
        stg_breaker_record(br, 503, STG_NET_NONE, now);
}

/* Trip a default breaker at `now` with 20 consecutive failures. */
static void trip(stg_breaker *br, int64_t now)
{
    fail_n(br, 20, now);
    assert_int_equal(stg_breaker_state_at(br, now), STG_BREAKER_OPEN);
}

/* Expect allow() to reject at now with exactly retry_in. */
static void expect_reject(stg_breaker *br, int64_t now, int64_t retry_in)
{
    int64_t w = -1;
    assert_int_equal(stg_breaker_allow(br, now, &w), STG_EBREAKER);
    assert_int_equal(w, retry_in);
}

static void expect_admit(stg_breaker *br, int64_t now)
{
    int64_t w = -1;
    assert_int_equal(stg_breaker_allow(br, now, &w), STG_OK);
    assert_int_equal(w, 0);
}

/* ---- tests -------------------------------------------------------------- */

static void test_defaults_and_invalid(void **state)
{
    (void)state;
    stg_breaker br;
    assert_int_equal(stg_breaker_init(&br, NULL), STG_OK);
    assert_int_equal(stg_breaker_state_at(&br, T0), STG_BREAKER_CLOSED);
    expect_admit(&br, T0);
    assert_int_equal(stg_breaker_allow(&br, T0, NULL), STG_OK);
    fail_n(&br, 19, T0);
    assert_int_equal(stg_breaker_state_at(&br, T0), STG_BREAKER_CLOSED);
    fail_n(&br, 1, T0);
    expect_reject(&br, T0, STG_SEC(30));
    stg_breaker_destroy(&br);
    stg_breaker_destroy(NULL);

    assert_int_equal(stg_breaker_allow(NULL, T0, NULL), STG_EINVAL);
    assert_int_equal(stg_breaker_init(NULL, NULL), STG_EINVAL);
    const stg_breaker_config bad[] = {
        {.open_us = -1},
        {.max_multiplier = -1},
        {.half_open_probes = -2},
        {.probe_timeout_us = -1},
        {.min_calls = -1},
        {.failure_ratio = 1.5},
        {.failure_ratio = -0.5},
        {.window_us = -1},
        {.window_buckets = STG_BREAKER_MAX_BUCKETS + 1},
        {.window_us = 5, .window_buckets = 10},
        {.open_us = INT64_MAX / 4, .max_multiplier = 8},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(stg_breaker_init(&br, &bad[i]), STG_EINVAL);

    assert_string_equal(stg_breaker_state_name(STG_BREAKER_CLOSED), "closed");
    assert_string_equal(stg_breaker_state_name(STG_BREAKER_OPEN), "open");
    assert_string_equal(stg_breaker_state_name(STG_BREAKER_HALF_OPEN), "half_open");
    assert_string_equal(stg_breaker_state_name((stg_breaker_state)7), "unknown");
}

static void test_classify(void **state)
{
    (void)state;
    /* Defaults, with a NULL and with a zeroed config. */
    stg_breaker_config zero = {0};
    const stg_breaker_config *cfgs[] = {NULL, &zero};
    for (int i = 0; i < 2; i++) {
        const stg_breaker_config *c = cfgs[i];
        assert_int_equal(stg_breaker_classify(c, 500, STG_NET_NONE), STG_BREAKER_FAILURE);
        assert_int_equal(stg_breaker_classify(c, 503, STG_NET_NONE), STG_BREAKER_FAILURE);
        assert_int_equal(stg_breaker_classify(c, 599, STG_NET_NONE), STG_BREAKER_FAILURE);
        assert_int_equal(stg_breaker_classify(c, 200, STG_NET_NONE), STG_BREAKER_SUCCESS);
        assert_int_equal(stg_breaker_classify(c, 301, STG_NET_NONE), STG_BREAKER_SUCCESS);
        assert_int_equal(stg_breaker_classify(c, 404, STG_NET_NONE), STG_BREAKER_SUCCESS);
        assert_int_equal(stg_breaker_classify(c, 408, STG_NET_NONE), STG_BREAKER_SUCCESS);
        assert_int_equal(stg_breaker_classify(c, 600, STG_NET_NONE), STG_BREAKER_SUCCESS);
        assert_int_equal(stg_breaker_classify(c, 429, STG_NET_NONE), STG_BREAKER_NEUTRAL);
        assert_int_equal(stg_breaker_classify(c, 0, STG_NET_NONE), STG_BREAKER_NEUTRAL);
        assert_int_equal(stg_breaker_classify(c, 0, STG_NET_CONNECT_REFUSED), STG_BREAKER_FAILURE);
        assert_int_equal(stg_breaker_classify(c, 0, STG_NET_RESET), STG_BREAKER_FAILURE);
        assert_int_equal(stg_breaker_classify(c, 0, STG_NET_TIMEOUT), STG_BREAKER_FAILURE);
        assert_int_equal(stg_breaker_classify(c, 0, STG_NET_CONNECT_TIMEOUT), STG_BREAKER_FAILURE);
        assert_int_equal(stg_breaker_classify(c, 0, STG_NET_DNS), STG_BREAKER_NEUTRAL);
        assert_int_equal(stg_breaker_classify(c, 0, STG_NET_TLS), STG_BREAKER_NEUTRAL);
        assert_int_equal(stg_breaker_classify(c, 0, STG_NET_OTHER), STG_BREAKER_NEUTRAL);
        /* The transport error wins over a stale status. */
        assert_int_equal(stg_breaker_classify(c, 200, STG_NET_RESET), STG_BREAKER_FAILURE);
        assert_true(stg_breaker_is_failure(c, 502, STG_NET_NONE));
        assert_false(stg_breaker_is_failure(c, 429, STG_NET_NONE));
        assert_false(stg_breaker_is_failure(c, 200, STG_NET_NONE));
    }

    /* A custom set: only 502/503 and DNS errors. 429 stays neutral even if
     * listed. */
    stg_breaker_config c = {.failure_errors = STG_NET_BIT(STG_NET_DNS)};
    stg_status_set_add(&c.failure_statuses, 502);
    stg_status_set_add(&c.failure_statuses, 503);
    stg_status_set_add(&c.failure_statuses, 429);
    assert_int_equal(stg_breaker_classify(&c, 500, STG_NET_NONE), STG_BREAKER_SUCCESS);
    assert_int_equal(stg_breaker_classify(&c, 502, STG_NET_NONE), STG_BREAKER_FAILURE);
    assert_int_equal(stg_breaker_classify(&c, 503, STG_NET_NONE), STG_BREAKER_FAILURE);
    assert_int_equal(stg_breaker_classify(&c, 429, STG_NET_NONE), STG_BREAKER_NEUTRAL);
    assert_int_equal(stg_breaker_classify(&c, 0, STG_NET_DNS), STG_BREAKER_FAILURE);
    assert_int_equal(stg_breaker_classify(&c, 0, STG_NET_RESET), STG_BREAKER_NEUTRAL);

    /* The breaker uses its config's classification. */
    stg_breaker br;
    c.consecutive_failures = 2;
    init_with(&br, c, NULL);
    stg_breaker_record(&br, 500, STG_NET_NONE, T0);
    stg_breaker_record(&br, 500, STG_NET_NONE, T0);
    assert_int_equal(stg_breaker_state_at(&br, T0), STG_BREAKER_CLOSED);
    stg_breaker_record(&br, 0, STG_NET_DNS, T0);
    assert_int_equal(stg_breaker_record(&br, 502, STG_NET_NONE, T0), STG_BREAKER_OPEN);
    stg_breaker_destroy(&br);
}

static void test_consecutive_trips(void **state)
{
    (void)state;
    stg_breaker br;
    recorder r;
    init_with(&br, (stg_breaker_config){0}, &r);
    for (int i = 0; i < 19; i++)
        assert_int_equal(stg_breaker_record(&br, 500, STG_NET_NONE, T0 + i),
                         STG_BREAKER_CLOSED);
    assert_int_equal(r.n, 0);
    assert_int_equal(stg_breaker_record(&br, 0, STG_NET_TIMEOUT, T0 + 19), STG_BREAKER_OPEN);
    assert_int_equal(r.n, 1);
    expect_event(&r, 0, STG_BREAKER_CLOSED, STG_BREAKER_OPEN, T0 + 19);
    expect_reject(&br, T0 + 19, STG_SEC(30));
    stg_breaker_destroy(&br);
}

static void test_success_resets_run(void **state)
{
    (void)state;
    stg_breaker br;
    recorder r;
    init_with(&br, (stg_breaker_config){0}, &r);
    fail_n(&br, 19, T0);
    stg_breaker_record(&br, 200, STG_NET_NONE, T0);
    fail_n(&br, 19, T0);
    stg_breaker_record(&br, 404, STG_NET_NONE, T0); /* a 4xx is the host answering */
    fail_n(&br, 19, T0);
    assert_int_equal(stg_breaker_state_at(&br, T0), STG_BREAKER_CLOSED);
    assert_int_equal(r.n, 0);
    fail_n(&br, 1, T0);
    assert_int_equal(stg_breaker_state_at(&br, T0), STG_BREAKER_OPEN);
    assert_int_equal(r.n, 1);
    stg_breaker_destroy(&br);
}

/* Neutral outcomes neither trip nor break a run of failures. */
static void test_neutral_keeps_run(void **state)
{
    (void)state;
    stg_breaker br;
    init_with(&br, (stg_breaker_config){0}, NULL);
    fail_n(&br, 19, T0);
    for (int i = 0; i < 5; i++) {
        stg_breaker_record(&br, 429, STG_NET_NONE, T0);
        stg_breaker_record(&br, 0, STG_NET_DNS, T0);
    }
    assert_int_equal(stg_breaker_state_at(&br, T0), STG_BREAKER_CLOSED);
    fail_n(&br, 1, T0);
    assert_int_equal(stg_breaker_state_at(&br, T0), STG_BREAKER_OPEN);
    stg_breaker_destroy(&br);
}

static void test_429_never_trips(void **state)
{
    (void)state;
    stg_breaker br;
    recorder r;
    /* Both modes, with thresholds a 429 storm would cross many times. */
    init_with(&br, (stg_breaker_config){.consecutive_failures = 3, .min_calls = 5}, &r);
    for (int i = 0; i < 10000; i++)
        assert_int_equal(stg_breaker_record(&br, 429, STG_NET_NONE, T0 + i * STG_MS(1)),
                         STG_BREAKER_CLOSED);
    assert_int_equal(r.n, 0);

    /* In half-open a 429 neither closes nor re-opens. */
    fail_n(&br, 3, T0 + STG_SEC(20));
    int64_t t = T0 + STG_SEC(50);
    expect_admit(&br, t);
    assert_int_equal(stg_breaker_record(&br, 429, STG_NET_NONE, t), STG_BREAKER_HALF_OPEN);
    assert_int_equal(r.n, 2);
    stg_breaker_destroy(&br);
}

static stg_breaker_config ratio_cfg(void)
{
    /* Ratio mode only: 50% of at least 20 calls in 10 s (10 x 1 s). */
    return (stg_breaker_config){.consecutive_failures = -1, .min_calls = 20};
}

static void test_ratio_trips(void **state)
{
    (void)state;
    stg_breaker br;
    recorder r;
    init_with(&br, ratio_cfg(), &r);
    int64_t t = T0;
    for (int i = 0; i < 10; i++, t += STG_MS(100))
        stg_breaker_record(&br, 200, STG_NET_NONE, t);
    for (int i = 0; i < 9; i++, t += STG_MS(100))
        stg_breaker_record(&br, 500, STG_NET_NONE, t);
    /* 9 of 19: fewer calls than min_calls, and below 50% anyway. */
    assert_int_equal(stg_breaker_state_at(&br, t), STG_BREAKER_CLOSED);
    /* 10 of 20 = 50% of 20 calls: trips. */
    assert_int_equal(stg_breaker_record(&br, 500, STG_NET_NONE, t), STG_BREAKER_OPEN);
    assert_int_equal(r.n, 1);
    expect_event(&r, 0, STG_BREAKER_CLOSED, STG_BREAKER_OPEN, t);
    stg_breaker_destroy(&br);

    /* 9 of 20 (45%) does not trip, and successes keep it closed. */
    init_with(&br, ratio_cfg(), &r);
    t = T0;
    for (int i = 0; i < 11; i++, t += STG_MS(100))
        stg_breaker_record(&br, 200, STG_NET_NONE, t);
    for (int i = 0; i < 9; i++, t += STG_MS(100))
        stg_breaker_record(&br, 500, STG_NET_NONE, t);
    assert_int_equal(stg_breaker_state_at(&br, t), STG_BREAKER_CLOSED);
    assert_int_equal(r.n, 0);
    stg_breaker_destroy(&br);
}

static void test_ratio_needs_min_calls(void **state)
{
    (void)state;
    stg_breaker br;
    init_with(&br, ratio_cfg(), NULL);
    /* 19 failures, 100% failure ratio: still too few calls. */
    for (int i = 0; i < 19; i++)
        assert_int_equal(stg_breaker_record(&br, 503, STG_NET_NONE, T0 + i * STG_MS(10)),
                         STG_BREAKER_CLOSED);
    /* Neutral outcomes are not calls. */
    for (int i = 0; i < 50; i++)
        stg_breaker_record(&br, 429, STG_NET_NONE, T0 + STG_MS(200));
    assert_int_equal(stg_breaker_state_at(&br, T0 + STG_MS(200)), STG_BREAKER_CLOSED);
    assert_int_equal(stg_breaker_record(&br, 503, STG_NET_NONE, T0 + STG_MS(200)),
                     STG_BREAKER_OPEN);
    stg_breaker_destroy(&br);
}

/* Calls expire when their 1 s bucket is 10 buckets old. */
static void test_ratio_window_expires(void **state)
{
    (void)state;
    stg_breaker br;
    /* 10 failures in the bucket [T0, T0 + 1 s), then 10 more 9.999999 s
     * later: still in the window, 20 calls, trips. */
    init_with(&br, ratio_cfg(), NULL);
    fail_n(&br, 10, T0);
    fail_n(&br, 9, T0 + STG_SEC(10) - 1);
    assert_int_equal(stg_breaker_state_at(&br, T0 + STG_SEC(10) - 1), STG_BREAKER_CLOSED);
    fail_n(&br, 1, T0 + STG_SEC(10) - 1);
    assert_int_equal(stg_breaker_state_at(&br, T0 + STG_SEC(10) - 1), STG_BREAKER_OPEN);
    stg_breaker_destroy(&br);

    /* The same 10 more at exactly T0 + 10 s: the first 10 have expired. */
    init_with(&br, ratio_cfg(), NULL);
    fail_n(&br, 10, T0);
    fail_n(&br, 10, T0 + STG_SEC(10));
    assert_int_equal(stg_breaker_state_at(&br, T0 + STG_SEC(10)), STG_BREAKER_CLOSED);
    /* ...and those new ones are counted: 10 more in the window trip it. */
    fail_n(&br, 10, T0 + STG_SEC(19));
    assert_int_equal(stg_breaker_state_at(&br, T0 + STG_SEC(19)), STG_BREAKER_OPEN);
    stg_breaker_destroy(&br);

    /* Old successes expire too: 20 successes long ago do not dilute. */
    init_with(&br, ratio_cfg(), NULL);
    for (int i = 0; i < 20; i++)
        stg_breaker_record(&br, 200, STG_NET_NONE, T0);
    fail_n(&br, 20, T0 + STG_SEC(60));
    assert_int_equal(stg_breaker_state_at(&br, T0 + STG_SEC(60)), STG_BREAKER_OPEN);
    stg_breaker_destroy(&br);

    /* A ring slot reused after a full turn starts from zero. */
    init_with(&br, ratio_cfg(), NULL);
    fail_n(&br, 15, T0);                      /* slot k, epoch e */
    fail_n(&br, 5, T0 + STG_SEC(10));         /* slot k, epoch e + 10 */
    for (int i = 0; i < 15; i++)
        stg_breaker_record(&br, 200, STG_NET_NONE, T0 + STG_SEC(11));
    /* Window: 5 failures + 15 successes = 25%; the 15 old ones are gone. */
    assert_int_equal(stg_breaker_state_at(&br, T0 + STG_SEC(11)), STG_BREAKER_CLOSED);
    stg_breaker_destroy(&br);
}

/* Negative instants (a monotonic clock's arbitrary origin) bucket by floor
 * division: -10 s - 1 us is in [-11 s, -10 s), 10 buckets before [-1 s, 0). */
static void test_ratio_negative_time(void **state)
{
    (void)state;
    stg_breaker br;
    init_with(&br, ratio_cfg(), NULL);
    fail_n(&br, 10, -STG_SEC(10) - 1);
    fail_n(&br, 10, -1);
    assert_int_equal(stg_breaker_state_at(&br, -1), STG_BREAKER_CLOSED);
    stg_breaker_destroy(&br);

    init_with(&br, ratio_cfg(), NULL);
    fail_n(&br, 10, -STG_SEC(10)); /* [-10 s, -9 s): 9 buckets before */
    fail_n(&br, 10, -1);
    assert_int_equal(stg_breaker_state_at(&br, -1), STG_BREAKER_OPEN);
    stg_breaker_destroy(&br);
}

static void test_both_modes(void **state)
{
    (void)state;
    stg_breaker br;
    /* Consecutive mode fires with far fewer calls than min_calls... */
    init_with(&br, (stg_breaker_config){.consecutive_failures = 5, .min_calls = 100}, NULL);
    fail_n(&br, 5, T0);
    assert_int_equal(stg_breaker_state_at(&br, T0), STG_BREAKER_OPEN);
    stg_breaker_destroy(&br);

    /* ...and ratio mode fires without a long run. */
    init_with(&br, (stg_breaker_config){.consecutive_failures = 5, .min_calls = 20}, NULL);
    for (int i = 0; i < 10; i++) {
        stg_breaker_record(&br, 200, STG_NET_NONE, T0);
        stg_breaker_record(&br, 500, STG_NET_NONE, T0);
    }
    assert_int_equal(stg_breaker_state_at(&br, T0), STG_BREAKER_OPEN);
    stg_breaker_destroy(&br);

    /* Both off: never trips. */
    init_with(&br, (stg_breaker_config){.consecutive_failures = -1}, NULL);
    fail_n(&br, 1000, T0);
    assert_int_equal(stg_breaker_state_at(&br, T0), STG_BREAKER_CLOSED);
    stg_breaker_destroy(&br);
}

/* The server says when it will be back: an open breaker probes then, not
 * after its own 30 s; bounded to [1 ms, 8 x 30 s]; no effect unless open. */
static void test_server_wait(void **state)
{
    (void)state;
    stg_breaker br;
    recorder r;
    init_with(&br, (stg_breaker_config){0}, &r);
    /* Closed: nothing to shorten. */
    assert_int_equal(stg_breaker_server_wait(&br, STG_SEC(2), T0), STG_BREAKER_CLOSED);
    trip(&br, T0);
    expect_reject(&br, T0, STG_SEC(30));
    assert_int_equal(stg_breaker_server_wait(&br, STG_SEC(2), T0 + STG_MS(10)), STG_BREAKER_OPEN);
    expect_reject(&br, T0 + STG_MS(10), STG_SEC(2));
    expect_reject(&br, T0 + STG_MS(2009), STG_MS(1));
    assert_int_equal(stg_breaker_state_at(&br, T0 + STG_MS(2010)), STG_BREAKER_HALF_OPEN);
    expect_event(&r, 1, STG_BREAKER_OPEN, STG_BREAKER_HALF_OPEN, T0 + STG_MS(2010));
    /* Half-open: no effect. */
    assert_int_equal(stg_breaker_server_wait(&br, STG_SEC(60), T0 + STG_MS(2010)),
                     STG_BREAKER_HALF_OPEN);
    stg_breaker_destroy(&br);

    /* Bounds: an hour is cut to 8 x 30 s; 0 becomes 1 ms; negative is ignored. */
    init_with(&br, (stg_breaker_config){0}, &r);
    trip(&br, T0);
    stg_breaker_server_wait(&br, STG_SEC(3600), T0);
    expect_reject(&br, T0, STG_SEC(240));
    stg_breaker_server_wait(&br, 0, T0);
    expect_reject(&br, T0, STG_MS(1));
    stg_breaker_server_wait(&br, -5, T0);
    expect_reject(&br, T0, STG_MS(1));
    stg_breaker_destroy(&br);
}

static void test_open_rejects_then_half_opens(void **state)
{
    (void)state;
    stg_breaker br;
    recorder r;
    init_with(&br, (stg_breaker_config){0}, &r);
    trip(&br, T0);
    expect_reject(&br, T0, STG_SEC(30));
    expect_reject(&br, T0 + 1, STG_SEC(30) - 1);
    expect_reject(&br, T0 + STG_MS(12345), STG_MS(17655));
    expect_reject(&br, T0 + STG_SEC(30) - 1, 1);
    assert_int_equal(stg_breaker_state_at(&br, T0 + STG_SEC(30) - 1), STG_BREAKER_OPEN);
    assert_int_equal(r.n, 1);
    /* Exactly at open_until: half-open, lazily, on the first look. */
    assert_int_equal(stg_breaker_state_at(&br, T0 + STG_SEC(30)), STG_BREAKER_HALF_OPEN);
    assert_int_equal(r.n, 2);
    expect_event(&r, 1, STG_BREAKER_OPEN, STG_BREAKER_HALF_OPEN, T0 + STG_SEC(30));
    /* Looking again does not fire again. */
    assert_int_equal(stg_breaker_state_at(&br, T0 + STG_SEC(31)), STG_BREAKER_HALF_OPEN);
    assert_int_equal(r.n, 2);
    stg_breaker_destroy(&br);

    /* allow() at exactly open_until is itself the probe. */
    init_with(&br, (stg_breaker_config){0}, &r);
    trip(&br, T0);
    expect_admit(&br, T0 + STG_SEC(30));
    expect_event(&r, 1, STG_BREAKER_OPEN, STG_BREAKER_HALF_OPEN, T0 + STG_SEC(30));
    expect_reject(&br, T0 + STG_SEC(30), STG_SEC(30)); /* the one slot is taken */
    stg_breaker_destroy(&br);
}

static void test_half_open_admits_k_probes(void **state)
{
    (void)state;
    stg_breaker br;
    recorder r;
    init_with(&br, (stg_breaker_config){.half_open_probes = 3}, &r);
    trip(&br, T0);
    int64_t t = T0 + STG_SEC(30);
    for (int i = 0; i < 3; i++)
        expect_admit(&br, t);
    /* Full: rejected until the unanswered slots lapse (30 s after the
     * latest claim). */
    expect_reject(&br, t, STG_SEC(30));
    expect_reject(&br, t + STG_SEC(1), STG_SEC(29));
    /* Two successes: still half-open (all 3 must succeed), still full. */
    assert_int_equal(stg_breaker_record(&br, 200, STG_NET_NONE, t + STG_SEC(2)),
                     STG_BREAKER_HALF_OPEN);
    assert_int_equal(stg_breaker_record(&br, 204, STG_NET_NONE, t + STG_SEC(2)),
                     STG_BREAKER_HALF_OPEN);
    expect_reject(&br, t + STG_SEC(2), STG_SEC(28));
    assert_int_equal(r.n, 2);
    /* The third closes. */
    assert_int_equal(stg_breaker_record(&br, 200, STG_NET_NONE, t + STG_SEC(3)),
                     STG_BREAKER_CLOSED);
    assert_int_equal(r.n, 3);
    expect_event(&r, 2, STG_BREAKER_HALF_OPEN, STG_BREAKER_CLOSED, t + STG_SEC(3));
    expect_admit(&br, t + STG_SEC(3));
    stg_breaker_destroy(&br);
}

static void test_probe_success_closes(void **state)
{
    (void)state;
    stg_breaker br;
    recorder r;
    init_with(&br, (stg_breaker_config){0}, &r);
    trip(&br, T0);
    int64_t t = T0 + STG_SEC(30);
    expect_admit(&br, t);
    assert_int_equal(stg_breaker_on_success(&br, t + STG_MS(80)), STG_BREAKER_CLOSED);
    assert_int_equal(r.n, 3);
    expect_event(&r, 0, STG_BREAKER_CLOSED, STG_BREAKER_OPEN, T0);
    expect_event(&r, 1, STG_BREAKER_OPEN, STG_BREAKER_HALF_OPEN, t);
    expect_event(&r, 2, STG_BREAKER_HALF_OPEN, STG_BREAKER_CLOSED, t + STG_MS(80));
    /* Closed again with a fresh run: 19 failures do not trip. */
    fail_n(&br, 19, t + STG_SEC(1));
    assert_int_equal(stg_breaker_state_at(&br, t + STG_SEC(1)), STG_BREAKER_CLOSED);
    stg_breaker_destroy(&br);
}

/* Fail the probe of the current half-open period: at open_until, claim and
 * fail it. Returns the instant of the failure. */
static int64_t fail_probe(stg_breaker *br, int64_t open_until)
{
    expect_admit(br, open_until);
    assert_int_equal(stg_breaker_record(br, 0, STG_NET_CONNECT_REFUSED, open_until + STG_MS(5)),
                     STG_BREAKER_OPEN);
    return open_until + STG_MS(5);
}

static void test_probe_failure_doubles_to_cap(void **state)
{
    (void)state;
    stg_breaker br;
    recorder r;
    init_with(&br, (stg_breaker_config){0}, &r);
    trip(&br, T0);
    int64_t until = T0 + STG_SEC(30);
    /* 30 s, then 60, 120, 240 (8x), and 240 stays the cap. */
    const int64_t expect_s[] = {60, 120, 240, 240, 240};
    for (size_t i = 0; i < sizeof expect_s / sizeof expect_s[0]; i++) {
        int64_t failed = fail_probe(&br, until);
        expect_reject(&br, failed, STG_SEC(expect_s[i]));
        until = failed + STG_SEC(expect_s[i]);
        expect_reject(&br, until - 1, 1);
    }
    /* closed->open, then (open->half_open, half_open->open) x 5. */
    assert_int_equal(r.n, 11);
    for (int i = 1; i < r.n; i += 2) {
        assert_int_equal(r.ev[i].from, STG_BREAKER_OPEN);
        assert_int_equal(r.ev[i].to, STG_BREAKER_HALF_OPEN);
        assert_int_equal(r.ev[i + 1].from, STG_BREAKER_HALF_OPEN);
        assert_int_equal(r.ev[i + 1].to, STG_BREAKER_OPEN);
    }
    stg_breaker_destroy(&br);

    /* A cap that is not a power of two: 10, 20, 30, 30. */
    init_with(&br, (stg_breaker_config){.open_us = STG_SEC(10), .max_multiplier = 3}, NULL);
    trip(&br, T0);
    until = T0 + STG_SEC(10);
    const int64_t expect3[] = {20, 30, 30};
    for (size_t i = 0; i < 3; i++) {
        int64_t failed = fail_probe(&br, until);
        expect_reject(&br, failed, STG_SEC(expect3[i]));
        until = failed + STG_SEC(expect3[i]);
    }
    stg_breaker_destroy(&br);

    /* max_multiplier 1: no growth. */
    init_with(&br, (stg_breaker_config){.max_multiplier = 1}, NULL);
    trip(&br, T0);
    int64_t failed = fail_probe(&br, T0 + STG_SEC(30));
    expect_reject(&br, failed, STG_SEC(30));
    stg_breaker_destroy(&br);
}

static void test_close_resets_multiplier(void **state)
{
    (void)state;
    stg_breaker br;
    init_with(&br, (stg_breaker_config){0}, NULL);
    trip(&br, T0);
    int64_t failed = fail_probe(&br, T0 + STG_SEC(30)); /* now 60 s */
    failed = fail_probe(&br, failed + STG_SEC(60));     /* now 120 s */
    expect_reject(&br, failed, STG_SEC(120));
    int64_t t = failed + STG_SEC(120);
    expect_admit(&br, t);
    assert_int_equal(stg_breaker_on_success(&br, t), STG_BREAKER_CLOSED);
    /* A new incident starts again at the base. */
    trip(&br, t + STG_SEC(5));
    expect_reject(&br, t + STG_SEC(5), STG_SEC(30));
    failed = fail_probe(&br, t + STG_SEC(35));
    expect_reject(&br, failed, STG_SEC(60));
    stg_breaker_destroy(&br);
}

static void test_neutral_frees_probe_slot(void **state)
{
    (void)state;
    stg_breaker br;
    recorder r;
    init_with(&br, (stg_breaker_config){0}, &r);
    trip(&br, T0);
    int64_t t = T0 + STG_SEC(30);
    expect_admit(&br, t);
    expect_reject(&br, t, STG_SEC(30));
    /* The probe got a 429: no verdict; its slot is free again. */
    assert_int_equal(stg_breaker_record(&br, 429, STG_NET_NONE, t + 1), STG_BREAKER_HALF_OPEN);
    expect_admit(&br, t + 2);
    /* An abandoned probe gives its slot back through on_neutral. */
    assert_int_equal(stg_breaker_on_neutral(&br, t + 3), STG_BREAKER_HALF_OPEN);
    expect_admit(&br, t + 4);
    assert_int_equal(stg_breaker_record(&br, 200, STG_NET_NONE, t + 5), STG_BREAKER_CLOSED);
    assert_int_equal(r.n, 3);
    stg_breaker_destroy(&br);
}

static void test_probe_slot_lapses(void **state)
{
    (void)state;
    stg_breaker br;
    init_with(&br, (stg_breaker_config){.probe_timeout_us = STG_SEC(5)}, NULL);
    trip(&br, T0);
    int64_t t = T0 + STG_SEC(30);
    expect_admit(&br, t); /* this probe's outcome never comes */
    expect_reject(&br, t + STG_SEC(5) - 1, 1);
    expect_admit(&br, t + STG_SEC(5));
    expect_reject(&br, t + STG_SEC(5), STG_SEC(5));
    /* A late answer of the lost probe still counts. */
    assert_int_equal(stg_breaker_record(&br, 200, STG_NET_NONE, t + STG_SEC(6)),
                     STG_BREAKER_CLOSED);
    stg_breaker_destroy(&br);
}

/* Outcomes of requests admitted before the trip change nothing. */
static void test_outcomes_while_open_ignored(void **state)
{
    (void)state;
    stg_breaker br;
    recorder r;
    init_with(&br, (stg_breaker_config){0}, &r);
    trip(&br, T0);
    for (int i = 0; i < 50; i++) {
        assert_int_equal(stg_breaker_record(&br, 500, STG_NET_NONE, T0 + STG_SEC(1)),
                         STG_BREAKER_OPEN);
        assert_int_equal(stg_breaker_record(&br, 200, STG_NET_NONE, T0 + STG_SEC(1)),
                         STG_BREAKER_OPEN);
    }
    expect_reject(&br, T0 + STG_SEC(2), STG_SEC(28));
    assert_int_equal(r.n, 1);
    stg_breaker_destroy(&br);
}

/* One full life cycle: every transition fires exactly once, in order,
 * with its own instant; a success recorded in half-open closes even if it
 * came from a request admitted before (documented). */
static void test_callback_sequence(void **state)
{
    (void)state;
    stg_breaker br;
    recorder r;
    init_with(&br, (stg_breaker_config){.consecutive_failures = 2}, &r);
    int64_t t1 = T0 + 7;
    stg_breaker_on_failure(&br, T0);
    stg_breaker_on_failure(&br, t1);                  /* closed -> open */
    int64_t t2 = t1 + STG_SEC(30);
    for (int i = 0; i < 3; i++)
        (void)stg_breaker_state_at(&br, t2 + i);      /* open -> half_open once */
    expect_admit(&br, t2 + 10);
    int64_t t3 = t2 + 20;
    stg_breaker_on_failure(&br, t3);                  /* half_open -> open (60 s) */
    int64_t t4 = t3 + STG_SEC(60);
    expect_admit(&br, t4);                            /* open -> half_open */
    int64_t t5 = t4 + 30;
    stg_breaker_on_success(&br, t5);                  /* half_open -> closed */
    stg_breaker_on_success(&br, t5 + 1);              /* no change */
    stg_breaker_on_failure(&br, t5 + 2);              /* run of 1: no change */
    assert_int_equal(r.n, 5);
    expect_event(&r, 0, STG_BREAKER_CLOSED, STG_BREAKER_OPEN, t1);
    expect_event(&r, 1, STG_BREAKER_OPEN, STG_BREAKER_HALF_OPEN, t2);
    expect_event(&r, 2, STG_BREAKER_HALF_OPEN, STG_BREAKER_OPEN, t3);
    expect_event(&r, 3, STG_BREAKER_OPEN, STG_BREAKER_HALF_OPEN, t4);
    expect_event(&r, 4, STG_BREAKER_HALF_OPEN, STG_BREAKER_CLOSED, t5);
    stg_breaker_destroy(&br);
}

static void test_huge_instants_saturate(void **state)
{
    (void)state;
    stg_breaker br;
    init_with(&br, (stg_breaker_config){0}, NULL);
    int64_t t = INT64_MAX - STG_SEC(1);
    trip(&br, t);
    expect_reject(&br, t, STG_SEC(1)); /* open_until saturated at INT64_MAX */
    expect_admit(&br, INT64_MAX);
    stg_breaker_destroy(&br);
}

/* ---- concurrency -------------------------------------------------------- */

typedef struct chain {
    int n;
    int broken;               /* a callback whose from != previous to */
    stg_breaker_state last;
} chain;

static void on_chain(void *data, stg_breaker_state from, stg_breaker_state to, int64_t now_us)
{
    (void)now_us;
    chain *c = data;
    if (from != c->last || from == to)
        c->broken++;
    c->last = to;
    c->n++;
}

typedef struct hammer {
    stg_breaker *br;
    int seed;
} hammer;

static void *run_hammer(void *arg)
{
    hammer *h = arg;
    uint32_t x = (uint32_t)h->seed * 2654435761u + 1u;
    for (int i = 0; i < 100000; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        int64_t now = T0 + (int64_t)i * STG_MS(1); /* each thread's own clock */
        if (stg_breaker_allow(h->br, now, NULL) == STG_OK)
            stg_breaker_record(h->br, (x % 3) ? 503 : 200, STG_NET_NONE, now);
    }
    return NULL;
}

static void test_concurrent(void **state)
{
    (void)state;
    stg_breaker br;
    chain c = {0, 0, STG_BREAKER_CLOSED};
    stg_breaker_config cfg = {.consecutive_failures = 3, .min_calls = 10,
                              .open_us = STG_MS(50), .half_open_probes = 2,
                              .on_change = on_chain, .data = &c};
    assert_int_equal(stg_breaker_init(&br, &cfg), STG_OK);
    pthread_t t[2];
    hammer h[2] = {{&br, 1}, {&br, 2}};
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, run_hammer, &h[i]), 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    assert_true(c.n > 10); /* it did go round */
    assert_int_equal(c.broken, 0);
    stg_breaker_destroy(&br);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_and_invalid),
        cmocka_unit_test(test_classify),
        cmocka_unit_test(test_consecutive_trips),
        cmocka_unit_test(test_success_resets_run),
        cmocka_unit_test(test_neutral_keeps_run),
        cmocka_unit_test(test_429_never_trips),
        cmocka_unit_test(test_ratio_trips),
        cmocka_unit_test(test_ratio_needs_min_calls),
        cmocka_unit_test(test_ratio_window_expires),
        cmocka_unit_test(test_ratio_negative_time),
        cmocka_unit_test(test_both_modes),
        cmocka_unit_test(test_open_rejects_then_half_opens),
        cmocka_unit_test(test_server_wait),
        cmocka_unit_test(test_half_open_admits_k_probes),
        cmocka_unit_test(test_probe_success_closes),
        cmocka_unit_test(test_probe_failure_doubles_to_cap),
        cmocka_unit_test(test_close_resets_multiplier),
        cmocka_unit_test(test_neutral_frees_probe_slot),
        cmocka_unit_test(test_probe_slot_lapses),
        cmocka_unit_test(test_outcomes_while_open_ignored),
        cmocka_unit_test(test_callback_sequence),
        cmocka_unit_test(test_huge_instants_saturate),
        cmocka_unit_test(test_concurrent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
