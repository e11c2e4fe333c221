/*
 * The engine flags every engine-driven command shares (batch, proxy): how
 * many requests at once, the per-host rate (fixed or adaptive), the
 * circuit breaker, the retry budget and the body limit. One option-table
 * group and one builder of the stg_engine_config, so the flags read and
 * mean the same in each command (fetch, a single blocking call, has its
 * own subset).
 */
#ifndef STAGGER_CLI_ENGINE_OPTS_H
#define STAGGER_CLI_ENGINE_OPTS_H

#ifdef STG_HAVE_CURL
#include <stagger/curl.h>

#include "cli/limiter.h"
#include "cli/opt.h"

typedef struct cli_engine_opts {
    int concurrency;          /* -j; 0: learned per host */
    long http_version;        /* --http1.1 --http2 --http2-prior-knowledge; 0: libcurl's */
    double rate;              /* 0 with !rate_given: adaptive */
    int64_t burst;
    bool rate_given;
    double max_rate;          /* adaptive ceiling; 0: none */
    int breaker_failures;     /* 0: breaker off */
    int64_t breaker_open_us;
    bool defer_on_breaker;    /* --on-breaker defer: an open breaker or a
                                 spent budget gives up at once (default:
                                 waits, within the deadline) */
    bool budget;
    double budget_tokens, budget_ratio;
    size_t max_body;
    bool no_quotas;           /* --no-quotas: ignore the servers' announced quotas */
    bool no_cost_estimate;    /* --no-cost-estimate: AI requests cost 1 per unit */
} cli_engine_opts;

/* The group (field: a cli_engine_opts): --concurrency/-j, --rate, --burst,
 * --max-rate, --breaker, --breaker-open, --on-breaker, --no-budget,
 * --budget-tokens, --budget-ratio, --max-body, --no-quotas. */
extern const cli_opt cli_engine_opts_table[];

/* Before cli_parse: a concurrency learned per host, adaptive rate, budget
 * on; the breaker, --on-breaker, the budget's size and --max-body then come
 * from the table's defaults (cli_opt.def), applied by cli_parse. */
void cli_engine_opts_init(cli_engine_opts *o);

/* The combinations the flags refuse (--burst without --rate, ...).
 * Returns 0 or CLI_EXIT_USAGE after one line. */
int cli_engine_opts_check(const char *cmd, const cli_engine_opts *o, const cli_limiter *l);

/* help --defaults (opt.h): the rows of the group's defaulted options from
 * the engine config the command built; max_body is the body limit the
 * command really applies (the proxy's is not the engine's). */
void cli_engine_defaults_rows(const cli_command *c, const stg_engine_config *ec, size_t max_body);

/* Fill *ec (zeroed first) from o and the policy, and open the shared
 * limiter when --limiter was given (lim lives as long as the engine; the
 * caller closes it). Returns 0 or an exit status (cli_limiter_open). */
int cli_engine_config(const cli_engine_opts *o, const stg_policy *policy, cli_limiter *lim,
                      stg_engine_config *ec);
#endif

#endif
