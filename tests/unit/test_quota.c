/*
 * The quota limiter (stg_quota) in virtual time: the clock is a variable
 * moved by hand, observations are built here the way stg_hints_feed fills
 * them. Each bound is the protocol's: never more than the announced
 * remaining count before its reset (in-flight included), pacing spreads
 * the count over the time to the reset, reserve then settle, a global
 * pause holds every key, a route without a known key falls back to every
 * quota of the host, memory stays within the caps.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <stagger/quota.h>

#define H "api.example"

static stg_quota_obs obs(const char *key, const char *unit, int64_t limit, int64_t remaining,
                         int64_t reset_us)
{
    stg_quota_obs o;
    memset(&o, 0, sizeof o);
    snprintf(o.key, sizeof o.key, "%s", key);
    snprintf(o.unit, sizeof o.unit, "%s", unit);
    o.limit = limit;
    o.remaining = remaining;
    o.reset_us = reset_us;
    o.window_us = -1;
    return o;
}

static void set1(stg_quota_set *qs, stg_quota_obs o)
{
    memset(qs, 0, sizeof *qs);
    qs->q[0] = o;
    qs->n = 1;
}

static void learn(stg_quota *q, const char *route, stg_quota_obs o, int64_t now)
{
    stg_quota_set qs;
    set1(&qs, o);
    assert_int_equal(stg_quota_settle(q, H, route, NULL, &qs, now), STG_OK);
}

/* Without a burst, so that pacing is exact (the burst has its own test). */
static stg_quota *make(double margin)
{
    stg_quota_config c = {.margin = margin, .burst = -1};
    int err = 0;
    stg_quota *q = stg_quota_new(&c, &err);
    assert_non_null(q);
    return q;
}

/* Admitted now (the ticket is dropped: the send stays in flight). */
static void expect_ok(stg_quota *q, const char *route, int64_t now)
{
    stg_quota_ticket t;
    int64_t w = -1;
    assert_int_equal(stg_quota_acquire(q, H, route, NULL, 0, now, &t, &w), STG_OK);
    assert_int_equal(w, 0);
}

static int64_t expect_wait(stg_quota *q, const char *route, int64_t now)
{
    stg_quota_ticket t;
    int64_t w = -1;
    assert_int_equal(stg_quota_acquire(q, H, route, NULL, 0, now, &t, &w), STG_EAGAIN);
    assert_true(w > 0);
    return w;
}

static void test_config(void **state)
{
    (void)state;
    int err = 0;
    stg_quota_config c = {.max_keys = STG_QUOTA_TICKET_MAX + 1};
    assert_null(stg_quota_new(&c, &err));
    assert_int_equal(err, STG_EINVAL);
    c = (stg_quota_config){.margin = 2.0};
    assert_null(stg_quota_new(&c, &err));
    c = (stg_quota_config){.max_hosts = -1};
    assert_null(stg_quota_new(&c, &err));
    stg_quota *q = stg_quota_new(NULL, &err);
    assert_non_null(q);
    stg_quota_ticket t;
    int64_t w;
    assert_int_equal(stg_quota_acquire(NULL, H, NULL, NULL, 0, 0, &t, &w), STG_EINVAL);
    assert_int_equal(stg_quota_acquire(q, NULL, NULL, NULL, 0, 0, &t, &w), STG_EINVAL);
    stg_quota_cost neg = {.unit = "tokens", .amount = -1};
    assert_int_equal(stg_quota_acquire(q, H, NULL, &neg, 1, 0, &t, &w), STG_EINVAL);
    stg_quota_free(q);
    stg_quota_free(NULL);
}

/* Cold start: before a host's first answer one send goes alone; any
 * answer (even one announcing nothing) ends it; a send that never left
 * hands the turn on. */
static void test_cold_start(void **state)
{
    (void)state;
    stg_quota *q = make(0);
    stg_quota_ticket t1, t2;
    int64_t w = -1;
    assert_int_equal(stg_quota_acquire(q, H, "GET /", NULL, 0, 0, &t1, &w), STG_OK);
    assert_int_equal(w, 0);
    assert_int_equal(expect_wait(q, "GET /", 0), STG_MS(20));
    assert_int_equal(stg_quota_cancel(q, H, &t1), STG_OK);
    assert_int_equal(stg_quota_acquire(q, H, "GET /", NULL, 0, 0, &t2, &w), STG_OK);
    expect_wait(q, "GET /x", 0);
    /* No answer (a transport error): still cold. */
    assert_int_equal(stg_quota_settle(q, H, "GET /", &t2, NULL, 1), STG_OK);
    assert_int_equal(stg_quota_acquire(q, H, "GET /", NULL, 0, 1, &t2, &w), STG_OK);
    expect_wait(q, "GET /", 1);
    stg_quota_set qs;
    stg_quota_set_init(&qs);
    assert_int_equal(stg_quota_settle(q, H, "GET /", &t2, &qs, 2), STG_OK);
    for (int i = 0; i < 10; i++)
        expect_ok(q, "GET /", 2);
    stg_quota_free(q);

    stg_quota_config c = {.no_cold_probe = true};
    q = stg_quota_new(&c, NULL);
    assert_non_null(q);
    expect_ok(q, "GET /", 0);
    expect_ok(q, "GET /", 0);
    stg_quota_free(q);
}

/* remaining 5 until a reset in 10 s, sends never settled (all in flight):
 * exactly 5 are admitted before the reset, the 6th is told the reset. */
static void test_never_more_than_remaining(void **state)
{
    (void)state;
    stg_quota *q = make(-1);
    learn(q, "GET /a", obs("", "requests", 10, 5, STG_SEC(10)), 0);
    int64_t now = 0, admitted = 0;
    stg_quota_ticket t[6];
    while (now < STG_SEC(10)) {
        int64_t w = 0;
        int rc = stg_quota_acquire(q, H, "GET /a", NULL, 0, now, &t[admitted], &w);
        if (rc == STG_OK)
            admitted++;
        else
            now += w;
        assert_true(admitted <= 5);
    }
    assert_int_equal(admitted, 5);
    /* They end without an answer (nothing is given back). */
    for (int i = 0; i < 5; i++)
        assert_int_equal(stg_quota_settle(q, H, "GET /a", &t[i], NULL, now), STG_OK);
    /* At the reset one probe goes (the full quota is not assumed back);
     * the next waits for the probe's answer. */
    expect_ok(q, "GET /a", STG_SEC(10));
    int64_t w = expect_wait(q, "GET /a", STG_SEC(10));
    assert_int_equal(w, STG_MS(20));
    stg_quota_free(q);
}

/* Pace, don't burst: 10 remaining over a reset said as 10 s (whole
 * seconds, rounded up: the window may turn as early as 9 s) without
 * margin go out one per 0.9 s, exactly, all before the earliest turn;
 * with a 50 % margin the first gap is 1.35 s. */
static void test_pacing_spreads(void **state)
{
    (void)state;
    stg_quota *q = make(-1);
    learn(q, NULL, obs("", "requests", 10, 10, STG_SEC(10)), 0);
    int64_t now = 0;
    for (int i = 0; i < 10; i++) {
        expect_ok(q, "GET /", now);
        assert_int_equal(now, i * STG_MS(900));
        if (i < 9) {
            int64_t w = expect_wait(q, "GET /", now);
            assert_int_equal(w, STG_MS(900));
            now += w;
        }
    }
    /* The 10 are spent: the 11th waits for the reset. */
    assert_int_equal(expect_wait(q, "GET /", now), STG_SEC(10) - now);
    stg_quota_free(q);

    q = make(0.5);
    learn(q, NULL, obs("", "requests", 10, 10, STG_SEC(10)), 0);
    expect_ok(q, "GET /", 0);
    assert_int_equal(expect_wait(q, "GET /", 0), STG_MS(1350));
    stg_quota_free(q);

    /* No reset known: nothing to spread over, so no pacing. */
    q = make(0);
    learn(q, NULL, obs("", "requests", 10, 3, -1), 0);
    expect_ok(q, "GET /", 0);
    expect_ok(q, "GET /", 0);
    expect_ok(q, "GET /", 0);
    expect_wait(q, "GET /", 0);
    stg_quota_free(q);
}

/* The burst: the pace may run ahead by half the time to the reset, so at
 * once about r * (1 - e^-0.5) (39 of 100) go, then one per pace step;
 * the count bound holds throughout. */
static void test_pacing_burst(void **state)
{
    (void)state;
    stg_quota_config cfg = {.margin = -1}; /* the default burst, 0.5 */
    stg_quota *q = stg_quota_new(&cfg, NULL);
    assert_non_null(q);
    learn(q, NULL, obs("", "requests", 100, 100, STG_SEC(100)), 0);
    int at_once = 0;
    stg_quota_ticket t;
    int64_t w = 0;
    while (stg_quota_acquire(q, H, "GET /", NULL, 0, 0, &t, &w) == STG_OK)
        at_once++;
    assert_in_range(at_once, 37, 41);
    assert_true(w > 0);
    int64_t now = 0, total = at_once;
    while (now < STG_SEC(100)) {
        if (stg_quota_acquire(q, H, "GET /", NULL, 0, now, &t, &w) == STG_OK)
            total++;
        else
            now += w;
    }
    assert_true(total <= 100);
    stg_quota_free(q);
}

/* Pace only what does not fit: with the demand known, d waiting requests
 * that fit in the remaining count go now, unpaced, and leave the pace
 * where it was; a demand larger than the count is paced as before. */
static void test_pacing_demand(void **state)
{
    (void)state;
    stg_quota *q = make(-1);
    learn(q, NULL, obs("", "requests", 10, 10, STG_SEC(10)), 0);
    stg_quota_ticket t;
    int64_t w = -1;
    /* 4 waiting of 10 remaining: all 4 at once, each seeing the demand
     * that is left (4, 3, 2, 1). */
    for (int64_t d = 4; d >= 1; d--) {
        assert_int_equal(stg_quota_acquire_demand(q, H, "GET /", NULL, 0, d, 0, &t, &w), STG_OK);
        assert_int_equal(w, 0);
    }
    /* Then 100 waiting of 6 remaining: paced over the reset, from the 6
     * left (the unpaced ones did not move the pace): one now, the next
     * 9 s / 6 later (the reset said as 10 s may come at 9 s). */
    assert_int_equal(stg_quota_acquire_demand(q, H, "GET /", NULL, 0, 100, 0, &t, &w), STG_OK);
    assert_int_equal(stg_quota_acquire_demand(q, H, "GET /", NULL, 0, 99, 0, &t, &w), STG_EAGAIN);
    assert_int_equal(w, STG_SEC(9) / 6);
    /* The count still bounds it: 5 left, 5 waiting go at once, a 6th
     * waits for the reset. */
    for (int i = 0; i < 5; i++)
        assert_int_equal(stg_quota_acquire_demand(q, H, "GET /", NULL, 0, 5 - i, 0, &t, &w),
                         STG_OK);
    assert_int_equal(stg_quota_acquire_demand(q, H, "GET /", NULL, 0, 1, 0, &t, &w), STG_EAGAIN);
    assert_int_equal(w, STG_SEC(10));
    stg_quota_free(q);

    /* A cost counts: 3 waiting of 50 tokens each is 150, over 120 left:
     * paced; 2 of them (100) fit: not paced. */
    q = make(-1);
    learn(q, NULL, obs("", "tokens", 1000, 120, STG_SEC(10)), 0);
    stg_quota_cost c = {.unit = "tokens", .amount = 50};
    assert_int_equal(stg_quota_acquire_demand(q, H, "GET /", &c, 1, 3, 0, &t, &w), STG_OK);
    assert_int_equal(stg_quota_acquire_demand(q, H, "GET /", &c, 1, 3, 0, &t, &w), STG_EAGAIN);
    assert_int_equal(stg_quota_acquire_demand(q, H, "GET /", &c, 1, 1, 0, &t, &w), STG_OK);
    assert_int_equal(w, 0);
    stg_quota_free(q);
}

/* The window's phase is known only to the reset's rounding: t = 1 s said
 * when the window turns anywhere in the next second. A count spread up
 * to the instant held (now + 1 s) loses what was not sent when the window
 * turned early (bench_dialects' first window: 28 of 40 with the window
 * turning 0.5 s later); spread up to the earliest instant, all of it is
 * sent in the window, and the count comes back at the latest instant. */
static void test_pace_ends_at_earliest_reset(void **state)
{
    (void)state;
    stg_quota *q = make(-1);
    learn(q, NULL, obs("", "requests", 40, 39, STG_SEC(1)), 0);
    stg_quota_ticket t;
    int64_t w = -1;
    for (int i = 0; i < 39; i++) /* the window may turn now: no spread */
        assert_int_equal(stg_quota_acquire_demand(q, H, "GET /", NULL, 0, 100, 0, &t, &w), STG_OK);
    assert_int_equal(stg_quota_acquire_demand(q, H, "GET /", NULL, 0, 100, 0, &t, &w), STG_EAGAIN);
    assert_int_equal(w, STG_SEC(1));
    stg_quota_free(q);

    /* t = 4 s: 39 spread over the 3 s before the earliest turn, none
     * after it; the 40th waits for the latest (4 s). */
    q = make(-1);
    learn(q, NULL, obs("", "requests", 40, 39, STG_SEC(4)), 0);
    int64_t now = 0, last = 0;
    int n = 0;
    while (n < 39) {
        if (stg_quota_acquire_demand(q, H, "GET /", NULL, 0, 100, now, &t, &w) == STG_OK) {
            n++;
            last = now;
        } else {
            now += w;
        }
    }
    assert_true(last < STG_SEC(3));
    assert_true(last > STG_MS(2500)); /* spread, not spent at once */
    assert_int_equal(stg_quota_acquire_demand(q, H, "GET /", NULL, 0, 100, last, &t, &w),
                     STG_EAGAIN);
    assert_int_equal(last + w, STG_SEC(4));
    /* A reset said in milliseconds is exact: spread up to it. */
    stg_quota_free(q);
    q = make(-1);
    learn(q, NULL, obs("", "requests", 40, 10, STG_MS(1500)), 0);
    expect_ok(q, "GET /", 0);
    assert_int_equal(expect_wait(q, "GET /", 0), STG_MS(150));
    stg_quota_free(q);
    /* GitHub's epoch reset is whole seconds too, though the delta to it
     * is not: 1.5 s may be 0.5 s, so 10 go one per 50 ms. */
    q = make(-1);
    stg_quota_obs gh = obs("core", "requests", 40, 10, STG_MS(1500));
    gh.dialect = STG_DIALECT_GITHUB;
    learn(q, NULL, gh, 0);
    expect_ok(q, "GET /", 0);
    assert_int_equal(expect_wait(q, "GET /", 0), STG_MS(50));
    stg_quota_free(q);
}

/* The server counts in the order requests arrive, not the order they
 * were admitted: A, B, C admitted in that order, C counted first (8 left),
 * then A (7), then B (6). A's answer (7) comes first, then C's (8): C was
 * admitted last, but its count is older than A's, and a window's count
 * never grows: taking it would let 7 in where the server has 6 left (B is
 * counted already). Only C's unit comes back: 6, then B's answer says 6. */
static void test_arrival_order_is_not_admission_order(void **state)
{
    (void)state;
    stg_quota *q = make(-1);
    learn(q, NULL, obs("", "requests", 10, 9, STG_SEC(4)), 0);
    stg_quota_ticket a, b, c, t;
    int64_t w;
    assert_int_equal(stg_quota_acquire_demand(q, H, "GET /", NULL, 0, 1, 0, &a, &w), STG_OK);
    assert_int_equal(stg_quota_acquire_demand(q, H, "GET /", NULL, 0, 1, 0, &b, &w), STG_OK);
    assert_int_equal(stg_quota_acquire_demand(q, H, "GET /", NULL, 0, 1, 0, &c, &w), STG_OK);
    stg_quota_set qs;
    set1(&qs, obs("", "requests", 10, 7, STG_SEC(4)));
    assert_int_equal(stg_quota_settle(q, H, "GET /", &a, &qs, STG_MS(2)), STG_OK);
    set1(&qs, obs("", "requests", 10, 8, STG_SEC(4)));
    assert_int_equal(stg_quota_settle(q, H, "GET /", &c, &qs, STG_MS(3)), STG_OK);
    int n = 0;
    while (stg_quota_acquire_demand(q, H, "GET /", NULL, 0, 1, STG_MS(3), &t, &w) == STG_OK)
        n++;
    assert_int_equal(n, 6);
    stg_quota_free(q);

    /* The next window's count is taken: its reset is a window later. */
    q = make(-1);
    learn(q, NULL, obs("", "requests", 10, 1, STG_SEC(4)), 0);
    assert_int_equal(stg_quota_acquire_demand(q, H, "GET /", NULL, 0, 1, 0, &a, &w), STG_OK);
    assert_int_equal(stg_quota_acquire_demand(q, H, "GET /", NULL, 0, 1, 0, &b, &w), STG_EAGAIN);
    assert_int_equal(w, STG_SEC(4));
    set1(&qs, obs("", "requests", 10, 9, STG_SEC(4)));
    assert_int_equal(stg_quota_settle(q, H, "GET /", &a, &qs, STG_SEC(4)), STG_OK);
    n = 0;
    while (stg_quota_acquire_demand(q, H, "GET /", NULL, 0, 1, STG_SEC(4), &t, &w) == STG_OK)
        n++;
    assert_int_equal(n, 9);
    stg_quota_free(q);
}

/* The same without a reset (Azure: x-ratelimit-remaining-requests only,
 * no reset): A, B and C in flight, the server counts C (8 left), then A
 * (7), and A's answer comes first. C's 8 is older news than A's 7: taken,
 * it let 7 go where the server had 6 (B still to count). A request
 * admitted after A's answer came is counted after it: its higher count (a
 * refill) is taken. */
static void test_arrival_order_no_reset(void **state)
{
    (void)state;
    stg_quota *q = make(-1);
    learn(q, NULL, obs("", "requests", -1, 9, -1), 0);
    stg_quota_ticket a, b, c, d, t;
    int64_t w;
    assert_int_equal(stg_quota_acquire_demand(q, H, "GET /", NULL, 0, 1, 0, &a, &w), STG_OK);
    assert_int_equal(stg_quota_acquire_demand(q, H, "GET /", NULL, 0, 1, 0, &b, &w), STG_OK);
    assert_int_equal(stg_quota_acquire_demand(q, H, "GET /", NULL, 0, 1, 0, &c, &w), STG_OK);
    stg_quota_set qs;
    set1(&qs, obs("", "requests", -1, 7, -1));
    assert_int_equal(stg_quota_settle(q, H, "GET /", &a, &qs, STG_MS(2)), STG_OK);
    set1(&qs, obs("", "requests", -1, 8, -1));
    assert_int_equal(stg_quota_settle(q, H, "GET /", &c, &qs, STG_MS(3)), STG_OK);
    assert_int_equal(stg_quota_acquire_demand(q, H, "GET /", NULL, 0, 1, STG_MS(3), &d, &w),
                     STG_OK);
    int n = 1;
    while (stg_quota_acquire_demand(q, H, "GET /", NULL, 0, 1, STG_MS(3), &t, &w) == STG_OK)
        n++;
    assert_int_equal(n, 6);
    /* D, admitted after A's answer, comes back with a refill: taken. B is
     * still in flight, D's own unit is counted. */
    set1(&qs, obs("", "requests", -1, 9, -1));
    assert_int_equal(stg_quota_settle(q, H, "GET /", &d, &qs, STG_MS(500)), STG_OK);
    n = 0;
    while (stg_quota_acquire_demand(q, H, "GET /", NULL, 0, 1, STG_MS(500), &t, &w) == STG_OK)
        n++;
    assert_int_equal(n, 9 - 6); /* B and the 5 after D are in flight */
    stg_quota_free(q);
}

/* The same when the first answer spends the count (Shopify's used/size:
 * a leaky bucket, no reset). A and B admitted with 2 left; the server
 * counts B first (1 left), then A (0 left), and A's answer comes first.
 * Its 0 starts the wait for the probe (empty_wait); B's 1, which came
 * second, is the older count (B was in flight when A's answer came) and
 * must not open the quota: taken, it let a third request into a bucket
 * with no room (test_batch_quota's shopify persona, beside a CPU hog).
 * The probe after empty_wait still goes. */
static void test_arrival_order_spent_no_reset(void **state)
{
    (void)state;
    stg_quota *q = make(-1);
    learn(q, NULL, obs("", "requests", 6, 2, -1), 0);
    stg_quota_ticket a, b, p;
    int64_t w;
    assert_int_equal(stg_quota_acquire_demand(q, H, "GET /", NULL, 0, 1, 0, &a, &w), STG_OK);
    assert_int_equal(stg_quota_acquire_demand(q, H, "GET /", NULL, 0, 1, 0, &b, &w), STG_OK);
    stg_quota_set qs;
    set1(&qs, obs("", "requests", 6, 0, -1));
    assert_int_equal(stg_quota_settle(q, H, "GET /", &a, &qs, STG_MS(2)), STG_OK);
    set1(&qs, obs("", "requests", 6, 1, -1));
    assert_int_equal(stg_quota_settle(q, H, "GET /", &b, &qs, STG_MS(3)), STG_OK);
    /* Nothing goes before the probe, which waits empty_wait (1 s) from
     * the answer that said 0. */
    assert_int_equal(expect_wait(q, "GET /", STG_MS(3)), STG_SEC(1) - STG_MS(1));
    assert_int_equal(stg_quota_acquire_demand(q, H, "GET /", NULL, 0, 1, STG_MS(1002), &p, &w),
                     STG_OK);
    assert_int_equal(w, 0);
    expect_wait(q, "GET /", STG_MS(1002)); /* one probe at a time */
    stg_quota_free(q);
}

/* Admitted now, with a demand of one (what fits is not paced). */
static void go_now(stg_quota *q, int64_t now)
{
    stg_quota_ticket t;
    int64_t w = -1;
    assert_int_equal(stg_quota_acquire_demand(q, H, "GET /", NULL, 0, 1, now, &t, &w), STG_OK);
    assert_int_equal(w, 0);
}

/* A reset said in whole seconds is rounded up: each answer of the same
 * window bounds the instant from above, and the earliest bound holds. An
 * answer whose count grew is a new window: its reset replaces the old. */
static void test_reset_earliest_bound(void **state)
{
    (void)state;
    stg_quota *q = make(-1);
    learn(q, NULL, obs("", "requests", 10, 3, STG_SEC(4)), 0); /* by 4 s */
    /* 600 ms later the same window says "4" again (3.4 s rounded up). */
    learn(q, NULL, obs("", "requests", 10, 2, STG_SEC(4)), STG_MS(600));
    go_now(q, STG_MS(600));
    go_now(q, STG_MS(600));
    assert_int_equal(expect_wait(q, "GET /", STG_MS(600)), STG_SEC(4) - STG_MS(600));
    stg_quota_free(q);

    /* The count grew: a new window, whose reset is taken as told. */
    q = make(-1);
    learn(q, NULL, obs("", "requests", 10, 1, STG_SEC(4)), 0);
    learn(q, NULL, obs("", "requests", 10, 2, STG_SEC(4)), STG_MS(600));
    go_now(q, STG_MS(600));
    go_now(q, STG_MS(600));
    assert_int_equal(expect_wait(q, "GET /", STG_MS(600)), STG_SEC(4));
    stg_quota_free(q);

    /* An equal count may be the next window's first answer (a limit of 1
     * always says 0): its reset is taken, and nothing goes before it. */
    q = make(-1);
    learn(q, NULL, obs("", "requests", 1, 0, STG_SEC(1)), 0);
    learn(q, NULL, obs("", "requests", 1, 0, STG_SEC(1)), STG_MS(900));
    assert_int_equal(expect_wait(q, "GET /", STG_SEC(1)), STG_MS(900));
    stg_quota_free(q);

    /* A second or more later is another window too. */
    q = make(-1);
    learn(q, NULL, obs("", "requests", 10, 2, STG_SEC(4)), 0);
    learn(q, NULL, obs("", "requests", 10, 1, STG_SEC(4)), STG_SEC(1));
    go_now(q, STG_SEC(1));
    assert_int_equal(expect_wait(q, "GET /", STG_SEC(1)), STG_SEC(4));
    stg_quota_free(q);
}

/* Answers out of order: B (admitted after A) answers first with the
 * server's newer count, then A's older one arrives; A's must not raise
 * the estimate (the server has 8 left, not 9). */
static void test_late_answer_is_older(void **state)
{
    (void)state;
    stg_quota *q = make(-1);
    learn(q, NULL, obs("", "requests", 20, 10, STG_SEC(10)), 0);
    stg_quota_ticket a, b;
    int64_t w = -1;
    assert_int_equal(stg_quota_acquire_demand(q, H, "GET /", NULL, 0, 1, 0, &a, &w), STG_OK);
    assert_int_equal(stg_quota_acquire_demand(q, H, "GET /", NULL, 0, 1, 0, &b, &w), STG_OK);
    stg_quota_set qs;
    set1(&qs, obs("", "requests", 20, 8, STG_SEC(10)));
    assert_int_equal(stg_quota_settle(q, H, "GET /", &b, &qs, STG_MS(1)), STG_OK);
    set1(&qs, obs("", "requests", 20, 9, STG_SEC(10)));
    assert_int_equal(stg_quota_settle(q, H, "GET /", &a, &qs, STG_MS(2)), STG_OK);
    int n = 0;
    stg_quota_ticket t;
    while (stg_quota_acquire_demand(q, H, "GET /", NULL, 0, 1, STG_MS(2), &t, &w) == STG_OK)
        n++;
    assert_int_equal(n, 8);
    stg_quota_free(q);

    /* In order, each answer is taken: A says 9 then B says 8. */
    q = make(-1);
    learn(q, NULL, obs("", "requests", 20, 10, STG_SEC(10)), 0);
    assert_int_equal(stg_quota_acquire_demand(q, H, "GET /", NULL, 0, 1, 0, &a, &w), STG_OK);
    assert_int_equal(stg_quota_acquire_demand(q, H, "GET /", NULL, 0, 1, 0, &b, &w), STG_OK);
    set1(&qs, obs("", "requests", 20, 9, STG_SEC(10)));
    assert_int_equal(stg_quota_settle(q, H, "GET /", &a, &qs, STG_MS(1)), STG_OK);
    set1(&qs, obs("", "requests", 20, 8, STG_SEC(10)));
    assert_int_equal(stg_quota_settle(q, H, "GET /", &b, &qs, STG_MS(2)), STG_OK);
    n = 0;
    while (stg_quota_acquire_demand(q, H, "GET /", NULL, 0, 1, STG_MS(2), &t, &w) == STG_OK)
        n++;
    assert_int_equal(n, 8);
    stg_quota_free(q);
}

/* The pace ends before the reset by the margin's share of the time from
 * when the reset was told: 10 over 10 s with a 10 % margin are all sent
 * by 9 s, none in the last second (where the window may already have
 * turned: the reset is known only to the server's rounding). */
static void test_pace_ends_before_reset(void **state)
{
    (void)state;
    stg_quota *q = make(0.1);
    learn(q, NULL, obs("", "requests", 10, 10, STG_SEC(10)), 0);
    int64_t now = 0, last = 0;
    stg_quota_ticket t;
    int sent = 0;
    while (sent < 10) {
        int64_t w = 0;
        int rc = stg_quota_acquire_demand(q, H, "GET /", NULL, 0, 100, now, &t, &w);
        if (rc == STG_OK) {
            sent++;
            last = now;
        } else {
            assert_int_equal(rc, STG_EAGAIN);
            now += w;
        }
        assert_true(now < STG_SEC(10));
    }
    assert_true(last <= STG_SEC(9));
    assert_true(last > STG_SEC(8)); /* spread, not burst */
    stg_quota_free(q);
}

/* A batch against fixed windows (LIMIT 40 per 4 s, aligned at 0, as
 * GitHub's, X's or an IETF policy's), in virtual time: 120 jobs, 30 in the
 * engine at once, answers after RTT, each telling the window's remaining
 * count and its reset. The ideal sends 40 in each of three windows, the
 * last at 8 s; with the demand known the last window's jobs go at its
 * start (after the probe the reset asks for: three round trips); without
 * it they are spread over the window. Never a
 * refusal either way: the count bounds both. Returns the last send.
 *
 * The run starts `phase` into window 0 and may model the way there: the
 * server counts a send `arrive` after it leaves (the window it lands in,
 * not the one it left in), and the reset told may be an epoch in whole
 * seconds (dialect X: the same instant in every answer of a window). */
#define W_US STG_SEC(4)
#define W_LIMIT 40
#define RTT_US STG_MS(10)
typedef struct wrun {
    bool with_demand;
    int64_t phase, arrive;
    int dialect;
    int first_window; /* out: sends the server counted in window 0 */
} wrun;
static int64_t windows_run_ex(wrun *p)
{
    stg_quota *q = stg_quota_new(NULL, NULL); /* the defaults: margin, burst, cold probe */
    assert_non_null(q);
    enum { JOBS = 120, SLOTS = 30 };
    enum { ASKING, FLYING, DONE } st[JOBS];
    int64_t due[JOBS], sent_at[JOBS];
    stg_quota_ticket tk[JOBS];
    int count[8] = {0};
    int done = 0, refused = 0;
    int64_t now = p->phase, last = 0;
    for (int i = 0; i < JOBS; i++)
        st[i] = ASKING;
    while (done < JOBS) {
        /* The answers due now: the server counts at arrival and answers
         * its window's count. */
        for (int i = 0; i < JOBS; i++) {
            if (st[i] != FLYING || due[i] > now)
                continue;
            int64_t k = (sent_at[i] + p->arrive) / W_US;
            assert_true(k < 8);
            bool ok = count[k] < W_LIMIT;
            count[k] += ok;
            stg_quota_set qs;
            int64_t reset = (k + 1) * W_US - now; /* a reset passed reads as 0 */
            stg_quota_obs o = obs("", "requests", W_LIMIT, W_LIMIT - count[k], reset > 0 ? reset : 0);
            o.dialect = p->dialect;
            set1(&qs, o);
            assert_int_equal(stg_quota_settle(q, H, "GET /", &tk[i], &qs, now), STG_OK);
            st[i] = ok ? DONE : ASKING;
            done += ok;
            refused += !ok;
            if (ok && sent_at[i] > last)
                last = sent_at[i];
        }
        /* The engine holds SLOTS jobs (as a batch submits them): those that
         * hold no reservation ask, in order, until one is told to wait. */
        int in_engine = 0, asking = 0;
        for (int i = 0; i < JOBS && in_engine < SLOTS; i++)
            if (st[i] != DONE) {
                in_engine++;
                asking += st[i] == ASKING;
            }
        int64_t wake = INT64_MAX;
        in_engine = 0;
        for (int i = 0; i < JOBS && in_engine < SLOTS; i++) {
            if (st[i] == DONE)
                continue;
            in_engine++;
            if (st[i] != ASKING)
                continue;
            int64_t w = 0;
            int rc = stg_quota_acquire_demand(q, H, "GET /", NULL, 0, p->with_demand ? asking : 0,
                                              now, &tk[i], &w);
            if (rc == STG_EAGAIN) {
                wake = now + w;
                break;
            }
            assert_int_equal(rc, STG_OK);
            asking--;
            st[i] = FLYING;
            sent_at[i] = now;
            due[i] = now + RTT_US;
        }
        for (int i = 0; i < JOBS; i++)
            if (st[i] == FLYING && due[i] < wake)
                wake = due[i];
        if (done == JOBS)
            break;
        assert_true(wake != INT64_MAX && wake > now);
        now = wake;
    }
    assert_int_equal(refused, 0);
    p->first_window = count[0];
    stg_quota_free(q);
    return last;
}

static int64_t windows_run(bool with_demand)
{
    wrun p = {.with_demand = with_demand};
    return windows_run_ex(&p);
}

static void test_pacing_last_window(void **state)
{
    (void)state;
    int64_t fast = windows_run(true);
    assert_true(fast >= 2 * W_US); /* never before the third window */
    /* After the reset: the answer to the send just before it, the probe's
     * answer, then one slot turnover (30 slots, 40 jobs left). */
    assert_true(fast <= 2 * W_US + 3 * RTT_US);
    /* The demand unknown: paced as before, the last window spread. */
    int64_t paced = windows_run(false);
    assert_true(paced > 2 * W_US + W_US / 4);
}

/* bench_dialects' x at 1.91x: the first request landed 3.6 s into a 4 s
 * window. With 0.4 s of it left and 39 remaining, the client spends them
 * there and then paces on the next windows: 40 + 40 + 40, the last send at
 * the third window's start. An epoch reset tells the same instant in every
 * answer, and each answer took it for a new reset told then, so the
 * pace's stop short of it (a share of the time since it was told) shrank
 * to nothing: the last sends of the window went ever closer to its end,
 * and the 40th, half a round trip on its way, landed in the next window,
 * whose count it took; the batch then needed a fourth window for its
 * last job. */
static void test_pacing_late_phase(void **state)
{
    (void)state;
    static const int dialects[] = {STG_DIALECT_X, STG_DIALECT_GITHUB, STG_DIALECT_NONE};
    static const int64_t phases[] = {STG_MS(3600), STG_MS(3300), STG_MS(3850)};
    for (size_t d = 0; d < sizeof dialects / sizeof *dialects; d++)
        for (size_t i = 0; i < sizeof phases / sizeof *phases; i++) {
            wrun p = {.with_demand = true, .phase = phases[i], .arrive = RTT_US / 2,
                      .dialect = dialects[d]};
            int64_t last = windows_run_ex(&p);
            assert_int_equal(p.first_window, W_LIMIT);
            assert_true(last >= 2 * W_US);
            assert_true(last < 3 * W_US);
        }
}

/* A bucket whose reset is "until full" (OpenAI, Anthropic) refills one
 * unit per t / (limit - remaining): 50 a minute, 0 left and full in 60 s
 * is one request every 1.2 s, not a wait of a minute. */
static void test_refilling_bucket(void **state)
{
    (void)state;
    stg_quota *q = make(0);
    stg_quota_obs o = obs("", "requests", 50, 0, STG_SEC(60));
    o.dialect = STG_DIALECT_ANTHROPIC;
    learn(q, NULL, o, 0);
    assert_int_equal(expect_wait(q, "GET /", 0), STG_MS(1200));
    expect_ok(q, "GET /", STG_MS(1200));
    assert_int_equal(expect_wait(q, "GET /", STG_MS(1200)), STG_MS(1200));
    /* Two units refilled 2.4 s later: two go, not three. */
    expect_ok(q, "GET /", STG_MS(3600));
    expect_ok(q, "GET /", STG_MS(3600));
    expect_wait(q, "GET /", STG_MS(3600));
    stg_quota_free(q);
    /* Another dialect's reset is when the window opens again. */
    q = make(0);
    o.dialect = STG_DIALECT_X_RATELIMIT;
    learn(q, NULL, o, 0);
    assert_int_equal(expect_wait(q, "GET /", 0), STG_SEC(60));
    stg_quota_free(q);
}

/* Spent with no reset said (Shopify's 40/40): the next probe waits
 * empty_wait (1 s by default), not a round trip. */
static void test_spent_without_reset(void **state)
{
    (void)state;
    stg_quota *q = make(0);
    learn(q, NULL, obs("", "requests", 40, 0, -1), 0);
    assert_int_equal(expect_wait(q, "GET /", 0), STG_SEC(1));
    expect_ok(q, "GET /", STG_SEC(1));
    expect_wait(q, "GET /", STG_SEC(1));
    stg_quota_free(q);
}

/* Spent by our own sends with no reset known, then nothing in flight and
 * no answer that restores the count (a send that got no answer, an answer
 * without this quota): no answer is coming, so after empty_wait exactly
 * one probe goes (a second waits while it is in flight), and its answer
 * re-learns the estimate. Never a stall, and never at once into a quota
 * the last count said was spent. */
static void test_spent_idle_probes(void **state)
{
    (void)state;
    for (int how = 0; how < 2; how++) {
        stg_quota_config c = {.margin = -1, .burst = -1, .empty_wait_us = STG_MS(500)};
        stg_quota *q = stg_quota_new(&c, NULL);
        assert_non_null(q);
        learn(q, NULL, obs("", "requests", 10, 2, -1), 0);
        stg_quota_ticket a, b;
        int64_t w = -1;
        assert_int_equal(stg_quota_acquire(q, H, "GET /", NULL, 0, 0, &a, &w), STG_OK);
        assert_int_equal(stg_quota_acquire(q, H, "GET /", NULL, 0, 0, &b, &w), STG_OK);
        expect_wait(q, "GET /", 0); /* 2 in flight: the count is spent */
        stg_quota_set none;
        memset(&none, 0, sizeof none);
        /* how 0: both sends got no answer; 1: answers without the quota. */
        const stg_quota_set *qs = how ? &none : NULL;
        assert_int_equal(stg_quota_settle(q, H, "GET /", &a, qs, STG_MS(10)), STG_OK);
        assert_int_equal(stg_quota_settle(q, H, "GET /", &b, qs, STG_MS(20)), STG_OK);
        /* Estimate 0, nothing in flight: the probe waits empty_wait from
         * when the quota went idle (20 ms), no more, no less. */
        assert_int_equal(expect_wait(q, "GET /", STG_MS(20)), STG_MS(500));
        assert_int_equal(expect_wait(q, "GET /", STG_MS(519)), STG_MS(1));
        stg_quota_ticket p;
        assert_int_equal(stg_quota_acquire(q, H, "GET /", NULL, 0, STG_MS(520), &p, &w), STG_OK);
        assert_int_equal(w, 0);
        /* Exactly one: a second waits while the probe is in flight, and
         * keeps waiting however long it takes to answer. */
        expect_wait(q, "GET /", STG_MS(520));
        expect_wait(q, "GET /", STG_SEC(30));
        /* Its answer re-learns the estimate: 3 left, 3 go, the 4th waits. */
        stg_quota_set qs3;
        set1(&qs3, obs("", "requests", 10, 3, -1));
        assert_int_equal(stg_quota_settle(q, H, "GET /", &p, &qs3, STG_SEC(30)), STG_OK);
        for (int i = 0; i < 3; i++)
            expect_ok(q, "GET /", STG_SEC(30));
        expect_wait(q, "GET /", STG_SEC(30));
        stg_quota_free(q);
    }
}

/* Weighted requests: reserve the declared tokens, and let the answer's
 * remaining count (less what is still in flight) settle the estimate. */
static void test_reserve_settle(void **state)
{
    (void)state;
    stg_quota *q = make(0);
    learn(q, NULL, obs("", "tokens", 20000, 10000, -1), 0);
    stg_quota_cost c = {.unit = "tokens", .amount = 4000};
    stg_quota_ticket t1, t2, t3;
    int64_t w = -1;
    assert_int_equal(stg_quota_acquire(q, H, "POST /v1", &c, 1, 0, &t1, &w), STG_OK);
    assert_int_equal(stg_quota_acquire(q, H, "POST /v1", &c, 1, 0, &t2, &w), STG_OK);
    /* 2000 left, 8000 in flight: the third does not fit. */
    assert_int_equal(stg_quota_acquire(q, H, "POST /v1", &c, 1, 0, &t3, &w), STG_EAGAIN);
    /* The first answer: 9000 remain (it used 1000); the second's 4000 are
     * still in flight, so 5000 may be reserved. */
    stg_quota_set qs;
    set1(&qs, obs("", "tokens", 20000, 9000, -1));
    assert_int_equal(stg_quota_settle(q, H, "POST /v1", &t1, &qs, STG_MS(1)), STG_OK);
    assert_int_equal(stg_quota_acquire(q, H, "POST /v1", &c, 1, STG_MS(1), &t3, &w), STG_OK);
    /* 1000 left: a 4000 request waits; a request without a declared
     * token cost costs 1 token. */
    assert_int_equal(stg_quota_acquire(q, H, "POST /v1", &c, 1, STG_MS(1), &t1, &w),
                     STG_EAGAIN);
    stg_quota_cost c1000 = {.unit = "tokens", .amount = 1000};
    assert_int_equal(stg_quota_acquire(q, H, "POST /v1", &c1000, 1, STG_MS(1), &t1, &w),
                     STG_OK);
    /* 0 left: even a 1-token request waits now. */
    assert_int_equal(stg_quota_acquire(q, H, "POST /v1", NULL, 0, STG_MS(1), &t1, &w),
                     STG_EAGAIN);
    /* A send that got no answer stays spent: nothing is given back. */
    assert_int_equal(stg_quota_settle(q, H, "POST /v1", &t2, NULL, STG_MS(2)), STG_OK);
    assert_int_equal(stg_quota_acquire(q, H, "POST /v1", NULL, 0, STG_MS(2), &t1, &w),
                     STG_EAGAIN);
    /* A send that never left gives its reservation back. */
    stg_quota_cost c500 = {.unit = "tokens", .amount = 500};
    assert_int_equal(stg_quota_acquire(q, H, "POST /v1", &c500, 1, STG_MS(2), &t2, &w),
                     STG_EAGAIN);
    assert_int_equal(stg_quota_cancel(q, H, &t3), STG_OK); /* 4000 back */
    assert_int_equal(stg_quota_acquire(q, H, "POST /v1", &c500, 1, STG_MS(2), &t2, &w),
                     STG_OK);
    /* A cost above the announced limit can never go. */
    stg_quota_cost huge = {.unit = "tokens", .amount = 20001};
    assert_int_equal(stg_quota_acquire(q, H, "POST /v1", &huge, 1, STG_MS(2), &t1, &w),
                     STG_ETOOBIG);
    stg_quota_free(q);
}

/* stg_quota_each shows each quota as the server announced it beside what
 * is reserved (the live pages' and the metrics' view). */
typedef struct seen_q {
    int n;
    stg_quota_view v;
    char host[64];
} seen_q;

static void see_quota(const char *host, const stg_quota_view *v, void *data)
{
    seen_q *s = data;
    s->n++;
    s->v = *v;
    snprintf(s->host, sizeof s->host, "%s", host);
}

static void test_each(void **state)
{
    (void)state;
    stg_quota *q = make(0);
    seen_q s = {0};
    assert_int_equal(stg_quota_each(q, 0, see_quota, &s), STG_OK);
    assert_int_equal(s.n, 0);
    learn(q, NULL, obs("", "tokens", 20000, 10000, STG_SEC(30)), 0);
    stg_quota_cost c = {.unit = "tokens", .amount = 4000};
    stg_quota_ticket t;
    int64_t w = -1;
    assert_int_equal(stg_quota_acquire(q, H, "POST /v1", &c, 1, 0, &t, &w), STG_OK);
    assert_int_equal(stg_quota_each(q, STG_SEC(10), see_quota, &s), STG_OK);
    assert_int_equal(s.n, 1);
    assert_string_equal(s.host, H);
    assert_string_equal(s.v.unit, "tokens");
    assert_int_equal(s.v.limit, 20000);
    assert_int_equal(s.v.told_remaining, 10000);
    assert_int_equal(s.v.inflight, 4000);
    assert_int_equal(s.v.estimate, 6000);
    assert_int_equal(s.v.reset_in_us, STG_SEC(20));
    assert_int_equal(stg_quota_each(NULL, 0, see_quota, &s), STG_EINVAL);
    assert_int_equal(stg_quota_each(q, 0, NULL, &s), STG_EINVAL);
    stg_quota_free(q);
}

/* stg_quota_tally counts an answered send in every quota its ticket
 * charged, and only those: admitted or refused, per key; a ticket that
 * charged nothing, or none, counts nowhere. */
typedef struct by_key {
    int64_t admitted[2], refused[2]; /* "core", "search" */
} by_key;

static void see_key(const char *host, const stg_quota_view *v, void *data)
{
    (void)host;
    by_key *b = data;
    int k = !strcmp(v->key, "search");
    b->admitted[k] = v->admitted;
    b->refused[k] = v->refused;
}

static void test_tally(void **state)
{
    (void)state;
    stg_quota *q = make(0);
    learn(q, "GET /repos", obs("core", "requests", 5000, 100, -1), 0);
    learn(q, "GET /search", obs("search", "requests", 30, 10, -1), 0);
    stg_quota_ticket t;
    int64_t w;
    for (int i = 0; i < 3; i++) { /* three core sends: two answered 200, one 429 */
        assert_int_equal(stg_quota_acquire(q, H, "GET /repos", NULL, 0, 0, &t, &w), STG_OK);
        assert_int_equal(stg_quota_tally(q, H, &t, i == 2), STG_OK);
        assert_int_equal(stg_quota_settle(q, H, "GET /repos", &t, NULL, 0), STG_OK);
    }
    assert_int_equal(stg_quota_acquire(q, H, "GET /search", NULL, 0, 0, &t, &w), STG_OK);
    assert_int_equal(stg_quota_tally(q, H, &t, true), STG_OK);
    assert_int_equal(stg_quota_settle(q, H, "GET /search", &t, NULL, 0), STG_OK);
    /* Settled: the ticket is empty, a tally of it counts nothing. */
    assert_int_equal(stg_quota_tally(q, H, &t, true), STG_OK);
    assert_int_equal(stg_quota_tally(q, H, NULL, true), STG_OK);
    assert_int_equal(stg_quota_tally(NULL, H, &t, true), STG_EINVAL);
    by_key b = {{0, 0}, {0, 0}};
    assert_int_equal(stg_quota_each(q, 0, see_key, &b), STG_OK);
    assert_int_equal(b.admitted[0], 2);
    assert_int_equal(b.refused[0], 1);
    assert_int_equal(b.admitted[1], 0);
    assert_int_equal(b.refused[1], 1);
    stg_quota_free(q);
}

/* A request with a declared cost in one unit, against two quotas: the
 * requests quota is charged 1, the tokens quota the cost. */
static void test_two_units(void **state)
{
    (void)state;
    stg_quota *q = make(0);
    stg_quota_set qs;
    memset(&qs, 0, sizeof qs);
    qs.q[0] = obs("", "requests", 100, 2, -1);
    qs.q[1] = obs("", "tokens", 1000, 1000, -1);
    qs.n = 2;
    assert_int_equal(stg_quota_settle(q, H, NULL, NULL, &qs, 0), STG_OK);
    stg_quota_cost c = {.unit = "tokens", .amount = 600};
    stg_quota_ticket t;
    int64_t w;
    assert_int_equal(stg_quota_acquire(q, H, "POST /", &c, 1, 0, &t, &w), STG_OK);
    /* Tokens: 400 left, a second 600 waits, though a request is left. */
    assert_int_equal(stg_quota_acquire(q, H, "POST /", &c, 1, 0, &t, &w), STG_EAGAIN);
    c.amount = 400;
    assert_int_equal(stg_quota_acquire(q, H, "POST /", &c, 1, 0, &t, &w), STG_OK);
    /* Requests: both spent, so even a free (0-token) request waits. */
    c.amount = 0;
    assert_int_equal(stg_quota_acquire(q, H, "POST /", &c, 1, 0, &t, &w), STG_EAGAIN);
    stg_quota_free(q);
}

/* Routes learn their keys; a route not seen yet is charged to every quota
 * of the host; the answer refunds the keys it did not name. */
static void test_keys_and_fallback(void **state)
{
    (void)state;
    stg_quota *q = make(0);
    learn(q, "GET /repos", obs("core", "requests", 5000, 0, STG_SEC(30)), 0);
    learn(q, "GET /search", obs("search", "requests", 30, 3, -1), 0);
    /* core is spent until its reset; search is not. */
    assert_int_equal(expect_wait(q, "GET /repos", 0), STG_SEC(30));
    expect_ok(q, "GET /search", 0);
    /* An unknown route might spend core: it waits too. */
    assert_int_equal(expect_wait(q, "GET /new", 0), STG_SEC(30));
    assert_int_equal(expect_wait(q, NULL, 0), STG_SEC(30));

    /* After core's reset (one probe on /repos, answered) an unknown
     * route is charged to both keys, and its answer (naming search)
     * gives core back. */
    stg_quota_ticket t;
    int64_t w;
    assert_int_equal(stg_quota_acquire(q, H, "GET /repos", NULL, 0, STG_SEC(30), &t, &w), STG_OK);
    stg_quota_set qs;
    set1(&qs, obs("core", "requests", 5000, 1, -1));
    assert_int_equal(stg_quota_settle(q, H, "GET /repos", &t, &qs, STG_SEC(31)), STG_OK);
    assert_int_equal(stg_quota_acquire(q, H, "GET /x", NULL, 0, STG_SEC(31), &t, &w), STG_OK);
    /* core's one unit is reserved by /x now. */
    expect_wait(q, "GET /repos", STG_SEC(31));
    set1(&qs, obs("search", "requests", 30, 2, -1)); /* less /search's 1 in flight */
    assert_int_equal(stg_quota_settle(q, H, "GET /x", &t, &qs, STG_SEC(32)), STG_OK);
    expect_ok(q, "GET /repos", STG_SEC(32));
    /* /x is now a search route: search's last unit went to it... */
    expect_ok(q, "GET /x", STG_SEC(32));
    expect_wait(q, "GET /search", STG_SEC(32));

    /* A host-level quota (no key) binds every route. */
    learn(q, "GET /other", obs("", "requests", 60, 0, STG_SEC(5)), STG_SEC(40));
    assert_int_equal(expect_wait(q, "GET /other", STG_SEC(40)), STG_SEC(5));
    stg_quota_free(q);
}

/* The ids of route's quotas (stg_quota_route_ids), sorted: n of them. */
static size_t route_ids(stg_quota *q, const char *route, uint64_t *ids)
{
    size_t n = 99;
    assert_int_equal(stg_quota_route_ids(q, H, route, ids, STG_QUOTA_TICKET_MAX, &n), STG_OK);
    assert_true(n <= STG_QUOTA_TICKET_MAX);
    for (size_t i = 1; i < n; i++) /* insertion sort: compared as sets */
        for (size_t j = i; j > 0 && ids[j - 1] > ids[j]; j--) {
            uint64_t x = ids[j];
            ids[j] = ids[j - 1];
            ids[j - 1] = x;
        }
    for (size_t i = 0; i < n; i++)
        assert_true(ids[i] != 0);
    return n;
}

/* Which quotas a route is charged to (what the engine groups quota
 * waiters by): a known route, its keys' quotas and the host's own; two
 * routes that one key serves share its ids; an unknown route (or NULL)
 * has every quota; a route whose answer names another key moves; a host
 * never seen has none; ids are never reused once a quota is forgotten. */
static void test_route_ids(void **state)
{
    (void)state;
    stg_quota *q = make(0);
    uint64_t a[STG_QUOTA_TICKET_MAX], b[STG_QUOTA_TICKET_MAX], c[STG_QUOTA_TICKET_MAX];
    size_t n = 7;
    assert_int_equal(stg_quota_route_ids(q, H, "GET /repos/a", a, STG_QUOTA_TICKET_MAX, &n),
                     STG_OK);
    assert_int_equal(n, 0); /* a host never seen */
    assert_int_equal(stg_quota_route_ids(NULL, H, "GET /", a, 1, &n), STG_EINVAL);
    assert_int_equal(stg_quota_route_ids(q, NULL, "GET /", a, 1, &n), STG_EINVAL);
    assert_int_equal(stg_quota_route_ids(q, H, "GET /", a, 1, NULL), STG_EINVAL);
    assert_int_equal(stg_quota_route_ids(q, H, "GET /", NULL, 1, &n), STG_EINVAL);
    assert_int_equal(stg_quota_route_ids(q, H, "GET /", NULL, 0, &n), STG_OK);

    /* core: two units (requests and tokens), both named by /repos/a's and
     * /repos/b's answers; search by /search's. */
    stg_quota_set qs;
    memset(&qs, 0, sizeof qs);
    qs.q[0] = obs("core", "requests", 60, 50, STG_SEC(60));
    qs.q[1] = obs("core", "tokens", 6000, 5000, STG_SEC(60));
    qs.n = 2;
    assert_int_equal(stg_quota_settle(q, H, "GET /repos/a", NULL, &qs, 0), STG_OK);
    assert_int_equal(stg_quota_settle(q, H, "GET /repos/b", NULL, &qs, 0), STG_OK);
    learn(q, "GET /search", obs("search", "requests", 30, 30, STG_SEC(60)), 0);
    assert_int_equal(route_ids(q, "GET /repos/a", a), 2);
    assert_int_equal(route_ids(q, "GET /repos/b", b), 2);
    assert_memory_equal(a, b, 2 * sizeof a[0]); /* one key: the same quotas */
    assert_int_equal(route_ids(q, "GET /search", c), 1);
    assert_true(c[0] != a[0] && c[0] != a[1]); /* disjoint */
    /* Unknown: every quota of the host. */
    assert_int_equal(route_ids(q, "GET /new", b), 3);
    assert_int_equal(route_ids(q, NULL, b), 3);
    /* max bounds what is written. */
    assert_int_equal(stg_quota_route_ids(q, H, "GET /new", b, 2, &n), STG_OK);
    assert_int_equal(n, 2);

    /* /repos/b's next answer names search: it moves. */
    learn(q, "GET /repos/b", obs("search", "requests", 30, 29, STG_SEC(60)), STG_SEC(1));
    assert_int_equal(route_ids(q, "GET /repos/b", b), 1);
    assert_int_equal(b[0], c[0]);

    /* A host quota (no key) is every route's. */
    learn(q, "GET /other", obs("", "requests", 100, 90, STG_SEC(60)), STG_SEC(2));
    assert_int_equal(route_ids(q, "GET /repos/a", a), 3);
    assert_int_equal(route_ids(q, "GET /search", b), 2);
    stg_quota_free(q);

    /* Ids are never reused: a quota forgotten (max_keys) and learned again
     * is a new one. */
    stg_quota_config cfg = {.max_keys = 1};
    q = stg_quota_new(&cfg, NULL);
    assert_non_null(q);
    learn(q, "GET /a", obs("ka", "requests", 10, 5, STG_SEC(60)), 0);
    assert_int_equal(route_ids(q, "GET /a", a), 1);
    learn(q, "GET /b", obs("kb", "requests", 10, 5, STG_SEC(60)), 0); /* ka forgotten */
    learn(q, "GET /a", obs("ka", "requests", 10, 5, STG_SEC(60)), 0); /* kb forgotten */
    assert_int_equal(route_ids(q, "GET /a", b), 1);
    assert_true(b[0] != a[0]);
    stg_quota_free(q);
}

/* A global pause (Discord global, GitHub secondary) holds every key. */
static void test_global_pause(void **state)
{
    (void)state;
    stg_quota *q = make(0);
    learn(q, "GET /a", obs("bucket-a", "requests", 5, 5, -1), 0);
    learn(q, "GET /b", obs("bucket-b", "requests", 5, 5, -1), 0);
    expect_ok(q, "GET /a", 0);
    stg_quota_obs g = obs("", "", -1, -1, STG_SEC(5));
    g.global = true;
    learn(q, "GET /a", g, STG_SEC(1));
    assert_int_equal(expect_wait(q, "GET /a", STG_SEC(1)), STG_SEC(5));
    assert_int_equal(expect_wait(q, "GET /b", STG_SEC(2)), STG_SEC(4));
    assert_int_equal(expect_wait(q, "GET /never-seen", STG_SEC(3)), STG_SEC(3));
    stg_quota_host_info info;
    assert_int_equal(stg_quota_host_get(q, H, STG_SEC(3), &info), STG_OK);
    assert_int_equal(info.paused_for_us, STG_SEC(3));
    /* A shorter pause later does not shorten it. */
    g.reset_us = STG_SEC(1);
    learn(q, "GET /b", g, STG_SEC(3));
    expect_wait(q, "GET /b", STG_SEC(5));
    expect_ok(q, "GET /a", STG_SEC(6));
    expect_ok(q, "GET /b", STG_SEC(6));
    stg_quota_free(q);
}

/* After the reset: one probe; its answer gives the count, or (none given)
 * the quota goes dormant and stops gating. */
static void test_probe_and_dormant(void **state)
{
    (void)state;
    stg_quota *q = make(0);
    learn(q, NULL, obs("", "requests", 10, 0, STG_SEC(1)), 0);
    assert_int_equal(expect_wait(q, "GET /", 0), STG_SEC(1));
    stg_quota_ticket t;
    int64_t w;
    assert_int_equal(stg_quota_acquire(q, H, "GET /", NULL, 0, STG_SEC(1), &t, &w), STG_OK);
    expect_wait(q, "GET /", STG_SEC(1));
    stg_quota_set qs;
    set1(&qs, obs("", "requests", 10, 2, -1));
    assert_int_equal(stg_quota_settle(q, H, "GET /", &t, &qs, STG_SEC(1)), STG_OK);
    expect_ok(q, "GET /", STG_SEC(1));
    expect_ok(q, "GET /", STG_SEC(1));
    expect_wait(q, "GET /", STG_SEC(1));
    stg_quota_free(q);

    q = make(0);
    learn(q, NULL, obs("", "requests", 10, 0, STG_SEC(1)), 0);
    assert_int_equal(stg_quota_acquire(q, H, "GET /", NULL, 0, STG_SEC(1), &t, &w), STG_OK);
    memset(&qs, 0, sizeof qs); /* an answer without rate-limit fields */
    assert_int_equal(stg_quota_settle(q, H, "GET /", &t, &qs, STG_SEC(1)), STG_OK);
    for (int i = 0; i < 50; i++)
        expect_ok(q, "GET /", STG_SEC(1));
    /* Announced again: it gates again. */
    learn(q, NULL, obs("", "requests", 10, 0, STG_SEC(1)), STG_SEC(2));
    expect_wait(q, "GET /", STG_SEC(2));
    stg_quota_free(q);
}

/* One quota stays one when an answer leaves its window out (a 429 with
 * fewer fields than the 200 before it). */
static void test_window_left_out(void **state)
{
    (void)state;
    stg_quota *q = make(0);
    stg_quota_obs o = obs("", "requests", 10, 5, -1);
    o.window_us = STG_SEC(1);
    learn(q, NULL, o, 0);
    learn(q, NULL, obs("", "requests", -1, 0, STG_SEC(2)), 0);
    stg_quota_host_info info;
    assert_int_equal(stg_quota_host_get(q, H, 0, &info), STG_OK);
    assert_int_equal(info.quotas, 1);
    assert_int_equal(expect_wait(q, "GET /", 0), STG_SEC(2));
    /* Another window is another quota (Kong's minute and hour). */
    o.window_us = STG_SEC(3600);
    learn(q, NULL, o, 0);
    assert_int_equal(stg_quota_host_get(q, H, 0, &info), STG_OK);
    assert_int_equal(info.quotas, 2);
    stg_quota_free(q);
}

/* Memory: the caps hold, least recently used first out. */
static void test_caps(void **state)
{
    (void)state;
    stg_quota_config c = {.max_hosts = 2, .max_keys = 2, .max_routes = 2};
    stg_quota *q = stg_quota_new(&c, NULL);
    assert_non_null(q);
    stg_quota_set qs;
    set1(&qs, obs("k", "requests", 1, 0, STG_SEC(60)));
    assert_int_equal(stg_quota_settle(q, "h1", "GET /", NULL, &qs, 0), STG_OK);
    assert_int_equal(stg_quota_settle(q, "h2", "GET /", NULL, &qs, 0), STG_OK);
    assert_int_equal(stg_quota_settle(q, "h3", "GET /", NULL, &qs, 0), STG_OK);
    stg_quota_host_info info;
    assert_int_equal(stg_quota_host_get(q, "h1", 0, &info), STG_OK);
    assert_int_equal(info.quotas, 0); /* forgotten: the oldest */
    assert_int_equal(stg_quota_host_get(q, "h3", 0, &info), STG_OK);
    assert_int_equal(info.quotas, 1);
    char key[16], rt[16];
    for (int i = 0; i < 10; i++) {
        snprintf(key, sizeof key, "k%d", i);
        snprintf(rt, sizeof rt, "GET /%d", i);
        set1(&qs, obs(key, "requests", 1, 0, STG_SEC(60)));
        assert_int_equal(stg_quota_settle(q, "h3", rt, NULL, &qs, 0), STG_OK);
        assert_int_equal(stg_quota_host_get(q, "h3", 0, &info), STG_OK);
        assert_true(info.quotas <= 2);
        assert_true(info.routes <= 2);
    }
    /* The latest key and route are kept and still bind. */
    stg_quota_ticket t;
    int64_t w;
    assert_int_equal(stg_quota_acquire(q, "h3", "GET /9", NULL, 0, 0, &t, &w), STG_EAGAIN);
    assert_int_equal(w, STG_SEC(60));
    stg_quota_free(q);
}

/* Threads race for one quota under a shared fake clock: the admitted
 * count never passes the remaining count. */
typedef struct race {
    stg_quota *q;
    atomic_llong now;
    atomic_llong admitted;
} race;

static void *racer(void *arg)
{
    race *r = arg;
    for (int i = 0; i < 2000; i++) {
        int64_t now = atomic_fetch_add(&r->now, 1000);
        stg_quota_ticket t;
        int64_t w;
        if (stg_quota_acquire(r->q, H, "GET /", NULL, 0, now, &t, &w) == STG_OK)
            atomic_fetch_add(&r->admitted, 1);
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    race r = {.q = make(0)};
    atomic_init(&r.now, 0);
    atomic_init(&r.admitted, 0);
    learn(r.q, NULL, obs("", "requests", 100, 40, -1), 0);
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, racer, &r), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    /* Never settled (all in flight): exactly the 40, no probe. */
    assert_int_equal(atomic_load(&r.admitted), 40);
    stg_quota_free(r.q);
}

/* The Stagger-Cost value: taken whole or not at all. */
static void test_cost_parse(void **state)
{
    (void)state;
    stg_quota_cost c[3];
    size_t n = 99;
    const char *ok = " tokens=1200 ,requests = 1\t";
    assert_int_equal(stg_quota_cost_parse(ok, strlen(ok), c, 3, &n), STG_OK);
    assert_int_equal(n, 2);
    assert_string_equal(c[0].unit, "tokens");
    assert_int_equal(c[0].amount, 1200);
    assert_string_equal(c[1].unit, "requests");
    assert_int_equal(c[1].amount, 1);
    /* Not NUL-terminated: only len bytes are read. */
    assert_int_equal(stg_quota_cost_parse("tokens=12345", 9, c, 3, &n), STG_OK);
    assert_int_equal(c[0].amount, 12);
    const char *bad[] = {"", " ", "tokens", "tokens=", "=5", "tokens=-1", "tokens=1,",
                         "tokens=1;x=2", "a=1,a=2", "tokens=1 2", "toooooooooooooooooooooken=1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        n = 99;
        assert_int_equal(stg_quota_cost_parse(bad[i], strlen(bad[i]), c, 3, &n), STG_EPARSE);
        assert_int_equal(n, 0);
    }
    assert_int_equal(stg_quota_cost_parse("a=1,b=2,c=3,d=4", 15, c, 3, &n), STG_ERANGE);
    assert_int_equal(stg_quota_cost_parse("a=99999999999999999999", 22, c, 3, &n), STG_ERANGE);
    assert_int_equal(stg_quota_cost_parse("a=1", 3, c, 3, NULL), STG_EINVAL);
}

/* Whether `tokens` tokens are admitted at now (one request waiting: no
 * pacing); the reservation is given back either way. */
static bool admits_tokens(stg_quota *q, int64_t tokens, int64_t now)
{
    stg_quota_cost c = {.unit = "tokens", .amount = tokens};
    stg_quota_ticket t;
    int64_t w = -1;
    int rc = stg_quota_acquire_demand(q, H, "POST /v1/chat/completions", &c, 1, 1, now, &t, &w);
    assert_true(rc == STG_OK || rc == STG_EAGAIN || rc == STG_ETOOBIG); /* over the limit */
    if (rc == STG_OK)
        assert_int_equal(stg_quota_cancel(q, H, &t), STG_OK);
    return rc == STG_OK;
}

/* Reserve, settle, refund, for a cost estimated before the send: the
 * reservation holds until the answer; an answer that tells the count
 * settles it at the count; one that tells none settles it at what the
 * body said was used (an AI API's usage), a refusal (used nothing) gives
 * it all back, and a send that never left gives it back too. */
static void test_settle_used(void **state)
{
    (void)state;
    stg_quota *q = make(0);
    const char *route = "POST /v1/chat/completions";
    /* 10000 tokens left, refilled in a minute (OpenAI). */
    stg_quota_obs o = obs("", "tokens", 10000, 10000, STG_SEC(60));
    o.dialect = STG_DIALECT_OPENAI;
    learn(q, route, o, 0);
    assert_true(admits_tokens(q, 10000, 0));
    stg_quota_cost c = {.unit = "tokens", .amount = 3000};
    stg_quota_ticket t;
    int64_t w = -1;
    assert_int_equal(stg_quota_acquire_demand(q, H, route, &c, 1, 1, 0, &t, &w), STG_OK);
    /* Reserved: 7000 left while it is out. */
    assert_true(admits_tokens(q, 7000, 0));
    assert_false(admits_tokens(q, 7001, 0));
    /* The answer tells no count; its usage says 1000: 2000 come back. */
    stg_quota_set none;
    stg_quota_set_init(&none);
    stg_quota_cost used = {.unit = "tokens", .amount = 1000};
    assert_int_equal(stg_quota_settle_used(q, H, route, &t, &none, &used, 1, 1), STG_OK);
    assert_true(admits_tokens(q, 9000, 1));
    assert_false(admits_tokens(q, 9001, 1));
    /* A refusal (429 or 529) used nothing: all of it comes back. */
    assert_int_equal(stg_quota_acquire_demand(q, H, route, &c, 1, 1, 1, &t, &w), STG_OK);
    assert_false(admits_tokens(q, 6001, 1));
    used.amount = 0;
    assert_int_equal(stg_quota_settle_used(q, H, route, &t, &none, &used, 1, 2), STG_OK);
    assert_true(admits_tokens(q, 9000, 2));
    assert_false(admits_tokens(q, 9001, 2));
    /* Used more than reserved: the difference is spent too. */
    assert_int_equal(stg_quota_acquire_demand(q, H, route, &c, 1, 1, 2, &t, &w), STG_OK);
    used.amount = 4000;
    assert_int_equal(stg_quota_settle_used(q, H, route, &t, &none, &used, 1, 3), STG_OK);
    assert_true(admits_tokens(q, 5000, 3));
    assert_false(admits_tokens(q, 5001, 3));
    /* An answer that tells the count is the server's word, whatever the
     * usage says. */
    assert_int_equal(stg_quota_acquire_demand(q, H, route, &c, 1, 1, 3, &t, &w), STG_OK);
    stg_quota_set qs;
    set1(&qs, o);
    qs.q[0].remaining = 1500;
    used.amount = 0;
    assert_int_equal(stg_quota_settle_used(q, H, route, &t, &qs, &used, 1, 4), STG_OK);
    assert_true(admits_tokens(q, 1500, 4));
    assert_false(admits_tokens(q, 1501, 4));
    /* A send that never left: stg_quota_cancel gives it back. */
    c.amount = 1000;
    assert_int_equal(stg_quota_acquire_demand(q, H, route, &c, 1, 1, 4, &t, &w), STG_OK);
    assert_false(admits_tokens(q, 501, 4));
    assert_int_equal(stg_quota_cancel(q, H, &t), STG_OK);
    assert_true(admits_tokens(q, 1500, 4));
    /* Never more than the limit comes back. */
    learn(q, route, o, 5);
    assert_int_equal(stg_quota_acquire_demand(q, H, route, &c, 1, 1, 5, &t, &w), STG_OK);
    assert_int_equal(stg_quota_settle_used(q, H, route, &t, &none, &used, 1, 6), STG_OK);
    assert_false(admits_tokens(q, 10001, 6));
    assert_true(admits_tokens(q, 10000, 6));
    /* Bad input. */
    stg_quota_cost neg = {.unit = "tokens", .amount = -1};
    assert_int_equal(stg_quota_settle_used(q, H, route, NULL, &none, &neg, 1, 7), STG_EINVAL);
    assert_int_equal(stg_quota_settle_used(q, H, route, NULL, &none, NULL, 1, 7), STG_EINVAL);
    stg_quota_free(q);
}

/* The head of the first answer ends the cold start (a long body, an SSE
 * stream, does not hold the others), and its quotas pace the sends that
 * follow at once; the settle at the end of the body learns nothing again
 * (the head's count and reset are old by then) and does not end a cold
 * probe twice. */
static void test_head_ends_cold_start(void **state)
{
    (void)state;
    stg_quota *q = make(0);
    const char *route = "POST /v1/stream";
    stg_quota_ticket t1, t2, t3, t;
    int64_t w = -1;
    assert_int_equal(stg_quota_acquire(q, H, route, NULL, 0, 0, &t1, &w), STG_OK);
    assert_int_equal(expect_wait(q, route, 0), STG_MS(20));
    /* The head, 100 ms later: 2 requests left until a reset 10 s on. */
    stg_quota_set qs;
    set1(&qs, obs("", "requests", 10, 2, STG_SEC(10)));
    int64_t at = STG_MS(100);
    assert_int_equal(stg_quota_head(q, H, route, &t1, &qs, at), STG_OK);
    /* A head told twice is told once. */
    assert_int_equal(stg_quota_head(q, H, route, &t1, &qs, at), STG_OK);
    /* The stream is still going: two more go now, not a third. */
    assert_int_equal(stg_quota_acquire_demand(q, H, route, NULL, 0, 1, at, &t2, &w), STG_OK);
    assert_int_equal(stg_quota_acquire_demand(q, H, route, NULL, 0, 1, at, &t3, &w), STG_OK);
    assert_int_equal(stg_quota_acquire_demand(q, H, route, NULL, 0, 1, at, &t, &w), STG_EAGAIN);
    assert_int_equal(w, STG_SEC(10));
    /* They got no answer (spent, nothing in flight). */
    assert_int_equal(stg_quota_settle(q, H, route, &t2, NULL, STG_SEC(1)), STG_OK);
    assert_int_equal(stg_quota_settle(q, H, route, &t3, NULL, STG_SEC(1)), STG_OK);
    /* The stream ends 5 s later: its settle passes the same head again,
     * whose reset (10 s from now) is no news: the reset stays at 10.1 s. */
    assert_int_equal(stg_quota_settle(q, H, route, &t1, &qs, STG_SEC(5)), STG_OK);
    assert_int_equal(stg_quota_acquire_demand(q, H, route, NULL, 0, 1, STG_SEC(5), &t, &w),
                     STG_EAGAIN);
    assert_int_equal(w, at + STG_SEC(10) - STG_SEC(5));
    /* After the reset, one probe (the count is unknown), not the old 2. */
    int64_t after = at + STG_SEC(10);
    assert_int_equal(stg_quota_acquire_demand(q, H, route, NULL, 0, 1, after, &t, &w), STG_OK);
    assert_int_equal(stg_quota_acquire_demand(q, H, route, NULL, 0, 1, after, &t, &w),
                     STG_EAGAIN);
    stg_quota_free(q);

    /* One cold probe ended once: the head's host forgotten (one host kept)
     * and cold again, the old ticket's settle does not let a second probe
     * go beside the new one. */
    stg_quota_config c = {.max_hosts = 1};
    q = stg_quota_new(&c, NULL);
    assert_non_null(q);
    assert_int_equal(stg_quota_acquire(q, H, route, NULL, 0, 0, &t1, &w), STG_OK);
    stg_quota_set none;
    stg_quota_set_init(&none);
    assert_int_equal(stg_quota_head(q, H, route, &t1, &none, 1), STG_OK);
    assert_int_equal(stg_quota_acquire(q, "other.example", route, NULL, 0, 2, &t, &w), STG_OK);
    assert_int_equal(stg_quota_acquire(q, H, route, NULL, 0, 3, &t, &w), STG_OK); /* cold */
    expect_wait(q, route, 3);
    assert_int_equal(stg_quota_settle(q, H, route, &t1, &none, 4), STG_OK);
    expect_wait(q, route, 4);
    /* Bad input. */
    assert_int_equal(stg_quota_head(q, H, route, NULL, &none, 5), STG_EINVAL);
    assert_int_equal(stg_quota_head(NULL, H, route, &t, &none, 5), STG_EINVAL);
    assert_int_equal(stg_quota_head(q, NULL, route, &t, &none, 5), STG_EINVAL);
    stg_quota_free(q);
}

/* A token reservation across a head: a quota whose count the head tells
 * is settled at that count then (the server's word, this request in it:
 * not taken off a second time, nor refunded by the usage); one the head
 * does not tell stays reserved until the body's usage settles it. */
static void test_head_then_usage(void **state)
{
    (void)state;
    stg_quota *q = make(0);
    const char *route = "POST /v1/chat/completions";
    stg_quota_set qs;
    memset(&qs, 0, sizeof qs);
    qs.q[0] = obs("", "requests", 100, 100, STG_SEC(60));
    qs.q[1] = obs("", "tokens", 10000, 10000, STG_SEC(60));
    qs.n = 2;
    assert_int_equal(stg_quota_settle(q, H, route, NULL, &qs, 0), STG_OK);
    stg_quota_cost c = {.unit = "tokens", .amount = 3000};
    stg_quota_ticket t;
    int64_t w = -1;
    assert_int_equal(stg_quota_acquire_demand(q, H, route, &c, 1, 1, 0, &t, &w), STG_OK);
    assert_true(admits_tokens(q, 7000, 0));
    assert_false(admits_tokens(q, 7001, 0));
    /* The head tells 6000 tokens left (the server counted 4000). */
    qs.q[0].remaining = 99;
    qs.q[1].remaining = 6000;
    assert_int_equal(stg_quota_head(q, H, route, &t, &qs, 1), STG_OK);
    assert_true(admits_tokens(q, 6000, 1));
    assert_false(admits_tokens(q, 6001, 1));
    /* The body says 1000 were used: the head's count stands. */
    stg_quota_cost used = {.unit = "tokens", .amount = 1000};
    assert_int_equal(stg_quota_settle_used(q, H, route, &t, &qs, &used, 1, 2), STG_OK);
    assert_true(admits_tokens(q, 6000, 2));
    assert_false(admits_tokens(q, 6001, 2));

    /* A head that tells the requests only: the 3000 tokens stay reserved
     * while the body streams, and its usage (1000) gives 2000 back. */
    assert_int_equal(stg_quota_acquire_demand(q, H, route, &c, 1, 1, 3, &t, &w), STG_OK);
    assert_false(admits_tokens(q, 3001, 3));
    stg_quota_set head;
    set1(&head, obs("", "requests", 100, 98, STG_SEC(60)));
    assert_int_equal(stg_quota_head(q, H, route, &t, &head, 4), STG_OK);
    assert_true(admits_tokens(q, 3000, 4));
    assert_false(admits_tokens(q, 3001, 4));
    assert_int_equal(stg_quota_settle_used(q, H, route, &t, &head, &used, 1, 5), STG_OK);
    assert_true(admits_tokens(q, 5000, 5));
    assert_false(admits_tokens(q, 5001, 5));
    /* The same with no answer after the head (the stream was cut): the
     * reservation stays spent. */
    assert_int_equal(stg_quota_acquire_demand(q, H, route, &c, 1, 1, 6, &t, &w), STG_OK);
    assert_int_equal(stg_quota_head(q, H, route, &t, &head, 7), STG_OK);
    assert_int_equal(stg_quota_settle(q, H, route, &t, NULL, 8), STG_OK);
    assert_true(admits_tokens(q, 2000, 8));
    assert_false(admits_tokens(q, 2001, 8));
    stg_quota_free(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_cold_start),
        cmocka_unit_test(test_never_more_than_remaining),
        cmocka_unit_test(test_pacing_spreads),
        cmocka_unit_test(test_pacing_burst),
        cmocka_unit_test(test_pacing_demand),
        cmocka_unit_test(test_pace_ends_at_earliest_reset),
        cmocka_unit_test(test_pacing_last_window),
        cmocka_unit_test(test_pacing_late_phase),
        cmocka_unit_test(test_reset_earliest_bound),
        cmocka_unit_test(test_pace_ends_before_reset),
        cmocka_unit_test(test_late_answer_is_older),
        cmocka_unit_test(test_arrival_order_is_not_admission_order),
        cmocka_unit_test(test_arrival_order_no_reset),
        cmocka_unit_test(test_arrival_order_spent_no_reset),
        cmocka_unit_test(test_refilling_bucket),
        cmocka_unit_test(test_spent_without_reset),
        cmocka_unit_test(test_spent_idle_probes),
        cmocka_unit_test(test_reserve_settle),
        cmocka_unit_test(test_two_units),
        cmocka_unit_test(test_keys_and_fallback),
        cmocka_unit_test(test_route_ids),
        cmocka_unit_test(test_global_pause),
        cmocka_unit_test(test_each),
        cmocka_unit_test(test_tally),
        cmocka_unit_test(test_probe_and_dormant),
        cmocka_unit_test(test_window_left_out),
        cmocka_unit_test(test_caps),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_cost_parse),
        cmocka_unit_test(test_settle_used),
        cmocka_unit_test(test_head_ends_cold_start),
        cmocka_unit_test(test_head_then_usage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
