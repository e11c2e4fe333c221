/*
 * Integration tests of the shared adaptive rate (stg_redis_adaptive_*)
 * against a real redis-server started on a free loopback port.
 *
 * What is checked: off (everything admitted at once, tickets counting up)
 * until the first throttle; the first cut from the sends admitted so far
 * (beta x sends / 0.5 s); the recovery rule by ticket (a throttle for a send
 * admitted before the cut does not cut again, a newer one does); pacing at
 * the learned rate seen by a second limiter (another process); a hold
 * stopping every limiter; the fixed-rate calls refused on an adaptive
 * limiter and a bad configuration refused; the fallback to a local
 * adaptive rate (tickets 0) when Redis is gone, and STG_EUNAVAIL without
 * one; 4 processes sharing one key against a simulated server: every send
 * of every process admitted by the one key, and a throttle turns it on.
 *
 * Bounds come from the protocol: a wait measured from before a call lies
 * in [W - elapsed, W]; a slot's place on Redis's clock is bracketed by the
 * local time before and after the call that reserved it. How near the
 * limit the processes settle and how few throttles that costs are figures
 * of bench/bench_redis.sh, not checks here.
 */
#define _GNU_SOURCE
#include <math.h>

#include "cmocka_all.h"

#include "integration/redis_helper.h"

static stg_redis_limiter *make_adaptive(int port, const char *key, double share, logbook *lb)
{
    char url[128];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/%s", port, key);
    stg_redis_limiter_config cfg = {.url = url,
                                    .adaptive = true,
                                    .fallback_share = share,
                                    .reconnect_interval_us = STG_MS(100),
                                    .log = lb ? log_cb : NULL,
                                    .log_data = lb};
    int err = -1;
    char why[512];
    stg_redis_limiter *l = stg_redis_limiter_new(&cfg, &err, why, sizeof why);
    if (!l)
        fail_msg("stg_redis_limiter_new: %s: %s", stg_errname(err), why);
    return l;
}

/* n admissions; returns the last ticket. All must go at once. */
static int64_t admit_n(stg_redis_limiter *l, int n)
{
    int64_t ticket = 0;
    for (int i = 0; i < n; i++) {
        int64_t w = -1, t = -1;
        assert_int_equal(stg_redis_adaptive_acquire(l, NULL, 0, &w, &t), STG_OK);
        assert_int_equal(w, 0);
        assert_true(t > ticket);
        ticket = t;
    }
    return ticket;
}

static double rate_of(stg_redis_limiter *l, bool *enabled)
{
    double r = -1;
    int64_t n;
    assert_int_equal(stg_redis_adaptive_state(l, NULL, enabled, &r, &n), STG_OK);
    return r;
}

/* The key's last cut, from its hash: the admission count then (rs). */
static long long last_cut_rs(const char *name)
{
    redisContext *c = raw_connect(g_port);
    assert_non_null(c);
    redisReply *r = redisCommand(c, "HGET stagger:ad:%s rs", name);
    assert_non_null(r);
    long long v = r->type == REDIS_REPLY_STRING ? strtoll(r->str, NULL, 10) : -1;
    freeReplyObject(r);
    redisFree(c);
    return v;
}

/* Off until a throttle; the cut lands at 0.7 x the sends so far per 0.5 s
 * (checked while still in the first 0.5 s bucket, as the rule says);
 * throttles of sends admitted before the cut do not cut again while the
 * recovery time (1 s) lasts; a throttle of a newer send does. Which
 * throttle cut is read from the key (rs: the admission count at the last
 * cut), not guessed from rates. */
static void test_cut_and_recovery(void **state)
{
    (void)state;
    stg_redis_limiter *l = make_adaptive(g_port, "cut", 0, NULL);
    bool en = true;
    rate_of(l, &en);
    assert_false(en);
    int64_t t0 = now_us();
    int64_t last = admit_n(l, 20);
    assert_int_equal(last, 20);
    assert_int_equal(stg_redis_adaptive_response(l, NULL, 5, false, 0), STG_OK);
    rate_of(l, &en);
    assert_false(en); /* a success costs nothing and changes nothing */
    int64_t cut_at = now_us();
    assert_int_equal(stg_redis_adaptive_response(l, NULL, 7, true, 0), STG_OK);
    double r = rate_of(l, &en);
    assert_true(en);
    assert_int_equal(last_cut_rs("cut"), 20);
    /* Still in the first bucket, 20 sends / 0.5 s = 40/s, cut to 28/s;
     * read a moment later, on a curve rising at most 3 C K^2 = 11.6/s per
     * second (C 0.4, K^3 = 40 * 0.3 / 0.4 = 30), faster than slow start
     * (28 ln 2 / 2 s = 9.7/s per second). */
    int64_t since_cut = now_us() - cut_at;
    if (now_us() - t0 < STG_MS(500))
        assert_true(r >= 28.0 - 0.002 && r <= 28.0 + 12.0 * (double)since_cut / 1e6 + 0.002);
    /* The other 13 sends of that volley come back throttled too: one event. */
    for (int64_t t = 8; t <= 20; t++)
        assert_int_equal(stg_redis_adaptive_response(l, NULL, t, true, 0), STG_OK);
    double r2 = rate_of(l, &en);
    if (now_us() - cut_at < STG_SEC(1)) { /* within the recovery time */
        assert_int_equal(last_cut_rs("cut"), 20);
        assert_true(r2 >= r); /* not cut again (it may have grown) */
    }
    /* A send admitted after the cut, throttled: a new event. */
    int64_t w, t;
    assert_int_equal(stg_redis_adaptive_acquire(l, NULL, STG_SEC(5), &w, &t), STG_OK);
    assert_int_equal(t, 21);
    assert_int_equal(stg_redis_adaptive_response(l, NULL, t, true, 0), STG_OK);
    assert_int_equal(last_cut_rs("cut"), 21);
    double r3 = rate_of(l, &en);
    printf("# cut: %.2f/s, same event %.2f/s, next event %.2f/s\n", r, r2, r3);
    stg_redis_limiter_free(l);
}

/* Once on, a second limiter (another process) is paced at the learned rate.
 * With burst 1, each reservation's slot on Redis's clock is the previous
 * slot plus the interval T = 1 / rate in force (or the call's own instant,
 * when that is later). The rate only grows between the two reads around
 * the loop (the curve and slow start grow with time; the measurement cap
 * is far above it), so T lies within [1 / r_after, 1 / r_before]. A slot
 * is the script's instant plus the wait handed back, and the script ran
 * between the local times before and after the call. */
static void test_pacing_is_shared(void **state)
{
    (void)state;
    stg_redis_limiter *a = make_adaptive(g_port, "pace", 0, NULL);
    stg_redis_limiter *b = make_adaptive(g_port, "pace", 0, NULL);
    int64_t last = admit_n(a, 10); /* 20/s stand-in */
    assert_int_equal(stg_redis_adaptive_response(a, NULL, last, true, 0), STG_OK);
    bool en;
    double r0 = rate_of(b, &en);
    assert_true(en);
    assert_true(r0 > 0 && r0 < 20); /* cut below the 20/s it was sent at */
    int64_t lo[5], hi[5], after[5]; /* each slot lies in [lo, hi] (local time) */
    for (int i = 0; i < 5; i++) {
        int64_t w, t;
        int64_t before = now_us();
        assert_int_equal(stg_redis_adaptive_acquire(b, NULL, STG_SEC(5), &w, &t), STG_OK);
        after[i] = now_us();
        lo[i] = before + w - 1; /* the wait is rounded up to the us */
        hi[i] = after[i] + w;
    }
    double r1 = rate_of(b, &en);
    assert_true(r1 >= r0);
    double t_min = 1e6 / r1 - 1, t_max = 1e6 / r0 + 1;
    for (int i = 1; i < 5; i++) {
        /* gap >= T: one process's slots cannot come closer */
        assert_true((double)(hi[i] - lo[i - 1]) >= t_min);
        /* gap = max(T, the call's instant - the previous slot) */
        double late = (double)(after[i] - lo[i - 1]);
        assert_true((double)(lo[i] - hi[i - 1]) <= (late > t_max ? late : t_max));
    }
    printf("# paced at %.2f..%.2f/s: slots %.1f ms apart on average\n", r0, r1,
           (double)(lo[4] + hi[4] - lo[0] - hi[0]) / 2 / 4 / 1000);
    /* Without waiting: a zero timeout is refused and reserves nothing. */
    int64_t w, t = -1;
    assert_int_equal(stg_redis_adaptive_acquire(a, NULL, 0, &w, &t), STG_ETIMEDOUT);
    assert_true(w > 0);
    stg_redis_limiter_free(a);
    stg_redis_limiter_free(b);
}

/* A hold (the quota is spent until a reset) stops every limiter, also one
 * that has not learned a rate. */
static void test_hold(void **state)
{
    (void)state;
    stg_redis_limiter *a = make_adaptive(g_port, "hold", 0, NULL);
    stg_redis_limiter *b = make_adaptive(g_port, "hold", 0, NULL);
    int64_t t = admit_n(a, 1);
    int64_t t0 = now_us();
    /* 30 s: longer than any stall of the test, so the refusal is certain */
    assert_int_equal(stg_redis_adaptive_response(a, NULL, t, false, STG_SEC(30)), STG_OK);
    int64_t w;
    assert_int_equal(stg_redis_adaptive_acquire(b, NULL, 0, &w, NULL), STG_ETIMEDOUT);
    assert_in_range_i64(w, STG_SEC(30) - (now_us() - t0), STG_SEC(30));
    assert_int_equal(stg_redis_adaptive_acquire(b, NULL, STG_SEC(60), &w, NULL), STG_OK);
    assert_in_range_i64(w, STG_SEC(30) - (now_us() - t0), STG_SEC(30));
    bool en;
    rate_of(a, &en);
    assert_false(en); /* a hold is not a throttle */
    stg_redis_limiter_free(a);
    stg_redis_limiter_free(b);
}

/* A 503 with Retry-After reaches the limiter as a hold (throttled false,
 * hold_us, as libstagger-curl reports it): it does not cut, and the
 * learned curve and the measurement pause for it, so after the outage the
 * key resumes at the rate it had. Without the pause the curve would have
 * run on through the hold, and the measurement would have read the
 * silence as an idle client; here the rate after the hold is bounded by
 * the curve (or slow start) at the time that ran outside the hold. */
static void test_outage_is_a_hold(void **state)
{
    (void)state;
    stg_redis_limiter *l = make_adaptive(g_port, "outage", 0, NULL);
    int64_t last = admit_n(l, 40);
    int64_t cut_before = now_us();
    assert_int_equal(stg_redis_adaptive_response(l, NULL, last, true, 0), STG_OK); /* a 429 */
    bool en;
    double r0 = rate_of(l, &en);
    assert_true(en);
    long long rs = last_cut_rs("outage");
    int64_t w, t;
    assert_int_equal(stg_redis_adaptive_acquire(l, NULL, STG_SEC(5), &w, &t), STG_OK);
    int64_t hold_at = now_us();
    const int64_t hold = STG_MS(1200);
    /* its answer: 503, Retry-After 1.2 s; a newer ticket than the cut's,
     * so a throttle here would cut again */
    assert_int_equal(stg_redis_adaptive_response(l, NULL, t, false, hold), STG_OK);
    assert_int_equal(last_cut_rs("outage"), rs);
    double r1 = rate_of(l, &en);
    assert_true(en);
    assert_true(r1 >= r0 - 0.001);
    /* nobody sends during the hold */
    assert_int_equal(stg_redis_adaptive_acquire(l, NULL, 0, &w, NULL), STG_ETIMEDOUT);
    assert_in_range_i64(w, hold - (now_us() - hold_at), hold);
    sleep_us(hold_at + hold + STG_MS(100) - now_us());
    double r2 = rate_of(l, &en);
    int64_t q = now_us();
    /* The model's clock ran at most (q - cut_before) - hold since the cut.
     * r0 = beta * W_max (read just after the cut: at least that); the rate
     * is then at most max(C (t - K)^3 + W_max, slow start r0 * 2^(t / 2 s)). */
    double tm = (double)(q - cut_before - hold) / 1e6;
    double wm = r0 / 0.7, k = cbrt(wm * 0.3 / 0.4);
    double curve = 0.4 * pow(tm - k, 3) + wm, slow = r0 * pow(2.0, tm / 2.0);
    double bound = curve > slow ? curve : slow;
    printf("# before the hold %.2f/s, after %.2f/s (at most %.2f)\n", r0, r2, bound);
    assert_true(r2 >= r0 - 0.001);
    assert_true(r2 <= bound + 0.002);
    assert_int_equal(last_cut_rs("outage"), rs);
    stg_redis_limiter_free(l);
}

static void test_api_misuse(void **state)
{
    (void)state;
    stg_redis_limiter *a = make_adaptive(g_port, "misuse", 0, NULL);
    int64_t w;
    assert_int_equal(stg_redis_limiter_acquire(a, NULL, 1, 0, &w), STG_EINVAL);
    assert_int_equal(stg_redis_limiter_try(a, NULL, 1, &w), STG_EINVAL);
    assert_int_equal(stg_redis_limiter_set_rate(a, 5), STG_EINVAL);
    stg_redis_limiter_free(a);
    /* fixed-rate limiters have no adaptive calls */
    char url[128];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/fixed", g_port);
    stg_redis_limiter_config cfg = {.url = url, .rate = 10};
    int err;
    stg_redis_limiter *f = stg_redis_limiter_new(&cfg, &err, NULL, 0);
    assert_non_null(f);
    assert_int_equal(stg_redis_adaptive_acquire(f, NULL, 0, &w, NULL), STG_EINVAL);
    assert_int_equal(stg_redis_adaptive_response(f, NULL, 1, true, 0), STG_EINVAL);
    stg_redis_limiter_free(f);
    /* adaptive with a rate, or a bad adaptive field: refused, with a reason */
    char why[256] = "";
    cfg.adaptive = true;
    assert_null(stg_redis_limiter_new(&cfg, &err, why, sizeof why));
    assert_int_equal(err, STG_EINVAL);
    assert_non_null(strstr(why, "rate and burst must be 0"));
    cfg.rate = 0;
    cfg.adaptive_config.beta = 1.5;
    assert_null(stg_redis_limiter_new(&cfg, &err, why, sizeof why));
    assert_int_equal(err, STG_EINVAL);
}

/* Redis gone: with a fallback each limiter learns alone (tickets 0), and
 * said so once; without one, STG_EUNAVAIL. Back: Redis answers again. */
static void test_fallback(void **state)
{
    (void)state;
    int port = free_port();
    pid_t pid = server_start(port);
    logbook lb = {.mu = PTHREAD_MUTEX_INITIALIZER};
    stg_redis_limiter *l = make_adaptive(port, "fb", 0.5, &lb);
    stg_redis_limiter *n = make_adaptive(port, "fb", 0, NULL);
    int64_t last = admit_n(l, 10);
    assert_int_equal(stg_redis_adaptive_response(l, NULL, last, true, 0), STG_OK);
    bool en;
    double learned = rate_of(l, &en);
    assert_true(en && learned > 0);
    /* one more acquire so the limiter remembers the learned rate */
    int64_t w, t;
    assert_int_equal(stg_redis_adaptive_acquire(l, NULL, STG_SEC(2), &w, &t), STG_OK);
    server_stop(pid, SIGKILL);

    assert_int_equal(stg_redis_adaptive_acquire(l, NULL, STG_SEC(1), &w, &t), STG_OK);
    assert_int_equal(t, 0); /* admitted locally */
    assert_int_equal(log_count(&lb), 1);
    assert_int_equal(lb.ev[0], STG_REDIS_EVENT_FALLBACK);
    if (!strstr(lb.msg[0], "local adaptive rate"))
        fail_msg("unclear message: %s", lb.msg[0]);
    /* The local limiter learns from its own throttles: after one, it paces. */
    assert_int_equal(stg_redis_adaptive_response(l, NULL, 0, true, 0), STG_OK);
    int admitted_now = 0;
    for (int i = 0; i < 5; i++) {
        if (stg_redis_adaptive_acquire(l, NULL, 0, &w, &t) == STG_OK)
            admitted_now++;
    }
    assert_true(admitted_now <= 1);
    assert_int_equal(stg_redis_adaptive_acquire(n, NULL, 0, &w, &t), STG_EUNAVAIL);
    assert_int_equal(stg_redis_adaptive_state(l, NULL, &en, NULL, NULL), STG_EUNAVAIL);

    pid = server_start(port);
    int64_t deadline = now_us() + STG_SEC(60); /* a hang guard, not a bound */
    int rc;
    do {
        sleep_us(STG_MS(120));
        rc = stg_redis_adaptive_acquire(l, NULL, STG_SEC(5), &w, &t);
    } while (t == 0 && now_us() < deadline);
    assert_int_equal(rc, STG_OK);
    assert_true(t >= 1); /* Redis again (the restarted one starts afresh) */
    assert_int_equal(lb.ev[1], STG_REDIS_EVENT_BACK);
    stg_redis_limiter_free(l);
    stg_redis_limiter_free(n);
    server_stop(pid, SIGTERM);
}

/* ---- 4 processes share one learned rate ------------------------------------
 * Each child sends as fast as its limiter lets it to a simulated server: a
 * GCRA kept in Redis too (the fixed-rate limiter with try: "refused" =
 * throttled) that admits a burst of 5 and then next to nothing (0.01/s).
 * What the protocol promises, and is checked: every send of every process
 * was admitted by the one shared key (its admission count is the sum of
 * the processes' sends, the tickets each process gets rise), and the
 * throttles turned the key's pacing on. Until the first throttle the key
 * admits at once, so the 6th send comes promptly and is throttled for
 * certain. How near a real limit the four settle and how few throttles
 * that costs is measured by bench/bench_redis.sh (bench_redis URL learn),
 * not asserted here. */

#define SIM_PROCS 4
#define SIM_RATE 0.01
#define SIM_RUN_US STG_SEC(2)

typedef struct sim_counts {
    long sends, throttled, bad_tickets;
} sim_counts;

static void sim_child(int fd)
{
    stg_redis_limiter *l = make_adaptive(g_port, "sim", 0, NULL);
    char url[128];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/simserver", g_port);
    stg_redis_limiter_config sc = {.url = url, .rate = SIM_RATE, .burst = 5};
    stg_redis_limiter *server = stg_redis_limiter_new(&sc, NULL, NULL, 0);
    sim_counts c = {0, 0, 0};
    int64_t end = now_us() + SIM_RUN_US, prev = 0;
    while (server && now_us() < end) {
        int64_t w, t;
        int rc = stg_redis_adaptive_acquire(l, NULL, end - now_us(), &w, &t);
        if (rc != STG_OK)
            break;
        c.bad_tickets += t <= prev;
        prev = t;
        sleep_us(w);
        int64_t sw;
        bool throttled = stg_redis_limiter_try(server, NULL, 1, &sw) != STG_OK;
        sleep_us(2000); /* the answer's round trip */
        stg_redis_adaptive_response(l, NULL, t, throttled, 0);
        c.sends++;
        c.throttled += throttled;
    }
    stg_redis_limiter_free(server);
    stg_redis_limiter_free(l);
    if (write(fd, &c, sizeof c) != (ssize_t)sizeof c)
        _exit(2);
    _exit(0);
}

static void test_processes_share_one_rate(void **state)
{
    (void)state;
    int fds[SIM_PROCS][2];
    pid_t pids[SIM_PROCS];
    for (int i = 0; i < SIM_PROCS; i++) {
        assert_int_equal(pipe(fds[i]), 0);
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            close(fds[i][0]);
            sim_child(fds[i][1]);
        }
        close(fds[i][1]);
    }
    sim_counts tot = {0, 0, 0};
    for (int i = 0; i < SIM_PROCS; i++) {
        sim_counts c;
        assert_int_equal(read(fds[i][0], &c, sizeof c), (ssize_t)sizeof c);
        close(fds[i][0]);
        int st;
        waitpid(pids[i], &st, 0);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        tot.sends += c.sends;
        tot.throttled += c.throttled;
        tot.bad_tickets += c.bad_tickets;
    }
    stg_redis_limiter *probe = make_adaptive(g_port, "sim", 0, NULL);
    bool en = false;
    int64_t admissions = -1;
    assert_int_equal(stg_redis_adaptive_state(probe, NULL, &en, NULL, &admissions), STG_OK);
    stg_redis_limiter_free(probe);
    printf("# 4 processes: %ld sends, %ld throttled, %lld admissions of the shared key\n",
           tot.sends, tot.throttled, (long long)admissions);
    assert_int_equal(admissions, tot.sends);
    assert_int_equal(tot.bad_tickets, 0);
    assert_true(tot.sends >= 6);
    assert_true(tot.throttled >= 1);
    assert_true(en);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cut_and_recovery),
        cmocka_unit_test(test_pacing_is_shared),
        cmocka_unit_test(test_hold),
        cmocka_unit_test(test_outage_is_a_hold),
        cmocka_unit_test(test_api_misuse),
        cmocka_unit_test(test_fallback),
        cmocka_unit_test(test_processes_share_one_rate),
    };
    return cmocka_run_group_tests(tests, redis_group_setup, redis_group_teardown);
}
