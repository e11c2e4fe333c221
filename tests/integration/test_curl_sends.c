/*
 * Every request that reaches a server is one stagger decided, and secrets
 * stay with their origin: stg_curl_perform and stg_engine against
 * stg_hostile (tests/hostile/hostile.c, which logs every request head it
 * reads) and `stagger serve --reset-every N`, on 127.0.0.1.
 *  - libcurl's own resend on a reused connection that died ("Connection
 *    died, retrying a fresh connect") is refused: the server's request
 *    count equals the attempts stagger counted, and each passed the
 *    limiter (a counting shared limiter); no POST without a key arrives
 *    twice;
 *  - redirects are hops stagger takes: each passes the limiter; X-Api-Key,
 *    X-Auth-Token, Proxy-Authorization and a caller's secret header reach
 *    another origin (another port) never, the same origin always; a 302
 *    POST continues as GET, a 307 keeps POST; a loop ends with "too many
 *    redirects";
 *  - a body over max_body fails the request, never a short success; a
 *    slowloris ends at the attempt timeout; Digest negotiation (libcurl
 *    sending again after a 401) is refused and named;
 *    response headers libcurl refuses are not retried, and a huge status
 *    line is named, not called "Out of memory".
 *
 * Needs STAGGER and HOSTILE in the environment. Only loopback traffic.
 */
#define _GNU_SOURCE
#if defined(__has_include) && !__has_include(<curl/curl.h>)
int main(void)
{
    return 0; /* built without libcurl: nothing to test */
}
#else
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cmocka_all.h"

#include <stagger/curl.h>

#include "integration/hostile_helper.h"

/* ---- a shared limiter that counts what it admits ------------------------ */

typedef struct counting {
    int acquired;
} counting;

static int count_acquire(void *ctx, const char *key, int64_t timeout_us, int64_t *wait_us,
                         int64_t *ticket)
{
    (void)key;
    (void)timeout_us;
    ((counting *)ctx)->acquired++;
    *wait_us = 0;
    *ticket = 0;
    return STG_OK;
}

typedef struct events {
    int starts, ends;
} events;

static void on_ev(const stg_event *ev, void *data)
{
    events *n = data;
    if (ev->type == STG_EVENT_ATTEMPT_START)
        n->starts++;
    else if (ev->type == STG_EVENT_ATTEMPT_END)
        n->ends++;
}

static stg_policy fast_policy(int attempts)
{
    stg_policy p = {0};
    p.max_attempts = attempts;
    p.backoff.base_us = STG_MS(1);
    p.backoff.cap_us = STG_MS(5);
    p.deadline_us = STG_SEC(20);
    return p;
}

/* ---- hidden resends: the blocking call ---------------------------------- */

/* The first answer on each connection is a 503; the retry reuses the
 * connection, which the server reads and closes. libcurl would resend on a
 * fresh connection by itself: the server would see more requests than
 * stagger's attempts, and the limiter would not have passed them. */
static void test_perform_no_hidden_resend(void **state)
{
    (void)state;
    server s;
    const char *args[] = {"--status", "503", NULL};
    hostile_start(&s, "close-reused", args);
    char url[128];
    url_of(&s, "/x", url, sizeof url);
    counting lim = {0};
    stg_shared_limiter sh = {.ctx = &lim, .acquire = count_acquire};
    events n = {0};
    CURL *e = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, url);
    stg_call_config cfg = {.policy = fast_policy(4), .shared = &sh, .url = url, .on_event = on_ev,
                           .event_data = &n};
    stg_result r;
    assert_int_equal(stg_curl_perform(e, &cfg, &r), STG_OK);
    server_stop(&s);
    assert_int_equal(r.action, STG_ACTION_GIVE_UP);
    assert_int_equal(r.attempts, 4);
    assert_int_equal(n.starts, r.attempts);
    assert_int_equal(lim.acquired, r.attempts);
    assert_int_equal(hostile_requests(&s), r.attempts);
    stg_result_free(&r);
    curl_easy_cleanup(e);
    server_cleanup(&s);
}

/* ---- the class reaches the shared limiter (PRIO.md Join 1) --------------- */

typedef struct class_seen {
    int calls, plain;
    int priority;
    char tenant[80];
    double weight;
} class_seen;

static int class_acquire(void *ctx, const char *key, const stg_class *cls, int64_t timeout_us,
                         int64_t *wait_us, int64_t *ticket)
{
    (void)key;
    (void)timeout_us;
    class_seen *c = ctx;
    c->calls++;
    c->priority = cls->priority;
    snprintf(c->tenant, sizeof c->tenant, "%s", cls->tenant ? cls->tenant : "(null)");
    c->weight = cls->weight;
    *wait_us = 0;
    *ticket = 0;
    return STG_OK;
}

static int plain_acquire(void *ctx, const char *key, int64_t timeout_us, int64_t *wait_us,
                         int64_t *ticket)
{
    (void)key;
    (void)timeout_us;
    ((class_seen *)ctx)->plain++;
    *wait_us = 0;
    *ticket = 0;
    return STG_OK;
}

static void class_done(stg_engine *e, uint64_t id, const stg_result *r, void *data)
{
    (void)e, (void)id, (void)r;
    (*(int *)data)++;
}

/* A shared limiter with acquire_class is asked with the request's class
 * and tenant, by the blocking call and by the engine, instead of acquire;
 * a bad class is refused before anything is asked. */
static void test_acquire_class(void **state)
{
    (void)state;
    server s;
    hostile_start(&s, "ok", NULL);
    char url[128];
    url_of(&s, "/x", url, sizeof url);
    class_seen c = {0};
    stg_shared_limiter sh = {.ctx = &c, .acquire = plain_acquire, .acquire_class = class_acquire};
    CURL *easy = curl_easy_init();
    curl_easy_setopt(easy, CURLOPT_URL, url);
    stg_call_config cfg = {.policy = fast_policy(1), .shared = &sh, .url = url,
                           .priority = STG_PRIORITY_BATCH, .tenant = "acme", .weight = 2};
    stg_result r;
    assert_int_equal(stg_curl_perform(easy, &cfg, &r), STG_OK);
    stg_result_free(&r);
    assert_int_equal(c.calls, 1);
    assert_int_equal(c.plain, 0);
    assert_int_equal(c.priority, STG_PRIORITY_BATCH);
    assert_string_equal(c.tenant, "acme");
    assert_true(c.weight == 2);
    cfg.tenant = "no spaces";
    assert_int_equal(stg_curl_perform(easy, &cfg, &r), STG_EINVAL);
    curl_easy_cleanup(easy);

    stg_engine_config ec = {.policy = fast_policy(1), .shared = &sh};
    stg_engine *e = stg_engine_new(&ec, NULL);
    assert_non_null(e);
    int done = 0;
    stg_request rq = {.url = url, .priority = STG_PRIORITY_INTERACTIVE};
    assert_int_equal(stg_engine_submit(e, &rq, class_done, &done, NULL), STG_OK);
    assert_int_equal(stg_engine_drain(e), 0);
    stg_engine_free(e);
    assert_int_equal(done, 1);
    assert_int_equal(c.calls, 2);
    assert_int_equal(c.plain, 0);
    assert_int_equal(c.priority, STG_PRIORITY_INTERACTIVE);
    assert_string_equal(c.tenant, "(null)");
    server_stop(&s);
    server_cleanup(&s);
}

/* ---- hidden resends: the engine ------------------------------------------ */

typedef struct tally {
    int done, ok, gave_up;
} tally;

static void tally_done(stg_engine *e, uint64_t id, const stg_result *r, void *data)
{
    (void)e;
    (void)id;
    tally *t = data;
    t->done++;
    if (r->action == STG_ACTION_SUCCESS)
        t->ok++;
    else
        t->gave_up++;
}

/* Keyless POSTs on reused connections the server closes after reading:
 * none is sent twice, and every request the server saw is an attempt that
 * passed the limiter. */
static void test_engine_post_never_twice(void **state)
{
    (void)state;
    server s;
    hostile_start(&s, "close-reused", NULL);
    counting lim = {0};
    stg_shared_limiter sh = {.ctx = &lim, .acquire = count_acquire};
    stg_engine_config cfg = {.policy = fast_policy(5), .concurrency = 4, .shared = &sh};
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    tally t = {0};
    enum { N = 60 };
    for (int i = 0; i < N; i++) {
        char url[128], path[32];
        snprintf(path, sizeof path, "/p/%d", i);
        url_of(&s, path, url, sizeof url);
        stg_request rq = {.url = url, .method = "POST", .body = "x=1", .body_len = 3};
        assert_int_equal(stg_engine_submit(e, &rq, tally_done, &t, NULL), STG_OK);
    }
    assert_int_equal(stg_engine_drain(e), 0);
    stg_engine_stats st;
    stg_engine_stats_get(e, &st);
    stg_engine_free(e);
    server_stop(&s);
    assert_int_equal(t.done, N);
    assert_int_equal((int)st.attempts, N); /* a keyless POST is never retried */
    assert_int_equal(lim.acquired, N);
    assert_int_equal(hostile_requests(&s), N);
    for (int i = 0; i < N; i++) {
        char needle[48];
        snprintf(needle, sizeof needle, "POST /p/%d HTTP", i);
        assert_int_equal(log_count(&s, needle), 1);
    }
    assert_true(t.gave_up > 0); /* the server did close reused connections */
    server_cleanup(&s);
}

/* GETs through a fixed limiter against `stagger serve --reset-every 3`:
 * the server's log has exactly one line per attempt the engine made. */
static void test_engine_serve_reset_every(void **state)
{
    (void)state;
    server s;
    const char *args[] = {"--reset-every", "3", NULL};
    server_start(&s, args);
    char url[128];
    url_of(&s, "/get", url, sizeof url);
    stg_engine_config cfg = {.policy = fast_policy(6),
                             .concurrency = 10,
                             .limiter = STG_LIMITER_FIXED,
                             .rate = 400,
                             .burst = 1};
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    tally t = {0};
    enum { N = 150 };
    for (int i = 0; i < N; i++) {
        stg_request rq = {.url = url};
        assert_int_equal(stg_engine_submit(e, &rq, tally_done, &t, NULL), STG_OK);
    }
    assert_int_equal(stg_engine_drain(e), 0);
    stg_engine_stats st;
    stg_engine_stats_get(e, &st);
    stg_engine_free(e);
    server_stop(&s);
    assert_int_equal(t.done, N);
    assert_true(st.attempts > N); /* resets happened and were retried */
    assert_int_equal(log_count(&s, "\"path\":\"/get\""), (int)st.attempts);
    server_cleanup(&s);
}

/* Keyless POSTs at concurrency 10 against `stagger serve --reset-every 4`:
 * the server counts no duplicate without a key, and its log has one line
 * per attempt. */
static void test_engine_serve_reset_every_post(void **state)
{
    (void)state;
    server s;
    const char *args[] = {"--reset-every", "4", NULL};
    server_start(&s, args);
    stg_engine_config cfg = {.policy = fast_policy(6), .concurrency = 10};
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    tally t = {0};
    enum { N = 200 };
    for (int i = 0; i < N; i++) {
        char url[128], body[32];
        url_of(&s, "/post", url, sizeof url);
        int n = snprintf(body, sizeof body, "job=%d", i);
        stg_request rq = {.url = url, .method = "POST", .body = body, .body_len = (size_t)n};
        assert_int_equal(stg_engine_submit(e, &rq, tally_done, &t, NULL), STG_OK);
    }
    assert_int_equal(stg_engine_drain(e), 0);
    stg_engine_stats st;
    stg_engine_stats_get(e, &st);
    stg_engine_free(e);

    char url[128];
    url_of(&s, "/__stats", url, sizeof url);
    CURL *c = curl_easy_init();
    curl_easy_setopt(c, CURLOPT_URL, url);
    stg_call_config one = {.url = url};
    stg_result r;
    assert_int_equal(stg_curl_perform(c, &one, &r), STG_OK);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"duplicates_without_key\":0"));
    stg_result_free(&r);
    curl_easy_cleanup(c);
    server_stop(&s);
    assert_int_equal(t.done, N);
    assert_int_equal((int)st.attempts, N);
    assert_int_equal(log_count(&s, "\"path\":\"/post\""), N);
    server_cleanup(&s);
}

/* ---- redirects -------------------------------------------------------------- */

static struct curl_slist *secret_headers(void)
{
    const char *h[] = {"X-Api-Key: k-123", "X-Auth-Token: t-456", "Proxy-Authorization: Basic p",
                       "X-Mine: m-789", "Authorization: Bearer a", "X-Plain: visible", NULL};
    struct curl_slist *l = NULL;
    for (int i = 0; h[i]; i++)
        l = curl_slist_append(l, h[i]);
    return l;
}

static const char *const extra_secret[] = {"X-Mine", NULL};

static void assert_no_secrets(const server *s)
{
    assert_int_equal(hostile_lines(s, "H x-api-key:"), 0);
    assert_int_equal(hostile_lines(s, "H x-auth-token:"), 0);
    assert_int_equal(hostile_lines(s, "H proxy-authorization:"), 0);
    assert_int_equal(hostile_lines(s, "H x-mine:"), 0);
    assert_int_equal(hostile_lines(s, "H authorization:"), 0);
}

static void test_perform_redirect_cross_origin(void **state)
{
    (void)state;
    server b, a;
    hostile_start(&b, "ok", NULL);
    char target[128];
    url_of(&b, "/landed", target, sizeof target);
    const char *args[] = {"--target", target, NULL};
    hostile_start(&a, "redirect", args);
    char url[128];
    url_of(&a, "/start", url, sizeof url);
    struct curl_slist *h = secret_headers();
    counting lim = {0};
    stg_shared_limiter sh = {.ctx = &lim, .acquire = count_acquire};
    CURL *e = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, url);
    stg_call_config cfg = {.policy = fast_policy(3), .url = url, .shared = &sh,
                           .follow_redirects = true, .headers = h,
                           .secret_headers = extra_secret};
    stg_result r;
    assert_int_equal(stg_curl_perform(e, &cfg, &r), STG_OK);
    server_stop(&a);
    server_stop(&b);
    assert_int_equal(r.action, STG_ACTION_SUCCESS);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "ok");
    assert_int_equal(r.attempts, 2);
    assert_int_equal(lim.acquired, 2); /* the hop passed the limiter */
    assert_int_equal(hostile_requests(&a), 1);
    assert_int_equal(hostile_requests(&b), 1);
    assert_int_equal(hostile_lines(&a, "H x-api-key: k-123"), 1);
    assert_int_equal(hostile_lines(&a, "H x-mine: m-789"), 1);
    assert_no_secrets(&b);
    assert_int_equal(hostile_lines(&b, "H x-plain: visible"), 1);
    stg_result_free(&r);
    curl_easy_cleanup(e);
    server_cleanup(&a);
    server_cleanup(&b);

    /* Headers set on the handle only (cfg.headers NULL): the call cannot
     * tell which are secret, so another origin gets none of them. */
    hostile_start(&b, "ok", NULL);
    url_of(&b, "/landed", target, sizeof target);
    hostile_start(&a, "redirect", args);
    url_of(&a, "/start", url, sizeof url);
    e = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(e, CURLOPT_USERPWD, "user:pw");
    stg_call_config bare = {.policy = fast_policy(3), .url = url, .follow_redirects = true};
    assert_int_equal(stg_curl_perform(e, &bare, &r), STG_OK);
    server_stop(&a);
    server_stop(&b);
    assert_int_equal(r.status, 200);
    assert_int_equal(hostile_lines(&a, "H x-api-key: k-123"), 1);
    assert_no_secrets(&b);
    assert_int_equal(hostile_lines(&b, "H x-plain:"), 0);
    assert_int_equal(hostile_lines(&a, "H authorization:"), 1);
    stg_result_free(&r);
    curl_easy_cleanup(e);
    curl_slist_free_all(h);
    server_cleanup(&a);
    server_cleanup(&b);

    /* Credentials set on the handle (CURLOPT_USERPWD): libcurl would send
     * them to any URL the call sets; the call clears them off the origin. */
    hostile_start(&b, "ok", NULL);
    url_of(&b, "/landed", target, sizeof target);
    hostile_start(&a, "redirect", args);
    url_of(&a, "/start", url, sizeof url);
    e = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_USERPWD, "user:pw");
    assert_int_equal(stg_curl_perform(e, &bare, &r), STG_OK);
    server_stop(&a);
    server_stop(&b);
    assert_int_equal(r.status, 200);
    assert_int_equal(hostile_lines(&a, "H authorization: basic"), 1);
    assert_int_equal(hostile_lines(&b, "H authorization:"), 0);
    stg_result_free(&r);
    curl_easy_cleanup(e);
    server_cleanup(&a);
    server_cleanup(&b);
}

static void test_perform_redirect_same_origin_and_methods(void **state)
{
    (void)state;
    struct {
        const char *status, *method_after;
        long body_after;
    } cases[] = {{"302", "GET /landed", 0}, {"303", "GET /landed", 0}, {"307", "POST /landed", 4}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        server a;
        const char *args[] = {"--target", "/landed", "--status", cases[i].status, NULL};
        hostile_start(&a, "redirect", args);
        char url[128];
        url_of(&a, "/start", url, sizeof url);
        struct curl_slist *h = secret_headers();
        CURL *e = curl_easy_init();
        curl_easy_setopt(e, CURLOPT_URL, url);
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, "data");
        stg_call_config cfg = {.policy = fast_policy(3), .url = url, .follow_redirects = true,
                               .headers = h, .method = STG_METHOD_POST,
                               .has_idempotency_key = true};
        stg_result r;
        assert_int_equal(stg_curl_perform(e, &cfg, &r), STG_OK);
        server_stop(&a);
        assert_int_equal(r.status, 200);
        assert_int_equal(r.attempts, 2);
        assert_int_equal(hostile_requests(&a), 2);
        assert_int_equal(hostile_lines(&a, "H x-api-key: k-123"), 2); /* same origin */
        char needle[64];
        snprintf(needle, sizeof needle, "%s HTTP", cases[i].method_after);
        assert_int_equal(log_count(&a, needle), 1);
        snprintf(needle, sizeof needle, "B %ld", cases[i].body_after);
        assert_int_equal(hostile_lines(&a, needle), cases[i].body_after ? 2 : 1);
        stg_result_free(&r);
        curl_easy_cleanup(e);
        curl_slist_free_all(h);
        server_cleanup(&a);
    }
}

static void test_perform_redirect_loop(void **state)
{
    (void)state;
    server a;
    hostile_start(&a, "redirect-loop", NULL);
    char url[128];
    url_of(&a, "/loop/0", url, sizeof url);
    CURL *e = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, url);
    stg_call_config cfg = {.policy = fast_policy(3), .url = url, .follow_redirects = true,
                           .max_redirects = 5};
    stg_result r;
    assert_int_equal(stg_curl_perform(e, &cfg, &r), STG_OK);
    server_stop(&a);
    assert_int_equal(r.action, STG_ACTION_GIVE_UP);
    assert_int_equal(r.status, 302);
    assert_non_null(strstr(r.error_text, "too many redirects"));
    assert_int_equal(r.attempts, 6);
    assert_int_equal(hostile_requests(&a), 6);
    stg_result_free(&r);

    /* Without follow_redirects the 3xx is the answer, even if the handle
     * asked libcurl to follow. */
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
    server_cleanup(&a);
    hostile_start(&a, "redirect-loop", NULL);
    url_of(&a, "/loop/0", url, sizeof url);
    curl_easy_setopt(e, CURLOPT_URL, url);
    stg_call_config plain = {.policy = fast_policy(3), .url = url};
    assert_int_equal(stg_curl_perform(e, &plain, &r), STG_OK);
    server_stop(&a);
    assert_int_equal(r.status, 302);
    assert_int_equal(r.attempts, 1);
    assert_int_equal(hostile_requests(&a), 1);
    stg_result_free(&r);
    curl_easy_cleanup(e);
    server_cleanup(&a);
}

static stg_result g_last;
static char g_last_text[256];
static char g_last_url[256];

static void keep_done(stg_engine *e, uint64_t id, const stg_result *r, void *data)
{
    (void)e;
    (void)id;
    (void)data;
    g_last = *r;
    g_last.body = g_last.headers = g_last.final_url = NULL;
    snprintf(g_last_text, sizeof g_last_text, "%s", r->error_text);
    snprintf(g_last_url, sizeof g_last_url, "%s", r->final_url);
}

static void test_engine_redirects(void **state)
{
    (void)state;
    server b, a, l;
    hostile_start(&b, "ok", NULL);
    char target[128];
    url_of(&b, "/landed", target, sizeof target);
    const char *args[] = {"--target", target, NULL};
    hostile_start(&a, "redirect", args);
    hostile_start(&l, "redirect-loop", NULL);
    counting lim = {0};
    stg_shared_limiter sh = {.ctx = &lim, .acquire = count_acquire};
    stg_engine_config cfg = {.policy = fast_policy(3), .shared = &sh};
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    char url[128];
    url_of(&a, "/start", url, sizeof url);
    const char *hdrs[] = {"X-Api-Key: k-123", "X-Auth-Token: t-456", "Proxy-Authorization: p",
                          "X-Mine: m-789", "X-Plain: visible", NULL};
    stg_request rq = {.url = url, .headers = hdrs, .follow_redirects = true,
                      .secret_headers = extra_secret};
    assert_int_equal(stg_engine_submit(e, &rq, keep_done, NULL, NULL), STG_OK);
    assert_int_equal(stg_engine_drain(e), 0);
    assert_int_equal(g_last.action, STG_ACTION_SUCCESS);
    assert_int_equal(g_last.status, 200);
    assert_int_equal(g_last.attempts, 2);
    assert_int_equal(lim.acquired, 2);
    stg_engine_stats st;
    stg_engine_stats_get(e, &st);
    assert_int_equal((int)st.attempts, 2);
    assert_int_equal((int)st.retries, 0); /* a hop is not a retry */
    assert_string_equal(g_last_url, target); /* where the answer came from */

    char loop[128];
    url_of(&l, "/loop/0", loop, sizeof loop);
    stg_request rl = {.url = loop, .follow_redirects = true, .max_redirects = 4};
    assert_int_equal(stg_engine_submit(e, &rl, keep_done, NULL, NULL), STG_OK);
    assert_int_equal(stg_engine_drain(e), 0);
    stg_engine_free(e);
    server_stop(&a);
    server_stop(&b);
    server_stop(&l);
    assert_int_equal(g_last.action, STG_ACTION_GIVE_UP);
    assert_int_equal(g_last.status, 302);
    assert_int_equal(g_last.attempts, 5);
    assert_non_null(strstr(g_last_text, "too many redirects"));
    assert_int_equal(hostile_requests(&l), 5);
    assert_int_equal(lim.acquired, 2 + 5);

    assert_int_equal(hostile_lines(&a, "H x-api-key: k-123"), 1);
    assert_int_equal(hostile_requests(&b), 1);
    assert_no_secrets(&b);
    assert_int_equal(hostile_lines(&b, "H x-plain: visible"), 1);
    server_cleanup(&a);
    server_cleanup(&b);
    server_cleanup(&l);
}

/* ---- answers too large ---------------------------------------------------- */

static void test_perform_body_over_max(void **state)
{
    (void)state;
    server a;
    const char *args[] = {"--size", "1000000", NULL};
    hostile_start(&a, "big-body", args);
    char url[128];
    url_of(&a, "/x", url, sizeof url);
    CURL *e = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, url);
    stg_call_config cfg = {.policy = fast_policy(3), .url = url, .max_body = 1000};
    stg_result r;
    assert_int_equal(stg_curl_perform(e, &cfg, &r), STG_OK);
    server_stop(&a);
    assert_int_equal(r.action, STG_ACTION_GIVE_UP);
    assert_int_equal(r.reason, STG_REASON_ERROR_NOT_RETRYABLE);
    assert_true(r.body_truncated);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_len, 1000);
    assert_int_equal(r.attempts, 1);
    assert_non_null(strstr(r.error_text, "max_body"));
    assert_int_equal(hostile_requests(&a), 1);
    stg_result_free(&r);
    curl_easy_cleanup(e);
    server_cleanup(&a);
}

static void test_engine_endless_body(void **state)
{
    (void)state;
    server a;
    hostile_start(&a, "endless-body", NULL);
    char url[128];
    url_of(&a, "/x", url, sizeof url);
    stg_engine_config cfg = {.policy = fast_policy(3), .max_body = 100000};
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    stg_request rq = {.url = url};
    assert_int_equal(stg_engine_submit(e, &rq, keep_done, NULL, NULL), STG_OK);
    assert_int_equal(stg_engine_drain(e), 0);
    stg_engine_free(e);
    server_stop(&a);
    assert_int_equal(g_last.action, STG_ACTION_GIVE_UP);
    assert_int_equal(g_last.reason, STG_REASON_ERROR_NOT_RETRYABLE);
    assert_true(g_last.body_truncated);
    assert_int_equal(g_last.body_len, 100000);
    assert_int_equal(g_last.attempts, 1);
    assert_non_null(strstr(g_last_text, "max_body"));
    server_cleanup(&a);
}

/* Headers libcurl refuses are the server's answer, not a reset: one
 * attempt, and a message that says what happened. */
static void test_refused_headers_not_retried(void **state)
{
    (void)state;
    struct {
        const char *mode, *size, *text;
    } cases[] = {{"many-headers", "40000", "too large"},
                 {"huge-status", "200000", "line too long"},
                 {"huge-headers", "200000", "line too long"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        server a;
        const char *args[] = {"--size", cases[i].size, NULL};
        hostile_start(&a, cases[i].mode, args);
        char url[128];
        url_of(&a, "/x", url, sizeof url);
        CURL *e = curl_easy_init();
        curl_easy_setopt(e, CURLOPT_URL, url);
        stg_call_config cfg = {.policy = fast_policy(6), .url = url};
        stg_result r;
        assert_int_equal(stg_curl_perform(e, &cfg, &r), STG_OK);
        server_stop(&a);
        assert_int_equal(r.action, STG_ACTION_GIVE_UP);
        assert_int_equal(r.reason, STG_REASON_ERROR_NOT_RETRYABLE);
        assert_int_equal(r.attempts, 1);
        assert_int_equal(hostile_requests(&a), 1);
        assert_non_null(strcasestr(r.error_text, cases[i].text));
        assert_null(strstr(r.error_text, "Out of memory"));
        stg_result_free(&r);
        curl_easy_cleanup(e);
        server_cleanup(&a);
    }
}

/* A reset in the middle of the headers is a transport error, retried for
 * a GET; NUL bytes in a header end the attempt without a crash. */
static void test_reset_and_nul(void **state)
{
    (void)state;
    server a;
    hostile_start(&a, "reset-headers", NULL);
    char url[128];
    url_of(&a, "/x", url, sizeof url);
    CURL *e = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, url);
    stg_call_config cfg = {.policy = fast_policy(3), .url = url};
    stg_result r;
    assert_int_equal(stg_curl_perform(e, &cfg, &r), STG_OK);
    server_stop(&a);
    assert_int_equal(r.action, STG_ACTION_GIVE_UP);
    assert_int_equal(r.error, STG_NET_RESET);
    assert_int_equal(r.attempts, 3);
    assert_int_equal(hostile_requests(&a), 3);
    stg_result_free(&r);
    server_cleanup(&a);

    hostile_start(&a, "nul", NULL);
    url_of(&a, "/x", url, sizeof url);
    curl_easy_setopt(e, CURLOPT_URL, url);
    assert_int_equal(stg_curl_perform(e, &cfg, &r), STG_OK);
    server_stop(&a);
    assert_int_equal(r.action, STG_ACTION_GIVE_UP);
    assert_int_equal(hostile_requests(&a), r.attempts);
    stg_result_free(&r);
    curl_easy_cleanup(e);
    server_cleanup(&a);
}

/* Digest authentication is libcurl sending the request again after the
 * 401 on its own: refused (one request reached the server), and the call
 * says why instead of retrying. */
static void test_auth_negotiation_is_not_hidden(void **state)
{
    (void)state;
    server a;
    hostile_start(&a, "auth", NULL);
    char url[128];
    url_of(&a, "/x", url, sizeof url);
    CURL *e = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_HTTPAUTH, (long)CURLAUTH_DIGEST);
    curl_easy_setopt(e, CURLOPT_USERPWD, "u:p");
    stg_call_config cfg = {.policy = fast_policy(3), .url = url};
    stg_result r;
    assert_int_equal(stg_curl_perform(e, &cfg, &r), STG_OK);
    server_stop(&a);
    assert_int_equal(r.action, STG_ACTION_GIVE_UP);
    assert_int_equal(r.status, 401);
    assert_int_equal(r.attempts, 1);
    assert_int_equal(hostile_requests(&a), 1);
    assert_non_null(strstr(r.error_text, "authentication"));
    stg_result_free(&r);
    curl_easy_cleanup(e);
    server_cleanup(&a);
}

/* A server that trickles its headers forever: each attempt ends at the
 * attempt timeout, a GET is retried, and the server saw every attempt and
 * nothing else. */
static void test_slowloris_timeout(void **state)
{
    (void)state;
    server a;
    hostile_start(&a, "slowloris", NULL);
    char url[128];
    url_of(&a, "/x", url, sizeof url);
    CURL *e = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, url);
    stg_call_config cfg = {.policy = fast_policy(2), .url = url};
    cfg.policy.attempt_timeout_us = STG_MS(300);
    stg_result r;
    assert_int_equal(stg_curl_perform(e, &cfg, &r), STG_OK);
    server_stop(&a);
    assert_int_equal(r.action, STG_ACTION_GIVE_UP);
    assert_int_equal(r.error, STG_NET_TIMEOUT);
    assert_int_equal(r.attempts, 2);
    assert_int_equal(hostile_requests(&a), 2);
    stg_result_free(&r);
    curl_easy_cleanup(e);
    server_cleanup(&a);
}

/* A timeout on a reused connection: the request left (the server read
 * it), although CURLINFO_CONNECT_TIME is 0 for a connection an earlier
 * transfer made. It is a TIMEOUT ("may have been processed"), never a
 * CONNECT_TIMEOUT ("provably never sent", which stg_decide lets even a
 * keyless POST retry): the engine keeps connections between requests, so
 * a keyless POST on a kept connection that hangs is sent once. */
typedef struct last {
    int done;
    stg_result r;
} last;

static void keep_last(stg_engine *e, uint64_t id, const stg_result *r, void *data)
{
    (void)e;
    (void)id;
    last *l = data;
    l->done++;
    l->r = *r; /* the fields read below only: no buffer is kept */
}

static void test_engine_timeout_on_reused_connection(void **state)
{
    (void)state;
    server s;
    hostile_start(&s, "hang-reused", NULL);
    stg_engine_config cfg = {.policy = fast_policy(3), .concurrency = 1};
    cfg.policy.attempt_timeout_us = STG_MS(300);
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    char url[128];
    last first = {0}, post = {0};
    url_of(&s, "/a", url, sizeof url);
    stg_request get = {.url = url};
    assert_int_equal(stg_engine_submit(e, &get, keep_last, &first, NULL), STG_OK);
    assert_int_equal(stg_engine_drain(e), 0); /* answered; the connection is kept */
    url_of(&s, "/p", url, sizeof url);
    stg_request rq = {.url = url, .method = "POST", .body = "x=1", .body_len = 3};
    assert_int_equal(stg_engine_submit(e, &rq, keep_last, &post, NULL), STG_OK);
    assert_int_equal(stg_engine_drain(e), 0);
    stg_engine_free(e);
    server_stop(&s);
    assert_int_equal(first.done, 1);
    assert_int_equal(first.r.status, 200);
    assert_int_equal(post.done, 1);
    assert_int_equal(post.r.action, STG_ACTION_GIVE_UP);
    assert_int_equal(post.r.error, STG_NET_TIMEOUT);
    assert_int_equal(post.r.attempts, 1);
    assert_int_equal(log_count(&s, "reuse=1 POST /p"), 1); /* it left, on the kept connection */
    assert_int_equal(log_count(&s, "POST /p"), 1);         /* and only once */
    server_cleanup(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_perform_no_hidden_resend, stop_leftovers),
        cmocka_unit_test_teardown(test_acquire_class, stop_leftovers),
        cmocka_unit_test_teardown(test_engine_post_never_twice, stop_leftovers),
        cmocka_unit_test_teardown(test_engine_serve_reset_every, stop_leftovers),
        cmocka_unit_test_teardown(test_engine_serve_reset_every_post, stop_leftovers),
        cmocka_unit_test_teardown(test_perform_redirect_cross_origin, stop_leftovers),
        cmocka_unit_test_teardown(test_perform_redirect_same_origin_and_methods, stop_leftovers),
        cmocka_unit_test_teardown(test_perform_redirect_loop, stop_leftovers),
        cmocka_unit_test_teardown(test_engine_redirects, stop_leftovers),
        cmocka_unit_test_teardown(test_perform_body_over_max, stop_leftovers),
        cmocka_unit_test_teardown(test_engine_endless_body, stop_leftovers),
        cmocka_unit_test_teardown(test_refused_headers_not_retried, stop_leftovers),
        cmocka_unit_test_teardown(test_reset_and_nul, stop_leftovers),
        cmocka_unit_test_teardown(test_auth_negotiation_is_not_hidden, stop_leftovers),
        cmocka_unit_test_teardown(test_slowloris_timeout, stop_leftovers),
        cmocka_unit_test_teardown(test_engine_timeout_on_reused_connection, stop_leftovers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
