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
    /* OpenTelemetry's names: a failed attempt's error.type; no resend
     * count on a first send. */
    assert_string_equal(json_string_value(json_object_get(lines[0], "error.type")), "429");
    assert_null(json_object_get(lines[0], "http.request.resend_count"));
    for (int i = 0; i < n; i++)
        json_decref(lines[i]);
    free(text);
}

/* The second attempt's lines carry http.request.resend_count 1 (any
 * resend counts, as OpenTelemetry's HTTP client convention says); a
 * transport error is its error.type; a success has none. */
static void test_logger_otel(void **state)
{
    (void)state;
    FILE *f = tmpfile();
    assert_non_null(f);
    stg_logger *l = stg_logger_new(f);
    stg_event s = ev_of(STG_EVENT_ATTEMPT_START);
    s.attempt = 2;
    stg_log_event(&s, l);
    stg_event e = ev_of(STG_EVENT_ATTEMPT_END);
    e.attempt = 3;
    e.error = STG_NET_RESET;
    stg_log_event(&e, l);
    e.error = STG_NET_NONE;
    e.status = 200;
    stg_log_event(&e, l);
    stg_event w = ev_of(STG_EVENT_WAITED);
    stg_event_more more = {.waited_for = "quota"};
    w.more = &more;
    w.wait_us = STG_MS(40);
    stg_log_event(&w, l);
    stg_logger_free(l);
    char *text = slurp(f);
    fclose(f);
    char *save = NULL;
    json_t *a = json_loads(strtok_r(text, "\n", &save), 0, NULL);
    json_t *b = json_loads(strtok_r(NULL, "\n", &save), 0, NULL);
    json_t *c = json_loads(strtok_r(NULL, "\n", &save), 0, NULL);
    json_t *d = json_loads(strtok_r(NULL, "\n", &save), 0, NULL);
    assert_non_null(a), assert_non_null(b), assert_non_null(c), assert_non_null(d);
    assert_int_equal(json_integer_value(json_object_get(a, "http.request.resend_count")), 1);
    assert_int_equal(json_integer_value(json_object_get(b, "http.request.resend_count")), 2);
    assert_string_equal(json_string_value(json_object_get(b, "error.type")), "reset");
    assert_null(json_object_get(c, "error.type"));
    assert_string_equal(json_string_value(json_object_get(d, "event")), "waited");
    assert_string_equal(json_string_value(json_object_get(d, "waited_for")), "quota");
    assert_true(json_real_value(json_object_get(d, "wait_ms")) == 40.0);
    assert_null(json_object_get(d, "http.request.resend_count"));
    json_decref(a), json_decref(b), json_decref(c), json_decref(d);
    free(text);
}

/* Where the time goes: WAITED events by what for, in stagger_wait_seconds
 * and the JSON; attempts per host; in flight; the learned rate; a source's
 * series after the metrics' own. */
static void extra_source(FILE *f, void *data)
{
    fprintf(f, "stagger_extra %d\n", *(int *)data);
}

static void test_metrics_waits(void **state)
{
    (void)state;
    stg_metrics *m = stg_metrics_new();
    stg_event_more more = {.learned_rate = 4.5};
    stg_event s = ev_of(STG_EVENT_ATTEMPT_START);
    s.more = &more;
    stg_metrics_event(&s, m);
    stg_metrics_event(&s, m);
    stg_event e = ev_of(STG_EVENT_ATTEMPT_END);
    e.status = 429;
    stg_metrics_event(&e, m);
    const char *why[] = {"quota", "backoff", "quota", "nonsense"};
    int64_t us[] = {STG_MS(250), STG_SEC(2), STG_MS(750), STG_SEC(9)};
    for (int i = 0; i < 4; i++) {
        stg_event w = ev_of(STG_EVENT_WAITED);
        stg_event_more wm = {.waited_for = why[i]};
        w.more = &wm;
        w.wait_us = us[i];
        stg_metrics_event(&w, m);
    }
    stg_event ok = ev_of(STG_EVENT_SUCCESS);
    ok.duration_us = STG_SEC(3);
    stg_metrics_event(&ok, m);
    int extra = 42;
    assert_int_equal(stg_metrics_add_source(m, extra_source, &extra), STG_OK);
    assert_int_equal(stg_metrics_add_source(m, NULL, NULL), STG_EINVAL);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(stg_metrics_print(m, f), STG_OK);
    fclose(f);
    const char *want[] = {
        "stagger_wait_seconds_sum{reason=\"quota\"} 1.000000\n",
        "stagger_wait_seconds_count{reason=\"quota\"} 2\n",
        "stagger_wait_seconds_sum{reason=\"backoff\"} 2.000000\n",
        "stagger_wait_seconds_count{reason=\"slot\"} 0\n",
        "stagger_request_duration_seconds_sum 3.000000\n",
        "stagger_attempts_in_flight 1\n",
        "stagger_host_attempts_total{host=\"h\",class=\"quota\"} 1\n",
        "stagger_learned_rate{host=\"h\"} 4.500\n",
        "stagger_extra 42\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(buf, want[i]))
            fail_msg("missing %s in:\n%s", want[i], buf);
    free(buf);
    char *js = stg_metrics_json(m);
    json_t *j = json_loads(js, 0, NULL);
    assert_non_null(j);
    json_t *q = json_object_get(json_object_get(j, "waits"), "quota");
    assert_int_equal(json_integer_value(json_object_get(q, "count")), 2);
    assert_true(json_real_value(json_object_get(q, "seconds")) == 1.0);
    assert_int_equal(json_integer_value(json_object_get(j, "in_flight")), 1);
    json_t *h = json_object_get(json_object_get(j, "hosts"), "h");
    assert_true(json_real_value(json_object_get(h, "learned_rate")) == 4.5);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(h, "attempts"), "quota")), 1);
    json_decref(j);
    free(js);
    stg_metrics_free(m);
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
        cmocka_unit_test(test_logger_otel),
        cmocka_unit_test(test_metrics_waits),
        cmocka_unit_test(test_metrics),
        cmocka_unit_test(test_metrics_concurrency),
        cmocka_unit_test(test_fanout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
