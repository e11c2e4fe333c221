/*
 * Unit tests of libstagger-batch's pure parts: the reason -> job state
 * mapping (every reason, replay-safe or not, sent or not), the error line,
 * body file names and their mode, and the counts. The runner itself is
 * tested against a real server in tests/integration/test_batch_lib.c.
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmocka_all.h"

#include "batch/batch.h"

static stg_result give_up(stg_reason why, int status)
{
    stg_result r;
    memset(&r, 0, sizeof r);
    r.action = STG_ACTION_GIVE_UP;
    r.reason = why;
    r.status = status;
    r.attempts = 1;
    return r;
}

static void test_state_for(void **state)
{
    (void)state;
    stg_result ok = give_up(STG_REASON_SUCCESS, 200);
    ok.action = STG_ACTION_SUCCESS;
    for (int safe = 0; safe < 2; safe++)
        for (int sent = 0; sent < 2; sent++)
            assert_int_equal(stg__batch_state_for(&ok, safe, sent), STG_JOB_DONE);
    struct {
        stg_reason why;
        int status;
        stg_job_state want;
    } cases[] = {
        {STG_REASON_STATUS_NOT_RETRYABLE, 404, STG_JOB_FAILED},
        {STG_REASON_ERROR_NOT_RETRYABLE, 0, STG_JOB_FAILED},
        {STG_REASON_METHOD_NOT_IDEMPOTENT, 429, STG_JOB_DEFERRED},
        {STG_REASON_METHOD_NOT_IDEMPOTENT, 503, STG_JOB_REVIEW},
        {STG_REASON_METHOD_NOT_IDEMPOTENT, 0, STG_JOB_REVIEW},
        {STG_REASON_ATTEMPTS_EXHAUSTED, 503, STG_JOB_DEFERRED},
        {STG_REASON_DEADLINE, 429, STG_JOB_DEFERRED},
        {STG_REASON_SERVER_WAIT_TOO_LONG, 503, STG_JOB_DEFERRED},
        {STG_REASON_BUDGET_EXHAUSTED, 500, STG_JOB_DEFERRED},
        {STG_REASON_BREAKER_OPEN, 0, STG_JOB_DEFERRED},
        {STG_REASON_LIMITER_UNAVAILABLE, 0, STG_JOB_PENDING},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        stg_result r = give_up(cases[i].why, cases[i].status);
        stg_job_state got = stg__batch_state_for(&r, true, true);
        if (got != cases[i].want)
            fail_msg("%s/%d: %s, want %s", stg_reason_name(cases[i].why), cases[i].status,
                     stg__job_state_name(got), stg__job_state_name(cases[i].want));
    }
    /* cancelled: back to pending, unless it may have had an effect */
    stg_result c = give_up(STG_REASON_CANCELLED, 0);
    assert_int_equal(stg__batch_state_for(&c, true, false), STG_JOB_PENDING);
    assert_int_equal(stg__batch_state_for(&c, true, true), STG_JOB_PENDING);
    assert_int_equal(stg__batch_state_for(&c, false, false), STG_JOB_PENDING);
    assert_int_equal(stg__batch_state_for(&c, false, true), STG_JOB_REVIEW);
    /* the same for a limiter lost before a retry of an attempt that left */
    stg_result l = give_up(STG_REASON_LIMITER_UNAVAILABLE, 0);
    assert_int_equal(stg__batch_state_for(&l, false, false), STG_JOB_PENDING);
    assert_int_equal(stg__batch_state_for(&l, false, true), STG_JOB_REVIEW);
}

static void test_describe(void **state)
{
    (void)state;
    char buf[256];
    stg_result r = give_up(STG_REASON_STATUS_NOT_RETRYABLE, 404);
    stg__batch_describe(&r, buf, sizeof buf);
    assert_string_equal(buf, "HTTP 404: status not retryable");
    r = give_up(STG_REASON_ERROR_NOT_RETRYABLE, 0);
    r.error = STG_NET_RESET;
    snprintf(r.error_text, sizeof r.error_text, "refused");
    stg__batch_describe(&r, buf, sizeof buf);
    assert_non_null(strstr(buf, "(refused)"));
    r = give_up(STG_REASON_BREAKER_OPEN, 0);
    stg__batch_describe(&r, buf, sizeof buf);
    assert_string_equal(buf, "circuit breaker open");
    /* A body over max_body says so, not "transport error". */
    r = give_up(STG_REASON_ERROR_NOT_RETRYABLE, 200);
    r.body_truncated = true;
    snprintf(r.error_text, sizeof r.error_text, "response body larger than max_body (20 bytes)");
    stg__batch_describe(&r, buf, sizeof buf);
    assert_string_equal(buf, "HTTP 200: body larger than --max-body (response body larger than "
                             "max_body (20 bytes))");
    /* Any other answer with a message keeps it. */
    r = give_up(STG_REASON_ERROR_NOT_RETRYABLE, 200);
    snprintf(r.error_text, sizeof r.error_text, "body sink failed");
    stg__batch_describe(&r, buf, sizeof buf);
    assert_non_null(strstr(buf, "(body sink failed)"));
}

static void test_body_files(void **state)
{
    (void)state;
    char name[160];
    stg_job j = {.id = 7, .key = "plain-1.json"};
    stg__batch_body_name(&j, name, sizeof name);
    assert_string_equal(name, "plain-1.json");
    const char *odd[] = {"../etc", ".hidden", "_x", "a/b", "", "sp ace"};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        stg_job o = {.id = 9, .key = (char *)odd[i]};
        stg__batch_body_name(&o, name, sizeof name);
        assert_string_equal(name, "_job-9");
    }
    char dir[] = "/tmp/stg_test_batch.XXXXXX";
    assert_non_null(mkdtemp(dir));
    int dfd = stg__batch_out_open(dir);
    assert_true(dfd >= 0);
    bool in_way = true;
    mode_t old = umask(022);
    assert_int_equal(stg__batch_write_body(dfd, "b1", "hello", 5, &in_way), 0);
    umask(old);
    assert_false(in_way);
    char p[128];
    snprintf(p, sizeof p, "%s/b1", dir);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal((int)st.st_size, 5);
    unlink(p);
    snprintf(p, sizeof p, "%s/missing", dir);
    assert_int_equal(stg__batch_out_open(p), -1);
    close(dfd);
    rmdir(dir);
}

/* A link planted at the temp file's name is never written through (the
 * target keeps its bytes, the write fails with in_way); a stale regular
 * temp file of ours (a killed run's) is replaced; a symbolic link as the
 * directory itself is refused. */
static void test_body_file_links(void **state)
{
    (void)state;
    char dir[] = "/tmp/stg_test_batch.XXXXXX", victim[128], tmp[128], path[128], ldir[128];
    assert_non_null(mkdtemp(dir));
    snprintf(victim, sizeof victim, "%s/victim", dir);
    snprintf(tmp, sizeof tmp, "%s/.k1.tmp", dir);
    FILE *f = fopen(victim, "w");
    assert_non_null(f);
    fputs("precious", f);
    fclose(f);
    assert_int_equal(symlink(victim, tmp), 0);
    int dfd = stg__batch_out_open(dir);
    assert_true(dfd >= 0);
    bool in_way = false;
    assert_int_equal(stg__batch_write_body(dfd, "k1", "evil", 4, &in_way), -1);
    assert_true(in_way);
    struct stat st;
    assert_int_equal(stat(victim, &st), 0);
    assert_int_equal((int)st.st_size, 8); /* untouched */
    assert_int_equal(lstat(tmp, &st), 0);
    assert_true(S_ISLNK(st.st_mode)); /* left for the user to see */
    unlink(tmp);
    /* A stale temp file of ours: replaced, the body lands. */
    f = fopen(tmp, "w");
    assert_non_null(f);
    fputs("stale stale stale", f);
    fclose(f);
    assert_int_equal(stg__batch_write_body(dfd, "k1", "new", 3, &in_way), 0);
    assert_false(in_way);
    snprintf(path, sizeof path, "%s/k1", dir);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal((int)st.st_size, 3);
    assert_int_equal(lstat(tmp, &st), -1);
    close(dfd);
    /* The directory itself a link: refused. */
    snprintf(ldir, sizeof ldir, "%s.link", dir);
    assert_int_equal(symlink(dir, ldir), 0);
    assert_int_equal(stg__batch_out_open(ldir), -1);
    unlink(ldir);
    unlink(path);
    unlink(victim);
    rmdir(dir);
}

static void test_counts(void **state)
{
    (void)state;
    int64_t n[STG_JOB_NSTATES] = {5, 0, 2, 1, 0, 0};
    stg_batch_counts c;
    stg__batch_counts_set(&c, n);
    assert_int_equal(c.total, 8);
    assert_int_equal(stg__batch_counts_left(&c), 5);
    assert_int_equal(stg__batch_counts_ended(&c), 3);
    stg__batch_counts_move(&c, STG_JOB_PENDING, STG_JOB_INFLIGHT);
    stg__batch_counts_move(&c, STG_JOB_INFLIGHT, STG_JOB_REVIEW);
    assert_int_equal(c.n[STG_JOB_PENDING], 4);
    assert_int_equal(c.n[STG_JOB_INFLIGHT], 0);
    assert_int_equal(c.n[STG_JOB_REVIEW], 1);
    assert_int_equal(stg__batch_counts_ended(&c), 4);
    assert_int_equal(c.total, 8);
    assert_string_equal(stg__batch_cause_name(STG_BATCH_LIMITER), "limiter");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_state_for),
        cmocka_unit_test(test_describe),
        cmocka_unit_test(test_body_files),
        cmocka_unit_test(test_body_file_links),
        cmocka_unit_test(test_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
