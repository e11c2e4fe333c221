/*
 * `stagger serve`: run the rate-limited HTTP/1.1 test server (src/server)
 * until SIGINT or SIGTERM.
 *
 * Invariants: the first line on stdout is "listening on http://ADDR:PORT"
 * ("https://" with --tls-cert) and is flushed at once (tests and scripts read the port from it); SIGINT
 * and SIGTERM are blocked in every thread and taken synchronously by the
 * main thread with sigwait, so shutdown runs in normal context (no work in
 * a signal handler); a clean stop exits 0 with the stats file written; bad
 * usage prints one line and exits 2; a server that cannot start exits 1.
 */
#ifdef STG_HAVE_SERVER

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/resource.h>

#include "cli/cli.h"
#include "server/dialect.h"
#include "server/server.h"

#define CMD "serve"

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

typedef struct serve_opts {
    stg_srv_config cfg;
    bool burst_set;
} serve_opts;

/* An integer option in [lo, hi] into an int64_t field. */
static int int_in(cli_parser *p, const char *val, long long lo, long long hi, const char *what,
                  long long *n)
{
    if (!cli_parse_int(val, lo, hi, n))
        return cli_opt_bad(p, val, what);
    return 0;
}

static int opt_port(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    long long n;
    int rc = int_in(p, val, 0, 65535, "expected 0..65535", &n);
    if (!rc)
        *(unsigned *)field = (unsigned)n;
    return rc;
}

static int opt_threads(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    long long n;
    int rc = int_in(p, val, 1, 64, "expected 1..64", &n);
    if (!rc)
        *(unsigned *)field = (unsigned)n;
    return rc;
}

static int opt_rate(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    double d;
    if (!cli_parse_double(val, 0, 1e9, &d) || d <= 0)
        return cli_opt_bad(p, val, "expected a number of requests per second in (0, 1e9]");
    *(double *)field = d;
    return 0;
}

static int opt_burst(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    serve_opts *so = field;
    long long n;
    int rc = int_in(p, val, 1, 1000000000, "expected 1..1000000000", &n);
    if (!rc) {
        so->cfg.burst = n;
        so->burst_set = true;
    }
    return rc;
}

static int opt_limit_status(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    unsigned *st = field;
    if (!strcmp(val, "429"))
        *st = 429;
    else if (!strcmp(val, "503"))
        *st = 503;
    else
        return cli_opt_bad(p, val, "expected 429 or 503");
    return 0;
}

static int opt_retry_after(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    stg_srv_config *c = field;
    if (!strcmp(val, "seconds"))
        c->retry_after = STG_SRV_RA_SECONDS;
    else if (!strcmp(val, "date"))
        c->retry_after = STG_SRV_RA_DATE;
    else if (!strcmp(val, "none"))
        c->retry_after = STG_SRV_RA_NONE;
    else
        return cli_opt_bad(p, val, "expected seconds, date or none");
    return 0;
}

static int opt_fail_first(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    long long n;
    int rc = int_in(p, val, 0, 1000000, "expected 0..1000000", &n);
    if (!rc)
        *(int64_t *)field = n;
    return rc;
}

static int opt_fail_retry_after(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    long long n;
    int rc = int_in(p, val, 0, 86400, "expected 0..86400 seconds", &n);
    if (!rc)
        *(int64_t *)field = n;
    return rc;
}

static int opt_outage(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    stg_srv_config *c = field;
    if (c->n_outages == STG_SRV_MAX_OUTAGES)
        return cli_usage_error(CMD, "at most %d --outage windows", STG_SRV_MAX_OUTAGES);
    if (!parse_outage(val, &c->outages[c->n_outages]))
        return cli_opt_bad(p, val, "expected START+DURATION, e.g. 10s+5s");
    c->n_outages++;
    return 0;
}

static int opt_prob(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    double d;
    if (!cli_parse_double(val, 0, 1, &d))
        return cli_opt_bad(p, val, "expected a probability in [0, 1]");
    *(double *)field = d;
    return 0;
}

static int opt_every(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    long long n;
    int rc = int_in(p, val, 0, 1000000000, "expected 0..1000000000 (0: off)", &n);
    if (!rc)
        *(int64_t *)field = n;
    return rc;
}

static int opt_slow_ms(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    long long n;
    int rc = int_in(p, val, 0, 3600000, "expected 0..3600000 ms", &n);
    if (!rc)
        *(int64_t *)field = n * 1000;
    return rc;
}

static int opt_latency(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    int64_t d;
    if (!cli_parse_duration(val, &d) || d > STG_SEC(3600))
        return cli_opt_bad(p, val, "expected a duration up to 1h, such as 100ms");
    *(int64_t *)field = d;
    return 0;
}

static int opt_capacity(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    long long n;
    int rc = int_in(p, val, 0, 100000, "expected 0..100000", &n);
    if (!rc)
        *(int *)field = (int)n;
    return rc;
}

static int opt_service_time(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    int64_t us;
    if (!cli_parse_duration(val, &us) || us > STG_SEC(3600))
        return cli_opt_bad(p, val, "expected a duration up to 1h, e.g. 50ms");
    *(int64_t *)field = us;
    return 0;
}

static int opt_seed(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    long long n;
    int rc = int_in(p, val, 0, 0x7fffffffffffffffLL, "expected a non-negative integer", &n);
    if (!rc)
        *(uint64_t *)field = (uint64_t)n;
    return rc;
}

static int opt_log_format(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    stg_srv_config *c = field;
    if (!strcmp(val, "jsonl"))
        c->log_format = STG_SRV_LOG_JSONL;
    else if (!strcmp(val, "csv"))
        c->log_format = STG_SRV_LOG_CSV;
    else
        return cli_opt_bad(p, val, "expected jsonl or csv");
    return 0;
}

static int opt_max_body(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    long long n;
    int rc = int_in(p, val, 0, 1LL << 30, "expected 0..1073741824 bytes", &n);
    if (!rc)
        *(size_t *)field = (size_t)n;
    return rc;
}

static int opt_dialect(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    if (!srv_persona_find(val))
        return cli_opt_bad(p, val, "expected ietf, openai, anthropic, github, discord, "
                                   "shopify, x, azure, kong or stripe");
    *(const char **)field = val;
    return 0;
}

/* NAME=LIMIT/WINDOW, e.g. requests=20/1s; LIMIT 0 turns the quota off. */
static int opt_quota(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    stg_srv_config *c = field;
    if (c->n_quotas == STG_SRV_MAX_QUOTAS)
        return cli_usage_error(CMD, "at most %d --quota options", STG_SRV_MAX_QUOTAS);
    stg_srv_quota *q = &c->quotas[c->n_quotas];
    const char *eq = strchr(val, '='), *sl = eq ? strchr(eq, '/') : NULL;
    size_t nl = eq ? (size_t)(eq - val) : 0;
    char lim[32];
    size_t ll = sl ? (size_t)(sl - eq - 1) : 0;
    long long n = 0;
    if (!eq || !sl || nl == 0 || nl >= sizeof q->name || ll == 0 || ll >= sizeof lim)
        return cli_opt_bad(p, val, "expected NAME=LIMIT/WINDOW, e.g. requests=20/1s");
    memcpy(q->name, val, nl);
    q->name[nl] = '\0';
    memcpy(lim, eq + 1, ll);
    lim[ll] = '\0';
    if (!cli_parse_int(lim, 0, 1000000000000LL, &n) || !cli_parse_duration(sl + 1, &q->window_us) ||
        q->window_us <= 0)
        return cli_opt_bad(p, val, "expected NAME=LIMIT/WINDOW, e.g. requests=20/1s");
    q->limit = n;
    c->n_quotas++;
    return 0;
}

static int opt_token_cost(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    long long n;
    int rc = int_in(p, val, 0, 1000000000, "expected 0..1000000000 tokens", &n);
    if (!rc)
        *(int64_t *)field = n;
    return rc;
}

static int opt_ai_count(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    if (!strcmp(val, "sum"))
        *(bool *)field = false;
    else if (!strcmp(val, "max"))
        *(bool *)field = true;
    else
        return cli_opt_bad(p, val, "expected sum or max");
    return 0;
}

static int opt_tokens(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    long long n;
    int rc = int_in(p, val, 0, 100000000, "expected 0..100000000 tokens", &n);
    if (!rc)
        *(int64_t *)field = n;
    return rc;
}

#define F(x) offsetof(serve_opts, cfg.x)
static const cli_opt serve_table[] = {
    {.kind = CLI_HEADING, .help = "Listening"},
    {CLI_STRING, "bind", 0, "ADDR", "numeric IPv4/IPv6 address", F(bind), NULL, NULL, 0, NULL,
     "127.0.0.1"},
    {CLI_FN, "port", 0, "N", "TCP port, 0 picks a free one", F(port), opt_port, NULL, 0,
     NULL, "0"},
    {CLI_FN, "threads", 0, "N", "epoll worker threads, 1..64 (default: CPUs, max 16)", F(threads),
     opt_threads, NULL, 0, NULL},
    {.kind = CLI_HEADING,
     .help = "Global limit (libstagger's GCRA token bucket; no --rate: no "
             "limit)"},
    {CLI_FN, "rate", 0, "R", "requests per second, > 0 (fractions allowed)", F(rate), opt_rate,
     NULL, 0, NULL},
    {CLI_FN, "burst", 0, "B", "bucket capacity (default max(1, ceil(R)))", 0, opt_burst, NULL, 0,
     NULL},
    {CLI_FN, "limit-status", 0, "429|503", "status of refusals", F(limit_status),
     opt_limit_status, NULL, 0, NULL, "429"},
    {CLI_FN, "retry-after", 0, "seconds|date|none",
     "delta-seconds (the wait rounded up, at least 1), an\n"
     "IMF-fixdate of now + wait, or no Retry-After; applies\nto every refusal",
     offsetof(serve_opts, cfg), opt_retry_after, NULL, 0, NULL, "seconds"},
    {CLI_FLAG, "ratelimit-headers", 0, NULL,
     "add X-RateLimit-Limit/-Remaining/-Reset, RateLimit and\n"
     "RateLimit-Policy to limiter answers, all stating one\npolicy: R * W requests per window W (1 s for a whole R)",
     F(ratelimit_headers), NULL, NULL, 0, NULL},
    {.kind = CLI_HEADING, .help = "Per-client refusals"},
    {CLI_FN, "fail-first", 0, "K",
     "429 for the first K requests of each client (by\n"
     "X-Client-Id, else by path), then normal handling",
     F(fail_first), opt_fail_first, NULL, 0, NULL},
    {CLI_FN, "fail-retry-after", 0, "N", "Retry-After of those 429s in seconds",
     F(fail_retry_after_s), opt_fail_retry_after, NULL, 0, NULL, "1"},
    {.kind = CLI_HEADING, .help = "Provider dialects (see stagger-serve(1), DIALECTS)"},
    {CLI_FN, "dialect", 0, "NAME",
     "answer as NAME does, with its quotas and header fields:\n"
     "ietf, openai, anthropic, github, discord, shopify, x,\n"
     "azure, kong or stripe",
     F(dialect), opt_dialect, NULL, 0, NULL,
     .values = "ietf openai anthropic github discord shopify x azure kong stripe"},
    {CLI_FN, "quota", 0, "NAME=LIMIT/WINDOW",
     "resize the persona's quota NAME, e.g. requests=20/1s\n"
     "(LIMIT 0 turns it off); repeatable",
     offsetof(serve_opts, cfg), opt_quota, NULL, 0, NULL},
    {CLI_FLAG, "client-by-addr", 0, NULL,
     "quotas and early retries per peer address, ignoring\n"
     "X-Client-Id (peers that send one id per job)",
     F(client_by_addr), NULL, NULL, 0, NULL},
    {CLI_FN, "token-cost", 0, "N",
     "tokens each request costs on token quotas, unless it\n"
     "sends X-Token-Cost: N",
     F(token_cost), opt_token_cost, NULL, 0, NULL, "0"},
    {.kind = CLI_HEADING,
     .help = "LLM APIs (--dialect openai|anthropic: POST .../chat/completions,\n"
             ".../responses, .../completions, .../embeddings, .../v1/messages;\n"
             "see stagger-serve(1), LLM APIS)"},
    {CLI_FN, "ai-count", 0, "sum|max",
     "OpenAI's tokens charged at arrival: prompt estimate\n"
     "plus max_tokens x n (sum), or the larger (max)",
     F(ai_count_max), opt_ai_count, NULL, 0, NULL, "sum"},
    {CLI_FN, "ai-default-max-tokens", 0, "N",
     "max_tokens of an OpenAI request that sends none",
     F(ai_default_max_tokens), opt_tokens, NULL, 0, NULL, "1024"},
    {CLI_FN, "ai-output-tokens", 0, "N",
     "output tokens of each answer (per choice), at most its\nmax_tokens",
     F(ai_output_tokens), opt_tokens, NULL, 0, NULL, "16"},
    {CLI_FN, "overload-prob", 0, "P",
     "answer an API request 529 overloaded_error (anthropic)\n"
     "or 503 overloaded (openai), before its quotas",
     F(overload_prob), opt_prob, NULL, 0, NULL},
    {CLI_FN, "stream-error-prob", 0, "P",
     "fail an admitted stream at its first event: 200, then\n"
     "event: error overloaded_error / data: {\"error\": ...}",
     F(stream_error_prob), opt_prob, NULL, 0, NULL},
    {CLI_FN, "insufficient-quota-after", 0, "N",
     "after N answered API requests, refuse every one: 429\n"
     "insufficient_quota (openai), 400 credit balance too\n"
     "low (anthropic); 0: off",
     F(insufficient_quota_after), opt_fail_first, NULL, 0, NULL, "0"},
    {.kind = CLI_HEADING, .help = "Faults (deterministic for a given --seed and request order)"},
    {CLI_FN, "outage", 0, "START+DUR",
     "503 + Retry-After (rest of the outage) from START to\n"
     "START+DUR after server start, e.g. 10s+5s; repeatable",
     offsetof(serve_opts, cfg), opt_outage, NULL, 0, NULL},
    {CLI_FN, "reset-prob", 0, "P", "close the connection without an answer (probability)",
     F(reset_prob), opt_prob, NULL, 0, NULL},
    {CLI_FN, "reset-every", 0, "N", "... for every Nth request", F(reset_every), opt_every, NULL, 0,
     NULL},
    {CLI_FN, "hang-prob", 0, "P",
     "never answer, until the client leaves or the server\nstops (probability)", F(hang_prob),
     opt_prob, NULL, 0, NULL},
    {CLI_FN, "hang-every", 0, "N", "... for every Nth request", F(hang_every), opt_every, NULL, 0,
     NULL},
    {CLI_FN, "slow-body-prob", 0, "P", "trickle the body of an admitted answer (probability)",
     F(slow_prob), opt_prob, NULL, 0, NULL},
    {CLI_FN, "slow-body-every", 0, "N", "... for every Nth request", F(slow_every), opt_every, NULL,
     0, NULL},
    {CLI_FN, "slow-body-ms", 0, "N", "time a slow body takes, in ms",
     F(slow_body_us), opt_slow_ms, NULL, 0, NULL, "1000"},
    {CLI_FN, "latency", 0, "D", "every answer takes at least D after its request\narrives",
     F(latency_us), opt_latency, NULL, 0, NULL, "0"},
    {CLI_FN, "seed", 0, "S", "seed of the fault generator", F(seed), opt_seed, NULL, 0,
     NULL, "1"},
    {CLI_FN, "capacity", 0, "N",
     "handle N admitted requests at once, queue the rest\n(latency grows with the queue; 0: off)",
     F(capacity), opt_capacity, NULL, 0, NULL},
    {CLI_FN, "service-time", 0, "D", "time each request takes with --capacity",
     F(service_time_us), opt_service_time, NULL, 0, NULL, "50ms"},
    {.kind = CLI_HEADING, .help = "Output"},
    {CLI_STRING, "log", 0, "FILE",
     "one line per request: arrival us since start, client,\n"
     "method, path, status or reset/hang/aborted, key",
     F(log_path), NULL, NULL, 0, NULL},
    {CLI_FN, "log-format", 0, "jsonl|csv", "csv has a header line",
     offsetof(serve_opts, cfg), opt_log_format, NULL, 0, NULL, "jsonl"},
    {CLI_STRING, "stats", 0, "FILE", "write the stats JSON (as GET /__stats) at exit",
     F(stats_path), NULL, NULL, 0, NULL},
    {CLI_FN, "max-body", 0, "BYTES", "larger request bodies get 413", F(max_body),
     opt_max_body, NULL, 0, NULL, "1048576"},
    {.kind = CLI_HEADING, .help = "HTTPS (libmicrohttpd's TLS, GnuTLS)"},
    {CLI_STRING, "tls-cert", 0, "FILE",
     "serve HTTPS with this PEM certificate (chain);\nneeds --tls-key", F(tls_cert), NULL, NULL,
     0, NULL},
    {CLI_STRING, "tls-key", 0, "FILE", "the certificate's PEM private key", F(tls_key), NULL, NULL,
     0, NULL},
    {CLI_STRING, "tls-client-ca", 0, "FILE",
     "mutual TLS: 403 to a request whose connection has no\n"
     "client certificate signed by a CA in FILE (PEM)",
     F(tls_client_ca), NULL, NULL, 0, NULL},
    CLI_OPT_HELP_ENTRY,
    CLI_OPT_VERSION_ENTRY,
    CLI_OPT_END,
};
#undef F

static const int serve_exits[] = {CLI_EXIT_OK, CLI_EXIT_FAILED, CLI_EXIT_USAGE, -1};

const cli_command cli_serve_command = {
    .name = CMD,
    .usage = "usage: stagger serve [options]\n"
             "\n"
             "A rate-limited HTTP/1.1 test server for retry clients. Prints\n"
             "\"listening on http://ADDR:PORT\" as its first line\n"
             "(https:// with --tls-cert), serves until SIGINT or\n"
             "SIGTERM, then writes --stats and exits 0. Replies are never stalled (TCP_NODELAY,\n"
             "epoll threads, keep-alive) unless a fault below says so.\n",
    .opts = serve_table,
    .epilogue = "Endpoints: /status/CODE (that status, 100..599; ?retry_after=N adds\n"
                "Retry-After), /echo (the request as JSON), /__stats (counters; not counted,\n"
                "not limited), /metrics (the same counters, Prometheus text; not counted,\n"
                "not limited), anything else: 200 {\"path\":...,\"ok\":true}. A POST or PATCH\n"
                "repeated with the same Idempotency-Key gets the first answer again; one\n"
                "repeated without a key is counted in duplicates_without_key. A retry that\n"
                "arrives before the wait its last answer asked for is counted in\n"
                "early_retries (client: X-Client-Id, else the peer address).\n"
                "\n"
                "In detail: 0 after SIGINT/SIGTERM, 1 if the server cannot start (or the\n"
                "stats file cannot be written). See stagger-serve(1).\n",
    .exits = serve_exits,
};

int cli_serve_main(int argc, char **argv)
{
    serve_opts so;
    memset(&so, 0, sizeof so);
    stg__srv_config_init(&so.cfg);
    cli_parser parser = {.cmd = &cli_serve_command, .ctx = &so};
    int prc = cli_parse(&parser, argc, argv);
    if (prc >= 0)
        return prc;
    stg_srv_config cfg = so.cfg;
    bool burst_set = so.burst_set;
    if (cfg.n_quotas && !cfg.dialect)
        return cli_usage_error(CMD, "--quota needs --dialect");
    if (cfg.token_cost && !cfg.dialect)
        return cli_usage_error(CMD, "--token-cost needs --dialect");
    bool ai = cfg.dialect && (!strcmp(cfg.dialect, "openai") || !strcmp(cfg.dialect, "anthropic"));
    /* The table's defaults alone: what an LLM option left alone holds. */
    serve_opts dso;
    memset(&dso, 0, sizeof dso);
    stg__srv_config_init(&dso.cfg);
    char *none[] = {argv[0], NULL};
    cli_parser dparser = {.cmd = &cli_serve_command, .ctx = &dso};
    (void)cli_parse(&dparser, 1, none);
    const stg_srv_config *def = &dso.cfg;
    if (!ai && (cfg.ai_count_max != def->ai_count_max ||
                cfg.ai_default_max_tokens != def->ai_default_max_tokens ||
                cfg.ai_output_tokens != def->ai_output_tokens || cfg.overload_prob > 0 ||
                cfg.stream_error_prob > 0 || cfg.insufficient_quota_after))
        return cli_usage_error(CMD, "the LLM API options need --dialect openai or anthropic");
    if (burst_set && cfg.rate <= 0)
        return cli_usage_error(CMD, "--burst needs --rate");
    if (cfg.ratelimit_headers && cfg.rate <= 0)
        return cli_usage_error(CMD, "--ratelimit-headers needs --rate");
    if (!cfg.tls_cert != !cfg.tls_key)
        return cli_usage_error(CMD, "--tls-cert and --tls-key go together");
    if (cfg.tls_client_ca && !cfg.tls_cert)
        return cli_usage_error(CMD, "--tls-client-ca needs --tls-cert and --tls-key");
    if (cli_defaults_probe()) { /* help --defaults: the config the server would start with */
        const cli_command *c = &cli_serve_command;
        cli_defaults_row(c, "bind", CLI_VAL_STRING, cfg.bind);
        cli_defaults_row(c, "port", CLI_VAL_INT, (long long)cfg.port);
        cli_defaults_row(c, "limit-status", CLI_VAL_INT, (long long)cfg.limit_status);
        cli_defaults_row(c, "retry-after", CLI_VAL_STRING,
                         cfg.retry_after == STG_SRV_RA_SECONDS ? "seconds"
                         : cfg.retry_after == STG_SRV_RA_DATE  ? "date"
                                                               : "none");
        cli_defaults_row(c, "fail-retry-after", CLI_VAL_INT, (long long)cfg.fail_retry_after_s);
        cli_defaults_row(c, "token-cost", CLI_VAL_INT, (long long)cfg.token_cost);
        cli_defaults_row(c, "ai-count", CLI_VAL_STRING, cfg.ai_count_max ? "max" : "sum");
        cli_defaults_row(c, "ai-default-max-tokens", CLI_VAL_INT,
                         (long long)cfg.ai_default_max_tokens);
        cli_defaults_row(c, "ai-output-tokens", CLI_VAL_INT, (long long)cfg.ai_output_tokens);
        cli_defaults_row(c, "insufficient-quota-after", CLI_VAL_INT,
                         (long long)cfg.insufficient_quota_after);
        cli_defaults_row(c, "slow-body-ms", CLI_VAL_INT, (long long)(cfg.slow_body_us / 1000));
        cli_defaults_row(c, "latency", CLI_VAL_DURATION, (int64_t)cfg.latency_us);
        cli_defaults_row(c, "seed", CLI_VAL_INT, (long long)cfg.seed);
        cli_defaults_row(c, "service-time", CLI_VAL_DURATION, (int64_t)cfg.service_time_us);
        cli_defaults_row(c, "log-format", CLI_VAL_STRING,
                         cfg.log_format == STG_SRV_LOG_CSV ? "csv" : "jsonl");
        cli_defaults_row(c, "max-body", CLI_VAL_SIZE, (long long)cfg.max_body);
        return CLI_EXIT_OK;
    }

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
    stg_srv *srv = stg__srv_start(&cfg, err, sizeof err);
    if (!srv) {
        fprintf(stderr, "stagger serve: %s\n", err);
        return 1;
    }
    bool v6 = strchr(cfg.bind, ':') != NULL;
    printf("listening on %s://%s%s%s:%u\n", cfg.tls_cert ? "https" : "http", v6 ? "[" : "",
           cfg.bind, v6 ? "]" : "", stg__srv_port(srv));
    fflush(stdout);

    int sig = 0;
    while (sigwait(&stop, &sig) != 0)
        ;
    return stg__srv_stop(srv) == 0 ? 0 : 1;
}

#endif
