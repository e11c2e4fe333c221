/*
 * What the engine gained for stagger proxy, tested on the engine itself
 * against stg_hostile and `stagger serve` on 127.0.0.1:
 *  - STG_STREAM_HEAD: the sink gets the 2xx response's header block
 *    (status line first) once, before its first body byte;
 *  - STG_STREAM_FINAL: a reset after bytes reached the sink is not retried
 *    (one request at the server), where without it the same GET is;
 *  - STG_STREAM_PAUSE + stg_engine_resume: a sink that refuses bytes
 *    pauses the transfer, and after resume the same bytes come again: the
 *    body arrives whole and in order (byte i is i % 251);
 *  - per-request max_attempts and deadline_us override the engine's policy;
 *  - STG_PRIORITY_LOW: with one slot, normal requests go before low ones
 *    submitted earlier;
 *  - a learned slot freed goes to the host's oldest waiter and stays its
 *    own: each request waits for a slot at most once;
 *  - read_body: a body read as it is sent (with a pause on the way) arrives
 *    whole, and is never resent, even with an Idempotency-Key;
 *  - STG_STREAM_OTHER: non-2xx bodies reach the sink, a retry still follows;
 *  - stg_engine_resume of a transfer whose whole (small) body sat paused
 *    in libcurl: it ends, inside its deadline (no byte is left to make
 *    its socket fire: only libcurl's timer, set by curl_easy_pause, runs
 *    it again on multi_socket);
 *  - sockets libcurl closed while the engine's epoll set still held them
 *    (close-reused: every kept-alive connection is closed at its second
 *    request), their numbers taken by the next connections: every request
 *    still ends with its answer;
 *  - stg_engine_run_fd: the wait ends on the caller's descriptor, only
 *    on the current one (a previous call's leaves the engine's epoll set),
 *    and on one epoll cannot watch (a regular file: always ready, as
 *    poll() has it).
 * Needs STAGGER and HOSTILE in the environment.
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
#include <time.h>
#include <unistd.h>

#include "cmocka_all.h"

#include <stagger/curl.h>

#include "integration/engine_helper.h"
#include "integration/hostile_helper.h"

typedef struct rec {
    int heads, data_before_head, ends, pauses, restarts;
    size_t other;       /* STG_BODY_OTHER bytes since the last RESTART */
    char other_buf[512];
    char head[256];
    size_t off, bad;
    size_t pause_every; /* > 0: refuse once each time off crosses a multiple */
    size_t next_pause;
    bool want_resume;
} rec;

static int sink(stg_body_op op, const void *buf, size_t len, void *data)
{
    rec *r = data;
    if (op == STG_BODY_HEAD) {
        r->heads++;
        snprintf(r->head, sizeof r->head, "%.*s", (int)(len < 200 ? len : 200), (const char *)buf);
        return 0;
    }
    if (op == STG_BODY_OTHER) {
        for (size_t i = 0; i < len && r->other + i < sizeof r->other_buf - 1; i++)
            r->other_buf[r->other + i] = ((const char *)buf)[i];
        r->other += len;
        return 0;
    }
    switch (op) {
    case STG_BODY_DATA:
        if (!r->heads)
            r->data_before_head++;
        if (r->pause_every && r->off >= r->next_pause && !r->want_resume) {
            r->next_pause += r->pause_every;
            r->pauses++;
            r->want_resume = true;
            return STG_BODY_PAUSE; /* not taken: it must come again */
        }
        r->bad += pattern_bad(r->off, buf, len);
        r->off += len;
        return 0;
    case STG_BODY_RESTART:
        r->restarts++;
        r->off = 0;
        r->other = 0;
        memset(r->other_buf, 0, sizeof r->other_buf);
        return 0;
    case STG_BODY_END:
        r->ends++;
        return 0;
    }
    return 0;
}

typedef struct done_rec {
    int calls;
    stg_result r;
    char body[512];
} done_rec;

static void on_done(stg_engine *e, uint64_t id, const stg_result *r, void *data)
{
    (void)e, (void)id;
    done_rec *d = data;
    d->calls++;
    d->r = *r;
    snprintf(d->body, sizeof d->body, "%.*s", (int)(r->body_len < 500 ? r->body_len : 500),
             r->body ? r->body : "");
    d->r.body = d->r.headers = d->r.final_url = NULL;
}

/* Run e until request id is done, resuming it whenever the sink asks. */
static void run_until(stg_engine *e, uint64_t id, done_rec *d, rec *s)
{
    for (int i = 0; i < 200000 && !d->calls; i++) {
        stg_engine_run(e, STG_MS(20));
        if (s && s->want_resume) {
            s->want_resume = false;
            stg_engine_resume(e, id);
        }
    }
    assert_int_equal(d->calls, 1);
}

static void one(const char *url, unsigned stream, rec *s, done_rec *d, int engine_attempts)
{
    stg_engine_config cfg = {.policy = fast_policy(engine_attempts)};
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    stg_request rq = {.url = url, .body_sink = sink, .body_sink_data = s, .stream = stream};
    uint64_t id = 0;
    assert_int_equal(stg_engine_submit(e, &rq, on_done, d, &id), STG_OK);
    run_until(e, id, d, s);
    stg_engine_free(e);
}

static void test_head_before_data(void **state)
{
    (void)state;
    server a;
    const char *args[] = {"--size", "300000", NULL};
    hostile_start(&a, "pattern-body", args);
    char url[128];
    url_of(&a, "/x", url, sizeof url);
    rec s = {0};
    done_rec d = {0};
    one(url, STG_STREAM_HEAD, &s, &d, 3);
    server_stop(&a);
    assert_int_equal(d.r.action, STG_ACTION_SUCCESS);
    assert_int_equal(s.heads, 1);
    assert_int_equal(s.data_before_head, 0);
    assert_int_equal(strncmp(s.head, "HTTP/1.1 200", 12), 0);
    assert_int_equal(s.off, 300000);
    assert_int_equal(s.bad, 0);
    assert_int_equal(s.ends, 1);
    server_cleanup(&a);
}

static void test_final_no_retry(void **state)
{
    (void)state;
    for (int final = 0; final <= 1; final++) {
        server a;
        const char *args[] = {"--size", "400000", NULL};
        hostile_start(&a, "reset-mid-body", args);
        char url[128];
        url_of(&a, "/x", url, sizeof url);
        rec s = {0};
        done_rec d = {0};
        one(url, STG_STREAM_HEAD | (final ? STG_STREAM_FINAL : 0), &s, &d, 3);
        int reqs = hostile_requests(&a);
        server_stop(&a);
        if (final) {
            assert_int_equal(d.r.action, STG_ACTION_GIVE_UP);
            assert_int_equal(d.r.reason, STG_REASON_ERROR_NOT_RETRYABLE);
            assert_int_equal(d.r.attempts, 1);
            assert_int_equal(reqs, 1);
        } else {
            assert_int_equal(d.r.action, STG_ACTION_SUCCESS); /* retried, whole */
            assert_int_equal(d.r.attempts, 2);
            assert_int_equal(s.off, 400000);
        }
        assert_int_equal(s.bad, 0);
        server_cleanup(&a);
    }
}

static void test_pause_resume(void **state)
{
    (void)state;
    server a;
    const char *args[] = {"--size", "2000000", NULL};
    hostile_start(&a, "pattern-body", args);
    char url[128];
    url_of(&a, "/x", url, sizeof url);
    rec s = {.pause_every = 100000, .next_pause = 100000};
    done_rec d = {0};
    one(url, STG_STREAM_PAUSE, &s, &d, 3);
    server_stop(&a);
    assert_int_equal(d.r.action, STG_ACTION_SUCCESS);
    assert_true(s.pauses >= 10);
    assert_int_equal(s.off, 2000000); /* refused bytes came again, none twice */
    assert_int_equal(s.bad, 0);
    server_cleanup(&a);
}

/* The whole body arrives in the first read and the sink refuses it: once
 * resumed, nothing is left on the socket to fire, and only libcurl's
 * timer (timer_cb, called from curl_easy_pause) finishes it. The deadline
 * (5 s, one attempt) is the bound: a resume the loop missed ends there,
 * as a timeout. */
static void test_resume_small(void **state)
{
    (void)state;
    server a;
    const char *args[] = {"--size", "1000", NULL};
    hostile_start(&a, "pattern-body", args);
    char url[128];
    url_of(&a, "/x", url, sizeof url);
    rec s = {.pause_every = 1000000, .next_pause = 0};
    done_rec d = {0};
    stg_engine_config cfg = {.policy = fast_policy(1)};
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    stg_request rq = {.url = url,
                      .body_sink = sink,
                      .body_sink_data = &s,
                      .stream = STG_STREAM_PAUSE,
                      .deadline_us = STG_SEC(5)};
    uint64_t id = 0;
    assert_int_equal(stg_engine_submit(e, &rq, on_done, &d, &id), STG_OK);
    run_until(e, id, &d, &s);
    stg_engine_free(e);
    server_stop(&a);
    assert_int_equal(s.pauses, 1);
    assert_int_equal(d.r.action, STG_ACTION_SUCCESS);
    assert_int_equal(s.off, 1000);
    assert_int_equal(s.bad, 0);
    server_cleanup(&a);
}

static void test_reused_fd_numbers(void **state)
{
    (void)state;
    server a;
    hostile_start(&a, "close-reused", NULL);
    char url[128];
    url_of(&a, "/x", url, sizeof url);
    stg_engine_config cfg = {.policy = fast_policy(3), .concurrency = 1};
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    for (int i = 0; i < 8; i++) {
        done_rec d = {0};
        stg_request rq = {.url = url};
        uint64_t id = 0;
        assert_int_equal(stg_engine_submit(e, &rq, on_done, &d, &id), STG_OK);
        run_until(e, id, &d, NULL);
        assert_int_equal(d.r.action, STG_ACTION_SUCCESS);
        assert_int_equal(d.r.status, 200);
    }
    stg_engine_free(e);
    server_stop(&a);
    server_cleanup(&a);
}

static void test_request_overrides(void **state)
{
    (void)state;
    server a;
    server_start(&a, NULL);
    char url[128];
    stg_engine_config cfg = {.policy = fast_policy(4)};
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    /* max_attempts 2 instead of the engine's 4 */
    url_of(&a, "/status/503", url, sizeof url);
    done_rec d1 = {0};
    stg_request rq = {.url = url, .max_attempts = 2};
    uint64_t id;
    assert_int_equal(stg_engine_submit(e, &rq, on_done, &d1, &id), STG_OK);
    run_until(e, id, &d1, NULL);
    assert_int_equal(d1.r.attempts, 2);
    assert_int_equal(d1.r.reason, STG_REASON_ATTEMPTS_EXHAUSTED);
    /* a 300 ms deadline cannot hold a 5 s hint: given up after one */
    url_of(&a, "/status/503?retry_after=5", url, sizeof url);
    done_rec d2 = {0};
    stg_request rq2 = {.url = url, .deadline_us = STG_MS(300)};
    assert_int_equal(stg_engine_submit(e, &rq2, on_done, &d2, &id), STG_OK);
    run_until(e, id, &d2, NULL);
    assert_int_equal(d2.r.attempts, 1);
    /* (the engine's 60 s deadline would have waited the 5 s and resent) */
    assert_int_equal(d2.r.reason, STG_REASON_SERVER_WAIT_TOO_LONG);
    /* bad values are refused */
    stg_request bad = {.url = url, .priority = 7};
    assert_int_equal(stg_engine_submit(e, &bad, on_done, &d2, NULL), STG_EINVAL);
    stg_engine_free(e);
    server_cleanup(&a);
}

typedef struct order {
    char seen[64]; /* room for test_learned_slot_handoff, NUL-terminated */
    int n;
} order;

typedef struct tagged {
    order *o;
    char tag;
} tagged;

static void on_order(stg_engine *e, uint64_t id, const stg_result *r, void *data)
{
    (void)e, (void)id, (void)r;
    tagged *t = data;
    t->o->seen[t->o->n++] = t->tag;
}

static void test_priority_low(void **state)
{
    (void)state;
    server a;
    server_start(&a, NULL);
    char url[128];
    url_of(&a, "/p", url, sizeof url);
    stg_engine_config cfg = {.policy = fast_policy(1), .concurrency = 1};
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    order o = {0};
    tagged t[6];
    for (int i = 0; i < 6; i++) {
        t[i] = (tagged){.o = &o, .tag = i < 3 ? 'l' : 'n'};
        stg_request rq = {.url = url, .priority = i < 3 ? STG_PRIORITY_LOW : 0};
        assert_int_equal(stg_engine_submit(e, &rq, on_order, &t[i], NULL), STG_OK);
    }
    assert_int_equal(stg_engine_drain(e), 0);
    stg_engine_free(e);
    server_cleanup(&a);
    assert_string_equal(o.seen, "nnnlll");
}

/* Three classes and two tenants through one slot: interactive first, then
 * normal, then batch; within normal, tenants a and b (weight 1 and 3) by
 * weight (the fair queue's order, core/fairq.h), and the engine's figures
 * per class and tenant (stg_engine_class_stats) count what it admitted;
 * a bad tenant or weight is refused at submit. */
static void test_classes_and_tenants(void **state)
{
    (void)state;
    server a;
    server_start(&a, NULL);
    char url[128];
    url_of(&a, "/c", url, sizeof url);
    stg_engine_config cfg = {.policy = fast_policy(1), .concurrency = 1};
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    stg_request bad = {.url = url, .tenant = "a b"};
    assert_int_equal(stg_engine_submit(e, &bad, on_order, NULL, NULL), STG_EINVAL);
    bad = (stg_request){.url = url, .tenant = "a", .weight = -1};
    assert_int_equal(stg_engine_submit(e, &bad, on_order, NULL, NULL), STG_EINVAL);
    bad = (stg_request){.url = url, .priority = STG_PRIORITY_INTERACTIVE - 1};
    assert_int_equal(stg_engine_submit(e, &bad, on_order, NULL, NULL), STG_EINVAL);
    order o = {0};
    /* b (batch) x2, then normal a x4 (w 1) and normal b x4 (w 3), then
     * interactive i x2: all submitted before the engine runs. */
    static const struct { char tag; int prio; const char *tenant; double w; } sub[] = {
        {'z', STG_PRIORITY_BATCH, NULL, 0}, {'z', STG_PRIORITY_BATCH, NULL, 0},
        {'a', 0, "a", 1}, {'a', 0, "a", 1}, {'a', 0, "a", 1}, {'a', 0, "a", 1},
        {'b', 0, "b", 3}, {'b', 0, "b", 3}, {'b', 0, "b", 3}, {'b', 0, "b", 3},
        {'i', STG_PRIORITY_INTERACTIVE, NULL, 0}, {'i', STG_PRIORITY_INTERACTIVE, NULL, 0},
    };
    tagged t[12];
    for (int i = 0; i < 12; i++) {
        t[i] = (tagged){.o = &o, .tag = sub[i].tag};
        stg_request rq = {.url = url, .priority = sub[i].prio, .tenant = sub[i].tenant,
                          .weight = sub[i].w};
        assert_int_equal(stg_engine_submit(e, &rq, on_order, &t[i], NULL), STG_OK);
    }
    assert_int_equal(stg_engine_drain(e), 0);
    /* SFQ with tags a: 0,1,2,3 and b: 0,1/3,2/3,1 (ties to the heavier b):
     * b a b b b a a a. */
    assert_string_equal(o.seen, "iibabbbaaazz");
    stg_class_stats cs[8];
    size_t n = stg_engine_class_stats(e, cs, 8);
    assert_int_equal(n, 4); /* batch, normal/a, normal/b, interactive */
    uint64_t admitted = 0;
    for (size_t k = 0; k < n; k++) {
        admitted += cs[k].admitted;
        assert_int_equal(cs[k].waiting, 0);
        if (cs[k].tenant && !strcmp(cs[k].tenant, "b"))
            assert_int_equal(cs[k].admitted, 4);
    }
    assert_int_equal(admitted, 12);
    stg_engine_free(e);
    server_cleanup(&a);
}

/* A slot of a learned concurrency, freed, goes to the head of the host's
 * CONC_Q and stays that request's (engine_conc.c). It was given straight
 * back when the woken request entered the retry queue, and the next
 * waiter woken the same way, so one freed slot emptied the whole FIFO
 * into the retry queue, where all but one met a full host and queued
 * again at the tail: behind the proxy (its default, learned concurrency)
 * some requests waited 8 s and more, and their clients timed out. Bound:
 * one attempt each, so each request waits for a slot at most once. */
#define HANDOFF_N 40

static void test_learned_slot_handoff(void **state)
{
    (void)state;
    server a;
    server_start(&a, NULL);
    char url[128];
    url_of(&a, "/h", url, sizeof url);
    stg_concurrency_config learn = {.initial = 2, .min_limit = 2, .max_limit = 2};
    stg_engine_config cfg = {.policy = fast_policy(1), .concurrency = 10, .learn = &learn};
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    order o = {0};
    tagged t[HANDOFF_N];
    for (int i = 0; i < HANDOFF_N; i++) {
        t[i] = (tagged){.o = &o, .tag = 'a' + i % 26};
        stg_request rq = {.url = url};
        assert_int_equal(stg_engine_submit(e, &rq, on_order, &t[i], NULL), STG_OK);
    }
    assert_int_equal(stg_engine_drain(e), 0);
    stg_engine_stats st;
    stg_engine_stats_get(e, &st);
    stg_engine_free(e);
    server_cleanup(&a);
    print_message("learned slots: %llu waits for %d requests\n",
                  (unsigned long long)st.concurrency_waits, HANDOFF_N);
    assert_int_equal(o.n, HANDOFF_N);
    assert_true(st.concurrency_waits >= 1);
    assert_true(st.concurrency_waits <= HANDOFF_N - 2);
}

typedef struct body_src {
    size_t total, sent;
    bool paused_once;
    bool want_resume;
} body_src;

static size_t read_cb(char *buf, size_t size, void *data)
{
    body_src *b = data;
    if (b->sent >= b->total)
        return 0;
    if (b->sent >= b->total / 2 && !b->paused_once) {
        b->paused_once = true;
        b->want_resume = true;
        return STG_READ_PAUSE;
    }
    size_t n = b->total - b->sent < size ? b->total - b->sent : size;
    memset(buf, 'b', n);
    b->sent += n;
    return n;
}

static void test_read_body(void **state)
{
    (void)state;
    server a;
    const char *args[] = {"--fail-first", "1", NULL};
    server_start(&a, args);
    char url[128];
    url_of(&a, "/echo", url, sizeof url);
    stg_engine_config cfg = {.policy = fast_policy(4)};
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    const char *hdr[] = {"X-Client-Id: rb", NULL};
    for (int round = 0; round < 2; round++) {
        body_src b = {.total = 100000};
        done_rec d = {0};
        stg_request rq = {.url = url, .method = "POST", .headers = hdr, .read_body = read_cb,
                          .body_sink_data = &b, .body_len = round ? (size_t)-1 : 100000,
                          .idempotency_key = "k-rb"};
        uint64_t id;
        assert_int_equal(stg_engine_submit(e, &rq, on_done, &d, &id), STG_OK);
        for (int i = 0; i < 200000 && !d.calls; i++) {
            stg_engine_run(e, STG_MS(20));
            if (b.want_resume) {
                b.want_resume = false;
                stg_engine_resume(e, id);
            }
        }
        assert_int_equal(d.calls, 1);
        assert_int_equal(d.r.attempts, 1); /* never resent, key or not */
        if (round == 0) {
            assert_int_equal(d.r.status, 429); /* --fail-first: not retried */
        } else {
            assert_int_equal(d.r.status, 200);
            assert_true(b.paused_once);
            assert_non_null(strstr(d.body, "\"method\":\"POST\""));
        }
    }
    stg_engine_free(e);
    server_stop(&a);
    assert_int_equal(log_count(&a, "\"client\":\"rb\""), 2);
    server_cleanup(&a);
}

/* STG_STREAM_OTHER: a non-2xx body reaches the sink too (the proxy gives
 * it back whole), without making the request final: a 429 whose retry
 * gets a 200 is discarded by a RESTART, and the 200 streams as before; a
 * final 404's bytes are those of the result. Without the flag the sink
 * sees none of them. */
static void test_stream_other(void **state)
{
    (void)state;
    server a;
    const char *args[] = {"--fail-first", "1", "--fail-retry-after", "1", NULL};
    server_start(&a, args);
    char url[128];
    url_of(&a, "/echo", url, sizeof url);
    stg_engine_config cfg = {.policy = fast_policy(3)};
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    const char *hdr[] = {"X-Client-Id: other", NULL};
    unsigned flags = STG_STREAM_HEAD | STG_STREAM_FINAL | STG_STREAM_OTHER;
    rec s = {0};
    done_rec d = {0};
    stg_request rq = {.url = url, .headers = hdr, .body_sink = sink, .body_sink_data = &s,
                      .stream = flags};
    uint64_t id;
    assert_int_equal(stg_engine_submit(e, &rq, on_done, &d, &id), STG_OK);
    run_until(e, id, &d, &s);
    assert_int_equal(d.r.action, STG_ACTION_SUCCESS);
    assert_int_equal(d.r.attempts, 2); /* the 429's bytes did not make it final */
    assert_true(s.restarts >= 1);      /* ... and were discarded */
    assert_int_equal(s.other, 0);
    assert_int_equal(s.heads, 1);
    assert_true(s.off > 0);            /* the 200 streamed */
    for (int with = 0; with <= 1; with++) {
        url_of(&a, "/status/404", url, sizeof url);
        rec s2 = {0};
        done_rec d2 = {0};
        stg_request r2 = {.url = url, .headers = hdr, .body_sink = sink, .body_sink_data = &s2,
                          .stream = with ? flags : STG_STREAM_HEAD | STG_STREAM_FINAL};
        assert_int_equal(stg_engine_submit(e, &r2, on_done, &d2, &id), STG_OK);
        run_until(e, id, &d2, &s2);
        assert_int_equal(d2.r.status, 404);
        assert_true(d2.r.body_len > 0);
        assert_int_equal(s2.heads, 0);
        if (with) {
            assert_int_equal(s2.other, d2.r.body_len);
            assert_string_equal(s2.other_buf, d2.body);
        } else {
            assert_int_equal(s2.other, 0);
        }
    }
    stg_engine_free(e);
    server_cleanup(&a);
}

/* stg_engine_run_fd: the wait ends when the caller's descriptor is
 * readable, long before its timeout; stg_engine_run waits it out. */
static void test_run_fd(void **state)
{
    (void)state;
    stg_engine_config cfg = {.policy = fast_policy(1)};
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    assert_int_equal(write(fds[1], "x", 1), 1);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    stg_engine_run_fd(e, STG_SEC(20), fds[0]); /* readable already: returns at once */
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    assert_true(s < 10.0); /* a hang guard: without the fd it would be 20 s */
    char c;
    assert_int_equal(read(fds[0], &c, 1), 1); /* the engine left it unread */
    close(fds[0]);
    close(fds[1]);
    stg_engine_free(e);
}

static double since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* The caller's fd is the current call's only: a readable fd of a previous
 * call no longer ends the wait, which then lasts its whole timeout (the
 * lower bound is the timeout itself, which a slow machine only lengthens). */
static void test_run_fd_switch(void **state)
{
    (void)state;
    stg_engine_config cfg = {.policy = fast_policy(1)};
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    int a[2], b[2];
    assert_int_equal(pipe(a), 0);
    assert_int_equal(pipe(b), 0);
    assert_int_equal(write(a[1], "x", 1), 1);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    stg_engine_run_fd(e, STG_SEC(20), a[0]);
    assert_true(since(&t0) < 10.0); /* a hang guard, as in test_run_fd */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    stg_engine_run_fd(e, STG_MS(200), b[0]); /* a is readable, b is not */
    assert_true(since(&t0) >= 0.2);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    stg_engine_run(e, STG_MS(200)); /* no fd at all */
    assert_true(since(&t0) >= 0.2);
    assert_int_equal(write(b[1], "y", 1), 1);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    stg_engine_run_fd(e, STG_SEC(20), b[0]);
    assert_true(since(&t0) < 10.0);
    for (int i = 0; i < 2; i++) {
        close(a[i]);
        close(b[i]);
    }
    stg_engine_free(e);
}

/* A regular file: epoll refuses it, poll() calls it always ready; the
 * engine does as poll() did. */
static void test_run_fd_file(void **state)
{
    (void)state;
    stg_engine_config cfg = {.policy = fast_policy(1)};
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    FILE *f = tmpfile();
    assert_non_null(f);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    stg_engine_run_fd(e, STG_SEC(20), fileno(f));
    assert_true(since(&t0) < 10.0); /* a hang guard: without it 20 s */
    fclose(f);
    stg_engine_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_head_before_data, stop_leftovers),
        cmocka_unit_test_teardown(test_final_no_retry, stop_leftovers),
        cmocka_unit_test_teardown(test_pause_resume, stop_leftovers),
        cmocka_unit_test_teardown(test_request_overrides, stop_leftovers),
        cmocka_unit_test_teardown(test_priority_low, stop_leftovers),
        cmocka_unit_test_teardown(test_classes_and_tenants, stop_leftovers),
        cmocka_unit_test_teardown(test_learned_slot_handoff, stop_leftovers),
        cmocka_unit_test_teardown(test_read_body, stop_leftovers),
        cmocka_unit_test_teardown(test_stream_other, stop_leftovers),
        cmocka_unit_test_teardown(test_run_fd, stop_leftovers),
        cmocka_unit_test_teardown(test_run_fd_switch, stop_leftovers),
        cmocka_unit_test_teardown(test_run_fd_file, stop_leftovers),
        cmocka_unit_test_teardown(test_resume_small, stop_leftovers),
        cmocka_unit_test_teardown(test_reused_fd_numbers, stop_leftovers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
