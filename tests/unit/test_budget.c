/*
 * Unit tests of the retry budget (gRPC A6 throttling). Token values are
 * compared in milli-tokens, the budget's own fixed point, so every expected
 * value is exact.
 */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stagger/budget.h>

static int64_t milli(const stg_budget *b)
{
    return (int64_t)llround(stg_budget_tokens(b) * 1000.0);
}

static stg_budget make(double max_tokens, double ratio)
{
    stg_budget b;
    stg_budget_config cfg = {.max_tokens = max_tokens, .token_ratio = ratio};
    assert_int_equal(stg_budget_init(&b, &cfg), STG_OK);
    return b;
}

static void test_defaults(void **state)
{
    (void)state;
    stg_budget b;
    stg_budget_config zero = {0};
    assert_int_equal(stg_budget_init(&b, &zero), STG_OK);
    assert_int_equal(milli(&b), 10000);
    assert_true(stg_budget_allow_retry(&b));
    stg_budget_on_success(&b);
    stg_budget_on_failure(&b);
    assert_int_equal(milli(&b), 9000); /* success at full is capped */

    assert_int_equal(stg_budget_init(&b, NULL), STG_OK);
    assert_int_equal(milli(&b), 10000);
    stg_budget_on_failure(&b);
    stg_budget_on_success(&b);
    assert_int_equal(milli(&b), 9100); /* ratio defaults to 0.1 */
}

static void test_invalid(void **state)
{
    (void)state;
    stg_budget b;
    const stg_budget_config bad[] = {
        {.max_tokens = -1},
        {.max_tokens = NAN},
        {.max_tokens = INFINITY},
        {.max_tokens = 2e6},
        {.max_tokens = 0.0001}, /* rounds to 0 */
        {.token_ratio = -0.1},
        {.token_ratio = 0.0001},
        {.token_ratio = NAN},
        {.max_tokens = 1, .token_ratio = 2},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(stg_budget_init(&b, &bad[i]), STG_EINVAL);
    assert_int_equal(stg_budget_init(NULL, NULL), STG_EINVAL);
}

/* 1 failure per 20 attempts (5%): each cycle returns to the cap. */
static void test_steady_5_percent(void **state)
{
    (void)state;
    stg_budget b = make(10, 0.1);
    for (int cycle = 0; cycle < 1000; cycle++) {
        stg_budget_on_failure(&b);
        assert_int_equal(milli(&b), 9000);
        assert_true(stg_budget_allow_retry(&b));
        for (int i = 0; i < 19; i++)
            stg_budget_on_success(&b);
        assert_int_equal(milli(&b), 10000);
    }
}

/* 1 failure per 11 attempts (1/11 = 9.09%, 1 failure per 10 successes) is
 * the break-even rate of ratio 0.1: the count never drifts. */
static void test_steady_break_even(void **state)
{
    (void)state;
    stg_budget b = make(10, 0.1);
    for (int cycle = 0; cycle < 1000; cycle++) {
        stg_budget_on_failure(&b);
        assert_int_equal(milli(&b), 9000);
        assert_true(stg_budget_allow_retry(&b));
        for (int i = 0; i < 10; i++)
            stg_budget_on_success(&b);
        assert_int_equal(milli(&b), 10000);
    }
}

/* Exactly 10% of attempts failing (1 failure + 9 successes) is just above
 * break-even: the count loses 0.1 per cycle, reaches the threshold after 50
 * cycles and retries stop. */
static void test_steady_10_percent_drains(void **state)
{
    (void)state;
    stg_budget b = make(10, 0.1);
    for (int cycle = 1; cycle <= 50; cycle++) {
        stg_budget_on_failure(&b);
        for (int i = 0; i < 9; i++)
            stg_budget_on_success(&b);
        assert_int_equal(milli(&b), 10000 - 100 * cycle);
        assert_int_equal(stg_budget_allow_retry(&b), cycle < 50);
    }
    assert_int_equal(milli(&b), 5000);
}

/* A dead downstream: every attempt fails. Count the retries that 100
 * requests get in a row, each retrying while the budget allows. */
static int retries_against_dead_host(stg_budget *b, int requests)
{
    int retries = 0;
    for (int r = 0; r < requests; r++) {
        stg_budget_on_failure(b); /* first attempt fails */
        while (stg_budget_allow_retry(b)) {
            retries++;
            stg_budget_on_failure(b); /* the retry fails too */
        }
    }
    return retries;
}

static void test_fully_down(void **state)
{
    (void)state;
    stg_budget b = make(10, 0.1);
    /* Tokens 9, 8, 7, 6 each allow one retry; 5 is not above 10/2. */
    assert_int_equal(retries_against_dead_host(&b, 100), 4);
    assert_int_equal(milli(&b), 0);
    assert_false(stg_budget_allow_retry(&b));

    stg_budget big = make(100, 0.1);
    assert_int_equal(retries_against_dead_host(&big, 1000), 49);
    assert_int_equal(milli(&big), 0);
}

static void test_recovery(void **state)
{
    (void)state;
    stg_budget b = make(10, 0.1);
    for (int i = 0; i < 30; i++)
        stg_budget_on_failure(&b);
    assert_int_equal(milli(&b), 0); /* floored, not negative */

    /* From empty: 50 successes reach exactly 5.0, still not above half;
     * the 51st allows retries again. */
    for (int i = 1; i <= 50; i++) {
        stg_budget_on_success(&b);
        assert_int_equal(milli(&b), 100 * i);
        assert_false(stg_budget_allow_retry(&b));
    }
    stg_budget_on_success(&b);
    assert_int_equal(milli(&b), 5100);
    assert_true(stg_budget_allow_retry(&b));

    /* One failure takes it back under; from 4.1 it takes 10 successes. */
    stg_budget_on_failure(&b);
    assert_int_equal(milli(&b), 4100);
    for (int i = 0; i < 9; i++)
        stg_budget_on_success(&b);
    assert_int_equal(milli(&b), 5000);
    assert_false(stg_budget_allow_retry(&b));
    stg_budget_on_success(&b);
    assert_true(stg_budget_allow_retry(&b));
}

static void test_cap_and_floor(void **state)
{
    (void)state;
    stg_budget b = make(10, 0.1);
    for (int i = 0; i < 1000; i++)
        stg_budget_on_success(&b);
    assert_int_equal(milli(&b), 10000);
    stg_budget_on_failure(&b);
    for (int i = 0; i < 20; i++)
        stg_budget_on_success(&b);
    assert_int_equal(milli(&b), 10000); /* 9 + 2.0 capped, not 11 */

    for (int i = 0; i < 1000; i++)
        stg_budget_on_failure(&b);
    assert_int_equal(milli(&b), 0);
    stg_budget_on_success(&b);
    assert_int_equal(milli(&b), 100);

    /* A failure from below 1 token floors at 0. */
    stg_budget_on_failure(&b);
    assert_int_equal(milli(&b), 0);
}

/* Fractional settings, and an odd milli maximum: the threshold is 1.5. */
static void test_fractional(void **state)
{
    (void)state;
    stg_budget b = make(3, 0.25);
    stg_budget_on_failure(&b);
    assert_int_equal(milli(&b), 2000);
    assert_true(stg_budget_allow_retry(&b));
    stg_budget_on_failure(&b);
    assert_false(stg_budget_allow_retry(&b));
    stg_budget_on_success(&b);
    stg_budget_on_success(&b);
    assert_int_equal(milli(&b), 1500);
    assert_false(stg_budget_allow_retry(&b)); /* 1.5 is not above 1.5 */
    stg_budget_on_success(&b);
    assert_true(stg_budget_allow_retry(&b));

    stg_budget odd = make(0.003, 0.001); /* threshold 1.5 milli */
    stg_budget_on_failure(&odd);
    assert_int_equal(milli(&odd), 0);
    stg_budget_on_success(&odd);
    assert_false(stg_budget_allow_retry(&odd));
    stg_budget_on_success(&odd);
    assert_true(stg_budget_allow_retry(&odd)); /* 2 milli > 1.5 */
}

/* ---- concurrency ------------------------------------------------------- */

#define ROUNDS 200000

typedef struct worker {
    stg_budget *b;
    int mode; /* 0: failure + 10 successes; 1: failures only; 2: successes only */
    int64_t lo, hi; /* extremes seen */
} worker;

static void *run_worker(void *arg)
{
    worker *w = arg;
    w->lo = INT64_MAX;
    w->hi = INT64_MIN;
    for (int i = 0; i < ROUNDS; i++) {
        switch (w->mode) {
        case 0:
            stg_budget_on_failure(w->b);
            for (int k = 0; k < 10; k++)
                stg_budget_on_success(w->b);
            break;
        case 1:
            stg_budget_on_failure(w->b);
            break;
        default:
            stg_budget_on_success(w->b);
            break;
        }
        int64_t m = milli(w->b);
        (void)stg_budget_allow_retry(w->b);
        if (m < w->lo)
            w->lo = m;
        if (m > w->hi)
            w->hi = m;
    }
    return NULL;
}

static void run_pair(stg_budget *b, int mode_a, int mode_b, worker out[2])
{
    pthread_t t[2];
    out[0] = (worker){.b = b, .mode = mode_a};
    out[1] = (worker){.b = b, .mode = mode_b};
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, run_worker, &out[i]), 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
}

static void test_concurrent(void **state)
{
    (void)state;
    worker w[2];

    /* Each thread pays a failure before its 10 refunds, so the count stays
     * in [8, 10] and never touches a bound: a lost update would show as a
     * final count other than exactly 10. */
    stg_budget b = make(10, 0.1);
    run_pair(&b, 0, 0, w);
    assert_int_equal(milli(&b), 10000);
    for (int i = 0; i < 2; i++) {
        assert_true(w[i].lo >= 8000);
        assert_true(w[i].hi <= 10000);
    }

    /* One thread drains, the other refills: both bounds are hit all the
     * time, and every value observed stays inside [0, max]. */
    stg_budget c = make(10, 0.1);
    run_pair(&c, 1, 2, w);
    for (int i = 0; i < 2; i++) {
        assert_true(w[i].lo >= 0);
        assert_true(w[i].hi <= 10000);
    }
    assert_true(milli(&c) >= 0 && milli(&c) <= 10000);
}

/* A throttle costs half a token by default (budget.h): a host answering
 * only 429s shuts retries off after 10 of them, not 5; a limit refusing 1
 * call in 7 (below 1 in 6) never drains the budget, where faults at that
 * share do. throttle_cost is configurable, < 0 is free, and the default
 * never exceeds a small budget. */
static void test_throttle_cost(void **state)
{
    (void)state;
    stg_budget b = make(0, 0);
    for (int i = 0; i < 9; i++) {
        stg_budget_on_throttle(&b);
        assert_true(stg_budget_allow_retry(&b));
    }
    stg_budget_on_throttle(&b);
    assert_int_equal(milli(&b), 5000);
    assert_false(stg_budget_allow_retry(&b));

    stg_budget t = make(0, 0), f = make(0, 0);
    for (int i = 0; i < 700; i++) {
        if (i % 7 == 0) {
            stg_budget_on_throttle(&t);
            stg_budget_on_failure(&f);
        } else {
            stg_budget_on_success(&t);
            stg_budget_on_success(&f);
        }
    }
    assert_true(stg_budget_allow_retry(&t));
    assert_int_equal(milli(&t), 10000);
    assert_false(stg_budget_allow_retry(&f));

    stg_budget_config cfg = {.throttle_cost = 2.0};
    assert_int_equal(stg_budget_init(&b, &cfg), STG_OK);
    stg_budget_on_throttle(&b);
    assert_int_equal(milli(&b), 8000);
    cfg.throttle_cost = -1.0;
    assert_int_equal(stg_budget_init(&b, &cfg), STG_OK);
    stg_budget_on_throttle(&b);
    assert_int_equal(milli(&b), 10000);
    cfg.throttle_cost = 11.0;
    assert_int_equal(stg_budget_init(&b, &cfg), STG_EINVAL);
    cfg.throttle_cost = NAN;
    assert_int_equal(stg_budget_init(&b, &cfg), STG_EINVAL);
    stg_budget small = make(0.3, 0.1);
    stg_budget_on_throttle(&small);
    assert_int_equal(milli(&small), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_steady_5_percent),
        cmocka_unit_test(test_steady_break_even),
        cmocka_unit_test(test_steady_10_percent_drains),
        cmocka_unit_test(test_fully_down),
        cmocka_unit_test(test_recovery),
        cmocka_unit_test(test_cap_and_floor),
        cmocka_unit_test(test_fractional),
        cmocka_unit_test(test_concurrent),
        cmocka_unit_test(test_throttle_cost),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
