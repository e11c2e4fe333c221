/*
 * Scenario "fleet" (fleet.c), its shared-limit decisions (fleet_policy.c)
 * and its measures (fleet_measure.c; output.c and svg.c show them): many
 * client processes sharing one server quota through a modelled Redis, by
 * priority class and tenant (issue #32, /work/PRIO.md).
 *
 * The decision a script call makes, on Redis's clock, for one caller:
 *   SIM_FLEET_FCFS      today's script (src/redis/gcra.c, a lease of up to
 *                       k tokens placed lead ahead, as many as conform
 *                       within the timeout), first come first served;
 *   SIM_FLEET_PRIORITY  the class- and tenant-aware decision of PRIO.md's
 *                       Join 2: stg__prio_decide (src/core/prio_gcra.c),
 *                       the model the Redis script is tested against;
 *   SIM_FLEET_SFQ       the simulator's own model of the same rules,
 *                       written before prio_gcra.c landed (fleet_policy.c
 *                       says where it differs), kept for comparison.
 * Both keep the global GCRA's geometry (a grant of k tokens from tat0 is
 * usable in [tat0 + k*T - burst*T, tat0]), so any mix of grants keeps the
 * server's bound burst + rate * t; sim_bound checks it on the sends.
 *
 * Times in the model are ns on Redis's clock (the simulator's microsecond
 * clock times 1000), as in the script. Nothing here keeps global state.
 */
#ifndef STAGGER_SIM_FLEET_H
#define STAGGER_SIM_FLEET_H

#include "core/prio_gcra.h"
#include "evq.h"
#include "sim.h"

/* One script call. */
typedef struct sim_fleet_call {
    int cls;            /* class index 0..STG_N_PRIORITIES-1 (interactive 0) */
    int tenant;         /* 0..ntenants-1 */
    const char *tname;  /* its name */
    double weight;      /* the tenant's weight, > 0 */
    uint32_t client;    /* the calling process */
    int64_t k;          /* tokens wanted (the lease plan), >= 1 */
    int64_t lead_ns;    /* how far ahead the lease must reach (lease_size.c) */
    int64_t timeout_ns; /* how long the caller may wait for its first token */
} sim_fleet_call;

/* Its answer. */
typedef struct sim_fleet_grant {
    int64_t k;       /* tokens granted; 0: refused */
    int64_t wait_ns; /* granted: from now until the first may be used */
    int64_t end_ns;  /* granted: from now until the window closes */
    int64_t hint_ns; /* refused: ask again after about this long */
    bool lease;      /* granted with a window (else a plain take: FCFS's
                        fallback when a lease does not fit, gcra.c) */
} sim_fleet_grant;

/* The state of the one shared key. */
typedef struct sim_fleet_model {
    int policy;       /* sim_fleet_policy */
    int64_t T;        /* ns per token: ceil(1e9 / rate), as url.c */
    int64_t burst;
    int64_t hold_ns;  /* how long a call marks its class and tenant as demanding */
    double floor;     /* the lowest class's minimum share */
    int ntenants;
    int64_t tat;      /* the global GCRA's TAT */
    /* priority: per class */
    int64_t demand_until[STG_N_PRIORITIES];
    double credit;    /* tokens owed to the lowest class by its floor */
    /* priority: per class and tenant (start-time fair queueing) */
    int64_t active_until[STG_N_PRIORITIES][SIM_FLEET_MAX_TENANTS];
    double vf[STG_N_PRIORITIES][SIM_FLEET_MAX_TENANTS]; /* tokens / weight taken */
    double wt[STG_N_PRIORITIES][SIM_FLEET_MAX_TENANTS]; /* weight of its last call */
    /* priority: callers refused and asking again, per class (a sorted set
     * with expiry in the script: ZADD until, ZREMRANGEBYSCORE, ZCARD) */
    uint32_t nclients;
    int64_t *waiting_until; /* per client, us; 0: not waiting */
    uint8_t *waiting_tenant; /* per client: its tenant when it waits */
    sim_evq expiry[STG_N_PRIORITIES];
    int64_t nwaiting[STG_N_PRIORITIES][SIM_FLEET_MAX_TENANTS];
    stg__prio_state *prio; /* priority: the key's state (owned) */
} sim_fleet_model;

/* Set up a model of policy for a key of rate (/s) and burst, for nclients
 * callers and ntenants tenants. Returns STG_OK, STG_EINVAL or STG_ENOMEM;
 * free with sim_fleet_model_free (also after an error). */
int sim_fleet_model_init(sim_fleet_model *m, int policy, double rate, int64_t burst,
                         int64_t hold_ns, double floor, int ntenants, uint32_t nclients);
void sim_fleet_model_free(sim_fleet_model *m);

/* One script call at now_ns (non-decreasing from call to call). A refused
 * call's hint is at least 1 ns. */
void sim_fleet_decide(sim_fleet_model *m, int64_t now_ns, const sim_fleet_call *c,
                      sim_fleet_grant *g);

/* Jain's fairness index of x[0..n): (sum x)^2 / (n * sum x^2), in [1/n, 1];
 * 1 when n == 0 or every x is 0 (all equal). */
double sim_jain(const double *x, int n);

/* The server's bound, checked on the sends: a send at t conforms to
 * (rate, burst) when t >= tat - (burst - 1) * T (GCRA, virtual scheduling),
 * which is the same as "at most burst + rate * (b - a) sends in any [a, b]";
 * a send that does not is excess and takes nothing. Instants in ns,
 * non-decreasing. */
typedef struct sim_bound {
    int64_t T, tau, tat;
    uint64_t sends, excess;
} sim_bound;

void sim_bound_init(sim_bound *b, double rate, int64_t burst);
void sim_bound_send(sim_bound *b, int64_t t_ns);

/* Per-tenant figures of a fleet row (means over trials in sim_stat). */
typedef struct sim_fleet_row {
    sim_stat rps[STG_N_PRIORITIES][SIM_FLEET_MAX_TENANTS]; /* admissions/s */
    int clients[STG_N_PRIORITIES][SIM_FLEET_MAX_TENANTS];  /* processes */
} sim_fleet_row;

#endif
