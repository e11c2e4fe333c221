/*
 * Unit tests of the batch store (src/store): state transitions, resume
 * after a simulated crash, import idempotence, fingerprint mismatch, locks,
 * a full database, foreign files, secrets kept out of the file, report and
 * export. Each test uses its own database file in a temporary directory.
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "cmocka_all.h"

#include "store/store.h"

#define STORE_SCRATCH_PREFIX "stg_test_store"
#include "store_scratch.h"

static void make_set(const char *text, stg_job_set *set)
{
    FILE *f = fmemopen((void *)text, strlen(text), "r");
    assert_non_null(f);
    char err[256];
    assert_int_equal(stg__input_read(f, NULL, set, err, sizeof err), STG_OK);
    fclose(f);
}

static stg_store *open_new(const char *name)
{
    const char *p = path_of(name);
    unlink(p);
    stg_store *s = NULL;
    char err[640];
    stg_store_options o = {.create = true, .exclusive = true};
    int rc = stg__store_open(p, &o, &s, err, sizeof err);
    if (rc != STG_OK)
        fail_msg("open %s: %s", p, err);
    return s;
}

static stg_store *reopen(const char *name)
{
    stg_store *s = NULL;
    char err[640];
    stg_store_options o = {.exclusive = true};
    int rc = stg__store_open(path_of(name), &o, &s, err, sizeof err);
    if (rc != STG_OK)
        fail_msg("reopen: %s", err);
    return s;
}

static const char five_jobs[] = "{\"id\":\"g1\",\"url\":\"http://127.0.0.1:1/a\"}\n"
                                "{\"id\":\"g2\",\"url\":\"http://127.0.0.1:1/b\"}\n"
                                "{\"id\":\"p1\",\"method\":\"POST\",\"url\":\"http://127.0.0.1:1/c\","
                                "\"body\":\"x\"}\n"
                                "{\"id\":\"p2\",\"method\":\"POST\",\"url\":\"http://127.0.0.1:1/d\","
                                "\"body\":\"y\"}\n"
                                "{\"id\":\"pk\",\"method\":\"POST\",\"url\":\"http://127.0.0.1:1/e\","
                                "\"idempotency_key\":\"k5\"}\n";

static void expect_counts(stg_store *s, int64_t pending, int64_t inflight, int64_t done,
                          int64_t failed, int64_t deferred, int64_t review)
{
    int64_t c[STG_JOB_NSTATES];
    assert_int_equal(stg__store_counts(s, c), STG_OK);
    int64_t want[STG_JOB_NSTATES] = {pending, inflight, done, failed, deferred, review};
    for (int i = 0; i < STG_JOB_NSTATES; i++)
        if (c[i] != want[i])
            fail_msg("%s: %lld, want %lld", stg__job_state_name((stg_job_state)i),
                     (long long)c[i], (long long)want[i]);
}

static void import_five(stg_store *s)
{
    stg_job_set set;
    make_set(five_jobs, &set);
    bool imported = false;
    assert_int_equal(stg__store_import(s, &set, "/in.jsonl", 1000, &imported), STG_OK);
    assert_true(imported);
    stg__job_set_free(&set);
}

static void test_states_names(void **state)
{
    (void)state;
    for (int i = 0; i < STG_JOB_NSTATES; i++) {
        stg_job_state s;
        assert_int_equal(stg__job_state_parse(stg__job_state_name((stg_job_state)i), &s), STG_OK);
        assert_int_equal(s, i);
    }
    stg_job_state s;
    assert_int_equal(stg__job_state_parse("bogus", &s), STG_EPARSE);
}

static void test_import_idempotent(void **state)
{
    (void)state;
    stg_store *s = open_new("import.db");
    stg_job_set set;
    make_set(five_jobs, &set);
    bool imported = false, has = true;
    assert_int_equal(stg__store_has_jobs(s, &has), STG_OK);
    assert_false(has);
    assert_int_equal(stg__store_import(s, &set, "/in.jsonl", 1000, &imported), STG_OK);
    assert_true(imported);
    assert_int_equal(stg__store_import(s, &set, "/in.jsonl", 2000, &imported), STG_OK);
    assert_false(imported);
    expect_counts(s, 5, 0, 0, 0, 0, 0);
    stg__store_close(s);
    /* a new process, the same input */
    s = reopen("import.db");
    assert_int_equal(stg__store_import(s, &set, "/in.jsonl", 3000, &imported), STG_OK);
    assert_false(imported);
    expect_counts(s, 5, 0, 0, 0, 0, 0);
    char *v = NULL;
    assert_int_equal(stg__store_meta_get(s, "job_count", &v), STG_OK);
    assert_string_equal(v, "5");
    free(v);
    assert_int_equal(stg__store_meta_get(s, "fingerprint", &v), STG_OK);
    assert_string_equal(v, set.fingerprint);
    free(v);
    assert_int_equal(stg__store_meta_get(s, "nope", &v), STG_OK);
    assert_null(v);
    stg__store_close(s);
    stg__job_set_free(&set);
}

static void test_fingerprint_mismatch(void **state)
{
    (void)state;
    stg_store *s = open_new("other.db");
    import_five(s);
    stg_job_set other;
    make_set("http://127.0.0.1:1/z\n", &other);
    bool imported = true;
    assert_int_equal(stg__store_import(s, &other, "/other.txt", 5000, &imported), STG_ESTATE);
    assert_false(imported);
    assert_non_null(strstr(stg__store_errmsg(s), "another job set"));
    assert_non_null(strstr(stg__store_errmsg(s), "5 jobs from /in.jsonl"));
    expect_counts(s, 5, 0, 0, 0, 0, 0); /* nothing lost, nothing added */
    stg__job_set_free(&other);
    stg__store_close(s);
}

static void test_transitions(void **state)
{
    (void)state;
    stg_store *s = open_new("trans.db");
    import_five(s);
    stg_job jobs[5];
    int n = 0;
    assert_int_equal(stg__store_claim(s, 2, 1, 2000, jobs, &n), STG_OK);
    assert_int_equal(n, 2);
    assert_int_equal(jobs[0].id, 1);
    assert_string_equal(jobs[0].key, "g1");
    assert_string_equal(jobs[0].url, "http://127.0.0.1:1/a");
    assert_true(jobs[0].replay_safe);
    assert_false(jobs[0].needs_input);
    assert_int_equal(jobs[1].id, 2);
    expect_counts(s, 3, 2, 0, 0, 0, 0);

    stg_job_state st;
    assert_int_equal(stg__store_job_state(s, 1, &st), STG_OK);
    assert_int_equal(st, STG_JOB_INFLIGHT);
    assert_int_equal(stg__store_job_state(s, 99, &st), STG_ENOTFOUND);

    stg_job_outcome done = {.state = STG_JOB_DONE, .status = 200, .attempts = 2,
                            .body = "ok", .body_len = 2};
    assert_int_equal(stg__store_finish(s, 1, &done, 3000), STG_OK);
    /* twice: not inflight any more */
    assert_int_equal(stg__store_finish(s, 1, &done, 3000), STG_ESTATE);
    /* a pending job cannot finish */
    assert_int_equal(stg__store_finish(s, 3, &done, 3000), STG_ESTATE);
    stg_job_outcome bad = {.state = STG_JOB_INFLIGHT};
    assert_int_equal(stg__store_finish(s, 2, &bad, 3000), STG_EINVAL);
    stg_job_outcome failed = {.state = STG_JOB_FAILED, .status = 404, .attempts = 1,
                              .reason = "status_not_retryable", .error = "HTTP 404"};
    assert_int_equal(stg__store_finish(s, 2, &failed, 3000), STG_OK);
    expect_counts(s, 3, 0, 1, 1, 0, 0);

    /* mark_sent only on inflight jobs */
    assert_int_equal(stg__store_mark_sent(s, 1, 0), STG_ESTATE);
    for (int i = 0; i < n; i++)
        stg__job_clear(&jobs[i]);

    assert_int_equal(stg__store_claim(s, 10, 1, 4000, jobs, &n), STG_OK);
    assert_int_equal(n, 3);
    assert_false(jobs[0].replay_safe); /* POST, no key */
    assert_string_equal(jobs[0].body, "x");
    assert_int_equal(jobs[0].body_len, 1);
    assert_true(jobs[2].replay_safe); /* POST with a key */
    assert_string_equal(jobs[2].idempotency_key, "k5");
    stg_job_outcome deferred = {.state = STG_JOB_DEFERRED, .status = 429, .attempts = 7};
    stg_job_outcome review = {.state = STG_JOB_REVIEW, .status = 503, .attempts = 1};
    assert_int_equal(stg__store_finish(s, jobs[0].id, &deferred, 5000), STG_OK);
    assert_int_equal(stg__store_finish(s, jobs[1].id, &review, 5000), STG_OK);
    assert_int_equal(stg__store_finish(s, jobs[2].id, &done, 5000), STG_OK);
    for (int i = 0; i < n; i++)
        stg__job_clear(&jobs[i]);
    expect_counts(s, 0, 0, 2, 1, 1, 1);
    assert_int_equal(stg__store_claim(s, 10, 1, 6000, jobs, &n), STG_OK);
    assert_int_equal(n, 0);

    /* requeue */
    int moved = 0;
    assert_int_equal(stg__store_requeue(s, STG_JOB_DONE, 7000, &moved), STG_EINVAL);
    assert_int_equal(stg__store_requeue(s, STG_JOB_DEFERRED, 7000, &moved), STG_OK);
    assert_int_equal(moved, 1);
    expect_counts(s, 1, 0, 2, 1, 0, 1);
    assert_int_equal(stg__store_requeue(s, STG_JOB_REVIEW, 7000, &moved), STG_OK);
    assert_int_equal(moved, 1);
    expect_counts(s, 2, 0, 2, 1, 0, 0);
    /* a requeued job keeps its attempts (summed over runs) */
    assert_int_equal(stg__store_claim(s, 1, 2, 8000, jobs, &n), STG_OK);
    assert_int_equal(n, 1);
    assert_int_equal(jobs[0].attempts, 7);
    stg__job_clear(&jobs[0]);
    stg__store_close(s);
}

static void test_recover(void **state)
{
    (void)state;
    stg_store *s = open_new("recover.db");
    import_five(s);
    stg_job jobs[5];
    int n = 0;
    assert_int_equal(stg__store_claim(s, 5, 1, 2000, jobs, &n), STG_OK);
    assert_int_equal(n, 5);
    /* g1 sent, p1 sent (no key), p2 claimed but never sent, pk sent (key) */
    assert_int_equal(stg__store_mark_sent(s, 1, 0), STG_OK);
    assert_int_equal(stg__store_mark_sent(s, 3, 0), STG_OK);
    assert_int_equal(stg__store_mark_sent(s, 5, 0), STG_OK);
    stg_job_outcome done = {.state = STG_JOB_DONE, .status = 200, .attempts = 1};
    assert_int_equal(stg__store_finish(s, 2, &done, 2500), STG_OK);
    for (int i = 0; i < n; i++)
        stg__job_clear(&jobs[i]);
    /* "kill -9": close without finishing */
    stg__store_close(s);

    s = reopen("recover.db");
    expect_counts(s, 0, 4, 1, 0, 0, 0);
    int to_pending = -1, to_review = -1;
    assert_int_equal(stg__store_recover(s, 3000, &to_pending, &to_review), STG_OK);
    assert_int_equal(to_pending, 3); /* g1, p2 (never sent), pk (has a key) */
    assert_int_equal(to_review, 1);  /* p1 */
    expect_counts(s, 3, 0, 1, 0, 0, 1);
    stg_job_state st;
    assert_int_equal(stg__store_job_state(s, 3, &st), STG_OK);
    assert_int_equal(st, STG_JOB_REVIEW);
    assert_int_equal(stg__store_job_state(s, 4, &st), STG_OK);
    assert_int_equal(st, STG_JOB_PENDING);
    {
        /* the one UPDATE's CASEs: the review job gets the reason, the text
         * and its finish time; the pending ones keep theirs (none); every
         * recovered job is unsent */
        sqlite3_stmt *q;
        assert_int_equal(
            sqlite3_prepare_v2(stg__store_db(s),
                               "SELECT id, reason, last_error, finished_at, sent, updated_at "
                               "FROM jobs WHERE id != 2 ORDER BY id",
                               -1, &q, NULL),
            SQLITE_OK);
        while (sqlite3_step(q) == SQLITE_ROW) {
            int id = sqlite3_column_int(q, 0);
            assert_int_equal(sqlite3_column_int(q, 4), 0);
            assert_int_equal(sqlite3_column_int64(q, 5), 3000);
            if (id == 3) {
                assert_string_equal((const char *)sqlite3_column_text(q, 1), "interrupted");
                assert_non_null(strstr((const char *)sqlite3_column_text(q, 2),
                                       "may have been sent"));
                assert_int_equal(sqlite3_column_int64(q, 3), 3000);
            } else {
                assert_int_equal(sqlite3_column_type(q, 1), SQLITE_NULL);
                assert_int_equal(sqlite3_column_type(q, 2), SQLITE_NULL);
                assert_int_equal(sqlite3_column_type(q, 3), SQLITE_NULL);
            }
        }
        sqlite3_finalize(q);
    }
    /* recovering again changes nothing */
    assert_int_equal(stg__store_recover(s, 3500, &to_pending, &to_review), STG_OK);
    assert_int_equal(to_pending + to_review, 0);

    /* resume: the rest run, each job ends in exactly one final state */
    assert_int_equal(stg__store_claim(s, 5, 2, 4000, jobs, &n), STG_OK);
    assert_int_equal(n, 3);
    assert_int_equal(jobs[0].id, 1);
    assert_int_equal(jobs[1].id, 4);
    assert_int_equal(jobs[2].id, 5);
    for (int i = 0; i < n; i++) {
        assert_int_equal(stg__store_finish(s, jobs[i].id, &done, 4500), STG_OK);
        stg__job_clear(&jobs[i]);
    }
    expect_counts(s, 0, 0, 4, 0, 0, 1);
    sqlite3 *db = stg__store_db(s);
    sqlite3_stmt *q;
    assert_int_equal(sqlite3_prepare_v2(db, "SELECT sum(runs) FROM jobs", -1, &q, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(q, 0), 8); /* 5 claims, then 3 again */
    sqlite3_finalize(q);
    stg__store_close(s);
}

static void test_cancelled_back_to_pending(void **state)
{
    (void)state;
    stg_store *s = open_new("cancel.db");
    import_five(s);
    stg_job jobs[2];
    int n;
    assert_int_equal(stg__store_claim(s, 2, 1, 2000, jobs, &n), STG_OK);
    stg_job_outcome back = {.state = STG_JOB_PENDING, .attempts = 1, .reason = "cancelled"};
    assert_int_equal(stg__store_finish(s, jobs[0].id, &back, 2100), STG_OK);
    assert_int_equal(stg__store_finish(s, jobs[1].id, &back, 2100), STG_OK);
    stg__job_clear(&jobs[0]);
    stg__job_clear(&jobs[1]);
    expect_counts(s, 5, 0, 0, 0, 0, 0);
    assert_int_equal(stg__store_claim(s, 1, 2, 3000, jobs, &n), STG_OK);
    assert_int_equal(jobs[0].id, 1);
    assert_int_equal(jobs[0].attempts, 1);
    stg__job_clear(&jobs[0]);
    stg__store_close(s);
}

/* One value of SQL q read by another connection (what is committed: what
 * a kill leaves). */
static int64_t other_int(const char *name, const char *q)
{
    sqlite3 *o;
    assert_int_equal(sqlite3_open(path_of(name), &o), SQLITE_OK);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(o, q, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    int64_t n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(o);
    return n;
}

/* One column of job id (NULL: -1), as another connection reads it. */
static int64_t job_col(const char *name, int64_t id, const char *col)
{
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT coalesce(%s, -1) FROM jobs WHERE id = %lld", col,
             (long long)id);
    return other_int(name, sql);
}

/* Claimed and never sent: back to pending as if never claimed (runs,
 * run_id, started_at), one statement; a sent one, or one of another run,
 * moves nothing at all. */
static void test_unclaim(void **state)
{
    (void)state;
    stg_store *s = open_new("unclaim.db");
    import_five(s);
    stg_job jobs[5];
    int n = 0, moved = -1;
    assert_int_equal(stg__store_claim(s, 4, 1, 2000, jobs, &n), STG_OK);
    assert_int_equal(n, 4);
    assert_int_equal(job_col("unclaim.db", 3, "runs"), 1);
    assert_int_equal(job_col("unclaim.db", 3, "started_at"), 2000);
    assert_int_equal(stg__store_mark_sent(s, jobs[2].id, 1), STG_OK); /* id 3: sent */
    /* the sent one among them: refused, nothing moved */
    assert_int_equal(stg__store_unclaim(s, &jobs[1], 3, 1, 2500, &moved), STG_ESTATE);
    assert_int_equal(moved, 0);
    expect_counts(s, 1, 4, 0, 0, 0, 0);
    /* another run's: refused */
    assert_int_equal(stg__store_unclaim(s, &jobs[3], 1, 9, 2500, &moved), STG_ESTATE);
    expect_counts(s, 1, 4, 0, 0, 0, 0);
    /* the unsent ones: back */
    stg_job back[2] = {jobs[1], jobs[3]};
    assert_int_equal(stg__store_unclaim(s, back, 2, 1, 2500, &moved), STG_OK);
    assert_int_equal(moved, 2);
    expect_counts(s, 3, 2, 0, 0, 0, 0);
    assert_int_equal(job_col("unclaim.db", 2, "runs"), 0);
    assert_int_equal(job_col("unclaim.db", 2, "started_at"), -1);
    assert_int_equal(job_col("unclaim.db", 2, "run_id"), -1);
    assert_int_equal(job_col("unclaim.db", 2, "sent"), 0);
    assert_int_equal(job_col("unclaim.db", 3, "sent"), 1); /* untouched */
    /* claimed again in a later run: its first run is that one */
    for (int i = 0; i < n; i++)
        stg__job_clear(&jobs[i]);
    int rp = 0, rr = 0;
    assert_int_equal(stg__store_recover(s, 2600, &rp, &rr), STG_OK);
    assert_int_equal(rp, 1); /* id 1, unsent */
    assert_int_equal(rr, 1); /* id 3, sent */
    assert_int_equal(stg__store_claim(s, 1, 2, 3000, jobs, &n), STG_OK);
    assert_int_equal(jobs[0].id, 1);
    stg__job_clear(&jobs[0]);
    assert_int_equal(stg__store_claim(s, 1, 2, 3000, jobs, &n), STG_OK);
    assert_int_equal(jobs[0].id, 2);
    assert_int_equal(job_col("unclaim.db", 2, "runs"), 1);
    assert_int_equal(job_col("unclaim.db", 2, "run_id"), 2);
    stg__job_clear(&jobs[0]);
    stg__store_close(s);
}

static void test_runner_lock(void **state)
{
    (void)state;
    stg_store *a = open_new("lock.db");
    stg_store *b = NULL;
    char err[640];
    stg_store_options o = {.exclusive = true, .busy_timeout_us = 200000};
    assert_int_equal(stg__store_open(path_of("lock.db"), &o, &b, err, sizeof err), STG_EAGAIN);
    assert_null(b);
    assert_non_null(strstr(err, "in use by another"));
    /* a reader (report/export) is fine meanwhile */
    stg_store_options ro = {.readonly = true};
    assert_int_equal(stg__store_open(path_of("lock.db"), &ro, &b, err, sizeof err), STG_OK);
    stg__store_close(b);
    stg__store_close(a);
    assert_int_equal(stg__store_open(path_of("lock.db"), &o, &b, err, sizeof err), STG_OK);
    stg__store_close(b);
}

static void test_sqlite_locked(void **state)
{
    (void)state;
    stg_store *s = open_new("busy.db");
    import_five(s);
    sqlite3 *other;
    assert_int_equal(sqlite3_open(path_of("busy.db"), &other), SQLITE_OK);
    assert_int_equal(sqlite3_exec(other, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_busy_timeout(stg__store_db(s), 200);
    stg_job jobs[1];
    int n = -1;
    assert_int_equal(stg__store_claim(s, 1, 1, 2000, jobs, &n), STG_EDB);
    assert_int_equal(n, 0);
    assert_non_null(strstr(stg__store_errmsg(s), "locked"));
    sqlite3_exec(other, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(other);
    expect_counts(s, 5, 0, 0, 0, 0, 0);
    assert_int_equal(stg__store_claim(s, 1, 1, 2000, jobs, &n), STG_OK);
    assert_int_equal(n, 1);
    stg__job_clear(&jobs[0]);
    stg__store_close(s);
}

static void test_disk_full(void **state)
{
    (void)state;
    stg_store *s = open_new("full.db");
    /* many jobs with large bodies, in a database allowed only a few pages */
    size_t cap = 300 * 1200;
    char *text = malloc(cap);
    size_t len = 0;
    for (int i = 0; i < 300; i++)
        len += (size_t)snprintf(text + len, cap - len,
                                "{\"id\":\"j%d\",\"url\":\"http://127.0.0.1:1/%d\",\"body\":\"%0900d\"}\n",
                                i, i, i);
    stg_job_set set;
    make_set(text, &set);
    free(text);
    sqlite3 *db = stg__store_db(s);
    assert_int_equal(sqlite3_exec(db, "PRAGMA max_page_count=20", NULL, NULL, NULL), SQLITE_OK);
    bool imported = true;
    assert_int_equal(stg__store_import(s, &set, "/big.jsonl", 1000, &imported), STG_EDB);
    assert_false(imported);
    assert_non_null(strstr(stg__store_errmsg(s), "full"));
    bool has = true;
    assert_int_equal(stg__store_has_jobs(s, &has), STG_OK);
    assert_false(has); /* rolled back whole: no half import */
    expect_counts(s, 0, 0, 0, 0, 0, 0);
    assert_int_equal(sqlite3_exec(db, "PRAGMA max_page_count=1000000", NULL, NULL, NULL),
                     SQLITE_OK);
    assert_int_equal(stg__store_import(s, &set, "/big.jsonl", 1000, &imported), STG_OK);
    assert_true(imported);
    /* a full disk while recording an outcome: the job stays inflight */
    stg_job jobs[1];
    int n;
    assert_int_equal(stg__store_claim(s, 1, 1, 2000, jobs, &n), STG_OK);
    sqlite3_stmt *q;
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA page_count", -1, &q, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA max_page_count=%d", sqlite3_column_int(q, 0));
    sqlite3_finalize(q);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    static char big[200000];
    memset(big, 'b', sizeof big);
    stg_job_outcome done = {.state = STG_JOB_DONE, .status = 200, .body = big,
                            .body_len = sizeof big};
    assert_int_equal(stg__store_finish(s, jobs[0].id, &done, 3000), STG_EDB);
    assert_non_null(strstr(stg__store_errmsg(s), "full"));
    stg_job_state st;
    assert_int_equal(stg__store_job_state(s, jobs[0].id, &st), STG_OK);
    assert_int_equal(st, STG_JOB_INFLIGHT);
    stg__job_clear(&jobs[0]);
    stg__job_set_free(&set);
    stg__store_close(s);
}

static void test_foreign_files(void **state)
{
    (void)state;
    const char *p = path_of("foreign.db");
    unlink(p);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(p, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "CREATE TABLE t(x); INSERT INTO t VALUES(1)", NULL, NULL,
                                  NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    stg_store *s = NULL;
    char err[640];
    stg_store_options o = {.create = true, .exclusive = true};
    assert_int_equal(stg__store_open(p, &o, &s, err, sizeof err), STG_ESTATE);
    assert_non_null(strstr(err, "not a stagger batch database"));
    /* untouched */
    assert_int_equal(sqlite3_open(p, &db), SQLITE_OK);
    sqlite3_stmt *q;
    assert_int_equal(sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_master", -1, &q, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(q, 0), 1);
    sqlite3_finalize(q);
    sqlite3_close(db);

    const char *t = path_of("text.db");
    FILE *f = fopen(t, "w");
    fputs("this is not a database, just some text that is long enough to look like one....."
          "................................................................................",
          f);
    fclose(f);
    assert_int_equal(stg__store_open(t, &o, &s, err, sizeof err), STG_EDB);
    assert_non_null(strstr(err, "not an SQLite database"));

    stg_store_options ro = {.readonly = true};
    assert_int_equal(stg__store_open(path_of("missing.db"), &ro, &s, err, sizeof err),
                     STG_ENOTFOUND);
    stg_store_options rw = {.exclusive = true};
    assert_int_equal(stg__store_open(path_of("missing.db"), &rw, &s, err, sizeof err),
                     STG_ENOTFOUND);
    assert_int_not_equal(access(path_of("missing.db"), F_OK), 0); /* not created */
}

static void test_readonly_file(void **state)
{
    (void)state;
    if (geteuid() == 0)
        skip(); /* root writes read-only files; the integration test drops privileges */
    stg_store *s = open_new("ro.db");
    import_five(s);
    stg__store_close(s);
    chmod(path_of("ro.db"), 0444);
    char err[640];
    stg_store_options o = {.exclusive = true};
    assert_int_equal(stg__store_open(path_of("ro.db"), &o, &s, err, sizeof err), STG_EDB);
    assert_non_null(strstr(err, "read-only"));
    chmod(path_of("ro.db"), 0644);
}

/* Read a whole file; NULL if missing. */
static char *slurp(const char *p, size_t *len)
{
    FILE *f = fopen(p, "rb");
    *len = 0;
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t cap = 0;
    for (;;) {
        if (*len + 65536 > cap) {
            cap = cap * 2 + 65536;
            buf = realloc(buf, cap);
        }
        size_t n = fread(buf + *len, 1, cap - *len, f);
        if (n == 0)
            break;
        *len += n;
    }
    fclose(f);
    return buf;
}

static bool file_contains(const char *p, const char *needle)
{
    size_t len, nl = strlen(needle);
    char *b = slurp(p, &len);
    bool found = false;
    for (size_t i = 0; b && !found && i + nl <= len; i++)
        found = !memcmp(b + i, needle, nl);
    free(b);
    return found;
}

static void test_no_secrets_in_file(void **state)
{
    (void)state;
    stg_store *s = open_new("secret.db");
    const char *text =
        "{\"id\":\"a\",\"url\":\"http://127.0.0.1:1/a?api_key=PLANTEDSECRET1\"}\n"
        "{\"id\":\"b\",\"url\":\"http://127.0.0.1:1/b\","
        "\"headers\":{\"Authorization\":\"Bearer PLANTEDSECRET2\",\"Accept\":\"text/plain\"}}\n"
        "{\"id\":\"c\",\"url\":\"http://user:PLANTEDSECRET3@127.0.0.1:1/c\"}\n"
        "{\"id\":\"d\",\"url\":\"http://127.0.0.1:1/d\",\"headers\":[\"X-Api-Key: PLANTEDSECRET4\","
        "\"Cookie: s=PLANTEDSECRET5\"]}\n"
        "{\"id\":\"e\",\"url\":\"http://127.0.0.1:1/e?page=2\"}\n";
    stg_job_set set;
    make_set(text, &set);
    bool imported;
    assert_int_equal(stg__store_import(s, &set, "/in.jsonl", 1000, &imported), STG_OK);
    stg_job jobs[5];
    int n;
    assert_int_equal(stg__store_claim(s, 5, 1, 2000, jobs, &n), STG_OK);
    assert_int_equal(n, 5);
    assert_true(jobs[0].needs_input);
    assert_null(jobs[0].url);
    assert_non_null(strstr(jobs[0].url_redacted, "REDACTED"));
    assert_true(jobs[1].needs_input);
    assert_non_null(jobs[1].url); /* the URL itself is fine */
    assert_string_equal(jobs[1].headers[0], "Accept: text/plain");
    assert_null(jobs[1].headers[1]);
    assert_true(jobs[2].needs_input);
    assert_true(jobs[3].needs_input);
    assert_null(jobs[3].headers[0]);
    assert_false(jobs[4].needs_input);
    assert_string_equal(jobs[4].url, "http://127.0.0.1:1/e?page=2");
    for (int i = 0; i < n; i++)
        stg__job_clear(&jobs[i]);
    int64_t need = 0;
    assert_int_equal(stg__store_count_needs_input(s, 1u << STG_JOB_INFLIGHT, &need), STG_OK);
    assert_int_equal(need, 4);
    /* check the bytes while the WAL still holds them, then after checkpoint */
    char wal[600];
    snprintf(wal, sizeof wal, "%s-wal", path_of("secret.db"));
    for (int k = 1; k <= 5; k++) {
        char needle[32];
        snprintf(needle, sizeof needle, "PLANTEDSECRET%d", k);
        assert_false(file_contains(path_of("secret.db"), needle));
        assert_false(file_contains(wal, needle));
    }
    assert_true(file_contains(wal, "text/plain") || file_contains(path_of("secret.db"), "text/plain"));
    stg__store_close(s);
    for (int k = 1; k <= 5; k++) {
        char needle[32];
        snprintf(needle, sizeof needle, "PLANTEDSECRET%d", k);
        assert_false(file_contains(path_of("secret.db"), needle));
    }
    stg__job_set_free(&set);
}

static char *export_to_string(stg_store *s, const stg_export_options *o)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(stg__store_export(s, o, f), STG_OK);
    fclose(f);
    return buf;
}

static void test_report_export(void **state)
{
    (void)state;
    stg_store *s = open_new("report.db");
    stg_job_set set;
    make_set("http://127.0.0.1:1/a\nhttp://127.0.0.1:1/b?token=zzz\nnot a url\n"
             "http://127.0.0.1:1/c\nhttp://127.0.0.1:1/d\n",
             &set);
    bool imported;
    assert_int_equal(stg__store_import(s, &set, "/urls.txt", 1000, &imported), STG_OK);
    int64_t run;
    assert_int_equal(stg__store_run_begin(s, 1000, &run), STG_OK);
    stg_job jobs[4];
    int n;
    assert_int_equal(stg__store_claim(s, 4, run, 1000, jobs, &n), STG_OK);
    assert_int_equal(n, 4);
    stg_job_outcome o1 = {.state = STG_JOB_DONE, .status = 200, .attempts = 1,
                          .body = "{\"ok\":true}", .body_len = 11, .run_id = run};
    stg_job_outcome o2 = {.state = STG_JOB_DONE, .status = 200, .attempts = 3,
                          .body = "\xff\xfe", .body_len = 2, .run_id = run, .retries = 2,
                          .status_503 = 1, .status_429 = 1};
    stg_job_outcome o3 = {.state = STG_JOB_FAILED, .status = 404, .attempts = 1,
                          .reason = "status_not_retryable",
                          .error = "HTTP 404: status not retryable, \"quoted\"", .run_id = run};
    /* the first of its 7 attempts was counted by the sent-mark */
    assert_int_equal(stg__store_mark_sent(s, 4, run), STG_OK);
    stg_job_outcome o4 = {.state = STG_JOB_DEFERRED, .status = 429, .attempts = 6,
                          .reason = "attempts_exhausted", .error = "HTTP 429", .run_id = run,
                          .retries = 6, .status_429 = 6};
    assert_int_equal(stg__store_finish(s, 1, &o1, 1500), STG_OK);
    assert_int_equal(stg__store_finish(s, 2, &o2, 1500), STG_OK);
    assert_int_equal(stg__store_finish(s, 3, &o3, 1500), STG_OK);
    assert_int_equal(stg__store_finish(s, 4, &o4, 1500), STG_OK);
    for (int i = 0; i < n; i++)
        stg__job_clear(&jobs[i]);
    /* the counters came with the outcomes; run_update writes wall time and
     * exit code only (these calls must not overwrite them) */
    stg_run_stats rs = {.wall_ms = 2000, .calls = 99, .retries = 99, .status_429 = 99,
                        .status_503 = 99, .finished = 99, .exit_code = 3};
    assert_int_equal(stg__store_run_update(s, run, &rs), STG_OK);

    stg_store_report r;
    assert_int_equal(stg__store_report_get(s, &r), STG_OK);
    assert_int_equal(r.total, 4);
    assert_int_equal(r.counts[STG_JOB_DONE], 2);
    assert_int_equal(r.counts[STG_JOB_FAILED], 1);
    assert_int_equal(r.counts[STG_JOB_DEFERRED], 1);
    assert_int_equal(r.bad_lines, 1);
    assert_int_equal(r.runs, 1);
    assert_int_equal(r.calls, 12);
    assert_int_equal(r.retries, 8);
    assert_int_equal(r.status_429, 7);
    assert_int_equal(r.status_503, 1);
    assert_int_equal(r.last.finished, 4);
    assert_int_equal(r.last.wall_ms, 2000);
    assert_int_equal(r.hist[0], 2);
    assert_int_equal(r.hist[2], 1);
    assert_int_equal(r.hist[6], 1);
    assert_int_equal(r.needs_input, 1);
    assert_int_equal(r.last.exit_code, 3);
    assert_string_equal(r.input_path, "/urls.txt");
    char *text = NULL;
    size_t tlen = 0;
    FILE *f = open_memstream(&text, &tlen);
    /* the report's text and JSON: tests/unit/test_batch_report.c */
    assert_int_equal(stg__store_bad_lines_print(s, "/urls.txt", 0, f), STG_OK);
    fclose(f);
    assert_non_null(strstr(text, "/urls.txt:3: no URL"));
    assert_null(strstr(text, "zzz"));
    free(text);
    stg__store_report_free(&r);

    stg_export_options jo = {.format = STG_EXPORT_JSONL, .bodies = true};
    char *j = export_to_string(s, &jo);
    assert_non_null(strstr(j, "{\"id\":\"1\",\"job\":1,\"line\":1,\"state\":\"done\",\"status\":200,"
                              "\"attempts\":1,\"error\":null"));
    assert_non_null(strstr(j, "\"body\":\"{\\\"ok\\\":true}\""));
    assert_non_null(strstr(j, "\"body_base64\":\"//4=\""));
    assert_non_null(strstr(j, "\"url\":\"http://127.0.0.1:1/b?token=REDACTED\""));
    assert_null(strstr(j, "zzz"));
    assert_non_null(strstr(j, "\"finished_at\":\"1970-01-01T00:00:01.500Z\""));
    free(j);
    stg_export_options co = {.format = STG_EXPORT_CSV,
                             .state_mask = 1u << STG_JOB_FAILED | 1u << STG_JOB_DEFERRED};
    char *c = export_to_string(s, &co);
    assert_non_null(strstr(c, "id,job,line,state,status,attempts,error,reason,method,url,file,"
                              "finished_at,duration_ms\r\n"));
    assert_non_null(strstr(c, "4,3,4,failed,404,1,\"HTTP 404: status not retryable, "
                              "\"\"quoted\"\"\",status_not_retryable,GET,"));
    assert_non_null(strstr(c, "5,4,5,deferred,429,7,HTTP 429,attempts_exhausted"));
    assert_null(strstr(c, ",done,"));
    free(c);
    stg__job_set_free(&set);
    stg__store_close(s);
}

/* A finished batch of n jobs in NAME, closed (WAL checkpointed into the
 * main file). */
static void make_finished(const char *name, int n)
{
    stg_store *s = open_new(name);
    char *text = malloc((size_t)n * 40 + 1);
    assert_non_null(text);
    size_t off = 0;
    for (int i = 1; i <= n; i++)
        off += (size_t)sprintf(text + off, "http://127.0.0.1:1/job/%d\n", i);
    stg_job_set set;
    make_set(text, &set);
    free(text);
    bool imported;
    assert_int_equal(stg__store_import(s, &set, "/in.txt", 1000, &imported), STG_OK);
    stg__job_set_free(&set);
    stg_job jobs[100];
    int got;
    do {
        assert_int_equal(stg__store_claim(s, 100, 0, 1000, jobs, &got), STG_OK);
        for (int i = 0; i < got; i++) {
            stg_job_outcome o = {.state = STG_JOB_DONE, .status = 200, .attempts = 1,
                                 .body = "ok", .body_len = 2};
            assert_int_equal(stg__store_finish(s, jobs[i].id, &o, 1000), STG_OK);
            stg__job_clear(&jobs[i]);
        }
    } while (got > 0);
    expect_counts(s, 0, 0, n, 0, 0, 0);
    stg__store_close(s);
}

/* Opening NAME (as a run, and read-only as report/export do) fails with
 * STG_EDB and a message containing want. */
static void expect_damaged(const char *name, const char *want)
{
    stg_store_options modes[2] = {{.exclusive = true}, {.readonly = true}};
    for (int m = 0; m < 2; m++) {
        stg_store *s = NULL;
        char err[640] = "";
        int rc = stg__store_open(path_of(name), &modes[m], &s, err, sizeof err);
        if (rc != STG_EDB || (want && !strstr(err, want)))
            fail_msg("%s open: rc %d, err '%s', want STG_EDB and '%s'", m ? "read-only" : "run",
                     rc, err, want ? want : "");
        assert_null(s);
        assert_non_null(strstr(err, "damaged"));
    }
}

static long file_size(const char *p)
{
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    return (long)st.st_size;
}

/* #14 Medium 4: random bytes over a finished batch's pages. */
static void test_damaged_random_bytes(void **state)
{
    (void)state;
    make_finished("rand.db", 3000);
    const char *p = path_of("rand.db");
    long size = file_size(p);
    assert_true(size > 16 * 4096);
    FILE *f = fopen(p, "r+b");
    assert_non_null(f);
    uint32_t x = 12345;
    assert_int_equal(fseek(f, size / 2 - (size / 2) % 4096, SEEK_SET), 0);
    for (int i = 0; i < 3 * 4096; i++) {
        x = x * 1103515245u + 12345u;
        fputc((int)(x >> 16) & 0xff, f);
    }
    fclose(f);
    expect_damaged("rand.db", NULL);
}

/* #14 Medium 4: a deleted job row must not resume as a smaller batch. */
static void test_damaged_deleted_row(void **state)
{
    (void)state;
    make_finished("del.db", 30);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path_of("del.db"), &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "DELETE FROM jobs WHERE id = 30", NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    expect_damaged("del.db", "holds 29 job rows, its job set has 30");

    make_finished("del2.db", 30);
    assert_int_equal(sqlite3_open(path_of("del2.db"), &db), SQLITE_OK);
    /* a row gone and another renumbered: the count alone would match */
    assert_int_equal(sqlite3_exec(db,
                                  "DELETE FROM jobs WHERE id = 7; "
                                  "INSERT INTO jobs(id, key, line, method, url_redacted, "
                                  "created_at, updated_at) VALUES(31, 'x', 1, 'GET', 'u', 0, 0)",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    expect_damaged("del2.db", "job ids run from 1 to 31");
}

/* #14 Medium 4: a truncated file. */
static void test_damaged_truncated(void **state)
{
    (void)state;
    make_finished("trunc.db", 3000);
    const char *p = path_of("trunc.db");
    assert_int_equal(truncate(p, file_size(p) / 2), 0);
    expect_damaged("trunc.db", NULL);
}

/* A row whose state is not one of ours is an error, not a missing count. */
static void test_damaged_state(void **state)
{
    (void)state;
    make_finished("state.db", 5);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path_of("state.db"), &db), SQLITE_OK);
    /* the CHECK constraint stops SQL from writing it: bypass it */
    assert_int_equal(sqlite3_exec(db,
                                  "PRAGMA ignore_check_constraints = 1; "
                                  "UPDATE jobs SET state = 'dnoe' WHERE id = 2",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    stg_store *s = NULL;
    char err[640];
    stg_store_options o = {.readonly = true};
    int rc = stg__store_open(path_of("state.db"), &o, &s, err, sizeof err);
    if (rc == STG_OK) {
        /* quick_check may not look at CHECK constraints: then counting must fail */
        int64_t c[STG_JOB_NSTATES];
        assert_int_equal(stg__store_counts(s, c), STG_EDB);
        assert_non_null(strstr(stg__store_errmsg(s), "no known state"));
        stg__store_close(s);
    } else {
        assert_int_equal(rc, STG_EDB);
    }
}

/* The database and its -wal are created 0600 (they hold response bodies). */
static void test_created_private(void **state)
{
    (void)state;
    mode_t old = umask(022);
    stg_store *s = open_new("mode.db");
    umask(old);
    import_five(s);
    struct stat st;
    assert_int_equal(stat(path_of("mode.db"), &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(stat(path_of("mode.db-wal"), &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    stg__store_close(s);
}

/* The report's counts come from one scan and its percentiles from one
 * sort (report.c): they must be what one query per figure says, on a set
 * with every state, more statuses than the report lists, attempts past
 * the histogram's end, jobs without times and needing the input. */
static int64_t q1(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    int64_t v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

#define FIN "state IN ('done', 'failed', 'deferred', 'review')"
#define TIMED FIN " AND finished_at IS NOT NULL AND started_at IS NOT NULL"

static void test_report_one_scan(void **state)
{
    (void)state;
    stg_store *s = open_new("scan.db");
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    for (int i = 0; i < 997; i++)
        fprintf(f, "http://127.0.0.1:1/j%d\n", i);
    fclose(f);
    stg_job_set set;
    make_set(text, &set);
    free(text);
    bool imported;
    assert_int_equal(stg__store_import(s, &set, "/scan.txt", 1000, &imported), STG_OK);
    stg__job_set_free(&set);
    sqlite3 *db = stg__store_db(s);
    assert_int_equal(
        sqlite3_exec(db,
                     "UPDATE jobs SET last_status = CASE WHEN id % 11 = 0 THEN NULL "
                     "ELSE 200 + (id * 7) % 41 END, attempts = (id * 5) % 23, "
                     "state = CASE id % 7 WHEN 0 THEN 'failed' WHEN 1 THEN 'deferred' "
                     "WHEN 2 THEN 'review' WHEN 3 THEN 'pending' ELSE 'done' END, "
                     "needs_input = id % 3 = 0, started_at = CASE WHEN id % 17 = 0 THEN NULL "
                     "ELSE 5000 END, finished_at = 5000 + (id * 37) % 1009",
                     NULL, NULL, NULL),
        SQLITE_OK);
    stg_store_report r;
    assert_int_equal(stg__store_report_get(s, &r), STG_OK);
    assert_int_equal(r.needs_input, q1(db, "SELECT count(*) FROM jobs WHERE needs_input = 1"));
    for (int k = 0; k < STG_REPORT_HIST; k++) {
        char sql[200];
        snprintf(sql, sizeof sql,
                 "SELECT count(*) FROM jobs WHERE " FIN " AND attempts %s %d",
                 k == STG_REPORT_HIST - 1 ? ">=" : "=", k + 1);
        assert_int_equal(r.hist[k], q1(db, sql));
    }
    int64_t n = q1(db, "SELECT count(*) FROM jobs WHERE " TIMED);
    assert_int_equal(r.duration.n, n);
    const double ps[4] = {0.50, 0.90, 0.99, 1.0};
    const int64_t got[4] = {r.duration.p50, r.duration.p90, r.duration.p99, r.duration.max};
    for (int i = 0; i < 4; i++) {
        char sql[300];
        int64_t k = (int64_t)((double)n * ps[i] + 0.999999999);
        snprintf(sql, sizeof sql,
                 "SELECT max(0, finished_at - started_at) AS d FROM jobs WHERE " TIMED
                 " ORDER BY d LIMIT 1 OFFSET %lld",
                 (long long)(k - 1));
        assert_int_equal(got[i], q1(db, sql));
    }
    /* statuses: the lowest STG_REPORT_STATUSES codes listed, the rest summed */
    assert_int_equal(r.n_statuses, STG_REPORT_STATUSES);
    int64_t listed = 0;
    for (int i = 0; i < r.n_statuses; i++) {
        char sql[200];
        snprintf(sql, sizeof sql,
                 "SELECT count(*) FROM jobs WHERE " FIN " AND coalesce(last_status, 0) = %d",
                 r.statuses[i].status);
        assert_int_equal(r.statuses[i].n, q1(db, sql));
        if (i > 0)
            assert_true(r.statuses[i].status > r.statuses[i - 1].status);
        listed += r.statuses[i].n;
    }
    assert_int_equal(r.statuses[0].status, 0);
    assert_true(r.statuses_other > 0);
    assert_int_equal(listed + r.statuses_other, q1(db, "SELECT count(*) FROM jobs WHERE " FIN));
    stg__store_report_free(&r);
    stg__store_close(s);
}

/* A new file is set up without syncs (schema.c), but what the caller gets
 * is under synchronous=NORMAL in WAL mode, new or reopened, and the setup
 * is whole on reopen. */
static int64_t pragma_of(stg_store *s, const char *sql)
{
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(stg__store_db(s), sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    int64_t v = sqlite3_column_type(st, 0) == SQLITE_TEXT
                    ? (int64_t)!strcmp((const char *)sqlite3_column_text(st, 0), "wal")
                    : sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

static void test_new_file_normal_sync(void **state)
{
    (void)state;
    stg_store *s = open_new("sync.db");
    assert_int_equal(pragma_of(s, "PRAGMA synchronous"), 1); /* NORMAL */
    assert_int_equal(pragma_of(s, "PRAGMA journal_mode"), 1); /* wal */
    import_five(s);
    stg__store_close(s);
    s = reopen("sync.db");
    assert_int_equal(pragma_of(s, "PRAGMA synchronous"), 1);
    assert_int_equal(pragma_of(s, "PRAGMA journal_mode"), 1);
    expect_counts(s, 5, 0, 0, 0, 0, 0);
    stg__store_close(s);
}

/* Group commit (stg__store_group): changes join one transaction that
 * another connection sees only after stg__store_flush; a change that does
 * not apply (ESTATE) keeps the group; stg__store_mark_sent is durable at
 * once; turning the group off flushes. */
static int64_t other_count(const char *name, const char *state_name)
{
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM jobs WHERE state = '%s'", state_name);
    return other_int(name, sql);
}

static void test_group_commit(void **state)
{
    (void)state;
    stg_store *s = open_new("group.db");
    import_five(s);
    assert_int_equal(stg__store_group(s, true), STG_OK);
    stg_job jobs[5];
    int n = 0;
    assert_int_equal(stg__store_claim(s, 5, 1, 2000, jobs, &n), STG_OK);
    assert_int_equal(n, 5);
    expect_counts(s, 0, 5, 0, 0, 0, 0);         /* this connection sees it */
    assert_int_equal(other_count("group.db", "inflight"), 0); /* not committed */
    assert_int_equal(stg__store_flush(s), STG_OK);
    assert_int_equal(other_count("group.db", "inflight"), 5);

    stg_job_outcome done = {.state = STG_JOB_DONE, .status = 200, .attempts = 1,
                            .body = "ok", .body_len = 2};
    assert_int_equal(stg__store_finish(s, 1, &done, 3000), STG_OK);
    assert_int_equal(stg__store_finish(s, 2, &done, 3000), STG_OK);
    /* Not in flight any more: refused, and the group keeps the two. */
    assert_int_equal(stg__store_finish(s, 1, &done, 3000), STG_ESTATE);
    assert_int_equal(other_count("group.db", "done"), 0);
    assert_int_equal(stg__store_flush(s), STG_OK);
    assert_int_equal(other_count("group.db", "done"), 2);
    assert_int_equal(stg__store_flush(s), STG_OK); /* nothing open: nothing to do */

    /* The sent-mark commits the group at once, with what it holds. */
    assert_int_equal(stg__store_finish(s, 4, &done, 3000), STG_OK);
    assert_int_equal(stg__store_mark_sent(s, 3, 1), STG_OK);
    assert_int_equal(other_count("group.db", "done"), 3);
    assert_int_equal(job_col("group.db", 3, "sent"), 1);
    assert_int_equal(stg__store_mark_sent(s, 1, 1), STG_ESTATE);

    /* Off: flushed. */
    assert_int_equal(stg__store_finish(s, 5, &done, 3000), STG_OK);
    assert_int_equal(other_count("group.db", "done"), 3);
    assert_int_equal(stg__store_group(s, false), STG_OK);
    assert_int_equal(other_count("group.db", "done"), 4);
    for (int i = 0; i < n; i++)
        stg__job_clear(&jobs[i]);
    stg__store_close(s);
}

/* A change that fails inside a group rolls the whole group back, so what
 * the database holds is the last flush: a kill at that moment. */
static void test_group_rollback(void **state)
{
    (void)state;
    stg_store *s = open_new("grouprb.db");
    import_five(s);
    stg_job jobs[5];
    int n = 0;
    assert_int_equal(stg__store_claim(s, 5, 1, 2000, jobs, &n), STG_OK);
    assert_int_equal(stg__store_group(s, true), STG_OK);
    stg_job_outcome done = {.state = STG_JOB_DONE, .status = 200, .attempts = 1};
    assert_int_equal(stg__store_finish(s, 1, &done, 3000), STG_OK);
    /* A body said to be in a file that is shorter than it says. */
    int fd = open(path_of("grouprb.db"), O_RDONLY);
    assert_true(fd >= 0);
    stg_job_outcome bad = {.state = STG_JOB_DONE, .status = 200, .attempts = 1,
                           .body_in_fd = true, .body_fd = fd, .body_len = (size_t)8 << 20};
    assert_int_equal(stg__store_finish(s, 2, &bad, 3000), STG_EDB);
    close(fd);
    expect_counts(s, 0, 5, 0, 0, 0, 0); /* job 1's outcome went with it */
    assert_int_equal(stg__store_group(s, false), STG_OK);
    for (int i = 0; i < n; i++)
        stg__job_clear(&jobs[i]);
    stg__store_close(s);
}

/* The run counters an outcome adds are written with it: committed by the
 * same flush, rolled back by the same failure, never on their own. */
static void test_run_counters_in_transaction(void **state)
{
    (void)state;
    stg_store *s = open_new("runadd.db");
    import_five(s);
    int64_t run = 0;
    assert_int_equal(stg__store_run_begin(s, 1000, &run), STG_OK);
    stg_job jobs[5];
    int n = 0;
    assert_int_equal(stg__store_claim(s, 5, run, 2000, jobs, &n), STG_OK);
    assert_int_equal(stg__store_group(s, true), STG_OK);
    stg_job_outcome done = {.state = STG_JOB_DONE, .status = 200, .attempts = 2,
                            .retries = 1, .status_429 = 1, .run_id = run};
    assert_int_equal(stg__store_finish(s, 1, &done, 3000), STG_OK);
    assert_int_equal(stg__store_finish(s, 2, &done, 3000), STG_OK);
    assert_int_equal(other_int("runadd.db", "SELECT calls FROM runs"), 0);
    assert_int_equal(stg__store_flush(s), STG_OK);
    assert_int_equal(other_int("runadd.db", "SELECT calls FROM runs"), 4);
    assert_int_equal(other_int("runadd.db", "SELECT retries FROM runs"), 2);
    assert_int_equal(other_int("runadd.db", "SELECT status_429 FROM runs"), 2);
    assert_int_equal(other_int("runadd.db", "SELECT finished FROM runs"), 2);
    /* the sent-mark's attempt, committed at once */
    assert_int_equal(stg__store_mark_sent(s, 3, run), STG_OK);
    assert_int_equal(other_int("runadd.db", "SELECT calls FROM runs"), 5);
    /* a failure inside the group takes the counters of its outcomes too */
    assert_int_equal(stg__store_finish(s, 4, &done, 3000), STG_OK);
    int fd = open(path_of("runadd.db"), O_RDONLY);
    assert_true(fd >= 0);
    stg_job_outcome bad = {.state = STG_JOB_DONE, .status = 200, .attempts = 1, .run_id = run,
                           .body_in_fd = true, .body_fd = fd, .body_len = (size_t)8 << 20};
    assert_int_equal(stg__store_finish(s, 5, &bad, 3000), STG_EDB);
    close(fd);
    assert_int_equal(stg__store_group(s, false), STG_OK);
    assert_int_equal(other_int("runadd.db", "SELECT calls FROM runs"), 5);
    assert_int_equal(other_int("runadd.db", "SELECT finished FROM runs"), 2);
    /* and the next transaction starts from nothing pending */
    stg_job_outcome one = {.state = STG_JOB_DONE, .status = 200, .attempts = 1, .run_id = run};
    assert_int_equal(stg__store_finish(s, 4, &one, 4000), STG_OK);
    assert_int_equal(other_int("runadd.db", "SELECT calls FROM runs"), 6);
    assert_int_equal(other_int("runadd.db", "SELECT finished FROM runs"), 3);
    for (int i = 0; i < n; i++)
        stg__job_clear(&jobs[i]);
    stg__store_close(s);
}

/* A database made with the index of before (jobs_by_state, every state)
 * gets the pending-only index at a writer's open, and claims as before; a
 * reader leaves it alone. */
static void test_old_index_migrated(void **state)
{
    (void)state;
    stg_store *s = open_new("oldidx.db");
    import_five(s);
    stg__store_close(s);
    sqlite3 *o;
    assert_int_equal(sqlite3_open(path_of("oldidx.db"), &o), SQLITE_OK);
    assert_int_equal(sqlite3_exec(o,
                                  "DROP INDEX jobs_pending; "
                                  "CREATE INDEX jobs_by_state ON jobs(state, id)",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(o);
    const char *q_old = "SELECT count(*) FROM sqlite_master WHERE name = 'jobs_by_state'";
    const char *q_new = "SELECT count(*) FROM sqlite_master WHERE name = 'jobs_pending'";
    stg_store_options ro = {.readonly = true};
    char err[640];
    assert_int_equal(stg__store_open(path_of("oldidx.db"), &ro, &s, err, sizeof err), STG_OK);
    expect_counts(s, 5, 0, 0, 0, 0, 0);
    stg__store_close(s);
    assert_int_equal(other_int("oldidx.db", q_old), 1);
    s = reopen("oldidx.db");
    assert_int_equal(other_int("oldidx.db", q_old), 0);
    assert_int_equal(other_int("oldidx.db", q_new), 1);
    stg_job jobs[5];
    int n = 0;
    assert_int_equal(stg__store_claim(s, 2, 1, 2000, jobs, &n), STG_OK);
    assert_int_equal(n, 2);
    assert_int_equal(jobs[0].id, 1);
    assert_int_equal(jobs[1].id, 2);
    stg_job_outcome back = {.state = STG_JOB_PENDING};
    assert_int_equal(stg__store_finish(s, 1, &back, 3000), STG_OK);
    for (int i = 0; i < n; i++)
        stg__job_clear(&jobs[i]);
    /* the lowest pending id first, a job put back included */
    assert_int_equal(stg__store_claim(s, 5, 1, 4000, jobs, &n), STG_OK);
    assert_int_equal(n, 4);
    assert_int_equal(jobs[0].id, 1);
    assert_int_equal(jobs[1].id, 3);
    for (int i = 0; i < n; i++)
        stg__job_clear(&jobs[i]);
    expect_counts(s, 0, 5, 0, 0, 0, 0);
    stg__store_close(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_states_names),
        cmocka_unit_test(test_import_idempotent),
        cmocka_unit_test(test_fingerprint_mismatch),
        cmocka_unit_test(test_transitions),
        cmocka_unit_test(test_group_commit),
        cmocka_unit_test(test_group_rollback),
        cmocka_unit_test(test_run_counters_in_transaction),
        cmocka_unit_test(test_old_index_migrated),
        cmocka_unit_test(test_recover),
        cmocka_unit_test(test_cancelled_back_to_pending),
        cmocka_unit_test(test_unclaim),
        cmocka_unit_test(test_runner_lock),
        cmocka_unit_test(test_sqlite_locked),
        cmocka_unit_test(test_disk_full),
        cmocka_unit_test(test_foreign_files),
        cmocka_unit_test(test_readonly_file),
        cmocka_unit_test(test_no_secrets_in_file),
        cmocka_unit_test(test_report_export),
        cmocka_unit_test(test_damaged_random_bytes),
        cmocka_unit_test(test_damaged_deleted_row),
        cmocka_unit_test(test_damaged_truncated),
        cmocka_unit_test(test_damaged_state),
        cmocka_unit_test(test_created_private),
        cmocka_unit_test(test_new_file_normal_sync),
        cmocka_unit_test(test_report_one_scan),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
