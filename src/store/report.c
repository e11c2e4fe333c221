/*
 * The batch report: jobs per state, totals of every run (wall time, calls,
 * 429s and 503s, retries), a histogram of attempts per finished job and
 * one of every job (the never-tried ones as 0, so it adds up to the
 * total), why the jobs not done stand where they are (reason and last
 * transport error), job duration percentiles, the last status of every job by code, the time
 * lost waiting (retry backoff and the limiter, as runs recorded it), the
 * effective rate, the bad input lines, and per priority class and tenant
 * the jobs and their admissions (report_class.c). Read-only; works while a run is
 * going on (WAL readers do not block the writer).
 *
 * This file reads; src/batch/report.c prints (text and JSON, the same
 * printer as the Redis work queue's report). Everything read comes from
 * the database, so nothing here can carry a secret the database does not
 * hold (URLs are not read at all).
 *
 * The jobs table is read once (job_scan) and counted in C; the duration
 * percentiles are taken from an array of the finished jobs' durations (8
 * bytes a job, freed before the report returns). A report writes nothing,
 * so this is outside every durability argument of the runner.
 *
 * A report on the writer's own store is the end of a run (the final
 * report, before the close): it asks the WAL helper to checkpoint while it
 * reads (stg__store_walsync_catch_up), so the close that follows has
 * nothing left to copy or sync. Only earlier: the close still checkpoints
 * whatever is left, as before.
 */
#include <stdlib.h>
#include <string.h>

#include "store/internal.h"

static int one_row(stg_store *s, const char *sql, int ncols, int64_t *out)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            for (int i = 0; i < ncols; i++)
                out[i] = sqlite3_column_type(st, i) == SQLITE_NULL
                             ? -1
                             : sqlite3_column_int64(st, i);
            rc = SQLITE_DONE;
        } else if (rc == SQLITE_DONE) {
            for (int i = 0; i < ncols; i++)
                out[i] = 0;
        }
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int64_t nz(int64_t v)
{
    return v < 0 ? 0 : v;
}

/* One status's count while the scan runs (few distinct codes: a list). */
typedef struct {
    int status;
    int64_t n;
} status_n;

/* One "why" (a reason and an error name) while the scan runs. */
typedef struct {
    char why[64];
    int64_t n;
} why_n;

typedef struct {
    status_n *v;
    size_t n, cap;
    why_n *w;
    size_t nw, capw;
    int64_t *d; /* durations of the finished jobs that have both times */
    size_t nd, capd;
} scan_acc;

static bool grow(void **p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return true;
    size_t c = *cap ? *cap * 2 : 64;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * size);
    if (!q)
        return false;
    *p = q;
    *cap = c;
    return true;
}

static bool add_status(scan_acc *a, int status)
{
    for (size_t i = 0; i < a->n; i++)
        if (a->v[i].status == status) {
            a->v[i].n++;
            return true;
        }
    if (!grow((void **)&a->v, &a->cap, a->n + 1, sizeof *a->v))
        return false;
    a->v[a->n].status = status;
    a->v[a->n++].n = 1;
    return true;
}

/* The why of a job not done: its reason, and the error name that starts
 * last_error ("connect_refused: ..."), or "never tried". */
static bool add_why(scan_acc *a, const char *reason, const char *last_error, int64_t attempts)
{
    char err[32] = "";
    if (last_error) {
        size_t n = strspn(last_error, "abcdefghijklmnopqrstuvwxyz_0123456789");
        if (n > 0 && n < sizeof err && last_error[n] == ':')
            memcpy(err, last_error, n), err[n] = '\0';
    }
    if (!err[0] && attempts == 0)
        snprintf(err, sizeof err, "never tried");
    char why[64];
    snprintf(why, sizeof why, "%s%s%s", reason && reason[0] ? reason : "no outcome yet",
             err[0] ? ", " : "", err);
    for (size_t i = 0; i < a->nw; i++)
        if (!strcmp(a->w[i].why, why)) {
            a->w[i].n++;
            return true;
        }
    if (!grow((void **)&a->w, &a->capw, a->nw + 1, sizeof *a->w))
        return false;
    memcpy(a->w[a->nw].why, why, sizeof why);
    a->w[a->nw++].n = 1;
    return true;
}

static int by_count_desc(const void *x, const void *y)
{
    const why_n *a = x, *b = y;
    if (a->n != b->n)
        return (a->n < b->n) - (a->n > b->n);
    return strcmp(a->why, b->why);
}

static void put_whys(scan_acc *a, stg_store_report *r)
{
    if (a->nw)
        qsort(a->w, a->nw, sizeof *a->w, by_count_desc);
    for (size_t i = 0; i < a->nw; i++) {
        if (r->n_reasons < STG_REPORT_REASONS) {
            memcpy(r->reasons[r->n_reasons].why, a->w[i].why, sizeof a->w[i].why);
            r->reasons[r->n_reasons++].n = a->w[i].n;
        } else {
            r->reasons_other += a->w[i].n;
        }
    }
}

static int by_status(const void *x, const void *y)
{
    int a = ((const status_n *)x)->status, b = ((const status_n *)y)->status;
    return (a > b) - (a < b);
}

static int by_value(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

/* The statuses in ascending order: the first STG_REPORT_STATUSES listed,
 * the rest summed. */
static void put_statuses(scan_acc *a, stg_store_report *r)
{
    if (a->n)
        qsort(a->v, a->n, sizeof *a->v, by_status);
    for (size_t i = 0; i < a->n; i++) {
        if (r->n_statuses < STG_REPORT_STATUSES) {
            r->statuses[r->n_statuses].status = a->v[i].status;
            r->statuses[r->n_statuses++].n = a->v[i].n;
        } else {
            r->statuses_other += a->v[i].n;
        }
    }
}

/* Nearest-rank percentiles of the durations: the k-th smallest, k =
 * ceil(p * n). */
static void put_durations(scan_acc *a, stg_store_report *r)
{
    r->duration.n = (int64_t)a->nd;
    if (a->nd == 0)
        return;
    qsort(a->d, a->nd, sizeof *a->d, by_value);
    static const double ps[4] = {0.50, 0.90, 0.99, 1.0};
    int64_t *out[4] = {&r->duration.p50, &r->duration.p90, &r->duration.p99, &r->duration.max};
    for (int i = 0; i < 4; i++) {
        int64_t k = (int64_t)((double)a->nd * ps[i] + 0.999999999);
        if (k < 1)
            k = 1;
        if (k > (int64_t)a->nd)
            k = (int64_t)a->nd;
        *out[i] = a->d[k - 1];
    }
}

static bool finished_state(stg_job_state js)
{
    return js == STG_JOB_DONE || js == STG_JOB_FAILED || js == STG_JOB_DEFERRED ||
           js == STG_JOB_REVIEW;
}

/* One read of the jobs table for everything the report counts: jobs by
 * state (checked as stg__store_counts checks them), jobs needing the input,
 * finished jobs by attempts (the histogram) and by last status, and the
 * finished jobs' durations (claimed to final state). It was a GROUP BY of
 * the states, a GROUP BY of four keys and an ORDER BY of every duration:
 * three scans and three sorts in SQLite's sorter, about a tenth of a
 * 50 000-job run's wall time once the requests were done. */
static int job_scan(stg_store *s, stg_store_report *r)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db,
                                "SELECT state, needs_input, attempts, last_status, started_at, "
                                "finished_at, reason, last_error FROM jobs",
                                -1, &st, NULL);
    scan_acc a;
    memset(&a, 0, sizeof a);
    bool unknown = false, nomem = false;
    int64_t sum = 0;
    while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        rc = SQLITE_OK;
        sum++;
        stg_job_state js;
        const char *name = (const char *)sqlite3_column_text(st, 0);
        if (!name || stg__job_state_parse(name, &js) != STG_OK) {
            unknown = true;
            continue;
        }
        r->counts[js]++;
        if (sqlite3_column_int64(st, 1) == 1)
            r->needs_input++;
        int64_t attempts = sqlite3_column_int64(st, 2);
        r->attempts_all[attempts < 0 ? 0 : attempts > STG_REPORT_HIST ? STG_REPORT_HIST
                                                                       : attempts]++;
        if (js != STG_JOB_DONE &&
            !add_why(&a, (const char *)sqlite3_column_text(st, 6),
                     (const char *)sqlite3_column_text(st, 7), attempts)) {
            nomem = true;
            break;
        }
        if (!finished_state(js))
            continue;
        if (attempts > 0) {
            int64_t retries = attempts - 1;
            if (retries >= STG_REPORT_HIST - 1)
                retries = STG_REPORT_HIST - 1;
            r->hist[retries]++;
        }
        if (!add_status(&a, sqlite3_column_int(st, 3)))
            nomem = true;
        if (sqlite3_column_type(st, 4) != SQLITE_NULL &&
            sqlite3_column_type(st, 5) != SQLITE_NULL) {
            int64_t d = sqlite3_column_int64(st, 5) - sqlite3_column_int64(st, 4);
            if (!grow((void **)&a.d, &a.capd, a.nd + 1, sizeof *a.d))
                nomem = true;
            else
                a.d[a.nd++] = d > 0 ? d : 0;
        }
        if (nomem)
            break;
    }
    sqlite3_finalize(st);
    if (nomem)
        rc = SQLITE_NOMEM;
    if (rc == SQLITE_DONE) {
        put_statuses(&a, r);
        put_durations(&a, r);
        put_whys(&a, r);
    }
    free(a.v);
    free(a.w);
    free(a.d);
    if (rc != SQLITE_DONE)
        return stg__store_fail(s, rc, "cannot read the report");
    return stg__store_check_rows(s, sum, unknown);
}

static int waits(stg_store *s, stg_store_report *r)
{
    if (!stg__store_has_table(s, "run_waits"))
        return SQLITE_OK;
    int64_t v[3] = {0, 0, 0};
    int rc = one_row(s, "SELECT count(*), sum(retry_ms), sum(limiter_ms) FROM run_waits", 3, v);
    r->waits_known = rc == SQLITE_OK && v[0] > 0;
    r->wait_retry_ms = nz(v[1]);
    r->wait_limiter_ms = nz(v[2]);
    return rc;
}

int stg__store_run_waits_add(stg_store *s, int64_t retry_ms, int64_t limiter_ms)
{
    sqlite3_stmt *st;
    int rc = stg__store_run_table(s,
                                  "CREATE TABLE IF NOT EXISTS run_waits(run_id INTEGER PRIMARY "
                                  "KEY REFERENCES runs(id), retry_ms INTEGER NOT NULL, "
                                  "limiter_ms INTEGER NOT NULL)",
                                  "INSERT INTO run_waits(run_id, retry_ms, limiter_ms) "
                                  "SELECT max(id), ?1, ?2 FROM runs HAVING max(id) IS NOT NULL "
                                  "ON CONFLICT(run_id) DO UPDATE SET "
                                  "retry_ms = retry_ms + excluded.retry_ms, "
                                  "limiter_ms = limiter_ms + excluded.limiter_ms",
                                  &st);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, retry_ms);
        sqlite3_bind_int64(st, 2, limiter_ms);
        rc = sqlite3_step(st);
        if (rc == SQLITE_DONE)
            rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    return rc == SQLITE_OK ? STG_OK : stg__store_fail(s, rc, "cannot record the run's waits");
}

/* A runs row's counters, columns 1 to 5 of v (both reads below put them
 * there): wall time, calls, retries, 429s, 503s. */
static void counters(const int64_t *v, int64_t *wall_ms, int64_t *calls, int64_t *retries,
                     int64_t *s429, int64_t *s503)
{
    *wall_ms = nz(v[1]);
    *calls = nz(v[2]);
    *retries = nz(v[3]);
    *s429 = nz(v[4]);
    *s503 = nz(v[5]);
}

int stg__store_report_get(stg_store *s, stg_store_report *r)
{
    memset(r, 0, sizeof *r);
    if (!s->readonly)
        stg__store_walsync_catch_up(s);
    int err = job_scan(s, r);
    if (err)
        return err;
    for (int i = 0; i < STG_JOB_NSTATES; i++)
        r->total += r->counts[i];
    int64_t v[8] = {0};
    int rc = one_row(s, "SELECT count(*) FROM bad_lines", 1, v);
    if (rc == SQLITE_OK) {
        r->bad_lines = nz(v[0]);
        rc = one_row(s,
                     "SELECT count(*), sum(wall_ms), sum(calls), sum(retries), "
                     "sum(status_429), sum(status_503) FROM runs",
                     6, v);
    }
    if (rc == SQLITE_OK) {
        r->runs = nz(v[0]);
        counters(v, &r->wall_ms, &r->calls, &r->retries, &r->status_429, &r->status_503);
        rc = one_row(s,
                     "SELECT started_at, wall_ms, calls, retries, status_429, status_503, "
                     "finished, exit_code FROM runs ORDER BY id DESC LIMIT 1",
                     8, v);
    }
    if (rc == SQLITE_OK) {
        r->last.started_ms = nz(v[0]);
        counters(v, &r->last.wall_ms, &r->last.calls, &r->last.retries, &r->last.status_429,
                 &r->last.status_503);
        r->last.finished = nz(v[6]);
        r->last.exit_code = r->runs ? (int)v[7] : -1;
        rc = waits(s, r);
    }
    if (rc == SQLITE_OK)
        rc = stg__store_report_classes(s, r); /* report_class.c */
    if (rc != SQLITE_OK)
        return stg__store_fail(s, rc, "cannot read the report");
    if ((err = stg__store_meta_get(s, "input_path", &r->input_path)) ||
        (err = stg__store_meta_get(s, "fingerprint", &r->fingerprint)) ||
        (err = stg__store_meta_get(s, "input_format", &r->format))) {
        stg__store_report_free(r);
        return err;
    }
    char *conc = NULL;
    if ((err = stg__store_meta_get(s, "learned_concurrency", &conc))) {
        stg__store_report_free(r);
        return err;
    }
    r->learned_concurrency = conc ? atoi(conc) : 0;
    free(conc);
    return STG_OK;
}

void stg__store_report_free(stg_store_report *r)
{
    if (!r)
        return;
    free(r->input_path);
    free(r->fingerprint);
    free(r->format);
    free(r->classes);
    r->input_path = r->fingerprint = r->format = NULL;
    r->classes = NULL;
    r->n_classes = 0;
}

double stg__store_report_jobs_per_s(const stg_store_report *r)
{
    int64_t answered = r->counts[STG_JOB_DONE] + r->counts[STG_JOB_FAILED];
    return r->wall_ms > 0 ? (double)answered * 1000.0 / (double)r->wall_ms : 0.0;
}

int stg__store_bad_lines_print(stg_store *s, const char *input, long max, FILE *out)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, "SELECT line, message FROM bad_lines ORDER BY line", -1,
                                &st, NULL);
    long n = 0, total = 0;
    while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        total++;
        if (max <= 0 || n < max) {
            fprintf(out, "%s:%lld: %s\n", input ? input : "input",
                    (long long)sqlite3_column_int64(st, 0),
                    (const char *)sqlite3_column_text(st, 1));
            n++;
        }
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return stg__store_fail(s, rc, "cannot read the bad lines");
    if (total > n)
        fprintf(out, "... and %ld more bad lines\n", total - n);
    return STG_OK;
}
