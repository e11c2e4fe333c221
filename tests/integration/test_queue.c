/*
 * The work queue library (<stagger/redis/queue.h>) against a redis-server
 * of its own on 127.0.0.1: idempotent loads (twice, two loaders at once,
 * another job set refused), exactly one recorded outcome per job, claims
 * of a dead worker's jobs (review for a non-idempotent job it may have
 * sent, and after --max-deliveries), giving a job back, the per-host "not
 * before", the report and export, the counts per class and tenant, and an
 * outage.
 *
 * The group fixture is redis_helper.h's (one redis-server for the
 * program, SIGPIPE left fatal: the outage test's closed sockets must not
 * need the test to ignore it).
 *
 * Times: claim_idle is 100 ms and the tests wait longer than that before
 * claiming from a "dead" worker: a busy machine only makes entries idler.
 */
#define _GNU_SOURCE
#include "cmocka_all.h"

#include "integration/redis_helper.h"

#include <stagger/redis/queue.h>

static int g_seq; /* g_port, g_pid: redis_helper.h's group fixture */

#define FP1 "1111111111111111111111111111111111111111111111111111111111111111"
#define FP2 "2222222222222222222222222222222222222222222222222222222222222222"

/* A queue of its own per test. */
static void queue_url(char *buf, size_t n)
{
    snprintf(buf, n, "redis://127.0.0.1:%d/t%d", g_port, ++g_seq);
}

static int64_t load_range(stg_queue *q, const char *fp, int64_t total, int64_t from, int64_t to,
                          bool replay_safe)
{
    static char keys[64][16], urls[64][64];
    stg_queue_spec s[64];
    int64_t added_all = 0;
    for (int64_t i = from; i <= to;) {
        size_t n = 0;
        for (; i <= to && n < 64; i++, n++) {
            snprintf(keys[n], sizeof keys[n], "k%lld", (long long)i);
            snprintf(urls[n], sizeof urls[n], "http://127.0.0.1:9/j/%lld", (long long)i);
            s[n] = (stg_queue_spec){.id = i, .key = keys[n], .method = replay_safe ? "GET" : "POST",
                                    .url = urls[n], .replay_safe = replay_safe,
                                    .body = replay_safe ? NULL : "x", .body_len = 1};
        }
        int64_t added = 0;
        assert_int_equal(stg_queue_load(q, fp, total, s, n, &added), STG_OK);
        added_all += added;
    }
    return added_all;
}

static long long xlen(const char *name)
{
    char key[128];
    snprintf(key, sizeof key, "stagger:q:{%s}:jobs", name);
    return raw_int(g_port, "XLEN", key);
}

static const char *name_of(const char *url)
{
    return strrchr(url, '/') + 1;
}

static void test_load_twice(void **state)
{
    (void)state;
    char url[128];
    queue_url(url, sizeof url);
    stg_queue *q = queue_open(url, "w1", 0, 0);
    assert_int_equal(load_range(q, FP1, 300, 1, 300, true), 300);
    assert_int_equal(load_range(q, FP1, 300, 1, 300, true), 0);
    assert_int_equal(xlen(name_of(url)), 300);
    /* Another job set under the same name: refused, nothing written. */
    stg_queue_spec s = {.id = 1, .key = "z", .method = "GET", .url = "http://127.0.0.1:9/z",
                        .replay_safe = true};
    int64_t added = -1;
    assert_int_equal(stg_queue_load(q, FP2, 1, &s, 1, &added), STG_ESTATE);
    assert_int_equal(added, 0);
    assert_non_null(strstr(stg_queue_errmsg(q), "another job set"));
    assert_int_equal(xlen(name_of(url)), 300);
    stg_queue_counts c;
    assert_int_equal(stg_queue_counts_get(q, &c), STG_OK);
    assert_int_equal(c.total, 300);
    assert_int_equal(c.n[STG_QUEUE_PENDING], 300);
    stg_queue_free(q);
}

typedef struct loader_arg {
    const char *url;
    int reverse;
    int64_t added;
} loader_arg;

static void *loader(void *p)
{
    loader_arg *a = p;
    stg_queue_config c = {.url = a->url};
    stg_queue *q = stg_queue_new(&c, NULL, NULL, 0);
    if (!q)
        return NULL;
    for (int k = 0; k < 2000; k += 50) {
        int64_t from = a->reverse ? 2000 - k - 49 : k + 1;
        a->added += load_range(q, FP1, 2000, from, from + 49, true);
    }
    stg_queue_free(q);
    return NULL;
}

static void test_two_loaders(void **state)
{
    (void)state;
    char url[128];
    queue_url(url, sizeof url);
    loader_arg a = {.url = url}, b = {.url = url, .reverse = 1};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, loader, &a);
    pthread_create(&tb, NULL, loader, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    assert_int_equal(a.added + b.added, 2000);
    assert_int_equal(xlen(name_of(url)), 2000);
    /* Every id once: claim them all and look. */
    stg_queue *q = queue_open(url, "w", 0, 0);
    static bool seen[2001];
    memset(seen, 0, sizeof seen);
    stg_queue_job jobs[500];
    int total = 0, n;
    do {
        assert_int_equal(stg_queue_claim(q, 500, jobs, &n, NULL, NULL), STG_OK);
        for (int i = 0; i < n; i++) {
            assert_false(seen[jobs[i].id]);
            seen[jobs[i].id] = true;
            stg_queue_job_clear(&jobs[i]);
        }
        total += n;
    } while (n > 0);
    assert_int_equal(total, 2000);
    stg_queue_free(q);
}

static void finish_state(stg_queue *q, stg_queue_job *j, stg_queue_state st, bool *rec)
{
    stg_queue_outcome o = {.state = st, .status = st == STG_QUEUE_DONE ? 200 : 500, .attempts = 1,
                           .body = "ok", .body_len = 2, .latency_us = STG_MS(7)};
    assert_int_equal(stg_queue_finish(q, j, &o, rec), STG_OK);
}

static void test_one_outcome_per_job(void **state)
{
    (void)state;
    char url[128];
    queue_url(url, sizeof url);
    stg_queue *a = queue_open(url, "a", STG_MS(100), 0), *b = queue_open(url, "b", STG_MS(100), 0);
    load_range(a, FP1, 3, 1, 3, true);
    stg_queue_job ja[3], jb[3];
    int n = 0, nb = 0;
    assert_int_equal(stg_queue_claim(a, 3, ja, &n, NULL, NULL), STG_OK);
    assert_int_equal(n, 3);
    assert_int_equal(ja[0].id, 1);
    assert_string_equal(ja[0].method, "GET");
    assert_true(ja[0].replay_safe);
    assert_int_equal(ja[0].deliveries, 1);
    bool rec = false;
    finish_state(a, &ja[0], STG_QUEUE_DONE, &rec);
    assert_true(rec);
    /* a is slow: b takes its other two after claim_idle. */
    sleep_us(STG_MS(200));
    assert_int_equal(stg_queue_claim(b, 3, jb, &nb, NULL, NULL), STG_OK);
    assert_int_equal(nb, 2);
    assert_int_equal(jb[0].deliveries, 2);
    finish_state(b, &jb[0], STG_QUEUE_DONE, &rec);
    assert_true(rec);
    /* a finishes the same job later: nothing recorded twice. */
    finish_state(a, &ja[1], STG_QUEUE_FAILED, &rec);
    assert_false(rec);
    /* a finishes its third first; then b's outcome is not recorded. */
    finish_state(a, &ja[2], STG_QUEUE_FAILED, &rec);
    assert_true(rec);
    finish_state(b, &jb[1], STG_QUEUE_DONE, &rec);
    assert_false(rec);
    stg_queue_counts c;
    assert_int_equal(stg_queue_counts_get(b, &c), STG_OK);
    assert_int_equal(c.n[STG_QUEUE_DONE], 2);
    assert_int_equal(c.n[STG_QUEUE_FAILED], 1);
    assert_int_equal(c.n[STG_QUEUE_PENDING] + c.n[STG_QUEUE_INFLIGHT], 0);
    /* The report: per worker, latencies. */
    stg_queue_report r;
    assert_int_equal(stg_queue_report_get(b, &r), STG_OK);
    assert_string_equal(r.fingerprint, FP1);
    assert_int_equal(r.lat_n, 3);
    assert_int_equal(r.lat_p50_ms, 7);
    int64_t wa = -1, wb = -1;
    for (size_t i = 0; i < r.n_workers; i++) {
        if (!strcmp(r.workers[i].name, "a"))
            wa = r.workers[i].n[STG_QUEUE_DONE] + r.workers[i].n[STG_QUEUE_FAILED];
        if (!strcmp(r.workers[i].name, "b"))
            wb = r.workers[i].n[STG_QUEUE_DONE];
    }
    assert_int_equal(wa, 2);
    assert_int_equal(wb, 1);
    stg_queue_report_free(&r);
    for (int i = 0; i < 3; i++)
        stg_queue_job_clear(&ja[i]);
    for (int i = 0; i < nb; i++)
        stg_queue_job_clear(&jb[i]);
    stg_queue_free(a);
    stg_queue_free(b);
}

static void test_dead_worker_non_idempotent(void **state)
{
    (void)state;
    char url[128];
    queue_url(url, sizeof url);
    stg_queue *a = queue_open(url, "dead", STG_MS(100), 0), *b = queue_open(url, "b", STG_MS(100), 0);
    load_range(a, FP1, 2, 1, 2, false); /* POSTs */
    stg_queue_job ja[2], jb[2];
    int n = 0, nb = 0, rev = 0;
    assert_int_equal(stg_queue_claim(a, 2, ja, &n, NULL, NULL), STG_OK);
    assert_int_equal(n, 2);
    assert_false(ja[0].replay_safe);
    assert_non_null(ja[0].body);
    /* Job 1 may have left; job 2 never did. Then "dead" dies. */
    assert_int_equal(stg_queue_mark_sent(a, &ja[0]), STG_OK);
    sleep_us(STG_MS(200));
    assert_int_equal(stg_queue_claim(b, 2, jb, &nb, &rev, NULL), STG_OK);
    assert_int_equal(rev, 1);
    assert_int_equal(nb, 1);
    assert_int_equal(jb[0].id, 2);
    stg_queue_counts c;
    assert_int_equal(stg_queue_counts_get(b, &c), STG_OK);
    assert_int_equal(c.n[STG_QUEUE_REVIEW], 1);
    char key[128];
    snprintf(key, sizeof key, "stagger:q:{%s}:res:1", name_of(url));
    redisContext *rc = raw_connect(g_port);
    redisReply *r = redisCommand(rc, "HGET %s reason", key);
    assert_non_null(r);
    assert_string_equal(r->str, "maybe_sent");
    freeReplyObject(r);
    redisFree(rc);
    for (int i = 0; i < n; i++)
        stg_queue_job_clear(&ja[i]);
    stg_queue_job_clear(&jb[0]);
    stg_queue_free(a);
    stg_queue_free(b);
}

static void test_max_deliveries_and_give_back(void **state)
{
    (void)state;
    char url[128];
    queue_url(url, sizeof url);
    stg_queue *w[3];
    for (int i = 0; i < 3; i++) {
        char name[8];
        snprintf(name, sizeof name, "w%d", i);
        w[i] = queue_open(url, name, STG_MS(100), 2);
    }
    load_range(w[0], FP1, 2, 1, 2, true);
    stg_queue_job j[2];
    int n = 0, rev = 0;
    assert_int_equal(stg_queue_claim(w[0], 1, j, &n, NULL, NULL), STG_OK);
    assert_int_equal(n, 1);
    /* Job 2 given back: another worker takes it at once. */
    stg_queue_job g;
    assert_int_equal(stg_queue_claim(w[0], 1, &g, &n, NULL, NULL), STG_OK);
    assert_int_equal(g.id, 2);
    stg_queue_outcome back = {.state = STG_QUEUE_PENDING};
    bool rec = false;
    assert_int_equal(stg_queue_finish(w[0], &g, &back, &rec), STG_OK);
    assert_true(rec);
    stg_queue_job_clear(&g);
    assert_int_equal(stg_queue_claim(w[1], 1, &g, &n, NULL, NULL), STG_OK);
    assert_int_equal(n, 1);
    assert_int_equal(g.id, 2);
    finish_state(w[1], &g, STG_QUEUE_DONE, &rec);
    assert_true(rec);
    stg_queue_job_clear(&g);
    stg_queue_job_clear(&j[0]);
    /* Job 1: delivered to w0, w1 (2 = max), then w2 takes it: review. */
    sleep_us(STG_MS(200));
    assert_int_equal(stg_queue_claim(w[1], 1, j, &n, &rev, NULL), STG_OK);
    assert_int_equal(n, 1);
    assert_int_equal(j[0].deliveries, 2);
    stg_queue_job_clear(&j[0]);
    sleep_us(STG_MS(200));
    assert_int_equal(stg_queue_claim(w[2], 1, j, &n, &rev, NULL), STG_OK);
    assert_int_equal(n, 0);
    assert_int_equal(rev, 1);
    stg_queue_counts c;
    assert_int_equal(stg_queue_counts_get(w[2], &c), STG_OK);
    assert_int_equal(c.n[STG_QUEUE_REVIEW], 1);
    assert_int_equal(c.n[STG_QUEUE_DONE], 1);
    assert_int_equal(c.n[STG_QUEUE_PENDING] + c.n[STG_QUEUE_INFLIGHT], 0);
    for (int i = 0; i < 3; i++)
        stg_queue_free(w[i]);
}

static int count_row(void *data, const stg_queue_row *row)
{
    int *n = data;
    n[row->state]++;
    if (row->state == STG_QUEUE_DONE && (!row->body || row->body_len != 2))
        return -1;
    return 0;
}

static void test_hold_export_outage(void **state)
{
    (void)state;
    char url[128];
    queue_url(url, sizeof url);
    stg_queue *q = queue_open(url, "w", 0, 0);
    assert_int_equal(stg_queue_hold(q, "127.0.0.1:9", STG_MS(400)), STG_OK);
    assert_int_equal(stg_queue_hold(q, "127.0.0.1:9", STG_MS(100)), STG_OK); /* later wins */
    int64_t left = 0;
    assert_int_equal(stg_queue_hold_left(q, "127.0.0.1:9", &left), STG_OK);
    assert_true(left > STG_MS(100) && left <= STG_MS(400));
    assert_int_equal(stg_queue_hold_left(q, "other:1", &left), STG_OK);
    assert_int_equal(left, 0);
    load_range(q, FP1, 4, 1, 4, true);
    stg_queue_job j[4];
    int n = 0;
    assert_int_equal(stg_queue_claim(q, 2, j, &n, NULL, NULL), STG_OK);
    bool rec;
    finish_state(q, &j[0], STG_QUEUE_DONE, &rec);
    int per[STG_QUEUE_NSTATES] = {0};
    assert_int_equal(stg_queue_export(q, 0, true, count_row, per), STG_OK);
    assert_int_equal(per[STG_QUEUE_DONE], 1);
    assert_int_equal(per[STG_QUEUE_INFLIGHT], 1);
    assert_int_equal(per[STG_QUEUE_PENDING], 2);
    /* The counters say what the calls did: round trips, no failure yet. */
    stg_queue_stats st;
    stg_queue_stats_get(q, &st);
    assert_true(st.round_trips >= 5); /* two holds, a load, a claim, a finish... */
    assert_int_equal(st.failures, 0);
    int64_t trips = st.round_trips;
    /* Redis goes away: calls fail, nothing hangs; it comes back. */
    server_stop(g_pid, SIGKILL);
    assert_int_equal(stg_queue_finish(q, &j[1], &(stg_queue_outcome){.state = STG_QUEUE_DONE},
                                      &rec),
                     STG_EUNAVAIL);
    assert_int_equal(stg_queue_claim(q, 1, j + 2, &n, NULL, NULL), STG_EUNAVAIL);
    g_pid = server_start(g_port);
    sleep_us(STG_MS(300)); /* past the reconnect interval */
    stg_queue_counts c;
    assert_int_equal(stg_queue_counts_get(q, &c), STG_OK);
    assert_int_equal(c.total, 0); /* persistence off: that Redis forgot */
    stg_queue_stats_get(q, &st);
    assert_true(st.failures >= 2); /* the finish and the claim while it was away */
    assert_true(st.reconnects >= 1);
    assert_true(st.round_trips > trips);
    stg_queue_stats_get(NULL, &st); /* no queue: zeroes */
    assert_int_equal(st.round_trips, 0);
    for (int i = 0; i < 2; i++)
        stg_queue_job_clear(&j[i]);
    stg_queue_free(q);
}

/* Per class and tenant: each job's from its headers at load, its state in
 * the queue (pending, in flight, ended), and the admissions the workers
 * add, summed (the longest wait the longest). */
static void test_classes(void **state)
{
    (void)state;
    char url[128];
    queue_url(url, sizeof url);
    stg_queue *q = queue_open(url, "a", STG_MS(100), 0);
    const char *h12[] = {"Stagger-Priority: interactive", "stagger-tenant:  acme;w=2"};
    const char *h3[] = {"X-Other: 1", "STAGGER-PRIORITY: batch"};
    stg_queue_spec s[4];
    for (int i = 0; i < 4; i++)
        s[i] = (stg_queue_spec){.id = i + 1, .key = "k", .method = "GET",
                                .url = "http://127.0.0.1:9/", .replay_safe = true};
    s[0].key = "k1", s[1].key = "k2", s[2].key = "k3", s[3].key = "k4";
    s[0].headers = s[1].headers = h12;
    s[0].n_headers = s[1].n_headers = 2;
    s[2].headers = h3;
    s[2].n_headers = 2;
    int64_t added = 0;
    assert_int_equal(stg_queue_load(q, FP1, 4, s, 4, &added), STG_OK);
    assert_int_equal(added, 4);
    stg_queue_job j[2];
    int n = 0;
    assert_int_equal(stg_queue_claim(q, 2, j, &n, NULL, NULL), STG_OK);
    assert_int_equal(n, 2);
    bool rec = false;
    finish_state(q, &j[0], STG_QUEUE_DONE, &rec); /* job 1 done, job 2 in flight */
    assert_true(rec);
    stg_queue_class_add add[] = {{"interactive", "acme", 2, 10, 7}, {"normal", NULL, 1, 0, 0}};
    assert_int_equal(stg_queue_classes_add(q, add, 2), STG_OK);
    add[0] = (stg_queue_class_add){"interactive", "acme", 1, 5, 9};
    assert_int_equal(stg_queue_classes_add(q, add, 1), STG_OK);
    stg_queue_class_row *rows = NULL;
    size_t nr = 0;
    assert_int_equal(stg_queue_classes_get(q, &rows, &nr), STG_OK);
    assert_int_equal(nr, 4);
    /* Sorted: "" (job 4), batch (job 3), interactive/acme, normal (admitted only). */
    assert_string_equal(rows[0].cls, "");
    assert_string_equal(rows[0].tenant, "");
    assert_true(rows[0].has_jobs && !rows[0].has_admitted);
    assert_int_equal(rows[0].n[STG_QUEUE_PENDING], 1);
    assert_string_equal(rows[1].cls, "batch");
    assert_string_equal(rows[1].tenant, "");
    assert_int_equal(rows[1].n[STG_QUEUE_PENDING], 1);
    assert_string_equal(rows[2].cls, "interactive");
    assert_string_equal(rows[2].tenant, "acme");
    assert_true(rows[2].has_jobs && rows[2].has_admitted);
    assert_int_equal(rows[2].n[STG_QUEUE_PENDING], 0);
    assert_int_equal(rows[2].n[STG_QUEUE_INFLIGHT], 1);
    assert_int_equal(rows[2].n[STG_QUEUE_DONE], 1);
    assert_int_equal(rows[2].admitted, 3);
    assert_int_equal(rows[2].wait_ms, 15);
    assert_int_equal(rows[2].wait_max_ms, 9);
    assert_string_equal(rows[3].cls, "normal");
    assert_true(!rows[3].has_jobs && rows[3].has_admitted);
    assert_int_equal(rows[3].admitted, 1);
    free(rows);
    stg_queue_class_add bad = {"a-class-name-too-long", NULL, 1, 0, 0};
    assert_int_equal(stg_queue_classes_add(q, &bad, 1), STG_EINVAL);
    stg_queue_job_clear(&j[0]);
    stg_queue_job_clear(&j[1]);
    stg_queue_free(q);
}

static void test_misuse(void **state)
{
    (void)state;
    int err = 0;
    char why[128];
    char url[128];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", g_port);
    stg_queue_config c = {.url = url};
    assert_null(stg_queue_new(&c, &err, why, sizeof why));
    assert_int_equal(err, STG_EINVAL);
    assert_non_null(strstr(why, "names no queue"));
    snprintf(url, sizeof url, "redis://:secretpw@127.0.0.1:1/q");
    assert_null(stg_queue_new(&c, &err, why, sizeof why));
    assert_int_equal(err, STG_EUNAVAIL);
    assert_null(strstr(why, "secretpw"));
    stg_queue_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_twice),
        cmocka_unit_test(test_two_loaders),
        cmocka_unit_test(test_one_outcome_per_job),
        cmocka_unit_test(test_dead_worker_non_idempotent),
        cmocka_unit_test(test_max_deliveries_and_give_back),
        cmocka_unit_test(test_hold_export_outage),
        cmocka_unit_test(test_classes),
        cmocka_unit_test(test_misuse),
    };
    return cmocka_run_group_tests(tests, redis_group_setup, redis_group_teardown);
}
