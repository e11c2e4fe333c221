/*
 * The class-and-tenant decision in Redis against its pure model: the same
 * call sequence (random classes, tenants, weights, leases, leads, horizons,
 * floors, time steps from microseconds to a day and a half, plain takes
 * mixed in) is run by src/core/prio_gcra.c and by gcra.c's script on a
 * real redis-server with its clock pinned to the sequence's (ARGV[11]), and
 * every decision must be the same: granted or not, how many tokens, the
 * wait (or the hint) in µs, the lease window's end, the floor, the
 * tenant table. Then the public call (stg_redis_limiter_acquire_class) on
 * Redis's own clock: a batch leaves an interactive its token.
 */
#define _GNU_SOURCE
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/prio_gcra.h"
#include "integration/redis_helper.h"
#include "integration/prio_helper.h"

extern const char stg__redis_gcra_lua[];

static prio_server g_srv;

static int setup(void **state)
{
    (void)state;
    prio_server_up(&g_srv, stg__redis_gcra_lua);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    prio_server_down(&g_srv);
    return 0;
}

static int64_t floor_us(int64_t ns)
{
    return ns >= 0 ? ns / 1000 : -((-ns + 999) / 1000);
}

/* One call of the script; reply elements as integers into v[0..10). */
static int script_call(redisContext *c, const char *key, int64_t T, int64_t B, int64_t n,
                       int64_t max_wait, int64_t lead, const char *prio, const char *tenant,
                       int64_t now_us, long long *v)
{
    char a[11][128]; /* prio and tenant fields fit whole */
    snprintf(a[0], sizeof a[0], "%lld", (long long)T);
    snprintf(a[1], sizeof a[1], "%lld", (long long)B);
    snprintf(a[2], sizeof a[2], "%lld", (long long)n);
    snprintf(a[3], sizeof a[3], "%lld", (long long)max_wait);
    snprintf(a[4], sizeof a[4], "0");
    snprintf(a[5], sizeof a[5], "%lld", (long long)lead);
    snprintf(a[6], sizeof a[6], "0");
    snprintf(a[7], sizeof a[7], "0");
    snprintf(a[8], sizeof a[8], "%s", prio);
    snprintf(a[9], sizeof a[9], "%s", tenant);
    snprintf(a[10], sizeof a[10], "%lld", (long long)now_us);
    return prio_script_eval(c, g_srv.sha, key, 11, a, v, 10);
}

static void test_script_is_the_model(void **state)
{
    (void)state;
    redisContext *c = raw_connect(g_srv.port);
    assert_non_null(c);
    const char *tenants[] = {"", "a", "b", "c:1", "d.e", "f-g"};
    int64_t calls = 0, granted = 0, leases = 0, floors = 0, refused = 0, plain = 0;
    for (uint64_t seed = 1; seed <= 8; seed++) {
        uint64_t s = seed * 104729;
        stg__prio_state *st = calloc(1, sizeof *st);
        char key[32];
        snprintf(key, sizeof key, "t:{diff%llu}", (unsigned long long)seed);
        int64_t now_us = INT64_C(1700000000000000) + (int64_t)(prio_rng_next(&s) % 1000000000);
        /* one rate per sequence, sometimes cut or raised midway */
        int64_t T = (int64_t)(1 + prio_rng_next(&s) % 40) * 1000000 + (int64_t)(prio_rng_next(&s) % 1000);
        int64_t B = 1 + (int64_t)(prio_rng_next(&s) % 8);
        for (int i = 0; i < 400; i++) {
            uint64_t step = prio_rng_next(&s) % 100;
            if (step < 60)
                now_us += (int64_t)(prio_rng_next(&s) % 5000);
            else if (step < 90)
                now_us += (int64_t)(prio_rng_next(&s) % 60000);
            else if (step < 99)
                now_us += (int64_t)(prio_rng_next(&s) % 2000000);
            else
                now_us += INT64_C(130000) * 1000000; /* a day and a half: the base moves */
            if (prio_rng_next(&s) % 50 == 0)
                T = (int64_t)(1 + prio_rng_next(&s) % 40) * 1000000;
            int64_t now = now_us * 1000;
            long long v[10] = {0};
            if (prio_rng_next(&s) % 10 == 0) {
                /* a plain take (no class) */
                int m = script_call(c, key, T, B, 1, 0, 0, "", "", now_us, v);
                assert_int_equal(m, 3);
                bool ok = prio_model_plain(st, now, T, B);
                assert_int_equal(v[0], ok ? 1 : 0);
                plain++;
                continue;
            }
            stg__prio_req r = {.now_ns = now, .interval_ns = T, .burst = B};
            r.priority = (int)(prio_rng_next(&s) % 3) - 1;
            r.tenant = tenants[prio_rng_next(&s) % 6];
            r.weight = (double)(1 + prio_rng_next(&s) % 4) * (prio_rng_next(&s) % 2 ? 1.0 : 0.25);
            r.n = 1 + (int64_t)(prio_rng_next(&s) % 4);
            r.lead_ns = prio_rng_next(&s) % 3 == 0 ? (int64_t)(prio_rng_next(&s) % 50000) * 1000 : 0;
            r.max_wait_ns = (int64_t)(prio_rng_next(&s) % 4) * 50 * 1000000;
            r.hold_ns = (int64_t)(20 + prio_rng_next(&s) % 200) * 1000000;
            r.floor_pm = (int)(prio_rng_next(&s) % 3) * 100;
            stg__prio_grant g;
            assert_int_equal(stg__prio_decide(st, &r, &g), 0);
            char prio[96];
            snprintf(prio, sizeof prio, "%d %lld %lld %d", STG_PRIORITY_INDEX(r.priority),
                     (long long)stg__prio_weight_m(r.weight), (long long)r.hold_ns, r.floor_pm);
            int m = script_call(c, key, T, B, r.n, r.max_wait_ns, r.lead_ns, prio, r.tenant,
                                now_us, v);
            assert_int_equal(m, 10);
            calls++;
            if (v[0] != (g.k > 0) || v[3] != g.k || v[8] != g.floor || v[9] != g.tracked)
                fail_msg("seed %llu call %d: script {%lld k %lld floor %lld tracked %lld} "
                         "model {k %lld floor %d tracked %d}",
                         (unsigned long long)seed, i, v[0], v[3], v[8], v[9], (long long)g.k,
                         g.floor, g.tracked);
            assert_int_equal(v[1], prio_ceil_us(g.wait_ns));
            if (g.k > 0) {
                granted++;
                assert_int_equal(v[7], g.lease);
                assert_int_equal(v[2], prio_ceil_us(st->tat_ns - now));
                if (g.lease) {
                    leases++;
                    assert_int_equal(v[4], floor_us(g.end_ns - now));
                }
                floors += g.floor;
            } else {
                refused++;
            }
        }
        free(st);
    }
    redisFree(c);
    print_message("%lld class calls (%lld granted, %lld leases, %lld floor, %lld refused), "
                  "%lld plain: the same\n",
                  (long long)calls, (long long)granted, (long long)leases, (long long)floors,
                  (long long)refused, (long long)plain);
    /* the sequence reached every way of deciding */
    assert_true(granted > 100 && leases > 20 && floors > 5 && refused > 100);
}

static stg_redis_limiter *limiter(double rate, int64_t burst)
{
    char url[96];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/0/prio", g_srv.port);
    stg_redis_limiter_config cfg = {.url = url, .rate = rate, .burst = burst};
    int err;
    stg_redis_limiter *l = stg_redis_limiter_new(&cfg, &err, NULL, 0);
    assert_non_null(l);
    return l;
}

/* The public call: a batch alone takes the bucket; with an interactive
 * request's mark fresh it leaves one token; a batch never reserves ahead;
 * bad classes are refused. */
static void test_acquire_class(void **state)
{
    (void)state;
    stg_redis_limiter *l = limiter(10, 3); /* T = 100 ms */
    stg_class batch = {.priority = STG_PRIORITY_BATCH, .tenant = "nightly", .weight = 1};
    stg_class inter = {.priority = STG_PRIORITY_INTERACTIVE};
    int64_t w = -1;
    assert_int_equal(stg_redis_limiter_acquire_class(l, "k1", &inter, 0, &w), STG_OK);
    assert_int_equal(w, 0);
    /* interactive is fresh (its hold is 8 intervals, 800 ms): the batch
     * takes one of the two left, and its floor token the other */
    assert_int_equal(stg_redis_limiter_acquire_class(l, "k1", &batch, 5000000, &w), STG_OK);
    assert_int_equal(w, 0);
    assert_int_equal(stg_redis_limiter_acquire_class(l, "k1", &batch, 5000000, &w), STG_OK);
    assert_int_equal(stg_redis_limiter_acquire_class(l, "k1", &batch, 5000000, &w),
                     STG_ETIMEDOUT);
    assert_true(w > 0);
    /* the interactive request still finds its token within one interval */
    assert_int_equal(stg_redis_limiter_acquire_class(l, "k1", &inter, 5000000, &w), STG_OK);
    assert_true(w <= 100000);
    /* plain acquire shares the TAT: the key is now spent for it too */
    assert_int_equal(stg_redis_limiter_acquire(l, "k1", 1, 0, &w), STG_ETIMEDOUT);
    stg_class bad = {.priority = 2};
    assert_int_equal(stg_redis_limiter_acquire_class(l, "k1", &bad, 0, &w), STG_EINVAL);
    bad = (stg_class){.priority = 0, .tenant = "no spaces"};
    assert_int_equal(stg_redis_limiter_acquire_class(l, "k1", &bad, 0, &w), STG_EINVAL);
    assert_int_equal(stg_redis_limiter_acquire_class(l, "k1", NULL, 0, &w), STG_EINVAL);
    assert_int_equal(stg_redis_limiter_set_class_floor(l, 0), STG_EINVAL);
    assert_int_equal(stg_redis_limiter_set_class_floor(l, 0.2), STG_OK);
    /* one hash per key, its fields as prio_lua.h says */
    redisContext *c = raw_connect(g_srv.port);
    redisReply *r = redisCommand(c, "HGET stagger:rl:k1 p2:nightly");
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    freeReplyObject(r);
    r = redisCommand(c, "KEYS *k1*");
    assert_int_equal(r->elements, 1);
    freeReplyObject(r);
    redisFree(c);
    stg_redis_limiter_free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_script_is_the_model),
        cmocka_unit_test(test_acquire_class),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
