/*
 * The batch report printed, text and JSON, for the database and the queue
 * alike (report.h): the common facts by one code, each source's own
 * sections after them. The database's report is read by src/store/report.c,
 * the queue's by report_queue.c.
 *
 * Invariants: everything shown comes from the model (counts, names, the
 * path or the URL as the caller gave it); the text's common lines and the
 * JSON's common names are written once here, so both sources say the same
 * facts the same way.
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "batch/report.h"

int stg__batch_report_store(stg_store *s, const char *db, stg_batch_report *r)
{
    memset(r, 0, sizeof *r);
    int rc = stg__store_report_get(s, &r->store);
    if (rc != STG_OK)
        return rc;
    const stg_store_report *st = &r->store;
    r->db = db;
    r->fingerprint = st->fingerprint;
    r->total = st->total;
    memcpy(r->n, st->counts, sizeof r->n);
    r->calls = st->calls;
    r->status_429 = st->status_429;
    r->status_503 = st->status_503;
    r->retries = st->retries;
    r->duration = st->duration;
    r->classes = st->classes;
    r->n_classes = st->n_classes;
    return STG_OK;
}

void stg__batch_report_free(stg_batch_report *r)
{
    if (!r)
        return;
    stg__store_report_free(&r->store);
    for (size_t i = 0; i < r->n_workers; i++)
        free(r->workers[i].name);
    free(r->workers);
    free(r->queue_classes);
    memset(r, 0, sizeof *r);
}

int64_t stg__batch_report_ended(const stg_batch_report *r)
{
    return r->n[STG_JOB_DONE] + r->n[STG_JOB_FAILED] + r->n[STG_JOB_DEFERRED] +
           r->n[STG_JOB_REVIEW];
}

static double per_s(int64_t n, int64_t ms)
{
    return ms > 0 ? (double)n * 1000.0 / (double)ms : 0.0;
}

static double share(int64_t part, int64_t whole)
{
    return whole > 0 ? (double)part / (double)whole : 0.0;
}

static void fmt_wall(int64_t ms, char *buf, size_t size)
{
    if (ms < 60000)
        snprintf(buf, size, "%.2f s", (double)ms / 1000.0);
    else
        snprintf(buf, size, "%lld m %02lld s", (long long)(ms / 60000),
                 (long long)((ms / 1000) % 60));
}

/* ---- text -------------------------------------------------------------------- */

/* What each state means to the user, and what to do about it: a database
 * is run again, a queue is worked by workers. */
static const char *const NOTE_DB[STG_JOB_NSTATES] = {
    "not run yet: run the same command again",
    "a run is going on, or was killed: the next run resumes them",
    "",
    "non-retryable answers (e.g. 400/401/403/404): see `stagger batch export`",
    "kept for later: run again with --retry-deferred",
    "may have been sent (not idempotent): check, then run with --retry-review"};
static const char *const NOTE_QUEUE[STG_JOB_NSTATES] = {
    "waiting for a worker",
    "claimed by a worker (a dead worker's are taken over after --claim-idle)",
    "",
    "non-retryable answers (e.g. 400/401/403/404): see `stagger batch export --queue`",
    "kept for later: export them and load them into a new queue",
    "may have been sent (not idempotent): check them (`stagger batch export --queue`)"};

/* The database's sections after the runs line: histograms and reasons. */
static void db_attempts_text(const stg_store_report *r, FILE *out)
{
    fprintf(out, "attempts per job:");
    for (int i = 0; i <= STG_REPORT_HIST; i++) /* every job, the never-tried as 0 */
        if (r->attempts_all[i])
            fprintf(out, "  %d%s: %lld", i, i == STG_REPORT_HIST ? "+" : "",
                    (long long)r->attempts_all[i]);
    fputc('\n', out);
    if (r->n_reasons) { /* why the jobs not done are not: export lists each */
        fprintf(out, "not done, why:");
        for (int i = 0; i < r->n_reasons; i++)
            fprintf(out, "%s %s: %lld", i ? ";" : "", r->reasons[i].why,
                    (long long)r->reasons[i].n);
        if (r->reasons_other)
            fprintf(out, "; other: %lld", (long long)r->reasons_other);
        fputc('\n', out);
    }
}

/* The database's sections after the durations: statuses, waits, rates, input. */
static void db_tail_text(const stg_store_report *r, FILE *out)
{
    if (r->n_statuses) {
        fprintf(out, "last status:");
        for (int i = 0; i < r->n_statuses; i++) {
            if (r->statuses[i].status)
                fprintf(out, "  %d: %lld", r->statuses[i].status, (long long)r->statuses[i].n);
            else
                fprintf(out, "  no answer: %lld", (long long)r->statuses[i].n);
        }
        if (r->statuses_other)
            fprintf(out, "  other: %lld", (long long)r->statuses_other);
        fputc('\n', out);
    }
    if (r->waits_known) {
        char a[32], b[32];
        fmt_wall(r->wait_retry_ms, a, sizeof a);
        fmt_wall(r->wait_limiter_ms, b, sizeof b);
        fprintf(out, "time lost waiting (summed over requests): retry backoff %s, "
                     "client-side limiter %s\n",
                a, b);
    }
    fprintf(out, "effective rate: %.1f jobs/s answered, %.1f calls/s\n",
            stg__store_report_jobs_per_s(r), per_s(r->calls, r->wall_ms));
    if (r->bad_lines)
        fprintf(out, "bad input lines: %lld (skipped; `stagger batch report --bad-lines` "
                     "lists them)\n",
                (long long)r->bad_lines);
    if (r->needs_input)
        fprintf(out, "jobs rebuilt from the input (secrets kept out of the database): %lld\n",
                (long long)r->needs_input);
}

static void workers_text(const stg_batch_report *r, FILE *out)
{
    fprintf(out, "workers: %zu\n", r->n_workers);
    for (size_t i = 0; i < r->n_workers; i++) {
        const stg_batch_report_worker *w = &r->workers[i];
        fprintf(out, "  %s: done %lld, failed %lld, deferred %lld, review %lld\n", w->name,
                (long long)w->n[STG_JOB_DONE], (long long)w->n[STG_JOB_FAILED],
                (long long)w->n[STG_JOB_DEFERRED], (long long)w->n[STG_JOB_REVIEW]);
    }
}

int stg__batch_report_text(const stg_batch_report *r, FILE *out)
{
    static const char *const label[STG_JOB_NSTATES] = {"pending", "in flight", "done",
                                                       "failed",  "deferred",  "review"};
    static const int order[] = {STG_JOB_DONE,   STG_JOB_FAILED,  STG_JOB_DEFERRED,
                                STG_JOB_REVIEW, STG_JOB_PENDING, STG_JOB_INFLIGHT};
    const stg_store_report *db = r->db ? &r->store : NULL;
    const char *const *note = db ? NOTE_DB : NOTE_QUEUE;
    fprintf(out, "%s %s: %lld jobs", db ? "batch" : "queue", db ? r->db : r->queue,
            (long long)r->total);
    if (db && db->input_path)
        fprintf(out, " from %s (%s)", db->input_path, db->format ? db->format : "?");
    else if (!db && r->fingerprint && r->fingerprint[0])
        fprintf(out, " (job set %.12s...)", r->fingerprint);
    fputc('\n', out);
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        int st = order[i];
        fprintf(out, "  %-10s %8lld", label[st], (long long)r->n[st]);
        if (r->n[st] && note[st][0])
            fprintf(out, "   %s", note[st]);
        fputc('\n', out);
    }
    if (db) {
        char wall[32];
        fmt_wall(db->wall_ms, wall, sizeof wall);
        fprintf(out, "runs %lld, wall time %s", (long long)db->runs, wall);
        if (db->runs > 1) {
            char last[32];
            fmt_wall(db->last.wall_ms, last, sizeof last);
            fprintf(out, " (last run %s)", last);
        }
        if (db->learned_concurrency > 0)
            fprintf(out, "; learned concurrency %d", db->learned_concurrency);
        fputc('\n', out);
    }
    fprintf(out, "calls %lld: 429 x %lld (%.1f%%), 503 x %lld (%.1f%%)", (long long)r->calls,
            (long long)r->status_429, 100.0 * share(r->status_429, r->calls),
            (long long)r->status_503, 100.0 * share(r->status_503, r->calls));
    if (r->retries >= 0)
        fprintf(out, "; retries %lld", (long long)r->retries);
    fputc('\n', out);
    if (db)
        db_attempts_text(db, out);
    if (r->duration.n) {
        char p[4][32];
        fmt_wall(r->duration.p50, p[0], sizeof p[0]);
        fmt_wall(r->duration.p90, p[1], sizeof p[1]);
        fmt_wall(r->duration.p99, p[2], sizeof p[2]);
        fmt_wall(r->duration.max, p[3], sizeof p[3]);
        fprintf(out, "job duration (%s, waits included): p50 %s, p90 %s, p99 %s, max %s "
                     "(%lld jobs)\n",
                db ? "last run" : "claim to end", p[0], p[1], p[2], p[3],
                (long long)r->duration.n);
    }
    if (db)
        db_tail_text(db, out);
    else
        workers_text(r, out);
    stg__report_classes_print(r->classes, r->n_classes, out); /* store/report_class.c */
    return ferror(out) ? STG_EIO : STG_OK;
}

/* ---- JSON -------------------------------------------------------------------- */

/* A histogram's buckets as {"0": n, ..., "15+": n}, the empty ones left out;
 * the last bucket, last, is "N+". */
static json_t *hist_json(const int64_t *v, int n, int last)
{
    json_t *o = json_object();
    for (int i = 0; o && i < n; i++) {
        if (!v[i])
            continue;
        char k[16];
        snprintf(k, sizeof k, "%d%s", i, i == last ? "+" : "");
        json_object_set_new(o, k, json_integer(v[i]));
    }
    return o;
}

/* The database's own members into o. */
static int db_json(const stg_store_report *r, const char *db, json_t *o)
{
    json_t *whys = json_object(), *codes = json_object();
    for (int i = 0; whys && i < r->n_reasons; i++)
        json_object_set_new(whys, r->reasons[i].why, json_integer(r->reasons[i].n));
    if (whys && r->reasons_other)
        json_object_set_new(whys, "other", json_integer(r->reasons_other));
    for (int i = 0; codes && i < r->n_statuses; i++) {
        char k[16];
        snprintf(k, sizeof k, "%d", r->statuses[i].status);
        json_object_set_new(codes, r->statuses[i].status ? k : "none",
                            json_integer(r->statuses[i].n));
    }
    if (codes && r->statuses_other)
        json_object_set_new(codes, "other", json_integer(r->statuses_other));
    json_t *wait = r->waits_known ? json_pack("{s:I,s:I}", "retry_ms",
                                              (json_int_t)r->wait_retry_ms, "limiter_ms",
                                              (json_int_t)r->wait_limiter_ms)
                                  : json_null();
    json_t *last = json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "started_ms",
                             (json_int_t)r->last.started_ms, "wall_ms",
                             (json_int_t)r->last.wall_ms, "calls", (json_int_t)r->last.calls,
                             "retries", (json_int_t)r->last.retries, "status_429",
                             (json_int_t)r->last.status_429, "status_503",
                             (json_int_t)r->last.status_503, "finished",
                             (json_int_t)r->last.finished);
    if (last)
        json_object_set_new(last, "exit_code",
                            r->last.exit_code >= 0 ? json_integer(r->last.exit_code)
                                                   : json_null());
    json_t *own = json_pack(
        "{s:s,s:s?,s:s?,s:I,s:I,s:o*,s:f,s:f,s:I,s:I,s:o*,s:o*,s:o*,s:o*,s:o*,s:o*}", "db",
        db, "input", r->input_path, "format", r->format, "runs", (json_int_t)r->runs, "wall_ms",
        (json_int_t)r->wall_ms, "retries_histogram",
        hist_json(r->hist, STG_REPORT_HIST, STG_REPORT_HIST - 1), "jobs_per_s",
        stg__store_report_jobs_per_s(r), "calls_per_s", per_s(r->calls, r->wall_ms),
        "bad_lines", (json_int_t)r->bad_lines, "needs_input", (json_int_t)r->needs_input,
        "last_run", last, "learned_concurrency",
        r->learned_concurrency > 0 ? json_integer(r->learned_concurrency) : json_null(),
        "attempts_histogram", hist_json(r->attempts_all, STG_REPORT_HIST + 1, STG_REPORT_HIST),
        "not_done_why", whys, "status_codes", codes, "waiting", wait);
    if (!own)
        return STG_ENOMEM;
    int rc = json_object_update(o, own) == 0 ? STG_OK : STG_ENOMEM;
    json_decref(own);
    return rc;
}

/* The queue's own members into o. */
static int queue_json(const stg_batch_report *r, json_t *o)
{
    json_t *ws = json_array();
    for (size_t i = 0; ws && i < r->n_workers; i++) {
        const stg_batch_report_worker *w = &r->workers[i];
        json_t *x = json_object();
        json_object_set_new(x, "name", json_string(w->name));
        for (int s = STG_JOB_DONE; s < STG_JOB_NSTATES; s++)
            json_object_set_new(x, stg__job_state_name((stg_job_state)s), json_integer(w->n[s]));
        json_object_set_new(x, "seen_ms", json_integer(w->seen_ms));
        json_array_append_new(ws, x);
    }
    if (!ws || json_object_set_new(o, "queue", json_string(r->queue)) ||
        json_object_set_new(o, "workers", ws))
        return STG_ENOMEM;
    return STG_OK;
}

int stg__batch_report_json(const stg_batch_report *r, FILE *out)
{
    json_t *states = json_object();
    for (int i = 0; states && i < STG_JOB_NSTATES; i++)
        json_object_set_new(states, stg__job_state_name((stg_job_state)i), json_integer(r->n[i]));
    json_t *dur = r->duration.n
                      ? json_pack("{s:I,s:I,s:I,s:I,s:I}", "jobs", (json_int_t)r->duration.n,
                                  "p50", (json_int_t)r->duration.p50, "p90",
                                  (json_int_t)r->duration.p90, "p99",
                                  (json_int_t)r->duration.p99, "max",
                                  (json_int_t)r->duration.max)
                      : json_null();
    json_t *o = json_pack("{s:s?,s:I,s:I,s:o*,s:I,s:I,s:I,s:f,s:o*,s:o*,s:o*}", "fingerprint",
                          r->fingerprint && r->fingerprint[0] ? r->fingerprint : NULL, "jobs",
                          (json_int_t)r->total, "ended", (json_int_t)stg__batch_report_ended(r),
                          "states", states, "calls", (json_int_t)r->calls, "status_429",
                          (json_int_t)r->status_429, "status_503", (json_int_t)r->status_503,
                          "share_429", share(r->status_429, r->calls), "duration_ms", dur,
                          "classes", stg__report_classes_json(r->classes, r->n_classes),
                          "retries", r->retries >= 0 ? json_integer(r->retries) : NULL);
    int rc = o ? STG_OK : STG_ENOMEM;
    if (rc == STG_OK)
        rc = r->db ? db_json(&r->store, r->db, o) : queue_json(r, o);
    if (rc == STG_OK)
        rc = json_dumpf(o, out, JSON_COMPACT) == 0 && fputc('\n', out) != EOF ? STG_OK : STG_EIO;
    json_decref(o);
    return rc;
}
