/*
 * Unit tests of the batch progress line (src/cli/progress.c, compiled in):
 * at every width from 1 to 200 columns no line is longer than the width
 * minus one and the counts stay; at each width the same fields, at the
 * same columns, whatever the values (issue #37: fields came and went
 * between redraws); the rate is over the last 5 s (the first redraw
 * already has one, an outage shows 0); the ETA is what is left, times the
 * attempts a job takes, over the limiter's rate (capped by a slower recent
 * rate), never the average since the start; the final line says finished
 * and the rate the runner gives (the report's).
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
        if (w >= 40) /* the count and the ETA are always there at 40 */
            assert_non_null(strstr(buf, "65432/123456  ETA"));
        if (w >= 80) /* rate, done, failed and the 429 share at 80 */
            if (!strstr(buf, "429"))
                fail_msg("width %d: %s", w, buf);
        if (w >= 120 && !strstr(buf, "review      1")) /* the whole line */
            fail_msg("width %d: %s", w, buf);
    }
    progress_end(&p);
}

/* Where each field starts on a line ("name" -> column), by the labels. */
static int column(const char *line, const char *label)
{
    const char *at = strstr(line, label);
    return at ? (int)(at - line) : -1;
}

/* At 40, 80, 100 and 120 columns the fields shown, and their columns, do
 * not change as the numbers grow (the old line dropped done/failed/429 at
 * 80 columns once the rate had three digits). */
static void test_fields_keep_place(void **st)
{
    (void)st;
    static const char *const labels[] = {"ETA", "jobs/s", "done", "failed", "429",
                                         "deferred", "review"};
    static const int widths[] = {40, 80, 100, 120};
    for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++) {
        int want[7] = {0}, len0 = -1;
        for (int step = 0; step < 6; step++) {
            progress p;
            progress_init(&p, PROGRESS_NONE, stderr, 0, 0);
            /* from nothing measured to 2000 jobs/s, an ETA from ? to hours */
            uint64_t fin = step == 0 ? 0 : (uint64_t)(step * step * 2000);
            progress_state s = state(20000, step * 3000, fin * 2, fin);
            s.failed = step * 100, s.deferred = step * 7, s.review = step, s.status_429 = fin;
            progress_state s0 = state(20000, 0, 0, 0);
            progress_draw(&p, &s0, 0);
            progress_draw(&p, &s, step == 5 ? 100000000 : 1000000);
            char buf[512];
            size_t n = progress_format(&p, &s, true, false, widths[wi], buf, sizeof buf);
            for (int l = 0; l < 7; l++) {
                int c = column(buf, labels[l]);
                if (step == 0)
                    want[l] = c;
                else if (c != want[l])
                    fail_msg("%d cols, step %d: '%s' at %d, was at %d: %s", widths[wi], step,
                             labels[l], c, want[l], buf);
            }
            if (step == 0)
                len0 = (int)n;
            else if ((int)n != len0)
                fail_msg("%d cols: the line's length changed %d -> %zu: %s", widths[wi], len0,
                         n, buf);
            progress_end(&p);
        }
        if (widths[wi] >= 80)
            for (int l = 0; l < 5; l++) /* ETA, rate, done, failed, 429 */
                if (want[l] < 0)
                    fail_msg("%d cols: no '%s'", widths[wi], labels[l]);
        if (widths[wi] == 40 && (want[0] < 0 || want[1] < 0))
            fail_msg("40 cols: no ETA or rate");
    }
}

/* The rate is over the last seconds: the first redraw has one (48 jobs in
 * 0.2 s is 240/s, not "0.0"), and an outage (nothing finishes for 5 s)
 * brings it to 0 rather than a slowly falling average. */
static void test_rate_window(void **st)
{
    (void)st;
    progress p;
    progress_init(&p, PROGRESS_NONE, stderr, 0, 0);
    progress_state s = state(1000, 48, 48, 48);
    progress_draw(&p, &s, 200000);
    char buf[512];
    progress_format(&p, &s, false, false, 0, buf, sizeof buf);
    if (!strstr(buf, "240.0 jobs/s"))
        fail_msg("first redraw: %s", buf);
    /* 10 jobs a second for 10 s */
    for (int i = 1; i <= 50; i++) {
        s = state(1000, 48 + 2 * i, 48 + 2 * (uint64_t)i, 48 + 2 * (uint64_t)i);
        progress_draw(&p, &s, 200000 + (int64_t)i * 200000);
    }
    progress_format(&p, &s, false, false, 0, buf, sizeof buf);
    if (!strstr(buf, "10.0 jobs/s (last 5 s)"))
        fail_msg("steady: %s", buf);
    /* then nothing for 3 s: the window holds 2 s of 10/s -> 4/s */
    int64_t t = 200000 + 50 * 200000;
    for (int i = 1; i <= 15; i++)
        progress_draw(&p, &s, t + (int64_t)i * 200000);
    progress_format(&p, &s, false, false, 0, buf, sizeof buf);
    if (!strstr(buf, " 4.0 jobs/s"))
        fail_msg("3 s outage: %s", buf);
    /* 5 s without a finished job: 0, and the ETA unknown (no fixed limit) */
    for (int i = 16; i <= 26; i++)
        progress_draw(&p, &s, t + (int64_t)i * 200000);
    progress_format(&p, &s, false, false, 0, buf, sizeof buf);
    if (!strstr(buf, " 0.0 jobs/s") || !strstr(buf, "ETA ?"))
        fail_msg("5 s outage: %s", buf);
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
    progress_final(&p, &s, 71.1); /* the runner's figure: the report's jobs/s */
    progress_format(&p, &s, true, true, 120, buf, sizeof buf);
    assert_non_null(strstr(buf, "30/30  finished"));
    assert_non_null(strstr(buf, "71.1 jobs/s  done 30  failed  0"));
    assert_null(strstr(buf, "ETA"));
    progress_format(&p, &s, true, true, 40, buf, sizeof buf);
    if (!strstr(buf, "30/30  finished") || !strstr(buf, "71.1 jobs/s"))
        fail_msg("40 cols: %s", buf);
    progress_format(&p, &s, false, true, 0, buf, sizeof buf);
    assert_non_null(strstr(buf, "batch: 30/30 ended (done 30,"));
    assert_non_null(strstr(buf, "71.1 jobs/s, 429 0.0%, finished"));
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
    assert_non_null(strstr(buf, "conc   27"));
    /* the plain lines say what each number is: jobs claimed (sending or
     * waiting) beside the learned limit of requests at once */
    s.inflight = 209;
    progress_format(&p, &s, false, false, 0, buf, sizeof buf);
    assert_non_null(strstr(buf, ", 209 claimed (sending or waiting)"));
    assert_non_null(strstr(buf, ", at most 27 requests at once (learned)"));
    assert_null(strstr(buf, "in flight"));
    size_t n = progress_format(&p, &s, true, false, 40, buf, sizeof buf);
    assert_true(n <= 39);
    assert_null(strstr(buf, "conc"));
    progress_end(&p);
}

/* A queue worker's line (batch_loop with batch_queue.c's facts): the
 * whole queue's counts and pace, its own jobs in flight, and Redis away
 * said in the line and, as wide as "here", in the bar. */
static void test_queue_worker(void **st)
{
    (void)st;
    progress p;
    progress_init(&p, PROGRESS_NONE, stderr, 0, 0);
    progress_state s = state(1000, 0, 0, 0);
    s.queue = true;
    progress_draw(&p, &s, 0);
    /* the queue ended 100 in 2 s, this worker sent 10 of them */
    s = state(1000, 100, 10, 100);
    s.queue = true, s.inflight = 12, s.left = 900, s.here = 3;
    progress_draw(&p, &s, 2000000);
    char buf[512];
    progress_format(&p, &s, false, false, 0, buf, sizeof buf);
    if (!strstr(buf, "batch: 100/1000 ended (done 100,") || !strstr(buf, " 50.0 jobs/s") ||
        !strstr(buf, "12 claimed (sending or waiting; 3 here)") || strstr(buf, "Redis away"))
        fail_msg("queue line: %s", buf);
    assert_true(progress_eta(&p, &s) == 18.0); /* 900 left at the queue's 50/s */
    char bar[512];
    size_t n_here = progress_format(&p, &s, true, false, 200, bar, sizeof bar);
    if (!strstr(bar, "  here    3"))
        fail_msg("queue bar: %s", bar);
    s.kept = true;
    progress_format(&p, &s, false, false, 0, buf, sizeof buf);
    if (!strstr(buf, "here), Redis away: outcomes kept"))
        fail_msg("Redis away line: %s", buf);
    size_t n_away = progress_format(&p, &s, true, false, 200, bar, sizeof bar);
    if (!strstr(bar, "Redis away") || strstr(bar, "here") || n_away != n_here)
        fail_msg("Redis away bar (%zu vs %zu): %s", n_away, n_here, bar);
    /* a database's line says neither */
    s.queue = false;
    progress_format(&p, &s, false, false, 0, buf, sizeof buf);
    if (strstr(buf, "here") || strstr(buf, "Redis"))
        fail_msg("database line: %s", buf);
    progress_end(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_width),
        cmocka_unit_test(test_fields_keep_place),
        cmocka_unit_test(test_rate_window),
        cmocka_unit_test(test_eta_from_limit),
        cmocka_unit_test(test_eta_recent_rate),
        cmocka_unit_test(test_final),
        cmocka_unit_test(test_concurrency),
        cmocka_unit_test(test_queue_worker),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
