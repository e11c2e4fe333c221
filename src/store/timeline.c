/*
 * The run's timeline as the database holds it, for the HTML report
 * (stagger batch report --html, issue #36): per time bucket, jobs finished
 * by the class of their last status, jobs claimed, retries (a finished
 * job's attempts - 1, at its finish), the mean number of jobs in flight
 * (claimed, not yet final: the concurrency the run had), and the job
 * durations' distribution. The jobs table holds a job's last run only (its
 * claim and finish times, its last status and attempt count), not each
 * attempt: refusals are the jobs whose last answer was a 429, and the
 * retries of a job are placed at its finish. What it does not hold (the
 * learned rate, each wait, each attempt) comes from the per-second series
 * the runs recorded (series.c), put into the same buckets.
 *
 * Invariants: one pass over the jobs with both times; at most
 * TL_MAX_BUCKETS buckets, each a whole number of seconds wide; the mean in
 * flight is exact (each job's [claim, finish) spread over the buckets it
 * covers, through a difference array); no URL, key or body is read.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "store/internal.h"

#define TL_MAX_BUCKETS 600
#define TL_CLASSES 6
static const char *const tl_class[TL_CLASSES] = {"2xx", "3xx", "4xx", "429", "5xx", "none"};
/* Job durations: buckets up to these bounds in ms, then "more". */
static const int64_t dur_le[] = {10,   25,   50,    100,   250,   500,    1000,  2500,
                                 5000, 10000, 30000, 60000, 300000, 1800000};
#define N_DUR (sizeof dur_le / sizeof dur_le[0])

static int class_of(int64_t status)
{
    if (status == 429)
        return 3;
    if (status >= 200 && status < 300)
        return 0;
    if (status >= 300 && status < 400)
        return 1;
    if (status >= 400 && status < 500)
        return 2;
    if (status >= 500 && status < 600)
        return 4;
    return 5;
}

typedef struct tl {
    int64_t t0, w, n;              /* first ms, bucket width ms, buckets */
    int64_t (*fin)[TL_CLASSES];    /* finished by class */
    int64_t *claimed, *retries;
    double *busy;                  /* job-ms in flight per bucket */
    double *slope;                 /* difference array of whole buckets */
    int64_t dur[N_DUR + 1];
} tl;

/* Job-ms of [s, f) in each bucket it covers. */
static void spread(tl *t, int64_t s, int64_t f)
{
    int64_t a = (s - t->t0) / t->w, b = (f - t->t0) / t->w;
    if (b >= t->n)
        b = t->n - 1;
    if (a == b) {
        t->busy[a] += (double)(f - s);
        return;
    }
    t->busy[a] += (double)(t->t0 + (a + 1) * t->w - s);
    t->busy[b] += (double)(f - (t->t0 + b * t->w));
    if (b > a + 1) { /* whole buckets a+1 .. b-1 */
        t->slope[a + 1] += (double)t->w;
        t->slope[b] -= (double)t->w;
    }
}

int stg__store_timeline_json(stg_store *s, char **out)
{
    *out = NULL;
    sqlite3_stmt *st = NULL;
    int64_t lo = 0, hi = 0;
    int rc = sqlite3_prepare_v2(s->db,
                                "SELECT min(started_at), max(coalesce(finished_at, started_at)) "
                                "FROM jobs WHERE started_at IS NOT NULL",
                                -1, &st, NULL);
    if (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
        lo = sqlite3_column_int64(st, 0);
        hi = sqlite3_column_int64(st, 1);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_OK)
        return stg__store_fail(s, rc, "cannot read the timeline");
    tl t;
    memset(&t, 0, sizeof t);
    t.t0 = lo / 1000 * 1000;
    int64_t span = hi - t.t0 + 1;
    t.w = 1000;
    while (span > t.w * TL_MAX_BUCKETS)
        t.w *= 2;
    t.n = hi > 0 ? span / t.w + 1 : 0;
    size_t n = (size_t)(t.n ? t.n : 1);
    t.fin = calloc(n, sizeof *t.fin);
    t.claimed = calloc(n, sizeof *t.claimed);
    t.retries = calloc(n, sizeof *t.retries);
    t.busy = calloc(n, sizeof *t.busy);
    t.slope = calloc(n + 1, sizeof *t.slope);
    json_t *o = NULL;
    if (!t.fin || !t.claimed || !t.retries || !t.busy || !t.slope)
        goto out;
    rc = sqlite3_prepare_v2(s->db,
                            "SELECT started_at, finished_at, last_status, attempts FROM jobs "
                            "WHERE started_at IS NOT NULL",
                            -1, &st, NULL);
    if (rc != SQLITE_OK) {
        rc = stg__store_fail(s, rc, "cannot read the timeline");
        goto out;
    }
    int64_t now = stg__store_now_ms();
    while (t.n && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t sa = sqlite3_column_int64(st, 0);
        bool done = sqlite3_column_type(st, 1) != SQLITE_NULL;
        int64_t fa = done ? sqlite3_column_int64(st, 1) : (now < hi ? now : hi);
        if (sa < t.t0 || fa < sa)
            continue; /* a clock that went back: not drawn */
        t.claimed[(sa - t.t0) / t.w]++;
        spread(&t, sa, fa);
        if (!done)
            continue;
        int64_t b = (fa - t.t0) / t.w;
        t.fin[b][class_of(sqlite3_column_int64(st, 2))]++;
        int64_t att = sqlite3_column_int64(st, 3);
        t.retries[b] += att > 1 ? att - 1 : 0;
        size_t d = 0;
        while (d < N_DUR && fa - sa > dur_le[d])
            d++;
        t.dur[d]++;
    }
    sqlite3_finalize(st);
    if (t.n && rc != SQLITE_DONE) {
        rc = stg__store_fail(s, rc, "cannot read the timeline");
        goto out;
    }
    rc = STG_OK;
    json_t *fin = json_object(), *claimed = json_array(), *retries = json_array(),
           *inflight = json_array(), *dur = json_array();
    for (int c = 0; c < TL_CLASSES; c++) {
        json_t *a = json_array();
        for (int64_t i = 0; i < t.n; i++)
            json_array_append_new(a, json_integer(t.fin[i][c]));
        json_object_set_new(fin, tl_class[c], a);
    }
    double run = 0;
    for (int64_t i = 0; i < t.n; i++) {
        run += t.slope[i];
        json_array_append_new(claimed, json_integer(t.claimed[i]));
        json_array_append_new(retries, json_integer(t.retries[i]));
        json_array_append_new(inflight, json_real(round((t.busy[i] + run) / t.w * 100) / 100));
    }
    for (size_t d = 0; d <= N_DUR; d++)
        json_array_append_new(dur, json_pack("{s:I,s:I}", "le_ms",
                                             (json_int_t)(d < N_DUR ? dur_le[d] : -1), "n",
                                             (json_int_t)t.dur[d]));
    o = json_pack("{s:I,s:I,s:I,s:o,s:o,s:o,s:o,s:o}", "t0_ms", (json_int_t)t.t0, "bucket_ms",
                  (json_int_t)t.w, "buckets", (json_int_t)t.n, "finished", fin, "claimed",
                  claimed, "retries", retries, "in_flight", inflight, "durations", dur);
    if (o && (rc = stg__store_series_into(s, t.t0, t.w, t.n, o)) != STG_OK)
        goto out; /* the per-second series, when the runs recorded it (series.c) */
    *out = o ? json_dumps(o, JSON_COMPACT) : NULL;
out:
    json_decref(o);
    free(t.fin);
    free(t.claimed);
    free(t.retries);
    free(t.busy);
    free(t.slope);
    if (rc == STG_OK && !*out)
        rc = STG_ENOMEM;
    return rc;
}
