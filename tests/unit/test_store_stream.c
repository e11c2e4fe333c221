/*
 * Unit tests of the streaming import (src/store/import.c, the reader of
 * input.c): it writes what the whole-set import writes, finds repeats in
 * the database, refuses without writing, checks a stored set without
 * writing, keeps only the needs_input jobs' secret parts; the cursor finds
 * jobs in the file again; and memory does not grow with the input.
 *
 * The memory test runs the import in a child process (this program again,
 * with --child) and reads its peak RSS (getrusage ru_maxrss) after
 * importing 20k and then 200k generated lines: what the 180k extra jobs may
 * add is bounded by the state the import keeps per job (none, for jobs
 * without secrets), not by a tuned share. The same measure of the
 * whole-set path (stg__input_read + stg__store_import) must exceed the bound,
 * so the test shows it can fail. No wall clock is read.
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "cmocka_all.h"

#include "store/store.h"

#define STORE_SCRATCH_PREFIX "stg_test_stream"
#include "store_scratch.h"

static stg_store *open_new(const char *name)
{
    const char *p = path_of(name);
    unlink(p);
    stg_store *s = NULL;
    char err[640];
    stg_store_options o = {.create = true, .exclusive = true};
    if (stg__store_open(p, &o, &s, err, sizeof err) != STG_OK)
        fail_msg("open %s: %s", p, err);
    return s;
}

static stg_input_reader *reader_of(const char *text, const stg_input_options *o, FILE **f)
{
    *f = fmemopen((void *)text, strlen(text), "r");
    assert_non_null(*f);
    stg_input_reader *r = NULL;
    char err[256];
    assert_int_equal(stg__input_reader_new(*f, o, &r, err, sizeof err), STG_OK);
    return r;
}

/* Bad lines seen through on_bad, as "LINE:message\n". */
typedef struct bad_log {
    char text[4096];
    int n;
} bad_log;

static void log_bad(void *data, long line, const char *message)
{
    bad_log *b = data;
    size_t used = strlen(b->text);
    snprintf(b->text + used, sizeof b->text - used, "%ld:%s\n", line, message);
    b->n++;
}

static int stream(stg_store *s, const char *text, const stg_input_options *io, bool strict,
                  bad_log *bad, stg_input_secrets *secrets, stg_store_import_result *res)
{
    FILE *f;
    stg_input_reader *r = reader_of(text, io, &f);
    stg_store_import_options o = {.input_path = "/in",
                                  .now_ms = 1000,
                                  .strict = strict,
                                  .on_bad = bad ? log_bad : NULL,
                                  .bad_data = bad,
                                  .secrets = secrets};
    int rc = stg__store_import_stream(s, r, &o, res);
    stg__input_reader_free(r);
    fclose(f);
    return rc;
}

/* One text of the whole table, ordered, for comparing two databases. */
static char *dump(stg_store *s, const char *sql)
{
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(stg__store_db(s), sql, -1, &st, NULL), SQLITE_OK);
    size_t cap = 1 << 16, used = 0;
    char *out = calloc(1, cap);
    assert_non_null(out);
    while (sqlite3_step(st) == SQLITE_ROW) {
        for (int i = 0; i < sqlite3_column_count(st); i++) {
            const char *v = (const char *)sqlite3_column_text(st, i);
            used += (size_t)snprintf(out + used, cap - used, "%s|", v ? v : "NULL");
            assert_true(used < cap);
        }
        used += (size_t)snprintf(out + used, cap - used, "\n");
    }
    sqlite3_finalize(st);
    return out;
}

static int64_t count_rows(stg_store *s, const char *table)
{
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", table);
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(stg__store_db(s), sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    int64_t n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return n;
}

static const char mixed[] =
    "{\"id\":\"a\",\"url\":\"http://127.0.0.1:1/a\"}\n"
    "# a comment\n"
    "{\"id\":\"b\",\"url\":\"http://127.0.0.1:1/b?api_key=S3CRET\"}\n"
    "not json\n"
    "{\"id\":\"a\",\"url\":\"http://127.0.0.1:1/again\"}\n"
    "{\"id\":\"c\",\"method\":\"POST\",\"url\":\"http://127.0.0.1:1/c\",\"body\":{\"n\":1},"
    "\"headers\":{\"Authorization\":\"Bearer T0KEN\",\"X-Trace\":\"t\"}}\n"
    "\n"
    "{\"url\":\"http://127.0.0.1:1/d\"}\n"
    "{\"id\":\"8\",\"url\":\"http://127.0.0.1:1/e\"}\n"
    "{\"id\":\"b\",\"url\":\"http://127.0.0.1:1/b?api_key=S3CRET\"}\n";

/* The stream writes the rows, bad lines and meta the whole-set import
 * writes, and repeats (JSONL ids, a line-number id included) are found by
 * the database with the same message. */
static void test_stream_matches_set(void **state)
{
    (void)state;
    stg_store *a = open_new("set.db"), *b = open_new("stream.db");
    FILE *f = fmemopen((void *)mixed, strlen(mixed), "r");
    stg_job_set set;
    char err[256];
    assert_int_equal(stg__input_read(f, NULL, &set, err, sizeof err), STG_OK);
    fclose(f);
    bool imported;
    assert_int_equal(stg__store_import(a, &set, "/in", 1000, &imported), STG_OK);
    assert_true(imported);

    bad_log bad = {0};
    stg_store_import_result res;
    assert_int_equal(stream(b, mixed, NULL, false, &bad, NULL, &res), STG_OK);
    assert_true(res.imported);
    assert_false(res.refused);
    assert_int_equal(res.jobs, set.n);
    assert_int_equal(res.jobs, 4); /* a, b, c, 8 (line 8's default id) */
    assert_int_equal(res.bad, set.n_bad);
    assert_int_equal(res.lines, 10);
    assert_int_equal(res.format, STG_INPUT_JSONL);
    assert_string_equal(res.fingerprint, set.fingerprint);
    assert_string_equal(bad.text, "4:bad JSON: invalid syntax (column 3)\n"
                                  "5:repeated id (first on line 1); skipped\n"
                                  "9:repeated id (first on line 8); skipped\n"
                                  "10:repeated id (first on line 3); skipped\n");
    static const char *const q[] = {
        "SELECT id, key, line, method, url, url_redacted, headers, hex(body), "
        "idempotency_key, needs_input, replay_safe, state FROM jobs ORDER BY id",
        "SELECT line, message FROM bad_lines ORDER BY line",
        "SELECT key, value FROM meta WHERE key NOT IN ('created_at') ORDER BY key"};
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) {
        char *da = dump(a, q[i]), *db = dump(b, q[i]);
        assert_string_equal(da, db);
        free(da);
        free(db);
    }
    char *jobs = dump(b, q[0]);
    assert_null(strstr(jobs, "S3CRET"));
    assert_null(strstr(jobs, "T0KEN"));
    free(jobs);
    stg__job_set_free(&set);
    stg__store_close(a);
    stg__store_close(b);
}

/* Keys: "repeated key", as the whole-set reader says it. */
static void test_stream_repeated_key(void **state)
{
    (void)state;
    stg_store *s = open_new("keys.db");
    stg_input_options io = {.url_template = "http://127.0.0.1:1/k/{}"};
    bad_log bad = {0};
    stg_store_import_result res;
    assert_int_equal(stream(s, "k1\nk2\nk1\nk3\nk2\n", &io, false, &bad, NULL, &res), STG_OK);
    assert_int_equal(res.jobs, 3);
    assert_string_equal(bad.text, "3:repeated key (first on line 1); skipped\n"
                                  "5:repeated key (first on line 2); skipped\n");
    char *ids = dump(s, "SELECT id, key, line FROM jobs ORDER BY id");
    assert_string_equal(ids, "1|k1|1|\n2|k2|2|\n3|k3|4|\n");
    free(ids);
    stg__store_close(s);
}

/* --strict with a bad line, or no job at all: refused, nothing written. */
static void test_stream_refused(void **state)
{
    (void)state;
    stg_store *s = open_new("refused.db");
    bad_log bad = {0};
    stg_store_import_result res;
    assert_int_equal(stream(s, mixed, NULL, true, &bad, NULL, &res), STG_OK);
    assert_true(res.refused);
    assert_false(res.imported);
    assert_int_equal(res.bad, 4);
    assert_int_equal(bad.n, 4);
    bool has = true;
    assert_int_equal(stg__store_has_jobs(s, &has), STG_OK);
    assert_false(has);
    assert_int_equal(count_rows(s, "jobs"), 0);
    assert_int_equal(count_rows(s, "bad_lines"), 0);
    assert_int_equal(stream(s, "# nothing\n\nnot a url\n", NULL, false, NULL, NULL, &res),
                     STG_OK);
    assert_true(res.refused);
    assert_int_equal(res.jobs, 0);
    assert_int_equal(count_rows(s, "bad_lines"), 0);
    /* Then the real one goes in. */
    assert_int_equal(stream(s, mixed, NULL, false, NULL, NULL, &res), STG_OK);
    assert_true(res.imported);
    assert_int_equal(count_rows(s, "jobs"), 4);
    stg__store_close(s);
}

/* A store holding the set: checked, nothing written, bad lines reported
 * again; twice in a row (the TEMP table of repeats goes with the
 * rollback). Another set: STG_ESTATE naming both. */
static void test_stream_check_stored(void **state)
{
    (void)state;
    stg_store *s = open_new("check.db");
    stg_store_import_result res;
    assert_int_equal(stream(s, mixed, NULL, false, NULL, NULL, &res), STG_OK);
    char fp[65];
    memcpy(fp, res.fingerprint, sizeof fp);
    /* Comments moved, a blank line added, a token rotated: the same set. */
    const char *same = "\n# moved\n"
                       "{\"id\":\"a\",\"url\":\"http://127.0.0.1:1/a\"}\n"
                       "{\"id\":\"b\",\"url\":\"http://127.0.0.1:1/b?api_key=OTHER\"}\n"
                       "not json\n"
                       "{\"id\":\"a\",\"url\":\"http://127.0.0.1:1/again\"}\n"
                       "{\"id\":\"c\",\"method\":\"POST\",\"url\":\"http://127.0.0.1:1/c\","
                       "\"body\":{\"n\":1},\"headers\":{\"Authorization\":\"Bearer NEW\","
                       "\"X-Trace\":\"t\"}}\n"
                       "{\"url\":\"http://127.0.0.1:1/d\"}\n"
                       "{\"url\":\"http://127.0.0.1:1/e\",\"id\":\"8\"}\n";
    static const char all_rows[] = "SELECT 'j', id, key, line, url, state FROM jobs UNION ALL "
                                   "SELECT 'b', line, message, 0, 0, 0 FROM bad_lines UNION ALL "
                                   "SELECT 'm', key, value, 0, 0, 0 FROM meta ORDER BY 1, 2";
    char *before = dump(s, all_rows);
    for (int round = 0; round < 2; round++) {
        bad_log bad = {0};
        stg_input_secrets sec = {0};
        assert_int_equal(stream(s, same, NULL, false, &bad, &sec, &res), STG_OK);
        assert_false(res.imported);
        assert_false(res.refused);
        assert_string_equal(res.fingerprint, fp);
        assert_string_equal(bad.text, "5:bad JSON: invalid syntax (column 3)\n"
                                      "6:repeated id (first on line 3); skipped\n"
                                      "9:repeated id (first on line 8); skipped\n");
        /* The secrets of this input, by the stored ids. */
        assert_int_equal(sec.n, 2);
        const stg_job_spec *b = stg__input_secrets_find(&sec, 2, "b");
        assert_non_null(b);
        assert_string_equal(b->url, "http://127.0.0.1:1/b?api_key=OTHER");
        assert_non_null(stg__input_secrets_find(&sec, 3, "c"));
        stg__input_secrets_free(&sec);
    }
    char *after = dump(s, all_rows);
    assert_string_equal(after, before);
    free(before);
    free(after);
    /* And the check left no table behind (the rollback took it). */
    char *temp = dump(s, "SELECT name FROM sqlite_temp_master");
    assert_string_equal(temp, "");
    free(temp);
    assert_int_equal(count_rows(s, "bad_lines"), 4); /* the import's, not the checks' */
    assert_int_equal(stream(s, "http://127.0.0.1:1/x\n", NULL, false, NULL, NULL, &res),
                     STG_ESTATE);
    /* the same path, another content: the input changed (issue #37) */
    assert_non_null(strstr(stg__store_errmsg(s), "the input changed since this database was "
                                                "made from it (4 \u2192 1 jobs"));
    assert_int_equal(count_rows(s, "jobs"), 4);
    stg__store_close(s);
}

/* Only the jobs with a secret URL or header are kept, under their stored
 * ids: the URL when it is the secret part, all the headers when one is,
 * nothing else. */
static void test_stream_keeps_only_secrets(void **state)
{
    (void)state;
    stg_store *s = open_new("secrets.db");
    stg_input_secrets sec = {0};
    stg_store_import_result res;
    assert_int_equal(stream(s, mixed, NULL, false, NULL, &sec, &res), STG_OK);
    assert_int_equal(sec.n, 2);
    assert_int_equal(sec.ids[0], 2);
    assert_int_equal(sec.ids[1], 3);
    const stg_job_spec *b = stg__input_secrets_find(&sec, 2, "b");
    assert_non_null(b);
    assert_string_equal(b->url, "http://127.0.0.1:1/b?api_key=S3CRET");
    assert_null(b->method);
    assert_null(b->url_redacted);
    const stg_job_spec *c = stg__input_secrets_find(&sec, 3, "c");
    assert_non_null(c);
    assert_int_equal(c->n_headers, 3);
    assert_string_equal(c->headers[0], "Authorization: Bearer T0KEN");
    assert_string_equal(c->headers[1], "X-Trace: t");
    assert_null(c->body);
    assert_null(c->url);        /* not secret: the stored one is whole */
    assert_null(b->headers);    /* none secret: the stored ones are all */
    assert_null(stg__input_secrets_find(&sec, 3, "b")); /* the key must match */
    assert_null(stg__input_secrets_find(&sec, 1, "a")); /* no secret: not kept */
    assert_null(stg__input_secrets_find(&sec, 4, "d"));
    assert_null(stg__input_secrets_find(NULL, 2, "b"));
    /* The stored rows of those jobs hold neither secret. */
    char *rows = dump(s, "SELECT * FROM jobs WHERE needs_input = 1 ORDER BY id");
    assert_null(strstr(rows, "S3CRET"));
    assert_null(strstr(rows, "T0KEN"));
    free(rows);
    stg__input_secrets_free(&sec);
    stg__store_close(s);
}

/* The cursor finds each job by id and key in a file: the first line with
 * the key (not a repeat), in increasing order, again for a lower id (from
 * the top), with the secrets of the line; a key not in the file is NULL. */
static void test_cursor_finds_jobs(void **state)
{
    (void)state;
    const char *path = path_of("cursor.jsonl");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(mixed, f);
    assert_int_equal(fclose(f), 0);
    stg_input_cursor *c = NULL;
    char err[256];
    assert_int_equal(stg__input_cursor_open(path, NULL, &c, err, sizeof err), STG_OK);
    const stg_job_spec *j = stg__input_cursor_find(c, 1, "a");
    assert_non_null(j);
    assert_string_equal(j->url, "http://127.0.0.1:1/a"); /* line 1, not the repeat */
    j = stg__input_cursor_find(c, 2, "b");
    assert_non_null(j);
    assert_string_equal(j->url, "http://127.0.0.1:1/b?api_key=S3CRET");
    assert_int_equal(j->line, 3);
    j = stg__input_cursor_find(c, 3, "c");
    assert_non_null(j);
    assert_string_equal(j->headers[0], "Authorization: Bearer T0KEN");
    assert_ptr_equal(stg__input_cursor_find(c, 3, "c"), j); /* asked again */
    j = stg__input_cursor_find(c, 4, "8");
    assert_non_null(j);
    assert_int_equal(j->line, 8); /* the default id, not line 9's "8" */
    j = stg__input_cursor_find(c, 2, "b"); /* lower: from the top */
    assert_non_null(j);
    assert_int_equal(j->line, 3);
    assert_null(stg__input_cursor_find(c, 5, "zz"));
    j = stg__input_cursor_find(c, 4, "8"); /* still usable after a miss */
    assert_non_null(j);
    assert_int_equal(j->line, 8);
    stg__input_cursor_free(c);
    assert_int_equal(stg__input_cursor_open(path_of("none"), NULL, &c, err, sizeof err),
                     STG_EIO);
    assert_null(c);
}

/* Bad options before any line; a file that cannot be opened. */
static void test_reader_open_errors(void **state)
{
    (void)state;
    stg_input_reader *r = NULL;
    char err[256];
    stg_input_options io = {.url_template = "http://127.0.0.1:1/no-placeholder"};
    assert_int_equal(stg__input_reader_open("/nonexistent/in", &io, &r, err, sizeof err),
                     STG_EINVAL);
    assert_null(r);
    assert_non_null(strstr(err, "{}"));
    assert_int_equal(stg__input_reader_open("/nonexistent/in", NULL, &r, err, sizeof err),
                     STG_EIO);
    assert_null(r);
    assert_non_null(strstr(err, "/nonexistent/in"));
}

/* ---- the memory bound -------------------------------------------------------------- */

#define SMALL_N 20000
#define LARGE_N 100000

/* n JSONL lines; with secrets, every job's URL carries an api_key. */
static void write_input(const char *path, int n, bool secrets)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int i = 1; i <= n; i++)
        fprintf(f,
                "{\"id\":\"job-%07d\",\"url\":\"http://127.0.0.1:9/items/%07d%s\","
                "\"headers\":{\"X-Trace\":\"trace-%07d\"}}\n",
                i, i, secrets ? "?api_key=k0123456789" : "", i);
    assert_int_equal(fclose(f), 0);
}

/* The child: import input into a new db, print the peak RSS in KiB. */
static int child_main(const char *mode, const char *input, const char *db)
{
    stg_store *s = NULL;
    char err[640];
    stg_store_options so = {.create = true, .exclusive = true};
    if (stg__store_open(db, &so, &s, err, sizeof err) != STG_OK) {
        fprintf(stderr, "child: %s\n", err);
        return 1;
    }
    int rc;
    stg_input_secrets sec = {0};
    size_t found = 0;
    if (!strcmp(mode, "set")) {
        stg_job_set set;
        bool imported;
        rc = stg__input_read_path(input, NULL, &set, err, sizeof err);
        if (rc == STG_OK)
            rc = stg__store_import(s, &set, input, 1000, &imported);
        /* The peak is taken below, after the set is freed: it is the peak. */
        stg__job_set_free(&set);
    } else {
        /* "stream": the secrets kept (an input read once); "cursor": none
         * kept, then every job found again in the file, as a run would. */
        bool cursor = !strcmp(mode, "cursor");
        stg_input_reader *r = NULL;
        stg_store_import_result res;
        stg_store_import_options o = {.input_path = input,
                                      .now_ms = 1000,
                                      .secrets = cursor ? NULL : &sec};
        rc = stg__input_reader_open(input, NULL, &r, err, sizeof err);
        if (rc == STG_OK)
            rc = stg__store_import_stream(s, r, &o, &res);
        stg__input_reader_free(r);
        stg_input_cursor *c = NULL;
        if (rc == STG_OK && cursor)
            rc = stg__input_cursor_open(input, NULL, &c, err, sizeof err);
        for (int64_t id = 1; rc == STG_OK && c && id <= (int64_t)res.jobs; id++) {
            char key[32];
            snprintf(key, sizeof key, "job-%07lld", (long long)id);
            const stg_job_spec *j = stg__input_cursor_find(c, id, key);
            if (!j || !j->url)
                rc = STG_ENOTFOUND;
            else if (j->url_secret)
                found++; /* counted, not kept */
        }
        stg__input_cursor_free(c);
    }
    if (rc != STG_OK) {
        fprintf(stderr, "child: import: %d %s\n", rc, stg__store_errmsg(s));
        return 1;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("%ld %zu\n", ru.ru_maxrss, sec.n + found);
    stg__input_secrets_free(&sec);
    stg__store_close(s);
    return 0;
}

static char g_self[4096];

/* Peak RSS (KiB) of a child importing n lines by mode; *kept the number of
 * jobs whose secrets it kept. */
static long peak_kib(const char *mode, int n, bool secrets, size_t *kept)
{
    char input[600], db[600], cmd[8192];
    snprintf(input, sizeof input, "%s/in-%d-%d.jsonl", g_dir, n, secrets);
    snprintf(db, sizeof db, "%s/mem-%s-%d-%d.db", g_dir, mode, n, secrets);
    struct stat st;
    if (stat(input, &st) != 0)
        write_input(input, n, secrets);
    unlink(db);
    snprintf(cmd, sizeof cmd, "'%s' --child %s '%s' '%s'", g_self, mode, input, db);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    long kib = -1;
    size_t k = 0;
    int got = fscanf(p, "%ld %zu", &kib, &k);
    assert_int_equal(pclose(p), 0);
    assert_int_equal(got, 2);
    if (kept)
        *kept = k;
    unlink(db);
    return kib;
}

/* What the stream may add for LARGE_N - SMALL_N more jobs that carry no
 * secret: no per-job state is kept, so less than a quarter of one
 * stg_job_spec struct per job (which the whole-set path keeps, strings
 * not counted) covers allocator and page-cache noise, and any per-job
 * growth at all fails it. */
static long bound_kib(int extra_jobs)
{
    return (long)((size_t)extra_jobs * sizeof(stg_job_spec) / 4 / 1024);
}

static void test_stream_memory_bounded(void **state)
{
    (void)state;
    int extra = LARGE_N - SMALL_N;
    long small = peak_kib("stream", SMALL_N, false, NULL);
    long large = peak_kib("stream", LARGE_N, false, NULL);
    long bound = bound_kib(extra);
    print_message("stream: %d lines %ld KiB, %d lines %ld KiB (bound +%ld KiB)\n", SMALL_N,
                  small, LARGE_N, large, bound);
    assert_true(large - small < bound);
    /* The measure sees the growth of the whole-set path. */
    long set_small = peak_kib("set", SMALL_N, false, NULL);
    long set_large = peak_kib("set", LARGE_N, false, NULL);
    print_message("set: %d lines %ld KiB, %d lines %ld KiB\n", SMALL_N, set_small, LARGE_N,
                  set_large);
    assert_true(set_large - set_small > bound);
}

/* Every job carries a secret, and the run finds each one in the file
 * again (the cursor): nothing per job is kept, the same bound holds. */
static void test_cursor_memory_bounded(void **state)
{
    (void)state;
    size_t k_small = 0, k_large = 0;
    long small = peak_kib("cursor", SMALL_N, true, &k_small);
    long large = peak_kib("cursor", LARGE_N, true, &k_large);
    assert_int_equal(k_small, SMALL_N);
    assert_int_equal(k_large, LARGE_N);
    long bound = bound_kib(LARGE_N - SMALL_N);
    print_message("cursor: %d lines %ld KiB, %d lines %ld KiB (bound +%ld KiB)\n", SMALL_N,
                  small, LARGE_N, large, bound);
    assert_true(large - small < bound);
}

/* Every job carries a secret, and the input can be read only once: the
 * stream keeps each one's key and URL (the state it promises, bounded by
 * their count), still less than the whole-set path keeps. */
static void test_stream_memory_secrets(void **state)
{
    (void)state;
    size_t k_small = 0, k_large = 0;
    long small = peak_kib("stream", SMALL_N, true, &k_small);
    long large = peak_kib("stream", LARGE_N, true, &k_large);
    assert_int_equal(k_small, SMALL_N);
    assert_int_equal(k_large, LARGE_N);
    long set_small = peak_kib("set", SMALL_N, true, NULL);
    long set_large = peak_kib("set", LARGE_N, true, NULL);
    print_message("secrets: stream +%ld KiB, set +%ld KiB for %d more jobs\n", large - small,
                  set_large - set_small, LARGE_N - SMALL_N);
    assert_true(large - small < set_large - set_small);
}

int main(int argc, char **argv)
{
    if (argc == 5 && !strcmp(argv[1], "--child"))
        return child_main(argv[2], argv[3], argv[4]);
    ssize_t n = readlink("/proc/self/exe", g_self, sizeof g_self - 1);
    if (n <= 0)
        return 1;
    g_self[n] = '\0';
    /* Under ASan, freed memory waits in a quarantine (256 MB by default):
     * the child's peak would count what it freed. Without it the peak is
     * live memory plus its shadow, which is what this test bounds. */
    const char *asan = getenv("ASAN_OPTIONS");
    char opts[1024];
    snprintf(opts, sizeof opts, "%s%squarantine_size_mb=0:thread_local_quarantine_size_kb=0",
             asan ? asan : "", asan && *asan ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_matches_set),
        cmocka_unit_test(test_stream_repeated_key),
        cmocka_unit_test(test_stream_refused),
        cmocka_unit_test(test_stream_check_stored),
        cmocka_unit_test(test_stream_keeps_only_secrets),
        cmocka_unit_test(test_cursor_finds_jobs),
        cmocka_unit_test(test_reader_open_errors),
        cmocka_unit_test(test_stream_memory_bounded),
        cmocka_unit_test(test_cursor_memory_bounded),
        cmocka_unit_test(test_stream_memory_secrets),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
