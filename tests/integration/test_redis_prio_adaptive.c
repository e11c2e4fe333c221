/*
 * Classes and tenants on a shared ADAPTIVE rate (issue #32: a rate learned
 * in Redis, `--limiter` without `--rate`), against a real redis-server:
 *  - the script is the model: adaptive.c's script, pacing (a throttle
 *    turned it on, and more throttles cut the rate on the way), with its
 *    clock pinned (ARGV[15]) and random classes, tenants, weights, holds
 *    (explicit, or 0: the script's own 8 intervals), floors and horizons,
 *    plain adaptive acquires and a day and a half's gaps mixed in, decides
 *    every call as src/core/prio_gcra.c's stg__prio_decide given the
 *    interval T the script paced at (its reply carries it): granted or
 *    not, the wait (or the hint) in µs, the key's debt, the floor, the
 *    tenant table; tickets count every admission;
 *  - the public call (stg_redis_adaptive_acquire_class, and
 *    stg_redis_limiter_acquire_class on an adaptive limiter): admitted at
 *    once while the key does not pace; once it paces a batch leaves an
 *    interactive its token, on the key's own hash (fields prefixed "c");
 *  - forked processes sharing one adaptive key that paces at 50/s (min =
 *    max rate, so the learned rate stays put): an interactive process at
 *    10/s beside two saturating batch ones (each reserving up to 200 ms
 *    ahead, as an engine with many requests and that horizon) waits p99
 *    within two emission intervals (the round trip measured apart), where
 *    first come, first served (stg_redis_adaptive_acquire for all) makes
 *    it wait behind the batch's reservations; two batch tenants 1:2 split the key within
 *    +-10% of their shares. The bound holds in both.
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

extern const char stg__redis_adaptive_lua[];

static prio_server g_srv;

static int setup(void **state)
{
    (void)state;
    prio_server_up(&g_srv, stg__redis_adaptive_lua);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    prio_server_down(&g_srv);
    return 0;
}

/* The adaptive configuration of one sequence, as adaptive.c passes it. */
typedef struct acfg {
    double min_rate, max_rate;
    int64_t burst, dbl_ns;
} acfg;

/* One call of the adaptive script; reply elements into v[0..9). */
static int script_call(redisContext *c, const char *key, const acfg *ac, char op, int64_t x,
                       int throttled, const char *prio, const char *tenant, int64_t now_us,
                       long long *v)
{
    char a[15][128];
    snprintf(a[0], sizeof a[0], "%c", op);
    snprintf(a[1], sizeof a[1], "0.7");
    snprintf(a[2], sizeof a[2], "0.4");
    snprintf(a[3], sizeof a[3], "%.17g", ac->min_rate);
    snprintf(a[4], sizeof a[4], "%.17g", ac->max_rate);
    snprintf(a[5], sizeof a[5], "2");
    snprintf(a[6], sizeof a[6], "%lld", (long long)ac->burst);
    snprintf(a[7], sizeof a[7], "1000000000");
    snprintf(a[8], sizeof a[8], "%lld", (long long)ac->dbl_ns);
    snprintf(a[9], sizeof a[9], "%lld", (long long)x);
    snprintf(a[10], sizeof a[10], "0");
    snprintf(a[11], sizeof a[11], "%d", throttled);
    snprintf(a[12], sizeof a[12], "%s", prio);
    snprintf(a[13], sizeof a[13], "%s", tenant);
    snprintf(a[14], sizeof a[14], "%lld", (long long)now_us);
    return prio_script_eval(c, g_srv.sha, key, 15, a, v, 9);
}

static void test_script_is_the_model(void **state)
{
    (void)state;
    redisContext *c = raw_connect(g_srv.port);
    assert_non_null(c);
    const char *tenants[] = {"", "a", "b", "c:1", "d.e", "f-g"};
    int64_t calls = 0, granted = 0, floors = 0, refused = 0, plain = 0, cuts = 0, waited = 0;
    for (uint64_t seed = 1; seed <= 8; seed++) {
        uint64_t s = seed * 7919;
        stg__prio_state *st = calloc(1, sizeof *st);
        char key[32];
        snprintf(key, sizeof key, "t:{adiff%llu}", (unsigned long long)seed);
        acfg ac = {.min_rate = (double)(1 + prio_rng_next(&s) % 40) / 2.0,
                   .burst = 1 + (int64_t)(prio_rng_next(&s) % 8),
                   .dbl_ns = prio_rng_next(&s) % 2 ? 0 : 2000000000};
        ac.max_rate = prio_rng_next(&s) % 2 ? 0.0 : ac.min_rate * (double)(1 + prio_rng_next(&s) % 20);
        int64_t now_us = INT64_C(1700000000000000) + (int64_t)(prio_rng_next(&s) % 1000000000);
        long long v[9] = {0};
        /* Off: everything admitted at once (a class call too), tickets
         * counting up; then a throttle turns pacing on. */
        int64_t tickets = 0;
        int warm = 5 + (int)(prio_rng_next(&s) % 60);
        for (int i = 0; i < warm; i++) {
            now_us += (int64_t)(prio_rng_next(&s) % 20000);
            const char *prio = i % 2 ? "2 1000 50000000 0" : "";
            script_call(c, key, &ac, 'a', 0, 0, prio, "", now_us, v);
            assert_int_equal(v[0], 1);
            assert_int_equal(v[1], 0);
            assert_int_equal(v[2], ++tickets);
            assert_int_equal(v[4], 0); /* not pacing */
        }
        script_call(c, key, &ac, 'r', tickets, 1, "", "", now_us, v);
        assert_int_equal(v[0], 1); /* cut */
        assert_int_equal(v[4], 1); /* pacing */
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
            int64_t now = now_us * 1000;
            if (prio_rng_next(&s) % 30 == 0) {
                /* a throttle of the last send: the rate is cut (or not:
                 * the recovery rule), the TAT untouched */
                script_call(c, key, &ac, 'r', tickets, 1, "", "", now_us, v);
                cuts += v[0];
                continue;
            }
            if (prio_rng_next(&s) % 10 == 0) {
                /* a plain adaptive acquire (no class), timeout 0 */
                int m = script_call(c, key, &ac, 'a', 0, 0, "", "", now_us, v);
                assert_int_equal(m, 6);
                bool ok = prio_model_plain(st, now, v[5], ac.burst);
                assert_int_equal(v[0], ok ? 1 : 0);
                if (ok)
                    assert_int_equal(v[2], ++tickets);
                plain++;
                continue;
            }
            stg__prio_req r = {.now_ns = now, .burst = ac.burst, .n = 1};
            r.priority = (int)(prio_rng_next(&s) % 3) - 1;
            r.tenant = tenants[prio_rng_next(&s) % 6];
            r.weight = (double)(1 + prio_rng_next(&s) % 4) * (prio_rng_next(&s) % 2 ? 1.0 : 0.25);
            r.max_wait_ns = (int64_t)(prio_rng_next(&s) % 4) * 50 * 1000000;
            /* 0: the script's own hold, 8 intervals within 20 ms..1 s */
            int64_t hold = prio_rng_next(&s) % 3 == 0 ? 0 : (int64_t)(20 + prio_rng_next(&s) % 200) * 1000000;
            r.floor_pm = (int)(prio_rng_next(&s) % 3) * 100;
            char prio[96];
            snprintf(prio, sizeof prio, "%d %lld %lld %d", STG_PRIORITY_INDEX(r.priority),
                     (long long)stg__prio_weight_m(r.weight), (long long)hold, r.floor_pm);
            int m = script_call(c, key, &ac, 'a', r.max_wait_ns, 0, prio, r.tenant, now_us, v);
            assert_int_equal(m, 9);
            assert_int_equal(v[4], 1);
            r.interval_ns = v[5]; /* the T the script paced at */
            assert_true(r.interval_ns >= 1);
            r.hold_ns = hold;
            if (hold == 0) {
                r.hold_ns = 8 * r.interval_ns;
                if (r.hold_ns < INT64_C(20000000))
                    r.hold_ns = INT64_C(20000000);
                if (r.hold_ns > INT64_C(1000000000))
                    r.hold_ns = INT64_C(1000000000);
            }
            stg__prio_grant g;
            assert_int_equal(stg__prio_decide(st, &r, &g), 0);
            calls++;
            if (v[0] != (g.k > 0) || v[6] != g.floor || v[7] != g.tracked)
                fail_msg("seed %llu call %d: script {%lld floor %lld tracked %lld} "
                         "model {k %lld floor %d tracked %d}",
                         (unsigned long long)seed, i, v[0], v[6], v[7], (long long)g.k, g.floor,
                         g.tracked);
            assert_int_equal(v[1], prio_ceil_us(g.wait_ns));
            if (g.k > 0) {
                granted++;
                waited += g.wait_ns > 0;
                assert_int_equal(v[2], ++tickets);
                assert_int_equal(v[8], prio_ceil_us(st->tat_ns - now));
                floors += g.floor;
            } else {
                assert_int_equal(v[2], 0);
                refused++;
            }
        }
        free(st);
    }
    redisFree(c);
    print_message("%lld class calls (%lld granted, %lld with a wait, %lld floor, %lld refused), "
                  "%lld plain, %lld cuts: the same\n",
                  (long long)calls, (long long)granted, (long long)waited, (long long)floors,
                  (long long)refused, (long long)plain, (long long)cuts);
    /* the sequence reached every way of deciding */
    assert_true(granted > 100 && waited > 20 && floors > 5 && refused > 100 && cuts > 10);
}

/* An adaptive limiter on key whose learned rate stays at rate (min = max),
 * or NULL. */
static stg_redis_limiter *pinned_limiter(const char *key, double rate, int64_t burst)
{
    char url[128];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/%s", g_srv.port, key);
    stg_redis_limiter_config cfg = {.url = url, .adaptive = true};
    cfg.adaptive_config.min_rate = rate;
    cfg.adaptive_config.max_rate = rate;
    cfg.adaptive_config.burst = burst;
    int err;
    stg_redis_limiter *l = stg_redis_limiter_new(&cfg, &err, NULL, 0);
    return l;
}

/* The pinned limiter of the key "aprio" in database 0. */
static stg_redis_limiter *adaptive(double rate, int64_t burst)
{
    stg_redis_limiter *l = pinned_limiter("0/aprio", rate, burst);
    assert_non_null(l);
    return l;
}

/* Admitted at once while the key does not pace; once a throttle turned
 * pacing on (at 10/s here: min = max rate), a batch leaves an interactive
 * its token; bad calls are refused. */
static void test_acquire_class(void **state)
{
    (void)state;
    stg_redis_limiter *l = adaptive(10, 3); /* T = 100 ms */
    stg_class batch = {.priority = STG_PRIORITY_BATCH, .tenant = "nightly", .weight = 1};
    stg_class inter = {.priority = STG_PRIORITY_INTERACTIVE};
    int64_t w = -1, t = -1, last = 0;
    for (int i = 0; i < 10; i++) {
        assert_int_equal(stg_redis_adaptive_acquire_class(l, "k1", &batch, 0, &w, &t), STG_OK);
        assert_int_equal(w, 0);
        assert_true(t > last);
        last = t;
    }
    assert_int_equal(stg_redis_adaptive_response(l, "k1", last, true, 0), STG_OK);
    bool en = false;
    assert_int_equal(stg_redis_adaptive_state(l, "k1", &en, NULL, NULL), STG_OK);
    assert_true(en);
    /* pacing, the bucket full (3): interactive takes one; interactive is
     * fresh (its hold is 8 intervals, 800 ms): the batch takes one of the
     * two left, and its floor token the other */
    assert_int_equal(stg_redis_adaptive_acquire_class(l, "k1", &inter, 0, &w, &t), STG_OK);
    assert_int_equal(w, 0);
    assert_true(t > last);
    assert_int_equal(stg_redis_adaptive_acquire_class(l, "k1", &batch, 5000000, &w, &t), STG_OK);
    assert_int_equal(w, 0);
    assert_int_equal(stg_redis_limiter_acquire_class(l, "k1", &batch, 5000000, &w), STG_OK);
    assert_int_equal(stg_redis_adaptive_acquire_class(l, "k1", &batch, 5000000, &w, &t),
                     STG_ETIMEDOUT);
    assert_true(w > 0);
    /* the interactive request still finds its token within one interval */
    assert_int_equal(stg_redis_adaptive_acquire_class(l, "k1", &inter, 5000000, &w, &t), STG_OK);
    assert_true(w <= 100000);
    /* a plain acquire shares the pacing: the key is spent for it too */
    assert_int_equal(stg_redis_adaptive_acquire(l, "k1", 0, &w, &t), STG_ETIMEDOUT);
    stg_class bad = {.priority = 2};
    assert_int_equal(stg_redis_adaptive_acquire_class(l, "k1", &bad, 0, &w, &t), STG_EINVAL);
    assert_int_equal(stg_redis_limiter_acquire_class(l, "k1", NULL, 0, &w), STG_EINVAL);
    /* the class fields live on the adaptive hash, prefixed: pr and pb are
     * still the adaptive model's own */
    redisContext *c = raw_connect(g_srv.port);
    redisReply *r = redisCommand(c, "HGET stagger:ad:k1 cp2:nightly");
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    freeReplyObject(r);
    r = redisCommand(c, "HGET stagger:ad:k1 cpb");
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    freeReplyObject(r);
    r = redisCommand(c, "KEYS *k1*");
    assert_int_equal(r->elements, 1);
    freeReplyObject(r);
    redisFree(c);
    stg_redis_limiter_free(l);
    /* a fixed-rate limiter has no adaptive class call */
    char url[96];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/0/aprio", g_srv.port);
    stg_redis_limiter_config cfg = {.url = url, .rate = 10, .burst = 1};
    int err;
    stg_redis_limiter *f = stg_redis_limiter_new(&cfg, &err, NULL, 0);
    assert_non_null(f);
    assert_int_equal(stg_redis_adaptive_acquire_class(f, "k1", &inter, 0, &w, &t), STG_EINVAL);
    stg_redis_limiter_free(f);
}

/* ---- processes ----------------------------------------------------------- */

/* A role: one process asking in a loop from start_us to stop_us
 * (monotonic), every period_us (0: as soon as it may: saturating), by
 * class (else first come, first served: stg_redis_adaptive_acquire). */
typedef struct role {
    int priority;
    const char *tenant;
    double weight;
    int64_t start_us, stop_us, period_us;
    int64_t ahead_us; /* > 0: reserve up to this far ahead, one reservation
                         after another without waiting for them (an engine
                         with many requests and this horizon) */
    bool fcfs;
} role;

static void child(const char *key, double rate, int64_t burst, const role *ro, int who,
                  prio_shm *m)
{
    stg_redis_limiter *l = pinned_limiter(key, rate, burst);
    if (!l)
        _exit(3);
    stg_class cls = {.priority = ro->priority, .tenant = ro->tenant, .weight = ro->weight};
    while (now_us() < ro->start_us)
        sleep_us(1000);
    int64_t next = ro->start_us;
    while (now_us() < ro->stop_us) {
        if (ro->period_us > 0) {
            if (now_us() < next)
                sleep_us(next - now_us());
            next += ro->period_us;
        }
        int64_t t0 = now_us();
        int64_t w = 0, ticket = 0, to = ro->ahead_us > 0 ? ro->ahead_us : 2000000;
        int rc = ro->fcfs ? stg_redis_adaptive_acquire(l, NULL, to, &w, &ticket)
                          : stg_redis_adaptive_acquire_class(l, NULL, &cls, to, &w, &ticket);
        int64_t t1 = now_us();
        if (rc == STG_OK) {
            if (ticket <= 0)
                _exit(6); /* admitted by Redis: a ticket */
            prio_shm_add(m, (prio_rec){.at_us = t1 + w, .wait_us = w, .rtt_us = t1 - t0,
                                       .who = who});
            if (ro->ahead_us == 0)
                sleep_us(w);
        } else if (rc == STG_ETIMEDOUT) {
            if (ro->period_us > 0)
                _exit(4); /* an interactive request is never refused here */
            /* back when told (by class: the hint; first come, first
             * served: the wait needed, less half the horizon, as the
             * engine asks), at least 1 ms, at most 1 s */
            if (ro->fcfs)
                w -= ro->ahead_us / 2;
            sleep_us(w < 1000 ? 1000 : w > 1000000 ? 1000000 : w);
        } else {
            _exit(5);
        }
    }
    stg_redis_limiter_free(l);
    _exit(0);
}

/* Turn the key's pacing on: a few sends and a throttle of the last. */
static void start_pacing(const char *key, double rate, int64_t burst)
{
    stg_redis_limiter *l = pinned_limiter(key, rate, burst);
    assert_non_null(l);
    int64_t w, t = 0;
    for (int i = 0; i < 3; i++)
        assert_int_equal(stg_redis_adaptive_acquire(l, NULL, 0, &w, &t), STG_OK);
    assert_int_equal(stg_redis_adaptive_response(l, NULL, t, true, 0), STG_OK);
    bool en = false;
    double r = 0;
    assert_int_equal(stg_redis_adaptive_state(l, NULL, &en, &r, NULL), STG_OK);
    assert_true(en);
    assert_true(fabs(r - rate) < 0.01);
    stg_redis_limiter_free(l);
}

/* The roles of one run: each child asks on key at rate, burst. */
typedef struct fleet {
    const char *key;
    double rate;
    int64_t burst;
    const role *roles;
} fleet;

static void role_main(int who, prio_shm *m, const void *ctx)
{
    const fleet *f = ctx;
    child(f->key, f->rate, f->burst, &f->roles[who], who, m);
}

static prio_shm *run(const char *key, double rate, int64_t burst, const role *roles, int n)
{
    start_pacing(key, rate, burst);
    fleet f = {key, rate, burst, roles};
    return prio_fork_roles(n, role_main, &f);
}

/* The interactive role's waits in [from, to) (relative to t0): count, p50,
 * p99; the batch's admissions there. */
static void interactive_waits(prio_shm *m, int64_t t0, int64_t from, int64_t to, int64_t *inter,
                              int64_t *p50, int64_t *p99, int64_t *batch)
{
    int64_t waits[128], nw = 0;
    *inter = *batch = 0;
    for (int64_t i = 0; i < m->n; i++) {
        const prio_rec *r = &m->r[i];
        if (r->at_us < t0 + from || r->at_us >= t0 + to)
            continue;
        if (r->who == 2) {
            (*inter)++;
            if (nw < 128)
                waits[nw++] = r->wait_us;
        } else {
            (*batch)++;
        }
    }
    assert_true(nw > 0);
    qsort(waits, (size_t)nw, sizeof waits[0], prio_cmp64);
    *p50 = waits[nw / 2];
    *p99 = waits[(nw * 99) / 100 - (nw * 99 % 100 == 0 ? 1 : 0)];
}

static void test_interactive_beside_batch(void **state)
{
    (void)state;
    /* by class */
    int64_t t0 = now_us() + 300000; /* after the forks */
    role roles[3] = {
        {.priority = STG_PRIORITY_BATCH, .start_us = t0, .stop_us = t0 + 5000000,
         .ahead_us = 200000},
        {.priority = STG_PRIORITY_BATCH, .start_us = t0, .stop_us = t0 + 5000000,
         .ahead_us = 200000},
        {.priority = STG_PRIORITY_INTERACTIVE, .start_us = t0 + 1000000,
         .stop_us = t0 + 5000000, .period_us = 100000}, /* 10/s: 20% of 50/s */
    };
    prio_shm *m = run("aprio-a", 50, 5, roles, 3);
    prio_check_bound(m, 20000, 5);
    int64_t inter, p50, p99, batch;
    interactive_waits(m, t0, 1500000, 4500000, &inter, &p50, &p99, &batch);
    int64_t total = 50 * 3; /* 3 s at 50/s */
    print_message("by class: interactive %lld (wait p50 %lld us, p99 %lld us), batch %lld of "
                  "the %lld left\n",
                  (long long)inter, (long long)p50, (long long)p99, (long long)batch,
                  (long long)(total - inter));
    assert_true(inter >= 25);
    assert_true(p99 <= 2 * 20000); /* two emission intervals (+ the round trip, apart) */
    assert_true(batch * 10 >= (total - inter) * 8);
    munmap(m, sizeof *m);

    /* first come, first served: the same processes without classes */
    t0 = now_us() + 300000;
    for (int i = 0; i < 3; i++) {
        roles[i].fcfs = true;
        roles[i].start_us = t0 + (i == 2 ? 1000000 : 0);
        roles[i].stop_us = t0 + 3000000;
    }
    m = run("aprio-f", 50, 5, roles, 3);
    prio_check_bound(m, 20000, 5);
    interactive_waits(m, t0, 1500000, 3000000, &inter, &p50, &p99, &batch);
    print_message("first come, first served: interactive %lld (wait p50 %lld us, p99 %lld us)\n",
                  (long long)inter, (long long)p50, (long long)p99);
    assert_true(p50 > 4 * 20000); /* behind the batch's reservations */
    munmap(m, sizeof *m);
}

static void test_tenants_split(void **state)
{
    (void)state;
    int64_t t0 = now_us() + 300000;
    role roles[4];
    for (int i = 0; i < 4; i++)
        roles[i] = (role){.priority = STG_PRIORITY_BATCH, .tenant = i % 2 ? "b" : "a",
                          .weight = i % 2 ? 2 : 1, .start_us = t0, .stop_us = t0 + 5000000};
    prio_shm *m = run("aprio-t", 100, 5, roles, 4);
    prio_check_bound(m, 10000, 5);
    int64_t got[2] = {0};
    for (int64_t i = 0; i < m->n; i++) {
        const prio_rec *r = &m->r[i];
        if (r->at_us >= t0 + 1000000 && r->at_us < t0 + 5000000)
            got[r->who % 2]++;
    }
    int64_t total = got[0] + got[1];
    double a = (double)got[0] / (double)total;
    print_message("tenants 1:2: a %lld, b %lld of %lld (%.0f%% of the key's 400): a %.3f\n",
                  (long long)got[0], (long long)got[1], (long long)total,
                  100.0 * (double)total / 400.0, a);
    assert_true(total >= 360); /* the key is used */
    assert_true(a >= (1.0 / 3.0) * 0.9 && a <= (1.0 / 3.0) * 1.1);
    munmap(m, sizeof *m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_script_is_the_model),
        cmocka_unit_test(test_acquire_class),
        cmocka_unit_test(test_interactive_beside_batch),
        cmocka_unit_test(test_tenants_split),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
