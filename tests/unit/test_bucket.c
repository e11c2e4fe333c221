/*
 * Token bucket (GCRA) tests. Every expectation is exact: the clock is a
 * variable moved by hand, so "wait exactly 100000 us" is checked as such.
 * The multi-threaded test shares an atomic fake clock between threads that
 * race both for tokens and for advancing time, so `now` values reach the
 * bucket out of order, and checks the bound burst + rate * t.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <math.h>
#include <stdlib.h>

#include <stagger/bucket.h>

static stg_bucket make(double rate, int64_t burst, int64_t now_us)
{
    stg_bucket b;
    stg_bucket_config cfg = {.rate = rate, .burst = burst};
    assert_int_equal(stg_bucket_init(&b, &cfg, now_us), STG_OK);
    return b;
}

/* Expect a try of weight w at now to be refused with exactly `wait`. */
static void expect_wait(stg_bucket *b, int64_t w, int64_t now, int64_t wait)
{
    int64_t got = -1;
    assert_int_equal(stg_bucket_try(b, w, now, &got), STG_EAGAIN);
    assert_int_equal(got, wait);
}

static void expect_take(stg_bucket *b, int64_t w, int64_t now)
{
    int64_t got = -1;
    assert_int_equal(stg_bucket_try(b, w, now, &got), STG_OK);
    assert_int_equal(got, 0);
}

static void test_init_validation(void **state)
{
    (void)state;
    stg_bucket b;
    stg_bucket_config cfg = {.rate = 10};
    assert_int_equal(stg_bucket_init(NULL, &cfg, 0), STG_EINVAL);
    assert_int_equal(stg_bucket_init(&b, NULL, 0), STG_EINVAL);
    cfg.rate = 0;
    assert_int_equal(stg_bucket_init(&b, &cfg, 0), STG_EINVAL);
    cfg.rate = -1;
    assert_int_equal(stg_bucket_init(&b, &cfg, 0), STG_EINVAL);
    cfg.rate = NAN;
    assert_int_equal(stg_bucket_init(&b, &cfg, 0), STG_EINVAL);
    cfg.rate = INFINITY;
    assert_int_equal(stg_bucket_init(&b, &cfg, 0), STG_EINVAL);
    cfg.rate = 2e9;
    assert_int_equal(stg_bucket_init(&b, &cfg, 0), STG_EINVAL);
    cfg.rate = 1e-12; /* one token per 31700 years: T overflows the span */
    assert_int_equal(stg_bucket_init(&b, &cfg, 0), STG_EINVAL);
    cfg.rate = 10;
    cfg.burst = -1;
    assert_int_equal(stg_bucket_init(&b, &cfg, 0), STG_EINVAL);
    cfg.rate = 1;
    cfg.burst = INT64_MAX; /* burst * T would overflow */
    assert_int_equal(stg_bucket_init(&b, &cfg, 0), STG_EINVAL);
    cfg.rate = 1e9;
    cfg.burst = 0; /* default burst = ceil(rate) = 1e9 tokens of 1 ns: fine */
    assert_int_equal(stg_bucket_init(&b, &cfg, 0), STG_OK);
    assert_int_equal(stg_bucket_available(&b, 0), 1000000000);
}

/* The sequence from the brief: rate 10/s, burst 3. */
static void test_sequence_rate10_burst3(void **state)
{
    (void)state;
    stg_bucket b = make(10, 3, 0);
    assert_int_equal(stg_bucket_available(&b, 0), 3);
    expect_take(&b, 1, 0);
    expect_take(&b, 1, 0);
    expect_take(&b, 1, 0);
    assert_int_equal(stg_bucket_available(&b, 0), 0);
    expect_wait(&b, 1, 0, 100000);
    expect_wait(&b, 1, 0, 100000); /* a refused try takes nothing */
    expect_wait(&b, 1, 99999, 1);
    expect_take(&b, 1, 100000);
    expect_wait(&b, 1, 100000, 100000);
    expect_take(&b, 1, 200000);
    /* Idle for a long time: refills to burst, not beyond. */
    assert_int_equal(stg_bucket_available(&b, 250000), 0);
    assert_int_equal(stg_bucket_available(&b, 300000), 1);
    assert_int_equal(stg_bucket_available(&b, 499999), 2);
    assert_int_equal(stg_bucket_available(&b, 500000), 3);
    assert_int_equal(stg_bucket_available(&b, STG_SEC(3600)), 3);
    expect_take(&b, 1, STG_SEC(10));
    expect_take(&b, 1, STG_SEC(10));
    expect_take(&b, 1, STG_SEC(10));
    expect_wait(&b, 1, STG_SEC(10), 100000);
    /* NULL wait pointer is fine. */
    assert_int_equal(stg_bucket_try(&b, 1, STG_SEC(10), NULL), STG_EAGAIN);
    assert_int_equal(stg_bucket_try(&b, 1, STG_SEC(10) + 100000, NULL), STG_OK);
}

/* A non-zero origin and negative instants behave the same. */
static void test_origin_offset(void **state)
{
    (void)state;
    int64_t t0 = -STG_SEC(5);
    stg_bucket b = make(10, 1, t0);
    expect_take(&b, 1, t0);
    expect_wait(&b, 1, t0, 100000);
    expect_take(&b, 1, t0 + 100000);
    /* A clock far from the origin (decades) is clamped, not overflowed. */
    stg_bucket c = make(10, 1, INT64_MAX - 5);
    expect_take(&c, 1, INT64_MIN + 5);
    expect_wait(&c, 1, INT64_MIN + 5, 100000);
    expect_take(&c, 1, INT64_MAX);
}

static void test_fractional_rate(void **state)
{
    (void)state;
    /* 0.5/s, default burst max(1, ceil(0.5)) = 1. */
    stg_bucket b = make(0.5, 0, 0);
    assert_int_equal(stg_bucket_available(&b, 0), 1);
    expect_take(&b, 1, 0);
    expect_wait(&b, 1, 0, STG_SEC(2));
    expect_wait(&b, 1, STG_MS(1500), STG_MS(500));
    expect_wait(&b, 1, STG_SEC(2) - 1, 1);
    expect_take(&b, 1, STG_SEC(2));
    assert_true(stg_bucket_rate(&b) == 0.5);

    /* 2.5/s: default burst ceil(2.5) = 3; T = 400 ms. */
    stg_bucket c = make(2.5, 0, 0);
    assert_int_equal(stg_bucket_available(&c, 0), 3);
    expect_take(&c, 3, 0);
    expect_wait(&c, 1, 0, STG_MS(400));
    expect_wait(&c, 2, 0, STG_MS(800));

    /* 3/s: T = ceil(1e9 / 3) = 333333334 ns; waits round UP to the us, so a
     * retry after exactly the wait is admitted, one us earlier is not. */
    stg_bucket d = make(3, 1, 0);
    expect_take(&d, 1, 0);
    expect_wait(&d, 1, 0, 333334);
    expect_wait(&d, 1, 333333, 1);
    expect_take(&d, 1, 333334);
}

static void test_weights(void **state)
{
    (void)state;
    stg_bucket b = make(10, 5, 0);
    expect_take(&b, 3, 0);
    assert_int_equal(stg_bucket_available(&b, 0), 2);
    expect_wait(&b, 3, 0, 100000);
    expect_take(&b, 2, 0);
    expect_wait(&b, 1, 0, 100000);
    expect_wait(&b, 5, 0, 500000);
    expect_take(&b, 5, 500000);

    /* weight == burst is fine, weight > burst can never be admitted. */
    int64_t w = 777;
    assert_int_equal(stg_bucket_try(&b, 6, STG_SEC(100), &w), STG_ETOOBIG);
    assert_int_equal(w, 777); /* untouched */
    assert_int_equal(stg_bucket_acquire(&b, 6, STG_SEC(100), STG_SEC(100), &w), STG_ETOOBIG);
    assert_int_equal(stg_bucket_try(&b, 0, 0, &w), STG_EINVAL);
    assert_int_equal(stg_bucket_try(&b, -1, 0, &w), STG_EINVAL);
    assert_int_equal(stg_bucket_acquire(&b, 0, 0, 0, &w), STG_EINVAL);
    assert_int_equal(stg_bucket_try(NULL, 1, 0, &w), STG_EINVAL);
    /* The refusals took nothing. */
    assert_int_equal(stg_bucket_available(&b, STG_SEC(100)), 5);
    expect_take(&b, 5, STG_SEC(100));

    /* A huge burst with a huge weight stays exact (no overflow). */
    stg_bucket h = make(1e6, INT64_C(1) << 40, 0);
    expect_take(&h, INT64_C(1) << 40, 0);
    expect_wait(&h, INT64_C(1) << 40, 0, (INT64_C(1) << 40)); /* 1 us per token */
}

static void test_acquire_timeout(void **state)
{
    (void)state;
    stg_bucket b = make(10, 1, 0);
    int64_t w = -1;
    assert_int_equal(stg_bucket_acquire(&b, 1, 0, 0, &w), STG_OK);
    assert_int_equal(w, 0);
    /* Within the timeout: reserved, the caller waits 100 ms. */
    assert_int_equal(stg_bucket_acquire(&b, 1, 0, 100000, &w), STG_OK);
    assert_int_equal(w, 100000);
    /* The next slot is at 200 ms: a 150 ms timeout is not enough. */
    assert_int_equal(stg_bucket_acquire(&b, 1, 0, 150000, &w), STG_ETIMEDOUT);
    assert_int_equal(w, 200000);
    assert_int_equal(stg_bucket_acquire(&b, 1, 0, 199999, &w), STG_ETIMEDOUT);
    assert_int_equal(w, 200000);
    /* ...and a timed-out acquire took nothing: the slot is still at 200 ms. */
    expect_wait(&b, 1, 0, 200000);
    expect_wait(&b, 1, 150000, 50000);
    assert_int_equal(stg_bucket_acquire(&b, 1, 0, 200000, &w), STG_OK);
    assert_int_equal(w, 200000);
    /* Timeout <= 0: only what is available now. */
    assert_int_equal(stg_bucket_acquire(&b, 1, STG_SEC(1), -5, &w), STG_OK);
    assert_int_equal(w, 0);
    assert_int_equal(stg_bucket_acquire(&b, 1, STG_SEC(1), -5, &w), STG_ETIMEDOUT);
    assert_int_equal(w, 100000);
    /* "No limit": reservations queue one T apart. */
    for (int i = 1; i <= 5; i++) {
        assert_int_equal(stg_bucket_acquire(&b, 1, STG_SEC(1), INT64_MAX, &w), STG_OK);
        assert_int_equal(w, 100000 * i);
    }
    assert_int_equal(stg_bucket_available(&b, STG_SEC(1) + 599999), 0);
    assert_int_equal(stg_bucket_available(&b, STG_SEC(1) + 600000), 1);
}

/* Timed-out acquires with weights: a big take refused does not block or
 * consume anything for the small ones. */
static void test_acquire_timeout_takes_nothing(void **state)
{
    (void)state;
    stg_bucket b = make(100, 10, 0);
    int64_t w;
    assert_int_equal(stg_bucket_acquire(&b, 6, 0, 0, &w), STG_OK);
    assert_int_equal(stg_bucket_available(&b, 0), 4);
    assert_int_equal(stg_bucket_acquire(&b, 10, 0, STG_MS(50), &w), STG_ETIMEDOUT);
    assert_int_equal(w, STG_MS(60));
    assert_int_equal(stg_bucket_available(&b, 0), 4);
    assert_int_equal(stg_bucket_acquire(&b, 10, 0, STG_MS(60), &w), STG_OK);
    assert_int_equal(w, STG_MS(60));
    assert_int_equal(stg_bucket_available(&b, STG_MS(60)), 0);
}

static void test_set_rate(void **state)
{
    (void)state;
    stg_bucket b = make(10, 2, 0);
    assert_true(stg_bucket_rate(&b) == 10.0);
    expect_take(&b, 2, 0);
    /* A cut keeps the tokens owed (2 tokens' worth of debt at 10/s is
     * 200 ms; at 1/s it is 2 s): the bucket is still empty and the next
     * token comes one new T later. A cut never refills. */
    assert_int_equal(stg_bucket_set_rate(&b, 1, 0), STG_OK);
    assert_true(stg_bucket_rate(&b) == 1.0);
    assert_int_equal(stg_bucket_available(&b, 0), 0);
    expect_wait(&b, 1, 0, STG_SEC(1));
    expect_take(&b, 1, STG_SEC(1));
    /* At 1 s, 2 tokens are owed (the bucket is empty and the next one
     * comes at 2 s). A rise keeps the 2 tokens owed, paid at 100/s: the
     * next token is 10 ms away. */
    assert_int_equal(stg_bucket_available(&b, STG_SEC(1)), 0);
    assert_int_equal(stg_bucket_set_rate(&b, 100, STG_SEC(1)), STG_OK);
    expect_wait(&b, 1, STG_SEC(1), STG_MS(10));
    expect_take(&b, 1, STG_SEC(1) + STG_MS(10));
    expect_wait(&b, 1, STG_SEC(1) + STG_MS(10), STG_MS(10));
    /* Up and down again leaves the debt where it was (no ratchet). */
    for (int i = 0; i < 100; i++) {
        assert_int_equal(stg_bucket_set_rate(&b, 37, STG_SEC(1) + STG_MS(10)), STG_OK);
        assert_int_equal(stg_bucket_set_rate(&b, 100, STG_SEC(1) + STG_MS(10)), STG_OK);
    }
    expect_wait(&b, 1, STG_SEC(1) + STG_MS(10), STG_MS(10));
    /* Idle: full at the new rate, burst unchanged. */
    assert_int_equal(stg_bucket_available(&b, STG_SEC(10)), 2);
    /* Invalid rates change nothing. */
    assert_int_equal(stg_bucket_set_rate(&b, 0, 0), STG_EINVAL);
    assert_int_equal(stg_bucket_set_rate(&b, NAN, 0), STG_EINVAL);
    assert_int_equal(stg_bucket_set_rate(&b, 1e10, 0), STG_EINVAL);
    assert_int_equal(stg_bucket_set_rate(NULL, 1, 0), STG_EINVAL);
    assert_true(stg_bucket_rate(&b) == 100.0);
    expect_take(&b, 2, STG_SEC(10));
    expect_wait(&b, 1, STG_SEC(10), STG_MS(10));
    /* Fractional set. */
    assert_int_equal(stg_bucket_set_rate(&b, 0.25, STG_SEC(20)), STG_OK);
    expect_take(&b, 2, STG_SEC(20));
    expect_wait(&b, 1, STG_SEC(20), STG_SEC(4));
}

/* Out-of-order `now` from one thread's point of view: a take stamped
 * earlier than one already admitted cannot sneak extra tokens in. */
static void test_out_of_order_now(void **state)
{
    (void)state;
    stg_bucket b = make(10, 2, 0);
    expect_take(&b, 2, STG_SEC(1));     /* late thread empties it at 1 s */
    expect_wait(&b, 1, STG_MS(900), STG_MS(200)); /* stale now: still empty */
    expect_wait(&b, 1, STG_SEC(1), STG_MS(100));
    expect_take(&b, 1, STG_MS(1100));
    expect_wait(&b, 1, STG_MS(1050), STG_MS(150));
}

static unsigned lcg(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return (*s >> 16) & 0x7fffu;
}

/* Property: with labels that jitter backwards by up to 3 ms around a
 * steadily advancing clock, no interval [a, b] of labels holds more than
 * burst + rate * (b - a) admitted weight. Checked over every interval at
 * once: with admissions sorted by label and prefix sums S,
 * max over i <= j of S_j - S_(i-1) - rate * (l_j - l_i) must be <= burst. */
#define PROP_N 20000
static int64_t prop_label[PROP_N];
static int64_t prop_weight[PROP_N];

static int cmp_idx(const void *a, const void *b)
{
    int64_t la = prop_label[*(const int *)a], lb = prop_label[*(const int *)b];
    return (la > lb) - (la < lb);
}

static void test_out_of_order_property(void **state)
{
    (void)state;
    static int idx[PROP_N];
    const double rate = 1000.0; /* tokens per second */
    const int64_t burst = 5;
    stg_bucket b = make(rate, burst, 0);
    unsigned seed = 42;
    int n = 0;
    int64_t clock = 0;
    for (int i = 0; i < 4 * PROP_N && n < PROP_N; i++) {
        clock += lcg(&seed) % 700; /* about 350 us per attempt: saturating */
        int64_t label = clock - (int64_t)(lcg(&seed) % 3000);
        int64_t w = 1 + lcg(&seed) % 3;
        if (stg_bucket_try(&b, w, label, NULL) == STG_OK) {
            prop_label[n] = label;
            prop_weight[n] = w;
            idx[n] = n;
            n++;
        }
    }
    assert_true(n > 1000);
    qsort(idx, (size_t)n, sizeof idx[0], cmp_idx);
    /* best = max over i <= j of (rate * l_i - S_(i-1)) */
    double best = -1e300, worst = -1e300, prefix = 0;
    for (int k = 0; k < n; k++) {
        double l = (double)prop_label[idx[k]] / 1e6;
        double cand = rate * l - prefix;
        if (cand > best)
            best = cand;
        prefix += (double)prop_weight[idx[k]];
        double excess = prefix - rate * l + best;
        if (excess > worst)
            worst = excess;
    }
    print_message("      %d admitted; largest burst over any interval: %.3f (limit %lld)\n", n,
                  worst, (long long)burst);
    assert_true(worst <= (double)burst + 1e-6);
    assert_true(worst >= (double)burst - 1); /* the bucket was really saturated */
}

/* ---- Multi-threaded: the bound holds under real races. ---- */

#define MT_THREADS 4
#define MT_RATE 10000.0            /* T = 100 us */
#define MT_BURST 50
#define MT_STEP_US 10              /* small advance of the fake clock */
#define MT_JUMP_US 1500            /* largest advance after a refusal */
#define MT_END_US STG_SEC(3)       /* stop advancing here */

typedef struct mt_shared {
    stg_bucket bucket;
    _Atomic int64_t clock_us;
    _Atomic int64_t admitted;      /* total weight admitted */
    _Atomic int64_t tries;
    _Atomic int64_t max_label;     /* largest now of an admitted take so far */
    _Atomic int64_t stale;         /* admissions labelled before max_label */
    _Atomic int ready;             /* start line, so the threads overlap */
} mt_shared;

typedef struct mt_arg {
    mt_shared *sh;
    unsigned seed;
} mt_arg;

static void *mt_worker(void *p)
{
    mt_arg *arg = p;
    mt_shared *sh = arg->sh;
    unsigned seed = arg->seed;
    int64_t mine = 0, tries = 0, stale = 0;
    atomic_fetch_add(&sh->ready, 1);
    while (atomic_load(&sh->ready) < MT_THREADS)
        ;
    for (;;) {
        int64_t now = atomic_load(&sh->clock_us);
        if (now >= MT_END_US)
            break;
        unsigned r = lcg(&seed);
        /* Now and then get "preempted" between reading the clock and
         * taking, so the label is stale by the time the bucket sees it. */
        if (r % 16 == 0)
            sched_yield();
        /* And now and then present a label older than the clock, as a
         * thread that read it a while ago would: the yield makes stale
         * labels likely under real preemption, this makes them certain,
         * whatever the scheduler does on a loaded machine. */
        if (r % 16 == 1) {
            int64_t back = (int64_t)(lcg(&seed) % (2 * MT_STEP_US + 1));
            now = now > back ? now - back : 0;
        }
        /* Mostly weight 1, sometimes 2 or 3. */
        int64_t w = r % 8 == 0 ? 3 : r % 4 == 0 ? 2 : 1;
        int64_t wait = 0;
        int rc = stg_bucket_try(&sh->bucket, w, now, &wait);
        tries++;
        if (rc == STG_OK) {
            mine += w;
            /* Count admissions whose label is older than one already
             * admitted: evidence the out-of-order case was exercised. */
            int64_t m = atomic_load(&sh->max_label);
            while (m < now && !atomic_compare_exchange_weak(&sh->max_label, &m, now))
                ;
            if (m > now)
                stale++;
        }
        else if (rc == STG_EAGAIN && wait <= 0)
            fail_msg("EAGAIN with wait %lld", (long long)wait);
        /* Advance time now and then: a little after some admissions, by up
         * to 15 tokens' worth after half the refusals, so the bucket swings
         * between empty and part-full and threads holding a stale label
         * still find tokens (the case a buggy bucket gets wrong). Threads
         * race for the clock too. */
        if (rc == STG_EAGAIN && r % 2 == 0)
            atomic_fetch_add(&sh->clock_us, MT_STEP_US + (int64_t)(lcg(&seed) % MT_JUMP_US));
        else if (r % 256 == 0)
            atomic_fetch_add(&sh->clock_us, MT_STEP_US);
    }
    atomic_fetch_add(&sh->admitted, mine);
    atomic_fetch_add(&sh->tries, tries);
    atomic_fetch_add(&sh->stale, stale);
    return NULL;
}

static void test_multithreaded_bound(void **state)
{
    (void)state;
    static mt_shared sh;
    stg_bucket_config cfg = {.rate = MT_RATE, .burst = MT_BURST};
    assert_int_equal(stg_bucket_init(&sh.bucket, &cfg, 0), STG_OK);
    atomic_init(&sh.clock_us, 0);
    atomic_init(&sh.admitted, 0);
    atomic_init(&sh.tries, 0);
    atomic_init(&sh.max_label, 0);
    atomic_init(&sh.stale, 0);
    atomic_init(&sh.ready, 0);
    pthread_t th[MT_THREADS];
    mt_arg args[MT_THREADS];
    for (int i = 0; i < MT_THREADS; i++) {
        args[i].sh = &sh;
        args[i].seed = 12345u + (unsigned)i * 7919u;
        assert_int_equal(pthread_create(&th[i], NULL, mt_worker, &args[i]), 0);
    }
    for (int i = 0; i < MT_THREADS; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);

    /* Every label passed to the bucket lies in [0, t_last]. */
    int64_t t_last = atomic_load(&sh.clock_us);
    int64_t admitted = atomic_load(&sh.admitted);
    double bound = MT_BURST + MT_RATE * (double)t_last / 1e6;
    print_message("      %d threads, %lld tries, t = %.4f s: admitted %lld, bound %.1f, "
                  "%lld admitted with a stale now\n",
                  MT_THREADS, (long long)atomic_load(&sh.tries), (double)t_last / 1e6,
                  (long long)admitted, bound, (long long)atomic_load(&sh.stale));
    assert_true((double)admitted <= bound);
    /* Not trivially low: a contended bucket hands out nearly everything.
     * Tokens are lost only when the clock jumps while the bucket is
     * (nearly) full, which several threads jumping at once can do. */
    assert_true((double)admitted >= 0.95 * bound);
    assert_true(atomic_load(&sh.stale) > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_validation),
        cmocka_unit_test(test_sequence_rate10_burst3),
        cmocka_unit_test(test_origin_offset),
        cmocka_unit_test(test_fractional_rate),
        cmocka_unit_test(test_weights),
        cmocka_unit_test(test_acquire_timeout),
        cmocka_unit_test(test_acquire_timeout_takes_nothing),
        cmocka_unit_test(test_set_rate),
        cmocka_unit_test(test_out_of_order_now),
        cmocka_unit_test(test_out_of_order_property),
        cmocka_unit_test(test_multithreaded_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
