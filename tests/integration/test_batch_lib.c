/*
 * libstagger-batch (src/batch) against a real `stagger serve`: the job
 * state machine, checked in the database and in the server's request log.
 *
 *  - every transition a run makes: pending -> inflight -> done, failed,
 *    deferred, review; a stop puts what is in flight back (pending, review
 *    when not replay-safe and sent); a lost shared limiter stops the run
 *    and leaves nothing inflight; retry_deferred/retry_review requeue;
 *  - the sent-mark of a job that is not replay-safe is committed (sent = 1,
 *    one attempt counted) before its request leaves;
 *  - kill points: a child runs the library and SIGKILLs itself from the
 *    library's own event callback or between steps (no test hook in the
 *    library): after the claim (request not yet out), after the sent-mark,
 *    after the response and before the outcome commit, after the commit.
 *    The parent then checks every job is in exactly one state, reruns, and
 *    checks the server saw a job twice only if it was in flight at the kill;
 *  - one commit per engine pass: every claim committed before its request
 *    starts, and between steps the database agrees with the progress.
 *
 * Needs STAGGER (the stagger binary). Only loopback traffic.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "cmocka_all.h"

#include "batch/batch.h"
#include "integration/serve_helper.h"
#include "store/store.h"

static char g_db[128];

/* ---- helpers ------------------------------------------------------------------ */

/* A job line: id, method, the server path; X-Client-Id names it in the log. */
typedef struct jobdef {
    const char *id, *method, *path;
    const char *idem_key; /* NULL: none */
} jobdef;

/* Import the jobs into a new database g_db (closed afterwards). */
static void import_jobs(const server *srv, const jobdef *jobs, int n)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    for (int i = 0; i < n; i++) {
        fprintf(f, "{\"id\":\"%s\",\"method\":\"%s\",\"url\":\"http://127.0.0.1:%d%s\","
                   "\"headers\":{\"X-Client-Id\":\"%s\"}",
                jobs[i].id, jobs[i].method, srv->port, jobs[i].path, jobs[i].id);
        if (strcmp(jobs[i].method, "GET"))
            fprintf(f, ",\"body\":\"b-%s\"", jobs[i].id);
        if (jobs[i].idem_key)
            fprintf(f, ",\"idempotency_key\":\"%s\"", jobs[i].idem_key);
        fputs("}\n", f);
    }
    fclose(f);
    FILE *in = fmemopen(text, len, "r");
    stg_job_set set;
    char err[256];
    assert_int_equal(stg__input_read(in, NULL, &set, err, sizeof err), STG_OK);
    fclose(in);
    free(text);
    assert_int_equal((int)set.n, n);
    snprintf(g_db, sizeof g_db, "%s/batch.db", srv->dir);
    unlink(g_db);
    stg_store *s = NULL;
    stg_store_options o = {.create = true, .exclusive = true};
    assert_int_equal(stg__store_open(g_db, &o, &s, err, sizeof err), STG_OK);
    bool imported = false;
    assert_int_equal(stg__store_import(s, &set, "test", stg__store_now_ms(), &imported), STG_OK);
    assert_true(imported);
    stg__store_close(s);
    stg__job_set_free(&set);
}

/* One integer from the database, read by a separate connection. */
static long long q_int(const char *sql)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    long long v = -1;
    if (sqlite3_open_v2(g_db, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

static long long job_int(const char *key, const char *col)
{
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT %s FROM jobs WHERE key = '%s'", col, key);
    return q_int(sql);
}

static const char *state_of(const char *key)
{
    static char buf[32];
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    snprintf(buf, sizeof buf, "?");
    if (sqlite3_open_v2(g_db, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, "SELECT state FROM jobs WHERE key = ?1", -1, &st, NULL) ==
            SQLITE_OK) {
        sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW)
            snprintf(buf, sizeof buf, "%s", (const char *)sqlite3_column_text(st, 0));
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return buf;
}

/* Stop the server and remove its folder, the database included. */
static void cleanup(server *srv)
{
    char p[160];
    const char *sfx[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s%s", g_db, sfx[i]);
        unlink(p);
    }
    server_cleanup(srv);
}

#define assert_state(key, want) assert_string_equal(state_of(key), want)

/* Requests the server logged for a job (by its X-Client-Id). */
static int server_saw(const server *srv, const char *key)
{
    char needle[96];
    int n = snprintf(needle, sizeof needle, "\"client\":\"%s\"", key);
    /* A needle cut short would count the lines of other keys sharing the
     * prefix: a key that does not fit fails the test instead. */
    assert_true(n > 0 && (size_t)n < sizeof needle);
    return log_count(srv, needle);
}

static stg_store *open_db(void)
{
    stg_store *s = NULL;
    char err[640];
    stg_store_options o = {.exclusive = true};
    if (stg__store_open(g_db, &o, &s, err, sizeof err) != STG_OK)
        fail_msg("open %s: %s", g_db, err);
    return s;
}

static void base_config(stg_batch_config *c, stg_store *s, int concurrency)
{
    memset(c, 0, sizeof *c);
    c->store = s;
    c->engine.concurrency = concurrency;
    c->engine.limiter = STG_LIMITER_NONE;
    c->engine.seed = 7;
}

/* Run to the end; returns the summary. The counts must add up and match. */
static void run_all(stg_batch_config *c, stg_batch_start *st, stg_batch_summary *sum)
{
    stg_batch *b = NULL;
    char err[800];
    if (stg__batch_new(c, &b, st, err, sizeof err) != STG_OK)
        fail_msg("stg__batch_new: %s", err);
    while (stg__batch_step(b, STG_MS(50)))
        ;
    assert_int_equal(stg__batch_end(b, sum), STG_OK);
    stg__batch_free(b, 0);
    int64_t t = 0;
    for (int i = 0; i < STG_JOB_NSTATES; i++)
        t += sum->counts.n[i];
    assert_int_equal(t, sum->counts.total);
    assert_int_equal(sum->counts.n[STG_JOB_INFLIGHT], 0);
}

/* ---- transitions ----------------------------------------------------------------- */

static void test_transitions(void **state)
{
    (void)state;
    server srv;
    server_start(&srv, NULL);
    const jobdef jobs[] = {
        {"g-done", "GET", "/track/a", NULL},
        {"g-404", "GET", "/status/404", NULL},
        {"g-defer", "GET", "/status/503?retry_after=100", NULL},
        {"p-503", "POST", "/status/503", NULL},
        {"p-done", "POST", "/track/p", NULL},
        {"pk-done", "POST", "/track/pk", "key-1"},
    };
    import_jobs(&srv, jobs, 6);
    stg_store *s = open_db();
    stg_batch_config c;
    base_config(&c, s, 2);
    stg_batch_start st;
    stg_batch_summary sum;
    run_all(&c, &st, &sum);
    assert_int_equal(st.total, 6);
    assert_int_equal(sum.cause, STG_BATCH_DRAINED);
    assert_int_equal(sum.finished, 6);
    assert_int_equal(sum.counts.n[STG_JOB_DONE], 3);
    assert_int_equal(sum.counts.n[STG_JOB_FAILED], 1);
    assert_int_equal(sum.counts.n[STG_JOB_DEFERRED], 1);
    assert_int_equal(sum.counts.n[STG_JOB_REVIEW], 1);
    assert_state("g-done", "done");
    assert_state("g-404", "failed");
    assert_state("g-defer", "deferred");
    assert_state("p-503", "review"); /* a 503 to a POST without key may have had an effect */
    assert_state("p-done", "done");
    assert_state("pk-done", "done");
    /* the run's calls are the attempts committed with the outcomes */
    assert_int_equal(q_int("SELECT calls FROM runs"), q_int("SELECT sum(attempts) FROM jobs"));
    assert_int_equal(q_int("SELECT finished FROM runs"), 6);
    assert_int_equal(q_int("SELECT status_503 FROM runs"), 2);

    /* requeue at start: deferred and review back to pending, then run */
    stg_batch_config c2;
    base_config(&c2, s, 2);
    c2.retry_deferred = c2.retry_review = true;
    run_all(&c2, &st, &sum);
    assert_int_equal(st.requeued_deferred, 1);
    assert_int_equal(st.requeued_review, 1);
    assert_int_equal(sum.finished, 2);
    assert_state("g-defer", "deferred");
    assert_state("p-503", "review");
    stg__store_close(s);
    server_stop(&srv);
    assert_int_equal(server_saw(&srv, "p-503"), 2); /* resent only because asked to */
    assert_int_equal(server_saw(&srv, "g-done"), 1);
    cleanup(&srv);
}

/* A stop cancels what is in flight: back to pending, or review when not
 * replay-safe and sent. Nothing stays inflight. */
typedef struct started {
    int n;
} started;

static void count_starts(const stg_event *ev, void *data)
{
    started *s = data;
    if (ev->type == STG_EVENT_ATTEMPT_START)
        s->n++;
}

/* A run of store s at concurrency conc, stepped until `want` attempts have
 * started (against a server that hangs: none ends), within 20 s. */
static stg_batch *run_until_started(stg_store *s, int conc, started *seen, int want)
{
    stg_batch_config c;
    base_config(&c, s, conc);
    c.engine.on_event = count_starts;
    c.engine.event_data = seen;
    stg_batch *b = NULL;
    char err[800];
    assert_int_equal(stg__batch_new(&c, &b, NULL, err, sizeof err), STG_OK);
    int64_t until = now_us() + STG_SEC(20);
    while (seen->n < want && now_us() < until)
        assert_true(stg__batch_step(b, STG_MS(50)));
    assert_int_equal(seen->n, want);
    return b;
}

static void test_stop(void **state)
{
    (void)state;
    const char *args[] = {"--hang-prob", "1", NULL};
    server srv;
    server_start(&srv, args);
    const jobdef jobs[] = {
        {"g1", "GET", "/h/1", NULL},  {"p1", "POST", "/h/2", NULL},
        {"pk", "POST", "/h/3", "k"},  {"g2", "GET", "/h/4", NULL},
        {"g3", "GET", "/h/5", NULL},
    };
    import_jobs(&srv, jobs, 5);
    stg_store *s = open_db();
    started seen = {0};
    stg_batch *b = run_until_started(s, 3, &seen, 3);
    stg_batch_progress p;
    stg__batch_progress_get(b, &p);
    assert_int_equal(p.counts.n[STG_JOB_INFLIGHT], 3);
    assert_int_equal(p.in_flight, 3);
    assert_int_equal(q_int("SELECT count(*) FROM jobs WHERE state = 'inflight'"), 3);
    /* only the POST without a key carries the sent-mark */
    assert_int_equal(job_int("p1", "sent"), 1);
    assert_int_equal(job_int("pk", "sent"), 0);
    stg__batch_stop(b);
    while (stg__batch_step(b, STG_MS(50)))
        ;
    stg_batch_summary sum;
    assert_int_equal(stg__batch_end(b, &sum), STG_OK);
    stg__batch_free(b, 130);
    assert_int_equal(sum.cause, STG_BATCH_STOPPED);
    assert_int_equal(sum.requeued, 0); /* the cancelled jobs were committed back already */
    assert_state("g1", "pending");
    assert_state("p1", "review");
    assert_state("pk", "pending");
    assert_state("g2", "pending");
    assert_int_equal(q_int("SELECT count(*) FROM jobs WHERE state = 'inflight'"), 0);
    assert_int_equal(q_int("SELECT exit_code FROM runs"), 130);
    stg__store_close(s);
    cleanup(&srv);
}

/* #14 Low: a shared limiter that stops answering ends the run (cause
 * LIMITER) and leaves no job inflight. */
typedef struct fake_limiter {
    int ok_left;
} fake_limiter;

static int fake_acquire(void *ctx, const char *key, int64_t timeout_us, int64_t *wait_us,
                        int64_t *ticket)
{
    (void)key, (void)timeout_us;
    fake_limiter *l = ctx;
    *wait_us = 0;
    *ticket = 0;
    if (l->ok_left <= 0)
        return STG_EUNAVAIL;
    l->ok_left--;
    return STG_OK;
}

static void test_limiter_lost(void **state)
{
    (void)state;
    const char *args[] = {"--hang-prob", "1", NULL};
    server srv;
    server_start(&srv, args);
    jobdef jobs[12];
    char names[12][8], paths[12][16];
    for (int i = 0; i < 12; i++) {
        snprintf(names[i], sizeof names[i], "j%d", i);
        snprintf(paths[i], sizeof paths[i], "/h/%d", i);
        jobs[i] = (jobdef){names[i], i % 3 == 1 ? "POST" : "GET", paths[i], NULL};
    }
    import_jobs(&srv, jobs, 12);
    stg_store *s = open_db();
    stg_batch_config c;
    base_config(&c, s, 4);
    fake_limiter fl = {.ok_left = 3};
    stg_shared_limiter sl = {.ctx = &fl, .acquire = fake_acquire};
    c.engine.shared = &sl;
    stg_batch_start st;
    stg_batch_summary sum;
    run_all(&c, &st, &sum);
    assert_int_equal(sum.cause, STG_BATCH_LIMITER);
    assert_non_null(strstr(sum.message, "shared limiter is unavailable"));
    assert_int_equal(q_int("SELECT count(*) FROM jobs WHERE state = 'inflight'"), 0);
    /* the three that went out hang, and are cancelled: a POST among them
     * may have had an effect (review), the rest wait for the next run */
    assert_int_equal(sum.counts.n[STG_JOB_PENDING] + sum.counts.n[STG_JOB_REVIEW], 12);
    assert_int_equal(sum.counts.n[STG_JOB_REVIEW],
                     q_int("SELECT count(*) FROM jobs WHERE method = 'POST' AND state = "
                           "'review'"));
    assert_true(sum.counts.n[STG_JOB_REVIEW] <= 2);
    stg__store_close(s);
    cleanup(&srv);
}

/* ---- the sent-mark ------------------------------------------------------------------ */

typedef struct sent_probe {
    int checked;
    long long sent, attempts, calls;
} sent_probe;

static void probe_sent(const stg_event *ev, void *data)
{
    sent_probe *p = data;
    if (ev->type != STG_EVENT_ATTEMPT_START || p->checked)
        return;
    /* read by another connection: committed, while the request is not out */
    p->sent = job_int("p", "sent");
    p->attempts = job_int("p", "attempts");
    p->calls = q_int("SELECT calls FROM runs ORDER BY id DESC LIMIT 1");
    p->checked = 1;
}

/* A bad default class, tenant or weight is refused at stg__batch_new. */
static void test_bad_class_config(void **state)
{
    (void)state;
    server srv;
    server_start(&srv, NULL);
    const jobdef jobs[] = {{"p", "GET", "/p", NULL}};
    import_jobs(&srv, jobs, 1);
    stg_store *s = open_db();
    stg_batch_config c;
    char err[800];
    stg_batch *b = NULL;
    const struct { int prio; const char *tenant; double w; } bad[] = {
        {STG_PRIORITY_MAX + 1, NULL, 0}, {0, "a b", 0}, {0, "a", -1}, {0, "a", 2e6}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        base_config(&c, s, 1);
        c.priority = bad[i].prio;
        c.tenant = bad[i].tenant;
        c.weight = bad[i].w;
        assert_int_equal(stg__batch_new(&c, &b, NULL, err, sizeof err), STG_EINVAL);
        assert_non_null(strstr(err, "tenant"));
    }
    base_config(&c, s, 1);
    c.priority = STG_PRIORITY_BATCH;
    c.tenant = "acme";
    c.weight = 2;
    assert_int_equal(stg__batch_new(&c, &b, NULL, err, sizeof err), STG_OK);
    stg__batch_free(b, 0);
    stg__store_close(s);
    server_stop(&srv);
    server_cleanup(&srv);
}

static void test_sent_mark_committed_first(void **state)
{
    (void)state;
    server srv;
    server_start(&srv, NULL);
    const jobdef jobs[] = {{"p", "POST", "/track/p", NULL}};
    import_jobs(&srv, jobs, 1);
    stg_store *s = open_db();
    stg_batch_config c;
    base_config(&c, s, 1);
    sent_probe probe = {0};
    c.engine.on_event = probe_sent;
    c.engine.event_data = &probe;
    stg_batch_start st;
    stg_batch_summary sum;
    run_all(&c, &st, &sum);
    assert_int_equal(probe.checked, 1);
    assert_int_equal(probe.sent, 1);
    assert_int_equal(probe.attempts, 1);
    assert_int_equal(probe.calls, 1);
    assert_state("p", "done");
    /* the first attempt is counted once, not again with the outcome */
    assert_int_equal(job_int("p", "attempts"), 1);
    assert_int_equal(q_int("SELECT calls FROM runs"), 1);
    stg__store_close(s);
    cleanup(&srv);
}

/* ---- commit points ----------------------------------------------------------------- */

/* Every ATTEMPT_START: the job is inflight for another connection. */
typedef struct start_probe {
    int starts, not_inflight;
} start_probe;

static void probe_start(const stg_event *ev, void *data)
{
    start_probe *p = data;
    const char *k = ev->url ? strstr(ev->url, "/track/") : NULL;
    if (ev->type != STG_EVENT_ATTEMPT_START || !k)
        return;
    p->starts++;
    p->not_inflight += strcmp(state_of(k + strlen("/track/")), "inflight") != 0;
}

/* n jobs jNN on /track/jNN (or /h/jNN); POST without key where post(i). */
static void make_jobs(jobdef *jobs, char (*ids)[8], char (*paths)[24], int n, const char *dir,
                      int post_a, int post_b)
{
    for (int i = 0; i < n; i++) {
        snprintf(ids[i], sizeof ids[i], "j%02d", (unsigned char)i);
        snprintf(paths[i], sizeof paths[i], "/%s/%s", dir, ids[i]);
        jobs[i] = (jobdef){ids[i], i == post_a || i == post_b ? "POST" : "GET", paths[i], NULL};
    }
}

/* One commit per engine pass, and no less durable: each request's claim is
 * committed before it can leave (read at its ATTEMPT_START by another
 * connection), and between steps the database says what the progress says
 * (every outcome reported is committed, no claim is pending in memory). A
 * busy pass used to commit twice (the claims before it, the outcomes after
 * it): here every step is at most one commit. */
static void test_one_commit_per_pass(void **state)
{
    (void)state;
    server srv;
    server_start(&srv, NULL);
    enum { N = 48 };
    jobdef jobs[N];
    char ids[N][8], paths[N][24];
    make_jobs(jobs, ids, paths, N, "track", -1, -1);
    import_jobs(&srv, jobs, N);
    stg_store *s = open_db();
    stg_batch_config c;
    base_config(&c, s, 6);
    start_probe probe = {0};
    c.engine.on_event = probe_start;
    c.engine.event_data = &probe;
    stg_batch *b = NULL;
    char err[800];
    if (stg__batch_new(&c, &b, NULL, err, sizeof err) != STG_OK)
        fail_msg("stg__batch_new: %s", err);
    int64_t commits0 = stg__store_commits(s);
    int steps = 0;
    stg_batch_progress p;
    while (stg__batch_step(b, STG_MS(50))) {
        steps++;
        stg__batch_progress_get(b, &p);
        assert_int_equal(q_int("SELECT count(*) FROM jobs WHERE state = 'done'"),
                         p.counts.n[STG_JOB_DONE]);
        assert_int_equal(q_int("SELECT count(*) FROM jobs WHERE state = 'inflight'"),
                         p.counts.n[STG_JOB_INFLIGHT]);
        assert_int_equal(q_int("SELECT finished FROM runs ORDER BY id DESC LIMIT 1"),
                         p.finished);
    }
    steps++; /* the last one, which ended the run */
    int64_t commits = stg__store_commits(s) - commits0;
    stg_batch_summary sum;
    assert_int_equal(stg__batch_end(b, &sum), STG_OK);
    stg__batch_free(b, 0);
    assert_int_equal(sum.counts.n[STG_JOB_DONE], N);
    assert_int_equal(probe.starts, N);
    assert_int_equal(probe.not_inflight, 0);
    if (commits > steps)
        fail_msg("%lld commits in %d steps: more than one a pass", (long long)commits, steps);
    stg__store_close(s);
    server_stop(&srv);
    for (int i = 0; i < N; i++)
        assert_int_equal(server_saw(&srv, ids[i]), 1);
    cleanup(&srv);
}

/* ---- kill points ------------------------------------------------------------------- */

typedef enum kill_at {
    KILL_AT_START,  /* ATTEMPT_START of `target` (after claim; sent-mark if unsafe) */
    KILL_AT_END,    /* ATTEMPT_END of `target`: answered, outcome not committed */
    KILL_AFTER_FINISHED /* between steps, once `finished` jobs are committed */
} kill_at;

typedef struct kill_plan {
    kill_at at;
    const char *target; /* a path fragment of the job's URL */
    int finished;
} kill_plan;

static void kill_on_event(const stg_event *ev, void *data)
{
    const kill_plan *k = data;
    if (k->at == KILL_AFTER_FINISHED || !ev->url || !strstr(ev->url, k->target))
        return;
    if ((k->at == KILL_AT_START && ev->type == STG_EVENT_ATTEMPT_START) ||
        (k->at == KILL_AT_END && ev->type == STG_EVENT_ATTEMPT_END))
        raise(SIGKILL);
}

/* In a child: run the batch until the plan kills it. */
static void child_run(const kill_plan *k, int concurrency)
{
    stg_store *s = NULL;
    char err[800];
    stg_store_options o = {.exclusive = true};
    if (stg__store_open(g_db, &o, &s, err, sizeof err) != STG_OK)
        _exit(2);
    stg_batch_config c;
    base_config(&c, s, concurrency);
    c.engine.on_event = kill_on_event;
    c.engine.event_data = (void *)k;
    stg_batch *b = NULL;
    if (stg__batch_new(&c, &b, NULL, err, sizeof err) != STG_OK)
        _exit(3);
    stg_batch_progress p;
    while (stg__batch_step(b, STG_MS(20))) {
        stg__batch_progress_get(b, &p);
        if (k->at == KILL_AFTER_FINISHED && p.finished >= k->finished)
            raise(SIGKILL);
    }
    _exit(0); /* ended without the kill: the parent fails */
}

static void run_killed(const kill_plan *k, int concurrency)
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        child_run(k, concurrency);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL)
        fail_msg("the child was not killed at the kill point (status 0x%x)", st);
}

/* Every job in exactly one state, as the store sees it on reopen. */
static void expect_whole(int n)
{
    assert_int_equal(q_int("SELECT count(*) FROM jobs"), n);
    assert_int_equal(q_int("SELECT count(DISTINCT key) FROM jobs"), n);
    assert_int_equal(q_int("SELECT count(*) FROM jobs WHERE state IN ('pending', 'inflight', "
                           "'done', 'failed', 'deferred', 'review')"),
                     n);
}

/* Recover and run to the end in this process. */
static void rerun(stg_batch_start *st, stg_batch_summary *sum)
{
    stg_store *s = open_db();
    stg_batch_config c;
    base_config(&c, s, 1);
    run_all(&c, st, sum);
    stg__store_close(s);
}

static const jobdef kill_jobs[] = {
    {"a", "GET", "/track/a", NULL},
    {"b", "POST", "/track/b", NULL},
    {"c", "GET", "/track/c", NULL},
    {"d", "POST", "/track/d", "dk"},
};

/* After the claim, before the request leaves: a GET is inflight, unsent;
 * it runs again and the server sees it once. */
static void test_kill_after_claim(void **state)
{
    (void)state;
    server srv;
    server_start(&srv, NULL);
    import_jobs(&srv, kill_jobs, 4);
    kill_plan k = {KILL_AT_START, "/track/c", 0};
    run_killed(&k, 1);
    expect_whole(4);
    assert_state("a", "done");
    assert_state("b", "done");
    assert_state("c", "inflight");
    assert_int_equal(job_int("c", "sent"), 0);
    assert_state("d", "pending");
    stg_batch_start st;
    stg_batch_summary sum;
    rerun(&st, &sum);
    assert_int_equal(st.recovered_pending, 1);
    assert_int_equal(st.recovered_review, 0);
    assert_int_equal(sum.counts.n[STG_JOB_DONE], 4);
    server_stop(&srv);
    for (int i = 0; i < 4; i++)
        assert_int_equal(server_saw(&srv, kill_jobs[i].id), 1);
    cleanup(&srv);
}

/* After the sent-mark, before the request leaves: the POST without key is
 * inflight with sent = 1, goes to review, and the server never saw it. */
static void test_kill_after_sent_mark(void **state)
{
    (void)state;
    server srv;
    server_start(&srv, NULL);
    import_jobs(&srv, kill_jobs, 4);
    kill_plan k = {KILL_AT_START, "/track/b", 0};
    run_killed(&k, 1);
    expect_whole(4);
    assert_state("a", "done");
    assert_state("b", "inflight");
    assert_int_equal(job_int("b", "sent"), 1);
    assert_int_equal(job_int("b", "attempts"), 1); /* counted with the mark */
    assert_int_equal(q_int("SELECT sum(calls) FROM runs"), 2);
    stg_batch_start st;
    stg_batch_summary sum;
    rerun(&st, &sum);
    assert_int_equal(st.recovered_review, 1);
    assert_state("b", "review");
    assert_int_equal(sum.counts.n[STG_JOB_DONE], 3);
    server_stop(&srv);
    assert_int_equal(server_saw(&srv, "b"), 0); /* killed before it left */
    assert_int_equal(server_saw(&srv, "a"), 1);
    assert_int_equal(server_saw(&srv, "c"), 1);
    assert_int_equal(server_saw(&srv, "d"), 1);
    cleanup(&srv);
}

/* After the response, before the outcome commit: the job in flight is the
 * only one the server may see twice; a POST without key is not resent. */
static void test_kill_before_outcome_commit(void **state)
{
    (void)state;
    server srv;
    server_start(&srv, NULL);
    import_jobs(&srv, kill_jobs, 4);
    kill_plan k = {KILL_AT_END, "/track/a", 0};
    run_killed(&k, 1);
    expect_whole(4);
    assert_state("a", "inflight");
    stg_batch_start st;
    stg_batch_summary sum;
    rerun(&st, &sum);
    assert_int_equal(st.recovered_pending, 1);
    assert_int_equal(sum.counts.n[STG_JOB_DONE], 4);

    /* and the same for the POST without key: answered, then killed */
    import_jobs(&srv, kill_jobs, 4);
    kill_plan kb = {KILL_AT_END, "/track/b", 0};
    run_killed(&kb, 1);
    expect_whole(4);
    assert_state("b", "inflight");
    assert_int_equal(job_int("b", "sent"), 1);
    rerun(&st, &sum);
    assert_int_equal(st.recovered_review, 1);
    assert_state("b", "review");
    server_stop(&srv);
    assert_int_equal(server_saw(&srv, "a"), 3); /* 2 (in flight at the kill) + 1 */
    assert_int_equal(server_saw(&srv, "b"), 2); /* once per import: never resent */
    assert_int_equal(server_saw(&srv, "c"), 2);
    assert_int_equal(server_saw(&srv, "d"), 2);
    cleanup(&srv);
}

/* After an outcome commit, before the next claim: nothing is in flight,
 * nothing is sent twice. */
static void test_kill_after_commit(void **state)
{
    (void)state;
    server srv;
    server_start(&srv, NULL);
    import_jobs(&srv, kill_jobs, 4);
    kill_plan k = {KILL_AFTER_FINISHED, NULL, 2};
    run_killed(&k, 1);
    expect_whole(4);
    assert_int_equal(q_int("SELECT count(*) FROM jobs WHERE state = 'inflight'"), 0);
    assert_int_equal(q_int("SELECT count(*) FROM jobs WHERE state = 'done'"), 2);
    /* the killed run's counters are whole: committed with each outcome */
    assert_int_equal(q_int("SELECT calls FROM runs"), 2);
    assert_int_equal(q_int("SELECT finished FROM runs"), 2);
    stg_batch_start st;
    stg_batch_summary sum;
    rerun(&st, &sum);
    assert_int_equal(st.recovered_pending + st.recovered_review, 0);
    assert_int_equal(sum.counts.n[STG_JOB_DONE], 4);
    assert_int_equal(q_int("SELECT sum(calls) FROM runs"), 4);
    server_stop(&srv);
    for (int i = 0; i < 4; i++)
        assert_int_equal(server_saw(&srv, kill_jobs[i].id), 1);
    cleanup(&srv);
}

/* ---- claimed ahead ------------------------------------------------------------------ */

/* At -j 4 a claim takes 4 more ahead: a kill at the third start leaves 8
 * inflight (the bound: concurrency + ahead), the ahead ones unsent; the
 * rerun puts them back to pending, none to review (j05, a POST without
 * key among them, is sent once), and the server sees every job once. */
static void test_kill_claimed_ahead(void **state)
{
    (void)state;
    server srv;
    server_start(&srv, NULL);
    enum { N = 16 };
    jobdef jobs[N];
    char ids[N][8], paths[N][24];
    make_jobs(jobs, ids, paths, N, "track", 0, 5);
    import_jobs(&srv, jobs, N);
    kill_plan k = {KILL_AT_START, "/track/j02", 0};
    run_killed(&k, 4);
    expect_whole(N);
    assert_int_equal(q_int("SELECT count(*) FROM jobs WHERE state = 'inflight'"), 8);
    assert_int_equal(q_int("SELECT count(*) FROM jobs WHERE state = 'pending'"), 8);
    assert_int_equal(q_int("SELECT count(*) FROM jobs WHERE state = 'inflight' AND sent = 0 "
                           "AND key IN ('j04', 'j05', 'j06', 'j07')"),
                     4);
    long long sent = q_int("SELECT count(*) FROM jobs WHERE sent = 1");
    assert_true(sent <= 1); /* j00, if it started before j02 */
    assert_int_equal(job_int("j05", "sent"), 0);
    stg_batch_start st;
    stg_batch_summary sum;
    rerun(&st, &sum);
    assert_int_equal(st.recovered_pending + st.recovered_review, 8);
    assert_int_equal(st.recovered_review, sent);
    assert_state("j05", "done");
    assert_int_equal(sum.counts.n[STG_JOB_DONE], N - sent);
    server_stop(&srv);
    assert_int_equal(server_saw(&srv, "j00"), sent ? 0 : 1);
    for (int i = 1; i < N; i++)
        assert_int_equal(server_saw(&srv, ids[i]), 1);
    cleanup(&srv);
}

/* At -j 30 one claim serves 8 jobs or more (each takes the free slots and
 * 30 more when those run short, so whatever the timing); between steps the progress is what
 * another connection reads (never more: it is the last commit's), and no
 * committed state holds more than 30 + 30 inflight. */
static void test_claims_ahead_committed(void **state)
{
    (void)state;
    server srv;
    server_start(&srv, NULL);
    enum { N = 240, J = 30 };
    jobdef jobs[N];
    char ids[N][8], paths[N][24];
    make_jobs(jobs, ids, paths, N, "track", -1, -1);
    import_jobs(&srv, jobs, N);
    stg_store *s = open_db();
    stg_batch_config c;
    base_config(&c, s, J);
    /* Paced starts (one at a time, 500/s): slots come free one or two a
     * pass, the case where a claim per pass is a claim per job. */
    c.engine.limiter = STG_LIMITER_FIXED;
    c.engine.rate = 500;
    c.engine.burst = 1;
    start_probe probe = {0};
    c.engine.on_event = probe_start;
    c.engine.event_data = &probe;
    stg_batch *b = NULL;
    char err[800];
    if (stg__batch_new(&c, &b, NULL, err, sizeof err) != STG_OK)
        fail_msg("stg__batch_new: %s", err);
    stg_batch_progress p;
    long long max_inflight = 0;
    while (stg__batch_step(b, STG_MS(50))) {
        stg__batch_progress_get(b, &p);
        long long inflight = q_int("SELECT count(*) FROM jobs WHERE state = 'inflight'");
        assert_int_equal(q_int("SELECT count(*) FROM jobs WHERE state = 'done'"),
                         p.counts.n[STG_JOB_DONE]);
        assert_int_equal(inflight, p.counts.n[STG_JOB_INFLIGHT]);
        assert_int_equal(q_int("SELECT count(*) FROM jobs WHERE state = 'pending'"),
                         p.counts.n[STG_JOB_PENDING]);
        assert_int_equal(q_int("SELECT finished FROM runs ORDER BY id DESC LIMIT 1"),
                         p.finished);
        if (inflight > max_inflight)
            max_inflight = inflight;
    }
    stg__batch_progress_get(b, &p);
    stg_batch_summary sum;
    assert_int_equal(stg__batch_end(b, &sum), STG_OK);
    stg__batch_free(b, 0);
    assert_int_equal(sum.counts.n[STG_JOB_DONE], N);
    assert_int_equal(sum.finished, N);
    assert_int_equal(probe.starts, N);
    assert_int_equal(probe.not_inflight, 0); /* every claim committed before its start */
    assert_true(max_inflight <= 2 * J);
    if (p.claims * 8 > N)
        fail_msg("%lld claims for %d jobs: more than one per 8", (long long)p.claims, N);
    stg__store_close(s);
    server_stop(&srv);
    for (int i = 0; i < N; i++)
        assert_int_equal(server_saw(&srv, ids[i]), 1);
    cleanup(&srv);
}

/* A stop gives the claimed ahead back as if never claimed (runs 0, no
 * started_at): only the four sent stay counted as run. */
static void test_stop_gives_back_ahead(void **state)
{
    (void)state;
    const char *args[] = {"--hang-prob", "1", NULL};
    server srv;
    server_start(&srv, args);
    enum { N = 12 };
    jobdef jobs[N];
    char ids[N][8], paths[N][24];
    make_jobs(jobs, ids, paths, N, "h", 6, -1);
    import_jobs(&srv, jobs, N);
    stg_store *s = open_db();
    started seen = {0};
    stg_batch *b = run_until_started(s, 4, &seen, 4);
    stg_batch_progress p;
    stg__batch_progress_get(b, &p);
    assert_int_equal(p.in_flight, 4);
    assert_int_equal(p.counts.n[STG_JOB_INFLIGHT], 8);
    assert_int_equal(q_int("SELECT count(*) FROM jobs WHERE state = 'inflight'"), 8);
    stg__batch_stop(b);
    while (stg__batch_step(b, STG_MS(50)))
        ;
    stg_batch_summary sum;
    assert_int_equal(stg__batch_end(b, &sum), STG_OK);
    stg__batch_free(b, 130);
    assert_int_equal(sum.cause, STG_BATCH_STOPPED);
    assert_int_equal(sum.requeued, 0);
    assert_int_equal(sum.counts.n[STG_JOB_PENDING], N);
    assert_int_equal(q_int("SELECT count(*) FROM jobs WHERE state = 'pending'"), N);
    assert_int_equal(q_int("SELECT count(*) FROM jobs WHERE runs = 1 AND key IN "
                           "('j00', 'j01', 'j02', 'j03')"),
                     4);
    assert_int_equal(q_int("SELECT count(*) FROM jobs WHERE runs = 0 AND started_at IS NULL "
                           "AND run_id IS NULL AND key NOT IN ('j00', 'j01', 'j02', 'j03')"),
                     N - 4);
    assert_state("j06", "pending"); /* a POST claimed ahead: never sent, not review */
    stg__store_close(s);
    server_stop(&srv);
    for (int i = 4; i < N; i++)
        assert_int_equal(server_saw(&srv, ids[i]), 0);
    cleanup(&srv);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_transitions, stop_leftovers),
        cmocka_unit_test_teardown(test_stop, stop_leftovers),
        cmocka_unit_test_teardown(test_limiter_lost, stop_leftovers),
        cmocka_unit_test_teardown(test_sent_mark_committed_first, stop_leftovers),
        cmocka_unit_test_teardown(test_one_commit_per_pass, stop_leftovers),
        cmocka_unit_test_teardown(test_kill_after_claim, stop_leftovers),
        cmocka_unit_test_teardown(test_kill_after_sent_mark, stop_leftovers),
        cmocka_unit_test_teardown(test_kill_before_outcome_commit, stop_leftovers),
        cmocka_unit_test_teardown(test_kill_after_commit, stop_leftovers),
        cmocka_unit_test_teardown(test_kill_claimed_ahead, stop_leftovers),
        cmocka_unit_test_teardown(test_claims_ahead_committed, stop_leftovers),
        cmocka_unit_test_teardown(test_bad_class_config, stop_leftovers),
        cmocka_unit_test_teardown(test_stop_gives_back_ahead, stop_leftovers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
