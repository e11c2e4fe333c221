/*
 * Unit tests of the event sinks: the JSON-lines logger (every line parses,
 * keys as documented, 429 and 503 told apart) and the Prometheus metrics
 * (counts, classes, histogram, label escaping, atomic write), fed with
 * synthetic events.
 */
#define _POSIX_C_SOURCE 200809L
#if defined(__has_include) && !__has_include(<curl/curl.h>)
/* libstagger-curl is not built here (no libcurl): nothing to test. */
#include <stdio.h>
int main(void);
int main(void)
{
    puts("skipped: libstagger-curl is not built (no libcurl)");
    return 77; /* SKIP_RETURN_CODE: ctest reports it skipped */
}
#else
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cmocka_all.h"

#include <stagger/curl.h>

static stg_event ev_of(stg_event_type type)
{
    stg_event e;
    memset(&e, 0, sizeof e);
    e.type = type;
    e.request_id = 7;
    e.now_us = 1000;
    e.wall_us = INT64_C(1700000000123456);
    e.method = "GET";
    e.url = "http://h/p?k=REDACTED";
    e.host = "h";
    e.attempt = 1;
    e.retry_after_us = STG_UNKNOWN;
    return e;
}

static char *slurp(FILE *f)
{
    long n = ftell(f);
    rewind(f);
    char *s = calloc(1, (size_t)n + 1);
    assert_non_null(s);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    return s;
}

static void test_logger_lines(void **state)
{
    (void)state;
    FILE *f = tmpfile();
    assert_non_null(f);
    stg_logger *l = stg_logger_new(f);
    assert_non_null(l);
    stg_event e = ev_of(STG_EVENT_ATTEMPT_END);
    e.status = 429;
    e.retry_after_us = STG_SEC(2);
    e.duration_us = 1500;
    e.final_url = "http://h/p?k=REDACTED";
    stg_log_event(&e, l);
    e.status = 503;
    stg_log_event(&e, l);
    stg_event w = ev_of(STG_EVENT_WAIT);
    w.status = 503;
    w.wait_us = STG_MS(2100);
    w.reason = STG_REASON_RETRY_STATUS;
    stg_log_event(&w, l);
    stg_event g = ev_of(STG_EVENT_GIVE_UP);
    g.attempt = 2;
    g.error = STG_NET_RESET;
    g.curl_code = 56;
    g.reason = STG_REASON_ATTEMPTS_EXHAUSTED;
    g.duration_us = STG_MS(3);
    stg_log_event(&g, l);
    stg_event b = ev_of(STG_EVENT_BREAKER);
    b.breaker_from = STG_BREAKER_CLOSED;
    b.breaker_to = STG_BREAKER_OPEN;
    stg_log_event(&b, l);
    stg_log_event(NULL, l);
    stg_log_event(&b, NULL);
    stg_logger_free(l);

    char *text = slurp(f);
    fclose(f);
    json_t *lines[5];
    char *save = NULL, *p = strtok_r(text, "\n", &save);
    int n = 0;
    for (; p; p = strtok_r(NULL, "\n", &save)) {
        assert_true(n < 5);
        json_error_t err;
        lines[n] = json_loads(p, 0, &err);
        if (!lines[n])
            fail_msg("line %d does not parse: %s", n, p);
        n++;
    }
    assert_int_equal(n, 5);
    assert_string_equal(json_string_value(json_object_get(lines[0], "status_class")), "quota");
    assert_string_equal(json_string_value(json_object_get(lines[1], "status_class")), "outage");
    assert_true(json_real_value(json_object_get(lines[0], "retry_after_ms")) == 2000.0);
    assert_string_equal(json_string_value(json_object_get(lines[0], "ts")),
                        "2023-11-14T22:13:20.123456Z");
    assert_string_equal(json_string_value(json_object_get(lines[0], "event")), "attempt_end");
    assert_int_equal(json_integer_value(json_object_get(lines[0], "id")), 7);
    assert_true(json_real_value(json_object_get(lines[2], "wait_ms")) == 2100.0);
    assert_string_equal(json_string_value(json_object_get(lines[2], "outcome")), "retry");
    assert_string_equal(json_string_value(json_object_get(lines[3], "error")), "reset");
    assert_true(json_is_null(json_object_get(lines[3], "status")));
    assert_string_equal(json_string_value(json_object_get(lines[3], "reason")),
                        "attempts_exhausted");
    assert_string_equal(json_string_value(json_object_get(lines[3], "outcome")), "give_up");
    assert_string_equal(json_string_value(json_object_get(lines[4], "breaker_to")), "open");
    for (int i = 0; i < n; i++)
        json_decref(lines[i]);
    free(text);
}

static void test_metrics(void **state)
{
    (void)state;
    stg_metrics *m = stg_metrics_new();
    assert_non_null(m);
    stg_event e = ev_of(STG_EVENT_ATTEMPT_END);
    int statuses[] = {200, 429, 429, 503, 404, 500};
    for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++) {
        e.status = statuses[i];
        e.duration_us = STG_MS(20);
        stg_metrics_event(&e, m);
    }
    e.status = 0;
    e.error = STG_NET_TIMEOUT;
    stg_metrics_event(&e, m);
    stg_event w = ev_of(STG_EVENT_WAIT);
    w.reason = STG_REASON_RETRY_STATUS;
    w.status = 429;
    w.wait_us = STG_MS(300);
    stg_metrics_event(&w, m);
    w.reason = STG_REASON_RETRY_ERROR;
    w.status = 0;
    w.error = STG_NET_TIMEOUT;
    w.wait_us = STG_SEC(200);
    stg_metrics_event(&w, m);
    stg_event g = ev_of(STG_EVENT_GIVE_UP);
    g.reason = STG_REASON_DEADLINE;
    stg_metrics_event(&g, m);
    stg_metrics_event(&g, m);
    stg_event s = ev_of(STG_EVENT_SUCCESS);
    stg_metrics_event(&s, m);
    stg_event lw = ev_of(STG_EVENT_LIMITER_WAIT);
    lw.wait_us = STG_MS(40);
    stg_metrics_event(&lw, m);
    stg_event b = ev_of(STG_EVENT_BREAKER);
    b.host = "we\"ird\\host\n";
    b.breaker_to = STG_BREAKER_OPEN;
    stg_metrics_event(&b, m);

    FILE *f = tmpfile();
    assert_int_equal(stg_metrics_print(m, f), STG_OK);
    char *t = slurp(f);
    fclose(f);
    const char *want[] = {
        "stagger_attempts_total{class=\"2xx\"} 1\n",
        "stagger_attempts_total{class=\"quota\"} 2\n",
        "stagger_attempts_total{class=\"outage\"} 1\n",
        "stagger_attempts_total{class=\"4xx\"} 1\n",
        "stagger_attempts_total{class=\"5xx\"} 1\n",
        "stagger_attempts_total{class=\"error\"} 1\n",
        "stagger_retries_total{reason=\"retry_status\",cause=\"429\"} 1\n",
        "stagger_retries_total{reason=\"retry_error\",cause=\"timeout\"} 1\n",
        "stagger_give_ups_total{reason=\"deadline\"} 2\n",
        "stagger_successes_total 1\n",
        "stagger_retry_wait_seconds_bucket{le=\"0.25\"} 0\n",
        "stagger_retry_wait_seconds_bucket{le=\"0.5\"} 1\n",
        "stagger_retry_wait_seconds_bucket{le=\"120\"} 1\n",
        "stagger_retry_wait_seconds_bucket{le=\"+Inf\"} 2\n",
        "stagger_retry_wait_seconds_count 2\n",
        "stagger_limiter_wait_seconds_bucket{le=\"0.05\"} 1\n",
        "stagger_attempt_duration_seconds_count 7\n",
        "stagger_breaker_state{host=\"we\\\"ird\\\\host\\n\"} 1\n",
        "# TYPE stagger_retry_wait_seconds histogram\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(t, want[i]))
            fail_msg("missing line %s in:\n%s", want[i], t);
    free(t);

    char dir[] = "/tmp/stg_metrics_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/m.prom", dir);
    assert_int_equal(stg_metrics_write(m, path), STG_OK);
    assert_int_equal(access(path, R_OK), 0);
    char bad[160];
    snprintf(bad, sizeof bad, "%s/missing/m.prom", dir);
    assert_int_equal(stg_metrics_write(m, bad), STG_EIO);
    unlink(path);
    assert_int_equal(rmdir(dir), 0); /* no temp file left behind */
    stg_metrics_free(m);
    stg_metrics_free(NULL);
}

static int count_a, count_b;
static void sink_a(const stg_event *ev, void *d)
{
    (void)ev;
    (void)d;
    count_a++;
}
static void sink_b(const stg_event *ev, void *d)
{
    (void)ev;
    count_b += *(int *)d;
}

static void test_fanout(void **state)
{
    (void)state;
    int two = 2;
    stg_event_fanout f = {.fn = {sink_a, sink_b}, .data = {NULL, &two}, .n = 2};
    stg_event e = ev_of(STG_EVENT_SUCCESS);
    stg_event_fanout_cb(&e, &f);
    stg_event_fanout_cb(&e, &f);
    assert_int_equal(count_a, 2);
    assert_int_equal(count_b, 4);
    assert_string_equal(stg_event_type_name(STG_EVENT_LIMITER_WAIT), "limiter_wait");
    assert_string_equal(stg_event_type_name((stg_event_type)99), "unknown");
}

/* The learned concurrency per host: the latest limit an event of the host
 * carried; hosts without one have no line; never-processed attempts count. */
static void test_metrics_concurrency(void **state)
{
    (void)state;
    stg_metrics *m = stg_metrics_new();
    assert_non_null(m);
    stg_event e = ev_of(STG_EVENT_ATTEMPT_END);
    e.status = 200;
    e.host = "api.a";
    e.concurrency_limit = 12;
    stg_metrics_event(&e, m);
    e.concurrency_limit = 9; /* cut: the gauge follows */
    stg_metrics_event(&e, m);
    stg_event st = ev_of(STG_EVENT_ATTEMPT_START);
    st.host = "api.a";
    st.concurrency_limit = 7; /* any event of the host carries it */
    stg_metrics_event(&st, m);
    e.host = "api.b";
    e.concurrency_limit = 0; /* fixed concurrency */
    e.status = 0;
    e.error = STG_NET_RESET;
    e.never_processed = true;
    stg_metrics_event(&e, m);
    e.never_processed = false;
    stg_metrics_event(&e, m);

    FILE *f = tmpfile();
    assert_int_equal(stg_metrics_print(m, f), STG_OK);
    char *t = slurp(f);
    fclose(f);
    if (!strstr(t, "# TYPE stagger_concurrency_limit gauge\n"
                   "stagger_concurrency_limit{host=\"api.a\"} 7\n"))
        fail_msg("no gauge for api.a at 7 in:\n%s", t);
    assert_null(strstr(t, "stagger_concurrency_limit{host=\"api.b\"}"));
    assert_non_null(strstr(t, "stagger_never_processed_total 1\n"));
    /* No breaker event named api.a: no breaker line for it. */
    assert_null(strstr(t, "stagger_breaker_state{host=\"api.a\"}"));
    free(t);
    stg_metrics_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_logger_lines),
        cmocka_unit_test(test_metrics),
        cmocka_unit_test(test_metrics_concurrency),
        cmocka_unit_test(test_fanout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
