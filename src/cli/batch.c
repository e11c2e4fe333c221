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

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch/report.h"
#include "cli/batch_run.h"
#include "cli/cli.h"
#include "cli/report_html.h"
#include "util/http_field.h"

#define CMD "batch"

/* The database of an input: INPUT.stagger.db beside it (ids.txt ->
 * ids.txt.stagger.db), so two inputs in one directory never share one (a
 * second would be "another job set"); stdin's is stagger-batch.db in the
 * current directory. */
static char *default_db(const char *input)
{
    if (!input || !strcmp(input, "-"))
        return strdup("stagger-batch.db");
    size_t n = strlen(input);
    char *p = malloc(n + sizeof ".stagger.db");
    if (p) {
        memcpy(p, input, n);
        memcpy(p + n, ".stagger.db", sizeof ".stagger.db");
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
        if (stg__job_state_parse(t, &s) != STG_OK)
            return -1;
        *mask |= 1u << s;
    }
    return *mask ? 0 : -1;
}

static int open_ro(const char *db, int64_t busy_us, stg_store **s)
{
    char err[640];
    stg_store_options so = {.readonly = true, .busy_timeout_us = busy_us};
    int rc = stg__store_open(db, &so, s, err, sizeof err);
    if (rc != STG_OK) {
        fprintf(stderr, "stagger batch: %s\n", err);
        return rc == STG_ENOTFOUND ? CLI_EXIT_USAGE : CLI_EXIT_DB;
    }
    return 0;
}

/* ---- report and export ------------------------------------------------------- */

typedef struct ro_opts {
    const char *db, *input;
    const char *queue; /* --queue URL: read the work queue instead */
    const char *html;  /* report --html FILE */
    bool json, bad_lines;
    int64_t busy;
    const char *out_path;
    stg_export_options eo;
    cli_redis_tls tls; /* --redis-cacert ... for a rediss:// --queue */
} ro_opts;

static int opt_busy_any(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    if (!cli_parse_duration(v, field))
        return cli_usage_error(CMD, "bad value '%s' for %s", v, p->spelled);
    return 0;
}

/* v's index among names[0..n) into *out, or the usage error that says
 * which were expected. */
static int one_of(cli_parser *p, const char *v, const char *const *names, size_t n,
                  const char *expected, int *out)
{
    *out = -1; /* set on every path: gcc -O3 cannot see cli_opt_bad is never 0 */
    for (size_t i = 0; i < n; i++)
        if (names[i] && !strcmp(v, names[i])) {
            *out = (int)i;
            return 0;
        }
    return cli_opt_bad(p, v, expected);
}
#define ONE_OF(p, v, names, expected, out)                                                    \
    one_of(p, v, names, sizeof names / sizeof names[0], expected, out)

static const char *const EXPORT_FORMATS[] = {[STG_EXPORT_JSONL] = "jsonl",
                                             [STG_EXPORT_JSON] = "json",
                                             [STG_EXPORT_CSV] = "csv"};

static int opt_format(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    int i;
    int rc = ONE_OF(p, v, EXPORT_FORMATS, "expected json, jsonl or csv", &i);
    if (rc == 0)
        ((stg_export_options *)field)->format = (stg_export_format)i;
    return rc;
}

static int opt_state(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)p, (void)o;
    if (parse_states(v, field) != 0)
        return cli_usage_error(CMD,
                               "bad value '%s' for --state: expected pending, inflight, "
                               "done, failed, deferred or review",
                               v);
    return 0;
}

/* report and export take the input instead of --db: its default database. */
static int ro_positional(cli_parser *p, const char *arg)
{
    ro_opts *ro = p->ctx;
    if (ro->input)
        return cli_usage_error(CMD, "%s takes one input (got '%s' and '%s')",
                               p->cmd->name + strlen("batch "), ro->input, arg);
    ro->input = arg;
    return 0;
}

/* The database report/export read: --db, else INPUT's, else stdin's. */
static int ro_db(ro_opts *ro, char **owned)
{
    *owned = NULL;
    if (ro->db && ro->input)
        return cli_usage_error(CMD, "give INPUT or --db FILE, not both");
    if (ro->db)
        return 0;
    if (!(*owned = default_db(ro->input)))
        return cli_usage_error(CMD, "out of memory");
    ro->db = *owned;
    return 0;
}

#define R(x) offsetof(ro_opts, x)
static const cli_opt report_table[] = {
    {CLI_STRING, "db", 0, "FILE",
     "the database (default INPUT.stagger.db, or\nstagger-batch.db without INPUT)", R(db), NULL,
     NULL, 0, NULL},
    {CLI_FLAG, "json", 0, NULL, "the report as JSON", R(json), NULL, NULL, 0, NULL},
    {CLI_STRING, "html", 0, "FILE",
     "also write the report as one HTML file with charts\n(the timeline, job durations; "
     "Chart.js inside)",
     R(html), NULL, NULL, 0, NULL},
    {CLI_STRING, "queue", 0, "URL", "report on the work queue at URL instead (see QUEUE)",
     R(queue), NULL, NULL, 0, NULL},
    {.kind = CLI_GROUP, .group = cli_redis_tls_opts, .off = R(tls)},
    {CLI_FLAG, "bad-lines", 0, NULL, "also list the input lines that were skipped", R(bad_lines),
     NULL, NULL, 0, NULL},
    {CLI_FN, "busy-timeout", 0, "D", "wait this long for a locked database", R(busy),
     opt_busy_any, NULL, 0, NULL, "0"},
    CLI_OPT_HELP_ENTRY,
    CLI_OPT_VERSION_ENTRY,
    CLI_OPT_END,
};

static const cli_opt export_table[] = {
    {CLI_STRING, "db", 0, "FILE",
     "the database (default INPUT.stagger.db, or\nstagger-batch.db without INPUT)", R(db), NULL,
     NULL, 0, NULL},
    {CLI_FN, "format", 0, "json|jsonl|csv",
     "one JSON object a line (jsonl), one JSON array\n(json) or CSV", R(eo),
     opt_format, NULL, 0, NULL, "jsonl"},
    {CLI_STRING, "output", 'o', "FILE", "write to FILE (default standard output)", R(out_path),
     NULL, NULL, 0, NULL},
    {CLI_FN, "state", 0, "STATE[,STATE...]",
     "only jobs in these states: pending, inflight, done,\nfailed, deferred, review",
     R(eo.state_mask), opt_state, NULL, 0, NULL,
     .values = "pending inflight done failed deferred review"},
    {CLI_FLAG, "bodies", 0, NULL, "include the response bodies", R(eo.bodies), NULL, NULL, 0, NULL},
    {CLI_STRING, "queue", 0, "URL", "export the work queue at URL instead (see QUEUE)",
     R(queue), NULL, NULL, 0, NULL},
    {.kind = CLI_GROUP, .group = cli_redis_tls_opts, .off = R(tls)},
    {CLI_FN, "busy-timeout", 0, "D", "wait this long for a locked database", R(busy),
     opt_busy_any, NULL, 0, NULL, "0"},
    CLI_OPT_HELP_ENTRY,
    CLI_OPT_VERSION_ENTRY,
    CLI_OPT_END,
};
#undef R

static const int ro_exits[] = {CLI_EXIT_OK, CLI_EXIT_FAILED, CLI_EXIT_USAGE, CLI_EXIT_DB, -1};

const cli_command cli_batch_report_command = {
    .name = "batch report",
    .usage = "usage: stagger batch report [--db FILE | INPUT] [--json] [--bad-lines]\n"
             "                            [--html FILE]\n"
             "\n"
             "Counts per state, the jobs that need attention and the policy of the job set,\n"
             "read-only (see REPORT in stagger-batch(1)).\n",
    .opts = report_table,
    .exits = ro_exits,
};

const cli_command cli_batch_export_command = {
    .name = "batch export",
    .usage = "usage: stagger batch export [--db FILE | INPUT] [--format json|jsonl|csv]\n"
             "                            [-o FILE] [--state STATE[,STATE...]] [--bodies]\n"
             "\n"
             "One record per job, read-only (see EXPORT in stagger-batch(1)).\n",
    .opts = export_table,
    .exits = ro_exits,
};

static int cmd_report(int argc, char **argv)
{
    ro_opts ro = {0};
    cli_parser parser = {.cmd = &cli_batch_report_command, .ctx = &ro, .positional = ro_positional};
    int prc = cli_parse(&parser, argc, argv);
    if (prc >= 0)
        return prc;
    if (ro.queue && (ro.html || ro.bad_lines))
        return cli_usage_error(CMD, "--html and --bad-lines read a database: a queue keeps no "
                                    "timeline and no bad lines (the load prints them)");
    if (ro.queue)
        return batch_queue_report(ro.queue, ro.json, &ro.tls);
    if ((prc = cli_redis_tls_config(&ro.tls, CMD, NULL)) != 0)
        return prc;
    char *owned;
    if ((prc = ro_db(&ro, &owned)) != 0)
        return prc;
    const char *db = ro.db;
    if (cli_defaults_probe()) { /* help --defaults: what the report would read with */
        cli_defaults_row(&cli_batch_report_command, "busy-timeout", CLI_VAL_DURATION, ro.busy);
        free(owned);
        return CLI_EXIT_OK;
    }
    stg_store *s;
    int ex = open_ro(db, ro.busy, &s);
    if (ex) {
        free(owned);
        return ex;
    }
    stg_batch_report r;
    int rc = stg__batch_report_store(s, db, &r);
    if (rc == STG_OK) {
        (void)batch_report_out(&r, ro.json, CLI_EXIT_OK); /* a failed stdout: below */
        if (ro.bad_lines)
            rc = stg__store_bad_lines_print(s, r.store.input_path, 0, stdout);
        if (rc == STG_OK && ro.html && (ex = cli_report_html(ro.html, s, &r)) != 0) {
            stg__batch_report_free(&r);
            stg__store_close(s);
            free(owned);
            return ex;
        }
        stg__batch_report_free(&r);
    }
    if (rc != STG_OK)
        fprintf(stderr, "stagger batch: %s\n", stg__store_errmsg(s));
    stg__store_close(s);
    free(owned);
    if (fflush(stdout) != 0)
        return CLI_EXIT_FAILED;
    return rc == STG_OK ? CLI_EXIT_OK : CLI_EXIT_DB;
}

static int export_db(ro_opts *ro);

static int cmd_export(int argc, char **argv)
{
    ro_opts ro = {0}; /* --format: the table's default */
    cli_parser parser = {.cmd = &cli_batch_export_command, .ctx = &ro, .positional = ro_positional};
    int prc = cli_parse(&parser, argc, argv);
    if (prc >= 0)
        return prc;
    if (ro.queue)
        return batch_queue_export(ro.queue, &ro.eo, ro.out_path, &ro.tls);
    if ((prc = cli_redis_tls_config(&ro.tls, CMD, NULL)) != 0)
        return prc;
    char *owned;
    if ((prc = ro_db(&ro, &owned)) != 0)
        return prc;
    if (cli_defaults_probe()) { /* help --defaults: what the export would run with */
        const cli_command *c = &cli_batch_export_command;
        cli_defaults_row(c, "format", CLI_VAL_STRING, EXPORT_FORMATS[ro.eo.format]);
        cli_defaults_row(c, "busy-timeout", CLI_VAL_DURATION, ro.busy);
        free(owned);
        return CLI_EXIT_OK;
    }
    int ex = export_db(&ro);
    free(owned);
    return ex;
}

FILE *batch_export_out(const char *path)
{
    if (!path || !strcmp(path, "-"))
        return stdout;
    FILE *out = cli_open_private(path, CLI_OPEN_TRUNCATE, NULL);
    if (!out)
        perror(path);
    return out;
}

int batch_export_done(FILE *out, const char *path, int ex)
{
    if (out == stdout ? fflush(out) != 0 : fclose(out) != 0) {
        if (ex == CLI_EXIT_OK)
            perror(path ? path : "stdout");
        return ex == CLI_EXIT_OK ? CLI_EXIT_FAILED : ex;
    }
    return ex;
}

static int export_db(ro_opts *ro)
{
    stg_store *s;
    int ex = open_ro(ro->db, ro->busy, &s);
    if (ex)
        return ex;
    FILE *out = batch_export_out(ro->out_path);
    if (!out) {
        stg__store_close(s);
        return CLI_EXIT_FAILED;
    }
    int rc = stg__store_export(s, &ro->eo, out);
    if (rc != STG_OK)
        fprintf(stderr, "stagger batch: %s\n", stg__store_errmsg(s));
    stg__store_close(s);
    ex = rc == STG_OK ? CLI_EXIT_OK : rc == STG_EIO ? CLI_EXIT_FAILED : CLI_EXIT_DB;
    return batch_export_done(out, ro->out_path, ex);
}

/* ---- a run ------------------------------------------------------------------------ */

typedef struct run_opts {
    batch_opts b;
    const char *db;
    char **owned; /* -H @FILE buffers and --secret-header-env lines (ours) */
    size_t n_owned;
} run_opts;

/* Keep str (ours) until the run ends; false (str freed) when out of memory. */
static bool keep(run_opts *ro, char *str)
{
    char **list = realloc(ro->owned, (ro->n_owned + 1) * sizeof *list);
    if (!list) {
        free(str);
        return false;
    }
    ro->owned = list;
    ro->owned[ro->n_owned++] = str;
    return true;
}

static int opt_input_format(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    static const char *const names[] = {[STG_INPUT_AUTO] = "auto",   [STG_INPUT_URLS] = "urls",
                                        [STG_INPUT_KEYS] = "keys",   [STG_INPUT_JSONL] = "jsonl",
                                        [STG_INPUT_CSV] = "csv",     [STG_INPUT_TSV] = "tsv"};
    int i;
    int rc = ONE_OF(p, v, names, "expected auto, urls, keys, jsonl, csv or tsv", &i);
    if (rc == 0)
        *(stg_input_format *)field = (stg_input_format)i;
    return rc;
}

static int opt_method(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    if (stg_method_parse(v) == STG_METHOD_UNKNOWN || stg_method_parse(v) == STG_METHOD_CONNECT)
        return cli_opt_bad(p, v, "expected an HTTP method such as GET or POST (upper case)");
    *(const char **)field = v;
    return 0;
}

static int add_header(void *ctx, const char *line, bool secret)
{
    (void)secret; /* every -H of batch is kept out of the database already */
    batch_opts *b = &((run_opts *)ctx)->b;
    const char **hs = realloc(b->headers, (b->n_headers + 1) * sizeof *hs);
    if (!hs)
        return cli_usage_error(CMD, "out of memory");
    b->headers = hs;
    b->headers[b->n_headers++] = line;
    return 0;
}

/* -H: the same lines fetch takes (cli_header_arg), @FILE included, except
 * the fields batch input may not set (stg__http_batch_refused): a usage
 * error. */
static int opt_header(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)p, (void)o;
    char *buf = NULL;
    int rc = cli_header_arg(CMD, v, stg__http_batch_refused, add_header, field, &buf);
    if (buf && !keep(field, buf) && !rc)
        rc = cli_usage_error(CMD, "out of memory");
    return rc;
}

static int opt_header_env(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)p, (void)o;
    char *line = NULL;
    int rc = cli_header_env(CMD, v, stg__http_batch_refused, &line);
    if (rc)
        return rc;
    if (!keep(field, line))
        return cli_usage_error(CMD, "out of memory");
    return add_header(field, line, true);
}

static int opt_progress(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    static const char *const names[] = {[BATCH_PROGRESS_AUTO] = "auto",
                                        [BATCH_PROGRESS_BAR] = "bar",
                                        [BATCH_PROGRESS_LINES] = "lines",
                                        [BATCH_PROGRESS_NONE] = "none"};
    int i;
    int rc = ONE_OF(p, v, names, "expected auto, bar, lines or none", &i);
    if (rc == 0)
        *(enum batch_progress *)field = (enum batch_progress)i;
    return rc;
}

static int opt_progress_interval(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    int64_t d;
    if (!cli_parse_duration(v, &d) || d < STG_MS(100))
        return cli_opt_bad(p, v, "expected a duration of at least 100ms");
    *(int64_t *)field = d;
    return 0;
}

/* --json-body TEMPLATE: the body template, JSON (values escaped, the result
 * checked, Content-Type: application/json). */
static int opt_json_body(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    stg_input_options *in = field;
    if (in->body_template && !in->json_body)
        return cli_opt_bad(p, v, "-d and --json-body both give the body: one of them");
    in->body_template = v;
    in->json_body = true;
    return 0;
}

static int opt_data(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    stg_input_options *in = field;
    if (in->json_body)
        return cli_opt_bad(p, v, "-d and --json-body both give the body: one of them");
    in->body_template = v;
    return 0;
}

/* A {name} placeholder (letters, digits, _ - .) somewhere in s. */
static bool has_placeholder(const char *s)
{
    for (const char *p = s; (p = strchr(p, '{')); p++) {
        size_t n = strspn(p + 1, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                 "0123456789_-.");
        if (n && p[1 + n] == '}')
            return true;
    }
    return false;
}

/* CSV/TSV: the -H whose values name columns move from the run's headers
 * (the same for every request) to the input's header templates (filled
 * per row, the job's own). */
static int split_header_templates(batch_opts *o, run_opts *ro)
{
    size_t nt = 0, k = 0;
    for (size_t i = 0; i < o->n_headers; i++)
        nt += has_placeholder(o->headers[i]);
    if (!nt)
        return -1;
    const char **t = malloc(nt * sizeof *t);
    if (!t || !keep(ro, (char *)t)) /* keep frees it when it fails */
        return cli_usage_error(CMD, "out of memory");
    nt = 0;
    for (size_t i = 0; i < o->n_headers; i++) {
        if (has_placeholder(o->headers[i]))
            t[nt++] = o->headers[i];
        else
            o->headers[k++] = o->headers[i];
    }
    o->n_headers = k;
    o->in.header_templates = t;
    o->in.n_header_templates = nt;
    return -1;
}

static int run_positional(cli_parser *p, const char *arg)
{
    batch_opts *b = &((run_opts *)p->ctx)->b;
    if (b->input)
        return cli_usage_error(CMD, "one input only (got '%s' and '%s')", b->input, arg);
    b->input = arg;
    return 0;
}

#define B(x) offsetof(run_opts, b.x)
static const cli_opt run_table[] = {
    {.kind = CLI_HEADING, .help = "Input (blank lines and lines starting with # are skipped)"},
    {.kind = CLI_TEXT,
     .help = "      INPUT              URLs, one a line, or JSONL requests {\"id\", \"method\",\n"
             "                         \"url\", \"headers\", \"body\"}, or CSV/TSV with a header\n"
             "                         row (.csv/.tsv, with --url naming columns); - reads\n"
             "                         stdin\n"},
    {CLI_STRING, "url", 0, "TEMPLATE",
     "INPUT is a file of keys; {} in TEMPLATE is replaced by\neach key, percent-encoded; "
     "with CSV/TSV input,\n{column} by that column's value, percent-encoded",
     B(in.url_template), NULL, NULL, 0, NULL},
    {CLI_FN, "data", 'd', "TEMPLATE",
     "CSV/TSV input: the request body, {column} replaced\nby the value as is "
     "(method POST unless -X; sent\nas curl -d sends it, form-encoded, unless -H\n"
     "Content-Type says otherwise)",
     B(in), opt_data, NULL, 0, NULL},
    {CLI_FN, "json-body", 0, "TEMPLATE",
     "CSV/TSV input: a JSON request body, {column}\nreplaced by the value JSON-escaped; "
     "a row whose\nfilled body is not JSON is a bad line; sent with\n"
     "Content-Type: application/json (curl's --json)",
     B(in), opt_json_body, NULL, 0, NULL},
    {CLI_STRING, "idempotency-key", 0, "auto|TEMPLATE",
     "an Idempotency-Key for every job (so a POST is\nsafe to resend): auto derives it "
     "from the job's id,\nmethod, URL and body; a CSV/TSV template names\ncolumns "
     "(order-{id})",
     B(in.idempotency_key), NULL, NULL, 0, NULL},
    {CLI_FN, "input-format", 0, "F",
     "auto | urls | keys | jsonl | csv | tsv (auto: csv or\n"
     "tsv by a .csv/.tsv name, else JSONL when the first\nline starts with '{')",
     B(in.format), opt_input_format, NULL, 0, NULL, "auto",
     .values = "auto urls keys jsonl csv tsv"},
    {CLI_FLAG, "dry-run", 0, NULL,
     "print the first requests (redacted) and how many\njobs the input holds; "
     "send nothing, write no database",
     B(dry_run), NULL, NULL, 0, NULL},
    {CLI_FN, "method", 'X', "M", "method of URL and key jobs (default GET)", B(in.method),
     opt_method, NULL, 0, NULL, .values = "GET POST PUT PATCH DELETE HEAD OPTIONS"},
    {CLI_FN, "request", 0, "M", "same as --method", B(in.method), opt_method, NULL, 0, NULL,
     .values = "GET POST PUT PATCH DELETE HEAD OPTIONS"},
    {CLI_FLAG, "strict", 0, NULL,
     "refuse to run when any line is bad (default: report\nbad lines with their numbers and "
     "skip them)",
     B(strict), NULL, NULL, 0, NULL},
    {.kind = CLI_HEADING, .help = "State"},
    {CLI_STRING, "db", 0, "FILE",
     "the database (default: INPUT.stagger.db beside\nINPUT; stagger-batch.db for stdin)",
     offsetof(run_opts, db), NULL, NULL, 0, NULL},
    {CLI_STRING, "out", 0, "DIR",
     "write each response body to DIR/<id> (default: keep\nbodies in the database)", B(out_dir),
     NULL, NULL, 0, NULL},
    {CLI_FLAG, "retry-deferred", 0, NULL, "run the deferred jobs again", B(retry_deferred), NULL,
     NULL, 0, NULL},
    {CLI_FLAG, "retry-review", 0, NULL, "resend the jobs in review", B(retry_review), NULL, NULL, 0,
     NULL},
    {CLI_FN, "busy-timeout", 0, "D", "wait this long for a locked database",
     B(busy_timeout_us), cli_opt_positive_duration, NULL, 0, NULL, "5s"},
    {.kind = CLI_HEADING, .help = "Requests"},
    {CLI_FN, "header", 'H', "'Name: value'",
     "add a header to every request; never stored (put\n"
     "secrets such as Authorization here); with CSV/TSV\n"
     "input {column} in the value is filled per row; @FILE reads\n"
     "headers from FILE, one a line, as fetch -H. Not\n"
     "Content-Length, Transfer-Encoding, Connection,\n"
     "Keep-Alive, Upgrade, TE, Trailer, Host or Proxy-*\n"
     "(nor in JSONL headers: a bad line there)",
     0, opt_header, NULL, 0, NULL},
    {CLI_FN, "secret-header-env", 0, "NAME=VAR",
     "add header NAME with the value of environment\n"
     "variable VAR (keeps a secret out of argv)",
     0, opt_header_env, NULL, 0, NULL},
    {.kind = CLI_GROUP, .group = cli_engine_opts_table, .off = B(eng)},
    {.kind = CLI_GROUP, .group = cli_class_opts, .off = B(cls)},
    {.kind = CLI_HEADING, .help = "Output"},
    {CLI_FLAG, "quiet", 'q', NULL, "no progress and no final report", B(quiet), NULL, NULL, 0,
     NULL},
    {CLI_FLAG, "silent", 's', NULL, "same as --quiet", B(quiet), NULL, NULL, 0, NULL},
    {CLI_FN, "progress", 0, "MODE", "auto (a bar on a terminal, else lines) | bar | lines |\nnone",
     B(progress), opt_progress, NULL, 0, NULL, .values = "auto bar lines none"},
    {CLI_FN, "progress-interval", 0, "D", "period of the plain progress lines",
     B(progress_interval_us), opt_progress_interval, NULL, 0, NULL, "5s"},
    {CLI_FLAG, "json", 0, NULL, "print the final report as JSON", B(json), NULL, NULL, 0, NULL},
    {CLI_STRING, "log", 0, "FILE",
     "JSON-lines event log (URLs and secrets redacted;\n- is standard output)", B(log_path), NULL,
     NULL, 0, NULL},
    {CLI_STRING, "log-json", 0, "FILE", "same as --log", B(log_path), NULL, NULL, 0, NULL},
    {CLI_STRING, "metrics", 0, "FILE",
     "Prometheus text format (the names of fetch --metrics),\nrewritten atomically every "
     "--metrics-interval and at\nthe end; - prints it on stdout at the end",
     B(metrics_path), NULL, NULL, 0, NULL},
    {.kind = CLI_GROUP, .group = cli_metrics_live_opts, .off = B(metrics)},
    CLI_OPT_HELP_ENTRY,
    CLI_OPT_VERSION_ENTRY,
    {.kind = CLI_HEADING, .help = "Shared limit (many processes or machines)"},
    {.kind = CLI_GROUP, .group = cli_limiter_opts, .off = B(limiter)},
    {.kind = CLI_GROUP, .group = cli_redis_tls_opts, .off = B(limiter.tls)},
    {CLI_FLAG, "share-breaker", 0, NULL,
     "keep the circuit breaker in Redis too, so every\nworker sees an open breaker at once",
     B(limiter.share_breaker), NULL, NULL, 0, NULL},
    {.kind = CLI_HEADING, .help = "TLS (https://)"},
    {.kind = CLI_GROUP, .group = cli_tls_opts, .off = B(tls), .man = "stagger-fetch(1)"},
    {.kind = CLI_HEADING, .help = "Work queue (many machines, see QUEUE)"},
    {.kind = CLI_GROUP, .group = cli_batch_queue_opts, .off = B(queue)},
    {.kind = CLI_HEADING, .help = "Retry policy"},
    {.kind = CLI_GROUP, .group = cli_policy_all_opts, .off = B(policy), .man = "stagger-fetch(1)"},
    {.kind = CLI_HEADING, .help = "Timeouts (per attempt)"},
    {.kind = CLI_GROUP, .group = cli_timeout_opts, .off = B(policy)},
    {.kind = CLI_TEXT, .help = cli_durations_help},
    CLI_OPT_END,
};
#undef B

static const int run_exits[] = {
    CLI_EXIT_OK,    CLI_EXIT_FAILED,  CLI_EXIT_USAGE,  CLI_EXIT_LEFT,    CLI_EXIT_DB,
    CLI_EXIT_INPUT, CLI_EXIT_LIMITER, CLI_EXIT_SIGINT, CLI_EXIT_SIGTERM, -1};

/* The policy before the options: the "batch" preset (--help shows its
 * values as the policy options' defaults). */
static void batch_policy_defaults(stg_policy *p)
{
    (void)stg_policy_preset(p, "batch");
}

const cli_command cli_batch_command = {
    .name = CMD,
    .usage = "usage: stagger batch [options] INPUT\n"
             "       stagger batch [options] --url TEMPLATE KEYS\n"
             "       stagger batch [options] --url TEMPLATE [-d TEMPLATE] FILE.csv\n"
             "       stagger batch [options] --db FILE\n"
             "       stagger batch [options] --queue URL [INPUT]\n"
             "       stagger batch report [--db FILE | INPUT] [--json] [--bad-lines]\n"
             "       stagger batch export [--db FILE | INPUT] [--format json|jsonl|csv] [-o FILE]\n"
             "                            [--state STATE[,STATE...]] [--bodies]\n"
             "\n"
             "Run a batch of HTTP requests politely and durably: every job's state is kept\n"
             "in SQLite, so a run that stops (SIGINT, kill -9, a full disk) resumes where it\n"
             "stopped when the same command is run again. Each job ends done, failed\n"
             "(non-retryable answer), deferred (retries ran out, breaker open, or the server\n"
             "asked for a longer wait: kept for --retry-deferred) or review (a non-idempotent\n"
             "request that may have been sent when a run stopped).\n",
    .opts = run_table,
    .epilogue = "The default policy is the \"batch\" preset (its values are the defaults\n"
                "shown above; +-20% jitter).\n"
                "\n"
                "In detail: 1 some jobs failed; 3 some deferred or in review; 4 database\n"
                "problem (locked, read-only, full, another job set); 5 input unreadable,\n"
                "empty, or bad lines with --strict; 6 the shared limiter became unavailable;\n"
                "130 and 143: run the same command again to resume. See stagger-batch(1).\n",
    .exits = run_exits,
    .policy_defaults = batch_policy_defaults,
};

/* Parse the run options into *ro (zeroed by the caller); returns -1 to go
 * on, or an exit status. */
static int parse_run(int argc, char **argv, run_opts *ro)
{
    batch_opts *o = &ro->b;
    cli_engine_opts_init(&o->eng);
    o->progress = BATCH_PROGRESS_AUTO;
    o->limiter.cmd = CMD;
    batch_policy_defaults(&o->policy);
    cli_parser parser = {.cmd = &cli_batch_command, .ctx = ro, .positional = run_positional};
    int prc = cli_parse(&parser, argc, argv);
    if (prc >= 0)
        return prc;
    const char *db = ro->db;
    o->in.format = stg__input_format_for_path(o->input, o->in.format);
    bool tab = o->in.format == STG_INPUT_CSV || o->in.format == STG_INPUT_TSV;
    if (tab && !o->in.url_template)
        return cli_usage_error(CMD, "CSV and TSV input need --url TEMPLATE naming columns, "
                                    "such as --url 'https://api.example/items/{id}'");
    if (o->in.body_template && !tab)
        return cli_usage_error(CMD, "%s TEMPLATE goes with CSV or TSV input",
                               o->in.json_body ? "--json-body" : "-d");
    if (o->in.idempotency_key && strcmp(o->in.idempotency_key, "auto") && !tab)
        return cli_usage_error(CMD, "--idempotency-key TEMPLATE names columns of CSV or TSV "
                                    "input; --idempotency-key auto works with every input");
    if (tab && (prc = split_header_templates(o, ro)) >= 0)
        return prc;
    if (tab && o->in.body_template && !o->in.json_body && !o->quiet &&
        strchr("{[", o->in.body_template[strspn(o->in.body_template, " \t\n")])) {
        bool typed = false;
        for (size_t i = 0; i < o->n_headers; i++)
            typed |= !strncasecmp(o->headers[i], "Content-Type:", 13);
        if (!typed)
            fprintf(stderr, "stagger batch: note: -d sends its body form-encoded "
                            "(application/x-www-form-urlencoded), as curl -d does; for JSON use "
                            "--json-body TEMPLATE\n");
    }
    if (o->in.url_template && !tab && o->in.format != STG_INPUT_AUTO &&
        o->in.format != STG_INPUT_KEYS)
        return cli_usage_error(CMD, "--url goes with a file of keys (--input-format keys) or "
                                    "CSV/TSV input");
    if (o->in.format == STG_INPUT_KEYS && !o->in.url_template)
        return cli_usage_error(CMD, "--input-format keys needs --url TEMPLATE");
    if (o->in.url_template && !tab && !strstr(o->in.url_template, "{}"))
        return cli_usage_error(CMD, "--url TEMPLATE needs a {} where each key goes (or a "
                                    "CSV/TSV input whose columns it names)");
    if (o->dry_run && !o->input)
        return cli_usage_error(CMD, "--dry-run needs an input");
    if (o->in.method && o->in.format == STG_INPUT_JSONL)
        return cli_usage_error(CMD, "-X applies to URL and key inputs; JSONL lines carry "
                                    "their own \"method\"");
    int erc = cli_engine_opts_check(CMD, &o->eng, &o->limiter);
    if (erc)
        return erc;
    if (o->queue.url && db)
        return cli_usage_error(CMD, "--queue keeps the jobs in Redis: no --db");
    if (!o->queue.url && (o->queue.follow || o->queue.drain || o->queue.worker ||
                          o->queue.tuned))
        return cli_usage_error(CMD, "--follow, --drain, --worker, --claim-idle, "
                                    "--max-deliveries and --queue-wait go with --queue URL");
    if (!o->input && !db && !o->queue.url)
        return cli_usage_error(CMD, "no input: give a file of URLs, keys or JSONL requests "
                                    "(or --db FILE to resume)");
    if (!o->input && o->in.url_template)
        return cli_usage_error(CMD, "--url needs a file of keys");
    stg_policy check;
    if (stg_policy_resolve(&o->policy, &check) != STG_OK)
        return cli_usage_error(CMD, "the retry policy is not valid");
    const stg_tls_config *tls;
    if ((prc = cli_tls_config(&o->tls, CMD, &tls)) != 0)
        return prc;
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
    run_opts ro;
    memset(&ro, 0, sizeof ro);
    int ex = parse_run(argc, argv, &ro);
    if (ex < 0)
        ex = batch_run(&ro.b);
    free(ro.b.headers);
    free(ro.b.db);
    for (size_t i = 0; i < ro.n_owned; i++)
        free(ro.owned[i]);
    free(ro.owned);
    return ex;
}

#else
typedef int stg__batch_cli_unused;
#endif
