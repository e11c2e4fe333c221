/*
 * Integration tests of stg_engine against `stagger serve` on 127.0.0.1
 * (started per test with --port 0, stopped at the end):
 *  - 10 000 requests at concurrency 200, half of them submitted from
 *    completion callbacks: every callback fires exactly once (counted per
 *    id) with a 200, the attempts agree with the engine's counters, the
 *    attempt events and the server's log per request (a retry after a
 *    timeout under load is allowed, a lost or doubled request is not), no
 *    leak (the suite runs under ASan/LSan);
 *  - Retry-After waits are timers: 20 requests each told to wait 1 s at
 *    concurrency 5 finish in about 1 s, not 4;
 *  - a FIXED limiter at rate R never lets the server see more than
 *    burst + R * t requests in any window (server log arrival times);
 *  - the breaker: defer_when_open gives up with BREAKER_OPEN; without it a
 *    request waits for half-open and the probe closes the breaker; a
 *    limit_key shares one breaker between URLs;
 *  - the retry budget gives up with BUDGET_EXHAUSTED; with budget_wait
 *    the refused retries wait and, through an outage, the host sees one
 *    retry at a time, and every request still ends done;
 *  - cancel one, cancel all, stop, free with requests pending;
 *  - the adaptive limiter against a rate-limited server (smoke), and its
 *    pacing serving waiters in order (no retry overtaken for seconds);
 *  - a backoff after a throttle with no hint is cut short on an idle
 *    adaptive host that answered since, and kept whole otherwise (alone,
 *    with Retry-After, at a fixed rate); with the adaptive rate a
 *    throttle costs the retry budget nothing.
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
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cmocka_all.h"

#include <stagger/curl.h>

#include "integration/engine_helper.h"
#include "integration/serve_helper.h"

/* ---- 10 000 requests ------------------------------------------------------ */

/* What the protocol guarantees here is that every request ends once, with
 * a 200 (the server answers nothing else), not that it takes one attempt:
 * under load an attempt can pass its timeout (connect 5 s, whole attempt
 * 10 s) and be retried. So the attempts are not a fixed 10 000; they are
 * checked against what the engine reported (its counters, each request's
 * result, each attempt's event) and what the server saw (its log, per
 * request: the request k is GET /item/k): every answered attempt is the
 * one success of its request, every other attempt is a retryable transport
 * error, and the server saw each request at least once (its success) and
 * at most as often as it was attempted and not refused. Without a
 * transport error this is exactly 10 000 attempts and 10 000 log lines. */
#define MANY 10000
#define FIRST_WAVE 5000

typedef struct many_req {
    unsigned char calls;     /* done callbacks */
    unsigned char attempts;  /* stg_result.attempts */
    unsigned char ends;      /* ATTEMPT_END events */
    unsigned char answered;  /* ... with an HTTP answer (error NONE) */
    unsigned char refused;   /* ... refused: never reached the server */
    int k;                   /* the path /item/k */
} many_req;

typedef struct many_ctx {
    many_req req[MANY + 1]; /* by engine id */
    int seen[MANY + 1];     /* server log lines, by k */
    int done, ok, bad_id, submitted, submit_errors;
    int failed[8];          /* failed attempts by stg_net_error */
    int bad_failures;       /* failed attempts that are not retryable transport errors */
    char base[96];          /* http://127.0.0.1:PORT */
} many_ctx;

static void many_done(stg_engine *e, uint64_t id, const stg_result *r, void *data);

static int many_submit(stg_engine *e, many_ctx *c)
{
    char url[128];
    int k = ++c->submitted;
    snprintf(url, sizeof url, "%s/item/%d", c->base, k);
    stg_request rq = {.url = url};
    uint64_t id = 0;
    int rc = stg_engine_submit(e, &rq, many_done, c, &id);
    if (rc == STG_OK && (id == 0 || id > MANY))
        c->bad_id++;
    else if (rc == STG_OK)
        c->req[id].k = k;
    return rc;
}

static void many_done(stg_engine *e, uint64_t id, const stg_result *r, void *data)
{
    many_ctx *c = data;
    if (id == 0 || id > MANY) {
        c->bad_id++;
        return;
    }
    c->req[id].calls++;
    c->req[id].attempts = (unsigned char)(r->attempts > 255 ? 255 : r->attempts);
    c->done++;
    if (r->action == STG_ACTION_SUCCESS && r->status == 200 && r->body_len > 0)
        c->ok++;
    if (c->submitted < MANY && many_submit(e, c) != STG_OK) /* a callback that submits more */
        c->submit_errors++;
}

static void many_event(const stg_event *ev, void *data)
{
    many_ctx *c = data;
    if (ev->type != STG_EVENT_ATTEMPT_END)
        return;
    if (ev->request_id == 0 || ev->request_id > MANY) {
        c->bad_id++;
        return;
    }
    many_req *q = &c->req[ev->request_id];
    q->ends++;
    if (ev->error == STG_NET_NONE) {
        q->answered++;
        return;
    }
    c->failed[(unsigned)ev->error < 8 ? (unsigned)ev->error : 7]++;
    if (!(STG_NET_DEFAULT_RETRY & STG_NET_BIT(ev->error)))
        c->bad_failures++;
    /* (Not CONNECT_TIMEOUT: an attempt that times out on a reused
     * connection has a connect time of 0 and is classified so, though
     * its request was sent; seen with the server stopped mid-run.) */
    if (ev->error == STG_NET_CONNECT_REFUSED)
        q->refused++;
}

/* Count the server's log lines per /item/k. Returns the lines counted, or
 * -1 if a line names a k that was never submitted. */
static int many_read_log(const server *s, many_ctx *c)
{
    FILE *f = fopen(s->log, "r");
    if (!f)
        return -1;
    char line[1024];
    int n = 0, bad = 0;
    const char *key = "\"path\":\"/item/";
    while (fgets(line, sizeof line, f)) {
        const char *p = strstr(line, key);
        if (!p)
            continue;
        long k = strtol(p + strlen(key), NULL, 10);
        if (k < 1 || k > MANY)
            bad++;
        else
            c->seen[k]++;
        n++;
    }
    fclose(f);
    return bad ? -1 : n;
}

static void test_ten_thousand(void **state)
{
    (void)state;
    server s;
    const char *args[] = {"--threads", "2", NULL};
    server_start(&s, args);
    many_ctx *c = calloc(1, sizeof *c);
    assert_non_null(c);
    url_of(&s, "", c->base, sizeof c->base);
    stg_engine_config cfg = {.concurrency = 200, .seed = 1, .on_event = many_event, .event_data = c};
    int err = -1;
    stg_engine *e = stg_engine_new(&cfg, &err);
    assert_non_null(e);
    assert_int_equal(err, STG_OK);
    for (int i = 0; i < FIRST_WAVE; i++)
        assert_int_equal(many_submit(e, c), STG_OK);
    int64_t t0 = now_us();
    int left = -1;
    for (int pass = 0; pass < 2000000 && (left = stg_engine_run(e, STG_MS(100))) > 0; pass++) {
        if (now_us() - t0 > STG_SEC(120))
            fail_msg("10 000 requests did not finish in 120 s (%d left)", left);
    }
    stg_engine_stats st;
    stg_engine_stats_get(e, &st);
    print_message("10000 requests in %.2f s: %llu attempts; failed: refused %d, reset %d, "
                  "timeout %d, connect timeout %d, other %d\n",
                  (double)(now_us() - t0) / 1e6, (unsigned long long)st.attempts,
                  c->failed[STG_NET_CONNECT_REFUSED], c->failed[STG_NET_RESET],
                  c->failed[STG_NET_TIMEOUT], c->failed[STG_NET_CONNECT_TIMEOUT],
                  c->failed[STG_NET_DNS] + c->failed[STG_NET_TLS] + c->failed[STG_NET_OTHER]);
    assert_int_equal(left, 0);
    assert_int_equal(c->bad_id, 0);
    assert_int_equal(c->submit_errors, 0);
    assert_int_equal(c->submitted, MANY);
    assert_int_equal(c->done, MANY);
    assert_int_equal(c->ok, MANY);
    assert_int_equal(c->bad_failures, 0);
    assert_int_equal(st.submitted, MANY);
    assert_int_equal(st.finished, MANY);
    assert_int_equal(st.succeeded, MANY);
    assert_int_equal(st.in_flight, 0);
    stg_engine_free(e);
    server_stop(&s);
    int lines = many_read_log(&s, c);
    assert_true(lines >= MANY);
    uint64_t attempts = 0;
    int seen = 0;
    for (int id = 1; id <= MANY; id++) {
        const many_req *q = &c->req[id];
        if (q->calls != 1)
            fail_msg("callback for id %d ran %d times", id, q->calls);
        /* one HTTP answer (the 200), the rest retried transport errors */
        if (q->ends != q->attempts || q->answered != 1)
            fail_msg("id %d: %d attempts, %d ended, %d answered", id, q->attempts, q->ends,
                     q->answered);
        int n = c->seen[q->k];
        if (n < 1 || n > q->attempts - q->refused)
            fail_msg("id %d (/item/%d): the server saw it %d times; %d attempts, %d refused", id,
                     q->k, n, q->attempts, q->refused);
        attempts += q->attempts;
        seen += n;
    }
    assert_int_equal(st.attempts, attempts);
    assert_int_equal(st.retries, st.attempts - MANY);
    assert_int_equal(seen, lines);
    free(c);
    server_cleanup(&s);
}

/* ---- Retry-After waits are timers ------------------------------------------ */

static void test_waits_are_timers(void **state)
{
    (void)state;
    server s;
    const char *args[] = {"--fail-first", "1", NULL};
    server_start(&s, args);
    char url[128];
    url_of(&s, "/t", url, sizeof url);
    stg_engine_config cfg = {.concurrency = 5, .seed = 2};
    cfg.policy.backoff.base_us = STG_MS(50);
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    done_tally c = {0};
    char hdr[20][40];
    for (int i = 0; i < 20; i++) {
        snprintf(hdr[i], sizeof hdr[i], "X-Client-Id: timer-%d", i);
        const char *headers[] = {hdr[i], NULL};
        stg_request rq = {.url = url, .headers = headers};
        assert_int_equal(stg_engine_submit(e, &rq, tally_done, &c, NULL), STG_OK);
    }
    int64_t t0 = now_us();
    assert_int_equal(stg_engine_drain(e), 0);
    int64_t took = now_us() - t0;
    print_message("20 requests with Retry-After 1 s at concurrency 5: %.2f s\n",
                  (double)took / 1e6);
    assert_int_equal(c.ok, 20);
    /* Each waits >= 1 s (the hint), <= 1.2 s (spread); the waits overlap. */
    assert_in_range_i64(took, STG_SEC(1), STG_MS(2000));
    stg_engine_stats st;
    stg_engine_stats_get(e, &st);
    assert_int_equal(st.retries, 20);
    assert_int_equal(st.status_429, 20);
    stg_engine_free(e);
    server_cleanup(&s);
}

/* ---- FIXED limiter ---------------------------------------------------------- */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void test_fixed_limiter_bound(void **state)
{
    (void)state;
    server s;
    server_start(&s, NULL);
    char url[128];
    url_of(&s, "/limited", url, sizeof url);
    const double rate = 40;
    const int burst = 4, n = 100;
    stg_engine_config cfg = {.concurrency = 50, .limiter = STG_LIMITER_FIXED, .rate = rate,
                             .burst = burst};
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    done_tally c = {0};
    for (int i = 0; i < n; i++) {
        stg_request rq = {.url = url};
        assert_int_equal(stg_engine_submit(e, &rq, tally_done, &c, NULL), STG_OK);
    }
    int64_t t0 = now_us();
    assert_int_equal(stg_engine_drain(e), 0);
    int64_t took = now_us() - t0;
    assert_int_equal(c.ok, n);
    stg_engine_stats st;
    stg_engine_stats_get(e, &st);
    assert_true(st.limiter_wait_us > 0);
    stg_engine_free(e);
    /* (n - burst) / rate = 2.4 s at least. */
    assert_in_range_i64(took, STG_MS(2350), STG_MS(4000));
    server_stop(&s);

    int64_t t[128];
    int m = 0;
    FILE *f = fopen(s.log, "r");
    assert_non_null(f);
    char line[512];
    while (m < 128 && fgets(line, sizeof line, f)) {
        long long v;
        if (sscanf(line, "{\"t_us\":%lld", &v) == 1)
            t[m++] = v;
    }
    fclose(f);
    assert_int_equal(m, n);
    qsort(t, (size_t)m, sizeof t[0], cmp_i64);
    /* In every window [t_i, t_j]: j - i + 1 <= burst + rate * (t_j - t_i),
     * allowing 1 request of slack for scheduling jitter between the
     * client's timer and the server's arrival stamp. */
    int worst = 0;
    for (int i = 0; i < m; i++)
        for (int j = i; j < m; j++) {
            double allowed = burst + rate * (double)(t[j] - t[i]) / 1e6;
            int excess = (int)((j - i + 1) - allowed);
            if (excess > worst)
                worst = excess;
            if ((double)(j - i + 1) > allowed + 1.0)
                fail_msg("%d requests in %lld us: more than burst %d + rate %.0f/s * t", j - i + 1,
                         (long long)(t[j] - t[i]), burst, rate);
        }
    print_message("fixed limiter: worst excess over burst + R*t: %d\n", worst);
    server_cleanup(&s);
}

/* ---- breaker --------------------------------------------------------------- */

typedef struct breaker_log {
    int opened, half_opened, closed;
} breaker_log;

static void on_breaker_event(const stg_event *ev, void *data)
{
    breaker_log *b = data;
    if (ev->type != STG_EVENT_BREAKER)
        return;
    if (ev->breaker_to == STG_BREAKER_OPEN)
        b->opened++;
    else if (ev->breaker_to == STG_BREAKER_HALF_OPEN)
        b->half_opened++;
    else
        b->closed++;
}

static void test_breaker_defers(void **state)
{
    (void)state;
    server s;
    server_start(&s, NULL);
    char url[128];
    url_of(&s, "/status/503", url, sizeof url);
    breaker_log bl = {0};
    stg_engine_config cfg = {.concurrency = 1,
                             .breaker = true,
                             .defer_when_open = true,
                             .on_event = on_breaker_event,
                             .event_data = &bl};
    cfg.breaker_config.consecutive_failures = 3;
    cfg.breaker_config.open_us = STG_SEC(30);
    cfg.policy.max_attempts = 1;
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    done_tally c = {0};
    for (int i = 0; i < 10; i++) {
        stg_request rq = {.url = url};
        assert_int_equal(stg_engine_submit(e, &rq, tally_done, &c, NULL), STG_OK);
    }
    int64_t t0 = now_us();
    assert_int_equal(stg_engine_drain(e), 0);
    assert_true(now_us() - t0 < STG_SEC(2)); /* deferred, not waited for */
    assert_int_equal(c.done, 10);
    /* The first three fail (503, no retries) and the third trips the
     * breaker; the other seven are deferred without a request. */
    assert_int_equal(c.breaker_open, 7);
    assert_int_equal(bl.opened, 1);
    stg_engine_free(e);
    server_stop(&s);
    assert_int_equal(log_count(&s, "/status/503"), 3);
    server_cleanup(&s);
}

static void test_breaker_half_open_shared_key(void **state)
{
    (void)state;
    server s;
    server_start(&s, NULL);
    char bad[128], good[128];
    url_of(&s, "/status/500", bad, sizeof bad);
    url_of(&s, "/fine", good, sizeof good);
    breaker_log bl = {0};
    stg_engine_config cfg = {.concurrency = 4, .breaker = true, .on_event = on_breaker_event,
                             .event_data = &bl};
    cfg.breaker_config.consecutive_failures = 2;
    cfg.breaker_config.open_us = STG_MS(300);
    cfg.policy.max_attempts = 1;
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    done_tally c = {0};
    stg_request rb = {.url = bad, .limit_key = "svc"};
    assert_int_equal(stg_engine_submit(e, &rb, tally_done, &c, NULL), STG_OK);
    assert_int_equal(stg_engine_submit(e, &rb, tally_done, &c, NULL), STG_OK);
    assert_int_equal(stg_engine_drain(e), 0);
    assert_int_equal(bl.opened, 1);
    /* A different key is not affected by that breaker: it goes at once. */
    done_tally o = {0};
    stg_request ro = {.url = good, .limit_key = "other"};
    int64_t t_other = now_us();
    assert_int_equal(stg_engine_submit(e, &ro, tally_done, &o, NULL), STG_OK);
    assert_int_equal(stg_engine_drain(e), 0);
    assert_int_equal(o.ok, 1);
    assert_true(now_us() - t_other < STG_MS(200));
    assert_int_equal(bl.half_opened, 0);
    /* Another URL, same key: waits for half-open, probes, closes. */
    done_tally g = {0};
    stg_request rg = {.url = good, .limit_key = "svc"};
    int64_t t0 = now_us();
    assert_int_equal(stg_engine_submit(e, &rg, tally_done, &g, NULL), STG_OK);
    assert_int_equal(stg_engine_submit(e, &rg, tally_done, &g, NULL), STG_OK);
    assert_int_equal(stg_engine_drain(e), 0);
    int64_t took = now_us() - t0;
    assert_int_equal(g.ok, 2);
    assert_in_range_i64(took, STG_MS(200), STG_MS(1500));
    assert_int_equal(bl.half_opened, 1);
    assert_int_equal(bl.closed, 1);
    stg_engine_free(e);
    server_cleanup(&s);
}

/* ---- budget -------------------------------------------------------------- */

static void test_budget_exhausted(void **state)
{
    (void)state;
    server s;
    server_start(&s, NULL);
    char url[128];
    url_of(&s, "/status/503", url, sizeof url);
    stg_engine_config cfg = {.concurrency = 1, .budget = true};
    cfg.budget_config.max_tokens = 4; /* retries while tokens > 2 */
    cfg.policy.max_attempts = 10;
    cfg.policy.backoff.base_us = STG_MS(5);
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    done_tally c = {0};
    stg_request rq = {.url = url};
    assert_int_equal(stg_engine_submit(e, &rq, tally_done, &c, NULL), STG_OK);
    assert_int_equal(stg_engine_drain(e), 0);
    assert_int_equal(c.budget, 1);
    assert_int_equal(c.last_attempts, 2); /* 4 -> 3 (retry), 3 -> 2 (no) */
    stg_engine_free(e);
    server_cleanup(&s);
}

/* A 1 s outage (503, no Retry-After) meets 20 requests whose retries the
 * budget soon refuses. budget_wait: the refused retries wait and one
 * request at a time retries through the outage, so every request ends
 * done and the server sees a few dozen 503s, where retrying everything
 * would send ~20 per backoff step. Without it they give up. */
static void budget_outage(bool wait, done_tally *c, int *n503)
{
    const char *args[] = {"--outage", "0s+1s", "--retry-after", "none", NULL};
    server s;
    server_start(&s, args);
    char url[128];
    url_of(&s, "/o", url, sizeof url);
    stg_engine_config cfg = {.concurrency = 10, .budget = true, .budget_wait = wait};
    cfg.budget_config.max_tokens = 4;
    cfg.policy.max_attempts = 100;
    cfg.policy.deadline_us = STG_SEC(20);
    cfg.policy.backoff.base_us = STG_MS(20);
    cfg.policy.backoff.cap_us = STG_MS(200);
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    for (int i = 0; i < 20; i++) {
        stg_request rq = {.url = url};
        assert_int_equal(stg_engine_submit(e, &rq, tally_done, c, NULL), STG_OK);
    }
    assert_int_equal(stg_engine_drain(e), 0);
    stg_engine_free(e);
    server_stop(&s);
    *n503 = log_count(&s, "\"status\":503");
    server_cleanup(&s);
}

static void test_budget_wait(void **state)
{
    (void)state;
    done_tally c = {0};
    int n503 = 0;
    budget_outage(true, &c, &n503);
    print_message("budget_wait: %d 503s, all %d done\n", n503, c.ok);
    assert_int_equal(c.done, 20);
    assert_int_equal(c.ok, 20);
    assert_int_equal(c.budget, 0);
    /* 20 first attempts, a couple of retries the budget allowed, then one
     * retry per backoff (20 ms doubling to 200 ms) for the rest of 1 s. */
    assert_in_range(n503, 20, 45);

    done_tally d = {0};
    budget_outage(false, &d, &n503);
    print_message("no budget_wait: %d 503s, %d gave up\n", n503, d.budget);
    assert_int_equal(d.done, 20);
    assert_true(d.budget >= 15);
    assert_int_equal(d.ok + d.budget, 20);
}

/* ---- cancel, stop, free ------------------------------------------------------ */

typedef struct stop_ctx {
    stg_engine *e;
    int done, cancelled;
} stop_ctx;

static void stop_done(stg_engine *e, uint64_t id, const stg_result *r, void *data)
{
    (void)id;
    stop_ctx *c = data;
    c->done++;
    c->cancelled += r->reason == STG_REASON_CANCELLED;
    stg_engine_stop(e);
}

static void test_cancel_stop_free(void **state)
{
    (void)state;
    server s;
    const char *args[] = {"--fail-first", "1", "--fail-retry-after", "30", NULL};
    server_start(&s, args);
    char url[128];
    url_of(&s, "/long", url, sizeof url);
    stg_engine_config cfg = {.concurrency = 10};
    cfg.policy.max_server_wait_us = STG_SEC(60);
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    done_tally c = {0};
    uint64_t ids[6];
    char hdr[6][40];
    for (int i = 0; i < 6; i++) {
        snprintf(hdr[i], sizeof hdr[i], "X-Client-Id: cancel-%d", i);
        const char *headers[] = {hdr[i], NULL};
        stg_request rq = {.url = url, .headers = headers};
        assert_int_equal(stg_engine_submit(e, &rq, tally_done, &c, &ids[i]), STG_OK);
    }
    /* Run until all six wait on their 30 s Retry-After timers. */
    stg_engine_stats st;
    for (int i = 0; i < 500; i++) {
        stg_engine_run(e, STG_MS(10));
        stg_engine_stats_get(e, &st);
        if (st.retries == 0 && st.status_429 == 6 && st.in_flight == 0)
            break;
    }
    assert_int_equal(st.status_429, 6);
    assert_int_equal(st.in_flight, 0);
    assert_int_equal(stg_engine_cancel(e, ids[0]), STG_OK);
    assert_int_equal(c.cancelled, 1); /* before cancel returned */
    assert_int_equal(stg_engine_cancel(e, ids[0]), STG_ENOTFOUND);
    assert_int_equal(stg_engine_cancel(e, 999), STG_ENOTFOUND);
    assert_int_equal(stg_engine_run(e, 0), 5);
    stg_engine_cancel_all(e);
    assert_int_equal(c.cancelled, 6);
    assert_int_equal(c.done, 6);
    assert_int_equal(stg_engine_run(e, 0), 0);

    /* stop from a callback makes drain return; free cancels the rest. */
    stop_ctx sc = {e, 0, 0};
    for (int i = 0; i < 3; i++) {
        stg_request rq = {.url = url}; /* same client (the path): the 1st gets 429 */
        assert_int_equal(stg_engine_submit(e, &rq, stop_done, &sc, NULL), STG_OK);
    }
    int left = stg_engine_drain(e);
    assert_true(left >= 1 && left <= 2);
    assert_int_equal(sc.done, 3 - left);
    stg_engine_free(e);
    assert_int_equal(sc.done, 3);
    assert_int_equal(sc.cancelled, left);
    server_cleanup(&s);
}

static void test_submit_errors(void **state)
{
    (void)state;
    int err = 0;
    stg_engine_config bad = {.concurrency = -1};
    assert_null(stg_engine_new(&bad, &err));
    assert_int_equal(err, STG_EINVAL);
    stg_engine_config bad_rate = {.limiter = STG_LIMITER_FIXED, .rate = 0};
    assert_null(stg_engine_new(&bad_rate, &err));
    assert_int_equal(err, STG_EINVAL);
    stg_engine *e = stg_engine_new(NULL, &err);
    assert_non_null(e);
    done_tally c = {0};
    stg_request none = {0};
    assert_int_equal(stg_engine_submit(e, &none, tally_done, &c, NULL), STG_EINVAL);
    stg_request weird = {.url = "http://127.0.0.1:1/", .method = "FETCH"};
    assert_int_equal(stg_engine_submit(e, &weird, tally_done, &c, NULL), STG_EINVAL);
    const char *inject[] = {"X-A: 1\r\nX-B: 2", NULL};
    stg_request inj = {.url = "http://127.0.0.1:1/", .headers = inject};
    assert_int_equal(stg_engine_submit(e, &inj, tally_done, &c, NULL), STG_EINVAL);
    /* The fields the transport owns, in every libcurl form and any case, a
     * name that is not a token (a space before the colon would hide
     * Transfer-Encoding from a name check and not from every server), a
     * control character in a value: refused at submit (curl.h). */
    static const char *const refused[] = {
        "Content-Length: 1", "content-length:", "Transfer-Encoding: chunked",
        "TRANSFER-ENCODING;", "Connection: close", "Keep-Alive: 5", "Proxy-Connection: x",
        "TE: trailers", "Trailer: X", "Upgrade: h2c", "Transfer-Encoding : chunked",
        "Transfer-Encoding\t: chunked", " X-Fold: a", "X-A", "X-A;x", "", ": v",
        "X-A: a\x01" "b", "X-A: a\x7f", "X\xff: v", "X-A: a\rb",
    };
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        const char *h[] = {"X-Ok: 1", refused[i], NULL};
        stg_request rq = {.url = "http://127.0.0.1:1/", .headers = h};
        if (stg_engine_submit(e, &rq, tally_done, &c, NULL) != STG_EINVAL)
            fail_msg("header '%s' was accepted", refused[i]);
    }
    stg_request ik = {.url = "http://127.0.0.1:1/", .idempotency_key = "k\x01"};
    assert_int_equal(stg_engine_submit(e, &ik, tally_done, &c, NULL), STG_EINVAL);
    /* The caller's own fields, as curl -H takes them: accepted (and cancelled
     * before any attempt: nothing listens on port 1 anyway). */
    static const char *const allowed[] = {
        "Host: api.example", "Proxy-Authorization: Basic eA==", "Accept:", "X-Empty;",
        "X-Tab: a\tb", "X-Obs: caf\xc3\xa9", "Expect:", "Content-Type: text/plain",
    };
    for (size_t i = 0; i < sizeof allowed / sizeof *allowed; i++) {
        const char *h[] = {allowed[i], NULL};
        stg_request rq = {.url = "http://127.0.0.1:1/", .headers = h};
        uint64_t id = 0;
        if (stg_engine_submit(e, &rq, tally_done, &c, &id) != STG_OK)
            fail_msg("header '%s' was refused", allowed[i]);
        assert_int_equal(stg_engine_cancel(e, id), STG_OK);
    }
    assert_int_equal(c.done, (int)(sizeof allowed / sizeof *allowed));
    c.done = 0;
    assert_int_equal(c.done, 0); /* a failed submit never calls back */
    assert_int_equal(stg_engine_drain(e), 0);
    stg_engine_free(e);
    stg_engine_free(NULL);
}

/* ---- adaptive smoke ---------------------------------------------------------- */

static void test_adaptive_smoke(void **state)
{
    (void)state;
    server s;
    const char *args[] = {"--rate", "50", "--burst", "5", NULL};
    server_start(&s, args);
    char url[128];
    url_of(&s, "/a", url, sizeof url);
    stg_engine_config cfg = {.concurrency = 20, .limiter = STG_LIMITER_ADAPTIVE};
    cfg.policy.backoff.base_us = STG_MS(100);
    cfg.policy.max_attempts = 20;
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    done_tally c = {0};
    for (int i = 0; i < 60; i++) {
        stg_request rq = {.url = url};
        assert_int_equal(stg_engine_submit(e, &rq, tally_done, &c, NULL), STG_OK);
    }
    assert_int_equal(stg_engine_drain(e), 0);
    assert_int_equal(c.ok, 60);
    stg_engine_stats st;
    stg_engine_stats_get(e, &st);
    print_message("adaptive: %llu attempts, %llu 429s for 60 requests\n",
                  (unsigned long long)st.attempts, (unsigned long long)st.status_429);
    stg_engine_free(e);
    server_cleanup(&s);
}

/* A throttle's backoff cut short (engine_early.c). The server refuses the
 * first request of client "t" with a 429 that gives no hint (fail-first,
 * no Retry-After) and answers every other. Request A is refused; its
 * backoff is 5 s +-20%, so at least 4 s. With the adaptive rate, B's
 * answer after A's refusal, on an idle host, cuts A's wait short: A ends
 * before the 4 s its backoff would have taken at the least. Without
 * that evidence (A alone), with a hint (the server said when), or with
 * a fixed rate (no learned pace to hand the wait to), A waits its whole
 * wait: at least 4 s, or the hint's 3 s. */
static const char *const client_t[] = {"X-Client-Id: t", NULL};

/* Runs A (and B when both), at concurrency 1 in that order, against a
 * fresh server with the given args; returns the seconds from A's submit
 * to the last completion, and checks that both ended in success after
 * one 429 in all. */
static double early_run(const char *const *args, stg_limiter_mode mode, bool both)
{
    server s;
    server_start(&s, args);
    char ua[128], ub[128];
    url_of(&s, "/a", ua, sizeof ua);
    url_of(&s, "/b", ub, sizeof ub);
    stg_engine_config cfg = {.concurrency = 1, .limiter = mode, .rate = 100};
    cfg.policy.backoff.kind = STG_BACKOFF_PROPORTIONAL;
    cfg.policy.backoff.base_us = STG_MS(50);
    cfg.policy.throttle_base_us = STG_SEC(5); /* 4..6 s after a throttle */
    cfg.policy.max_attempts = 3;
    cfg.policy.max_server_wait_us = STG_SEC(60);
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    done_tally c = {0};
    int64_t t0 = tally_now_us();
    stg_request ra = {.url = ua, .headers = client_t};
    stg_request rb = {.url = ub, .headers = client_t};
    assert_int_equal(stg_engine_submit(e, &ra, tally_done, &c, NULL), STG_OK);
    if (both)
        assert_int_equal(stg_engine_submit(e, &rb, tally_done, &c, NULL), STG_OK);
    assert_int_equal(stg_engine_drain(e), 0);
    stg_engine_stats st;
    stg_engine_stats_get(e, &st);
    assert_int_equal(c.ok, both ? 2 : 1);
    assert_int_equal(st.status_429, 1);
    assert_int_equal(st.attempts, both ? 3 : 2);
    stg_engine_free(e);
    server_cleanup(&s);
    return (double)(c.last_done_us - t0) / 1e6;
}

static void test_throttle_wait_cut_short(void **state)
{
    (void)state;
    const char *nohint[] = {"--fail-first", "1", "--retry-after", "none", NULL};
    double t = early_run(nohint, STG_LIMITER_ADAPTIVE, true);
    print_message("adaptive, B answered after A's refusal: A done in %.2f s\n", t);
    assert_true(t < 4.0);
}

static void test_throttle_wait_kept(void **state)
{
    (void)state;
    const char *nohint[] = {"--fail-first", "1", "--retry-after", "none", NULL};
    const char *hint[] = {"--fail-first", "1", "--fail-retry-after", "3", NULL};
    double alone = early_run(nohint, STG_LIMITER_ADAPTIVE, false);
    double told = early_run(hint, STG_LIMITER_ADAPTIVE, true);
    double fixed = early_run(nohint, STG_LIMITER_FIXED, true);
    print_message("kept: alone %.2f s, Retry-After 3 %.2f s, fixed rate %.2f s\n", alone, told,
                  fixed);
    assert_true(alone >= 4.0);
    assert_true(told >= 3.0);
    assert_true(fixed >= 4.0);
}

/* With the adaptive rate a throttle costs the retry budget nothing (the
 * rate is cut on it, and every retry waits its turn at that rate). A
 * budget of 1 token allows a retry while it holds more than 0.5: one
 * throttle at the fixed rate (cost 0.5) spends it, and the request gives
 * up; with the adaptive rate it retries through two 429s to its 200. */
static void budget_throttles(stg_limiter_mode mode, done_tally *c)
{
    const char *args[] = {"--fail-first", "2", "--retry-after", "none", NULL};
    server s;
    server_start(&s, args);
    char url[128];
    url_of(&s, "/a", url, sizeof url);
    stg_engine_config cfg = {.concurrency = 1, .limiter = mode, .rate = 100, .budget = true};
    cfg.budget_config.max_tokens = 1;
    cfg.policy = fast_policy(5);
    cfg.policy.throttle_base_us = STG_MS(5);
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    stg_request rq = {.url = url, .headers = client_t};
    assert_int_equal(stg_engine_submit(e, &rq, tally_done, c, NULL), STG_OK);
    assert_int_equal(stg_engine_drain(e), 0);
    stg_engine_free(e);
    server_cleanup(&s);
}

static void test_budget_throttle_adaptive(void **state)
{
    (void)state;
    done_tally fixed = {0}, adaptive = {0};
    budget_throttles(STG_LIMITER_FIXED, &fixed);
    budget_throttles(STG_LIMITER_ADAPTIVE, &adaptive);
    assert_int_equal(fixed.budget, 1);
    assert_int_equal(fixed.last_attempts, 1);
    assert_int_equal(adaptive.ok_200, 1);
    assert_int_equal(adaptive.last_attempts, 3);
}

/* Fairness of the adaptive pacing: requests waiting for the learned rate
 * are served in order, so a retry is not overtaken again and again by
 * newer requests. Before the pace FIFO, a 2000-job batch had retries that
 * waited 20 s for their turn, and this test's longest wait was ~6 s (now
 * ~1.3 s). Bound: the longest backoff (400 ms), plus twice the time half
 * the server's rate (the learned rate after cuts) needs to serve every
 * slot once, plus 1 s of slack for a loaded machine. */
#define FAIR_N 400
#define FAIR_SLOTS 20

typedef struct fair_log {
    int64_t refused_at[FAIR_N + 2]; /* by id: end of a 429, 0: none pending */
    int64_t worst_gap_us;
    int refusals;
} fair_log;

static void on_fair_event(const stg_event *ev, void *data)
{
    fair_log *f = data;
    if (ev->request_id == 0 || ev->request_id > FAIR_N)
        return;
    if (ev->type == STG_EVENT_ATTEMPT_END && ev->status == 429) {
        f->refused_at[ev->request_id] = ev->now_us;
        f->refusals++;
    } else if (ev->type == STG_EVENT_ATTEMPT_START && f->refused_at[ev->request_id]) {
        int64_t gap = ev->now_us - f->refused_at[ev->request_id];
        if (gap > f->worst_gap_us)
            f->worst_gap_us = gap;
        f->refused_at[ev->request_id] = 0;
    }
}

static void test_adaptive_pacing_is_fair(void **state)
{
    (void)state;
    server s;
    const char *args[] = {"--rate", "100", "--burst", "5", "--retry-after", "none", NULL};
    server_start(&s, args);
    char url[128];
    url_of(&s, "/fair", url, sizeof url);
    fair_log f = {0};
    stg_engine_config cfg = {.concurrency = FAIR_SLOTS,
                             .limiter = STG_LIMITER_ADAPTIVE,
                             .on_event = on_fair_event,
                             .event_data = &f};
    cfg.policy.backoff.base_us = STG_MS(100);
    cfg.policy.backoff.cap_us = STG_MS(400);
    cfg.policy.max_attempts = 30;
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    done_tally c = {0};
    for (int i = 0; i < FAIR_N; i++) {
        stg_request rq = {.url = url};
        assert_int_equal(stg_engine_submit(e, &rq, tally_done, &c, NULL), STG_OK);
    }
    assert_int_equal(stg_engine_drain(e), 0);
    assert_int_equal(c.ok, FAIR_N);
    print_message("fair: %d refusals, longest wait from a 429 to the retry %lld ms\n",
                  f.refusals, (long long)(f.worst_gap_us / 1000));
    assert_true(f.refusals > 0);
    assert_true(f.worst_gap_us < STG_MS(400) + 2 * STG_SEC(FAIR_SLOTS) / 50 + STG_SEC(1));
    stg_engine_free(e);
    server_cleanup(&s);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_submit_errors, stop_leftovers),
        cmocka_unit_test_teardown(test_ten_thousand, stop_leftovers),
        cmocka_unit_test_teardown(test_waits_are_timers, stop_leftovers),
        cmocka_unit_test_teardown(test_fixed_limiter_bound, stop_leftovers),
        cmocka_unit_test_teardown(test_breaker_defers, stop_leftovers),
        cmocka_unit_test_teardown(test_breaker_half_open_shared_key, stop_leftovers),
        cmocka_unit_test_teardown(test_budget_exhausted, stop_leftovers),
        cmocka_unit_test_teardown(test_budget_wait, stop_leftovers),
        cmocka_unit_test_teardown(test_adaptive_pacing_is_fair, stop_leftovers),
        cmocka_unit_test_teardown(test_cancel_stop_free, stop_leftovers),
        cmocka_unit_test_teardown(test_adaptive_smoke, stop_leftovers),
        cmocka_unit_test_teardown(test_throttle_wait_cut_short, stop_leftovers),
        cmocka_unit_test_teardown(test_throttle_wait_kept, stop_leftovers),
        cmocka_unit_test_teardown(test_budget_throttle_adaptive, stop_leftovers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
