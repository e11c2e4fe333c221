/*
 * The simulator's front: names, per-scenario defaults, option checks, and
 * the loop over points, strategies, modes and trials (see sim.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "scenario.h"

static const char *const scenario_names[SIM_N_SCENARIOS] = {
    "herd", "quota", "storm", "load", "contention", "slow-server", "fleet"};

static const char *const policy_names[SIM_FLEET_N_POLICIES] = {"fcfs", "priority", "sfq"};

static const char *const strategy_names[SIM_N_STRATEGIES] = {
    "none", "fixed", "exponential", "full", "equal", "decorrelated", "pct", "additive",
    "bucket", "adaptive",
};

/* names[i] of a table of n names, "unknown" out of range. */
static const char *name_of(const char *const *names, int n, int i)
{
    return i >= 0 && i < n ? names[i] : "unknown";
}

/* The index of name in a table of n names, -1 when not there (or NULL). */
static int index_of(const char *const *names, int n, const char *name)
{
    for (int i = 0; name && i < n; i++)
        if (!strcmp(name, names[i]))
            return i;
    return -1;
}

const char *sim_scenario_name(sim_scenario s)
{
    return name_of(scenario_names, SIM_N_SCENARIOS, (int)s);
}

int sim_scenario_parse(const char *name)
{
    return index_of(scenario_names, SIM_N_SCENARIOS, name);
}

const char *sim_fleet_policy_name(int p)
{
    return name_of(policy_names, SIM_FLEET_N_POLICIES, p);
}

int sim_fleet_policy_parse(const char *name)
{
    return index_of(policy_names, SIM_FLEET_N_POLICIES, name);
}

const char *sim_strategy_name(sim_strategy s)
{
    return name_of(strategy_names, SIM_N_STRATEGIES, (int)s);
}

int sim_strategy_parse(const char *name)
{
    if (name && !strcmp(name, "exp"))
        return SIM_EXPONENTIAL;
    return index_of(strategy_names, SIM_N_STRATEGIES, name);
}

static void set_strategies(sim_opts *o, const sim_strategy *s, int n)
{
    for (int i = 0; i < n; i++)
        o->strategies[i] = s[i];
    o->nstrategies = n;
}

void sim_opts_default(sim_opts *o, sim_scenario s)
{
    memset(o, 0, sizeof *o);
    o->scenario = s;
    o->seed = 1;
    o->trials = 1;
    /* Rate-limited scenarios: an API in the same region, round trip about
     * 5 ms, shorter than the limiter's 10 ms token interval at 100/s. */
    o->delay = (sim_delay){STG_MS(1), STG_US(200)};
    o->server_us = STG_MS(3);
    o->paced_backoff = SIM_PCT;
    o->limit_rps = 100;
    o->burst = 100;
    o->requests = 10;
    o->client_share = 0.8;
    o->client_burst = 40;
    o->window_us = STG_MS(100);
    o->peak_after_us = INT64_MIN;
    o->bin_us = STG_MS(100);
    o->nclients = 1;
    switch (s) {
    case SIM_HERD: {
        static const sim_strategy d[] = {SIM_FIXED, SIM_EXPONENTIAL, SIM_EQUAL, SIM_FULL,
                                         SIM_DECORRELATED};
        set_strategies(o, d, 5);
        o->clients[0] = 20;
        o->fail_first = 4;
        o->delay = (sim_delay){STG_MS(5), STG_US(500)};
        o->server_us = STG_MS(1);
        o->policy.backoff.base_us = STG_MS(200);
        o->policy.max_attempts = 6;
        o->policy.deadline_us = STG_SEC(15);
        o->window_us = STG_MS(10);
        o->bin_us = STG_MS(10);
        break;
    }
    case SIM_QUOTA: {
        static const sim_strategy d[] = {SIM_FULL};
        set_strategies(o, d, 1);
        o->clients[0] = 100;
        o->modes[0] = STG_RETRY_AFTER_EXACT;
        o->modes[1] = STG_RETRY_AFTER_HONOR;
        o->modes[2] = STG_RETRY_AFTER_CAP;
        o->nmodes = 3;
        o->retry_after_us = STG_SEC(5);
        o->peak_after_us = STG_SEC(5);
        o->policy.backoff.base_us = STG_MS(500); /* one base, as documented */
        break;
    }
    case SIM_STORM: {
        static const sim_strategy d[] = {SIM_FIXED, SIM_PCT, SIM_BUCKET, SIM_ADAPTIVE};
        set_strategies(o, d, 4);
        o->clients[0] = 50;
        o->clients[1] = 30;
        o->nclients = 2;
        o->burst = 20;
        o->requests = 2000;
        o->peak_after_us = STG_SEC(1);
        o->policy.backoff.base_us = STG_SEC(1);
        o->policy.backoff.cap_us = STG_SEC(30);
        o->policy.backoff.jitter_lo = -0.2;
        o->policy.backoff.jitter_hi = 0.2;
        o->policy.max_attempts = 7;
        o->policy.deadline_us = STG_SEC(300);
        stg_status_set_parse(&o->policy.retry_statuses, "429,5xx");
        break;
    }
    case SIM_LOAD: {
        static const sim_strategy d[] = {SIM_FIXED, SIM_EXPONENTIAL, SIM_FULL, SIM_EQUAL,
                                         SIM_DECORRELATED, SIM_PCT, SIM_ADDITIVE};
        set_strategies(o, d, 7);
        o->clients[0] = 1000;
        o->policy.backoff.base_us = STG_SEC(1);
        o->policy.backoff.cap_us = STG_SEC(60);
        o->policy.max_attempts = 6;
        o->policy.deadline_us = STG_SEC(10);
        break;
    }
    case SIM_SLOW: {
        /* The benchmark: capacity 20, 50 ms each (400/s), 5000
         * jobs; fixed 200 in flight against the learned concurrency
         * (adaptive) with 200 as its ceiling. */
        static const sim_strategy d[] = {SIM_FIXED, SIM_ADAPTIVE};
        set_strategies(o, d, 2);
        o->clients[0] = 200;
        o->requests = 5000;
        o->capacity = 20;
        o->server_us = STG_MS(50);
        break;
    }
    case SIM_FLEET: {
        /* Issue #32: a website's calls (interactive, Poisson at 20% of the
         * limit), normal and batch backlogs, three tenants 1:1:2 holding
         * 60%, 30% and 10% of each class's processes; today's FCFS beside
         * the priority decision, 100 to 1000 processes. */
        static const sim_strategy d[] = {SIM_NONE}; /* unused */
        static const sim_tenant ten[] = {{"a", 1, 0.6}, {"b", 1, 0.3}, {"c", 2, 0.1}};
        sim_fleet_opts *f = &o->fleet;
        set_strategies(o, d, 1);
        o->nclients = 0;
        o->clients[o->nclients++] = 100;
        o->clients[o->nclients++] = 200;
        o->clients[o->nclients++] = 500;
        o->clients[o->nclients++] = 1000;
        o->burst = 10;
        o->server_us = STG_MS(20);
        f->policies[0] = SIM_FLEET_FCFS;
        f->policies[1] = SIM_FLEET_PRIORITY;
        f->npolicies = 2;
        f->mix[0] = 0.1;
        f->mix[1] = 0.3;
        f->mix[2] = 0.6;
        f->offered[0] = 0.2;
        f->offered[1] = -1;
        f->offered[2] = -1;
        memcpy(f->tenants, ten, sizeof ten);
        f->ntenants = 3;
        f->redis_leg = (sim_delay){STG_US(500), STG_US(100)};
        f->redis_op_us = STG_US(25);
        f->lease_us = STG_MS(40);
        f->duration_us = STG_SEC(20);
        f->max_wait_us = STG_MS(50); /* the CLI's horizon with classes (cli/limiter.h) */
        f->floor = 0.05;
        break;
    }
    case SIM_CONTENTION:
    default: {
        static const sim_strategy d[] = {SIM_NONE, SIM_EXPONENTIAL, SIM_FULL, SIM_EQUAL,
                                         SIM_DECORRELATED};
        set_strategies(o, d, 5);
        o->nclients = 0;
        for (int c = 10; c <= 150; c += 10)
            o->clients[o->nclients++] = c;
        o->trials = 100;
        o->delay = (sim_delay){STG_MS(10), STG_MS(2)};
        o->server_us = 0;
        o->policy.backoff.base_us = STG_MS(5);
        o->policy.backoff.cap_us = STG_MS(2000);
        o->policy.max_attempts = 1000000;
        o->policy.deadline_us = -1;
        stg_status_set_parse(&o->policy.retry_statuses, "409");
        o->window_us = STG_MS(10);
        break;
    }
    }
}

static const char *fleet_check(const sim_opts *o)
{
    const sim_fleet_opts *f = &o->fleet;
    for (int i = 0; i < o->nclients; i++)
        if (o->clients[i] > SIM_FLEET_MAX_CLIENTS)
            return "fleet clients must be 1..100000";
    if (f->npolicies < 1 || f->npolicies > SIM_FLEET_N_POLICIES)
        return "give 1 to 3 policies (fcfs, priority, sfq)";
    for (int i = 0; i < f->npolicies; i++)
        if ((unsigned)f->policies[i] >= SIM_FLEET_N_POLICIES)
            return "unknown policy";
    if (f->ntenants < 1 || f->ntenants > SIM_FLEET_MAX_TENANTS)
        return "give 1 to 8 tenants";
    double share = 0, mix = 0;
    for (int t = 0; t < f->ntenants; t++) {
        if (stg_tenant_check(f->tenants[t].name, NULL) != STG_OK)
            return "a tenant name is 1 to 64 of A-Z a-z 0-9 . _ : -";
        for (int u = 0; u < t; u++)
            if (!strcmp(f->tenants[u].name, f->tenants[t].name))
                return "tenant names must differ";
        if (!(f->tenants[t].weight > 0) || f->tenants[t].weight > 1e6)
            return "tenant weights must be in (0, 1000000]";
        if (!(f->tenants[t].share >= 0) || f->tenants[t].share > 1e6)
            return "tenant shares must be >= 0";
        share += f->tenants[t].share;
    }
    if (!(share > 0))
        return "some tenant needs a share of the processes";
    for (int c = 0; c < STG_N_PRIORITIES; c++) {
        if (!(f->mix[c] >= 0) || f->mix[c] > 1e6)
            return "class mix shares must be >= 0";
        mix += f->mix[c];
        if (!(f->offered[c] < 0 || f->offered[c] <= 100))
            return "offered load must be max or a share of the limit in [0, 100]";
    }
    if (!(mix > 0))
        return "some class needs a share of the processes";
    if (o->burst < 2)
        return "fleet needs a burst of at least 2 (a lease needs room)";
    if (f->redis_leg.mean_us < 0 || f->redis_leg.sd_us < 0 || f->redis_leg.mean_us > STG_SEC(10) ||
        f->redis_leg.sd_us > STG_SEC(10))
        return "the Redis legs must be 0..10 s";
    if (f->redis_op_us < 0 || f->redis_op_us > STG_SEC(1))
        return "the Redis time per call must be 0..1 s";
    if (f->lease_us <= 0 || f->lease_us > STG_SEC(10))
        return "the lease must be 1us..10s";
    if (f->duration_us < STG_MS(1) || f->duration_us > STG_SEC(86400))
        return "the duration must be 1ms..24h";
    if (f->max_wait_us < 0 || f->max_wait_us > STG_SEC(86400))
        return "the longest wait must be 0..24h";
    if (!(f->floor >= 0) || f->floor > 0.5)
        return "the floor must be in [0, 0.5]";
    if (f->hold_us < 0 || f->hold_us > STG_SEC(3600))
        return "the hold must be 0..1h";
    return NULL;
}

const char *sim_opts_check(const sim_opts *o)
{
    if ((unsigned)o->scenario >= SIM_N_SCENARIOS)
        return "unknown scenario";
    if (o->trials < 1 || o->trials > 1000000)
        return "trials must be 1..1000000";
    if (o->nclients < 1 || o->nclients > SIM_MAX_POINTS)
        return "give 1 to 64 client counts";
    for (int i = 0; i < o->nclients; i++) {
        if (o->clients[i] < 1 || o->clients[i] > SIM_MAX_CLIENTS)
            return "clients must be 1..5000000";
        if (o->scenario == SIM_HERD && o->clients[i] > SIM_HERD_MAX_CLIENTS)
            return "herd clients must be 1..2097151";
    }
    if (o->nstrategies < 1 || o->nstrategies > SIM_MAX_STRATS)
        return "give 1 to 16 strategies";
    for (int i = 0; i < o->nstrategies; i++) {
        sim_strategy s = o->strategies[i];
        if ((unsigned)s >= SIM_N_STRATEGIES)
            return "unknown strategy";
        if ((s == SIM_BUCKET || s == SIM_ADAPTIVE) &&
            (o->scenario == SIM_HERD || o->scenario == SIM_CONTENTION))
            return "bucket and adaptive need a rate-limited server (quota, storm, load)";
        if (o->scenario == SIM_SLOW && s != SIM_FIXED && s != SIM_ADAPTIVE)
            return "slow-server compares fixed and adaptive (the learned concurrency)";
        stg_policy p;
        if (sim_strategy_policy(o, s, -1, &p) != STG_OK)
            return "the retry policy is invalid (check --base, --cap, --mult)";
    }
    if (o->paced_backoff == SIM_BUCKET || o->paced_backoff == SIM_ADAPTIVE)
        return "the paced strategies' backoff must be a backoff kind";
    if (o->scenario == SIM_QUOTA && (o->nmodes < 1 || o->nmodes > SIM_MAX_MODES))
        return "give 1 to 4 Retry-After modes";
    if (o->delay.mean_us < 0 || o->delay.sd_us < 0 || o->server_us < 0)
        return "delays must not be negative";
    if (o->delay.mean_us > STG_SEC(3600) || o->delay.sd_us > STG_SEC(3600) ||
        o->server_us > STG_SEC(3600))
        return "delays must be at most 1 h";
    if (o->window_us <= 0 || o->bin_us <= 0)
        return "windows and bins must be positive";
    if (o->fail_first < 0 || o->fail_first >= SIM_MAX_ROUNDS - 1)
        return "fail-first must be 0..30";
    if (!(o->limit_rps > 0) || o->limit_rps > 1e6)
        return "limit must be in (0, 1000000] requests/s";
    if (o->burst < 0 || o->burst > 1000000)
        return "burst must be 0..1000000";
    if (!(o->error_rate >= 0) || o->error_rate > 1)
        return "error rate must be in [0, 1]";
    if (o->requests < 1 || o->requests > 100000000)
        return "requests must be 1..100000000";
    if (!(o->client_share > 0) || o->client_share > 100)
        return "client share must be in (0, 100]";
    if (o->client_burst < 0 || o->client_burst > 1000000)
        return "client burst must be 0..1000000";
    if (o->retry_after_us < 0)
        return "retry-after must not be negative";
    if (o->scenario == SIM_SLOW && (o->capacity < 1 || o->capacity > 100000))
        return "capacity must be 1..100000";
    if (o->scenario == SIM_SLOW && o->requests > (1 << 24) - 1)
        return "slow-server jobs must be 1..16777215";
    if (o->scenario == SIM_SLOW && o->server_us <= 0)
        return "slow-server needs a positive server time";
    if (o->scenario == SIM_FLEET)
        return fleet_check(o);
    return NULL;
}

static sim_trial_fn trial_fn(sim_scenario s)
{
    switch (s) {
    case SIM_HERD: return sim_herd_trial;
    case SIM_QUOTA: return sim_quota_trial;
    case SIM_STORM: return sim_storm_trial;
    case SIM_LOAD: return sim_load_trial;
    case SIM_SLOW: return sim_slow_trial;
    case SIM_FLEET: return sim_fleet_trial;
    default: return sim_contention_trial;
    }
}

void sim_results_free(sim_results *r)
{
    for (size_t i = 0; r->rows && i < r->nrows; i++) {
        free(r->rows[i].bins);
        free(r->rows[i].fleet);
    }
    free(r->rows);
    r->rows = NULL;
    r->nrows = 0;
}

int sim_run(const sim_opts *o, sim_results *r)
{
    memset(r, 0, sizeof *r);
    if (sim_opts_check(o))
        return STG_EINVAL;
    r->opts = *o;
    int nmodes = o->scenario == SIM_QUOTA   ? o->nmodes
                 : o->scenario == SIM_FLEET ? o->fleet.npolicies
                                            : 1;
    size_t nrows = (size_t)o->nclients * (size_t)o->nstrategies * (size_t)nmodes;
    r->rows = calloc(nrows, sizeof *r->rows);
    if (!r->rows)
        return STG_ENOMEM;
    sim_trial_fn fn = trial_fn(o->scenario);
    for (int pi = 0; pi < o->nclients; pi++) {
        for (int si = 0; si < o->nstrategies; si++) {
            for (int mi = 0; mi < nmodes; mi++) {
                sim_row *row = &r->rows[r->nrows++];
                row->scenario = o->scenario;
                row->strategy = o->strategies[si];
                row->mode = o->scenario == SIM_QUOTA   ? (int)o->modes[mi]
                            : o->scenario == SIM_FLEET ? o->fleet.policies[mi]
                                                       : -1;
                row->clients = o->clients[pi];
                for (int t = 0; t < o->trials; t++) {
                    int rc = fn(o, row, o->seed + (uint64_t)t, t == 0);
                    if (rc != STG_OK) {
                        sim_results_free(r);
                        return rc;
                    }
                }
            }
        }
    }
    return STG_OK;
}
