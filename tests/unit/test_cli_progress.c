/*
 * Unit tests of the batch progress line (src/cli/progress.c, compiled in):
 * at every width from 1 to 200 columns no line is longer than the width
 * minus one and the counts stay; the ETA is what is left, times the
 * attempts a job takes, over the limiter's rate (capped by a slower recent
 * rate), never the average since the start; the final line says finished.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>

#include "cmocka_all.h"

#include "cli/progress.h"

static progress_state state(int64_t total, int64_t ended, uint64_t attempts, uint64_t finished)
{
    progress_state s = {.total = total, .ended = ended, .done = ended, .left = total - ended,
                        .attempts = attempts, .finished = finished};
    return s;
}

static void test_width(void **st)
{
    (void)st;
    progress p;
    progress_init(&p, PROGRESS_NONE, stderr, 10, 0);
    progress_state s = state(123456, 65432, 70000, 65432);
    s.failed = 12, s.deferred = 3, s.review = 1, s.status_429 = 420;
    char buf[512];
    for (int w = 1; w <= 200; w++) {
        size_t n = progress_format(&p, &s, true, false, w, buf, sizeof buf);
        assert_int_equal(n, strlen(buf));
        int room = (w < 20 ? 20 : w) - 1;
        if ((int)n > room)
            fail_msg("width %d: %zu characters: %s", w, n, buf);
        if (w >= 40) /* the counts are always there once the bar fits */
            assert_non_null(strstr(buf, "65432/123456"));
        if (w >= 120) /* the whole line */
            assert_non_null(strstr(buf, "review 1"));
    }
    size_t n = progress_format(&p, &s, true, false, 40, buf, sizeof buf);
    assert_true(n <= 39 && buf[0] == '[');
    progress_end(&p);
}

static void test_eta_from_limit(void **st)
{
    (void)st;
    progress p;
    /* --rate 10: 100 jobs left, one attempt each so far -> 10 s */
    progress_init(&p, PROGRESS_NONE, stderr, 10, 0);
    progress_state s = state(200, 100, 100, 100);
    assert_true(progress_eta(&p, &s) == 10.0);
    /* a burst measured faster than the limit does not shorten it */
    s = state(200, 0, 0, 0);
    progress_draw(&p, &s, 0);
    s = state(200, 100, 100, 100);
    progress_draw(&p, &s, 2000000); /* 50 attempts/s measured over 2 s */
    assert_true(progress_eta(&p, &s) == 10.0);
    /* two attempts per job so far: 20 s */
    s = state(200, 100, 200, 100);
    assert_true(progress_eta(&p, &s) == 20.0);
    /* nothing left */
    s = state(200, 200, 250, 200);
    assert_true(progress_eta(&p, &s) == 0.0);
}

static void test_eta_recent_rate(void **st)
{
    (void)st;
    progress p;
    progress_init(&p, PROGRESS_NONE, stderr, 0, 0); /* adaptive: no fixed limit */
    progress_state s = state(1000, 0, 0, 0);
    assert_true(progress_eta(&p, &s) < 0); /* unknown before a rate is measured */
    /* 100 attempts in the first 2 s (a burst), then 10/s for 20 s */
    s = state(1000, 100, 100, 100);
    progress_draw(&p, &s, 2000000);
    for (int i = 1; i <= 20; i++) {
        s = state(1000, 100 + 10 * i, 100 + 10 * (uint64_t)i, 100 + 10 * (uint64_t)i);
        progress_draw(&p, &s, 2000000 + (int64_t)i * 1000000);
    }
    /* 700 left: the recent 10/s (within 10% after 4 time constants), not
     * the average since the start (300 / 22 s = 13.6/s, 51 s) */
    double eta = progress_eta(&p, &s);
    if (eta < 63 || eta > 77)
        fail_msg("eta %.1f s, want about 70 s", eta);
    /* a fixed limit below the recent rate wins */
    p.limit_rps = 5;
    assert_true(progress_eta(&p, &s) == 140.0);
}

static void test_final(void **st)
{
    (void)st;
    progress p;
    progress_init(&p, PROGRESS_NONE, stderr, 10, 0);
    progress_state s = state(30, 30, 30, 30);
    char buf[256];
    progress_format(&p, &s, true, true, 120, buf, sizeof buf);
    assert_non_null(strstr(buf, "30/30  done 30"));
    assert_non_null(strstr(buf, "finished"));
    assert_null(strstr(buf, "ETA"));
    progress_format(&p, &s, false, true, 0, buf, sizeof buf);
    assert_non_null(strstr(buf, "batch: 30/30 ended (done 30,"));
    assert_non_null(strstr(buf, "ETA 0 s"));
}

/* A learned concurrency shows where it stands (bar at full width, and the
 * plain lines); a fixed one shows nothing; narrow bars drop it first. */
static void test_concurrency(void **st)
{
    (void)st;
    progress p;
    progress_init(&p, PROGRESS_NONE, stderr, 10, 0);
    progress_state s = state(100, 40, 40, 40);
    char buf[256];
    progress_format(&p, &s, true, false, 160, buf, sizeof buf);
    assert_null(strstr(buf, "conc"));
    s.concurrency = 27;
    progress_format(&p, &s, true, false, 160, buf, sizeof buf);
    assert_non_null(strstr(buf, "conc 27  ETA"));
    progress_format(&p, &s, false, false, 0, buf, sizeof buf);
    assert_non_null(strstr(buf, ", concurrency 27"));
    size_t n = progress_format(&p, &s, true, false, 40, buf, sizeof buf);
    assert_true(n <= 39);
    assert_null(strstr(buf, "conc"));
    progress_end(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_width),
        cmocka_unit_test(test_eta_from_limit),
        cmocka_unit_test(test_eta_recent_rate),
        cmocka_unit_test(test_final),
        cmocka_unit_test(test_concurrency),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
