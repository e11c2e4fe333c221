/*
 * Unit tests of the writer's WAL helper (src/store/walsync.c): once the WAL
 * holds more than AHEAD_FRAMES (1024 pages) since the last one, the helper
 * checkpoints on its own connection while the store stays open (the
 * database file takes the committed pages before close), and the store's
 * close is still the last connection: it checkpoints the rest and removes
 * the -wal and -shm files, and every commit is there on reopen. A
 * writer's report (the end of a run) has the helper catch up at once.
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "cmocka_all.h"

#include "store/store.h"

#define STORE_SCRATCH_PREFIX "stg_test_walsync"
#include "store_scratch.h"

static stg_store *open_store(const char *name, bool create)
{
    stg_store *s = NULL;
    char err[640];
    stg_store_options o = {.create = create, .exclusive = true};
    if (stg__store_open(path_of(name), &o, &s, err, sizeof err) != STG_OK)
        fail_msg("open %s: %s", name, err);
    return s;
}

static int64_t size_of(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (int64_t)st.st_size : -1;
}

/* n commits of one 256 KiB row each (64 WAL frames and more per commit),
 * through the store's own connection, so its WAL hook sees each. */
static void commit_rows(stg_store *s, int first, int n)
{
    sqlite3 *db = stg__store_db(s);
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "INSERT INTO bad_lines(line, message) "
                                        "VALUES(?1, printf('%.*c', 262144, 'x'))",
                                        -1, &st, NULL),
                     SQLITE_OK);
    for (int i = first; i < first + n; i++) {
        sqlite3_bind_int(st, 1, i);
        assert_int_equal(sqlite3_step(st), SQLITE_DONE); /* autocommit: one commit */
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
}

static int64_t rows_in(stg_store *s)
{
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(stg__store_db(s), "SELECT count(*) FROM bad_lines", -1,
                                        &st, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    int64_t n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return n;
}

/* Close s: the store's close is the last connection, so it checkpoints
 * what is left and removes the -wal and -shm files; reopened, the file
 * holds every committed row. */
static void close_whole(stg_store *s, const char *name, int64_t rows)
{
    char wal[600], shm[600];
    snprintf(wal, sizeof wal, "%s-wal", path_of(name));
    snprintf(shm, sizeof shm, "%s-shm", path_of(name));
    stg__store_close(s);
    assert_int_equal(size_of(wal), -1);
    assert_int_equal(size_of(shm), -1);
    s = open_store(name, false);
    assert_int_equal(rows_in(s), rows);
    stg__store_close(s);
}

/* Wait (a hang guard, not a timing bound: the helper is asynchronous) for
 * the database file to pass min bytes. */
static bool wait_size(const char *path, int64_t min)
{
    for (int i = 0; i < 6000; i++) { /* up to 60 s */
        if (size_of(path) >= min)
            return true;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return false;
}

static void test_checkpoint_ahead(void **state)
{
    (void)state;
    const char *db = path_of("ahead.db");
    char wal[600];
    snprintf(wal, sizeof wal, "%s-wal", db);
    stg_store *s = open_store("ahead.db", true);
    int64_t before = size_of(db);
    /* 24 commits of 64+ frames: past 1024 frames, short of the 4000 of the
     * connection's own autocheckpoint */
    commit_rows(s, 1, 24);
    assert_true(size_of(wal) > 24 * 262144); /* every commit is in the WAL */
    /* the helper copied the first 1024+ frames (4 MiB) into the file while
     * the store is open: without it nothing reaches the file before close */
    if (!wait_size(db, before + 4 * 1024 * 1024))
        fail_msg("the database file stayed at %lld bytes (%lld before)",
                 (long long)size_of(db), (long long)before);
    assert_int_equal(size_of(wal) > 0, 1); /* still open: the WAL is there */
    commit_rows(s, 25, 8); /* and the store goes on writing */
    assert_int_equal(rows_in(s), 32);
    close_whole(s, "ahead.db", 32); /* a clean close leaves the file whole */
    assert_true(size_of(db) >= 32 * 262144);
}

/* A small store never wakes the checkpoint: nothing reaches the file
 * before close (the helper is not a checkpoint per commit), and close
 * still leaves it whole. */
static void test_small_store_untouched(void **state)
{
    (void)state;
    const char *db = path_of("small.db");
    stg_store *s = open_store("small.db", true);
    int64_t before = size_of(db);
    commit_rows(s, 1, 4); /* about 260 frames */
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
    assert_int_equal(size_of(db), before);
    close_whole(s, "small.db", 4);
}

/* A writer's report is the end of its run: the helper checkpoints what is
 * committed while the report reads, so the file holds it before close. */
static void test_report_catches_up(void **state)
{
    (void)state;
    const char *db = path_of("report.db");
    stg_store *s = open_store("report.db", true);
    int64_t before = size_of(db);
    commit_rows(s, 1, 4); /* about 260 frames: no checkpoint ahead yet */
    stg_store_report r;
    assert_int_equal(stg__store_report_get(s, &r), STG_OK);
    assert_int_equal(r.bad_lines, 4);
    stg__store_report_free(&r);
    if (!wait_size(db, before + 4 * 262144))
        fail_msg("the database file stayed at %lld bytes (%lld before)",
                 (long long)size_of(db), (long long)before);
    commit_rows(s, 5, 1); /* written after it: the close checkpoints that */
    close_whole(s, "report.db", 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checkpoint_ahead),
        cmocka_unit_test(test_small_store_untouched),
        cmocka_unit_test(test_report_catches_up),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
