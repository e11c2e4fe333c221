/*
 * Unit tests of the token leases' pure part (src/redis/lease_size.c), in
 * virtual time: the admission meter (what rate it reads when, how it
 * decays) and the sizing rule (exact sizes and leads, the cap that keeps
 * a lease's window long enough to spend it, k = 1 at a low rate).
 */
#include <math.h>

#include "cmocka_all.h"

#include "redis/lease.h"

#define MS INT64_C(1000)
#define T2000 INT64_C(500000) /* ns per token at 2000/s */

static void test_size_off(void **state)
{
    (void)state;
    stg__lease_plan p = stg__lease_size(500, T2000, 100, 0, 0);
    assert_int_equal(p.k, 1);
    assert_int_equal(p.lead_ns, 0);
    /* burst 1: no window at all, a plain take */
    p = stg__lease_size(500, T2000, 1, 40 * MS, 0);
    assert_int_equal(p.k, 1);
    assert_int_equal(p.lead_ns, 0);
}

static void test_size_unknown_rate(void **state)
{
    (void)state;
    /* nothing measured yet: one token, placed the margin ahead (1 ms) */
    stg__lease_plan p = stg__lease_size(0, T2000, 100, 40 * MS, 0);
    assert_int_equal(p.k, 1);
    assert_int_equal(p.lead_ns, 1000000);
    /* the margin is twice the last round trip when that is longer */
    p = stg__lease_size(0, T2000, 100, 40 * MS, 3 * MS);
    assert_int_equal(p.lead_ns, 6000000);
    /* but never past the window one token has, (burst - 1) * T */
    p = stg__lease_size(0, T2000, 3, 40 * MS, 3 * MS);
    assert_int_equal(p.k, 1);
    assert_int_equal(p.lead_ns, 2 * T2000);
}

static void test_size_high_rate(void **state)
{
    (void)state;
    /* 500/s of a 2000/s key with burst 2000: 40 ms is 20 tokens, lead
     * 20 * 2 ms + 1 ms */
    stg__lease_plan p = stg__lease_size(500, T2000, 2000, 40 * MS, 100);
    assert_int_equal(p.k, 20);
    assert_int_equal(p.lead_ns, 41000000);
    /* burst 100 (50 ms of tokens): k (2 ms + 0.5 ms) <= 50 ms - 1 ms caps
     * it at 19, lead 39 ms; 39 + 19 * 0.5 <= 50 */
    p = stg__lease_size(500, T2000, 100, 40 * MS, 100);
    assert_int_equal(p.k, 19);
    assert_int_equal(p.lead_ns, 39000000);
    /* a fast process alone on the key: 2000/s for 40 ms is 80 tokens, but
     * the window of burst 100 only fits (50 - 1) / (0.5 + 0.5) = 49 */
    p = stg__lease_size(2000, T2000, 100, 40 * MS, 100);
    assert_int_equal(p.k, 49);
    assert_true(p.lead_ns + p.k * T2000 <= 100 * T2000);
}

static void test_size_low_rate(void **state)
{
    (void)state;
    /* 40/s: 1.6 tokens per 40 ms, no lease: one round trip each */
    stg__lease_plan p = stg__lease_size(40, T2000, 100, 40 * MS, 100);
    assert_int_equal(p.k, 1);
    assert_int_equal(p.lead_ns, 1000000);
    /* 50/s is the first rate with 2 */
    p = stg__lease_size(50, T2000, 100, 40 * MS, 100);
    assert_int_equal(p.k, 2);
    /* a burst too small for a lease to be spent in its window */
    p = stg__lease_size(500, T2000, 4, 40 * MS, 100);
    assert_int_equal(p.k, 1);
}

/* The invariant over a grid: 1 <= k <= burst, lead + k T <= burst T, and a
 * lease of k tokens at the rate it was sized from is spent within its lead
 * (k / rate <= lead): the window is long enough. */
static void test_size_invariant(void **state)
{
    (void)state;
    const double rates[] = {0.5, 3, 49, 50, 120, 499, 500, 1000, 5000, 1e5};
    const int64_t ts[] = {1000, 100000, T2000, 1000000, 1000000000};
    const int64_t bursts[] = {1, 2, 3, 10, 100, 2000, 100000};
    const int64_t leases[] = {0, 1, 10 * MS, 40 * MS, 1000 * MS};
    const int64_t rtts[] = {0, 50, 900, 20 * MS};
    for (size_t a = 0; a < sizeof rates / sizeof rates[0]; a++)
        for (size_t b = 0; b < sizeof ts / sizeof ts[0]; b++)
            for (size_t c = 0; c < sizeof bursts / sizeof bursts[0]; c++)
                for (size_t d = 0; d < sizeof leases / sizeof leases[0]; d++)
                    for (size_t e = 0; e < sizeof rtts / sizeof rtts[0]; e++) {
                        int64_t T = ts[b], B = bursts[c];
                        stg__lease_plan p = stg__lease_size(rates[a], T, B, leases[d], rtts[e]);
                        assert_true(p.k >= 1 && p.k <= (B < 1 ? 1 : B));
                        assert_true(p.lead_ns >= 0);
                        if (p.k == 1) {
                            assert_true(p.lead_ns <= (B - 1) * T || B < 2);
                        } else {
                            assert_true(p.lead_ns + p.k * T <= B * T);
                            assert_true((double)p.k / rates[a] * 1e9 <= (double)p.lead_ns);
                            assert_true((double)p.k <= rates[a] * (double)leases[d] / 1e6);
                        }
                        if (leases[d] == 0)
                            assert_true(p.k == 1 && p.lead_ns == 0);
                    }
}

static void test_meter_start(void **state)
{
    (void)state;
    stg__lease_meter m;
    stg__lease_meter_init(&m, 1000 * MS);
    assert_true(stg__lease_meter_rate(&m, 1000 * MS) == 0.0);
    /* one admission every 2 ms from t = 2 ms */
    for (int64_t t = 2; t <= 4; t += 2)
        stg__lease_meter_add(&m, 1000 * MS + t * MS, 1);
    /* less than 5 ms seen: not known yet */
    assert_true(stg__lease_meter_rate(&m, 1004 * MS) == 0.0);
    for (int64_t t = 6; t <= 10; t += 2)
        stg__lease_meter_add(&m, 1000 * MS + t * MS, 1);
    /* 5 in 10 ms: 4 gaps of 2 ms (at most 5 ms measured: counts as 10) */
    assert_true(fabs(stg__lease_meter_rate(&m, 1010 * MS) - 400.0) < 1e-9);
    /* two admissions say nothing yet */
    stg__lease_meter m2;
    stg__lease_meter_init(&m2, 0);
    stg__lease_meter_add(&m2, 0, 1);
    stg__lease_meter_add(&m2, 25 * MS, 1);
    assert_true(stg__lease_meter_rate(&m2, 25 * MS) == 0.0);
    stg__lease_meter_add(&m2, 50 * MS, 1);
    assert_true(fabs(stg__lease_meter_rate(&m2, 50 * MS) - 40.0) < 1e-9);
}

static void test_meter_windows(void **state)
{
    (void)state;
    stg__lease_meter m;
    stg__lease_meter_init(&m, 0);
    for (int64_t t = 2; t <= 98; t += 2)
        stg__lease_meter_add(&m, t * MS, 1); /* 49 in the first window */
    /* the window closes at 100 ms: 490/s */
    assert_true(fabs(stg__lease_meter_rate(&m, 100 * MS) - 490.0) < 1e-9);
    /* reading does not change it */
    assert_true(fabs(stg__lease_meter_rate(&m, 100 * MS) - 490.0) < 1e-9);
    /* idle: the window [100, 200) closes empty (245), then [200, 300)
     * halves again */
    assert_true(fabs(stg__lease_meter_rate(&m, 350 * MS) - 122.5) < 1e-9);
    /* a rise shows in the open window before it closes: 21 in 10 ms */
    stg__lease_meter_add(&m, 300 * MS, 0);
    for (int i = 0; i < 21; i++)
        stg__lease_meter_add(&m, 305 * MS, 1);
    assert_true(fabs(stg__lease_meter_rate(&m, 310 * MS) - 2000.0) < 1e-9);
    /* long idle: gone */
    assert_true(stg__lease_meter_rate(&m, 60000 * MS) == 0.0);
    stg__lease_meter_add(&m, 60000 * MS, 1);
    assert_true(stg__lease_meter_rate(&m, 60000 * MS) == 0.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_size_off),        cmocka_unit_test(test_size_unknown_rate),
        cmocka_unit_test(test_size_high_rate),  cmocka_unit_test(test_size_low_rate),
        cmocka_unit_test(test_size_invariant),  cmocka_unit_test(test_meter_start),
        cmocka_unit_test(test_meter_windows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
