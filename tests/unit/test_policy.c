/* The retry decision: every status class, method, transport error, hint and
 * Retry-After mode, deadline and attempt edge; presets; status sets. */
#include <math.h>
#include <string.h>

#include "cmocka_all.h"
#include <stagger/policy.h>

static stg_rng rng;

static int setup(void **state)
{
    (void)state;
    stg_rng_seed(&rng, 1234);
    return 0;
}

static stg_decision decide(const stg_policy *p, int attempts, int64_t elapsed, int status,
                           stg_net_error err, stg_method m, bool key, const stg_hints *h)
{
    stg_retry_state st = {.attempts = attempts, .start_us = STG_SEC(1000)};
    stg_outcome o = {.status = status, .error = err, .method = m, .has_idempotency_key = key,
                     .hints = h};
    stg_decision d;
    assert_int_equal(stg_decide(p, &st, &o, STG_SEC(1000) + elapsed, &rng, &d), STG_OK);
    return d;
}

static stg_hints retry_after(int64_t us)
{
    stg_hints h;
    stg_hints_init(&h);
    h.retry_after_us = us;
    h.seen = STG_HINT_RETRY_AFTER;
    return h;
}

static void test_statuses(void **state)
{
    (void)state;
    stg_policy p = {0};
    static const struct {
        int status;
        stg_action action;
        stg_reason reason;
    } cases[] = {
        {100, STG_ACTION_SUCCESS, STG_REASON_SUCCESS},
        {200, STG_ACTION_SUCCESS, STG_REASON_SUCCESS},
        {204, STG_ACTION_SUCCESS, STG_REASON_SUCCESS},
        {301, STG_ACTION_SUCCESS, STG_REASON_SUCCESS},
        {304, STG_ACTION_SUCCESS, STG_REASON_SUCCESS},
        {408, STG_ACTION_RETRY, STG_REASON_RETRY_STATUS},
        {429, STG_ACTION_RETRY, STG_REASON_RETRY_STATUS},
        {500, STG_ACTION_RETRY, STG_REASON_RETRY_STATUS},
        {502, STG_ACTION_RETRY, STG_REASON_RETRY_STATUS},
        {503, STG_ACTION_RETRY, STG_REASON_RETRY_STATUS},
        {504, STG_ACTION_RETRY, STG_REASON_RETRY_STATUS},
        {400, STG_ACTION_GIVE_UP, STG_REASON_STATUS_NOT_RETRYABLE},
        {401, STG_ACTION_GIVE_UP, STG_REASON_STATUS_NOT_RETRYABLE},
        {403, STG_ACTION_GIVE_UP, STG_REASON_STATUS_NOT_RETRYABLE},
        {404, STG_ACTION_GIVE_UP, STG_REASON_STATUS_NOT_RETRYABLE},
        {405, STG_ACTION_GIVE_UP, STG_REASON_STATUS_NOT_RETRYABLE},
        {409, STG_ACTION_GIVE_UP, STG_REASON_STATUS_NOT_RETRYABLE},
        {422, STG_ACTION_GIVE_UP, STG_REASON_STATUS_NOT_RETRYABLE},
        {501, STG_ACTION_GIVE_UP, STG_REASON_STATUS_NOT_RETRYABLE},
        {505, STG_ACTION_GIVE_UP, STG_REASON_STATUS_NOT_RETRYABLE},
        {0, STG_ACTION_GIVE_UP, STG_REASON_STATUS_NOT_RETRYABLE},
        {99, STG_ACTION_GIVE_UP, STG_REASON_STATUS_NOT_RETRYABLE},
        {700, STG_ACTION_GIVE_UP, STG_REASON_STATUS_NOT_RETRYABLE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        stg_decision d = decide(&p, 1, 0, cases[i].status, STG_NET_NONE, STG_METHOD_GET, false, NULL);
        if (d.action != cases[i].action || d.reason != cases[i].reason)
            fail_msg("status %d: got %s/%s", cases[i].status, stg_action_name(d.action),
                     stg_reason_name(d.reason));
        if (d.action != STG_ACTION_RETRY)
            assert_int_equal(d.wait_us, 0);
    }
}

static void test_transport_errors(void **state)
{
    (void)state;
    stg_policy p = {0};
    static const struct {
        stg_net_error e;
        bool retry;
    } cases[] = {
        {STG_NET_CONNECT_REFUSED, true}, {STG_NET_RESET, true},  {STG_NET_TIMEOUT, true},
        {STG_NET_CONNECT_TIMEOUT, true}, {STG_NET_DNS, false},   {STG_NET_TLS, false},
        {STG_NET_OTHER, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        stg_decision d = decide(&p, 1, 0, 0, cases[i].e, STG_METHOD_GET, false, NULL);
        assert_int_equal(d.action, cases[i].retry ? STG_ACTION_RETRY : STG_ACTION_GIVE_UP);
        assert_int_equal(d.reason, cases[i].retry ? STG_REASON_RETRY_ERROR
                                                  : STG_REASON_ERROR_NOT_RETRYABLE);
    }
    /* Configurable: DNS retried when asked for. */
    p.retry_errors = STG_NET_BIT(STG_NET_DNS);
    assert_int_equal(decide(&p, 1, 0, 0, STG_NET_DNS, STG_METHOD_GET, false, NULL).action,
                     STG_ACTION_RETRY);
    assert_int_equal(decide(&p, 1, 0, 0, STG_NET_RESET, STG_METHOD_GET, false, NULL).action,
                     STG_ACTION_GIVE_UP);
}

static void test_methods(void **state)
{
    (void)state;
    stg_policy p = {0};
    static const struct {
        stg_method m;
        bool key;
        stg_net_error err;
        bool retry;
    } cases[] = {
        {STG_METHOD_GET, false, STG_NET_NONE, true},
        {STG_METHOD_HEAD, false, STG_NET_NONE, true},
        {STG_METHOD_OPTIONS, false, STG_NET_NONE, true},
        {STG_METHOD_TRACE, false, STG_NET_NONE, true},
        {STG_METHOD_PUT, false, STG_NET_NONE, true},
        {STG_METHOD_DELETE, false, STG_NET_NONE, true},
        {STG_METHOD_POST, false, STG_NET_NONE, false},
        {STG_METHOD_PATCH, false, STG_NET_NONE, false},
        {STG_METHOD_POST, true, STG_NET_NONE, true},
        {STG_METHOD_PATCH, true, STG_NET_NONE, true},
        {STG_METHOD_CONNECT, true, STG_NET_NONE, false},
        {STG_METHOD_UNKNOWN, true, STG_NET_NONE, false},
        /* A timeout or reset does not prove the server did nothing. */
        {STG_METHOD_POST, false, STG_NET_TIMEOUT, false},
        {STG_METHOD_POST, false, STG_NET_RESET, false},
        /* Never sent: safe whatever the method. */
        {STG_METHOD_POST, false, STG_NET_CONNECT_REFUSED, true},
        {STG_METHOD_POST, false, STG_NET_CONNECT_TIMEOUT, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int status = cases[i].err == STG_NET_NONE ? 503 : 0;
        stg_decision d = decide(&p, 1, 0, status, cases[i].err, cases[i].m, cases[i].key, NULL);
        if ((d.action == STG_ACTION_RETRY) != cases[i].retry)
            fail_msg("case %zu (%s key=%d err=%s): got %s/%s", i, stg_method_name(cases[i].m),
                     cases[i].key, stg_net_error_name(cases[i].err), stg_action_name(d.action),
                     stg_reason_name(d.reason));
        if (!cases[i].retry)
            assert_int_equal(d.reason, STG_REASON_METHOD_NOT_IDEMPOTENT);
    }
    /* A non-retryable status is reported as such even for POST. */
    assert_int_equal(decide(&p, 1, 0, 404, STG_NET_NONE, STG_METHOD_POST, false, NULL).reason,
                     STG_REASON_STATUS_NOT_RETRYABLE);
    /* Configurable method sets. */
    p.retry_methods = STG_METHOD_BIT(STG_METHOD_GET);
    assert_int_equal(decide(&p, 1, 0, 503, STG_NET_NONE, STG_METHOD_PUT, false, NULL).action,
                     STG_ACTION_GIVE_UP);
    p.key_methods = STG_METHOD_BIT(STG_METHOD_PUT);
    assert_int_equal(decide(&p, 1, 0, 503, STG_NET_NONE, STG_METHOD_PUT, true, NULL).action,
                     STG_ACTION_RETRY);
    assert_int_equal(decide(&p, 1, 0, 503, STG_NET_NONE, STG_METHOD_POST, true, NULL).action,
                     STG_ACTION_GIVE_UP);
}

static void test_attempts(void **state)
{
    (void)state;
    stg_policy p = {0}; /* 6 attempts */
    for (int a = 1; a <= 5; a++)
        assert_int_equal(decide(&p, a, 0, 503, STG_NET_NONE, STG_METHOD_GET, false, NULL).action,
                         STG_ACTION_RETRY);
    stg_decision d = decide(&p, 6, 0, 503, STG_NET_NONE, STG_METHOD_GET, false, NULL);
    assert_int_equal(d.action, STG_ACTION_GIVE_UP);
    assert_int_equal(d.reason, STG_REASON_ATTEMPTS_EXHAUSTED);
    p.max_attempts = 1;
    assert_int_equal(decide(&p, 1, 0, 503, STG_NET_NONE, STG_METHOD_GET, false, NULL).reason,
                     STG_REASON_ATTEMPTS_EXHAUSTED);
    /* Success is success even on the last attempt. */
    assert_int_equal(decide(&p, 1, 0, 200, STG_NET_NONE, STG_METHOD_GET, false, NULL).action,
                     STG_ACTION_SUCCESS);
}

static void test_backoff_wait(void **state)
{
    (void)state;
    stg_policy p = {.backoff = {.kind = STG_BACKOFF_EQUAL, .base_us = STG_MS(100)}};
    for (int a = 1; a <= 5; a++) {
        int64_t raw = STG_MS(100) << (a - 1);
        stg_decision d = decide(&p, a, 0, 503, STG_NET_NONE, STG_METHOD_GET, false, NULL);
        assert_int_equal(d.wait_min_us, raw / 2);
        assert_int_equal(d.wait_max_us, raw);
        assert_in_range_i64(d.wait_us, raw / 2, raw);
        assert_false(d.used_hint);
        assert_int_equal(d.server_wait_us, STG_UNKNOWN);
    }
}

static void test_honor(void **state)
{
    (void)state;
    stg_policy p = {0}; /* honor, spread 0.2, base 500 ms */
    stg_hints h = retry_after(STG_SEC(5));
    int64_t mn = INT64_MAX, mx = 0;
    for (int i = 0; i < 2000; i++) {
        stg_decision d = decide(&p, 1 + i % 5, 0, 429, STG_NET_NONE, STG_METHOD_GET, false, &h);
        assert_int_equal(d.action, STG_ACTION_RETRY);
        assert_true(d.used_hint);
        assert_int_equal(d.server_wait_us, STG_SEC(5));
        assert_int_equal(d.wait_min_us, STG_SEC(5));
        assert_int_equal(d.wait_max_us, STG_SEC(6)); /* 5 s + max(1 s, 500 ms) */
        assert_in_range_i64(d.wait_us, STG_SEC(5), STG_SEC(6));
        mn = d.wait_us < mn ? d.wait_us : mn;
        mx = d.wait_us > mx ? d.wait_us : mx;
    }
    /* Spread over the whole second, not bunched. */
    assert_true(mn < STG_SEC(5) + STG_MS(20) && mx > STG_SEC(6) - STG_MS(20));
    /* A short hint still spreads by at least the (transient) base. */
    h = retry_after(STG_SEC(1));
    stg_decision d = decide(&p, 1, 0, 429, STG_NET_NONE, STG_METHOD_GET, false, &h);
    assert_int_equal(d.wait_max_us, STG_SEC(1) + STG_MS(200));
    h = retry_after(STG_MS(100));
    d = decide(&p, 1, 0, 429, STG_NET_NONE, STG_METHOD_GET, false, &h);
    assert_int_equal(d.wait_max_us, STG_MS(150));
    /* Retry-After: 0 is "now", spread by the base. */
    h = retry_after(0);
    d = decide(&p, 1, 0, 503, STG_NET_NONE, STG_METHOD_GET, false, &h);
    assert_in_range_i64(d.wait_us, 0, STG_MS(50));
}

static void test_modes(void **state)
{
    (void)state;
    stg_hints h = retry_after(STG_SEC(2));
    stg_policy p = {.retry_after_mode = STG_RETRY_AFTER_EXACT};
    stg_decision d = decide(&p, 1, 0, 429, STG_NET_NONE, STG_METHOD_GET, false, &h);
    assert_int_equal(d.wait_us, STG_SEC(2));
    assert_int_equal(d.wait_min_us, STG_SEC(2));
    assert_int_equal(d.wait_max_us, STG_SEC(2));

    /* cap: min(backoff, hint); backoff exponential 5 s > 2 s -> 2 s; 1 s < 2 s -> 1 s. */
    p = (stg_policy){.retry_after_mode = STG_RETRY_AFTER_CAP,
                     .backoff = {.kind = STG_BACKOFF_EXPONENTIAL, .base_us = STG_SEC(5)}};
    d = decide(&p, 1, 0, 429, STG_NET_NONE, STG_METHOD_GET, false, &h);
    assert_int_equal(d.wait_us, STG_SEC(2));
    assert_true(d.used_hint);
    p.backoff.base_us = STG_SEC(1);
    d = decide(&p, 1, 0, 429, STG_NET_NONE, STG_METHOD_GET, false, &h);
    assert_int_equal(d.wait_us, STG_SEC(1));
    assert_false(d.used_hint);

    /* ignore: the backoff alone. */
    p.retry_after_mode = STG_RETRY_AFTER_IGNORE;
    p.backoff.base_us = STG_MS(300);
    d = decide(&p, 1, 0, 429, STG_NET_NONE, STG_METHOD_GET, false, &h);
    assert_int_equal(d.wait_us, STG_MS(300));
    assert_false(d.used_hint);
    assert_int_equal(d.server_wait_us, STG_SEC(2));
}

/* Throttle and transient apart (policy.h rule 6): the zero policy backs a
 * 429, a 529 and a 503 with a hint off from 1 s, a 500/502/504, a 503
 * without a hint and a reset from 50 ms; the hint, when honoured, still
 * decides the wait of a throttle that carries one. */
static void test_fault_classes(void **state)
{
    (void)state;
    stg_hints ra = retry_after(STG_SEC(2)), none;
    stg_hints_init(&none);
    assert_int_equal(stg_fault_classify(429, STG_NET_NONE, NULL), STG_FAULT_THROTTLE);
    assert_int_equal(stg_fault_classify(529, STG_NET_NONE, &none), STG_FAULT_THROTTLE);
    assert_int_equal(stg_fault_classify(503, STG_NET_NONE, &ra), STG_FAULT_THROTTLE);
    assert_int_equal(stg_fault_classify(503, STG_NET_NONE, &none), STG_FAULT_TRANSIENT);
    assert_int_equal(stg_fault_classify(503, STG_NET_NONE, NULL), STG_FAULT_TRANSIENT);
    assert_int_equal(stg_fault_classify(500, STG_NET_NONE, &ra), STG_FAULT_TRANSIENT);
    assert_int_equal(stg_fault_classify(0, STG_NET_RESET, NULL), STG_FAULT_TRANSIENT);
    assert_string_equal(stg_fault_class_name(STG_FAULT_THROTTLE), "throttle");
    assert_string_equal(stg_fault_class_name(STG_FAULT_TRANSIENT), "transient");

    stg_policy r, p = {.backoff = {.kind = STG_BACKOFF_EXPONENTIAL}};
    assert_int_equal(stg_policy_resolve(&p, &r), STG_OK);
    assert_int_equal(r.backoff.base_us, STG_MS(50));
    assert_int_equal(r.throttle_base_us, STG_SEC(1));
    stg_status_set_add(&p.retry_statuses, 529);
    stg_status_set_add(&p.retry_statuses, 500);
    stg_status_set_add(&p.retry_statuses, 503);
    stg_status_set_add(&p.retry_statuses, 429);
    for (int a = 1; a <= 3; a++) {
        int64_t k = INT64_C(1) << (a - 1);
        assert_int_equal(decide(&p, a, 0, 429, STG_NET_NONE, STG_METHOD_GET, false, NULL).wait_us,
                         STG_SEC(1) * k);
        assert_int_equal(decide(&p, a, 0, 529, STG_NET_NONE, STG_METHOD_GET, false, NULL).wait_us,
                         STG_SEC(1) * k);
        assert_int_equal(decide(&p, a, 0, 500, STG_NET_NONE, STG_METHOD_GET, false, NULL).wait_us,
                         STG_MS(50) * k);
        assert_int_equal(decide(&p, a, 0, 503, STG_NET_NONE, STG_METHOD_GET, false, &none).wait_us,
                         STG_MS(50) * k);
        assert_int_equal(decide(&p, a, 0, 0, STG_NET_RESET, STG_METHOD_GET, false, NULL).wait_us,
                         STG_MS(50) * k);
    }
    /* A 503 with a hint ignored: a throttle's backoff. */
    p.retry_after_mode = STG_RETRY_AFTER_IGNORE;
    assert_int_equal(decide(&p, 1, 0, 503, STG_NET_NONE, STG_METHOD_GET, false, &ra).wait_us,
                     STG_SEC(1));
    /* Honoured, the hint decides: exactly 2 s in EXACT mode. */
    p.retry_after_mode = STG_RETRY_AFTER_EXACT;
    assert_int_equal(decide(&p, 1, 0, 503, STG_NET_NONE, STG_METHOD_GET, false, &ra).wait_us,
                     STG_SEC(2));
    p.retry_after_mode = STG_RETRY_AFTER_HONOR;

    /* Both bases set; the cap bounds the throttle's too. */
    p.backoff.base_us = STG_MS(10);
    p.throttle_base_us = STG_SEC(5);
    p.backoff.cap_us = STG_SEC(3);
    assert_int_equal(decide(&p, 1, 0, 429, STG_NET_NONE, STG_METHOD_GET, false, NULL).wait_us,
                     STG_SEC(3));
    assert_int_equal(decide(&p, 1, 0, 500, STG_NET_NONE, STG_METHOD_GET, false, NULL).wait_us,
                     STG_MS(10));
    /* One base set (a caller from before the split): both classes use it. */
    p.throttle_base_us = 0;
    assert_int_equal(decide(&p, 2, 0, 429, STG_NET_NONE, STG_METHOD_GET, false, NULL).wait_us,
                     STG_MS(20));
    assert_int_equal(stg_policy_resolve(&p, &r), STG_OK);
    assert_int_equal(r.throttle_base_us, STG_MS(10));
    p.throttle_base_us = -1;
    assert_int_equal(stg_policy_resolve(&p, &r), STG_EINVAL);
    /* Every preset states both. */
    for (const char *const *n = stg_policy_preset_names(); *n; n++) {
        assert_int_equal(stg_policy_preset(&p, *n), STG_OK);
        assert_int_equal(stg_policy_resolve(&p, &r), STG_OK);
        assert_non_null(strstr(stg_policy_preset_describe(*n), "throttle"));
        assert_true(r.throttle_base_us >= r.backoff.base_us);
    }
}

static void test_server_wait_too_long(void **state)
{
    (void)state;
    stg_hints h = retry_after(STG_SEC(31));
    stg_policy p = {0};
    stg_decision d = decide(&p, 1, 0, 429, STG_NET_NONE, STG_METHOD_GET, false, &h);
    assert_int_equal(d.action, STG_ACTION_GIVE_UP);
    assert_int_equal(d.reason, STG_REASON_SERVER_WAIT_TOO_LONG);
    assert_int_equal(d.server_wait_us, STG_SEC(31));
    assert_int_equal(d.wait_us, 0);
    h = retry_after(STG_SEC(30));
    assert_int_equal(decide(&p, 1, 0, 429, STG_NET_NONE, STG_METHOD_GET, false, &h).action,
                     STG_ACTION_RETRY);
    p.retry_after_mode = STG_RETRY_AFTER_EXACT;
    h = retry_after(STG_SEC(31));
    assert_int_equal(decide(&p, 1, 0, 429, STG_NET_NONE, STG_METHOD_GET, false, &h).reason,
                     STG_REASON_SERVER_WAIT_TOO_LONG);
    /* More than the deadline leaves, though below max_server_wait. */
    p = (stg_policy){0};
    h = retry_after(STG_SEC(15));
    d = decide(&p, 1, STG_SEC(50), 429, STG_NET_NONE, STG_METHOD_GET, false, &h);
    assert_int_equal(d.reason, STG_REASON_SERVER_WAIT_TOO_LONG);
    /* No limit configured. */
    p.max_server_wait_us = -1;
    p.deadline_us = -1;
    h = retry_after(STG_SEC(3600));
    d = decide(&p, 1, 0, 429, STG_NET_NONE, STG_METHOD_GET, false, &h);
    assert_int_equal(d.action, STG_ACTION_RETRY);
    assert_true(d.wait_us >= STG_SEC(3600));
}

static void test_ratelimit_reset_as_hint(void **state)
{
    (void)state;
    stg_hints h;
    stg_hints_init(&h);
    h.remaining = 0;
    h.reset_us = STG_SEC(3);
    h.seen = STG_HINT_X_RATELIMIT;
    stg_policy p = {.retry_after_mode = STG_RETRY_AFTER_EXACT};
    stg_decision d = decide(&p, 1, 0, 429, STG_NET_NONE, STG_METHOD_GET, false, &h);
    assert_int_equal(d.wait_us, STG_SEC(3));
    /* Requests remain: the reset is no reason to wait. */
    h.remaining = 5;
    d = decide(&p, 1, 0, 429, STG_NET_NONE, STG_METHOD_GET, false, &h);
    assert_false(d.used_hint);
    assert_int_equal(d.server_wait_us, STG_UNKNOWN);
    /* Retry-After wins over the reset. */
    h.remaining = 0;
    h.retry_after_us = STG_SEC(1);
    d = decide(&p, 1, 0, 429, STG_NET_NONE, STG_METHOD_GET, false, &h);
    assert_int_equal(d.wait_us, STG_SEC(1));
}

static void test_deadline(void **state)
{
    (void)state;
    stg_policy p = {.deadline_us = STG_SEC(10),
                    .backoff = {.kind = STG_BACKOFF_FULL, .base_us = STG_SEC(4)}};
    /* At or past the deadline. */
    assert_int_equal(decide(&p, 1, STG_SEC(10), 503, STG_NET_NONE, STG_METHOD_GET, false, NULL).reason,
                     STG_REASON_DEADLINE);
    assert_int_equal(decide(&p, 1, STG_SEC(11), 503, STG_NET_NONE, STG_METHOD_GET, false, NULL).reason,
                     STG_REASON_DEADLINE);
    /* 100 ms left: every wait ends by the deadline, spread over the
     * remaining 100 ms rather than piled on its end. */
    int at_deadline = 0;
    double sum = 0;
    for (int i = 0; i < 1000; i++) {
        stg_decision d = decide(&p, 3, STG_SEC(10) - STG_MS(100), 503, STG_NET_NONE,
                                STG_METHOD_GET, false, NULL);
        assert_int_equal(d.action, STG_ACTION_RETRY);
        assert_in_range_i64(d.wait_us, 0, STG_MS(100));
        assert_int_equal(d.wait_max_us, STG_MS(100));
        at_deadline += d.wait_us == STG_MS(100);
        sum += (double)d.wait_us;
    }
    assert_true(at_deadline < 5);
    assert_in_range_i64((int64_t)(sum / 1000), STG_MS(45), STG_MS(55));
    /* Equal jitter's shortest wait (raw/2 = 2 s) would pass the deadline. */
    p.backoff.kind = STG_BACKOFF_EQUAL;
    stg_decision d = decide(&p, 1, STG_SEC(9), 503, STG_NET_NONE, STG_METHOD_GET, false, NULL);
    assert_int_equal(d.action, STG_ACTION_GIVE_UP);
    assert_int_equal(d.reason, STG_REASON_DEADLINE);
    /* Honor: spread is clamped to the deadline, never below the hint. */
    p = (stg_policy){.deadline_us = STG_SEC(10)};
    stg_hints h = retry_after(STG_SEC(5));
    for (int i = 0; i < 1000; i++) {
        d = decide(&p, 1, STG_SEC(4) + STG_MS(500), 429, STG_NET_NONE, STG_METHOD_GET, false, &h);
        assert_int_equal(d.action, STG_ACTION_RETRY);
        assert_in_range_i64(d.wait_us, STG_SEC(5), STG_MS(5500));
    }
    /* No deadline at all. */
    p.deadline_us = -1;
    d = decide(&p, 2, STG_SEC(100000), 503, STG_NET_NONE, STG_METHOD_GET, false, NULL);
    assert_int_equal(d.action, STG_ACTION_RETRY);
}

static void test_cancelled_and_invalid(void **state)
{
    (void)state;
    stg_policy p = {0};
    stg_retry_state st = {.attempts = 1};
    stg_outcome o = {.status = 503, .method = STG_METHOD_GET, .cancelled = true};
    stg_decision d;
    assert_int_equal(stg_decide(&p, &st, &o, 0, &rng, &d), STG_OK);
    assert_int_equal(d.reason, STG_REASON_CANCELLED);
    o.status = 200; /* cancel wins even over a success: the caller asked to stop */
    assert_int_equal(stg_decide(&p, &st, &o, 0, &rng, &d), STG_OK);
    assert_int_equal(d.reason, STG_REASON_CANCELLED);
    o.cancelled = false;
    st.attempts = 0;
    assert_int_equal(stg_decide(&p, &st, &o, 0, &rng, &d), STG_EINVAL);
    assert_int_equal(d.action, STG_ACTION_GIVE_UP);
    st.attempts = 1;
    stg_policy bad = {.backoff = {.multiplier = 0.5}};
    assert_int_equal(stg_decide(&bad, &st, &o, 0, &rng, &d), STG_EINVAL);
    assert_int_equal(d.action, STG_ACTION_GIVE_UP);
    assert_int_equal(stg_decide(NULL, &st, &o, 0, &rng, &d), STG_EINVAL);
    assert_int_equal(stg_decide(&p, &st, &o, 0, NULL, &d), STG_EINVAL);
    assert_int_equal(stg_decide(&p, &st, &o, 0, &rng, NULL), STG_EINVAL);
}

static void test_custom_statuses(void **state)
{
    (void)state;
    stg_policy p = {0};
    assert_int_equal(stg_status_set_parse(&p.retry_statuses, "429"), STG_OK);
    assert_int_equal(decide(&p, 1, 0, 429, STG_NET_NONE, STG_METHOD_GET, false, NULL).action,
                     STG_ACTION_RETRY);
    assert_int_equal(decide(&p, 1, 0, 503, STG_NET_NONE, STG_METHOD_GET, false, NULL).action,
                     STG_ACTION_GIVE_UP);
}

static void test_status_set_parse(void **state)
{
    (void)state;
    stg_status_set s;
    assert_int_equal(stg_status_set_parse(&s, "429,5xx"), STG_OK);
    assert_true(stg_status_set_has(&s, 429) && stg_status_set_has(&s, 500) &&
                stg_status_set_has(&s, 599));
    assert_false(stg_status_set_has(&s, 428) || stg_status_set_has(&s, 600));
    assert_int_equal(stg_status_set_parse(&s, " 500-504 , 408"), STG_OK);
    assert_true(stg_status_set_has(&s, 502) && stg_status_set_has(&s, 408));
    assert_false(stg_status_set_has(&s, 505));
    const char *bad[] = {"", "abc", "600", "99", "5xy", "429,", ",429", "504-500", "42", "4290",
                         "6xx", "0xx", "429;503"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(stg_status_set_parse(&s, bad[i]), STG_EPARSE);
        assert_true(stg_status_set_empty(&s));
    }
    stg_status_set_default(&s);
    int want[] = {408, 429, 500, 502, 503, 504, 529}, n = 0;
    for (int c = 0; c < 640; c++)
        n += stg_status_set_has(&s, c);
    assert_int_equal(n, 7);
    for (int i = 0; i < 7; i++)
        assert_true(stg_status_set_has(&s, want[i]));
    assert_false(stg_status_set_has(&s, -1) || stg_status_set_has(&s, 100000));
}

static void test_presets(void **state)
{
    (void)state;
    const char *const *names = stg_policy_preset_names();
    int n = 0;
    for (; names[n]; n++) {
        stg_policy p, r;
        assert_int_equal(stg_policy_preset(&p, names[n]), STG_OK);
        assert_int_equal(stg_policy_resolve(&p, &r), STG_OK);
        assert_non_null(stg_policy_preset_describe(names[n]));
    }
    assert_int_equal(n, 5);
    stg_policy p, r;
    memset(&p, 0x5a, sizeof p);
    stg_policy before = p;
    assert_int_equal(stg_policy_preset(&p, "nope"), STG_ENOTFOUND);
    assert_memory_equal(&p, &before, sizeof p);
    assert_null(stg_policy_preset_describe("nope"));

    assert_int_equal(stg_policy_preset(&p, "bounded"), STG_OK);
    assert_int_equal(stg_policy_resolve(&p, &r), STG_OK);
    assert_int_equal(r.max_attempts, 3);
    assert_int_equal(r.backoff.cap_us, STG_SEC(8));
    assert_true(r.backoff.jitter_lo == 0.0 && r.backoff.jitter_hi == 0.2);
    assert_int_equal(r.max_server_wait_us, STG_SEC(30));
    assert_true(stg_status_set_has(&r.retry_statuses, 503));
    assert_false(stg_status_set_has(&r.retry_statuses, 500));
    assert_int_equal(decide(&p, 1, 0, 503, STG_NET_NONE, STG_METHOD_PUT, false, NULL).action,
                     STG_ACTION_GIVE_UP);
    assert_int_equal(decide(&p, 1, 0, 503, STG_NET_NONE, STG_METHOD_HEAD, false, NULL).action,
                     STG_ACTION_RETRY);

    assert_int_equal(stg_policy_preset(&p, "batch"), STG_OK);
    assert_int_equal(stg_policy_resolve(&p, &r), STG_OK);
    assert_int_equal(r.max_attempts, 7);
    assert_true(stg_status_set_has(&r.retry_statuses, 501));
    /* Transient from 50 ms, throttle from 1 s, both +-20%. */
    stg_decision d = decide(&p, 1, 0, 503, STG_NET_NONE, STG_METHOD_GET, false, NULL);
    assert_in_range_i64(d.wait_us, STG_MS(40), STG_MS(60));
    d = decide(&p, 1, 0, 429, STG_NET_NONE, STG_METHOD_GET, false, NULL);
    assert_in_range_i64(d.wait_us, STG_MS(800), STG_MS(1200));

    assert_int_equal(stg_policy_preset(&p, "decorrelated"), STG_OK);
    assert_int_equal(stg_policy_resolve(&p, &r), STG_OK);
    assert_int_equal(r.backoff.kind, STG_BACKOFF_DECORRELATED);
    assert_int_equal(r.max_attempts, 6);

    assert_int_equal(stg_policy_preset(&p, "full-jitter"), STG_OK);
    assert_int_equal(stg_policy_resolve(&p, &r), STG_OK);
    assert_int_equal(r.backoff.base_us, STG_MS(200));
}

/* Random policies, states and hints: the invariants always hold. */
static void test_invariants(void **state)
{
    (void)state;
    stg_rng g;
    stg_rng_seed(&g, 77);
    stg_backoff_kind kinds[] = {STG_BACKOFF_FIXED, STG_BACKOFF_EXPONENTIAL, STG_BACKOFF_FULL,
                                STG_BACKOFF_EQUAL, STG_BACKOFF_DECORRELATED,
                                STG_BACKOFF_PROPORTIONAL, STG_BACKOFF_ADDITIVE};
    for (int i = 0; i < 20000; i++) {
        stg_policy p = {0};
        p.backoff.kind = kinds[stg_rng_range(&g, 0, 6)];
        p.backoff.base_us = stg_rng_range(&g, 1, STG_SEC(2));
        p.retry_after_mode = (stg_retry_after_mode)stg_rng_range(&g, 0, 3);
        p.deadline_us = stg_rng_range(&g, 0, 1) ? STG_SEC(20) : -1;
        stg_hints h = retry_after(stg_rng_range(&g, 0, STG_SEC(40)));
        bool with_hint = stg_rng_range(&g, 0, 1);
        int64_t elapsed = stg_rng_range(&g, 0, STG_SEC(25));
        stg_decision d = decide(&p, (int)stg_rng_range(&g, 1, 5), elapsed, 429, STG_NET_NONE,
                                STG_METHOD_GET, false, with_hint ? &h : NULL);
        if (d.action != STG_ACTION_RETRY)
            continue;
        assert_true(d.wait_us >= 0 && d.wait_min_us <= d.wait_us && d.wait_us <= d.wait_max_us);
        if (p.deadline_us > 0)
            assert_true(elapsed + d.wait_us <= p.deadline_us);
        if (with_hint && (p.retry_after_mode == STG_RETRY_AFTER_HONOR ||
                          p.retry_after_mode == STG_RETRY_AFTER_EXACT))
            assert_true(d.wait_us >= h.retry_after_us);
    }
}

static void test_names(void **state)
{
    (void)state;
    assert_string_equal(stg_method_name(stg_method_parse("PATCH")), "PATCH");
    assert_int_equal(stg_method_parse("get"), STG_METHOD_UNKNOWN);
    assert_int_equal(stg_method_parse(NULL), STG_METHOD_UNKNOWN);
    assert_string_equal(stg_method_name((stg_method)77), "UNKNOWN");
    stg_retry_after_mode m;
    assert_int_equal(stg_retry_after_mode_parse("honour", &m), STG_OK);
    assert_int_equal(m, STG_RETRY_AFTER_HONOR);
    assert_int_equal(stg_retry_after_mode_parse("cap", &m), STG_OK);
    assert_string_equal(stg_retry_after_mode_name(m), "cap");
    assert_int_equal(stg_retry_after_mode_parse("sometimes", &m), STG_EPARSE);
    assert_string_equal(stg_reason_name(STG_REASON_SERVER_WAIT_TOO_LONG), "server_wait_too_long");
    assert_string_equal(stg_action_name(STG_ACTION_GIVE_UP), "give_up");
    assert_string_equal(stg_strerror(STG_EPARSE), "malformed value");
    assert_string_equal(stg_errname(STG_ETOOBIG), "ETOOBIG");
    assert_string_equal(stg_strerror(9999), "unknown error");
    assert_string_equal(stg_version(), STG_VERSION_STRING);
}

/* ---- Server hints II (#15): real headers through stg_hints_feed_line ---- */

#define WALL_NOW_US STG_SEC(INT64_C(784111777)) /* Sun, 06 Nov 1994 08:49:37 GMT */

/* The hints (and quotas, when qs) of a response given as header lines. */
static stg_hints hints_of(stg_quota_set *qs, const char *const *lines)
{
    stg_hints h;
    stg_hints_init(&h);
    if (qs)
        stg_quota_set_init(qs);
    for (size_t i = 0; lines[i]; i++)
        (void)stg_hints_feed_line(&h, qs, lines[i], strlen(lines[i]), WALL_NOW_US);
    return h;
}

/* Defect 1: a hint too large to represent is the largest wait: the
 * response goes back, whatever the limits, and is never retried early. */
static void test_oversized_hint_gives_up(void **state)
{
    (void)state;
    static const char *const cases[][3] = {
        {"Retry-After: 2147483648", NULL, NULL},
        {"Retry-After: 99999999999999999999999999", NULL, NULL},
        {"Retry-After: Fri, 31 Dec 9999 23:59:59 GMT", NULL, NULL},
        {"retry-after-ms: 99999999999999999", NULL, NULL},
        {"X-RateLimit-Remaining: 0", "X-RateLimit-Reset: 99999999999999", NULL},
        {"RateLimit: \"default\";r=0;t=99999999999", NULL, NULL},
    };
    stg_policy unlimited = {.max_server_wait_us = -1, .deadline_us = -1};
    stg_policy dflt = {0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        stg_hints h = hints_of(NULL, cases[i]);
        stg_decision d = decide(&dflt, 1, 0, 429, STG_NET_NONE, STG_METHOD_GET, false, &h);
        if (d.action != STG_ACTION_GIVE_UP || d.reason != STG_REASON_SERVER_WAIT_TOO_LONG)
            fail_msg("case %zu (%s): %s/%s", i, cases[i][0], stg_action_name(d.action),
                     stg_reason_name(d.reason));
        d = decide(&unlimited, 1, 0, 503, STG_NET_NONE, STG_METHOD_GET, false, &h);
        if (d.action != STG_ACTION_GIVE_UP || d.reason != STG_REASON_SERVER_WAIT_TOO_LONG)
            fail_msg("case %zu (%s), no limits: %s/%s", i, cases[i][0],
                     stg_action_name(d.action), stg_reason_name(d.reason));
        assert_int_equal(d.server_wait_us, STG_WAIT_MAX_US);
    }
    /* The largest representable value gives up the same way. */
    static const char *const exact[] = {"Retry-After: 2147483647", NULL};
    stg_hints h = hints_of(NULL, exact);
    stg_decision d = decide(&unlimited, 1, 0, 503, STG_NET_NONE, STG_METHOD_GET, false, &h);
    assert_int_equal(d.reason, STG_REASON_SERVER_WAIT_TOO_LONG);
}

/* Defect 2: a decimal Retry-After is seconds rounded up, never early. */
static void test_decimal_retry_after(void **state)
{
    (void)state;
    static const char *const l15[] = {"Retry-After: 1.5", NULL};
    static const char *const l20[] = {"Retry-After: 2.0", NULL};
    stg_policy exact = {.retry_after_mode = STG_RETRY_AFTER_EXACT};
    stg_policy honor = {0};
    stg_hints h = hints_of(NULL, l15);
    stg_decision d = decide(&exact, 1, 0, 429, STG_NET_NONE, STG_METHOD_GET, false, &h);
    assert_int_equal(d.wait_us, STG_SEC(2));
    h = hints_of(NULL, l20);
    for (int i = 0; i < 100; i++) {
        d = decide(&honor, 1, 0, 429, STG_NET_NONE, STG_METHOD_GET, false, &h);
        assert_int_equal(d.action, STG_ACTION_RETRY);
        assert_true(d.wait_us >= STG_SEC(2));
    }
}

/* Defect 3: lenient HTTP-dates give the instant the server meant, zones
 * applied; an ambiguous one gives no hint, so the plain backoff. */
static void test_lenient_dates(void **state)
{
    (void)state;
    static const char *const dates[] = {
        "Retry-After: Sun, 06 Nov 1994 10:49:47 +0200", "Retry-After: 6 Nov 1994 8:49:47 GMT",
        "Retry-After: Sunday, 06-Nov-1994 08:49:47 GMT", "Retry-After: Sun Nov  6 08:49:47 1994 GMT",
        "Retry-After: Sun, 06 Nov 1994 08:49:47 UTC", "Retry-After: Sun, 06 Nov 1994 03:49:47 EST",
    };
    stg_policy exact = {.retry_after_mode = STG_RETRY_AFTER_EXACT};
    for (size_t i = 0; i < sizeof dates / sizeof dates[0]; i++) {
        const char *lines[] = {dates[i], NULL};
        stg_hints h = hints_of(NULL, lines);
        stg_decision d = decide(&exact, 1, 0, 503, STG_NET_NONE, STG_METHOD_GET, false, &h);
        if (d.wait_us != STG_SEC(10))
            fail_msg("%s: wait %lld", dates[i], (long long)d.wait_us);
    }
    static const char *const amb[] = {"Retry-After: Sun, 06 Nov 1994 08:49:47 GMT+0100", NULL};
    stg_hints h = hints_of(NULL, amb);
    stg_decision d = decide(&exact, 1, 0, 503, STG_NET_NONE, STG_METHOD_GET, false, &h);
    assert_false(d.used_hint);
    assert_int_equal(d.server_wait_us, STG_UNKNOWN);
    assert_int_equal(h.malformed, STG_HINT_RETRY_AFTER);
}

static void test_529_and_throttled(void **state)
{
    (void)state;
    stg_policy p = {0};
    stg_decision d = decide(&p, 1, 0, 529, STG_NET_NONE, STG_METHOD_GET, false, NULL);
    assert_int_equal(d.action, STG_ACTION_RETRY);
    assert_int_equal(d.reason, STG_REASON_RETRY_STATUS);
    static const char *const ra[] = {"Retry-After: 5", NULL};
    static const char *const spent[] = {"x-ratelimit-remaining: 0", "x-ratelimit-reset: 30", NULL};
    static const char *const gh[] = {"X-RateLimit-Limit: 30", "X-RateLimit-Remaining: 14",
                                     "X-RateLimit-Resource: search", NULL};
    stg_hints h_ra = hints_of(NULL, ra), h_spent = hints_of(NULL, spent), h_gh = hints_of(NULL, gh);
    assert_true(stg_status_throttled(429, NULL));
    assert_true(stg_status_throttled(529, NULL));
    assert_false(stg_status_throttled(503, NULL));
    assert_true(stg_status_throttled(503, &h_ra));
    assert_false(stg_status_throttled(403, NULL));
    assert_true(stg_status_throttled(403, &h_ra));
    assert_true(stg_status_throttled(403, &h_spent));
    assert_false(stg_status_throttled(403, &h_gh));
    assert_false(stg_status_throttled(500, &h_ra));
}

/* A 403 with Retry-After or a spent quota is a rate limit; a plain 403,
 * even with GitHub's headers, stays an authorization error. */
static void test_403_rules(void **state)
{
    (void)state;
    stg_policy p = {.retry_after_mode = STG_RETRY_AFTER_EXACT};
    static const char *const ra[] = {"Retry-After: 5", NULL};
    static const char *const spent[] = {"x-ratelimit-limit: 5000", "x-ratelimit-remaining: 0",
                                        "x-ratelimit-reset: 20",
                                        "x-ratelimit-resource: core", NULL};
    static const char *const gh[] = {"X-RateLimit-Limit: 30", "X-RateLimit-Remaining: 14",
                                     "X-RateLimit-Resource: search", NULL};
    stg_decision d = decide(&p, 1, 0, 403, STG_NET_NONE, STG_METHOD_GET, false, NULL);
    assert_int_equal(d.reason, STG_REASON_STATUS_NOT_RETRYABLE);
    stg_hints h = hints_of(NULL, ra);
    d = decide(&p, 1, 0, 403, STG_NET_NONE, STG_METHOD_GET, false, &h);
    assert_int_equal(d.action, STG_ACTION_RETRY);
    assert_int_equal(d.wait_us, STG_SEC(5));
    stg_quota_set qs;
    h = hints_of(&qs, spent);
    d = decide(&p, 1, 0, 403, STG_NET_NONE, STG_METHOD_GET, false, &h);
    assert_int_equal(d.action, STG_ACTION_RETRY);
    assert_int_equal(d.wait_us, STG_SEC(20)); /* until the reset */
    h = hints_of(NULL, gh);
    d = decide(&p, 1, 0, 403, STG_NET_NONE, STG_METHOD_GET, false, &h);
    assert_int_equal(d.reason, STG_REASON_STATUS_NOT_RETRYABLE);
    /* Without 429 in the set, a rate-limit 403 is not retried either. */
    stg_policy only503 = {0};
    stg_status_set_add(&only503.retry_statuses, 503);
    h = hints_of(NULL, ra);
    d = decide(&only503, 1, 0, 403, STG_NET_NONE, STG_METHOD_GET, false, &h);
    assert_int_equal(d.reason, STG_REASON_STATUS_NOT_RETRYABLE);
}

/* GitHub's secondary limit: no Retry-After, quota not spent: at least 60 s. */
static void test_github_secondary(void **state)
{
    (void)state;
    static const char *const gh[] = {"X-RateLimit-Limit: 30", "X-RateLimit-Remaining: 14",
                                     "X-RateLimit-Reset: 1655120964",
                                     "X-RateLimit-Resource: search", NULL};
    stg_policy dflt = {0};
    stg_policy longer = {.max_server_wait_us = STG_SEC(120)};
    stg_hints h = hints_of(NULL, gh);
    stg_decision d = decide(&dflt, 1, 0, 429, STG_NET_NONE, STG_METHOD_GET, false, &h);
    assert_int_equal(d.reason, STG_REASON_SERVER_WAIT_TOO_LONG);
    assert_int_equal(d.server_wait_us, STG_SECONDARY_LIMIT_WAIT_US);
    d = decide(&longer, 1, 0, 429, STG_NET_NONE, STG_METHOD_GET, false, &h);
    assert_int_equal(d.action, STG_ACTION_RETRY);
    assert_true(d.wait_us >= STG_SEC(60));
    /* A 403 flagged secondary by a reader of the body: the same. */
    d = decide(&longer, 1, 0, 403, STG_NET_NONE, STG_METHOD_GET, false, &h);
    assert_int_equal(d.reason, STG_REASON_STATUS_NOT_RETRYABLE);
    h.flags |= STG_HINTS_SECONDARY;
    d = decide(&longer, 1, 0, 403, STG_NET_NONE, STG_METHOD_GET, false, &h);
    assert_int_equal(d.action, STG_ACTION_RETRY);
    assert_true(d.wait_us >= STG_SEC(60));
    /* With a Retry-After, that wins. */
    static const char *const gh_ra[] = {"X-RateLimit-Remaining: 14", "X-RateLimit-Resource: search",
                                        "Retry-After: 7", NULL};
    h = hints_of(NULL, gh_ra);
    stg_policy exact = {.retry_after_mode = STG_RETRY_AFTER_EXACT};
    d = decide(&exact, 1, 0, 429, STG_NET_NONE, STG_METHOD_GET, false, &h);
    assert_int_equal(d.wait_us, STG_SEC(7));
    /* Not GitHub: a 429 without hints keeps the plain backoff. */
    static const char *const plain[] = {"X-RateLimit-Remaining: 14", NULL};
    h = hints_of(NULL, plain);
    d = decide(&dflt, 1, 0, 429, STG_NET_NONE, STG_METHOD_GET, false, &h);
    assert_false(d.used_hint);
}

/* x-should-retry / Stripe-Should-Retry override the status rules, never
 * the method's safety. */
static void test_verdicts(void **state)
{
    (void)state;
    stg_policy p = {0};
    static const char *const no[] = {"x-should-retry: false", "Retry-After: 1", NULL};
    static const char *const yes[] = {"x-should-retry: true", NULL};
    static const char *const stripe[] = {"Stripe-Should-Retry: true", NULL};
    static const char *const both[] = {"x-should-retry: true", "Stripe-Should-Retry: false", NULL};
    stg_hints h = hints_of(NULL, no);
    assert_int_equal(h.verdict, STG_VERDICT_STOP);
    stg_decision d = decide(&p, 1, 0, 429, STG_NET_NONE, STG_METHOD_GET, false, &h);
    assert_int_equal(d.reason, STG_REASON_SERVER_VERDICT);
    assert_string_equal(stg_reason_name(d.reason), "server_verdict");
    h = hints_of(NULL, yes);
    d = decide(&p, 1, 0, 400, STG_NET_NONE, STG_METHOD_GET, false, &h);
    assert_int_equal(d.action, STG_ACTION_RETRY);
    d = decide(&p, 1, 0, 400, STG_NET_NONE, STG_METHOD_POST, false, &h);
    assert_int_equal(d.reason, STG_REASON_METHOD_NOT_IDEMPOTENT);
    h = hints_of(NULL, stripe);
    d = decide(&p, 1, 0, 409, STG_NET_NONE, STG_METHOD_POST, true, &h);
    assert_int_equal(d.action, STG_ACTION_RETRY);
    h = hints_of(NULL, both);
    assert_int_equal(h.verdict, STG_VERDICT_STOP);
    /* A success stays a success, whatever the verdict. */
    d = decide(&p, 1, 0, 200, STG_NET_NONE, STG_METHOD_GET, false, &h);
    assert_int_equal(d.action, STG_ACTION_SUCCESS);
}

/* Rule 4: a refusal (429, 529, a rate-limit 403) is retried for every
 * method by default; other failures keep the method rule; the verdict
 * "false" still wins; no_retry_refusals restores the method rule. */
static void test_refusals_any_method(void **state)
{
    (void)state;
    stg_policy p = {0};
    stg_hints ra = retry_after(STG_SEC(2));
    static const stg_method unsafe[] = {STG_METHOD_POST, STG_METHOD_PATCH, STG_METHOD_CONNECT,
                                        STG_METHOD_UNKNOWN};
    for (size_t i = 0; i < sizeof unsafe / sizeof unsafe[0]; i++) {
        stg_method m = unsafe[i];
        stg_decision d = decide(&p, 1, 0, 429, STG_NET_NONE, m, false, NULL);
        assert_int_equal(d.action, STG_ACTION_RETRY);
        assert_int_equal(d.reason, STG_REASON_RETRY_STATUS);
        /* A throttle: backed off from the throttle base (1 s, full jitter). */
        assert_true(d.wait_us >= 0 && d.wait_us <= STG_SEC(1));
        d = decide(&p, 1, 0, 529, STG_NET_NONE, m, false, NULL);
        assert_int_equal(d.action, STG_ACTION_RETRY);
        /* The hint is honoured as for any retry: never before it. */
        d = decide(&p, 2, STG_SEC(3), 429, STG_NET_NONE, m, false, &ra);
        assert_int_equal(d.action, STG_ACTION_RETRY);
        assert_true(d.used_hint);
        assert_true(d.wait_us >= STG_SEC(2));
        /* A 403 with a Retry-After is a rate limit, so a refusal. */
        d = decide(&p, 1, 0, 403, STG_NET_NONE, m, false, &ra);
        assert_int_equal(d.action, STG_ACTION_RETRY);
        /* A plain 403 is not retried at all. */
        d = decide(&p, 1, 0, 403, STG_NET_NONE, m, false, NULL);
        assert_int_equal(d.reason, STG_REASON_STATUS_NOT_RETRYABLE);
        /* Attempts and the deadline still bound it. */
        d = decide(&p, 6, 0, 429, STG_NET_NONE, m, false, NULL);
        assert_int_equal(d.reason, STG_REASON_ATTEMPTS_EXHAUSTED);
        d = decide(&p, 2, STG_SEC(59), 429, STG_NET_NONE, m, false, &ra);
        assert_int_equal(d.reason, STG_REASON_SERVER_WAIT_TOO_LONG);
    }
    /* What may have been processed keeps the method rule: other statuses
     * (a 503 even with a Retry-After) and failures after the request left. */
    static const int processed[] = {408, 500, 502, 503, 504};
    for (size_t i = 0; i < sizeof processed / sizeof processed[0]; i++) {
        stg_decision d = decide(&p, 1, 0, processed[i], STG_NET_NONE, STG_METHOD_POST, false, &ra);
        if (d.reason != STG_REASON_METHOD_NOT_IDEMPOTENT)
            fail_msg("POST %d: got %s", processed[i], stg_reason_name(d.reason));
    }
    assert_int_equal(decide(&p, 1, 0, 0, STG_NET_TIMEOUT, STG_METHOD_POST, false, NULL).reason,
                     STG_REASON_METHOD_NOT_IDEMPOTENT);
    assert_int_equal(decide(&p, 1, 0, 0, STG_NET_RESET, STG_METHOD_PATCH, false, NULL).reason,
                     STG_REASON_METHOD_NOT_IDEMPOTENT);
    /* A 5xx whose body names a refusal (overloaded_error on a 500 or 503,
     * STG_HINTS_THROTTLE) is one too; a plain 503 is not (above). */
    stg_hints over;
    stg_hints_init(&over);
    over.flags |= STG_HINTS_THROTTLE;
    assert_int_equal(decide(&p, 1, 0, 500, STG_NET_NONE, STG_METHOD_POST, false, &over).action,
                     STG_ACTION_RETRY);
    assert_int_equal(decide(&p, 1, 0, 503, STG_NET_NONE, STG_METHOD_POST, false, &over).action,
                     STG_ACTION_RETRY);
    assert_true(stg_status_refused(503, &over));
    assert_false(stg_status_refused(503, &ra));
    assert_false(stg_status_refused(400, &over));
    /* A body that says no wait cures it gives the answer back first. */
    stg_hints hard;
    stg_hints_init(&hard);
    hard.flags |= STG_HINTS_HARD_STOP;
    assert_int_equal(decide(&p, 1, 0, 429, STG_NET_NONE, STG_METHOD_POST, false, &hard).reason,
                     STG_REASON_HARD_STOP);
    /* The server's "do not retry" comes first (rule 3). */
    static const char *const no[] = {"x-should-retry: false", NULL};
    stg_hints stop = hints_of(NULL, no);
    assert_int_equal(decide(&p, 1, 0, 429, STG_NET_NONE, STG_METHOD_POST, false, &stop).reason,
                     STG_REASON_SERVER_VERDICT);
    assert_int_equal(decide(&p, 1, 0, 529, STG_NET_NONE, STG_METHOD_GET, false, &stop).reason,
                     STG_REASON_SERVER_VERDICT);
    /* A 429 the policy does not retry is not retried for POST either. */
    stg_policy only503 = {0};
    stg_status_set_add(&only503.retry_statuses, 503);
    assert_int_equal(
        decide(&only503, 1, 0, 429, STG_NET_NONE, STG_METHOD_POST, false, NULL).reason,
        STG_REASON_STATUS_NOT_RETRYABLE);
    /* Off: a refusal is retried by method, as any other status. */
    p.no_retry_refusals = true;
    assert_int_equal(decide(&p, 1, 0, 429, STG_NET_NONE, STG_METHOD_POST, false, NULL).reason,
                     STG_REASON_METHOD_NOT_IDEMPOTENT);
    assert_int_equal(decide(&p, 1, 0, 529, STG_NET_NONE, STG_METHOD_PATCH, false, NULL).reason,
                     STG_REASON_METHOD_NOT_IDEMPOTENT);
    assert_int_equal(decide(&p, 1, 0, 403, STG_NET_NONE, STG_METHOD_POST, false, &ra).reason,
                     STG_REASON_METHOD_NOT_IDEMPOTENT);
    assert_int_equal(decide(&p, 1, 0, 429, STG_NET_NONE, STG_METHOD_POST, true, NULL).action,
                     STG_ACTION_RETRY);
    assert_int_equal(decide(&p, 1, 0, 429, STG_NET_NONE, STG_METHOD_GET, false, NULL).action,
                     STG_ACTION_RETRY);
    /* resolve keeps the field as given. */
    stg_policy r;
    assert_int_equal(stg_policy_resolve(&p, &r), STG_OK);
    assert_true(r.no_retry_refusals);
    stg_policy zero = {0};
    assert_int_equal(stg_policy_resolve(&zero, &r), STG_OK);
    assert_false(r.no_retry_refusals);
}

/* No Retry-After, quotas spent: the longest reset of a spent quota is the
 * server's wait; an unspent quota's reset does not count. */
static void test_spent_quota_waits(void **state)
{
    (void)state;
    stg_policy exact = {.retry_after_mode = STG_RETRY_AFTER_EXACT, .max_server_wait_us = -1,
                        .deadline_us = -1};
    stg_policy dflt = {0};
    static const char *const both[] = {
        "x-ratelimit-remaining-requests: 0", "x-ratelimit-reset-requests: 1s",
        "x-ratelimit-remaining-tokens: 0", "x-ratelimit-reset-tokens: 6m0s", NULL};
    static const char *const one[] = {
        "x-ratelimit-remaining-requests: 0", "x-ratelimit-reset-requests: 1s",
        "x-ratelimit-remaining-tokens: 100", "x-ratelimit-reset-tokens: 6m0s", NULL};
    stg_quota_set qs;
    stg_hints h = hints_of(&qs, both);
    stg_decision d = decide(&exact, 1, 0, 429, STG_NET_NONE, STG_METHOD_GET, false, &h);
    assert_int_equal(d.wait_us, STG_SEC(360));
    d = decide(&dflt, 1, 0, 429, STG_NET_NONE, STG_METHOD_GET, false, &h);
    assert_int_equal(d.reason, STG_REASON_SERVER_WAIT_TOO_LONG);
    h = hints_of(&qs, one);
    d = decide(&exact, 1, 0, 429, STG_NET_NONE, STG_METHOD_GET, false, &h);
    assert_int_equal(d.wait_us, STG_SEC(1));
    /* Without a set the pairing errs long, never short. */
    h = hints_of(NULL, one);
    d = decide(&exact, 1, 0, 429, STG_NET_NONE, STG_METHOD_GET, false, &h);
    assert_true(d.wait_us >= STG_SEC(1));
}

/* What a body says (stg_hints_body): a hard stop gives the answer back at
 * once, before any other rule and whatever the verdict or the key; the
 * body's wait is a hint like Retry-After; an overload named on a 5xx is a
 * throttle. */
static void test_body_facts(void **state)
{
    (void)state;
    stg_policy p = {0};
    static const char *const yes[] = {"x-should-retry: true", "Retry-After: 1", NULL};
    stg_hints h = hints_of(NULL, yes);
    assert_int_equal(stg_hints_body(&h, 429, STG_DIALECT_OPENAI, STG_BODY_ERROR_CODE,
                                    "insufficient_quota", 18),
                     STG_OK);
    stg_decision d = decide(&p, 1, 0, 429, STG_NET_NONE, STG_METHOD_GET, false, &h);
    assert_int_equal(d.action, STG_ACTION_GIVE_UP);
    assert_int_equal(d.reason, STG_REASON_HARD_STOP);
    assert_string_equal(stg_reason_name(d.reason), "hard_stop");
    d = decide(&p, 1, 0, 429, STG_NET_NONE, STG_METHOD_POST, true, &h);
    assert_int_equal(d.reason, STG_REASON_HARD_STOP);
    d = decide(&p, 1, 0, 200, STG_NET_NONE, STG_METHOD_GET, false, &h);
    assert_int_equal(d.action, STG_ACTION_SUCCESS);

    /* Google's wait on a 503: a throttle, waited out. */
    stg_hints_init(&h);
    assert_false(stg_status_throttled(503, &h));
    assert_int_equal(stg_hints_body(&h, 503, STG_DIALECT_GOOGLE, STG_BODY_RETRY_DELAY, "4s", 2),
                     STG_OK);
    assert_true(stg_status_throttled(503, &h));
    assert_int_equal(stg_fault_classify(503, STG_NET_NONE, &h), STG_FAULT_THROTTLE);
    d = decide(&p, 1, 0, 503, STG_NET_NONE, STG_METHOD_GET, false, &h);
    assert_int_equal(d.action, STG_ACTION_RETRY);
    assert_true(d.used_hint);
    assert_true(d.wait_us >= STG_SEC(4));

    /* Anthropic's overloaded_error on a 500: a throttle, backed off from
     * the throttle base (1 s), not the transient one (50 ms). */
    stg_hints_init(&h);
    assert_int_equal(stg_fault_classify(500, STG_NET_NONE, &h), STG_FAULT_TRANSIENT);
    assert_int_equal(stg_hints_body(&h, 500, STG_DIALECT_ANTHROPIC, STG_BODY_ERROR_TYPE,
                                    "overloaded_error", 16),
                     STG_OK);
    assert_int_equal(stg_fault_classify(500, STG_NET_NONE, &h), STG_FAULT_THROTTLE);
    assert_true(stg_status_throttled(500, &h));
    d = decide(&p, 1, 0, 500, STG_NET_NONE, STG_METHOD_GET, false, &h);
    assert_int_equal(d.action, STG_ACTION_RETRY);
    assert_int_equal(d.wait_max_us, STG_SEC(1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_statuses),
        cmocka_unit_test(test_body_facts),
        cmocka_unit_test(test_transport_errors),
        cmocka_unit_test(test_methods),
        cmocka_unit_test(test_attempts),
        cmocka_unit_test(test_backoff_wait),
        cmocka_unit_test(test_honor),
        cmocka_unit_test(test_modes),
        cmocka_unit_test(test_fault_classes),
        cmocka_unit_test(test_server_wait_too_long),
        cmocka_unit_test(test_ratelimit_reset_as_hint),
        cmocka_unit_test(test_deadline),
        cmocka_unit_test(test_cancelled_and_invalid),
        cmocka_unit_test(test_custom_statuses),
        cmocka_unit_test(test_status_set_parse),
        cmocka_unit_test(test_presets),
        cmocka_unit_test(test_invariants),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_oversized_hint_gives_up),
        cmocka_unit_test(test_decimal_retry_after),
        cmocka_unit_test(test_lenient_dates),
        cmocka_unit_test(test_529_and_throttled),
        cmocka_unit_test(test_403_rules),
        cmocka_unit_test(test_github_secondary),
        cmocka_unit_test(test_verdicts),
        cmocka_unit_test(test_spent_quota_waits),
        cmocka_unit_test(test_refusals_any_method),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
