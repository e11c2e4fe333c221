/* stagger sim fleet (src/sim/fleet*.c): Jain's index on known cases, the
 * bound checker, the shared key's decisions holding burst + rate * t for
 * any mix of callers (every policy, random calls, every granted token
 * spent anywhere in its window), and small fleets in virtual time: the
 * bound holds, priority (prio_gcra.c) and sfq admit interactive within two
 * emission intervals plus the Redis round trip while FCFS makes it wait
 * behind the backlog, normal before batch with batch kept at its floor,
 * tenants by weight (or nearer to it than FCFS), the same seed giving the
 * same figures. Small sizes: seconds under ASan. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmocka_all.h"
#include "sim/fleet.h"

static double metric(const sim_results *r, size_t row, const char *key)
{
    assert_true(row < r->nrows);
    const sim_stat *s = sim_row_metric(&r->rows[row], key);
    if (!s)
        fail_msg("row %zu has no metric %s", row, key);
    return sim_stat_mean(s);
}

static void near(double got, double want, double tol)
{
    if (fabs(got - want) > tol)
        fail_msg("got %.9g, want %.9g +- %g", got, want, tol);
}

/* ---- Jain's index ------------------------------------------------------ */

static void test_jain_known(void **state)
{
    (void)state;
    double eq[] = {3, 3, 3};
    near(sim_jain(eq, 3), 1.0, 1e-12);
    double one[] = {5, 0, 0, 0};
    near(sim_jain(one, 4), 0.25, 1e-12); /* 1/n: one takes everything */
    double two[] = {1, 2};
    near(sim_jain(two, 2), 9.0 / 10.0, 1e-12);
    /* weight-normalised: 25/25/50 admitted with weights 1:1:2 is fair */
    double fair[] = {25.0 / 1, 25.0 / 1, 50.0 / 2};
    near(sim_jain(fair, 3), 1.0, 1e-12);
    /* split by processes 60/30/10 with weights 1:1:2: x = 60, 30, 5,
     * (95)^2 / (3 * (3600 + 900 + 25)) */
    double fcfs[] = {60.0, 30.0, 10.0 / 2};
    near(sim_jain(fcfs, 3), 9025.0 / 13575.0, 1e-12);
    near(sim_jain(NULL, 0), 1.0, 0);
    double zero[] = {0, 0};
    near(sim_jain(zero, 2), 1.0, 0);
}

/* ---- the bound checker ------------------------------------------------- */

static void test_bound_checker(void **state)
{
    (void)state;
    sim_bound b;
    sim_bound_init(&b, 100, 3); /* T = 10 ms */
    int64_t T = INT64_C(10000000);
    for (int i = 0; i < 3; i++)
        sim_bound_send(&b, 0); /* the burst at once */
    for (int i = 1; i <= 50; i++)
        sim_bound_send(&b, i * T); /* then one per T */
    assert_int_equal(b.excess, 0);
    sim_bound_send(&b, 50 * T); /* one more than burst + rate * t */
    assert_int_equal(b.excess, 1);
    sim_bound_send(&b, 50 * T + T / 2);
    assert_int_equal(b.excess, 2);
    /* after a quiet spell the burst is back, and no more */
    for (int i = 0; i < 3; i++)
        sim_bound_send(&b, 100 * T);
    assert_int_equal(b.excess, 2);
    sim_bound_send(&b, 100 * T + 1);
    assert_int_equal(b.excess, 3);
    assert_int_equal(b.sends, 59);
}

/* ---- the decisions keep the bound -------------------------------------- */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Random callers of every class and tenant, asking for leases of 1..4
 * tokens with leads and timeouts from 0; every token granted is spent at a
 * random instant of its window. Whatever the mix, the sends keep
 * burst + rate * t. */
static void bound_any_mix(int policy)
{
    const double rate = 100;
    const int64_t burst = 8, T = INT64_C(10000000);
    sim_fleet_model m;
    assert_int_equal(sim_fleet_model_init(&m, policy, rate, burst, 8 * T, 0.05, 3, 16), STG_OK);
    stg_rng g;
    stg_rng_seed(&g, 42);
    size_t cap = 200000, n = 0;
    int64_t *sends = malloc(cap * sizeof *sends);
    assert_non_null(sends);
    int64_t now = 0;
    uint64_t granted = 0, refused = 0;
    for (int i = 0; i < 20000; i++) {
        now += (int64_t)(stg_rng_next(&g) % (uint64_t)(2 * T / 3));
        static const char *const names[] = {"a", "b", "c"};
        sim_fleet_call c = {
            .cls = (int)(stg_rng_next(&g) % 3),
            .tenant = (int)(stg_rng_next(&g) % 3),
            .client = (uint32_t)(stg_rng_next(&g) % 16),
            .k = 1 + (int64_t)(stg_rng_next(&g) % 4),
            .lead_ns = 1000000 + (int64_t)(stg_rng_next(&g) % (uint64_t)(2 * T)),
            .timeout_ns =
                (stg_rng_next(&g) % 2) ? 0 : (int64_t)(stg_rng_next(&g) % (uint64_t)(20 * T)),
        };
        c.weight = c.tenant == 2 ? 2.0 : 1.0;
        c.tname = names[c.tenant];
        sim_fleet_grant r;
        sim_fleet_decide(&m, now, &c, &r);
        if (r.k < 1) {
            refused++;
            assert_true(r.hint_ns > 0);
            continue;
        }
        granted++;
        assert_true(r.k <= c.k);
        assert_true(r.wait_ns <= c.timeout_ns || !r.lease);
        for (int64_t j = 0; j < r.k; j++) {
            int64_t lo = now + r.wait_ns, hi = r.lease ? now + r.end_ns : lo;
            assert_true(hi >= lo);
            int64_t at = lo + (hi > lo ? (int64_t)(stg_rng_next(&g) % (uint64_t)(hi - lo + 1)) : 0);
            assert_true(n < cap);
            sends[n++] = at;
        }
    }
    assert_true(granted > 1000);
    assert_true(refused > 0 || policy == SIM_FLEET_FCFS);
    qsort(sends, n, sizeof *sends, cmp_i64);
    sim_bound b;
    sim_bound_init(&b, rate, burst);
    for (size_t i = 0; i < n; i++)
        sim_bound_send(&b, sends[i]);
    if (b.excess != 0)
        fail_msg("%s: %llu of %zu sends over the bound", sim_fleet_policy_name(policy),
                 (unsigned long long)b.excess, n);
    /* and the key was used: about rate * time */
    assert_true((double)n > 0.5 * rate * (double)now / 1e9);
    free(sends);
    sim_fleet_model_free(&m);
}

static void test_decisions_keep_bound(void **state)
{
    (void)state;
    bound_any_mix(SIM_FLEET_FCFS);
    bound_any_mix(SIM_FLEET_PRIORITY);
    bound_any_mix(SIM_FLEET_SFQ);
}

/* The decisions, directly: batch saturating the key leaves room, so an
 * interactive call is granted within one emission interval (priority and
 * sfq); under FCFS the same call waits behind every reservation. */
static void test_interactive_after_batch(void **state)
{
    (void)state;
    const int64_t T = INT64_C(10000000), lead = 1000000;
    for (int policy = 0; policy < SIM_FLEET_N_POLICIES; policy++) {
        sim_fleet_model m;
        assert_int_equal(sim_fleet_model_init(&m, policy, 100, 10, 8 * T, 0.05, 1, 64), STG_OK);
        int64_t now = 0;
        /* 60 batch processes ask every 2 ms for 1 s, each willing to wait
         * 60 s (FCFS reserves; priority's batch never does) */
        for (int i = 0; i < 500; i++, now += 2000000) {
            sim_fleet_call c = {.cls = 2, .tenant = 0, .tname = "a", .weight = 1,
                                .client = (uint32_t)(i % 60),
                                .k = 1, .lead_ns = lead, .timeout_ns = 60 * INT64_C(1000000000)};
            sim_fleet_grant g;
            sim_fleet_decide(&m, now, &c, &g);
        }
        sim_fleet_call ic = {.cls = 0, .tenant = 0, .tname = "a", .weight = 1, .client = 63, .k = 1,
                             .lead_ns = lead, .timeout_ns = 60 * INT64_C(1000000000)};
        sim_fleet_grant g;
        sim_fleet_decide(&m, now, &ic, &g);
        assert_int_equal(g.k, 1);
        if (policy != SIM_FLEET_FCFS)
            assert_true(g.wait_ns <= T);
        else
            assert_true(g.wait_ns > 10 * T); /* behind the batch's reservations */
        sim_fleet_model_free(&m);
    }
}

/* ---- small fleets ------------------------------------------------------ */

static sim_opts small_fleet(int clients, int64_t duration)
{
    sim_opts o;
    sim_opts_default(&o, SIM_FLEET);
    o.clients[0] = clients;
    o.nclients = 1;
    o.fleet.policies[2] = SIM_FLEET_SFQ;
    o.fleet.npolicies = 3;
    o.fleet.duration_us = duration;
    /* constant legs: the round trip is exactly 2 legs + the script */
    o.fleet.redis_leg = (sim_delay){STG_US(500), 0};
    /* reservations as far ahead as a caller with a long timeout makes
     * them (a plain limiter, stg_curl_perform's deadline): FCFS's queue
     * of reservations is what these tests compare against */
    o.fleet.max_wait_us = STG_SEC(60);
    return o;
}

static sim_results run(const sim_opts *o)
{
    sim_results r;
    const char *why = sim_opts_check(o);
    if (why)
        fail_msg("options rejected: %s", why);
    assert_int_equal(sim_run(o, &r), STG_OK);
    return r;
}

/* The proof, as a fleet: one interactive process asking again
 * 40 ms after each send (about 20% of the limit) beside 39 backlogged batch
 * processes, for 10 s. Every row keeps the bound and uses the key;
 * priority and sfq admit each interactive request within two emission
 * intervals plus the Redis round trip (its process has no other request
 * ahead of it), FCFS makes it wait behind one reservation per batch
 * process. The batch class keeps >= 90% of the rest. */
static void test_fleet_interactive_beside_batch(void **state)
{
    (void)state;
    sim_opts o = small_fleet(40, STG_SEC(10));
    o.fleet.mix[0] = 1;
    o.fleet.mix[1] = 0;
    o.fleet.mix[2] = 39;
    o.fleet.offered[0] = -1;
    o.server_us = STG_MS(40);
    sim_results r = run(&o);
    assert_int_equal(r.nrows, 3);
    double secs = (double)o.fleet.duration_us / 1e6;
    double bound_rps = o.limit_rps + (double)o.burst / secs;
    double T_ms = 1e3 / o.limit_rps;
    double rtt_ms = 2 * 0.5 + (double)o.fleet.redis_op_us / 1e3;
    for (size_t i = 0; i < r.nrows; i++) {
        const char *name = sim_fleet_policy_name(r.rows[i].mode);
        assert_true(metric(&r, i, "bound_excess") == 0);
        assert_true(metric(&r, i, "admitted_rps") <= bound_rps + 1e-9);
        assert_true(metric(&r, i, "admitted_rps") >= 0.95 * o.limit_rps);
        double inter = metric(&r, i, "interactive_rps");
        assert_true(metric(&r, i, "batch_rps") >= 0.9 * (o.limit_rps - inter));
        if (r.rows[i].mode == SIM_FLEET_FCFS) {
            /* 39 reservations ahead, T each */
            assert_true(metric(&r, i, "interactive_p50_ms") >= 30 * T_ms);
            continue;
        }
        double p99 = metric(&r, i, "interactive_p99_ms");
        if (!(p99 <= 2 * T_ms + rtt_ms + 0.001)) /* + the microsecond clock */
            fail_msg("%s: interactive p99 %.3f ms > 2 T + RTT = %.3f ms", name, p99,
                     2 * T_ms + rtt_ms);
        assert_true(inter > 5 * metric(&r, 0, "interactive_rps"));
    }
    /* tenants 1:1:2 on 60/30/10% of the batch processes: FCFS splits by
     * processes (Jain 0.66), the others by weight, or nearer to it */
    assert_true(metric(&r, 0, "jain_batch") < 0.7);
    assert_true(metric(&r, 1, "jain_batch") > 0.85);
    assert_true(metric(&r, 2, "jain_batch") >= 0.98);
    sim_results_free(&r);
}

/* At fleet scale with the CLI's horizon (50 ms): 300 processes of the
 * default mix (interactive Poisson, normal and batch backlogged) on a
 * 100/s key. A refused caller is told its tenant's next retry slot (two per
 * share interval), so Redis sees a small multiple of the key's rate, not
 * one call per waiting process per interval; and the tenants of the
 * backlogged normal class split it by weight (1:1:2 on 60/30/10% of the
 * processes). Before the retry slots: 12,652 calls/s here. */
static void test_fleet_redis_load_and_shares(void **state)
{
    (void)state;
    sim_opts o;
    sim_opts_default(&o, SIM_FLEET);
    o.clients[0] = 300;
    o.nclients = 1;
    o.fleet.policies[0] = SIM_FLEET_PRIORITY;
    o.fleet.npolicies = 1;
    o.fleet.duration_us = STG_SEC(10);
    o.fleet.max_wait_us = STG_MS(50);
    sim_results r = run(&o);
    assert_int_equal(r.nrows, 1);
    assert_true(metric(&r, 0, "bound_excess") == 0);
    double ops = metric(&r, 0, "redis_ops_s");
    if (!(ops <= 10 * o.limit_rps))
        fail_msg("Redis %.0f calls/s > 10 x the key's rate", ops);
    double jn = metric(&r, 0, "jain_normal");
    if (!(jn >= 0.98))
        fail_msg("normal tenants: Jain %.3f < 0.98", jn);
    sim_results_free(&r);
}

/* Three classes, 40 processes (4 interactive, 12 normal, 24 batch, both
 * backlogged): FCFS splits normal and batch by processes (12:24); priority
 * and sfq serve normal first and batch at its floor or more. */
static void test_fleet_class_order(void **state)
{
    (void)state;
    sim_opts o = small_fleet(40, STG_SEC(10));
    sim_results r = run(&o);
    assert_int_equal(r.nrows, 3);
    assert_int_equal(r.rows[0].mode, SIM_FLEET_FCFS);
    assert_int_equal(r.rows[1].mode, SIM_FLEET_PRIORITY);
    assert_int_equal(r.rows[2].mode, SIM_FLEET_SFQ);
    assert_true(metric(&r, 0, "batch_rps") > metric(&r, 0, "normal_rps"));
    for (size_t i = 0; i < r.nrows; i++)
        assert_true(metric(&r, i, "bound_excess") == 0);
    for (size_t i = 1; i < r.nrows; i++) {
        assert_true(metric(&r, i, "normal_rps") > 3 * metric(&r, i, "batch_rps"));
        assert_true(metric(&r, i, "batch_rps") >= 0.9 * o.fleet.floor * o.limit_rps);
    }
    /* sfq: tenants by weight in each backlogged class; its normal class
     * gives c (weight 2) about twice a's share though a has seven times
     * its processes */
    assert_true(metric(&r, 2, "jain_normal") >= 0.98);
    assert_true(metric(&r, 2, "jain_batch") >= 0.95);
    assert_true(metric(&r, 0, "jain_normal") <= 0.8);
    const sim_fleet_row *f = r.rows[2].fleet;
    assert_non_null(f);
    double a = sim_stat_mean(&f->rps[1][0]), c = sim_stat_mean(&f->rps[1][2]);
    assert_int_equal(f->clients[1][0], 7);
    assert_int_equal(f->clients[1][2], 1);
    near(c / a, 2.0, 0.2);
    sim_results_free(&r);
}

/* The same seed gives the same figures; another seed other draws. */
static void test_fleet_deterministic(void **state)
{
    (void)state;
    sim_opts o = small_fleet(30, STG_SEC(3));
    o.fleet.redis_leg.sd_us = STG_US(100);
    sim_results a = run(&o), b = run(&o);
    o.seed = 7;
    sim_results c = run(&o);
    bool differ = false;
    for (size_t i = 0; i < a.nrows; i++)
        for (int m = 0; m < a.rows[i].nmetrics; m++) {
            assert_true(sim_stat_mean(&a.rows[i].m[m].s) == sim_stat_mean(&b.rows[i].m[m].s));
            differ = differ || sim_stat_mean(&a.rows[i].m[m].s) != sim_stat_mean(&c.rows[i].m[m].s);
        }
    assert_true(differ);
    sim_results_free(&a);
    sim_results_free(&b);
    sim_results_free(&c);
}

static void test_fleet_options(void **state)
{
    (void)state;
    sim_opts o;
    sim_opts_default(&o, SIM_FLEET);
    assert_null(sim_opts_check(&o));
    assert_int_equal(o.nclients, 4);
    assert_int_equal(o.clients[3], 1000);
    o.clients[0] = SIM_FLEET_MAX_CLIENTS + 1;
    assert_non_null(sim_opts_check(&o));
    sim_opts_default(&o, SIM_FLEET);
    o.burst = 1;
    assert_non_null(sim_opts_check(&o));
    sim_opts_default(&o, SIM_FLEET);
    snprintf(o.fleet.tenants[1].name, sizeof o.fleet.tenants[1].name, "a");
    assert_non_null(sim_opts_check(&o)); /* two tenants named a */
    sim_opts_default(&o, SIM_FLEET);
    snprintf(o.fleet.tenants[0].name, sizeof o.fleet.tenants[0].name, "a b");
    assert_non_null(sim_opts_check(&o));
    sim_opts_default(&o, SIM_FLEET);
    o.fleet.mix[0] = o.fleet.mix[1] = o.fleet.mix[2] = 0;
    assert_non_null(sim_opts_check(&o));
    sim_opts_default(&o, SIM_FLEET);
    o.fleet.floor = 0.6;
    assert_non_null(sim_opts_check(&o));
    assert_int_equal(sim_fleet_policy_parse("fcfs"), SIM_FLEET_FCFS);
    assert_int_equal(sim_fleet_policy_parse("priority"), SIM_FLEET_PRIORITY);
    assert_int_equal(sim_fleet_policy_parse("sfq"), SIM_FLEET_SFQ);
    assert_int_equal(sim_fleet_policy_parse("wfq"), -1);
    assert_int_equal(sim_scenario_parse("fleet"), SIM_FLEET);
}

/* JSON: one object per row with policy, the figures and per-tenant
 * admissions; the SVG has one line per policy in each of its panels. */
static void test_fleet_outputs(void **state)
{
    (void)state;
    sim_opts o = small_fleet(20, STG_SEC(2));
    o.clients[1] = 40;
    o.nclients = 2;
    o.fleet.npolicies = 2;
    sim_results r = run(&o);
    assert_int_equal(r.nrows, 4);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(sim_write_json(f, &r), 0);
    fclose(f);
    assert_non_null(strstr(buf, "\"scenario\":\"fleet\",\"policy\":\"fcfs\""));
    assert_non_null(strstr(buf, "\"policy\":\"priority\""));
    assert_non_null(strstr(buf, "\"classes\":{\"interactive\":{\"tenants\":{\"a\":{\"weight\":1,"));
    assert_null(strstr(buf, "\"strategy\""));
    free(buf);
    f = open_memstream(&buf, &len);
    assert_int_equal(sim_write_svg(f, &r), 0);
    fclose(f);
    size_t lines = 0;
    for (const char *p = buf; (p = strstr(p, "<polyline")); p++)
        lines++;
    assert_int_equal(lines, 4 * 2); /* four panels, two policies */
    assert_non_null(strstr(buf, "</svg>"));
    free(buf);
    f = open_memstream(&buf, &len);
    assert_int_equal(sim_print_table(f, &r), 0);
    fclose(f);
    assert_non_null(strstr(buf, "priority"));
    assert_non_null(strstr(buf, "J batch"));
    free(buf);
    sim_results_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jain_known),
        cmocka_unit_test(test_bound_checker),
        cmocka_unit_test(test_decisions_keep_bound),
        cmocka_unit_test(test_interactive_after_batch),
        cmocka_unit_test(test_fleet_interactive_beside_batch),
        cmocka_unit_test(test_fleet_class_order),
        cmocka_unit_test(test_fleet_redis_load_and_shares),
        cmocka_unit_test(test_fleet_deterministic),
        cmocka_unit_test(test_fleet_options),
        cmocka_unit_test(test_fleet_outputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
