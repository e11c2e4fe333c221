/*
 * Unit tests of the shared quotas' pure part (src/redis/quota_local.c), in
 * virtual time: a replica's estimate (projected by a refilling bucket's
 * refill, capped at the limit; an answer's count only lowers it; units
 * spent without a count come off it), the fallback rule while Redis is
 * unreachable (share of the estimate less the replica's own units in
 * flight; the wait until the refill covers a request, the reset, or a
 * poll), and the ids the ledger is keyed by.
 */
#include <string.h>

#include "cmocka_all.h"

#include "redis/quota_local.h"

#define MS INT64_C(1000)

static stg__sq_est bucket(double est, double per_ms, int64_t limit)
{
    stg__sq_est e = {.est = est, .rate_ms = per_ms, .at = 0, .limit = limit, .fill = true};
    return e;
}

static void test_est_refills_to_limit(void **state)
{
    (void)state;
    stg__sq_est e = bucket(100, 1.0, 3000); /* 1000 tokens/s */
    assert_true(stg__sq_est_now(&e, 0) == 100);
    assert_true(stg__sq_est_now(&e, 500 * MS) == 600);
    assert_true(stg__sq_est_now(&e, 10000 * MS) == 3000); /* full, never above */
    /* A window's count (no refill) stays until its reset. */
    e.fill = false;
    assert_true(stg__sq_est_now(&e, 500 * MS) == 100);
    e.est = -1;
    assert_true(stg__sq_est_now(&e, 500 * MS) < 0);
}

static void test_est_learn_only_lowers(void **state)
{
    (void)state;
    stg__sq_est e = bucket(1000, 1.0, 3000);
    /* A higher count is older news: kept at the projection. */
    stg__sq_est_learn(&e, 2000, 0, 100 * MS);
    assert_true(e.est == 1100);
    assert_int_equal(e.at, 100 * MS);
    /* A lower one wins; what was spent without a count comes off. */
    stg__sq_est_learn(&e, 700, 0, 100 * MS);
    assert_true(e.est == 700);
    stg__sq_est_learn(&e, -1, 300, 100 * MS);
    assert_true(e.est == 400);
    stg__sq_est_learn(&e, -1, 5000, 100 * MS);
    assert_true(e.est == 0); /* never below 0 */
    /* An unknown estimate takes the first count. */
    e.est = -1;
    stg__sq_est_learn(&e, 250, 0, 200 * MS);
    assert_true(e.est == 250);
}

static void test_fallback_share(void **state)
{
    (void)state;
    stg__sq_est e = bucket(1000, 1.0, 3000);
    /* Half of 1000, 300 of it in flight: 200 fits, 201 does not. */
    assert_int_equal(stg__sq_fallback_wait(&e, 0.5, 300, 200, -1, 25 * MS, 0), 0);
    int64_t w = stg__sq_fallback_wait(&e, 0.5, 300, 201, -1, 25 * MS, 0);
    /* One token short at half the refill (0.5/ms): 2 ms. */
    assert_true(w > 0 && w <= 2 * MS + 1);
    assert_int_equal(stg__sq_fallback_wait(&e, 0.5, 300, 201, -1, 25 * MS, w), 0);
    /* A window's count waits for its reset; with none told, a poll. */
    e.fill = false;
    assert_int_equal(stg__sq_fallback_wait(&e, 0.5, 300, 201, 4000, 25 * MS, 0), 4000 * MS);
    assert_int_equal(stg__sq_fallback_wait(&e, 0.5, 300, 201, -1, 25 * MS, 0), 25 * MS);
    /* Unknown: one probe, not two. */
    e.est = -1;
    assert_int_equal(stg__sq_fallback_wait(&e, 0.5, 0, 10, -1, 25 * MS, 0), 0);
    assert_int_equal(stg__sq_fallback_wait(&e, 0.5, 10, 10, -1, 25 * MS, 0), 25 * MS);
}

static void test_ids(void **state)
{
    (void)state;
    stg_quota_obs o;
    memset(&o, 0, sizeof o);
    strcpy(o.key, "search");
    strcpy(o.unit, "requests");
    o.window_us = 60 * 1000 * MS;
    char id[STG__SQ_ID_MAX], key[STG__SQ_ID_MAX];
    stg__sq_id(&o, id);
    assert_string_equal(id, "search|requests|60000");
    stg__sq_skey(id, key);
    assert_string_equal(key, "search");
    /* The host's own quota, no window known. */
    o.key[0] = '\0';
    strcpy(o.unit, "tokens");
    o.window_us = STG_UNKNOWN;
    stg__sq_id(&o, id);
    assert_string_equal(id, "|tokens|-");
    stg__sq_skey(id, key);
    assert_string_equal(key, "");
    /* A key holding '|' and control bytes (the ledger's separators). */
    strcpy(o.key, "a|b\n\001c");
    stg__sq_id(&o, id);
    assert_string_equal(id, "a|b__c|tokens|-");
    stg__sq_skey(id, key);
    assert_string_equal(key, "a|b__c");
    stg__sq_skey("nobar", key);
    assert_string_equal(key, "");
    assert_true(stg__sq_fills(STG_DIALECT_OPENAI));
    assert_true(stg__sq_fills(STG_DIALECT_ANTHROPIC));
    assert_false(stg__sq_fills(STG_DIALECT_GITHUB));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_est_refills_to_limit),
        cmocka_unit_test(test_est_learn_only_lowers),
        cmocka_unit_test(test_fallback_share),
        cmocka_unit_test(test_ids),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
