/* Backoff strategies and the RNG: formulas, bounds, caps, overflow,
 * distribution and replay. */
#include <math.h>
#include <string.h>

#include "cmocka_all.h"
#include <stagger/backoff.h>

static stg_backoff_config cfg_of(stg_backoff_kind kind, int64_t base, double mult, int64_t cap)
{
    stg_backoff_config in = {.kind = kind, .base_us = base, .multiplier = mult, .cap_us = cap};
    stg_backoff_config out;
    assert_int_equal(stg_backoff_resolve(&in, &out), STG_OK);
    return out;
}

static void test_defaults(void **state)
{
    (void)state;
    stg_backoff_config zero = {0}, c;
    assert_int_equal(stg_backoff_resolve(&zero, &c), STG_OK);
    assert_int_equal(c.kind, STG_BACKOFF_FULL);
    assert_int_equal(c.base_us, STG_MS(500));
    assert_int_equal(c.cap_us, STG_SEC(30));
    assert_true(c.multiplier == 2.0);
    assert_true(c.jitter_lo == -0.2 && c.jitter_hi == 0.2);
    /* A base above the default cap gets a cap equal to the base. */
    stg_backoff_config big = {.base_us = STG_SEC(60)};
    assert_int_equal(stg_backoff_resolve(&big, &c), STG_OK);
    assert_int_equal(c.cap_us, STG_SEC(60));
}

static void test_invalid(void **state)
{
    (void)state;
    stg_backoff_config c, bad[] = {
        {.multiplier = 0.5},
        {.multiplier = NAN},
        {.multiplier = INFINITY},
        {.base_us = STG_SEC(2), .cap_us = STG_SEC(1)},
        {.base_us = -1},
        {.kind = (stg_backoff_kind)99},
        {.kind = STG_BACKOFF_PROPORTIONAL, .jitter_lo = 0.3, .jitter_hi = 0.1},
        {.kind = STG_BACKOFF_PROPORTIONAL, .jitter_lo = -1.5, .jitter_hi = 0.1},
        {.kind = STG_BACKOFF_PROPORTIONAL, .jitter_lo = NAN, .jitter_hi = 0.1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(stg_backoff_resolve(&bad[i], &c), STG_EINVAL);
}

static void test_raw_growth_and_cap(void **state)
{
    (void)state;
    stg_backoff_config c = cfg_of(STG_BACKOFF_EXPONENTIAL, STG_MS(100), 2.0, STG_SEC(1));
    assert_int_equal(stg_backoff_raw(&c, 0), STG_MS(100));
    assert_int_equal(stg_backoff_raw(&c, 1), STG_MS(200));
    assert_int_equal(stg_backoff_raw(&c, 3), STG_MS(800));
    assert_int_equal(stg_backoff_raw(&c, 4), STG_SEC(1));
    assert_int_equal(stg_backoff_raw(&c, 100), STG_SEC(1));
    assert_int_equal(stg_backoff_raw(&c, -3), STG_MS(100));
    c = cfg_of(STG_BACKOFF_EXPONENTIAL, STG_MS(100), 3.0, STG_SEC(100));
    assert_int_equal(stg_backoff_raw(&c, 2), STG_MS(900));
    c = cfg_of(STG_BACKOFF_FIXED, STG_MS(250), 2.0, STG_SEC(10));
    for (int n = 0; n < 50; n++)
        assert_int_equal(stg_backoff_raw(&c, n), STG_MS(250));
}

static void test_unjittered_draw_nothing(void **state)
{
    (void)state;
    stg_rng rng, before;
    stg_rng_seed(&rng, 7);
    before = rng;
    stg_backoff_config e = cfg_of(STG_BACKOFF_EXPONENTIAL, STG_MS(200), 2.0, STG_SEC(30));
    stg_backoff_config f = cfg_of(STG_BACKOFF_FIXED, STG_MS(200), 2.0, STG_SEC(30));
    for (int n = 0; n < 10; n++) {
        assert_int_equal(stg_backoff_delay(&e, n, 0, &rng), stg_backoff_raw(&e, n));
        assert_int_equal(stg_backoff_delay(&f, n, 0, &rng), STG_MS(200));
    }
    assert_memory_equal(&rng, &before, sizeof rng);
}

/* Every draw lies in the documented bounds, and the bounds reach both ends. */
static void check_bounds(stg_backoff_kind kind, int64_t lo_exp(int64_t raw, int64_t base),
                         int64_t hi_exp(int64_t raw, int64_t base))
{
    stg_backoff_config c = cfg_of(kind, STG_MS(100), 2.0, STG_SEC(5));
    stg_rng rng;
    stg_rng_seed(&rng, 42);
    for (int n = 0; n < 12; n++) {
        int64_t raw = stg_backoff_raw(&c, n), lo, hi;
        stg_backoff_bounds(&c, n, 0, &lo, &hi);
        assert_int_equal(lo, lo_exp(raw, c.base_us));
        assert_int_equal(hi, hi_exp(raw, c.base_us));
        int64_t mn = INT64_MAX, mx = INT64_MIN;
        for (int i = 0; i < 5000; i++) {
            int64_t w = stg_backoff_delay(&c, n, 0, &rng);
            assert_in_range_i64(w, lo, hi);
            mn = w < mn ? w : mn;
            mx = w > mx ? w : mx;
        }
        /* 5000 uniform draws come within 1% of each end. */
        assert_true(mn - lo <= (hi - lo) / 100 + 1);
        assert_true(hi - mx <= (hi - lo) / 100 + 1);
    }
}

static int64_t zero(int64_t raw, int64_t base) { (void)raw, (void)base; return 0; }
static int64_t same(int64_t raw, int64_t base) { (void)base; return raw; }
static int64_t half(int64_t raw, int64_t base) { (void)base; return raw / 2; }
static int64_t pct_lo(int64_t raw, int64_t base) { (void)base; return (int64_t)((double)raw * 0.8); }
static int64_t pct_hi(int64_t raw, int64_t base) { (void)base; return (int64_t)((double)raw * 1.2); }
static int64_t add_lo(int64_t raw, int64_t base) { return raw - base; }
static int64_t add_hi(int64_t raw, int64_t base) { return raw + base; }

static void test_full_bounds(void **s) { (void)s; check_bounds(STG_BACKOFF_FULL, zero, same); }
static void test_equal_bounds(void **s) { (void)s; check_bounds(STG_BACKOFF_EQUAL, half, same); }
static void test_pct_bounds(void **s) { (void)s; check_bounds(STG_BACKOFF_PROPORTIONAL, pct_lo, pct_hi); }
static void test_additive_bounds(void **s) { (void)s; check_bounds(STG_BACKOFF_ADDITIVE, add_lo, add_hi); }

static void test_pct_positive_only_and_past_cap(void **state)
{
    (void)state;
    stg_backoff_config in = {.kind = STG_BACKOFF_PROPORTIONAL, .base_us = STG_SEC(1),
                             .cap_us = STG_SEC(8), .jitter_lo = 0.0, .jitter_hi = 0.2};
    stg_backoff_config c;
    assert_int_equal(stg_backoff_resolve(&in, &c), STG_OK);
    stg_rng rng;
    stg_rng_seed(&rng, 3);
    int above_cap = 0;
    for (int i = 0; i < 2000; i++) {
        assert_in_range_i64(stg_backoff_delay(&c, 0, 0, &rng), STG_SEC(1), STG_MS(1200));
        int64_t w = stg_backoff_delay(&c, 20, 0, &rng); /* raw is the cap */
        assert_in_range_i64(w, STG_SEC(8), STG_MS(9600));
        above_cap += w > STG_SEC(8);
    }
    /* Jitter after the cap keeps clients spread instead of piling on 8 s. */
    assert_true(above_cap > 1900);
}

static void test_additive_clamps_at_zero(void **state)
{
    (void)state;
    /* multiplier 1: raw stays base, so raw - base = 0 is the floor. */
    stg_backoff_config c = cfg_of(STG_BACKOFF_ADDITIVE, STG_MS(100), 1.0, STG_SEC(1));
    stg_rng rng;
    stg_rng_seed(&rng, 9);
    for (int i = 0; i < 5000; i++)
        assert_in_range_i64(stg_backoff_delay(&c, 0, 0, &rng), 0, STG_MS(200));
}

static void test_decorrelated(void **state)
{
    (void)state;
    stg_backoff_config in = {.kind = STG_BACKOFF_DECORRELATED, .base_us = STG_SEC(1),
                             .cap_us = STG_SEC(60)};
    stg_rng rng;
    stg_rng_seed(&rng, 11);
    for (int run = 0; run < 200; run++) {
        stg_backoff b;
        assert_int_equal(stg_backoff_init(&b, &in), STG_OK);
        int64_t prev = STG_SEC(1); /* prev starts at base */
        bool reached_cap = false;
        for (int i = 0; i < 30; i++) {
            int64_t w = stg_backoff_next(&b, &rng);
            int64_t up = 3 * prev < STG_SEC(60) ? 3 * prev : STG_SEC(60);
            assert_in_range_i64(w, STG_SEC(1), up);
            reached_cap |= w == STG_SEC(60);
            prev = w;
        }
        (void)reached_cap;
    }
    /* min(cap, U(base, 3 prev)) puts the mass above the cap AT the cap:
     * with prev = 30 s, U(1 s, 90 s) exceeds 60 s about 30/89 of the time. */
    stg_backoff_config c;
    assert_int_equal(stg_backoff_resolve(&in, &c), STG_OK);
    int at_cap = 0;
    for (int i = 0; i < 10000; i++)
        at_cap += stg_backoff_delay(&c, 5, STG_SEC(30), &rng) == STG_SEC(60);
    assert_in_range_i64(at_cap, 3000, 3750);
}

static void test_no_overflow(void **state)
{
    (void)state;
    stg_backoff_kind kinds[] = {STG_BACKOFF_FIXED, STG_BACKOFF_EXPONENTIAL, STG_BACKOFF_FULL,
                                STG_BACKOFF_EQUAL, STG_BACKOFF_DECORRELATED,
                                STG_BACKOFF_PROPORTIONAL, STG_BACKOFF_ADDITIVE};
    int64_t caps[] = {STG_SEC(30), INT64_MAX - 1, INT64_MAX};
    stg_rng rng;
    stg_rng_seed(&rng, 5);
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        for (size_t ci = 0; ci < sizeof caps / sizeof caps[0]; ci++) {
            stg_backoff_config c = cfg_of(kinds[k], STG_SEC(1), 10.0, caps[ci]);
            for (int n = 9990; n <= 10000; n++) {
                int64_t lo, hi;
                stg_backoff_bounds(&c, n, INT64_MAX / 2, &lo, &hi);
                assert_true(lo >= 0 && lo <= hi);
                int64_t w = stg_backoff_delay(&c, n, INT64_MAX / 2, &rng);
                assert_true(w >= 0);
                if (kinds[k] != STG_BACKOFF_FIXED)
                    assert_int_equal(stg_backoff_raw(&c, n), caps[ci]);
            }
            /* The stateful form keeps counting without wrapping. */
            stg_backoff b = {.cfg = c, .n = INT32_MAX - 2, .prev_us = 0};
            for (int i = 0; i < 5; i++)
                assert_true(stg_backoff_next(&b, &rng) >= 0);
            assert_int_equal(b.n, INT32_MAX);
        }
    }
    /* Proportional +20% on a cap at INT64_MAX saturates instead of wrapping. */
    stg_backoff_config in = {.kind = STG_BACKOFF_PROPORTIONAL, .base_us = STG_SEC(1),
                             .cap_us = INT64_MAX, .jitter_lo = 0.1, .jitter_hi = 0.2};
    stg_backoff_config c;
    assert_int_equal(stg_backoff_resolve(&in, &c), STG_OK);
    int64_t lo, hi;
    stg_backoff_bounds(&c, 10000, 0, &lo, &hi);
    assert_true(lo == INT64_MAX && hi == INT64_MAX);
}

static void test_upper_bound_grows(void **state)
{
    (void)state;
    stg_backoff_config c = cfg_of(STG_BACKOFF_FULL, STG_MS(200), 2.0, STG_SEC(30));
    int64_t prev_hi = 0;
    for (int n = 0; n < 20; n++) {
        int64_t lo, hi;
        stg_backoff_bounds(&c, n, 0, &lo, &hi);
        assert_true(hi >= prev_hi);
        if (hi < STG_SEC(30))
            assert_int_equal(hi, STG_MS(200) << n);
        prev_hi = hi;
    }
    assert_int_equal(prev_hi, STG_SEC(30));
}

static void test_distribution(void **state)
{
    (void)state;
    stg_rng rng;
    stg_rng_seed(&rng, 2024);
    stg_backoff_config full = cfg_of(STG_BACKOFF_FULL, STG_MS(100), 2.0, STG_SEC(30));
    stg_backoff_config eq = cfg_of(STG_BACKOFF_EQUAL, STG_MS(100), 2.0, STG_SEC(30));
    const int N = 100000;
    double sum_full = 0, sum_eq = 0;
    int buckets[10] = {0};
    int64_t raw = stg_backoff_raw(&full, 4); /* 1.6 s */
    for (int i = 0; i < N; i++) {
        int64_t w = stg_backoff_delay(&full, 4, 0, &rng);
        sum_full += (double)w;
        buckets[w * 10 / (raw + 1)]++;
        sum_eq += (double)stg_backoff_delay(&eq, 4, 0, &rng);
    }
    double mean_full = sum_full / N, mean_eq = sum_eq / N;
    assert_true(fabs(mean_full - raw / 2.0) < 0.02 * (raw / 2.0));
    assert_true(fabs(mean_eq - raw * 0.75) < 0.02 * (raw * 0.75));
    /* Flat: every tenth of the window holds 10% +- 1%. */
    for (int b = 0; b < 10; b++)
        assert_in_range_i64(buckets[b], N / 10 - N / 100, N / 10 + N / 100);
}

static void test_replay(void **state)
{
    (void)state;
    stg_backoff_config in = {.kind = STG_BACKOFF_DECORRELATED, .base_us = STG_MS(100)};
    stg_backoff a, b;
    stg_rng ra, rb, rc;
    stg_rng_seed(&ra, 99);
    stg_rng_seed(&rb, 99);
    stg_rng_seed(&rc, 100);
    assert_int_equal(stg_backoff_init(&a, &in), STG_OK);
    assert_int_equal(stg_backoff_init(&b, &in), STG_OK);
    int differ = 0;
    stg_backoff c = a;
    for (int i = 0; i < 50; i++) {
        assert_int_equal(stg_backoff_next(&a, &ra), stg_backoff_next(&b, &rb));
        differ += stg_backoff_next(&c, &rc) != a.prev_us;
    }
    assert_true(differ > 40);
    stg_backoff_reset(&a);
    assert_int_equal(a.n, 0);
    assert_int_equal(a.prev_us, 0);
}

static void test_parse(void **state)
{
    (void)state;
    stg_backoff_config c = {0};
    assert_int_equal(stg_backoff_parse("fixed", &c), STG_OK);
    assert_int_equal(c.kind, STG_BACKOFF_FIXED);
    assert_int_equal(stg_backoff_parse("decorrelated", &c), STG_OK);
    assert_int_equal(c.kind, STG_BACKOFF_DECORRELATED);
    assert_int_equal(stg_backoff_parse("pct:-20:20", &c), STG_OK);
    assert_int_equal(c.kind, STG_BACKOFF_PROPORTIONAL);
    assert_true(fabs(c.jitter_lo + 0.2) < 1e-12 && fabs(c.jitter_hi - 0.2) < 1e-12);
    assert_int_equal(stg_backoff_parse("pct:0:20", &c), STG_OK);
    assert_true(c.jitter_lo == 0 && fabs(c.jitter_hi - 0.2) < 1e-12);
    assert_int_equal(stg_backoff_parse("pct:12.5:50", &c), STG_OK);
    assert_true(fabs(c.jitter_lo - 0.125) < 1e-12);
    const char *bad[] = {"", "ful", "pct:", "pct:20", "pct:20:10", "pct:-200:0",
                         "pct:a:b", "pct:1:2:3", "FULL", "pct:1e3:2e3"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(stg_backoff_parse(bad[i], &c), STG_EPARSE);
    assert_int_equal(stg_backoff_parse(NULL, &c), STG_EPARSE);
    for (int k = STG_BACKOFF_FIXED; k <= STG_BACKOFF_ADDITIVE; k++) {
        stg_backoff_config r = {0};
        if (k == STG_BACKOFF_PROPORTIONAL)
            continue;
        assert_int_equal(stg_backoff_parse(stg_backoff_kind_name((stg_backoff_kind)k), &r), STG_OK);
        assert_int_equal(r.kind, k);
    }
}

static void test_rng(void **state)
{
    (void)state;
    stg_rng a, b;
    stg_rng_seed(&a, 0);
    stg_rng_seed(&b, 0);
    uint64_t first = stg_rng_next(&a);
    assert_true(first != 0);
    assert_int_equal(first, stg_rng_next(&b));
    /* Inclusive bounds are both reached. */
    bool seen[7] = {false};
    for (int i = 0; i < 1000; i++) {
        int64_t v = stg_rng_range(&a, -3, 3);
        assert_in_range_i64(v, -3, 3);
        seen[v + 3] = true;
    }
    for (int i = 0; i < 7; i++)
        assert_true(seen[i]);
    assert_int_equal(stg_rng_range(&a, 5, 5), 5);
    assert_int_equal(stg_rng_range(&a, 9, 2), 9);
    int64_t full = stg_rng_range(&a, INT64_MIN, INT64_MAX);
    (void)full;
    for (int i = 0; i < 1000; i++) {
        double d = stg_rng_double(&a);
        assert_true(d >= 0.0 && d < 1.0);
    }
    double s = 0, s2 = 0;
    for (int i = 0; i < 100000; i++) {
        double z = stg_rng_normal(&a);
        s += z;
        s2 += z * z;
    }
    assert_true(fabs(s / 100000) < 0.02);
    assert_true(fabs(s2 / 100000 - 1.0) < 0.03);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_raw_growth_and_cap),
        cmocka_unit_test(test_unjittered_draw_nothing),
        cmocka_unit_test(test_full_bounds),
        cmocka_unit_test(test_equal_bounds),
        cmocka_unit_test(test_pct_bounds),
        cmocka_unit_test(test_additive_bounds),
        cmocka_unit_test(test_pct_positive_only_and_past_cap),
        cmocka_unit_test(test_additive_clamps_at_zero),
        cmocka_unit_test(test_decorrelated),
        cmocka_unit_test(test_no_overflow),
        cmocka_unit_test(test_upper_bound_grows),
        cmocka_unit_test(test_distribution),
        cmocka_unit_test(test_replay),
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_rng),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
