/*
 * stagger sim: a discrete-event simulator of retry storms in virtual time.
 *
 * Many clients run against a modelled server; every retry decision goes
 * through libstagger itself (stg_decide, stg_backoff_*, stg_bucket,
 * stg_adaptive, stg_budget, stg_breaker), so what the simulator shows is what
 * the library does. Time is virtual (int64 microseconds), nothing sleeps, and
 * a run is a pure function of its options and seed.
 *
 * Layout (one file per concern):
 *   evq.c/.h        event queue (calendar queue: sorted current slice, ring
 *                   of later slices, heap for the far future; no allocation
 *                   per event once warm)
 *   net.c/.h        network delay model (|Normal(mean, sd)| per message leg,
 *                   ziggurat draws)
 *   server.c/.h     server models: rate-limited (stg_bucket), first-K-fail,
 *                   optimistic-concurrency row
 *   client.c/.h     client model: strategy -> stg_policy, pacing, the
 *                   decision step around stg_decide
 *   reqsim.c/.h     engine shared by quota, storm and load
 *   herd.c quota.c storm.c load.c contention.c slow.c   one file per scenario
 *   fleet.c fleet_policy.c fleet_measure.c, fleet.h   the
 *                   "fleet" scenario: processes sharing one quota through
 *                   a modelled Redis, by class and tenant
 *   metrics.c/.h    accumulators, sliding windows, percentiles
 *   output.c        table, CSV and JSON (jansson)
 *   svg.c           charts
 *
 * Trials: trial i of a run uses seed + i for every strategy, so strategies
 * are compared on the same network draws (common random numbers). Each row
 * keeps the mean and spread of every metric over its trials.
 *
 * Nothing here keeps global state; results own their memory and are freed
 * with sim_results_free().
 */
#ifndef STAGGER_SIM_H
#define STAGGER_SIM_H

#include <stdio.h>

#include <stagger/stagger.h>

#include "net.h"

#define SIM_MAX_POINTS 64
#define SIM_MAX_STRATS 16
#define SIM_MAX_MODES 4
#define SIM_MAX_ROUNDS 32
#define SIM_MAX_METRICS 16
#define SIM_MAX_CLIENTS 5000000
#define SIM_HERD_MAX_CLIENTS 2097151 /* 2^21 - 1: see herd.c */
#define SIM_FLEET_MAX_CLIENTS 100000
#define SIM_FLEET_MAX_TENANTS 8

typedef enum sim_scenario {
    SIM_HERD = 0,
    SIM_QUOTA = 1,
    SIM_STORM = 2,
    SIM_LOAD = 3,
    SIM_CONTENTION = 4,
    SIM_SLOW = 5, /* "slow-server": a server that queues (slow.c) */
    SIM_FLEET = 6, /* processes sharing one quota through Redis (fleet.c) */
    SIM_N_SCENARIOS
} sim_scenario;

/* What a client does between attempts. The first eight map onto a
 * stg_backoff_kind; BUCKET and ADAPTIVE pace every attempt through a shared
 * stg_bucket / stg_adaptive and back off with opts.paced_backoff. */
typedef enum sim_strategy {
    SIM_NONE = 0,         /* retry at once (FIXED with a 1 us step) */
    SIM_FIXED = 1,
    SIM_EXPONENTIAL = 2,
    SIM_FULL = 3,
    SIM_EQUAL = 4,
    SIM_DECORRELATED = 5,
    SIM_PCT = 6,
    SIM_ADDITIVE = 7,
    SIM_BUCKET = 8,
    SIM_ADAPTIVE = 9,
    SIM_N_STRATEGIES
} sim_strategy;

/* fleet: how the shared key decides (fleet.h). */
typedef enum sim_fleet_policy {
    SIM_FLEET_FCFS = 0,     /* "fcfs": today's GCRA + leases */
    SIM_FLEET_PRIORITY = 1, /* "priority": by class, tenants by weight
                               (src/core/prio_gcra.c, the script's model) */
    SIM_FLEET_SFQ = 2,      /* "sfq": the simulator's own model of the same
                               rules (fleet_policy.c), for comparison */
    SIM_FLEET_N_POLICIES
} sim_fleet_policy;

/* fleet: a tenant, its weight and its share of each class's processes. */
typedef struct sim_tenant {
    char name[STG_TENANT_MAX + 1];
    double weight;
    double share;
} sim_tenant;

typedef struct sim_fleet_opts {
    int policies[SIM_FLEET_N_POLICIES]; /* one row per policy and point */
    int npolicies;
    double mix[STG_N_PRIORITIES];     /* share of the processes per class */
    double offered[STG_N_PRIORITIES]; /* Poisson load as a share of the
                                         limit; < 0: backlogged */
    sim_tenant tenants[SIM_FLEET_MAX_TENANTS];
    int ntenants;
    sim_delay redis_leg;  /* each leg to and from Redis */
    int64_t redis_op_us;  /* Redis's time per script call; calls queue */
    int64_t lease_us;     /* --limiter-lease: how long a lease should last */
    int64_t duration_us;  /* virtual time measured */
    int64_t max_wait_us;  /* how far ahead a request may reserve */
    double floor;         /* the lowest class's minimum share */
    int64_t hold_us;      /* demand hold; 0: the limiter's (two lease
                             windows or 8 intervals, 20 ms .. 1 s) */
} sim_fleet_opts;

typedef struct sim_opts {
    sim_scenario scenario;
    uint64_t seed;
    int trials;
    int clients[SIM_MAX_POINTS]; /* clients (workers) per point: a sweep */
    int nclients;
    sim_strategy strategies[SIM_MAX_STRATS];
    int nstrategies;
    stg_retry_after_mode modes[SIM_MAX_MODES]; /* quota: one row per mode */
    int nmodes;
    stg_policy policy;           /* template; backoff.kind set per strategy */
    sim_strategy paced_backoff;  /* backoff of the bucket/adaptive rows */
    sim_delay delay;             /* each message leg */
    int64_t server_us;           /* server time per request */
    /* herd */
    int fail_first;              /* 429 for each client's first K attempts */
    /* rate-limited server (quota, storm, load) */
    double limit_rps;
    int64_t burst;
    int64_t retry_after_us;      /* sent with every 429; 0: none */
    double error_rate;           /* share of arrivals answered 503 (a fault) */
    int requests;                /* quota: per client; storm, slow-server: jobs */
    int capacity;                /* slow-server: requests the server handles at once */
    double client_share;         /* bucket strategy: rate = share * limit */
    int64_t client_burst;        /* bucket strategy: burst */
    bool use_budget;
    stg_budget_config budget;
    bool use_breaker;
    stg_breaker_config breaker;
    /* metrics */
    int64_t window_us;           /* herd: max_in_window; others: peak rate */
    int64_t peak_after_us;       /* peak rate counts arrivals from here on */
    int64_t bin_us;              /* chart bins; 0: chosen per scenario */
    sim_fleet_opts fleet;        /* fleet (server_us: a backlogged
                                    process's time from a send to its next
                                    request) */
} sim_opts;

/* Mean and spread of one figure over trials. */
typedef struct sim_stat {
    double sum, sumsq, min, max;
    int n;
} sim_stat;

typedef struct sim_metric {
    const char *key; /* JSON/CSV name: "calls", "total_ms", ... (static) */
    sim_stat s;
} sim_metric;

typedef struct sim_row {
    sim_scenario scenario;
    sim_strategy strategy;
    int mode;     /* stg_retry_after_mode of the row (quota), the
                     sim_fleet_policy (fleet), else -1 */
    int clients;
    int nmetrics;
    sim_metric m[SIM_MAX_METRICS];
    int nrounds;  /* herd: spans of round 0 (first attempts) .. K */
    sim_stat rounds[SIM_MAX_ROUNDS];
    size_t mem_bytes; /* most memory one trial of the row allocated */
    /* Chart: arrivals at the server per bin, first trial only. Owned. */
    int64_t bin_us;
    size_t nbins;
    uint32_t *bins;
    struct sim_fleet_row *fleet; /* fleet: per class and tenant; owned */
} sim_row;

typedef struct sim_results {
    sim_opts opts; /* as run */
    sim_row *rows; /* owned */
    size_t nrows;
} sim_results;

/* fleet policy names ("fcfs", "priority"), parse; -1 for an unknown name. */
const char *sim_fleet_policy_name(int p);
int sim_fleet_policy_parse(const char *name);

/* Scenario names ("herd", ...), parse; -1 for an unknown name. */
const char *sim_scenario_name(sim_scenario s);
int sim_scenario_parse(const char *name);

/* Strategy names as in JSON ("none", "fixed", ..., "bucket", "adaptive"). */
const char *sim_strategy_name(sim_strategy s);
int sim_strategy_parse(const char *name);

/* Fill *o with the documented defaults of scenario s. */
void sim_opts_default(sim_opts *o, sim_scenario s);

/* Check the options. Returns NULL when they are valid, else a static
 * message for a usage error. */
const char *sim_opts_check(const sim_opts *o);

/* Run every (point, strategy[, mode]) of o for o->trials trials. Returns
 * STG_OK, STG_EINVAL (sim_opts_check failed) or STG_ENOMEM. On success *r
 * owns its rows; free with sim_results_free. Deterministic for given opts. */
int sim_run(const sim_opts *o, sim_results *r);
void sim_results_free(sim_results *r);

/* Output (output.c, svg.c). Each returns 0, or -1 on a write error. */
int sim_print_table(FILE *f, const sim_results *r);
int sim_write_csv(FILE *f, const sim_results *r);
int sim_write_json(FILE *f, const sim_results *r);
int sim_write_svg(FILE *f, const sim_results *r);

/* Mean over trials, and the sample standard deviation (0 for n < 2). */
double sim_stat_mean(const sim_stat *s);
double sim_stat_sd(const sim_stat *s);

/* Look up a metric of a row by key; NULL when the row has none. */
const sim_stat *sim_row_metric(const sim_row *row, const char *key);

#endif
