/*
 * Simulator speed: simulated attempts per second and memory per simulated
 * client, for `stagger sim herd` with 100 000 clients (goal: at least 5
 * million attempts per second on one core), plus the other scenarios at
 * their default sizes. The baseline measured in the same run is a bare
 * stg_decide() loop: the ratio says how much of each simulated attempt is
 * the library's own decision and how much is the simulator (event queue,
 * network draws, logs).
 *
 * Prints figures; asserts nothing about speed (machines differ).
 * Unlike the library, a benchmark may read the clock: it is timing itself.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <stagger/policy.h>

#include "sim/sim.h"

#define DECISIONS 5000000L
#define REPEATS 3

/* CPU time of this thread: the figure is per core, and other processes on
 * the machine do not inflate it. */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static volatile int64_t sink;

/* Bare stg_decide calls per second: a 429 on attempt 1..5, full jitter. */
static double decide_rate(void)
{
    stg_policy p = {0};
    p.backoff.base_us = STG_MS(200);
    stg_policy_resolve(&p, &p);
    stg_rng rng;
    stg_rng_seed(&rng, 42);
    stg_outcome o = {.status = 429, .method = STG_METHOD_GET};
    double best = 0;
    for (int r = 0; r < REPEATS; r++) {
        double t0 = now_s();
        int64_t acc = 0;
        for (long i = 0; i < DECISIONS; i++) {
            stg_retry_state st = {.attempts = 1 + (int)(i % 5), .start_us = 0,
                                  .prev_wait_us = 0};
            stg_decision d;
            stg_decide(&p, &st, &o, STG_MS(100), &rng, &d);
            acc += d.wait_us;
        }
        sink = acc;
        double rate = DECISIONS / (now_s() - t0);
        if (rate > best)
            best = rate;
    }
    return best;
}

typedef struct figure {
    double attempts_per_s;
    double seconds;
    double calls;
    double bytes_per_client;
} figure;

/* Best of REPEATS runs of one row of a scenario. */
static int measure(const sim_opts *o, figure *fig)
{
    memset(fig, 0, sizeof *fig);
    for (int r = 0; r < REPEATS; r++) {
        sim_results res;
        double t0 = now_s();
        if (sim_run(o, &res) != STG_OK) {
            fprintf(stderr, "bench_sim: sim_run failed\n");
            return -1;
        }
        double dt = now_s() - t0;
        double calls = 0;
        size_t mem = 0;
        int clients = 0;
        for (size_t i = 0; i < res.nrows; i++) {
            const sim_stat *s = sim_row_metric(&res.rows[i], "calls");
            if (s)
                calls += s->sum;
            if (res.rows[i].mem_bytes > mem)
                mem = res.rows[i].mem_bytes;
            if (res.rows[i].clients > clients)
                clients = res.rows[i].clients;
        }
        sim_results_free(&res);
        double rate = calls / dt;
        if (rate > fig->attempts_per_s) {
            fig->attempts_per_s = rate;
            fig->seconds = dt;
            fig->calls = calls;
            fig->bytes_per_client = clients ? (double)mem / clients : 0;
        }
    }
    return 0;
}

int main(void)
{
    double dr = decide_rate();
    printf("bench_sim: simulated attempts per second (best of %d runs, one core)\n\n", REPEATS);
    printf("baseline: bare stg_decide()            %8.2f M/s\n\n", dr / 1e6);
    printf("%-34s %10s %9s %8s %10s %9s\n", "run", "attempts", "cpu s", "M att/s",
           "vs decide", "B/client");

    static const sim_strategy herd_strats[] = {SIM_FIXED, SIM_EXPONENTIAL, SIM_FULL,
                                               SIM_DECORRELATED};
    for (size_t i = 0; i < sizeof herd_strats / sizeof herd_strats[0]; i++) {
        sim_opts o;
        sim_opts_default(&o, SIM_HERD);
        o.clients[0] = 100000;
        o.strategies[0] = herd_strats[i];
        o.nstrategies = 1;
        figure f;
        if (measure(&o, &f) != 0)
            return 1;
        char name[64];
        snprintf(name, sizeof name, "herd 100000 clients, %s", sim_strategy_name(herd_strats[i]));
        printf("%-34s %10.0f %9.3f %8.2f %9.2fx %9.1f\n", name, f.calls, f.seconds,
               f.attempts_per_s / 1e6, f.attempts_per_s / dr, f.bytes_per_client);
    }

    struct {
        const char *name;
        sim_scenario sc;
        int clients;
        int trials;
    } others[] = {
        {"contention 150 clients x 20 trials", SIM_CONTENTION, 150, 20},
        {"storm 2000 jobs, 50 workers", SIM_STORM, 50, 1},
        {"quota 100 clients x 10 requests", SIM_QUOTA, 100, 1},
        {"load 1000 requests", SIM_LOAD, 1000, 1},
    };
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        sim_opts o;
        sim_opts_default(&o, others[i].sc);
        o.clients[0] = others[i].clients;
        o.nclients = 1;
        o.trials = others[i].trials;
        figure f;
        if (measure(&o, &f) != 0)
            return 1;
        printf("%-34s %10.0f %9.3f %8.2f %9.2fx %9.1f\n", others[i].name, f.calls, f.seconds,
               f.attempts_per_s / 1e6, f.attempts_per_s / dr, f.bytes_per_client);
    }
    printf("\nB/client: bytes one run allocated per simulated client (client state, event\n"
           "queue, logs and windows; the queue's fixed ~100 KB ring dominates small runs).\n"
           "Herd goal: >= 5 M attempts/s at 100000 clients on one core.\n");
    return 0;
}
