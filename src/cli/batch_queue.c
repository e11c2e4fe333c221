/*
 * `stagger batch --queue URL [INPUT]`: a worker of the work queue on Redis
 * Streams (src/redis/queue*.c through src/batch/queue_source.c), loading
 * INPUT into it first when given; `batch report --queue` and `batch export
 * --queue` read the queue. This file maps options and prints; the runner,
 * its loop (batch_run.c's batch_loop), the load, the report and the export
 * (src/batch/queue_load.c, report.c, queue_export.c), the states and the
 * protocol are the libraries'.
 *
 * Invariants:
 *  - A job whose URL or headers carry a secret is never loaded: the queue
 *    is a database other machines read. The whole input is refused (exit
 *    5) and the message says to give secrets with -H on each worker; -H
 *    values are never written to Redis.
 *  - The limit is shared by default: without --limiter (and without --rate
 *    0) the limiter is the queue's Redis, one key per host, so N workers
 *    together keep one limit.
 *  - Redis unreachable at start is exit 6; during the run the worker stops
 *    claiming, keeps its outcomes until Redis is back, or after --queue-wait
 *    exits 6 with nothing lost (see queue_source.h).
 *  - The exit status is the whole queue's (0 all done, 1 some failed, 3
 *    some deferred, in review or left), as `stagger batch` says of a
 *    database: a worker that ends has seen every job end.
 */
#ifdef STG_HAVE_STORE

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "cli/batch_queue.h"
#include "cli/batch_run.h"
#include "cli/cli.h"

#ifdef STG_BATCH_HAVE_QUEUE
#include <stagger/redis.h>
#endif

#define CMD "batch"

static int opt_queue(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
#ifdef STG_BATCH_HAVE_QUEUE
    stg_redis_url u;
    const char *why = NULL;
    if (stg_redis_url_parse(v, &u, &why) != STG_OK || !u.key[0])
        return cli_opt_bad(p, v, why ? why : "expected redis://[:PASSWORD@]HOST[:PORT]/NAME");
    ((batch_queue_opts *)field)->url = v;
    return 0;
#else
    (void)field, (void)v;
    return cli_opt_bad(p, "", "--queue needs Redis support (libhiredis-dev at build time)");
#endif
}

/* The group's struct, from an entry's field. */
static batch_queue_opts *opts_of(const cli_opt *o, void *field)
{
    return (batch_queue_opts *)(void *)((char *)field - o->off);
}

static int opt_idle(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    int64_t d;
    if (!cli_parse_duration(v, &d) || d < STG_MS(10))
        return cli_opt_bad(p, v, "expected a duration of at least 10ms, such as 10m");
    *(int64_t *)field = d;
    opts_of(o, field)->tuned |= !p->in_defaults;
    return 0;
}

static int opt_deliveries(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    long long n;
    if (!cli_parse_int(v, 1, 1000, &n))
        return cli_opt_bad(p, v, "expected a whole number from 1 to 1000");
    *(int *)field = (int)n;
    opts_of(o, field)->tuned |= !p->in_defaults;
    return 0;
}

#define Q(x) offsetof(batch_queue_opts, x)
const cli_opt cli_batch_queue_opts[] = {
    {CLI_FN, "queue", 0, "redis[s]://[:PASSWORD@]HOST[:PORT]/NAME",
     "work on the queue NAME in Redis with any number of\n"
     "workers on any machines; with INPUT, load it first\n"
     "(idempotent); the limit is shared there by default",
     0, opt_queue, NULL, 0, NULL},
    {CLI_FN, "claim-idle", 0, "D",
     "take a job from a worker that stopped renewing its\nclaims this long ago (a live worker renews every\nD/4)",
     Q(claim_idle_us), opt_idle, NULL, 0, NULL, "20s"},
    {CLI_FN, "max-deliveries", 0, "N", "a job delivered more often goes to review",
     Q(max_deliveries), opt_deliveries, NULL, 0, NULL, "5"},
    {CLI_FLAG, "follow", 0, NULL, "stay and wait for jobs loaded later", Q(follow), NULL, NULL, 0,
     NULL},
    {CLI_FLAG, "drain", 0, NULL,
     "on SIGINT or SIGTERM finish the claimed jobs, then\nleave (a second signal stops at once)",
     Q(drain), NULL, NULL, 0, NULL},
    {CLI_STRING, "worker", 0, "NAME", "this worker's name in the queue (default HOST:PID)",
     Q(worker), NULL, NULL, 0, NULL},
    {CLI_FN, "queue-wait", 0, "D",
     "Redis unreachable this long: exit 6, nothing lost", Q(wait_us), opt_idle,
     NULL, 0, NULL, "30s"},
    CLI_OPT_END,
};
#undef Q

void batch_queue_defaults_rows(const cli_command *c, const batch_opts *o)
{
    cli_defaults_row(c, "claim-idle", CLI_VAL_DURATION, (int64_t)o->queue.claim_idle_us);
    cli_defaults_row(c, "max-deliveries", CLI_VAL_INT, (long long)o->queue.max_deliveries);
    cli_defaults_row(c, "queue-wait", CLI_VAL_DURATION, (int64_t)o->queue.wait_us);
}

#ifdef STG_BATCH_HAVE_QUEUE

#include <stagger/redis/queue.h>

#include "batch/batch.h"
#include "batch/queue_load.h"
#include "batch/queue_source.h"
#include "batch/queue_export.h"
#include "batch/report.h"

/* The URL for messages (password as ***). */
static void shown(const char *url, char *buf, size_t len)
{
    stg_redis_url u;
    if (stg_redis_url_parse(url, &u, NULL) == STG_OK)
        stg_redis_url_format(&u, buf, len);
    else
        snprintf(buf, len, "(bad URL)");
    memset(&u, 0, sizeof u);
}

static stg_queue *open_queue(const char *url, const batch_queue_opts *qo, cli_redis_tls *tls,
                             int *ex)
{
    if ((*ex = cli_redis_tls_config(tls, CMD, url)) != 0)
        return NULL;
    stg_queue_config c = {.url = url,
                          .tls = &tls->cfg,
                          .sentinels = tls->sentinels,
                          .sentinel_master = tls->sentinel_master};
    if (qo) {
        c.worker = qo->worker;
        c.claim_idle_us = qo->claim_idle_us;
        c.max_deliveries = qo->max_deliveries;
    }
    int err = 0;
    char why[512] = "";
    stg_queue *q = stg_queue_new(&c, &err, why, sizeof why);
    if (!q) {
        fprintf(stderr, "stagger batch: queue: %s\n", why);
        *ex = err == STG_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_LIMITER;
    }
    return q;
}

/* ---- load ---------------------------------------------------------------- */

/* INPUT streamed into the queue (batch/queue_load.h: memory bounded by a
 * chunk, not by the input). -1 to go on, or an exit status. */
static int load_input(const batch_opts *o, stg_queue *q, const char *name)
{
    char err[800];
    stg_input_reader *r = NULL;
    int rc = stg__input_reader_open(o->input, &o->in, &r, err, sizeof err);
    if (rc != STG_OK) {
        fprintf(stderr, "stagger batch: %s\n", err);
        return rc == STG_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_INPUT;
    }
    const char *in_name = strcmp(o->input, "-") ? o->input : "stdin";
    bad_printer bp = {.name = in_name};
    stg_batch_queue_load_options lo = {.input_path = o->input,
                                       .strict = o->strict,
                                       .on_bad = batch_bad_line,
                                       .bad_data = &bp};
    stg_batch_queue_load_result res;
    rc = stg__batch_queue_load(q, r, &lo, &res);
    stg__input_reader_free(r);
    batch_bad_lines_tail(&bp, rc == STG_OK && !res.refused && !res.secret_line, NULL);
    int ex = -1;
    if (rc != STG_OK && res.stage == STG_QLOAD_INPUT) {
        fprintf(stderr, "stagger batch: %s\n", res.err);
        ex = rc == STG_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_INPUT;
    } else if (rc != STG_OK && res.stage == STG_QLOAD_SPOOL) {
        fprintf(stderr, "stagger batch: loading queue %s: %s\n", name, res.err);
        ex = CLI_EXIT_DB;
    } else if (rc != STG_OK) {
        fprintf(stderr, "stagger batch: loading queue %s: %s\n", name, stg_queue_errmsg(q));
        ex = rc == STG_ESTATE ? CLI_EXIT_DB : rc == STG_EUNAVAIL ? CLI_EXIT_LIMITER : 1;
    } else if (res.refused && o->strict && res.bad) {
        fprintf(stderr, "stagger batch: refusing to load: %zu bad input lines (--strict)\n",
                res.bad);
        ex = CLI_EXIT_INPUT;
    } else if (res.refused) {
        batch_say_no_jobs(&bp, o);
        ex = CLI_EXIT_INPUT;
    } else if (res.secret_line) {
        fprintf(stderr,
                "stagger batch: %s:%ld: job %s carries a secret in its %s; a queue keeps "
                "jobs in Redis, where every worker reads them: give secrets to each worker "
                "with -H or --secret-header-env instead (nothing was loaded)\n",
                in_name, res.secret_line, res.secret_key,
                res.secret_in_url ? "URL" : "headers");
        ex = CLI_EXIT_INPUT;
    } else if (!o->quiet) {
        fprintf(stderr, "stagger batch: %lld jobs loaded into queue %s (%lld were there already)\n",
                (long long)res.added, name, (long long)res.jobs - (long long)res.added);
    }
    return ex;
}

/* ---- report ---------------------------------------------------------------- */

static int64_t ended(const stg_queue_counts *c)
{
    return c->n[STG_QUEUE_DONE] + c->n[STG_QUEUE_FAILED] + c->n[STG_QUEUE_DEFERRED] +
           c->n[STG_QUEUE_REVIEW];
}

/* The queue's report into *r (src/batch/report_queue.c; printed by
 * src/batch/report.c, as the database's): -1, or the exit status of a
 * failure after its message. */
static int read_report(stg_queue *q, const char *url, stg_batch_report *r)
{
    char u[800];
    shown(url, u, sizeof u);
    int rc = stg__batch_report_queue(q, u, r);
    if (rc != STG_OK) {
        fprintf(stderr, "stagger batch: %s\n", stg_queue_errmsg(q));
        return rc == STG_ENOTFOUND ? CLI_EXIT_USAGE : CLI_EXIT_LIMITER;
    }
    return -1;
}

int batch_queue_report(const char *url, bool json, cli_redis_tls *tls)
{
    int ex = 0;
    stg_queue *q = open_queue(url, NULL, tls, &ex);
    if (!q)
        return ex;
    stg_batch_report r;
    if ((ex = read_report(q, url, &r)) < 0) {
        ex = batch_report_out(&r, json, CLI_EXIT_OK);
        stg__batch_report_free(&r);
    }
    stg_queue_free(q);
    return ex;
}

/* ---- export --------------------------------------------------------------- */

int batch_queue_export(const char *url, const stg_export_options *eo, const char *out_path,
                       cli_redis_tls *tls)
{
    int ex = 0;
    stg_queue *q = open_queue(url, NULL, tls, &ex);
    if (!q)
        return ex;
    FILE *out = batch_export_out(out_path);
    if (!out) {
        stg_queue_free(q);
        return CLI_EXIT_FAILED;
    }
    int rc = stg__batch_queue_export(q, eo, out); /* src/batch/queue_export.c */
    if (rc == STG_EIO)
        fprintf(stderr, "stagger batch: write error on the export\n");
    else if (rc != STG_OK)
        fprintf(stderr, "stagger batch: %s\n", stg_queue_errmsg(q));
    stg_queue_free(q);
    ex = rc == STG_OK ? CLI_EXIT_OK : rc == STG_EIO ? CLI_EXIT_FAILED : CLI_EXIT_LIMITER;
    return batch_export_done(out, out_path, ex);
}

/* ---- a worker ---------------------------------------------------------------- */

/* The queue URL without its NAME: the limiter's, one key per host. */
static void limiter_url_of(const char *url, char *buf, size_t len)
{
    snprintf(buf, len, "%s", url);
    char *slash = strrchr(buf, '/');
    if (slash)
        slash[1] = '\0';
}

/* A worker's run (batch_run_with's hooks, below). */
typedef struct worker_run {
    const batch_opts *o;
    stg_queue *q;
    stg_batch_queue *qs;
    const char *name;   /* the queue's URL as shown */
    stg_queue_counts c; /* at the start */
    int64_t ended0;     /* the queue's ended jobs when the worker began */
} worker_run;

/* A worker's facts on the progress line (batch_loop): the counts are the
 * whole queue's, so is the pace (the jobs the queue ended since this
 * worker began), and this worker's jobs in flight, and whether Redis is
 * away (outcomes kept). */
static void facts(void *data, const stg_batch_progress *p, progress_state *s)
{
    worker_run *w = data;
    s->queue = true;
    s->here = p->in_flight;
    s->kept = stg__batch_queue_kept(w->qs) > 0;
    s->finished = (uint64_t)(s->ended > w->ended0 ? s->ended - w->ended0 : 0);
}

static int worker_start_failed(void *data, int rc, const stg_batch_start *st, const char *err)
{
    (void)data, (void)rc, (void)st;
    fprintf(stderr, "stagger batch: %s\n", err);
    return CLI_EXIT_USAGE;
}

static void worker_started(void *data, const stg_batch_start *st, const stg_batch_counts *c)
{
    worker_run *w = data;
    (void)st, (void)c;
    fprintf(stderr, "stagger batch: worker %s on queue %s: %lld jobs, %lld ended\n",
            stg_queue_worker(w->q), w->name, (long long)w->c.total, (long long)ended(&w->c));
}

static void add_classes(const stg_batch *b, stg_queue *q, bool quiet);

static void worker_ended(void *data, stg_batch *b, const stg_batch_summary *sum,
                         int64_t retry_ms, int64_t limiter_ms)
{
    worker_run *w = data;
    (void)sum, (void)retry_ms, (void)limiter_ms;
    stg__batch_queue_release(w->qs); /* the jobs claimed ahead: back to the queue */
    add_classes(b, w->q, w->o->quiet);
}

static int worker_report(void *data, const stg_batch_summary *sum, stg_batch_report *rep,
                         bool *got, int ex)
{
    worker_run *w = data;
    (void)sum;
    *got = false;
    if ((w->o->quiet && !w->o->json) || ex == CLI_EXIT_LIMITER) /* Redis away: none to read */
        return ex;
    int rex = read_report(w->q, w->o->queue.url, rep);
    *got = rex < 0;
    return !*got && ex == CLI_EXIT_OK ? rex : ex;
}

static const batch_kind WORKER = {
    .interrupted = "interrupted; the jobs in flight here go back to the queue",
    .facts = facts,
    .start_failed = worker_start_failed,
    .started = worker_started,
    .ended = worker_ended,
    .report = worker_report};

/* This worker's admissions per class and tenant, added to the queue's
 * counters for `batch report --queue` (as batch_run.c's record_classes
 * does to the database). Added even when this worker admitted only the
 * default class: other workers of the queue may have had others, and the
 * report sums them all (it leaves them out when nothing tells them apart). */
static void add_classes(const stg_batch *b, stg_queue *q, bool quiet)
{
    stg_run_class *v;
    size_t n;
    int rc = stg__batch_class_rows(b, &v, &n);
    stg_queue_class_add *a = n ? calloc(n, sizeof *a) : NULL;
    if (rc == STG_OK && n && !a)
        rc = STG_ENOMEM;
    for (size_t i = 0; rc == STG_OK && i < n; i++)
        a[i] = (stg_queue_class_add){v[i].cls, v[i].tenant, v[i].admitted, v[i].wait_ms,
                                     v[i].wait_max_ms};
    if (rc == STG_OK && n)
        rc = stg_queue_classes_add(q, a, n);
    if (rc != STG_OK && !quiet)
        fprintf(stderr, "stagger batch: cannot add this worker's admissions per class to the "
                        "queue: %s\n",
                rc == STG_ENOMEM ? "out of memory" : stg_queue_errmsg(q));
    free(v);
    free(a);
}

/* --claim-idle (the table's default: 20 s): a worker renews its claims
 * every claim_idle / 4 while it lives (queue_source.c), so a slow live
 * worker keeps its jobs however long they take, and a dead one's are taken
 * over within claim_idle of its last renewal. */

int batch_queue_run(const batch_opts *o_in)
{
    batch_opts o = *o_in; /* the limiter may be defaulted to the queue's Redis */
    char name[800], lim_url[2048];
    shown(o.queue.url, name, sizeof name);
    int ex = -1;
    stg_batch_queue *qs = NULL;
    bool limiter_open = false;
    if (o.retry_deferred || o.retry_review)
        return cli_usage_error(CMD, "--retry-deferred and --retry-review are for a database; a "
                                    "queue's jobs end once (export them and load a new queue)");
    stg_queue *q = open_queue(o.queue.url, &o.queue, &o.limiter.tls, &ex);
    if (!q)
        return ex;
    if (o.input && (ex = load_input(&o, q, name)) >= 0)
        goto out;
    stg_queue_counts c;
    if (stg_queue_counts_get(q, &c) != STG_OK) {
        fprintf(stderr, "stagger batch: queue %s: %s\n", name, stg_queue_errmsg(q));
        ex = CLI_EXIT_LIMITER;
        goto out;
    }
    if (c.total == 0 && !o.queue.follow) {
        fprintf(stderr, "stagger batch: queue %s holds no jobs: load it with an INPUT (or wait "
                        "with --follow)\n", name);
        ex = CLI_EXIT_USAGE;
        goto out;
    }
    if (!o.limiter.url && !(o.eng.rate_given && o.eng.rate == 0)) {
        limiter_url_of(o.queue.url, lim_url, sizeof lim_url);
        o.limiter.url = lim_url;
        o.limiter.url_has_key = false;
    }
    if ((ex = batch_prepare_out(o.out_dir)) >= 0)
        goto out;
    stg_batch_config bc;
    limiter_open = true;
    if ((ex = batch_config(&o, &bc)) != 0)
        goto out;
    ex = -1;
    char out_abs[4096] = "";
    if (o.out_dir && !realpath(o.out_dir, out_abs))
        snprintf(out_abs, sizeof out_abs, "%s", o.out_dir);
    stg_batch_queue_config qc = {.queue = q,
                                 .follow = o.queue.follow,
                                 .outage_us = o.queue.wait_us,
                                 .out_dir = o.out_dir ? out_abs : NULL,
                                 .claim_idle_us = o.queue.claim_idle_us};
    if (!(qs = stg__batch_queue_new(&qc))) {
        ex = CLI_EXIT_FAILED;
        goto out;
    }
    bc.engine.shared = stg__batch_queue_limiter(qs, bc.engine.shared);
    bc.engine.shared_quotas = stg__batch_queue_quotas(qs, bc.engine.shared_quotas);
    bc.engine.limiter = STG_LIMITER_NONE; /* the shared one (or none, --rate 0) */
    bc.source = stg__batch_queue_source(qs);
    worker_run w = {.o = &o, .q = q, .qs = qs, .name = name, .c = c, .ended0 = ended(&c)};
    ex = batch_run_with(&o, &bc, &WORKER, &w);
out:
    if (limiter_open)
        cli_limiter_close(&o.limiter);
    stg__batch_queue_free(qs);
    stg_queue_free(q);
    return ex;
}

#else /* no Redis: --queue is refused by its option */
int batch_queue_run(const struct batch_opts *o)
{
    (void)o;
    return CLI_EXIT_USAGE;
}
int batch_queue_report(const char *url, bool json, cli_redis_tls *tls)
{
    (void)url, (void)json, (void)tls;
    fprintf(stderr, "stagger batch: --queue needs Redis support\n");
    return CLI_EXIT_USAGE;
}
int batch_queue_export(const char *url, const stg_export_options *eo, const char *out_path,
                       cli_redis_tls *tls)
{
    (void)url, (void)eo, (void)out_path, (void)tls;
    fprintf(stderr, "stagger batch: --queue needs Redis support\n");
    return CLI_EXIT_USAGE;
}
#endif

#else
typedef int stg__batch_queue_cli_unused;
#endif
