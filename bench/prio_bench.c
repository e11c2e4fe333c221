/*
 * Classes and tenants across processes (issue #32), beside first come,
 * first served in the same run: forked processes, each with its own Redis
 * limiter (its own connection), share one key and log every admission (the
 * instant promised) in shared memory. bench/bench_prio.sh runs it.
 *
 *   bench_prio redis://HOST:PORT fcfs|class inter|tenants SECONDS
 *
 * inter:   a 50/s key (burst 5); two batch processes keeping 15 requests
 *          each reserved or waiting (as `stagger batch -j 30`), and from 1 s
 *          on an interactive process asking 10 times a second (20%).
 * tenants: a 100/s key (burst 5); tenants a, b, c of weights 1, 1, 2, two
 *          processes each keeping 8 requests reserved.
 * fcfs: every process calls stg_redis_limiter_acquire (today's behaviour);
 * class: stg_redis_limiter_acquire_class with the class and tenant.
 * Prints KEY=VALUE words on one line starting with "prio_<scenario>_<mode>:":
 * the interactive admission wait (round trip + wait) p50/p99/max in ms, the
 * batch's share of what the interactive left (%), each tenant's share (%),
 * and the bound's worst excess (sends - (burst + (d + 2 rtt) / T)) over
 * every window: <= 0 means it held. Asserts nothing about speed.
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <stagger/redis.h>

typedef struct rec {
    int64_t at_us, adm_us, rtt_us;
    int who;
} rec;

typedef struct shm {
    int64_t n;
    rec r[60000];
} shm;

static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void sleep_us(int64_t us)
{
    if (us <= 0)
        return;
    struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) < 0)
        ;
}

typedef struct role {
    int priority;
    const char *tenant;
    double weight;
    int depth;         /* requests kept reserved (0: a periodic caller) */
    int64_t period_us; /* periodic caller: between calls */
    int64_t start_us, stop_us;
} role;

static void child(const char *url, double rate, int64_t burst, bool classes, const role *ro,
                  int who, shm *m)
{
    stg_redis_limiter_config cfg = {.url = url, .rate = rate, .burst = burst, .lease_us = 40000};
    int err;
    stg_redis_limiter *l = stg_redis_limiter_new(&cfg, &err, NULL, 0);
    if (!l)
        _exit(3);
    stg_class cls = {.priority = ro->priority, .tenant = ro->tenant, .weight = ro->weight};
    int64_t out[64];
    int n_out = 0;
    while (mono_us() < ro->start_us)
        sleep_us(1000);
    int64_t next = ro->start_us;
    while (mono_us() < ro->stop_us) {
        int64_t now = mono_us();
        if (ro->depth > 0) {
            int k = 0;
            for (int i = 0; i < n_out; i++)
                if (out[i] > now)
                    out[k++] = out[i];
            n_out = k;
            if (n_out >= ro->depth) {
                int64_t first = out[0];
                for (int i = 1; i < n_out; i++)
                    if (out[i] < first)
                        first = out[i];
                sleep_us(first - now);
                continue;
            }
        } else {
            if (now < next)
                sleep_us(next - now);
            next += ro->period_us;
        }
        int64_t t0 = mono_us(), w = 0;
        int rc = classes ? stg_redis_limiter_acquire_class(l, NULL, &cls, 5000000, &w)
                         : stg_redis_limiter_acquire(l, NULL, 1, 5000000, &w);
        int64_t t1 = mono_us();
        if (rc == STG_OK) {
            int64_t i = __atomic_fetch_add(&m->n, 1, __ATOMIC_SEQ_CST);
            if (i < (int64_t)(sizeof m->r / sizeof m->r[0]))
                m->r[i] = (rec){.at_us = t1 + w, .adm_us = t1 + w - t0, .rtt_us = t1 - t0,
                                .who = who};
            if (ro->depth > 0 && n_out < 64)
                out[n_out++] = t1 + w;
            else
                sleep_us(w);
        } else if (rc == STG_ETIMEDOUT) {
            sleep_us(w < 1000 ? 1000 : w > 20000 ? 20000 : w);
        } else {
            _exit(5);
        }
    }
    stg_redis_limiter_free(l);
    _exit(0);
}

static int cmp_at(const void *a, const void *b)
{
    int64_t x = ((const rec *)a)->at_us, y = ((const rec *)b)->at_us;
    return (x > y) - (x < y);
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The worst excess over the bound, in sends (<= 0: held). */
static double bound_excess(shm *m, int64_t T_us, int64_t B)
{
    int64_t n = m->n < (int64_t)(sizeof m->r / sizeof m->r[0]) ? m->n : 0;
    qsort(m->r, (size_t)n, sizeof m->r[0], cmp_at);
    int64_t rtt_max = 0;
    for (int64_t i = 0; i < n; i++)
        if (m->r[i].rtt_us > rtt_max)
            rtt_max = m->r[i].rtt_us;
    double worst = -1e9;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = i; j < n && j < i + 4000; j++) {
            double allowed = (double)B + (double)(m->r[j].at_us - m->r[i].at_us + 2 * rtt_max) /
                                             (double)T_us;
            double ex = (double)(j - i + 1) - allowed;
            if (ex > worst)
                worst = ex;
        }
    return worst;
}

static shm *run(const char *url, double rate, int64_t burst, bool classes, const role *roles,
                int n)
{
    shm *m = mmap(NULL, sizeof *m, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        exit(2);
    m->n = 0;
    pid_t pids[16];
    for (int i = 0; i < n; i++) {
        pids[i] = fork();
        if (pids[i] < 0)
            exit(2);
        if (pids[i] == 0)
            child(url, rate, burst, classes, &roles[i], i, m);
    }
    int bad = 0;
    for (int i = 0; i < n; i++) {
        int st = 0;
        waitpid(pids[i], &st, 0);
        bad += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    if (bad) {
        fprintf(stderr, "bench_prio: %d processes failed\n", bad);
        exit(1);
    }
    return m;
}

int main(int argc, char **argv)
{
    if (argc != 5 || (strcmp(argv[2], "fcfs") && strcmp(argv[2], "class")) ||
        (strcmp(argv[3], "inter") && strcmp(argv[3], "tenants"))) {
        fprintf(stderr, "usage: bench_prio redis://HOST:PORT fcfs|class inter|tenants SECONDS\n");
        return 2;
    }
    bool classes = strcmp(argv[2], "class") == 0;
    int64_t secs = atoi(argv[4]);
    if (secs < 3)
        secs = 3;
    char url[256];
    snprintf(url, sizeof url, "%s/prio-%s-%s-%d", argv[1], argv[3], argv[2], (int)getpid());
    int64_t t0 = mono_us() + 300000, end = t0 + secs * 1000000;
    if (strcmp(argv[3], "inter") == 0) {
        role roles[3] = {
            {.priority = STG_PRIORITY_BATCH, .depth = 15, .start_us = t0, .stop_us = end},
            {.priority = STG_PRIORITY_BATCH, .depth = 15, .start_us = t0, .stop_us = end},
            {.priority = STG_PRIORITY_INTERACTIVE, .period_us = 100000,
             .start_us = t0 + 1000000, .stop_us = end},
        };
        shm *m = run(url, 50, 5, classes, roles, 3);
        int64_t from = t0 + 1500000, to = end - 1000000;
        int64_t *adm = calloc((size_t)m->n + 1, sizeof *adm);
        int64_t na = 0, batch = 0;
        for (int64_t i = 0; i < m->n; i++) {
            const rec *r = &m->r[i];
            if (r->who == 2 && r->at_us - r->adm_us >= from && r->at_us - r->adm_us < to)
                adm[na++] = r->adm_us;
            else if (r->who != 2 && r->at_us >= from && r->at_us < to)
                batch++;
        }
        qsort(adm, (size_t)na, sizeof *adm, cmp64);
        double span = (double)(to - from) / 1e6;
        double left = 50.0 * span - (double)na; /* what the interactive left */
        printf("prio_inter_%s: calls=%lld p50_ms=%.1f p99_ms=%.1f max_ms=%.1f batch_pct=%.1f "
               "excess=%.2f\n",
               argv[2], (long long)na, na ? (double)adm[na / 2] / 1e3 : -1.0,
               na ? (double)adm[(na * 99 - 1) / 100] / 1e3 : -1.0,
               na ? (double)adm[na - 1] / 1e3 : -1.0, 100.0 * (double)batch / left,
               bound_excess(m, 20000, 5));
        free(adm);
        munmap(m, sizeof *m);
    } else {
        const char *names[] = {"a", "b", "c"};
        double ws[] = {1, 1, 2};
        role roles[6];
        for (int i = 0; i < 6; i++)
            roles[i] = (role){.priority = STG_PRIORITY_BATCH, .tenant = names[i % 3],
                              .weight = ws[i % 3], .depth = 8, .start_us = t0, .stop_us = end};
        shm *m = run(url, 100, 5, classes, roles, 6);
        int64_t from = t0 + 1000000, got[3] = {0}, total = 0;
        for (int64_t i = 0; i < m->n; i++)
            if (m->r[i].at_us >= from && m->r[i].at_us < end) {
                got[m->r[i].who % 3]++;
                total++;
            }
        printf("prio_tenants_%s: a_pct=%.1f b_pct=%.1f c_pct=%.1f used_pct=%.1f excess=%.2f\n",
               argv[2], 100.0 * (double)got[0] / (double)(total ? total : 1),
               100.0 * (double)got[1] / (double)(total ? total : 1),
               100.0 * (double)got[2] / (double)(total ? total : 1),
               100.0 * (double)total / (100.0 * (double)(end - from) / 1e6),
               bound_excess(m, 10000, 5));
        munmap(m, sizeof *m);
    }
    return 0;
}
