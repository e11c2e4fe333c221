/*
 * `stagger serve`: run the rate-limited HTTP/1.1 test server (src/server)
 * until SIGINT or SIGTERM.
 *
 * Invariants: the first line on stdout is "listening on http://ADDR:PORT"
 * and is flushed at once (tests and scripts read the port from it); SIGINT
 * and SIGTERM are blocked in every thread and taken synchronously by the
 * main thread with sigwait, so shutdown runs in normal context (no work in
 * a signal handler); a clean stop exits 0 with the stats file written; bad
 * usage prints one line and exits 2; a server that cannot start exits 1.
 */
#ifdef STG_HAVE_SERVER

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/resource.h>

#include "cli/cli.h"
#include "server/server.h"

#define CMD "serve"

static void help(void)
{
    printf(
        "usage: stagger serve [options]\n"
        "\n"
        "A rate-limited HTTP/1.1 test server for retry clients. Prints\n"
        "\"listening on http://ADDR:PORT\" as its first line, serves until SIGINT or\n"
        "SIGTERM, then writes --stats and exits 0. Replies are never stalled (TCP_NODELAY,\n"
        "epoll threads, keep-alive) unless a fault below says so.\n"
        "\n"
        "Listening:\n"
        "  --bind ADDR            numeric IPv4/IPv6 address (default 127.0.0.1)\n"
        "  --port N               TCP port, 0 picks a free one (default 0)\n"
        "  --threads N            epoll worker threads, 1..64 (default: CPUs, max 16)\n"
        "\n"
        "Global limit (libstagger's GCRA token bucket; no --rate: no limit):\n"
        "  --rate R               requests per second, > 0 (fractions allowed)\n"
        "  --burst B              bucket capacity (default max(1, ceil(R)))\n"
        "  --limit-status S       status of refusals: 429 or 503 (default 429)\n"
        "  --retry-after MODE     seconds | date | none (default seconds): delta-seconds\n"
        "                         (the wait rounded up, at least 1), an IMF-fixdate of\n"
        "                         now + wait, or no Retry-After; applies to every refusal\n"
        "  --ratelimit-headers    add X-RateLimit-Limit/-Remaining/-Reset, RateLimit and\n"
        "                         RateLimit-Policy (window 1 s) to limiter answers\n"
        "\n"
        "Per-client refusals:\n"
        "  --fail-first K         429 for the first K requests of each client (by\n"
        "                         X-Client-Id, else by path), then normal handling\n"
        "  --fail-retry-after N   Retry-After of those 429s in seconds (default 1)\n"
        "\n"
        "Faults (deterministic for a given --seed and request order):\n"
        "  --outage START+DUR     503 + Retry-After (rest of the outage) from START to\n"
        "                         START+DUR after server start, e.g. 10s+5s; repeatable\n"
        "  --reset-prob P         close the connection without an answer (probability)\n"
        "  --reset-every N        ... for every Nth request\n"
        "  --hang-prob P          never answer, until the client leaves or the server\n"
        "                         stops (probability)\n"
        "  --hang-every N         ... for every Nth request\n"
        "  --slow-body-prob P     trickle the body of an admitted answer (probability)\n"
        "  --slow-body-every N    ... for every Nth request\n"
        "  --slow-body-ms N       time a slow body takes, in ms (default 1000)\n"
        "  --seed S               seed of the fault generator (default 1)\n"
        "\n"
        "Output:\n"
        "  --log FILE             one line per request: arrival µs since start, client,\n"
        "                         method, path, status or reset/hang/aborted, key\n"
        "  --log-format F         jsonl | csv (default jsonl; csv has a header line)\n"
        "  --stats FILE           write the stats JSON (as GET /__stats) at exit\n"
        "  --max-body BYTES       larger request bodies get 413 (default 1048576)\n"
        "\n"
        "Endpoints: /status/CODE (that status, 100..599; ?retry_after=N adds\n"
        "Retry-After), /echo (the request as JSON), /__stats (counters; not counted,\n"
        "not limited), anything else: 200 {\"path\":...,\"ok\":true}. A POST or PATCH\n"
        "repeated with the same Idempotency-Key gets the first answer again; one\n"
        "repeated without a key is counted in duplicates_without_key.\n"
        "\n"
        "Exit status: 0 after SIGINT/SIGTERM, 1 if the server cannot start (or the\n"
        "stats file cannot be written), 2 on bad usage. See stagger-serve(1).\n");
}

static int bad(const char *opt, const char *val, const char *expected)
{
    return cli_usage_error(CMD, "bad value '%s' for %s: expected %s", val, opt, expected);
}

static bool parse_outage(const char *val, stg_srv_outage *o)
{
    const char *plus = strchr(val, '+');
    if (!plus || plus == val)
        return false;
    char start[64];
    size_t n = (size_t)(plus - val);
    if (n >= sizeof start)
        return false;
    memcpy(start, val, n);
    start[n] = '\0';
    return cli_parse_duration(start, &o->start_us) &&
           cli_parse_duration(plus + 1, &o->duration_us) && o->duration_us > 0;
}

/* Raise the soft descriptor limit to the hard one: many client connections. */
static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

int cli_serve_main(int argc, char **argv)
{
    stg_srv_config cfg;
    stg_srv_config_init(&cfg);
    bool burst_set = false;

    cli_args a;
    cli_args_init(&a, argc, argv);
    const char *opt;
    while (cli_args_next(&a, &opt)) {
        if (!a.name[0])
            return cli_usage_error(CMD, "unexpected argument '%s'", opt);
        if (!strcmp(opt, "-h") || !strcmp(opt, "--help")) {
            help();
            return 0;
        }
        if (!strcmp(opt, "--ratelimit-headers")) {
            cfg.ratelimit_headers = true;
            continue;
        }
        const char *val = cli_args_value(&a);
        if (!val)
            return cli_missing_value(CMD, opt);
        long long n = 0;
        double d = 0;
        if (!strcmp(opt, "--bind")) {
            cfg.bind = val;
        } else if (!strcmp(opt, "--port")) {
            if (!cli_parse_int(val, 0, 65535, &n))
                return bad(opt, val, "0..65535");
            cfg.port = (unsigned)n;
        } else if (!strcmp(opt, "--threads")) {
            if (!cli_parse_int(val, 1, 64, &n))
                return bad(opt, val, "1..64");
            cfg.threads = (unsigned)n;
        } else if (!strcmp(opt, "--rate")) {
            if (!cli_parse_double(val, 0, 1e9, &d) || d <= 0)
                return bad(opt, val, "a number of requests per second in (0, 1e9]");
            cfg.rate = d;
        } else if (!strcmp(opt, "--burst")) {
            if (!cli_parse_int(val, 1, 1000000000, &n))
                return bad(opt, val, "1..1000000000");
            cfg.burst = n;
            burst_set = true;
        } else if (!strcmp(opt, "--limit-status")) {
            if (!strcmp(val, "429"))
                cfg.limit_status = 429;
            else if (!strcmp(val, "503"))
                cfg.limit_status = 503;
            else
                return bad(opt, val, "429 or 503");
        } else if (!strcmp(opt, "--retry-after")) {
            if (!strcmp(val, "seconds"))
                cfg.retry_after = STG_SRV_RA_SECONDS;
            else if (!strcmp(val, "date"))
                cfg.retry_after = STG_SRV_RA_DATE;
            else if (!strcmp(val, "none"))
                cfg.retry_after = STG_SRV_RA_NONE;
            else
                return bad(opt, val, "seconds, date or none");
        } else if (!strcmp(opt, "--fail-first")) {
            if (!cli_parse_int(val, 0, 1000000, &n))
                return bad(opt, val, "0..1000000");
            cfg.fail_first = n;
        } else if (!strcmp(opt, "--fail-retry-after")) {
            if (!cli_parse_int(val, 0, 86400, &n))
                return bad(opt, val, "0..86400 seconds");
            cfg.fail_retry_after_s = n;
        } else if (!strcmp(opt, "--outage")) {
            if (cfg.n_outages == STG_SRV_MAX_OUTAGES)
                return cli_usage_error(CMD, "at most %d --outage windows",
                                       STG_SRV_MAX_OUTAGES);
            if (!parse_outage(val, &cfg.outages[cfg.n_outages]))
                return bad(opt, val, "START+DURATION, e.g. 10s+5s");
            cfg.n_outages++;
        } else if (!strcmp(opt, "--reset-prob") || !strcmp(opt, "--hang-prob") ||
                   !strcmp(opt, "--slow-body-prob")) {
            if (!cli_parse_double(val, 0, 1, &d))
                return bad(opt, val, "a probability in [0, 1]");
            *(opt[2] == 'r' ? &cfg.reset_prob : opt[2] == 'h' ? &cfg.hang_prob : &cfg.slow_prob) = d;
        } else if (!strcmp(opt, "--reset-every") || !strcmp(opt, "--hang-every") ||
                   !strcmp(opt, "--slow-body-every")) {
            if (!cli_parse_int(val, 0, 1000000000, &n))
                return bad(opt, val, "0..1000000000 (0: off)");
            *(opt[2] == 'r' ? &cfg.reset_every : opt[2] == 'h' ? &cfg.hang_every : &cfg.slow_every) = n;
        } else if (!strcmp(opt, "--slow-body-ms")) {
            if (!cli_parse_int(val, 0, 3600000, &n))
                return bad(opt, val, "0..3600000 ms");
            cfg.slow_body_us = n * 1000;
        } else if (!strcmp(opt, "--seed")) {
            if (!cli_parse_int(val, 0, 0x7fffffffffffffffLL, &n))
                return bad(opt, val, "a non-negative integer");
            cfg.seed = (uint64_t)n;
        } else if (!strcmp(opt, "--log")) {
            cfg.log_path = val;
        } else if (!strcmp(opt, "--log-format")) {
            if (!strcmp(val, "jsonl"))
                cfg.log_format = STG_SRV_LOG_JSONL;
            else if (!strcmp(val, "csv"))
                cfg.log_format = STG_SRV_LOG_CSV;
            else
                return bad(opt, val, "jsonl or csv");
        } else if (!strcmp(opt, "--stats")) {
            cfg.stats_path = val;
        } else if (!strcmp(opt, "--max-body")) {
            if (!cli_parse_int(val, 0, 1LL << 30, &n))
                return bad(opt, val, "0..1073741824 bytes");
            cfg.max_body = (size_t)n;
        } else {
            return cli_usage_error(CMD, "unknown option '%s' (see stagger serve --help)", opt);
        }
    }
    if (burst_set && cfg.rate <= 0)
        return cli_usage_error(CMD, "--burst needs --rate");
    if (cfg.ratelimit_headers && cfg.rate <= 0)
        return cli_usage_error(CMD, "--ratelimit-headers needs --rate");

    /* Block the stop signals before any thread exists, so every server
     * thread inherits the mask and only sigwait below sees them. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);
    raise_nofile();

    char err[256] = "";
    stg_srv *srv = stg_srv_start(&cfg, err, sizeof err);
    if (!srv) {
        fprintf(stderr, "stagger serve: %s\n", err);
        return 1;
    }
    bool v6 = strchr(cfg.bind, ':') != NULL;
    printf("listening on http://%s%s%s:%u\n", v6 ? "[" : "", cfg.bind, v6 ? "]" : "",
           stg_srv_port(srv));
    fflush(stdout);

    int sig = 0;
    while (sigwait(&stop, &sig) != 0)
        ;
    return stg_srv_stop(srv) == 0 ? 0 : 1;
}

#endif
