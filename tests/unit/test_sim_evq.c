/* The simulator's building blocks: the calendar event queue against a
 * sorted reference (near, same-slice, far and simultaneous events, replace
 * and pop), the sliding-window maximum (offline and online), percentiles,
 * bins, trial statistics and the network delay model. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cmocka_all.h"
#include "sim/evq.h"
#include "sim/metrics.h"
#include "sim/net.h"

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void test_key_layout(void **state)
{
    (void)state;
    sim_ev e = sim_ev_make(123456, 77);
    assert_int_equal(sim_ev_time(e), 123456);
    assert_int_equal(sim_ev_who(e), 77);
    /* equal times order by who; earlier time wins over any who */
    assert_true(sim_ev_make(5, 1) < sim_ev_make(5, 2));
    assert_true(sim_ev_make(5, SIM_EVQ_WHO_MAX) < sim_ev_make(6, 0));
    /* clamped, never wrapped */
    assert_int_equal(sim_ev_time(sim_ev_make(-5, 0)), 0);
    assert_int_equal(sim_ev_time(sim_ev_make(INT64_MAX, 0)), SIM_EVQ_TMAX);
}

static void test_empty(void **state)
{
    (void)state;
    sim_evq q;
    assert_int_equal(sim_evq_init(&q, 4, 1000), 0);
    sim_ev e;
    assert_true(sim_evq_empty(&q));
    assert_false(sim_evq_peek(&q, &e));
    sim_evq_free(&q);
    sim_evq_free(&q); /* twice is fine */
}

/* Push random events (some in the current slice, some in the ring, some
 * beyond it, many simultaneous), pop everything: the order must be the
 * sorted order of the keys. */
static void test_order_matches_sort(void **state)
{
    (void)state;
    enum { N = 20000 };
    sim_evq q;
    assert_int_equal(sim_evq_init(&q, 16, 1000), 0);
    uint64_t *ref = malloc(N * sizeof *ref);
    assert_non_null(ref);
    stg_rng rng;
    stg_rng_seed(&rng, 7);
    for (int i = 0; i < N; i++) {
        int64_t t;
        switch (i % 4) {
        case 0: t = stg_rng_range(&rng, 0, 2000); break;          /* first slices */
        case 1: t = stg_rng_range(&rng, 0, STG_SEC(3)); break;    /* the ring */
        case 2: t = stg_rng_range(&rng, 0, STG_SEC(60)); break;   /* far */
        default: t = 1000 * stg_rng_range(&rng, 0, 50); break;    /* ties */
        }
        uint32_t who = (uint32_t)stg_rng_range(&rng, 0, 1000000);
        ref[i] = sim_ev_make(t, who);
        assert_int_equal(sim_evq_push(&q, t, who), 0);
    }
    qsort(ref, N, sizeof *ref, cmp_u64);
    sim_ev e;
    for (int i = 0; i < N; i++) {
        assert_true(sim_evq_peek(&q, &e));
        if (e != ref[i])
            fail_msg("event %d: got t=%lld who=%u, want t=%lld who=%u", i,
                     (long long)sim_ev_time(e), sim_ev_who(e), (long long)sim_ev_time(ref[i]),
                     sim_ev_who(ref[i]));
        sim_evq_pop(&q);
    }
    assert_false(sim_evq_peek(&q, &e));
    assert_false(q.oom);
    free(ref);
    sim_evq_free(&q);
}

/* A simulation-like workload: each popped event schedules the same `who`
 * again later (by replace_top) a random delay ahead, sometimes 0 (into the
 * current slice), sometimes far. Check that times never go backwards and
 * that equal times come out by who. */
static void test_replace_monotone(void **state)
{
    (void)state;
    enum { CLIENTS = 3000, STEPS = 60000 };
    sim_evq q;
    assert_int_equal(sim_evq_init(&q, CLIENTS, 0), 0);
    stg_rng rng;
    stg_rng_seed(&rng, 11);
    for (uint32_t i = 0; i < CLIENTS; i++)
        assert_int_equal(sim_evq_push(&q, stg_rng_range(&rng, 0, 5000), i), 0);
    sim_ev e, last = 0;
    int steps = 0;
    while (sim_evq_peek(&q, &e)) {
        if (e < last)
            fail_msg("step %d: key went back", steps);
        last = e;
        int64_t t = sim_ev_time(e);
        if (++steps > STEPS) {
            sim_evq_pop(&q);
            continue;
        }
        int64_t d;
        switch (steps % 5) {
        case 0: d = 0; break;
        case 1: d = stg_rng_range(&rng, 0, 999); break;
        case 2: d = stg_rng_range(&rng, 0, STG_SEC(1)); break;
        case 3: d = stg_rng_range(&rng, STG_SEC(4), STG_SEC(40)); break;
        default: d = 200000; break;
        }
        assert_int_equal(sim_evq_replace_top(&q, t + d, sim_ev_who(e)), 0);
    }
    assert_true(steps > STEPS);
    assert_true(sim_evq_empty(&q));
    sim_evq_free(&q);
}

static void test_window_offline(void **state)
{
    (void)state;
    const int64_t t[] = {0, 5, 9, 10, 19, 20, 21, 22, 100};
    size_t n = sizeof t / sizeof t[0];
    /* [10, 20) holds 10 and 19; [19, 29) holds 19..22: 4 */
    assert_int_equal(sim_max_in_window(t, n, 10, INT64_MIN), 4);
    /* width 1: the most equal instants */
    assert_int_equal(sim_max_in_window(t, n, 1, INT64_MIN), 1);
    assert_int_equal(sim_max_in_window(t, n, 1000, INT64_MIN), 9);
    /* counting from t = 21 */
    assert_int_equal(sim_max_in_window(t, n, 10, 21), 2);
    assert_int_equal(sim_max_in_window(t, 0, 10, INT64_MIN), 0);
    const int64_t same[] = {7, 7, 7};
    assert_int_equal(sim_max_in_window(same, 3, 1, INT64_MIN), 3);
}

static void test_window_online_matches(void **state)
{
    (void)state;
    enum { N = 5000 };
    int64_t *t = malloc(N * sizeof *t);
    assert_non_null(t);
    stg_rng rng;
    stg_rng_seed(&rng, 3);
    int64_t x = 0;
    for (int i = 0; i < N; i++) {
        x += stg_rng_range(&rng, 0, 40);
        t[i] = x;
    }
    for (int64_t w = 1; w <= 4096; w *= 4) {
        sim_window win;
        assert_int_equal(sim_window_init(&win, w, 2), 0);
        for (int i = 0; i < N; i++)
            assert_int_equal(sim_window_add(&win, t[i]), 0);
        assert_int_equal(win.best, sim_max_in_window(t, N, w, INT64_MIN));
        sim_window_free(&win);
    }
    free(t);
}

static void test_percentile_bins_stats(void **state)
{
    (void)state;
    int64_t v[100];
    for (int i = 0; i < 100; i++)
        v[i] = 100 - i; /* 100..1 */
    assert_int_equal(sim_percentile(v, 100, 99), 99);
    assert_int_equal(sim_percentile(v, 100, 50), 50);
    assert_int_equal(sim_percentile(v, 100, 100), 100);
    int64_t one = 42;
    assert_int_equal(sim_percentile(&one, 1, 99), 42);
    assert_int_equal(sim_percentile(NULL, 0, 99), 0);

    const int64_t t[] = {0, 9, 10, 35};
    size_t nb;
    uint32_t *b = sim_bin(t, 4, 10, &nb);
    assert_non_null(b);
    assert_int_equal(nb, 4);
    assert_int_equal(b[0], 2);
    assert_int_equal(b[1], 1);
    assert_int_equal(b[2], 0);
    assert_int_equal(b[3], 1);
    free(b);

    sim_bins bins;
    assert_int_equal(sim_bins_init(&bins, 10, 1), 0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(sim_bins_add(&bins, t[i]), 0);
    assert_int_equal(bins.n, 4);
    assert_int_equal(bins.b[0], 2);
    assert_int_equal(bins.b[3], 1);
    sim_bins_free(&bins);

    sim_stat s = {0};
    sim_stat_add(&s, 2);
    sim_stat_add(&s, 4);
    sim_stat_add(&s, 4);
    sim_stat_add(&s, 4);
    sim_stat_add(&s, 5);
    sim_stat_add(&s, 5);
    sim_stat_add(&s, 7);
    sim_stat_add(&s, 9);
    assert_true(sim_stat_mean(&s) == 5.0);
    assert_in_range_i64((int64_t)(sim_stat_sd(&s) * 1000), 2137, 2139); /* sqrt(32/7) */
    assert_true(s.min == 2 && s.max == 9);
}

static void test_net_legs(void **state)
{
    (void)state;
    sim_delay d = {STG_MS(10), 0};
    sim_net n;
    sim_net_init(&n, &d, 1);
    assert_int_equal(sim_net_leg(&n), STG_MS(10)); /* constant: no draw */

    d.sd_us = STG_MS(2);
    sim_net_init(&n, &d, 1);
    double sum = 0, sumsq = 0;
    enum { N = 20000 };
    for (int i = 0; i < N; i++) {
        int64_t x = sim_net_leg(&n);
        assert_true(x >= 0);
        sum += (double)x;
        sumsq += (double)x * (double)x;
    }
    double mean = sum / N, sd = (sumsq / N - mean * mean);
    assert_in_range_i64((int64_t)mean, 9900, 10100);
    assert_in_range_i64((int64_t)(sd > 0 ? sqrt(sd) : 0), 1900, 2100);

    /* same seed, same legs */
    sim_net a, b;
    sim_net_init(&a, &d, 99);
    sim_net_init(&b, &d, 99);
    for (int i = 0; i < 100; i++)
        assert_int_equal(sim_net_leg(&a), sim_net_leg(&b));
    /* |N|: a huge sd still gives legs >= 0 */
    d = (sim_delay){1000, 100000};
    sim_net_init(&a, &d, 5);
    for (int i = 0; i < 1000; i++)
        assert_true(sim_net_leg(&a) >= 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_layout),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_order_matches_sort),
        cmocka_unit_test(test_replace_monotone),
        cmocka_unit_test(test_window_offline),
        cmocka_unit_test(test_window_online_matches),
        cmocka_unit_test(test_percentile_bins_stats),
        cmocka_unit_test(test_net_legs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
