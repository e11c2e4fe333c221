/* stagger sim: exact expectations on tiny scenarios (fixed seed, constant
 * delays), and properties of the retry strategies: fixed intervals keep a
 * round together, full jitter spreads it, nobody retries before a
 * Retry-After in honor/exact mode, spread lowers the quota's peak, the same
 * seed gives the same bytes; plus storm, load, budget, breaker, option
 * checks and the output formats. Sizes are small: the whole file runs in a
 * few seconds under ASan. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cmocka_all.h"
#include "sim/sim.h"

static sim_results run(const sim_opts *o)
{
    sim_results r;
    const char *why = sim_opts_check(o);
    if (why)
        fail_msg("options rejected: %s", why);
    assert_int_equal(sim_run(o, &r), STG_OK);
    return r;
}

static double metric(const sim_results *r, size_t row, const char *key)
{
    assert_true(row < r->nrows);
    const sim_stat *s = sim_row_metric(&r->rows[row], key);
    if (!s)
        fail_msg("row %zu has no metric %s", row, key);
    return sim_stat_mean(s);
}

static void one_strategy(sim_opts *o, sim_strategy s)
{
    o->strategies[0] = s;
    o->nstrategies = 1;
}

/* ---- exact expectations --------------------------------------------- */

/* 3 clients, constant 5 ms legs, 1 ms server, 429 twice then 200, fixed
 * 200 ms: arrivals at 5, 216, 427 ms; the last reply at 433 ms. */
static void test_herd_fixed_exact(void **state)
{
    (void)state;
    sim_opts o;
    sim_opts_default(&o, SIM_HERD);
    o.clients[0] = 3;
    o.fail_first = 2;
    o.delay = (sim_delay){STG_MS(5), 0};
    o.server_us = STG_MS(1);
    o.strategies[0] = SIM_FIXED;
    o.strategies[1] = SIM_EXPONENTIAL;
    o.nstrategies = 2;
    sim_results r = run(&o);
    assert_int_equal(r.nrows, 2);
    assert_true(metric(&r, 0, "calls") == 9);
    assert_true(metric(&r, 0, "total_ms") == 433.0);
    assert_true(metric(&r, 0, "max_in_window") == 3);
    assert_true(metric(&r, 0, "failed") == 0);
    assert_int_equal(r.rows[0].nrounds, 3);
    for (int k = 0; k < 3; k++)
        assert_true(sim_stat_mean(&r.rows[0].rounds[k]) == 0.0);
    /* exponential: waits 200 then 400 ms: 5, 216, 627; done at 633 ms */
    assert_true(metric(&r, 1, "calls") == 9);
    assert_true(metric(&r, 1, "total_ms") == 633.0);
    /* chart: 10 ms bins, 3 arrivals at 5 ms, 216 ms and 427 ms */
    assert_int_equal(r.rows[0].bin_us, STG_MS(10));
    assert_int_equal(r.rows[0].nbins, 43);
    assert_int_equal(r.rows[0].bins[0], 3);
    assert_int_equal(r.rows[0].bins[21], 3);
    assert_int_equal(r.rows[0].bins[42], 3);
    sim_results_free(&r);
}

/* A herd whose clients run out of attempts gives up and says so. */
static void test_herd_gives_up(void **state)
{
    (void)state;
    sim_opts o;
    sim_opts_default(&o, SIM_HERD);
    o.clients[0] = 4;
    o.fail_first = 5;
    o.policy.max_attempts = 3;
    o.delay = (sim_delay){STG_MS(5), 0};
    one_strategy(&o, SIM_FIXED);
    sim_results r = run(&o);
    assert_true(metric(&r, 0, "calls") == 12);
    assert_true(metric(&r, 0, "failed") == 4);
    sim_results_free(&r);
}

/* Two writers, constant 10 ms legs, no backoff: both read version 0 at
 * 10 ms; at 30 ms client 0's write lands first and wins; client 1 is told
 * at 40 ms, waits 1 us, reads at 50.001 ms, writes at 70.001 ms, and hears
 * of its success at 80.001 ms. */
static void test_contention_exact(void **state)
{
    (void)state;
    sim_opts o;
    sim_opts_default(&o, SIM_CONTENTION);
    o.clients[0] = 2;
    o.clients[1] = 1;
    o.nclients = 2;
    o.trials = 1;
    o.delay = (sim_delay){STG_MS(10), 0};
    one_strategy(&o, SIM_NONE);
    sim_results r = run(&o);
    assert_true(metric(&r, 0, "calls") == 3);
    assert_true(metric(&r, 0, "total_ms") == 80.001);
    assert_true(metric(&r, 1, "calls") == 1);
    assert_true(metric(&r, 1, "total_ms") == 40.0);
    sim_results_free(&r);
}

/* ---- properties --------------------------------------------------------- */

/* Fixed intervals: every client of a round arrives within one window. */
static void test_fixed_round_in_one_window(void **state)
{
    (void)state;
    sim_opts o;
    sim_opts_default(&o, SIM_HERD);
    o.clients[0] = 60;
    one_strategy(&o, SIM_FIXED);
    o.trials = 3;
    sim_results r = run(&o);
    assert_true(metric(&r, 0, "max_in_window") == 60);
    for (int k = 0; k < r.rows[0].nrounds; k++)
        if (r.rows[0].rounds[k].max >= (double)o.window_us / 1e3)
            fail_msg("round %d spans %.3f ms", k, r.rows[0].rounds[k].max);
    sim_results_free(&r);
}

/* Full jitter: the share of clients in the busiest window falls as N grows
 * (the window gets small against the spread), and stays far below fixed. */
static void test_full_jitter_spreads(void **state)
{
    (void)state;
    sim_opts o;
    sim_opts_default(&o, SIM_HERD);
    o.clients[0] = 20;
    o.clients[1] = 200;
    o.clients[2] = 2000;
    o.nclients = 3;
    one_strategy(&o, SIM_FULL);
    o.trials = 3;
    sim_results r = run(&o);
    double prev = 2;
    for (size_t i = 0; i < 3; i++) {
        double share = metric(&r, i, "max_in_window") / r.rows[i].clients;
        if (!(share < prev))
            fail_msg("N = %d: share %.4f not below %.4f", r.rows[i].clients, share, prev);
        prev = share;
    }
    assert_true(metric(&r, 0, "max_in_window") < 20);
    /* rounds after the first spread over hundreds of milliseconds */
    assert_true(sim_stat_mean(&r.rows[0].rounds[3]) > 100.0);
    sim_results_free(&r);
}

/* Honor and exact never send before the Retry-After; cap does. */
static void test_retry_after_never_early(void **state)
{
    (void)state;
    sim_opts o;
    sim_opts_default(&o, SIM_QUOTA);
    o.clients[0] = 40;
    o.requests = 4;
    o.burst = 10;
    o.limit_rps = 20;
    o.retry_after_us = STG_SEC(2);
    o.trials = 2;
    sim_results r = run(&o);
    assert_int_equal(r.nrows, 3);
    for (size_t i = 0; i < r.nrows; i++) {
        double early = metric(&r, i, "early");
        double throttled = metric(&r, i, "throttled");
        assert_true(throttled > 0);
        if (r.rows[i].mode == STG_RETRY_AFTER_CAP)
            assert_true(early > 0);
        else
            assert_true(early == 0);
    }
    sim_results_free(&r);
}

static void test_quota_spread_lowers_peak(void **state)
{
    (void)state;
    sim_opts o;
    sim_opts_default(&o, SIM_QUOTA);
    o.requests = 3;
    o.modes[0] = STG_RETRY_AFTER_EXACT;
    o.modes[1] = STG_RETRY_AFTER_HONOR;
    o.nmodes = 2;
    o.trials = 2;
    sim_results r = run(&o);
    double exact = metric(&r, 0, "peak_rps"), honor = metric(&r, 1, "peak_rps");
    if (!(honor < exact))
        fail_msg("peak with spread %.0f/s, exact %.0f/s", honor, exact);
    /* nothing is lost either way */
    assert_true(metric(&r, 0, "failed") == 0 && metric(&r, 1, "failed") == 0);
    sim_results_free(&r);
}

static char *dump(const sim_results *r, int (*fn)(FILE *, const sim_results *))
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(fn(f, r), 0);
    assert_int_equal(fclose(f), 0);
    return buf;
}

static void test_same_seed_same_output(void **state)
{
    (void)state;
    int (*fns[])(FILE *, const sim_results *) = {sim_print_table, sim_write_csv, sim_write_json,
                                                 sim_write_svg};
    sim_scenario scs[] = {SIM_HERD, SIM_STORM};
    for (size_t s = 0; s < 2; s++) {
        sim_opts o;
        sim_opts_default(&o, scs[s]);
        o.seed = 42;
        o.trials = 2;
        if (scs[s] == SIM_STORM) {
            o.requests = 200;
            o.clients[0] = 10;
            o.nclients = 1;
        }
        sim_results a = run(&o), b = run(&o);
        o.seed = 43;
        sim_results c = run(&o);
        for (size_t k = 0; k < sizeof fns / sizeof fns[0]; k++) {
            char *x = dump(&a, fns[k]), *y = dump(&b, fns[k]), *z = dump(&c, fns[k]);
            assert_string_equal(x, y);
            assert_string_not_equal(x, z);
            free(x);
            free(y);
            free(z);
        }
        sim_results_free(&a);
        sim_results_free(&b);
        sim_results_free(&c);
    }
}

/* ---- storm, load, budget, breaker -------------------------------------- */

/* The storm scenario at 400 jobs and one size of 20 clients. */
static void small_storm(sim_opts *o)
{
    sim_opts_default(o, SIM_STORM);
    o->requests = 400;
    o->clients[0] = 20;
    o->nclients = 1;
}

static void test_storm_polite_loses_nothing(void **state)
{
    (void)state;
    sim_opts o;
    small_storm(&o);
    sim_results r = run(&o);
    assert_int_equal(r.nrows, 4); /* fixed, pct, bucket, adaptive */
    for (size_t i = 0; i < r.nrows; i++) {
        assert_true(metric(&r, i, "calls") >= 400);
        assert_true(metric(&r, i, "ratio") >= 0.9);
        if (r.rows[i].strategy != SIM_FIXED && metric(&r, i, "failed") != 0)
            fail_msg("%s lost %.0f jobs", sim_strategy_name(r.rows[i].strategy),
                     metric(&r, i, "failed"));
    }
    /* the client bucket at 80% of the limit is hardly ever refused */
    assert_true(metric(&r, 2, "throttled") < metric(&r, 0, "throttled"));
    assert_true(metric(&r, 2, "peak_rps") < metric(&r, 0, "peak_rps"));
    sim_results_free(&r);
}

/* The budget as the engine keeps it: a throttle (429) costs half a token
 * to a client without the adaptive rate, so the fixed 1 s sleep's herd
 * spends it and gives up more jobs than without one; the adaptive rate
 * cuts on a throttle, which then costs nothing: it loses no job. */
static void test_storm_budget_throttles(void **state)
{
    (void)state;
    sim_opts o;
    small_storm(&o);
    sim_results plain = run(&o);
    o.use_budget = true;
    sim_results budget = run(&o);
    assert_int_equal(budget.nrows, 4); /* fixed, pct, bucket, adaptive */
    assert_int_equal(budget.rows[3].strategy, SIM_ADAPTIVE);
    if (!(metric(&budget, 0, "failed") > metric(&plain, 0, "failed")))
        fail_msg("fixed sleep: %.0f failed with the budget, %.0f without",
                 metric(&budget, 0, "failed"), metric(&plain, 0, "failed"));
    assert_true(metric(&budget, 3, "failed") == 0);
    sim_results_free(&plain);
    sim_results_free(&budget);
}

static void test_load_deadline(void **state)
{
    (void)state;
    sim_opts o;
    sim_opts_default(&o, SIM_LOAD);
    o.clients[0] = 200;
    o.burst = 20;
    o.policy.deadline_us = STG_SEC(3);
    sim_results r = run(&o);
    for (size_t i = 0; i < r.nrows; i++) {
        double ok = metric(&r, i, "success_rate");
        assert_true(ok > 0 && ok <= 1);
        assert_true(metric(&r, i, "p99_ms") >= metric(&r, i, "mean_ms"));
        assert_true(metric(&r, i, "p99_ms") <= 3000 + 20);
        assert_true(metric(&r, i, "calls") >= 200);
        /* no wait is scheduled past the deadline: the last reply comes at
         * most one round trip after it */
        assert_true(metric(&r, i, "total_ms") <= 3000 + 20);
    }
    sim_results_free(&r);
}

static void test_budget_and_breaker(void **state)
{
    (void)state;
    sim_opts o;
    sim_opts_default(&o, SIM_LOAD);
    o.clients[0] = 100;
    o.error_rate = 1.0; /* every answer is a 503 */
    one_strategy(&o, SIM_FULL);
    o.policy.backoff.base_us = STG_MS(10);
    sim_results plain = run(&o);
    assert_true(metric(&plain, 0, "calls") == 600); /* 6 attempts each */
    assert_true(metric(&plain, 0, "success_rate") == 0);
    sim_results_free(&plain);

    o.use_budget = true; /* gRPC's defaults: 10 tokens, retries while > 5 */
    sim_results budget = run(&o);
    assert_true(metric(&budget, 0, "calls") < 120);
    sim_results_free(&budget);

    o.use_budget = false;
    o.use_breaker = true;
    o.breaker.consecutive_failures = 5;
    sim_results br = run(&o);
    assert_true(metric(&br, 0, "calls") < 600);
    sim_results_free(&br);
}

/* ---- options and output -------------------------------------------------- */

static void test_options(void **state)
{
    (void)state;
    for (int s = 0; s < SIM_N_SCENARIOS; s++) {
        sim_opts o;
        sim_opts_default(&o, (sim_scenario)s);
        assert_null(sim_opts_check(&o));
        assert_int_equal(sim_scenario_parse(sim_scenario_name((sim_scenario)s)), s);
    }
    for (int s = 0; s < SIM_N_STRATEGIES; s++)
        assert_int_equal(sim_strategy_parse(sim_strategy_name((sim_strategy)s)), s);
    assert_int_equal(sim_strategy_parse("bogus"), -1);
    assert_int_equal(sim_scenario_parse("bogus"), -1);

    sim_opts o;
    sim_opts_default(&o, SIM_HERD);
    o.trials = 0;
    assert_non_null(sim_opts_check(&o));
    sim_opts_default(&o, SIM_HERD);
    o.strategies[0] = SIM_BUCKET;
    assert_non_null(sim_opts_check(&o));
    sim_opts_default(&o, SIM_HERD);
    o.fail_first = 31;
    assert_non_null(sim_opts_check(&o));
    sim_opts_default(&o, SIM_HERD);
    o.clients[0] = SIM_HERD_MAX_CLIENTS + 1;
    assert_non_null(sim_opts_check(&o));
    sim_opts_default(&o, SIM_STORM);
    o.limit_rps = 0;
    assert_non_null(sim_opts_check(&o));
    sim_opts_default(&o, SIM_QUOTA);
    o.nmodes = 0;
    assert_non_null(sim_opts_check(&o));
    sim_results r;
    assert_int_equal(sim_run(&o, &r), STG_EINVAL);
    assert_null(r.rows);
}

static void check_json(const char *text, const char *const *keys)
{
    const char *p = text;
    int lines = 0;
    while (*p) {
        const char *nl = strchr(p, '\n');
        assert_non_null(nl);
        json_error_t err;
        json_t *j = json_loadb(p, (size_t)(nl - p), 0, &err);
        if (!j)
            fail_msg("bad JSON line: %s", err.text);
        for (size_t k = 0; keys[k]; k++)
            if (!json_object_get(j, keys[k]))
                fail_msg("JSON line lacks %s", keys[k]);
        json_decref(j);
        lines++;
        p = nl + 1;
    }
    assert_true(lines > 0);
}

static void test_outputs(void **state)
{
    (void)state;
    sim_opts o;
    sim_opts_default(&o, SIM_HERD);
    sim_results r = run(&o);
    char *s = dump(&r, sim_write_json);
    static const char *const herd_keys[] = {"scenario", "strategy", "clients", "calls",
                                            "total_ms", "max_in_window", "round_spans_ms", NULL};
    check_json(s, herd_keys);
    assert_non_null(strstr(s, "\"strategy\":\"decorrelated\""));
    free(s);
    s = dump(&r, sim_write_csv);
    assert_memory_equal(s, "scenario,strategy,", 18);
    free(s);
    s = dump(&r, sim_print_table);
    assert_non_null(strstr(s, "exponential"));
    assert_non_null(strstr(s, "max in 10 ms"));
    free(s);
    s = dump(&r, sim_write_svg);
    assert_memory_equal(s, "<?xml", 5);
    assert_non_null(strstr(s, "</svg>"));
    assert_non_null(strstr(s, "time (s)"));
    /* issue #37: the peak says round 0 is left out, and each panel has its
     * own time axis (fixed's ends near 1 s, decorrelated's past 10 s) */
    assert_non_null(strstr(s, "retries in 10 ms (round 0 left out)"));
    assert_non_null(strstr(s, "each panel on its own time axis"));
    free(s);
    s = dump(&r, sim_print_table);
    assert_non_null(strstr(s, "max in W: retries only"));
    free(s);
    sim_results_free(&r);

    sim_opts_default(&o, SIM_LOAD);
    o.clients[0] = 100;
    o.trials = 2;
    r = run(&o);
    s = dump(&r, sim_write_json);
    static const char *const load_keys[] = {"success_rate", "mean_ms", "p99_ms", "throttled",
                                            "calls_sd", NULL};
    check_json(s, load_keys);
    free(s);
    sim_results_free(&r);

    sim_opts_default(&o, SIM_CONTENTION);
    o.clients[0] = 5;
    o.clients[1] = 10;
    o.nclients = 2;
    o.trials = 2;
    r = run(&o);
    assert_int_equal(r.nrows, 10);
    s = dump(&r, sim_write_svg);
    assert_non_null(strstr(s, "completion time"));
    assert_non_null(strstr(s, "polyline"));
    free(s);
    s = dump(&r, sim_print_table);
    assert_non_null(strstr(s, "decorrelated"));
    free(s);
    sim_results_free(&r);
}

/* slow-server (slow.c): the benchmark in virtual time. Bounds
 * from the model: C = 20 workers of D = 50 ms (C / D = 400/s); at a limit
 * L >= C the latency is about L / C * D, and the learned limit settles
 * where L = C + sqrt(L), 25, never below C (it would lose throughput) nor
 * far above (every extra request only waits). */
static void test_slow_server_settles(void **state)
{
    (void)state;
    sim_opts o;
    sim_opts_default(&o, SIM_SLOW);
    assert_null(sim_opts_check(&o));
    const double C = o.capacity, D_ms = (double)o.server_us / 1e3;
    const double cap_rps = C / (D_ms / 1e3);
    sim_results r = run(&o);
    assert_int_equal(r.nrows, 2);
    size_t fixed = r.rows[0].strategy == SIM_FIXED ? 0 : 1, learned = 1 - fixed;
    assert_int_equal(r.rows[learned].strategy, SIM_ADAPTIVE);

    /* The learned concurrency: the goals. */
    assert_true(metric(&r, learned, "p50_ms") <= 1.5 * D_ms);
    assert_true(metric(&r, learned, "throughput_rps") >= 0.9 * cap_rps);
    double settled = metric(&r, learned, "limit_mean");
    assert_true(settled >= C);                  /* the server kept busy */
    assert_true(settled <= C + 2 * sqrt(2 * C)); /* L = C + sqrt(L), with room */
    assert_true(metric(&r, learned, "max_at_server") <= metric(&r, learned, "limit") + C);

    /* Fixed 200: the same throughput, and every request waits its turn
     * behind the 180 queued: latency about 200 / C * D. */
    double want = (double)o.clients[0] / C * D_ms;
    assert_true(metric(&r, fixed, "throughput_rps") >= 0.9 * cap_rps);
    assert_true(metric(&r, fixed, "p50_ms") >= 0.9 * want);
    assert_true(metric(&r, fixed, "max_at_server") == o.clients[0]);
    sim_results_free(&r);

    /* Another capacity: the settled limit follows it (C = 10: 13.7). */
    o.capacity = 10;
    o.requests = 2000;
    one_strategy(&o, SIM_ADAPTIVE);
    sim_results s = run(&o);
    assert_true(metric(&s, 0, "limit_mean") >= 10);
    assert_true(metric(&s, 0, "limit_mean") <= 10 + 2 * sqrt(20));
    assert_true(metric(&s, 0, "throughput_rps") >= 0.9 * 10 / (D_ms / 1e3));
    sim_results_free(&s);

    /* Only fixed and adaptive mean something here. */
    one_strategy(&o, SIM_FULL);
    assert_non_null(sim_opts_check(&o));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_herd_fixed_exact),
        cmocka_unit_test(test_herd_gives_up),
        cmocka_unit_test(test_contention_exact),
        cmocka_unit_test(test_fixed_round_in_one_window),
        cmocka_unit_test(test_full_jitter_spreads),
        cmocka_unit_test(test_retry_after_never_early),
        cmocka_unit_test(test_quota_spread_lowers_peak),
        cmocka_unit_test(test_same_seed_same_output),
        cmocka_unit_test(test_storm_polite_loses_nothing),
        cmocka_unit_test(test_load_deadline),
        cmocka_unit_test(test_slow_server_settles),
        cmocka_unit_test(test_budget_and_breaker),
        cmocka_unit_test(test_storm_budget_throttles),
        cmocka_unit_test(test_options),
        cmocka_unit_test(test_outputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
