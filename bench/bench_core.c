/*
 * Core micro-benchmarks: the lock-free token bucket against a mutex-protected
 * one (uncontended and with 2 threads on one bucket), the retry decision,
 * and Retry-After parsing. Prints figures and ratios measured in the same
 * run; asserts nothing about speed (machines differ; the ratios are what to
 * compare). Targets: a take under 30 ns uncontended; lock-free ahead of the
 * mutex under contention.
 *
 * Unlike the library, a benchmark may read the clock: it is timing itself.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <stagger/bucket.h>
#include <stagger/hints.h>
#include <stagger/policy.h>
#include <stagger/rng.h>

#define TAKES_1T 20000000L  /* uncontended takes */
#define TAKES_PER_THREAD 5000000L
#define THREADS 2
#define DECISIONS 2000000L
#define PARSES 5000000L

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Keeps results alive so the compiler cannot drop the measured calls. */
static volatile int64_t sink;

/* ---- Baseline: the classic (tokens, last refill) bucket under a mutex. ---- */

typedef struct mutex_bucket {
    pthread_mutex_t lock;
    double rate;   /* tokens per microsecond */
    double burst;
    double tokens;
    int64_t last_us;
} mutex_bucket;

static void mutex_bucket_init(mutex_bucket *m, double rate_per_s, double burst, int64_t now_us)
{
    pthread_mutex_init(&m->lock, NULL);
    m->rate = rate_per_s / 1e6;
    m->burst = burst;
    m->tokens = burst;
    m->last_us = now_us;
}

static int mutex_bucket_try(mutex_bucket *m, int64_t weight, int64_t now_us, int64_t *wait_us)
{
    int rc;
    pthread_mutex_lock(&m->lock);
    if (now_us > m->last_us) {
        m->tokens += (double)(now_us - m->last_us) * m->rate;
        if (m->tokens > m->burst)
            m->tokens = m->burst;
        m->last_us = now_us;
    }
    if (m->tokens >= (double)weight) {
        m->tokens -= (double)weight;
        *wait_us = 0;
        rc = STG_OK;
    } else {
        *wait_us = (int64_t)(((double)weight - m->tokens) / m->rate) + 1;
        rc = STG_EAGAIN;
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

/* Rate high enough that every take is admitted: 1e9/s with a burst far
 * above what the run takes, so the figures are the taking path. */
#define BENCH_RATE 1e9
#define BENCH_BURST (INT64_C(1) << 40)

typedef struct run {
    stg_bucket *lf;
    mutex_bucket *mx;
    long takes;
    long admitted;
    _Atomic int *ready;
} run;

static void *lf_worker(void *p)
{
    run *r = p;
    atomic_fetch_add(r->ready, 1);
    while (atomic_load(r->ready) < THREADS)
        ;
    long ok = 0;
    int64_t w;
    for (long i = 0; i < r->takes; i++)
        ok += stg_bucket_try(r->lf, 1, (int64_t)i, &w) == STG_OK;
    r->admitted = ok;
    return NULL;
}

static void *mx_worker(void *p)
{
    run *r = p;
    atomic_fetch_add(r->ready, 1);
    while (atomic_load(r->ready) < THREADS)
        ;
    long ok = 0;
    int64_t w;
    for (long i = 0; i < r->takes; i++)
        ok += mutex_bucket_try(r->mx, 1, (int64_t)i, &w) == STG_OK;
    r->admitted = ok;
    return NULL;
}

/* Total takes per second with THREADS threads on one bucket. */
static double contended(bool lock_free, long *admitted)
{
    stg_bucket lf;
    mutex_bucket mx;
    stg_bucket_config cfg = {.rate = BENCH_RATE, .burst = BENCH_BURST};
    if (stg_bucket_init(&lf, &cfg, 0) != STG_OK)
        abort();
    mutex_bucket_init(&mx, BENCH_RATE, (double)BENCH_BURST, 0);
    _Atomic int ready;
    atomic_init(&ready, 0);
    pthread_t th[THREADS];
    run runs[THREADS];
    double t0 = now_s();
    for (int i = 0; i < THREADS; i++) {
        runs[i] = (run){&lf, &mx, TAKES_PER_THREAD, 0, &ready};
        pthread_create(&th[i], NULL, lock_free ? lf_worker : mx_worker, &runs[i]);
    }
    *admitted = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        *admitted += runs[i].admitted;
    }
    double dt = now_s() - t0;
    pthread_mutex_destroy(&mx.lock);
    return (double)(THREADS * TAKES_PER_THREAD) / dt;
}

static double uncontended_lf(long *admitted)
{
    stg_bucket b;
    stg_bucket_config cfg = {.rate = BENCH_RATE, .burst = BENCH_BURST};
    if (stg_bucket_init(&b, &cfg, 0) != STG_OK)
        abort();
    long ok = 0;
    int64_t w;
    double t0 = now_s();
    for (long i = 0; i < TAKES_1T; i++)
        ok += stg_bucket_try(&b, 1, (int64_t)i, &w) == STG_OK;
    double dt = now_s() - t0;
    *admitted = ok;
    return dt * 1e9 / (double)TAKES_1T;
}

static double uncontended_mx(long *admitted)
{
    mutex_bucket m;
    mutex_bucket_init(&m, BENCH_RATE, (double)BENCH_BURST, 0);
    long ok = 0;
    int64_t w;
    double t0 = now_s();
    for (long i = 0; i < TAKES_1T; i++)
        ok += mutex_bucket_try(&m, 1, (int64_t)i, &w) == STG_OK;
    double dt = now_s() - t0;
    *admitted = ok;
    pthread_mutex_destroy(&m.lock);
    return dt * 1e9 / (double)TAKES_1T;
}

/* ---- The retry decision: a 429 with Retry-After: 2, fixed seed. ---- */

static double bench_decide(void)
{
    stg_policy policy = {0};
    stg_hints hints;
    stg_hints_init(&hints);
    hints.retry_after_us = STG_SEC(2);
    hints.seen = STG_HINT_RETRY_AFTER;
    stg_outcome outcome = {
        .status = 429, .error = STG_NET_NONE, .method = STG_METHOD_GET, .hints = &hints};
    stg_retry_state state = {.attempts = 1, .start_us = 0, .prev_wait_us = 0};
    stg_rng rng;
    stg_rng_seed(&rng, 42);
    stg_decision d;
    if (stg_decide(&policy, &state, &outcome, STG_MS(100), &rng, &d) != STG_OK ||
        d.action != STG_ACTION_RETRY) {
        fprintf(stderr, "bench_core: unexpected decision (%s, %s)\n", stg_action_name(d.action),
                stg_reason_name(d.reason));
        exit(1);
    }
    int64_t acc = 0;
    double t0 = now_s();
    for (long i = 0; i < DECISIONS; i++) {
        stg_decide(&policy, &state, &outcome, STG_MS(100), &rng, &d);
        acc += d.wait_us;
    }
    double dt = now_s() - t0;
    sink = acc;
    return dt * 1e9 / (double)DECISIONS;
}

/* ---- Retry-After parsing. ---- */

static double bench_parse(const char *value, int64_t wall_now_us, int64_t expect_us)
{
    size_t len = strlen(value);
    int64_t w = -1;
    if (stg_retry_after_parse(value, len, wall_now_us, &w) != STG_OK || w != expect_us) {
        fprintf(stderr, "bench_core: Retry-After \"%s\" parsed as %lld\n", value, (long long)w);
        exit(1);
    }
    int64_t acc = 0;
    double t0 = now_s();
    for (long i = 0; i < PARSES; i++) {
        stg_retry_after_parse(value, len, wall_now_us, &w);
        acc += w;
    }
    double dt = now_s() - t0;
    sink = acc;
    return dt * 1e9 / (double)PARSES;
}

int main(void)
{
    long adm_lf1, adm_mx1, adm_lf2, adm_mx2;
    /* Warm up caches, frequency scaling and the allocator. */
    (void)uncontended_lf(&adm_lf1);

    double lf_ns = uncontended_lf(&adm_lf1);
    double mx_ns = uncontended_mx(&adm_mx1);
    double lf_tps = contended(true, &adm_lf2);
    double mx_tps = contended(false, &adm_mx2);

    printf("stagger bench_core (%s)\n", stg_version());
    printf("token bucket, uncontended take (1 thread, %ld takes):\n", TAKES_1T);
    printf("  lock-free GCRA   %8.2f ns/take   (admitted %ld)\n", lf_ns, adm_lf1);
    printf("  mutex baseline   %8.2f ns/take   (admitted %ld)\n", mx_ns, adm_mx1);
    printf("  ratio mutex / lock-free: %.2fx\n", mx_ns / lf_ns);
    printf("token bucket, %d threads on one bucket (%ld takes each):\n", THREADS,
           TAKES_PER_THREAD);
    printf("  lock-free GCRA   %8.2f M takes/s (admitted %ld)\n", lf_tps / 1e6, adm_lf2);
    printf("  mutex baseline   %8.2f M takes/s (admitted %ld)\n", mx_tps / 1e6, adm_mx2);
    printf("  ratio lock-free / mutex: %.2fx\n", lf_tps / mx_tps);

    double dec_ns = bench_decide();
    printf("retry decision (stg_decide, 429 + Retry-After: 2, seed 42):\n");
    printf("  %8.2f ns/decision\n", dec_ns);

    /* 1994-11-06 08:49:37 GMT is Unix 784111777; "now" is 2 minutes before. */
    const int64_t date_s = INT64_C(784111777);
    double p_secs = bench_parse("120", STG_SEC(date_s - 120), STG_SEC(120));
    double p_date = bench_parse("Sun, 06 Nov 1994 08:49:37 GMT", STG_SEC(date_s - 120),
                                STG_SEC(120));
    printf("Retry-After parse (stg_retry_after_parse):\n");
    printf("  seconds \"120\"           %8.2f ns/parse\n", p_secs);
    printf("  IMF-fixdate            %8.2f ns/parse\n", p_date);
    return 0;
}
