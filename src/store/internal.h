/*
 * Private to src/store: the store handle's fields, shared by schema.c,
 * import.c, jobs.c, report.c and export.c. Nothing outside src/store
 * includes this.
 */
#ifndef STAGGER_STORE_INTERNAL_H
#define STAGGER_STORE_INTERNAL_H

#include <sqlite3.h>

#include "store/store.h"

/* application_id in the database header: "STGB". */
#define STG_STORE_APP_ID 0x53544742
/* PRAGMA user_version; bump with a migration when the schema changes. */
#define STG_STORE_SCHEMA_VERSION 1

struct stg_store {
    sqlite3 *db;
    char *path;
    int lock_fd;          /* runner lock (flock), -1 when none */
    bool readonly;
    int64_t busy_timeout_us;
    char err[640];
    /* Prepared statements of the hot paths, prepared on first use and
     * finalized at close. */
    sqlite3_stmt *st_claim;
    sqlite3_stmt *st_finish;
    sqlite3_stmt *st_response_put;
    sqlite3_stmt *st_response_del;
    sqlite3_stmt *st_sent;
    sqlite3_stmt *st_run_add;
    sqlite3_stmt *st_begin, *st_commit, *st_rollback;
    /* The run counters the open transaction has added (add_run_counts):
     * written to run_id's row once, just before that transaction commits
     * (so in it, as if each change had written its own), dropped by a
     * rollback. One UPDATE per commit instead of one per job. */
    struct {
        int64_t run_id; /* 0: nothing pending */
        int64_t calls, retries, n429, n503, finished;
    } run_add;
    /* Group commit (stg__store_group): while on, begin opens the one
     * transaction if none is open and commit leaves it open; flush commits
     * it. */
    bool group;
    bool group_open;
    int64_t commits; /* COMMITs that succeeded (stg__store_commits) */
    /* The WAL hook (walsync.c): its write-back helper (NULL: none yet, or
     * none to be had: wal_fd_failed), and the WAL size, in frames, at the
     * last write-back asked for. */
    struct stg__walsync *walsync;
    bool wal_fd_failed;
    int wal_kicked;
    int wal_ahead; /* the WAL size at the last checkpoint asked of the helper */
};

/* STG_OK when n job rows is what the job set holds (meta job_count; no job
 * set yet: 0), else STG_EDB saying the database is damaged. */
int stg__store_check_total(stg_store *s, int64_t n);
/* The end of a full read of the jobs' states: n rows, unknown_state when
 * one of them held a state no name matches. STG_OK, or STG_EDB saying
 * which damage (an unknown state first, then a wrong total). */
int stg__store_check_rows(stg_store *s, int64_t n, bool unknown_state);
/* Whether the database has table name (older databases lack the later
 * ones; a failed read says no). */
bool stg__store_has_table(stg_store *s, const char *name);
/* A table of figures per run that later versions added (run_waits,
 * run_classes): created by create_sql when missing, then *st prepared from
 * upsert_sql (adding to the latest run's row; the caller finalizes it,
 * NULL on an error). Returns SQLite's code. */
int stg__store_run_table(stg_store *s, const char *create_sql, const char *upsert_sql,
                         sqlite3_stmt **st);

/* The writer's WAL hook (walsync.c): autocheckpoint, early write-back and
 * checkpoints ahead on the helper's own connection. stop (joins the
 * helper, closing its connection) before sqlite3_close, close after. */
void stg__store_walsync_install(stg_store *s);
void stg__store_walsync_stop(stg_store *s);
void stg__store_walsync_close(stg_store *s);
/* Ask the helper for a checkpoint now (the writer is done writing: the
 * close that follows then has nothing left to copy or sync). */
void stg__store_walsync_catch_up(stg_store *s);

/* Prepare *st once (returns SQLITE_OK or an error code). */
int stg__store_prepare(stg_store *s, sqlite3_stmt **st, const char *sql);

/* Add to run run_id's counters in the open transaction (written when it
 * commits). SQLITE_DONE, or an error code. */
int stg__store_run_add(stg_store *s, int64_t run_id, int calls, int retries, int n429,
                       int n503, int finished);

/* Add the run_seconds series (series.c) into the timeline object `into`
 * (a json_t), over its n buckets of bucket_ms from t0_ms: "attempts",
 * "status_429", "status_503", "waits_ms" {reason: [ms]}, "learned_rate",
 * "concurrency" (the larger in the bucket; null: none). Nothing when the
 * database has no series. */
struct json_t;
int stg__store_series_into(stg_store *s, int64_t t0_ms, int64_t bucket_ms, int64_t n,
                           struct json_t *into);

#endif
