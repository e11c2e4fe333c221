/*
 * Loading the work queue from an input, streamed (src/batch/queue_load.c)
 * against a redis-server of its own on 127.0.0.1:
 *  - the bound: 200,000 lines load in pushes of one chunk each (the count
 *    is exact), and the process's peak RSS grows by less than a bound that
 *    comes from a chunk and SQLite's page cache, not from the input (the
 *    whole input as a parsed set is several times that bound: measured
 *    here too, after the streamed load, so it cannot raise its peak);
 *  - the same job set as a whole read: fingerprint, size, ids and keys,
 *    repeats and bad lines; a second load adds nothing;
 *  - refusals push nothing: a secret, --strict with a bad line, no jobs.
 *
 * ASan's quarantine would keep freed memory resident and grow with the
 * allocations made, not with what is live: main turns it off by running
 * itself again with ASAN_OPTIONS extended (harmless without ASan).
 */
#define _GNU_SOURCE
#include "cmocka_all.h"

#include "integration/redis_helper.h"

#include <sys/resource.h>

#include <stagger/redis/queue.h>

#include "batch/queue_load.h"

static int g_seq;

static stg_queue *open_q(char *name, size_t n)
{
    char url[128];
    snprintf(name, n, "load%d", ++g_seq);
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/%s", g_port, name);
    return queue_open(url, "w", 0, 0);
}

static long long xlen(const char *name)
{
    char key[128];
    snprintf(key, sizeof key, "stagger:q:{%s}:jobs", name);
    return raw_int(g_port, "XLEN", key);
}

static long peak_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* n URL lines, each a distinct job. */
static void write_urls(const char *path, long n)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (long i = 1; i <= n; i++)
        fprintf(f, "http://127.0.0.1:9/items/%ld?page=%ld&sort=name\n", i, i % 97);
    fclose(f);
}

typedef struct bads {
    long lines[8];
    int n;
} bads;

static void on_bad(void *data, long line, const char *message)
{
    (void)message;
    bads *b = data;
    if (b->n < 8)
        b->lines[b->n] = line;
    b->n++;
}

static int load_path(stg_queue *q, const char *path, bool strict, bads *b,
                     stg_batch_queue_load_result *res)
{
    stg_input_reader *r = NULL;
    char err[400];
    assert_int_equal(stg__input_reader_open(path, NULL, &r, err, sizeof err), STG_OK);
    stg_batch_queue_load_options o = {.strict = strict, .on_bad = on_bad, .bad_data = b};
    int rc = stg__batch_queue_load(q, r, &o, res);
    stg__input_reader_free(r);
    return rc;
}

static void test_bounded(void **state)
{
    (void)state;
    char dir[] = "/tmp/stg_qload.XXXXXX", small[64], big[64], name[32];
    assert_non_null(mkdtemp(dir));
    snprintf(small, sizeof small, "%s/small.txt", dir);
    snprintf(big, sizeof big, "%s/big.txt", dir);
    const long N = 200000;
    write_urls(small, 2000);
    write_urls(big, N);

    /* The small load first: the allocator, SQLite and the connection have
     * their working sets before the measure. */
    stg_queue *q = open_q(name, sizeof name);
    bads b = {0};
    stg_batch_queue_load_result res;
    assert_int_equal(load_path(q, small, false, &b, &res), STG_OK);
    assert_int_equal(res.jobs, 2000);
    stg_queue_free(q);

    long before = peak_kib();
    q = open_q(name, sizeof name);
    assert_int_equal(load_path(q, big, false, &b, &res), STG_OK);
    long grew = peak_kib() - before;
    assert_int_equal(b.n, 0);
    assert_int_equal(res.jobs, (size_t)N);
    assert_int_equal(res.added, N);
    /* One push per chunk of 200: the input never is in memory at once. */
    assert_int_equal(res.pushes, (N + STG_BATCH_QUEUE_LOAD_CHUNK - 1) / STG_BATCH_QUEUE_LOAD_CHUNK);
    assert_int_equal(xlen(name), N);
    stg_queue_free(q);

    /* What the same input costs as a whole parsed set (the old load). */
    long before_set = peak_kib();
    stg_job_set set;
    char err[400];
    assert_int_equal(stg__input_read_path(big, NULL, &set, err, sizeof err), STG_OK);
    long set_kib = peak_kib() - before_set;
    stg__job_set_free(&set);

    /* The bound: a chunk of jobs (200 x a few KiB with their Redis
     * arguments and reply) plus SQLite's page cache (2 MiB by default, per
     * connection) and the allocator's slack: 16 MiB. */
    print_message("  streamed load of %ld lines: peak RSS +%ld KiB (bound 16384); the whole "
                  "set in memory: +%ld KiB\n",
                  N, grew, set_kib);
    assert_true(grew < 16384);
    assert_true(set_kib > 16384);
    unlink(small);
    unlink(big);
    rmdir(dir);
}

static char *meta_fp(const char *name)
{
    redisContext *c = raw_connect(g_port);
    redisReply *r = redisCommand(c, "HGET stagger:q:{%s}:meta fp", name);
    assert_non_null(r);
    char *fp = r->type == REDIS_REPLY_STRING ? strdup(r->str) : NULL;
    freeReplyObject(r);
    redisFree(c);
    return fp;
}

typedef struct rows {
    int64_t id[8];
    char key[8][16];
    long line[8];
    int n;
} rows;

static int on_row(void *data, const stg_queue_row *row)
{
    rows *rs = data;
    if (rs->n < 8) {
        rs->id[rs->n] = row->id;
        snprintf(rs->key[rs->n], sizeof rs->key[rs->n], "%s", row->key);
        rs->line[rs->n] = (long)row->line;
    }
    rs->n++;
    return 0;
}

static void test_same_set(void **state)
{
    (void)state;
    char path[] = "/tmp/stg_qload_set.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    write_file(path, "{\"id\":\"a\",\"url\":\"http://127.0.0.1:9/a\"}\n"
                     "{\"id\":\"b\",\"url\":\"http://127.0.0.1:9/b\",\"method\":\"POST\","
                     "\"body\":\"x\",\"headers\":{\"X-T\":\"1\"}}\n"
                     "not json\n"
                     "{\"id\":\"a\",\"url\":\"http://127.0.0.1:9/a2\"}\n"
                     "{\"id\":\"c\",\"url\":\"http://127.0.0.1:9/c\"}\n");
    char name[32];
    stg_queue *q = open_q(name, sizeof name);
    bads b = {0};
    stg_batch_queue_load_result res;
    assert_int_equal(load_path(q, path, false, &b, &res), STG_OK);
    assert_int_equal(res.jobs, 3);
    assert_int_equal(res.bad, 2);
    assert_int_equal(b.n, 2);
    assert_int_equal(b.lines[0], 3);
    assert_int_equal(b.lines[1], 4); /* the repeat of a */
    assert_int_equal(res.added, 3);

    /* The fingerprint and ids of the whole set read at once. */
    stg_job_set set;
    char err[400];
    assert_int_equal(stg__input_read_path(path, NULL, &set, err, sizeof err), STG_OK);
    char *fp = meta_fp(name);
    assert_non_null(fp);
    assert_string_equal(fp, set.fingerprint);
    free(fp);
    rows rs = {0};
    assert_int_equal(stg_queue_export(q, 0, false, on_row, &rs), STG_OK);
    assert_int_equal(rs.n, (int)set.n);
    for (int i = 0; i < rs.n; i++) {
        assert_int_equal(rs.id[i], i + 1);
        assert_string_equal(rs.key[i], set.jobs[i].key);
        assert_int_equal(rs.line[i], set.jobs[i].line);
    }
    stg__job_set_free(&set);

    /* Again: idempotent. */
    b = (bads){0};
    assert_int_equal(load_path(q, path, false, &b, &res), STG_OK);
    assert_int_equal(res.added, 0);
    assert_int_equal(xlen(name), 3);
    stg_queue_free(q);

    /* --strict with a bad line: nothing pushed. */
    q = open_q(name, sizeof name);
    assert_int_equal(load_path(q, path, true, &b, &res), STG_OK);
    assert_true(res.refused);
    assert_int_equal(res.pushes, 0);
    assert_int_equal(xlen(name), 0);
    stg_queue_free(q);

    /* A secret on the last line: nothing pushed, that line named. */
    write_file(path, "http://127.0.0.1:9/a\n"
                     "http://127.0.0.1:9/b\n"
                     "http://127.0.0.1:9/c?api_key=s3cr3t\n");
    q = open_q(name, sizeof name);
    assert_int_equal(load_path(q, path, false, &b, &res), STG_OK);
    assert_int_equal(res.secret_line, 3);
    assert_true(res.secret_in_url);
    assert_string_equal(res.secret_key, "3");
    assert_int_equal(res.pushes, 0);
    assert_int_equal(xlen(name), 0);
    stg_queue_free(q);

    /* No jobs. */
    write_file(path, "# nothing\n\n");
    q = open_q(name, sizeof name);
    assert_int_equal(load_path(q, path, false, &b, &res), STG_OK);
    assert_true(res.refused);
    assert_int_equal(res.pushes, 0);
    stg_queue_free(q);
    unlink(path);
}

#define NO_QUARANTINE "quarantine_size_mb=0:thread_local_quarantine_size_kb=0"

int main(int argc, char **argv)
{
    (void)argc;
    const char *asan = getenv("ASAN_OPTIONS");
    if (!asan || !strstr(asan, NO_QUARANTINE)) {
        char opts[2048];
        snprintf(opts, sizeof opts, "%s%s" NO_QUARANTINE, asan ? asan : "",
                 asan && *asan ? ":" : "");
        setenv("ASAN_OPTIONS", opts, 1);
        execv("/proc/self/exe", argv);
        perror("execv /proc/self/exe");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_set),
        cmocka_unit_test(test_bounded),
    };
    return cmocka_run_group_tests(tests, redis_group_setup, redis_group_teardown);
}
