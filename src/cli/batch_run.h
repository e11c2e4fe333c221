/*
 * `stagger batch`: what the option parser (batch.c) hands to the runner
 * (batch_run.c). Private to those two files.
 */
#ifndef STAGGER_CLI_BATCH_RUN_H
#define STAGGER_CLI_BATCH_RUN_H

#include "cli/batch_queue.h"
#include "cli/class_opts.h"
#include "cli/exit.h"
#include "cli/engine_opts.h"
#include "cli/limiter.h"
#include "cli/metrics_live.h"
#include "cli/progress.h"
#include "cli/tls.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <stagger/stagger.h>

#include "batch/batch.h"
#include "batch/report.h"
#include "store/store.h"

/* Exit statuses: CLI_EXIT_* of the CLI's one table, cli/exit.h
 * (documented in stagger(1) and stagger-batch(1)). */

enum batch_progress { BATCH_PROGRESS_AUTO, BATCH_PROGRESS_BAR, BATCH_PROGRESS_LINES,
                      BATCH_PROGRESS_NONE };

typedef struct batch_opts {
    const char *input;        /* input path, "-" for stdin, NULL: none (resume from --db) */
    char *db;                 /* database path (owned) */
    stg_input_options in;     /* format, template, method */
    bool strict;
    bool dry_run;             /* print the first requests, send nothing */
    const char *out_dir;      /* NULL: bodies in the database */
    const char **headers;     /* -H "Name: value", n_headers of them (argv strings) */
    size_t n_headers;
    cli_engine_opts eng;      /* -j, --rate, breaker, budget, --max-body (engine_opts.h) */
    stg_policy policy;
    bool retry_deferred, retry_review;
    enum batch_progress progress;
    int64_t progress_interval_us; /* plain lines; 0: 5 s */
    bool quiet;
    bool json;                /* final report as JSON */
    int64_t busy_timeout_us;
    const char *log_path;     /* JSON-lines event log; NULL: none */
    const char *metrics_path; /* Prometheus textfile; NULL: none; "-": stdout at the end */
    cli_metrics_opts metrics; /* --metrics-interval, --metrics-listen */
    cli_limiter limiter;      /* --limiter: a limit shared through Redis */
    cli_tls tls;              /* --cacert, --capath, -k, --cert, --key */
    batch_queue_opts queue;   /* --queue: a work queue in Redis (batch_queue.c) */
    cli_class cls;            /* --priority, --tenant, --weight: a job's default */
} batch_opts;

/* A run's configuration from o, what both kinds of run share: -H, --out,
 * the class and tenant, the engine (batch_engine_config, which connects
 * the shared limiter). 0 or an exit status. */
int batch_config(const batch_opts *o, stg_batch_config *bc);

/* The engine part of a run's configuration, connecting the shared limiter
 * (batch_run.c; the queue's run uses it too). 0 or an exit status. */
struct stg_engine_config;
int batch_engine_config(const batch_opts *o, struct stg_engine_config *ec);

/* --out DIR: created (0700) when missing; it must be a directory and not
 * a symbolic link (the runner writes only into a directory it opened with
 * O_NOFOLLOW: src/batch/body.c). -1 when fine (or no --out), else the exit
 * status after one line on stderr. */
int batch_prepare_out(const char *dir);

/* Run (or resume) the batch. Returns the exit status. */
int batch_run(const batch_opts *o);

/* The report r (the database's or the queue's) on stdout, as JSON or text;
 * returns ex, or CLI_EXIT_FAILED (when ex is 0) when stdout fails. */
struct stg_batch_report;
int batch_report_out(const struct stg_batch_report *r, bool json, int ex);

/* Bad lines as the import (or the queue's load) finds them, on stderr:
 * batch_bad_line is the importer's on_bad, bad_printer its data (name: the
 * input's, as shown). The first 20 are printed, the rest counted; an input
 * whose first lines are all "no URL" (a file of keys without --url: issue
 * #37) gets one hint after the third instead of a screenful of the same
 * line. Then batch_bad_lines_tail says how many were not shown: listed by
 * `batch report --db DB --bad-lines` when written and db is given, or that
 * nothing was written. */
typedef struct bad_printer {
    const char *name;
    size_t seen, shown;
    bool keys_hint;   /* the hint was given: no more "no URL" lines shown */
    bool all_no_url;  /* every bad line so far is "no URL" */
} bad_printer;
void batch_bad_line(void *data, long line, const char *message);
void batch_bad_lines_tail(const bad_printer *bp, bool written, const char *db);
/* "INPUT: no jobs in the input", with a hint when no line was a URL. */
void batch_say_no_jobs(const bad_printer *bp, const struct batch_opts *o);

/* A run, the database's (batch_run.c) or a queue worker's (batch_queue.c),
 * from bc (all but its events) to its end: the event log (--log, "-":
 * stdout), the metrics (--metrics, --metrics-listen, the live page), the
 * waits and hosts (a host's breaker said once), the runner, the loop
 * (batch_loop), the verdict, the report and the last lines
 * (batch_run_end); with --drain (a queue's) the first signal drains,
 * a second stops. What each kind of run does of its own is k's (a
 * constant table; data, its hooks' first argument). Returns the exit
 * status. */
typedef struct batch_kind {
    bool final_line;         /* the last progress line (a database's) */
    const char *interrupted; /* the verdict's line for a signal; NULL: the database's */
    void (*facts)(void *data, const stg_batch_progress *p, progress_state *s); /* or NULL */
    /* stg__batch_new failed with rc: say why, return the exit status */
    int (*start_failed)(void *data, int rc, const stg_batch_start *st, const char *err);
    /* it started (not with --quiet): say so; c: the runner's first counts */
    void (*started)(void *data, const stg_batch_start *st, const stg_batch_counts *c);
    /* it ended, the runner not yet freed: record what it measured */
    void (*ended)(void *data, stg_batch *b, const stg_batch_summary *sum, int64_t retry_ms,
                  int64_t limiter_ms);
    /* the runner freed: read the report into *rep (*got) when one is printed;
     * returns ex, or the exit status of a failed read */
    int (*report)(void *data, const stg_batch_summary *sum, stg_batch_report *rep, bool *got,
                  int ex);
} batch_kind;
int batch_run_with(const batch_opts *o, stg_batch_config *bc, const batch_kind *k, void *data);

#endif
