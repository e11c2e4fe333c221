/*
 * Every state change of a job, each in one transaction (see store.h for the
 * transition table), or, in a group (stg__store_group), in the group's. A change that does not apply (a job not in the state
 * it should be in) writes nothing and returns STG_ESTATE, so a bug in the
 * runner can never move a job twice. The import, the one change that makes
 * jobs, is import.c.
 *
 * Recovery (stg__store_recover) is one UPDATE: the jobs a kill left inflight
 * go to review (not replay-safe and marked sent) or back to pending, in one
 * statement and one transaction, as the two UPDATEs of before did in one
 * transaction: a kill during it leaves all of them inflight, to be
 * recovered by the next open, never some moved twice. The counts by state
 * are read, never written, so how they are counted (in C, from one read of
 * the state column) changes nothing on disk.
 *
 * The moves asserted where they are made: MOVES below is store.h's table
 * as data, each change asserts its move is in it, and in Debug builds
 * reads back, inside its transaction, that the rows it moved are where it
 * says (assert_job_state, assert_none_in; SQLite's assert_pager_state is
 * the model). The checks only read; Release (NDEBUG) compiles them out, and
 * the SQL is the same either way.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "store/internal.h"
#include "util/assert.h"

static const char *const state_names[STG_JOB_NSTATES] = {"pending", "inflight", "done",
                                                         "failed",  "deferred", "review"};

const char *stg__job_state_name(stg_job_state s)
{
    return (unsigned)s < STG_JOB_NSTATES ? state_names[s] : "unknown";
}

int stg__job_state_parse(const char *name, stg_job_state *out)
{
    for (int i = 0; i < STG_JOB_NSTATES; i++) {
        if (!strcmp(name, state_names[i])) {
            *out = (stg_job_state)i;
            return STG_OK;
        }
    }
    if (!strcmp(name, "in-flight") || !strcmp(name, "in_flight")) {
        *out = STG_JOB_INFLIGHT;
        return STG_OK;
    }
    return STG_EPARSE;
}

int stg__store_has_jobs(stg_store *s, bool *has)
{
    char *fp = NULL;
    int err = stg__store_meta_get(s, "fingerprint", &fp);
    *has = fp != NULL;
    free(fp);
    return err;
}

/* ---- the moves, asserted ---------------------------------------------------- */

#define STATE_BIT(st) (1u << (st))
/* MOVES[from]: the states a job in from may go to (store.h's table). */
static const unsigned MOVES[STG_JOB_NSTATES] = {
    [STG_JOB_PENDING] = STATE_BIT(STG_JOB_INFLIGHT), /* claim */
    [STG_JOB_INFLIGHT] = STATE_BIT(STG_JOB_DONE) | STATE_BIT(STG_JOB_FAILED) |
                         STATE_BIT(STG_JOB_DEFERRED) | STATE_BIT(STG_JOB_REVIEW) |
                         STATE_BIT(STG_JOB_PENDING), /* finish, recover, unclaim */
    [STG_JOB_DEFERRED] = STATE_BIT(STG_JOB_PENDING), /* requeue */
    [STG_JOB_REVIEW] = STATE_BIT(STG_JOB_PENDING),   /* requeue */
};

static bool move_legal(stg_job_state from, stg_job_state to)
{
    return (unsigned)from < STG_JOB_NSTATES && (unsigned)to < STG_JOB_NSTATES &&
           (MOVES[from] & STATE_BIT(to)) != 0;
}

/* Job id is in state want now (a read in the change's own transaction). */
static void assert_job_state(stg_store *s, int64_t id, stg_job_state want)
{
    if (!STG_ASSERT_ENABLED)
        return;
    stg_job_state got = STG_JOB_NSTATES;
    int err = stg__store_job_state(s, id, &got);
    STG_ASSERT(err == STG_OK && got == want);
}

/* No job is in state st now (after a bulk move out of it). */
static void assert_none_in(stg_store *s, stg_job_state st)
{
    if (!STG_ASSERT_ENABLED)
        return;
    int64_t counts[STG_JOB_NSTATES];
    int err = stg__store_counts(s, counts);
    STG_ASSERT(err == STG_OK && counts[st] == 0);
}

/* ---- bulk moves -------------------------------------------------------------- */

/* Run one UPDATE with ?1 = now; *changes gets the rows changed. */
static int exec_update(stg_store *s, const char *sql, int64_t now_ms, int *changes)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, now_ms);
        rc = sqlite3_step(st);
        if (rc == SQLITE_DONE) {
            rc = SQLITE_OK;
            if (changes)
                *changes = sqlite3_changes(s->db);
        }
    }
    sqlite3_finalize(st);
    return rc;
}

/* One statement, one read of the table (it was two UPDATEs, each a full
 * scan: no index holds the inflight jobs, on purpose, as a claim and an
 * outcome would then write one more b-tree). The SET expressions all read
 * the row as it was, so `sent` in the CASEs is the flag before the reset. */
int stg__store_recover(stg_store *s, int64_t now_ms, int *to_pending, int *to_review)
{
    STG_ASSERT(move_legal(STG_JOB_INFLIGHT, STG_JOB_PENDING) &&
               move_legal(STG_JOB_INFLIGHT, STG_JOB_REVIEW));
    int p = 0, r = 0;
    int err = stg__store_begin(s);
    if (err)
        return err;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(
        s->db,
        "UPDATE jobs SET "
        "state = CASE WHEN replay_safe = 0 AND sent = 1 THEN 'review' ELSE 'pending' END, "
        "reason = CASE WHEN replay_safe = 0 AND sent = 1 THEN 'interrupted' ELSE reason END, "
        "last_error = CASE WHEN replay_safe = 0 AND sent = 1 THEN 'in flight when a run "
        "stopped; not idempotent and may have been sent: check, then run with "
        "--retry-review' ELSE last_error END, "
        "finished_at = CASE WHEN replay_safe = 0 AND sent = 1 THEN ?1 ELSE finished_at END, "
        "sent = 0, updated_at = ?1 "
        "WHERE state = 'inflight' RETURNING state = 'review'",
        -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, now_ms);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            if (sqlite3_column_int(st, 0))
                r++;
            else
                p++;
        }
        if (rc == SQLITE_DONE)
            rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_OK)
        return stg__store_fail_rollback(s, rc, "cannot recover the jobs in flight");
    assert_none_in(s, STG_JOB_INFLIGHT);
    if ((err = stg__store_commit(s)) != STG_OK)
        return err;
    if (to_pending)
        *to_pending = p;
    if (to_review)
        *to_review = r;
    return STG_OK;
}

int stg__store_requeue(stg_store *s, stg_job_state from, int64_t now_ms, int *n)
{
    const char *sql;
    if (from == STG_JOB_DEFERRED)
        sql = "UPDATE jobs SET state = 'pending', updated_at = ?1 WHERE state = 'deferred'";
    else if (from == STG_JOB_REVIEW)
        sql = "UPDATE jobs SET state = 'pending', updated_at = ?1 WHERE state = 'review'";
    else
        return stg__store_error(s, STG_EINVAL, "only deferred and review jobs are requeued");
    STG_ASSERT(move_legal(from, STG_JOB_PENDING));
    int changes = 0;
    int rc = exec_update(s, sql, now_ms, &changes); /* one statement: one transaction */
    if (rc != SQLITE_OK)
        return stg__store_fail(s, rc, "cannot requeue jobs");
    assert_none_in(s, from);
    if (n)
        *n = changes;
    return STG_OK;
}

/* ---- claim ------------------------------------------------------------------ */

void stg__job_clear(stg_job *j)
{
    if (!j)
        return;
    free(j->key);
    free(j->method);
    free(j->url);
    free(j->url_redacted);
    if (j->headers)
        for (char **h = j->headers; *h; h++)
            free(*h);
    free(j->headers);
    free(j->body);
    free(j->idempotency_key);
    memset(j, 0, sizeof *j);
}

static char *col_strdup(sqlite3_stmt *st, int i, bool *nomem)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    if (!t)
        return NULL;
    char *d = strdup((const char *)t);
    if (!d)
        *nomem = true;
    return d;
}

static char **parse_headers(const char *text, bool *nomem)
{
    json_t *a = text ? json_loads(text, 0, NULL) : NULL;
    size_t n = json_is_array(a) ? json_array_size(a) : 0;
    char **hs = calloc(n + 1, sizeof *hs);
    if (!hs) {
        *nomem = true;
        json_decref(a);
        return NULL;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const char *h = json_string_value(json_array_get(a, i));
        if (h && !(hs[k++] = strdup(h)))
            *nomem = true;
    }
    json_decref(a);
    return hs;
}

static int by_id(const void *a, const void *b)
{
    int64_t x = ((const stg_job *)a)->id, y = ((const stg_job *)b)->id;
    return (x > y) - (x < y);
}

/* One statement marks the lowest pending ids inflight and returns them
 * (RETURNING: the rows come in no set order, so they are sorted after): a
 * claim of n jobs was a SELECT and n UPDATEs, each its own VDBE run. */
int stg__store_claim(stg_store *s, int max, int64_t run_id, int64_t now_ms, stg_job *out,
                    int *n)
{
    *n = 0;
    if (max <= 0)
        return STG_OK;
    STG_ASSERT(move_legal(STG_JOB_PENDING, STG_JOB_INFLIGHT));
    int rc = stg__store_prepare(
        s, &s->st_claim,
        "UPDATE jobs SET state = 'inflight', sent = 0, runs = runs + 1, run_id = ?2, "
        "started_at = ?3, updated_at = ?3 "
        "WHERE id IN (SELECT id FROM jobs WHERE state = 'pending' ORDER BY id LIMIT ?1) "
        "RETURNING id, key, line, method, url, url_redacted, headers, body, idempotency_key, "
        "needs_input, replay_safe, attempts");
    if (rc != SQLITE_OK)
        return stg__store_fail(s, rc, "cannot prepare the claim");
    int err = stg__store_begin(s);
    if (err)
        return err;
    sqlite3_stmt *sel = s->st_claim;
    bool nomem = false;
    int got = 0;
    sqlite3_bind_int(sel, 1, max);
    sqlite3_bind_int64(sel, 2, run_id);
    sqlite3_bind_int64(sel, 3, now_ms);
    while ((rc = sqlite3_step(sel)) == SQLITE_ROW) {
        if (got >= max) {
            rc = SQLITE_INTERNAL; /* the LIMIT holds: cannot happen */
            break;
        }
        stg_job *j = &out[got++];
        memset(j, 0, sizeof *j);
        j->id = sqlite3_column_int64(sel, 0);
        j->key = col_strdup(sel, 1, &nomem);
        j->line = (long)sqlite3_column_int64(sel, 2);
        j->method = col_strdup(sel, 3, &nomem);
        j->url = col_strdup(sel, 4, &nomem);
        j->url_redacted = col_strdup(sel, 5, &nomem);
        j->headers = parse_headers((const char *)sqlite3_column_text(sel, 6), &nomem);
        if (sqlite3_column_type(sel, 7) != SQLITE_NULL) {
            int len = sqlite3_column_bytes(sel, 7);
            const void *b = sqlite3_column_blob(sel, 7);
            j->body = malloc((size_t)len + 1);
            if (j->body) {
                if (len)
                    memcpy(j->body, b, (size_t)len);
                j->body[len] = '\0';
                j->body_len = (size_t)len;
            } else {
                nomem = true;
            }
        }
        j->idempotency_key = col_strdup(sel, 8, &nomem);
        j->needs_input = sqlite3_column_int(sel, 9) != 0;
        j->replay_safe = sqlite3_column_int(sel, 10) != 0;
        j->attempts = sqlite3_column_int(sel, 11);
    }
    sqlite3_reset(sel);
    if (rc == SQLITE_DONE)
        rc = SQLITE_OK;
    if (rc == SQLITE_OK && nomem)
        rc = SQLITE_NOMEM;
    for (int i = 0; rc == SQLITE_OK && i < got; i++)
        assert_job_state(s, out[i].id, STG_JOB_INFLIGHT);
    if (rc == SQLITE_OK && (err = stg__store_commit(s)) == STG_OK) {
        qsort(out, (size_t)got, sizeof *out, by_id);
        *n = got;
        return STG_OK;
    }
    if (rc != SQLITE_OK)
        err = stg__store_fail_rollback(s, rc, "cannot claim jobs");
    for (int i = 0; i < got; i++)
        stg__job_clear(&out[i]);
    return err;
}

/* One statement: the ids as a JSON array (json_each), so a stop that
 * gives back what the runner claimed ahead is one UPDATE and one
 * transaction, like the claim. runs goes back down; run_id and started_at
 * go back to NULL when the claim was the job's first (RETURNING gives the
 * new row only, so an older run's values are not known here: they are read
 * for finished jobs only, and the next claim overwrites them). Only a job
 * of this run, inflight and never sent, moves. */
int stg__store_unclaim(stg_store *s, const stg_job *jobs, int n, int64_t run_id, int64_t now_ms,
                      int *moved)
{
    if (moved)
        *moved = 0;
    if (n <= 0)
        return STG_OK;
    STG_ASSERT(move_legal(STG_JOB_INFLIGHT, STG_JOB_PENDING));
    size_t cap = (size_t)n * 21 + 3, len = 0;
    char *ids = malloc(cap);
    if (!ids)
        return stg__store_error(s, STG_ENOMEM, "out of memory");
    ids[len++] = '[';
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(ids + len, cap - len, "%s%lld", i ? "," : "",
                                (long long)jobs[i].id);
    ids[len++] = ']';
    ids[len] = '\0';
    int err = stg__store_begin(s);
    if (err) {
        free(ids);
        return err;
    }
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(
        s->db,
        "UPDATE jobs SET state = 'pending', runs = runs - 1, "
        "run_id = CASE WHEN runs = 1 THEN NULL ELSE run_id END, "
        "started_at = CASE WHEN runs = 1 THEN NULL ELSE started_at END, updated_at = ?1 "
        "WHERE id IN (SELECT value FROM json_each(?2)) AND state = 'inflight' AND sent = 0 "
        "AND run_id = ?3",
        -1, &st, NULL);
    int changes = 0;
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, now_ms);
        sqlite3_bind_text(st, 2, ids, (int)len, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, run_id);
        rc = sqlite3_step(st);
        changes = sqlite3_changes(s->db);
    }
    sqlite3_finalize(st);
    free(ids);
    if (rc != SQLITE_DONE)
        return stg__store_fail_rollback(s, rc, "cannot give claimed jobs back");
    if (changes != n) {
        stg__store_rollback(s); /* none moved: the caller's counts stay right */
        return stg__store_error(s, STG_ESTATE, "%d of %d claimed jobs are not inflight",
                                n - changes, n);
    }
    for (int i = 0; i < n; i++)
        assert_job_state(s, jobs[i].id, STG_JOB_PENDING);
    if ((err = stg__store_commit(s)) != STG_OK)
        return err;
    if (moved)
        *moved = changes;
    return STG_OK;
}

/* Add to run run_id's counters (inside the caller's transaction: written
 * when it commits, schema.c). */
static int add_run_counts(stg_store *s, int64_t run_id, int calls, int retries, int n429,
                          int n503, int finished)
{
    return stg__store_run_add(s, run_id, calls, retries, n429, n503, finished);
}

int stg__store_mark_sent(stg_store *s, int64_t id, int64_t run_id)
{
    int rc = stg__store_prepare(s, &s->st_sent,
                                "UPDATE jobs SET sent = 1, attempts = attempts + 1 "
                                "WHERE id = ?1 AND state = 'inflight'");
    if (rc != SQLITE_OK)
        return stg__store_fail(s, rc, "cannot record a request as sent");
    int err = stg__store_begin(s);
    if (err)
        return err;
    sqlite3_bind_int64(s->st_sent, 1, id);
    rc = sqlite3_step(s->st_sent);
    sqlite3_reset(s->st_sent);
    if (rc == SQLITE_DONE && sqlite3_changes(s->db) != 1) {
        stg__store_undo_nothing(s);
        return stg__store_error(s, STG_ESTATE, "job %lld is not in flight", (long long)id);
    }
    if (rc == SQLITE_DONE) {
        assert_job_state(s, id, STG_JOB_INFLIGHT); /* sent is no move */
        rc = add_run_counts(s, run_id, 1, 0, 0, 0, 0);
    }
    if (rc != SQLITE_DONE)
        return stg__store_fail_rollback(s, rc, "cannot record a request as sent");
    /* Durable before the request leaves, in a group too. */
    err = stg__store_commit(s);
    return err == STG_OK ? stg__store_flush(s) : err;
}

/* ---- finish ------------------------------------------------------------------ */

/* Copy len bytes of fd (from offset 0) into the zeroblob of job id's
 * response row, 64 KiB at a time. SQLITE_DONE, or the error. */
static int blob_from_fd(sqlite3 *db, int64_t id, int fd, size_t len)
{
    sqlite3_blob *blob = NULL;
    int rc = sqlite3_blob_open(db, "main", "responses", "body", id, 1, &blob);
    char buf[65536];
    for (size_t off = 0; rc == SQLITE_OK && off < len;) {
        size_t want = len - off < sizeof buf ? len - off : sizeof buf;
        ssize_t got = pread(fd, buf, want, (off_t)off);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            rc = SQLITE_IOERR; /* the file is shorter than it said, or unreadable */
            break;
        }
        rc = sqlite3_blob_write(blob, buf, (int)got, (int)off);
        off += (size_t)got;
    }
    int crc = sqlite3_blob_close(blob);
    if (rc == SQLITE_OK)
        rc = crc;
    return rc == SQLITE_OK ? SQLITE_DONE : rc;
}

int stg__store_finish(stg_store *s, int64_t id, const stg_job_outcome *o, int64_t now_ms)
{
    if (!o || (unsigned)o->state >= STG_JOB_NSTATES || o->state == STG_JOB_INFLIGHT)
        return stg__store_error(s, STG_EINVAL, "bad outcome for job %lld", (long long)id);
    STG_ASSERT(move_legal(STG_JOB_INFLIGHT, o->state));
    int rc = stg__store_prepare(
        s, &s->st_finish,
        "UPDATE jobs SET state = ?2, sent = 0, attempts = attempts + ?3, "
        "last_status = coalesce(?4, last_status), last_error = ?5, reason = ?6, "
        "response_file = coalesce(?7, response_file), finished_at = ?8, updated_at = ?9 "
        "WHERE id = ?1 AND state = 'inflight'");
    if (rc == SQLITE_OK)
        rc = stg__store_prepare(s, &s->st_response_put,
                                "INSERT OR REPLACE INTO responses(job_id, body) VALUES(?1, ?2)");
    if (rc != SQLITE_OK)
        return stg__store_fail(s, rc, "cannot prepare the finish");
    int err = stg__store_begin(s);
    if (err)
        return err;
    sqlite3_stmt *st = s->st_finish;
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_text(st, 2, stg__job_state_name(o->state), -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 3, o->attempts > 0 ? o->attempts : 0);
    if (o->status > 0)
        sqlite3_bind_int(st, 4, o->status);
    else
        sqlite3_bind_null(st, 4);
    /* A NULL text binds SQL NULL (sqlite3_bind_text's rule). */
    sqlite3_bind_text(st, 5, o->error, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 6, o->reason, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 7, o->response_file, -1, SQLITE_STATIC);
    if (o->state == STG_JOB_PENDING)
        sqlite3_bind_null(st, 8);
    else
        sqlite3_bind_int64(st, 8, now_ms);
    sqlite3_bind_int64(st, 9, now_ms);
    rc = sqlite3_step(st);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    if (rc == SQLITE_DONE && sqlite3_changes(s->db) != 1) {
        stg__store_undo_nothing(s);
        return stg__store_error(s, STG_ESTATE, "job %lld is not in flight", (long long)id);
    }
    if (rc == SQLITE_DONE)
        assert_job_state(s, id, o->state);
    if (rc == SQLITE_DONE && (o->body || o->body_in_fd)) {
        sqlite3_stmt *put = s->st_response_put;
        sqlite3_bind_int64(put, 1, id);
        if (o->body_in_fd)
            sqlite3_bind_zeroblob64(put, 2, o->body_len);
        else
            sqlite3_bind_blob64(put, 2, o->body, o->body_len, SQLITE_STATIC);
        rc = sqlite3_step(put);
        sqlite3_reset(put);
        sqlite3_clear_bindings(put);
        if (rc == SQLITE_DONE && o->body_in_fd && o->body_len > INT_MAX)
            rc = SQLITE_TOOBIG; /* blob offsets are ints */
        else if (rc == SQLITE_DONE && o->body_in_fd)
            rc = blob_from_fd(s->db, id, o->body_fd, o->body_len);
    }
    if (rc == SQLITE_DONE)
        rc = add_run_counts(s, o->run_id, o->attempts > 0 ? o->attempts : 0,
                            o->retries > 0 ? o->retries : 0, o->status_429, o->status_503,
                            o->state != STG_JOB_PENDING);
    if (rc != SQLITE_DONE)
        return stg__store_fail_rollback(s, rc, "cannot record a job's outcome");
    return stg__store_commit(s);
}

/* ---- queries ------------------------------------------------------------------ */

/* Counted here from one read of the state column: a GROUP BY state (no
 * index holds every state) sorted every row in SQLite's sorter first, and
 * a run counts twice (start and end): 12 ms of a 50 000-job run each. */
int stg__store_counts(stg_store *s, int64_t counts[STG_JOB_NSTATES])
{
    memset(counts, 0, sizeof(int64_t) * STG_JOB_NSTATES);
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, "SELECT state FROM jobs", -1, &st, NULL);
    bool unknown = false;
    int64_t sum = 0;
    while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        stg_job_state js;
        const char *name = (const char *)sqlite3_column_text(st, 0);
        if (name && stg__job_state_parse(name, &js) == STG_OK)
            counts[js]++;
        else
            unknown = true;
        sum++;
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return stg__store_fail(s, rc, "cannot count the jobs");
    return stg__store_check_rows(s, sum, unknown);
}

int stg__store_count_needs_input(stg_store *s, unsigned state_mask, int64_t *n)
{
    *n = 0;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(
        s->db, "SELECT state, count(*) FROM jobs WHERE needs_input = 1 GROUP BY state", -1,
        &st, NULL);
    while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        stg_job_state js;
        const char *name = (const char *)sqlite3_column_text(st, 0);
        if (name && stg__job_state_parse(name, &js) == STG_OK && (state_mask & (1u << js)))
            *n += sqlite3_column_int64(st, 1);
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return stg__store_fail(s, rc, "cannot count the jobs");
    return STG_OK;
}

int stg__store_job_state(stg_store *s, int64_t id, stg_job_state *out)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, "SELECT state FROM jobs WHERE id = ?1", -1, &st, NULL);
    int err = STG_OK;
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, id);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            const char *name = (const char *)sqlite3_column_text(st, 0);
            err = name && stg__job_state_parse(name, out) == STG_OK
                      ? STG_OK
                      : stg__store_error(s, STG_EDB, "job %lld: bad state", (long long)id);
        } else if (rc == SQLITE_DONE) {
            err = stg__store_error(s, STG_ENOTFOUND, "no job %lld", (long long)id);
        } else {
            err = stg__store_fail(s, rc, "cannot read a job");
        }
    } else {
        err = stg__store_fail(s, rc, "cannot read a job");
    }
    sqlite3_finalize(st);
    return err;
}

/* ---- runs ------------------------------------------------------------------------ */

int stg__store_run_begin(stg_store *s, int64_t now_ms, int64_t *run_id)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, "INSERT INTO runs(started_at) VALUES(?1)", -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, now_ms);
        rc = sqlite3_step(st);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return stg__store_fail(s, rc, "cannot record the run");
    *run_id = sqlite3_last_insert_rowid(s->db);
    return STG_OK;
}

int stg__store_run_update(stg_store *s, int64_t run_id, const stg_run_stats *r)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, "UPDATE runs SET wall_ms = ?2, exit_code = ?3 WHERE id = ?1",
                                -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, run_id);
        sqlite3_bind_int64(st, 2, r->wall_ms);
        if (r->exit_code >= 0)
            sqlite3_bind_int(st, 3, r->exit_code);
        else
            sqlite3_bind_null(st, 3);
        rc = sqlite3_step(st);
    }
    sqlite3_finalize(st);
    if (rc == SQLITE_DONE && r->concurrency > 0) {
        st = NULL;
        rc = sqlite3_prepare_v2(s->db,
                                "INSERT OR REPLACE INTO meta(key, value) "
                                "VALUES('learned_concurrency', ?1)",
                                -1, &st, NULL);
        if (rc == SQLITE_OK) {
            sqlite3_bind_int(st, 1, r->concurrency);
            rc = sqlite3_step(st);
        }
        sqlite3_finalize(st);
    }
    if (rc != SQLITE_DONE)
        return stg__store_fail(s, rc, "cannot record the run");
    return STG_OK;
}
