/*
 * bench_redis: decisions per second of the Redis limiter.
 *
 *   bench_redis URL [SECONDS [PIPELINE]]
 *   bench_redis URL learn [SECONDS]
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
 *
 * "learn" measures the shared adaptive rate instead: 4 processes share one
 * adaptive key, each sending as fast as it lets it to a simulated server
 * of 100/s, burst 5 (a fixed-rate key in the same Redis, asked with try:
 * refused = throttled), for SECONDS (default 9). It prints the sends per
 * second of the last third against the server's 100/s and the share of
 * them throttled, and the same for the first two thirds (slow start from
 * the first, unmeasured cut). These were assertions of the integration
 * test once (60%..115% of the limit, under 5% throttled); they depend on
 * how busy the machine is, so they are figures.
 *
 *   bench_redis URL lease LEASE_US [SECONDS]
 *
 * "lease" measures token leases (issue 19, goal 5): 4 processes each
 * offering 1000 acquires/s (one every 1 ms) through one fixed-rate key of
 * 2000/s, burst 100, for SECONDS (default 3), with cfg.lease_us = LEASE_US
 * (0: one round trip per acquire, the baseline). It prints the admissions,
 * the script calls the limiters made (their redis_decisions), the achieved
 * global rate and the protocol's bound over the run (burst + rate * t) / t,
 * and the largest excess of any window over burst + rate * t (at most 0
 * when the bound holds). bench_redis.sh also reads Redis's own EVALSHA
 * count around each run.
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <math.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

static void sleep_us(int64_t us)
{
    if (us <= 0)
        return;
    struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

#define LEARN_PROCS 4
#define LEARN_LIMIT 100.0

/* One process of "learn": counts[late][throttled] to fd. */
static void learn_child(const char *url, int64_t run_us, int fd)
{
    char sim[600];
    snprintf(sim, sizeof sim, "%s-simserver", url);
    stg_redis_limiter_config ac = {.url = url, .adaptive = true, .log = log_cb};
    stg_redis_limiter_config sc = {.url = sim, .rate = LEARN_LIMIT, .burst = 5, .log = log_cb};
    stg_redis_limiter *l = stg_redis_limiter_new(&ac, NULL, NULL, 0);
    stg_redis_limiter *server = stg_redis_limiter_new(&sc, NULL, NULL, 0);
    long counts[2][2] = {{0}};
    int64_t start = now_us(), end = start + run_us, late = start + run_us * 2 / 3;
    while (l && server && now_us() < end) {
        int64_t w, t;
        if (stg_redis_adaptive_acquire(l, NULL, end - now_us(), &w, &t) != STG_OK)
            break;
        sleep_us(w);
        bool throttled = stg_redis_limiter_try(server, NULL, 1, NULL) != STG_OK;
        sleep_us(2000); /* the answer's round trip */
        stg_redis_adaptive_response(l, NULL, t, throttled, 0);
        counts[now_us() > late][throttled]++;
    }
    stg_redis_limiter_free(server);
    stg_redis_limiter_free(l);
    _exit(write(fd, counts, sizeof counts) == (ssize_t)sizeof counts ? 0 : 2);
}

static int learn(const char *url, double seconds)
{
    int64_t run_us = (int64_t)(seconds * 1e6);
    int fds[LEARN_PROCS][2];
    pid_t pids[LEARN_PROCS];
    for (int i = 0; i < LEARN_PROCS; i++) {
        if (pipe(fds[i]) != 0 || (pids[i] = fork()) < 0) {
            perror("bench_redis");
            return 1;
        }
        if (pids[i] == 0) {
            close(fds[i][0]);
            learn_child(url, run_us, fds[i][1]);
        }
        close(fds[i][1]);
    }
    long tot[2][2] = {{0}};
    int status = 0;
    for (int i = 0; i < LEARN_PROCS; i++) {
        long c[2][2];
        if (read(fds[i][0], c, sizeof c) != (ssize_t)sizeof c)
            status = 1;
        else
            for (int a = 0; a < 2; a++)
                for (int b = 0; b < 2; b++)
                    tot[a][b] += c[a][b];
        close(fds[i][0]);
        int st;
        if (waitpid(pids[i], &st, 0) != pids[i] || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            status = 1;
    }
    double late_s = seconds / 3;
    long late_n = tot[1][0] + tot[1][1], early_n = tot[0][0] + tot[0][1];
    printf("learn_limit %.0f\n", LEARN_LIMIT);
    printf("learn_late_rate %.1f\n", (double)late_n / late_s);
    printf("learn_late_throttled_pct %.1f\n", late_n ? 100.0 * (double)tot[1][1] / (double)late_n : 0.0);
    printf("learn_early_sends %ld\n", early_n);
    printf("learn_early_throttled %ld\n", tot[0][1]);
    return status;
}

#define LEASE_PROCS 4
#define LEASE_RATE 2000.0
#define LEASE_BURST 100
#define LEASE_MAX 20000

typedef struct lease_shared {
    int64_t ts[LEASE_PROCS][LEASE_MAX]; /* promised send instants */
    int n[LEASE_PROCS];
    int64_t calls[LEASE_PROCS];
    int64_t expired[LEASE_PROCS];
    int failed[LEASE_PROCS];
} lease_shared;

static int64_t real_us(void *data)
{
    (void)data;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts); /* Redis's TIME on this machine */
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void lease_child(lease_shared *sh, int idx, const char *url, int64_t lease_us,
                        int64_t start, int64_t end)
{
    stg_redis_limiter_config c = {.url = url, .rate = LEASE_RATE, .burst = LEASE_BURST,
                                  .lease_us = lease_us, .clock = real_us, .log = log_cb};
    stg_redis_limiter *l = stg_redis_limiter_new(&c, NULL, NULL, 0);
    if (!l) {
        sh->failed[idx] = 1;
        return;
    }
    sleep_us(start - real_us(NULL));
    int64_t next = start;
    while (real_us(NULL) < end && sh->n[idx] < LEASE_MAX) {
        int64_t w;
        if (stg_redis_limiter_acquire(l, NULL, 1, STG_SEC(1), &w) != STG_OK) {
            sh->failed[idx] = 1;
            break;
        }
        int64_t t = real_us(NULL);
        if (t + w < end)
            sh->ts[idx][sh->n[idx]++] = t + w;
        sleep_us(w);
        next += 1000;
        if (next < real_us(NULL) - 1000)
            next = real_us(NULL);
        sleep_us(next - real_us(NULL));
    }
    stg_redis_stats st;
    stg_redis_limiter_stats(l, &st);
    sh->calls[idx] = st.redis_decisions;
    sh->expired[idx] = st.lease_expired;
    stg_redis_limiter_free(l);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static int lease_run(const char *url, int64_t lease_us, double seconds)
{
    lease_shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
                            MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        perror("bench_redis");
        return 1;
    }
    memset(sh, 0, sizeof *sh);
    int64_t start = real_us(NULL) + 300000, end = start + (int64_t)(seconds * 1e6);
    pid_t pids[LEASE_PROCS];
    for (int i = 0; i < LEASE_PROCS; i++) {
        if ((pids[i] = fork()) < 0) {
            perror("bench_redis");
            return 1;
        }
        if (pids[i] == 0) {
            lease_child(sh, i, url, lease_us, start, end);
            _exit(0);
        }
    }
    int status = 0;
    for (int i = 0; i < LEASE_PROCS; i++) {
        int st;
        if (waitpid(pids[i], &st, 0) != pids[i] || !WIFEXITED(st) || WEXITSTATUS(st) != 0 ||
            sh->failed[i])
            status = 1;
    }
    static int64_t all[LEASE_PROCS * LEASE_MAX];
    int n = 0;
    int64_t calls = 0, expired = 0;
    for (int i = 0; i < LEASE_PROCS; i++) {
        expired += sh->expired[i];
        memcpy(all + n, sh->ts[i], (size_t)sh->n[i] * sizeof all[0]);
        n += sh->n[i];
        calls += sh->calls[i];
    }
    qsort(all, (size_t)n, sizeof all[0], cmp_i64);
    double excess = -LEASE_BURST;
    for (int i = 0; i < n; i++)
        for (int j = i + LEASE_BURST - 1; j < n; j++) {
            double e = (double)(j - i + 1) -
                       (LEASE_BURST + floor((double)(all[j] - all[i] + 2) * LEASE_RATE / 1e6));
            if (e > excess)
                excess = e;
        }
    double t = seconds;
    printf("lease%lld_admitted %d\n", (long long)lease_us, n);
    printf("lease%lld_calls %lld\n", (long long)lease_us, (long long)calls);
    printf("lease%lld_rate %.0f\n", (long long)lease_us, (double)n / t);
    printf("lease%lld_bound %.0f\n", (long long)lease_us, (LEASE_BURST + LEASE_RATE * t) / t);
    printf("lease%lld_excess %.0f\n", (long long)lease_us, excess);
    printf("lease%lld_lapsed %lld\n", (long long)lease_us, (long long)expired);
    munmap(sh, sizeof *sh);
    return status;
}

int main(int argc, char **argv)
{
    if (argc >= 4 && argc <= 5 && strcmp(argv[2], "lease") == 0) {
        long long lease_us = atoll(argv[3]);
        double seconds = argc > 4 ? atof(argv[4]) : 3.0;
        if (lease_us < 0 || !(seconds > 0 && seconds <= 60)) {
            fprintf(stderr, "bench_redis: LEASE_US >= 0, SECONDS in (0, 60]\n");
            return 2;
        }
        return lease_run(argv[1], lease_us, seconds);
    }
    if (argc >= 3 && argc <= 4 && strcmp(argv[2], "learn") == 0) {
        double seconds = argc > 3 ? atof(argv[3]) : 9.0;
        if (!(seconds > 0 && seconds <= 600)) {
            fprintf(stderr, "bench_redis: SECONDS in (0, 600]\n");
            return 2;
        }
        return learn(argv[1], seconds);
    }
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
    /* rediss://: the CA in BENCH_REDIS_CACERT (the TLS row of bench_redis.sh). */
    stg_redis_tls tls = {.ca_file = getenv("BENCH_REDIS_CACERT")};
    stg_redis_limiter_config cfg = {
        .url = argv[1],
        .rate = 1e6,
        .burst = 1000000,
        .command_timeout_us = STG_SEC(2),
        .log = log_cb,
        .tls = &tls,
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
                                   .log = log_cb,
                                   .tls = &tls};
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
