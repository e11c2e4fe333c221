/*
 * Unit tests of the run's per-second series (src/store/series.c): it is
 * bounded (a long run's rows are merged in pairs past the cap, and only
 * the last runs keep theirs), the merge keeps every sum exact and the
 * larger learned rate, and rows that come after a merge are aligned to the
 * run's new width; in a group they are committed by its flush only.
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "cmocka_all.h"

#include "store/store.h"

#define STORE_SCRATCH_PREFIX "stg_test_series"
#include "store_scratch.h"

static stg_store *open_store(const char *name)
{
    stg_store *s = NULL;
    char err[640];
    stg_store_options o = {.create = true, .exclusive = true};
    if (stg__store_open(path_of(name), &o, &s, err, sizeof err) != STG_OK)
        fail_msg("open %s: %s", name, err);
    return s;
}

static int64_t one(stg_store *s, const char *sql)
{
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(stg__store_db(s), sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    int64_t v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

#define T0 INT64_C(1800000000) /* a Unix second, a multiple of 8 */

/* Ten hours of seconds: at most 1800 rows stay, every sum is whole. */
static void test_bounded_and_exact(void **state)
{
    (void)state;
    stg_store *s = open_store("a.db");
    int64_t run = 0;
    assert_int_equal(stg__store_run_begin(s, T0 * 1000, &run), STG_OK);
    enum { N = 36000, CHUNK = 600 };
    static stg_store_second rows[CHUNK];
    int64_t w = 0;
    for (int i = 0; i < N; i += CHUNK) {
        memset(rows, 0, sizeof rows);
        for (int k = 0; k < CHUNK; k++) {
            rows[k].t_s = T0 + i + k;
            rows[k].attempts = 2;
            rows[k].n429 = (i + k) % 3 == 0;
            rows[k].wait_us[6] = 1500; /* backoff */
            rows[k].learned_rate = (i + k) == 12345 ? 99.5 : 3.0;
            rows[k].concurrency = 4;
        }
        assert_int_equal(stg__store_series_add(s, run, rows, CHUNK, &w), STG_OK);
    }
    int64_t n = one(s, "SELECT count(*) FROM run_seconds");
    assert_true(n <= 1800);
    assert_true(n > 900); /* merged no more than needed */
    assert_int_equal(w, 32); /* 36000 s: 1125 rows of 32 s */
    assert_int_equal(one(s, "SELECT count(DISTINCT width_s) FROM run_seconds"), 1);
    assert_int_equal(one(s, "SELECT count(*) FROM run_seconds WHERE t_s % 32 != 0"), 0);
    assert_int_equal(one(s, "SELECT sum(attempts) FROM run_seconds"), 2 * N);
    assert_int_equal(one(s, "SELECT sum(n429) FROM run_seconds"), N / 3);
    assert_int_equal(one(s, "SELECT sum(w_backoff) FROM run_seconds"), INT64_C(1500) * N);
    assert_int_equal(one(s, "SELECT count(*) FROM run_seconds WHERE learned_rate = 99.5"), 1);
    /* A late row joins the bucket of its second at the run's width. */
    stg_store_second late = {.t_s = T0 + 40, .attempts = 1};
    assert_int_equal(stg__store_series_add(s, run, &late, 1, NULL), STG_OK);
    assert_int_equal(one(s, "SELECT attempts FROM run_seconds WHERE t_s = 1800000032"),
                     2 * 32 + 1);
    stg__store_close(s);
}

/* Only the last 20 runs keep a series: a run's first write drops older. */
static void test_old_runs_dropped(void **state)
{
    (void)state;
    stg_store *s = open_store("b.db");
    stg_store_second r = {.t_s = T0, .attempts = 1};
    int64_t run = 0;
    for (int i = 0; i < 25; i++) {
        assert_int_equal(stg__store_run_begin(s, T0 * 1000, &run), STG_OK);
        assert_int_equal(stg__store_series_add(s, run, &r, 1, NULL), STG_OK);
    }
    assert_int_equal(one(s, "SELECT count(DISTINCT run_id) FROM run_seconds"), 20);
    assert_int_equal(one(s, "SELECT min(run_id) FROM run_seconds"), run - 19);
    stg__store_close(s);
}

/* In a group, the rows join its transaction: no commit of their own
 * (the batch's flush commits them with the rest). */
static void test_no_commit_of_its_own(void **state)
{
    (void)state;
    stg_store *s = open_store("c.db");
    int64_t run = 0;
    assert_int_equal(stg__store_run_begin(s, T0 * 1000, &run), STG_OK);
    assert_int_equal(stg__store_group(s, true), STG_OK);
    assert_false(stg__store_pending(s));
    int64_t before = stg__store_commits(s);
    stg_store_second r = {.t_s = T0, .attempts = 3};
    assert_int_equal(stg__store_series_add(s, run, &r, 1, NULL), STG_OK);
    assert_true(stg__store_pending(s));
    assert_int_equal(stg__store_commits(s), before);
    assert_int_equal(stg__store_flush(s), STG_OK);
    assert_int_equal(stg__store_commits(s), before + 1);
    assert_false(stg__store_pending(s));
    assert_int_equal(one(s, "SELECT sum(attempts) FROM run_seconds"), 3);
    stg__store_close(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bounded_and_exact),
        cmocka_unit_test(test_old_runs_dropped),
        cmocka_unit_test(test_no_commit_of_its_own),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
