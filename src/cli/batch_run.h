/*
 * `stagger batch`: what the option parser (batch.c) hands to the runner
 * (batch_run.c). Private to those two files.
 */
#ifndef STAGGER_CLI_BATCH_RUN_H
#define STAGGER_CLI_BATCH_RUN_H

#include "cli/exit.h"
#include "cli/limiter.h"
#include "cli/tls.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <stagger/stagger.h>

#include "store/store.h"

/* Exit statuses of `stagger batch`: the CLI's one table (cli/exit.h,
 * documented in stagger(1) and stagger-batch(1)). */
#define BATCH_EXIT_DONE CLI_EXIT_OK         /* every job done */
#define BATCH_EXIT_FAILED CLI_EXIT_FAILED   /* finished; some jobs failed (non-retryable) */
#define BATCH_EXIT_USAGE CLI_EXIT_USAGE     /* bad usage */
#define BATCH_EXIT_LEFT CLI_EXIT_LEFT       /* finished; some jobs deferred or in review */
#define BATCH_EXIT_DB CLI_EXIT_DB           /* database problem: locked, read-only, full, ... */
#define BATCH_EXIT_INPUT CLI_EXIT_INPUT     /* input unreadable, no jobs, bad lines (--strict) */
#define BATCH_EXIT_LIMITER CLI_EXIT_LIMITER /* the shared limiter became unavailable */
#define BATCH_EXIT_SIGINT CLI_EXIT_SIGINT   /* interrupted by SIGINT; run again to resume */
#define BATCH_EXIT_SIGTERM CLI_EXIT_SIGTERM /* interrupted by SIGTERM; run again to resume */

enum batch_progress { BATCH_PROGRESS_AUTO, BATCH_PROGRESS_BAR, BATCH_PROGRESS_LINES,
                      BATCH_PROGRESS_NONE };

typedef struct batch_opts {
    const char *input;        /* input path, "-" for stdin, NULL: none (resume from --db) */
    char *db;                 /* database path (owned) */
    stg_input_options in;     /* format, template, method */
    bool strict;
    const char *out_dir;      /* NULL: bodies in the database */
    const char **headers;     /* -H "Name: value", n_headers of them (argv strings) */
    size_t n_headers;
    int concurrency;
    double rate;              /* 0 with !rate_given: adaptive */
    int64_t burst;
    bool rate_given;
    double max_rate;          /* adaptive ceiling; 0: none */
    stg_policy policy;
    int breaker_failures;     /* 0: breaker off */
    int64_t breaker_open_us;
    bool defer_on_breaker;    /* --on-breaker defer: an open breaker or a
                                 spent budget defers (default: waits) */
    bool budget;
    double budget_tokens, budget_ratio;
    bool retry_deferred, retry_review;
    enum batch_progress progress;
    int64_t progress_interval_us; /* plain lines; 0: 5 s */
    bool quiet;
    bool json;                /* final report as JSON */
    int64_t busy_timeout_us;
    const char *log_path;     /* JSON-lines event log; NULL: none */
    size_t max_body;
    cli_limiter limiter;      /* --limiter: a limit shared through Redis */
    cli_tls tls;              /* --cacert, --capath, -k, --cert, --key */
    long http_version;  /* --http1.1 --http2 --http2-prior-knowledge; 0: libcurl's */
} batch_opts;

/* Run (or resume) the batch. Returns the exit status. */
int batch_run(const batch_opts *o);

#endif
