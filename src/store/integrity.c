/*
 * Is this database whole? Checked on every open (runs, report, export) and
 * with every count, so that a damaged file is refused with a message, never
 * read as a smaller batch or as a finished one.
 *
 * Invariants:
 *  - A database that holds a job set (meta fingerprint) holds exactly
 *    job_count job rows, with ids 1..job_count: the import writes them in
 *    the transaction that writes the fingerprint, and no code path deletes
 *    a job. So any other number means the file was damaged or edited, and
 *    resuming from it would report jobs that never ran as nonexistent.
 *  - PRAGMA quick_check (b-tree structure, page use, NOT NULL and CHECK
 *    constraints) runs before anything is read: random bytes in a page are
 *    caught at open, not in the middle of a run. It reads the whole file
 *    once: O(size), a small price next to the HTTP calls of the batch.
 */
#include <stdlib.h>
#include <string.h>

#include "store/internal.h"

static const char damaged_hint[] =
    "nothing was changed; restore the database from a copy, or delete it (and its -wal "
    "file) to start the batch over";

/* The job count the job set stored with its fingerprint: *n = -1 when the
 * store holds no job set yet. */
static int stored_count(stg_store *s, int64_t *n)
{
    *n = -1;
    char *fp = NULL, *count = NULL;
    int err = stg__store_meta_get(s, "fingerprint", &fp);
    if (!err)
        err = stg__store_meta_get(s, "job_count", &count);
    if (!err && fp) {
        char *end = NULL;
        long long v = count ? strtoll(count, &end, 10) : -1;
        if (!count || end == count || *end || v < 0)
            err = stg__store_error(s, STG_EDB,
                                   "%s: the database is damaged: its job count is missing or "
                                   "not a number; %s",
                                   s->path, damaged_hint);
        else
            *n = v;
    }
    free(fp);
    free(count);
    return err;
}

int stg__store_check_total(stg_store *s, int64_t n)
{
    int64_t want;
    int err = stored_count(s, &want);
    if (err)
        return err;
    if (want < 0)
        want = 0;
    if (n != want)
        return stg__store_error(s, STG_EDB,
                                "%s: the database is damaged: it holds %lld job rows, its job "
                                "set has %lld; %s",
                                s->path, (long long)n, (long long)want, damaged_hint);
    return STG_OK;
}

int stg__store_check_rows(stg_store *s, int64_t n, bool unknown_state)
{
    if (unknown_state)
        return stg__store_error(s, STG_EDB,
                                "%s: the database is damaged: a job row holds no known state; "
                                "nothing was changed (restore it from a copy, or delete it "
                                "to start over)",
                                s->path);
    return stg__store_check_total(s, n);
}

bool stg__store_has_table(stg_store *s, const char *name)
{
    sqlite3_stmt *st = NULL;
    bool yes = false;
    if (sqlite3_prepare_v2(s->db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1",
                           -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
        yes = sqlite3_step(st) == SQLITE_ROW;
    }
    sqlite3_finalize(st);
    return yes;
}

int stg__store_run_table(stg_store *s, const char *create_sql, const char *upsert_sql,
                         sqlite3_stmt **st)
{
    *st = NULL;
    int rc = sqlite3_exec(s->db, create_sql, NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(s->db, upsert_sql, -1, st, NULL);
    return rc;
}

static int quick_check(stg_store *s)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, "PRAGMA quick_check(1)", -1, &st, NULL);
    char first[200] = "";
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(st, 0);
        snprintf(first, sizeof first, "%s", t ? t : "?");
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_OK)
        return stg__store_fail(s, rc, "the database is damaged (quick_check could not read it)");
    if (strcmp(first, "ok"))
        return stg__store_error(s, STG_EDB, "%s: the database is damaged (quick_check: %s); %s",
                                s->path, first, damaged_hint);
    return STG_OK;
}

int stg__store_check(stg_store *s)
{
    int err = quick_check(s);
    if (err)
        return err;
    int64_t want;
    if ((err = stored_count(s, &want)) != STG_OK || want < 0)
        return err;
    sqlite3_stmt *st = NULL;
    int64_t n = 0, lo = 0, hi = 0;
    int rc = sqlite3_prepare_v2(s->db, "SELECT count(*), min(id), max(id) FROM jobs", -1, &st,
                                NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        n = sqlite3_column_int64(st, 0);
        lo = sqlite3_column_int64(st, 1);
        hi = sqlite3_column_int64(st, 2);
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_OK)
        return stg__store_fail(s, rc, "cannot read the jobs");
    if ((err = stg__store_check_total(s, n)) != STG_OK)
        return err;
    if (n > 0 && (lo != 1 || hi != n))
        return stg__store_error(s, STG_EDB,
                                "%s: the database is damaged: job ids run from %lld to %lld, "
                                "not 1 to %lld; %s",
                                s->path, (long long)lo, (long long)hi, (long long)n,
                                damaged_hint);
    return STG_OK;
}
