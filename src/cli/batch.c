/*
 * `stagger batch`: durable, polite batch jobs. This file parses the command
 * line and implements `report` and `export`; the runner is batch_run.c and
 * the state lives in SQLite (src/store).
 *
 * Invariants: usage errors print one line and exit 2 before anything is
 * read or written; report and export open the database read-only and never
 * change it; no secret from the command line (-H values, URLs) is written
 * anywhere by this file.
 */
#ifdef STG_HAVE_STORE

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/batch_run.h"
#include "cli/cli.h"

#define CMD "batch"

static void help(void)
{
    printf(
        "usage: stagger batch [options] INPUT\n"
        "       stagger batch [options] --url TEMPLATE KEYS\n"
        "       stagger batch [options] --db FILE\n"
        "       stagger batch report [--db FILE] [--json] [--bad-lines]\n"
        "       stagger batch export [--db FILE] [--format jsonl|csv] [-o FILE]\n"
        "                            [--state STATE[,STATE...]] [--bodies]\n"
        "\n"
        "Run a batch of HTTP requests politely and durably: every job's state is kept\n"
        "in SQLite, so a run that stops (SIGINT, kill -9, a full disk) resumes where it\n"
        "stopped when the same command is run again. Each job ends done, failed\n"
        "(non-retryable answer), deferred (retries ran out, breaker open, or the server\n"
        "asked for a longer wait: kept for --retry-deferred) or review (a non-idempotent\n"
        "request that may have been sent when a run stopped).\n"
        "\n"
        "Input (blank lines and lines starting with # are skipped):\n"
        "  INPUT                  URLs, one a line, or JSONL requests {\"id\", \"method\",\n"
        "                         \"url\", \"headers\", \"body\"}; - reads stdin\n"
        "  --url TEMPLATE         INPUT is a file of keys; {} in TEMPLATE is replaced by\n"
        "                         each key, percent-encoded\n"
        "  --input-format F       auto | urls | keys | jsonl (default auto: JSONL when\n"
        "                         the first line starts with '{')\n"
        "  -X, --method M         method of URL and key jobs (default GET)\n"
        "  --strict               refuse to run when any line is bad (default: report\n"
        "                         bad lines with their numbers and skip them)\n"
        "\n"
        "State:\n"
        "  --db FILE              the database (default: stagger-batch.db next to INPUT)\n"
        "  --out DIR              write each response body to DIR/<id> (default: keep\n"
        "                         bodies in the database)\n"
        "  --retry-deferred       run the deferred jobs again\n"
        "  --retry-review         resend the jobs in review\n"
        "  --busy-timeout D       wait this long for a locked database (default 5s)\n"
        "\n"
        "Requests:\n"
        "  -H, --header 'N: V'    add a header to every request; never stored (put\n"
        "                         secrets such as Authorization here)\n"
        "  --concurrency N        requests in flight at once (default 30)\n"
        "  --rate R               client-side limit, requests/s per host (token bucket);\n"
        "                         0: no limit; not given: adaptive rate\n"
        "  --burst B              bucket size for --rate (default max(1, ceil(R)))\n"
        "  --max-rate R           adaptive: never above R requests/s\n"
        "  --breaker N            consecutive failures that open a host's circuit\n"
        "                         breaker (default 20; 0: no breaker)\n"
        "  --breaker-open D       how long it stays open (default 30s)\n"
        "  --on-breaker MODE      wait (default: jobs wait for an open breaker to\n"
        "                         half-open, and a spent retry budget lets one retry\n"
        "                         at a time through, within each job's deadline) |\n"
        "                         defer (both defer the host's jobs to a later run)\n"
        "  --no-budget            no retry budget (default: gRPC-style budget per host)\n"
        "  --budget-tokens N      budget size (default 10)\n"
        "  --budget-ratio X       tokens a success gives back (default 0.1)\n"
        "  --max-body BYTES       bytes of each response body kept (default 64 MiB)\n"
        "\n"
        "Output:\n"
        "  -q, --quiet            no progress and no final report\n"
        "  --progress MODE        auto (a bar on a terminal, else lines) | bar | lines |\n"
        "                         none\n"
        "  --progress-interval D  period of the plain progress lines (default 5s)\n"
        "  --json                 print the final report as JSON\n"
        "  --log FILE             JSON-lines event log (URLs and secrets redacted)\n"
        "\n"
        "%s"
        "\n"
        "%s"
        "The default policy is the \"batch\" preset (base 1 s, x2, cap 30 s, +-20%%\n"
        "jitter, 6 retries, 429 and 5xx, 5 min per job).\n"
        "\n"
        "Exit status: 0 all jobs done; 1 some failed; 3 some deferred or in review;\n"
        "2 bad usage; 4 database problem (locked, read-only, full, another job set);\n"
        "5 input unreadable, empty, or bad lines with --strict; 6 the shared limiter\n"
        "became unavailable; 130 interrupted (SIGINT; 143 SIGTERM): run the same\n"
        "command again to resume.\n"
        "See stagger-batch(1).\n",
        cli_limiter_help, cli_policy_help);
}

/* stagger-batch.db in INPUT's directory (the current one for stdin). */
static char *default_db(const char *input)
{
    const char *name = "stagger-batch.db";
    if (!input || !strcmp(input, "-"))
        return strdup(name);
    const char *slash = strrchr(input, '/');
    if (!slash)
        return strdup(name);
    size_t dir = (size_t)(slash - input) + 1;
    char *p = malloc(dir + strlen(name) + 1);
    if (p) {
        memcpy(p, input, dir);
        strcpy(p + dir, name);
    }
    return p;
}

static int parse_states(const char *text, unsigned *mask)
{
    *mask = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", text);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        stg_job_state s;
        if (stg_job_state_parse(t, &s) != STG_OK)
            return -1;
        *mask |= 1u << s;
    }
    return *mask ? 0 : -1;
}

static int open_ro(const char *db, int64_t busy_us, stg_store **s)
{
    char err[640];
    stg_store_options so = {.readonly = true, .busy_timeout_us = busy_us};
    int rc = stg_store_open(db, &so, s, err, sizeof err);
    if (rc != STG_OK) {
        fprintf(stderr, "stagger batch: %s\n", err);
        return rc == STG_ENOTFOUND ? CLI_EXIT_USAGE : BATCH_EXIT_DB;
    }
    return 0;
}

static int cmd_report(int argc, char **argv)
{
    const char *db = "stagger-batch.db";
    bool json = false, bad_lines = false;
    int64_t busy = 0;
    cli_args a;
    cli_args_init(&a, argc, argv);
    const char *opt;
    while (cli_args_next(&a, &opt)) {
        if (!a.name[0])
            return cli_usage_error(CMD, "report takes no arguments (got '%s')", opt);
        if (!strcmp(opt, "--db")) {
            if (!(db = cli_args_value(&a)))
                return cli_missing_value(CMD, opt);
        } else if (!strcmp(opt, "--json")) {
            json = true;
        } else if (!strcmp(opt, "--bad-lines")) {
            bad_lines = true;
        } else if (!strcmp(opt, "--busy-timeout")) {
            const char *v = cli_args_value(&a);
            if (!v)
                return cli_missing_value(CMD, opt);
            if (!cli_parse_duration(v, &busy))
                return cli_usage_error(CMD, "bad value '%s' for %s", v, opt);
        } else if (!strcmp(opt, "-h") || !strcmp(opt, "--help")) {
            help();
            return 0;
        } else {
            return cli_usage_error(CMD, "unknown report option %s", opt);
        }
    }
    stg_store *s;
    int ex = open_ro(db, busy, &s);
    if (ex)
        return ex;
    stg_store_report r;
    int rc = stg_store_report_get(s, &r);
    if (rc == STG_OK) {
        if (json)
            stg_store_report_json(&r, db, stdout);
        else
            stg_store_report_print(&r, db, stdout);
        if (bad_lines)
            rc = stg_store_bad_lines_print(s, r.input_path, 0, stdout);
        stg_store_report_free(&r);
    }
    if (rc != STG_OK)
        fprintf(stderr, "stagger batch: %s\n", stg_store_errmsg(s));
    stg_store_close(s);
    if (fflush(stdout) != 0)
        return 1;
    return rc == STG_OK ? 0 : BATCH_EXIT_DB;
}

static int cmd_export(int argc, char **argv)
{
    const char *db = "stagger-batch.db", *out_path = NULL;
    stg_export_options eo = {.format = STG_EXPORT_JSONL};
    int64_t busy = 0;
    cli_args a;
    cli_args_init(&a, argc, argv);
    const char *opt, *v;
    while (cli_args_next(&a, &opt)) {
        if (!a.name[0])
            return cli_usage_error(CMD, "export takes no arguments (got '%s')", opt);
        if (!strcmp(opt, "-h") || !strcmp(opt, "--help")) {
            help();
            return 0;
        }
        if (!strcmp(opt, "--bodies")) {
            eo.bodies = true;
            continue;
        }
        if (strcmp(opt, "--db") && strcmp(opt, "--format") && strcmp(opt, "-o") &&
            strcmp(opt, "--output") && strcmp(opt, "--state") && strcmp(opt, "--busy-timeout"))
            return cli_usage_error(CMD, "unknown export option %s", opt);
        if (!(v = cli_args_value(&a)))
            return cli_missing_value(CMD, opt);
        if (!strcmp(opt, "--db")) {
            db = v;
        } else if (!strcmp(opt, "--format")) {
            if (!strcmp(v, "jsonl") || !strcmp(v, "json"))
                eo.format = STG_EXPORT_JSONL;
            else if (!strcmp(v, "csv"))
                eo.format = STG_EXPORT_CSV;
            else
                return cli_usage_error(CMD, "bad value '%s' for --format: expected jsonl or csv",
                                       v);
        } else if (!strcmp(opt, "--state")) {
            if (parse_states(v, &eo.state_mask) != 0)
                return cli_usage_error(CMD,
                                       "bad value '%s' for --state: expected pending, "
                                       "inflight, done, failed, deferred or review",
                                       v);
        } else if (!strcmp(opt, "--busy-timeout")) {
            if (!cli_parse_duration(v, &busy))
                return cli_usage_error(CMD, "bad value '%s' for %s", v, opt);
        } else {
            out_path = v;
        }
    }
    stg_store *s;
    int ex = open_ro(db, busy, &s);
    if (ex)
        return ex;
    FILE *out = stdout;
    if (out_path && strcmp(out_path, "-") && !(out = fopen(out_path, "w"))) {
        perror(out_path);
        stg_store_close(s);
        return 1;
    }
    int rc = stg_store_export(s, &eo, out);
    if (rc != STG_OK)
        fprintf(stderr, "stagger batch: %s\n", stg_store_errmsg(s));
    stg_store_close(s);
    if (out != stdout && fclose(out) != 0 && rc == STG_OK) {
        perror(out_path);
        return 1;
    }
    if (rc == STG_EIO)
        return 1;
    return rc == STG_OK ? 0 : BATCH_EXIT_DB;
}

static int bad(const char *opt, const char *v, const char *what)
{
    return cli_usage_error(CMD, "bad value '%s' for %s: %s", v ? v : "", opt, what);
}

/* Parse the run options into *o; returns -1 to go on, or an exit status. */
static int parse_run(int argc, char **argv, batch_opts *o)
{
    memset(o, 0, sizeof *o);
    o->concurrency = 30;
    o->breaker_failures = 20;
    o->breaker_open_us = STG_SEC(30);
    o->defer_on_breaker = false;
    o->budget = true;
    o->progress = BATCH_PROGRESS_AUTO;
    stg_policy_preset(&o->policy, "batch");
    if (cli_policy_preset_first(CMD, argc, argv, &o->policy) != 0)
        return CLI_EXIT_USAGE;
    const char *db = NULL;
    cli_args a;
    cli_args_init(&a, argc, argv);
    const char *opt, *v;
    long long n;
    double x;
    int64_t d;
    while (cli_args_next(&a, &opt)) {
        if (!a.name[0]) {
            if (o->input)
                return cli_usage_error(CMD, "one input only (got '%s' and '%s')", o->input, opt);
            o->input = opt;
            continue;
        }
        /* Flags without a value. */
        if (!strcmp(opt, "-h") || !strcmp(opt, "--help")) {
            help();
            return 0;
        } else if (!strcmp(opt, "--strict")) {
            o->strict = true;
            continue;
        } else if (!strcmp(opt, "--retry-deferred")) {
            o->retry_deferred = true;
            continue;
        } else if (!strcmp(opt, "--retry-review")) {
            o->retry_review = true;
            continue;
        } else if (!strcmp(opt, "--no-budget")) {
            o->budget = false;
            continue;
        } else if (!strcmp(opt, "-q") || !strcmp(opt, "--quiet")) {
            o->quiet = true;
            continue;
        } else if (!strcmp(opt, "--json")) {
            o->json = true;
            continue;
        } else if (!strcmp(opt, "--share-breaker")) {
            o->limiter.share_breaker = true;
            continue;
        }
        if (!(v = cli_args_value(&a)))
            return cli_missing_value(CMD, opt);
        int pr = cli_policy_option(CMD, &o->policy, opt, v);
        if (pr == 0)
            pr = cli_limiter_option(CMD, &o->limiter, opt, v);
        if (pr < 0)
            return CLI_EXIT_USAGE;
        if (pr > 0)
            continue;
        if (!strcmp(opt, "--db")) {
            db = v;
        } else if (!strcmp(opt, "--url")) {
            o->in.url_template = v;
        } else if (!strcmp(opt, "--input-format")) {
            if (!strcmp(v, "auto"))
                o->in.format = STG_INPUT_AUTO;
            else if (!strcmp(v, "urls"))
                o->in.format = STG_INPUT_URLS;
            else if (!strcmp(v, "keys"))
                o->in.format = STG_INPUT_KEYS;
            else if (!strcmp(v, "jsonl"))
                o->in.format = STG_INPUT_JSONL;
            else
                return bad(opt, v, "expected auto, urls, keys or jsonl");
        } else if (!strcmp(opt, "-X") || !strcmp(opt, "--method") || !strcmp(opt, "--request")) {
            if (stg_method_parse(v) == STG_METHOD_UNKNOWN ||
                stg_method_parse(v) == STG_METHOD_CONNECT)
                return bad(opt, v, "expected an HTTP method such as GET or POST (upper case)");
            o->in.method = v;
        } else if (!strcmp(opt, "--out")) {
            o->out_dir = v;
        } else if (!strcmp(opt, "--busy-timeout")) {
            if (!cli_parse_duration(v, &d) || d <= 0)
                return bad(opt, v, "expected a positive duration such as 5s");
            o->busy_timeout_us = d;
        } else if (!strcmp(opt, "-H") || !strcmp(opt, "--header")) {
            const char *colon = strchr(v, ':');
            if (!colon || colon == v || strchr(v, '\r') || strchr(v, '\n'))
                return cli_usage_error(CMD, "bad header for %s: expected 'Name: value'", opt);
            const char **hs = realloc(o->headers, (o->n_headers + 1) * sizeof *hs);
            if (!hs)
                return cli_usage_error(CMD, "out of memory");
            o->headers = hs;
            o->headers[o->n_headers++] = v;
        } else if (!strcmp(opt, "--concurrency") || !strcmp(opt, "-j")) {
            if (!cli_parse_int(v, 1, 10000, &n))
                return bad(opt, v, "expected a whole number from 1 to 10000");
            o->concurrency = (int)n;
        } else if (!strcmp(opt, "--rate")) {
            if (!cli_parse_double(v, 0, 1e6, &x))
                return bad(opt, v, "expected requests per second, 0 for no limit");
            o->rate = x;
            o->rate_given = true;
        } else if (!strcmp(opt, "--burst")) {
            if (!cli_parse_int(v, 1, 1000000, &n))
                return bad(opt, v, "expected a whole number from 1");
            o->burst = n;
        } else if (!strcmp(opt, "--max-rate")) {
            if (!cli_parse_double(v, 0.001, 1e6, &x))
                return bad(opt, v, "expected requests per second");
            o->max_rate = x;
        } else if (!strcmp(opt, "--breaker")) {
            if (!cli_parse_int(v, 0, 1000000, &n))
                return bad(opt, v, "expected a whole number (0: no breaker)");
            o->breaker_failures = (int)n;
        } else if (!strcmp(opt, "--breaker-open")) {
            if (!cli_parse_duration(v, &d) || d <= 0)
                return bad(opt, v, "expected a positive duration such as 30s");
            o->breaker_open_us = d;
        } else if (!strcmp(opt, "--on-breaker")) {
            if (!strcmp(v, "defer"))
                o->defer_on_breaker = true;
            else if (!strcmp(v, "wait"))
                o->defer_on_breaker = false;
            else
                return bad(opt, v, "expected defer or wait");
        } else if (!strcmp(opt, "--budget-tokens")) {
            if (!cli_parse_double(v, 1, 1e6, &x))
                return bad(opt, v, "expected a number from 1");
            o->budget_tokens = x;
        } else if (!strcmp(opt, "--budget-ratio")) {
            if (!cli_parse_double(v, 0.001, 1e6, &x))
                return bad(opt, v, "expected a number from 0.001");
            o->budget_ratio = x;
        } else if (!strcmp(opt, "--max-body")) {
            if (!cli_parse_int(v, 1, (long long)1 << 40, &n))
                return bad(opt, v, "expected a number of bytes");
            o->max_body = (size_t)n;
        } else if (!strcmp(opt, "--progress")) {
            if (!strcmp(v, "auto"))
                o->progress = BATCH_PROGRESS_AUTO;
            else if (!strcmp(v, "bar"))
                o->progress = BATCH_PROGRESS_BAR;
            else if (!strcmp(v, "lines"))
                o->progress = BATCH_PROGRESS_LINES;
            else if (!strcmp(v, "none"))
                o->progress = BATCH_PROGRESS_NONE;
            else
                return bad(opt, v, "expected auto, bar, lines or none");
        } else if (!strcmp(opt, "--progress-interval")) {
            if (!cli_parse_duration(v, &d) || d < STG_MS(100))
                return bad(opt, v, "expected a duration of at least 100ms");
            o->progress_interval_us = d;
        } else if (!strcmp(opt, "--log")) {
            o->log_path = v;
        } else {
            return cli_usage_error(CMD, "unknown option %s (see stagger batch --help)", opt);
        }
    }
    if (o->in.url_template && o->in.format != STG_INPUT_AUTO && o->in.format != STG_INPUT_KEYS)
        return cli_usage_error(CMD, "--url goes with a file of keys (--input-format keys)");
    if (o->in.format == STG_INPUT_KEYS && !o->in.url_template)
        return cli_usage_error(CMD, "--input-format keys needs --url TEMPLATE");
    if (o->in.url_template && !strstr(o->in.url_template, "{}"))
        return cli_usage_error(CMD, "--url TEMPLATE needs a {} where each key goes");
    if (o->in.method && o->in.format == STG_INPUT_JSONL)
        return cli_usage_error(CMD, "-X applies to URL and key inputs; JSONL lines carry "
                                    "their own \"method\"");
    if (o->burst && (!o->rate_given || o->rate == 0))
        return cli_usage_error(CMD, "--burst goes with --rate R (R > 0)");
    if (o->max_rate && o->rate_given)
        return cli_usage_error(CMD, "--max-rate is for the adaptive rate (no --rate)");
    if (o->limiter.url && o->rate_given && o->rate == 0)
        return cli_usage_error(CMD, "--limiter with --rate 0 limits nothing: give --rate R "
                                    "(R > 0), or no --rate to share an adaptive rate");
    if (!o->input && !db)
        return cli_usage_error(CMD, "no input: give a file of URLs, keys or JSONL requests "
                                    "(or --db FILE to resume)");
    if (!o->input && o->in.url_template)
        return cli_usage_error(CMD, "--url needs a file of keys");
    stg_policy check;
    if (stg_policy_resolve(&o->policy, &check) != STG_OK)
        return cli_usage_error(CMD, "the retry policy is not valid");
    o->db = db ? strdup(db) : default_db(o->input);
    if (!o->db)
        return cli_usage_error(CMD, "out of memory");
    return -1;
}

int cli_batch_main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "report"))
        return cmd_report(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "export"))
        return cmd_export(argc - 1, argv + 1);
    batch_opts o;
    int ex = parse_run(argc, argv, &o);
    if (ex < 0)
        ex = batch_run(&o);
    free(o.headers);
    free(o.db);
    return ex;
}

#else
typedef int stg__batch_cli_unused;
#endif
