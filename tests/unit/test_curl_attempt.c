/*
 * Unit tests of the attempt step shared by stg_curl_perform and the engine
 * (attempt.c) and of the redirect rules (redirect.c): a deterministic
 * failure is never retried whatever the policy; a redirect is a hop (not a
 * retry, not counted against max_attempts) until max_redirects; the method
 * after 301/302/303/307/308 as curl does it; origins compared with
 * default ports; secret headers dropped for another origin. Pure: fixed
 * clock, seeded RNG, no network.
 */
#if defined(__has_include) && !__has_include(<curl/curl.h>)
#include <stdio.h>
int main(void);
int main(void)
{
    puts("skipped: libstagger-curl is not built (no libcurl)");
    return 77; /* SKIP_RETURN_CODE: ctest reports it skipped */
}
#else
#include <string.h>

#include "cmocka_all.h"

#include <stagger/curl.h>

#include "curl/internal.h"

typedef struct seen {
    int reports, ends;
    stg_event last;
} seen;

static void on_report(void *ctx, const stg__attempt *a, const stg_hints *h)
{
    (void)a;
    (void)h;
    ((seen *)ctx)->reports++;
}

static void on_event(const stg_event *ev, void *data)
{
    seen *s = data;
    if (ev->type == STG_EVENT_ATTEMPT_END)
        s->ends++;
    s->last = *ev;
}

static stg__attempt answer(int status, stg_net_error err)
{
    stg__attempt a;
    memset(&a, 0, sizeof a);
    a.status = status;
    a.err = err;
    a.hint = STG_UNKNOWN;
    return a;
}

/* Run one step with policy p (all-errors retry) at attempt n. */
static void step(stg__attempt *a, stg_policy *p, int attempts, int hops, bool follow,
                 stg_method m, seen *s, stg_decision *d)
{
    stg_rng rng;
    stg_rng_seed(&rng, 42);
    stg_retry_state rs = {.attempts = attempts, .start_us = 0, .prev_wait_us = 0};
    stg_hints h;
    stg_hints_init(&h);
    stg_event ev;
    memset(&ev, 0, sizeof ev);
    stg__step st = {.pol = p,
                    .rs = &rs,
                    .hops = hops,
                    .rng = &rng,
                    .now_us = STG_MS(10),
                    .method = m,
                    .origin_url = "http://a.example:8080/x",
                    .follow = follow,
                    .max_redirects = 3,
                    .report = on_report,
                    .report_ctx = s,
                    .ev = &ev,
                    .on_event = on_event,
                    .event_data = s};
    stg__attempt_step(&st, a, &h, d);
}

static void test_deterministic_never_retried(void **state)
{
    (void)state;
    stg_policy p = {0};
    p.max_attempts = 6;
    p.retry_errors = 0xff; /* even OTHER would be retried by the policy */
    seen s = {0};
    stg_decision d;
    stg__attempt a = answer(200, STG_NET_OTHER);
    step(&a, &p, 1, 0, false, STG_METHOD_GET, &s, &d);
    assert_int_equal(d.action, STG_ACTION_RETRY); /* the policy alone retries it */
    a = answer(200, STG_NET_OTHER);
    a.deterministic = true;
    step(&a, &p, 1, 0, false, STG_METHOD_GET, &s, &d);
    assert_int_equal(d.action, STG_ACTION_GIVE_UP);
    assert_int_equal(d.reason, STG_REASON_ERROR_NOT_RETRYABLE);
    assert_int_equal(s.reports, 2);
    assert_int_equal(s.ends, 2);
    assert_int_equal(s.last.status, 200);
    assert_int_equal(s.last.error, STG_NET_OTHER);
}

static void test_redirect_hops(void **state)
{
    (void)state;
    stg_policy p = {0};
    p.max_attempts = 2;
    seen s = {0};
    stg_decision d;
    stg__attempt a = answer(302, STG_NET_NONE);
    snprintf(a.redirect_url, sizeof a.redirect_url, "http://b.example:8080/y");
    /* Not following: a 3xx is the answer. */
    step(&a, &p, 1, 0, false, STG_METHOD_POST, &s, &d);
    assert_int_equal(d.action, STG_ACTION_SUCCESS);
    assert_false(a.redirect);
    /* Following: a hop, POST -> GET, to another origin; attempts beyond
     * max_attempts are fine when they are hops. */
    step(&a, &p, 3, 2, true, STG_METHOD_POST, &s, &d);
    assert_int_equal(d.action, STG_ACTION_RETRY);
    assert_int_equal(d.wait_us, 0);
    assert_true(a.redirect);
    assert_int_equal(a.redirect_method, STG_METHOD_GET);
    assert_true(a.redirect_cross_origin);
    /* Only http and https. */
    a = answer(301, STG_NET_NONE);
    snprintf(a.redirect_url, sizeof a.redirect_url, "file:///etc/passwd");
    step(&a, &p, 1, 0, true, STG_METHOD_GET, &s, &d);
    assert_int_equal(d.action, STG_ACTION_GIVE_UP);
    assert_false(a.redirect);
    assert_non_null(strstr(a.errtext, "not http"));
    /* The hop limit. */
    a = answer(302, STG_NET_NONE);
    snprintf(a.redirect_url, sizeof a.redirect_url, "http://a.example:8080/z");
    step(&a, &p, 4, 3, true, STG_METHOD_GET, &s, &d);
    assert_int_equal(d.action, STG_ACTION_GIVE_UP);
    assert_false(a.redirect);
    assert_non_null(strstr(a.errtext, "too many redirects"));
    /* A 503 after two hops is the first real attempt: retried even with
     * max_attempts 2 (attempts 3 - hops 2 = 1). */
    a = answer(503, STG_NET_NONE);
    step(&a, &p, 3, 2, true, STG_METHOD_GET, &s, &d);
    assert_int_equal(d.action, STG_ACTION_RETRY);
    assert_true(d.wait_us > 0);
}

static void test_redirect_method(void **state)
{
    (void)state;
    assert_int_equal(stg__redirect_method(303, STG_METHOD_POST), STG_METHOD_GET);
    assert_int_equal(stg__redirect_method(303, STG_METHOD_PUT), STG_METHOD_GET);
    assert_int_equal(stg__redirect_method(303, STG_METHOD_HEAD), STG_METHOD_HEAD);
    assert_int_equal(stg__redirect_method(301, STG_METHOD_POST), STG_METHOD_GET);
    assert_int_equal(stg__redirect_method(302, STG_METHOD_POST), STG_METHOD_GET);
    assert_int_equal(stg__redirect_method(302, STG_METHOD_PUT), STG_METHOD_PUT);
    assert_int_equal(stg__redirect_method(307, STG_METHOD_POST), STG_METHOD_POST);
    assert_int_equal(stg__redirect_method(308, STG_METHOD_PATCH), STG_METHOD_PATCH);
}

static void test_cross_origin(void **state)
{
    (void)state;
    assert_false(stg__cross_origin("http://h.example/a", "http://h.example:80/b?q=1"));
    assert_false(stg__cross_origin("https://H.example/a", "https://h.example:443/"));
    assert_false(stg__cross_origin("http://127.0.0.1:8080/", "http://127.0.0.1:8080/x"));
    assert_true(stg__cross_origin("http://127.0.0.1:8080/", "http://127.0.0.1:8081/"));
    assert_true(stg__cross_origin("http://h.example/", "https://h.example/"));
    assert_true(stg__cross_origin("http://h.example/", "http://g.example/"));
    assert_true(stg__cross_origin("http://h.example/", "http://h.example.evil/"));
    assert_true(stg__cross_origin("http://h.example/", NULL));
    assert_true(stg__cross_origin("http://h.example/", "http://[::1/"));
}

static void test_headers_without_secrets(void **state)
{
    (void)state;
    const char *in[] = {"X-Api-Key: k", "Authorization: Bearer a", "X-Auth-Token: t",
                        "Proxy-Authorization: p", "Cookie: c=1", "X-Mine: m", "X-Mine2;",
                        "Accept: */*", "X-Plain : v", NULL};
    struct curl_slist *l = NULL;
    for (int i = 0; in[i]; i++)
        l = curl_slist_append(l, in[i]);
    const char *extra[] = {"x-mine", NULL};
    bool ok = false;
    struct curl_slist *out = stg__headers_without_secrets(l, extra, &ok);
    assert_true(ok);
    assert_non_null(out);
    assert_string_equal(out->data, "X-Mine2;");
    assert_non_null(out->next);
    assert_string_equal(out->next->data, "Accept: */*");
    assert_non_null(out->next->next);
    assert_string_equal(out->next->next->data, "X-Plain : v");
    assert_null(out->next->next->next);
    curl_slist_free_all(out);
    curl_slist_free_all(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deterministic_never_retried),
        cmocka_unit_test(test_redirect_hops),
        cmocka_unit_test(test_redirect_method),
        cmocka_unit_test(test_cross_origin),
        cmocka_unit_test(test_headers_without_secrets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
