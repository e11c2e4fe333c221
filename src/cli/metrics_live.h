/*
 * Live metrics for `stagger fetch` and `stagger batch`: the Prometheus
 * text of an stg_metrics rewritten every --metrics-interval (node_exporter
 * textfile convention) and served on --metrics-listen at /metrics, with
 * the live page at / (its chart.js and live.json beside it).
 */
#ifndef STAGGER_CLI_METRICS_LIVE_H
#define STAGGER_CLI_METRICS_LIVE_H

#include <stdbool.h>
#include <stdint.h>

#include "cli/opt.h"

/* The options (an option-table group: --metrics-interval, --metrics-listen). */
typedef struct cli_metrics_opts {
    int64_t interval_us; /* 0: the default, 10 s */
    const char *listen;  /* "HOST:PORT" or "PORT" (host 127.0.0.1); NULL: none */
} cli_metrics_opts;

extern const cli_opt cli_metrics_live_opts[];

#ifdef STG_HAVE_CURL
#include <stagger/curl.h>

typedef struct cli_metrics_live cli_metrics_live;

/* Start what o asks for over m (not owned; it must outlive the handle):
 * a thread rewriting path every interval when path is a file (not NULL or
 * "-"), and the /metrics listener when o->listen is set, which prints
 * "stagger CMD: metrics on http://HOST:PORT/metrics" on stderr once
 * listening. *out is NULL when there is nothing to run. Returns 0, or
 * CLI_EXIT_FAILED after a message (the address cannot be bound). */
int cli_metrics_live_start(const char *cmd, const cli_metrics_opts *o, stg_metrics *m,
                           const char *path, cli_metrics_live **out);
/* Stop the thread and the listener (the caller then writes the final
 * file itself). Accepts NULL. */
void cli_metrics_live_stop(cli_metrics_live *l);
/* What live.json carries beside the metrics: fn(data) returns a new JSON
 * object (a json_t *, as void * to keep jansson out of this header) put
 * under "batch", or NULL; it runs on a listener thread, so it guards its
 * data itself. Call before anyone polls (right after start). Accepts a
 * NULL l. */
void cli_metrics_live_extra(cli_metrics_live *l, void *(*fn)(void *data), void *data);
#endif

#endif
