/*
 * Export of the SQLite store: one row per job, by id, through the one row
 * writer (export_row.c: the formats, shared with the queue's export).
 *
 * Columns: id (the job's key), job (its number), line, state, status (last
 * HTTP status, null/empty when none), attempts (over all runs), error,
 * reason, method, url, file (under --out), finished_at (ISO 8601 UTC),
 * duration_ms (the job's last run: claimed to final state; null while
 * unfinished); with bodies, the stored response body: JSON "body" when it
 * is UTF-8 text, else "body_base64"; CSV "body", text as is, other bytes as
 * "base64:...". JSON is one array (a row an element, a line each), JSONL a
 * row a line, CSV RFC 4180 with a header line.
 *
 * The url is the one the user gave (stg__store_url_shown): a stored URL is
 * secret-free by the store's invariant and shown as is (bytes outside
 * printable ASCII percent-encoded); a withheld one (url NULL) is shown
 * from job_urls, written at import with no userinfo and its secret
 * values REDACTED; a database without that table falls back to the fully
 * redacted url_redacted. Never read: headers, the request body.
 */
#include <stdlib.h>
#include <string.h>

#include "store/export_row.h"
#include "store/internal.h"

static const char *text(sqlite3_stmt *st, int col)
{
    return (const char *)sqlite3_column_text(st, col);
}

/* The url column's text (see the top): into buf, or NULL. */
static const char *shown_url(sqlite3_stmt *st, char *buf, size_t size)
{
    const char *shown = text(st, 13), *url = text(st, 14);
    if (shown)
        return shown;
    if (url) {
        stg__store_url_shown(url, buf, size);
        return buf;
    }
    return text(st, 9);
}

int stg__store_export(stg_store *s, const stg_export_options *opt, FILE *out)
{
    stg_export_options o = {0};
    if (opt)
        o = *opt;
    bool urls = stg__store_has_table(s, "job_urls");
    char sql[768];
    snprintf(sql, sizeof sql,
             "SELECT j.id, j.key, j.line, j.state, j.last_status, j.attempts, j.last_error, "
             "j.reason, j.method, j.url_redacted, j.response_file, j.finished_at, %s, %s, "
             "j.url, CASE WHEN j.finished_at IS NOT NULL AND j.started_at IS NOT NULL "
             "THEN max(0, j.finished_at - j.started_at) END "
             "FROM jobs j%s%s ORDER BY j.id",
             o.bodies ? "r.body" : "NULL", urls ? "u.shown" : "NULL",
             o.bodies ? " LEFT JOIN responses r ON r.job_id = j.id" : "",
             urls ? " LEFT JOIN job_urls u ON u.job_id = j.id" : "");
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK)
        return stg__store_fail(s, rc, "cannot read the jobs");
    stg__exporter x = {.out = out, .format = o.format, .bodies = o.bodies};
    char *ubuf = malloc(16384);
    if (!ubuf) {
        sqlite3_finalize(st);
        return stg__store_error(s, STG_ENOMEM, "out of memory");
    }
    int err = stg__export_begin(&x);
    while (!err && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        stg_job_state js;
        const char *state = text(st, 3);
        if (o.state_mask && (!state || stg__job_state_parse(state, &js) != STG_OK ||
                             !(o.state_mask & (1u << js))))
            continue;
        stg__export_row r = {
            .key = text(st, 1),
            .job = sqlite3_column_int64(st, 0),
            .has_line = sqlite3_column_type(st, 2) != SQLITE_NULL,
            .line = sqlite3_column_int64(st, 2),
            .state = state,
            .has_status = sqlite3_column_type(st, 4) != SQLITE_NULL,
            .status = sqlite3_column_int64(st, 4),
            .attempts = sqlite3_column_int64(st, 5),
            .error = text(st, 6),
            .reason = text(st, 7),
            .method = text(st, 8),
            .url = shown_url(st, ubuf, 16384),
            .file = text(st, 10),
            .has_finished = sqlite3_column_type(st, 11) != SQLITE_NULL,
            .finished_ms = sqlite3_column_int64(st, 11),
            .has_duration = sqlite3_column_type(st, 15) != SQLITE_NULL,
            .duration_ms = sqlite3_column_int64(st, 15),
            .has_body = o.bodies && sqlite3_column_type(st, 12) != SQLITE_NULL,
        };
        if (r.has_body) {
            r.body = sqlite3_column_blob(st, 12);
            r.body_len = (size_t)sqlite3_column_bytes(st, 12);
        }
        err = stg__export_write(&x, &r);
    }
    free(ubuf);
    if (!err && rc != SQLITE_DONE)
        err = stg__store_fail(s, rc, "cannot read the jobs");
    sqlite3_finalize(st);
    if (!err)
        err = stg__export_end(&x);
    if (err == STG_EIO)
        stg__store_error(s, STG_EIO, "write error on the export");
    else if (err == STG_ENOMEM)
        stg__store_error(s, STG_ENOMEM, "out of memory");
    return err;
}
