/*
 * Body sinks (stg_body_fn): response bodies streamed to their destination
 * by stg_curl_perform and stg_engine, against stg_hostile (pattern-body,
 * reset-mid-body: byte i of a body is i % 251, so order and offsets are
 * checked byte for byte) and `stagger serve --fail-first` on 127.0.0.1:
 *  - the sink gets exactly the body's bytes, in order, then END once, and
 *    the result's body is empty;
 *  - a reset mid-body, then a retry: RESTART comes before the second
 *    attempt's bytes, and what follows it is the whole body;
 *  - over max_body the sink stops at max_body exactly and the outcome is
 *    the oversized error (body_truncated, ERROR_NOT_RETRYABLE);
 *  - a sink that fails (in DATA, or at END) fails the request, never a
 *    success; the engine calls END before done and nothing after it, and
 *    a request cancelled mid-body gets RESTART before its END;
 *  - a 429 body (a retry follows) never reaches the sink; a final 429's
 *    body stays in the result;
 *  - peak memory does not grow with the body: a forked child's maxrss for
 *    a 200 MB body against a 20 MB one differs by less than the 20 MB
 *    body itself (keeping the bodies would cost at least the 180 MB more).
 *
 * Needs STAGGER and HOSTILE in the environment. Only loopback traffic.
 */
#define _GNU_SOURCE
#if defined(__has_include) && !__has_include(<curl/curl.h>)
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
#include <sys/resource.h>
#include <sys/wait.h>

#include "cmocka_all.h"

#include <stagger/curl.h>

#include "integration/engine_helper.h"
#include "integration/hostile_helper.h"

/* ---- a sink that checks the pattern ----------------------------------- */

typedef struct sink {
    size_t off;          /* bytes since the last RESTART */
    size_t total;        /* DATA bytes over all attempts */
    size_t before_restart; /* off when the first RESTART came */
    size_t bad;          /* bytes that were not the pattern at their offset */
    int restarts, ends, after_end;
    size_t fail_after;   /* > 0: DATA fails once total would pass this */
    bool fail_end;       /* END returns nonzero */
    bool pattern;        /* check i % 251; else copy into text */
    char text[256];
} sink;

static int sink_fn(stg_body_op op, const void *buf, size_t len, void *data)
{
    sink *s = data;
    if (s->ends)
        s->after_end++;
    if (op == STG_BODY_RESTART) {
        if (!s->restarts)
            s->before_restart = s->off;
        s->restarts++;
        s->off = 0;
        return 0;
    }
    if (op == STG_BODY_END) {
        s->ends++;
        return s->fail_end ? -1 : 0;
    }
    if (s->fail_after && s->total + len > s->fail_after)
        return -1; /* the disk is full */
    if (s->pattern)
        s->bad += pattern_bad(s->off, buf, len);
    for (size_t i = 0; !s->pattern && i < len && s->off + i < sizeof s->text - 1; i++)
        s->text[s->off + i] = ((const char *)buf)[i];
    s->off += len;
    s->total += len;
    return 0;
}

static void hostile_sized(server *a, const char *mode, const char *size)
{
    const char *args[] = {"--size", size, NULL};
    hostile_start(a, mode, args);
}

/* perform url with a sink; returns the result (to free). */
static void perform_sink(const char *url, sink *s, stg_call_config cfg, stg_result *r)
{
    CURL *e = curl_easy_init();
    assert_non_null(e);
    curl_easy_setopt(e, CURLOPT_URL, url);
    cfg.url = url;
    cfg.body_sink = sink_fn;
    cfg.body_sink_data = s;
    assert_int_equal(stg_curl_perform(e, &cfg, r), STG_OK);
    curl_easy_cleanup(e);
}

/* ---- the blocking call ------------------------------------------------ */

static void test_perform_exact_bytes(void **state)
{
    (void)state;
    server a;
    hostile_sized(&a, "pattern-body", "3000000");
    char url[128];
    url_of(&a, "/x", url, sizeof url);
    sink s = {.pattern = true};
    stg_result r;
    perform_sink(url, &s, (stg_call_config){.policy = fast_policy(3)}, &r);
    server_stop(&a);
    assert_int_equal(r.action, STG_ACTION_SUCCESS);
    assert_int_equal(r.status, 200);
    assert_int_equal(s.off, 3000000);
    assert_int_equal(s.total, 3000000);
    assert_int_equal(s.bad, 0);
    assert_int_equal(s.restarts, 0);
    assert_int_equal(s.ends, 1);
    assert_int_equal(s.after_end, 0);
    assert_int_equal(r.body_len, 0); /* the body went to the sink */
    assert_string_equal(r.body, "");
    assert_false(r.body_sink_failed);
    stg_result_free(&r);
    server_cleanup(&a);
}

static void test_perform_restart_after_reset(void **state)
{
    (void)state;
    server a;
    hostile_sized(&a, "reset-mid-body", "2000000");
    char url[128];
    url_of(&a, "/x", url, sizeof url);
    sink s = {.pattern = true};
    stg_result r;
    perform_sink(url, &s, (stg_call_config){.policy = fast_policy(3)}, &r);
    server_stop(&a);
    assert_int_equal(r.action, STG_ACTION_SUCCESS);
    assert_int_equal(r.attempts, 2);
    assert_int_equal(hostile_requests(&a), 2);
    /* The first attempt delivered part of the body, then RESTART. */
    assert_true(s.before_restart > 0 && s.before_restart <= 1000000);
    assert_int_equal(s.restarts, 1);
    assert_int_equal(s.off, 2000000);
    assert_int_equal(s.total, s.before_restart + 2000000);
    assert_int_equal(s.bad, 0);
    assert_int_equal(s.ends, 1);
    assert_int_equal(s.after_end, 0);
    stg_result_free(&r);
    server_cleanup(&a);
}

static void test_perform_over_max_body(void **state)
{
    (void)state;
    server a;
    hostile_sized(&a, "pattern-body", "1000000");
    char url[128];
    url_of(&a, "/x", url, sizeof url);
    sink s = {.pattern = true};
    stg_result r;
    perform_sink(url, &s, (stg_call_config){.policy = fast_policy(3), .max_body = 100000}, &r);
    server_stop(&a);
    assert_int_equal(r.action, STG_ACTION_GIVE_UP);
    assert_int_equal(r.reason, STG_REASON_ERROR_NOT_RETRYABLE);
    assert_true(r.body_truncated);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.attempts, 1);
    assert_non_null(strstr(r.error_text, "max_body"));
    assert_int_equal(s.total, 100000); /* exactly max_body, no more */
    assert_int_equal(s.bad, 0);
    assert_int_equal(s.ends, 1);
    assert_int_equal(r.body_len, 0);
    assert_int_equal(hostile_requests(&a), 1);
    stg_result_free(&r);
    server_cleanup(&a);
}

static void test_perform_failing_sink(void **state)
{
    (void)state;
    server a;
    hostile_sized(&a, "pattern-body", "1000000");
    char url[128];
    url_of(&a, "/x", url, sizeof url);
    sink s = {.pattern = true, .fail_after = 50000};
    stg_result r;
    perform_sink(url, &s, (stg_call_config){.policy = fast_policy(3)}, &r);
    server_stop(&a);
    assert_int_equal(r.action, STG_ACTION_GIVE_UP);
    assert_int_equal(r.reason, STG_REASON_ERROR_NOT_RETRYABLE);
    assert_true(r.body_sink_failed);
    assert_false(r.body_truncated);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.error, STG_NET_OTHER);
    assert_int_equal(r.attempts, 1); /* a full disk stays full: no retry */
    assert_non_null(strstr(r.error_text, "sink"));
    assert_true(s.total <= 50000);
    assert_int_equal(s.ends, 1);
    assert_int_equal(hostile_requests(&a), 1);
    stg_result_free(&r);
    server_cleanup(&a);
}

static void test_perform_failing_end(void **state)
{
    (void)state;
    server a;
    hostile_sized(&a, "pattern-body", "10000");
    char url[128];
    url_of(&a, "/x", url, sizeof url);
    sink s = {.pattern = true, .fail_end = true};
    stg_result r;
    perform_sink(url, &s, (stg_call_config){.policy = fast_policy(3)}, &r);
    server_stop(&a);
    assert_int_equal(s.total, 10000);
    assert_int_equal(s.ends, 1);
    assert_int_equal(r.action, STG_ACTION_GIVE_UP); /* not a complete body */
    assert_int_equal(r.reason, STG_REASON_ERROR_NOT_RETRYABLE);
    assert_true(r.body_sink_failed);
    assert_non_null(strstr(r.error_text, "sink"));
    stg_result_free(&r);
    server_cleanup(&a);
}

/* --fail-first 1: the first answer is a 429 (a JSON body), the retry a 200
 * {"path":"/x","ok":true}. Only the 200's body reaches the sink. */
static void test_perform_429_body_not_sunk(void **state)
{
    (void)state;
    server a;
    const char *args[] = {"--fail-first", "1", "--fail-retry-after", "0", NULL};
    server_start(&a, args);
    char url[128];
    url_of(&a, "/x", url, sizeof url);
    sink s = {0};
    stg_result r;
    perform_sink(url, &s, (stg_call_config){.policy = fast_policy(3)}, &r);
    assert_int_equal(r.action, STG_ACTION_SUCCESS);
    assert_int_equal(r.attempts, 2);
    assert_int_equal(s.restarts, 0); /* nothing of the 429 was delivered */
    assert_string_equal(s.text, "{\"path\":\"/x\",\"ok\":true}");
    assert_int_equal(s.total, strlen(s.text));
    assert_int_equal(s.ends, 1);
    stg_result_free(&r);

    /* A final 429 (one attempt allowed): its body is in the result, the
     * sink got nothing but END. */
    url_of(&a, "/y", url, sizeof url);
    sink t = {0};
    perform_sink(url, &t, (stg_call_config){.policy = fast_policy(1)}, &r);
    server_stop(&a);
    assert_int_equal(r.status, 429);
    assert_int_equal(r.action, STG_ACTION_GIVE_UP);
    assert_int_equal(t.total, 0);
    assert_int_equal(t.ends, 1);
    assert_true(r.body_len > 0);
    assert_int_equal(strlen(r.body), r.body_len);
    stg_result_free(&r);
    server_cleanup(&a);
}

/* ---- the engine ------------------------------------------------------- */

typedef struct done_rec {
    stg_result r; /* copied, body pointers dropped */
    int calls;
    int ends_at_done; /* the sink's END count when done ran */
    sink *s;
} done_rec;

static void on_done(stg_engine *e, uint64_t id, const stg_result *r, void *data)
{
    (void)e;
    (void)id;
    done_rec *d = data;
    d->calls++;
    d->r = *r;
    d->r.body = d->r.headers = d->r.final_url = NULL;
    d->ends_at_done = d->s->ends;
}

static void engine_sink(const char *url, sink *s, size_t max_body, done_rec *d)
{
    stg_engine_config cfg = {.policy = fast_policy(3), .max_body = max_body};
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    d->s = s;
    stg_request rq = {.url = url, .body_sink = sink_fn, .body_sink_data = s};
    assert_int_equal(stg_engine_submit(e, &rq, on_done, d, NULL), STG_OK);
    assert_int_equal(stg_engine_drain(e), 0);
    stg_engine_free(e);
}

static void test_engine_restart_after_reset(void **state)
{
    (void)state;
    server a;
    hostile_sized(&a, "reset-mid-body", "2000000");
    char url[128];
    url_of(&a, "/x", url, sizeof url);
    sink s = {.pattern = true};
    done_rec d = {0};
    engine_sink(url, &s, 0, &d);
    server_stop(&a);
    assert_int_equal(d.calls, 1);
    assert_int_equal(d.r.action, STG_ACTION_SUCCESS);
    assert_int_equal(d.r.attempts, 2);
    assert_int_equal(d.r.body_len, 0);
    assert_int_equal(d.ends_at_done, 1); /* END before done */
    assert_int_equal(s.after_end, 0);    /* and nothing after it */
    assert_true(s.before_restart > 0 && s.before_restart <= 1000000);
    assert_int_equal(s.restarts, 1);
    assert_int_equal(s.off, 2000000);
    assert_int_equal(s.bad, 0);
    server_cleanup(&a);
}

static void test_engine_failing_sink_and_max_body(void **state)
{
    (void)state;
    server a;
    hostile_sized(&a, "pattern-body", "1000000");
    char url[128];
    url_of(&a, "/x", url, sizeof url);
    sink s = {.pattern = true, .fail_after = 30000};
    done_rec d = {0};
    engine_sink(url, &s, 0, &d);
    assert_int_equal(d.calls, 1);
    assert_int_equal(d.r.action, STG_ACTION_GIVE_UP);
    assert_int_equal(d.r.reason, STG_REASON_ERROR_NOT_RETRYABLE);
    assert_true(d.r.body_sink_failed);
    assert_int_equal(d.r.status, 200);
    assert_int_equal(d.r.attempts, 1);
    assert_int_equal(d.ends_at_done, 1);
    assert_true(s.total <= 30000);

    sink t = {.pattern = true};
    done_rec m = {0};
    engine_sink(url, &t, 70000, &m);
    server_stop(&a);
    assert_int_equal(m.r.action, STG_ACTION_GIVE_UP);
    assert_int_equal(m.r.reason, STG_REASON_ERROR_NOT_RETRYABLE);
    assert_true(m.r.body_truncated);
    assert_false(m.r.body_sink_failed);
    assert_int_equal(t.total, 70000);
    assert_int_equal(t.bad, 0);
    assert_int_equal(m.ends_at_done, 1);
    assert_int_equal(hostile_requests(&a), 2);
    server_cleanup(&a);
}

/* A request cancelled while its body streams: the partial body is
 * discarded (RESTART before END), END comes before done, nothing after. */
typedef struct stopper {
    sink s;
    stg_engine *e;
} stopper;

static int stop_sink(stg_body_op op, const void *buf, size_t len, void *data)
{
    stopper *st = data;
    int rc = sink_fn(op, buf, len, &st->s);
    if (op == STG_BODY_DATA && st->s.total >= 100000)
        stg_engine_stop(st->e); /* allowed from a sink */
    return rc;
}

static void test_engine_cancel_mid_body(void **state)
{
    (void)state;
    server a;
    hostile_start(&a, "endless-body", NULL);
    char url[128];
    url_of(&a, "/x", url, sizeof url);
    stg_engine_config cfg = {.policy = fast_policy(3), .max_body = (size_t)1 << 30};
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    stopper st = {.e = e};
    done_rec d = {.s = &st.s};
    stg_request rq = {.url = url, .body_sink = stop_sink, .body_sink_data = &st};
    uint64_t id = 0;
    assert_int_equal(stg_engine_submit(e, &rq, on_done, &d, &id), STG_OK);
    assert_int_equal(stg_engine_drain(e), 1); /* stopped mid-body */
    assert_true(st.s.total >= 100000);
    assert_int_equal(st.s.ends, 0);
    assert_int_equal(stg_engine_cancel(e, id), STG_OK);
    assert_int_equal(d.calls, 1);
    assert_int_equal(d.r.reason, STG_REASON_CANCELLED);
    assert_int_equal(d.ends_at_done, 1);
    assert_int_equal(st.s.restarts, 1); /* the partial body is not the body */
    assert_int_equal(st.s.off, 0);
    stg_engine_free(e);
    assert_int_equal(st.s.after_end, 0);
    assert_int_equal(st.s.ends, 1);
    server_cleanup(&a);
}

/* ---- memory: peak RSS does not grow with the body ---------------------- */

/* Fetch size bytes through a sink in a forked child; its peak RSS in KiB
 * (wait4's, the child's own). The child exits 0 when the sink got the
 * whole pattern and the request succeeded. */
static long child_maxrss_kib(const char *url, size_t size)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        sink s = {.pattern = true};
        CURL *e = curl_easy_init();
        curl_easy_setopt(e, CURLOPT_URL, url);
        stg_call_config cfg = {.policy = fast_policy(1),
                               .url = url,
                               .max_body = (size_t)512 << 20,
                               .body_sink = sink_fn,
                               .body_sink_data = &s};
        stg_result r;
        int rc = stg_curl_perform(e, &cfg, &r);
        bool ok = rc == STG_OK && r.action == STG_ACTION_SUCCESS && s.off == size && !s.bad;
        _exit(ok ? 0 : 1); /* no atexit: the parent's state is not ours */
    }
    int st = 0;
    struct rusage ru;
    assert_int_equal(wait4(pid, &st, 0, &ru), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    return ru.ru_maxrss;
}

static void test_memory_flat(void **state)
{
    (void)state;
    const size_t small = (size_t)20 << 20, big = (size_t)200 << 20;
    char n1[32], n2[32], url[128];
    snprintf(n1, sizeof n1, "%zu", small);
    snprintf(n2, sizeof n2, "%zu", big);
    server a, b;
    hostile_sized(&a, "pattern-body", n1);
    hostile_sized(&b, "pattern-body", n2);
    url_of(&a, "/x", url, sizeof url);
    long rss_small = child_maxrss_kib(url, small);
    url_of(&b, "/x", url, sizeof url);
    long rss_big = child_maxrss_kib(url, big);
    server_cleanup(&a);
    server_cleanup(&b);
    print_message("maxrss: %ld KiB for 20 MiB, %ld KiB for 200 MiB\n", rss_small, rss_big);
    /* Keeping the bodies costs at least big - small more; streaming them
     * costs less than even the small body. */
    assert_true(rss_big - rss_small < (long)(small >> 10));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_perform_exact_bytes, stop_leftovers),
        cmocka_unit_test_teardown(test_perform_restart_after_reset, stop_leftovers),
        cmocka_unit_test_teardown(test_perform_over_max_body, stop_leftovers),
        cmocka_unit_test_teardown(test_perform_failing_sink, stop_leftovers),
        cmocka_unit_test_teardown(test_perform_failing_end, stop_leftovers),
        cmocka_unit_test_teardown(test_perform_429_body_not_sunk, stop_leftovers),
        cmocka_unit_test_teardown(test_engine_restart_after_reset, stop_leftovers),
        cmocka_unit_test_teardown(test_engine_failing_sink_and_max_body, stop_leftovers),
        cmocka_unit_test_teardown(test_engine_cancel_mid_body, stop_leftovers),
        cmocka_unit_test_teardown(test_memory_flat, stop_leftovers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
