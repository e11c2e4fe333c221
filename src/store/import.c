/*
 * Import: the input's jobs into an empty store, or the check that the input
 * is the job set a store already holds. Two entries share one inserter:
 * stg__store_import (a parsed stg_job_set, for tests and tools) and
 * stg__store_import_stream (a reader, one line at a time: what `stagger
 * batch` uses, so a 1M-line input is never held in memory).
 *
 * Invariants:
 *  - One import is one transaction, fingerprint and meta included: a kill
 *    mid-import leaves no job set at all, and a refused import (--strict
 *    with bad lines, no jobs, a read error, another job set) writes nothing.
 *    SQLite spills its page cache to the WAL inside a transaction, so the
 *    size of the transaction costs disk, not memory; one transaction per
 *    chunk would save nothing in memory and would leave half a job set
 *    behind a kill.
 *  - Repeated ids are found by the database, not by a table in memory: a
 *    fresh import inserts with ON CONFLICT(key) DO NOTHING on jobs' UNIQUE
 *    key (a conflict is the repeat; the first line comes from the row); a
 *    check against a stored set inserts the keys into a TEMP table (file
 *    backed: SQLITE_TEMP_STORE=1, its cache bounded like the main one),
 *    dropped by the rollback that ends the check.
 *  - Job ids are positions among the accepted jobs (1..n), the same in
 *    every import of the same fingerprint: that is what lets a run match a
 *    needs_input job to the input line that holds its secrets.
 *  - What stays in memory is one line and, when asked (an input that
 *    cannot be read again), the secret parts of needs_input jobs
 *    (stg_input_secrets): bounded by how many such jobs there are, never by
 *    the line count. A file is read again by stg_input_cursor instead.
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "store/internal.h"
#include "util/assert.h"

/* JSON array of the non-secret headers, or NULL when there are none. */
static char *stored_headers(const stg_job_spec *j, bool *nomem)
{
    *nomem = false;
    if (j->n_headers == 0)
        return NULL; /* the common case: no JSON built for nothing */
    json_t *a = json_array();
    if (!a) {
        *nomem = true;
        return NULL;
    }
    for (size_t i = 0; i < j->n_headers; i++) {
        const char *h = j->headers[i];
        const char *colon = strchr(h, ':');
        if (stg__store_header_is_secret(h, colon ? (size_t)(colon - h) : strlen(h)))
            continue;
        json_array_append_new(a, json_string(h));
    }
    char *out = NULL;
    if (json_array_size(a) > 0 && !(out = json_dumps(a, JSON_COMPACT)))
        *nomem = true;
    json_decref(a);
    return out;
}

/* The message for another job set; returns STG_ESTATE. path: this input's
 * path (may be NULL): when it is the one the database was made from, the
 * file changed since (issue #37: "belongs to another job set" read as if
 * another file had been given). */
static int another_set(stg_store *s, const char *have, size_t n, const char *fingerprint,
                       const char *path)
{
    char *count = NULL, *input = NULL;
    stg__store_meta_get(s, "job_count", &count);
    stg__store_meta_get(s, "input_path", &input);
    if (path && input && !strcmp(path, input))
        stg__store_error(s, STG_ESTATE,
                         "%s: the input changed since this database was made from it (%s \u2192 "
                         "%zu jobs; fingerprint %.12s \u2192 %.12s). Nothing was changed: to "
                         "finish the jobs as they were, run again with --db %s and no input "
                         "(or restore the file); to run the new input, use another --db or "
                         "delete that file",
                         s->path, count ? count : "?", n, have, fingerprint, s->path);
    else
        stg__store_error(s, STG_ESTATE,
                         "%s: belongs to another job set (%s jobs from %s, fingerprint "
                         "%.12s); this input has %zu jobs (fingerprint %.12s). Nothing was "
                         "changed: use another --db, or delete that file to start over",
                         s->path, count ? count : "?", input ? input : "?", have, n,
                         fingerprint);
    free(count);
    free(input);
    return STG_ESTATE;
}

/* ---- the inserter ---------------------------------------------------------------- */

typedef struct importer {
    stg_store *s;
    bool fresh;          /* no job set yet: rows are written */
    sqlite3_stmt *ins;   /* fresh: jobs; else: temp.import_seen */
    sqlite3_stmt *first; /* the line of the first job with a key */
    sqlite3_stmt *bad;
    sqlite3_stmt *shown; /* fresh: job_urls (the export's URL of a secret one) */
    size_t n;            /* accepted jobs */
} importer;

static int imp_prepare(importer *im)
{
    sqlite3 *db = im->s->db;
    const char *ins =
        "INSERT INTO jobs(id, key, line, method, url, url_redacted, headers, body, "
        "idempotency_key, needs_input, replay_safe, state, created_at, updated_at) "
        "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, 'pending', ?12, ?12) "
        "ON CONFLICT(key) DO NOTHING";
    const char *first = "SELECT line FROM jobs WHERE key = ?1";
    int rc = SQLITE_OK;
    if (!im->fresh) {
        rc = sqlite3_exec(db,
                          "CREATE TEMP TABLE import_seen(key TEXT PRIMARY KEY, "
                          "line INTEGER NOT NULL) WITHOUT ROWID",
                          NULL, NULL, NULL);
        ins = "INSERT INTO temp.import_seen(key, line) VALUES(?2, ?3) "
              "ON CONFLICT(key) DO NOTHING";
        first = "SELECT line FROM temp.import_seen WHERE key = ?1";
    }
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(db, ins, -1, &im->ins, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(db, first, -1, &im->first, NULL);
    if (rc == SQLITE_OK && im->fresh)
        rc = sqlite3_prepare_v2(db, "INSERT INTO bad_lines(line, message) VALUES(?1, ?2)", -1,
                                &im->bad, NULL);
    /* The URL an export shows of a job whose URL is withheld (no userinfo,
     * no secret values: stg__store_url_shown). Its own table, made with the
     * first import, so databases of every schema version 1 take it. */
    if (rc == SQLITE_OK && im->fresh)
        rc = sqlite3_exec(db,
                          "CREATE TABLE IF NOT EXISTS job_urls(job_id INTEGER PRIMARY KEY "
                          "REFERENCES jobs(id), shown TEXT NOT NULL)",
                          NULL, NULL, NULL);
    if (rc == SQLITE_OK && im->fresh)
        rc = sqlite3_prepare_v2(db, "INSERT INTO job_urls(job_id, shown) VALUES(?1, ?2)", -1,
                                &im->shown, NULL);
    return rc;
}

static void imp_finalize(importer *im)
{
    sqlite3_finalize(im->ins);
    sqlite3_finalize(im->first);
    sqlite3_finalize(im->bad);
    sqlite3_finalize(im->shown);
    im->ins = im->first = im->bad = im->shown = NULL;
}

static int imp_bad(importer *im, long line, const char *message)
{
    if (!im->fresh)
        return SQLITE_OK;
    sqlite3_bind_int64(im->bad, 1, line);
    sqlite3_bind_text(im->bad, 2, message, -1, SQLITE_STATIC);
    int rc = sqlite3_step(im->bad);
    return rc == SQLITE_DONE ? sqlite3_reset(im->bad) : (sqlite3_reset(im->bad), rc);
}

/* Insert j as job n + 1, or find it repeats an earlier key: *first_line is
 * then that job's line (and nothing was inserted), else 0. */
static int imp_job(importer *im, const stg_job_spec *j, int64_t now_ms, long *first_line)
{
    *first_line = 0;
    sqlite3_stmt *ins = im->ins;
    char *hdrs = NULL;
    sqlite3_bind_int64(ins, 1, (sqlite3_int64)(im->n + 1));
    sqlite3_bind_text(ins, 2, j->key, -1, SQLITE_STATIC);
    sqlite3_bind_int64(ins, 3, j->line);
    if (im->fresh) {
        bool nomem;
        if ((hdrs = stored_headers(j, &nomem)), nomem)
            return SQLITE_NOMEM;
        sqlite3_bind_text(ins, 4, j->method, -1, SQLITE_STATIC);
        if (j->url_secret)
            sqlite3_bind_null(ins, 5);
        else
            sqlite3_bind_text(ins, 5, j->url, -1, SQLITE_STATIC);
        sqlite3_bind_text(ins, 6, j->url_redacted, -1, SQLITE_STATIC);
        /* A NULL text or blob binds SQL NULL (sqlite3_bind_text's rule). */
        sqlite3_bind_text(ins, 7, hdrs, -1, SQLITE_TRANSIENT);
        sqlite3_bind_blob64(ins, 8, j->body, j->body_len, SQLITE_STATIC);
        sqlite3_bind_text(ins, 9, j->idempotency_key, -1, SQLITE_STATIC);
        sqlite3_bind_int(ins, 10, j->url_secret || j->headers_secret);
        sqlite3_bind_int(ins, 11, stg__store_replay_safe(j->method, j->idempotency_key));
        sqlite3_bind_int64(ins, 12, now_ms);
    }
    int rc = sqlite3_step(ins);
    free(hdrs);
    bool added = rc == SQLITE_DONE && sqlite3_changes(im->s->db) == 1;
    rc = rc == SQLITE_DONE ? sqlite3_reset(ins) : (sqlite3_reset(ins), rc);
    sqlite3_clear_bindings(ins);
    if (rc != SQLITE_OK)
        return rc;
    if (added && im->fresh && j->url_shown) {
        sqlite3_bind_int64(im->shown, 1, (sqlite3_int64)(im->n + 1));
        sqlite3_bind_text(im->shown, 2, j->url_shown, -1, SQLITE_STATIC);
        rc = sqlite3_step(im->shown);
        rc = rc == SQLITE_DONE ? sqlite3_reset(im->shown) : (sqlite3_reset(im->shown), rc);
        if (rc != SQLITE_OK)
            return rc;
    }
    if (added) {
        im->n++;
        return SQLITE_OK;
    }
    /* The key is there already: the first job that had it. */
    sqlite3_bind_text(im->first, 1, j->key, -1, SQLITE_STATIC);
    rc = sqlite3_step(im->first);
    if (rc == SQLITE_ROW) {
        *first_line = (long)sqlite3_column_int64(im->first, 0);
        rc = SQLITE_OK;
    } else if (rc == SQLITE_DONE) {
        rc = SQLITE_CORRUPT; /* a conflict with no row: cannot happen */
    }
    sqlite3_reset(im->first);
    STG_ASSERT(rc != SQLITE_OK || *first_line > 0);
    return rc;
}

static int imp_meta(importer *im, const char *fingerprint, const char *input_path,
                    stg_input_format format, int64_t now_ms)
{
    sqlite3_stmt *meta = NULL;
    int rc = sqlite3_prepare_v2(im->s->db,
                                "INSERT OR REPLACE INTO meta(key, value) VALUES(?1, ?2)", -1,
                                &meta, NULL);
    char count[32], when[32];
    snprintf(count, sizeof count, "%zu", im->n);
    snprintf(when, sizeof when, "%lld", (long long)now_ms);
    const char *kv[][2] = {{"fingerprint", fingerprint},
                           {"job_count", count},
                           {"input_path", input_path ? input_path : "-"},
                           {"input_format", stg__input_format_name(format)},
                           {"imported_at", when}};
    for (size_t i = 0; rc == SQLITE_OK && i < sizeof kv / sizeof kv[0]; i++) {
        sqlite3_bind_text(meta, 1, kv[i][0], -1, SQLITE_STATIC);
        sqlite3_bind_text(meta, 2, kv[i][1], -1, SQLITE_STATIC);
        rc = sqlite3_step(meta);
        rc = rc == SQLITE_DONE ? sqlite3_reset(meta) : rc;
    }
    sqlite3_finalize(meta);
    return rc;
}

/* Begin the transaction; *have gets the stored fingerprint (NULL: none). */
static int imp_begin(stg_store *s, char **have)
{
    int err = stg__store_begin(s);
    if (err)
        return err;
    if ((err = stg__store_meta_get(s, "fingerprint", have)) != STG_OK)
        stg__store_rollback(s);
    return err;
}

/* ---- a parsed set ------------------------------------------------------------------- */

int stg__store_import(stg_store *s, const stg_job_set *set, const char *input_path,
                     int64_t now_ms, bool *imported)
{
    *imported = false;
    char *have = NULL;
    int err = imp_begin(s, &have);
    if (err)
        return err;
    if (have) {
        err = strcmp(have, set->fingerprint) ? another_set(s, have, set->n, set->fingerprint, input_path)
                                             : STG_OK;
        free(have);
        stg__store_rollback(s); /* nothing was written either way */
        return err;
    }
    importer im = {.s = s, .fresh = true};
    int rc = imp_prepare(&im);
    for (size_t i = 0; rc == SQLITE_OK && i < set->n; i++) {
        long first;
        rc = imp_job(&im, &set->jobs[i], now_ms, &first);
        if (rc == SQLITE_OK && first)
            rc = SQLITE_CONSTRAINT; /* the reader let a repeat through */
    }
    for (size_t i = 0; rc == SQLITE_OK && i < set->n_bad; i++)
        rc = imp_bad(&im, set->bad[i].line, set->bad[i].message);
    if (rc == SQLITE_OK)
        rc = imp_meta(&im, set->fingerprint, input_path, set->format, now_ms);
    imp_finalize(&im);
    if (rc != SQLITE_OK)
        return stg__store_fail_rollback(s, rc, "cannot import the jobs");
    if ((err = stg__store_commit(s)) != STG_OK)
        return err;
    *imported = true;
    return STG_OK;
}

/* ---- a stream --------------------------------------------------------------------- */

static int report_bad(importer *im, const stg_store_import_options *o,
                      stg_store_import_result *res, long line, const char *message)
{
    res->bad++;
    if (o->on_bad)
        o->on_bad(o->bad_data, line, message);
    return imp_bad(im, line, message);
}

/* One job from the reader: a repeat (a bad line) or the next job. */
static int stream_job(importer *im, const stg_store_import_options *o,
                      stg_store_import_result *res, stg_input_reader *r, stg_job_spec *j,
                      stg_sha256 *fp)
{
    long first;
    int rc = imp_job(im, j, o->now_ms, &first);
    if (rc != SQLITE_OK)
        return rc;
    if (first) {
        char msg[96];
        snprintf(msg, sizeof msg, "repeated %s (first on line %ld); skipped",
                 stg__input_reader_format(r) == STG_INPUT_KEYS ? "key" : "id", first);
        return report_bad(im, o, res, j->line, msg);
    }
    stg__fingerprint_job(fp, j);
    if (o->secrets && (j->url_secret || j->headers_secret) &&
        stg__input_secrets_add(o->secrets, (int64_t)im->n, j) != STG_OK)
        return SQLITE_NOMEM;
    return SQLITE_OK;
}

int stg__store_import_stream(stg_store *s, stg_input_reader *r,
                            const stg_store_import_options *o, stg_store_import_result *res)
{
    memset(res, 0, sizeof *res);
    char *have = NULL;
    int err = imp_begin(s, &have);
    if (err)
        return err;
    importer im = {.s = s, .fresh = have == NULL};
    stg_sha256 fp;
    stg__fingerprint_begin(&fp);
    int rc = imp_prepare(&im), rerr = STG_OK;
    while (rc == SQLITE_OK) {
        stg_job_spec *j;
        stg_bad_line *b;
        if ((rerr = stg__input_reader_next(r, &j, &b)) != STG_OK || (!j && !b))
            break;
        rc = j ? stream_job(&im, o, res, r, j, &fp)
               : report_bad(&im, o, res, b->line, b->message);
    }
    res->jobs = im.n;
    res->lines = stg__input_reader_lines(r);
    res->format = stg__input_reader_format(r);
    stg__fingerprint_end(&fp, im.n, res->fingerprint);
    if (rc == SQLITE_OK && rerr == STG_OK && (im.n == 0 || (o->strict && res->bad))) {
        res->refused = true; /* the caller says why; nothing is written */
    } else if (rc == SQLITE_OK && rerr == STG_OK && have) {
        if (strcmp(have, res->fingerprint))
            err = another_set(s, have, im.n, res->fingerprint, o->input_path);
    } else if (rc == SQLITE_OK && rerr == STG_OK) {
        rc = imp_meta(&im, res->fingerprint, o->input_path, res->format, o->now_ms);
    }
    imp_finalize(&im);
    free(have);
    if (rerr != STG_OK)
        err = stg__store_error(s, rerr, "%s", stg__input_reader_error(r));
    else if (rc != SQLITE_OK)
        err = stg__store_fail(s, rc, "cannot import the jobs");
    if (err || res->refused || !im.fresh) {
        stg__store_rollback(s); /* refused, failed, or only checked: nothing written */
        return err;
    }
    if ((err = stg__store_commit(s)) != STG_OK)
        return err;
    res->imported = true;
    return STG_OK;
}
