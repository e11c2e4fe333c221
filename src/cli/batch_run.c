/*
 * The `stagger batch` runner: jobs from the store, through the engine, back
 * into the store.
 *
 * Loop: claim as many pending jobs as there are free slots (one transaction
 * marks them inflight), submit them, run one engine pass (at most 100 ms),
 * draw progress, repeat until nothing is pending or in flight. Each
 * completion is written in its own transaction from the engine's done
 * callback, before the slot is reused.
 *
 * Invariants:
 *  - A job is handed to the engine only after its inflight mark is
 *    committed; its slot is freed only after its outcome is committed (or
 *    the store failed, which stops the run). So at any kill -9 the database
 *    knows every job that may have been sent.
 *  - At most `concurrency` jobs are inflight, so a kill re-runs at most
 *    that many (at-least-once). For non-idempotent jobs without an
 *    idempotency key the first ATTEMPT_START event commits sent = 1 before
 *    the request can leave; after a kill those go to review, not pending.
 *  - SIGINT/SIGTERM: no new claims, every request is cancelled, cancelled
 *    jobs go back to pending (review if non-idempotent and sent), the run
 *    row is closed, exit 130/143. A second signal kills at once (the next
 *    run recovers).
 *  - Secrets: -H values and secret URLs/headers of needs_input jobs (taken
 *    from the freshly parsed input, whose fingerprint matched) exist only in
 *    memory and in the request; what is stored is the outcome. The engine's
 *    events and error texts are already redacted.
 */
#ifdef STG_HAVE_STORE

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <stagger/curl.h>

#include "cli/batch_run.h"
#include "cli/cli.h"

#define MAX_REQ_HEADERS 128

typedef struct runner runner;

typedef struct slot {
    bool used;
    bool sent;         /* an attempt started (recorded for non-replay-safe jobs) */
    uint64_t req_id;
    stg_job job;
    runner *r;
} slot;

struct runner {
    const batch_opts *o;
    stg_store *store;
    const stg_job_set *set; /* NULL when resuming from the database alone */
    stg_engine *engine;
    slot *slots;
    int nslots, active;
    int unsafe_active; /* slots holding a job that is not replay-safe */
    int64_t run_id;
    int64_t counts[STG_JOB_NSTATES];
    int64_t total, finished;
    bool drained;  /* no pending job left to claim */
    bool stopping; /* signal or fatal error: no new claims */
    bool fatal;
    char fatal_msg[800];
    int fatal_exit; /* exit status of a fatal stop; 0: BATCH_EXIT_DB */
    int64_t start_us;
    /* progress */
    enum batch_progress progress;
    int64_t next_draw_us, interval_us;
    uint64_t rate_attempts;
    int64_t rate_t_us;
    double rps;
    bool bar_drawn;
    /* event sinks */
    stg_logger *logger;
    FILE *log_file;
};

static volatile sig_atomic_t g_signal;

static void on_signal(int sig)
{
    g_signal = sig;
}

static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void set_fatal(runner *r, const char *fmt, const char *arg)
{
    if (r->fatal)
        return;
    r->fatal = true;
    r->stopping = true;
    snprintf(r->fatal_msg, sizeof r->fatal_msg, fmt, arg);
}

/* ---- outcomes ---------------------------------------------------------------- */

/* The state a finished request leaves its job in. */
static stg_job_state state_for(const slot *sl, const stg_result *res)
{
    if (res->action == STG_ACTION_SUCCESS)
        return STG_JOB_DONE;
    switch (res->reason) {
    case STG_REASON_CANCELLED:
        return !sl->job.replay_safe && sl->sent ? STG_JOB_REVIEW : STG_JOB_PENDING;
    case STG_REASON_LIMITER_UNAVAILABLE:
        /* Not sent: the run stops (see on_done) and the job waits for the
         * next one. */
        return STG_JOB_PENDING;
    case STG_REASON_STATUS_NOT_RETRYABLE:
    case STG_REASON_ERROR_NOT_RETRYABLE:
        return STG_JOB_FAILED;
    case STG_REASON_METHOD_NOT_IDEMPOTENT:
        /* A 429 says the request was refused, not processed: safe to defer.
         * Anything else (503, a timeout, a reset) may have had an effect. */
        return res->status == 429 ? STG_JOB_DEFERRED : STG_JOB_REVIEW;
    default:
        /* attempts exhausted, deadline, server wait too long, budget
         * exhausted, breaker open: kept for a later run. */
        return STG_JOB_DEFERRED;
    }
}

static void describe(const stg_result *res, char *buf, size_t size)
{
    const char *why = stg_reason_message(res->reason);
    if (res->status > 0)
        snprintf(buf, size, "HTTP %d: %s", res->status, why);
    else if (res->error != STG_NET_NONE && res->error_text[0])
        snprintf(buf, size, "%s: %s (%s)", stg_net_error_name(res->error), why,
                 res->error_text);
    else if (res->error != STG_NET_NONE)
        snprintf(buf, size, "%s: %s", stg_net_error_name(res->error), why);
    else
        snprintf(buf, size, "%s", why);
}

/* File name of a job's body under --out: the id when it is a plain name,
 * else "_job-N" (ids are unique, and plain names never start with '_'). */
static void body_name(const stg_job *j, char *buf, size_t size)
{
    size_t n = strlen(j->key);
    bool plain = n > 0 && n <= 128;
    for (size_t i = 0; plain && i < n; i++) {
        char c = j->key[i];
        plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                (i > 0 && (c == '.' || c == '_' || c == '-'));
    }
    if (plain)
        snprintf(buf, size, "%s", j->key);
    else
        snprintf(buf, size, "_job-%lld", (long long)j->id);
}

/* Write body to DIR/name atomically (temp file + rename). */
static int write_body(const char *dir, const char *name, const char *body, size_t len)
{
    char tmp[4096], path[4096];
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, body + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = errno;
            close(fd);
            unlink(tmp);
            errno = e ? e : EIO;
            return -1;
        }
        off += (size_t)w;
    }
    if (close(fd) != 0 || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        errno = e;
        return -1;
    }
    return 0;
}

static void on_done(stg_engine *e, uint64_t id, const stg_result *res, void *data)
{
    (void)e;
    (void)id;
    slot *sl = data;
    runner *r = sl->r;
    stg_job_state st = state_for(sl, res);
    if (res->reason == STG_REASON_LIMITER_UNAVAILABLE && !r->fatal) {
        r->fatal_exit = BATCH_EXIT_LIMITER;
        set_fatal(r, "the shared limiter is unavailable (%s); jobs not sent stay pending: run "
                     "again when it is back, or allow --limiter-fallback local:SHARE",
                  res->error_text[0] ? res->error_text : "no answer");
    }
    char error[512] = "", fname[160] = "";
    if (st != STG_JOB_DONE)
        describe(res, error, sizeof error);
    stg_job_outcome out = {
        .state = st,
        .status = res->status,
        .attempts = res->attempts,
        .reason = st == STG_JOB_DONE ? NULL : stg_reason_name(res->reason),
        .error = st == STG_JOB_DONE ? NULL : error,
    };
    if (res->status > 0 && st != STG_JOB_PENDING) {
        if (r->o->out_dir) {
            body_name(&sl->job, fname, sizeof fname);
            if (write_body(r->o->out_dir, fname, res->body ? res->body : "", res->body_len) != 0) {
                char msg[256];
                snprintf(msg, sizeof msg, "%s/%s: %s", r->o->out_dir, fname, strerror(errno));
                set_fatal(r, "cannot write a response body: %s (the job stays in flight and "
                             "runs again next time)", msg);
                goto release;
            }
            out.response_file = fname;
        } else {
            out.body = res->body ? res->body : "";
            out.body_len = res->body_len;
        }
    }
    if (!r->fatal) {
        int rc = stg_store_finish(r->store, sl->job.id, &out, stg__store_now_ms());
        if (rc != STG_OK) {
            set_fatal(r, "%s", stg_store_errmsg(r->store));
        } else {
            r->counts[STG_JOB_INFLIGHT]--;
            r->counts[st]++;
            if (st != STG_JOB_PENDING)
                r->finished++;
        }
    }
release:
    if (!sl->job.replay_safe)
        r->unsafe_active--;
    stg_job_clear(&sl->job);
    sl->used = false;
    sl->sent = false;
    r->active--;
}

static void on_event(const stg_event *ev, void *data)
{
    runner *r = data;
    if (r->logger)
        stg_log_event(ev, r->logger);
    if (ev->type != STG_EVENT_ATTEMPT_START || r->unsafe_active == 0)
        return;
    for (int i = 0; i < r->nslots; i++) {
        slot *sl = &r->slots[i];
        if (!sl->used || sl->req_id != ev->request_id)
            continue;
        if (!sl->sent && !sl->job.replay_safe && !r->fatal) {
            /* Committed before the engine goes on to send it. */
            int rc = stg_store_mark_sent(r->store, sl->job.id, 0);
            if (rc != STG_OK)
                set_fatal(r, "%s", stg_store_errmsg(r->store));
        }
        sl->sent = true;
        break;
    }
}

/* ---- submitting ---------------------------------------------------------------- */

static bool header_named(const char *h, const char *name_of)
{
    const char *c1 = strchr(h, ':'), *c2 = strchr(name_of, ':');
    size_t n1 = c1 ? (size_t)(c1 - h) : strlen(h), n2 = c2 ? (size_t)(c2 - name_of) : strlen(name_of);
    return n1 == n2 && !strncasecmp(h, name_of, n1);
}

/* Submit the claimed job in sl. On an engine refusal the job fails at once. */
static void submit(runner *r, slot *sl)
{
    const stg_job *j = &sl->job;
    const stg_job_spec *spec = NULL;
    if (j->needs_input) {
        if (r->set && j->id >= 1 && (size_t)j->id <= r->set->n &&
            !strcmp(r->set->jobs[j->id - 1].key, j->key))
            spec = &r->set->jobs[j->id - 1];
        if (!spec) {
            /* Checked before the run; a guard against a database edited by hand. */
            stg_job_outcome back = {.state = STG_JOB_PENDING};
            stg_store_finish(r->store, j->id, &back, stg__store_now_ms());
            r->counts[STG_JOB_INFLIGHT]--;
            r->counts[STG_JOB_PENDING]++;
            set_fatal(r, "job %s needs its input file (secrets are not stored): give the same "
                         "input again", j->key);
            stg_job_clear(&sl->job);
            return;
        }
    }
    const char *headers[MAX_REQ_HEADERS + 1];
    size_t nh = 0;
    const char *const *own = spec ? (const char *const *)spec->headers
                                  : (const char *const *)j->headers;
    for (size_t i = 0; own && own[i] && nh < MAX_REQ_HEADERS; i++) {
        bool overridden = false;
        for (size_t k = 0; k < r->o->n_headers && !overridden; k++)
            overridden = header_named(own[i], r->o->headers[k]);
        if (!overridden)
            headers[nh++] = own[i];
    }
    for (size_t k = 0; k < r->o->n_headers && nh < MAX_REQ_HEADERS; k++)
        headers[nh++] = r->o->headers[k];
    headers[nh] = NULL;
    stg_request req = {
        .url = spec ? spec->url : j->url,
        .method = j->method,
        .headers = headers,
        .body = spec ? spec->body : j->body,
        .body_len = spec ? spec->body_len : j->body_len,
        .idempotency_key = j->idempotency_key,
    };
    sl->used = true;
    sl->sent = false;
    sl->r = r;
    r->active++;
    int rc = stg_engine_submit(r->engine, &req, on_done, sl, &sl->req_id);
    if (rc == STG_OK && !j->replay_safe)
        r->unsafe_active++;
    if (rc != STG_OK) {
        /* Never sent: a final answer about this request, not about the server. */
        char msg[160];
        snprintf(msg, sizeof msg, "the request was refused before sending: %s",
                 stg_strerror(rc));
        stg_job_outcome out = {.state = rc == STG_ENOMEM ? STG_JOB_PENDING : STG_JOB_FAILED,
                               .error = msg,
                               .reason = "invalid_request"};
        int frc = stg_store_finish(r->store, j->id, &out, stg__store_now_ms());
        if (frc != STG_OK)
            set_fatal(r, "%s", stg_store_errmsg(r->store));
        else {
            r->counts[STG_JOB_INFLIGHT]--;
            r->counts[out.state]++;
            if (out.state != STG_JOB_PENDING)
                r->finished++;
        }
        if (rc == STG_ENOMEM)
            set_fatal(r, "%s", "out of memory");
        stg_job_clear(&sl->job);
        sl->used = false;
        r->active--;
    }
}

static void refill(runner *r)
{
    if (r->stopping || r->drained)
        return;
    int free_n = r->nslots - r->active;
    if (free_n <= 0)
        return;
    stg_job *jobs = calloc((size_t)free_n, sizeof *jobs);
    if (!jobs) {
        set_fatal(r, "%s", "out of memory");
        return;
    }
    int got = 0;
    int rc = stg_store_claim(r->store, free_n, r->run_id, stg__store_now_ms(), jobs, &got);
    if (rc != STG_OK) {
        set_fatal(r, "%s", stg_store_errmsg(r->store));
        free(jobs);
        return;
    }
    if (got < free_n)
        r->drained = true; /* nothing else becomes pending during a run */
    r->counts[STG_JOB_PENDING] -= got;
    r->counts[STG_JOB_INFLIGHT] += got;
    int k = 0;
    for (int i = 0; i < r->nslots && k < got; i++) {
        if (r->slots[i].used)
            continue;
        r->slots[i].job = jobs[k++];
        submit(r, &r->slots[i]);
    }
    free(jobs);
}

/* ---- progress ---------------------------------------------------------------- */

static void fmt_eta(double s, char *buf, size_t size)
{
    if (!(s >= 0) || s > 360000)
        snprintf(buf, size, "?");
    else if (s < 60)
        snprintf(buf, size, "%.0f s", s);
    else if (s < 3600)
        snprintf(buf, size, "%d m %02d s", (int)s / 60, (int)s % 60);
    else
        snprintf(buf, size, "%d h %02d m", (int)s / 3600, ((int)s / 60) % 60);
}

static void draw(runner *r, int64_t now, bool last)
{
    stg_engine_stats es;
    stg_engine_stats_get(r->engine, &es);
    if (now - r->rate_t_us >= STG_SEC(1) || last ||
        (r->rps == 0 && now - r->rate_t_us >= STG_MS(200))) {
        double dt = (double)(now - r->rate_t_us) / 1e6;
        if (dt > 0)
            r->rps = (double)(es.attempts - r->rate_attempts) / dt;
        r->rate_attempts = es.attempts;
        r->rate_t_us = now;
    }
    int64_t *c = r->counts;
    int64_t ended = c[STG_JOB_DONE] + c[STG_JOB_FAILED] + c[STG_JOB_DEFERRED] + c[STG_JOB_REVIEW];
    int64_t left = c[STG_JOB_PENDING] + c[STG_JOB_INFLIGHT];
    double elapsed = (double)(now - r->start_us) / 1e6;
    double jps = elapsed > 0 ? (double)r->finished / elapsed : 0;
    char eta[32];
    fmt_eta(jps > 0 ? (double)left / jps : -1, eta, sizeof eta);
    double p429 = es.attempts ? 100.0 * (double)es.status_429 / (double)es.attempts : 0;
    if (r->progress == BATCH_PROGRESS_BAR) {
        char bar[25];
        int fill = r->total ? (int)(24 * ended / r->total) : 24;
        for (int i = 0; i < 24; i++)
            bar[i] = i < fill ? '#' : '.';
        bar[24] = '\0';
        fprintf(stderr,
                "\r[%s] %lld/%lld  done %lld  failed %lld  deferred %lld%s  %.1f req/s  "
                "429 %.1f%%  ETA %s\033[K",
                bar, (long long)ended, (long long)r->total, (long long)c[STG_JOB_DONE],
                (long long)c[STG_JOB_FAILED], (long long)c[STG_JOB_DEFERRED],
                c[STG_JOB_REVIEW] ? "  review" : "", r->rps, p429, last ? "0 s" : eta);
        r->bar_drawn = true;
        if (last)
            fputc('\n', stderr);
    } else {
        fprintf(stderr,
                "batch: %lld/%lld ended (done %lld, failed %lld, deferred %lld, review %lld), "
                "%lld in flight, %.1f req/s, 429 %.1f%%, ETA %s\n",
                (long long)ended, (long long)r->total, (long long)c[STG_JOB_DONE],
                (long long)c[STG_JOB_FAILED], (long long)c[STG_JOB_DEFERRED],
                (long long)c[STG_JOB_REVIEW], (long long)c[STG_JOB_INFLIGHT], r->rps, p429,
                last ? "0 s" : eta);
    }
    fflush(stderr);
}

/* ---- the run ------------------------------------------------------------------ */

static void print_bad_lines(const stg_job_set *set, const char *input)
{
    const char *name = strcmp(input, "-") ? input : "stdin";
    size_t show = set->n_bad < 20 ? set->n_bad : 20;
    for (size_t i = 0; i < show; i++)
        fprintf(stderr, "stagger batch: %s:%ld: %s\n", name, set->bad[i].line,
                set->bad[i].message);
    if (set->n_bad > show)
        fprintf(stderr, "stagger batch: ... and %zu more bad lines (stagger batch report "
                        "--bad-lines lists them all)\n",
                set->n_bad - show);
}

static int exit_for_counts(const int64_t *c)
{
    if (c[STG_JOB_PENDING] || c[STG_JOB_INFLIGHT] || c[STG_JOB_DEFERRED] || c[STG_JOB_REVIEW])
        return BATCH_EXIT_LEFT;
    if (c[STG_JOB_FAILED])
        return BATCH_EXIT_FAILED;
    return BATCH_EXIT_DONE;
}

static void setup_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND; /* a second signal kills: the next run recovers */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

static void restore_signals(void)
{
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
}

static int engine_start(runner *r, const batch_opts *o)
{
    stg_engine_config ec;
    memset(&ec, 0, sizeof ec);
    ec.policy = o->policy;
    ec.concurrency = o->concurrency;
    if (o->rate_given && o->rate > 0) {
        ec.limiter = STG_LIMITER_FIXED;
        ec.rate = o->rate;
        ec.burst = o->burst;
    } else if (o->rate_given) {
        ec.limiter = STG_LIMITER_NONE;
    } else {
        ec.limiter = STG_LIMITER_ADAPTIVE;
        ec.adaptive.max_rate = o->max_rate;
    }
    ec.breaker = o->breaker_failures > 0;
    ec.breaker_config.consecutive_failures = o->breaker_failures;
    ec.breaker_config.open_us = o->breaker_open_us;
    ec.defer_when_open = o->defer_on_breaker;
    ec.budget_wait = !o->defer_on_breaker;
    ec.budget = o->budget;
    ec.budget_config.max_tokens = o->budget_tokens;
    ec.budget_config.token_ratio = o->budget_ratio;
    ec.on_event = on_event;
    ec.event_data = r;
    ec.max_body = o->max_body;
    /* The shared limit replaces the local one; opts are const, the limiter
     * handle lives as long as the run (closed by batch_run). */
    cli_limiter *lim = (cli_limiter *)&o->limiter;
    if (lim->url)
        ec.limiter = STG_LIMITER_NONE;
    lim->max_rate = o->max_rate;
    int lrc = cli_limiter_open(lim, o->rate_given ? o->rate : 0, o->burst, o->breaker_failures,
                               o->breaker_open_us, &ec.shared);
    if (lrc != 0)
        return lrc;
    int err = 0;
    r->engine = stg_engine_new(&ec, &err);
    if (!r->engine) {
        fprintf(stderr, "stagger batch: cannot start the HTTP engine: %s\n", stg_strerror(err));
        return err == STG_EINVAL ? BATCH_EXIT_USAGE : 1;
    }
    return 0;
}

/* Everything up to the loop: input, database, recovery. Returns -1 to go
 * on, or an exit status. */
static int prepare(runner *r, const batch_opts *o, stg_job_set *set, bool *have_set)
{
    char err[800];
    *have_set = false;
    if (o->input) {
        int rc = stg_input_read_path(o->input, &o->in, set, err, sizeof err);
        if (rc != STG_OK) {
            fprintf(stderr, "stagger batch: %s\n", err);
            return rc == STG_EINVAL ? BATCH_EXIT_USAGE : BATCH_EXIT_INPUT;
        }
        *have_set = true;
        r->set = set;
        if (set->n_bad)
            print_bad_lines(set, o->input);
        if (set->n_bad && o->strict) {
            fprintf(stderr, "stagger batch: refusing to run: %zu bad input line%s (--strict); "
                            "nothing was written\n",
                    set->n_bad, set->n_bad == 1 ? "" : "s");
            return BATCH_EXIT_INPUT;
        }
        if (set->n == 0) {
            fprintf(stderr, "stagger batch: %s: no jobs in the input\n",
                    strcmp(o->input, "-") ? o->input : "stdin");
            return BATCH_EXIT_INPUT;
        }
    }
    stg_store_options so = {.create = o->input != NULL,
                            .exclusive = true,
                            .busy_timeout_us = o->busy_timeout_us};
    int rc = stg_store_open(o->db, &so, &r->store, err, sizeof err);
    if (rc != STG_OK) {
        fprintf(stderr, "stagger batch: %s\n", err);
        if (rc == STG_ENOTFOUND && !o->input)
            return BATCH_EXIT_USAGE;
        return BATCH_EXIT_DB;
    }
    int64_t now = stg__store_now_ms();
    bool imported = false;
    if (*have_set) {
        char *abs = NULL;
        if (strcmp(o->input, "-"))
            abs = realpath(o->input, NULL);
        rc = stg_store_import(r->store, set, abs ? abs : o->input, now, &imported);
        free(abs);
        if (rc != STG_OK) {
            fprintf(stderr, "stagger batch: %s\n", stg_store_errmsg(r->store));
            return BATCH_EXIT_DB;
        }
    } else {
        bool has = false;
        if ((rc = stg_store_has_jobs(r->store, &has)) != STG_OK || !has) {
            fprintf(stderr, "stagger batch: %s\n",
                    rc ? stg_store_errmsg(r->store) : "the database holds no jobs: give an input");
            return rc ? BATCH_EXIT_DB : BATCH_EXIT_USAGE;
        }
        unsigned mask = 1u << STG_JOB_PENDING | 1u << STG_JOB_INFLIGHT;
        if (o->retry_deferred)
            mask |= 1u << STG_JOB_DEFERRED;
        if (o->retry_review)
            mask |= 1u << STG_JOB_REVIEW;
        int64_t need = 0;
        if ((rc = stg_store_count_needs_input(r->store, mask, &need)) != STG_OK) {
            fprintf(stderr, "stagger batch: %s\n", stg_store_errmsg(r->store));
            return BATCH_EXIT_DB;
        }
        if (need) {
            char *input = NULL;
            stg_store_meta_get(r->store, "input_path", &input);
            fprintf(stderr, "stagger batch: %lld jobs carry secrets that are not kept in the "
                            "database; give their input file again (%s)\n",
                    (long long)need, input ? input : "?");
            free(input);
            return BATCH_EXIT_USAGE;
        }
    }
    int to_pending = 0, to_review = 0, requeued = 0, rq = 0;
    if ((rc = stg_store_recover(r->store, now, &to_pending, &to_review)) == STG_OK &&
        o->retry_deferred)
        rc = stg_store_requeue(r->store, STG_JOB_DEFERRED, now, &requeued);
    if (rc == STG_OK && o->retry_review)
        rc = stg_store_requeue(r->store, STG_JOB_REVIEW, now, &rq);
    if (rc == STG_OK)
        rc = stg_store_counts(r->store, r->counts);
    if (rc != STG_OK) {
        fprintf(stderr, "stagger batch: %s\n", stg_store_errmsg(r->store));
        return BATCH_EXIT_DB;
    }
    for (int i = 0; i < STG_JOB_NSTATES; i++)
        r->total += r->counts[i];
    if (!o->quiet) {
        if (imported)
            fprintf(stderr, "stagger batch: %lld jobs imported into %s\n", (long long)r->total,
                    o->db);
        else
            fprintf(stderr,
                    "stagger batch: resuming %s: %lld done, %lld failed, %lld deferred, "
                    "%lld review, %lld to run\n",
                    o->db, (long long)r->counts[STG_JOB_DONE],
                    (long long)r->counts[STG_JOB_FAILED], (long long)r->counts[STG_JOB_DEFERRED],
                    (long long)r->counts[STG_JOB_REVIEW], (long long)r->counts[STG_JOB_PENDING]);
        if (to_pending)
            fprintf(stderr, "stagger batch: %d jobs were in flight when the last run stopped; "
                            "they run again (at-least-once)\n",
                    to_pending);
        if (to_review)
            fprintf(stderr, "stagger batch: %d non-idempotent jobs were in flight and may have "
                            "been sent: marked review (resend with --retry-review)\n",
                    to_review);
        if (requeued)
            fprintf(stderr, "stagger batch: %d deferred jobs run again\n", requeued);
        if (rq)
            fprintf(stderr, "stagger batch: %d jobs in review are resent\n", rq);
    }
    if (o->out_dir && mkdir(o->out_dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "stagger batch: --out %s: %s\n", o->out_dir, strerror(errno));
        return BATCH_EXIT_DB;
    }
    struct stat st;
    if (o->out_dir && (stat(o->out_dir, &st) != 0 || !S_ISDIR(st.st_mode))) {
        fprintf(stderr, "stagger batch: --out %s: not a directory\n", o->out_dir);
        return BATCH_EXIT_DB;
    }
    if (o->log_path) {
        if (!(r->log_file = fopen(o->log_path, "a")) || !(r->logger = stg_logger_new(r->log_file))) {
            fprintf(stderr, "stagger batch: --log %s: %s\n", o->log_path, strerror(errno));
            return 1;
        }
    }
    return -1;
}

static void save_run(runner *r, int exit_code)
{
    stg_engine_stats es;
    memset(&es, 0, sizeof es);
    if (r->engine)
        stg_engine_stats_get(r->engine, &es);
    stg_run_stats rs = {
        .wall_ms = (mono_us() - r->start_us) / 1000,
        .calls = (int64_t)es.attempts,
        .retries = (int64_t)es.retries,
        .status_429 = (int64_t)es.status_429,
        .status_503 = (int64_t)es.status_503,
        .finished = r->finished,
        .exit_code = exit_code,
    };
    /* Periodic saves fail quietly (the next finish reports a real problem);
     * after a fatal error the cause has been said already. */
    if (stg_store_run_update(r->store, r->run_id, &rs) != STG_OK && exit_code >= 0 &&
        !r->fatal)
        fprintf(stderr, "stagger batch: %s\n", stg_store_errmsg(r->store));
}

int batch_run(const batch_opts *o)
{
    runner r;
    memset(&r, 0, sizeof r);
    r.o = o;
    stg_job_set set;
    memset(&set, 0, sizeof set);
    bool have_set = false;
    int ex = prepare(&r, o, &set, &have_set);
    if (ex >= 0)
        goto out;

    r.nslots = o->concurrency;
    if (!(r.slots = calloc((size_t)r.nslots, sizeof *r.slots))) {
        fprintf(stderr, "stagger batch: out of memory\n");
        ex = 1;
        goto out;
    }
    for (int i = 0; i < r.nslots; i++)
        r.slots[i].r = &r;
    if ((ex = engine_start(&r, o)) != 0)
        goto out;
    if (stg_store_run_begin(r.store, stg__store_now_ms(), &r.run_id) != STG_OK) {
        fprintf(stderr, "stagger batch: %s\n", stg_store_errmsg(r.store));
        ex = BATCH_EXIT_DB;
        goto out;
    }
    r.progress = o->quiet ? BATCH_PROGRESS_NONE : o->progress;
    if (r.progress == BATCH_PROGRESS_AUTO)
        r.progress = isatty(STDERR_FILENO) ? BATCH_PROGRESS_BAR : BATCH_PROGRESS_LINES;
    r.interval_us = r.progress == BATCH_PROGRESS_BAR
                        ? STG_MS(200)
                        : (o->progress_interval_us ? o->progress_interval_us : STG_SEC(5));
    r.start_us = r.rate_t_us = mono_us();
    r.next_draw_us = r.start_us + (r.progress == BATCH_PROGRESS_BAR ? 0 : r.interval_us);
    int64_t next_save = r.start_us + STG_SEC(1);

    g_signal = 0;
    setup_signals();
    bool cancelled = false;
    for (;;) {
        if (g_signal && !r.stopping)
            r.stopping = true;
        if (r.stopping && !cancelled && r.active > 0) {
            cancelled = true;
            stg_engine_cancel_all(r.engine);
        }
        refill(&r);
        if (r.active == 0 && (r.drained || r.stopping))
            break;
        stg_engine_run(r.engine, STG_MS(100));
        int64_t now = mono_us();
        if (r.progress != BATCH_PROGRESS_NONE && now >= r.next_draw_us) {
            draw(&r, now, false);
            r.next_draw_us = now + r.interval_us;
        }
        if (now >= next_save && !r.fatal) {
            save_run(&r, -1);
            next_save = now + STG_SEC(1);
        }
    }
    int sig = g_signal;
    restore_signals();
    if (r.progress != BATCH_PROGRESS_NONE && !r.fatal)
        draw(&r, mono_us(), !sig);
    else if (r.bar_drawn)
        fputc('\n', stderr);

    if (r.fatal) {
        fprintf(stderr, "stagger batch: stopped: %s\n", r.fatal_msg);
        ex = r.fatal_exit ? r.fatal_exit : BATCH_EXIT_DB;
        save_run(&r, ex);
        goto out;
    }
    int64_t counts[STG_JOB_NSTATES];
    if (stg_store_counts(r.store, counts) != STG_OK) {
        fprintf(stderr, "stagger batch: %s\n", stg_store_errmsg(r.store));
        ex = BATCH_EXIT_DB;
        goto out;
    }
    ex = sig == SIGINT ? BATCH_EXIT_SIGINT : sig ? BATCH_EXIT_SIGTERM : exit_for_counts(counts);
    save_run(&r, ex);
    if (sig && !o->quiet)
        fprintf(stderr, "stagger batch: interrupted; %lld jobs left, run the same command again "
                        "to resume\n",
                (long long)(counts[STG_JOB_PENDING] + counts[STG_JOB_INFLIGHT]));
    if (!o->quiet || o->json) {
        stg_store_report rep;
        if (stg_store_report_get(r.store, &rep) == STG_OK) {
            if (o->json)
                stg_store_report_json(&rep, o->db, stdout);
            else
                stg_store_report_print(&rep, o->db, stdout);
            stg_store_report_free(&rep);
        }
        fflush(stdout);
    }

out:
    if (r.engine) {
        stg_engine_free(r.engine); /* a fatal stop: cancels the rest (store writes skipped) */
        r.engine = NULL;
    }
    if (r.fatal && ex != BATCH_EXIT_DB && ex != r.fatal_exit) {
        fprintf(stderr, "stagger batch: stopped: %s\n", r.fatal_msg);
        ex = r.fatal_exit ? r.fatal_exit : BATCH_EXIT_DB;
    }
    cli_limiter_close((cli_limiter *)&o->limiter);
    stg_logger_free(r.logger);
    if (r.log_file)
        fclose(r.log_file);
    for (int i = 0; r.slots && i < r.nslots; i++)
        stg_job_clear(&r.slots[i].job);
    free(r.slots);
    stg_store_close(r.store);
    if (have_set)
        stg_job_set_free(&set);
    return ex;
}

#else
typedef int stg__batch_run_unused;
#endif
