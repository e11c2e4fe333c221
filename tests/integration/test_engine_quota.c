/*
 * The engine's quota limiter (stg_engine_config.quotas) against `stagger
 * serve --rate R --burst B --ratelimit-headers` on 127.0.0.1: the server
 * announces, on every answer, its bucket's remaining tokens and the time
 * until it is full (X-RateLimit-* and RateLimit), and refuses with 429
 * what its bucket does not hold. With no limiter of its own, the engine
 * must keep to what the server announced:
 *  - every request succeeds on its first attempt and the server refuses
 *    none (its log has no 429): the bound is the protocol's (never more
 *    than the announced remaining before the announced reset, the
 *    requests in flight counted), with the first wave (concurrency <=
 *    burst, sent before any answer) inside the bucket too;
 *  - a request whose declared cost passes the announced limit is never
 *    sent: it ends ERROR_NOT_RETRYABLE with no attempt;
 *  - the same against provider personas (serve --dialect): Discord's
 *    bucket, named by X-RateLimit-Bucket and shared by every route of its
 *    first path segment; GitHub's resources (core and search, keyed by
 *    x-ratelimit-resource, windows with epoch resets); OpenAI's two quotas
 *    at once, requests and tokens, each request costing tokens
 *    (X-Token-Cost, declared to the engine as its cost). No refusal, every
 *    request on its first attempt;
 *  - classes and tenants at a quota (docs/priorities.md): a higher class
 *    waiting for the quota gets what it frees first; two tenants of one
 *    class waiting for OpenAI's token quota share its tokens by weight
 *    (1:2 at equal cost, 1:1 at costs 2:1), one coming late included, and
 *    one that stops leaves its share; waiters queue per group of routes
 *    that share a quota: two routes of one key are ordered together (the
 *    higher class of either first), routes of apart keys never wait for
 *    each other, and the groups follow the keys learned while they wait;
 *  - with shared_quotas (a ledger shared with other processes; a fake
 *    here): each send is also asked there with its cost, a refusal there
 *    holds it back, and each ticket is settled exactly once with the
 *    answer's quotas; with its acquire_class, each send is asked by its
 *    request's class.
 *
 * Needs STAGGER (the stagger binary) in the environment. Only loopback.
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

static const char *const LIMITED[] = {"--rate", "10", "--burst", "5", "--ratelimit-headers",
                                      NULL};

/* The fixture of every run here: n requests at concurrency 4 against
 * serve ARGS, to paths[i % n_paths] (paths NULL: "/item/I", one route
 * each), each with the given header (may be NULL) and cost (may be NULL);
 * every one must succeed on its first attempt, the server refusing none
 * (its log has no `refusal` and n 200s; the engine counted no 429). */
static void quota_run(const char *const *args, const char *const *paths, int n_paths, int n,
                      const char *header, const stg_quota_cost *cost, const char *refusal)
{
    server s;
    server_start(&s, args);
    stg_engine_config cfg = {.concurrency = 4, .quotas = true};
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    done_tally c = {0};
    const char *hdrs[2] = {header, NULL};
    for (int i = 0; i < n; i++) {
        char url[128], path[32];
        snprintf(path, sizeof path, "/item/%d", i);
        url_of(&s, paths ? paths[i % n_paths] : path, url, sizeof url);
        stg_request rq = {.url = url, .headers = header ? hdrs : NULL,
                          .cost = cost, .n_cost = cost ? 1 : 0};
        assert_int_equal(stg_engine_submit(e, &rq, tally_done, &c, NULL), STG_OK);
    }
    assert_int_equal(stg_engine_drain(e), 0);
    stg_engine_stats st;
    stg_engine_stats_get(e, &st);
    stg_engine_free(e);
    server_stop(&s);
    assert_int_equal(c.done, n);
    assert_int_equal(c.ok_200, n);
    assert_int_equal(c.first_try, n);
    assert_int_equal((int)st.status_429, 0);
    assert_int_equal(log_count(&s, refusal), 0);
    assert_int_equal(log_count(&s, "\"status\":200"), n);
    server_cleanup(&s);
}

static void test_engine_keeps_to_announced_quota(void **state)
{
    (void)state;
    quota_run(LIMITED, NULL, 0, 30, NULL, NULL, "\"status\":429");
}

static void test_cost_over_limit_never_sent(void **state)
{
    (void)state;
    server s;
    server_start(&s, LIMITED);
    char url[128];
    url_of(&s, "/first", url, sizeof url);
    stg_engine_config cfg = {.quotas = true};
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    done_tally c = {0};
    stg_request rq = {.url = url};
    assert_int_equal(stg_engine_submit(e, &rq, tally_done, &c, NULL), STG_OK);
    assert_int_equal(stg_engine_drain(e), 0);
    assert_int_equal(c.ok_200, 1);
    /* The server announces at most 10 requests a window (its
     * RateLimit-Policy q=10;w=1 at 10/s): a request that says it costs 11
     * can never fit. */
    stg_quota_cost cost = {.unit = "requests", .amount = 11};
    url_of(&s, "/second", url, sizeof url);
    stg_request big = {.url = url, .cost = &cost, .n_cost = 1};
    assert_int_equal(stg_engine_submit(e, &big, tally_done, &c, NULL), STG_OK);
    assert_int_equal(stg_engine_drain(e), 0);
    assert_int_equal(c.done, 2);
    assert_int_equal(c.last_reason, STG_REASON_ERROR_NOT_RETRYABLE);
    assert_int_equal(c.last_attempts, 0);
    /* A negative cost is refused at submit. */
    cost.amount = -1;
    assert_int_equal(stg_engine_submit(e, &big, tally_done, &c, NULL), STG_EINVAL);
    stg_engine_free(e);
    server_stop(&s);
    assert_int_equal(log_count(&s, "/second"), 0);
    server_cleanup(&s);
}

static void test_persona_discord_bucket(void **state)
{
    (void)state;
    static const char *const args[] = {"--dialect", "discord", "--quota", "bucket=5/1s", NULL};
    static const char *const paths[] = {"/channels/1", "/channels/2", "/channels/3"};
    quota_run(args, paths, 3, 15, NULL, NULL, "\"status\":429");
}

typedef struct class_order {
    char seen[32];
    int n;
} class_order;

typedef struct class_tag {
    class_order *o;
    char tag;
} class_tag;

static void on_class_done(stg_engine *e, uint64_t id, const stg_result *r, void *data)
{
    (void)e, (void)id;
    class_tag *t = data;
    if (r->status == 200 && t->o->n < 31)
        t->o->seen[t->o->n++] = t->tag;
}

/* A server quota and two classes (docs/priorities.md): twelve batch
 * requests spend a 6-per-2-s quota and wait for its reset; four
 * interactive ones arrive while they wait. While an interactive one waits
 * for the quota, batch requests do not ask it (the floor, 19 grants to
 * the others, is not reached by 4), so at the reset the four go first:
 * of the six batch requests that waited for it, at least four come after
 * the last interactive one (the reset's six grants: the four, then two).
 * Without the order the batch requests, waiting longer, took the reset's
 * grants first. */
static void test_quota_by_class(void **state)
{
    (void)state;
    server s;
    static const char *const args[] = {"--dialect", "github", "--quota", "core=6/2s", NULL};
    server_start(&s, args);
    char url[128];
    url_of(&s, "/repos/a", url, sizeof url);
    stg_engine_config cfg = {.concurrency = 30, .quotas = true};
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    class_order o = {0};
    class_tag tb = {&o, 'b'}, ti = {&o, 'i'};
    for (int i = 0; i < 12; i++) {
        stg_request rq = {.url = url, .priority = STG_PRIORITY_BATCH};
        assert_int_equal(stg_engine_submit(e, &rq, on_class_done, &tb, NULL), STG_OK);
    }
    /* Until the first window's six are answered (a hang guard of 30 s). */
    for (int k = 0; k < 3000 && o.n < 6; k++)
        stg_engine_run(e, STG_MS(10));
    assert_int_equal(o.n, 6);
    for (int i = 0; i < 4; i++) {
        stg_request rq = {.url = url, .priority = STG_PRIORITY_INTERACTIVE};
        assert_int_equal(stg_engine_submit(e, &rq, on_class_done, &ti, NULL), STG_OK);
    }
    assert_int_equal(stg_engine_drain(e), 0);
    stg_engine_free(e);
    server_stop(&s);
    server_cleanup(&s);
    print_message("completion order: %s\n", o.seen);
    assert_int_equal(o.n, 16);
    const char *last_i = strrchr(o.seen, 'i');
    assert_non_null(last_i);
    int after = (int)strlen(last_i + 1);
    assert_true(after >= 4);
}

/* Quota waiters queue per group of routes that share a quota, as the
 * quotas are kept: twelve requests to /repos/a spend what is left of
 * GitHub's core quota (6 per 2 s) and seven of them wait for its reset;
 * four to /search/code, whose search quota is free, arrive while they
 * wait (one search before, so that the engine knows the route's quota).
 * They do not wait behind core's head: all four are answered before the
 * first request that waited for core's reset (one queue per host made
 * them wait for it, then for the seven). */
static void test_quota_per_route(void **state)
{
    (void)state;
    server s;
    static const char *const args[] = {"--dialect", "github", "--quota", "core=6/2s",
                                       "--quota", "search=30/2s", NULL};
    server_start(&s, args);
    char core[128], search[128];
    url_of(&s, "/repos/a", core, sizeof core);
    url_of(&s, "/search/code", search, sizeof search);
    stg_engine_config cfg = {.concurrency = 30, .quotas = true};
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    class_order o = {0};
    class_tag tc = {&o, 'c'}, ts = {&o, 's'};
    /* One search and one core first, so that the engine knows which
     * quota each route spends (a route not yet answered may spend any of
     * the host's, and is sent as a probe). */
    stg_request first = {.url = search}, second = {.url = core};
    assert_int_equal(stg_engine_submit(e, &first, on_class_done, &ts, NULL), STG_OK);
    assert_int_equal(stg_engine_drain(e), 0);
    assert_int_equal(stg_engine_submit(e, &second, on_class_done, &tc, NULL), STG_OK);
    assert_int_equal(stg_engine_drain(e), 0);
    assert_int_equal(o.n, 2);
    for (int i = 0; i < 12; i++) {
        stg_request rq = {.url = core};
        assert_int_equal(stg_engine_submit(e, &rq, on_class_done, &tc, NULL), STG_OK);
    }
    /* Until the window's other five are answered (a hang guard of 30 s). */
    for (int k = 0; k < 3000 && o.n < 7; k++)
        stg_engine_run(e, STG_MS(10));
    assert_int_equal(o.n, 7);
    for (int i = 0; i < 4; i++) {
        stg_request rq = {.url = search};
        assert_int_equal(stg_engine_submit(e, &rq, on_class_done, &ts, NULL), STG_OK);
    }
    assert_int_equal(stg_engine_drain(e), 0);
    stg_engine_free(e);
    server_stop(&s);
    server_cleanup(&s);
    print_message("completion order: %s\n", o.seen);
    assert_int_equal(o.n, 18);
    assert_string_equal(o.seen, "scccccc" "ssss" "ccccccc");
}

typedef struct tenant_log {
    uint64_t id[160];
    char tag[160]; /* the tenant of id[i] */
    int n_ids;
    char grant[256]; /* attempt starts in order: the quota's grants */
    int64_t at[256]; /* when each started (the engine's clock, us) */
    int n, done, failed;
} tenant_log;

static void on_tenant_event(const stg_event *ev, void *data)
{
    tenant_log *l = data;
    if (ev->type != STG_EVENT_ATTEMPT_START || l->n >= 256)
        return;
    for (int i = 0; i < l->n_ids; i++)
        if (l->id[i] == ev->request_id) {
            l->at[l->n] = ev->now_us;
            l->grant[l->n++] = l->tag[i];
        }
}

static void on_tenant_done(stg_engine *e, uint64_t id, const stg_result *r, void *data)
{
    (void)e, (void)id;
    tenant_log *l = data;
    l->done++;
    l->failed += r->status != 200;
}

/* Wall-clock microseconds (the persona's fixed windows are aligned to
 * it). */
static int64_t wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Early in one of the persona's 2 s windows (aligned to the wall clock),
 * so that what a test sends first shares it. */
static void window_start(void)
{
    int64_t phase = wall_us() % STG_SEC(2);
    if (phase > STG_MS(300))
        usleep((useconds_t)(STG_SEC(2) - phase + STG_MS(50)));
}

static void submit_tagged(stg_engine *e, tenant_log *l, const char *url, int n, char tag,
                          int priority)
{
    for (int i = 0; i < n; i++) {
        stg_request rq = {.url = url, .priority = priority};
        uint64_t id = 0;
        assert_int_equal(stg_engine_submit(e, &rq, on_tenant_done, l, &id), STG_OK);
        assert_true(l->n_ids < 160);
        l->id[l->n_ids] = id;
        l->tag[l->n_ids++] = tag;
    }
}

/* An engine with the quotas that logs its grants (attempt starts) in l. */
static stg_engine *grant_engine(tenant_log *l)
{
    memset(l, 0, sizeof *l);
    stg_engine_config cfg = {.concurrency = 30, .quotas = true, .on_event = on_tenant_event,
                             .event_data = l};
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    return e;
}

/* Run e until n grants (a hang guard of 30 s). */
static void until_grants(stg_engine *e, const tenant_log *l, int n)
{
    for (int k = 0; k < 3000 && l->n < n; k++)
        stg_engine_run(e, STG_MS(10));
    assert_int_equal(l->n, n);
}

/* Early in a window, one answer of route a, then one of b (the engine
 * learns which quotas each spends). */
static void answer_each(stg_engine *e, tenant_log *l, const char *a, const char *b)
{
    window_start();
    submit_tagged(e, l, a, 1, 'n', STG_PRIORITY_NORMAL);
    assert_int_equal(stg_engine_drain(e), 0);
    submit_tagged(e, l, b, 1, 'n', STG_PRIORITY_NORMAL);
    assert_int_equal(stg_engine_drain(e), 0);
}

/* Drain e, free it and s, and print l's grants (mark: where the reset
 * is). */
static void grants_done(stg_engine *e, server *s, tenant_log *l, int mark)
{
    assert_int_equal(stg_engine_drain(e), 0);
    stg_engine_free(e);
    server_stop(s);
    server_cleanup(s);
    l->grant[l->n < 256 ? l->n : 255] = 0;
    print_message("grants: %s (the reset at %d)\n", l->grant, mark);
}

/* Two routes that share one quota key (issue #32): GitHub's core (quota
 * per 2 s) serves /repos/a and /repos/b alike, and the engine knows it
 * (one answer each first). n_batch batch requests to /repos/a spend what
 * is left of the window and wait for its reset; n_inter interactive ones
 * to /repos/b come while they wait. They are ordered in one queue: after
 * the reset the interactive ones go first, but for the floor (the batch
 * class gets the pick after 19 of the others'): the grants from the reset
 * on begin with `after`. The grants are the attempts' starts, in order. */
static void shared_key_by_class(int quota, int n_batch, int n_inter, const char *after)
{
    server s;
    char spec[32];
    snprintf(spec, sizeof spec, "core=%d/2s", quota);
    const char *const args[] = {"--dialect", "github", "--quota", spec, NULL};
    server_start(&s, args);
    char ra[128], rb[128];
    url_of(&s, "/repos/a", ra, sizeof ra);
    url_of(&s, "/repos/b", rb, sizeof rb);
    static tenant_log l;
    stg_engine *e = grant_engine(&l);
    answer_each(e, &l, ra, rb);
    submit_tagged(e, &l, ra, n_batch, 'b', STG_PRIORITY_BATCH);
    until_grants(e, &l, quota); /* the window's */
    int mark = l.n;
    submit_tagged(e, &l, rb, n_inter, 'i', STG_PRIORITY_INTERACTIVE);
    grants_done(e, &s, &l, mark);
    assert_int_equal(l.done, 2 + n_batch + n_inter);
    assert_int_equal(l.failed, 0);
    assert_int_equal(l.n, 2 + n_batch + n_inter);
    assert_memory_equal(l.grant, "nn", 2);
    for (int i = 2; i < mark; i++)
        assert_int_equal(l.grant[i], 'b');
    assert_memory_equal(l.grant + mark, after, strlen(after));
}

/* Six per window, twelve batch and four interactive: the four are the
 * reset's first four grants. With one queue per route they were the last
 * four (nnbbbbbbbbbbbbiiii). */
static void test_quota_shared_key_by_class(void **state)
{
    (void)state;
    shared_key_by_class(6, 12, 4, "iiii");
}

/* Thirty per window, 40 batch and 25 interactive: the floor's pick goes to
 * batch after 19 interactive grants, then the interactive ones again. */
static void test_quota_shared_key_floor(void **state)
{
    (void)state;
    shared_key_by_class(30, 40, 25, "iiiiiiiiiiiiiiiiiiibiiiiii");
}

/* Keys learned while requests wait (the groups follow them): GitHub's
 * core (6 per 2 s) and search (3 per 2 s), each route answered once.
 * Twelve batch requests to /repos/a and six to /search/code spend their
 * windows and wait in two queues (their keys apart). Then an interactive
 * request to /users/x, a route never answered, so charged to every quota:
 * it joins a queue, and the first head that asks merges the other one in.
 * At the reset it is the first grant (its class, whatever queue its
 * route's keys met); its answer tells that its route spends core only,
 * and the queue splits again when its head asks. Every request succeeds
 * (a search may be refused once and retried: the limiter lets a quota
 * the unknown route's probe did not get a count for go without a gate
 * until its own next answer). */
static void test_quota_groups_follow_keys(void **state)
{
    (void)state;
    server s;
    static const char *const args[] = {"--dialect", "github", "--quota", "core=6/2s",
                                       "--quota", "search=3/2s", NULL};
    server_start(&s, args);
    char core[128], search[128], users[128];
    url_of(&s, "/repos/a", core, sizeof core);
    url_of(&s, "/search/code", search, sizeof search);
    url_of(&s, "/users/x", users, sizeof users);
    static tenant_log l;
    stg_engine *e = grant_engine(&l);
    answer_each(e, &l, core, search);
    submit_tagged(e, &l, core, 12, 'c', STG_PRIORITY_BATCH);
    submit_tagged(e, &l, search, 6, 's', STG_PRIORITY_BATCH);
    until_grants(e, &l, 9); /* the windows' 6 + 3 */
    int mark = l.n;
    submit_tagged(e, &l, users, 1, 'i', STG_PRIORITY_INTERACTIVE);
    grants_done(e, &s, &l, mark);
    assert_int_equal(l.done, 21);
    assert_int_equal(l.failed, 0);
    assert_true(l.n >= 21);
    assert_int_equal(l.grant[mark], 'i');
}

static void submit_tenant(stg_engine *e, tenant_log *l, const char *url, int n, char tag,
                          double w, int64_t tokens)
{
    stg_quota_cost cost = {.unit = "tokens", .amount = tokens};
    char hdr[64];
    snprintf(hdr, sizeof hdr, "X-Token-Cost: %lld", (long long)tokens);
    const char *hdrs[] = {hdr, NULL};
    stg_policy pol = fast_policy(5);
    for (int i = 0; i < n; i++) {
        char tenant[2] = {tag, 0};
        stg_request rq = {.url = url, .headers = hdrs, .cost = &cost, .n_cost = 1,
                          .policy = &pol, .tenant = tenant, .weight = w};
        uint64_t id = 0;
        assert_int_equal(stg_engine_submit(e, &rq, on_tenant_done, l, &id), STG_OK);
        assert_true(l->n_ids < 160);
        l->id[l->n_ids] = id;
        l->tag[l->n_ids++] = tag;
    }
}

/* Two tenants of one class behind OpenAI's persona with 3000 tokens a
 * second (a bucket refilled continuously, full at the start), the
 * bottleneck (requests: 1000/s; the engine: 8 at once); each request
 * declares its tokens (X-Token-Cost, and its cost to the engine). The
 * grants are the attempts' starts, in order. Tenant a (weight wa, ca
 * tokens a request) submits 72 and has the quota to itself: its first
 * 3000/ca go at once (the bucket), the rest wait. Then tenant b (weight
 * wb, cb tokens) submits 48. From then on, while both wait, the tokens
 * granted split wa:wb, so a has a_due grants more when b has its 48.
 * Slack: +-4 grants, for the fair queue's bound (c/w_a + c/w_b in cost,
 * 1.5 requests of b) and the head that was asking when b came. Then b
 * stops asking (it has nothing left): a gets the whole quota at once, its
 * rate after b's last grant at least `faster` times its rate while b
 * asked. Every request succeeds. */
static void tenants_at_quota(double wa, int64_t ca, double wb, int64_t cb, int a_due,
                             double faster)
{
    static const char *const args[] = {"--dialect", "openai", "--quota", "requests=1000/1s",
                                       "--quota", "tokens=3000/1s", NULL};
    server s;
    server_start(&s, args);
    char url[128];
    url_of(&s, "/v1/chat/completions", url, sizeof url);
    static tenant_log l;
    memset(&l, 0, sizeof l);
    stg_engine_config cfg = {.concurrency = 8, .quotas = true, .on_event = on_tenant_event,
                             .event_data = &l};
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    enum { NA = 72, NB = 48 };
    int burst = (int)(3000 / ca);
    submit_tenant(e, &l, url, NA, 'a', wa, ca);
    /* Until a's first burst is granted (a hang guard of 30 s). */
    for (int k = 0; k < 3000 && l.n < burst; k++)
        stg_engine_run(e, STG_MS(10));
    int mark = l.n;
    assert_true(mark >= burst && mark < burst + 8);
    submit_tenant(e, &l, url, NB, 'b', wb, cb);
    assert_int_equal(stg_engine_drain(e), 0);
    stg_engine_free(e);
    server_stop(&s);
    server_cleanup(&s);
    l.grant[l.n < 256 ? l.n : 255] = 0;
    print_message("grants: %s\n", l.grant);
    assert_int_equal(l.done, NA + NB);
    assert_int_equal(l.failed, 0);
    int na = 0, nb = 0, b_last = -1;
    for (int i = mark; i < l.n; i++) {
        if (l.grant[i] == 'b' && ++nb == NB) {
            b_last = i;
            break;
        }
        na += l.grant[i] == 'a';
    }
    assert_true(b_last > mark);
    print_message("a had %d more when b had its %d (due %d)\n", na, NB, a_due);
    assert_true(na >= a_due - 4 && na <= a_due + 4);
    /* a's rate while b asked, and after: its share, then the quota. */
    int na_after = 0;
    for (int i = b_last + 1; i < l.n; i++)
        na_after += l.grant[i] == 'a';
    assert_true(na_after >= 10);
    double before = (double)na / (double)(l.at[b_last] - l.at[mark]);
    double after = (double)na_after / (double)(l.at[l.n - 1] - l.at[b_last]);
    print_message("a's rate: %.1f/s while b asked, %.1f/s after\n", before * 1e6, after * 1e6);
    assert_true(after >= faster * before);
}

/* Weights 1:2, 100 tokens each (docs/priorities.md): a gets 24 grants
 * while b gets its 48 (its third: 10/s), then the quota's 30/s (3x due,
 * 2x asserted). Without weights at the quota a's waiters, there first,
 * kept asking first: a had all its 42 before b's last. */
static void test_quota_by_tenant_weight(void **state)
{
    (void)state;
    tenants_at_quota(1, 100, 2, 100, 24, 2.0);
}

/* Weights 1:1, a's requests 200 tokens and b's 100: the tokens split
 * 1:1, so a gets 24 grants (4800 tokens) while b gets its 48 (4800), at
 * 7.5/s, then the quota's 15/s (2x due, 1.4x asserted). By count it
 * would have been 48. */
static void test_quota_by_tenant_cost(void **state)
{
    (void)state;
    tenants_at_quota(1, 200, 1, 100, 24, 1.4);
}

static void test_persona_github_resources(void **state)
{
    (void)state;
    static const char *const args[] = {"--dialect", "github", "--quota", "core=6/2s",
                                       "--quota", "search=3/2s", NULL};
    static const char *const paths[] = {"/repos/a", "/search/code", "/repos/b"};
    quota_run(args, paths, 3, 12, NULL, NULL, "\"status\":403");
}

static void test_persona_openai_tokens(void **state)
{
    (void)state;
    /* Tokens bind first: 1000 a second, 300 a request, so 3 a second, while
     * 50 requests a second would allow far more. */
    static const char *const args[] = {"--dialect", "openai", "--quota", "requests=50/1s",
                                       "--quota", "tokens=1000/1s", NULL};
    static const char *const paths[] = {"/v1/chat/completions"};
    stg_quota_cost cost = {.unit = "tokens", .amount = 300};
    quota_run(args, paths, 1, 10, "X-Token-Cost: 300", &cost, "\"status\":429");
}

/* Azure's persona announces only remaining counts, never a reset, and
 * every 3rd request loses its connection before any answer (counted by the
 * server, told to nobody). A count the engine spent on sends that got no
 * answer is left at 0 with nothing in flight and no reset known: no
 * answer is coming to restore it. The rule: one probe after empty_wait
 * (1 s, no less than the persona's 1 s window, so the probe finds the
 * window turned), never a stall, never a send at once into the count the
 * server last said was spent. Every job completes; the server refuses
 * none. */
static void test_spent_idle_quota_probes(void **state)
{
    (void)state;
    static const char *const args[] = {"--dialect", "azure", "--quota", "requests=3/1s",
                                       "--reset-every", "3", NULL};
    server s;
    server_start(&s, args);
    stg_engine_config cfg = {.concurrency = 4, .quotas = true};
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    done_tally c = {0};
    const int n = 8;
    for (int i = 0; i < n; i++) {
        char url[128], path[32];
        snprintf(path, sizeof path, "/openai/deployments/d/chat/%d", i);
        url_of(&s, path, url, sizeof url);
        stg_request rq = {.url = url};
        assert_int_equal(stg_engine_submit(e, &rq, tally_done, &c, NULL), STG_OK);
    }
    assert_int_equal(stg_engine_drain(e), 0);
    stg_engine_stats st;
    stg_engine_stats_get(e, &st);
    stg_engine_free(e);
    server_stop(&s);
    assert_int_equal(c.done, n);
    assert_int_equal(c.ok_200, n);
    assert_true(log_count(&s, "reset") >= 1); /* the fault did happen */
    assert_int_equal((int)st.status_429, 0);
    assert_int_equal(log_count(&s, "\"status\":429"), 0);
    server_cleanup(&s);
}

/* stg_engine_config.shared_quotas: a ledger shared with other processes,
 * here a fake that refuses every other first ask (a wait of 30 ms) and
 * counts. Every send the local quotas admit is asked there with its cost,
 * a refusal there holds the send back (no request reaches the server
 * without a ticket), and every ticket is settled exactly once, as
 * answered, with the answer's quotas (ASan catches a double settle: the
 * ticket is freed there). */
typedef struct fake_ledger {
    int asks, refused, tickets, settled, answered, with_quotas, out, max_out;
    int class_asks, by_class[STG_N_PRIORITIES]; /* through acquire_class */
    int ticks, ticks_out; /* ticks in all, and while a send was out */
    int64_t tokens;
} fake_ledger;

static void fake_tick(void *ctx)
{
    fake_ledger *f = ctx;
    f->ticks++;
    f->ticks_out += f->out > 0;
}

static int fake_acquire(void *ctx, const char *key, const char *route,
                        const stg_quota_cost *costs, size_t n, int64_t demand, void **ticket,
                        int64_t *wait_us)
{
    fake_ledger *f = ctx;
    assert_non_null(key);
    assert_non_null(route);
    assert_true(strncmp(route, "GET /item/", 10) == 0);
    assert_true(demand >= 1);
    if (f->asks++ % 2 == 0) {
        f->refused++;
        *wait_us = STG_MS(30);
        return STG_EAGAIN;
    }
    for (size_t i = 0; i < n; i++)
        if (strcmp(costs[i].unit, "tokens") == 0)
            f->tokens += costs[i].amount;
    int *t = malloc(sizeof *t);
    assert_non_null(t);
    *t = f->tickets++;
    *ticket = t;
    if (++f->out > f->max_out)
        f->max_out = f->out;
    return STG_OK;
}

/* The same ledger asked by class (stg_shared_quota.acquire_class). */
static int fake_acquire_class(void *ctx, const char *key, const char *route, const stg_class *cls,
                              const stg_quota_cost *costs, size_t n, int64_t demand, void **ticket,
                              int64_t *wait_us)
{
    fake_ledger *f = ctx;
    assert_non_null(cls);
    assert_true(cls->priority >= STG_PRIORITY_MIN && cls->priority <= STG_PRIORITY_MAX);
    f->class_asks++;
    f->by_class[STG_PRIORITY_INDEX(cls->priority)]++;
    return fake_acquire(ctx, key, route, costs, n, demand, ticket, wait_us);
}

static void fake_settle(void *ctx, void *ticket, int how, const stg_quota_set *qs,
                        const stg_quota_cost *used, size_t n_used, int64_t demand)
{
    fake_ledger *f = ctx;
    (void)used, (void)n_used;
    assert_non_null(ticket);
    assert_true(demand >= 0);
    f->settled++;
    f->out--;
    if (how == 0) {
        f->answered++;
        f->with_quotas += qs && qs->n > 0;
    }
    free(ticket);
}

/* n requests to /item/0.. of 7 tokens each through an engine with sq as
 * its shared ledger (with classes: interactive and batch in turn), run to
 * the end; the server is stopped. */
static done_tally shared_run(server *s, const stg_shared_quota *sq, int n, bool classes)
{
    stg_engine_config cfg = {.concurrency = 4, .quotas = true, .shared_quotas = sq};
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    done_tally c = {0};
    stg_quota_cost cost = {.unit = "tokens", .amount = 7};
    for (int i = 0; i < n; i++) {
        char url[128], path[32];
        snprintf(path, sizeof path, "/item/%d", i);
        url_of(s, path, url, sizeof url);
        stg_request rq = {.url = url, .cost = &cost, .n_cost = 1};
        if (classes)
            rq.priority = i % 2 ? STG_PRIORITY_BATCH : STG_PRIORITY_INTERACTIVE;
        assert_int_equal(stg_engine_submit(e, &rq, tally_done, &c, NULL), STG_OK);
    }
    assert_int_equal(stg_engine_drain(e), 0);
    stg_engine_free(e);
    server_stop(s);
    return c;
}

static void test_shared_quota_hook(void **state)
{
    (void)state;
    server s;
    server_start(&s, LIMITED);
    fake_ledger f = {0};
    stg_shared_quota sq = {.ctx = &f, .acquire = fake_acquire, .settle = fake_settle};
    const int n = 8;
    done_tally c = shared_run(&s, &sq, n, false);
    assert_int_equal(c.done, n);
    assert_int_equal(c.ok_200, n);
    assert_true(f.refused >= 1);
    assert_int_equal(f.tickets, n); /* one per send, each request sent once */
    assert_int_equal(f.settled, n);
    assert_int_equal(f.answered, n);
    assert_int_equal(f.with_quotas, n); /* the server's RateLimit fields */
    assert_int_equal(f.out, 0);
    assert_true(f.max_out <= 4);
    assert_int_equal((int)f.tokens, 7 * n);
    assert_int_equal(log_count(&s, "\"status\":200"), n);
    server_cleanup(&s);
}

/* With acquire_class the engine asks the ledger by each request's class
 * (the Redis ledger orders the processes by it), never the plain acquire. */
static void test_shared_quota_by_class(void **state)
{
    (void)state;
    server s;
    server_start(&s, LIMITED);
    fake_ledger f = {0};
    stg_shared_quota sq = {.ctx = &f,
                           .acquire = fake_acquire,
                           .acquire_class = fake_acquire_class,
                           .settle = fake_settle};
    const int n = 6;
    done_tally c = shared_run(&s, &sq, n, true);
    assert_int_equal(c.ok_200, n);
    assert_int_equal(f.class_asks, f.asks); /* every ask by class */
    assert_true(f.by_class[STG_PRIORITY_INDEX(STG_PRIORITY_INTERACTIVE)] >= n / 2);
    assert_true(f.by_class[STG_PRIORITY_INDEX(STG_PRIORITY_BATCH)] >= n / 2);
    assert_int_equal(f.by_class[STG_PRIORITY_INDEX(STG_PRIORITY_NORMAL)], 0);
    assert_int_equal(f.settled, n);
    server_cleanup(&s);
}

/* A send that takes 2.5 s, nothing else going on: the engine's passes
 * tick the ledger about once a second meanwhile (so it can renew what
 * the send holds), not only when something happens. */
static void test_shared_quota_ticks(void **state)
{
    (void)state;
    static const char *const slow[] = {"--rate", "10", "--burst", "5", "--ratelimit-headers",
                                       "--latency", "2500ms", NULL};
    server s;
    server_start(&s, slow);
    fake_ledger f = {.asks = 1}; /* the first ask is admitted */
    stg_shared_quota sq = {.ctx = &f, .acquire = fake_acquire, .settle = fake_settle,
                           .tick = fake_tick};
    stg_engine_config cfg = {.quotas = true, .shared_quotas = &sq};
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    done_tally c = {0};
    char url[128];
    url_of(&s, "/item/1", url, sizeof url);
    stg_request rq = {.url = url};
    assert_int_equal(stg_engine_submit(e, &rq, tally_done, &c, NULL), STG_OK);
    assert_int_equal(stg_engine_drain(e), 0);
    stg_engine_free(e);
    server_stop(&s);
    assert_int_equal(c.ok_200, 1);
    assert_int_equal(f.settled, 1);
    assert_true(f.ticks_out >= 2);
    server_cleanup(&s);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_engine_keeps_to_announced_quota, stop_leftovers),
        cmocka_unit_test_teardown(test_cost_over_limit_never_sent, stop_leftovers),
        cmocka_unit_test_teardown(test_persona_discord_bucket, stop_leftovers),
        cmocka_unit_test_teardown(test_persona_github_resources, stop_leftovers),
        cmocka_unit_test_teardown(test_quota_by_class, stop_leftovers),
        cmocka_unit_test_teardown(test_quota_per_route, stop_leftovers),
        cmocka_unit_test_teardown(test_quota_shared_key_by_class, stop_leftovers),
        cmocka_unit_test_teardown(test_quota_shared_key_floor, stop_leftovers),
        cmocka_unit_test_teardown(test_quota_groups_follow_keys, stop_leftovers),
        cmocka_unit_test_teardown(test_quota_by_tenant_weight, stop_leftovers),
        cmocka_unit_test_teardown(test_quota_by_tenant_cost, stop_leftovers),
        cmocka_unit_test_teardown(test_persona_openai_tokens, stop_leftovers),
        cmocka_unit_test_teardown(test_spent_idle_quota_probes, stop_leftovers),
        cmocka_unit_test_teardown(test_shared_quota_hook, stop_leftovers),
        cmocka_unit_test_teardown(test_shared_quota_by_class, stop_leftovers),
        cmocka_unit_test_teardown(test_shared_quota_ticks, stop_leftovers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
