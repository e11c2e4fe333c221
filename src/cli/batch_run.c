/*
 * `stagger batch`, the run: options -> a libstagger-batch configuration
 * (src/batch), signals, progress drawing, the final report and the exit
 * status. The runner itself (claim, submit, finish, states, counts) is the
 * library; this file only maps and prints.
 *
 * Invariants:
 *  - SIGINT/SIGTERM only set a flag; the loop turns it into
 *    stg__batch_stop() (cancelled jobs go back to pending, review if
 *    non-idempotent and sent), the run row is closed, exit 130/143. A
 *    second signal kills at once (SA_RESETHAND; the next run recovers).
 *  - Every store read failure is exit 4 (CLI_EXIT_DB) with the store's
 *    message: the final counts and the report are read back, never assumed.
 *  - A shared limiter unreachable at start, or lost during the run, is exit
 *    6 (CLI_EXIT_LIMITER), never 1 (1 means "some jobs failed").
 *  - The input is streamed into the store (or checked against the set it
 *    holds) a line at a time, and never held whole. The jobs whose secrets
 *    are not stored get them from the input again: a regular file is read
 *    again by a cursor (nothing kept in memory); stdin or a pipe can be
 *    read once, so the import keeps those jobs' secret parts
 *    (stg_input_secrets), bounded by how many jobs carry secrets.
 *  - Secrets: -H values and the input's secret URLs/headers live in memory
 *    only (see src/batch/runner.c); nothing here prints a URL.
 *  - An input refused for itself (--strict with bad lines, no jobs, a read
 *    error) leaves no database behind when this run created the file.
 *  - SQLite's memory statistics are off in this process (SQLITE_CONFIG_
 *    MEMSTATUS, before SQLite's first use): with them on, every SQLite
 *    malloc and free takes a global mutex, about a tenth of the import's
 *    CPU and a share of every claim and outcome. Nothing here reads them
 *    (no sqlite3_memory_used, no soft heap limit). The program owns that
 *    process-wide setting; the store library never touches it.
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
#include <pthread.h>
#include <sqlite3.h>

#include <stagger/curl.h>
#include <stagger/redact.h>

#include "batch/batch.h"
#include "batch/report.h"
#include "cli/batch_run.h"
#include "cli/cli.h"
#include "cli/progress.h"
#include "util/clock.h"

/* ---- the run's events: waits, for the report ----------------------------------- */

/* Time lost waiting, summed from the engine's WAITED events (the loop's
 * thread): measured, not as scheduled; "retry" is the backoffs, a spent
 * budget's and an open breaker's waits, "limiter" the waits for the rate
 * limit, the servers' quotas and a learned rate's pace (waiting for a
 * place under the run's own concurrency is neither). And the hosts seen:
 * --rate is per host, so the rate the limiter allows the run (the ETA's)
 * is R times the hosts (counted up to MAX_HOSTS).
 * The events also say when a host keeps failing: the first time a host's
 * breaker opens, one line on stderr names the host, its last failure and
 * what the run does about it (issue #37: a closed port ran 3.5 minutes
 * with nothing said). */
#define MAX_HOSTS 64

typedef struct wait_sum {
    int64_t retry_us, limiter_us;
    char *hosts[MAX_HOSTS];
    int n_hosts;
    /* per host seen: the last attempt's failure, and whether it was said */
    stg_net_error last_err[MAX_HOSTS];
    int last_status[MAX_HOSTS];
    bool said[MAX_HOSTS];
    const batch_opts *o;
    progress *pg;            /* to clear the bar before a line; may be NULL */
} wait_sum;

static int see_host(wait_sum *w, const char *host)
{
    if (!host)
        return -1;
    for (int i = 0; i < w->n_hosts; i++)
        if (!strcmp(w->hosts[i], host))
            return i;
    if (w->n_hosts == MAX_HOSTS || !(w->hosts[w->n_hosts] = strdup(host)))
        return -1;
    return w->n_hosts++;
}

/* A transport error in words. */
static const char *net_error_words(stg_net_error e)
{
    switch (e) {
    case STG_NET_CONNECT_REFUSED:
        return "connection refused";
    case STG_NET_RESET:
        return "connection reset, no answer";
    case STG_NET_TIMEOUT:
        return "timed out";
    case STG_NET_CONNECT_TIMEOUT:
        return "connect timed out";
    case STG_NET_DNS:
        return "host name not found";
    case STG_NET_TLS:
        return "TLS failed";
    default:
        return "transport error";
    }
}

/* The line said when host i's breaker opens for the first time. */
static void say_breaker_open(wait_sum *w, int i)
{
    const cli_engine_opts *e = &w->o->eng;
    char what[64];
    if (w->last_status[i] > 0)
        snprintf(what, sizeof what, "HTTP %d", w->last_status[i]);
    else
        snprintf(what, sizeof what, "%s", net_error_words(w->last_err[i]));
    char open_for[32];
    cli_format_duration(e->breaker_open_us, open_for, sizeof open_for);
    if (w->pg)
        progress_clear(w->pg);
    fprintf(stderr,
            "stagger batch: %s keeps failing (%s, %d attempts in a row): its circuit breaker "
            "is open, next try in %s; %s\n",
            w->hosts[i], what, e->breaker_failures, open_for,
            e->defer_on_breaker
                ? "its jobs are deferred meanwhile (--on-breaker defer; run again with "
                  "--retry-deferred)"
                : "its jobs wait for it within --deadline (--on-breaker defer keeps them for "
                  "later instead)");
    w->said[i] = true;
}

static void on_wait_event(const stg_event *ev, void *data)
{
    wait_sum *w = data;
    const char *why = ev->type == STG_EVENT_WAITED && ev->more ? ev->more->waited_for : NULL;
    if (why && (!strcmp(why, "backoff") || !strcmp(why, "budget") || !strcmp(why, "breaker")))
        w->retry_us += ev->wait_us;
    else if (why && (!strcmp(why, "limiter") || !strcmp(why, "quota") || !strcmp(why, "pace")))
        w->limiter_us += ev->wait_us;
    else if (ev->type == STG_EVENT_ATTEMPT_START)
        (void)see_host(w, ev->host);
    else if (ev->type == STG_EVENT_ATTEMPT_END) {
        int i = see_host(w, ev->host);
        if (i >= 0)
            w->last_err[i] = ev->error, w->last_status[i] = ev->status;
    } else if (ev->type == STG_EVENT_BREAKER && ev->breaker_to == STG_BREAKER_OPEN && w->o &&
               !w->o->quiet) {
        int i = see_host(w, ev->host);
        if (i >= 0 && !w->said[i])
            say_breaker_open(w, i);
    }
}

static void wait_sum_free(wait_sum *w)
{
    for (int i = 0; i < w->n_hosts; i++)
        free(w->hosts[i]);
    w->n_hosts = 0;
}

/* ---- the jobs by state, for the metrics and the live page ---------------------
 *
 * The loop copies the runner's counts here (a few times a second); the
 * metrics' printers and the live page's listener read the copy, under its
 * own lock, on their threads: they never touch the runner. */

typedef struct jobs_gauge {
    pthread_mutex_t mu;
    stg_batch_counts c;
    bool set, finished;
    int64_t start_us, ended0; /* the ETA's origin: when and how many had ended */
    int64_t at_us;            /* the copy's time */
    const char *wnames[16];   /* requests waiting now, by what for */
    int64_t wcounts[16];
    size_t nw;
} jobs_gauge;

static void jobs_gauge_set(jobs_gauge *g, const stg_batch_counts *c, int64_t now, bool finished,
                           const stg_engine *e)
{
    const char *names[16];
    int64_t counts[16];
    size_t nw = e ? stg_engine_waiting(e, names, counts, 16) : 0; /* the engine's thread */
    pthread_mutex_lock(&g->mu);
    memcpy(g->wnames, names, nw * sizeof *names);
    memcpy(g->wcounts, counts, nw * sizeof *counts);
    g->nw = nw;
    if (!g->set) {
        g->start_us = now;
        g->ended0 = stg__batch_counts_ended(c);
    }
    g->c = *c;
    g->set = true;
    g->finished = finished;
    g->at_us = now;
    pthread_mutex_unlock(&g->mu);
}

static void jobs_print(FILE *f, void *data)
{
    jobs_gauge *g = data;
    fputs("# HELP stagger_batch_jobs The batch's jobs by state.\n"
          "# TYPE stagger_batch_jobs gauge\n",
          f);
    pthread_mutex_lock(&g->mu);
    for (int i = 0; g->set && i < STG_JOB_NSTATES; i++)
        fprintf(f, "stagger_batch_jobs{state=\"%s\"} %lld\n",
                stg__job_state_name((stg_job_state)i), (long long)g->c.n[i]);
    fputs("# HELP stagger_requests_waiting Requests waiting now, by what for.\n"
          "# TYPE stagger_requests_waiting gauge\n",
          f);
    for (size_t i = 0; i < g->nw; i++)
        fprintf(f, "stagger_requests_waiting{reason=\"%s\"} %lld\n", g->wnames[i],
                (long long)g->wcounts[i]);
    pthread_mutex_unlock(&g->mu);
}

/* {"total", "states": {state: n}, "eta_s" (-1: unknown), "finished",
 * "waiting": {reason: n}}. */
static void *jobs_json(void *data)
{
    jobs_gauge *g = data;
    pthread_mutex_lock(&g->mu);
    json_t *states = json_object();
    for (int i = 0; i < STG_JOB_NSTATES; i++)
        json_object_set_new(states, stg__job_state_name((stg_job_state)i),
                            json_integer((json_int_t)g->c.n[i]));
    /* The ETA: what is left at the pace jobs ended since the run began. */
    double secs = (double)(g->at_us - g->start_us) / 1e6;
    double ended = (double)(stg__batch_counts_ended(&g->c) - g->ended0);
    double left = (double)stg__batch_counts_left(&g->c);
    double eta = left == 0 ? 0 : ended > 0 && secs > 0 ? left / (ended / secs) : -1;
    json_t *waiting = json_object();
    for (size_t i = 0; i < g->nw; i++)
        json_object_set_new(waiting, g->wnames[i], json_integer((json_int_t)g->wcounts[i]));
    json_t *o = json_pack("{s:I,s:o,s:f,s:b,s:o}", "total", (json_int_t)g->c.total, "states",
                          states, "eta_s", eta, "finished", g->finished, "waiting", waiting);
    pthread_mutex_unlock(&g->mu);
    return o;
}

/* ---- progress ---------------------------------------------------------------- */

static void to_state(const stg_batch_counts *c, const stg_batch_progress *p, progress_state *s)
{
    memset(s, 0, sizeof *s);
    s->total = c->total;
    s->ended = stg__batch_counts_ended(c);
    s->left = stg__batch_counts_left(c);
    s->done = c->n[STG_JOB_DONE];
    s->failed = c->n[STG_JOB_FAILED];
    s->deferred = c->n[STG_JOB_DEFERRED];
    s->review = c->n[STG_JOB_REVIEW];
    s->inflight = c->n[STG_JOB_INFLIGHT];
    if (p) {
        s->attempts = p->attempts;
        s->finished = (uint64_t)p->finished;
        s->status_429 = p->status_429;
        s->concurrency = p->concurrency_limit;
    }
}

/* ---- options -> configuration ------------------------------------------------------ */

#define BAD_LINES_SHOWN 20
#define KEYS_HINT_AFTER 3

static bool is_no_url(const char *message)
{
    return !strncmp(message, "no URL", 6);
}

void batch_bad_line(void *data, long line, const char *message)
{
    bad_printer *bp = data;
    if (bp->seen++ == 0)
        bp->all_no_url = true;
    bp->all_no_url = bp->all_no_url && is_no_url(message);
    if (bp->keys_hint && is_no_url(message))
        return;
    if (bp->shown < BAD_LINES_SHOWN) {
        bp->shown++;
        fprintf(stderr, "stagger batch: %s:%ld: %s\n", bp->name, line, message);
    }
    /* the first lines of the file, each a "no URL": keys, most likely */
    if (bp->all_no_url && bp->seen == KEYS_HINT_AFTER && line == (long)bp->seen) {
        fprintf(stderr, "stagger batch: %s: these lines look like keys, not URLs: did you forget "
                        "--url TEMPLATE? (such as --url 'https://api.example/items/{}')\n",
                bp->name);
        bp->keys_hint = true;
    }
}

void batch_bad_lines_tail(const bad_printer *bp, bool written, const char *db)
{
    if (bp->seen <= bp->shown)
        return;
    if (written && db)
        fprintf(stderr, "stagger batch: ... and %zu more bad lines (stagger batch report --db %s "
                        "--bad-lines lists them all)\n",
                bp->seen - bp->shown, db);
    else
        fprintf(stderr, "stagger batch: ... and %zu more bad lines%s\n", bp->seen - bp->shown,
                written ? "" : " (nothing was written)");
}

void batch_say_no_jobs(const bad_printer *bp, const batch_opts *o)
{
    fprintf(stderr, "stagger batch: %s: no jobs in the input%s\n", bp->name,
            bp->all_no_url && !o->in.url_template
                ? ": no line is a URL; if they are keys, give --url TEMPLATE with a {} "
                  "where each key goes"
                : "");
}

static int exit_for_counts(const stg_batch_counts *c)
{
    if (stg__batch_counts_left(c) || c->n[STG_JOB_DEFERRED] || c->n[STG_JOB_REVIEW])
        return CLI_EXIT_LEFT;
    if (c->n[STG_JOB_FAILED])
        return CLI_EXIT_FAILED;
    return CLI_EXIT_OK;
}

/* The engine part of the configuration; connects the shared limiter.
 * Returns 0 or an exit status (after a message). */
int batch_engine_config(const batch_opts *o, stg_engine_config *ec)
{
    /* opts are const, the limiter handle lives as long as the run (closed
     * by batch_run). */
    int rc = cli_engine_config(&o->eng, &o->policy, (cli_limiter *)&o->limiter, ec);
    ec->tls = &o->tls.cfg; /* built by parse_run (cli_tls_config) */
    return rc;
}

int batch_config(const batch_opts *o, stg_batch_config *bc)
{
    *bc = (stg_batch_config){.headers = o->headers,
                             .n_headers = o->n_headers,
                             .out_dir = o->out_dir,
                             .priority = o->cls.priority,
                             .tenant = o->cls.tenant,
                             .weight = o->cls.weight};
    return batch_engine_config(o, &bc->engine);
}

/* The input's reader, when one is given (options checked, file opened;
 * nothing read yet). Returns -1 to go on, or an exit status. */
static int open_input(const batch_opts *o, stg_input_reader **r)
{
    char err[800];
    *r = NULL;
    if (!o->input)
        return -1;
    int rc = stg__input_reader_open(o->input, &o->in, r, err, sizeof err);
    if (rc != STG_OK) {
        fprintf(stderr, "stagger batch: %s\n", err);
        return rc == STG_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_INPUT;
    }
    return -1;
}

/* Stream the input into the store (or check it is the set the store holds),
 * keeping only the secrets of the jobs that need them. Returns -1 to go on,
 * or an exit status; *input_refused when nothing was written because of
 * the input itself (bad lines with --strict, no jobs, a read error). */
static int import_input(const batch_opts *o, stg_store *s, stg_input_reader *r,
                        stg_input_secrets *secrets, bool *imported, bool *input_refused)
{
    const char *name = strcmp(o->input, "-") ? o->input : "stdin";
    bad_printer bp = {.name = name};
    char *abs = strcmp(o->input, "-") ? realpath(o->input, NULL) : NULL;
    stg_store_import_options io = {.input_path = abs ? abs : o->input,
                                   .now_ms = stg__store_now_ms(),
                                   .strict = o->strict,
                                   .on_bad = batch_bad_line,
                                   .bad_data = &bp,
                                   .secrets = secrets};
    stg_store_import_result res;
    int rc = stg__store_import_stream(s, r, &io, &res);
    free(abs);
    batch_bad_lines_tail(&bp, rc == STG_OK && !res.refused, o->db);
    *imported = res.imported;
    *input_refused = rc == STG_EIO || rc == STG_ENOMEM || res.refused;
    if (rc == STG_EIO || rc == STG_ENOMEM) {
        fprintf(stderr, "stagger batch: %s\n", stg__store_errmsg(s));
        return CLI_EXIT_INPUT;
    }
    if (rc == STG_EINVAL) { /* a CSV header, read late, that the templates do not fit */
        *input_refused = true;
        fprintf(stderr, "stagger batch: %s\n", stg__store_errmsg(s));
        return CLI_EXIT_USAGE;
    }
    if (rc != STG_OK) {
        fprintf(stderr, "stagger batch: %s\n", stg__store_errmsg(s));
        return CLI_EXIT_DB;
    }
    if (res.refused && o->strict && res.bad) {
        fprintf(stderr, "stagger batch: refusing to run: %zu bad input line%s (--strict); "
                        "nothing was written\n",
                res.bad, res.bad == 1 ? "" : "s");
        return CLI_EXIT_INPUT;
    }
    if (res.refused) {
        batch_say_no_jobs(&bp, o);
        return CLI_EXIT_INPUT;
    }
    return -1;
}

/* A JSON value with the value of every member whose name is secret
 * (stg_redact_name_is_secret) replaced by "REDACTED", in place. */
static bool redact_json(json_t *v)
{
    bool changed = false;
    if (json_is_object(v)) {
        const char *k;
        json_t *m;
        json_object_foreach(v, k, m)
        {
            if (stg_redact_name_is_secret(k, strlen(k))) {
                json_object_set_new(v, k, json_string("REDACTED"));
                changed = true;
            } else {
                changed |= redact_json(m);
            }
        }
    } else if (json_is_array(v)) {
        size_t i;
        json_t *m;
        json_array_foreach(v, i, m) changed |= redact_json(m);
    }
    return changed;
}

#define DRY_BODY_SHOWN 400 /* characters of a body --dry-run prints */

/* The body as --dry-run shows it, by the one rule of the logs: JSON with
 * the values of secret-named members hidden, form fields (a=b&c=d) the
 * same, other text as is (control characters as '?'), cut at
 * DRY_BODY_SHOWN; a binary body by its size. */
static void print_body(const char *body, size_t len)
{
    json_error_t je;
    json_t *j = json_loadb(body, len, JSON_DECODE_ANY, &je);
    char *text = NULL;
    bool form = false;
    if (j && redact_json(j)) { /* shown re-encoded only when something was hidden */
        text = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
    } else if (len && !memchr(body, '\0', len)) {
        form = !j && memchr(body, '=', len) && !memchr(body, ' ', len) &&
               !memchr(body, '\n', len);
        /* a field "a=" can grow by "REDACTED": at most len / 2 of them */
        if ((text = malloc(len * 5 + 1))) {
            size_t w = 0;
            for (size_t i = 0; i < len;) {
                size_t end = i;
                while (end < len && !(form && body[end] == '&'))
                    end++;
                const char *eq = form ? memchr(body + i, '=', end - i) : NULL;
                if (eq && stg_redact_name_is_secret(body + i, (size_t)(eq - body - i))) {
                    size_t nl = (size_t)(eq - body - i) + 1;
                    memcpy(text + w, body + i, nl);
                    w += nl;
                    memcpy(text + w, "REDACTED", 8);
                    w += 8;
                } else {
                    for (size_t k = i; k < end; k++)
                        text[w++] = (unsigned char)body[k] < 0x20 ? '?' : body[k];
                }
                if (end < len)
                    text[w++] = body[end];
                i = end + 1;
            }
            text[w] = '\0';
        }
    }
    json_decref(j);
    if (!text) {
        printf("  body: %zu bytes\n", len);
        return;
    }
    size_t tl = strlen(text);
    if (tl > DRY_BODY_SHOWN)
        printf("  body: %.*s... (%zu bytes)\n", DRY_BODY_SHOWN, text, len);
    else
        printf("  body: %s\n", text);
    free(text);
}

/* --dry-run: the first requests as they would leave (URLs as an export
 * shows them, header values redacted as in the logs, bodies redacted by
 * the same rule: print_body),
 * then how many jobs and bad lines the whole input holds. Sends nothing,
 * opens no database. Returns the exit status. */
#define DRY_RUN_SHOWN 10

static int dry_run(const batch_opts *o, stg_input_reader *r)
{
    const char *name = strcmp(o->input, "-") ? o->input : "stdin";
    size_t jobs = 0, bad = 0;
    stg_job_spec *j;
    stg_bad_line *b;
    int rc;
    char buf[4096];
    bad_printer bp = {.name = name};
    while ((rc = stg__input_reader_next(r, &j, &b)) == STG_OK && (j || b)) {
        if (b) {
            bad++;
            batch_bad_line(&bp, b->line, b->message);
            continue;
        }
        if (jobs++ >= DRY_RUN_SHOWN)
            continue;
        stg__store_url_shown(j->url, buf, sizeof buf);
        printf("%s %s  (id %s, line %ld)\n", j->method, buf, j->key, j->line);
        for (size_t i = 0; i < o->n_headers; i++) {
            stg_redact_header_line(o->headers[i], NULL, buf, sizeof buf);
            printf("  %s\n", buf);
        }
        for (size_t i = 0; i < j->n_headers; i++) {
            stg_redact_header_line(j->headers[i], NULL, buf, sizeof buf);
            printf("  %s\n", buf);
        }
        if (j->idempotency_key)
            printf("  Idempotency-Key: %s\n", j->idempotency_key);
        if (j->body)
            print_body(j->body, j->body_len);
    }
    if (rc != STG_OK) {
        fprintf(stderr, "stagger batch: %s\n", stg__input_reader_error(r));
        return CLI_EXIT_INPUT;
    }
    if (jobs > DRY_RUN_SHOWN)
        printf("... and %zu more\n", jobs - DRY_RUN_SHOWN);
    printf("dry run: %zu job%s, %zu bad line%s in %s (%s); nothing sent, no database "
           "written\n",
           jobs, jobs == 1 ? "" : "s", bad, bad == 1 ? "" : "s", name,
           stg__input_format_name(stg__input_reader_format(r)));
    if (fflush(stdout) != 0)
        return CLI_EXIT_FAILED;
    return jobs ? CLI_EXIT_OK : CLI_EXIT_INPUT;
}

/* Open the database (*created: the file did not exist before) and import
 * the input when given. Returns -1 or an exit status. */
static int open_db(const batch_opts *o, stg_input_reader *r, stg_input_secrets *secrets,
                   stg_store **s, bool *imported, bool *created, bool *input_refused)
{
    char err[800];
    stg_store_options so = {.create = o->input != NULL,
                            .exclusive = true,
                            .busy_timeout_us = o->busy_timeout_us};
    struct stat st;
    *created = stat(o->db, &st) != 0 && errno == ENOENT;
    *imported = *input_refused = false;
    int rc = stg__store_open(o->db, &so, s, err, sizeof err);
    if (rc != STG_OK) {
        fprintf(stderr, "stagger batch: %s\n", err);
        return rc == STG_ENOTFOUND && !o->input ? CLI_EXIT_USAGE : CLI_EXIT_DB;
    }
    if (r)
        return import_input(o, *s, r, secrets, imported, input_refused);
    bool has = false;
    if ((rc = stg__store_has_jobs(*s, &has)) == STG_OK && !has) {
        fprintf(stderr, "stagger batch: the database holds no jobs: give an input\n");
        return CLI_EXIT_USAGE;
    }
    if (rc != STG_OK) {
        fprintf(stderr, "stagger batch: %s\n", stg__store_errmsg(*s));
        return CLI_EXIT_DB;
    }
    return -1;
}

/* The run's cursor over the input file (read again for the jobs whose
 * secrets are not stored). Returns -1 or an exit status. */
static int open_cursor(const batch_opts *o, stg_input_cursor **c)
{
    char err[800];
    int rc = stg__input_cursor_open(o->input, &o->in, c, err, sizeof err);
    if (rc != STG_OK) {
        fprintf(stderr, "stagger batch: %s\n", err);
        return CLI_EXIT_INPUT;
    }
    return -1;
}

/* A database file this run created for an input it then refused is
 * removed: a refused input leaves nothing behind (as --strict promises). */
static void remove_created(const char *db)
{
    static const char *const tails[] = {"", "-wal", "-shm", "-journal"};
    for (size_t i = 0; i < sizeof tails / sizeof tails[0]; i++) {
        char path[4096];
        if ((size_t)snprintf(path, sizeof path, "%s%s", db, tails[i]) < sizeof path)
            (void)unlink(path);
    }
}

int batch_prepare_out(const char *dir)
{
    if (!dir)
        return -1;
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "stagger batch: --out %s: %s\n", dir, strerror(errno));
        return CLI_EXIT_DB;
    }
    struct stat st;
    if (lstat(dir, &st) == 0 && S_ISLNK(st.st_mode)) {
        fprintf(stderr, "stagger batch: --out %s is a symbolic link: give the directory it "
                        "points to (bodies are written only into a directory that is no link)\n",
                dir);
        return CLI_EXIT_DB;
    }
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "stagger batch: --out %s: not a directory\n", dir);
        return CLI_EXIT_DB;
    }
    return -1;
}

static void say_start(const batch_opts *o, const stg_batch_start *st, bool imported,
                      const stg_batch_counts *c)
{
    if (o->quiet)
        return;
    if (imported)
        fprintf(stderr, "stagger batch: %lld jobs imported into %s\n", (long long)st->total,
                o->db);
    else
        fprintf(stderr,
                "stagger batch: resuming %s: %lld done, %lld failed, %lld deferred, "
                "%lld review, %lld to run\n",
                o->db, (long long)c->n[STG_JOB_DONE], (long long)c->n[STG_JOB_FAILED],
                (long long)c->n[STG_JOB_DEFERRED], (long long)c->n[STG_JOB_REVIEW],
                (long long)c->n[STG_JOB_PENDING]);
    if (st->recovered_pending)
        fprintf(stderr, "stagger batch: %d jobs were in flight when the last run stopped; "
                        "they run again (at-least-once)\n",
                st->recovered_pending);
    if (st->recovered_review)
        fprintf(stderr, "stagger batch: %d non-idempotent jobs were in flight and may have "
                        "been sent: marked review (resend with --retry-review)\n",
                st->recovered_review);
    if (st->requeued_deferred)
        fprintf(stderr, "stagger batch: %d deferred jobs run again\n", st->requeued_deferred);
    if (st->requeued_review)
        fprintf(stderr, "stagger batch: %d jobs in review are resent\n", st->requeued_review);
}

/* The exit status of an ended run (the database's or the queue's), after
 * its one line on stderr when say: a stop's cause, or `interrupted` (NULL:
 * the database's "N jobs left, run the same command again") when a signal
 * ended it; else from the counts (jobs left, deferred or in review: 3;
 * failed: 1; 0). */
static int batch_verdict(const stg_batch_summary *s, int sig, bool quiet, bool say,
                  const char *interrupted)
{
    if (!say)
        quiet = true;
    switch (s->cause) {
    case STG_BATCH_STORE:
    case STG_BATCH_BODY:
        if (say)
            fprintf(stderr, "stagger batch: stopped: %s\n", s->message);
        return CLI_EXIT_DB;
    case STG_BATCH_LIMITER:
        if (say)
            fprintf(stderr, "stagger batch: stopped: %s\n", s->message);
        return CLI_EXIT_LIMITER;
    case STG_BATCH_NEEDS_INPUT:
        if (say)
            fprintf(stderr, "stagger batch: stopped: %s\n", s->message);
        return CLI_EXIT_USAGE;
    default:
        break;
    }
    if (sig) {
        if (!quiet && interrupted)
            fprintf(stderr, "stagger batch: %s\n", interrupted);
        else if (!quiet)
            fprintf(stderr, "stagger batch: interrupted; %lld jobs left, run the same command "
                            "again to resume\n",
                    (long long)stg__batch_counts_left(&s->counts));
        return sig == SIGINT ? CLI_EXIT_SIGINT : CLI_EXIT_SIGTERM;
    }
    return exit_for_counts(&s->counts);
}

/* The run's admissions per class and tenant, into the database for
 * `batch report` (only when the run had classes or tenants to order). */
static int record_classes(const stg_batch *b, stg_store *store)
{
    stg_run_class *v;
    size_t n;
    int err = stg__batch_class_rows(b, &v, &n);
    /* every request normal, no tenant: nothing to tell apart */
    if (err == STG_OK && (n > 1 || (n == 1 && (v[0].tenant || strcmp(v[0].cls, "normal")))))
        err = stg__store_run_classes_add(store, v, n);
    free(v);
    return err;
}

/* The final report, read back from the database (*got: rep holds it, the
 * caller frees it): a failed read is exit 4. Nothing is read when nothing
 * is printed (--quiet without --json, or no progress line to finish). */
static int read_report(const batch_opts *o, stg_store *s, stg_batch_report *rep, bool *got,
                       int ex)
{
    *got = false;
    if (o->quiet && !o->json)
        return ex;
    if (stg__batch_report_store(s, o->db, rep) != STG_OK) {
        fprintf(stderr, "stagger batch: cannot read the final report: %s\n",
                stg__store_errmsg(s));
        return CLI_EXIT_DB;
    }
    *got = true;
    return ex;
}

int batch_report_out(const stg_batch_report *r, bool json, int ex)
{
    int rc = json ? stg__batch_report_json(r, stdout) : stg__batch_report_text(r, stdout);
    if (fflush(stdout) != 0 || rc != STG_OK)
        return ex == CLI_EXIT_OK ? CLI_EXIT_FAILED : ex;
    return ex;
}

/* The loop of a run, the database's and a queue worker's: one step of the
 * runner after another until it ends; SIGINT/SIGTERM
 * (cli_stop_signals_catch) stop it, or with drain_first the first one
 * drains (the claimed jobs finish, nothing more is claimed) and a second
 * stops; the jobs gauge is refreshed for the metrics; the progress is
 * drawn by progress.c on pg (set up here, closed by batch_run_end), with
 * what facts adds (a queue worker's). */
typedef struct batch_loop_more {
    bool drain_first;
    const wait_sum *waits; /* the ETA's limit is --rate times its hosts */
    jobs_gauge *gauge;
    void (*facts)(void *data, const stg_batch_progress *p, progress_state *s); /* or NULL */
    void *data;
} batch_loop_more;

static void batch_loop(const batch_opts *o, stg_batch *b, progress *pg, const batch_loop_more *m)
{
    enum progress_mode mode = PROGRESS_NONE;
    if (!o->quiet && o->progress == BATCH_PROGRESS_AUTO)
        mode = isatty(STDERR_FILENO) ? PROGRESS_BAR : PROGRESS_LINES;
    else if (!o->quiet && o->progress == BATCH_PROGRESS_BAR)
        mode = PROGRESS_BAR;
    else if (!o->quiet && o->progress == BATCH_PROGRESS_LINES)
        mode = PROGRESS_LINES;
    int64_t interval = mode == PROGRESS_BAR
                           ? STG_MS(200)
                           : o->progress_interval_us; /* the table's default unless given */
    int64_t now = stg__clock_mono_us();
    double per_host = o->eng.rate_given && !o->limiter.url ? o->eng.rate : 0;
    progress_init(pg, mode, stderr, per_host, now);
    int64_t next = now + (mode == PROGRESS_BAR ? 0 : interval);
    stg_batch_progress p;
    progress_state ps;
    int64_t next_gauge = now;
    bool draining = false;
    for (;;) {
        if (cli_stop_signal && m->drain_first && !draining) {
            draining = true;
            stg__batch_drain(b);
            if (!o->quiet) {
                progress_clear(pg);
                fprintf(stderr, "stagger batch: draining: finishing the claimed jobs, then "
                                "leaving (a second signal stops at once)\n");
            }
            cli_stop_signal = 0;
        } else if (cli_stop_signal) {
            stg__batch_stop(b);
        }
        if (!stg__batch_step(b, STG_MS(100)))
            break;
        now = stg__clock_mono_us();
        if (m->gauge && now >= next_gauge) {
            stg__batch_progress_get(b, &p);
            jobs_gauge_set(m->gauge, &p.counts, now, false, stg__batch_engine(b));
            next_gauge = now + STG_MS(200);
        }
        if (mode != PROGRESS_NONE && now >= next) {
            stg__batch_progress_get(b, &p);
            to_state(&p.counts, &p, &ps);
            if (m->facts)
                m->facts(m->data, &p, &ps);
            int hosts = m->waits && m->waits->n_hosts > 1 ? m->waits->n_hosts : 1;
            pg->limit_rps = per_host * hosts;
            progress_draw(pg, &ps, now);
            next = now + interval;
        }
    }
}

/* The end of a run, the database's and a queue worker's, once the runner
 * is freed: the last progress line (from the counts read back, sum, and
 * the run's counters p, with the database report's rate; p NULL: none, a
 * queue worker's, whose report follows at once), pg closed, the verdict's
 * line on stderr (`interrupted` when a signal ended it), then the report
 * rep on stdout (NULL: none was read). Returns ex, or CLI_EXIT_FAILED when
 * ex is 0 and printing failed. */
static int batch_run_end(const batch_opts *o, progress *pg, const stg_batch_summary *sum,
                         const stg_batch_progress *p, int sig, const char *interrupted,
                         const stg_batch_report *rep, int ex)
{
    bool trouble = sum->cause != STG_BATCH_DRAINED && sum->cause != STG_BATCH_STOPPED;
    if (p && !trouble && !sig) {
        progress_state ps;
        to_state(&sum->counts, p, &ps);
        progress_final(pg, &ps, rep && rep->db ? stg__store_report_jobs_per_s(&rep->store) : 0);
    }
    progress_end(pg);
    (void)batch_verdict(sum, sig, o->quiet, true, interrupted);
    return rep ? batch_report_out(rep, o->json, ex) : ex;
}

/* The metrics at the end: the file rewritten, or stdout for "-". */
static int metrics_done(const batch_opts *o, const stg_metrics *m)
{
    if (!o->metrics_path)
        return 0;
    int rc = strcmp(o->metrics_path, "-") ? stg_metrics_write(m, o->metrics_path)
                                          : stg_metrics_print(m, stdout);
    if (rc != STG_OK)
        fprintf(stderr, "stagger batch: cannot write metrics to %s\n", o->metrics_path);
    return rc == STG_OK ? 0 : -1;
}

int batch_run_with(const batch_opts *o, stg_batch_config *bc, const batch_kind *k, void *data)
{
    int ex = 0;
    stg_batch *b = NULL;
    FILE *log_file = NULL;
    stg_logger *logger = NULL;
    stg_metrics *metrics = NULL;
    cli_metrics_live *live = NULL;
    stg_event_fanout fan;
    memset(&fan, 0, sizeof fan);
    wait_sum waits;
    memset(&waits, 0, sizeof waits);
    jobs_gauge gauge;
    memset(&gauge, 0, sizeof gauge);
    pthread_mutex_init(&gauge.mu, NULL);
    if (o->log_path) {
        /* "-": standard output, as in every Unix tool */
        log_file = !strcmp(o->log_path, "-")
                       ? stdout
                       : cli_open_private(o->log_path, CLI_OPEN_APPEND, NULL);
        if (!log_file || !(logger = stg_logger_new(log_file))) {
            fprintf(stderr, "stagger batch: --log %s: %s\n", o->log_path, strerror(errno));
            ex = CLI_EXIT_FAILED;
            goto out;
        }
        fan.fn[fan.n] = stg_log_event;
        fan.data[fan.n++] = logger;
    }
    /* Metrics: the file is written once before the run (a path that cannot
     * be written fails here, nothing sent), then by cli_metrics_live. */
    bool metrics_file = o->metrics_path && strcmp(o->metrics_path, "-");
    if (o->metrics_path || o->metrics.listen) {
        if (!(metrics = stg_metrics_new())) {
            fprintf(stderr, "stagger batch: out of memory\n");
            ex = CLI_EXIT_FAILED;
            goto out;
        }
        if (metrics_file && stg_metrics_write(metrics, o->metrics_path) != STG_OK) {
            fprintf(stderr, "stagger batch: cannot write metrics to %s\n", o->metrics_path);
            ex = CLI_EXIT_FAILED;
            goto out;
        }
        fan.fn[fan.n] = stg_metrics_event;
        fan.data[fan.n++] = metrics;
        stg_metrics_add_source(metrics, jobs_print, &gauge); /* outlives metrics */
    }
    fan.fn[fan.n] = on_wait_event;
    fan.data[fan.n++] = &waits;
    bc->engine.on_event = stg_event_fanout_cb;
    bc->engine.event_data = &fan;
    char err[800];
    stg_batch_start st;
    int rc = stg__batch_new(bc, &b, &st, err, sizeof err);
    if (rc != STG_OK) {
        ex = k->start_failed(data, rc, &st, err);
        goto out;
    }
    stg_batch_progress p0;
    stg__batch_progress_get(b, &p0);
    if (!o->quiet)
        k->started(data, &st, &p0.counts);
    jobs_gauge_set(&gauge, &p0.counts, stg__clock_mono_us(), false, stg__batch_engine(b));
    stg_metrics_set_quotas(metrics, stg_engine_quotas(stg__batch_engine(b)));
    if (metrics && (ex = cli_metrics_live_start("batch", &o->metrics, metrics, o->metrics_path,
                                                 &live)) != 0)
        goto out;
    cli_metrics_live_extra(live, jobs_json, &gauge);
    cli_stop_signals_catch(); /* a second signal kills (the next run, or the queue, recovers) */
    progress pg;
    waits.o = o;
    waits.pg = &pg;
    batch_loop(o, b, &pg,
               &(batch_loop_more){.drain_first = o->queue.drain,
                                  .waits = &waits,
                                  .gauge = &gauge,
                                  .facts = k->facts,
                                  .data = data});
    int sig = o->queue.drain ? 0 : cli_stop_signal; /* a drain is no signal's stop */
    cli_stop_signals_release();
    stg_batch_summary sum;
    stg__batch_end(b, &sum); /* a store failure: sum.cause STORE, said by verdict */
    stg_batch_progress p_end;
    stg__batch_progress_get(b, &p_end);
    jobs_gauge_set(&gauge, &sum.counts, stg__clock_mono_us(), true, stg__batch_engine(b));
    cli_metrics_live_stop(live);
    live = NULL;
    k->ended(data, b, &sum, waits.retry_us / 1000, waits.limiter_us / 1000);
    ex = batch_verdict(&sum, sig, o->quiet, false, NULL);
    /* A database's run row is closed by the free (its wall time): the
     * report, and the last progress line with the report's rate, come
     * after it. */
    stg_metrics_set_quotas(metrics, NULL); /* the engine's, freed next */
    stg__batch_free(b, ex);
    b = NULL;
    stg_batch_report rep;
    bool got = false;
    ex = k->report(data, &sum, &rep, &got, ex);
    ex = batch_run_end(o, &pg, &sum, k->final_line ? &p_end : NULL, sig, k->interrupted,
                       got ? &rep : NULL, ex);
    if (got)
        stg__batch_report_free(&rep);
out:
    wait_sum_free(&waits);
    cli_metrics_live_stop(live);
    stg_metrics_set_quotas(metrics, NULL);
    stg__batch_free(b, ex);
    if (metrics && metrics_done(o, metrics) != 0 && ex == CLI_EXIT_OK)
        ex = CLI_EXIT_FAILED;
    stg_metrics_free(metrics);
    pthread_mutex_destroy(&gauge.mu);
    stg_logger_free(logger);
    if (log_file && log_file != stdout)
        fclose(log_file);
    else if (log_file)
        fflush(log_file);
    return ex;
}

/* ---- a database's run: batch_run_with's hooks ---------------------------------- */

typedef struct db_run {
    const batch_opts *o;
    stg_store *store;
    bool imported;
} db_run;

static int db_start_failed(void *data, int rc, const stg_batch_start *st, const char *err)
{
    db_run *d = data;
    if (rc == STG_ESTATE) {
        char *input = NULL;
        (void)stg__store_meta_get(d->store, "input_path", &input);
        fprintf(stderr, "stagger batch: %lld jobs carry secrets that are not kept in the "
                        "database; give their input file again (%s)\n",
                (long long)st->needs_input, input ? input : "?");
        free(input);
        return CLI_EXIT_USAGE;
    }
    fprintf(stderr, "stagger batch: %s\n", err);
    return rc == STG_EDB ? CLI_EXIT_DB : rc == STG_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAILED;
}

static void db_started(void *data, const stg_batch_start *st, const stg_batch_counts *c)
{
    db_run *d = data;
    say_start(d->o, st, d->imported, c);
}

/* The run's waits and admissions per class, into the database for `batch
 * report` (not after a store failure). */
static void db_ended(void *data, stg_batch *b, const stg_batch_summary *sum, int64_t retry_ms,
                     int64_t limiter_ms)
{
    db_run *d = data;
    if (sum->cause == STG_BATCH_STORE)
        return;
    if (stg__store_run_waits_add(d->store, retry_ms, limiter_ms) != STG_OK)
        fprintf(stderr, "stagger batch: %s\n", stg__store_errmsg(d->store));
    if (record_classes(b, d->store) != STG_OK)
        fprintf(stderr, "stagger batch: %s\n", stg__store_errmsg(d->store));
}

static int db_report(void *data, const stg_batch_summary *sum, stg_batch_report *rep, bool *got,
                     int ex)
{
    db_run *d = data;
    *got = false;
    return sum->cause == STG_BATCH_STORE ? ex : read_report(d->o, d->store, rep, got, ex);
}

static const batch_kind DB_RUN = {.final_line = true,
                                  .start_failed = db_start_failed,
                                  .started = db_started,
                                  .ended = db_ended,
                                  .report = db_report};

/* Before SQLite is first used (see the top of the file); SQLITE_MISUSE
 * when it already was, which only keeps the statistics on. */
static void sqlite_process_config(void)
{
    (void)sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

int batch_run(const batch_opts *o)
{
    if (cli_defaults_probe()) { /* help --defaults: what the run would start with */
        const cli_command *c = &cli_batch_command;
        stg_engine_config ec;
        int rc = batch_engine_config(o, &ec);
        if (rc)
            return rc;
        cli_defaults_row(c, "input-format", CLI_VAL_STRING, stg__input_format_name(o->in.format));
        cli_defaults_row(c, "busy-timeout", CLI_VAL_DURATION, (int64_t)o->busy_timeout_us);
        cli_engine_defaults_rows(c, &ec, ec.max_body);
        cli_defaults_row(c, "priority", CLI_VAL_STRING, stg_priority_name(o->cls.priority));
        cli_defaults_row(c, "weight", CLI_VAL_DOUBLE, o->cls.weight);
        cli_defaults_row(c, "progress-interval", CLI_VAL_DURATION,
                         (int64_t)o->progress_interval_us);
        cli_defaults_row(c, "metrics-interval", CLI_VAL_DURATION, (int64_t)o->metrics.interval_us);
        cli_limiter_defaults_rows(c, &o->limiter);
        batch_queue_defaults_rows(c, o);
        cli_policy_defaults_rows(c, &ec.policy);
        cli_limiter_close((cli_limiter *)&o->limiter);
        return CLI_EXIT_OK;
    }
    sqlite_process_config();
    if (o->queue.url && !o->dry_run) /* --dry-run reads the input alone, as below */
        return batch_queue_run(o);     /* the work queue: batch_queue.c */
    stg_input_reader *reader = NULL;
    stg_input_cursor *cursor = NULL;
    stg_input_secrets secrets;
    memset(&secrets, 0, sizeof secrets);
    bool imported = false, created = false, input_refused = false;
    stg_store *store = NULL;
    int ex;
    /* A regular file is read again by the run (the cursor); anything else
     * (stdin, a pipe) can be read once, so the secrets are kept. */
    struct stat in_st;
    bool rereadable = o->input && strcmp(o->input, "-") && stat(o->input, &in_st) == 0 &&
                      S_ISREG(in_st.st_mode);
    if (o->dry_run) {
        if ((ex = open_input(o, &reader)) < 0)
            ex = dry_run(o, reader);
        goto out;
    }
    if ((ex = open_input(o, &reader)) >= 0 ||
        (ex = open_db(o, reader, rereadable ? NULL : &secrets, &store, &imported, &created,
                      &input_refused)) >= 0 ||
        (ex = batch_prepare_out(o->out_dir)) >= 0)
        goto out;
    stg__input_reader_free(reader);
    reader = NULL;
    if (rereadable && (ex = open_cursor(o, &cursor)) >= 0)
        goto out;
    stg_batch_config bc;
    if ((ex = batch_config(o, &bc)) != 0)
        goto out;
    bc.store = store;
    bc.secrets = o->input && !cursor ? &secrets : NULL;
    bc.cursor = cursor;
    bc.retry_deferred = o->retry_deferred;
    bc.retry_review = o->retry_review;
    db_run d = {.o = o, .store = store, .imported = imported};
    ex = batch_run_with(o, &bc, &DB_RUN, &d);

out:
    cli_limiter_close((cli_limiter *)&o->limiter);
    stg__store_close(store);
    if (created && input_refused)
        remove_created(o->db);
    stg__input_reader_free(reader);
    stg__input_cursor_free(cursor);
    stg__input_secrets_free(&secrets);
    return ex;
}

#else
typedef int stg__batch_run_unused;
#endif
