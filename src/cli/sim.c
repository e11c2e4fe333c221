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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "sim/sim.h"

#define CMD "sim"

static void help(void)
{
    printf(
        "usage: stagger sim SCENARIO [options]\n"
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
        "              100/s (burst 20): fixed 1 s sleep vs exponential +-20%% jitter\n"
        "              (pct) vs a shared client token bucket at 80%% of the limit (bucket)\n"
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
        "\n"
        "Options (defaults depend on the scenario; see stagger-sim(1) and docs/sim.md):\n"
        "  --clients LIST         clients (workers): N, N,M,... or FROM..TO[:STEP]\n"
        "  --strategies LIST      none, fixed, exponential, full, equal, decorrelated,\n"
        "                         pct, additive, bucket, adaptive (comma-separated)\n"
        "  --modes LIST           quota: Retry-After modes exact, honor, cap, ignore\n"
        "  --trials N             repeat with seeds S..S+N-1 (default 1; contention 100)\n"
        "  --seed S               first seed (default 1)\n"
        "  --delay MEAN[:SD]      every message leg takes |Normal(MEAN, SD)| (herd\n"
        "                         5ms:0.5ms; quota, storm, load 1ms:0.2ms; contention\n"
        "                         10ms:2ms)\n"
        "  --server-time D        server time per request (herd 1ms; quota, storm, load\n"
        "                         3ms; contention 0)\n"
        "  --window D             herd: window of max-in-window (10ms); others: window of\n"
        "                         the peak rate (100ms)\n"
        "  --peak-after D         count the peak rate from this instant (quota 5s,\n"
        "                         storm 1s, load 0)\n"
        "  --bin D                chart bin width (herd 10ms, others 100ms)\n"
        "  --fail-first K         herd: 429s before each client's 200 (default 4)\n"
        "  --limit R              server limit, requests/s (default 100)\n"
        "  --burst N              server burst (quota, load 100; storm 20)\n"
        "  --server-retry-after D Retry-After sent with each 429, 0 = none (quota 5s;\n"
        "                         storm and load none)\n"
        "  --errors P             share of arrivals answered 503 (a fault; default 0)\n"
        "  --requests N           quota: requests per client (10); storm: jobs (2000)\n"
        "  --jobs N               same as --requests\n"
        "  --client-share X       bucket: client rate as a share of --limit (0.8)\n"
        "  --client-burst N       bucket: client burst (40)\n"
        "  --paced-backoff KIND   backoff of the bucket and adaptive rows (pct)\n"
        "  --budget MAX:RATIO|on  one shared retry budget (stg_budget; quota/storm/load)\n"
        "  --breaker N:OPEN|on    one shared circuit breaker, N consecutive failures\n"
        "                         open it for OPEN (stg_breaker; quota/storm/load)\n"
        "  --json                 one JSON object per row on stdout instead of the table\n"
        "  --csv FILE             also write the rows as CSV\n"
        "  --svg FILE             also write a chart: arrivals over time per strategy\n"
        "                         (herd, quota, storm, load) or calls and completion\n"
        "                         time against clients (contention)\n"
        "\n"
        "Retry policy (applied to every strategy; the strategy sets the backoff kind):\n"
        "  --base D, --cap D, --mult X, --retries N, --deadline D (0 = none),\n"
        "  --max-server-wait D, --retry-after MODE, --spread X, --retry-on LIST\n"
        "Durations take us, ms, s, m or h suffixes; a bare number is milliseconds.\n"
        "\n"
        "JSON fields: scenario, strategy, retry_after (quota), clients, trials, seed,\n"
        "window_ms, then the scenario's figures: calls, total_ms, failed, and\n"
        "max_in_window + round_spans_ms (herd), peak_rps, throttled, early (quota),\n"
        "peak_rps, ratio, throttled (storm), mean_ms, p99_ms, success_rate, throttled\n"
        "(load); with --trials > 1 each figure KEY also has KEY_sd.\n"
        "\n"
        "Exit status: 0 on success, 1 when a file cannot be written, 2 on bad usage.\n");
}

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

static bool is_policy_flag(const char *opt)
{
    static const char *const flags[] = {"--base", "--cap", "--mult", "--retries", "--deadline",
                                        "--max-server-wait", "--retry-after", "--spread",
                                        "--retry-on"};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (!strcmp(opt, flags[i]))
            return true;
    return false;
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

int cli_sim_main(int argc, char **argv)
{
    if (argc < 2) {
        return cli_usage_error(CMD, "missing scenario: herd, quota, storm, load or contention "
                                    "(see stagger sim --help)");
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        help();
        return 0;
    }
    int sc = sim_scenario_parse(argv[1]);
    if (sc < 0)
        return cli_usage_error(CMD, "unknown scenario '%s': expected herd, quota, storm, load "
                                    "or contention", argv[1]);
    sim_opts o;
    sim_opts_default(&o, (sim_scenario)sc);
    bool json = false;
    const char *csv = NULL, *svg = NULL;

    cli_args a;
    cli_args_init(&a, argc - 1, argv + 1);
    const char *opt;
    while (cli_args_next(&a, &opt)) {
        if (a.name[0] == '\0')
            return cli_usage_error(CMD, "unexpected argument '%s'", opt);
        if (!strcmp(opt, "--help") || !strcmp(opt, "-h")) {
            help();
            return 0;
        }
        if (!strcmp(opt, "--json")) {
            json = true;
            continue;
        }
        if (!strcmp(opt, "--preset") || !strcmp(opt, "--backoff"))
            return cli_usage_error(CMD, "%s does not apply: choose backoffs with --strategies",
                                   opt);
        const char *v = cli_args_value(&a);
        if (!v)
            return cli_missing_value(CMD, opt);
        long long n;
        double x;
        int64_t d;
        char p1[64], p2[64];
        if (is_policy_flag(opt)) {
            if (cli_policy_option(CMD, &o.policy, opt, v) < 0)
                return CLI_EXIT_USAGE;
        } else if (!strcmp(opt, "--clients") || !strcmp(opt, "--workers")) {
            if (parse_clients(v, &o) != 0)
                return cli_usage_error(CMD, "bad value '%s' for %s: expected N, N,M,... or "
                                            "FROM..TO[:STEP] (at most 64 points)", v, opt);
        } else if (!strcmp(opt, "--strategies") || !strcmp(opt, "--strategy")) {
            if (parse_strategies(v, &o) != 0)
                return cli_usage_error(CMD, "bad value '%s' for %s: expected names among none, "
                                            "fixed, exponential, full, equal, decorrelated, pct, "
                                            "additive, bucket, adaptive", v, opt);
        } else if (!strcmp(opt, "--modes")) {
            if (parse_modes(v, &o) != 0)
                return cli_usage_error(CMD, "bad value '%s' for --modes: expected exact, honor, "
                                            "cap, ignore (at most 4)", v);
        } else if (!strcmp(opt, "--trials")) {
            if (!cli_parse_int(v, 1, 1000000, &n))
                return cli_usage_error(CMD, "bad value '%s' for --trials: expected 1..1000000", v);
            o.trials = (int)n;
        } else if (!strcmp(opt, "--seed")) {
            if (!cli_parse_int(v, 0, INT64_MAX, &n))
                return cli_usage_error(CMD, "bad value '%s' for --seed: expected a whole number "
                                            "from 0", v);
            o.seed = (uint64_t)n;
        } else if (!strcmp(opt, "--delay")) {
            int64_t m, sd = 0;
            if (!split_pair(v, p1, sizeof p1, p2, sizeof p2) || !cli_parse_duration(p1, &m) ||
                (p2[0] && !cli_parse_duration(p2, &sd)))
                return cli_usage_error(CMD, "bad value '%s' for --delay: expected MEAN[:SD], "
                                            "e.g. 5ms:0.5ms", v);
            o.delay.mean_us = m;
            o.delay.sd_us = sd;
        } else if (!strcmp(opt, "--server-time")) {
            if (!cli_parse_duration(v, &d))
                return cli_usage_error(CMD, "bad value '%s' for --server-time: expected a "
                                            "duration such as 1ms", v);
            o.server_us = d;
        } else if (!strcmp(opt, "--window") || !strcmp(opt, "--bin") ||
                   !strcmp(opt, "--peak-after")) {
            if (!cli_parse_duration(v, &d) || (d == 0 && strcmp(opt, "--peak-after")))
                return cli_usage_error(CMD, "bad value '%s' for %s: expected a positive "
                                            "duration such as 10ms", v, opt);
            if (!strcmp(opt, "--window"))
                o.window_us = d;
            else if (!strcmp(opt, "--bin"))
                o.bin_us = d;
            else
                o.peak_after_us = d;
        } else if (!strcmp(opt, "--fail-first")) {
            if (!cli_parse_int(v, 0, SIM_MAX_ROUNDS - 2, &n))
                return cli_usage_error(CMD, "bad value '%s' for --fail-first: expected 0..30", v);
            o.fail_first = (int)n;
        } else if (!strcmp(opt, "--limit")) {
            if (!cli_parse_double(v, 0.001, 1e6, &x))
                return cli_usage_error(CMD, "bad value '%s' for --limit: expected requests/s "
                                            "in 0.001..1000000", v);
            o.limit_rps = x;
        } else if (!strcmp(opt, "--burst") || !strcmp(opt, "--client-burst")) {
            if (!cli_parse_int(v, 1, 1000000, &n))
                return cli_usage_error(CMD, "bad value '%s' for %s: expected 1..1000000", v, opt);
            if (!strcmp(opt, "--burst"))
                o.burst = n;
            else
                o.client_burst = n;
        } else if (!strcmp(opt, "--server-retry-after")) {
            if (!cli_parse_duration(v, &d))
                return cli_usage_error(CMD, "bad value '%s' for --server-retry-after: expected "
                                            "a duration such as 5s (0 = none)", v);
            o.retry_after_us = d;
        } else if (!strcmp(opt, "--errors")) {
            if (!cli_parse_double(v, 0, 1, &x))
                return cli_usage_error(CMD, "bad value '%s' for --errors: expected a share "
                                            "from 0 to 1", v);
            o.error_rate = x;
        } else if (!strcmp(opt, "--requests") || !strcmp(opt, "--jobs")) {
            if (!cli_parse_int(v, 1, 100000000, &n))
                return cli_usage_error(CMD, "bad value '%s' for %s: expected 1..100000000", v,
                                       opt);
            o.requests = (int)n;
        } else if (!strcmp(opt, "--client-share")) {
            if (!cli_parse_double(v, 0.001, 100, &x))
                return cli_usage_error(CMD, "bad value '%s' for --client-share: expected a "
                                            "share such as 0.8", v);
            o.client_share = x;
        } else if (!strcmp(opt, "--paced-backoff")) {
            int k = sim_strategy_parse(v);
            if (k < 0 || k == SIM_BUCKET || k == SIM_ADAPTIVE)
                return cli_usage_error(CMD, "bad value '%s' for --paced-backoff: expected a "
                                            "backoff such as pct or full", v);
            o.paced_backoff = (sim_strategy)k;
        } else if (!strcmp(opt, "--budget")) {
            o.use_budget = true;
            memset(&o.budget, 0, sizeof o.budget);
            if (strcmp(v, "on")) {
                if (!split_pair(v, p1, sizeof p1, p2, sizeof p2) ||
                    !cli_parse_double(p1, 0.001, 1e6, &o.budget.max_tokens) ||
                    (p2[0] && !cli_parse_double(p2, 0.001, 1e6, &o.budget.token_ratio)))
                    return cli_usage_error(CMD, "bad value '%s' for --budget: expected "
                                                "MAX[:RATIO] such as 10:0.1, or on", v);
            }
        } else if (!strcmp(opt, "--breaker")) {
            o.use_breaker = true;
            memset(&o.breaker, 0, sizeof o.breaker);
            if (strcmp(v, "on")) {
                int64_t open = 0;
                if (!split_pair(v, p1, sizeof p1, p2, sizeof p2) ||
                    !cli_parse_int(p1, 1, 1000000, &n) ||
                    (p2[0] && (!cli_parse_duration(p2, &open) || open == 0)))
                    return cli_usage_error(CMD, "bad value '%s' for --breaker: expected "
                                                "N[:OPEN] such as 20:30s, or on", v);
                o.breaker.consecutive_failures = (int)n;
                o.breaker.open_us = open;
            }
        } else if (!strcmp(opt, "--csv")) {
            csv = v;
        } else if (!strcmp(opt, "--svg")) {
            svg = v;
        } else {
            return cli_usage_error(CMD, "unknown option %s (see stagger sim --help)", opt);
        }
    }
    const char *why = sim_opts_check(&o);
    if (why)
        return cli_usage_error(CMD, "%s", why);
    if ((o.use_budget || o.use_breaker) && (o.scenario == SIM_HERD || o.scenario == SIM_CONTENTION))
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
