/*
 * The engine flags of batch and proxy (see engine_opts.h): the handlers,
 * the table and the builder, in one place.
 *
 * Invariants: every handler checks its value's range and says what it
 * expected; the builder maps "no --rate" to the adaptive rate, "--rate 0"
 * to no limit, and lets a shared limiter (--limiter) replace the local one.
 */
#ifdef STG_HAVE_CURL

#include <stddef.h>
#include <string.h>

#include <stagger/breaker.h>
#include <stagger/budget.h>

#include "cli/cli.h"
#include "cli/engine_opts.h"

static int opt_http_version(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)p, (void)val;
    *(long *)field = !strcmp(o->name, "http1.1")                ? CURL_HTTP_VERSION_1_1
                     : !strcmp(o->name, "http2-prior-knowledge") ? CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE
                                                                 : CURL_HTTP_VERSION_2_0;
    return 0;
}

static int opt_concurrency(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    long long n;
    if (!cli_parse_int(v, 1, 10000, &n))
        return cli_opt_bad(p, v, "expected a whole number from 1 to 10000");
    *(int *)field = (int)n;
    return 0;
}

static int opt_rate(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    cli_engine_opts *b = field;
    if (!cli_parse_rate(v, true, &b->rate))
        return cli_opt_bad(p, v, "expected a rate such as 10, 10/s or 600/m (0: no limit)");
    b->rate_given = true;
    return 0;
}

static int opt_burst(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    long long n;
    if (!cli_parse_int(v, 1, 1000000, &n))
        return cli_opt_bad(p, v, "expected a whole number from 1");
    *(int64_t *)field = n;
    return 0;
}

static int opt_max_rate(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    if (!cli_parse_double(v, 0.001, 1e6, field))
        return cli_opt_bad(p, v, "expected requests per second");
    return 0;
}

static int opt_breaker(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    long long n;
    if (!cli_parse_int(v, 0, 1000000, &n))
        return cli_opt_bad(p, v, "expected a whole number (0: no breaker)");
    *(int *)field = (int)n;
    return 0;
}

static int opt_on_breaker(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    if (!strcmp(v, "defer"))
        *(bool *)field = true;
    else if (!strcmp(v, "wait"))
        *(bool *)field = false;
    else
        return cli_opt_bad(p, v, "expected defer or wait");
    return 0;
}

static int opt_no_budget(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)p, (void)o, (void)v;
    *(bool *)field = false;
    return 0;
}

static int opt_budget_tokens(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    if (!cli_parse_double(v, 1, 1e6, field))
        return cli_opt_bad(p, v, "expected a number from 1");
    return 0;
}

static int opt_budget_ratio(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    if (!cli_parse_double(v, 0.001, 1e6, field))
        return cli_opt_bad(p, v, "expected a number from 0.001");
    return 0;
}

/* A library constant's digits in a help string (the concurrency's ceiling). */
#define STR_(x) #x
#define STR(x) STR_(x)

#define E(f) offsetof(cli_engine_opts, f)
/* The breaker's and the budget's defaults below are the library's
 * (breaker.h, budget.h), written as the table's text: a change on either
 * side stops the build rather than letting the two drift. */
_Static_assert(STG_BREAKER_DEFAULT_CONSECUTIVE == 20, "--breaker's default");
_Static_assert(STG_BREAKER_DEFAULT_OPEN_US == STG_SEC(30), "--breaker-open's default");
_Static_assert(STG_BUDGET_DEFAULT_MAX_TOKENS == 10.0, "--budget-tokens' default");
_Static_assert(STG_BUDGET_DEFAULT_TOKEN_RATIO == 0.1, "--budget-ratio's default");

const cli_opt cli_engine_opts_table[] = {
    {CLI_FN, "concurrency", 'j', "N",
     "a hard cap on requests in flight; without it the\nconcurrency is learned per host (at most "
     STR(STG_CONCURRENCY_DEFAULT_MAX) ")",
     E(concurrency), opt_concurrency, NULL, 0, NULL},
    {CLI_FN, "http1.1", 0, NULL, "use HTTP/1.1", E(http_version), opt_http_version, NULL, 0, NULL},
    {CLI_FN, "http2", 0, NULL, "use HTTP/2, one connection per host (h2c upgrade\non http://)",
     E(http_version), opt_http_version, NULL, 0, NULL},
    {CLI_FN, "http2-prior-knowledge", 0, NULL, "use HTTP/2 without an upgrade on http://",
     E(http_version), opt_http_version, NULL, 0, NULL},
    {CLI_FN, "rate", 0, "R[/s|/m|/h]",
     "client-side limit, requests/s per host (token bucket);\n0: no limit; not given: adaptive "
     "rate",
     0, opt_rate, NULL, 0, NULL},
    {CLI_FN, "burst", 0, "B", "bucket size for --rate (default max(1, ceil(R)))", E(burst),
     opt_burst, NULL, 0, NULL},
    {CLI_FN, "max-rate", 0, "R", "adaptive: never above R requests/s", E(max_rate), opt_max_rate,
     NULL, 0, NULL},
    {CLI_FN, "breaker", 0, "N",
     "consecutive failures that open a host's circuit\nbreaker (0: no breaker)",
     E(breaker_failures), opt_breaker, NULL, 0, NULL, "20"},
    {CLI_FN, "breaker-open", 0, "D", "how long it stays open", E(breaker_open_us),
     cli_opt_positive_duration, NULL, 0, NULL, "30s"},
    {CLI_FN, "on-breaker", 0, "wait|defer",
     "wait (requests wait for an open breaker to\n"
     "half-open, and a spent retry budget lets one retry\n"
     "at a time through, within each request's deadline) |\n"
     "defer (both give up at once: batch defers the host's\n"
     "jobs to a later run, proxy answers 503)",
     E(defer_on_breaker), opt_on_breaker, NULL, 0, NULL, "wait"},
    {CLI_FN, "no-budget", 0, NULL, "no retry budget (default: gRPC-style budget per host)",
     E(budget), opt_no_budget, NULL, 0, NULL},
    {CLI_FN, "budget-tokens", 0, "N", "budget size", E(budget_tokens),
     opt_budget_tokens, NULL, 0, NULL, "10"},
    {CLI_FN, "budget-ratio", 0, "X", "tokens a success gives back", E(budget_ratio),
     opt_budget_ratio, NULL, 0, NULL, "0.1"},
    {CLI_FN, "max-body", 0, "BYTES", "bytes of each response body accepted (k, M, G\n"
     "suffixes; proxy: of a body it holds, not of a 2xx\nthat streams)",
     E(max_body), cli_opt_size, NULL, 0, NULL, "64M"},
    {CLI_FLAG, "no-quotas", 0, NULL,
     "do not pace by the quotas the servers announce\n"
     "(default: every quota of every dialect is kept)",
     E(no_quotas), NULL, NULL, 0, NULL},
    {CLI_FLAG, "no-cost-estimate", 0, NULL,
     "do not estimate what an AI API request costs in\n"
     "tokens from its body (default: the prompt's characters\n"
     "/ 4 and max_tokens, learned from the server's counts,\n"
     "are reserved against its token quotas before sending)",
     E(no_cost_estimate), NULL, NULL, 0, NULL},
    CLI_OPT_END,
};
#undef E

void cli_engine_opts_init(cli_engine_opts *o)
{
    memset(o, 0, sizeof *o);
    o->concurrency = 0; /* not given: learned per host (concurrency.h) */
    o->budget = true;
    /* --breaker, --breaker-open, --on-breaker, the budget's size and
     * --max-body come from the table's defaults (cli_opt.def), applied by
     * cli_parse. */
}

int cli_engine_opts_check(const char *cmd, const cli_engine_opts *o, const cli_limiter *l)
{
    if (o->burst && (!o->rate_given || o->rate == 0))
        return cli_usage_error(cmd, "--burst goes with --rate R (R > 0)");
    if (o->max_rate && o->rate_given)
        return cli_usage_error(cmd, "--max-rate is for the adaptive rate (no --rate)");
    if (l && l->url && o->rate_given && o->rate == 0)
        return cli_usage_error(cmd, "--limiter with --rate 0 limits nothing: give --rate R "
                                    "(R > 0), or no --rate to share an adaptive rate");
    return 0;
}

void cli_engine_defaults_rows(const cli_command *c, const stg_engine_config *ec, size_t max_body)
{
    cli_defaults_row(c, "breaker", CLI_VAL_INT, (long long)ec->breaker_config.consecutive_failures);
    cli_defaults_row(c, "breaker-open", CLI_VAL_DURATION, (int64_t)ec->breaker_config.open_us);
    cli_defaults_row(c, "on-breaker", CLI_VAL_STRING, ec->defer_when_open ? "defer" : "wait");
    cli_defaults_row(c, "budget-tokens", CLI_VAL_DOUBLE, ec->budget_config.max_tokens);
    cli_defaults_row(c, "budget-ratio", CLI_VAL_DOUBLE, ec->budget_config.token_ratio);
    cli_defaults_row(c, "max-body", CLI_VAL_SIZE, (long long)max_body);
}

int cli_engine_config(const cli_engine_opts *o, const stg_policy *policy, cli_limiter *lim,
                      stg_engine_config *ec)
{
    memset(ec, 0, sizeof *ec);
    ec->policy = *policy;
    ec->concurrency = o->concurrency;
    ec->http_version = o->http_version;
    /* No --concurrency: each host's is learned (concurrency.h), defaults. */
    static const stg_concurrency_config learn_defaults;
    if (!o->concurrency)
        ec->learn = &learn_defaults;
    if (o->rate_given && o->rate > 0) {
        ec->limiter = STG_LIMITER_FIXED;
        ec->rate = o->rate;
        ec->burst = o->burst;
    } else if (o->rate_given) {
        ec->limiter = STG_LIMITER_NONE;
    } else {
        ec->limiter = STG_LIMITER_ADAPTIVE;
        ec->adaptive.max_rate = o->max_rate;
    }
    ec->breaker = o->breaker_failures > 0;
    ec->breaker_config.consecutive_failures = o->breaker_failures;
    ec->breaker_config.open_us = o->breaker_open_us;
    ec->defer_when_open = o->defer_on_breaker;
    ec->budget_wait = !o->defer_on_breaker;
    ec->budget = o->budget;
    ec->budget_config.max_tokens = o->budget_tokens;
    ec->budget_config.token_ratio = o->budget_ratio;
    ec->max_body = o->max_body;
    ec->quotas = !o->no_quotas; /* the servers' announced quotas, with the limiter */
    ec->no_cost_estimate = o->no_cost_estimate;
    /* The shared limit replaces the local one. */
    if (lim->url)
        ec->limiter = STG_LIMITER_NONE;
    lim->max_rate = o->max_rate;
    int rc = cli_limiter_open(lim, o->rate_given ? o->rate : 0, o->burst, o->breaker_failures,
                              o->breaker_open_us, &ec->shared);
    /* The servers' quotas are held in the same Redis, by every process
     * that shares it (stagger/redis/quota.h). */
    if (rc == 0 && ec->quotas)
        rc = cli_limiter_share_quotas(lim, &ec->shared_quotas);
    return rc;
}

#endif
