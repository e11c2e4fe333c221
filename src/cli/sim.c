/*
 * `stagger sim`: replay retry storms in virtual time (see src/sim/sim.h).
 *
 * Parses the scenario and its options, runs the simulator, and writes an
 * aligned table (or JSON lines with --json) on stdout, plus --csv and --svg
 * files. Every figure comes from libstagger's own decision code; runs are
 * deterministic for a given --seed.
 */
#ifdef STG_HAVE_SIM

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "sim/sim.h"

#define CMD "sim"

static int parse_clients(const char *s, sim_opts *o)
{
    o->nclients = 0;
    long long a, b, step = 10;
    const char *dots = strstr(s, "..");
    if (dots) {
        char lo[32], rest[64];
        size_t n = (size_t)(dots - s);
        if (n == 0 || n >= sizeof lo || strlen(dots + 2) >= sizeof rest)
            return -1;
        memcpy(lo, s, n);
        lo[n] = '\0';
        snprintf(rest, sizeof rest, "%s", dots + 2);
        char *colon = strchr(rest, ':');
        if (colon) {
            *colon = '\0';
            if (!cli_parse_int(colon + 1, 1, SIM_MAX_CLIENTS, &step))
                return -1;
        }
        if (!cli_parse_int(lo, 1, SIM_MAX_CLIENTS, &a) ||
            !cli_parse_int(rest, 1, SIM_MAX_CLIENTS, &b) || b < a)
            return -1;
        for (long long c = a; c <= b; c += step) {
            if (o->nclients == SIM_MAX_POINTS)
                return -1;
            o->clients[o->nclients++] = (int)c;
        }
        return 0;
    }
    char buf[512];
    if (strlen(s) >= sizeof buf)
        return -1;
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (o->nclients == SIM_MAX_POINTS || !cli_parse_int(t, 1, SIM_MAX_CLIENTS, &a))
            return -1;
        o->clients[o->nclients++] = (int)a;
    }
    return o->nclients > 0 ? 0 : -1;
}

static int parse_strategies(const char *s, sim_opts *o)
{
    char buf[512];
    if (strlen(s) >= sizeof buf)
        return -1;
    snprintf(buf, sizeof buf, "%s", s);
    o->nstrategies = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int k = sim_strategy_parse(t);
        if (k < 0 || o->nstrategies == SIM_MAX_STRATS)
            return -1;
        o->strategies[o->nstrategies++] = (sim_strategy)k;
    }
    return o->nstrategies > 0 ? 0 : -1;
}

static int parse_modes(const char *s, sim_opts *o)
{
    char buf[128];
    if (strlen(s) >= sizeof buf)
        return -1;
    snprintf(buf, sizeof buf, "%s", s);
    o->nmodes = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        stg_retry_after_mode m;
        if (stg_retry_after_mode_parse(t, &m) != STG_OK || o->nmodes == SIM_MAX_MODES)
            return -1;
        o->modes[o->nmodes++] = m;
    }
    return o->nmodes > 0 ? 0 : -1;
}

/* "A:B" into two strings (B may be absent). */
static bool split_pair(const char *s, char *a, size_t asz, char *b, size_t bsz)
{
    const char *colon = strchr(s, ':');
    size_t n = colon ? (size_t)(colon - s) : strlen(s);
    if (n == 0 || n >= asz)
        return false;
    memcpy(a, s, n);
    a[n] = '\0';
    b[0] = '\0';
    if (colon) {
        if (strlen(colon + 1) == 0 || strlen(colon + 1) >= bsz)
            return false;
        snprintf(b, bsz, "%s", colon + 1);
    }
    return true;
}

static int write_file(const char *path, const sim_results *r,
                      int (*fn)(FILE *, const sim_results *))
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "stagger sim: cannot write %s: %s\n", path, strerror(errno));
        return 1;
    }
    int rc = fn(f, r);
    if (fclose(f) != 0 || rc != 0) {
        fprintf(stderr, "stagger sim: error writing %s\n", path);
        return 1;
    }
    return 0;
}

typedef struct sim_cli {
    sim_opts o;
    bool json;
    const char *csv, *svg;
} sim_cli;

static int opt_clients(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    if (parse_clients(v, field) != 0)
        return cli_opt_bad(p, v, "expected N, N,M,... or FROM..TO[:STEP] (at most 64 points)");
    return 0;
}

static int opt_strategies(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    if (parse_strategies(v, field) != 0)
        return cli_opt_bad(p, v,
                           "expected names among none, fixed, exponential, full, equal, "
                           "decorrelated, pct, additive, bucket, adaptive");
    return 0;
}

static int opt_modes(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    if (parse_modes(v, field) != 0)
        return cli_opt_bad(p, v, "expected exact, honor, cap, ignore (at most 4)");
    return 0;
}

static int opt_trials(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    long long n;
    if (!cli_parse_int(v, 1, 1000000, &n))
        return cli_opt_bad(p, v, "expected 1..1000000");
    *(int *)field = (int)n;
    return 0;
}

static int opt_seed(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    long long n;
    if (!cli_parse_int(v, 0, INT64_MAX, &n))
        return cli_opt_bad(p, v, "expected a whole number from 0");
    *(uint64_t *)field = (uint64_t)n;
    return 0;
}

static int opt_delay(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    char p1[64], p2[64];
    int64_t m, sd = 0;
    if (!split_pair(v, p1, sizeof p1, p2, sizeof p2) || !cli_parse_duration(p1, &m) ||
        (p2[0] && !cli_parse_duration(p2, &sd)))
        return cli_opt_bad(p, v, "expected MEAN[:SD], e.g. 5ms:0.5ms");
    ((sim_delay *)field)->mean_us = m;
    ((sim_delay *)field)->sd_us = sd;
    return 0;
}

static int opt_duration(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    if (!cli_parse_duration(v, field))
        return cli_opt_bad(p, v, "expected a duration such as 1ms (0 = none)");
    return 0;
}

static int opt_positive_duration(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    int64_t d;
    if (!cli_parse_duration(v, &d) || d == 0)
        return cli_opt_bad(p, v, "expected a positive duration such as 10ms");
    *(int64_t *)field = d;
    return 0;
}

static int opt_fail_first(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    long long n;
    if (!cli_parse_int(v, 0, SIM_MAX_ROUNDS - 2, &n))
        return cli_opt_bad(p, v, "expected 0..30");
    *(int *)field = (int)n;
    return 0;
}

static int opt_limit(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    if (!cli_parse_double(v, 0.001, 1e6, field))
        return cli_opt_bad(p, v, "expected requests/s in 0.001..1000000");
    return 0;
}

static int opt_burst(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    long long n;
    if (!cli_parse_int(v, 1, 1000000, &n))
        return cli_opt_bad(p, v, "expected 1..1000000");
    *(int64_t *)field = n;
    return 0;
}

static int opt_errors(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    if (!cli_parse_double(v, 0, 1, field))
        return cli_opt_bad(p, v, "expected a share from 0 to 1");
    return 0;
}

static int opt_requests(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    long long n;
    if (!cli_parse_int(v, 1, 100000000, &n))
        return cli_opt_bad(p, v, "expected 1..100000000");
    *(int *)field = (int)n;
    return 0;
}

static int opt_client_share(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    if (!cli_parse_double(v, 0.001, 100, field))
        return cli_opt_bad(p, v, "expected a share such as 0.8");
    return 0;
}

static int opt_paced_backoff(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    int k = sim_strategy_parse(v);
    if (k < 0 || k == SIM_BUCKET || k == SIM_ADAPTIVE)
        return cli_opt_bad(p, v, "expected a backoff such as pct or full");
    *(sim_strategy *)field = (sim_strategy)k;
    return 0;
}

static int opt_budget(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    sim_opts *so = field;
    char p1[64], p2[64];
    so->use_budget = true;
    memset(&so->budget, 0, sizeof so->budget);
    if (strcmp(v, "on")) {
        if (!split_pair(v, p1, sizeof p1, p2, sizeof p2) ||
            !cli_parse_double(p1, 0.001, 1e6, &so->budget.max_tokens) ||
            (p2[0] && !cli_parse_double(p2, 0.001, 1e6, &so->budget.token_ratio)))
            return cli_opt_bad(p, v, "expected MAX[:RATIO] such as 10:0.1, or on");
    }
    return 0;
}

static int opt_breaker(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    sim_opts *so = field;
    char p1[64], p2[64];
    long long n;
    so->use_breaker = true;
    memset(&so->breaker, 0, sizeof so->breaker);
    if (strcmp(v, "on")) {
        int64_t open = 0;
        if (!split_pair(v, p1, sizeof p1, p2, sizeof p2) || !cli_parse_int(p1, 1, 1000000, &n) ||
            (p2[0] && (!cli_parse_duration(p2, &open) || open == 0)))
            return cli_opt_bad(p, v, "expected N[:OPEN] such as 20:30s, or on");
        so->breaker.consecutive_failures = (int)n;
        so->breaker.open_us = open;
    }
    return 0;
}

/* fleet ----------------------------------------------------------------- */

static int opt_policies(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    sim_fleet_opts *f = field;
    char buf[128];
    int n = 0;
    if (strlen(v) >= sizeof buf)
        return cli_opt_bad(p, v, "expected fcfs, priority, sfq (comma-separated)");
    snprintf(buf, sizeof buf, "%s", v);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int k = sim_fleet_policy_parse(t);
        if (k < 0 || n == SIM_FLEET_N_POLICIES)
            return cli_opt_bad(p, v, "expected fcfs, priority, sfq (comma-separated)");
        f->policies[n++] = k;
    }
    if (n == 0)
        return cli_opt_bad(p, v, "expected fcfs, priority, sfq (comma-separated)");
    f->npolicies = n;
    return 0;
}

/* I:N:B, one value per class; "max" (offered load only) is -1. */
static int class_triple(const char *v, double max, bool allow_max, double *out)
{
    char buf[128];
    if (strlen(v) >= sizeof buf)
        return -1;
    snprintf(buf, sizeof buf, "%s", v);
    char *save = NULL, *t = strtok_r(buf, ":", &save);
    double x[STG_N_PRIORITIES];
    for (int c = 0; c < STG_N_PRIORITIES; c++, t = strtok_r(NULL, ":", &save)) {
        if (!t)
            return -1;
        if (allow_max && !strcmp(t, "max"))
            x[c] = -1;
        else if (!cli_parse_double(t, 0, max, &x[c]))
            return -1;
    }
    if (t)
        return -1;
    memcpy(out, x, sizeof x);
    return 0;
}

static int opt_mix(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    double *mix = field;
    if (class_triple(v, 1e6, false, mix) != 0 || !(mix[0] + mix[1] + mix[2] > 0))
        return cli_opt_bad(p, v, "expected I:N:B shares of the processes, e.g. 0.1:0.3:0.6");
    return 0;
}

static int opt_offered(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    if (class_triple(v, 100, true, field) != 0)
        return cli_opt_bad(p, v,
                           "expected I:N:B, each a share of --limit or max, e.g. 0.2:max:max");
    return 0;
}

static int opt_tenants(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    sim_fleet_opts *f = field;
    char buf[1024];
    static const char want[] =
        "expected NAME[:WEIGHT[:SHARE]],... (at most 8), e.g. a:1:0.6,b:1:0.3,c:2:0.1";
    if (strlen(v) >= sizeof buf)
        return cli_opt_bad(p, v, want);
    snprintf(buf, sizeof buf, "%s", v);
    sim_tenant ts[SIM_FLEET_MAX_TENANTS];
    int n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (n == SIM_FLEET_MAX_TENANTS)
            return cli_opt_bad(p, v, want);
        char *w = strchr(t, ':'), *sh = NULL;
        if (w) {
            *w++ = '\0';
            sh = strchr(w, ':');
            if (sh)
                *sh++ = '\0';
        }
        sim_tenant *e = &ts[n++];
        e->weight = 1;
        e->share = 1;
        if (stg_tenant_check(t, NULL) != STG_OK ||
            (w && !cli_parse_double(w, 1e-6, 1e6, &e->weight)) ||
            (sh && !cli_parse_double(sh, 0, 1e6, &e->share)))
            return cli_opt_bad(p, v, want);
        snprintf(e->name, sizeof e->name, "%s", t);
    }
    if (n == 0)
        return cli_opt_bad(p, v, want);
    memcpy(f->tenants, ts, (size_t)n * sizeof ts[0]);
    f->ntenants = n;
    return 0;
}

static int opt_floor(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    if (!cli_parse_double(v, 0, 0.5, field))
        return cli_opt_bad(p, v, "expected a share from 0 to 0.5");
    return 0;
}

/* --preset and --backoff: the strategies choose the backoff. */
static int opt_not_here(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)field, (void)v;
    return cli_usage_error(cli_cmd_name(p),
                           "--%s does not apply: choose backoffs with "
                           "--strategies",
                           o->name);
}

/* ---- defaults: the scenario's (sim_opts_default), shown from there ------- */

/* help --defaults sim SCENARIO: the scenario whose default the rows
 * compare with; -1: --help, every scenario. */
static int defaults_scenario = -1;

typedef double (*sim_field_fn)(const sim_opts *o);
static double f_trials(const sim_opts *o) { return o->trials; }
static double f_seed(const sim_opts *o) { return (double)o->seed; }
static double f_limit(const sim_opts *o) { return o->limit_rps; }
static double f_fail_first(const sim_opts *o) { return o->fail_first; }

/* The default of a field as sim_opts_default sets it: herd's value, then
 * each scenario that differs ("1; contention 100"); under help --defaults,
 * that scenario's alone. only_herd: a herd-only option (--fail-first). */
static void scenario_default(sim_field_fn f, bool only_herd, char *buf, size_t size)
{
    sim_opts o;
    sim_opts_default(&o, defaults_scenario >= 0 ? (sim_scenario)defaults_scenario : SIM_HERD);
    double first = f(&o);
    int w = snprintf(buf, size, "%g", first);
    for (int s = SIM_HERD + 1; defaults_scenario < 0 && !only_herd && s < SIM_N_SCENARIOS; s++) {
        sim_opts_default(&o, (sim_scenario)s);
        if (f(&o) != first && w >= 0 && (size_t)w < size)
            w += snprintf(buf + w, size - (size_t)w, "; %s %g", sim_scenario_name((sim_scenario)s),
                          f(&o));
    }
}

#define SIM_DEFAULT(name, field, herd)                                                             \
    static void def_##name(const cli_command *c, char *buf, size_t size)                           \
    {                                                                                              \
        (void)c;                                                                                   \
        scenario_default(field, herd, buf, size);                                                  \
    }
SIM_DEFAULT(trials, f_trials, false)
SIM_DEFAULT(seed, f_seed, false)
SIM_DEFAULT(limit, f_limit, false)
SIM_DEFAULT(fail_first, f_fail_first, true)
#undef SIM_DEFAULT

#define F(x) offsetof(sim_cli, o.x)
#define FL(x) offsetof(sim_cli, o.fleet.x)
static const cli_opt sim_table[] = {
    {.kind = CLI_HEADING,
     .help = "Options (defaults depend on the scenario; see stagger-sim(1) and docs/sim.md)"},
    {CLI_FN, "clients", 0, "LIST", "clients (workers): N, N,M,... or FROM..TO[:STEP]",
     offsetof(sim_cli, o), opt_clients, NULL, 0, NULL},
    {CLI_FN, "workers", 0, "LIST", "same as --clients", offsetof(sim_cli, o), opt_clients, NULL, 0,
     NULL},
    {CLI_FN, "strategies", 0, "LIST",
     "none, fixed, exponential, full, equal, decorrelated,\n"
     "pct, additive, bucket, adaptive (comma-separated)",
     offsetof(sim_cli, o), opt_strategies, NULL, 0, NULL},
    {CLI_FN, "strategy", 0, "LIST", "same as --strategies", offsetof(sim_cli, o), opt_strategies,
     NULL, 0, NULL},
    {CLI_FN, "modes", 0, "LIST", "quota: Retry-After modes exact, honor, cap, ignore",
     offsetof(sim_cli, o), opt_modes, NULL, 0, NULL},
    {CLI_FN, "trials", 0, "N", "repeat with seeds S..S+N-1", F(trials),
     opt_trials, NULL, 0, NULL, NULL, def_trials},
    {CLI_FN, "seed", 0, "S", "first seed", F(seed), opt_seed, NULL, 0, NULL, NULL, def_seed},
    {CLI_FN, "delay", 0, "MEAN[:SD]",
     "every message leg takes |Normal(MEAN, SD)| (herd\n"
     "5ms:0.5ms; quota, storm, load 1ms:0.2ms; contention\n10ms:2ms)",
     F(delay), opt_delay, NULL, 0, NULL},
    {CLI_FN, "server-time", 0, "D",
     "server time per request (herd 1ms; quota, storm, load\n3ms; contention 0; slow-server 50ms;"
     " fleet: from a\nsend to a backlogged process's next request, 20ms)", F(server_us),
     opt_duration, NULL, 0, NULL},
    {CLI_FN, "window", 0, "D",
     "herd: window of max-in-window (10ms); others: window of\nthe peak rate (100ms)", F(window_us),
     opt_positive_duration, NULL, 0, NULL},
    {CLI_FN, "peak-after", 0, "D",
     "count the peak rate from this instant (quota 5s,\nstorm 1s, load 0)", F(peak_after_us),
     opt_duration, NULL, 0, NULL},
    {CLI_FN, "bin", 0, "D", "chart bin width (herd 10ms, others 100ms)", F(bin_us),
     opt_positive_duration, NULL, 0, NULL},
    {CLI_FN, "fail-first", 0, "K", "herd: 429s before each client's 200", F(fail_first),
     opt_fail_first, NULL, 0, NULL, NULL, def_fail_first},
    {CLI_FN, "limit", 0, "R", "server limit, requests/s", F(limit_rps), opt_limit,
     NULL, 0, NULL, NULL, def_limit},
    {CLI_FN, "burst", 0, "N", "server burst (quota, load 100; storm 20; fleet 10)", F(burst),
     opt_burst, NULL,
     0, NULL},
    {CLI_FN, "capacity", 0, "N", "slow-server: requests it handles at once (20)", F(capacity),
     opt_requests, NULL, 0, NULL},
    {CLI_FN, "server-retry-after", 0, "D",
     "Retry-After sent with each 429, 0 = none (quota 5s;\nstorm and load none)", F(retry_after_us),
     opt_duration, NULL, 0, NULL},
    {CLI_FN, "errors", 0, "P", "share of arrivals answered 503 (a fault; default 0)", F(error_rate),
     opt_errors, NULL, 0, NULL},
    {CLI_FN, "requests", 0, "N", "quota: requests per client (10); storm: jobs (2000);\nslow-server: jobs (5000)", F(requests),
     opt_requests, NULL, 0, NULL},
    {CLI_FN, "jobs", 0, "N", "same as --requests", F(requests), opt_requests, NULL, 0, NULL},
    {CLI_FN, "client-share", 0, "X", "bucket: client rate as a share of --limit (0.8)",
     F(client_share), opt_client_share, NULL, 0, NULL},
    {CLI_FN, "client-burst", 0, "N", "bucket: client burst (40)", F(client_burst), opt_burst, NULL,
     0, NULL},
    {CLI_FN, "paced-backoff", 0, "KIND", "backoff of the bucket and adaptive rows (pct)",
     F(paced_backoff), opt_paced_backoff, NULL, 0, NULL,
     .values = "fixed exponential full equal decorrelated additive"},
    {CLI_FN, "budget", 0, "MAX[:RATIO]|on",
     "one shared retry budget (stg_budget; quota/storm/load)", offsetof(sim_cli, o), opt_budget,
     NULL, 0, NULL},
    {CLI_FN, "breaker", 0, "N[:OPEN]|on",
     "one shared circuit breaker, N consecutive failures\n"
     "open it for OPEN (stg_breaker; quota/storm/load)",
     offsetof(sim_cli, o), opt_breaker, NULL, 0, NULL},
    {CLI_FN, "policies", 0, "LIST",
     "fleet: how the shared key decides: fcfs, priority,\nsfq (fcfs,priority)",
     offsetof(sim_cli, o.fleet), opt_policies, NULL, 0, NULL},
    {CLI_FN, "mix", 0, "I:N:B",
     "fleet: shares of the processes in the classes\ninteractive, normal, batch (0.1:0.3:0.6)",
     FL(mix), opt_mix, NULL, 0, NULL},
    {CLI_FN, "offered", 0, "I:N:B",
     "fleet: each class's demand, Poisson at a share of\n--limit, or max: backlogged "
     "(0.2:max:max)",
     FL(offered), opt_offered, NULL, 0, NULL},
    {CLI_FN, "tenants", 0, "NAME[:W[:SHARE]],...",
     "fleet: tenants, weights and shares of each class's\nprocesses (a:1:0.6,b:1:0.3,c:2:0.1)",
     offsetof(sim_cli, o.fleet), opt_tenants, NULL, 0, NULL},
    {CLI_FN, "redis-delay", 0, "MEAN[:SD]",
     "fleet: each leg to and from Redis takes\n|Normal(MEAN, SD)| (0.5ms:0.1ms)", FL(redis_leg),
     opt_delay, NULL, 0, NULL},
    {CLI_FN, "redis-op", 0, "D", "fleet: Redis's time per script call; calls queue\n(25us)",
     FL(redis_op_us), opt_duration, NULL, 0, NULL},
    {CLI_FN, "lease", 0, "D", "fleet: --limiter-lease of every process (40ms)", FL(lease_us),
     opt_positive_duration, NULL, 0, NULL},
    {CLI_FN, "duration", 0, "D", "fleet: virtual time measured (20s)", FL(duration_us),
     opt_positive_duration, NULL, 0, NULL},
    {CLI_FN, "max-wait", 0, "D", "fleet: how far ahead a request may reserve (50ms)",
     FL(max_wait_us), opt_duration, NULL, 0, NULL},
    {CLI_FN, "floor", 0, "X", "fleet (priority, sfq): the batch class's minimum\nshare (0.05)",
     FL(floor), opt_floor, NULL, 0, NULL},
    {CLI_FN, "hold", 0, "D",
     "fleet (priority, sfq): how long a call marks its class\nand tenant as waiting (0: the "
     "limiter's, 80ms here)",
     FL(hold_us), opt_duration, NULL, 0, NULL},
    {CLI_FLAG, "json", 0, NULL, "one JSON object per row on stdout instead of the table",
     offsetof(sim_cli, json), NULL, NULL, 0, NULL},
    {CLI_STRING, "csv", 0, "FILE", "also write the rows as CSV", offsetof(sim_cli, csv), NULL, NULL,
     0, NULL},
    {CLI_STRING, "svg", 0, "FILE",
     "also write a chart: arrivals over time per strategy\n"
     "(herd, quota, storm, load), calls and completion\ntime against clients (contention), "
     "fairness, waits\nand Redis load against processes (fleet)",
     offsetof(sim_cli, svg), NULL, NULL, 0, NULL},
    CLI_OPT_HELP_ENTRY,
    CLI_OPT_VERSION_ENTRY,
    {.kind = CLI_HEADING,
     .help = "Retry policy (applied to every strategy; the strategy sets the backoff kind)"},
    {.kind = CLI_GROUP, .group = cli_policy_opts, .off = F(policy), .man = "stagger-plan(1)",
     .flags = CLI_OPT_NO_DEFAULTS}, /* the scenario's policy (sim_opts_default) */
    {CLI_FN, "preset", 0, "NAME", NULL, 0, opt_not_here, NULL, CLI_OPT_HIDDEN, NULL},
    {CLI_FN, "backoff", 0, "KIND", NULL, 0, opt_not_here, NULL, CLI_OPT_HIDDEN, NULL},
    {.kind = CLI_TEXT, .help = cli_durations_help},
    CLI_OPT_END,
};
#undef F
#undef FL

static const int sim_exits[] = {CLI_EXIT_OK, CLI_EXIT_FAILED, CLI_EXIT_USAGE, -1};

const cli_command cli_sim_command = {
    .name = CMD,
    .usage = "usage: stagger sim SCENARIO [options]\n"
             "       stagger sim --help\n"
             "\n"
             "Run many clients against a modelled server in virtual time (nothing sleeps) and\n"
             "compare retry strategies. Every wait, decision and limiter is libstagger's own\n"
             "(stg_decide, backoff, bucket, adaptive rate, budget, breaker). The same --seed\n"
             "gives the same output; --trials N repeats with seeds S, S+1, ... and reports\n"
             "means (and the standard deviation).\n"
             "\n"
             "Scenarios:\n"
             "  herd        N clients (--clients, 20) start together; the server answers each\n"
             "              client's first K attempts (--fail-first, 4) with 429, then 200;\n"
             "              base 200 ms, 5 retries, deadline 15 s. Compares fixed, exponential\n"
             "              (no jitter), equal, full and decorrelated jitter: span of each\n"
             "              retry round (first to last arrival), most retries in any\n"
             "              --window (10 ms), time until every client has finished, calls.\n"
             "  quota       100 clients x 10 requests (--requests) share a server limited to\n"
             "              100/s (burst 100) that answers 429 with Retry-After: 5. Compares\n"
             "              Retry-After honoured exactly, honoured with spread (the default)\n"
             "              and used as a cap (--modes): peak arrivals/s after t = 5 s, calls,\n"
             "              429s, retries earlier than asked, time to drain.\n"
             "  storm       2000 jobs (--jobs) worked by 50 and 30 workers (--clients) against\n"
             "              100/s (burst 20): fixed 1 s sleep vs exponential +-20% jitter\n"
             "              (pct) vs a shared client token bucket at 80% of the limit (bucket)\n"
             "              vs the adaptive rate, not told the limit (adaptive); 6 retries.\n"
             "              Peak offered load, completion time / ideal, calls, 429s, failed.\n"
             "  load        1000 concurrent requests against 100/s (burst 100), deadline\n"
             "              10 s each, 5 retries, base 1 s: fixed 1000 ms, exponential,\n"
             "              full, equal, decorrelated, pct, additive. Mean and p99 latency\n"
             "              of successes, success rate within the deadline, calls, 429s.\n"
             "  contention  The AWS blog \"Exponential Backoff and Jitter\" (2015) model: N\n"
             "              clients (10..150:10) each make one optimistic-concurrency write to\n"
             "              one row; legs |N(10 ms, 2 ms)|; base 5 ms, cap 2 s; none,\n"
             "              exponential, full, equal, decorrelated; 100 trials per point.\n"
             "              Mean calls (writes) and completion time per strategy and N.\n"
             "  slow-server 5000 jobs (--jobs) against a server that handles 20 at once\n"
             "              (--capacity), 50 ms each (--server-time), and queues the rest:\n"
             "              fixed 200 in flight (--clients) vs the learned concurrency\n"
             "              (adaptive, at most --clients). p50 and p99 latency, req/s, the\n"
             "              limit and where it settled, most requests at the server.\n",
    .opts = sim_table,
    .epilogue = "JSON fields: scenario, strategy, retry_after (quota), clients, trials, seed,\n"
                "window_ms, then the scenario's figures: calls, total_ms, failed, and\n"
                "max_in_window + round_spans_ms (herd), peak_rps, throttled, early (quota),\n"
                "peak_rps, ratio, throttled (storm), mean_ms, p99_ms, success_rate, throttled\n"
                "(load), p50_ms, p99_ms, throughput_rps, limit, limit_mean, max_at_server\n"
                "(slow-server); fleet rows have policy instead of strategy and admitted_rps,\n"
                "bound_excess, interactive_rps, normal_rps, batch_rps, jain_interactive,\n"
                "jain_normal, jain_batch, interactive_p50_ms, interactive_p99_ms, redis_ops_s,\n"
                "redis_busy, lapsed, refused, classes (per tenant: weight, processes,\n"
                "admitted_rps); with --trials > 1 each figure KEY also has KEY_sd.\n"
                "1 means a file could not be written.\n",
    .exits = sim_exits,
};

int cli_sim_main(int argc, char **argv)
{
    if (argc < 2) {
        return cli_usage_error(CMD, "missing scenario: herd, quota, storm, load, contention, "
                                    "slow-server or fleet "
                                    "(see stagger sim --help)");
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        cli_help(&cli_sim_command, stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) { /* as every command */
        printf("stagger %s\n", stg_version());
        return 0;
    }
    int sc = sim_scenario_parse(argv[1]);
    if (sc < 0)
        return cli_usage_error(CMD,
                               "unknown scenario '%s': expected herd, quota, storm, load, "
                               "contention, slow-server or fleet",
                               argv[1]);
    sim_cli c;
    memset(&c, 0, sizeof c);
    sim_opts_default(&c.o, (sim_scenario)sc);
    cli_parser parser = {.cmd = &cli_sim_command, .ctx = &c};
    int prc = cli_parse(&parser, argc - 1, argv + 1);
    if (prc >= 0)
        return prc;
    sim_opts o = c.o;
    bool json = c.json;
    const char *csv = c.csv, *svg = c.svg;
    const char *why = sim_opts_check(&o);
    if (why)
        return cli_usage_error(CMD, "%s", why);
    if (cli_defaults_probe()) { /* help --defaults sim SCENARIO: what the run would use */
        const cli_command *cc = &cli_sim_command;
        defaults_scenario = sc; /* the rows compare with this scenario's defaults */
        cli_defaults_row(cc, "trials", CLI_VAL_INT, (long long)o.trials);
        cli_defaults_row(cc, "seed", CLI_VAL_INT, (long long)o.seed);
        cli_defaults_row(cc, "limit", CLI_VAL_DOUBLE, o.limit_rps);
        if (sc == SIM_HERD)
            cli_defaults_row(cc, "fail-first", CLI_VAL_INT, (long long)o.fail_first);
        defaults_scenario = -1;
        return CLI_EXIT_OK;
    }
    if ((o.use_budget || o.use_breaker) &&
        (o.scenario == SIM_HERD || o.scenario == SIM_CONTENTION || o.scenario == SIM_FLEET))
        return cli_usage_error(CMD, "--budget and --breaker apply to quota, storm and load");

    sim_results r;
    int rc = sim_run(&o, &r);
    if (rc != STG_OK) {
        fprintf(stderr, "stagger sim: %s\n", stg_strerror(rc));
        return 1;
    }
    int status = 0;
    if (json ? sim_write_json(stdout, &r) : sim_print_table(stdout, &r))
        status = 1;
    if (csv && write_file(csv, &r, sim_write_csv))
        status = 1;
    if (svg && write_file(svg, &r, sim_write_svg))
        status = 1;
    if (fflush(stdout) != 0)
        status = 1;
    sim_results_free(&r);
    return status;
}

#endif /* STG_HAVE_SIM */
