/*
 * The run's per-second series (issue #36): what the jobs table cannot hold,
 * recorded while a batch runs, for `stagger batch report --html`: per
 * second and run, the attempts started, the answers 429 and 503, the time
 * requests waited by reason (the engine's WAITED events, in us, put in the
 * second the wait ended), and the learned rate and concurrency as the
 * events carried them (the largest in the second, of any host).
 *
 * Table run_seconds, made if missing by the first write (like run_waits:
 * an added table changes no row an older reader reads, so the schema
 * version stays; a database without it draws no such series).
 *
 * Invariants:
 *  - rows are written in one transaction; in a group (stg__store_group),
 *    the group's, committed by its flush (batch/series.c writes at the
 *    flush commit.c already does, when the group holds something to commit
 *    anyway: stg__store_pending);
 *  - bounded: at most SERIES_MAX_ROWS rows per run: when a run's rows pass
 *    it, they are merged in pairs (the width doubles: 1 s, 2 s, 4 s ...;
 *    sums add, the rate and concurrency keep the larger), and incoming rows
 *    are aligned to the run's width and added the same way (a row wider
 *    than a second holds the largest rate and concurrency of its seconds);
 *    only the last SERIES_KEEP_RUNS runs
 *    keep a series (older ones are dropped at a run's first write). So the
 *    table holds at most SERIES_MAX_ROWS x SERIES_KEEP_RUNS rows;
 *  - sums are exact through a merge (the waits' total equals what the
 *    events said, whatever the width).
 */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "store/internal.h"

#define SERIES_MAX_ROWS 1800
#define SERIES_KEEP_RUNS 20

const char *const stg_store_wait_reasons[STG_STORE_WAIT_REASONS] = {
    "slot", "limiter", "quota", "pace", "concurrency", "breaker", "backoff", "budget"};

static const char create_sql[] =
    "CREATE TABLE IF NOT EXISTS run_seconds(run_id INTEGER NOT NULL, t_s INTEGER NOT NULL, "
    "width_s INTEGER NOT NULL, attempts INTEGER NOT NULL, n429 INTEGER NOT NULL, "
    "n503 INTEGER NOT NULL, w_slot INTEGER NOT NULL, w_limiter INTEGER NOT NULL, "
    "w_quota INTEGER NOT NULL, w_pace INTEGER NOT NULL, w_concurrency INTEGER NOT NULL, "
    "w_breaker INTEGER NOT NULL, w_backoff INTEGER NOT NULL, w_budget INTEGER NOT NULL, "
    "learned_rate REAL NOT NULL, concurrency INTEGER NOT NULL, PRIMARY KEY(run_id, t_s)) "
    "WITHOUT ROWID";

#define SUMS                                                                                    \
    "attempts = attempts + excluded.attempts, n429 = n429 + excluded.n429, "                    \
    "n503 = n503 + excluded.n503, w_slot = w_slot + excluded.w_slot, "                          \
    "w_limiter = w_limiter + excluded.w_limiter, w_quota = w_quota + excluded.w_quota, "        \
    "w_pace = w_pace + excluded.w_pace, "                                                       \
    "w_concurrency = w_concurrency + excluded.w_concurrency, "                                  \
    "w_breaker = w_breaker + excluded.w_breaker, w_backoff = w_backoff + excluded.w_backoff, "  \
    "w_budget = w_budget + excluded.w_budget"

static int exec1(stg_store *s, const char *sql, int64_t a, int64_t b)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, a);
        sqlite3_bind_int64(st, 2, b);
        rc = sqlite3_step(st);
        rc = rc == SQLITE_DONE || rc == SQLITE_ROW ? SQLITE_OK : rc;
    }
    sqlite3_finalize(st);
    return rc;
}

/* The run's row count and width (1 when it has none). */
static int run_shape(stg_store *s, int64_t run_id, int64_t *rows, int64_t *width)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db,
                                "SELECT count(*), coalesce(max(width_s), 1) FROM run_seconds "
                                "WHERE run_id = ?1",
                                -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, run_id);
        if ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            *rows = sqlite3_column_int64(st, 0);
            *width = sqlite3_column_int64(st, 1);
            rc = SQLITE_OK;
        }
    }
    sqlite3_finalize(st);
    return rc;
}

/* Merge the run's rows in pairs: width w becomes 2w. */
static int coarsen(stg_store *s, int64_t run_id, int64_t w)
{
    int rc = exec1(s,
                   "INSERT INTO run_seconds SELECT run_id, t_s - t_s % ?2, ?2, attempts, n429, "
                   "n503, w_slot, w_limiter, w_quota, w_pace, w_concurrency, w_breaker, "
                   "w_backoff, w_budget, learned_rate, concurrency FROM run_seconds "
                   "WHERE run_id = ?1 AND t_s % ?2 != 0 ORDER BY t_s "
                   "ON CONFLICT(run_id, t_s) DO UPDATE SET " SUMS ", "
                   "learned_rate = max(learned_rate, excluded.learned_rate), "
                   "concurrency = max(concurrency, excluded.concurrency)",
                   run_id, 2 * w);
    if (rc == SQLITE_OK)
        rc = exec1(s, "DELETE FROM run_seconds WHERE run_id = ?1 AND t_s % ?2 != 0", run_id,
                   2 * w);
    if (rc == SQLITE_OK)
        rc = exec1(s, "UPDATE run_seconds SET width_s = ?2 WHERE run_id = ?1", run_id, 2 * w);
    return rc;
}

int stg__store_series_add(stg_store *s, int64_t run_id, const stg_store_second *rows, size_t n,
                         int64_t *width_s)
{
    int64_t have = 0, w = 1;
    int err = stg__store_begin(s); /* in a group: joins its transaction */
    if (err != STG_OK)
        return err;
    int rc = sqlite3_exec(s->db, create_sql, NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = run_shape(s, run_id, &have, &w);
    if (rc == SQLITE_OK && have == 0 && n > 0) /* a run's first write: older runs go */
        rc = exec1(s, "DELETE FROM run_seconds WHERE run_id <= ?1 - ?2", run_id,
                   SERIES_KEEP_RUNS);
    sqlite3_stmt *st = NULL;
    if (rc == SQLITE_OK && n > 0)
        rc = sqlite3_prepare_v2(
            s->db,
            "INSERT INTO run_seconds VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, "
            "?13, ?14, ?15, ?16) ON CONFLICT(run_id, t_s) DO UPDATE SET " SUMS ", "
            "learned_rate = max(learned_rate, excluded.learned_rate), "
            "concurrency = max(concurrency, excluded.concurrency)",
            -1, &st, NULL);
    for (size_t i = 0; rc == SQLITE_OK && i < n; i++) {
        const stg_store_second *r = &rows[i];
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, run_id);
        sqlite3_bind_int64(st, 2, r->t_s - ((r->t_s % w) + w) % w);
        sqlite3_bind_int64(st, 3, w);
        sqlite3_bind_int64(st, 4, r->attempts);
        sqlite3_bind_int64(st, 5, r->n429);
        sqlite3_bind_int64(st, 6, r->n503);
        for (int k = 0; k < STG_STORE_WAIT_REASONS; k++)
            sqlite3_bind_int64(st, 7 + k, r->wait_us[k]);
        sqlite3_bind_double(st, 15, r->learned_rate);
        sqlite3_bind_int64(st, 16, r->concurrency);
        rc = sqlite3_step(st);
        rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
    }
    sqlite3_finalize(st);
    while (rc == SQLITE_OK && (rc = run_shape(s, run_id, &have, &w)) == SQLITE_OK &&
           have > SERIES_MAX_ROWS)
        rc = coarsen(s, run_id, w);
    if (width_s)
        *width_s = w;
    if (rc != SQLITE_OK) /* in a group, all of it is rolled back, as any failure in it */
        return stg__store_fail_rollback(s, rc, "cannot record the run's series");
    return stg__store_commit(s); /* in a group: stg__store_flush commits it */
}

bool stg__store_pending(const stg_store *s)
{
    return s && s->group_open;
}

int stg__store_series_into(stg_store *s, int64_t t0_ms, int64_t bucket_ms, int64_t n,
                           json_t *into)
{
    if (n <= 0 || !stg__store_has_table(s, "run_seconds"))
        return STG_OK;
    int64_t *att = calloc((size_t)n, sizeof *att), *r429 = calloc((size_t)n, sizeof *r429),
            *r503 = calloc((size_t)n, sizeof *r503),
            *wait = calloc((size_t)n * STG_STORE_WAIT_REASONS, sizeof *wait);
    double *rate = calloc((size_t)n, sizeof *rate), *conc = calloc((size_t)n, sizeof *conc);
    sqlite3_stmt *st = NULL;
    int rc = !att || !r429 || !r503 || !wait || !rate || !conc ? SQLITE_NOMEM : SQLITE_OK;
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(s->db,
                                "SELECT t_s, attempts, n429, n503, w_slot, w_limiter, w_quota, "
                                "w_pace, w_concurrency, w_breaker, w_backoff, w_budget, "
                                "learned_rate, concurrency FROM run_seconds",
                                -1, &st, NULL);
    while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t b = (sqlite3_column_int64(st, 0) * 1000 - t0_ms) / bucket_ms;
        b = b < 0 ? 0 : b >= n ? n - 1 : b; /* outside the jobs' span: its edge */
        att[b] += sqlite3_column_int64(st, 1);
        r429[b] += sqlite3_column_int64(st, 2);
        r503[b] += sqlite3_column_int64(st, 3);
        for (int k = 0; k < STG_STORE_WAIT_REASONS; k++)
            wait[b * STG_STORE_WAIT_REASONS + k] += sqlite3_column_int64(st, 4 + k);
        rate[b] = fmax(rate[b], sqlite3_column_double(st, 12));
        conc[b] = fmax(conc[b], (double)sqlite3_column_int64(st, 13));
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    if (rc == SQLITE_DONE) {
        rc = SQLITE_OK;
        json_t *a = json_array(), *q = json_array(), *u = json_array(), *lr = json_array(),
               *lc = json_array(), *w = json_object();
        for (int k = 0; k < STG_STORE_WAIT_REASONS; k++) {
            json_t *arr = json_array();
            for (int64_t i = 0; i < n; i++)
                json_array_append_new(
                    arr, json_real((double)wait[i * STG_STORE_WAIT_REASONS + k] / 1000.0));
            json_object_set_new(w, stg_store_wait_reasons[k], arr);
        }
        for (int64_t i = 0; i < n; i++) {
            json_array_append_new(a, json_integer(att[i]));
            json_array_append_new(q, json_integer(r429[i]));
            json_array_append_new(u, json_integer(r503[i]));
            json_array_append_new(lr, rate[i] > 0 ? json_real(round(rate[i] * 1000) / 1000)
                                                  : json_null());
            json_array_append_new(lc, conc[i] > 0 ? json_integer((json_int_t)conc[i])
                                                  : json_null());
        }
        json_object_set_new(into, "attempts", a);
        json_object_set_new(into, "status_429", q);
        json_object_set_new(into, "status_503", u);
        json_object_set_new(into, "waits_ms", w);
        json_object_set_new(into, "learned_rate", lr);
        json_object_set_new(into, "concurrency", lc);
    }
    free(att), free(r429), free(r503), free(wait), free(rate), free(conc);
    return rc == SQLITE_OK ? STG_OK : stg__store_fail(s, rc, "cannot read the run's series");
}
