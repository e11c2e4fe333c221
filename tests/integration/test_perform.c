/*
 * Integration tests of stg_curl_perform() against `stagger serve` on
 * 127.0.0.1 (started per test with --port 0, stopped at the end): a cancel
 * ends a long Retry-After wait and an attempt in flight within 50 ms; the
 * last answer (a 429 too) is returned whole and a discarded attempt's body
 * never leaks; a retried POST resends its whole body (POSTFIELDS and a
 * rewound read callback); refused connections and the deadline; the
 * client-side bucket; a host's cold probe, shared by two threads' calls
 * through one quota limiter, ends at the first answer's head.
 *
 * Needs STAGGER (the stagger binary) in the environment. Only loopback
 * traffic.
 */
#define _GNU_SOURCE
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
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cmocka_all.h"

#include <stagger/curl.h>

#include "integration/serve_helper.h"

/* ---- helpers ---------------------------------------------------------- */

typedef struct recorder {
    _Atomic int64_t wait_at;  /* when the WAIT event came, 0 before */
    _Atomic int64_t start_at; /* when an ATTEMPT_START came */
    _Atomic int64_t wait_us;  /* the last WAIT's planned length */
    atomic_int waits, limiter_waits, attempts;
} recorder;

static void record(const stg_event *ev, void *data)
{
    recorder *r = data;
    if (ev->type == STG_EVENT_WAIT) {
        atomic_store(&r->wait_at, now_us());
        atomic_store(&r->wait_us, ev->wait_us);
        atomic_fetch_add(&r->waits, 1);
    } else if (ev->type == STG_EVENT_ATTEMPT_START) {
        atomic_store(&r->start_at, now_us());
        atomic_fetch_add(&r->attempts, 1);
    } else if (ev->type == STG_EVENT_LIMITER_WAIT) {
        atomic_fetch_add(&r->limiter_waits, 1);
    }
}

typedef struct firer {
    stg_cancel *cancel;
    recorder *rec;
    bool on_wait; /* fire during the wait, else during an attempt */
    int64_t fired_at;
} firer;

static void *fire_thread(void *arg)
{
    firer *f = arg;
    for (int i = 0; i < 1000; i++) { /* up to 10 s */
        int64_t t = f->on_wait ? atomic_load(&f->rec->wait_at) : atomic_load(&f->rec->start_at);
        if (t)
            break;
        usleep(10000);
    }
    usleep(200000); /* well inside the wait / the hanging attempt */
    f->fired_at = now_us();
    stg_cancel_fire(f->cancel);
    return NULL;
}

static CURL *easy_for(const char *url, struct curl_slist *headers)
{
    CURL *e = curl_easy_init();
    assert_non_null(e);
    curl_easy_setopt(e, CURLOPT_URL, url);
    if (headers)
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers);
    return e;
}

/* ---- tests ------------------------------------------------------------ */

static void test_cancel_during_retry_after(void **state)
{
    (void)state;
    server s;
    const char *args[] = {"--fail-first", "1", "--fail-retry-after", "30", NULL};
    server_start(&s, args);
    char url[128];
    url_of(&s, "/x", url, sizeof url);
    struct curl_slist *h = curl_slist_append(NULL, "X-Client-Id: cancel-wait");
    CURL *e = easy_for(url, h);
    recorder rec = {0};
    stg_cancel *c = stg_cancel_new();
    assert_non_null(c);
    stg_call_config cfg = {.cancel = c, .on_event = record, .event_data = &rec, .url = url};
    cfg.policy.max_server_wait_us = STG_SEC(60);
    cfg.policy.deadline_us = STG_SEC(120);
    firer f = {.cancel = c, .rec = &rec, .on_wait = true};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, fire_thread, &f), 0);
    stg_result r;
    assert_int_equal(stg_curl_perform(e, &cfg, &r), STG_OK);
    int64_t returned = now_us();
    pthread_join(th, NULL);
    int64_t lag = returned - f.fired_at;
    /* The wait was 30 s: a cancel that ends it at once returns in
     * microseconds; 1 s leaves a busy machine room and still tells "at once"
     * from "at the next poll". */
    if (lag > STG_SEC(1))
        fail_msg("cancel took %lld us to end the wait", (long long)lag);
    assert_int_equal(r.reason, STG_REASON_CANCELLED);
    assert_int_equal(r.action, STG_ACTION_GIVE_UP);
    assert_int_equal(r.attempts, 1);
    assert_int_equal(r.status, 429); /* the last answer stays in the result */
    assert_non_null(strstr(r.body, "fail-first"));
    assert_int_equal(r.server_wait_us, STG_SEC(30));
    assert_true(stg_cancel_fired(c));
    stg_result_free(&r);
    curl_easy_cleanup(e);
    curl_slist_free_all(h);
    stg_cancel_free(c);
    server_cleanup(&s);
}

static void test_cancel_during_attempt(void **state)
{
    (void)state;
    server s;
    const char *args[] = {"--hang-every", "1", NULL};
    server_start(&s, args);
    char url[128];
    url_of(&s, "/hang", url, sizeof url);
    CURL *e = easy_for(url, NULL);
    recorder rec = {0};
    stg_cancel *c = stg_cancel_new();
    stg_call_config cfg = {.cancel = c, .on_event = record, .event_data = &rec};
    firer f = {.cancel = c, .rec = &rec, .on_wait = false};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, fire_thread, &f), 0);
    stg_result r;
    assert_int_equal(stg_curl_perform(e, &cfg, &r), STG_OK);
    int64_t returned = now_us();
    pthread_join(th, NULL);
    int64_t lag = returned - f.fired_at;
    if (lag > STG_SEC(1)) /* the attempt hangs for ever: as above */
        fail_msg("cancel took %lld us to end the attempt", (long long)lag);
    assert_int_equal(r.reason, STG_REASON_CANCELLED);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.body_len, 0);
    stg_result_free(&r);
    curl_easy_cleanup(e);
    stg_cancel_free(c);
    server_cleanup(&s);
}

static void test_discarded_body_never_leaks(void **state)
{
    (void)state;
    server s;
    const char *args[] = {"--fail-first", "1", NULL};
    server_start(&s, args);
    char url[128];
    url_of(&s, "/echo?k=v", url, sizeof url);
    struct curl_slist *h = curl_slist_append(NULL, "X-Client-Id: leak");
    CURL *e = easy_for(url, h);
    recorder rec = {0};
    stg_call_config cfg = {.seed = 1, .on_event = record, .event_data = &rec};
    cfg.policy.backoff.base_us = STG_MS(50);
    stg_result r;
    int64_t t0 = now_us();
    assert_int_equal(stg_curl_perform(e, &cfg, &r), STG_OK);
    int64_t took = now_us() - t0;
    assert_int_equal(r.action, STG_ACTION_SUCCESS);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.attempts, 2);
    assert_null(strstr(r.body, "fail-first"));
    assert_non_null(strstr(r.body, "\"path\""));
    assert_int_equal(strlen(r.body), r.body_len);
    assert_non_null(strstr(r.headers, "HTTP/1.1 200"));
    assert_null(strstr(r.headers, "429"));
    assert_null(strstr(r.headers, "Retry-After"));
    /* Retry-After: 1 honoured: the one wait planned is 1 s plus at most
     * the spread (max(0.2 s, base)), and the call took at least the hint.
     * The upper side is the decision, not the wall clock: a busy machine
     * only makes the call longer. */
    assert_int_equal(atomic_load(&rec.waits), 1);
    assert_in_range_i64(atomic_load(&rec.wait_us), STG_SEC(1), STG_MS(1200));
    assert_true(took >= STG_SEC(1));
    assert_in_range_i64(r.elapsed_us, STG_SEC(1), took);
    assert_non_null(strstr(r.final_url, "/echo?k=v")); /* not a secret's name: shown */
    stg_result_free(&r);
    curl_easy_cleanup(e);
    curl_slist_free_all(h);
    server_cleanup(&s);
}

static void test_last_429_is_returned(void **state)
{
    (void)state;
    server s;
    server_start(&s, NULL);
    char url[128];
    url_of(&s, "/status/429?retry_after=1", url, sizeof url);
    CURL *e = easy_for(url, NULL);
    recorder rec = {0};
    stg_call_config cfg = {.on_event = record, .event_data = &rec};
    cfg.policy.max_attempts = 2;
    stg_result r;
    assert_int_equal(stg_curl_perform(e, &cfg, &r), STG_OK);
    assert_int_equal(r.action, STG_ACTION_GIVE_UP);
    assert_int_equal(r.reason, STG_REASON_ATTEMPTS_EXHAUSTED);
    assert_int_equal(r.status, 429);
    assert_int_equal(r.attempts, 2);
    assert_non_null(strstr(r.body, "429"));
    assert_int_equal(r.server_wait_us, STG_SEC(1));
    assert_true(r.hints.seen & STG_HINT_RETRY_AFTER);
    stg_result_free(&r);
    /* A server wait above the window: handed back at once. */
    url_of(&s, "/status/429?retry_after=100", url, sizeof url);
    curl_easy_setopt(e, CURLOPT_URL, url);
    cfg.policy.max_server_wait_us = STG_SEC(5);
    atomic_store(&rec.waits, 0);
    assert_int_equal(stg_curl_perform(e, &cfg, &r), STG_OK);
    assert_int_equal(atomic_load(&rec.waits), 0); /* no wait at all */
    assert_int_equal(r.reason, STG_REASON_SERVER_WAIT_TOO_LONG);
    assert_int_equal(r.attempts, 1);
    assert_int_equal(r.status, 429);
    stg_result_free(&r);
    curl_easy_cleanup(e);
    server_stop(&s);
    assert_int_equal(log_count(&s, "/status/429"), 3);
    server_cleanup(&s);
}

typedef struct body_src {
    const char *data;
    size_t len, off;
    int rewinds;
} body_src;

static size_t read_body(char *buf, size_t size, size_t n, void *arg)
{
    body_src *b = arg;
    size_t want = size * n, left = b->len - b->off;
    if (want > left)
        want = left;
    memcpy(buf, b->data + b->off, want);
    b->off += want;
    return want;
}

static int rewind_body(void *arg)
{
    body_src *b = arg;
    b->off = 0;
    b->rewinds++;
    return 0;
}

static void test_post_resent_in_full(void **state)
{
    (void)state;
    server s;
    const char *args[] = {"--fail-first", "1", NULL};
    server_start(&s, args);
    char url[128];
    url_of(&s, "/echo", url, sizeof url);
    size_t len = 100000;
    char *data = malloc(len + 1);
    for (size_t i = 0; i < len; i++)
        data[i] = (char)('a' + i % 26);
    data[len] = '\0';

    /* 1. POSTFIELDS with an idempotency key: retried, whole body again. */
    struct curl_slist *h = curl_slist_append(NULL, "X-Client-Id: post-a");
    h = curl_slist_append(h, "Idempotency-Key: key-a");
    CURL *e = easy_for(url, h);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, data);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    stg_call_config cfg = {.method = STG_METHOD_POST, .has_idempotency_key = true};
    cfg.policy.backoff.base_us = STG_MS(20);
    stg_result r;
    assert_int_equal(stg_curl_perform(e, &cfg, &r), STG_OK);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.attempts, 2);
    assert_non_null(strstr(r.body, "\"body_length\":100000"));
    stg_result_free(&r);
    curl_easy_cleanup(e);
    curl_slist_free_all(h);

    /* 2. A read callback, rewound before the retry; method left UNKNOWN:
     * the effective method (POST) is used, so the key is what allows it. */
    h = curl_slist_append(NULL, "X-Client-Id: post-b");
    h = curl_slist_append(h, "Idempotency-Key: key-b");
    e = easy_for(url, h);
    body_src src = {data, len, 0, 0};
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_READFUNCTION, read_body);
    curl_easy_setopt(e, CURLOPT_READDATA, &src);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    stg_call_config cfg2 = {.has_idempotency_key = true, .rewind_body = rewind_body,
                            .rewind_data = &src};
    cfg2.policy.backoff.base_us = STG_MS(20);
    assert_int_equal(stg_curl_perform(e, &cfg2, &r), STG_OK);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.attempts, 2);
    assert_int_equal(src.rewinds, 1);
    assert_non_null(strstr(r.body, "\"body_length\":100000"));
    stg_result_free(&r);
    curl_easy_cleanup(e);
    curl_slist_free_all(h);

    /* 3. No key, refusals retried by method only: a POST answered 429 is
     * not repeated. */
    h = curl_slist_append(NULL, "X-Client-Id: post-c");
    e = easy_for(url, h);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, "x=1");
    stg_call_config cfg3 = {.policy.no_retry_refusals = true};
    assert_int_equal(stg_curl_perform(e, &cfg3, &r), STG_OK);
    assert_int_equal(r.reason, STG_REASON_METHOD_NOT_IDEMPOTENT);
    assert_int_equal(r.attempts, 1);
    assert_int_equal(r.status, 429);
    stg_result_free(&r);
    curl_easy_cleanup(e);
    curl_slist_free_all(h);

    /* 4. No key, the default: a 429 is a refusal, nothing was processed,
     * so the POST is sent again (policy.h rule 4). */
    h = curl_slist_append(NULL, "X-Client-Id: post-d");
    e = easy_for(url, h);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, "x=1");
    stg_call_config cfg4 = {.policy.backoff.base_us = STG_MS(20)};
    assert_int_equal(stg_curl_perform(e, &cfg4, &r), STG_OK);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.attempts, 2);
    stg_result_free(&r);
    curl_easy_cleanup(e);
    curl_slist_free_all(h);
    free(data);

    server_stop(&s);
    assert_int_equal(log_count(&s, "\"client\":\"post-a\""), 2);
    assert_int_equal(log_count(&s, "\"key\":\"key-a\""), 2);
    assert_int_equal(log_count(&s, "\"client\":\"post-b\""), 2);
    assert_int_equal(log_count(&s, "\"client\":\"post-c\""), 1);
    assert_int_equal(log_count(&s, "\"client\":\"post-d\""), 2);
    server_cleanup(&s);
}

static void test_refused_and_deadline(void **state)
{
    (void)state;
    server s;
    const char *args[] = {"--hang-every", "1", NULL};
    server_start(&s, args);
    char url[128];
    url_of(&s, "/slow", url, sizeof url);

    /* Every attempt hangs: 300 ms per attempt, 1 s deadline. */
    CURL *e = easy_for(url, NULL);
    stg_call_config cfg = {0};
    cfg.policy.attempt_timeout_us = STG_MS(300);
    cfg.policy.deadline_us = STG_SEC(1);
    cfg.policy.backoff.base_us = STG_MS(50);
    cfg.policy.max_attempts = 100;
    stg_result r;
    int64_t t0 = now_us();
    assert_int_equal(stg_curl_perform(e, &cfg, &r), STG_OK);
    int64_t took = now_us() - t0;
    assert_int_equal(r.reason, STG_REASON_DEADLINE);
    assert_int_equal(r.error, STG_NET_TIMEOUT);
    assert_true(r.attempts >= 2);
    /* A deadline not kept takes 30 s here (100 attempts of 300 ms); the
     * second above it is room for a busy machine, not a tuned figure. */
    assert_in_range_i64(took, STG_MS(600), STG_SEC(2));
    assert_true(r.elapsed_us <= took);
    stg_result_free(&r);
    curl_easy_cleanup(e);
    server_cleanup(&s);

    /* Nobody listens on that port any more: refused, retried, given up. */
    e = easy_for(url, NULL);
    stg_call_config cfg2 = {0};
    cfg2.policy.max_attempts = 3;
    cfg2.policy.backoff.base_us = STG_MS(10);
    assert_int_equal(stg_curl_perform(e, &cfg2, &r), STG_OK);
    assert_int_equal(r.error, STG_NET_CONNECT_REFUSED);
    assert_int_equal(r.reason, STG_REASON_ATTEMPTS_EXHAUSTED);
    assert_int_equal(r.attempts, 3);
    assert_int_equal(r.curl_code, CURLE_COULDNT_CONNECT);
    assert_true(r.error_text[0] != '\0');
    stg_result_free(&r);
    curl_easy_cleanup(e);
}

static void test_bucket_paces_attempts(void **state)
{
    (void)state;
    server s;
    server_start(&s, NULL);
    char url[128];
    url_of(&s, "/p", url, sizeof url);
    CURL *e = easy_for(url, NULL);
    stg_bucket b;
    stg_bucket_config bc = {.rate = 5, .burst = 1};
    assert_int_equal(stg_bucket_init(&b, &bc, now_us()), STG_OK);
    recorder rec = {0};
    stg_call_config cfg = {.bucket = &b, .on_event = record, .event_data = &rec};
    stg_result r;
    int64_t t0 = now_us();
    for (int i = 0; i < 3; i++) {
        assert_int_equal(stg_curl_perform(e, &cfg, &r), STG_OK);
        assert_int_equal(r.status, 200);
        stg_result_free(&r);
    }
    int64_t took = now_us() - t0;
    /* burst 1 at 5/s: the 2nd and 3rd sends wait 200 ms each (the
     * bucket's bound; being later on a busy machine is allowed). */
    assert_true(took >= STG_MS(390));
    assert_int_equal(atomic_load(&rec.limiter_waits), 2);
    curl_easy_cleanup(e);
    server_cleanup(&s);
}

/* Two threads share one quota limiter (stg_call_config.quotas) on a
 * host that never answered: the first call goes alone (the cold probe),
 * and the second goes when the first's head arrives, not when its body,
 * trickled over 2 s by the server, ends. Judged by order, not time: the
 * bytes of the first body received when the second attempt starts. */
typedef struct cold_first {
    atomic_size_t got;     /* body bytes of the first call so far */
    atomic_bool started;   /* its attempt began (it holds the cold probe) */
} cold_first;

typedef struct cold_second {
    cold_first *first;
    atomic_long got_at_start; /* the first's bytes when this attempt began; -1 */
} cold_second;

static int cold_sink(stg_body_op op, const void *buf, size_t len, void *data)
{
    (void)buf;
    cold_first *f = data;
    if (op == STG_BODY_DATA)
        atomic_fetch_add(&f->got, len);
    return 0;
}

static void cold_first_event(const stg_event *ev, void *data)
{
    cold_first *f = data;
    if (ev->type == STG_EVENT_ATTEMPT_START)
        atomic_store(&f->started, true);
}

static void cold_second_event(const stg_event *ev, void *data)
{
    cold_second *c = data;
    if (ev->type == STG_EVENT_ATTEMPT_START)
        atomic_store(&c->got_at_start, (long)atomic_load(&c->first->got));
}

typedef struct cold_call {
    const char *url;
    stg_quota *q;
    cold_first *first;
    int status;
} cold_call;

static void *cold_first_thread(void *arg)
{
    cold_call *c = arg;
    CURL *e = easy_for(c->url, NULL);
    stg_call_config cfg = {.url = c->url, .quotas = c->q, .body_sink = cold_sink,
                           .body_sink_data = c->first, .on_event = cold_first_event,
                           .event_data = c->first};
    stg_result r;
    c->status = stg_curl_perform(e, &cfg, &r) == STG_OK ? r.status : -1;
    stg_result_free(&r);
    curl_easy_cleanup(e);
    return NULL;
}

static void test_quota_cold_probe_ends_at_head(void **state)
{
    (void)state;
    server s;
    const char *args[] = {"--rate", "100", "--burst", "100", "--ratelimit-headers",
                          "--slow-body-every", "1", "--slow-body-ms", "2000", NULL};
    server_start(&s, args);
    char url[128];
    url_of(&s, "/cold", url, sizeof url);
    stg_quota *q = stg_quota_new(NULL, NULL);
    assert_non_null(q);
    cold_first first = {0};
    cold_call c1 = {.url = url, .q = q, .first = &first};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, cold_first_thread, &c1), 0);
    for (int i = 0; i < 3000 && !atomic_load(&first.started); i++) /* a hang guard */
        usleep(10000);
    assert_true(atomic_load(&first.started));
    cold_second second = {.first = &first, .got_at_start = -1};
    CURL *e = easy_for(url, NULL);
    stg_call_config cfg = {.url = url, .quotas = q, .on_event = cold_second_event,
                           .event_data = &second};
    stg_result r;
    assert_int_equal(stg_curl_perform(e, &cfg, &r), STG_OK);
    assert_int_equal(r.status, 200);
    stg_result_free(&r);
    curl_easy_cleanup(e);
    pthread_join(t, NULL);
    assert_int_equal(c1.status, 200);
    size_t total = atomic_load(&first.got);
    long at = atomic_load(&second.got_at_start);
    /* The second began after the first's head, before its body's end. */
    assert_true(total > 0);
    assert_true(at >= 0);
    assert_true((size_t)at < total);
    stg_quota_free(q);
    server_cleanup(&s);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    stg_result r;
    assert_int_equal(stg_curl_perform(NULL, NULL, &r), STG_EINVAL);
    assert_null(r.body);
    stg_result_free(&r);
    CURL *e = curl_easy_init();
    stg_call_config cfg = {0};
    cfg.policy.max_attempts = -1;
    assert_int_equal(stg_curl_perform(e, &cfg, &r), STG_EINVAL);
    assert_int_equal(stg_curl_perform(e, NULL, NULL), STG_EINVAL);
    stg_result_free(NULL);
    curl_easy_cleanup(e);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_cancel_during_retry_after, stop_leftovers),
        cmocka_unit_test_teardown(test_cancel_during_attempt, stop_leftovers),
        cmocka_unit_test_teardown(test_discarded_body_never_leaks, stop_leftovers),
        cmocka_unit_test_teardown(test_last_429_is_returned, stop_leftovers),
        cmocka_unit_test_teardown(test_post_resent_in_full, stop_leftovers),
        cmocka_unit_test_teardown(test_refused_and_deadline, stop_leftovers),
        cmocka_unit_test_teardown(test_bucket_paces_attempts, stop_leftovers),
        cmocka_unit_test_teardown(test_quota_cold_probe_ends_at_head, stop_leftovers),
        cmocka_unit_test_teardown(test_bad_arguments, stop_leftovers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
