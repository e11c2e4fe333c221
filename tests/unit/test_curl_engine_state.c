/*
 * The engine's lifecycle (src/curl/engine_state.c): the table of legal
 * moves, an illegal move stopped by its assertion, and STAGGER_TRACE's
 * trace of every move of a request's life, in order.
 *
 * The life traced is a request to a closed port on 127.0.0.1 (connection
 * refused, retried once after a 5 ms backoff): submit, send, backoff,
 * back to the retry queue, send, finish; and one cancelled in the new
 * queue. Only loopback is contacted.
 */
#define _GNU_SOURCE
#if defined(__has_include) && !__has_include(<curl/curl.h>)
/* libstagger-curl is not built here (no libcurl): nothing to test. */
#include <stdio.h>
int main(void);
int main(void)
{
    puts("skipped: libstagger-curl is not built (no libcurl)");
    return 77; /* SKIP_RETURN_CODE: ctest reports it skipped */
}
#else
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cmocka_all.h"

#include "curl/engine.h"

static void test_table(void **state)
{
    (void)state;
    /* Every state has a name; out of range is "unknown". */
    for (int s = 0; s < RQ_S_COUNT; s++)
        assert_string_not_equal(stg__eng_state_name((rq_state)s), "unknown");
    assert_string_equal(stg__eng_state_name(RQ_S_COUNT), "unknown");
    assert_string_equal(stg__eng_state_name(RQ_S_LIMITER), "timer:limiter");
    /* A few rows, and moves that are not. */
    assert_string_equal(stg__eng_move_name(RQ_S_SUBMIT, RQ_S_NEW), "submit");
    assert_string_equal(stg__eng_move_name(RQ_S_NEW, RQ_S_ACTIVE), "send");
    assert_string_equal(stg__eng_move_name(RQ_S_LIMITER, RQ_S_ACTIVE), "send");
    assert_string_equal(stg__eng_move_name(RQ_S_ACTIVE, RQ_S_BACKOFF), "backoff");
    assert_null(stg__eng_move_name(RQ_S_SUBMIT, RQ_S_ACTIVE)); /* admission first */
    assert_null(stg__eng_move_name(RQ_S_ACTIVE, RQ_S_ACTIVE));
    assert_null(stg__eng_move_name(RQ_S_BACKOFF, RQ_S_ACTIVE)); /* through admission */
    assert_null(stg__eng_move_name(RQ_S_ACTIVE, RQ_S_PACE_Q));
    assert_null(stg__eng_move_name(RQ_S_CONC_Q, RQ_S_ACTIVE));
    /* A server quota's waiters: behind its head until promoted, then
     * through admission (only the head asks the quotas). */
    assert_string_equal(stg__eng_state_name(RQ_S_QUOTA_Q), "timer:quota_q");
    assert_string_equal(stg__eng_move_name(RQ_S_RETRY, RQ_S_QUOTA_Q), "behind the quota head");
    assert_string_equal(stg__eng_move_name(RQ_S_NEW, RQ_S_QUOTA_Q), "behind the quota head");
    assert_string_equal(stg__eng_move_name(RQ_S_QUOTA_Q, RQ_S_RETRY), "promoted to quota head");
    assert_null(stg__eng_move_name(RQ_S_QUOTA_Q, RQ_S_ACTIVE));
    assert_null(stg__eng_move_name(RQ_S_QUOTA_Q, RQ_S_QUOTA));
    assert_null(stg__eng_move_name(RQ_S_ACTIVE, RQ_S_QUOTA_Q));
    /* FINISHED from every state but itself, and nothing leaves it. */
    for (int s = 0; s < RQ_S_COUNT; s++) {
        if (s == RQ_S_FINISHED)
            assert_null(stg__eng_move_name((rq_state)s, RQ_S_FINISHED));
        else
            assert_non_null(stg__eng_move_name((rq_state)s, RQ_S_FINISHED));
        assert_null(stg__eng_move_name(RQ_S_FINISHED, (rq_state)s));
    }
    /* A place and a wait make one state. */
    assert_int_equal(stg__eng_state_of(RQ_TIMER, W_QUOTA), RQ_S_QUOTA);
    assert_int_equal(stg__eng_state_of(RQ_TIMER, W_QUOTA_Q), RQ_S_QUOTA_Q);
    assert_int_equal(stg__eng_state_of(RQ_RETRY_Q, W_QUOTA), RQ_S_RETRY);
    assert_int_equal(stg__eng_state_of(RQ_NONE, W_BACKOFF), RQ_S_COUNT);
}

/* A request just submitted (it has left nothing) entering ACTIVE without
 * admission: the assertion stops the process and names the move. */
static void test_illegal_move_caught(void **state)
{
    (void)state;
    if (!STG_ASSERT_ENABLED)
        skip(); /* a Release build: assertions are off */
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        stg_engine_config cfg = {0};
        stg_engine *e = stg_engine_new(&cfg, NULL);
        req *r = calloc(1, sizeof *r);
        if (!e || !r)
            _exit(3);
        r->id = 7;
        r->heap_index = STG__NOT_IN_HEAP;
        stg__eng_enter(e, r, RQ_ACTIVE); /* submit -> active: not a row */
        _exit(0);                        /* not reached when caught */
    }
    close(fds[1]);
    char buf[1024];
    size_t n = 0;
    ssize_t k;
    while (n < sizeof buf - 1 && (k = read(fds[0], buf + n, sizeof buf - 1 - n)) > 0)
        n += (size_t)k;
    buf[n] = '\0';
    close(fds[0]);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSIGNALED(st));
    assert_int_equal(WTERMSIG(st), SIGABRT);
    assert_non_null(strstr(buf, "invariant violated: move != NULL"));
    assert_non_null(strstr(buf, "stg__eng_enter"));
}

/* A loopback port nothing listens on (bound, then closed). */
static int closed_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t len = sizeof a;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

static void on_done(stg_engine *e, uint64_t id, const stg_result *res, void *data)
{
    (void)e;
    (void)id;
    *(stg_result *)data = *res;
}

/* The moves traced for request id, in order, are want[0..n). */
static void expect_life(const char *path, uint64_t id, const char *const *want, size_t n)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[256], tag[64];
    snprintf(tag, sizeof tag, " req=%llu ", (unsigned long long)id);
    size_t i = 0;
    while (fgets(line, sizeof line, f)) {
        assert_true(strncmp(line, "stagger-trace t=", 16) == 0);
        if (!strstr(line, tag))
            continue;
        if (i >= n)
            fail_msg("req %llu: a move after its last: %s", (unsigned long long)id, line);
        if (!strstr(line, want[i]))
            fail_msg("req %llu, move %zu: want \"%s\", got %s", (unsigned long long)id, i,
                     want[i], line);
        i++;
    }
    fclose(f);
    assert_int_equal(i, n);
}

static void test_trace_of_a_life(void **state)
{
    (void)state;
    char path[] = "/tmp/stg-trace-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(setenv("STAGGER_TRACE", path, 1), 0);
    stg_engine_config cfg = {.concurrency = 1};
    cfg.policy.max_attempts = 2;
    cfg.policy.backoff.base_us = STG_MS(5);
    cfg.policy.backoff.cap_us = STG_MS(5);
    stg_engine *e = stg_engine_new(&cfg, NULL);
    unsetenv("STAGGER_TRACE");
    assert_non_null(e);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/x", closed_port());
    stg_request rq = {.url = url};
    stg_result res, res2;
    memset(&res, 0, sizeof res);
    memset(&res2, 0, sizeof res2);
    uint64_t id = 0, id2 = 0;
    assert_int_equal(stg_engine_submit(e, &rq, on_done, &res, &id), STG_OK);
    /* A second one, cancelled in the new queue. */
    assert_int_equal(stg_engine_submit(e, &rq, on_done, &res2, &id2), STG_OK);
    assert_int_equal(stg_engine_cancel(e, id2), STG_OK);
    assert_int_equal(res2.reason, STG_REASON_CANCELLED);
    assert_int_equal(stg_engine_drain(e), 0);
    stg_engine_free(e);
    assert_int_equal(res.attempts, 2);
    assert_int_equal(res.error, STG_NET_CONNECT_REFUSED);

    static const char *const life[] = {
        "submit -> new (submit)",
        "new -> active (send)",
        "active -> timer:backoff (backoff)",
        "timer:backoff -> retry (backoff over)",
        "retry -> active (send)",
        "active -> finished (finish)",
    };
    expect_life(path, id, life, sizeof life / sizeof life[0]);
    static const char *const cancelled[] = {
        "submit -> new (submit)",
        "new -> finished (finish)",
    };
    expect_life(path, id2, cancelled, sizeof cancelled / sizeof cancelled[0]);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_illegal_move_caught),
        cmocka_unit_test(test_trace_of_a_life),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
