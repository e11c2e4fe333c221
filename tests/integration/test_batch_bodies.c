/*
 * libstagger-batch streams response bodies (src/batch/body.c): with
 * out_dir into a temp file in that directory, renamed into place when the
 * job is done; without it towards the database. Against stg_hostile (pattern-body, reset-mid-body:
 * byte i of a body is i % 251) and `stagger serve` on 127.0.0.1:
 *  - large bodies land whole and exact, 0600, with no temp file left; a
 *    404's body (not streamed: kept by the engine) is written as before;
 *  - a reset mid-body and a retry leave one complete file;
 *  - a full disk (RLIMIT_FSIZE in a forked child: write fails with EFBIG)
 *    stops the run with the body cause, puts the job back to pending and
 *    leaves neither the job's file nor a temp file;
 *  - without out_dir, bodies reach the database whole: small ones from
 *    memory, large ones from a temp file through incremental blob I/O;
 *  - peak memory does not grow with the bodies, with out_dir and with the
 *    database: a forked child's maxrss for 3 concurrent 100 MB bodies
 *    against 3 of 10 MB differs by less than one 10 MB body (keeping them
 *    would cost 270 MB more).
 *
 * Needs STAGGER and HOSTILE in the environment. Only loopback traffic.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sqlite3.h>

#include "cmocka_all.h"

#include "batch/batch.h"
#include "integration/hostile_helper.h"
#include "store/store.h"

static char g_db[160], g_out[160];

/* Under ASan, freed memory waits in a quarantine (256 MB by default) and
 * stays resident: SQLite's page churn while it writes a 100 MB blob fills
 * it, which maxrss would count as held. The peak-RSS bound below is about
 * memory the program holds, so the quarantine is kept small here (an
 * ASAN_OPTIONS that sets it still wins). Unused without ASan. */
__attribute__((visibility("default"))) const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "quarantine_size_mb=1";
}

typedef struct jobdef {
    const char *id, *url;
} jobdef;

/* Import GET jobs into a new database g_db under dir (closed afterwards);
 * make g_out, the out_dir. */
static void setup(const char *dir, const jobdef *jobs, int n)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    for (int i = 0; i < n; i++)
        fprintf(f, "{\"id\":\"%s\",\"method\":\"GET\",\"url\":\"%s\"}\n", jobs[i].id,
                jobs[i].url);
    fclose(f);
    FILE *in = fmemopen(text, len, "r");
    stg_job_set set;
    char err[256];
    assert_int_equal(stg__input_read(in, NULL, &set, err, sizeof err), STG_OK);
    fclose(in);
    free(text);
    snprintf(g_db, sizeof g_db, "%s/batch.db", dir);
    snprintf(g_out, sizeof g_out, "%s/bodies", dir);
    assert_int_equal(mkdir(g_out, 0700), 0);
    stg_store *s = NULL;
    stg_store_options o = {.create = true, .exclusive = true};
    assert_int_equal(stg__store_open(g_db, &o, &s, err, sizeof err), STG_OK);
    bool imported = false;
    assert_int_equal(stg__store_import(s, &set, "test", stg__store_now_ms(), &imported), STG_OK);
    stg__store_close(s);
    stg__job_set_free(&set);
}

/* Remove g_out's files, g_out and the database. */
static void teardown_files(void)
{
    DIR *d = opendir(g_out);
    struct dirent *e;
    char p[512];
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", g_out, e->d_name);
            unlink(p);
        }
    if (d)
        closedir(d);
    rmdir(g_out);
    const char *sfx[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s%s", g_db, sfx[i]);
        unlink(p);
    }
}

/* Entries of g_out (not . and ..); *tmp counts the temp files. */
static int out_entries(int *tmp)
{
    DIR *d = opendir(g_out);
    assert_non_null(d);
    struct dirent *e;
    int n = 0;
    *tmp = 0;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            n++;
            *tmp += strstr(e->d_name, ".tmp") != NULL;
        }
    closedir(d);
    return n;
}

/* The file is the pattern body of size bytes, mode 0600. */
static void assert_pattern_file(const char *name, size_t size)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", g_out, name);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal((size_t)st.st_size, size);
    FILE *f = fopen(p, "rb");
    assert_non_null(f);
    size_t bad = 0, i = 0;
    int c;
    while ((c = fgetc(f)) != EOF) {
        bad += (unsigned char)c != (unsigned char)(i % 251);
        i++;
    }
    fclose(f);
    assert_int_equal(i, size);
    assert_int_equal(bad, 0);
}

static const char *state_of(const char *key)
{
    static char buf[32];
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    snprintf(buf, sizeof buf, "?");
    if (sqlite3_open_v2(g_db, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, "SELECT state FROM jobs WHERE key = ?1", -1, &st, NULL) ==
            SQLITE_OK) {
        sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW)
            snprintf(buf, sizeof buf, "%s", (const char *)sqlite3_column_text(st, 0));
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return buf;
}

/* A job's stored body: its length, and how many bytes differ from the
 * pattern (pattern true) or whether it contains needle. */
static long long db_body(const char *key, bool pattern, const char *needle, long long *bad)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    long long len = -1;
    *bad = 0;
    if (sqlite3_open_v2(g_db, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db,
                           "SELECT r.body FROM responses r JOIN jobs j ON j.id = r.job_id "
                           "WHERE j.key = ?1",
                           -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW) {
            const unsigned char *b = sqlite3_column_blob(st, 0);
            len = sqlite3_column_bytes(st, 0);
            for (long long i = 0; pattern && i < len; i++)
                *bad += b[i] != (unsigned char)(i % 251);
            if (needle && (!b || !memmem(b, (size_t)len, needle, strlen(needle))))
                *bad = 1;
        }
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return len;
}

/* Run the batch in g_db to its end, bodies into g_out (g_to_db: into the
 * database). */
static bool g_to_db;

static stg_batch_stop_cause run_batch(void)
{
    stg_store *s = NULL;
    char err[800];
    stg_store_options o = {.exclusive = true};
    if (stg__store_open(g_db, &o, &s, err, sizeof err) != STG_OK)
        return (stg_batch_stop_cause)-1;
    stg_batch_config c = {.store = s, .out_dir = g_to_db ? NULL : g_out};
    c.engine.concurrency = 4;
    c.engine.seed = 7;
    c.engine.max_body = (size_t)512 << 20;
    c.engine.policy.backoff.base_us = STG_MS(1);
    c.engine.policy.backoff.cap_us = STG_MS(5);
    stg_batch *b = NULL;
    stg_batch_stop_cause cause = (stg_batch_stop_cause)-1;
    if (stg__batch_new(&c, &b, NULL, err, sizeof err) == STG_OK) {
        while (stg__batch_step(b, STG_MS(50)))
            ;
        stg_batch_summary sum;
        if (stg__batch_end(b, &sum) == STG_OK)
            cause = sum.cause;
        stg__batch_free(b, 0);
    }
    stg__store_close(s);
    return cause;
}

static void test_bodies_stream_into_place(void **state)
{
    (void)state;
    server h, srv;
    const char *args[] = {"--size", "3000000", NULL};
    hostile_start(&h, "pattern-body", args);
    server_start(&srv, NULL);
    char u1[128], u2[128], u3[128];
    url_of(&h, "/a", u1, sizeof u1);
    url_of(&h, "/b", u2, sizeof u2);
    url_of(&srv, "/status/404", u3, sizeof u3);
    const jobdef jobs[] = {{"big-a", u1}, {"big-b", u2}, {"nf", u3}};
    setup(h.dir, jobs, 3);
    assert_int_equal(run_batch(), STG_BATCH_DRAINED);
    server_stop(&h);
    server_stop(&srv);
    assert_string_equal(state_of("big-a"), "done");
    assert_string_equal(state_of("big-b"), "done");
    assert_string_equal(state_of("nf"), "failed");
    assert_pattern_file("big-a", 3000000);
    assert_pattern_file("big-b", 3000000);
    char p[512], body[256] = "";
    snprintf(p, sizeof p, "%s/nf", g_out);
    FILE *f = fopen(p, "r");
    assert_non_null(f);
    size_t n = fread(body, 1, sizeof body - 1, f);
    fclose(f);
    body[n] = '\0';
    assert_non_null(strstr(body, "404"));
    int tmp;
    assert_int_equal(out_entries(&tmp), 3);
    assert_int_equal(tmp, 0);
    teardown_files();
    server_cleanup(&h);
    server_cleanup(&srv);
}

static void test_retry_after_reset_one_file(void **state)
{
    (void)state;
    server h;
    const char *args[] = {"--size", "2000000", NULL};
    hostile_start(&h, "reset-mid-body", args);
    char u[128];
    url_of(&h, "/r", u, sizeof u);
    const jobdef jobs[] = {{"r", u}};
    setup(h.dir, jobs, 1);
    assert_int_equal(run_batch(), STG_BATCH_DRAINED);
    server_stop(&h);
    assert_int_equal(hostile_requests(&h), 2);
    assert_string_equal(state_of("r"), "done");
    assert_pattern_file("r", 2000000);
    int tmp;
    assert_int_equal(out_entries(&tmp), 1);
    assert_int_equal(tmp, 0);
    teardown_files();
    server_cleanup(&h);
}

static void test_disk_full_stops_the_run(void **state)
{
    (void)state;
    server h;
    const char *args[] = {"--size", "3000000", NULL};
    hostile_start(&h, "pattern-body", args);
    char u[128];
    url_of(&h, "/f", u, sizeof u);
    const jobdef jobs[] = {{"full", u}};
    setup(h.dir, jobs, 1);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* A "disk" that takes 1 MB per file: write fails with EFBIG. */
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {.rlim_cur = 1 << 20, .rlim_max = 1 << 20};
        setrlimit(RLIMIT_FSIZE, &rl);
        _exit((int)run_batch());
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    server_stop(&h);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), STG_BATCH_BODY);
    assert_string_equal(state_of("full"), "pending"); /* runs again next time */
    int tmp;
    assert_int_equal(out_entries(&tmp), 0); /* no half body, no temp file */
    teardown_files();
    server_cleanup(&h);
}

/* Peak RSS (KiB, the child's own, from wait4) of a batch of 3 concurrent
 * jobs fetching size-byte bodies from url into out_dir, in a forked child
 * that exits 0 when all 3 are done. */
static long batch_maxrss_kib(const server *h, size_t size)
{
    char u[3][128];
    const char *names[] = {"m1", "m2", "m3"};
    jobdef jobs[3];
    for (int i = 0; i < 3; i++) {
        char path[16];
        snprintf(path, sizeof path, "/%s", names[i]);
        url_of(h, path, u[i], sizeof u[i]);
        jobs[i] = (jobdef){names[i], u[i]};
    }
    setup(h->dir, jobs, 3);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(run_batch() == STG_BATCH_DRAINED ? 0 : 1);
    int st = 0;
    struct rusage ru;
    assert_int_equal(wait4(pid, &st, 0, &ru), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    for (int i = 0; i < 3; i++) {
        char p[512];
        long long bad;
        snprintf(p, sizeof p, "%s/%s", g_out, names[i]);
        struct stat sb;
        if (g_to_db) {
            assert_int_equal(db_body(names[i], false, NULL, &bad), (long long)size);
        } else {
            assert_int_equal(stat(p, &sb), 0);
            assert_int_equal((size_t)sb.st_size, size);
        }
    }
    teardown_files();
    return ru.ru_maxrss;
}

/* Three concurrent 100 MB bodies against three 10 MB ones: keeping them
 * would cost at least 270 MB more; streamed, the run grows by less than
 * one small body. */
static void test_memory_flat(void **state)
{
    (void)state;
    const size_t small = (size_t)10 << 20, big = (size_t)100 << 20;
    char n1[32], n2[32];
    snprintf(n1, sizeof n1, "%zu", small);
    snprintf(n2, sizeof n2, "%zu", big);
    server a, b;
    const char *args_a[] = {"--size", n1, NULL}, *args_b[] = {"--size", n2, NULL};
    hostile_start(&a, "pattern-body", args_a);
    hostile_start(&b, "pattern-body", args_b);
    for (int db = 0; db < 2; db++) {
        g_to_db = db;
        long rss_small = batch_maxrss_kib(&a, small);
        long rss_big = batch_maxrss_kib(&b, big);
        g_to_db = false;
        print_message("maxrss (%s): %ld KiB for 3 x 10 MiB, %ld KiB for 3 x 100 MiB\n",
                      db ? "database" : "out_dir", rss_small, rss_big);
        assert_true(rss_big - rss_small < (long)(small >> 10));
    }
    server_cleanup(&a);
    server_cleanup(&b);
}

/* Without out_dir: a large body (spilled to a temp file, copied into the
 * row with blob I/O), a small one (in memory), a 404's (the engine's) and
 * one after a reset and a retry all land whole in the database. */
static void test_db_bodies(void **state)
{
    (void)state;
    server big, small, rst, srv;
    const char *a1[] = {"--size", "3000000", NULL}, *a2[] = {"--size", "1000", NULL},
               *a3[] = {"--size", "2000000", NULL};
    hostile_start(&big, "pattern-body", a1);
    hostile_start(&small, "pattern-body", a2);
    hostile_start(&rst, "reset-mid-body", a3);
    server_start(&srv, NULL);
    char u1[128], u2[128], u3[128], u4[128];
    url_of(&big, "/a", u1, sizeof u1);
    url_of(&small, "/b", u2, sizeof u2);
    url_of(&srv, "/status/404", u3, sizeof u3);
    url_of(&rst, "/r", u4, sizeof u4);
    const jobdef jobs[] = {{"big", u1}, {"small", u2}, {"nf", u3}, {"rst", u4}};
    setup(big.dir, jobs, 4);
    g_to_db = true;
    stg_batch_stop_cause cause = run_batch();
    g_to_db = false;
    assert_int_equal(cause, STG_BATCH_DRAINED);
    long long bad;
    assert_int_equal(db_body("big", true, NULL, &bad), 3000000);
    assert_int_equal(bad, 0);
    assert_int_equal(db_body("small", true, NULL, &bad), 1000);
    assert_int_equal(bad, 0);
    assert_int_equal(db_body("rst", true, NULL, &bad), 2000000);
    assert_int_equal(bad, 0);
    assert_true(db_body("nf", false, "404", &bad) > 0);
    assert_int_equal(bad, 0);
    assert_string_equal(state_of("big"), "done");
    assert_string_equal(state_of("rst"), "done");
    int tmp;
    assert_int_equal(out_entries(&tmp), 0); /* nothing under out_dir */
    teardown_files();
    server_cleanup(&big);
    server_cleanup(&small);
    server_cleanup(&rst);
    server_cleanup(&srv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_bodies_stream_into_place, stop_leftovers),
        cmocka_unit_test_teardown(test_retry_after_reset_one_file, stop_leftovers),
        cmocka_unit_test_teardown(test_disk_full_stops_the_run, stop_leftovers),
        cmocka_unit_test_teardown(test_db_bodies, stop_leftovers),
        cmocka_unit_test_teardown(test_memory_flat, stop_leftovers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
