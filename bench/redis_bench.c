/*
 * bench_redis: decisions per second of the Redis limiter.
 *
 *   bench_redis URL [SECONDS [PIPELINE]]
 *
 * Runs, each for SECONDS (default 2) against the server at URL:
 *   sequential   stg_redis_limiter_try in a loop: one EVALSHA round trip
 *                per decision, one connection;
 *   pipelined    stg_redis_limiter_acquire_many of PIPELINE (default 64)
 *                decisions per round trip, one connection;
 *   breaker      stg_redis_breaker_allow in a loop (a read-only script run
 *                on a closed breaker).
 * Prints one "name value" line per figure, for bench/bench_redis.sh, which
 * starts the server and sets these beside redis-benchmark's figures for
 * PING and INCR. The rate is set far above what one connection reaches, so
 * every decision admits and writes (the costly path). Asserts nothing
 * about speed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <stagger/redis.h>

#define MAX_PIPELINE 4096

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void log_cb(void *data, stg_redis_event ev, const char *msg)
{
    (void)data;
    (void)ev;
    fprintf(stderr, "bench_redis: %s\n", msg);
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: bench_redis URL [SECONDS [PIPELINE]]\n");
        return 2;
    }
    double seconds = argc > 2 ? atof(argv[2]) : 2.0;
    long pipeline = argc > 3 ? atol(argv[3]) : 64;
    if (!(seconds > 0 && seconds <= 60) || pipeline < 1 || pipeline > MAX_PIPELINE) {
        fprintf(stderr, "bench_redis: SECONDS in (0, 60], PIPELINE in [1, %d]\n", MAX_PIPELINE);
        return 2;
    }
    stg_redis_limiter_config cfg = {
        .url = argv[1],
        .rate = 1e6,
        .burst = 1000000,
        .command_timeout_us = STG_SEC(2),
        .log = log_cb,
    };
    int err;
    char why[512];
    stg_redis_limiter *l = stg_redis_limiter_new(&cfg, &err, why, sizeof why);
    if (!l) {
        fprintf(stderr, "bench_redis: %s\n", why);
        return 1;
    }
    int64_t span = (int64_t)(seconds * 1e6);
    stg_redis_stats st0;
    static int rcs[MAX_PIPELINE];
    int status = 0;

    /* sequential */
    int64_t n = 0, t0 = now_us(), t1;
    do {
        int rc = stg_redis_limiter_try(l, "bench:seq", 1, NULL);
        if (rc != STG_OK && rc != STG_EAGAIN) {
            fprintf(stderr, "bench_redis: try: %s\n", stg_strerror(rc));
            status = 1;
            break;
        }
        n++;
    } while ((t1 = now_us()) - t0 < span);
    t1 = now_us();
    printf("limiter_sequential %.0f\n", (double)n * 1e6 / (double)(t1 - t0));

    /* pipelined */
    n = 0;
    t0 = now_us();
    do {
        int rc = stg_redis_limiter_acquire_many(l, "bench:pipe", (size_t)pipeline, 1, 0, rcs,
                                                NULL);
        if (rc != STG_OK) {
            fprintf(stderr, "bench_redis: acquire_many: %s\n", stg_strerror(rc));
            status = 1;
            break;
        }
        n += pipeline;
    } while ((t1 = now_us()) - t0 < span);
    t1 = now_us();
    printf("limiter_pipelined %.0f\n", (double)n * 1e6 / (double)(t1 - t0));

    /* breaker allow, closed */
    n = 0;
    t0 = now_us();
    do {
        int rc = stg_redis_breaker_allow(l, "bench:breaker", NULL);
        if (rc != STG_OK) {
            fprintf(stderr, "bench_redis: breaker_allow: %s\n", stg_strerror(rc));
            status = 1;
            break;
        }
        n++;
    } while ((t1 = now_us()) - t0 < span);
    t1 = now_us();
    printf("breaker_sequential %.0f\n", (double)n * 1e6 / (double)(t1 - t0));
    printf("pipeline %ld\n", pipeline);

    /* the shared adaptive rate: acquire on a key that has learned a rate
     * far above what one connection can ask (every call admitted and
     * written back), one round trip each */
    stg_redis_limiter_config ac = {.url = argv[1],
                                   .adaptive = true,
                                   .command_timeout_us = STG_SEC(2),
                                   .log = log_cb};
    ac.adaptive_config.min_rate = 1e6;
    stg_redis_limiter *a = stg_redis_limiter_new(&ac, &err, why, sizeof why);
    if (!a) {
        fprintf(stderr, "bench_redis: %s\n", why);
        stg_redis_limiter_free(l);
        return 1;
    }
    int64_t ticket = 0;
    if (stg_redis_adaptive_acquire(a, "bench:adaptive", 0, NULL, &ticket) != STG_OK ||
        stg_redis_adaptive_response(a, "bench:adaptive", ticket, true, 0) != STG_OK) {
        fprintf(stderr, "bench_redis: adaptive: cannot set up the key\n");
        status = 1;
    }
    n = 0;
    t0 = now_us();
    do {
        int rc = stg_redis_adaptive_acquire(a, "bench:adaptive", STG_SEC(1), NULL, &ticket);
        if (rc != STG_OK) {
            fprintf(stderr, "bench_redis: adaptive_acquire: %s\n", stg_strerror(rc));
            status = 1;
            break;
        }
        n++;
    } while ((t1 = now_us()) - t0 < span);
    t1 = now_us();
    printf("adaptive_sequential %.0f\n", (double)n * 1e6 / (double)(t1 - t0));
    stg_redis_limiter_stats(a, &st0);
    if (st0.local_decisions || st0.unavailable || st0.disconnects)
        status = 1;
    stg_redis_limiter_free(a);

    stg_redis_stats st;
    stg_redis_limiter_stats(l, &st);
    if (st.local_decisions || st.unavailable || st.disconnects) {
        fprintf(stderr, "bench_redis: Redis was not reachable throughout\n");
        status = 1;
    }
    stg_redis_limiter_free(l);
    return status;
}
